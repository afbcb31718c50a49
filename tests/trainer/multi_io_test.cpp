// Models with several inputs and outputs (Keras's Model(inputs=[...], outputs=[...]) and fit with
// x and y as lists): per-output losses, loss_weights, per-output metrics and sample weights
// against hand computation, the compiled step against the interpreter, fit/evaluate/predict with
// lists, subclassed models overriding call_outputs, whole-model files, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "ingot/trainer/merge.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/model_io.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

/// in_a (2) and in_b (1) -> h = [in_a, in_b] (3) -> "reg" = Dense(1)(h), "cls" = Dense(2)(h)
/// (logits); no activations, so outputs are linear in the weights set by set_known_weights.
std::shared_ptr<Functional> two_by_two(ModelOptions options = {}) {
  KerasTensor a = Input({2}), b = Input({1});
  KerasTensor h = std::make_shared<Concatenate>()->operator()({a, b});
  KerasTensor reg = std::make_shared<Dense>(DenseOptions{.units = 1, .name = "reg"})->operator()(h);
  KerasTensor cls = std::make_shared<Dense>(DenseOptions{.units = 2, .name = "cls"})->operator()(h);
  return std::make_shared<Functional>(std::vector<KerasTensor>{a, b}, std::vector<KerasTensor>{reg, cls},
                                      std::move(options));
}

void set_known_weights(Model& m) {
  m.build_model({{{4, 2}, DType::kF32}, {{4, 1}, DType::kF32}});
  // reg: w = [1, -1, 2], b = 0.5; cls: W = [[1, 0], [0, 1], [1, -1]], b = [0, 0.25].
  m.set_weights({testing::f32({1, -1, 2}, {3, 1}), testing::f32({0.5f}, {1}), testing::f32({1, 0, 0, 1, 1, -1}, {3, 2}),
                 testing::f32({0, 0.25f}, {2})});
}

// Four samples: a (4, 2), b (4, 1), regression targets (4, 1), class labels (4,).
const Array kA = testing::f32({1, 2, 0, 1, -1, 0, 2, 2}, {4, 2});
const Array kB = testing::f32({0.5f, -1, 1, 0}, {4, 1});
const Array kYReg = testing::f32({0, 1, 2, -1}, {4, 1});
const Array kYCls = testing::i32({0, 1, 1, 0}, {4});

struct HandValues {
  std::vector<double> reg_sq, reg_abs, cls_ce, cls_hit;  // per sample
};

/// The outputs computed by hand from set_known_weights: reg = a0 - a1 + 2 b + 0.5,
/// cls = [a0 + b, a1 - b + 0.25]; squared / absolute errors, cross-entropy from logits, hits.
HandValues hand_values() {
  HandValues h;
  const std::vector<double> a = kA.to_doubles(), b = kB.to_doubles(), yr = kYReg.to_doubles(), yc = kYCls.to_doubles();
  for (size_t i = 0; i < 4; ++i) {
    const double reg = a[2 * i] - a[2 * i + 1] + 2 * b[i] + 0.5;
    const double z0 = a[2 * i] + b[i], z1 = a[2 * i + 1] - b[i] + 0.25;
    const double lse = std::log(std::exp(z0) + std::exp(z1));
    const int label = static_cast<int>(yc[i]);
    h.reg_sq.push_back((reg - yr[i]) * (reg - yr[i]));
    h.reg_abs.push_back(std::abs(reg - yr[i]));
    h.cls_ce.push_back(lse - (label == 0 ? z0 : z1));
    h.cls_hit.push_back(((z1 > z0) ? 1 : 0) == label ? 1 : 0);
  }
  return h;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

CompileOptions two_output_compile(bool jit = true) {
  return {.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1}),
          .losses = {std::make_shared<losses::MeanSquaredError>(),
                     std::make_shared<losses::SparseCategoricalCrossentropy>(
                         losses::SparseCategoricalCrossentropyOptions{.from_logits = true})},
          .loss_weights = {0.5, 2.0},
          .output_metrics = {{std::make_shared<metrics::MeanAbsoluteError>()},
                             {std::make_shared<metrics::SparseCategoricalAccuracy>()}},
          .jit_compile = jit};
}

TEST(MultiIO, LossIsTheWeightedSumOfTheOutputsLossesAndEachIsLogged) {
  for (bool jit : {true, false}) {
    auto model = two_by_two();
    set_known_weights(*model);
    model->compile(two_output_compile(jit));
    EXPECT_EQ(model->output_names(), (std::vector<std::string>{"reg", "cls"}));
    const HandValues h = hand_values();
    const Logs logs = model->test_on_batch({kA, kB}, {kYReg, kYCls});
    std::vector<std::string> names;
    for (const auto& [name, value] : logs) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"loss", "reg_loss", "cls_loss", "reg_mean_absolute_error",
                                               "cls_sparse_categorical_accuracy"}));
    EXPECT_NEAR(*logs.get("reg_loss"), 0.5 * mean(h.reg_sq), 1e-5) << "jit " << jit;
    EXPECT_NEAR(*logs.get("cls_loss"), 2.0 * mean(h.cls_ce), 1e-5);
    EXPECT_NEAR(*logs.get("loss"), 0.5 * mean(h.reg_sq) + 2.0 * mean(h.cls_ce), 1e-5);
    EXPECT_NEAR(*logs.get("reg_mean_absolute_error"), mean(h.reg_abs), 1e-5);
    EXPECT_NEAR(*logs.get("cls_sparse_categorical_accuracy"), mean(h.cls_hit), 1e-6);
  }
}

TEST(MultiIO, PerOutputSampleWeightsWeighEachOutputsLoss) {
  auto model = two_by_two();
  set_known_weights(*model);
  model->compile(two_output_compile());
  const HandValues h = hand_values();
  const std::vector<double> w_reg = {1, 0, 2, 1}, w_cls = {0, 1, 1, 0};
  const auto weighted = [](const std::vector<double>& v, const std::vector<double>& w) {
    double s = 0;
    for (size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
    return s / static_cast<double>(v.size());  // Keras's sum_over_batch_size reduction
  };
  Logs logs = model->test_on_batch({kA, kB}, {kYReg, kYCls},
                                   {testing::f32({1, 0, 2, 1}, {4}), testing::f32({0, 1, 1, 0}, {4})});
  EXPECT_NEAR(*logs.get("reg_loss"), 0.5 * weighted(h.reg_sq, w_reg), 1e-5);
  EXPECT_NEAR(*logs.get("cls_loss"), 2.0 * weighted(h.cls_ce, w_cls), 1e-5);
  // One sample-weight array applies to every output.
  logs = model->test_on_batch({kA, kB}, {kYReg, kYCls}, testing::f32({1, 0, 2, 1}, {4}));
  EXPECT_NEAR(*logs.get("reg_loss"), 0.5 * weighted(h.reg_sq, w_reg), 1e-5);
  EXPECT_NEAR(*logs.get("cls_loss"), 2.0 * weighted(h.cls_ce, w_reg), 1e-5);
}

TEST(MultiIO, AZeroLossWeightLeavesThatHeadUntrainedAndTheStepMatchesTheInterpreter) {
  std::vector<std::vector<Array>> after;
  for (bool jit : {true, false}) {
    auto model = two_by_two();
    set_known_weights(*model);
    CompileOptions c = two_output_compile(jit);
    c.loss_weights = {1.0, 0.0};
    model->compile(c);
    model->train_on_batch({kA, kB}, {kYReg, kYCls});
    after.push_back(model->get_weights());
    // SGD: reg's bias moves by -0.1 * d mse / d b = -0.1 * 2 * mean(reg - y); cls is untouched.
    const HandValues h = hand_values();
    double mean_err = 0;
    const std::vector<double> a = kA.to_doubles(), b = kB.to_doubles(), yr = kYReg.to_doubles();
    for (size_t i = 0; i < 4; ++i) mean_err += (a[2 * i] - a[2 * i + 1] + 2 * b[i] + 0.5 - yr[i]) / 4;
    EXPECT_NEAR(after.back()[1].to_doubles()[0], 0.5 - 0.1 * 2 * mean_err, 1e-5);
    EXPECT_EQ(after.back()[2].to_doubles(), (std::vector<double>{1, 0, 0, 1, 1, -1}));
    EXPECT_EQ(after.back()[3].to_doubles(), (std::vector<double>{0, 0.25}));
  }
  for (size_t v = 0; v < after[0].size(); ++v) testing::expect_values(after[0][v], after[1][v].to_doubles(), 1e-6);
}

/// (n, 2) and (n, 1) inputs; targets: reg = a0 * b, cls = (a0 + a1 > 0).
std::vector<Array> synthetic(int64_t n) {
  Array a = Array::zeros({n, 2}, DType::kF32), b = Array::zeros({n, 1}, DType::kF32);
  Array yr = Array::zeros({n, 1}, DType::kF32), yc = Array::zeros({n}, DType::kI32);
  for (int64_t i = 0; i < n; ++i) {
    const float a0 = std::sin(0.7f * static_cast<float>(i)), a1 = std::cos(1.3f * static_cast<float>(i));
    const float bb = std::sin(0.37f * static_cast<float>(i) + 1);
    a.data<float>()[2 * i] = a0;
    a.data<float>()[2 * i + 1] = a1;
    b.data<float>()[i] = bb;
    yr.data<float>()[i] = a0 - 2 * bb;
    yc.data<int32_t>()[i] = a0 + a1 > 0 ? 1 : 0;
  }
  return {a, b, yr, yc};
}

TEST(MultiIO, FitEvaluateAndPredictTakeLists) {
  auto model = two_by_two();
  CompileOptions c = two_output_compile();
  c.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.05});
  model->compile(c);
  const std::vector<Array> d = synthetic(96);
  auto hist = model->fit(
      {.x = {d[0], d[1]}, .y = {d[2], d[3]}, .batch_size = 16, .epochs = 30, .verbose = 0, .validation_split = 0.25});
  EXPECT_LT(hist->values("loss").back(), 0.2 * hist->values("loss").front());
  EXPECT_EQ(hist->values("val_reg_loss").size(), 30u);
  EXPECT_GT(hist->values("cls_sparse_categorical_accuracy").back(), 0.9);
  const Logs eval = model->evaluate({.x = {d[0], d[1]}, .y = {d[2], d[3]}, .batch_size = 32, .verbose = 0});
  EXPECT_NEAR(*eval.get("loss"), *eval.get("reg_loss") + *eval.get("cls_loss"), 1e-5);
  const std::vector<Array> pred = model->predict_outputs({.x = {d[0], d[1]}, .batch_size = 40});
  ASSERT_EQ(pred.size(), 2u);
  EXPECT_EQ(pred[0].shape(), (Shape{96, 1}));
  EXPECT_EQ(pred[1].shape(), (Shape{96, 2}));
  const std::vector<Array> one = model->predict_outputs_on_batch({d[0], d[1]});
  testing::expect_values(pred[0], one[0].to_doubles(), 1e-5);
  testing::expect_values(pred[1], one[1].to_doubles(), 1e-5);
  expect_error([&] { model->predict({.x = {d[0], d[1]}}); }, ErrorCode::kInvalidArgument, {"predict_outputs"});
}

TEST(MultiIO, SeveralInputsOneOutputPredictsOneArray) {
  KerasTensor a = Input({3}), b = Input({3});
  KerasTensor out =
      std::make_shared<Dense>(DenseOptions{.units = 1})->operator()(std::make_shared<Add>()->operator()({a, b}));
  Functional model({a, b}, {out});
  model.compile(
      {.optimizer = std::make_shared<optimizers::SGD>(), .loss = std::make_shared<losses::MeanSquaredError>()});
  const Array xa = testing::f32({1, 2, 3, 4, 5, 6}, {2, 3}), xb = testing::f32({1, 1, 1, -1, -1, -1}, {2, 3});
  const Array y = model.predict({.x = {xa, xb}});
  EXPECT_EQ(y.shape(), (Shape{2, 1}));
  // Add first: the same as one input holding the sum.
  const std::vector<Array> w = model.get_weights();
  std::vector<double> expect;
  for (int64_t i = 0; i < 2; ++i) {
    double s = w[1].to_doubles()[0];
    for (int64_t j = 0; j < 3; ++j) {
      s += (xa.to_doubles()[i * 3 + j] + xb.to_doubles()[i * 3 + j]) * w[0].to_doubles()[j];
    }
    expect.push_back(s);
  }
  testing::expect_values(y, expect, 1e-5);
  EXPECT_TRUE(model.fit({.x = {xa, xb}, .y = testing::f32({1, 2}, {2, 1}), .verbose = 0})->values("loss").size() == 1);
}

/// A subclassed model with two inputs and two outputs: call_outputs overridden.
class TwoHeads : public Model {
 public:
  TwoHeads() {
    trunk_ = track(std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "tanh"}));
    reg_ = track(std::make_shared<Dense>(DenseOptions{.units = 1}));
    cls_ = track(std::make_shared<Dense>(DenseOptions{.units = 2}));
  }
  std::string class_name() const override { return "TwoHeads"; }
  std::vector<Tensor> call_outputs(LayerContext& ctx, const std::vector<Tensor>& in) override {
    const Tensor h = (*trunk_)(ctx, concatenate({in.at(0), in.at(1)}, 1));
    return {(*reg_)(ctx, h), (*cls_)(ctx, h)};
  }

 private:
  std::shared_ptr<Dense> trunk_, reg_, cls_;
};

TEST(MultiIO, ASubclassedModelOverridingCallOutputsTrains) {
  TwoHeads model;
  CompileOptions c = two_output_compile();
  c.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.02});
  model.compile(c);
  const std::vector<Array> d = synthetic(64);
  auto hist = model.fit({.x = {d[0], d[1]}, .y = {d[2], d[3]}, .batch_size = 16, .epochs = 25, .verbose = 0});
  EXPECT_EQ(model.output_names(), (std::vector<std::string>{"output_1", "output_2"}));
  EXPECT_LT(hist->values("output_1_loss").back(), 0.3 * hist->values("output_1_loss").front());
  EXPECT_LT(hist->values("loss").back(), hist->values("loss").front());
}

TEST(MultiIO, AWholeModelFileRoundTripsSeveralInputs) {
  const std::string path = (std::filesystem::temp_directory_path() / "ingot_multi_io_model.safetensors").string();
  auto model = two_by_two();
  model->compile(two_output_compile());
  const std::vector<Array> d = synthetic(32);
  model->fit({.x = {d[0], d[1]}, .y = {d[2], d[3]}, .batch_size = 8, .epochs = 2, .verbose = 0});
  save_model(*model, path);
  auto fresh = two_by_two({.seed = 99});
  fresh->compile(two_output_compile());
  load_model(*fresh, path);  // builds the unbuilt model from both recorded inputs
  EXPECT_EQ(fresh->input_types().size(), 2u);
  const std::vector<Array> p0 = model->predict_outputs_on_batch({d[0], d[1]});
  const std::vector<Array> p1 = fresh->predict_outputs_on_batch({d[0], d[1]});
  EXPECT_EQ(p0[0].to_doubles(), p1[0].to_doubles());
  EXPECT_EQ(p0[1].to_doubles(), p1[1].to_doubles());
  std::filesystem::remove(path);
}

TEST(MultiIO, AGeneratorDescribesEveryInput) {
  auto model = two_by_two();
  model->compile(two_output_compile());
  const std::vector<Array> d = synthetic(8);
  auto data = std::make_shared<GeneratorDataAdapter>(
      [d] {
        auto done = std::make_shared<bool>(false);
        return [d, done]() -> std::optional<Batch> {
          if (*done) return std::nullopt;
          *done = true;
          return Batch{{d[0], d[1]}, {d[2], d[3]}, {}};
        };
      },
      std::vector<ir::TensorType>{{{8, 2}, DType::kF32}, {{8, 1}, DType::kF32}}, 1);
  auto hist = model->fit({.data = data, .epochs = 2, .verbose = 0});
  EXPECT_EQ(hist->values("reg_loss").size(), 2u);
}

TEST(MultiIO, MismatchedListsAreNamedBeforeAnyStep) {
  const std::vector<Array> d = synthetic(8);
  auto model = two_by_two();
  model->compile(two_output_compile());
  model->build_model({{{8, 2}, DType::kF32}, {{8, 1}, DType::kF32}});
  const std::vector<Array> before = model->get_weights();
  expect_error([&] { model->fit({.x = {d[0], d[1]}, .y = d[2], .verbose = 0}); }, ErrorCode::kInvalidArgument,
               {"1 y arrays for model"});
  expect_error([&] { model->fit({.x = d[0], .y = {d[2], d[3]}, .verbose = 0}); }, ErrorCode::kShapeMismatch,
               {"was built for inputs"});
  expect_error(
      [&] {
        model->fit({.x = {d[0], d[1]},
                    .y = {d[2], d[3]},
                    .sample_weight = {Array::full({8}, 1.0, DType::kF32), Array::full({8}, 1.0, DType::kF32),
                                      Array::full({8}, 1.0, DType::kF32)},
                    .verbose = 0});
      },
      ErrorCode::kInvalidArgument, {"3 sample_weight arrays"});
  expect_error([&] { model->fit({.x = {d[0], d[1]}, .y = {d[2], d[3]}, .verbose = 0, .class_weight = {{0, 1.0}}}); },
               ErrorCode::kInvalidArgument, {"class_weight"});
  expect_error([&] { model->fit({.x = {d[0], testing::f32({1, 2}, {2, 1})}, .y = {d[2], d[3]}, .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"x[1] has shape (2, 1) but x has 8 samples"});
  const std::vector<Array> after = model->get_weights();  // nothing trained
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].to_doubles(), before[i].to_doubles());

  auto three_losses = two_by_two();
  CompileOptions c = two_output_compile();
  c.losses.push_back(std::make_shared<losses::MeanSquaredError>());
  three_losses->compile(c);
  expect_error([&] { three_losses->fit({.x = {d[0], d[1]}, .y = {d[2], d[3]}, .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"losses has 3 entries, model 'functional' has 2 outputs (reg, cls)"});
  auto flat_metrics = two_by_two();
  c = two_output_compile();
  c.metrics = {std::make_shared<metrics::MeanAbsoluteError>()};
  flat_metrics->compile(c);
  expect_error([&] { flat_metrics->evaluate({.x = {d[0], d[1]}, .y = {d[2], d[3]}, .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"output_metrics"});
  c = two_output_compile();
  c.loss = std::make_shared<losses::MeanSquaredError>();
  expect_error([&] { two_by_two()->compile(c); }, ErrorCode::kInvalidArgument, {"both loss and losses"});
  c = two_output_compile();
  c.loss_weights = {1.0, std::nan("")};
  expect_error([&] { two_by_two()->compile(c); }, ErrorCode::kInvalidArgument, {"loss_weights[1] is nan"});
  KerasTensor in = Input({2});
  expect_error([&] { Functional({in, in}, {std::make_shared<Dense>(DenseOptions{.units = 1})->operator()(in)}); },
               ErrorCode::kInvalidArgument, {"the same Input"});
}

TEST(MultiIO, AMetricErrorNamesItsOutput) {
  auto model = two_by_two();
  CompileOptions c = two_output_compile();
  // MeanAbsoluteError on the class logits (4, 2) against labels (4,): a shape error, named.
  c.output_metrics = {{}, {std::make_shared<metrics::MeanAbsoluteError>()}};
  model->compile(c);
  expect_error([&] { model->test_on_batch({kA, kB}, {kYReg, kYCls}); }, ErrorCode::kShapeMismatch,
               {"metric 'cls_mean_absolute_error' of output 'cls'"});
}

TEST(MultiIO, OneLossAppliesToEveryOutput) {
  KerasTensor in = Input({2});
  KerasTensor o1 = std::make_shared<Dense>(DenseOptions{.units = 1, .name = "first"})->operator()(in);
  KerasTensor o2 = std::make_shared<Dense>(DenseOptions{.units = 1, .name = "second"})->operator()(in);
  Functional model({in}, {o1, o2});
  model.compile(
      {.optimizer = std::make_shared<optimizers::SGD>(), .loss = std::make_shared<losses::MeanSquaredError>()});
  const Array x = testing::f32({1, 2, 3, 4}, {2, 2}), y1 = testing::f32({0, 1}, {2, 1}),
              y2 = testing::f32({2, -1}, {2, 1});
  const Logs logs = model.test_on_batch(x, {y1, y2});
  EXPECT_NEAR(*logs.get("loss"), *logs.get("first_loss") + *logs.get("second_loss"), 1e-6);
  const std::vector<Array> p = model.predict_outputs_on_batch(x);
  double l1 = 0, l2 = 0;
  for (size_t i = 0; i < 2; ++i) {
    l1 += std::pow(p[0].to_doubles()[i] - y1.to_doubles()[i], 2) / 2;
    l2 += std::pow(p[1].to_doubles()[i] - y2.to_doubles()[i], 2) / 2;
  }
  EXPECT_NEAR(*logs.get("first_loss"), l1, 1e-5);
  EXPECT_NEAR(*logs.get("second_loss"), l2, 1e-5);
}

}  // namespace
}  // namespace ingot
