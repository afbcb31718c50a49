// PrefetchQueue: the trainer contract's two-slot queue (/work/shared/TRAINER_SEMANTICS.md, "Data
// and devices"). A producer thread owned by the queue prepares batches (produce, then distribute to
// the devices) while the consumer runs steps on earlier ones, so data preparation and host-to-device
// copies overlap compute. docs/runtime-prefetch.md describes the protocol and its guarantees.
#pragma once

#include <algorithm>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/error.h"
#include "ingot/runtime/sharding.h"

namespace ingot {

/// Counters of a PrefetchQueue, read with PrefetchQueue::stats() (a consistent snapshot).
///
/// Once the queue is finished and its producer thread has exited,
/// produced == delivered + discarded.
struct PrefetchStats {
  /// Batches fully prepared: the producer returned a batch and distribute returned.
  int64_t produced = 0;
  /// Batches returned by next().
  int64_t delivered = 0;
  /// Prepared batches dropped by stop() without being delivered.
  int64_t discarded = 0;
  /// Slots held right now: batches being prepared plus prepared batches not yet taken.
  int64_t in_flight = 0;
  /// The largest value in_flight ever had; never exceeds PrefetchQueue::slots().
  int64_t max_in_flight = 0;
  /// True once the producer thread has left its loop (end of data, an error, or stop()).
  bool producer_exited = false;
};

namespace detail {
/// Throws ingot::Error(kInvalidArgument) unless `has_producer` and `slots` >= 1.
void check_prefetch_arguments(bool has_producer, int64_t slots);
/// Starts a thread running `body`; a failure to create it (std::system_error) becomes
/// ingot::Error(kFailedPrecondition) with the system's message.
std::thread start_prefetch_thread(std::function<void()> body);
/// Throws ingot::Error(kFailedPrecondition) naming `call` (e.g. "stop") when the queue's own
/// producer thread calls it: that thread cannot wait for, or join, itself.
void reject_producer_thread_call(const char* call);
}  // namespace detail

/// The two-slot prefetch queue of the trainer contract, for one pass over the data (one epoch).
///
/// `Batch` is the type handed from producer to consumer (any move-constructible type; the trainer
/// uses ArrayBatch = std::vector<Array>, instantiated once in the runtime library). The queue owns
/// one producer thread, started by the constructor, which repeatedly
///   1. waits until fewer than `slots` batches are held (being prepared, or prepared and not yet
///      taken by next()), then takes a slot;
///   2. calls `producer()`: a batch, or std::nullopt at the end of the data;
///   3. calls `distribute(batch)` (moves the host batch to its sharding/devices; may start
///      asynchronous copies and return arrays whose copies complete later), then puts the result
///      into the slot for next().
/// With the default of two slots this is the contract's protocol: two batches are enqueued at the
/// start, then one more each time one is taken, so one batch is being prepared while a step runs
/// on another and never more than two are prepared or in flight (as Keras' JAX trainer's
/// _prefetch_numpy_iterator, which enqueues 2 and then 1 per batch taken).
///
/// Guarantees: batches reach next() in the producer's order, each exactly once. If `producer` or
/// `distribute` throws while preparing batch k (1-based), next() returns the k-1 batches before it
/// and the k-th call of next() rethrows that exception (the original object, through
/// std::exception_ptr); the queue is then finished. The producer thread is joined by the next()
/// that reaches the end or the error, by stop(), or by the destructor, whichever comes first.
///
/// Threading: next() is meant for one consumer thread (concurrent calls are safe; each batch
/// goes to one of them). stop() may be called from any thread other than the producer thread,
/// including while another thread is blocked in next(). `producer` and `distribute` run only on
/// the producer thread, one call at a time; they must not call next() or stop() of their own queue
/// (ingot::Error(kFailedPrecondition), delivered to the consumer at that batch) and must not
/// destroy it.
template <std::move_constructible Batch>
class PrefetchQueue {
 public:
  /// Returns the next batch, or std::nullopt at the end of the data.
  using Producer = std::function<std::optional<Batch>()>;
  /// Places a prepared host batch on its devices/sharding; empty means identity.
  using Distribute = std::function<Batch(Batch)>;
  /// The trainer contract's queue depth.
  static constexpr int64_t kDefaultSlots = 2;

  /// Starts the producer thread, which begins preparing the first `slots` batches at once.
  /// @param producer    called on the producer thread until it returns std::nullopt or throws;
  ///                    must not be empty.
  /// @param distribute  called on the producer thread on each batch the producer returns;
  ///                    empty = identity.
  /// @param slots       how many batches may be prepared or in flight at once (>= 1; default 2).
  /// Throws ingot::Error(kInvalidArgument) for an empty producer or slots < 1, and
  /// ingot::Error(kFailedPrecondition) if the thread cannot be started.
  explicit PrefetchQueue(Producer producer, Distribute distribute = {}, int64_t slots = kDefaultSlots)
      : producer_(std::move(producer)), distribute_(std::move(distribute)), slots_(slots) {
    detail::check_prefetch_arguments(static_cast<bool>(producer_), slots_);
    // The producer thread takes mu_ before anything else, so it sees producer_id_ set.
    std::lock_guard lock(mu_);
    thread_ = detail::start_prefetch_thread([this] { run_producer(); });
    producer_id_ = thread_.get_id();
  }

  PrefetchQueue(const PrefetchQueue&) = delete;
  PrefetchQueue& operator=(const PrefetchQueue&) = delete;

  /// Stops the producer (as stop()) and joins its thread. Must not run on the producer thread.
  ~PrefetchQueue() {
    try {
      stop();
    } catch (...) {
      // stop() throws only on the producer thread, which the class forbids destroying it from.
    }
  }

  /// Blocks until the next batch is ready and returns it (in the producer's order); returns
  /// std::nullopt at the end of the data and on every call once the queue is finished (after the
  /// end, an error, or stop(), including a stop() from another thread while this call waits).
  /// Rethrows the producer's or distribute's exception at the batch position where it was thrown,
  /// once; later calls return std::nullopt. Throws ingot::Error(kFailedPrecondition) when called
  /// from the producer thread.
  std::optional<Batch> next() {
    Entry entry;
    {
      std::unique_lock lock(mu_);
      if (std::this_thread::get_id() == producer_id_) detail::reject_producer_thread_call("next");
      ready_cv_.wait(lock, [&] { return finished_ || !ready_.empty(); });
      if (finished_) return std::nullopt;
      entry = std::move(ready_.front());
      ready_.pop_front();
      if (entry.batch) {
        --in_flight_;
        ++stats_.delivered;
      } else {
        finished_ = true;  // the end of the data or an error: nothing follows it
      }
    }
    if (entry.batch) {
      space_cv_.notify_one();
      return std::move(entry.batch);
    }
    ready_cv_.notify_all();  // other threads blocked in next() see finished_
    join_producer();         // the producer left its loop after publishing this entry
    if (entry.error) std::rethrow_exception(entry.error);
    return std::nullopt;
  }

  /// Early stop: marks the queue finished, discards the prepared batches, wakes the producer if
  /// it waits for a slot and joins its thread. A producer or distribute call in progress cannot
  /// be interrupted: stop() waits for it to return and discards its batch. Idempotent; an error
  /// not yet delivered by next() is dropped. Throws ingot::Error(kFailedPrecondition) when called
  /// from the producer thread.
  void stop() {
    std::deque<Entry> dropped;  // destroyed after the lock is released
    {
      std::lock_guard lock(mu_);
      if (std::this_thread::get_id() == producer_id_) detail::reject_producer_thread_call("stop");
      stop_ = true;
      finished_ = true;
      for (const Entry& e : ready_) stats_.discarded += e.batch ? 1 : 0;
      dropped.swap(ready_);
    }
    space_cv_.notify_all();
    ready_cv_.notify_all();
    join_producer();
  }

  /// A snapshot of the counters (see PrefetchStats).
  PrefetchStats stats() const {
    std::lock_guard lock(mu_);
    PrefetchStats s = stats_;
    s.in_flight = in_flight_;
    return s;
  }

  /// The queue depth given to the constructor.
  int64_t slots() const { return slots_; }

  /// True once next() has returned the end or thrown the error, or stop() was called.
  bool finished() const {
    std::lock_guard lock(mu_);
    return finished_;
  }

 private:
  /// One prepared slot: a batch, an error (error set, no batch) or the end (neither).
  struct Entry {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  void run_producer() {
    while (reserve_slot()) {
      if (!publish(prepare())) break;
    }
    std::lock_guard lock(mu_);
    stats_.producer_exited = true;
  }

  /// Waits for a free slot and takes it; false when the queue was stopped.
  bool reserve_slot() {
    std::unique_lock lock(mu_);
    space_cv_.wait(lock, [&] { return stop_ || in_flight_ < slots_; });
    if (stop_) return false;
    ++in_flight_;
    stats_.max_in_flight = std::max(stats_.max_in_flight, in_flight_);
    return true;
  }

  /// Produces and distributes one batch without holding the lock; captures any exception.
  Entry prepare() {
    Entry entry;
    try {
      std::optional<Batch> batch = producer_();
      if (batch) {
        if (distribute_) {
          entry.batch.emplace(distribute_(std::move(*batch)));
        } else {
          entry.batch.emplace(std::move(*batch));
        }
      }
    } catch (...) {
      entry.error = std::current_exception();
    }
    return entry;
  }

  /// Hands `entry` to the consumer; false when the producer must leave its loop (the entry is
  /// the end or an error, or the queue was stopped, in which case a batch is discarded).
  bool publish(Entry entry) {
    const bool last = !entry.batch;
    {
      std::lock_guard lock(mu_);
      if (entry.batch) ++stats_.produced;
      if (stop_) {
        if (entry.batch) ++stats_.discarded;
        return false;  // `entry` is destroyed after the lock is released
      }
      ready_.push_back(std::move(entry));
    }
    ready_cv_.notify_all();
    return !last;
  }

  void join_producer() {
    std::lock_guard lock(join_mu_);
    if (thread_.joinable()) thread_.join();
  }

  Producer producer_;
  Distribute distribute_;
  const int64_t slots_;

  mutable std::mutex mu_;             // guards everything below except thread_
  std::condition_variable space_cv_;  // producer: a slot was freed, or stop
  std::condition_variable ready_cv_;  // consumer: an entry was published, or finished
  std::deque<Entry> ready_;           // prepared entries in producer order
  int64_t in_flight_ = 0;
  bool stop_ = false;
  bool finished_ = false;
  PrefetchStats stats_;
  std::thread::id producer_id_;

  std::mutex join_mu_;  // serialises joining thread_ (next() and stop() may race to join)
  std::thread thread_;
};

/// The trainer's batch: the arrays of one step (inputs, targets, sample weights, ...).
using ArrayBatch = std::vector<Array>;
/// The queue the trainer uses; instantiated in the runtime library.
using ArrayPrefetchQueue = PrefetchQueue<ArrayBatch>;
extern template class PrefetchQueue<ArrayBatch>;

/// The `distribute` function that puts array i of each batch onto `shardings[i]` (device_put on
/// the producer thread, so the copies overlap the consumer's step; the returned arrays wait for
/// their copies when read). A batch with another number of arrays than `shardings`, or an array
/// that does not split evenly, is an ingot::Error (kInvalidArgument / kShapeMismatch) that
/// surfaces from next() at that batch, as any distribute error.
PrefetchQueue<ArrayBatch>::Distribute distribute_to(std::vector<NamedSharding> shardings);

}  // namespace ingot
