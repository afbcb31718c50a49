// The argument checks and call agreement shared by the host-memory communicators (see
// collective_common.h).
#include "collective_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ingot {

void check_host_array(const Array& a, const char* what, const char* name, const char* backend) {
  if (!a.valid()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: `{}` is an invalid (default-constructed) Array", what, name));
  }
  if (a.device().kind() != DeviceKind::kCpu) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: `{}` lives on {}; the {} communicator needs host arrays", what, name,
                            a.device().name(), backend),
                "copy the array to a CPU device, or use the NCCL communicator for CUDA arrays");
  }
  (void)a.raw_data();  // throws kFailedPrecondition for a donated array
}

bool is_reducible(DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kI32 || d == DType::kI64; }

void check_reduce_dtype(DType d, const char* what) {
  if (!is_reducible(d)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: dtype {} is not supported (f32, f64, i32, i64 are)", what, dtype_name(d)),
                "convert the array to f32/f64/i32/i64 before reducing it");
  }
}

void check_same_dtype(const Array& in, const Array& out, const char* what) {
  if (in.dtype() != out.dtype()) {
    throw Error(ErrorCode::kDTypeMismatch, fmt::format("{}: `in` has dtype {} but `out` has dtype {}", what,
                                                       dtype_name(in.dtype()), dtype_name(out.dtype())));
  }
}

void check_not_aliased(const Array& in, const Array& out, const char* what) {
  if (in.buffer() == out.buffer()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: `in` and `out` share one buffer", what),
                "pass a separate output array");
  }
}

void check_rank_at_least_1(const Array& a, const char* what, const char* name) {
  if (a.rank() < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: `{}` must have rank >= 1 (the split / concatenation dimension), "
                            "got shape {}",
                            what, name, shape_to_string(a.shape())));
  }
}

// `big` must be (size * small.shape[0], small.shape[1:]...).
void check_group_lengths(size_t ins, size_t outs, const char* what) {
  if (ins == outs) return;
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} inputs but {} outputs", what, ins, outs),
              "pass one output array per input array");
}

void check_stacked_shape(const Array& small, const Array& big, int size, const char* what, const char* small_name,
                         const char* big_name) {
  Shape expected = small.shape();
  expected[0] *= size;
  if (big.shape() != expected) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: `{}` has shape {} and `{}` has shape {}; with {} ranks `{}` "
                            "must have shape {}",
                            what, small_name, shape_to_string(small.shape()), big_name, shape_to_string(big.shape()),
                            size, big_name, shape_to_string(expected)));
  }
}

namespace {

enum Field : int { kKind, kOp, kDType, kRoot, kNdim, kNumel, kExtra, kStatus, kDims };
constexpr int kMaxDims = CallRecord::kFields - kDims;

const char* kind_name(int64_t kind) {
  switch (static_cast<CallKind>(kind)) {
    case CallKind::kAllReduce:
      return "all_reduce";
    case CallKind::kAllGather:
      return "all_gather";
    case CallKind::kReduceScatter:
      return "reduce_scatter";
    case CallKind::kBroadcast:
      return "broadcast";
    case CallKind::kBarrier:
      return "barrier";
  }
  return "an unknown collective";
}

// Shape text from a record: "(4, 3)", or "(d0, ..., d6, ...) [N dims]" past 8 dimensions.
std::string record_shape(const CallRecord& r) {
  int64_t ndim = r.f[kNdim];
  if (ndim <= kMaxDims) {
    return shape_to_string(Shape(r.f.begin() + kDims, r.f.begin() + kDims + ndim));
  }
  Shape head(r.f.begin() + kDims, r.f.begin() + kDims + kMaxDims - 1);
  std::string text = shape_to_string(head);
  text.insert(text.size() - 1, ", ...");
  return fmt::format("{} [{} dims]", text, ndim);
}

// "all_reduce(sum) of f32 (4, 3)", "broadcast from root 1 of i32 (2,)", "barrier".
std::string describe(const CallRecord& r) {
  std::string text = kind_name(r.f[kKind]);
  if (r.f[kOp] >= 0) text += fmt::format("({})", reduce_op_name(static_cast<ReduceOp>(r.f[kOp])));
  if (r.f[kRoot] >= 0) text += fmt::format(" from root {}", r.f[kRoot]);
  if (r.f[kNdim] >= 0) {
    text += fmt::format(" of {} {}", dtype_name(static_cast<DType>(r.f[kDType])), record_shape(r));
  }
  if (r.f[kExtra] != 0) text += fmt::format(" in chunks of {} bytes", r.f[kExtra]);
  return text;
}

// The error every rank throws when rank 0's record `a` and rank `r`'s record `b` differ.
Error mismatch_error(const char* what, const CallRecord& a, int r, const CallRecord& b) {
  ErrorCode code = ErrorCode::kInvalidArgument;
  if (a.f[kKind] != b.f[kKind] || a.f[kOp] != b.f[kOp]) {
    code = ErrorCode::kFailedPrecondition;
  } else if (a.f[kDType] != b.f[kDType]) {
    code = ErrorCode::kDTypeMismatch;
  } else if (a.f[kNdim] != b.f[kNdim] || a.f[kNumel] != b.f[kNumel] ||
             !std::equal(a.f.begin() + kDims, a.f.end(), b.f.begin() + kDims)) {
    code = ErrorCode::kShapeMismatch;
  }
  return Error(code,
               fmt::format("{}: the ranks' calls differ: rank 0 called {} but rank {} called {}", what, describe(a), r,
                           describe(b)),
               "every rank must call the same collectives in the same order with arrays of the "
               "same dtype and shape (and the same root / options)");
}

bool same_call(const CallRecord& a, const CallRecord& b) {
  for (int i = 0; i < CallRecord::kFields; ++i) {
    if (i != kStatus && a.f[i] != b.f[i]) return false;
  }
  return true;
}

}  // namespace

CallRecord describe_call(CallKind kind, std::optional<ReduceOp> op, const Array* array, int root, int64_t extra) {
  CallRecord r;
  r.f.fill(0);
  r.f[kKind] = static_cast<int64_t>(kind);
  r.f[kOp] = op ? static_cast<int64_t>(*op) : -1;
  r.f[kRoot] = root;
  r.f[kExtra] = extra;
  r.f[kDType] = -1;
  r.f[kNdim] = -1;
  if (array == nullptr || !array->valid()) return r;
  const Shape& shape = array->shape();
  r.f[kDType] = static_cast<int64_t>(array->dtype());
  r.f[kNdim] = static_cast<int64_t>(shape.size());
  r.f[kNumel] = array->size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < static_cast<size_t>(kMaxDims)) {
      r.f[kDims + i] = shape[i];
    } else {  // fold the dimensions that do not fit into the last slot (FNV-1a style mixing)
      uint64_t h = static_cast<uint64_t>(r.f[CallRecord::kFields - 1]);
      h = (h ^ static_cast<uint64_t>(shape[i])) * 1099511628211ull;
      r.f[CallRecord::kFields - 1] = static_cast<int64_t>(h);
    }
  }
  return r;
}

void set_call_status(CallRecord& record, bool rejected) { record.f[kStatus] = rejected ? 1 : 0; }

void check_call_records(const char* what, const std::vector<CallRecord>& all, const std::optional<Error>& local_error) {
  if (local_error) throw *local_error;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].f[kStatus] != 0) {
      throw Error(
          ErrorCode::kFailedPrecondition,
          fmt::format("{}: rank {} rejected its arguments ({}); no data was exchanged", what, r, describe(all[r])),
          fmt::format("see the error raised on rank {}", r));
    }
  }
  for (size_t r = 1; r < all.size(); ++r) {
    if (!same_call(all[0], all[r])) throw mismatch_error(what, all[0], static_cast<int>(r), all[r]);
  }
}

std::chrono::milliseconds timeout_from_seconds(double seconds, const char* what) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 1e7) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: timeout {} s must be positive, finite and at most 1e7 s", what, seconds));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

}  // namespace ingot
