// Regularizers l1, l2, l1_l2: penalties against hand values, gradients against finite
// differences, and their effect through Dense / Conv2D / Embedding on the compiled loss and
// on one SGD step (hand-computed).
#include <gtest/gtest.h>

#include "autodiff/gradcheck.h"
#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

double penalty(const Regularizer& r, const Array& w) {
  const ir::Graph g = trace([&r](const std::vector<Tensor>& a) { return std::vector<Tensor>{r(a[0])}; },
                            {{w.shape(), w.dtype()}}, "penalty");
  const Array out = interp::interpret(g, {w}).at(0);
  EXPECT_EQ(out.shape(), Shape{});
  return out.element_as_double(0);
}

TEST(Regularizers, PenaltiesMatchHandValues) {
  const Array w = testing::f32({1, -2, 3}, {3});  // sum |w| = 6, sum w^2 = 14
  EXPECT_NEAR(penalty(regularizers::l1(0.5), w), 3.0, 1e-6);
  EXPECT_NEAR(penalty(regularizers::l2(0.1), w), 1.4, 1e-6);
  EXPECT_NEAR(penalty(regularizers::l1_l2(0.5, 0.1), w), 4.4, 1e-6);
  EXPECT_NEAR(penalty(regularizers::get("l2"), w), 0.14, 1e-7);  // default 0.01
  EXPECT_NEAR(penalty(regularizers::get("l1"), w), 0.06, 1e-7);
  EXPECT_EQ(penalty(regularizers::get("l1_l2"), w), 0.0);  // Keras's L1L2 defaults are 0
}

TEST(Regularizers, GradientsMatchFiniteDifferences) {
  const Array w = testing::random_f64({3, 4}, 17);  // no zeros: |w| is smooth there
  for (const Regularizer& r : {regularizers::l1(0.3), regularizers::l2(0.7), regularizers::l1_l2(0.2, 0.4)}) {
    testing::check_grads([&r](const std::vector<Tensor>& a) { return std::vector<Tensor>{r(a[0])}; }, {w});
  }
}

TEST(Regularizers, DenseAddsThePenaltiesToTheLossAndItsGradient) {
  // Dense(1), w = 2, b = -1, x = 1, y = 0: pred 1, MSE 1; penalties 0.1 * 2^2 + 0.5 * |-1| = 0.9.
  Sequential model({std::make_shared<Dense>(DenseOptions{
      .units = 1, .kernel_regularizer = regularizers::l2(0.1), .bias_regularizer = regularizers::l1(0.5)})});
  model.build_model({1, 1});
  model.set_weights({testing::f32({2}, {1, 1}), testing::f32({-1}, {1})});
  model.compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1}),
                 .loss = std::make_shared<losses::MeanSquaredError>()});
  const Array x = testing::f32({1}, {1, 1}), y = testing::f32({0}, {1, 1});
  EXPECT_NEAR(*model.evaluate({.x = x, .y = y, .verbose = 0}).get("loss"), 1.9, 1e-6);
  EXPECT_NEAR(*model.train_on_batch(x, y).get("loss"), 1.9, 1e-6);
  // dL/dw = 2 (pred - y) x + 0.2 w = 2.4 -> w = 2 - 0.24; dL/db = 2 (pred - y) + 0.5 sign(b) = 1.5
  // -> b = -1 - 0.15.
  const std::vector<Array> after = model.get_weights();
  testing::expect_values(after[0], {1.76}, 1e-6);
  testing::expect_values(after[1], {-1.15}, 1e-6);
}

TEST(Regularizers, ConvAndEmbeddingPenaltiesJoinTheLoss) {
  // 1x1 conv, kernel 3, bias 0, x = 1, y = 3: MSE 0; penalty 0.01 * 9 = 0.09.
  Sequential conv({std::make_shared<Conv2D>(
      Conv2DLayerOptions{.filters = 1, .kernel_size = {1, 1}, .kernel_regularizer = regularizers::l2()})});
  conv.build_model({1, 1, 1, 1});
  conv.set_weights({testing::f32({3}, {1, 1, 1, 1}), testing::f32({0}, {1})});
  conv.compile(
      {.optimizer = std::make_shared<optimizers::SGD>(), .loss = std::make_shared<losses::MeanSquaredError>()});
  EXPECT_NEAR(*conv.evaluate({.x = testing::f32({1}, {1, 1, 1, 1}), .y = testing::f32({3}, {1, 1, 1, 1}), .verbose = 0})
                   .get("loss"),
              0.09, 1e-6);
  // Embedding table [[1, -1], [2, 0]], l1(0.1): penalty 0.4; rows looked up [1, -1], y = same: MSE 0.
  Sequential emb({std::make_shared<Embedding>(
      EmbeddingOptions{.input_dim = 2, .output_dim = 2, .embeddings_regularizer = regularizers::l1(0.1)})});
  emb.build_model({1, 1}, DType::kI32);
  emb.set_weights({testing::f32({1, -1, 2, 0}, {2, 2})});
  emb.compile({.optimizer = std::make_shared<optimizers::SGD>(), .loss = std::make_shared<losses::MeanSquaredError>()});
  EXPECT_NEAR(
      *emb.evaluate({.x = testing::i32({0}, {1, 1}), .y = testing::f32({1, -1}, {1, 1, 2}), .verbose = 0}).get("loss"),
      0.4, 1e-6);
}

TEST(Regularizers, BadArgumentsAndPenaltiesAreErrors) {
  expect_error([] { regularizers::l1(-1); }, ErrorCode::kInvalidArgument, {"l1", "-1"});
  expect_error([] { regularizers::l2(NAN); }, ErrorCode::kInvalidArgument, {"l2", "nan"});
  expect_error([] { regularizers::l1_l2(0.1, INFINITY); }, ErrorCode::kInvalidArgument, {"l1_l2", "l2", "inf"});
  expect_error([] { regularizers::get("l3"); }, ErrorCode::kNotFound, {"'l3'", "l1_l2"});
  Regularizer not_scalar = [](const Tensor& w) { return abs(w); };
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 2, .kernel_regularizer = not_scalar})});
  expect_error([&] { model.build_model({1, 3}); }, ErrorCode::kShapeMismatch,
               {"kernel_regularizer", "dense/kernel", "(3, 2)"});
}

}  // namespace
}  // namespace ingot
