// AveragePooling2D and GlobalAveragePooling2D: outputs against hand-computed window means
// (including Keras's "same" border windows that average only their in-bounds cells), gradients
// against finite differences, summary shapes, option errors.
#include <gtest/gtest.h>

#include "autodiff/gradcheck.h"
#include "ingot/trainer/model.h"
#include "layers_test_util.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

/// (1, h, w, 1) f32 holding first, first + 1, ... in row-major order.
Array counting(int64_t h, int64_t w, float first) {
  Array x = Array::zeros({1, h, w, 1}, DType::kF32);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = first + static_cast<float>(i);
  return x;
}

std::vector<double> pool(AveragePooling2DOptions options, const Array& x) {
  AveragePooling2D layer(std::move(options));
  testing::build_layer(layer, x.shape());
  return testing::run_layer(layer, x, false).at(0).to_doubles();
}

TEST(AveragePooling2D, ValidWindowsAreMeans) {
  // 0..15 in a 4x4 grid, 2x2 windows, stride 2: [0 1 4 5] -> 2.5, [2 3 6 7] -> 4.5, ...
  EXPECT_EQ(pool({}, counting(4, 4, 0)), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  // Stride 1: 3x3 outputs, first [0 1 4 5] -> 2.5, next [1 2 5 6] -> 3.5, row below + 4.
  EXPECT_EQ(pool({.strides = {1, 1}}, counting(4, 4, 0)),
            (std::vector<double>{2.5, 3.5, 4.5, 6.5, 7.5, 8.5, 10.5, 11.5, 12.5}));
}

TEST(AveragePooling2D, SameAveragesOnlyTheInBoundsCells) {
  // 1..9 in a 3x3 grid, 2x2 windows, stride 2: output 2x2, the padding row/column goes to the
  // bottom/right (TF "SAME"). [1 2 4 5] -> 3, [3 6] -> 4.5, [7 8] -> 7.5, [9] -> 9.
  EXPECT_EQ(pool({.padding = "same"}, counting(3, 3, 1)), (std::vector<double>{3, 4.5, 7.5, 9}));
  // 3x3 windows, stride 1: one padding cell on each side. Corner (0, 0): [1 2 4 5] -> 3; top
  // middle: [1 2 3 4 5 6] -> 3.5; centre: all nine -> 5.
  const std::vector<double> y = pool({.pool_size = {3, 3}, .strides = {1, 1}, .padding = "same"}, counting(3, 3, 1));
  EXPECT_EQ(y, (std::vector<double>{3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}));
}

TEST(AveragePooling2D, GradientsMatchFiniteDifferences) {
  const Array x = testing::random_f64({2, 5, 4, 3}, 11);
  for (const char* padding : {"valid", "same"}) {
    SCOPED_TRACE(padding);
    AveragePooling2D layer({.pool_size = {3, 2}, .strides = {2, 1}, .padding = padding});
    testing::build_layer(layer, x.shape(), x.dtype());
    testing::check_grads(testing::layer_fn(layer, true), {x});
  }
}

TEST(GlobalAveragePooling2D, MeansOverHeightAndWidth) {
  // Two channels: c0 = 0..5, c1 = 10 * c0 over a 2x3 grid; means 2.5 and 25.
  Array x = Array::zeros({1, 2, 3, 2}, DType::kF32);
  for (int64_t i = 0; i < 6; ++i) {
    x.data<float>()[2 * i] = static_cast<float>(i);
    x.data<float>()[2 * i + 1] = 10.0f * static_cast<float>(i);
  }
  GlobalAveragePooling2D flat;
  testing::build_layer(flat, x.shape());
  const Array y = testing::run_layer(flat, x, false).at(0);
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  testing::expect_values(y, {2.5, 25});
  GlobalAveragePooling2D kept({.keepdims = true});
  testing::build_layer(kept, x.shape());
  EXPECT_EQ(testing::run_layer(kept, x, false).at(0).shape(), (Shape{1, 1, 1, 2}));
  const Array x64 = testing::random_f64({2, 3, 2, 4}, 5);
  testing::check_grads(testing::layer_fn(flat, true), {x64});
}

TEST(AveragePooling2D, SummaryShowsTheOutputShapes) {
  Sequential model({std::make_shared<AveragePooling2D>(),
                    std::make_shared<AveragePooling2D>(AveragePooling2DOptions{.padding = "same"}),
                    std::make_shared<GlobalAveragePooling2D>(GlobalAveragePooling2DOptions{.keepdims = true}),
                    std::make_shared<GlobalAveragePooling2D>()});
  model.build_model({1, 9, 9, 3});
  const std::string s = model.summary();
  for (const char* want :
       {"average_pooling2d (AveragePooling2D)", "(None, 4, 4, 3)", "average_pooling2d_1", "(None, 2, 2, 3)",
        "global_average_pooling2d (GlobalAveragePooling2D)", "(None, 1, 1, 3)", "(None, 3)", "Total params: 0"}) {
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  }
  // Compiled prediction equals the hand value: all-ones images average to 1.
  testing::expect_values(model.predict_on_batch(Array::full({2, 9, 9, 3}, 1.0, DType::kF32)),
                         std::vector<double>(6, 1.0));
}

TEST(AveragePooling2D, BadOptionsAndInputsAreErrors) {
  expect_error([] { AveragePooling2D({.pool_size = {2}}); }, ErrorCode::kInvalidArgument,
               {"AveragePooling2D", "pool_size", "(2)"});
  expect_error([] { AveragePooling2D({.strides = {0, 1}}); }, ErrorCode::kInvalidArgument,
               {"AveragePooling2D", "strides", "(0, 1)"});
  expect_error([] { AveragePooling2D({.padding = "full"}); }, ErrorCode::kInvalidArgument,
               {"AveragePooling2D", "padding", "full"});
  Sequential model({std::make_shared<AveragePooling2D>()});
  expect_error([&] { model.build_model({2, 5}); }, ErrorCode::kShapeMismatch, {"AveragePooling2D", "rank 4", "(2, 5)"});
  Sequential global({std::make_shared<GlobalAveragePooling2D>()});
  expect_error([&] { global.build_model({2, 5, 5}); }, ErrorCode::kShapeMismatch,
               {"GlobalAveragePooling2D", "rank 4", "(2, 5, 5)"});
}

}  // namespace
}  // namespace ingot
