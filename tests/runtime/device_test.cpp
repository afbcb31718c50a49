// Virtual CPU devices: the Runtime, per-device allocators, and the per-device FIFO workers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/runtime.h"
#include "ingot/runtime/worker.h"
#include "test_util.h"

namespace ingot {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;

// Spins until `pred` holds or `timeout` passes; returns whether it held.
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(Runtime, CreatesNamedCpuDevicesWithSeparateAllocators) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 4});
  ASSERT_EQ(rt.num_devices(), 4);
  ASSERT_EQ(rt.devices().size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(rt.device(i).name(), fmt::format("cpu:{}", i));
    EXPECT_EQ(rt.device(i).id(), i);
    EXPECT_EQ(rt.device(i).kind(), DeviceKind::kCpu);
    EXPECT_EQ(rt.devices()[static_cast<size_t>(i)], &rt.device(i));
    EXPECT_NE(&rt.device(i), &default_cpu_device());
    EXPECT_FALSE(rt.device(i).has_worker());  // started on first use
  }
  EXPECT_EQ(&rt.device("cpu:2"), &rt.device(2));

  const int64_t host_before = default_cpu_device().allocator().stats().bytes_in_use;
  Array a = Array::zeros({10}, DType::kF32, &rt.device(1));  // 40 bytes on cpu:1 only
  Array b = Array::zeros({3}, DType::kI64, &rt.device(3));   // 24 bytes on cpu:3 only
  EXPECT_EQ(rt.device(0).allocator().stats().bytes_in_use, 0);
  EXPECT_EQ(rt.device(1).allocator().stats().bytes_in_use, 40);
  EXPECT_EQ(rt.device(1).allocator().stats().num_allocations, 1);
  EXPECT_EQ(rt.device(2).allocator().stats().bytes_in_use, 0);
  EXPECT_EQ(rt.device(3).allocator().stats().bytes_in_use, 24);
  EXPECT_EQ(default_cpu_device().allocator().stats().bytes_in_use, host_before);
  EXPECT_EQ(rt.num_live_buffers(), 2);
  EXPECT_EQ(&a.device(), &rt.device(1));
}

TEST(Runtime, DefaultsToOneDevice) {
  Runtime rt;
  EXPECT_EQ(rt.num_devices(), 1);
  EXPECT_EQ(rt.device(0).name(), "cpu:0");
}

TEST(Runtime, RejectsBadOptionsAndLookups) {
  expect_error([] { Runtime rt(RuntimeOptions{.num_cpu_devices = 0}); }, ErrorCode::kInvalidArgument,
               {"num_cpu_devices = 0", "[1, 1024]"});
  expect_error([] { Runtime rt(RuntimeOptions{.num_cpu_devices = -3}); }, ErrorCode::kInvalidArgument,
               {"num_cpu_devices = -3"});
  expect_error([] { Runtime rt(RuntimeOptions{.num_cpu_devices = 1025}); }, ErrorCode::kInvalidArgument,
               {"num_cpu_devices = 1025"});
  Runtime rt(RuntimeOptions{.num_cpu_devices = 2});
  expect_error([&] { rt.device(2); }, ErrorCode::kOutOfRange, {"index 2", "[0, 2)"});
  expect_error([&] { rt.device(-1); }, ErrorCode::kOutOfRange, {"index -1"});
  expect_error([&] { rt.device("cpu:7"); }, ErrorCode::kNotFound, {"'cpu:7'", "cpu:0, cpu:1"});
}

TEST(Worker, RunsWorkAndCompletesTheEvent) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 1});
  std::atomic<int> value{0};
  std::thread::id ran_on;
  std::shared_ptr<Event> e = rt.device(0).enqueue([&] {
    ran_on = std::this_thread::get_id();
    value = 42;
  });
  e->wait();
  EXPECT_TRUE(e->ready());
  EXPECT_EQ(value.load(), 42);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(rt.device(0).has_worker());
}

TEST(Worker, RunsWorkInFifoOrderPerDeviceOnOneThread) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 2});
  constexpr int kItems = 200;
  std::vector<int> order;  // touched only by cpu:0's worker until its last event is waited for
  std::vector<std::thread::id> threads;
  std::vector<std::shared_ptr<Event>> events;
  // A first item that waits for `gate` makes the others queue up behind it.
  std::atomic<bool> gate{false};
  events.push_back(rt.device(0).enqueue([&] { wait_for([&] { return gate.load(); }); }));
  for (int i = 0; i < kItems; ++i) {
    events.push_back(rt.device(0).enqueue([&, i] {
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    }));
  }
  for (const auto& e : events) EXPECT_FALSE(e->ready());
  gate = true;
  events.back()->wait();
  // FIFO: every earlier event is complete once the last one is.
  for (const auto& e : events) EXPECT_TRUE(e->ready());
  ASSERT_EQ(order.size(), static_cast<size_t>(kItems));
  for (int i = 0; i < kItems; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  for (const auto& t : threads) EXPECT_EQ(t, threads[0]);

  std::thread::id other;
  rt.device(1).enqueue([&] { other = std::this_thread::get_id(); })->wait();
  EXPECT_NE(other, threads[0]);
}

TEST(Worker, DevicesRunConcurrently) {
  // Each of 4 devices runs an item that waits until all 4 items have started: this finishes only
  // if the devices' workers run at the same time (a serial executor would time out and fail).
  Runtime rt(RuntimeOptions{.num_cpu_devices = 4});
  std::atomic<int> started{0};
  std::atomic<int> saw_all{0};
  std::vector<std::shared_ptr<Event>> events;
  for (Device* d : rt.devices()) {
    events.push_back(d->enqueue([&] {
      ++started;
      if (wait_for([&] { return started.load() == 4; }, 10s)) ++saw_all;
    }));
  }
  when_all(events)->wait();
  EXPECT_EQ(saw_all.load(), 4);
}

TEST(Worker, ExceptionsSurfaceFromWaitAndTheWorkerKeepsGoing) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 1});
  Device& d = rt.device(0);
  std::shared_ptr<Event> bad =
      d.enqueue([] { throw Error(ErrorCode::kInvalidArgument, "copy of shard 3 failed", "retry"); });
  std::shared_ptr<Event> other = d.enqueue([] { throw std::runtime_error("plain failure"); });
  std::atomic<bool> later{false};
  std::shared_ptr<Event> ok = d.enqueue([&] { later = true; });
  ok->wait();
  EXPECT_TRUE(later.load());
  EXPECT_TRUE(bad->ready());
  for (int i = 0; i < 2; ++i) {  // every wait() rethrows
    expect_error([&] { bad->wait(); }, ErrorCode::kInvalidArgument, {"copy of shard 3 failed"});
  }
  EXPECT_THROW(
      {
        try {
          other->wait();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "plain failure");
          throw;
        }
      },
      std::runtime_error);
  // when_all waits for everything, then rethrows the first error in list order.
  expect_error([&] { when_all({ok, bad, other})->wait(); }, ErrorCode::kInvalidArgument, {"shard 3"});
  EXPECT_TRUE(when_all({ok, bad})->ready());
}

TEST(Worker, EventCompletesOnlyAfterCapturesAreReleased) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 1});
  Device& d = rt.device(0);
  Array a = Array::zeros({256}, DType::kF32, &d);
  std::shared_ptr<Event> e = d.enqueue([a] { (void)a.size(); });
  a = Array();
  e->wait();
  // The work held the last reference; it was dropped before the event completed.
  EXPECT_EQ(d.allocator().stats().bytes_in_use, 0);
}

TEST(Worker, WaitingOnLaterWorkOfTheSameDeviceIsAnErrorNotADeadlock) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 2});
  Device& d0 = rt.device(0);
  Device& d1 = rt.device(1);
  std::shared_ptr<Event> outer = d0.enqueue([&] { d0.enqueue([] {})->wait(); });
  expect_error([&] { outer->wait(); }, ErrorCode::kFailedPrecondition, {"work on cpu:0", "never return"});
  std::shared_ptr<Event> sync = d0.enqueue([&] { d0.synchronize(); });
  expect_error([&] { sync->wait(); }, ErrorCode::kFailedPrecondition, {"cpu:0"});
  // Waiting for another device's work from a worker is fine.
  std::atomic<int> v{0};
  d0.enqueue([&] { d1.enqueue([&] { v = 7; })->wait(); })->wait();
  EXPECT_EQ(v.load(), 7);
}

TEST(Worker, RejectsEmptyWorkAndWorkAfterShutdown) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 1});
  Device& d = rt.device(0);
  expect_error([&] { d.enqueue(std::function<void()>()); }, ErrorCode::kInvalidArgument,
               {"empty work function", "cpu:0"});
  std::atomic<int> ran{0};
  d.enqueue([&] {
    std::this_thread::sleep_for(10ms);
    ++ran;
  });
  d.shutdown_worker();  // runs what is queued, then joins
  EXPECT_EQ(ran.load(), 1);
  EXPECT_FALSE(d.has_worker());
  expect_error([&] { d.enqueue([] {}); }, ErrorCode::kFailedPrecondition, {"worker of cpu:0 was shut down"});
  d.shutdown_worker();  // idempotent
  d.synchronize();      // nothing to wait for
}

TEST(Worker, SynchronizeWaitsForQueuedWork) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 3});
  std::atomic<int> done{0};
  for (Device* d : rt.devices()) {
    for (int i = 0; i < 3; ++i) {
      d->enqueue([&] {
        std::this_thread::sleep_for(2ms);
        ++done;
      });
    }
  }
  rt.synchronize();
  EXPECT_EQ(done.load(), 9);
}

TEST(Runtime, DestructionRunsQueuedWorkAndJoinsWorkers) {
  std::atomic<int> done{0};
  std::atomic<bool> gate{false};
  std::vector<std::shared_ptr<Event>> events;
  std::thread opener;
  {
    Runtime rt(RuntimeOptions{.num_cpu_devices = 2});
    for (Device* d : rt.devices()) {
      events.push_back(d->enqueue([&] { wait_for([&] { return gate.load(); }); }));
    }
    for (int i = 0; i < 5; ++i) {
      for (Device* d : rt.devices()) {
        events.push_back(d->enqueue([&] {
          std::this_thread::sleep_for(1ms);
          ++done;
        }));
      }
    }
    EXPECT_EQ(done.load(), 0);  // everything waits behind the closed gate
    opener = std::thread([&] {
      std::this_thread::sleep_for(20ms);
      gate = true;
    });
  }
  // The destructor returned only after every item ran on its (now joined) worker.
  EXPECT_EQ(done.load(), 10);
  for (const auto& e : events) EXPECT_TRUE(e->ready());
  opener.join();
}

TEST(Runtime, DetectsBuffersThatWouldOutliveIt) {
  Array survivor;
  {
    Runtime rt(RuntimeOptions{.num_cpu_devices = 2});
    Array a = Array::zeros({4}, DType::kF32, &rt.device(1));
    EXPECT_EQ(rt.num_live_buffers(), 1);
    expect_error([&] { rt.check_no_live_buffers(); }, ErrorCode::kFailedPrecondition, {"cpu:1 (1 buffer, 16 bytes)"});
    a = Array();
    EXPECT_EQ(rt.num_live_buffers(), 0);
    rt.check_no_live_buffers();
    survivor = Array::full({2}, 3.0, DType::kI32, &rt.device(0));
    ::testing::internal::CaptureStderr();
  }
  const std::string report = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find("Runtime destroyed while buffers"), std::string::npos) << report;
  EXPECT_NE(report.find("cpu:0 (1 buffer, 8 bytes)"), std::string::npos) << report;
  // The devices were kept alive, so the survivor is still usable and can be freed safely.
  EXPECT_EQ(survivor.to_vector<int32_t>(), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(survivor.device().name(), "cpu:0");
  expect_error([&] { survivor.device().enqueue([] {}); }, ErrorCode::kFailedPrecondition, {"shut down"});
  survivor = Array();
}

TEST(Worker, DefaultDeviceCanRunWork) {
  std::atomic<int> v{0};
  default_cpu_device().enqueue([&] { v = 5; })->wait();
  EXPECT_EQ(v.load(), 5);
}

TEST(CompletionEvent, CompletesOnce) {
  CompletionEvent e(std::thread::id{}, "manual work");
  EXPECT_FALSE(e.ready());
  e.complete();
  EXPECT_TRUE(e.ready());
  e.wait();
  expect_error([&] { e.complete(); }, ErrorCode::kFailedPrecondition, {"manual work was already completed"});
  EXPECT_TRUE(when_all({})->ready());
  when_all({nullptr})->wait();
}

}  // namespace
}  // namespace ingot
