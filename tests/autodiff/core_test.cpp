// Tests of the reverse-mode machinery (vjp, grad, value_and_grad, pullbacks, symbolic zeros,
// fan-out accumulation, errors) on small functions.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::check_grads;
using testing::expect_error;
using testing::expect_values;
using testing::grads_at;

Array f64v(const std::vector<double>& v) { return Array::from_vector<double>(v, {static_cast<int64_t>(v.size())}); }

TEST(Autodiff, FanOutAccumulates) {
  // f(x) = x * x + x  ->  f'(x) = 2x + 1
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{add(multiply(a[0], a[0]), a[0])}; };
  check_grads(f, {f64v({0.5, -2.0, 3.0})});
}

TEST(Autodiff, ValueAndGradLayout) {
  // loss = sum(x * y) (scalar via multiply then exp of a scalar product is not needed here)
  TraceFn f = [](const std::vector<Tensor>& a) {
    Tensor p = multiply(a[0], a[1]);
    return std::vector<Tensor>{exp(multiply(p, p)), p};
  };
  ir::TensorType s{{}, DType::kF64};
  ir::Graph g = trace(value_and_grad(f, {0, 1}, /*has_aux=*/true), {s, s});
  std::vector<Array> out = interp::interpret(g, {Array::scalar(0.5, DType::kF64), Array::scalar(2.0, DType::kF64)});
  ASSERT_EQ(out.size(), 4u);  // loss, aux, dx, dy
  const double p = 1.0, e = std::exp(p * p);
  expect_values(out[0], {e}, 1e-15);
  expect_values(out[1], {p});
  expect_values(out[2], {e * 2 * p * 2.0}, 1e-12);  // d/dx exp((xy)^2) = e * 2p * y
  expect_values(out[3], {e * 2 * p * 0.5}, 1e-12);
}

TEST(Autodiff, GradIgnoresOtherArgumentsAndDeadBranches) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    Tensor unused = exp(a[1]);  // does not reach the output
    (void)unused;
    return std::vector<Tensor>{multiply(a[0], a[0])};
  };
  std::vector<Array> g = grads_at(f, {Array::scalar(3.0, DType::kF64), Array::scalar(1.0, DType::kF64)}, {0, 1});
  expect_values(g[0], {6.0});
  expect_values(g[1], {0.0});  // symbolic zero materialised as zeros
}

TEST(Autodiff, SymbolicZerosEmitNoWork) {
  // Differentiating w.r.t. y only: nothing flows into x's branch.
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{add(exp(a[0]), multiply(a[1], a[1]))}; };
  ir::TensorType s{{}, DType::kF64};
  ir::Graph vg = value_and_grad_graph(trace(f, {s, s}, "f"), {1});
  int exps = 0;
  for (const ir::Node& n : vg.nodes()) exps += n.op == "exponential";
  EXPECT_EQ(exps, 1);  // only the forward exp; no exp in the backward pass
}

TEST(Autodiff, VjpWithExplicitCotangents) {
  ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        auto [outs, pullback] = vjp(
            [](const std::vector<Tensor>& b) { return std::vector<Tensor>{multiply(b[0], b[1]), b[0]}; }, {a[0], a[1]});
        std::vector<Tensor> cts = pullback({a[2], Tensor()});  // zero cotangent for output 1
        return std::vector<Tensor>{outs[0], cts[0], cts[1]};
      },
      {{{2}, DType::kF64}, {{2}, DType::kF64}, {{2}, DType::kF64}});
  std::vector<Array> out = interp::interpret(g, {f64v({1, 2}), f64v({3, 4}), f64v({10, 100})});
  expect_values(out[0], {3, 8});
  expect_values(out[1], {30, 400});  // ct * y
  expect_values(out[2], {10, 200});  // ct * x
}

TEST(Autodiff, Errors) {
  ir::TensorType vec{{3}, DType::kF64};
  ir::TensorType sc{{}, DType::kF64};
  auto identity = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0]}; };
  expect_error([&] { trace(value_and_grad(identity), {vec}); }, ErrorCode::kShapeMismatch, {"loss", "scalar", "(3,)"});
  expect_error([&] { trace(value_and_grad(identity, {1}), {sc}); }, ErrorCode::kOutOfRange,
               {"argnum 1", "1 arguments"});
  expect_error([&] { trace(value_and_grad(identity, {0, 0}), {sc}); }, ErrorCode::kInvalidArgument,
               {"argnum 0 is repeated"});
  auto two = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0], a[0]}; };
  expect_error([&] { trace(value_and_grad(two), {sc}); }, ErrorCode::kInvalidArgument, {"2 outputs", "has_aux"});
  ir::TensorType isc{{}, DType::kI32};
  expect_error([&] { trace(value_and_grad(identity), {isc}); }, ErrorCode::kDTypeMismatch, {"floating point", "i32"});
  expect_error(
      [&] {
        trace(
            [](const std::vector<Tensor>& a) {
              auto [outs, pb] = vjp([](const std::vector<Tensor>& b) { return b; }, {a[0]});
              return pb({convert(a[0], DType::kF32)});
            },
            {vec});
      },
      ErrorCode::kDTypeMismatch, {"cotangent 0", "f32[3]", "f64[3]"});
}

TEST(Autodiff, OuterTensorCaptureIsATraceError) {
  expect_error(
      [] {
        trace(
            [](const std::vector<Tensor>& a) {
              Tensor outer = a[0];
              TraceFn f = [outer](const std::vector<Tensor>& b) { return std::vector<Tensor>{multiply(b[0], outer)}; };
              return grad(f)({a[0]});
            },
            {{{}, DType::kF64}});
      },
      ErrorCode::kTraceError, {"mixes tensors", "pass it as an argument"});
}

}  // namespace
}  // namespace ingot
