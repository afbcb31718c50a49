// BatchNormalization and LayerNormalization: outputs in training and inference against hand
// computations, the moving statistics after a known sequence of batches (through the interpreter
// and through a compiled fit), gradients against finite differences, a small BN CNN that trains,
// summary counts and option errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autodiff/gradcheck.h"
#include "ingot/trainer/model.h"
#include "layers_test_util.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

/// Sets a built layer's variables to `values` (in variables() order).
void set_variables(Layer& layer, const std::vector<Array>& values) {
  std::vector<Variable*> vars = layer.variables();
  ASSERT_EQ(vars.size(), values.size());
  for (size_t i = 0; i < vars.size(); ++i) vars[i]->assign(values[i]);
}

// Batch 1 of the hand computation, (4, 2): column 0 = 1, 3, 5, 7 (mean 4, biased var 20 / 4 = 5),
// column 1 = 2, 6, 10, -2 (mean 4, deviations -2, 2, 6, -6: var 80 / 4 = 20).
const std::vector<float> kBatch1 = {1, 2, 3, 6, 5, 10, 7, -2};
// Batch 2, (2, 2): column 0 = 0, 2 (mean 1, var 1), column 1 = 0, 4 (mean 2, var 4).
const std::vector<float> kBatch2 = {0, 0, 2, 4};

TEST(BatchNormalization, TrainingUsesBatchStatisticsAndUpdatesTheMovingOnes) {
  BatchNormalization bn({.momentum = 0.9});
  testing::build_layer(bn, {4, 2});
  std::vector<std::string> names;
  for (Variable* v : bn.variables()) names.push_back(v->name() + (v->trainable() ? "" : " (nt)"));
  EXPECT_EQ(names, (std::vector<std::string>{"/gamma", "/beta", "/moving_mean (nt)", "/moving_variance (nt)"}));
  set_variables(bn, {testing::f32({2, 0.5f}), testing::f32({1, -1}), testing::f32({0, 0}), testing::f32({1, 1})});
  const std::vector<Array> out = testing::run_layer(bn, testing::f32(kBatch1, {4, 2}), true, /*with_updates=*/true);
  ASSERT_EQ(out.size(), 3u);
  std::vector<double> want;
  for (size_t i = 0; i < 4; ++i) {
    want.push_back((kBatch1[2 * i] - 4.0) / std::sqrt(5.0 + 1e-3) * 2 + 1);
    want.push_back((kBatch1[2 * i + 1] - 4.0) / std::sqrt(20.0 + 1e-3) * 0.5 - 1);
  }
  testing::expect_values(out[0], want, 1e-5);
  // moving = moving * 0.9 + batch * 0.1: mean 0 -> 0.4, variance 1 -> 0.9 + 0.5, 0.9 + 2.
  testing::expect_values(out[1], {0.4, 0.4}, 1e-6);
  testing::expect_values(out[2], {1.4, 2.9}, 1e-6);
}

TEST(BatchNormalization, InferenceUsesTheMovingStatistics) {
  BatchNormalization bn;
  testing::build_layer(bn, {4, 2});
  set_variables(bn,
                {testing::f32({2, 0.5f}), testing::f32({1, -1}), testing::f32({0.4f, -1}), testing::f32({1.4f, 2.9f})});
  const std::vector<Array> out = testing::run_layer(bn, testing::f32(kBatch1, {4, 2}), false, /*with_updates=*/true);
  ASSERT_EQ(out.size(), 1u) << "inference must not update the moving statistics";
  std::vector<double> want;
  for (size_t i = 0; i < 4; ++i) {
    want.push_back((kBatch1[2 * i] - 0.4) / std::sqrt(1.4 + 1e-3) * 2 + 1);
    want.push_back((kBatch1[2 * i + 1] + 1.0) / std::sqrt(2.9 + 1e-3) * 0.5 - 1);
  }
  testing::expect_values(out[0], want, 1e-5);
}

TEST(BatchNormalization, FitUpdatesTheMovingStatisticsBatchByBatch) {
  // Batches of 4 and 2 (ragged), not shuffled; the statistics do not depend on gamma / beta.
  // After batch 1: mean 0.4, 0.4; variance 1.4, 2.9. After batch 2: mean 0.4 * 0.9 + 0.1 * (1, 2)
  // = 0.46, 0.56; variance (1.4, 2.9) * 0.9 + 0.1 * (1, 4) = 1.36, 3.01.
  Sequential model({std::make_shared<BatchNormalization>(BatchNormalizationOptions{.momentum = 0.9})});
  model.build_model({1, 2});
  model.compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1}),
                 .loss = std::make_shared<losses::MeanSquaredError>()});
  std::vector<float> x = kBatch1;
  x.insert(x.end(), kBatch2.begin(), kBatch2.end());
  model.fit({.x = testing::f32(x, {6, 2}),
             .y = Array::zeros({6, 2}, DType::kF32),
             .batch_size = 4,
             .epochs = 1,
             .verbose = 0,
             .shuffle = false});
  const std::vector<Array> w = model.get_weights();
  testing::expect_values(w[2], {0.46, 0.56}, 1e-6);
  testing::expect_values(w[3], {1.36, 3.01}, 1e-6);
  // gamma and beta trained: the MSE gradient moves them.
  EXPECT_NE(w[0].to_vector<float>(), (std::vector<float>{1, 1}));
  // predict uses the moving statistics: (x - 0.46) / sqrt(1.361) * gamma + beta.
  const std::vector<double> y = model.predict_on_batch(testing::f32({1, 1}, {1, 2})).to_doubles();
  EXPECT_NEAR(y[0], (1 - 0.46) / std::sqrt(1.36 + 1e-3) * w[0].to_doubles()[0] + w[1].to_doubles()[0], 1e-5);
  EXPECT_NEAR(y[1], (1 - 0.56) / std::sqrt(3.01 + 1e-3) * w[0].to_doubles()[1] + w[1].to_doubles()[1], 1e-5);
}

TEST(BatchNormalization, ChannelAxisOneOfARank4Input) {
  // axis = 1 of (2, 3, 2, 2): three features, each normalised over 8 values.
  BatchNormalization bn({.axis = 1, .epsilon = 0.01});
  const Array x = testing::random_f64({2, 3, 2, 2}, 21, -2, 2);
  testing::build_layer(bn, x.shape());  // f32 variables; the test binds f64 values
  EXPECT_EQ(bn.variables()[0]->shape(), (Shape{3}));
  std::vector<Array> args = testing::layer_args(bn, x, DType::kF64);
  args[0] = Array::from_vector<double>({1.5, -0.5, 2}, {3});
  args[1] = Array::from_vector<double>({0.25, 0, -1}, {3});
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  const std::vector<double> y =
      interp::interpret(trace(testing::layer_fn(bn, true), types, "bn"), args).at(0).to_doubles();
  const std::vector<double> v = x.to_doubles(), g = args[0].to_doubles(), b = args[1].to_doubles();
  for (size_t c = 0; c < 3; ++c) {
    double m = 0, s = 0;
    for (size_t n = 0; n < 2; ++n) {
      for (size_t k = 0; k < 4; ++k) m += v[n * 12 + c * 4 + k] / 8;
    }
    for (size_t n = 0; n < 2; ++n) {
      for (size_t k = 0; k < 4; ++k) s += std::pow(v[n * 12 + c * 4 + k] - m, 2) / 8;
    }
    for (size_t n = 0; n < 2; ++n) {
      for (size_t k = 0; k < 4; ++k) {
        const size_t i = n * 12 + c * 4 + k;
        EXPECT_NEAR(y[i], (v[i] - m) / std::sqrt(s + 0.01) * g[c] + b[c], 1e-12) << i;
      }
    }
  }
}

TEST(BatchNormalization, GradientsMatchFiniteDifferences) {
  for (int64_t axis : {-1, 1}) {
    SCOPED_TRACE(axis);
    BatchNormalization bn({.axis = axis});
    const Array x = testing::random_f64({5, 3, 2}, 3, -2, 2);
    testing::build_layer(bn, x.shape());  // f32 variables; the test binds f64 values
    std::vector<Array> args = testing::layer_args(bn, x, DType::kF64);
    const int64_t c = bn.variables()[0]->shape()[0];
    args[0] = testing::random_f64({c}, 4, 0.5, 2);             // gamma
    args[1] = testing::random_f64({c}, 5);                     // beta
    args[2] = testing::random_f64({c}, 6);                     // moving mean
    args[3] = testing::random_f64({c}, 7, 0.5, 2);             // moving variance
    testing::check_grads(testing::layer_fn(bn, true), args);   // through the batch statistics
    testing::check_grads(testing::layer_fn(bn, false), args);  // through the moving ones
  }
}

TEST(BatchNormalization, SmallCnnTrainsAndEvaluates) {
  // 64 images 6x6: class 0 has its left half bright, class 1 its right half, plus noise.
  const int64_t n = 64;
  Array x = Array::zeros({n, 6, 6, 1}, DType::kF32);
  Array y = Array::zeros({n}, DType::kI32);
  for (int64_t i = 0; i < n; ++i) {
    y.data<int32_t>()[i] = static_cast<int32_t>(i % 2);
    for (int64_t p = 0; p < 36; ++p) {
      const bool left = p % 6 < 3;
      const float noise = 0.3f * std::sin(0.7f * static_cast<float>(i * 36 + p));
      x.data<float>()[i * 36 + p] = ((left == (i % 2 == 0)) ? 1.0f : 0.0f) + noise;
    }
  }
  Sequential model({std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 4}), std::make_shared<BatchNormalization>(),
                    std::make_shared<Activation>("relu"), std::make_shared<Flatten>(),
                    std::make_shared<Dense>(DenseOptions{.units = 2})});
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.01}),
                 .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                     losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  auto history = model.fit({.x = x, .y = y, .batch_size = 16, .epochs = 8, .verbose = 0});
  const std::vector<double> loss = history->values("loss");
  EXPECT_LT(loss.back(), 0.3 * loss.front()) << loss.front() << " -> " << loss.back();
  const std::vector<Array> w = model.get_weights();  // conv kernel, bias, gamma, beta, mean, var, ...
  EXPECT_NE(w[4].to_vector<float>(), std::vector<float>(4, 0.0f)) << "moving mean never updated";
  const double eval = *model.evaluate({.x = x, .y = y, .verbose = 0}).get("loss");
  EXPECT_TRUE(std::isfinite(eval));
  const std::string s = model.summary();
  for (const char* want : {"batch_normalization (BatchNormalization)", "(None, 4, 4, 4)", "Non-trainable params: 8"}) {
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  }
}

TEST(BatchNormalization, CenterAndScaleOffDropTheirVariables) {
  BatchNormalization bn({.center = false, .scale = false});
  testing::build_layer(bn, {4, 2});
  ASSERT_EQ(bn.variables().size(), 2u);
  EXPECT_EQ(bn.variables()[0]->name(), "/moving_mean");
  EXPECT_EQ(bn.trainable_variables().size(), 0u);
  const Array y = testing::run_layer(bn, testing::f32(kBatch1, {4, 2}), true).at(0);
  EXPECT_NEAR(y.to_doubles()[0], -3.0 / std::sqrt(5.001), 1e-6);
}

TEST(BatchNormalization, BadOptionsAreErrors) {
  expect_error([] { BatchNormalization({.momentum = 1.5}); }, ErrorCode::kInvalidArgument,
               {"BatchNormalization", "momentum", "1.5"});
  expect_error([] { BatchNormalization({.epsilon = 0}); }, ErrorCode::kInvalidArgument,
               {"BatchNormalization", "epsilon", "0"});
  expect_error([] { BatchNormalization({.epsilon = std::nan("")}); }, ErrorCode::kInvalidArgument, {"epsilon", "nan"});
  BatchNormalization bn({.axis = 2});
  expect_error([&] { testing::build_layer(bn, {4, 2}); }, ErrorCode::kInvalidArgument,
               {"BatchNormalization", "axis 2", "(4, 2)"});
  EXPECT_TRUE(bn.variables().empty()) << "a failed build must create nothing";
  BatchNormalization batch_axis({.axis = -2});
  expect_error([&] { testing::build_layer(batch_axis, {4, 2}); }, ErrorCode::kInvalidArgument, {"axis -2", "batch"});
  Sequential model({std::make_shared<BatchNormalization>()});
  model.build_model({2, 3});
  expect_error([&] { model.predict_on_batch(Array::zeros({2, 3}, DType::kI32)); }, ErrorCode::kShapeMismatch, {"i32"});
}

// ---- LayerNormalization --------------------------------------------------------------------

TEST(LayerNormalization, NormalisesEachSampleOverTheLastAxis) {
  // Row 0 = 1, 2, 3, 4: mean 2.5, var (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
  // Row 1 = 2, 2, 2, 10: mean 4, var (4 + 4 + 4 + 36) / 4 = 12.
  LayerNormalization ln;
  testing::build_layer(ln, {2, 4});
  set_variables(ln, {testing::f32({1, 2, 0.5f, -1}), testing::f32({0, 1, 0, -1})});
  const std::vector<float> x = {1, 2, 3, 4, 2, 2, 2, 10};
  const double g[] = {1, 2, 0.5, -1}, b[] = {0, 1, 0, -1}, m[] = {2.5, 4}, v[] = {1.25, 12};
  std::vector<double> want;
  for (size_t i = 0; i < 8; ++i) want.push_back((x[i] - m[i / 4]) / std::sqrt(v[i / 4] + 1e-3) * g[i % 4] + b[i % 4]);
  for (bool training : {true, false}) {
    const std::vector<Array> out = testing::run_layer(ln, testing::f32(x, {2, 4}), training, true);
    ASSERT_EQ(out.size(), 1u);
    testing::expect_values(out[0], want, 1e-5);
  }
}

TEST(LayerNormalization, SeveralAxesShareTheStatistics) {
  // axis {1, 2} of (2, 2, 3): each sample's 6 values normalised together; gamma is (2, 3).
  LayerNormalization ln({.axis = {-1, 1}, .epsilon = 0.01, .center = false});
  const Array x = testing::random_f64({2, 2, 3}, 8, -3, 3);
  testing::build_layer(ln, x.shape());  // f32 variables; the test binds f64 values
  ASSERT_EQ(ln.variables().size(), 1u);
  EXPECT_EQ(ln.variables()[0]->shape(), (Shape{2, 3}));
  std::vector<Array> args = testing::layer_args(ln, x, DType::kF64);
  args[0] = testing::random_f64({2, 3}, 9, 0.5, 2);
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  const std::vector<double> y =
      interp::interpret(trace(testing::layer_fn(ln, true), types, "ln"), args).at(0).to_doubles();
  const std::vector<double> v = x.to_doubles(), g = args[0].to_doubles();
  for (size_t n = 0; n < 2; ++n) {
    double m = 0, s = 0;
    for (size_t k = 0; k < 6; ++k) m += v[n * 6 + k] / 6;
    for (size_t k = 0; k < 6; ++k) s += std::pow(v[n * 6 + k] - m, 2) / 6;
    for (size_t k = 0; k < 6; ++k) EXPECT_NEAR(y[n * 6 + k], (v[n * 6 + k] - m) / std::sqrt(s + 0.01) * g[k], 1e-12);
  }
  testing::check_grads(testing::layer_fn(ln, true), args);
}

TEST(LayerNormalization, GradientsMatchFiniteDifferences) {
  LayerNormalization ln;
  const Array x = testing::random_f64({3, 2, 5}, 12, -2, 2);
  testing::build_layer(ln, x.shape());  // f32 variables; the test binds f64 values
  std::vector<Array> args = testing::layer_args(ln, x, DType::kF64);
  args[0] = testing::random_f64({5}, 13, 0.5, 2);
  args[1] = testing::random_f64({5}, 14);
  testing::check_grads(testing::layer_fn(ln, true), args);
}

TEST(LayerNormalization, SummaryAndBadOptions) {
  Sequential model({std::make_shared<LayerNormalization>()});
  model.build_model({1, 5, 4});
  const std::string s = model.summary();
  for (const char* want : {"layer_normalization (LayerNormalization)", "(None, 5, 4)", "Trainable params: 8"}) {
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  }
  expect_error([] { LayerNormalization({.axis = {}}); }, ErrorCode::kInvalidArgument, {"LayerNormalization", "axis"});
  expect_error([] { LayerNormalization({.epsilon = -1}); }, ErrorCode::kInvalidArgument,
               {"LayerNormalization", "epsilon", "-1"});
  LayerNormalization twice({.axis = {-1, 1}});
  expect_error([&] { testing::build_layer(twice, {2, 3}); }, ErrorCode::kInvalidArgument, {"axis (-1, 1)", "twice"});
  EXPECT_TRUE(twice.variables().empty());
  LayerNormalization batch({.axis = {0}});
  expect_error([&] { testing::build_layer(batch, {2, 3}); }, ErrorCode::kInvalidArgument, {"axis 0", "batch"});
  LayerNormalization far({.axis = {3}});
  expect_error([&] { testing::build_layer(far, {2, 3}); }, ErrorCode::kInvalidArgument, {"axis 3", "(2, 3)"});
}

}  // namespace
}  // namespace ingot
