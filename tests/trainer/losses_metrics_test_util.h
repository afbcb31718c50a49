// Helpers of the loss and metric tests: run a Tensor function with the interpreter and with jit
// and check that both agree.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot::testing {

inline std::vector<ir::TensorType> types_of(const std::vector<Array>& args) {
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  return types;
}

/// Traces `fn` over arguments of the types of `args` and runs it with the reference interpreter.
inline std::vector<Array> interpret_fn(const TraceFn& fn, const std::vector<Array>& args) {
  return interp::interpret(trace(fn, types_of(args), "test_fn"), args);
}

/// Runs `fn` on `args` interpreted and jit-compiled, expects equal shapes and dtypes and values
/// within |a - b| <= rtol * max(|a|, |b|, 1) (NaN only where both are NaN), and returns the
/// interpreter's outputs.
inline std::vector<Array> run_both(const TraceFn& fn, const std::vector<Array>& args, double rtol = 1e-6) {
  std::vector<Array> want = interpret_fn(fn, args);
  std::vector<Array> got = jit(fn, {.name = "losses_metrics_test"})(args);
  EXPECT_EQ(want.size(), got.size());
  for (size_t o = 0; o < std::min(want.size(), got.size()); ++o) {
    EXPECT_EQ(want[o].shape(), got[o].shape()) << "output " << o;
    EXPECT_EQ(want[o].dtype(), got[o].dtype()) << "output " << o;
    if (want[o].shape() != got[o].shape()) continue;
    const std::vector<double> w = want[o].to_doubles(), g = got[o].to_doubles();
    for (size_t i = 0; i < w.size(); ++i) {
      if (std::isnan(w[i]) || std::isnan(g[i])) {
        EXPECT_TRUE(std::isnan(w[i]) && std::isnan(g[i]))
            << "output " << o << " element " << i << ": interpreter " << w[i] << " vs jit " << g[i];
        continue;
      }
      EXPECT_LE(std::abs(w[i] - g[i]), rtol * std::max({std::abs(w[i]), std::abs(g[i]), 1.0}))
          << "output " << o << " element " << i << ": interpreter " << w[i] << " vs jit " << g[i];
    }
  }
  return want;
}

/// f64 array from values.
inline Array f64(const std::vector<double>& v, const Shape& shape) { return Array::from_vector<double>(v, shape); }

inline  /// Runs `body` inside a trace over `args` (for error tests).
    void in_trace(const std::vector<Array>& args, const std::function<void(const std::vector<Tensor>&)>& body) {
  interpret_fn(
      [&](const std::vector<Tensor>& a) {
        body(a);
        return std::vector<Tensor>{a[0]};
      },
      args);
}

}  // namespace ingot::testing
