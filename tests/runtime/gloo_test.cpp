// Collectives over Gloo: 4 (and 3, 2, 1) ranks in one process with one thread per rank, the
// errors of the Communicator contract, process-group bootstrap (from_env, connect_gloo) and two
// processes on loopback (this binary re-executes itself as the worker processes).
#include "ingot/runtime/gloo.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ingot/runtime/tcp_store.h"
#include "child_process.h"
#include "test_util.h"

extern char** environ;

namespace ingot {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;
using testing::expect_values;
using Clock = std::chrono::steady_clock;
using Group = std::vector<std::unique_ptr<Communicator>>;

constexpr DType kReduceDTypes[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin};

// Runs body(rank, communicator) on one thread per rank and joins them; an exception escaping a
// rank is a test failure.
void run_ranks(Group& group, const std::function<void(int, Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(static_cast<int>(r), *group[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " threw: " << e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// Element i of rank r's contribution: small integers of both signs (exact in every dtype), so
// sums are exact and integer means exercise truncation toward zero.
double contribution(int r, int64_t i) { return static_cast<double>((r * 7 + i * 3) % 11 - 5); }

std::vector<double> contributions(int r, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = contribution(r, i);
  return v;
}

// The reduction over `size` ranks of element i (integers: mean truncates toward zero).
double expected_reduction(ReduceOp op, int size, int64_t i, bool integer) {
  double sum = 0, hi = -1e300, lo = 1e300;
  for (int r = 0; r < size; ++r) {
    double v = contribution(r, i);
    sum += v;
    hi = std::max(hi, v);
    lo = std::min(lo, v);
  }
  switch (op) {
    case ReduceOp::kSum: return sum;
    case ReduceOp::kMean: return integer ? std::trunc(sum / size) : sum / size;
    case ReduceOp::kMax: return hi;
    case ReduceOp::kMin: return lo;
  }
  return 0;
}

double tolerance(DType d) { return d == DType::kF32 ? 1e-5 : d == DType::kF64 ? 1e-12 : 0.0; }

// A port that was free a moment ago (bound to 127.0.0.1:0, read back, closed).
// ---------------------------------------------------------------------------------------------
// One process, one thread per rank.

TEST(GlooLocal, GroupHasRanksSizeAndBackend) {
  Group g = make_local_gloo_group(4, 10.0);
  ASSERT_EQ(g.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(g[r]->rank(), r);
    EXPECT_EQ(g[r]->size(), 4);
    EXPECT_EQ(g[r]->backend(), "gloo");
    auto* gloo = dynamic_cast<GlooCommunicator*>(g[r].get());
    ASSERT_NE(gloo, nullptr);
    EXPECT_DOUBLE_EQ(gloo->timeout(), 10.0);
  }
}

TEST(GlooLocal, AllReduceEveryOpAndDType) {
  Group g = make_local_gloo_group(4, 10.0);
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

TEST(GlooLocal, AllReduceLargeArraysAndExactInt64) {
  Group g = make_local_gloo_group(4, 10.0);
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

TEST(GlooLocal, AllReduceIntegerSumsWrapAndFloatMaxMinPropagateNaN) {
  Group g = make_local_gloo_group(4, 10.0);
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

TEST(GlooLocal, AllGatherAnyDType) {
  Group g = make_local_gloo_group(4, 10.0);
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

// reduce_scatter of (size * 3, 5) blocks on `size` ranks, every op and each of `dtypes`, with
// `options`.
void check_reduce_scatter(int size, const GlooOptions& options,
                          const std::vector<DType>& dtypes = std::vector<DType>(
                              std::begin(kReduceDTypes), std::end(kReduceDTypes))) {
  Group g = make_local_gloo_group(size, 10.0, options);
  const int64_t block = 15;
  run_ranks(g, [&](int rank, Communicator& c) {
    for (DType d : dtypes) {
      for (ReduceOp op : kOps) {
        Array in = Array::from_doubles(contributions(rank, size * block), {size * 3, 5}, d);
        Array before = in.clone();
        Array out = Array::full({3, 5}, -99, d);
        c.reduce_scatter(in, out, op);
        std::vector<double> expected;
        for (int64_t i = 0; i < block; ++i) {
          expected.push_back(expected_reduction(op, size, rank * block + i, is_integer(d)));
        }
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + reduce_op_name(op));
        expect_values(out, expected, tolerance(d));
        EXPECT_TRUE(in.bitwise_equal(before)) << "reduce_scatter modified its input";
      }
    }
  });
}

TEST(GlooLocal, ReduceScatterPowerOfTwoRanksHalvingDoubling) { check_reduce_scatter(4, {}); }

TEST(GlooLocal, ReduceScatterThreeRanksRingAllReduce) { check_reduce_scatter(3, {}); }

TEST(GlooLocal, ReduceScatterInSmallChunks) {
  GlooOptions options;
  options.reduce_scatter_chunk_bytes = 96;  // blocks of 15 elements in 2-5 pieces
  check_reduce_scatter(4, options, {DType::kF64, DType::kI32});
  check_reduce_scatter(3, options, {DType::kF64, DType::kI32});
}

TEST(GlooLocal, ReduceScatterLargeBlocks) {
  Group g = make_local_gloo_group(4, 10.0);
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

TEST(GlooLocal, BroadcastFromEveryRoot) {
  Group g = make_local_gloo_group(4, 10.0);
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

TEST(GlooLocal, BarrierWaitsForEveryRank) {
  Group g = make_local_gloo_group(4, 10.0);
  std::atomic<int> arrived{0};
  run_ranks(g, [&](int rank, Communicator& c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40 * rank));
    arrived.fetch_add(1);
    c.barrier();
    EXPECT_EQ(arrived.load(), 4) << "rank " << rank << " left the barrier early";
  });
}

TEST(GlooLocal, SizeZeroArrays) {
  Group g = make_local_gloo_group(4, 10.0);
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

TEST(GlooLocal, SingleRankGroup) {
  Group g = make_local_gloo_group(1, 5.0);
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
  expect_error([&] { c.reduce_scatter(in, view, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
               {"share one buffer"});
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(GlooErrors, ArgumentErrorsOnEveryRank) {
  Group g = make_local_gloo_group(4, 10.0);
  run_ranks(g, [&](int, Communicator& c) {
    Array in = Array::zeros({2, 3}, DType::kF32);
    Array bad_out = Array::zeros({7, 3}, DType::kF32);
    expect_error([&] { c.all_gather(in, bad_out); }, ErrorCode::kShapeMismatch,
                 {"all_gather", "(2, 3)", "(7, 3)", "(8, 3)"});
    Array i64_out = Array::zeros({8, 3}, DType::kI64);
    expect_error([&] { c.all_gather(in, i64_out); }, ErrorCode::kDTypeMismatch, {"f32", "i64"});
    Array scalar = Array::scalar(1, DType::kF32);
    expect_error([&] { c.all_gather(scalar, bad_out); }, ErrorCode::kInvalidArgument,
                 {"rank >= 1", "()"});
    Array rs_in = Array::zeros({9, 3}, DType::kF32);
    Array rs_out = Array::zeros({2, 3}, DType::kF32);
    expect_error([&] { c.reduce_scatter(rs_in, rs_out, ReduceOp::kSum); },
                 ErrorCode::kShapeMismatch, {"reduce_scatter", "(9, 3)", "(2, 3)", "(8, 3)"});
    Array bf = Array::zeros({4}, DType::kBF16);
    expect_error([&] { c.all_reduce(bf, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
                 {"all_reduce", "bf16"});
    Array b_in = Array::zeros({8}, DType::kBool);
    Array b_out = Array::zeros({2}, DType::kBool);
    expect_error([&] { c.reduce_scatter(b_in, b_out, ReduceOp::kMax); },
                 ErrorCode::kInvalidArgument, {"reduce_scatter", "bool"});
    expect_error([&] { c.broadcast(in, 4); }, ErrorCode::kInvalidArgument, {"root 4", "[0, 4)"});
    expect_error([&] { c.broadcast(in, -1); }, ErrorCode::kInvalidArgument, {"root -1"});
    Array invalid;
    expect_error([&] { c.all_reduce(invalid, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
                 {"invalid"});
    // Argument errors leave the group usable.
    Array ok = Array::full({2}, 1.5, DType::kF64);
    c.all_reduce(ok, ReduceOp::kSum);
    expect_values(ok, {6.0, 6.0});
  });
}

TEST(GlooErrors, ArraysOnOtherDevicesAreRejected) {
  Group g = make_local_gloo_group(2, 10.0);
  // A device object of another kind (its memory is host memory, but the kind is what counts).
  Device fake_cuda(DeviceKind::kCuda, 7, std::make_unique<HostAllocator>());
  run_ranks(g, [&](int, Communicator& c) {
    Array a = Array::zeros({2}, DType::kF32, &fake_cuda);
    expect_error([&] { c.all_reduce(a, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
                 {"cuda:7", "host arrays"});
  });
}

TEST(GlooErrors, RanksThatDisagreeAllGetTheSameError) {
  Group g = make_local_gloo_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    // Shapes differ on rank 3.
    Array a = Array::zeros({rank == 3 ? 5 : 4}, DType::kF32);
    expect_error([&] { c.all_reduce(a, ReduceOp::kSum); }, ErrorCode::kShapeMismatch,
                 {"rank 0 called all_reduce(sum) of f32 (4,)", "rank 3 called all_reduce(sum) "
                                                              "of f32 (5,)"});
    // Dtypes differ on rank 1.
    Array b = Array::zeros({4}, rank == 1 ? DType::kI32 : DType::kF32);
    expect_error([&] { c.all_reduce(b, ReduceOp::kMax); }, ErrorCode::kDTypeMismatch,
                 {"f32 (4,)", "rank 1", "i32 (4,)"});
    // Different ops, different collectives, different roots.
    expect_error([&] { c.all_reduce(a, rank == 2 ? ReduceOp::kMax : ReduceOp::kSum); },
                 ErrorCode::kFailedPrecondition, {"all_reduce(sum)", "rank 2", "all_reduce(max)"});
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

TEST(GlooErrors, OneRanksBadArgumentsFailEveryRank) {
  Group g = make_local_gloo_group(4, 10.0);
  run_ranks(g, [&](int rank, Communicator& c) {
    Array in = Array::full({1, 2}, rank, DType::kI32);
    Array out = Array::zeros({rank == 1 ? 3 : 4, 2}, DType::kI32);
    if (rank == 1) {
      expect_error([&] { c.all_gather(in, out); }, ErrorCode::kShapeMismatch, {"(1, 2)", "(3, 2)"});
    } else {
      expect_error([&] { c.all_gather(in, out); }, ErrorCode::kFailedPrecondition,
                   {"rank 1 rejected its arguments"});
    }
    Array good = Array::zeros({4, 2}, DType::kI32);
    c.all_gather(in, good);
    EXPECT_EQ(good.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  });
}

TEST(GlooErrors, MissingPeerTimesOutAndBreaksTheCommunicator) {
  Group g = make_local_gloo_group(2, 0.3);
  Communicator& c = *g[0];  // rank 1 never calls
  Array a = Array::zeros({4}, DType::kF32);
  auto start = Clock::now();
  expect_error([&] { c.all_reduce(a, ReduceOp::kSum); }, ErrorCode::kFailedPrecondition,
               {"all_reduce", "rank 0 of 2", "0.3 s"});
  EXPECT_LT(Clock::now() - start, 5s);
  expect_error([&] { c.barrier(); }, ErrorCode::kFailedPrecondition, {"broken"});
}

TEST(GlooErrors, PeerGoingAwayMidCollectiveIsAnErrorBeforeTheTimeout) {
  Group g = make_local_gloo_group(2, 20.0);
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

TEST(GlooErrors, WithoutVerificationCollectivesStillWork) {
  GlooOptions options;
  options.verify_calls = false;
  Group g = make_local_gloo_group(4, 10.0, options);
  run_ranks(g, [&](int rank, Communicator& c) {
    Array a = Array::from_vector<int64_t>({rank, -rank}, {2});
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{6, -6}));
    Array out = Array::zeros({8}, DType::kI64);
    c.all_gather(a, out);
    EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{6, -6, 6, -6, 6, -6, 6, -6}));
    Array rs = Array::zeros({2}, DType::kI64);
    c.reduce_scatter(out, rs, ReduceOp::kMin);
    EXPECT_EQ(rs.to_vector<int64_t>(), (std::vector<int64_t>{6, -6}));
    Array b = Array::full({1}, rank, DType::kF32);
    c.broadcast(b, 2);
    EXPECT_EQ(b.to_vector<float>()[0], 2.0f);
    c.barrier();
    // Local argument errors are still raised on the calling rank.
    expect_error([&] { c.broadcast(b, 9); }, ErrorCode::kInvalidArgument, {"root 9"});
  });
}

TEST(GlooErrors, GroupCreationArguments) {
  expect_error([] { make_local_gloo_group(0); }, ErrorCode::kInvalidArgument, {"size 0"});
  expect_error([] { make_local_gloo_group(2, 0.0); }, ErrorCode::kInvalidArgument, {"timeout 0"});
  expect_error([] { make_local_gloo_group(2, std::nan("")); }, ErrorCode::kInvalidArgument,
               {"timeout"});
  GlooOptions iface;
  iface.interface = "nosuchif0";
  expect_error([&] { make_local_gloo_group(2, 5.0, iface); }, ErrorCode::kInvalidArgument,
               {"interface 'nosuchif0'"});
  GlooOptions chunk;
  chunk.reduce_scatter_chunk_bytes = 0;
  expect_error([&] { make_local_gloo_group(2, 5.0, chunk); }, ErrorCode::kInvalidArgument,
               {"reduce_scatter_chunk_bytes = 0"});
  GlooOptions lo;
  lo.interface = "lo";  // binding an interface by name works
  Group g = make_local_gloo_group(2, 5.0, lo);
  run_ranks(g, [](int rank, Communicator& c) {
    Array a = Array::full({1}, rank + 1, DType::kI32);
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(a.to_vector<int32_t>()[0], 3);
  });
}

// ---------------------------------------------------------------------------------------------
// Process-group bootstrap.

// Sets (or unsets, for nullopt) environment variables for the scope of a test.
class EnvGuard {
 public:
  void set(const char* name, std::optional<std::string> value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(GlooProcessGroup, FromEnvReadsTorchrunVariables) {
  EnvGuard env;
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "3");
  env.set("MASTER_ADDR", "10.1.2.3");
  env.set("MASTER_PORT", "29511");
  ProcessGroupOptions g = ProcessGroupOptions::from_env();
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.world_size, 3);
  EXPECT_EQ(g.master_addr, "10.1.2.3");
  EXPECT_EQ(g.master_port, 29511);
  EXPECT_EQ(g.timeout, 30.0);
}

TEST(GlooProcessGroup, FromEnvErrorsNameTheVariableAndValue) {
  EnvGuard env;
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  auto expect_env_error = [&](const char* name, std::optional<std::string> value,
                              std::vector<std::string> needles) {
    EnvGuard one;
    one.set(name, value);
    expect_error([] { ProcessGroupOptions::from_env(); }, ErrorCode::kInvalidArgument, needles);
  };
  expect_env_error("RANK", std::nullopt, {"RANK is not set"});
  expect_env_error("RANK", "abc", {"RANK='abc'", "not an integer"});
  expect_env_error("RANK", "1x", {"RANK='1x'"});
  expect_env_error("RANK", "2", {"RANK=2", "[0, WORLD_SIZE=2)"});
  expect_env_error("RANK", "-1", {"RANK=-1"});
  expect_env_error("WORLD_SIZE", std::nullopt, {"WORLD_SIZE is not set"});
  expect_env_error("WORLD_SIZE", "0", {"WORLD_SIZE=0"});
  expect_env_error("MASTER_ADDR", std::nullopt, {"MASTER_ADDR is not set"});
  expect_env_error("MASTER_ADDR", "", {"MASTER_ADDR=''"});
  expect_env_error("MASTER_PORT", "70000", {"MASTER_PORT=70000", "[1, 65535]"});
  expect_env_error("MASTER_PORT", "", {"MASTER_PORT=''"});
}

TEST(GlooProcessGroup, ConnectGlooOptionErrors) {
  ProcessGroupOptions g;
  g.world_size = 2;
  g.rank = 2;
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"rank 2", "[0, world_size=2)"});
  g.rank = 0;
  g.master_port = 0;
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"master_port 0"});
  g.master_port = 29500;
  g.master_addr = "";
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"master_addr is empty"});
  g.master_addr = "127.0.0.1";
  g.timeout = -1;
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"timeout -1"});
}

// Runs connect_gloo for every rank in `ranks` on its own thread (same port); returns each rank's
// communicator or error.
struct Joined {
  std::unique_ptr<Communicator> comm;
  std::optional<Error> error;
};
std::vector<Joined> connect_threads(const std::vector<ProcessGroupOptions>& ranks) {
  std::vector<Joined> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        out[i].comm = connect_gloo(ranks[i]);
      } catch (const Error& e) {
        out[i].error = e;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

ProcessGroupOptions pg(int rank, int world_size, int port, double timeout) {
  ProcessGroupOptions g;
  g.rank = rank;
  g.world_size = world_size;
  g.master_addr = "127.0.0.1";
  g.master_port = port;
  g.timeout = timeout;
  return g;
}

TEST(GlooProcessGroup, ConnectGlooThreeRanksInOneProcess) {
  int port = testing::free_port();
  std::vector<Joined> joined = connect_threads({pg(0, 3, port, 10), pg(1, 3, port, 10),
                                                pg(2, 3, port, 10)});
  Group group;
  for (size_t r = 0; r < joined.size(); ++r) {
    ASSERT_FALSE(joined[r].error) << "rank " << r << ": " << joined[r].error->what();
    ASSERT_EQ(joined[r].comm->rank(), static_cast<int>(r));
    ASSERT_EQ(joined[r].comm->size(), 3);
    group.push_back(std::move(joined[r].comm));
  }
  run_ranks(group, [](int rank, Communicator& c) {
    Array a = Array::from_vector<int32_t>({rank, 10 * rank}, {2});
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{3, 30}));
  });
  // The store was stopped once everyone connected: its port is free again.
  TcpStoreServer again("127.0.0.1", port);
  EXPECT_EQ(again.port(), port);
}

TEST(GlooProcessGroup, MissingRankTimesOutNamingAddressAndTimeout) {
  int port = testing::free_port();
  std::string address = "127.0.0.1:" + std::to_string(port);
  auto start = Clock::now();
  // Rank 0 serves the store but rank 1 never comes.
  expect_error([&] { connect_gloo(pg(0, 2, port, 0.5)); }, ErrorCode::kFailedPrecondition,
               {"connect_gloo", "rank 0 of 2", address, "0.5 s"});
  // Rank 1 finds no store.
  expect_error([&] { connect_gloo(pg(1, 2, port, 0.3)); }, ErrorCode::kFailedPrecondition,
               {address, "0.3 s"});
  EXPECT_LT(Clock::now() - start, 6s);
}

TEST(GlooProcessGroup, WorldSizeMismatchIsAnError) {
  int port = testing::free_port();
  // A timeout far beyond the test: rank 0 learns of the mismatch from rank 1's report, at once.
  const auto start = Clock::now();
  std::vector<Joined> joined = connect_threads({pg(0, 2, port, 20.0), pg(1, 3, port, 20.0)});
  EXPECT_LT(Clock::now() - start, 10s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(joined[r].error) << r;
    EXPECT_EQ(joined[r].error->code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(joined[r].error->what()).find("world_size is 3 on rank 1 but 2 on rank 0"),
              std::string::npos)
        << joined[r].error->what();
  }
  EXPECT_NE(std::string(joined[0].error->what()).find("rank 1 disagrees with rank 0"), std::string::npos);
}

TEST(GlooProcessGroup, AMissingRankAndAnUnresolvableMasterAreNamed) {
  expect_error([] { connect_gloo(pg(0, 2, testing::free_port(), 0.3)); }, ErrorCode::kFailedPrecondition,
               {"rank 0 of 2 waited for rank 1, which did not join"});
  ProcessGroupOptions bad = pg(1, 2, 29500, 0.3);
  bad.master_addr = "no-such-host.invalid";
  expect_error([&] { connect_gloo(bad); }, ErrorCode::kInvalidArgument, {"MASTER_ADDR", "no-such-host.invalid"});
}

// Two "processes" (threads here) with two ranks each: global ranks 2p and 2p + 1, and a
// one-rank-per-process group beside them.
TEST(GlooProcessGroup, SeveralRanksPerProcess) {
  const int port = testing::free_port();
  std::vector<GlooProcessGroup> groups(2);
  std::vector<std::optional<Error>> errors(2);
  {
    std::vector<std::thread> threads;
    for (int p = 0; p < 2; ++p) {
      threads.emplace_back([&, p] {
        try {
          groups[p] = connect_gloo_processes(pg(p, 2, port, 10.0), 2);
        } catch (const Error& e) {
          errors[p] = e;
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  ASSERT_FALSE(errors[0] || errors[1]) << (errors[0] ? errors[0]->what() : errors[1]->what());
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(groups[p].ranks.size(), 2u);
    EXPECT_EQ(groups[p].process->rank(), p);
    EXPECT_EQ(groups[p].process->size(), 2);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(groups[p].ranks[i]->rank(), 2 * p + i);
      EXPECT_EQ(groups[p].ranks[i]->size(), 4);
    }
  }
  // The 4 device ranks sum their rank + 1; the 2 process ranks broadcast process 1's value.
  std::vector<Array> values(4), process_values(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      values[r] = Array::full({3}, r + 1.0, DType::kF32);
      groups[r / 2].ranks[r % 2]->all_reduce(values[r], ReduceOp::kSum);
    });
  }
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      process_values[p] = Array::full({2}, 10.0 * p, DType::kF64);
      groups[p].process->broadcast(process_values[p], 1);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(values[r].to_vector<float>(), (std::vector<float>{10, 10, 10})) << r;
  for (int p = 0; p < 2; ++p) EXPECT_EQ(process_values[p].to_vector<double>(), (std::vector<double>{10, 10})) << p;
}

TEST(GlooProcessGroup, RanksPerProcessMismatchAndRangeAreErrors) {
  expect_error([] { connect_gloo_processes(pg(0, 1, 1, 1.0), 0); }, ErrorCode::kInvalidArgument,
               {"local_ranks 0 is outside [1, 4096]"});
  const int port = testing::free_port();
  std::vector<std::optional<Error>> errors(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      try {
        connect_gloo_processes(pg(p, 2, port, 1.0), p + 1);
      } catch (const Error& e) {
        errors[p] = e;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int p = 0; p < 2; ++p) {
    ASSERT_TRUE(errors[p]) << p;
    EXPECT_EQ(errors[p]->code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(errors[p]->what()).find("2 ranks per process on rank 1 but 1 on rank 0"), std::string::npos)
        << errors[p]->what();
  }
}

// ---------------------------------------------------------------------------------------------
// Two processes on loopback: this test starts two copies of this binary running
// GlooProcessWorker.RunsCollectives with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set.

constexpr const char* kWorkerFlag = "INGOT_GLOO_TEST_WORKER";

TEST(GlooProcesses, TwoProcessesOnLoopback) {
  const int port = testing::free_port();
  const char* filter = "GlooProcessWorker.RunsCollectives";
  pid_t workers[2] = {testing::spawn_self(filter, testing::rank_env(0, 2, port, kWorkerFlag)),
                      testing::spawn_self(filter, testing::rank_env(1, 2, port, kWorkerFlag))};
  auto deadline = Clock::now() + 60s;
  for (int r = 0; r < 2; ++r) {
    if (workers[r] <= 0) continue;
    EXPECT_EQ(testing::wait_child(workers[r], deadline), 0) << "worker rank " << r << " failed";
  }
}

TEST(GlooProcessWorker, RunsCollectives) {
  if (std::getenv(kWorkerFlag) == nullptr || std::getenv("RANK") == nullptr) {
    GTEST_SKIP() << "worker of GlooProcesses.TwoProcessesOnLoopback: runs only in the processes "
                    "that test starts (RANK and "
                 << kWorkerFlag << " unset)";
  }
  ProcessGroupOptions options = ProcessGroupOptions::from_env();
  options.timeout = 20;
  std::unique_ptr<Communicator> c = connect_gloo(options);
  const int rank = c->rank();
  ASSERT_EQ(rank, options.rank);
  ASSERT_EQ(c->size(), 2);
  const int64_t big = int64_t{1} << 40;
  Array a = Array::from_vector<int64_t>({rank + 1, big * rank, -rank}, {3});
  c->all_reduce(a, ReduceOp::kSum);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{3, big, -1}));
  Array m = Array::from_vector<double>({0.5 + rank, -2.0 * rank}, {2});
  c->all_reduce(m, ReduceOp::kMean);
  expect_values(m, {1.0, -1.0}, 1e-12);
  Array in = Array::from_vector<float>({1.0f * rank, 2.0f * rank + 0.5f}, {1, 2});
  Array gathered = Array::zeros({2, 2}, DType::kF32);
  c->all_gather(in, gathered);
  EXPECT_EQ(gathered.to_vector<float>(), (std::vector<float>{0.0f, 0.5f, 1.0f, 2.5f}));
  Array rs_in = Array::from_vector<int32_t>({rank, 5, -rank, 7 * rank}, {4});
  Array rs_out = Array::zeros({2}, DType::kI32);
  c->reduce_scatter(rs_in, rs_out, ReduceOp::kMax);
  EXPECT_EQ(rs_out.to_vector<int32_t>(),
            rank == 0 ? (std::vector<int32_t>{1, 5}) : (std::vector<int32_t>{0, 7}));
  Array b = Array::full({3}, 10.0 * rank, DType::kF32);
  c->broadcast(b, 1);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{10, 10, 10}));
  c->barrier();
}

}  // namespace
}  // namespace ingot
