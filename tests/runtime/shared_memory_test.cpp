// What is specific to the shared-memory group (the conformance suite both host-memory backends
// pass is collective_test.cpp): all_reduce reduces in rank order, so every rank gets the same
// bits as a sequential sum over ranks 0, 1, ...; large arrays and chunks that do not divide the
// element count; the timeout names the ranks that did not arrive and wakes the other waiting
// ranks; back-to-back calls after agreement errors.
#include "ingot/runtime/shared_memory.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collective_checks.h"
#include "test_util.h"

namespace ingot {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;
using testing::Group;
using testing::run_ranks;
using Clock = std::chrono::steady_clock;

// Rank r's element i: magnitudes from 1e-8 to 1e8, so float sums depend on their order.
float wide_value(int r, int64_t i) {
  const float scale = static_cast<float>(std::pow(10.0, static_cast<double>((i * 7 + r * 3) % 17 - 8)));
  return scale * (1.0f + 0.123f * static_cast<float>(r) - 0.01f * static_cast<float>(i % 13));
}

TEST(SharedMemory, AllReduceIsTheRankOrderSumBitForBitOnEveryRank) {
  const int size = 5;
  const int64_t n = 1003;  // chunks of 200 and 201 elements
  Group g = make_shared_memory_group(size, 10.0);
  std::vector<std::vector<float>> results(size);
  run_ranks(g, [&](int rank, Communicator& c) {
    std::vector<float> mine(n);
    for (int64_t i = 0; i < n; ++i) mine[i] = wide_value(rank, i);
    Array a = Array::from_vector(mine, {n});
    c.all_reduce(a, ReduceOp::kSum);
    results[rank] = a.to_vector<float>();
  });
  for (int64_t i = 0; i < n; ++i) {
    float expected = wide_value(0, i);
    for (int r = 1; r < size; ++r) expected += wide_value(r, i);
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(std::memcmp(&results[r][i], &expected, sizeof(float)), 0)
          << "rank " << r << " element " << i << ": " << results[r][i] << " vs " << expected;
    }
  }
}

TEST(SharedMemory, MeanIsTheRankOrderSumDividedOnce) {
  Group g = make_shared_memory_group(3, 10.0);
  std::vector<std::vector<double>> results(3);
  run_ranks(g, [&](int rank, Communicator& c) {
    Array a = Array::from_vector<double>({0.1 * (rank + 1), 1e16 * (rank == 1 ? -1 : 1), 1.0}, {3});
    c.all_reduce(a, ReduceOp::kMean);
    results[rank] = a.to_vector<double>();
  });
  const std::vector<double> expected = {((0.1 + 0.2) + 0.30000000000000004) / 3, ((1e16 + -1e16) + 1e16) / 3, 1.0};
  for (int r = 0; r < 3; ++r) {
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(results[r][i], expected[i]) << r << " " << i;
  }
}

TEST(SharedMemory, LargeAllReduceIsCorrect) {
  const int64_t n = 10'000'000;  // 40 MB of f32 per rank
  Group g = make_shared_memory_group(4, 60.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1024 + rank);
    Array a = Array::from_vector(v, {n / 1000, 1000});
    c.all_reduce(a, ReduceOp::kSum);
    const float* got = a.data<float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (got[i] != static_cast<float>(4 * (i % 1024) + 6)) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "rank " << rank;
  });
}

TEST(SharedMemory, FewerElementsThanRanks) {
  Group g = make_shared_memory_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    Array a = Array::from_vector<int32_t>({rank, -rank}, {2});  // ranks 0 and 2 reduce nothing
    c.all_reduce(a, ReduceOp::kMax);
    EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{3, 0}));
  });
}

TEST(SharedMemory, ManyBackToBackCallsWithAgreementErrorsBetween) {
  Group g = make_shared_memory_group(3, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    for (int k = 0; k < 300; ++k) {
      Array a = Array::full({rank == 2 && k % 3 == 0 ? 2 : 3}, k + rank, DType::kI64);
      if (k % 3 == 0) {  // shapes differ: every rank fails, nothing moves
        expect_error([&] { c.all_reduce(a, ReduceOp::kSum); }, ErrorCode::kShapeMismatch,
                     {"rank 2 called all_reduce(sum) of i64 (2,)"});
        continue;
      }
      c.all_reduce(a, ReduceOp::kSum);
      ASSERT_EQ(a.to_vector<int64_t>(), std::vector<int64_t>(3, 3 * k + 3)) << "call " << k;
      Array out = Array::zeros({9}, DType::kI64);
      c.all_gather(a, out);
      ASSERT_EQ(out.to_vector<int64_t>(), std::vector<int64_t>(9, 3 * k + 3)) << "call " << k;
    }
  });
}

TEST(SharedMemory, TimeoutNamesTheMissingRanksAndWakesTheOtherWaiters) {
  Group g = make_shared_memory_group(4, 0.4);
  // Ranks 0 and 1 call; ranks 2 and 3 never do. Rank 0 arrives first and times out first;
  // rank 1 then fails at once instead of waiting out its own timeout.
  std::vector<std::optional<Error>> errors(2);
  std::vector<Clock::duration> waited(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::this_thread::sleep_for(r * 200ms);
      const auto start = Clock::now();
      try {
        g[r]->barrier();
      } catch (const Error& e) {
        errors[r] = e;
      }
      waited[r] = Clock::now() - start;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(errors[0] && errors[1]);
  EXPECT_EQ(errors[0]->code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(std::string(errors[0]->what())
                .find("barrier on rank 0 of 4 timed out after 0.4 s: "
                      "rank(s) 2, 3 did not arrive"),
            std::string::npos)
      << errors[0]->what();
  EXPECT_EQ(errors[1]->code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(std::string(errors[1]->what()).find("rank 0 waited 0.4 s"), std::string::npos) << errors[1]->what();
  EXPECT_LT(waited[1], 350ms) << "rank 1 waited out its own timeout";
  // Broken on every rank, including those that never called.
  for (int r = 0; r < 4; ++r) {
    Array a = Array::zeros({1}, DType::kF32);
    expect_error([&] { g[r]->all_reduce(a, ReduceOp::kSum); }, ErrorCode::kFailedPrecondition,
                 {"rank " + std::to_string(r) + " of 4", "broken", "did not arrive"});
  }
}

TEST(SharedMemory, ArgumentErrorsNameTheBackend) {
  Group g = make_shared_memory_group(1, 1.0);
  Device fake_cuda(DeviceKind::kCuda, 3, std::make_unique<HostAllocator>());
  Array a = Array::zeros({2}, DType::kF32, &fake_cuda);
  expect_error([&] { g[0]->broadcast(a, 0); }, ErrorCode::kInvalidArgument,
               {"SharedMemoryCommunicator::broadcast", "cuda:3", "shared-memory communicator needs host arrays"});
}

}  // namespace
}  // namespace ingot
