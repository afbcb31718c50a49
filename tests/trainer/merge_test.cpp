// Merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate) and functional
// models that branch and merge: values by hand, names, a residual model trained with fit, errors.
#include "ingot/trainer/merge.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ingot/interp/interpreter.h"
#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

/// The layer applied to the constant inputs, run by the interpreter.
std::vector<double> apply(Layer& layer, const std::vector<Array>& inputs) {
  std::vector<ir::TensorType> types;
  for (const Array& a : inputs) types.push_back({a.shape(), a.dtype()});
  TraceFn fn = [&](const std::vector<Tensor>& a) {
    LayerContext ctx(false);
    return std::vector<Tensor>{layer(ctx, a)};
  };
  return interp::interpret(trace(fn, types, "merge"), inputs)[0].to_doubles();
}

TEST(Merge, ElementwiseLayersComputeKerasValues) {
  const Array a = testing::f32({1, -2, 3, 4}, {2, 2}), b = testing::f32({2, 5, -1, 4}, {2, 2}),
              c = testing::f32({1, 1}, {1, 2});
  EXPECT_EQ(apply(*std::make_shared<Add>(), {a, b, c}), (std::vector<double>{4, 4, 3, 9}));  // c broadcasts
  EXPECT_EQ(apply(*std::make_shared<Subtract>(), {a, b}), (std::vector<double>{-1, -7, 4, 0}));
  EXPECT_EQ(apply(*std::make_shared<Multiply>(), {a, b}), (std::vector<double>{2, -10, -3, 16}));
  EXPECT_EQ(apply(*std::make_shared<Average>(), {a, b}), (std::vector<double>{1.5, 1.5, 1, 4}));
  EXPECT_EQ(apply(*std::make_shared<Maximum>(), {a, b}), (std::vector<double>{2, 5, 3, 4}));
  EXPECT_EQ(apply(*std::make_shared<Minimum>(), {a, b}), (std::vector<double>{1, -2, -1, 4}));
  EXPECT_EQ(apply(*std::make_shared<Add>(), {a}), a.to_doubles());  // a list of one is returned
  EXPECT_EQ(apply(*std::make_shared<Concatenate>(), {a, c.reshaped({2, 1})}), (std::vector<double>{1, -2, 1, 3, 4, 1}));
  EXPECT_EQ(apply(*std::make_shared<Concatenate>(0), {a, c}), (std::vector<double>{1, -2, 3, 4, 1, 1}));
}

TEST(Merge, AResidualFunctionalModelMatchesAHandComputation) {
  // in (3) -> h = relu(in W1 + b1) (3) -> s = in + h -> c = [s, h] (6) -> out = c W2 + b2 (1).
  KerasTensor in = Input({3});
  KerasTensor h = std::make_shared<Dense>(DenseOptions{.units = 3, .activation = "relu"})->operator()(in);
  KerasTensor s = std::make_shared<Add>()->operator()({in, h});
  KerasTensor c = std::make_shared<Concatenate>()->operator()({s, h});
  EXPECT_EQ(c.shape(), (Shape{6}));
  KerasTensor out = std::make_shared<Dense>(DenseOptions{.units = 1})->operator()(c);
  Functional model(in, out);
  std::vector<std::string> names;
  for (Variable* v : model.variables()) names.push_back(v->name());
  EXPECT_EQ(names, (std::vector<std::string>{"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"}));
  const std::string summary = model.summary();
  EXPECT_NE(summary.find("add (Add)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("concatenate (Concatenate)"), std::string::npos) << summary;
  // W1 = identity, b1 = [0, -1, 0]; W2 = [1, 1, 1, 10, 10, 10], b2 = 0.5.
  model.set_weights({testing::f32({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}), testing::f32({0, -1, 0}, {3}),
                     testing::f32({1, 1, 1, 10, 10, 10}, {6, 1}), testing::f32({0.5f}, {1})});
  // x = [2, 0.5, -1]: h = relu([2, -0.5, -1]) = [2, 0, 0]; s = [4, 0.5, -1]; out = 3.5 + 20 + 0.5.
  EXPECT_EQ(model.predict_on_batch(testing::f32({2, 0.5f, -1}, {1, 3})).to_vector<float>(), (std::vector<float>{24}));
}

TEST(Merge, ABranchingModelTrainsWithFit) {
  KerasTensor in = Input({4});
  KerasTensor a = std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "tanh"})->operator()(in);
  KerasTensor b = std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"})->operator()(in);
  KerasTensor m = std::make_shared<Multiply>()->operator()({a, b});
  KerasTensor out =
      std::make_shared<Dense>(DenseOptions{.units = 1})->operator()(std::make_shared<Add>()->operator()({m, a}));
  Functional model(in, out);
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.02}),
                 .loss = std::make_shared<losses::MeanSquaredError>()});
  Array x = Array::zeros({64, 4}, DType::kF32), y = Array::zeros({64, 1}, DType::kF32);
  for (int64_t i = 0; i < 64; ++i) {
    for (int64_t j = 0; j < 4; ++j) x.data<float>()[i * 4 + j] = std::sin(0.3f * static_cast<float>(i * 4 + j));
    y.data<float>()[i] = x.data<float>()[i * 4] * x.data<float>()[i * 4 + 1];
  }
  auto hist = model.fit({.x = x, .y = y, .batch_size = 16, .epochs = 40, .verbose = 0});
  EXPECT_LT(hist->values("loss").back(), 0.3 * hist->values("loss").front());
  EXPECT_EQ(model.variables().size(), 6u);
}

TEST(Merge, BadInputsAreClearErrors) {
  KerasTensor in = Input({3}), other = Input({3}, DType::kF32, "other");
  auto add = std::make_shared<Add>();
  expect_error([&] { add->operator()(in); }, ErrorCode::kInvalidArgument, {"Add", "takes a list of inputs"});
  expect_error([&] { std::make_shared<Subtract>()->operator()({in, in, in}); }, ErrorCode::kInvalidArgument,
               {"Subtract", "got 3 inputs", "takes 2"});
  expect_error([&] { std::make_shared<Add>()->operator()({in, Input({4})}); }, ErrorCode::kShapeMismatch,
               {"do not broadcast", "(1, 3)", "(1, 4)"});
  expect_error([&] { std::make_shared<Concatenate>()->operator()({Input({2, 3}), Input({3, 3})}); },
               ErrorCode::kShapeMismatch, {"differ off the axis"});
  expect_error([&] { std::make_shared<Concatenate>(3)->operator()({in, in}); }, ErrorCode::kShapeMismatch, {"axis 3"});
  expect_error([&] { std::make_shared<Add>()->operator()({in, Input({3}, DType::kF64)}); }, ErrorCode::kDTypeMismatch,
               {"f64"});
  // An output that also depends on another Input is not reachable from the given one alone.
  KerasTensor mixed = std::make_shared<Add>()->operator()({in, other});
  expect_error([&] { Functional(in, mixed); }, ErrorCode::kInvalidArgument, {"'other'", "not from the given inputs"});
  expect_error([&] { std::make_shared<Dense>(DenseOptions{.units = 2})->operator()({in, in}); },
               ErrorCode::kInvalidArgument, {"takes one input, got 2"});
}

}  // namespace
}  // namespace ingot
