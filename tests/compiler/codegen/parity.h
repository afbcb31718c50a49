// Parity checking: a graph compiled for the CPU (lower_to_mlir -> pipeline -> JIT) must compute
// what the reference interpreter computes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>

#include "ingot/codegen/cpu_compiler.h"
#include "ingot/jit/jit.h"
#include "ingot/interp/interpreter.h"
#include "ingot/ir/text.h"
#include "ingot/lower/lowering.h"

namespace ingot::testing {

/// Compiles `graph` for the CPU (compile_graph) and runs it on `args`. INGOT_DUMP_DIR, when set,
/// receives the dumps of every stage (the documented debug switch).
/// `lowering` selects library calls or generated loops (LoweringOptions).
inline std::vector<Array> run_compiled(const ir::Graph& graph, const std::vector<Array>& args,
                                       const codegen::CpuCompileOptions& options = {},
                                       const lower::LoweringOptions& lowering = {}) {
  codegen::CpuCompileOptions opts = options;
  if (const char* dir = std::getenv("INGOT_DUMP_DIR"); dir != nullptr && opts.dump_dir.empty()) {
    opts.dump_dir = dir;
  }
  return compile_graph(graph, opts, {}, lowering)->run(args);
}

/// The relative tolerance of an output of each dtype (see expect_parity).
using RtolFn = std::function<double(DType)>;

/// Expects compiled (with `lowering`) == interpreted for every output: bitwise where
/// `rtol(dtype)` is 0 (NaNs compare equal whatever their payload), else
/// |a - b| <= rtol * max(|a|, |b|, 1).
inline void expect_parity(const ir::Graph& graph, const std::vector<Array>& args, const RtolFn& rtol_of,
                          const lower::LoweringOptions& lowering) {
  std::vector<Array> want = interp::interpret(graph, args);
  std::vector<Array> got = run_compiled(graph, args, {}, lowering);
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape());
    ASSERT_EQ(want[o].dtype(), got[o].dtype());
    const double rtol = rtol_of(want[o].dtype());
    std::vector<double> w = want[o].to_doubles(), g = got[o].to_doubles();
    int reported = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const bool both_nan = std::isnan(w[i]) && std::isnan(g[i]);
      const bool exact = w[i] == g[i] && std::signbit(w[i]) == std::signbit(g[i]);
      const bool ok = both_nan || exact ||
                      (rtol == 0 ? (w[i] == g[i] && std::signbit(w[i]) == std::signbit(g[i]))
                                 : std::abs(w[i] - g[i]) <= rtol * std::max({std::abs(w[i]), std::abs(g[i]), 1.0}));
      if (!ok && reported++ < 5) {
        ADD_FAILURE() << "output " << o << " element " << i << ": interpreter " << w[i] << " vs compiled " << g[i]
                      << "\n"
                      << ir::print_graph(graph);
      }
    }
  }
}

/// expect_parity with one tolerance for every output (0: bitwise).
inline void expect_parity(const ir::Graph& graph, const std::vector<Array>& args, double rtol = 0,
                          const lower::LoweringOptions& lowering = {}) {
  expect_parity(graph, args, [rtol](DType) { return rtol; }, lowering);
}

/// Random array of `shape`/`dtype`: floats uniform in [lo, hi), integers in [lo, hi], bools 50/50.
inline Array random_array(const Shape& shape, DType dtype, uint64_t seed, double lo = -2, double hi = 2) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  for (double& x : v) {
    if (is_bool(dtype))
      x = static_cast<double>(rng() % 2);
    else if (is_floating(dtype))
      x = std::uniform_real_distribution<double>(lo, hi)(rng);
    else
      x = std::floor(std::uniform_real_distribution<double>(lo, hi + 1)(rng));
  }
  return Array::from_doubles(v, shape, dtype);
}

}  // namespace ingot::testing
