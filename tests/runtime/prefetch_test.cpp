// PrefetchQueue: the trainer contract's two-slot queue. Order, exactly-once delivery, the slot
// bound (checked inside the producer against the queue's own counters), errors at the failing
// batch, early stop while the producer waits or works, and thread exit (seen through a
// thread_local destructor that runs only when the producer thread ends). No test relies on
// timing for its verdict: waits are on conditions (with a long timeout only to fail instead of
// hanging), and sleeps in the stress test only vary the interleavings.
#include "ingot/runtime/prefetch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ingot/runtime/runtime.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using namespace std::chrono_literals;

constexpr auto kHangLimit = 60s;  // only turns a broken queue's hang into a failure

/// Sets `*flag` when the thread that last called arm() exits (thread_local destructors run at
/// thread exit, before join() returns).
struct ThreadExitFlag {
  std::atomic<bool>* flag = nullptr;
  ~ThreadExitFlag() {
    if (flag) flag->store(true);
  }
};
void arm_exit_flag(std::atomic<bool>* flag) {
  thread_local ThreadExitFlag guard;
  guard.flag = flag;
}

/// Polls `pred` until it holds; false after kHangLimit.
template <class Pred>
bool wait_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kHangLimit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

/// A gate the producer blocks on until the test opens it; records that someone is waiting.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait_for_waiter() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kHangLimit, [&] { return waiting_ > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

/// Producer of 0, 1, ..., n-1 then std::nullopt (n < 0: endless); counts its calls.
PrefetchQueue<int64_t>::Producer counting(int64_t n, std::atomic<int64_t>* calls, std::atomic<bool>* exited = nullptr) {
  return [n, calls, exited, i = int64_t{0}]() mutable -> std::optional<int64_t> {
    if (exited) arm_exit_flag(exited);
    calls->fetch_add(1);
    if (n >= 0 && i >= n) return std::nullopt;
    return i++;
  };
}

TEST(PrefetchQueue, DeliversEveryBatchOnceInProducerOrder) {
  std::atomic<int64_t> calls{0};
  std::atomic<bool> exited{false};
  PrefetchQueue<int64_t> q(counting(1000, &calls, &exited));
  EXPECT_EQ(q.slots(), 2);
  for (int64_t i = 0; i < 1000; ++i) {
    std::optional<int64_t> b = q.next();
    ASSERT_TRUE(b.has_value()) << "batch " << i;
    ASSERT_EQ(*b, i);
  }
  EXPECT_EQ(q.next(), std::nullopt);
  // The next() that saw the end joined the producer thread.
  EXPECT_TRUE(exited.load());
  EXPECT_TRUE(q.finished());
  EXPECT_EQ(q.next(), std::nullopt);  // stays finished
  const PrefetchStats s = q.stats();
  EXPECT_EQ(s.produced, 1000);
  EXPECT_EQ(s.delivered, 1000);
  EXPECT_EQ(s.discarded, 0);
  EXPECT_LE(s.max_in_flight, 2);
  EXPECT_GE(s.max_in_flight, 1);
  EXPECT_TRUE(s.producer_exited);
  EXPECT_EQ(calls.load(), 1001);  // 1000 batches and the call that returned the end
}

TEST(PrefetchQueue, EmptyProducerEndsAtOnce) {
  std::atomic<int64_t> calls{0};
  std::atomic<bool> exited{false};
  PrefetchQueue<int64_t> q(counting(0, &calls, &exited));
  EXPECT_EQ(q.next(), std::nullopt);
  EXPECT_TRUE(exited.load());
  EXPECT_EQ(q.next(), std::nullopt);
  const PrefetchStats s = q.stats();
  EXPECT_EQ(s.produced, 0);
  EXPECT_EQ(s.delivered, 0);
  EXPECT_EQ(s.max_in_flight, 1);  // the call that found the end held a slot
  EXPECT_EQ(calls.load(), 1);
}

TEST(PrefetchQueue, DistributeRunsOnTheProducerThreadOnEachBatch) {
  const std::thread::id consumer = std::this_thread::get_id();
  std::atomic<int64_t> on_consumer_thread{0};
  int64_t i = 0;
  ArrayPrefetchQueue q(
      [&i]() -> std::optional<ArrayBatch> {
        if (i == 5) return std::nullopt;
        const float v = static_cast<float>(i++);
        return ArrayBatch{testing::f32({v, v + 0.5f}), testing::i32({static_cast<int32_t>(v)})};
      },
      [&](ArrayBatch host) {
        if (std::this_thread::get_id() == consumer) on_consumer_thread.fetch_add(1);
        // Stand-in for device_put: a deep copy, scaled so the test sees it ran.
        ArrayBatch placed;
        std::vector<float> x = host[0].to_vector<float>();
        for (float& e : x) e *= 10;
        placed.push_back(testing::f32(x));
        placed.push_back(host[1].clone());
        return placed;
      });
  for (int32_t k = 0; k < 5; ++k) {
    std::optional<ArrayBatch> b = q.next();
    ASSERT_TRUE(b.has_value());
    ASSERT_EQ(b->size(), 2u);
    const float v = static_cast<float>(k);
    EXPECT_EQ((*b)[0].to_vector<float>(), (std::vector<float>{10 * v, 10 * v + 5}));
    EXPECT_EQ((*b)[1].to_vector<int32_t>(), (std::vector<int32_t>{k}));
  }
  EXPECT_EQ(q.next(), std::nullopt);
  EXPECT_EQ(on_consumer_thread.load(), 0);
}

TEST(PrefetchQueue, MoveOnlyBatches) {
  int i = 0;
  PrefetchQueue<std::unique_ptr<int>> q(
      [&i]() -> std::optional<std::unique_ptr<int>> {
        if (i == 3) return std::nullopt;
        return std::make_unique<int>(i++);
      },
      [](std::unique_ptr<int> p) {
        *p += 100;
        return p;
      });
  for (int k = 0; k < 3; ++k) {
    std::optional<std::unique_ptr<int>> b = q.next();
    ASSERT_TRUE(b.has_value() && *b);
    EXPECT_EQ(**b, 100 + k);
  }
  EXPECT_EQ(q.next(), std::nullopt);
}

// The protocol: `slots` batches are prepared at the start, then one more each time one is taken,
// never more. Inside producer call i (0-based) the queue must already have delivered at least
// i - slots + 1 batches (call i may start only while fewer than `slots` are held); the consumer
// lets the producer run ahead to the bound before every take, so an off-by-one would show.
class PrefetchSlots : public ::testing::TestWithParam<int64_t> {};

TEST_P(PrefetchSlots, PreparesSlotsBatchesThenOnePerTake) {
  const int64_t slots = GetParam();
  constexpr int64_t kBatches = 40;
  std::atomic<PrefetchQueue<int64_t>*> queue{nullptr};
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> violations{0};
  int64_t i = 0;
  PrefetchQueue<int64_t> q(
      [&]() -> std::optional<int64_t> {
        PrefetchQueue<int64_t>* self = nullptr;
        EXPECT_TRUE(wait_until([&] { return (self = queue.load()) != nullptr; }));
        const int64_t call = calls.load();
        if (self && call >= self->stats().delivered + slots) violations.fetch_add(1);
        calls.fetch_add(1);
        if (i == kBatches) return std::nullopt;
        return i++;
      },
      {}, slots);
  queue.store(&q);
  for (int64_t taken = 0; taken < kBatches; ++taken) {
    // Deterministic: the producer must reach the bound (or the end) without any further take.
    const int64_t bound = std::min(taken + slots, kBatches + 1);
    ASSERT_TRUE(wait_until([&] { return calls.load() >= bound; })) << "producer stuck at " << calls.load();
    EXPECT_EQ(calls.load(), bound) << "after " << taken << " takes";
    std::optional<int64_t> b = q.next();
    ASSERT_TRUE(b.has_value());
    ASSERT_EQ(*b, taken);
  }
  EXPECT_EQ(q.next(), std::nullopt);
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(q.stats().max_in_flight, slots);
  EXPECT_EQ(q.stats().produced, kBatches);
}

INSTANTIATE_TEST_SUITE_P(Depths, PrefetchSlots, ::testing::Values(1, 2, 3));

TEST(PrefetchQueue, StartsPreparingTwoBatchesBeforeAnyTake) {
  std::atomic<int64_t> calls{0};
  PrefetchQueue<int64_t> q(counting(-1, &calls));
  ASSERT_TRUE(wait_until([&] { return q.stats().produced >= 2; }));
  const PrefetchStats s = q.stats();
  EXPECT_EQ(s.produced, 2);
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.delivered, 0);
  EXPECT_EQ(calls.load(), 2);  // the producer waits for a slot: no third call without a take
  EXPECT_EQ(q.next(), std::optional<int64_t>(0));
  ASSERT_TRUE(wait_until([&] { return q.stats().produced >= 3; }));
  EXPECT_EQ(q.stats().produced, 3);
  EXPECT_EQ(q.stats().in_flight, 2);
  EXPECT_EQ(calls.load(), 3);
}

/// A user exception type (not ingot::Error) to check the original object is rethrown.
struct BadRecord : std::runtime_error {
  explicit BadRecord(int64_t k) : std::runtime_error("bad record"), index(k) {}
  int64_t index;
};

class PrefetchErrorAt : public ::testing::TestWithParam<int64_t> {};

TEST_P(PrefetchErrorAt, ProducerErrorSurfacesAtTheFailingBatch) {
  const int64_t k = GetParam();  // 1-based position of the failing batch
  std::atomic<bool> exited{false};
  int64_t i = 0;
  PrefetchQueue<int64_t> q([&]() -> std::optional<int64_t> {
    arm_exit_flag(&exited);
    if (i + 1 == k) throw BadRecord(k);
    return i++;
  });
  for (int64_t j = 0; j + 1 < k; ++j) EXPECT_EQ(q.next(), std::optional<int64_t>(j));
  try {
    q.next();
    ADD_FAILURE() << "next() #" << k << " did not throw";
  } catch (const BadRecord& e) {
    EXPECT_EQ(e.index, k);
  }
  EXPECT_TRUE(exited.load());  // joined before rethrowing
  EXPECT_TRUE(q.finished());
  EXPECT_EQ(q.next(), std::nullopt);  // the error is delivered once
  const PrefetchStats s = q.stats();
  EXPECT_EQ(s.delivered, k - 1);
  EXPECT_EQ(s.produced, k - 1);
  EXPECT_EQ(s.discarded, 0);
}

TEST_P(PrefetchErrorAt, DistributeErrorSurfacesAtTheFailingBatch) {
  const int64_t k = GetParam();
  std::atomic<int64_t> calls{0};
  std::atomic<bool> exited{false};
  PrefetchQueue<int64_t> q(counting(-1, &calls, &exited), [k](int64_t b) {
    if (b + 1 == k) {
      throw Error(ErrorCode::kShapeMismatch, "device_put: batch " + std::to_string(b) + " split fails");
    }
    return b * 2;
  });
  for (int64_t j = 0; j + 1 < k; ++j) EXPECT_EQ(q.next(), std::optional<int64_t>(2 * j));
  expect_error([&] { q.next(); }, ErrorCode::kShapeMismatch,
               {"device_put: batch " + std::to_string(k - 1) + " split fails"});
  EXPECT_TRUE(exited.load());
  EXPECT_EQ(calls.load(), k);  // nothing is produced after the failing batch
  EXPECT_EQ(q.next(), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(Positions, PrefetchErrorAt, ::testing::Values(1, 2, 3, 4, 17));

TEST(PrefetchQueue, EarlyStopJoinsTheProducerThread) {
  std::atomic<int64_t> calls{0};
  std::atomic<bool> exited{false};
  PrefetchQueue<int64_t> q(counting(-1, &calls, &exited));
  for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(q.next(), std::optional<int64_t>(j));
  q.stop();
  EXPECT_TRUE(exited.load());
  EXPECT_TRUE(q.finished());
  EXPECT_EQ(q.next(), std::nullopt);
  q.stop();  // idempotent
  const PrefetchStats s = q.stats();
  EXPECT_EQ(s.delivered, 3);
  EXPECT_TRUE(s.producer_exited);
  EXPECT_EQ(s.produced, s.delivered + s.discarded);
  EXPECT_LE(s.discarded, 2);
  EXPECT_EQ(calls.load(), s.produced);  // an endless producer: every call made a batch
}

TEST(PrefetchQueue, StopWhileTheProducerWaitsForASlot) {
  std::atomic<int64_t> calls{0};
  std::atomic<bool> exited{false};
  PrefetchQueue<int64_t> q(counting(-1, &calls, &exited));
  EXPECT_EQ(q.next(), std::optional<int64_t>(0));
  // Batches 1 and 2 fill both slots; the producer then waits for a slot.
  ASSERT_TRUE(wait_until([&] { return q.stats().produced >= 3; }));
  q.stop();
  EXPECT_TRUE(exited.load());
  const PrefetchStats s = q.stats();
  EXPECT_EQ(s.delivered, 1);
  EXPECT_EQ(s.discarded, 2);
  EXPECT_EQ(calls.load(), 3);
}

TEST(PrefetchQueue, StopWhileTheProducerIsInTheMiddleOfABatch) {
  Gate gate;
  std::atomic<bool> exited{false};
  int64_t i = 0;
  PrefetchQueue<int64_t> q([&]() -> std::optional<int64_t> {
    arm_exit_flag(&exited);
    if (i == 2) gate.wait();  // batch 2 blocks in the producer until the test opens the gate
    return i++;
  });
  EXPECT_EQ(q.next(), std::optional<int64_t>(0));
  ASSERT_TRUE(gate.wait_for_waiter());
  std::thread stopper([&] { q.stop(); });                 // waits for the producer call to return
  EXPECT_TRUE(wait_until([&] { return q.finished(); }));  // EXPECT: the stopper must be joined
  EXPECT_FALSE(exited.load());                            // the producer is still inside its call
  gate.open();
  stopper.join();
  EXPECT_TRUE(exited.load());
  const PrefetchStats s = q.stats();
  EXPECT_EQ(s.delivered, 1);
  EXPECT_EQ(s.produced, 3);
  EXPECT_EQ(s.discarded, 2);  // batch 1 (queued) and batch 2 (finished after the stop)
  EXPECT_EQ(q.next(), std::nullopt);
}

TEST(PrefetchQueue, StopFromAnotherThreadWakesABlockedNext) {
  Gate gate;
  std::atomic<bool> exited{false};
  PrefetchQueue<int64_t> q([&]() -> std::optional<int64_t> {
    arm_exit_flag(&exited);
    gate.wait();
    return 7;
  });
  ASSERT_TRUE(gate.wait_for_waiter());  // the producer is inside its first call
  std::optional<std::optional<int64_t>> got;
  std::thread consumer([&] { got = q.next(); });  // blocks: no batch is ready
  std::thread stopper([&] { q.stop(); });
  EXPECT_TRUE(wait_until([&] { return q.finished(); }));  // EXPECT: the threads must be joined
  gate.open();
  consumer.join();
  stopper.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, std::nullopt);
  EXPECT_TRUE(exited.load());
  EXPECT_EQ(q.stats().delivered, 0);
  EXPECT_EQ(q.stats().discarded, 1);
}

TEST(PrefetchQueue, DestructorStopsAndJoins) {
  std::atomic<int64_t> calls{0};
  std::atomic<bool> exited{false};
  {
    PrefetchQueue<int64_t> q(counting(-1, &calls, &exited));
    ASSERT_TRUE(wait_until([&] { return q.stats().produced >= 2; }));
  }
  EXPECT_TRUE(exited.load());
  EXPECT_EQ(calls.load(), 2);
}

TEST(PrefetchQueue, RejectsBadArguments) {
  expect_error([] { PrefetchQueue<int64_t> q(nullptr); }, ErrorCode::kInvalidArgument, {"producer function is empty"});
  std::atomic<int64_t> calls{0};
  for (int64_t slots : {0, -3}) {
    expect_error([&] { PrefetchQueue<int64_t> q(counting(1, &calls), {}, slots); }, ErrorCode::kInvalidArgument,
                 {"slots must be >= 1", "got " + std::to_string(slots)});
  }
  EXPECT_EQ(calls.load(), 0);  // no thread was started
}

TEST(PrefetchQueue, NextOrStopFromTheProducerThreadIsDeliveredAsAnError) {
  for (const bool call_stop : {false, true}) {
    std::atomic<PrefetchQueue<int64_t>*> queue{nullptr};
    int64_t i = 0;
    PrefetchQueue<int64_t> q([&]() -> std::optional<int64_t> {
      if (i == 1) {
        PrefetchQueue<int64_t>* self = nullptr;
        EXPECT_TRUE(wait_until([&] { return (self = queue.load()) != nullptr; }));
        if (call_stop) {
          self->stop();
        } else {
          self->next();
        }
      }
      return i++;
    });
    queue.store(&q);
    EXPECT_EQ(q.next(), std::optional<int64_t>(0));
    expect_error([&] { q.next(); }, ErrorCode::kFailedPrecondition,
                 {call_stop ? "PrefetchQueue::stop()" : "PrefetchQueue::next()", "producer thread"});
    EXPECT_EQ(q.next(), std::nullopt);
  }
}

TEST(PrefetchQueue, ConcurrentConsumersEachGetDistinctBatchesInOrder) {
  constexpr int64_t kBatches = 2000;
  std::atomic<int64_t> calls{0};
  PrefetchQueue<int64_t> q(counting(kBatches, &calls));
  std::vector<int64_t> seen[2];
  auto consume = [&](std::vector<int64_t>* out) {
    while (std::optional<int64_t> b = q.next()) out->push_back(*b);
  };
  std::thread a(consume, &seen[0]);
  std::thread b(consume, &seen[1]);
  a.join();
  b.join();
  std::set<int64_t> all;
  for (const auto& v : seen) {
    for (size_t j = 1; j < v.size(); ++j) EXPECT_LT(v[j - 1], v[j]);  // each sees producer order
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(static_cast<int64_t>(seen[0].size() + seen[1].size()), kBatches);  // none repeated
  ASSERT_EQ(static_cast<int64_t>(all.size()), kBatches);                       // none lost
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), kBatches - 1);
}

// Random sleeps in the producer, distribute and consumer vary the interleavings; each round ends
// by the data's end, a producer error, a distribute error or an early stop, chosen at random.
TEST(PrefetchQueue, StressWithRandomDelays) {
  std::mt19937_64 rng(20261130);
  auto pause = [](std::mt19937_64& r) {
    const int64_t us = static_cast<int64_t>(r() % 200);
    if (us < 60) return;  // often no pause at all
    if (us < 100) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(us - 100));
    }
  };
  for (int round = 0; round < 60; ++round) {
    const int64_t n = static_cast<int64_t>(rng() % 80);
    const int mode = static_cast<int>(rng() % 4);  // 0 end, 1 producer error, 2 distribute error, 3 stop
    const int64_t fail_at = n == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    const int64_t slots = 1 + static_cast<int64_t>(rng() % 3);
    std::mt19937_64 producer_rng(rng()), consumer_rng(rng());
    std::atomic<bool> exited{false};
    int64_t i = 0;
    {
      PrefetchQueue<int64_t> q(
          [&]() -> std::optional<int64_t> {
            arm_exit_flag(&exited);
            pause(producer_rng);
            if (i == n) return std::nullopt;
            if (mode == 1 && i == fail_at) throw BadRecord(i);
            return i++;
          },
          [&](int64_t b) {
            pause(producer_rng);
            if (mode == 2 && b == fail_at) throw Error(ErrorCode::kInternal, "copy failed");
            return b + 1000;
          },
          slots);
      std::vector<int64_t> got;
      bool threw = false;
      try {
        while (std::optional<int64_t> b = q.next()) {
          got.push_back(*b - 1000);
          pause(consumer_rng);
          if (mode == 3 && static_cast<int64_t>(got.size()) == fail_at + 1) {
            q.stop();
            break;
          }
        }
      } catch (const BadRecord& e) {
        threw = true;
        EXPECT_EQ(mode, 1);
        EXPECT_EQ(e.index, fail_at);
      } catch (const Error& e) {
        threw = true;
        EXPECT_EQ(mode, 2);
        EXPECT_EQ(e.code(), ErrorCode::kInternal);
      }
      const int64_t expected = (n == 0 || mode == 0) ? n : (mode == 3 ? fail_at + 1 : fail_at);
      ASSERT_EQ(static_cast<int64_t>(got.size()), expected) << "round " << round << " mode " << mode;
      for (int64_t j = 0; j < expected; ++j) ASSERT_EQ(got[static_cast<size_t>(j)], j) << "round " << round;
      EXPECT_EQ(threw, n > 0 && (mode == 1 || mode == 2)) << "round " << round;
      if (!(mode == 3 && n > 0)) {
        EXPECT_TRUE(exited.load()) << "round " << round;  // joined by the next() that ended it
      }
      EXPECT_LE(q.stats().max_in_flight, slots);
      q.stop();
      EXPECT_TRUE(exited.load()) << "round " << round;
      const PrefetchStats s = q.stats();
      EXPECT_EQ(s.delivered, expected);
      EXPECT_EQ(s.produced, s.delivered + s.discarded) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(PrefetchDistribute, PutsEachBatchOntoItsShardingAndReportsBadBatches) {
  Runtime runtime(RuntimeOptions{.num_cpu_devices = 2});
  const Mesh mesh({{"batch", 2}}, runtime.devices());
  const NamedSharding split(mesh, PartitionSpec{"batch"}), replicated(mesh, PartitionSpec{});
  int64_t n = 0;
  ArrayPrefetchQueue queue(
      [&]() -> std::optional<ArrayBatch> {
        ++n;
        if (n == 3) return ArrayBatch{Array::zeros({3, 2}, DType::kF32), Array::scalar(0, DType::kI32)};  // odd rows
        if (n > 3) return std::nullopt;
        return ArrayBatch{Array::full({4, 2}, static_cast<double>(n), DType::kF32),
                          Array::scalar(static_cast<double>(n), DType::kI32)};
      },
      distribute_to({split, replicated}));
  for (int64_t step = 1; step <= 2; ++step) {
    std::optional<ArrayBatch> b = queue.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ((*b)[0].sharding(), split);
    EXPECT_EQ((*b)[1].sharding(), replicated);
    ASSERT_EQ((*b)[0].shards().size(), 2u);
    EXPECT_EQ((*b)[0].shards()[1].shape(), (Shape{2, 2}));
    EXPECT_EQ(to_host((*b)[0]).to_vector<float>(), std::vector<float>(8, static_cast<float>(step)));
  }
  testing::expect_error([&] { queue.next(); }, ErrorCode::kShapeMismatch, {"size 3", "'batch'"});
}

}  // namespace
}  // namespace ingot
