// The conformance suite of the host-memory communicators: the SAME checks against a local Gloo
// group (make_local_gloo_group, TCP loopback) and a shared-memory group
// (make_shared_memory_group): every op and dtype, exact int64, wrap-around, NaN, all_gather of
// any dtype, reduce_scatter, broadcast from every root, barrier, size 0, one rank, argument
// errors on every rank, disagreeing ranks, one rank's bad arguments, a missing peer's timeout
// and the broken state after it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "collective_checks.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/shared_memory.h"
#include "test_util.h"

namespace ingot {
namespace {

using namespace std::chrono_literals;
using testing::check_reduce_scatter;
using testing::contributions;
using testing::expect_error;
using testing::expect_values;
using testing::expected_reduction;
using testing::Group;
using testing::kOps;
using testing::kReduceDTypes;
using testing::run_ranks;
using testing::tolerance;
using Clock = std::chrono::steady_clock;

// A host-memory communicator under test: its name in test names, backend() and group factory.
struct Backend {
  std::string name;
  std::string backend;
  std::function<Group(int size, double timeout)> make;
};

// gtest prints the parameter by its name (instead of its bytes).
void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

class Collective : public ::testing::TestWithParam<Backend> {
 protected:
  Group make_group(int size, double timeout = 30.0) { return GetParam().make(size, timeout); }
};

TEST_P(Collective, GroupHasRanksSizeAndBackend) {
  Group g = make_group(4, 10.0);
  ASSERT_EQ(g.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(g[r]->rank(), r);
    EXPECT_EQ(g[r]->size(), 4);
    EXPECT_EQ(g[r]->backend(), GetParam().backend);
  }
}

TEST_P(Collective, GroupCreationArguments) {
  expect_error([&] { make_group(0); }, ErrorCode::kInvalidArgument, {"size 0"});
  expect_error([&] { make_group(2, 0.0); }, ErrorCode::kInvalidArgument, {"timeout 0"});
  expect_error([&] { make_group(2, -1.0); }, ErrorCode::kInvalidArgument, {"timeout -1"});
  expect_error([&] { make_group(2, std::nan("")); }, ErrorCode::kInvalidArgument, {"timeout"});
  expect_error([&] { make_group(2, std::numeric_limits<double>::infinity()); }, ErrorCode::kInvalidArgument,
               {"timeout inf"});
}

TEST_P(Collective, ReduceScatterFourRanks) {
  Group g = make_group(4, 10.0);
  check_reduce_scatter(g);
}

TEST_P(Collective, ReduceScatterThreeRanks) {
  Group g = make_group(3, 10.0);
  check_reduce_scatter(g);
}

TEST_P(Collective, AllReduceEveryOpAndDType) {
  Group g = make_group(4, 10.0);
  const Shape shape{3, 5};
  run_ranks(g, [&](int rank, Communicator& c) {
    for (DType d : kReduceDTypes) {
      for (ReduceOp op : kOps) {
        Array a = Array::from_doubles(contributions(rank, 15), shape, d);
        c.all_reduce(a, op);
        EXPECT_EQ(a.shape(), shape);
        std::vector<double> expected;
        for (int64_t i = 0; i < 15; ++i) {
          expected.push_back(expected_reduction(op, 4, i, is_integer(d)));
        }
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + reduce_op_name(op));
        expect_values(a, expected, tolerance(d));
      }
    }
  });
}

TEST_P(Collective, AllReduceLargeArraysAndExactInt64) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    // Many ring segments: 100003 floats.
    const int64_t n = 100003;
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 97) * 0.5 + rank * 0.25);
    Array a = Array::from_vector(v, {n});
    c.all_reduce(a, ReduceOp::kSum);
    std::vector<float> got = a.to_vector<float>();
    for (int64_t i = 0; i < n; i += 997) {
      EXPECT_NEAR(got[i], (i % 97) * 2.0 + 1.5, 1e-4) << "element " << i;
    }
    // int64 beyond 2^53 is exact (no trip through double).
    const int64_t big = int64_t{1} << 60;
    Array b = Array::from_vector<int64_t>({big + rank, -big + 3 * rank, rank}, {3});
    c.all_reduce(b, ReduceOp::kSum);
    EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{4 * big + 6, -4 * big + 18, 6}));
    Array m = Array::from_vector<int64_t>({big + rank, -7 - rank}, {2});
    c.all_reduce(m, ReduceOp::kMean);  // (4*2^60 + 6) / 4 and -34 / 4 -> -8 (truncation)
    EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{big + 1, -8}));
  });
}

TEST_P(Collective, AllReduceIntegerSumsWrapAndFloatMaxMinPropagateNaN) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    int32_t v = rank == 0 ? std::numeric_limits<int32_t>::max() : 1;
    Array a = Array::from_vector<int32_t>({v}, {1});
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(a.to_vector<int32_t>()[0], std::numeric_limits<int32_t>::min() + 2);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
      Array f = Array::from_vector<float>({rank == 2 ? nan : 1.0f * rank, 1.0f * rank}, {2});
      c.all_reduce(f, op);
      std::vector<float> got = f.to_vector<float>();
      EXPECT_TRUE(std::isnan(got[0])) << reduce_op_name(op);
      EXPECT_EQ(got[1], op == ReduceOp::kMax ? 3.0f : 0.0f);
    }
  });
}

TEST_P(Collective, AllGatherAnyDType) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    for (DType d : {DType::kF32, DType::kI64, DType::kBool, DType::kU8, DType::kF16}) {
      std::vector<double> mine;
      for (int i = 0; i < 6; ++i) mine.push_back(d == DType::kBool ? (rank + i) % 2 : rank * 10 + i);
      Array in = Array::from_doubles(mine, {2, 3}, d);
      Array out = Array::zeros({8, 3}, d);
      c.all_gather(in, out);
      std::vector<double> expected;
      for (int r = 0; r < 4; ++r) {
        for (int i = 0; i < 6; ++i) expected.push_back(d == DType::kBool ? (r + i) % 2 : r * 10 + i);
      }
      SCOPED_TRACE(dtype_name(d));
      expect_values(out, expected);
      expect_values(in, mine);  // the input is untouched
    }
  });
}

TEST_P(Collective, ReduceScatterLargeBlocks) {
  Group g = make_group(4, 10.0);
  const int64_t rows = 1000, cols = 7, block = rows * cols;
  run_ranks(g, [&](int rank, Communicator& c) {
    std::vector<float> v(4 * block);
    for (int64_t i = 0; i < 4 * block; ++i) v[i] = static_cast<float>(i % 13 + rank);
    Array in = Array::from_vector(v, {4 * rows, cols});
    Array out = Array::zeros({rows, cols}, DType::kF32);
    c.reduce_scatter(in, out, ReduceOp::kSum);
    std::vector<float> got = out.to_vector<float>();
    for (int64_t i = 0; i < block; ++i) {
      int64_t global = rank * block + i;
      ASSERT_EQ(got[i], static_cast<float>(4 * (global % 13) + 6)) << "element " << i;
    }
  });
}

TEST_P(Collective, BroadcastFromEveryRoot) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    for (int root = 0; root < 4; ++root) {
      for (DType d : {DType::kF64, DType::kI32, DType::kU8}) {
        std::vector<double> mine = {rank * 1.0, rank + 10.0, 100.0 - rank};
        Array a = Array::from_doubles(mine, {3}, d);
        c.broadcast(a, root);
        SCOPED_TRACE("root " + std::to_string(root) + " " + std::string(dtype_name(d)));
        expect_values(a, {root * 1.0, root + 10.0, 100.0 - root});
      }
    }
  });
}

TEST_P(Collective, BarrierWaitsForEveryRank) {
  Group g = make_group(4, 10.0);
  std::atomic<int> arrived{0};
  run_ranks(g, [&](int rank, Communicator& c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40 * rank));
    arrived.fetch_add(1);
    c.barrier();
    EXPECT_EQ(arrived.load(), 4) << "rank " << rank << " left the barrier early";
  });
}

TEST_P(Collective, SizeZeroArrays) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    Array a = Array::zeros({0}, DType::kF32);
    c.all_reduce(a, ReduceOp::kMean);
    EXPECT_EQ(a.shape(), (Shape{0}));
    Array b = Array::zeros({2, 0}, DType::kI64);
    c.all_reduce(b, ReduceOp::kMax);
    Array in = Array::zeros({0, 3}, DType::kF64);
    Array out = Array::zeros({0, 3}, DType::kF64);
    c.all_gather(in, out);
    c.reduce_scatter(in, out, ReduceOp::kSum);
    c.broadcast(a, 1);
    // Shapes are still checked for empty arrays.
    Array wrong = Array::zeros({0, 4}, DType::kF64);
    expect_error([&] { c.all_gather(in, wrong); }, ErrorCode::kShapeMismatch, {"(0, 3)", "(0, 4)"});
    // And the group still works afterwards.
    Array one = Array::full({1}, rank, DType::kI32);
    c.all_reduce(one, ReduceOp::kSum);
    EXPECT_EQ(one.to_vector<int32_t>()[0], 6);
  });
}

TEST_P(Collective, SingleRankGroup) {
  Group g = make_group(1, 5.0);
  Communicator& c = *g[0];
  EXPECT_EQ(c.size(), 1);
  Array a = Array::from_vector<int32_t>({-7, 9}, {2});
  c.all_reduce(a, ReduceOp::kMean);
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{-7, 9}));
  Array in = Array::from_vector<float>({1, 2}, {2});
  Array out = Array::zeros({2}, DType::kF32);
  c.all_gather(in, out);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 2}));
  Array rs = Array::zeros({2}, DType::kF32);
  c.reduce_scatter(in, rs, ReduceOp::kMax);
  EXPECT_EQ(rs.to_vector<float>(), (std::vector<float>{1, 2}));
  c.broadcast(a, 0);
  c.barrier();
  // `in` and `out` must not share a buffer.
  expect_error([&] { c.all_gather(in, in); }, ErrorCode::kInvalidArgument, {"share one buffer"});
  Array view = in.reshaped({2});
  expect_error([&] { c.reduce_scatter(in, view, ReduceOp::kSum); }, ErrorCode::kInvalidArgument, {"share one buffer"});
}

TEST_P(Collective, ArgumentErrorsOnEveryRank) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int, Communicator& c) {
    Array in = Array::zeros({2, 3}, DType::kF32);
    Array bad_out = Array::zeros({7, 3}, DType::kF32);
    expect_error([&] { c.all_gather(in, bad_out); }, ErrorCode::kShapeMismatch,
                 {"all_gather", "(2, 3)", "(7, 3)", "(8, 3)"});
    Array i64_out = Array::zeros({8, 3}, DType::kI64);
    expect_error([&] { c.all_gather(in, i64_out); }, ErrorCode::kDTypeMismatch, {"f32", "i64"});
    Array scalar = Array::scalar(1, DType::kF32);
    expect_error([&] { c.all_gather(scalar, bad_out); }, ErrorCode::kInvalidArgument, {"rank >= 1", "()"});
    Array rs_in = Array::zeros({9, 3}, DType::kF32);
    Array rs_out = Array::zeros({2, 3}, DType::kF32);
    expect_error([&] { c.reduce_scatter(rs_in, rs_out, ReduceOp::kSum); }, ErrorCode::kShapeMismatch,
                 {"reduce_scatter", "(9, 3)", "(2, 3)", "(8, 3)"});
    Array bf = Array::zeros({4}, DType::kBF16);
    expect_error([&] { c.all_reduce(bf, ReduceOp::kSum); }, ErrorCode::kInvalidArgument, {"all_reduce", "bf16"});
    Array b_in = Array::zeros({8}, DType::kBool);
    Array b_out = Array::zeros({2}, DType::kBool);
    expect_error([&] { c.reduce_scatter(b_in, b_out, ReduceOp::kMax); }, ErrorCode::kInvalidArgument,
                 {"reduce_scatter", "bool"});
    expect_error([&] { c.broadcast(in, 4); }, ErrorCode::kInvalidArgument, {"root 4", "[0, 4)"});
    expect_error([&] { c.broadcast(in, -1); }, ErrorCode::kInvalidArgument, {"root -1"});
    Array invalid;
    expect_error([&] { c.all_reduce(invalid, ReduceOp::kSum); }, ErrorCode::kInvalidArgument, {"invalid"});
    // Argument errors leave the group usable.
    Array ok = Array::full({2}, 1.5, DType::kF64);
    c.all_reduce(ok, ReduceOp::kSum);
    expect_values(ok, {6.0, 6.0});
  });
}

TEST_P(Collective, ArraysOnOtherDevicesAreRejected) {
  Group g = make_group(2, 10.0);
  // A device object of another kind (its memory is host memory, but the kind is what counts).
  Device fake_cuda(DeviceKind::kCuda, 7, std::make_unique<HostAllocator>());
  run_ranks(g, [&](int, Communicator& c) {
    Array a = Array::zeros({2}, DType::kF32, &fake_cuda);
    expect_error([&] { c.all_reduce(a, ReduceOp::kSum); }, ErrorCode::kInvalidArgument, {"cuda:7", "host arrays"});
  });
}

TEST_P(Collective, RanksThatDisagreeAllGetTheSameError) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    // Shapes differ on rank 3.
    Array a = Array::zeros({rank == 3 ? 5 : 4}, DType::kF32);
    expect_error([&] { c.all_reduce(a, ReduceOp::kSum); }, ErrorCode::kShapeMismatch,
                 {"rank 0 called all_reduce(sum) of f32 (4,)",
                  "rank 3 called all_reduce(sum) "
                  "of f32 (5,)"});
    // Dtypes differ on rank 1.
    Array b = Array::zeros({4}, rank == 1 ? DType::kI32 : DType::kF32);
    expect_error([&] { c.all_reduce(b, ReduceOp::kMax); }, ErrorCode::kDTypeMismatch,
                 {"f32 (4,)", "rank 1", "i32 (4,)"});
    // Different ops, different collectives, different roots.
    expect_error([&] { c.all_reduce(a, rank == 2 ? ReduceOp::kMax : ReduceOp::kSum); }, ErrorCode::kFailedPrecondition,
                 {"all_reduce(sum)", "rank 2", "all_reduce(max)"});
    Array x = Array::zeros({4}, DType::kF32);
    expect_error(
        [&] {
          if (rank == 0) {
            c.barrier();
          } else {
            c.all_reduce(x, ReduceOp::kSum);
          }
        },
        ErrorCode::kFailedPrecondition, {"rank 0 called barrier", "rank 1 called all_reduce"});
    expect_error([&] { c.broadcast(x, rank == 0 ? 1 : 0); }, ErrorCode::kInvalidArgument,
                 {"from root 1", "from root 0"});
    // The group still works.
    Array ok = Array::full({3}, rank, DType::kI64);
    c.all_reduce(ok, ReduceOp::kMax);
    EXPECT_EQ(ok.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 3}));
  });
}

TEST_P(Collective, OneRanksBadArgumentsFailEveryRank) {
  Group g = make_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    Array in = Array::full({1, 2}, rank, DType::kI32);
    Array out = Array::zeros({rank == 1 ? 3 : 4, 2}, DType::kI32);
    if (rank == 1) {
      expect_error([&] { c.all_gather(in, out); }, ErrorCode::kShapeMismatch, {"(1, 2)", "(3, 2)"});
    } else {
      expect_error([&] { c.all_gather(in, out); }, ErrorCode::kFailedPrecondition, {"rank 1 rejected its arguments"});
    }
    Array good = Array::zeros({4, 2}, DType::kI32);
    c.all_gather(in, good);
    EXPECT_EQ(good.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  });
}

TEST_P(Collective, MissingPeerTimesOutAndBreaksTheCommunicator) {
  Group g = make_group(2, 0.3);
  Communicator& c = *g[0];  // rank 1 never calls
  Array a = Array::zeros({4}, DType::kF32);
  auto start = Clock::now();
  expect_error([&] { c.all_reduce(a, ReduceOp::kSum); }, ErrorCode::kFailedPrecondition,
               {"all_reduce", "rank 0 of 2", "0.3 s"});
  EXPECT_LT(Clock::now() - start, 5s);
  expect_error([&] { c.barrier(); }, ErrorCode::kFailedPrecondition, {"broken"});
}

TEST_P(Collective, PeerGoingAwayMidCollectiveIsAnErrorBeforeTheTimeout) {
  Group g = make_group(2, 20.0);
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    g[1].reset();  // rank 1 goes away (as a crashed process would) while rank 0 waits
  });
  Array a = Array::zeros({4}, DType::kF32);
  auto start = Clock::now();
  expect_error([&] { g[0]->all_reduce(a, ReduceOp::kSum); }, ErrorCode::kFailedPrecondition,
               {"all_reduce", "rank 0 of 2"});
  EXPECT_LT(Clock::now() - start, 10s);
  closer.join();
}

INSTANTIATE_TEST_SUITE_P(
    HostMemory, Collective,
    ::testing::Values(Backend{"Gloo", "gloo",
                              [](int size, double timeout) { return make_local_gloo_group(size, timeout); }},
                      Backend{"SharedMemory", "shared_memory",
                              [](int size, double timeout) { return make_shared_memory_group(size, timeout); }}),
    [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

}  // namespace
}  // namespace ingot
