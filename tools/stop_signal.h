// `ingot train`'s handling of SIGINT and SIGTERM: the run stops at the next step boundary, writes
// nothing (the outputs are committed only at the end; their temporary files are removed) and the
// process exits 128 + the signal number (130, 143), as a shell reports a process killed by it.
#pragma once

#include <memory>
#include <string>

#include "ingot/trainer/callbacks.h"

namespace ingot::cli {

/// While alive, SIGINT and SIGTERM do not end the process at once: the first one is recorded
/// (a second one ends it with the default action, so a stuck run can still be stopped), and
/// callback() sets control().stop_training at the next batch end, so fit returns after the step
/// that was running. The previous dispositions come back on destruction. One at a time per
/// process (signal dispositions are per process; the recorded signal is the one piece of static
/// state, as a signal handler can reach nothing else).
class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  /// The signal received (SIGINT or SIGTERM) since construction, 0 for none.
  int received() const;
  /// Stops fit at the batch end after a signal (and, when fit returns, records the epoch and the
  /// steps done for the message of throw_if_received).
  std::shared_ptr<callbacks::Callback> callback() const { return callback_; }
  /// Throws ingot::Error(kCancelled) when a signal was received: "interrupted by SIGTERM during
  /// epoch E after S steps; `what`", the message cli.cpp prints before exiting 128 + signal.
  void throw_if_received(const std::string& what) const;

 private:
  std::shared_ptr<callbacks::Callback> callback_;
};

/// The exit status for `e`: for the ingot::Error(kCancelled) StopOnSignal throws, 128 + the
/// signal it recorded (130 for SIGINT, 143 for SIGTERM); 1 for any other error.
int exit_status_for(const Error& e);

}  // namespace ingot::cli
