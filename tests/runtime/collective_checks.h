// Group-agnostic helpers of the collective conformance tests (tests/runtime/collective_test.cpp
// runs them against every host-memory Communicator; gloo_test.cpp uses them for its Gloo-only
// cases): one thread per rank, exact small-integer contributions and their reductions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/communicator.h"
#include "test_util.h"

namespace ingot::testing {

/// One communicator per rank, element r being rank r.
using Group = std::vector<std::unique_ptr<Communicator>>;

inline constexpr DType kReduceDTypes[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin};

// Runs body(rank, communicator) on one thread per rank and joins them; an exception escaping a
// rank is a test failure.
inline void run_ranks(Group& group, const std::function<void(int, Communicator&)>& body) {
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
inline double contribution(int r, int64_t i) { return static_cast<double>((r * 7 + i * 3) % 11 - 5); }

inline std::vector<double> contributions(int r, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = contribution(r, i);
  return v;
}

// The reduction over `size` ranks of element i (integers: mean truncates toward zero).
inline double expected_reduction(ReduceOp op, int size, int64_t i, bool integer) {
  double sum = 0, hi = -1e300, lo = 1e300;
  for (int r = 0; r < size; ++r) {
    double v = contribution(r, i);
    sum += v;
    hi = std::max(hi, v);
    lo = std::min(lo, v);
  }
  switch (op) {
    case ReduceOp::kSum:
      return sum;
    case ReduceOp::kMean:
      return integer ? std::trunc(sum / size) : sum / size;
    case ReduceOp::kMax:
      return hi;
    case ReduceOp::kMin:
      return lo;
  }
  return 0;
}

inline double tolerance(DType d) { return d == DType::kF32 ? 1e-5 : d == DType::kF64 ? 1e-12 : 0.0; }

// reduce_scatter of (size * 3, 5) blocks on the ranks of `g`, every op and each of `dtypes`.
inline void check_reduce_scatter(Group& g,
                                 const std::vector<DType>& dtypes = std::vector<DType>(std::begin(kReduceDTypes),
                                                                                       std::end(kReduceDTypes))) {
  const int size = static_cast<int>(g.size());
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

}  // namespace ingot::testing
