// GlooCommunicator: the Communicator collectives over Gloo's algorithms. Each call checks its
// arguments locally, lets the ranks agree on the call (agree_on_call), then runs the Gloo
// algorithm inside State::guarded so a Gloo failure becomes an ingot::Error.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce_scatter.h>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "collective_common.h"
#include "gloo_state.h"
#include "ingot/runtime/array.h"
#include "reduce_kernels.h"

namespace ingot {

namespace {

template <class T>
void gloo_all_reduce(GlooCommunicator::State& s, T* data, size_t n, ReduceOp op) {
  gloo::AllreduceOptions opts(s.context);
  opts.setOutput(data, n);
  opts.setReduceFunction(gloo_kernels::all_reduce_function<T>(op));
  opts.setTag(s.next_tag++);
  opts.setTimeout(s.timeout);
  gloo::allreduce(opts);
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Reduce-scatters `scratch` (size() blocks of `len` elements) and returns where this rank's
// reduced block is: Gloo's recursive halving leaves it at the start; the all-reduce fallback
// leaves every block reduced in place.
template <class T>
const T* reduce_scatter_piece(GlooCommunicator::State& s, T* scratch, int64_t len, ReduceOp op) {
  const int p = s.size();
  if (is_power_of_two(p)) {
    gloo::ReductionFunction<T> fn = gloo_kernels::reduction_function<T>(op);
    gloo::ReduceScatterHalvingDoubling<T> algorithm(s.context, std::vector<T*>{scratch}, static_cast<int>(p * len),
                                                    std::vector<int>(static_cast<size_t>(p), static_cast<int>(len)),
                                                    &fn);
    algorithm.run();
    return scratch;
  }
  gloo_all_reduce(s, scratch, static_cast<size_t>(p * len), op);
  return scratch + s.rank() * len;
}

// Reduce-scatter of `in` (size() blocks of `block` elements) into `out`, in pieces: piece k
// takes elements [a, a + len) of every block into a scratch buffer, reduce-scatters it and
// writes this rank's reduced piece to out[a, a + len).
template <class T>
void reduce_scatter_typed(GlooCommunicator::State& s, const T* in, T* out, int64_t block, ReduceOp op) {
  const int64_t p = s.size();
  const int64_t chunk_bytes = std::clamp<int64_t>(s.options.reduce_scatter_chunk_bytes, 1, INT_MAX);
  const int64_t piece =
      std::max<int64_t>(1, std::min<int64_t>(block, chunk_bytes / (p * static_cast<int64_t>(sizeof(T)))));
  std::vector<T> scratch(static_cast<size_t>(p * piece));
  for (int64_t a = 0; a < block; a += piece) {
    const int64_t len = std::min(piece, block - a);
    for (int64_t r = 0; r < p; ++r) {
      std::memcpy(scratch.data() + r * len, in + r * block + a, static_cast<size_t>(len) * sizeof(T));
    }
    const T* mine = reduce_scatter_piece(s, scratch.data(), len, op);
    std::memcpy(out + a, mine, static_cast<size_t>(len) * sizeof(T));
  }
}

}  // namespace

GlooCommunicator::GlooCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {
  if (!state_ || !state_->context) {
    throw Error(ErrorCode::kInvalidArgument, "GlooCommunicator: missing state",
                "create communicators with make_local_gloo_group or connect_gloo");
  }
}

GlooCommunicator::~GlooCommunicator() = default;

int GlooCommunicator::rank() const { return state_->rank(); }

int GlooCommunicator::size() const { return state_->size(); }

std::string GlooCommunicator::backend() const { return "gloo"; }

double GlooCommunicator::timeout() const { return static_cast<double>(state_->timeout.count()) / 1000.0; }

void GlooCommunicator::all_reduce(Array& inout, ReduceOp op) {
  constexpr const char* what = "GlooCommunicator::all_reduce";
  State& s = *state_;
  s.check_usable(what);
  std::optional<Error> err = capture_error([&] {
    check_host_array(inout, what, "inout", "Gloo");
    check_reduce_dtype(inout.dtype(), what);
  });
  agree_on_call(s, what, describe_call(CallKind::kAllReduce, op, &inout, -1, 0), err);
  if (inout.size() == 0 || s.size() == 1) return;  // nothing to exchange; mean of one is itself
  dispatch_reducible(inout.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* data = inout.data<T>();
    s.guarded(what, [&] { gloo_all_reduce(s, data, static_cast<size_t>(inout.size()), op); });
    if (op == ReduceOp::kMean) gloo_kernels::divide(data, inout.size(), s.size());
  });
}

void GlooCommunicator::all_gather(const Array& in, Array& out) {
  constexpr const char* what = "GlooCommunicator::all_gather";
  State& s = *state_;
  s.check_usable(what);
  std::optional<Error> err = capture_error([&] {
    check_host_array(in, what, "in", "Gloo");
    check_host_array(out, what, "out", "Gloo");
    check_rank_at_least_1(in, what, "in");
    check_same_dtype(in, out, what);
    check_stacked_shape(in, out, s.size(), what, "in", "out");
    check_not_aliased(in, out, what);
  });
  agree_on_call(s, what, describe_call(CallKind::kAllGather, std::nullopt, &in, -1, 0), err);
  const size_t bytes = static_cast<size_t>(in.nbytes());
  if (bytes == 0) return;
  if (s.size() == 1) {
    std::memcpy(out.raw_data(), in.raw_data(), bytes);
    return;
  }
  s.guarded(what, [&] {
    gloo::AllgatherOptions opts(s.context);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in.raw_data())), bytes);
    opts.setOutput(static_cast<char*>(out.raw_data()), bytes * static_cast<size_t>(s.size()));
    opts.setTag(s.next_tag++);
    opts.setTimeout(s.timeout);
    gloo::allgather(opts);
  });
}

void GlooCommunicator::reduce_scatter(const Array& in, Array& out, ReduceOp op) {
  constexpr const char* what = "GlooCommunicator::reduce_scatter";
  State& s = *state_;
  s.check_usable(what);
  std::optional<Error> err = capture_error([&] {
    check_host_array(in, what, "in", "Gloo");
    check_host_array(out, what, "out", "Gloo");
    check_rank_at_least_1(out, what, "out");
    check_reduce_dtype(in.dtype(), what);
    check_same_dtype(in, out, what);
    check_stacked_shape(out, in, s.size(), what, "out", "in");
    check_not_aliased(in, out, what);
  });
  agree_on_call(s, what, describe_call(CallKind::kReduceScatter, op, &in, -1, s.options.reduce_scatter_chunk_bytes),
                err);
  if (out.size() == 0) return;
  dispatch_reducible(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* result = out.data<T>();
    if (s.size() == 1) {
      std::memcpy(result, in.data<T>(), static_cast<size_t>(out.nbytes()));
      return;
    }
    s.guarded(what, [&] { reduce_scatter_typed(s, in.data<T>(), result, out.size(), op); });
    if (op == ReduceOp::kMean) gloo_kernels::divide(result, out.size(), s.size());
  });
}

void GlooCommunicator::broadcast(Array& inout, int root) {
  constexpr const char* what = "GlooCommunicator::broadcast";
  State& s = *state_;
  s.check_usable(what);
  std::optional<Error> err = capture_error([&] {
    if (root < 0 || root >= s.size()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: root {} is outside [0, {})", what, root, s.size()));
    }
    check_host_array(inout, what, "inout", "Gloo");
  });
  agree_on_call(s, what, describe_call(CallKind::kBroadcast, std::nullopt, &inout, root, 0), err);
  const size_t bytes = static_cast<size_t>(inout.nbytes());
  if (bytes == 0 || s.size() == 1) return;
  s.guarded(what, [&] {
    gloo::BroadcastOptions opts(s.context);
    opts.setOutput(static_cast<char*>(inout.raw_data()), bytes);
    opts.setRoot(root);
    opts.setTag(s.next_tag++);
    opts.setTimeout(s.timeout);
    gloo::broadcast(opts);
  });
}

void GlooCommunicator::barrier() {
  constexpr const char* what = "GlooCommunicator::barrier";
  State& s = *state_;
  s.check_usable(what);
  agree_on_call(s, what, describe_call(CallKind::kBarrier, std::nullopt, nullptr, -1, 0), std::nullopt);
  if (s.size() == 1) return;
  s.guarded(what, [&] {
    gloo::BarrierOptions opts(s.context);
    opts.setTag(s.next_tag++);
    opts.setTimeout(s.timeout);
    gloo::barrier(opts);
  });
}

}  // namespace ingot
