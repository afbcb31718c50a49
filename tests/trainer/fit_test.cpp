// compile / fit / evaluate / predict / *_on_batch against the trainer contract
// (TRAINER_SEMANTICS.md) with exact values, plus weights I/O through the model.
#include <gtest/gtest.h>

#include <cmath>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "ingot/trainer/layers_normalization.h"
#include "ingot/trainer/model.h"
#include "linear_model.h"
#include "compiler/codegen/parity.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

using testing::linear;

CompileOptions sgd_mse(double lr, int64_t steps_per_execution = 1) {
  return {.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = lr}),
          .loss = std::make_shared<losses::MeanSquaredError>(),
          .steps_per_execution = steps_per_execution};
}

TEST(Fit, LinearRegressionWithSgdFollowsTheHandComputedTrajectory) {
  // x = [1, 2], y = [3, 5]; w = 0, b = 0; lr = 0.1; one batch of 2 per step.
  auto model = linear(0, 0);
  model->compile(sgd_mse(0.1));
  const Array x = testing::f32({1, 2}, {2, 1}), y = testing::f32({3, 5}, {2, 1});
  auto history = model->fit({.x = x, .y = y, .batch_size = 2, .epochs = 2, .verbose = 0, .shuffle = false});
  // Step 1: pred [0, 0]; loss = (9 + 25) / 2 = 17; dL/dw = mean(2 (p - y) x) = (-6 - 20) / 2 = -13,
  // dL/db = mean(2 (p - y)) = (-6 - 10) / 2 = -8; w = 1.3, b = 0.8.
  // Step 2: pred [2.1, 3.4]; loss = (0.81 + 2.56) / 2 = 1.685; dL/dw = (-1.8 - 6.4) / 2 = -4.1,
  // dL/db = (-1.8 - 3.2) / 2 = -2.5; w = 1.71, b = 1.05.
  const std::vector<double>& loss = history->values("loss");
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_NEAR(loss[0], 17.0, 1e-5);
  EXPECT_NEAR(loss[1], 1.685, 1e-5);
  const std::vector<Array> w = model->get_weights();
  EXPECT_NEAR(w[0].to_vector<float>()[0], 1.71, 1e-5);
  // The variables' shardings were recorded before the first step (one device here).
  for (Variable* v : model->variables()) {
    ASSERT_TRUE(v->sharding().has_value());
    EXPECT_EQ(*v->sharding(), NamedSharding::single_device(default_cpu_device()));
  }
  EXPECT_NEAR(w[1].to_vector<float>()[0], 1.05, 1e-5);
}

TEST(Fit, TheProgressBarShowsTheTrainStepsGflopsWhenAskedFor) {
  // y = w x + b on 4 samples of 1 feature: the step's FLOPs come from its cost analysis
  // (Model::train_step_cost_analysis); ProgbarLoggerOptions::show_gflops puts the rate after the
  // time per step of the epoch line, and nothing when off.
  const Array x = testing::f32({1, 2, 3, 4}, {4, 1}), y = testing::f32({3, 5, 7, 9}, {4, 1});
  for (bool show : {true, false}) {
    auto model = linear(0, 0);
    model->compile(sgd_mse(0.01));
    std::ostringstream out;
    auto bar = std::make_shared<callbacks::ProgbarLogger>(
        callbacks::ProgbarLoggerOptions{.stream = &out, .show_gflops = show});
    model->fit({.x = x, .y = y, .batch_size = 2, .epochs = 1, .verbose = 2, .callbacks = {bar}, .shuffle = false});
    EXPECT_GT(model->train_step_cost_analysis().flops, 0);
    EXPECT_EQ(out.str().find("GFLOP/s - loss: ") != std::string::npos, show) << out.str();
    EXPECT_NE(out.str().find("/step"), std::string::npos) << out.str();
  }
}

TEST(Fit, LossScalingChangesNeitherTheUpdatesNorTheLoggedLoss) {
  // With loss_scale_factor 1024 the gradient is taken of 1024 * loss and divided back: the same
  // trajectory and the same logged (unscaled) loss as without scaling (the first test's values).
  auto model = linear(0, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(
                      optimizers::SGDOptions{.learning_rate = 0.1, .loss_scale_factor = 1024.0}),
                  .loss = std::make_shared<losses::MeanSquaredError>()});
  auto h = model->fit({.x = testing::f32({1, 2}, {2, 1}),
                       .y = testing::f32({3, 5}, {2, 1}),
                       .batch_size = 2,
                       .epochs = 2,
                       .verbose = 0,
                       .shuffle = false});
  EXPECT_NEAR(h->values("loss")[0], 17.0, 1e-4);
  EXPECT_NEAR(h->values("loss")[1], 1.685, 1e-4);
  EXPECT_NEAR(model->get_weights()[0].to_vector<float>()[0], 1.71, 1e-5);
}

/// A custom train_step (Keras: override train_step): gradients halved before the update.
class HalfStepModel final : public Sequential {
 public:
  using Sequential::Sequential;
  void train_step(TrainStepState& s) override {
    StepGradients g = compute_gradients(s);
    for (Tensor& t : g.gradients) t = t * 0.5;
    apply_gradients(s, g.gradients);
    update_metrics(s, g.loss, g.y_pred, g.output_losses);
  }
};

TEST(Fit, ACustomTrainStepReplacesTheDefaultOne) {
  auto make = [](bool custom) -> std::shared_ptr<Sequential> {
    std::vector<std::shared_ptr<Layer>> layers = {std::make_shared<Dense>(DenseOptions{.units = 1})};
    auto m = custom ? std::make_shared<HalfStepModel>(layers) : std::make_shared<Sequential>(layers);
    m->build_model({1, 1});
    m->set_weights({testing::f32({0}, {1, 1}), testing::f32({0}, {1})});
    return m;
  };
  auto custom = make(true), plain = make(false);
  custom->compile(sgd_mse(0.1));
  plain->compile(sgd_mse(0.05));  // half the gradient at lr 0.1 == the whole gradient at lr 0.05
  const Array x = testing::f32({1, 2}, {2, 1}), y = testing::f32({3, 5}, {2, 1});
  auto hc = custom->fit({.x = x, .y = y, .batch_size = 2, .epochs = 3, .verbose = 0, .shuffle = false});
  auto hp = plain->fit({.x = x, .y = y, .batch_size = 2, .epochs = 3, .verbose = 0, .shuffle = false});
  EXPECT_NEAR(custom->get_weights()[0].to_vector<float>()[0], plain->get_weights()[0].to_vector<float>()[0], 1e-6);
  EXPECT_NEAR(hc->values("loss")[2], hp->values("loss")[2], 1e-5);
  EXPECT_NEAR(hc->values("loss")[0], 17.0, 1e-5);
}

TEST(Fit, CompilerAndLoweringOptionsReachTheSteps) {
  // Serial generated loops instead of library GEMMs: the same trajectory as the first test.
  auto model = linear(0, 0);
  CompileOptions c = sgd_mse(0.1);
  c.compiler.num_threads = 1;
  c.lowering.blas_gemm = false;
  const auto dir = std::filesystem::temp_directory_path() / "ingot_fit_compiler_options";
  std::filesystem::remove_all(dir);
  c.compiler.dump_dir = dir.string();
  model->compile(c);
  model->fit({.x = testing::f32({1, 2}, {2, 1}),
              .y = testing::f32({3, 5}, {2, 1}),
              .batch_size = 2,
              .epochs = 2,
              .verbose = 0,
              .shuffle = false});
  EXPECT_NEAR(model->get_weights()[0].to_vector<float>()[0], 1.71, 1e-5);
  EXPECT_TRUE(std::filesystem::exists(dir / "00-input.mlir"));  // the dump option reached the jit
  std::filesystem::remove_all(dir);
}

TEST(Fit, EpochLossIsWeightedByBatchSize) {
  // Predictions stay 0 (lr 0): MAE batches of 2 and 1 samples have losses 10 and 9 -> 29 / 3.
  auto model = linear(0, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.0}),
                  .loss = std::make_shared<losses::MeanAbsoluteError>()});
  auto history = model->fit({.x = testing::f32({1, 1, 1}, {3, 1}),
                             .y = testing::f32({10, 10, 9}, {3, 1}),
                             .batch_size = 2,
                             .verbose = 0,
                             .shuffle = false});
  EXPECT_NEAR(history->values("loss")[0], 29.0 / 3.0, 1e-5);
}

TEST(Fit, StepsPerExecutionFiresHooksPerCallAndEqualsSingleSteps) {
  Array x = Array::zeros({100, 1}, DType::kF32), y = Array::zeros({100, 1}, DType::kF32);
  for (int64_t i = 0; i < 100; ++i) {
    x.data<float>()[i] = 0.01f * static_cast<float>(i);
    y.data<float>()[i] = 2.0f * x.data<float>()[i] + 1.0f;
  }
  // Keras 3: on_*_batch_begin gets the call's first step, on_*_batch_end its last.
  struct Hooks {
    std::vector<int64_t> train_begin, train_end, test_begin, test_end, predict_begin, predict_end;
  };
  auto run = [&](int64_t k, Hooks* hooks) {
    auto model = linear(0.5f, 0);
    model->compile(sgd_mse(0.05, k));
    const auto add = [](std::vector<int64_t>& to) {
      return [&to](int64_t batch, const Logs&) { to.push_back(batch); };
    };
    auto record = std::make_shared<callbacks::LambdaCallback>(
        callbacks::LambdaCallbackOptions{.on_train_batch_begin = add(hooks->train_begin),
                                         .on_train_batch_end = add(hooks->train_end),
                                         .on_test_batch_begin = add(hooks->test_begin),
                                         .on_test_batch_end = add(hooks->test_end),
                                         .on_predict_batch_begin = add(hooks->predict_begin),
                                         .on_predict_batch_end = add(hooks->predict_end)});
    auto h = model->fit({.x = x, .y = y, .batch_size = 16, .verbose = 0, .callbacks = {record}, .shuffle = false});
    model->evaluate({.x = x, .y = y, .batch_size = 16, .verbose = 0, .callbacks = {record}});
    model->predict({.x = x, .batch_size = 16, .verbose = 0, .callbacks = {record}});
    return std::make_pair(model->get_weights(), h->values("loss"));
  };
  Hooks hooks1, hooks3;
  const auto [w1, l1] = run(1, &hooks1);
  const auto [w3, l3] = run(3, &hooks3);
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6};  // 7 batches, the last of 4
  for (const auto* v : {&hooks1.train_begin, &hooks1.train_end, &hooks1.test_begin, &hooks1.test_end,
                        &hooks1.predict_begin, &hooks1.predict_end}) {
    EXPECT_EQ(*v, all);
  }
  for (const auto* v : {&hooks3.train_begin, &hooks3.test_begin, &hooks3.predict_begin}) {
    EXPECT_EQ(*v, (std::vector<int64_t>{0, 3, 6}));
  }
  for (const auto* v : {&hooks3.train_end, &hooks3.test_end, &hooks3.predict_end}) {
    EXPECT_EQ(*v, (std::vector<int64_t>{2, 5, 6}));
  }
  EXPECT_EQ(w1[0].to_vector<float>(), w3[0].to_vector<float>());  // so predictions are equal too
  EXPECT_EQ(w1[1].to_vector<float>(), w3[1].to_vector<float>());
  EXPECT_EQ(l1, l3);
}

TEST(Fit, TimingSeparatesTheStepItsCompilationAndTheLoopAround) {
  Array x = Array::zeros({40, 1}, DType::kF32), y = Array::zeros({40, 1}, DType::kF32);
  auto model = linear(0.5f, 0);
  model->compile(sgd_mse(0.05));
  EXPECT_EQ(model->last_fit_timing().train_steps, 0);
  EXPECT_EQ(model->last_fit_timing().overhead_per_step(), 0);
  // A batch hook that sleeps 20 ms is time outside the step: it must land in the overhead.
  auto slow = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_train_batch_end = [](int64_t, const Logs&) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }});
  model->fit({.x = x,
              .y = y,
              .batch_size = 16,
              .epochs = 2,
              .verbose = 0,
              .callbacks = {slow},
              .validation_split = 0.2,
              .shuffle = false});
  const FitTiming first = model->last_fit_timing();
  EXPECT_EQ(first.train_steps, 4);  // 32 training samples: 2 batches of 16, two epochs
  EXPECT_GT(first.step_seconds, 0);
  EXPECT_GT(first.compile_seconds, 0);  // the first call compiled the step
  EXPECT_GT(first.validation_compile_seconds, 0);
  EXPECT_GE(first.validation_seconds, first.validation_compile_seconds);
  EXPECT_GE(first.train_seconds, first.step_seconds + first.compile_seconds + 4 * 0.020);
  EXPECT_GE(first.overhead_per_step(), 0.020);
  // A second fit starts from zero and compiles nothing new (same batch shape).
  model->fit({.x = x, .y = y, .batch_size = 16, .verbose = 0, .shuffle = false});
  const FitTiming second = model->last_fit_timing();
  EXPECT_EQ(second.train_steps, 3);  // 40 samples: 16, 16, 8 (the ragged batch compiles once)
  EXPECT_EQ(second.validation_seconds, 0);
  EXPECT_EQ(second.validation_compile_seconds, 0);
}

TEST(Fit, MetricsIgnoreSampleWeightsAndWeightedMetricsUseThem) {
  // Keras's CompileMetrics: `metrics` are updated without sample weights, `weighted_metrics`
  // with them, renamed "weighted_<name>" when a plain metric has the name.
  auto model = linear(0, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(),
                  .loss = std::make_shared<losses::MeanSquaredError>(),
                  .metrics = {std::make_shared<metrics::MeanAbsoluteError>()},
                  .weighted_metrics = {std::make_shared<metrics::MeanAbsoluteError>(),
                                       std::make_shared<metrics::MeanSquaredError>()}});
  // Predictions [0, 0] for targets [3, 5]: errors 3 and 5; weights [0, 1].
  const Logs logs = model->evaluate({.x = testing::f32({1, 2}, {2, 1}),
                                     .y = testing::f32({3, 5}, {2, 1}),
                                     .sample_weight = testing::f32({0, 1}, {2}),
                                     .verbose = 0});
  EXPECT_NEAR(*logs.get("mean_absolute_error"), 4.0, 1e-6);           // (3 + 5) / 2
  EXPECT_NEAR(*logs.get("weighted_mean_absolute_error"), 5.0, 1e-6);  // (0 * 3 + 1 * 5) / 1
  EXPECT_NEAR(*logs.get("mean_squared_error"), 25.0, 1e-6);           // weighted, no clash: own name
  EXPECT_NEAR(*logs.get("loss"), 12.5, 1e-6);                         // (0 * 9 + 1 * 25) / 2
  expect_error(
      [] {
        linear(0, 0)->compile({.optimizer = std::make_shared<optimizers::SGD>(),
                               .loss = std::make_shared<losses::MeanSquaredError>(),
                               .weighted_metrics = {nullptr}});
      },
      ErrorCode::kInvalidArgument, {"weighted metric 0 is null"});
}

TEST(Fit, CompilesAtMostTwicePerSignatureAndBuildsWithoutConsumingABatch) {
  int64_t pulled = 0;
  const Array x = testing::f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {10, 1}), y = x;
  auto data = std::make_shared<GeneratorDataAdapter>(
      [&]() {
        auto next = std::make_shared<int64_t>(0);
        return [&, next]() -> std::optional<Batch> {
          if (*next >= 10) return std::nullopt;
          ++pulled;
          std::vector<float> xs = {static_cast<float>(*next + 1), static_cast<float>(*next + 2),
                                   static_cast<float>(*next + 3), static_cast<float>(*next + 4),
                                   static_cast<float>(*next + 5)};
          *next += 5;
          return Batch{testing::f32(xs, {5, 1}), testing::f32(xs, {5, 1}), Array()};
        };
      },
      ir::TensorType{{5, 1}, DType::kF32}, 2);
  auto model = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 1})});
  model->compile(sgd_mse(0.001));
  model->fit({.data = data, .verbose = 0, .steps_per_epoch = 2});
  EXPECT_EQ(pulled, 2);  // the build pass used the adapter's x_type, not a batch
  // 10 samples in batches of 4: 4, 4, 2 -> two signatures over three epochs.
  auto fresh = linear(0, 0);
  fresh->compile(sgd_mse(0.001));
  fresh->fit({.x = x, .y = y, .batch_size = 4, .epochs = 3, .verbose = 0});
  EXPECT_EQ(fresh->train_step_compile_count(), 2);
}

TEST(Fit, ACallbackAssigningWeightsChangesTheNextStep) {
  auto model = linear(1, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.0}),
                  .loss = std::make_shared<losses::MeanSquaredError>()});
  std::vector<double> batch_losses;
  bool purged_during_fit = false;
  auto cb = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_train_batch_end = [&](int64_t batch, const Logs& logs) { batch_losses.push_back(*logs.get("loss")); }});
  struct Zeroing : callbacks::Callback {
    bool* purged;
    explicit Zeroing(bool* p) : purged(p) {}
    void on_train_batch_end(int64_t batch, const Logs&) override {
      if (batch != 0) return;
      // The variables hold no copy while fit runs (the donated state is the live value) ...
      *purged = static_cast<bool>(weights_access()) && ([&] {
                  try {
                    static_cast<Model*>(model())->variables()[0]->value();
                    return false;
                  } catch (const Error&) {
                    return true;
                  }
                })();
      // ... and the weights a callback sets are what the next step uses.
      weights_access()->set_weights({testing::f32({0}, {1, 1}), testing::f32({0}, {1})});
    }
  };
  // One sample per batch, y = 2 for both: with w = 1 the first loss is (1 * 1 - 2)^2 = 1; with
  // the zeroed weights the second is (0 - 2)^2 = 4. (Loss logs are running means: (1 + 4) / 2.)
  model->fit({.x = testing::f32({1, 1}, {2, 1}),
              .y = testing::f32({2, 2}, {2, 1}),
              .batch_size = 1,
              .verbose = 0,
              .callbacks = {std::make_shared<Zeroing>(&purged_during_fit), cb},
              .shuffle = false});
  ASSERT_EQ(batch_losses.size(), 2u);
  EXPECT_NEAR(batch_losses[0], 1.0, 1e-6);
  EXPECT_NEAR(batch_losses[1], 2.5, 1e-6);
  EXPECT_TRUE(purged_during_fit);
  EXPECT_EQ(model->get_weights()[0].to_vector<float>(), std::vector<float>{0});  // synced at the end
}

TEST(Fit, ValidationEvaluatePredictAndOnBatch) {
  auto model = linear(2, 1);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.0}),
                  .loss = std::make_shared<losses::MeanSquaredError>(),
                  .metrics = {std::shared_ptr<metrics::Metric>(metrics::get("mean_absolute_error"))}});
  // validation_split 0.25 of 4 samples: the last one, x = 4 (pred 9, y 10: MSE 1, MAE 1).
  const Array x = testing::f32({1, 2, 3, 4}, {4, 1}), y = testing::f32({3, 5, 7, 10}, {4, 1});
  auto h = model->fit({.x = x, .y = y, .batch_size = 4, .verbose = 0, .validation_split = 0.25});
  EXPECT_NEAR(h->values("loss")[0], 0.0, 1e-6);
  EXPECT_NEAR(h->values("val_loss")[0], 1.0, 1e-6);
  EXPECT_NEAR(h->values("val_mean_absolute_error")[0], 1.0, 1e-6);
  const Logs e = model->evaluate({.x = x, .y = y, .batch_size = 3, .verbose = 0});
  EXPECT_NEAR(*e.get("loss"), 0.25, 1e-6);  // (0 + 0 + 0 + 1) / 4, batches of 3 and 1
  ASSERT_EQ(e.values().size(), 2u);         // the flat list: loss, then the metrics in order
  EXPECT_NEAR(e.values()[1], 0.25, 1e-6);   // MAE
  // predict: a ragged last batch, rows in order.
  const Array p = model->predict({.x = testing::f32({0, 1, 2, 3, 4, 5, 6}, {7, 1}), .batch_size = 3});
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13}));
  EXPECT_NEAR(*model->test_on_batch(x, y).get("loss"), 0.25, 1e-6);
  model->compile(sgd_mse(0.1));
  const Logs t = model->train_on_batch(testing::f32({1}, {1, 1}), testing::f32({4}, {1, 1}));
  EXPECT_NEAR(*t.get("loss"), 1.0, 1e-6);                                 // pred 3 before the update
  EXPECT_NEAR(model->get_weights()[0].to_vector<float>()[0], 2.2, 1e-6);  // w += 0.1 * 2 * 1
}

TEST(Fit, DuringFitTheVariablesHoldNoSecondCopyOfTheState) {
  // A 1000 x 1000 kernel (4 MB) trained with plain SGD: the state is the weights alone. While fit
  // runs (measured in a callback), host memory in use holds one copy of them, not two.
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 1000, .use_bias = false})});
  model.build_model({1, 1000});
  model.compile(sgd_mse(0.001));
  const int64_t weight_bytes = 1000 * 1000 * 4;
  Array x = Array::full({4, 1000}, 0.01, DType::kF32), y = Array::zeros({4, 1000}, DType::kF32);
  const int64_t before = default_cpu_device().allocator().stats().bytes_in_use;  // weights + data
  int64_t during = 0;
  auto probe = std::make_shared<callbacks::LambdaCallback>(
      callbacks::LambdaCallbackOptions{.on_train_batch_end = [&](int64_t, const Logs&) {
        during = std::max(during, default_cpu_device().allocator().stats().bytes_in_use);
      }});
  model.fit({.x = x, .y = y, .batch_size = 4, .epochs = 2, .verbose = 0, .callbacks = {probe}});
  EXPECT_GT(during, 0);
  EXPECT_LT(during - before, weight_bytes / 2) << "before " << before << ", during " << during;
}

TEST(Fit, AVariableAssignedAtEpochEndIsWhatTheNextEpochTrains) {
  auto model = linear(1, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.0}),
                  .loss = std::make_shared<losses::MeanSquaredError>()});
  Model* m = model.get();
  auto reset = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_epoch_end = [m](int64_t, const Logs&) { m->variables()[0]->assign(testing::f32({3}, {1, 1})); }});
  // x = 1, y = 3: epoch 1 trains w = 1, the callback assigns w = 3 for epoch 2.
  auto h = model->fit({.x = testing::f32({1}, {1, 1}),
                       .y = testing::f32({3}, {1, 1}),
                       .batch_size = 1,
                       .epochs = 2,
                       .verbose = 0,
                       .callbacks = {reset}});
  EXPECT_NEAR(h->values("loss")[0], 4.0, 1e-6);  // (1 - 3)^2
  EXPECT_NEAR(h->values("loss")[1], 0.0, 1e-6);  // (3 - 3)^2 after the assignment
}

TEST(Fit, RunEagerlyMatchesCompiledSteps) {
  // The interpreter path (run_eagerly) and the compiled one give the same trajectory.
  auto run = [](bool eager) {
    auto model = linear(0.5f, -0.25f);
    CompileOptions c = sgd_mse(0.05);
    c.run_eagerly = eager;
    model->compile(c);
    auto h = model->fit({.x = testing::f32({1, 2, 3, 4, 5}, {5, 1}),
                         .y = testing::f32({2, 4, 6, 8, 10}, {5, 1}),
                         .batch_size = 2,
                         .epochs = 3,
                         .verbose = 0,
                         .shuffle = false});
    return std::make_pair(model->get_weights()[0].to_vector<float>()[0], h->values("loss"));
  };
  const auto [w_eager, l_eager] = run(true);
  const auto [w_jit, l_jit] = run(false);
  EXPECT_NEAR(w_eager, w_jit, 1e-6);
  ASSERT_EQ(l_eager.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(l_eager[i], l_jit[i], 1e-5);
  EXPECT_LT(l_jit[2], l_jit[0]);
}

TEST(Fit, BadInputIsAClearErrorAndChangesNothing) {
  auto model = linear(1, 0);
  const Array x = testing::f32({1, 2}, {2, 1}), y = testing::f32({1, 2}, {2, 1});
  expect_error([&] { model->fit({.x = x, .y = y}); }, ErrorCode::kFailedPrecondition, {"fit before compile"});
  model->compile(sgd_mse(0.1));
  expect_error([&] { model->fit({.x = x, .y = testing::f32({1, 2, 3}, {3, 1}), .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"2 samples", "(3, 1)"});
  expect_error(
      [&] {
        model->fit(
            {.x = x, .y = y, .sample_weight = testing::f32({1, 1}, {2}), .verbose = 0, .class_weight = {{0, 1.0}}});
      },
      ErrorCode::kInvalidArgument, {"sample_weight and class_weight"});
  expect_error([&] { model->fit({.x = x, .y = y, .batch_size = 0, .verbose = 0}); }, ErrorCode::kInvalidArgument,
               {"batch_size", "0"});
  expect_error([&] { model->fit({.x = x, .y = y, .verbose = 0, .validation_split = 1.5}); },
               ErrorCode::kInvalidArgument, {"fit", "validation_split", "1.5"});
  expect_error([&] { model->fit({.x = testing::f32({1, 2, 3, 4}, {2, 2}), .y = y, .verbose = 0}); },
               ErrorCode::kShapeMismatch, {"(1, 1)", "(2, 2)"});
  EXPECT_EQ(model->get_weights()[0].to_vector<float>(), std::vector<float>{1});
  expect_error([&] { model->compile({.loss = nullptr}); }, ErrorCode::kInvalidArgument, {"no loss"});
  // Sparse labels outside [0, classes).
  Sequential classifier({std::make_shared<Dense>(DenseOptions{.units = 3})});
  classifier.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                      .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                          losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  expect_error([&] { classifier.fit({.x = x, .y = testing::i32({0, 3}, {2}), .verbose = 0}); }, ErrorCode::kOutOfRange,
               {"label 3", "[0, 3)"});
}

TEST(Fit, SavedWeightsReloadToIdenticalPredictions) {
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 3, .activation = "softmax"})});
  model.build_model({1, 5});
  Array x = Array::zeros({6, 5}, DType::kF32);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = std::sin(0.7f * static_cast<float>(i));
  const Array before = model.predict({.x = x});
  const auto path = std::filesystem::temp_directory_path() / "ingot_fit_test.safetensors";
  model.save_weights(path.string());
  Sequential other({std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 3, .activation = "softmax"})},
                   {.seed = 99});
  other.build_model({1, 5});
  EXPECT_NE(other.predict({.x = x}).to_vector<float>(), before.to_vector<float>());
  other.load_weights(path.string());
  EXPECT_EQ(other.predict({.x = x}).to_vector<float>(), before.to_vector<float>());
  Sequential wrong({std::make_shared<Dense>(DenseOptions{.units = 4})});
  wrong.build_model({1, 5});
  const std::vector<Array> kept = wrong.get_weights();
  expect_error([&] { wrong.load_weights(path.string()); }, ErrorCode::kShapeMismatch,
               {"dense/kernel", "(5, 4)", "(5, 8)"});
  EXPECT_EQ(wrong.get_weights()[0].to_vector<float>(), kept[0].to_vector<float>());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

/// Model 4 -> 3 logits with sparse labels, 20 samples: the reviewer's cases.
struct Classifier {
  std::shared_ptr<Sequential> m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 3})});
  Array x = Array::full({20, 4}, 0.5, DType::kF32);
  Array y = Array::from_vector<int32_t>(std::vector<int32_t>(20, 1), {20});
  Classifier() {
    m->compile({.optimizer = std::make_shared<optimizers::SGD>(),
                .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                    losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  }
};

TEST(FitNested, PredictAndEvaluateFromABatchCallbackLeaveTheFitIntact) {
  Classifier a, b;
  std::vector<double> nested_losses;
  Sequential* am = a.m.get();
  const Array ax = a.x, ay = a.y;
  auto probe = std::make_shared<callbacks::LambdaCallback>(
      callbacks::LambdaCallbackOptions{.on_train_batch_end = [&](int64_t batch, const Logs&) {
        if (batch != 1) return;
        EXPECT_EQ(am->predict({.x = ax}).shape(), (Shape{20, 3}));
        nested_losses.push_back(*am->evaluate({.x = ax, .y = ay, .verbose = 0}).get("loss"));
        nested_losses.push_back(*am->test_on_batch(ax, ay).get("loss"));
      }});
  auto ha = a.m->fit({.x = a.x, .y = a.y, .batch_size = 4, .epochs = 2, .verbose = 0, .callbacks = {probe}});
  auto hb = b.m->fit({.x = b.x, .y = b.y, .batch_size = 4, .epochs = 2, .verbose = 0});
  ASSERT_EQ(nested_losses.size(), 4u);
  EXPECT_NEAR(nested_losses[0], nested_losses[1], 1e-6);
  // The nested calls changed neither the training trajectory nor its logged metrics.
  EXPECT_EQ(ha->values("loss"), hb->values("loss"));
  EXPECT_EQ(a.m->get_weights()[0].to_vector<float>(), b.m->get_weights()[0].to_vector<float>());
}

TEST(FitNested, ModelSetWeightsFromACallbackTakesEffectAndFitOrCompileAreRefused) {
  Classifier c;
  Sequential* m = c.m.get();
  std::string fit_error, compile_error;
  auto cb = std::make_shared<callbacks::LambdaCallback>(
      callbacks::LambdaCallbackOptions{.on_train_batch_end = [&](int64_t batch, const Logs&) {
        if (batch != 0) return;
        std::vector<Array> w = m->get_weights();  // the live state, from a callback
        for (Array& a : w) a = Array::zeros(a.shape(), a.dtype());
        m->set_weights(w);
        try {
          m->fit({.x = c.x, .y = c.y, .verbose = 0});
        } catch (const Error& e) {
          fit_error = e.what();
        }
        try {
          m->compile({.loss = std::make_shared<losses::MeanSquaredError>()});
        } catch (const Error& e) {
          compile_error = e.what();
        }
      }});
  c.m->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.0}),
                .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                    losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  c.m->fit({.x = c.x, .y = c.y, .batch_size = 4, .verbose = 0, .callbacks = {cb}});
  EXPECT_EQ(c.m->get_weights()[0].to_vector<float>(), std::vector<float>(12, 0.0f));  // lr 0: only the reset
  EXPECT_NE(fit_error.find("fit called while"), std::string::npos) << fit_error;
  EXPECT_NE(compile_error.find("compile called while"), std::string::npos) << compile_error;
}

TEST(FitChecks, EverythingIsCheckedBeforeTheFirstStep) {
  Classifier c;
  // validation_data with the wrong features / without y / with out-of-range labels.
  expect_error(
      [&] {
        c.m->fit({.x = c.x,
                  .y = c.y,
                  .verbose = 0,
                  .validation_data = Batch{Array::zeros({2, 7}, DType::kF32), testing::i32({0, 1}, {2}), Array()}});
      },
      ErrorCode::kShapeMismatch, {"validation_data", "(2, 7)"});
  const std::vector<Array> w0 = c.m->get_weights();
  expect_error([&] { c.m->fit({.x = c.x, .y = c.y, .verbose = 0, .validation_data = Batch{c.x, Array(), Array()}}); },
               ErrorCode::kInvalidArgument, {"validation_data has no y"});
  expect_error(
      [&] {
        c.m->fit(
            {.x = c.x,
             .y = c.y,
             .verbose = 0,
             .validation_data = Batch{c.x, Array::from_vector<int32_t>(std::vector<int32_t>(20, 5), {20}), Array()}});
      },
      ErrorCode::kOutOfRange, {"validation_data", "label 5"});
  EXPECT_EQ(c.m->get_weights()[0].to_vector<float>(), w0[0].to_vector<float>());  // nothing trained
  expect_error([&] { c.m->fit({.x = c.x, .y = c.y, .verbose = 0, .validation_freq = 0}); }, ErrorCode::kInvalidArgument,
               {"validation_freq", "0"});
  expect_error([&] { c.m->fit({.x = c.x, .y = c.y, .verbose = 0, .validation_epochs = {0}}); },
               ErrorCode::kInvalidArgument, {"validation_epochs", "1-based"});
  expect_error([&] { c.m->fit({.x = c.x, .y = c.y, .verbose = 0, .validation_split = 0.5, .validation_steps = 100}); },
               ErrorCode::kInvalidArgument, {"validation_steps 100"});
  expect_error([&] { c.m->fit({.x = c.x, .y = c.y, .verbose = 0, .class_weight = {{0, -1.0}}}); },
               ErrorCode::kInvalidArgument, {"class_weight", "-1"});
  expect_error(
      [&] { c.m->fit({.x = Array::zeros({0, 4}, DType::kF32), .y = Array::zeros({0}, DType::kI32), .verbose = 0}); },
      ErrorCode::kInvalidArgument, {"no samples"});
  expect_error([&] { c.m->evaluate({.x = c.x, .verbose = 0}); }, ErrorCode::kInvalidArgument,
               {"evaluate: no targets y"});
  expect_error([&] { c.m->train_on_batch(c.x, Array()); }, ErrorCode::kInvalidArgument,
               {"train_on_batch: no targets y"});
  // A generator's labels are checked batch by batch.
  auto gen = std::make_shared<GeneratorDataAdapter>(
      [&]() {
        auto done = std::make_shared<bool>(false);
        return [&, done]() -> std::optional<Batch> {
          if (*done) return std::nullopt;
          *done = true;
          return Batch{Array::full({4, 4}, 0.5, DType::kF32), Array::from_vector<int32_t>({7, 9, -3, 100}, {4}),
                       Array()};
        };
      },
      ir::TensorType{{4, 4}, DType::kF32});
  expect_error([&] { c.m->fit({.data = gen, .verbose = 0}); }, ErrorCode::kOutOfRange, {"label"});
  // Weights I/O needs a built model.
  Sequential unbuilt({std::make_shared<Dense>(DenseOptions{.units = 2})});
  expect_error([&] { unbuilt.save_weights("/tmp/ingot_unbuilt.safetensors"); }, ErrorCode::kFailedPrecondition,
               {"not built"});
  expect_error([&] { unbuilt.load_weights("/tmp/ingot_unbuilt.safetensors"); }, ErrorCode::kFailedPrecondition,
               {"not built"});
}

TEST(FitChecks, ValidationFiresTheTestHooks) {
  Classifier c;
  int test_begin = 0, test_batches = 0, test_end = 0;
  auto cb = std::make_shared<callbacks::LambdaCallback>(
      callbacks::LambdaCallbackOptions{.on_test_begin = [&](const Logs&) { ++test_begin; },
                                       .on_test_end = [&](const Logs&) { ++test_end; },
                                       .on_test_batch_end = [&](int64_t, const Logs&) { ++test_batches; }});
  c.m->fit(
      {.x = c.x, .y = c.y, .batch_size = 4, .epochs = 2, .verbose = 0, .callbacks = {cb}, .validation_split = 0.5});
  EXPECT_EQ(test_begin, 2);
  EXPECT_EQ(test_end, 2);
  EXPECT_EQ(test_batches, 6);  // 10 validation samples in batches of 4: 3 per epoch
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(FitEma, FitEndsWithTheMovingAverageOfEveryStepsWeights) {
  // y = 2x + 1, SGD with use_ema (momentum 0.5): Keras's average is the first step's weights,
  // then e_k = 0.5 e_{k-1} + 0.5 w_k; fit writes it into the variables before on_train_end.
  Array x = Array::zeros({8, 1}, DType::kF32), y = Array::zeros({8, 1}, DType::kF32);
  for (int64_t i = 0; i < 8; ++i) {
    x.data<float>()[i] = 0.25f * static_cast<float>(i);
    y.data<float>()[i] = 2.0f * x.data<float>()[i] + 1.0f;
  }
  auto model = linear(0.5f, 0);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(
                      optimizers::SGDOptions{.learning_rate = 0.1, .use_ema = true, .ema_momentum = 0.5}),
                  .loss = std::make_shared<losses::MeanSquaredError>()});
  std::vector<std::vector<double>> raw;  // kernel and bias after each step (the live weights)
  std::vector<double> at_train_end;
  Model* m = model.get();
  auto record = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_train_end = [&](const Logs&) { at_train_end = m->get_weights()[0].to_doubles(); },
      .on_train_batch_end =
          [&](int64_t, const Logs&) {
            const std::vector<Array> w = m->get_weights();
            raw.push_back({w[0].to_doubles()[0], w[1].to_doubles()[0]});
          }});
  model->fit({.x = x, .y = y, .batch_size = 4, .epochs = 2, .verbose = 0, .callbacks = {record}, .shuffle = false});
  ASSERT_EQ(raw.size(), 4u);
  std::vector<double> ema = raw[0];
  for (size_t k = 1; k < raw.size(); ++k) {
    for (size_t j = 0; j < 2; ++j) ema[j] = 0.5 * ema[j] + 0.5 * raw[k][j];
  }
  const std::vector<Array> w = model->get_weights();
  EXPECT_NEAR(w[0].to_doubles()[0], ema[0], 1e-6);
  EXPECT_NEAR(w[1].to_doubles()[0], ema[1], 1e-6);
  EXPECT_GT(std::abs(w[0].to_doubles()[0] - raw.back()[0]), 1e-3);  // the average, not the last step
  EXPECT_NEAR(at_train_end.at(0), ema[0], 1e-6);                    // already there at on_train_end
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// ---- found by a fresh-user review: each used to fail late, silently or with an internal error ----

TEST(FitReview, ALayerUsedTwiceInASequentialTrainsWithOneSetOfVariables) {
  auto d = std::make_shared<Dense>(DenseOptions{.units = 3, .activation = "tanh"});
  Sequential model({d, d, std::make_shared<Dense>(DenseOptions{.units = 1})});
  model.compile(
      {.optimizer = std::make_shared<optimizers::SGD>(), .loss = std::make_shared<losses::MeanSquaredError>()});
  const Array x = testing::f32({1, 2, 3, 0.5f, -1, 0, 2, 2, 1}, {3, 3}), y = testing::f32({1, 0, -1}, {3, 1});
  auto h = model.fit({.x = x, .y = y, .batch_size = 3, .epochs = 2, .verbose = 0});  // used to be a donation error
  EXPECT_EQ(h->values("loss").size(), 2u);
  EXPECT_EQ(model.variables().size(), 4u);  // d's kernel and bias once, the last Dense's two
}

TEST(FitReview, F64InputsFeedAFloat32Model) {
  auto model = linear(0.5f, 0);
  model->compile(sgd_mse(0.1));
  const Array x = Array::from_doubles({1, 2, 3, 4}, {4, 1}, DType::kF64), y = testing::f32({3, 5, 7, 9}, {4, 1});
  auto h = model->fit({.x = x, .y = y, .batch_size = 4, .epochs = 1, .verbose = 0});
  // Keras casts the inputs to the policy's compute dtype: the same step as with f32 inputs.
  auto ref = linear(0.5f, 0);
  ref->compile(sgd_mse(0.1));
  auto hr = ref->fit({.x = testing::f32({1, 2, 3, 4}, {4, 1}), .y = y, .batch_size = 4, .epochs = 1, .verbose = 0});
  EXPECT_EQ(h->values("loss"), hr->values("loss"));
  EXPECT_EQ(model->get_weights()[0].to_doubles(), ref->get_weights()[0].to_doubles());
}

TEST(FitReview, MetricsLoggedUnderOneNameAreRefused) {
  auto model = linear(0.5f, 0);  // built: compile checks the metrics against its output now
  CompileOptions c = sgd_mse(0.1);
  c.metrics = {std::make_shared<metrics::MeanAbsoluteError>(), std::make_shared<metrics::MeanAbsoluteError>()};
  expect_error([&] { model->compile(c); }, ErrorCode::kInvalidArgument, {"logged as 'mean_absolute_error'"});
  c.metrics = {std::make_shared<metrics::MeanAbsoluteError>(),
               std::make_shared<metrics::MeanAbsoluteError>(metrics::MeanAbsoluteErrorOptions{.name = "mae2"})};
  model->compile(c);
  const Logs logs = model->test_on_batch(testing::f32({1}, {1, 1}), testing::f32({2}, {1, 1}));
  EXPECT_TRUE(logs.contains("mae2"));
}

TEST(FitReview, CompileChecksLossesAgainstABuiltModelAndKeepsTheOldConfigurationOnError) {
  auto model = linear(0.5f, 0);
  model->compile(sgd_mse(0.1));
  CompileOptions bad = sgd_mse(0.1);
  bad.loss = nullptr;
  bad.losses = {std::make_shared<losses::MeanSquaredError>(), std::make_shared<losses::MeanSquaredError>()};
  expect_error([&] { model->compile(bad); }, ErrorCode::kInvalidArgument, {"losses has 2 entries", "1 outputs"});
  EXPECT_TRUE(model->test_on_batch(testing::f32({1}, {1, 1}), testing::f32({2}, {1, 1})).contains("loss"));
}

TEST(FitReview, NonFiniteSampleWeightsAreRefused) {
  auto model = linear(0.5f, 0);
  model->compile(sgd_mse(0.1));
  const std::vector<Array> before = model->get_weights();
  expect_error(
      [&] {
        model->fit({.x = testing::f32({1, 2}, {2, 1}),
                    .y = testing::f32({1, 2}, {2, 1}),
                    .sample_weight = testing::f32({1, std::nanf("")}, {2}),
                    .verbose = 0});
      },
      ErrorCode::kInvalidArgument, {"sample_weight of sample 1 is nan"});
  EXPECT_EQ(model->get_weights()[0].to_doubles(), before[0].to_doubles());
}

TEST(FitReview, AConvolutionKernelLargerThanItsInputIsAnError) {
  Sequential model(
      {std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 2, .kernel_size = {9, 9}}), std::make_shared<Flatten>()});
  expect_error([&] { model.build_model({1, 4, 4, 1}); }, ErrorCode::kShapeMismatch,
               {"kernel_size [9, 9] is larger than the input's spatial size [4, 4]"});
  Sequential same(
      {std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 2, .kernel_size = {9, 9}, .padding = "same"})});
  same.build_model({1, 4, 4, 1});  // "same" padding keeps the size
  EXPECT_EQ(same.output_type()->shape, (Shape{1, 4, 4, 2}));
}

TEST(FitReview, SummaryColumnsWidenForLongNamesAndUnnamedLayersAreDescribed) {
  auto bn =
      std::make_shared<BatchNormalization>(BatchNormalizationOptions{.name = "a_rather_long_batch_normalization_name"});
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 4}), bn});
  model.build_model({2, 3});
  const std::string s = model.summary();
  // Every row's shape column starts where the header's does.
  const size_t header = s.find("Output Shape");
  const size_t header_line = s.rfind('\n', header) + 1;
  for (const char* row : {"dense (Dense)", "a_rather_long_batch_normalization_name (BatchNormalization)"}) {
    const size_t at = s.find(row);
    ASSERT_NE(at, std::string::npos) << s;
    EXPECT_EQ(s.find("(None, 4)", at) - at, header - header_line) << s;
  }
  Dense unnamed(DenseOptions{.units = 2});
  expect_error(
      [&] {
        TraceFn f = [&](const std::vector<Tensor>& a) {
          LayerContext ctx(false);
          return std::vector<Tensor>{unnamed(ctx, a[0])};
        };
        trace(f, {{{2}, DType::kF32}}, "rank1");  // Dense needs (batch, features)
      },
      ErrorCode::kShapeMismatch, {"an unnamed Dense layer"});
  KerasTensor in = Input({3});
  Functional f(in, std::make_shared<Dense>(DenseOptions{.units = 1})->operator()(in));
  EXPECT_EQ(f.layers().size(), 1u);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

/// Dense 4 -> 3 logits, seeded, compiled with SGD, sparse cross-entropy and accuracy.
std::shared_ptr<Sequential> seeded_classifier() {
  auto m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 3})}, ModelOptions{.seed = 5});
  m->build_model({1, 4});
  auto loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
      losses::SparseCategoricalCrossentropyOptions{.from_logits = true});
  m->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1}),
              .loss = loss,
              .metrics = {metrics::get_for_compile("accuracy", {.loss = loss.get()})}});
  return m;
}

TEST(TrainOnBatch, ClassWeightWeighsEachSampleByItsClassAsFitDoes) {
  // Keras's train_on_batch(x, y, class_weight=...): the same step as the equivalent sample weights.
  const Array x = testing::random_array({6, 4}, DType::kF32, 3);
  const Array y = testing::i32({0, 1, 2, 1, 0, 2}, {6});
  const std::vector<std::pair<int64_t, double>> cw = {{0, 1.0}, {1, 2.0}, {2, 0.5}};
  auto a = seeded_classifier(), b = seeded_classifier();
  const Logs la = a->train_on_batch(x, y, {}, cw);
  const Logs lb = b->train_on_batch(x, y, testing::f32({1, 2, 0.5f, 2, 1, 0.5f}, {6}));
  EXPECT_EQ(*la.get("loss"), *lb.get("loss"));
  for (size_t i = 0; i < a->get_weights().size(); ++i) {
    EXPECT_EQ(a->get_weights()[i].to_vector<float>(), b->get_weights()[i].to_vector<float>());
  }
  auto c = seeded_classifier();
  EXPECT_NE(*c->train_on_batch(x, y).get("loss"), *la.get("loss"));  // the weights matter
  expect_error([&] { c->train_on_batch(x, y, testing::f32({1, 1, 1, 1, 1, 1}, {6}), cw); }, ErrorCode::kInvalidArgument,
               {"train_on_batch", "sample_weight and class_weight"});
  expect_error([&] { c->train_on_batch(x, y, {}, {{1, -2.0}}); }, ErrorCode::kInvalidArgument,
               {"train_on_batch: class_weight of class 1 is -2"});
  expect_error([&] { c->train_on_batch(x, y, {}, {{1, 1.0}, {1, 2.0}}); }, ErrorCode::kInvalidArgument,
               {"class 1 twice"});
}

TEST(Fit, FloatLabelsAreClassIndicesTruncatedAsKerasCastsThem) {
  // Keras casts float class labels to int32 (truncation) in the loss and class_weight; whole-valued
  // float labels train exactly as integer ones, with accuracy and class weights.
  const Array x = testing::random_array({8, 4}, DType::kF32, 4);
  const Array yi = testing::i32({0, 1, 2, 1, 0, 2, 2, 1}, {8});
  const Array yf = testing::f32({0, 1, 2, 1, 0, 2, 2, 1}, {8});
  const std::vector<std::pair<int64_t, double>> cw = {{0, 1.0}, {1, 3.0}, {2, 0.5}};
  auto a = seeded_classifier(), b = seeded_classifier();
  const auto ha =
      a->fit({.x = x, .y = yi, .batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false, .class_weight = cw});
  const auto hb =
      b->fit({.x = x, .y = yf, .batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false, .class_weight = cw});
  EXPECT_EQ(ha->values("loss"), hb->values("loss"));
  EXPECT_EQ(ha->values("accuracy"), hb->values("accuracy"));
  // A fractional label is truncated to its class in the loss, as Keras's cast: 1.7 is class 1.
  const Logs whole = a->evaluate({.x = x, .y = testing::f32({1, 1, 1, 1, 1, 1, 1, 1}, {8}), .verbose = 0});
  const Logs fractional =
      a->evaluate({.x = x, .y = testing::f32({1.7f, 1.7f, 1.7f, 1.7f, 1.7f, 1.7f, 1.7f, 1.7f}, {8}), .verbose = 0});
  EXPECT_EQ(*whole.get("loss"), *fractional.get("loss"));
}

TEST(FitDataAdapter, EveryArrayArgumentWorksTheSameWithAnAdapterOrIsRefused) {
  // fit / evaluate / predict with `data` (an adapter) and each argument that works with arrays:
  // the same results as the arrays, or an ingot::Error naming the argument (never a std::
  // exception); nothing trains when refused.
  const Array x = testing::random_array({8, 4}, DType::kF32, 6);
  const Array y = testing::i32({0, 1, 2, 1, 0, 2, 2, 1}, {8});
  const Array sw = testing::f32({1, 2, 1, 0.5f, 1, 2, 1, 0.5f}, {8});
  const std::vector<std::pair<int64_t, double>> cw = {{0, 1.0}, {1, 3.0}, {2, 0.5}};
  const auto adapter = [&](bool weighted) {
    return std::make_shared<ArrayDataAdapter>(x, y, weighted ? Arrays(sw) : Arrays(), 4, false);
  };
  const auto same_fit = [&](const FitOptions& with_arrays, const FitOptions& with_data, const char* what) {
    SCOPED_TRACE(what);
    auto a = seeded_classifier(), b = seeded_classifier();
    const auto ha = a->fit(with_arrays);
    const auto hb = b->fit(with_data);
    EXPECT_EQ(ha->values("loss"), hb->values("loss"));
    EXPECT_EQ(ha->contains("val_loss"), hb->contains("val_loss"));
    if (ha->contains("val_loss")) {
      EXPECT_EQ(ha->values("val_loss"), hb->values("val_loss"));
    }
    EXPECT_EQ(a->get_weights()[0].to_vector<float>(), b->get_weights()[0].to_vector<float>());
  };
  const FitOptions arrays{.x = x, .y = y, .batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false};
  FitOptions data{.data = adapter(false), .batch_size = 4, .epochs = 2, .verbose = 0};
  FitOptions a = arrays, d = data;
  a.class_weight = d.class_weight = cw;
  same_fit(a, d, "class_weight");
  a = arrays;
  d = data;
  a.sample_weight = sw;
  d.data = adapter(true);  // the adapter's batches carry the weights
  same_fit(a, d, "sample_weight");
  a = arrays;
  d = data;
  a.validation_data = d.validation_data = Batch{x, y, Arrays()};
  same_fit(a, d, "validation_data");
  a = arrays;
  d = data;
  a.steps_per_epoch = d.steps_per_epoch = 1;
  same_fit(a, d, "steps_per_epoch");
  // Refused, naming the argument.
  auto m = seeded_classifier();
  const std::vector<float> w0 = m->get_weights()[0].to_vector<float>();
  const auto refused = [&](FitOptions o, std::vector<std::string> names) {
    expect_error([&] { m->fit(o); }, ErrorCode::kInvalidArgument, names);
  };
  FitOptions r = data;
  r.sample_weight = sw;
  refused(r, {"fit: both a data adapter and sample_weight"});
  r = data;
  r.x = x;
  refused(r, {"fit: both a data adapter and x"});
  r = data;
  r.y = y;
  refused(r, {"fit: both a data adapter and y"});
  r = data;
  r.validation_split = 0.25;
  refused(r, {"validation_split", "array data"});
  r = data;
  r.data = adapter(true);
  r.class_weight = cw;
  refused(r, {"class_weight", "sample_weight"});
  EXPECT_EQ(m->get_weights()[0].to_vector<float>(), w0);  // nothing trained
  // evaluate and predict.
  const Logs ea = m->evaluate({.x = x, .y = y, .batch_size = 4, .verbose = 0, .steps = 1});
  const Logs ed = m->evaluate({.data = adapter(false), .verbose = 0, .steps = 1});
  EXPECT_EQ(*ea.get("loss"), *ed.get("loss"));
  expect_error([&] { m->evaluate({.sample_weight = sw, .data = adapter(false), .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"evaluate: both a data adapter and sample_weight"});
  expect_error([&] { m->predict({.x = x, .data = adapter(false)}); }, ErrorCode::kInvalidArgument,
               {"predict: both a data adapter and x"});
}

}  // namespace
}  // namespace ingot
