// Callbacks: hook order through a CallbackList in a simulated fit / evaluate / predict, History,
// ProgbarLogger / Progbar output (fake clock, fake terminal and plain streams), the stop flags,
// TerminateOnNaN, EarlyStopping and LambdaCallback.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/error.h"
#include "ingot/trainer/callbacks.h"
#include "ingot/trainer/progbar.h"

namespace ingot::callbacks {
namespace {

using utils::Progbar;
using utils::ProgbarOptions;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A clock the test moves by hand.
struct FakeClock {
  double t = 0.0;
  utils::Clock fn() {
    return [this] { return t; };
  }
};

template <class F>
ErrorCode error_code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected an ingot::Error";
  return ErrorCode::kInternal;
}

std::string show(const Logs& logs) {
  std::ostringstream s;
  for (const auto& [k, v] : logs) s << ' ' << k << '=' << v;
  return s.str();
}

/// Records every hook as "name:event args".
class Recorder : public Callback {
 public:
  Recorder(std::string name, std::vector<std::string>* log) : name_(std::move(name)), log_(log) {}
  void on_train_begin(const Logs& l) override { add("train_begin", l); }
  void on_train_end(const Logs& l) override { add("train_end", l); }
  void on_epoch_begin(int64_t e, const Logs& l) override { add("epoch_begin " + idx(e), l); }
  void on_epoch_end(int64_t e, const Logs& l) override { add("epoch_end " + idx(e), l); }
  void on_train_batch_begin(int64_t b, const Logs& l) override { add("train_batch_begin " + idx(b), l); }
  void on_train_batch_end(int64_t b, const Logs& l) override { add("train_batch_end " + idx(b), l); }
  void on_test_begin(const Logs& l) override { add("test_begin", l); }
  void on_test_end(const Logs& l) override { add("test_end", l); }
  void on_test_batch_begin(int64_t b, const Logs& l) override { add("test_batch_begin " + idx(b), l); }
  void on_test_batch_end(int64_t b, const Logs& l) override { add("test_batch_end " + idx(b), l); }
  void on_predict_begin(const Logs& l) override { add("predict_begin", l); }
  void on_predict_end(const Logs& l) override { add("predict_end", l); }
  void on_predict_batch_begin(int64_t b, const Logs& l) override { add("predict_batch_begin " + idx(b), l); }
  void on_predict_batch_end(int64_t b, const Logs& l) override { add("predict_batch_end " + idx(b), l); }

 private:
  static std::string idx(int64_t i) { return std::to_string(i); }
  void add(const std::string& event, const Logs& l) { log_->push_back(name_ + ":" + event + show(l)); }
  std::string name_;
  std::vector<std::string>* log_;
};

/// Each event of `events` as the recorders named in `names` see it, in order.
std::vector<std::string> interleave(const std::vector<std::string>& events, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    for (const auto& n : names) out.push_back(n + ":" + e);
  }
  return out;
}

/// The trainer's protocol for fit, as TRAINER_SEMANTICS.md states it: clear stop_training, run
/// the hooks, stop after the batch or epoch at which a callback set the flag; on_train_end only
/// when training finished. Returns the (epoch, batch) pairs that ran.
std::vector<std::pair<int64_t, int64_t>> simulate_fit(CallbackList& list, int64_t epochs, int64_t steps,
                                                      const std::function<Logs(int64_t, int64_t)>& batch_logs,
                                                      const std::function<Logs(int64_t)>& epoch_logs) {
  std::vector<std::pair<int64_t, int64_t>> ran;
  list.control().stop_training = false;
  list.on_train_begin({});
  Logs last;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    list.on_epoch_begin(epoch, {});
    for (int64_t batch = 0; batch < steps; ++batch) {
      list.on_train_batch_begin(batch, {});
      ran.emplace_back(epoch, batch);
      list.on_train_batch_end(batch, batch_logs(epoch, batch));
      if (list.control().stop_training) break;
    }
    last = epoch_logs(epoch);
    list.on_epoch_end(epoch, last);
    if (list.control().stop_training) break;
  }
  list.on_train_end(last);
  return ran;
}

// ----------------------------------------------------------------------------------------------
// CallbackList

TEST(CallbackList, ForwardsEveryHookInOrderThroughFitEvaluatePredict) {
  std::vector<std::string> log;
  auto a = std::make_shared<Recorder>("A", &log);
  auto b = std::make_shared<Recorder>("B", &log);
  CallbackList list({a, b}, {.params = {.epochs = 2, .steps = 2, .verbose = 0}});

  list.on_train_begin({});
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    list.on_epoch_begin(epoch, {});
    for (int64_t batch = 0; batch < 2; ++batch) {
      list.on_train_batch_begin(batch, {});
      list.on_train_batch_end(batch, {{"loss", 1.0 + batch}});
    }
    list.on_test_begin({});
    list.on_test_batch_begin(0, {});
    list.on_test_batch_end(0, {{"loss", 5.0}});
    list.on_test_end({{"loss", 5.0}});
    list.on_epoch_end(epoch, {{"loss", 1.5}, {"val_loss", 5.0}});
  }
  list.on_train_end({{"loss", 1.5}, {"val_loss", 5.0}});
  list.on_predict_begin({});
  list.on_predict_batch_begin(0, {});
  list.on_predict_batch_end(0, {});
  list.on_predict_end({});

  std::vector<std::string> events = {"train_begin"};
  for (int epoch = 0; epoch < 2; ++epoch) {
    const std::string e = std::to_string(epoch);
    events.insert(events.end(),
                  {"epoch_begin " + e, "train_batch_begin 0", "train_batch_end 0 loss=1", "train_batch_begin 1",
                   "train_batch_end 1 loss=2", "test_begin", "test_batch_begin 0", "test_batch_end 0 loss=5",
                   "test_end loss=5", "epoch_end " + e + " loss=1.5 val_loss=5"});
  }
  events.insert(events.end(), {"train_end loss=1.5 val_loss=5", "predict_begin", "predict_batch_begin 0",
                               "predict_batch_end 0", "predict_end"});
  EXPECT_EQ(log, interleave(events, {"A", "B"}));
  // verbose 0: History is added after the user's callbacks, no ProgbarLogger.
  ASSERT_EQ(list.callbacks().size(), 3u);
  EXPECT_EQ(list.callbacks()[0], a);
  EXPECT_EQ(list.callbacks()[1], b);
  EXPECT_EQ(list.callbacks()[2], list.history());
  EXPECT_EQ(list.progbar(), nullptr);
  EXPECT_EQ(list.history()->values("val_loss"), (std::vector<double>{5.0, 5.0}));
}

TEST(CallbackList, AddsHistoryThenProgbarLikeKeras) {
  std::vector<std::string> log;
  auto user = std::make_shared<Recorder>("U", &log);
  CallbackList fit_list({user}, {.params = {.epochs = 3, .steps = 10, .verbose = 1}});
  ASSERT_EQ(fit_list.callbacks().size(), 3u);
  EXPECT_EQ(fit_list.callbacks()[0], user);
  EXPECT_EQ(fit_list.callbacks()[1], fit_list.history());
  EXPECT_EQ(fit_list.callbacks()[2], fit_list.progbar());
  ASSERT_NE(fit_list.history(), nullptr);
  ASSERT_NE(fit_list.progbar(), nullptr);

  // evaluate / predict: no History.
  CallbackList eval_list({user}, {.add_history = false, .params = {.verbose = 2}});
  ASSERT_EQ(eval_list.callbacks().size(), 2u);
  EXPECT_EQ(eval_list.history(), nullptr);
  EXPECT_EQ(eval_list.callbacks()[1], eval_list.progbar());

  // A History / ProgbarLogger among the user's callbacks is used instead of a new one.
  auto history = std::make_shared<History>();
  auto progbar = std::make_shared<ProgbarLogger>();
  CallbackList own({progbar, history}, {.params = {.verbose = 1}});
  ASSERT_EQ(own.callbacks().size(), 2u);
  EXPECT_EQ(own.history(), history);
  EXPECT_EQ(own.progbar(), progbar);

  CallbackList none({}, {.add_history = false, .add_progbar = false});
  EXPECT_TRUE(none.callbacks().empty());
}

TEST(CallbackList, GivesModelParamsWeightsAndControlToEveryCallback) {
  struct Weights : WeightsAccess {
    std::vector<Array> get_weights() override { return {}; }
    void set_weights(const std::vector<Array>&) override {}
  } weights;
  int model_stand_in = 0;
  Model* model = reinterpret_cast<Model*>(&model_stand_in);  // never dereferenced
  std::vector<std::string> log;
  auto a = std::make_shared<Recorder>("A", &log);
  CallbackList list(
      {a}, {.params = {.epochs = 4, .steps = std::nullopt, .verbose = 2}, .model = model, .weights = &weights});
  auto late = std::make_shared<Recorder>("L", &log);
  list.append(late);
  for (const auto& cb : list.callbacks()) {
    EXPECT_EQ(cb->model(), model);
    EXPECT_EQ(cb->weights_access(), &weights);
    EXPECT_EQ(cb->params().epochs, 4);
    EXPECT_FALSE(cb->params().steps.has_value());
    EXPECT_EQ(cb->params().verbose, 2);
    ASSERT_TRUE(cb->has_control());
    EXPECT_EQ(&cb->control(), &list.control());
  }
  EXPECT_EQ(list.callbacks().back(), late);

  list.set_params({.epochs = 7, .steps = 3, .verbose = 0});
  list.set_model(nullptr);
  list.set_weights_access(nullptr);
  for (const auto& cb : list.callbacks()) {
    EXPECT_EQ(cb->params().epochs, 7);
    EXPECT_EQ(cb->params().steps, 3);
    EXPECT_EQ(cb->model(), nullptr);
    EXPECT_EQ(cb->weights_access(), nullptr);
  }
}

TEST(CallbackList, RejectsBadInputWithClearErrors) {
  std::vector<std::string> log;
  auto a = std::make_shared<Recorder>("A", &log);
  EXPECT_EQ(error_code_of([&] { CallbackList({a, nullptr}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { CallbackList({}, {.params = {.epochs = -1}}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { CallbackList({}, {.params = {.steps = -2}}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { CallbackList({}, {.params = {.verbose = 3}}); }), ErrorCode::kInvalidArgument);

  CallbackList list({a}, {.params = {.verbose = 0}});
  EXPECT_EQ(error_code_of([&] { list.append(nullptr); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { list.set_params({.verbose = -1}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a->params().verbose, 0);  // a rejected set_params changes nothing
  EXPECT_EQ(error_code_of([&] { list.on_epoch_begin(-1, {}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { list.on_train_batch_end(-3, {}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { list.on_predict_batch_begin(-1, {}); }), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(log.empty());  // no callback ran

  try {
    list.on_test_batch_end(-5, {});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch = -5"), std::string::npos) << e.what();
  }
}

/// Sets stop_training at the end of one train batch.
class StopAt : public Callback {
 public:
  StopAt(int64_t epoch, int64_t batch) : epoch_(epoch), batch_(batch) {}
  void on_epoch_begin(int64_t epoch, const Logs&) override { current_epoch_ = epoch; }
  void on_train_batch_end(int64_t batch, const Logs&) override {
    if (current_epoch_ == epoch_ && batch == batch_) control().stop_training = true;
  }

 private:
  int64_t epoch_, batch_, current_epoch_ = -1;
};

TEST(CallbackList, StopTrainingRequestedByACallbackEndsTheLoop) {
  auto stop = std::make_shared<StopAt>(1, 2);
  CallbackList list({stop}, {.params = {.epochs = 5, .steps = 4, .verbose = 0}});
  const auto ran = simulate_fit(
      list, 5, 4, [](int64_t, int64_t) { return Logs{{"loss", 1.0}}; },
      [](int64_t e) { return Logs{{"loss", 1.0 / static_cast<double>(e + 1)}}; });
  // Epoch 0 fully, epoch 1 up to batch 2, then stop (the epoch still ends).
  ASSERT_EQ(ran.size(), 7u);
  EXPECT_EQ(ran.back(), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_TRUE(list.control().stop_training);
  EXPECT_FALSE(list.control().stop_evaluating);
  EXPECT_FALSE(list.control().stop_predicting);
  EXPECT_EQ(list.history()->epochs(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(list.history()->values("loss"), (std::vector<double>{1.0, 0.5}));
}

TEST(Callback, ControlOutsideAListIsAClearError) {
  StopAt lone(0, 0);
  EXPECT_FALSE(lone.has_control());
  lone.on_epoch_begin(0, {});
  EXPECT_EQ(error_code_of([&] { lone.on_train_batch_end(0, {}); }), ErrorCode::kFailedPrecondition);
  auto flags = std::make_shared<TrainingControl>();
  lone.set_control(flags);
  lone.on_train_batch_end(0, {});
  EXPECT_TRUE(flags->stop_training);
  EXPECT_EQ(error_code_of([&] { lone.set_params({.epochs = -4}); }), ErrorCode::kInvalidArgument);
}

// ----------------------------------------------------------------------------------------------
// History

TEST(History, RecordsEpochLogsInFirstSeenOrder) {
  History h;
  h.on_train_begin({});
  h.on_epoch_end(0, {{"loss", 0.9}, {"accuracy", 0.5}});
  h.on_epoch_end(1, {{"loss", 0.7}, {"accuracy", 0.6}, {"val_loss", 0.8}});
  h.on_epoch_end(2, {{"val_loss", 0.75}, {"loss", 0.6}, {"accuracy", 0.65}});
  EXPECT_EQ(h.epochs(), (std::vector<int64_t>{0, 1, 2}));
  ASSERT_EQ(h.history().size(), 3u);
  EXPECT_EQ(h.history()[0].first, "loss");
  EXPECT_EQ(h.history()[1].first, "accuracy");
  EXPECT_EQ(h.history()[2].first, "val_loss");
  EXPECT_EQ(h.values("loss"), (std::vector<double>{0.9, 0.7, 0.6}));
  EXPECT_EQ(h.values("accuracy"), (std::vector<double>{0.5, 0.6, 0.65}));
  EXPECT_EQ(h.values("val_loss"), (std::vector<double>{0.8, 0.75}));
  EXPECT_TRUE(h.contains("val_loss"));
  EXPECT_FALSE(h.contains("val_accuracy"));
  try {
    h.values("val_accuracy");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("[loss, accuracy, val_loss]"), std::string::npos) << e.what();
  }
  // A new fit starts a fresh record; initial_epoch > 0 shows in epochs().
  h.on_train_begin({});
  EXPECT_TRUE(h.history().empty());
  h.on_epoch_end(5, {{"loss", 0.1}});
  EXPECT_EQ(h.epochs(), (std::vector<int64_t>{5}));
  EXPECT_EQ(h.values("loss"), (std::vector<double>{0.1}));
}

// ----------------------------------------------------------------------------------------------
// ProgbarLogger: exact output of a simulated 2-epoch fit of 4 steps

/// Drives fit hooks with `clock` times chosen to exercise ETA, throttling, padding and the
/// per-step time: batch 1 of each epoch comes within the 0.05 s redraw interval.
void drive_progbar_fit(CallbackList& list, FakeClock& clock) {
  auto batch = [&](int64_t b, double t, Logs logs) {
    list.on_train_batch_begin(b, {});
    clock.t = t;
    list.on_train_batch_end(b, logs);
  };
  clock.t = 100.0;
  list.on_train_begin({});
  list.on_epoch_begin(0, {});
  batch(0, 100.5, {{"loss", 0.9}, {"accuracy", 0.5}});
  batch(1, 100.52, {{"loss", 0.5}, {"accuracy", 0.6}});
  batch(2, 101.0, {{"loss", 0.123456}, {"accuracy", 0.0005}});
  batch(3, 101.5, {{"loss", 0.1}, {"accuracy", 0.75}});
  // Validation inside fit: the bar stays silent.
  list.on_test_begin({});
  list.on_test_batch_begin(0, {});
  list.on_test_batch_end(0, {{"loss", 0.2}});
  list.on_test_end({{"loss", 0.2}});
  clock.t = 101.6;
  list.on_epoch_end(0, {{"loss", 0.1}, {"accuracy", 0.75}, {"val_loss", 0.2}});
  clock.t = 102.0;
  list.on_epoch_begin(1, {});
  batch(0, 102.25, {{"loss", 0.05}, {"accuracy", 0.8}});
  batch(1, 102.26, {{"loss", 0.045}, {"accuracy", 0.82}});
  batch(2, 102.27, {{"loss", 0.042}, {"accuracy", 0.84}});
  batch(3, 102.28, {{"loss", 0.04}, {"accuracy", 0.85}});
  clock.t = 103.0;
  list.on_epoch_end(1, {{"loss", 0.04}, {"accuracy", 0.85}, {"val_loss", 0.15}});
  list.on_train_end({{"loss", 0.04}, {"accuracy", 0.85}, {"val_loss", 0.15}});
}

TEST(ProgbarLogger, LiveBarOnATerminal) {
  FakeClock clock;
  std::ostringstream out;
  CallbackList list({}, {.params = {.epochs = 2, .steps = 4, .verbose = 1},
                         .progbar = {.stream = &out, .force_terminal = true, .clock = clock.fn()}});
  drive_progbar_fit(list, clock);
  const std::string expected =
      "Epoch 1/2\n"
      "\r1/4 [======>.......................] - ETA: 1s - loss: 0.9000 - accuracy: 0.5000"
      // batch 1 (0.02 s later) is not drawn
      "\r3/4 [=====================>........] - ETA: 0s - loss: 0.1235 - accuracy: 5.0000e-04"
      "\r4/4 [==============================] - ETA: 0s - loss: 0.1000 - accuracy: 0.7500    "
      "\r4/4 [==============================] - 2s 367ms/step - loss: 0.1000 - accuracy: 0.7500"
      " - val_loss: 0.2000\n"
      "Epoch 2/2\n"
      "\r1/4 [======>.......................] - ETA: 0s - loss: 0.0500 - accuracy: 0.8000"
      "\r4/4 [==============================] - 1s 250ms/step - loss: 0.0400 - accuracy: 0.8500"
      " - val_loss: 0.1500\n";
  EXPECT_EQ(out.str(), expected);
}

TEST(ProgbarLogger, OneLinePerEpochWhenNotATerminal) {
  FakeClock clock;
  std::ostringstream out;  // not a terminal: verbose 1 prints summary lines
  CallbackList list(
      {}, {.params = {.epochs = 2, .steps = 4, .verbose = 1}, .progbar = {.stream = &out, .clock = clock.fn()}});
  drive_progbar_fit(list, clock);
  EXPECT_EQ(out.str(),
            "Epoch 1/2\n"
            "4/4 - 2s - 367ms/step - loss: 0.1000 - accuracy: 0.7500 - val_loss: 0.2000\n"
            "Epoch 2/2\n"
            "4/4 - 1s - 250ms/step - loss: 0.0400 - accuracy: 0.8500 - val_loss: 0.1500\n");
}

TEST(ProgbarLogger, Verbose2IgnoresTheTerminalAndBatchUpdates) {
  FakeClock clock;
  std::ostringstream out;
  CallbackList list({}, {.params = {.epochs = 2, .steps = 4, .verbose = 2},
                         .progbar = {.stream = &out, .force_terminal = true, .clock = clock.fn()}});
  drive_progbar_fit(list, clock);
  // Keras's verbose 2 never sees the batches, so the time per step is (end - start) / steps.
  EXPECT_EQ(out.str(),
            "Epoch 1/2\n"
            "4/4 - 2s - 400ms/step - loss: 0.1000 - accuracy: 0.7500 - val_loss: 0.2000\n"
            "Epoch 2/2\n"
            "4/4 - 1s - 250ms/step - loss: 0.0400 - accuracy: 0.8500 - val_loss: 0.1500\n");
}

TEST(ProgbarLogger, Verbose0PrintsNothing) {
  FakeClock clock;
  std::ostringstream out;
  auto logger = std::make_shared<ProgbarLogger>(
      ProgbarLoggerOptions{.stream = &out, .force_terminal = true, .clock = clock.fn()});
  CallbackList list({logger}, {.params = {.epochs = 2, .steps = 4, .verbose = 0}});
  drive_progbar_fit(list, clock);
  EXPECT_EQ(out.str(), "");
}

TEST(ProgbarLogger, UnknownStepsShowACounterUntilTheFirstEpochEnds) {
  FakeClock clock;
  std::ostringstream out;
  CallbackList list({}, {.params = {.epochs = 2, .steps = std::nullopt, .verbose = 1},
                         .progbar = {.stream = &out, .force_terminal = true, .clock = clock.fn()}});
  list.on_train_begin({});
  list.on_epoch_begin(0, {});
  clock.t = 0.4;
  list.on_train_batch_end(0, {{"loss", 1.0}});
  clock.t = 1.0;
  list.on_train_batch_end(1, {{"loss", 0.8}});
  clock.t = 1.2;
  list.on_epoch_end(0, {{"loss", 0.7}});
  clock.t = 2.0;
  list.on_epoch_begin(1, {});
  clock.t = 2.5;
  list.on_train_batch_end(0, {{"loss", 0.6}});
  clock.t = 3.0;
  list.on_epoch_end(1, {{"loss", 0.5}});
  list.on_train_end({{"loss", 0.5}});
  EXPECT_EQ(out.str(),
            "Epoch 1/2\n"
            "\r      1/Unknown - 0s 400ms/step - loss: 1.0000"
            "\r      2/Unknown - 1s 600ms/step - loss: 0.8000"
            "\r2/2 [==============================] - 1s 800ms/step - loss: 0.7000\n"
            "Epoch 2/2\n"
            "\r1/2 [==============>...............] - ETA: 0s - loss: 0.6000"
            "\r2/2 [==============================] - 1s 500ms/step - loss: 0.5000\n");
}

TEST(ProgbarLogger, DirectEvaluateAndPredictGetTheirOwnBar) {
  FakeClock clock;
  std::ostringstream eval_out;
  CallbackList eval({}, {.add_history = false,
                         .params = {.epochs = 1, .steps = 2, .verbose = 1},
                         .progbar = {.stream = &eval_out, .clock = clock.fn()}});
  clock.t = 10.0;
  eval.on_test_begin({});
  clock.t = 10.5;
  eval.on_test_batch_end(0, {{"loss", 0.4}});
  clock.t = 11.0;
  eval.on_test_batch_end(1, {{"loss", 0.35}});
  eval.on_test_end({{"loss", 0.3}});
  EXPECT_EQ(eval_out.str(), "2/2 - 1s - 500ms/step - loss: 0.3000\n");

  std::ostringstream out;
  CallbackList predict({}, {.add_history = false,
                            .params = {.epochs = 1, .steps = 2, .verbose = 1},
                            .progbar = {.stream = &out, .force_terminal = true, .clock = clock.fn()}});
  clock.t = 0.0;
  predict.on_predict_begin({});
  clock.t = 0.002;
  predict.on_predict_batch_end(0, {{"ignored", 1.0}});
  clock.t = 0.0022;
  predict.on_predict_batch_end(1, {});
  clock.t = 0.0025;
  predict.on_predict_end({});
  EXPECT_EQ(out.str(),
            "\r1/2 [==============>...............] - ETA: 0s"
            "\r2/2 [==============================] - 0s 500us/step\n");
}

TEST(ProgbarLogger, RejectsBadOptions) {
  EXPECT_EQ(error_code_of([] { ProgbarLogger({.width = 0}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { ProgbarLogger({.interval = -0.1}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { ProgbarLogger({.interval = kNaN}); }), ErrorCode::kInvalidArgument);
}

// ----------------------------------------------------------------------------------------------
// Progbar on its own

TEST(Progbar, FormatsValuesLikeKeras) {
  FakeClock clock;
  std::ostringstream out;
  Progbar bar(1, {.verbose = 2, .stream = &out, .clock = clock.fn()});
  clock.t = 2.2;
  bar.update(1, {{"big", 1234567.0},
                 {"tiny", 0.001},
                 {"neg", -0.5},
                 {"nan", kNaN},
                 {"negnan", -kNaN},
                 {"inf", kInf},
                 {"zero", 0.0},
                 {"negtiny", -1e-5}});
  EXPECT_EQ(out.str(),
            "1/1 - 2s - 2s/step - big: 1234567.0000 - tiny: 1.0000e-03 - neg: -0.5000"
            " - nan: nan - negnan: nan - inf: inf - zero: 0.0000e+00 - negtiny: -1.0000e-05\n");
}

TEST(Progbar, EtaAndTimeFormats) {
  FakeClock clock;
  std::ostringstream out;
  Progbar hours(10000, {.stream = &out, .force_terminal = true, .clock = clock.fn()});
  clock.t = 1.0;
  hours.update(1);
  EXPECT_EQ(out.str(), "\r    1/10000 [..............................] - ETA: 2:46:39");

  out.str("");
  clock.t = 0.0;
  Progbar minutes(100, {.stream = &out, .force_terminal = true, .clock = clock.fn()});
  clock.t = 1.0;
  minutes.update(1);
  EXPECT_EQ(out.str(), "\r  1/100 [..............................] - ETA: 1:39");

  out.str("");
  clock.t = 0.0;
  Progbar slow(2, {.width = 10, .stream = &out, .force_terminal = true, .clock = clock.fn()});
  clock.t = 1.5;
  slow.update(1);
  clock.t = 4.2;
  slow.update(2);  // finalized: current >= target
  EXPECT_EQ(out.str(),
            "\r1/2 [====>.....] - ETA: 1s"
            "\r2/2 [==========] - 4s 3s/step\n");
}

TEST(Progbar, RedrawsAreThrottledExceptTheFinalUpdate) {
  FakeClock clock;
  std::ostringstream out;
  Progbar bar(3, {.width = 3, .interval = 1.0, .stream = &out, .force_terminal = true, .clock = clock.fn()});
  clock.t = 0.1;
  bar.update(1);
  clock.t = 0.5;
  bar.update(2);  // 0.4 s after the last draw: skipped
  clock.t = 0.6;
  bar.update(3);  // final: drawn anyway
  EXPECT_EQ(out.str(), "\r1/3 [>..] - ETA: 0s\r3/3 [===] - 1s 250ms/step\n");
}

TEST(Progbar, StatelessMetricsAreAveragedOverSteps) {
  FakeClock clock;
  std::ostringstream out;
  Progbar bar(4, {.verbose = 2, .stateless_metrics = {"x"}, .stream = &out, .clock = clock.fn()});
  bar.add(1, {{"x", 1.0}, {"y", 10.0}});
  bar.add(2, {{"x", 4.0}, {"y", 20.0}});  // weighs 2 steps
  bar.add(1, {{"x", 7.0}, {"y", 30.0}});
  // x = (1 + 4 * 2 + 7) / 4; y is shown as given.
  EXPECT_EQ(out.str(), "4/4 - 0s - 0s/step - x: 4.0000 - y: 30.0000\n");
}

TEST(Progbar, ShowsTheAchievedRateAfterTheTimePerStep) {
  FakeClock clock;
  std::ostringstream out;
  // 4 steps in 2 s of 3e9 FLOPs each: 0.5 s/step, 6 GFLOP/s.
  Progbar bar(4, {.verbose = 2, .stream = &out, .clock = clock.fn(), .flops_per_unit = 3e9});
  clock.t = 2.0;
  bar.update(4, {{"loss", 0.5}});
  EXPECT_EQ(out.str(), "4/4 - 2s - 500ms/step - 6 GFLOP/s - loss: 0.5000\n");
  // The live bar shows it on the finalized line too; nothing while the time per step is 0.
  out.str("");
  clock.t = 0.0;
  Progbar live(2, {.width = 4, .stream = &out, .force_terminal = true, .clock = clock.fn(), .flops_per_unit = 1.25e8});
  live.update(1);
  clock.t = 0.5;
  live.update(2);
  // The time per step after the first is (0.5 - 0) / 1 s: 0.25 GFLOP/s.
  EXPECT_EQ(out.str(), "\r1/2 [=>..] - ETA: 0s\r2/2 [====] - 0s 500ms/step - 0.25 GFLOP/s\n");
  live.set_flops_per_unit(0);
  EXPECT_EQ(error_code_of([&] { live.set_flops_per_unit(kNaN); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { Progbar(3, {.stream = &out, .flops_per_unit = -1}); }), ErrorCode::kInvalidArgument);
}

TEST(Progbar, RejectsBadArguments) {
  std::ostringstream out;
  EXPECT_EQ(error_code_of([&] { Progbar(-1, {.stream = &out}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { Progbar(3, {.width = 0, .stream = &out}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { Progbar(3, {.verbose = 3, .stream = &out}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { Progbar(3, {.interval = kInf, .stream = &out}); }), ErrorCode::kInvalidArgument);
  Progbar bar(3, {.stream = &out});
  EXPECT_EQ(error_code_of([&] { bar.update(-1); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { bar.add(-1); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { bar.set_target(-7); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bar.target(), 3);
  EXPECT_FALSE(bar.dynamic_display());  // an ostringstream is not a terminal
  EXPECT_FALSE(utils::is_terminal(out));
}

// ----------------------------------------------------------------------------------------------
// TerminateOnNaN

TEST(TerminateOnNaN, StopsOnNaNOrInfiniteLoss) {
  std::ostringstream out;
  auto cb = std::make_shared<TerminateOnNaN>(TerminateOnNaNOptions{.stream = &out});
  CallbackList list({cb}, {.params = {.epochs = 3, .steps = 5, .verbose = 0}});
  const auto ran = simulate_fit(
      list, 3, 5, [](int64_t epoch, int64_t batch) { return Logs{{"loss", epoch == 1 && batch == 3 ? kNaN : 0.5}}; },
      [](int64_t) { return Logs{{"loss", 0.5}}; });
  ASSERT_EQ(ran.size(), 9u);  // 5 batches of epoch 0, batches 0..3 of epoch 1
  EXPECT_EQ(ran.back(), (std::pair<int64_t, int64_t>{1, 3}));
  EXPECT_EQ(out.str(), "Batch 3: Invalid loss, terminating training\n");

  for (double bad : {kInf, -kInf}) {
    list.control().stop_training = false;
    list.on_train_batch_end(2, {{"accuracy", 0.1}, {"loss", bad}});
    EXPECT_TRUE(list.control().stop_training) << bad;
  }
  list.control().stop_training = false;
  list.on_train_batch_end(4, {{"accuracy", kNaN}});  // no loss: ignored
  list.on_train_batch_end(5, {{"loss", 1e308}});
  EXPECT_FALSE(list.control().stop_training);
}

// ----------------------------------------------------------------------------------------------
// EarlyStopping

/// Runs a fit with one value of `monitor` per epoch (until stopped); returns the epochs run.
int64_t fit_with_values(CallbackList& list, const std::string& monitor, const std::vector<double>& values) {
  const auto n = static_cast<int64_t>(values.size());
  const auto ran = simulate_fit(
      list, n, 1, [](int64_t, int64_t) { return Logs{{"loss", 1.0}}; },
      [&](int64_t e) { return Logs{{"loss", 1.0}, {monitor, values[static_cast<size_t>(e)]}}; });
  return ran.empty() ? 0 : ran.back().first + 1;
}

TEST(EarlyStopping, StopsWhenPatienceRunsOut) {
  std::ostringstream out;
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.patience = 2, .verbose = 1, .stream = &out});
  EXPECT_TRUE(es->minimizes());
  CallbackList list({es}, {.params = {.epochs = 6, .verbose = 0}});
  // best 0.9 at epoch 1; epochs 2 and 3 are worse -> wait reaches 2 at epoch 3.
  EXPECT_EQ(fit_with_values(list, "val_loss", {1.0, 0.9, 0.95, 0.92, 0.5, 0.4}), 4);
  EXPECT_EQ(es->stopped_epoch(), 3);
  EXPECT_EQ(es->wait(), 2);
  EXPECT_DOUBLE_EQ(es->best(), 0.9);
  EXPECT_EQ(es->best_epoch(), 1);
  EXPECT_EQ(out.str(), "Epoch 4: early stopping\n");

  // Reusable: a new fit starts over.
  out.str("");
  EXPECT_EQ(fit_with_values(list, "val_loss", {3.0, 2.0, 1.0, 0.5}), 4);
  EXPECT_EQ(es->stopped_epoch(), 0);
  EXPECT_EQ(es->wait(), 0);
  EXPECT_DOUBLE_EQ(es->best(), 0.5);
  EXPECT_EQ(out.str(), "");
}

TEST(EarlyStopping, MinDeltaModeAndAutoDirection) {
  // min_delta: 0.95 is not better than 1.0 by more than 0.1 -> stop at epoch 1 (patience 0).
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.min_delta = -0.1});
  CallbackList list({es}, {.params = {.verbose = 0}});
  EXPECT_EQ(fit_with_values(list, "val_loss", {1.0, 0.95, 0.5}), 2);
  EXPECT_EQ(es->stopped_epoch(), 1);
  EXPECT_DOUBLE_EQ(es->options().min_delta, 0.1);

  // Accuracy is maximized in auto mode; an equal value is no improvement.
  auto acc = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_accuracy"});
  EXPECT_FALSE(acc->minimizes());
  CallbackList acc_list({acc}, {.params = {.verbose = 0}});
  EXPECT_EQ(fit_with_values(acc_list, "val_accuracy", {0.5, 0.6, 0.6, 0.9}), 3);
  EXPECT_EQ(acc->stopped_epoch(), 2);
  EXPECT_DOUBLE_EQ(acc->best(), 0.6);

  // Explicit kMax on a loss-like name: rising values keep training going.
  auto max = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "loss", .mode = MonitorMode::kMax});
  CallbackList max_list({max}, {.params = {.verbose = 0}});
  EXPECT_EQ(fit_with_values(max_list, "loss", {1.0, 2.0, 3.0}), 3);
  EXPECT_EQ(max->stopped_epoch(), 0);

  EXPECT_TRUE(EarlyStopping({.monitor = "mean_squared_error"}).minimizes());
  EXPECT_TRUE(EarlyStopping({.monitor = "val_mae"}).minimizes());
  EXPECT_TRUE(EarlyStopping({.monitor = "sparse_categorical_crossentropy"}).minimizes());
  EXPECT_FALSE(EarlyStopping({.monitor = "val_auc"}).minimizes());
  EXPECT_FALSE(EarlyStopping({.monitor = "sparse_categorical_accuracy"}).minimizes());
  EXPECT_FALSE(EarlyStopping({.monitor = "val_precision"}).minimizes());
  EXPECT_TRUE(EarlyStopping({.monitor = "custom", .mode = MonitorMode::kMin}).minimizes());
}

TEST(EarlyStopping, BaselineMustBeBeaten) {
  // Improvements that stay above the baseline do not reset the wait.
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.patience = 2, .baseline = 0.5});
  CallbackList list({es}, {.params = {.verbose = 0}});
  EXPECT_EQ(fit_with_values(list, "val_loss", {0.8, 0.79, 0.85, 0.3, 0.2}), 3);
  EXPECT_EQ(es->stopped_epoch(), 2);
  EXPECT_DOUBLE_EQ(es->best(), 0.79);

  auto without = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.patience = 2});
  CallbackList list2({without}, {.params = {.verbose = 0}});
  EXPECT_EQ(fit_with_values(list2, "val_loss", {0.8, 0.79, 0.85, 0.3, 0.2}), 5);
  EXPECT_EQ(without->stopped_epoch(), 0);

  // Beating the baseline resets the wait.
  auto beaten = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.patience = 2, .baseline = 0.5});
  CallbackList list3({beaten}, {.params = {.verbose = 0}});
  EXPECT_EQ(fit_with_values(list3, "val_loss", {0.4, 0.45, 0.3, 0.35, 0.36}), 5);
  EXPECT_EQ(beaten->stopped_epoch(), 4);
}

TEST(EarlyStopping, StartFromEpochAndMissingMonitor) {
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.start_from_epoch = 2});
  CallbackList list({es}, {.params = {.verbose = 0}});
  // Epochs 0 and 1 are warm-up: getting worse there does not count.
  EXPECT_EQ(fit_with_values(list, "val_loss", {1.0, 2.0, 3.0, 2.5, 2.6}), 5);
  EXPECT_EQ(es->stopped_epoch(), 4);
  EXPECT_EQ(es->best_epoch(), 3);

  std::ostringstream warnings;
  auto missing = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.warnings = &warnings});
  CallbackList list2({missing}, {.params = {.verbose = 0}});
  EXPECT_EQ(fit_with_values(list2, "val_accuracy", {0.1, 0.2}), 2);
  EXPECT_EQ(missing->wait(), 0);
  EXPECT_EQ(missing->stopped_epoch(), 0);
  EXPECT_EQ(warnings.str(),
            "Warning: early stopping conditioned on metric `val_loss` which is not available. "
            "Available metrics are: loss,val_accuracy\n"
            "Warning: early stopping conditioned on metric `val_loss` which is not available. "
            "Available metrics are: loss,val_accuracy\n");
}

/// Fake model weights: one scalar whose value the test sets per epoch.
struct ScalarWeights : WeightsAccess {
  double value = 0.0;
  int gets = 0;
  std::vector<double> restored;
  std::vector<Array> get_weights() override {
    ++gets;
    return {Array::scalar(value, DType::kF64)};
  }
  void set_weights(const std::vector<Array>& weights) override {
    for (const Array& w : weights) restored.push_back(w.element_as_double(0));
  }
};

TEST(EarlyStopping, RestoresTheBestWeights) {
  ScalarWeights weights;
  std::ostringstream out;
  auto es = std::make_shared<EarlyStopping>(
      EarlyStoppingOptions{.patience = 2, .verbose = 1, .restore_best_weights = true, .stream = &out});
  // The model's weight after epoch e is 10 + e.
  auto set_weight = std::make_shared<LambdaCallback>(LambdaCallbackOptions{
      .on_epoch_end = [&](int64_t e, const Logs&) { weights.value = 10.0 + static_cast<double>(e); }});
  CallbackList list({set_weight, es}, {.params = {.verbose = 0}, .weights = &weights});
  EXPECT_EQ(fit_with_values(list, "val_loss", {1.0, 0.5, 0.7, 0.8, 0.1}), 4);
  EXPECT_EQ(es->best_epoch(), 1);
  EXPECT_EQ(weights.restored, (std::vector<double>{11.0}));
  EXPECT_EQ(weights.gets, 3);  // first monitored epoch, then the improvements at epochs 0 and 1
  EXPECT_EQ(out.str(),
            "Epoch 4: early stopping\n"
            "Restoring model weights from the end of the best epoch: 2.\n");

  auto no_access = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.restore_best_weights = true});
  CallbackList list2({no_access}, {.params = {.verbose = 0}});
  EXPECT_EQ(error_code_of([&] { list2.on_train_begin({}); }), ErrorCode::kFailedPrecondition);
}

TEST(EarlyStopping, RejectsBadOptions) {
  EXPECT_EQ(error_code_of([] { EarlyStopping({.monitor = ""}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { EarlyStopping({.patience = -1}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { EarlyStopping({.min_delta = kNaN}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { EarlyStopping({.baseline = kInf}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { EarlyStopping({.start_from_epoch = -2}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([] { EarlyStopping({.verbose = -1}); }), ErrorCode::kInvalidArgument);
  try {
    EarlyStopping({.monitor = "val_custom_metric"});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("val_custom_metric"), std::string::npos);
    EXPECT_NE(e.hint().find("kMin"), std::string::npos);
  }
}

// ----------------------------------------------------------------------------------------------
// LambdaCallback

TEST(LambdaCallback, CallsEachGivenFunction) {
  std::vector<std::string> log;
  auto on = [&](std::string name) { return [&log, name](const Logs& l) { log.push_back(name + show(l)); }; };
  auto on_index = [&](std::string name) {
    return [&log, name](int64_t i, const Logs& l) { log.push_back(name + " " + std::to_string(i) + show(l)); };
  };
  auto all = std::make_shared<LambdaCallback>(LambdaCallbackOptions{
      .on_train_begin = on("train_begin"),
      .on_train_end = on("train_end"),
      .on_epoch_begin = on_index("epoch_begin"),
      .on_epoch_end = on_index("epoch_end"),
      .on_train_batch_begin = on_index("train_batch_begin"),
      .on_train_batch_end = on_index("train_batch_end"),
      .on_test_begin = on("test_begin"),
      .on_test_end = on("test_end"),
      .on_test_batch_begin = on_index("test_batch_begin"),
      .on_test_batch_end = on_index("test_batch_end"),
      .on_predict_begin = on("predict_begin"),
      .on_predict_end = on("predict_end"),
      .on_predict_batch_begin = on_index("predict_batch_begin"),
      .on_predict_batch_end = on_index("predict_batch_end"),
  });
  auto only_epoch_end =
      std::make_shared<LambdaCallback>(LambdaCallbackOptions{.on_epoch_end = on_index("ONLY epoch_end")});
  CallbackList list({all, only_epoch_end}, {.params = {.verbose = 0}});
  list.on_train_begin({});
  list.on_epoch_begin(0, {});
  list.on_train_batch_begin(0, {});
  list.on_train_batch_end(0, {{"loss", 2}});
  list.on_test_begin({});
  list.on_test_batch_begin(0, {});
  list.on_test_batch_end(0, {{"loss", 3}});
  list.on_test_end({{"loss", 3}});
  list.on_epoch_end(0, {{"loss", 2}, {"val_loss", 3}});
  list.on_train_end({{"loss", 2}});
  list.on_predict_begin({});
  list.on_predict_batch_begin(0, {});
  list.on_predict_batch_end(0, {});
  list.on_predict_end({});
  EXPECT_EQ(log, (std::vector<std::string>{
                     "train_begin", "epoch_begin 0", "train_batch_begin 0", "train_batch_end 0 loss=2", "test_begin",
                     "test_batch_begin 0", "test_batch_end 0 loss=3", "test_end loss=3",
                     "epoch_end 0 loss=2 val_loss=3", "ONLY epoch_end 0 loss=2 val_loss=3", "train_end loss=2",
                     "predict_begin", "predict_batch_begin 0", "predict_batch_end 0", "predict_end"}));
}

}  // namespace
}  // namespace ingot::callbacks
