// Activations gelu, silu/swish, softplus, log_softmax: values against the formulas evaluated in
// double with <cmath>, gradients against finite differences, use through Dense and Activation.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "autodiff/gradcheck.h"
#include "ingot/trainer/model.h"
#include "layers_test_util.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

const std::vector<double> kInputs = {-3.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.0, 4.0};

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }
double softplus_ref(double x) { return std::log1p(std::exp(x)); }

/// Runs Activation(name) on kInputs (f64, shape (2, 4)) with the interpreter.
std::vector<double> activate(const std::string& name) {
  auto layer = std::make_shared<Activation>(name);
  const Array x = Array::from_vector<double>(kInputs, {2, 4});
  testing::build_layer(*layer, x.shape(), x.dtype());
  return testing::run_layer(*layer, x, false).at(0).to_doubles();
}

TEST(Activations, ElementwiseValuesMatchTheFormulas) {
  const std::vector<double> gelu = activate("gelu"), silu = activate("silu"), swish = activate("swish"),
                            softplus = activate("softplus");
  for (size_t i = 0; i < kInputs.size(); ++i) {
    EXPECT_NEAR(gelu[i], gelu_ref(kInputs[i]), 1e-14) << kInputs[i];
    EXPECT_NEAR(silu[i], silu_ref(kInputs[i]), 1e-14) << kInputs[i];
    EXPECT_EQ(swish[i], silu[i]);
    EXPECT_NEAR(softplus[i], softplus_ref(kInputs[i]), 1e-14) << kInputs[i];
  }
  // Hand values: gelu(1) = 0.5 (1 + erf(0.7071)) = 0.841345; the exact form, not the tanh one
  // (0.841192); softplus(0) = ln 2.
  EXPECT_NEAR(gelu[5], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(softplus[3], std::numbers::ln2, 1e-15);
}

TEST(Activations, LogSoftmaxNormalisesTheLastAxis) {
  const std::vector<double> y = activate("log_softmax");
  for (int r = 0; r < 2; ++r) {
    double lse = 0;
    for (int c = 0; c < 4; ++c) lse += std::exp(kInputs[static_cast<size_t>(4 * r + c)]);
    lse = std::log(lse);
    for (int c = 0; c < 4; ++c) {
      const size_t i = static_cast<size_t>(4 * r + c);
      EXPECT_NEAR(y[i], kInputs[i] - lse, 1e-14) << i;
    }
  }
  // Large logits stay finite (no exp overflow): log_softmax([1000, 0]) = [0, -1000].
  auto layer = std::make_shared<Activation>("log_softmax");
  testing::build_layer(*layer, {1, 2});
  testing::expect_values(testing::run_layer(*layer, testing::f32({1000, 0}, {1, 2}), false).at(0), {0, -1000});
}

TEST(Activations, GradientsMatchFiniteDifferences) {
  const Array x = Array::from_vector<double>(kInputs, {2, 4});
  for (const char* name : {"gelu", "silu", "softplus", "log_softmax"}) {
    SCOPED_TRACE(name);
    testing::check_grads(
        [name](const std::vector<Tensor>& a) { return std::vector<Tensor>{apply_activation(name, a[0])}; }, {x});
  }
}

TEST(Activations, UsableAsDenseAndConvActivationStrings) {
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 2, .activation = "gelu"})});
  model.build_model({1, 2});
  model.set_weights({testing::f32({1, 0, 0, -1}, {2, 2}), testing::f32({0, 0.5f}, {2})});
  // x = [1, 2]: x @ W + b = [1, -2 + 0.5] = [1, -1.5] -> gelu.
  const std::vector<float> y = model.predict_on_batch(testing::f32({1, 2}, {1, 2})).to_vector<float>();
  EXPECT_NEAR(y[0], gelu_ref(1.0), 1e-6);
  EXPECT_NEAR(y[1], gelu_ref(-1.5), 1e-6);
  Sequential conv(
      {std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 1, .kernel_size = {1, 1}, .activation = "softplus"})});
  conv.build_model({1, 1, 2, 1});
  conv.set_weights({testing::f32({2}, {1, 1, 1, 1}), testing::f32({-1}, {1})});
  const std::vector<float> c = conv.predict_on_batch(testing::f32({0, 3}, {1, 1, 2, 1})).to_vector<float>();
  EXPECT_NEAR(c[0], softplus_ref(-1.0), 1e-6);
  EXPECT_NEAR(c[1], softplus_ref(5.0), 1e-6);
}

TEST(Activations, UnknownNamesListTheKnownOnes) {
  expect_error([] { Dense(DenseOptions{.units = 2, .activation = "mish"}); }, ErrorCode::kNotFound,
               {"'mish'", "gelu", "silu", "softplus", "log_softmax"});
  expect_error([] { Activation("GELU"); }, ErrorCode::kNotFound, {"'GELU'"});
}

}  // namespace
}  // namespace ingot
