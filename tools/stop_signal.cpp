// SIGINT / SIGTERM for `ingot train` (tools/stop_signal.h).
#include "stop_signal.h"

#include <fmt/format.h>
#include <signal.h>

#include <csignal>

#include "ingot/runtime/error.h"

namespace ingot::cli {

namespace {

/// The signal received (0: none). The one static: a signal handler can only reach such an
/// object (async-signal-safe: a lock-free sig_atomic_t store).
volatile std::sig_atomic_t g_received = 0;
struct sigaction g_previous_int{}, g_previous_term{};

extern "C" void record_signal(int signal) {
  if (g_received != 0) {  // the second signal: the default action (the process ends)
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  g_received = signal;
}

const char* signal_name(int signal) { return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal"; }

/// Sets stop_training at each batch end once a signal arrived; remembers where fit was.
class StopCallback final : public callbacks::Callback {
 public:
  void on_epoch_begin(int64_t epoch, const Logs&) override {
    epoch_ = epoch;
    steps_ = 0;
  }
  void on_train_batch_end(int64_t, const Logs&) override {
    ++steps_;
    if (g_received != 0) control().stop_training = true;
  }
  int64_t epoch_ = -1, steps_ = 0;
};

}  // namespace

StopOnSignal::StopOnSignal() : callback_(std::make_shared<StopCallback>()) {
  g_received = 0;
  struct sigaction action{};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in progress go on; the loop checks the flag
  ::sigaction(SIGINT, &action, &g_previous_int);
  ::sigaction(SIGTERM, &action, &g_previous_term);
}

StopOnSignal::~StopOnSignal() {
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
}

int StopOnSignal::received() const { return g_received; }

void StopOnSignal::throw_if_received(const std::string& what) const {
  const int signal = g_received;
  if (signal == 0) return;
  const auto& cb = static_cast<const StopCallback&>(*callback_);
  const std::string where = cb.epoch_ < 0 ? "before training"
                                          : fmt::format("during epoch {} after {} step{}", cb.epoch_ + 1, cb.steps_,
                                                        cb.steps_ == 1 ? "" : "s");
  throw Error(ErrorCode::kCancelled,
              fmt::format("interrupted by {} (signal {}) {}; {}", signal_name(signal), signal, where, what),
              "run it again to train from the start (nothing was saved)");
}

int exit_status_for(const Error& e) {
  // g_received keeps the last signal after the StopOnSignal that recorded it is gone.
  return e.code() == ErrorCode::kCancelled && g_received != 0 ? 128 + g_received : 1;
}

}  // namespace ingot::cli
