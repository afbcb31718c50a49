// LearningRateScheduler and ReduceLROnPlateau: decisions on constructed log sequences (reduce
// epochs, cooldown, min_lr), the rate reaching the optimizer in a real fit (the hand-computed
// SGD trajectory of y = w x + b), the "learning_rate" log entry, reuse, and every bad option.
#include "ingot/trainer/callbacks_lr.h"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/trainer/model.h"
#include "linear_model.h"
#include "test_util.h"

namespace ingot::callbacks {
namespace {

using ::ingot::testing::expect_error;

/// A rate held as the trainer holds it (f32), with the trainer's refusal for schedules.
struct FakeRate : WeightsAccess {
  float rate = 1.0f;
  bool schedule = false;
  std::vector<double> sets;
  std::vector<Array> get_weights() override { return {}; }
  void set_weights(const std::vector<Array>&) override {}
  double learning_rate() override { return rate; }
  void set_learning_rate(double value) override {
    if (schedule) throw Error(ErrorCode::kFailedPrecondition, "SGD: learning rate is a schedule");
    sets.push_back(value);
    rate = static_cast<float>(value);
  }
};

/// Runs the epoch hooks with the given values of `monitor`; returns the History of the list.
std::shared_ptr<History> run_monitored(CallbackList& list, const std::string& monitor,
                                       const std::vector<double>& values) {
  list.on_train_begin({});
  for (size_t e = 0; e < values.size(); ++e) {
    list.on_epoch_begin(static_cast<int64_t>(e), {});
    list.on_epoch_end(static_cast<int64_t>(e), {{"loss", 1.0}, {monitor, values[e]}});
  }
  list.on_train_end({});
  return list.history();
}

TEST(ReduceLROnPlateau, ReducesAfterPatienceWithCooldownAndMinLr) {
  FakeRate rate;
  std::ostringstream out;
  auto rlr = std::make_shared<ReduceLROnPlateau>(ReduceLROnPlateauOptions{
      .factor = 0.5, .patience = 2, .verbose = 1, .cooldown = 1, .min_lr = 0.1, .stream = &out});
  EXPECT_TRUE(rlr->minimizes());
  CallbackList list({rlr}, {.params = {.epochs = 13, .verbose = 0}, .weights = &rate});
  // Epoch: value -> decision (wait after the epoch)
  //  0: 1.0 best (0)        1: 1.0 no (1)         2: 0.99995 within min_delta: no (2) -> 0.5
  //  3: 2.0 cooldown 1->0, then no (1)            4: 2.0 no (2) -> 0.25
  //  5: 0.5 cooldown ends, best (0)               6: 0.6 no (1)   7: 0.6 no (2) -> 0.125
  //  8: 0.7 cooldown, no (1)   9: 0.7 (2) -> max(0.0625, 0.1) = 0.1
  // 10: 0.8 cooldown, no (1)  11: 0.8 (2): the rate is at float32(min_lr): no change
  // 12: 0.8 (3): still none.
  auto history = run_monitored(list, "val_loss", {1.0, 1.0, 0.99995, 2.0, 2.0, 0.5, 0.6, 0.6, 0.7, 0.7, 0.8, 0.8, 0.8});
  EXPECT_EQ(rate.sets, (std::vector<double>{1.0, 0.5, 0.25, 0.125, 0.1}));  // the first: the settable check
  const double f32_min = static_cast<double>(0.1f);
  // "learning_rate" is logged before the epoch's reduction, and History (after the callback) sees it.
  EXPECT_EQ(history->values("learning_rate"),
            (std::vector<double>{1, 1, 1, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, f32_min, f32_min, f32_min}));
  EXPECT_EQ(rlr->wait(), 3);
  EXPECT_DOUBLE_EQ(rlr->best(), 0.5);
  EXPECT_EQ(out.str(),
            "\nEpoch 3: ReduceLROnPlateau reducing learning rate to 0.5.\n"
            "\nEpoch 5: ReduceLROnPlateau reducing learning rate to 0.25.\n"
            "\nEpoch 8: ReduceLROnPlateau reducing learning rate to 0.125.\n"
            "\nEpoch 10: ReduceLROnPlateau reducing learning rate to 0.1.\n");

  // Reused: on_train_begin resets best, wait and cooldown; patience 2 from the new start.
  rate.rate = 1.0f;
  rate.sets.clear();
  out.str("");
  run_monitored(list, "val_loss", {5.0, 6.0, 7.0});
  EXPECT_EQ(rate.sets, (std::vector<double>{1.0, 0.5}));
  EXPECT_DOUBLE_EQ(rlr->best(), 5.0);
}

TEST(ReduceLROnPlateau, MaxModeMissingMonitorAndZeroPatience) {
  FakeRate rate;
  std::ostringstream warnings;
  auto rlr = std::make_shared<ReduceLROnPlateau>(
      ReduceLROnPlateauOptions{.monitor = "val_accuracy", .patience = 0, .warnings = &warnings});
  EXPECT_FALSE(rlr->minimizes());
  CallbackList list({rlr}, {.params = {.verbose = 0}, .weights = &rate});
  // 0.5 best; 0.50005 is not better by more than 1e-4 -> reduce (patience 0); 0.9 best again.
  run_monitored(list, "val_accuracy", {0.5, 0.50005, 0.9});
  EXPECT_EQ(rate.sets.size(), 2u);
  EXPECT_DOUBLE_EQ(rate.sets[1], 0.1);
  EXPECT_EQ(warnings.str(), "");
  list.on_epoch_end(3, {{"loss", 1.0}});
  EXPECT_EQ(warnings.str(),
            "Warning: Learning rate reduction is conditioned on metric `val_accuracy` which is not "
            "available. Available metrics are: loss,learning_rate\n");
}

TEST(ReduceLROnPlateau, NeedsASettableRateAndRejectsBadOptions) {
  FakeRate scheduled;
  scheduled.schedule = true;
  auto rlr = std::make_shared<ReduceLROnPlateau>();
  CallbackList list({rlr}, {.params = {.verbose = 0}, .weights = &scheduled});
  expect_error([&] { list.on_train_begin({}); }, ErrorCode::kFailedPrecondition, {"ReduceLROnPlateau", "schedule"});
  CallbackList no_access({std::make_shared<ReduceLROnPlateau>()}, {.params = {.verbose = 0}});
  expect_error([&] { no_access.on_train_begin({}); }, ErrorCode::kFailedPrecondition, {"ReduceLROnPlateau"});

  const auto bad = [](ReduceLROnPlateauOptions o, const std::string& needle) {
    expect_error([&] { ReduceLROnPlateau r(o); }, ErrorCode::kInvalidArgument, {"ReduceLROnPlateau", needle});
  };
  bad({.monitor = ""}, "monitor is empty");
  bad({.factor = 1.0}, "factor = 1.0");
  bad({.factor = -0.5}, "factor = -0.5");
  bad({.patience = -1}, "patience = -1");
  bad({.verbose = -1}, "verbose = -1");
  bad({.min_delta = -1e-3}, "min_delta = -0.001");
  bad({.cooldown = -2}, "cooldown = -2");
  bad({.min_lr = -1.0}, "min_lr = -1.0");
  bad({.monitor = "val_custom"}, "val_custom");
}

TEST(LearningRateScheduler, SetsTheRateAtEachEpochBeginAndLogsIt) {
  FakeRate rate;
  std::ostringstream out;
  std::vector<std::pair<int64_t, double>> calls;
  auto sched =
      std::make_shared<LearningRateScheduler>(LearningRateSchedulerOptions{.schedule =
                                                                               [&](int64_t epoch, double lr) {
                                                                                 calls.emplace_back(epoch, lr);
                                                                                 return epoch < 1 ? lr : lr * 0.1;
                                                                               },
                                                                           .verbose = 1,
                                                                           .stream = &out});
  CallbackList list({sched}, {.params = {.epochs = 3, .verbose = 0}, .weights = &rate});
  auto history = run_monitored(list, "val_loss", {1.0, 1.0, 1.0});
  const double r1 = static_cast<double>(0.1f), r2 = static_cast<double>(static_cast<float>(r1 * 0.1));
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, double>>{{0, 1.0}, {1, 1.0}, {2, r1}}));
  EXPECT_EQ(history->values("learning_rate"), (std::vector<double>{1.0, r1, r2}));
  EXPECT_EQ(out.str(),
            "\nEpoch 1: LearningRateScheduler setting learning rate to 1.0.\n"
            "\nEpoch 2: LearningRateScheduler setting learning rate to 0.1.\n"
            "\nEpoch 3: LearningRateScheduler setting learning rate to 0.010000000149011612.\n");
}

TEST(LearningRateScheduler, RejectsBadSchedulesAndOptions) {
  expect_error([] { LearningRateScheduler s({}); }, ErrorCode::kInvalidArgument, {"schedule is empty"});
  expect_error([] { LearningRateScheduler s({.schedule = [](int64_t, double lr) { return lr; }, .verbose = -1}); },
               ErrorCode::kInvalidArgument, {"verbose = -1"});
  FakeRate rate;
  auto negative = std::make_shared<LearningRateScheduler>(
      LearningRateSchedulerOptions{.schedule = [](int64_t epoch, double) { return epoch == 1 ? -0.5 : 0.5; }});
  CallbackList list({negative}, {.params = {.verbose = 0}, .weights = &rate});
  list.on_train_begin({});
  list.on_epoch_begin(0, {});
  expect_error([&] { list.on_epoch_begin(1, {}); }, ErrorCode::kInvalidArgument, {"schedule(1, ...) returned -0.5"});
  EXPECT_EQ(rate.rate, 0.5f);  // unchanged by the failed call

  FakeRate scheduled;
  scheduled.schedule = true;
  CallbackList list2({negative}, {.params = {.verbose = 0}, .weights = &scheduled});
  expect_error([&] { list2.on_train_begin({}); }, ErrorCode::kFailedPrecondition,
               {"LearningRateScheduler", "schedule"});
  // A WeightsAccess without a learning rate (the base class's) says so.
  struct WeightsOnly : WeightsAccess {
    std::vector<Array> get_weights() override { return {}; }
    void set_weights(const std::vector<Array>&) override {}
  } weights_only;
  CallbackList list3({negative}, {.params = {.verbose = 0}, .weights = &weights_only});
  expect_error([&] { list3.on_train_begin({}); }, ErrorCode::kFailedPrecondition, {"no access to a learning rate"});
}

// ----------------------------------------------------------------------------------------------
// In a real fit: the rate reaches the optimizer.

using testing::linear;

FitOptions two_points(std::vector<std::shared_ptr<Callback>> callbacks, int64_t epochs) {
  return {.x = testing::f32({1, 2}, {2, 1}),
          .y = testing::f32({3, 5}, {2, 1}),
          .batch_size = 2,
          .epochs = epochs,
          .verbose = 0,
          .callbacks = std::move(callbacks),
          .shuffle = false};
}

CompileOptions sgd_mse(optimizers::LearningRate lr) {
  return {.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = lr}),
          .loss = std::make_shared<losses::MeanSquaredError>()};
}

TEST(LearningRateScheduler, HalvingTheRateGivesTheHandComputedSgdTrajectory) {
  // x = [1, 2], y = [3, 5], w = b = 0, one batch of 2 per epoch; the rate is 0.1, then halved.
  auto model = linear(0, 0);
  model->compile(sgd_mse(0.1));
  auto sched = std::make_shared<LearningRateScheduler>(
      LearningRateSchedulerOptions{.schedule = [](int64_t epoch, double lr) { return epoch == 0 ? lr : lr * 0.5; }});
  Logs end_logs;
  auto at_end = std::make_shared<LambdaCallback>(
      LambdaCallbackOptions{.on_train_end = [&](const Logs& logs) { end_logs = logs; }});
  auto history = model->fit(two_points({sched, at_end}, 3));
  // Epoch 0 (lr 0.1): pred [0, 0], loss 17, grads (-13, -8): w = 1.3, b = 0.8.
  // Epoch 1 (lr 0.05): pred [2.1, 3.4], loss 1.685, grads (-4.1, -2.5): w = 1.505, b = 0.925.
  // Epoch 2 (lr 0.025): pred [2.43, 3.935], loss (0.3249 + 1.134225) / 2 = 0.7295625,
  //   grads ((-1.14 - 4.26) / 2, (-1.14 - 2.13) / 2) = (-2.7, -1.635): w = 1.5725, b = 0.965875.
  const std::vector<double>& loss = history->values("loss");
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_NEAR(loss[0], 17.0, 1e-5);
  EXPECT_NEAR(loss[1], 1.685, 1e-5);
  EXPECT_NEAR(loss[2], 0.7295625, 1e-5);
  const std::vector<Array> w = model->get_weights();
  EXPECT_NEAR(w[0].to_vector<float>()[0], 1.5725, 1e-5);
  EXPECT_NEAR(w[1].to_vector<float>()[0], 0.965875, 1e-5);
  const double lr0 = static_cast<double>(0.1f);
  EXPECT_EQ(history->values("learning_rate"), (std::vector<double>{lr0, lr0 / 2, lr0 / 4}));
  EXPECT_EQ(end_logs.get("learning_rate"), lr0 / 4);  // on_train_end gets the extended logs

  // Reused in a second fit: the rate the first one left (0.025) is where it starts.
  auto again = model->fit(two_points({sched}, 2));
  EXPECT_EQ(again->values("learning_rate"), (std::vector<double>{lr0 / 4, lr0 / 8}));
}

TEST(LearningRateScheduler, AScheduledOptimizerIsAClearErrorBeforeAnyStep) {
  auto model = linear(0.5f, 0);
  model->compile(sgd_mse(
      optimizers::schedules::ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5})));
  auto sched = std::make_shared<LearningRateScheduler>(
      LearningRateSchedulerOptions{.schedule = [](int64_t, double lr) { return lr; }});
  expect_error([&] { model->fit(two_points({sched}, 2)); }, ErrorCode::kFailedPrecondition,
               {"LearningRateScheduler", "not settable"});
  EXPECT_EQ(model->get_weights()[0].to_vector<float>()[0], 0.5f);  // nothing trained
}

/// Reads the optimizer's rate through the trainer's access when training ends.
struct RateProbe : Callback {
  double at_end = -1.0;
  void on_train_end(const Logs&) override { at_end = weights_access()->learning_rate(); }
};

TEST(ReduceLROnPlateau, ReducedRateReachesTheOptimizer) {
  // Monitoring "loss" with kMax: every decrease is "no improvement", so with patience 0 the rate
  // halves after epochs 1 and 2. Epochs 0 and 1 run at 0.1 (w = 1.71, b = 1.05, fit_test.cpp);
  // epoch 2 at 0.05: pred [2.76, 4.47], grads ((-0.48 - 2.12) / 2, (-0.48 - 1.06) / 2) =
  // (-1.3, -0.77): w = 1.775, b = 1.0885.
  auto model = linear(0, 0);
  model->compile(sgd_mse(0.1));
  auto rlr = std::make_shared<ReduceLROnPlateau>(
      ReduceLROnPlateauOptions{.monitor = "loss", .factor = 0.5, .patience = 0, .mode = MonitorMode::kMax});
  auto probe = std::make_shared<RateProbe>();
  auto history = model->fit(two_points({rlr, probe}, 3));
  const std::vector<Array> w = model->get_weights();
  EXPECT_NEAR(w[0].to_vector<float>()[0], 1.775, 1e-5);
  EXPECT_NEAR(w[1].to_vector<float>()[0], 1.0885, 1e-5);
  const double lr0 = static_cast<double>(0.1f);
  EXPECT_EQ(history->values("learning_rate"), (std::vector<double>{lr0, lr0, lr0 / 2}));
  EXPECT_DOUBLE_EQ(probe->at_end, lr0 / 4);
}

}  // namespace
}  // namespace ingot::callbacks
