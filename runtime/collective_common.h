// Internals shared by the host-memory communicators (GlooCommunicator, runtime/gloo/, and the
// shared-memory group, runtime/shared_memory.cpp): the Communicator contract's argument checks,
// the fixed-size description of a call that ranks compare before moving data, and the error
// every rank throws when those descriptions disagree. One implementation, so both backends
// reject the same calls with the same words.
#pragma once

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/communicator.h"
#include "ingot/runtime/error.h"

namespace ingot {

// ---- argument checks (each throws the ingot::Error the Communicator contract names) ----

/// `a` is valid, lives on a CPU device (kInvalidArgument naming the device; `backend` names the
/// communicator in the message, e.g. "Gloo") and was not donated (kFailedPrecondition).
void check_host_array(const Array& a, const char* what, const char* name, const char* backend);
/// `d` is f32, f64, i32 or i64; kInvalidArgument naming the dtype otherwise.
void check_reduce_dtype(DType d, const char* what);
/// kDTypeMismatch naming both dtypes when `in` and `out` differ.
void check_same_dtype(const Array& in, const Array& out, const char* what);
/// kInvalidArgument when `in` and `out` share a buffer.
void check_not_aliased(const Array& in, const Array& out, const char* what);
/// kInvalidArgument naming the shape when `a` is a scalar.
void check_rank_at_least_1(const Array& a, const char* what, const char* name);
/// kInvalidArgument naming both counts when a grouped call's `ins` and `outs` lists differ in
/// length.
void check_group_lengths(size_t ins, size_t outs, const char* what);
/// `big` must be (size * small.shape[0], small.shape[1:]...); kShapeMismatch naming both shapes
/// and the expected one otherwise.
void check_stacked_shape(const Array& small, const Array& big, int size, const char* what, const char* small_name,
                         const char* big_name);

/// Calls `f(TypeTag<T>{})` for the reducible dtypes (f32, f64, i32, i64); kInternal otherwise
/// (callers check with check_reduce_dtype first).
template <class F>
void dispatch_reducible(DType d, F&& f) {
  switch (d) {
    case DType::kF32:
      return f(TypeTag<float>{});
    case DType::kF64:
      return f(TypeTag<double>{});
    case DType::kI32:
      return f(TypeTag<int32_t>{});
    case DType::kI64:
      return f(TypeTag<int64_t>{});
    default:
      break;
  }
  throw Error(ErrorCode::kInternal, fmt::format("unchecked dtype {} reached a reduction", dtype_name(d)));
}

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

// ---- agreement of ranks on a call ----

/// Which collective a call is (values are exchanged between ranks; keep them stable).
enum class CallKind : int64_t {
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBroadcast = 4,
  kBarrier = 5,
};

/// A fixed-size (128-byte) description of one rank's call. Fields (int64 each): kind, reduce op
/// (-1: none), dtype (-1: none), root (-1: none), rank of the array (-1: none or invalid),
/// element count, extra (Gloo's reduce_scatter chunk bytes, else 0), status (0: arguments
/// valid, 1: rejected), then the first 8 dimensions; for arrays of more than 8 dimensions the
/// last slot also mixes in (by an FNV-1a style hash) every dimension past the 8th, so any shape
/// difference shows.
struct CallRecord {
  static constexpr int kFields = 16;
  std::array<int64_t, kFields> f{};
};

/// Describes a call (status 0). `array` may be null (barrier) or invalid.
CallRecord describe_call(CallKind kind, std::optional<ReduceOp> op, const Array* array, int root, int64_t extra);

/// Marks `record` as rejected by this rank's local checks (status 1) or not.
void set_call_status(CallRecord& record, bool rejected);

/// Given every rank's record (element r: rank r's, status set), throws: `local_error` if set;
/// kFailedPrecondition "rank r rejected its arguments" if another rank's status is 1; or, if
/// the calls differ, the same error on every rank naming rank 0's and the first differing
/// rank's calls (kFailedPrecondition: different collectives or ops; kDTypeMismatch;
/// kShapeMismatch naming both shapes; kInvalidArgument: different roots or chunk sizes).
/// Returns when all ranks agree.
void check_call_records(const char* what, const std::vector<CallRecord>& all, const std::optional<Error>& local_error);

/// Seconds (> 0, finite, at most 10^7) as milliseconds, rounded up; kInvalidArgument naming
/// `what` otherwise.
std::chrono::milliseconds timeout_from_seconds(double seconds, const char* what);

}  // namespace ingot
