// The shared-memory group (include/ingot/runtime/shared_memory.h): ranks of one process that
// read each other's buffers between barriers. Each collective: local argument checks, publish
// the call's record and buffer pointers, barrier, compare every rank's record
// (check_call_records, the same agreement GlooOptions::verify_calls makes), then the data phase,
// which ends with a barrier so no rank reuses its buffers while a peer may still read them.
#include "ingot/runtime/shared_memory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collective_common.h"
#include "reduce_ops.h"

namespace ingot {

namespace {

using Clock = std::chrono::steady_clock;

/// What one rank publishes for its call in progress.
struct Slot {
  /// The call's description, by the parity of the call count: a rank that finished call k
  /// early (an agreement error moves no data and has no closing barrier) writes call k + 1's
  /// record into the other entry while slower ranks still read call k's.
  std::array<CallRecord, 2> records{};
  /// Source buffer (all_gather / reduce_scatter: `in`; all_reduce / broadcast: `inout`).
  const std::byte* in = nullptr;
  /// All_reduce: this rank's reduced chunk, read by every rank; grown on demand, kept.
  std::vector<std::byte> scratch;
};

/// The state every rank's communicator holds through a shared_ptr: the published slots and a
/// reusable barrier with a timeout (mutex + condition variable + generation counter).
class GroupState {
 public:
  GroupState(int size, double timeout_seconds)
      : size_(size),
        timeout_seconds_(timeout_seconds),
        timeout_(timeout_from_seconds(timeout_seconds, "make_shared_memory_group")),
        slots_(static_cast<size_t>(size)),
        here_(static_cast<size_t>(size), 0) {}

  int size() const { return size_; }
  Slot& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }

  /// Throws kFailedPrecondition naming `what` and `rank` if the group is broken.
  void check_usable(int rank, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) throw broken_error(rank, what);
  }

  /// Returns once every rank has arrived (every write a rank made before arriving is then
  /// visible to all). Throws kFailedPrecondition, breaking the group, when the group is or
  /// becomes broken, or after waiting the timeout (naming the ranks that did not arrive).
  void arrive_and_wait(int rank, const char* what) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!broken_.empty()) throw broken_error(rank, what);
    here_[static_cast<size_t>(rank)] = 1;
    if (++arrived_ == size_) {
      arrived_ = 0;
      std::fill(here_.begin(), here_.end(), 0);
      ++generation_;
      cv_.notify_all();
      return;
    }
    const uint64_t generation = generation_;
    cv_.wait_until(lock, Clock::now() + timeout_, [&] { return generation_ != generation || !broken_.empty(); });
    if (generation_ != generation) return;  // released (even if a peer broke the group since)
    if (!broken_.empty()) throw broken_error(rank, what);
    throw timed_out(rank, what);
  }

  /// A rank's communicator is gone: ranks waiting for it (now or later) fail at once.
  void depart(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = fmt::format("rank {}'s communicator was destroyed", rank);
    cv_.notify_all();
  }

 private:
  // With mu_ held.
  Error broken_error(int rank, const char* what) const {
    return Error(ErrorCode::kFailedPrecondition,
                 fmt::format("{} on rank {} of {}: the shared-memory group is broken by an "
                             "earlier failure: {}",
                             what, rank, size_, broken_),
                 "create a new group with make_shared_memory_group");
  }

  // With mu_ held: breaks the group naming the ranks that did not arrive.
  Error timed_out(int rank, const char* what) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (here_[static_cast<size_t>(r)] == 0) missing.push_back(r);
    }
    const std::string ranks = fmt::format("{}", fmt::join(missing, ", "));
    broken_ = fmt::format("rank {} waited {:g} s in {} for rank(s) {}, which did not arrive", rank, timeout_seconds_,
                          what, ranks);
    cv_.notify_all();
    return Error(ErrorCode::kFailedPrecondition,
                 fmt::format("{} on rank {} of {} timed out after {:g} s: rank(s) {} did not "
                             "arrive",
                             what, rank, size_, timeout_seconds_, ranks),
                 "a peer rank may have exited, stalled, thrown or called no collective; this "
                 "group can no longer be used (create a new one)");
  }

  const int size_;
  const double timeout_seconds_;
  const std::chrono::milliseconds timeout_;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<char> here_;  // rank r has arrived in the current generation
  std::string broken_;      // non-empty once broken: why
};

// dst[0, n) = the reduction of srcs[q][0, n) over q in order 0, 1, ... (dst aliases none).
template <class T, class Op>
void reduce_in_rank_order(T* dst, const std::vector<const T*>& srcs, int64_t n) {
  std::memcpy(dst, srcs[0], static_cast<size_t>(n) * sizeof(T));
  for (size_t q = 1; q < srcs.size(); ++q) {
    const T* src = srcs[q];
    for (int64_t i = 0; i < n; ++i) dst[i] = Op::apply(dst[i], src[i]);
  }
}

// reduce_in_rank_order for `op`; kMean divides the sum by the number of sources.
template <class T>
void reduce_sources(ReduceOp op, T* dst, const std::vector<const T*>& srcs, int64_t n) {
  switch (op) {
    case ReduceOp::kMax:
      return reduce_in_rank_order<T, reduce_ops::Max>(dst, srcs, n);
    case ReduceOp::kMin:
      return reduce_in_rank_order<T, reduce_ops::Min>(dst, srcs, n);
    case ReduceOp::kSum:
      return reduce_in_rank_order<T, reduce_ops::Sum>(dst, srcs, n);
    case ReduceOp::kMean:
      reduce_in_rank_order<T, reduce_ops::Sum>(dst, srcs, n);
      return reduce_ops::divide(dst, n, static_cast<int>(srcs.size()));
  }
}

// Every rank's published `in` as T*, advanced by `offset` elements.
template <class T>
std::vector<const T*> sources(GroupState& g, int64_t offset) {
  std::vector<const T*> srcs;
  for (int q = 0; q < g.size(); ++q) {
    srcs.push_back(reinterpret_cast<const T*>(g.slot(q).in) + offset);
  }
  return srcs;
}

// First element of rank r's all_reduce chunk of n elements: r * n / size.
int64_t chunk_begin(int64_t n, int r, int size) { return n * r / size; }

class SharedMemoryCommunicator final : public Communicator {
 public:
  SharedMemoryCommunicator(std::shared_ptr<GroupState> group, int rank) : group_(std::move(group)), rank_(rank) {}
  ~SharedMemoryCommunicator() override { group_->depart(rank_); }
  SharedMemoryCommunicator(const SharedMemoryCommunicator&) = delete;
  SharedMemoryCommunicator& operator=(const SharedMemoryCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string backend() const override { return "shared_memory"; }

  void all_reduce(Array& inout, ReduceOp op) override {
    constexpr const char* what = "SharedMemoryCommunicator::all_reduce";
    group_->check_usable(rank_, what);
    std::optional<Error> err = capture_error([&] {
      check_host_array(inout, what, "inout", kBackend);
      check_reduce_dtype(inout.dtype(), what);
    });
    agree(what, describe_call(CallKind::kAllReduce, op, &inout, -1, 0), err, inout);
    if (inout.size() == 0 || size() == 1) return;  // nothing to exchange; mean of one is itself
    dispatch_reducible(inout.dtype(),
                       [&](auto tag) { all_reduce_typed<typename decltype(tag)::type>(inout, op, what); });
  }

  void all_gather(const Array& in, Array& out) override {
    constexpr const char* what = "SharedMemoryCommunicator::all_gather";
    group_->check_usable(rank_, what);
    std::optional<Error> err = capture_error([&] {
      check_host_array(in, what, "in", kBackend);
      check_host_array(out, what, "out", kBackend);
      check_rank_at_least_1(in, what, "in");
      check_same_dtype(in, out, what);
      check_stacked_shape(in, out, size(), what, "in", "out");
      check_not_aliased(in, out, what);
    });
    agree(what, describe_call(CallKind::kAllGather, std::nullopt, &in, -1, 0), err, in);
    const int64_t bytes = in.nbytes();
    if (bytes == 0) return;
    auto* dst = static_cast<std::byte*>(out.raw_data());
    if (size() == 1) {
      std::memcpy(dst, in.raw_data(), static_cast<size_t>(bytes));
      return;
    }
    for (int q = 0; q < size(); ++q) {
      std::memcpy(dst + q * bytes, group_->slot(q).in, static_cast<size_t>(bytes));
    }
    group_->arrive_and_wait(rank_, what);
  }

  void reduce_scatter(const Array& in, Array& out, ReduceOp op) override {
    constexpr const char* what = "SharedMemoryCommunicator::reduce_scatter";
    group_->check_usable(rank_, what);
    std::optional<Error> err = capture_error([&] {
      check_host_array(in, what, "in", kBackend);
      check_host_array(out, what, "out", kBackend);
      check_rank_at_least_1(out, what, "out");
      check_reduce_dtype(in.dtype(), what);
      check_same_dtype(in, out, what);
      check_stacked_shape(out, in, size(), what, "out", "in");
      check_not_aliased(in, out, what);
    });
    agree(what, describe_call(CallKind::kReduceScatter, op, &in, -1, 0), err, in);
    if (out.size() == 0) return;
    if (size() == 1) {
      std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(out.nbytes()));
      return;
    }
    dispatch_reducible(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const int64_t block = out.size();
      reduce_sources(op, out.data<T>(), sources<T>(*group_, rank_ * block), block);
    });
    group_->arrive_and_wait(rank_, what);
  }

  void broadcast(Array& inout, int root) override {
    constexpr const char* what = "SharedMemoryCommunicator::broadcast";
    group_->check_usable(rank_, what);
    std::optional<Error> err = capture_error([&] {
      if (root < 0 || root >= size()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: root {} is outside [0, {})", what, root, size()));
      }
      check_host_array(inout, what, "inout", kBackend);
    });
    agree(what, describe_call(CallKind::kBroadcast, std::nullopt, &inout, root, 0), err, inout);
    const int64_t bytes = inout.nbytes();
    if (bytes == 0 || size() == 1) return;
    if (rank_ != root) {
      std::memcpy(inout.raw_data(), group_->slot(root).in, static_cast<size_t>(bytes));
    }
    group_->arrive_and_wait(rank_, what);
  }

  void barrier() override {
    constexpr const char* what = "SharedMemoryCommunicator::barrier";
    group_->check_usable(rank_, what);
    agree(what, describe_call(CallKind::kBarrier, std::nullopt, nullptr, -1, 0), std::nullopt, Array());
  }

 private:
  static constexpr const char* kBackend = "shared-memory";

  // Publishes this rank's call (record with its status, and `source`'s buffer when valid),
  // waits for every rank and throws check_call_records's error if the calls disagree or any
  // rank's checks failed (throwing `local_error` on this rank). One rank: just `local_error`.
  void agree(const char* what, CallRecord record, const std::optional<Error>& local_error, const Array& source) {
    set_call_status(record, local_error.has_value());
    if (size() == 1) {
      if (local_error) throw *local_error;
      return;
    }
    const size_t parity = calls_++ % 2;
    Slot& mine = group_->slot(rank_);
    mine.records[parity] = record;
    mine.in = local_error || !source.valid() || source.size() == 0 ? nullptr
                                                                   : static_cast<const std::byte*>(source.raw_data());
    group_->arrive_and_wait(rank_, what);
    std::vector<CallRecord> all;
    for (int q = 0; q < size(); ++q) all.push_back(group_->slot(q).records[parity]);
    check_call_records(what, all, local_error);
  }

  // Rank r reduces its chunk over all ranks into its scratch, then every rank copies every
  // chunk into `inout`; a barrier after each phase.
  template <class T>
  void all_reduce_typed(Array& inout, ReduceOp op, const char* what) {
    const int64_t n = inout.size();
    const int p = size();
    const int64_t begin = chunk_begin(n, rank_, p);
    const int64_t len = chunk_begin(n, rank_ + 1, p) - begin;
    std::vector<std::byte>& scratch = group_->slot(rank_).scratch;
    const size_t need = static_cast<size_t>(len) * sizeof(T);
    if (scratch.size() < need) scratch.resize(need);
    if (len > 0) {
      reduce_sources(op, reinterpret_cast<T*>(scratch.data()), sources<T>(*group_, begin), len);
    }
    group_->arrive_and_wait(rank_, what);
    T* data = inout.data<T>();
    for (int q = 0; q < p; ++q) {
      const int64_t b = chunk_begin(n, q, p);
      const int64_t l = chunk_begin(n, q + 1, p) - b;
      if (l > 0) {
        std::memcpy(data + b, group_->slot(q).scratch.data(), static_cast<size_t>(l) * sizeof(T));
      }
    }
    group_->arrive_and_wait(rank_, what);
  }

  std::shared_ptr<GroupState> group_;
  const int rank_;
  uint64_t calls_ = 0;  // calls that published a record (selects the record entry)
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_shared_memory_group(int size, double timeout) {
  constexpr const char* what = "make_shared_memory_group";
  if (size < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: size {} must be >= 1", what, size));
  }
  auto group = std::make_shared<GroupState>(size, timeout);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.push_back(std::make_unique<SharedMemoryCommunicator>(group, r));
  }
  return ranks;
}

}  // namespace ingot
