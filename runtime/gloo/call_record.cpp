// Agreement of ranks on each collective call (GlooOptions::verify_calls) and the state helpers
// of GlooCommunicator.
#include <gloo/allgather.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gloo_state.h"
#include "ingot/runtime/array.h"
#include "socket.h"

namespace ingot {

namespace {

enum Field : int { kKind, kOp, kDType, kRoot, kNdim, kNumel, kExtra, kStatus, kDims };
constexpr int kMaxDims = CallRecord::kFields - kDims;

const char* kind_name(int64_t kind) {
  switch (static_cast<CallKind>(kind)) {
    case CallKind::kAllReduce: return "all_reduce";
    case CallKind::kAllGather: return "all_gather";
    case CallKind::kReduceScatter: return "reduce_scatter";
    case CallKind::kBroadcast: return "broadcast";
    case CallKind::kBarrier: return "barrier";
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
               fmt::format("{}: the ranks' calls differ: rank 0 called {} but rank {} called {}",
                           what, describe(a), r, describe(b)),
               "every rank must call the same collectives in the same order with arrays of the "
               "same dtype and shape (and the same root / options)");
}

bool same_call(const CallRecord& a, const CallRecord& b) {
  for (int i = 0; i < CallRecord::kFields; ++i) {
    if (i != kStatus && a.f[i] != b.f[i]) return false;
  }
  return true;
}

// Exchanges the records of all ranks (a Gloo all-gather of 16 int64 per rank).
std::vector<CallRecord> exchange(GlooCommunicator::State& s, const char* what,
                                 CallRecord& record) {
  std::vector<int64_t> flat(static_cast<size_t>(s.size()) * CallRecord::kFields);
  s.guarded(what, [&] {
    gloo::AllgatherOptions opts(s.context);
    opts.setInput(record.f.data(), CallRecord::kFields);
    opts.setOutput(flat.data(), flat.size());
    opts.setTag(s.next_tag++);
    opts.setTimeout(s.timeout);
    gloo::allgather(opts);
  });
  std::vector<CallRecord> all(static_cast<size_t>(s.size()));
  for (size_t r = 0; r < all.size(); ++r) {
    std::copy_n(flat.begin() + static_cast<ptrdiff_t>(r * CallRecord::kFields),
                CallRecord::kFields, all[r].f.begin());
  }
  return all;
}

}  // namespace

CallRecord describe_call(CallKind kind, std::optional<ReduceOp> op, const Array* array, int root,
                         int64_t extra) {
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

void agree_on_call(GlooCommunicator::State& s, const char* what, CallRecord record,
                   const std::optional<Error>& local_error) {
  record.f[kStatus] = local_error ? 1 : 0;
  if (!s.options.verify_calls || s.size() == 1) {
    if (local_error) throw *local_error;
    return;
  }
  std::vector<CallRecord> all = exchange(s, what, record);
  if (local_error) throw *local_error;
  for (int r = 0; r < s.size(); ++r) {
    if (all[static_cast<size_t>(r)].f[kStatus] != 0) {
      throw Error(ErrorCode::kFailedPrecondition,
                  fmt::format("{}: rank {} rejected its arguments ({}); no data was exchanged",
                              what, r, describe(all[static_cast<size_t>(r)])),
                  fmt::format("see the error raised on rank {}", r));
    }
  }
  for (int r = 1; r < s.size(); ++r) {
    if (!same_call(all[0], all[static_cast<size_t>(r)])) {
      throw mismatch_error(what, all[0], r, all[static_cast<size_t>(r)]);
    }
  }
}

void GlooCommunicator::State::check_usable(const char* what) const {
  if (broken.empty()) return;
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("{} on rank {} of {}: the communicator is broken by an earlier "
                          "failure: {}",
                          what, rank(), size(), broken),
              "create a new process group");
}

Error GlooCommunicator::State::fail(const char* what, const std::string& cause) {
  broken = fmt::format("{} failed: {}", what, cause);
  return Error(ErrorCode::kFailedPrecondition,
               fmt::format("{} on rank {} of {} failed in Gloo (timeout {}): {}", what, rank(),
                           size(), net::seconds_text(timeout), cause),
               "a peer rank may have exited, stalled or called a different collective; this "
               "communicator can no longer be used");
}

std::chrono::milliseconds timeout_from_seconds(double seconds, const char* what) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 1e7) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: timeout {} s must be positive, finite and at most 1e7 s", what,
                            seconds));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

}  // namespace ingot
