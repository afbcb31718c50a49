// Internals of GlooCommunicator shared by the files of runtime/gloo: its state, the guarded
// call into Gloo, the agreement of ranks on each call (call_record.cpp) and group creation
// helpers (gloo_group.cpp).
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "collective_common.h"
#include "ingot/runtime/error.h"
#include "ingot/runtime/gloo.h"

namespace ingot {

struct GlooCommunicator::State {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;
  GlooOptions options;
  std::chrono::milliseconds timeout{0};
  /// Tag of the next Gloo operation; every rank issues operations in the same order, so tags
  /// agree across ranks.
  uint32_t next_tag = 0;
  /// Non-empty once a Gloo operation failed: why the communicator can no longer be used.
  std::string broken;

  int rank() const { return context->rank; }
  int size() const { return context->size; }
  /// Throws kFailedPrecondition naming `what` if the communicator is broken.
  void check_usable(const char* what) const;
  /// Runs `f` (Gloo calls); a Gloo exception marks the communicator broken and becomes an
  /// ingot::Error(kFailedPrecondition) naming `what`, the rank and the timeout.
  template <class F>
  void guarded(const char* what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      throw fail(what, e.what());
    }
  }

 private:
  Error fail(const char* what, const std::string& cause);
};

/// Makes the ranks agree on the call: with verify_calls, exchanges `record` (status set from
/// `local_error`) with every rank; then throws `local_error` if set, kFailedPrecondition if
/// another rank rejected its arguments, or the same mismatch error on every rank if the calls
/// differ (kFailedPrecondition: different collectives or ops; kDTypeMismatch; kShapeMismatch
/// naming both shapes; kInvalidArgument: different roots or chunk sizes). Without
/// verify_calls, just throws `local_error` if set.
void agree_on_call(GlooCommunicator::State& state, const char* what, CallRecord record,
                   const std::optional<Error>& local_error);

}  // namespace ingot
