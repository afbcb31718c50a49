// Embedding: row lookup against the table (interpreter and compiled), the documented clamping of
// out-of-range indices, float inputs, gradients (hand-counted scatter-add and finite
// differences), default initializer range, summary, a fit that learns, option errors.
#include <gtest/gtest.h>

#include "autodiff/gradcheck.h"
#include "ingot/trainer/model.h"
#include "layers_test_util.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

/// Row r of the (4, 2) table is (10 r, 10 r + 1).
const Array kTable = testing::f32({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});

std::shared_ptr<Sequential> embedding_model(int64_t seq) {
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<Layer>>{
      std::make_shared<Embedding>(EmbeddingOptions{.input_dim = 4, .output_dim = 2})});
  model->build_model({1, seq}, DType::kI32);
  model->set_weights({kTable});
  return model;
}

TEST(Embedding, LooksUpRows) {
  auto model = embedding_model(3);
  const Array x = testing::i32({0, 2, 1, 3, 3, 0}, {2, 3});
  const Array y = model->predict_on_batch(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  testing::expect_values(y, {0, 1, 20, 21, 10, 11, 30, 31, 30, 31, 0, 1});
  Layer& layer = *model->layers().at(0);
  EXPECT_EQ(testing::run_layer(layer, x, false).at(0).to_doubles(), y.to_doubles());
}

TEST(Embedding, OutOfRangeIndicesClampToTheFirstAndLastRow) {
  auto model = embedding_model(4);
  // -1 and -7 read row 0; 4 and 100 read row 3 (gather clamps), compiled and interpreted alike.
  const Array x = testing::i32({-1, 4, 100, -7}, {1, 4});
  const std::vector<double> want = {0, 1, 30, 31, 30, 31, 0, 1};
  testing::expect_values(model->predict_on_batch(x), want);
  testing::expect_values(testing::run_layer(*model->layers().at(0), x, false).at(0), want);
}

TEST(Embedding, FloatInputsAreTruncatedToIndices) {
  Embedding layer({.input_dim = 4, .output_dim = 2});
  testing::build_layer(layer, {1, 2}, DType::kF32);
  layer.variables()[0]->assign(kTable);
  testing::expect_values(testing::run_layer(layer, testing::f32({1.7f, 2.2f}, {1, 2}), false).at(0), {10, 11, 20, 21});
}

TEST(Embedding, GradientsScatterAddIntoTheLookedUpRows) {
  Embedding layer({.input_dim = 4, .output_dim = 2});
  testing::build_layer(layer, {1, 5}, DType::kI32);
  const Array x = testing::i32({0, 0, 2, -1, 9}, {1, 5});
  // d sum(y) / d table: row 0 is read three times (0, 0 and the clamped -1), row 2 once, row 3
  // once (the clamped 9), row 1 never.
  const TraceFn forward = testing::layer_fn(layer, true);
  const TraceFn total = [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(forward(a)[0])}; };
  const std::vector<Array> args = testing::layer_args(layer, x, DType::kF64);
  testing::expect_values(testing::grads_at(total, args, {0}).at(0), {3, 3, 0, 0, 1, 1, 1, 1});
  testing::check_grads(forward, args);
}

TEST(Embedding, DefaultInitializerAndSummary) {
  Sequential model({std::make_shared<Embedding>(EmbeddingOptions{.input_dim = 10, .output_dim = 4})});
  model.build_model({1, 5}, DType::kI32);
  const std::vector<double> w = model.get_weights()[0].to_doubles();
  EXPECT_GE(*std::min_element(w.begin(), w.end()), -0.05);
  EXPECT_LT(*std::max_element(w.begin(), w.end()), 0.05);
  EXPECT_NE(w[0], w[1]);
  const std::string s = model.summary();
  for (const char* want : {"embedding (Embedding)", "(None, 5, 4)", "Total params: 40"}) {
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  }
}

TEST(Embedding, FitLearnsFromTokenSequences) {
  // Sequences of 3 tokens from a vocabulary of 6; the label is the first token's parity.
  const int64_t n = 48;
  Array x = Array::zeros({n, 3}, DType::kI32);
  Array y = Array::zeros({n}, DType::kI32);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < 3; ++t) x.data<int32_t>()[i * 3 + t] = static_cast<int32_t>((i * (t + 1) + t) % 6);
    y.data<int32_t>()[i] = x.data<int32_t>()[i * 3] % 2;
  }
  Sequential model({std::make_shared<Embedding>(EmbeddingOptions{.input_dim = 6, .output_dim = 4}),
                    std::make_shared<Flatten>(), std::make_shared<Dense>(DenseOptions{.units = 2})});
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.05}),
                 .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                     losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  auto history = model.fit({.x = x, .y = y, .batch_size = 16, .epochs = 15, .verbose = 0});
  const std::vector<double> loss = history->values("loss");
  EXPECT_LT(loss.back(), 0.2 * loss.front()) << loss.front() << " -> " << loss.back();
}

TEST(Embedding, BadOptionsAndInputsAreErrors) {
  expect_error([] { Embedding({.input_dim = 0, .output_dim = 2}); }, ErrorCode::kInvalidArgument,
               {"Embedding", "input_dim", "0"});
  expect_error([] { Embedding({.input_dim = 3, .output_dim = -1}); }, ErrorCode::kInvalidArgument,
               {"Embedding", "output_dim", "-1"});
  Sequential model({std::make_shared<Embedding>(EmbeddingOptions{.input_dim = 3, .output_dim = 2})});
  expect_error([&] { model.build_model({1, 2}, DType::kBool); }, ErrorCode::kDTypeMismatch, {"Embedding", "bool"});
}

}  // namespace
}  // namespace ingot
