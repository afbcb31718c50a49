// Variables, initializers, layers and Sequential models: building by shape inference, names,
// summary, compiled prediction against a hand computation and the interpreter, weights get/set.
#include "ingot/trainer/model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ingot/interp/interpreter.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

TEST(Initializers, FansAndRanges) {
  EXPECT_EQ(initializers::compute_fans({784, 128}), (std::pair<double, double>{784, 128}));
  EXPECT_EQ(initializers::compute_fans({3, 3, 32, 64}), (std::pair<double, double>{288, 576}));
  const Array g = initializers::glorot_uniform()({100, 50}, DType::kF32, 7);
  const double limit = std::sqrt(6.0 / 150.0);
  double lo = 1, hi = -1;
  for (float v : g.to_vector<float>()) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  EXPECT_GE(lo, -limit);
  EXPECT_LE(hi, limit);
  EXPECT_LT(lo, -0.9 * limit);  // 5000 draws reach near both ends
  EXPECT_GT(hi, 0.9 * limit);
  EXPECT_EQ(g.to_vector<float>(), initializers::glorot_uniform()({100, 50}, DType::kF32, 7).to_vector<float>());
  EXPECT_NE(g.to_vector<float>(), initializers::glorot_uniform()({100, 50}, DType::kF32, 8).to_vector<float>());
  // he_normal: variance 2 / fan_in (Keras rescales the truncated normal), values within 2 sigma'.
  const Array h = initializers::he_normal()({400, 100}, DType::kF32, 3);
  double sum2 = 0;
  for (float v : h.to_vector<float>()) sum2 += double(v) * v;
  EXPECT_NEAR(sum2 / 40000.0, 2.0 / 400.0, 0.15 * 2.0 / 400.0);
  expect_error([] { initializers::get("lecun_normal"); }, ErrorCode::kNotFound, {"lecun_normal", "glorot_uniform"});
  expect_error([] { initializers::he_normal()({2}, DType::kI32, 0); }, ErrorCode::kInvalidArgument,
               {"he_normal", "i32"});
}

TEST(Variable, AssignChecksAndPurge) {
  Variable v("w", Array::zeros({2, 3}, DType::kF32));
  Array source = Array::full({2, 3}, 1.5, DType::kF32);
  v.assign(source);
  source.data<float>()[0] = 9;  // the variable holds its own copy
  EXPECT_EQ(v.value().to_vector<float>(), std::vector<float>(6, 1.5f));
  expect_error([&] { v.assign(Array::zeros({3, 2}, DType::kF32)); }, ErrorCode::kShapeMismatch,
               {"'w'", "(2, 3)", "(3, 2)"});
  expect_error([&] { v.assign(Array::zeros({2, 3}, DType::kF64)); }, ErrorCode::kDTypeMismatch, {"'w'", "f64"});
  EXPECT_EQ(v.value().to_vector<float>(), std::vector<float>(6, 1.5f));  // unchanged
  v.purge();
  expect_error([&] { v.value(); }, ErrorCode::kFailedPrecondition, {"'w'", "purged"});
  v.sync(Array::full({2, 3}, 2.0, DType::kF32));
  EXPECT_EQ(v.value().to_vector<float>(), std::vector<float>(6, 2.0f));
}

TEST(Sequential, BuildsByShapeNamesLayersAndSummarises) {
  Sequential model({std::make_shared<Flatten>(),
                    std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 10, .activation = "softmax"})});
  EXPECT_FALSE(model.input_type().has_value());
  model.build_model({1, 28, 28});
  std::vector<std::string> names;
  for (Variable* v : model.variables()) names.push_back(v->name());
  EXPECT_EQ(names, (std::vector<std::string>{"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"}));
  EXPECT_EQ(model.variables()[0]->shape(), (Shape{784, 16}));
  EXPECT_EQ(model.count_params(), 784 * 16 + 16 + 16 * 10 + 10);
  const std::string s = model.summary();
  for (const char* want : {"Model: \"sequential\"", "flatten (Flatten)", "(None, 784)", "dense_1 (Dense)", "(None, 10)",
                           "12730", "Total params: 12730", "Trainable params: 12730", "Non-trainable params: 0"}) {
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  }
  // Same seed, same weights; another model seed, other weights.
  Sequential again({std::make_shared<Flatten>(), std::make_shared<Dense>(DenseOptions{.units = 16})});
  again.build_model({1, 28, 28});
  EXPECT_EQ(again.get_weights()[0].to_vector<float>(), model.get_weights()[0].to_vector<float>());
  Sequential other({std::make_shared<Flatten>(), std::make_shared<Dense>(DenseOptions{.units = 16})}, {.seed = 1});
  other.build_model({1, 28, 28});
  EXPECT_NE(other.get_weights()[0].to_vector<float>(), model.get_weights()[0].to_vector<float>());
}

TEST(Sequential, PredictOnBatchMatchesAHandComputation) {
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 2, .activation = "relu"})});
  model.build_model({1, 3});
  model.set_weights({testing::f32({1, -1, 0.5f, 2, 0, -3}, {3, 2}), testing::f32({0.25f, -1}, {2})});
  // W = [[1, -1], [0.5, 2], [0, -3]], b = [0.25, -1].
  const Array x = testing::f32({2, 1, 0, 0, 1, 1}, {2, 3});
  // x @ W = [[2 + 0.5 + 0, -2 + 0 + 0], [0 + 0.5 + 0, 0 + 0 - 3]] = [[2.5, -2], [0.5, -3]]
  // + b = [[2.75, -3], [0.75, -4]]; relu = [[2.75, 0], [0.75, 0]]
  EXPECT_EQ(model.predict_on_batch(x).to_vector<float>(), (std::vector<float>{2.75f, 0, 0.75f, 0}));
  // Another batch size reuses the model (and compiles one more signature).
  EXPECT_EQ(model.predict_on_batch(testing::f32({2, 1, 0}, {1, 3})).to_vector<float>(), (std::vector<float>{2.75f, 0}));
  expect_error([&] { model.predict_on_batch(testing::f32({1, 2, 3, 4}, {1, 4})); }, ErrorCode::kShapeMismatch,
               {"sequential", "(1, 4)"});
}

TEST(Sequential, CnnForwardCompiledMatchesTheInterpreter) {
  Sequential model({std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 4, .activation = "relu"}),
                    std::make_shared<MaxPooling2D>(), std::make_shared<Flatten>(),
                    std::make_shared<Dense>(DenseOptions{.units = 10, .activation = "softmax"})});
  Array x = Array::zeros({2, 10, 10, 1}, DType::kF32);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
  const Array y = model.predict_on_batch(x);
  ASSERT_EQ(y.shape(), (Shape{2, 10}));
  EXPECT_NE(model.summary().find("(None, 4, 4, 4)"), std::string::npos) << model.summary();
  std::vector<ir::TensorType> types;
  std::vector<Array> args;
  for (Variable* v : model.variables()) {
    types.push_back(v->type());
    args.push_back(v->value());
  }
  types.push_back({x.shape(), x.dtype()});
  args.push_back(x);
  const Array want = interp::interpret(trace(model.forward_fn(false), types, "cnn"), args).at(0);
  const std::vector<float> a = y.to_vector<float>(), b = want.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int c = 0; c < 10; ++c) s += a[static_cast<size_t>(r * 10 + c)];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

TEST(Sequential, BadLayersAndWeightsAreErrorsThatChangeNothing) {
  expect_error([] { Dense(DenseOptions{.units = 0}); }, ErrorCode::kInvalidArgument, {"Dense", "units", "0"});
  expect_error([] { Dense(DenseOptions{.units = 3, .activation = "mish"}); }, ErrorCode::kNotFound, {"mish", "relu"});
  expect_error([] { Conv2D(Conv2DLayerOptions{.filters = 2, .padding = "full"}); }, ErrorCode::kInvalidArgument,
               {"Conv2D", "full"});
  expect_error([] { Reshape({-1, -1}); }, ErrorCode::kInvalidArgument, {"Reshape", "-1"});
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 2})});
  model.build_model({4, 3});
  const std::vector<Array> before = model.get_weights();
  expect_error([&] { model.set_weights({Array::zeros({3, 2}, DType::kF32), Array::zeros({3}, DType::kF32)}); },
               ErrorCode::kShapeMismatch, {"dense/bias", "(2,)", "(3,)"});
  EXPECT_EQ(model.get_weights()[0].to_vector<float>(), before[0].to_vector<float>());
  expect_error([&] { model.set_weights({}); }, ErrorCode::kInvalidArgument, {"0 arrays", "2 variables"});
  expect_error([&] { model.add(std::make_shared<Flatten>()); }, ErrorCode::kFailedPrecondition, {"already built"});
  expect_error([&] { model.build_model({4, 5}); }, ErrorCode::kShapeMismatch, {"(4, 3)", "(4, 5)"});
  expect_error([] { Sequential().build_model({1, 2}); }, ErrorCode::kFailedPrecondition, {"no layers"});
  Sequential conv({std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 2})});
  expect_error([&] { conv.build_model({2, 5}); }, ErrorCode::kShapeMismatch, {"Conv2D", "rank 4", "(2, 5)"});
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(Functional, InputAndLayerCallsMakeAModel) {
  KerasTensor in = Input({28, 28, 1});
  KerasTensor h = std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 4, .activation = "relu"})->operator()(in);
  EXPECT_EQ(h.shape(), (Shape{26, 26, 4}));
  h = std::make_shared<MaxPooling2D>()->operator()(h);
  h = std::make_shared<Flatten>()->operator()(h);
  KerasTensor out = std::make_shared<Dense>(DenseOptions{.units = 10, .activation = "softmax"})->operator()(h);
  EXPECT_EQ(out.shape(), (Shape{10}));
  Functional model(in, out);
  std::vector<std::string> names;
  for (Variable* v : model.variables()) names.push_back(v->name());
  EXPECT_EQ(names, (std::vector<std::string>{"conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"}));
  EXPECT_NE(model.summary().find("max_pooling2d (MaxPooling2D)"), std::string::npos) << model.summary();
  Array x = Array::zeros({3, 28, 28, 1}, DType::kF32);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = std::cos(0.11f * static_cast<float>(i));
  const Array y = model.predict_on_batch(x);
  ASSERT_EQ(y.shape(), (Shape{3, 10}));
  // The same layers as a Sequential with the same weights give the same outputs.
  Sequential seq({std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 4, .activation = "relu"}),
                  std::make_shared<MaxPooling2D>(), std::make_shared<Flatten>(),
                  std::make_shared<Dense>(DenseOptions{.units = 10, .activation = "softmax"})});
  seq.build_model({1, 28, 28, 1});
  seq.set_weights(model.get_weights());
  EXPECT_EQ(seq.predict_on_batch(x).to_vector<float>(), y.to_vector<float>());
}

TEST(Functional, TwoDenseLayersGetDistinctNamesAndSeedsAndTrain) {
  KerasTensor in = Input({4});
  KerasTensor h = std::make_shared<Dense>(DenseOptions{.units = 4})->operator()(in);
  KerasTensor out = std::make_shared<Dense>(DenseOptions{.units = 4})->operator()(h);
  Functional model(in, out);
  EXPECT_EQ(model.variables()[2]->name(), "dense_1/kernel");
  EXPECT_NE(model.get_weights()[0].to_vector<float>(), model.get_weights()[2].to_vector<float>());
  model.compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.05}),
                 .loss = std::make_shared<losses::MeanSquaredError>()});
  Array x = Array::zeros({32, 4}, DType::kF32);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = std::sin(0.3f * static_cast<float>(i));
  auto history = model.fit({.x = x, .y = x, .batch_size = 8, .epochs = 20, .verbose = 0});
  EXPECT_LT(history->values("loss").back(), 0.5 * history->values("loss").front());
}

TEST(Functional, MisuseIsAClearError) {
  Dense on_stack(DenseOptions{.units = 2});
  expect_error([&] { on_stack(Input({3})); }, ErrorCode::kFailedPrecondition, {"std::shared_ptr"});
  KerasTensor a = Input({3}, DType::kF32, "a"), b = Input({3}, DType::kF32, "b");
  KerasTensor out = std::make_shared<Dense>(DenseOptions{.units = 2})->operator()(b);
  expect_error([&] { Functional(a, out); }, ErrorCode::kInvalidArgument, {"input 'b'"});
  expect_error([] { Input({-1, 3}); }, ErrorCode::kInvalidArgument, {"negative"});
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(DropoutLayer, DropsAndScalesInTrainingOnlyAndAdvancesItsState) {
  Sequential model({std::make_shared<Dropout>(DropoutOptions{.rate = 0.25, .seed = 7})});
  model.build_model({1, 1000});
  ASSERT_EQ(model.non_trainable_variables().size(), 1u);
  EXPECT_EQ(model.non_trainable_variables()[0]->name(), "dropout/seed_generator_state");
  const Array x = Array::full({4, 1000}, 2.0, DType::kF32);
  EXPECT_EQ(model.predict({.x = x}).to_vector<float>(), x.to_vector<float>());  // not training: identity
  // Training: a step through the trainer (MSE against 0 with lr 0 only reads the output).
  std::vector<Tensor> seen;
  TraceFn step = [&](const std::vector<Tensor>& a) {
    LayerContext ctx(/*training=*/true);
    ctx.bind(*model.non_trainable_variables()[0], a[0]);
    Tensor y = model(ctx, a[1]);
    return std::vector<Tensor>{y, *ctx.new_value(*model.non_trainable_variables()[0])};
  };
  Jitted f = jit(step);
  const std::vector<Array> out = f({model.non_trainable_variables()[0]->value(), x});
  int64_t zeros = 0, scaled = 0;
  for (float v : out[0].to_vector<float>()) {
    zeros += v == 0.0f ? 1 : 0;
    scaled += std::abs(v - 2.0f / 0.75f) < 1e-6 ? 1 : 0;
  }
  EXPECT_EQ(zeros + scaled, 4000);
  EXPECT_NEAR(static_cast<double>(zeros) / 4000.0, 0.25, 0.03);  // about `rate` of the elements
  EXPECT_NE(out[1].to_vector<uint64_t>(), model.non_trainable_variables()[0]->value().to_vector<uint64_t>());
  expect_error([] { Dropout(DropoutOptions{.rate = 1.0}); }, ErrorCode::kInvalidArgument, {"Dropout", "rate", "1"});
}

TEST(DropoutLayer, TrainsInFitWithRepeatableResults) {
  auto run = [] {
    Sequential m({std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"}),
                  std::make_shared<Dropout>(DropoutOptions{.rate = 0.5}),
                  std::make_shared<Dense>(DenseOptions{.units = 1})});
    m.compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.05}),
               .loss = std::make_shared<losses::MeanSquaredError>()});
    Array x = Array::zeros({16, 3}, DType::kF32), y = Array::zeros({16, 1}, DType::kF32);
    for (int64_t i = 0; i < 48; ++i) x.data<float>()[i] = std::sin(0.5f * static_cast<float>(i));
    for (int64_t i = 0; i < 16; ++i) y.data<float>()[i] = x.data<float>()[3 * i] - x.data<float>()[3 * i + 2];
    const double before = *m.evaluate({.x = x, .y = y, .verbose = 0}).get("loss");
    auto h = m.fit({.x = x, .y = y, .batch_size = 4, .epochs = 40, .verbose = 0});
    const double after = *m.evaluate({.x = x, .y = y, .verbose = 0}).get("loss");  // no dropout
    return std::make_tuple(h->values("loss"), before, after);
  };
  const auto [a, before, after] = run();
  EXPECT_EQ(a, std::get<0>(run()));  // the dropout state is seeded: the same run gives the same history
  EXPECT_LT(after, before);
}

TEST(RescalingLayer, U8PixelsTrainLikePrescaledFloats) {
  // The same Dense model fed raw u8 pixels through Rescaling(1/255) and fed pixel / 255 as f32:
  // the same predictions and the same fit history (convert then multiply, in f32 either way).
  Array u8 = Array::zeros({8, 2, 2}, DType::kU8), f = Array::zeros({8, 2, 2}, DType::kF32);
  Array y = Array::zeros({8}, DType::kI32);
  for (int64_t i = 0; i < 32; ++i) {
    u8.data<uint8_t>()[i] = static_cast<uint8_t>((37 * i) % 256);
    f.data<float>()[i] = static_cast<float>(u8.data<uint8_t>()[i]) * static_cast<float>(1.0 / 255);
  }
  for (int64_t i = 0; i < 8; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i % 3);
  auto run = [&](bool raw) {
    std::vector<std::shared_ptr<Layer>> layers;
    // Same layer positions (so the same seeds and weights): the f32 model rescales by 1.
    layers.push_back(std::make_shared<Rescaling>(raw ? 1.0 / 255 : 1.0));
    layers.push_back(std::make_shared<Flatten>());
    layers.push_back(std::make_shared<Dense>(DenseOptions{.units = 3}));
    Sequential m(layers);
    m.compile({.optimizer = std::make_shared<optimizers::Adam>(),
               .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                   losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
    auto h = m.fit({.x = raw ? u8 : f, .y = y, .batch_size = 4, .epochs = 3, .verbose = 0});
    return std::make_pair(h->values("loss"), m.predict({.x = raw ? u8 : f}).to_vector<float>());
  };
  const auto [loss_raw, pred_raw] = run(true);
  const auto [loss_f32, pred_f32] = run(false);
  EXPECT_EQ(loss_raw, loss_f32);
  EXPECT_EQ(pred_raw, pred_f32);
  // Offset too, on the interpreter's reference: 2 * x - 1.
  Sequential shift({std::make_shared<Rescaling>(2.0, -1.0)});
  EXPECT_EQ(shift.predict_on_batch(testing::f32({0, 0.5f, 3}, {1, 3})).to_vector<float>(),
            (std::vector<float>{-1, 0, 5}));
  expect_error([] { Rescaling(std::nan("")); }, ErrorCode::kInvalidArgument, {"Rescaling", "finite"});
}

}  // namespace
}  // namespace ingot
