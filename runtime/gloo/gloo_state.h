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

/// Which collective a call is (values are exchanged between ranks; keep them stable).
enum class CallKind : int64_t {
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBroadcast = 4,
  kBarrier = 5,
};

/// A fixed-size description of one rank's call, exchanged before the collective when
/// GlooOptions::verify_calls is set. Fields (int64 each): kind, reduce op (-1: none), dtype
/// (-1: none), root (-1: none), rank of the array (-1: none or invalid), element count, extra
/// (reduce_scatter's chunk bytes, else 0), status (0: arguments valid, 1: rejected), then the
/// first 8 dimensions; for arrays of more than 8 dimensions the last slot also mixes in (by an
/// FNV-1a style hash) every dimension past the 8th, so any shape difference shows.
struct CallRecord {
  static constexpr int kFields = 16;
  std::array<int64_t, kFields> f{};
};

/// Describes a call. `array` may be null (barrier) or invalid.
CallRecord describe_call(CallKind kind, std::optional<ReduceOp> op, const Array* array, int root,
                         int64_t extra);

/// Runs `checks`; returns the ingot::Error it threw, if any.
template <class F>
std::optional<Error> capture_error(F&& checks) {
  try {
    checks();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

/// Makes the ranks agree on the call: with verify_calls, exchanges `record` (status set from
/// `local_error`) with every rank; then throws `local_error` if set, kFailedPrecondition if
/// another rank rejected its arguments, or the same mismatch error on every rank if the calls
/// differ (kFailedPrecondition: different collectives or ops; kDTypeMismatch; kShapeMismatch
/// naming both shapes; kInvalidArgument: different roots or chunk sizes). Without
/// verify_calls, just throws `local_error` if set.
void agree_on_call(GlooCommunicator::State& state, const char* what, CallRecord record,
                   const std::optional<Error>& local_error);

/// Seconds (> 0, finite, at most 10^7) as milliseconds, rounded up; kInvalidArgument naming
/// `what` otherwise.
std::chrono::milliseconds timeout_from_seconds(double seconds, const char* what);

}  // namespace ingot
