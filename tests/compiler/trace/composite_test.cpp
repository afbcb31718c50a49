// Forward values of the stable composites added for autodiff's edge cases.
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_values;

Array run1(const std::function<Tensor(const Tensor&)>& f, const std::vector<double>& x) {
  Array in = Array::from_vector<double>(x, {static_cast<int64_t>(x.size())});
  ir::Graph g =
      trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{f(a[0])}; }, {{in.shape(), DType::kF64}});
  return interp::interpret(g, {in}).at(0);
}

TEST(Composites, ReluKeepsNaNAndZeroesNonPositive) {
  expect_values(run1([](const Tensor& x) { return relu(x); }, {-2, -0.0, 0, 3, NAN, INFINITY}),
                {0, 0, 0, 3, NAN, INFINITY});
}

TEST(Composites, SoftplusIsStable) {
  const double inf = INFINITY;
  Array y = run1([](const Tensor& x) { return softplus(x); }, {-1000, -1, 0, 1, 1000, inf, -inf});
  expect_values(y, {0, std::log1p(std::exp(-1.0)), std::log(2.0), 1 + std::log1p(std::exp(-1.0)), 1000, inf, 0}, 1e-15);
}

TEST(Composites, LogSigmoidIsFiniteForLargeMagnitudes) {
  Array y = run1([](const Tensor& x) { return log_sigmoid(x); }, {-1000, -1, 0, 1, 1000});
  expect_values(y, {-1000, -std::log1p(std::exp(1.0)), -std::log(2.0), -std::log1p(std::exp(-1.0)), 0}, 1e-15);
}

TEST(Composites, SigmoidBinaryCrossEntropy) {
  Array logits = Array::from_vector<double>({-1000, 0, 2, 1000}, {4});
  Array labels = Array::from_vector<double>({1, 0.5, 0, 1}, {4});
  ir::Graph g =
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sigmoid_binary_cross_entropy(a[0], a[1])}; },
            {{{4}, DType::kF64}, {{4}, DType::kF64}});
  Array y = interp::interpret(g, {logits, labels}).at(0);
  // label 1 at logit -1000: -log(sigmoid(-1000)) = 1000; label 0 at logit 2: softplus(2).
  expect_values(y, {1000, std::log(2.0), 2 + std::log1p(std::exp(-2.0)), 0}, 1e-12);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(Composites, RejectNonFloatInputsBeforeEmitting) {
  for (auto f : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& x) { return softmax(x); }, [](const Tensor& x) { return log_softmax(x); },
           [](const Tensor& x) { return logsumexp(x); }, [](const Tensor& x) { return softplus(x); },
           [](const Tensor& x) { return gelu(x); }, [](const Tensor& x) { return silu(x); }}) {
    testing::expect_error(
        [&] {
          trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{f(a[0])}; }, {{{2, 3}, DType::kI32}});
        },
        ErrorCode::kDTypeMismatch, {"i32", "needs a floating dtype"});
  }
}

TEST(WeakScalars, MustBeExactForIntegerTensors) {
  auto run = [](DType dtype, double v) {
    trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * v}; }, {{{2}, dtype}});
  };
  testing::expect_error([&] { run(DType::kI32, 0.5); }, ErrorCode::kDTypeMismatch,
                        {"0.5", "not representable", "i32", "convert"});
  testing::expect_error([&] { run(DType::kU8, 300); }, ErrorCode::kDTypeMismatch, {"300", "u8"});
  testing::expect_error([&] { run(DType::kBool, 2); }, ErrorCode::kDTypeMismatch, {"bool"});
  run(DType::kI32, 3);    // exact: fine
  run(DType::kF16, 0.1);  // floats round, as JAX's weak types do
}

}  // namespace
}  // namespace ingot
