// Finite-difference gradient checking for ingot's autodiff (used by every autodiff test).
//
// check_grads(fn, args) compares the reverse-mode gradient of a random projection of fn's
// outputs, L(args) = sum_k <w_k, fn(args)_k> with fixed random weights w_k (so every output
// element's cotangent is exercised, as jax.test_util.check_grads does with random cotangents),
// against central differences (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) in f64.
// Error of central differences: O(eps^2 f''') truncation + O(ulp(L) / eps) rounding; with
// eps = 1e-6 in f64 both are ~1e-10 relative for smooth functions of O(1) inputs, so the default
// tolerance |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|) with rtol = 1e-6,
// atol = 1e-8 leaves a wide margin yet catches any wrong rule (errors of O(1)).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ingot/autodiff/autodiff.h"
#include "ingot/interp/interpreter.h"
#include "ingot/trace/ops.h"

namespace ingot::testing {

struct GradCheckOptions {
  double eps = 1e-6;   ///< finite-difference step (f64 inputs)
  double rtol = 1e-6;  ///< relative tolerance
  double atol = 1e-8;  ///< absolute tolerance
  uint64_t seed = 0;   ///< seed of the projection weights
  /// Arguments to differentiate with respect to; empty = every floating-point argument.
  std::vector<int64_t> argnums;
};

/// Random f64 array of `shape` with entries uniform in [lo, hi).
inline Array random_f64(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  for (double& x : v) x = u(rng);
  return Array::from_vector<double>(v, shape);
}

/// The scalar loss sum_k sum(w_k * out_k) over fn's floating-point outputs, with w_k random
/// constants of each output's type.
inline TraceFn projected_loss(const TraceFn& fn, uint64_t seed) {
  return [fn, seed](const std::vector<Tensor>& args) {
    std::vector<Tensor> outs = fn(args);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    Tensor loss;
    for (const Tensor& o : outs) {
      if (!is_floating(o.dtype())) continue;
      std::vector<double> w(static_cast<size_t>(o.size()));
      for (double& x : w) x = u(rng);
      Tensor term = sum(multiply(o, constant(Array::from_doubles(w, o.shape(), o.dtype()))));
      loss = loss.valid() ? add(loss, term) : term;
    }
    if (!loss.valid()) {
      throw Error(ErrorCode::kInvalidArgument, "check_grads: fn has no floating-point output");
    }
    return std::vector<Tensor>{loss};
  };
}

/// Checks reverse-mode gradients of `fn` at `args` against central differences; reports every
/// mismatching element with its analytic and numeric values through GoogleTest.
inline void check_grads(const TraceFn& fn, const std::vector<Array>& args, GradCheckOptions options = {}) {
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  std::vector<int64_t> argnums = options.argnums;
  if (argnums.empty()) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (is_floating(args[i].dtype())) argnums.push_back(static_cast<int64_t>(i));
    }
  }
  TraceFn loss = projected_loss(fn, options.seed);
  ir::Graph forward = trace(loss, types, "loss");
  ir::Graph vg = trace(value_and_grad(loss, argnums), types, "value_and_grad");
  std::vector<Array> result = interp::interpret(vg, args);
  ASSERT_EQ(result.size(), 1 + argnums.size());
  const double value = result[0].element_as_double(0);
  const double forward_value = interp::interpret(forward, args).at(0).element_as_double(0);
  EXPECT_EQ(value, forward_value) << "value_and_grad's value differs from the forward pass";

  for (size_t k = 0; k < argnums.size(); ++k) {
    const size_t a = static_cast<size_t>(argnums[k]);
    const Array& grad = result[1 + k];
    ASSERT_EQ(grad.shape(), args[a].shape()) << "gradient " << k << " has the wrong shape";
    ASSERT_EQ(grad.dtype(), args[a].dtype()) << "gradient " << k << " has the wrong dtype";
    int reported = 0;
    for (int64_t i = 0; i < args[a].size(); ++i) {
      auto eval_at = [&](double delta) {
        std::vector<Array> shifted = args;
        shifted[a] = args[a].clone();
        std::vector<double> v = shifted[a].to_doubles();
        v[static_cast<size_t>(i)] += delta;
        shifted[a] = Array::from_doubles(v, args[a].shape(), args[a].dtype());
        return interp::interpret(forward, shifted).at(0).element_as_double(0);
      };
      const double numeric = (eval_at(options.eps) - eval_at(-options.eps)) / (2 * options.eps);
      const double analytic = grad.element_as_double(i);
      const double tol = options.atol + options.rtol * std::max(std::abs(analytic), std::abs(numeric));
      const bool ok = std::abs(analytic - numeric) <= tol || (std::isnan(analytic) && std::isnan(numeric));
      if (!ok && reported++ < 5) {
        ADD_FAILURE() << "d loss / d arg" << a << "[" << i << "]: analytic " << analytic << " vs numeric " << numeric
                      << " (tolerance " << tol << ")";
      }
    }
  }
}

/// Evaluates value_and_grad(fn, argnums) at args and returns the gradients (for exact-value
/// convention tests). fn must return a scalar.
inline std::vector<Array> grads_at(const TraceFn& fn, const std::vector<Array>& args,
                                   std::vector<int64_t> argnums = {0}) {
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  const size_t n = argnums.size();
  ir::Graph g = trace(grad(fn, std::move(argnums)), types, "grad");
  std::vector<Array> out = interp::interpret(g, args);
  out.resize(n);
  return out;
}

}  // namespace ingot::testing
