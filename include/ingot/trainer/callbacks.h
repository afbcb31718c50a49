// Callbacks (keras.callbacks): objects whose hooks the fit / evaluate / predict loops call at
// the begin and end of training, of every epoch and of every batch (contract:
// TRAINER_SEMANTICS.md, "Callbacks"). A CallbackList forwards each hook to its callbacks in
// order and adds History and ProgbarLogger as Keras does. docs/trainer-callbacks.md is the
// guide, including the protocol the trainer follows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/trainer/logs.h"
#include "ingot/trainer/progbar.h"

namespace ingot {

class Model;  // the trainer's model; callbacks only hold a pointer to it

namespace callbacks {

/// The stop flags of one fit / evaluate / predict (Keras's model.stop_training,
/// model.stop_evaluating, model.stop_predicting). A CallbackList owns one and shares it with
/// every callback it holds; a callback sets a flag through Callback::control(). The trainer
/// clears the flag when its loop starts and reads it after every batch-end and epoch-end hook:
/// fit ends after the current batch or epoch when stop_training is set, evaluate / predict
/// after the current batch when stop_evaluating / stop_predicting is set.
struct TrainingControl {
  bool stop_training = false;
  bool stop_evaluating = false;
  bool stop_predicting = false;
  /// Set by a callback's on_train_begin to resume an interrupted run: fit then starts at this
  /// 0-based epoch instead of FitOptions::initial_epoch (Keras 3's `model._initial_epoch`, which
  /// BackupAndRestore sets). fit clears it once read.
  std::optional<int64_t> initial_epoch;
};

/// What the running loop tells its callbacks (Keras's callback.params).
struct Params {
  /// Epochs of this fit (1 for evaluate / predict); >= 0.
  int64_t epochs = 1;
  /// Batches (steps) per epoch or per evaluate / predict pass; nullopt when unknown (a
  /// generator without a length). >= 0 when set.
  std::optional<int64_t> steps;
  /// 0: silent, 1: progress bar, 2: one line per epoch (the trainer resolves "auto").
  int verbose = 1;
};

/// Throws ingot::Error(kInvalidArgument) naming the field and its value unless epochs >= 0,
/// steps is unset or >= 0, and verbose is 0, 1 or 2.
void validate(const Params& params);

/// Read and write access to the model's weights and the optimizer's learning rate, provided by
/// the trainer (Keras's model.get_weights / set_weights, model.optimizer.learning_rate) for
/// callbacks such as EarlyStopping(restore_best_weights) and LearningRateScheduler.
///
/// During fit the live weights are the step's output state; an implementation syncs that state
/// first (TRAINER_SEMANTICS.md, "State is explicit and donated") so that get_weights returns
/// the values after the last finished step, and set_weights changes what the next step uses.
class WeightsAccess {
 public:
  virtual ~WeightsAccess() = default;
  /// All weights (trainable then non-trainable, in model order) as arrays that later steps
  /// never write into (copies, like Keras's NumPy arrays): the caller may keep them.
  virtual std::vector<Array> get_weights() = 0;
  /// Assigns `weights` (same count, shapes and dtypes as get_weights returns); throws
  /// ingot::Error(kInvalidArgument / kShapeMismatch / kDTypeMismatch) naming the index
  /// otherwise.
  virtual void set_weights(const std::vector<Array>& weights) = 0;
  /// The optimizer's variables (Optimizer::build's layout: the iteration count first) as copies;
  /// empty before the optimizer is built. The default throws ingot::Error(kUnimplemented).
  virtual std::vector<Array> get_optimizer_state();
  /// Assigns the optimizer's variables (same count, shapes and dtypes as get_optimizer_state
  /// returns; ingot::Error(kInvalidArgument / kShapeMismatch / kDTypeMismatch) naming the index
  /// otherwise, nothing changed). The default throws ingot::Error(kUnimplemented).
  virtual void set_optimizer_state(const std::vector<Array>& state);
  /// The learning rate the optimizer's next step uses (Keras's
  /// `float(model.optimizer.learning_rate)`): the constant rate held in the optimizer state
  /// (an f32, widened), or a schedule evaluated at the current iteration count. Throws
  /// ingot::Error(kFailedPrecondition) when there is no optimizer state (not compiled with an
  /// optimizer, or not built yet); the default implementation always throws that.
  virtual double learning_rate();
  /// Sets the constant learning rate of the following steps (Keras's
  /// `model.optimizer.learning_rate = value`; stored as f32, no retrace). Throws
  /// ingot::Error(kFailedPrecondition) for an optimizer built with a learning-rate schedule (not
  /// settable, as Keras raises) or without optimizer state, kInvalidArgument for a negative or
  /// non-finite value; nothing changes then. The default implementation always throws
  /// kFailedPrecondition.
  virtual void set_learning_rate(double value);
};

/// Base class of all callbacks: every hook is virtual and does nothing by default.
///
/// Hooks receive the logs of the event (Keras's `logs` dicts): on_train_batch_end /
/// on_test_batch_end get the running means of the loss and metrics, on_epoch_end the epoch's
/// results plus "val_" entries, on_test_end the evaluation results, on_train_end the last
/// epoch's logs; the begin hooks get empty logs. `epoch` is 0-based; `batch` is the 0-based
/// index of the first step of the call (with steps_per_execution = k: 0, k, 2k, ...).
/// A hook may throw; the exception propagates out of fit (after the state is written back).
class Callback {
 public:
  virtual ~Callback() = default;

  /// The model being trained (not owned; may be null). Callbacks never own the model.
  virtual void set_model(Model* model) { model_ = model; }
  Model* model() const { return model_; }
  /// The loop's parameters. Throws as validate() does.
  virtual void set_params(const Params& params);
  const Params& params() const { return params_; }
  /// Shared stop flags (set by CallbackList when it adopts the callback).
  void set_control(std::shared_ptr<TrainingControl> control) { control_ = std::move(control); }
  /// The stop flags. Throws ingot::Error(kFailedPrecondition) when the callback was never added
  /// to a CallbackList (nor given flags with set_control).
  TrainingControl& control() const;
  bool has_control() const { return control_ != nullptr; }
  /// Access to the model's weights (not owned; may be null until the trainer provides it).
  void set_weights_access(WeightsAccess* weights) { weights_ = weights; }
  WeightsAccess* weights_access() const { return weights_; }

  virtual void on_train_begin(const Logs& logs) {}
  virtual void on_train_end(const Logs& logs) {}
  virtual void on_epoch_begin(int64_t epoch, const Logs& logs) {}
  virtual void on_epoch_end(int64_t epoch, const Logs& logs) {}
  /// Entries this callback adds to the epoch's logs (Keras callbacks write into the shared logs
  /// dict, e.g. LearningRateScheduler's "learning_rate"). CallbackList::on_epoch_end calls it
  /// right before this callback's on_epoch_end, so this callback and the ones after it (History,
  /// CSVLogger, the progress bar) see the entries, as does fit's on_train_end. Default: none.
  virtual void update_epoch_logs(int64_t epoch, Logs& logs) {}
  virtual void on_train_batch_begin(int64_t batch, const Logs& logs) {}
  virtual void on_train_batch_end(int64_t batch, const Logs& logs) {}
  virtual void on_test_begin(const Logs& logs) {}
  virtual void on_test_end(const Logs& logs) {}
  virtual void on_test_batch_begin(int64_t batch, const Logs& logs) {}
  virtual void on_test_batch_end(int64_t batch, const Logs& logs) {}
  virtual void on_predict_begin(const Logs& logs) {}
  virtual void on_predict_end(const Logs& logs) {}
  virtual void on_predict_batch_begin(int64_t batch, const Logs& logs) {}
  virtual void on_predict_batch_end(int64_t batch, const Logs& logs) {}

 private:
  Model* model_ = nullptr;
  Params params_;
  std::shared_ptr<TrainingControl> control_;
  WeightsAccess* weights_ = nullptr;
};

/// Records each epoch's logs (Keras's History; fit returns it).
class History : public Callback {
 public:
  /// One recorded series: a log name and its value at every epoch it appeared in.
  using Series = std::pair<std::string, std::vector<double>>;

  /// Starts a fresh record. (Keras clears only `epoch` here, so a reused History ends up with
  /// value lists longer than its epoch list; ingot clears both.)
  void on_train_begin(const Logs& logs) override;
  /// Appends `epoch` and each log value to its series.
  void on_epoch_end(int64_t epoch, const Logs& logs) override;

  /// name -> values, in the order the names were first seen.
  const std::vector<Series>& history() const { return history_; }
  /// The values of `name`; throws ingot::Error(kNotFound) listing the recorded names.
  const std::vector<double>& values(const std::string& name) const;
  bool contains(const std::string& name) const;
  /// The 0-based epochs recorded, in order.
  const std::vector<int64_t>& epochs() const { return epochs_; }

 private:
  std::vector<Series> history_;
  std::vector<int64_t> epochs_;
};

/// Options of a ProgbarLogger: where the bar goes and what time it is (see utils::ProgbarOptions).
struct ProgbarLoggerOptions {
  /// Where to write; nullptr means std::cout. Must outlive the logger.
  std::ostream* stream = nullptr;
  /// Draw the live bar even if `stream` is not a terminal (tests).
  bool force_terminal = false;
  /// Time source in seconds; empty means std::chrono::steady_clock.
  utils::Clock clock;
  /// Minimum seconds between redraws of the live bar (Keras: 0.05).
  double interval = 0.05;
  /// Width of the bar in characters (tf.keras: 30).
  int64_t width = 30;
  /// In fit's training bar, follow the time per step with the achieved rate of the compiled
  /// train step: "469/469 - 1s - 1ms/step - 118 GFLOP/s - loss: ..." (its FLOPs from
  /// Model::train_step_cost_analysis, XLA's counting; nothing for an interpreted step, or
  /// evaluate / predict bars). Off by default (Keras shows no rate).
  bool show_gflops = false;
};

/// Prints the progress of fit / evaluate / predict (Keras's ProgbarLogger over
/// keras.utils.Progbar). Uses params().verbose, epochs and steps (set_params):
/// - each epoch prints "Epoch 3/10" first when epochs > 1 and verbose != 0;
/// - verbose 1 on a terminal: a live bar updated at every train batch end, finalized with the
///   epoch logs (including val_ entries) at epoch end;
/// - verbose 2, or a stream that is not a terminal: one line per epoch,
///   "469/469 - 5s - 11ms/step - loss: 0.4012 - val_loss: 0.3900";
/// - evaluate inside fit is silent (its results show in the epoch line); a direct evaluate or
///   predict gets its own bar, finalized by on_test_end / on_predict_end;
/// - unknown steps: a counter "     37/Unknown" until the first epoch ends, after which its
///   length is the target.
/// Log values are shown as given (they are running means already).
class ProgbarLogger : public Callback {
 public:
  /// Throws ingot::Error(kInvalidArgument) for width < 1 or a negative / non-finite interval.
  explicit ProgbarLogger(ProgbarLoggerOptions options = {});

  void set_params(const Params& params) override;
  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_begin(int64_t epoch, const Logs& logs) override;
  void on_epoch_end(int64_t epoch, const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_test_begin(const Logs& logs) override;
  void on_test_end(const Logs& logs) override;
  void on_test_batch_end(int64_t batch, const Logs& logs) override;
  void on_predict_begin(const Logs& logs) override;
  void on_predict_end(const Logs& logs) override;
  void on_predict_batch_end(int64_t batch, const Logs& logs) override;

 private:
  void reset_progbar();
  void maybe_init_progbar();
  void update_progbar(int64_t batch, const Logs& logs);
  void finalize_progbar(const Logs& logs);
  /// FLOPs of one train step when the bar shows the rate (show_gflops, inside fit), else 0.
  double training_flops() const;

  ProgbarLoggerOptions options_;
  std::optional<utils::Progbar> progbar_;
  std::optional<int64_t> target_;
  int64_t seen_ = 0;
  bool called_in_fit_ = false;
};

/// Options of a CallbackList.
struct CallbackListOptions {
  /// Add a History when none is among the callbacks (Keras: fit true, evaluate/predict false).
  bool add_history = true;
  /// Add a ProgbarLogger when none is among the callbacks and params.verbose != 0.
  bool add_progbar = true;
  /// The loop's parameters, given to every callback.
  Params params;
  /// The model, given to every callback (may be null).
  Model* model = nullptr;
  /// Weight access, given to every callback (may be null).
  WeightsAccess* weights = nullptr;
  /// Options of the ProgbarLogger the list adds.
  ProgbarLoggerOptions progbar;
};

/// The callbacks of one loop, called in order (Keras's CallbackList). Owns the TrainingControl
/// its callbacks share. The user's callbacks come first, then the History it adds, then the
/// ProgbarLogger it adds (Keras 3 order). A callback belongs to the list that adopted it last
/// (its model, params and control are that list's).
class CallbackList {
 public:
  /// Adopts `callbacks` (none may be null: ingot::Error(kInvalidArgument) naming the index)
  /// and adds History / ProgbarLogger per `options`. Throws as validate(options.params) does.
  explicit CallbackList(std::vector<std::shared_ptr<Callback>> callbacks = {}, CallbackListOptions options = {});

  /// Adopts one more callback (after the others). Null: ingot::Error(kInvalidArgument).
  void append(std::shared_ptr<Callback> callback);
  const std::vector<std::shared_ptr<Callback>>& callbacks() const { return callbacks_; }

  void set_model(Model* model);
  Model* model() const { return model_; }
  /// Gives `params` to every callback; throws as validate() does (nothing changed then).
  void set_params(const Params& params);
  const Params& params() const { return params_; }
  void set_weights_access(WeightsAccess* weights);
  /// The stop flags shared with every callback.
  TrainingControl& control() const { return *control_; }
  /// The History in the list (added or the user's), or null.
  const std::shared_ptr<History>& history() const { return history_; }
  /// The ProgbarLogger in the list (added or the user's), or null.
  const std::shared_ptr<ProgbarLogger>& progbar() const { return progbar_; }

  // Each hook calls the same hook of every callback in order. A negative `epoch` or `batch`
  // is ingot::Error(kInvalidArgument) before any callback runs.
  void on_train_begin(const Logs& logs);
  void on_train_end(const Logs& logs);
  void on_epoch_begin(int64_t epoch, const Logs& logs);
  /// Also returns the logs as the callbacks extended them (Callback::update_epoch_logs): fit
  /// passes these to on_train_end.
  Logs on_epoch_end(int64_t epoch, const Logs& logs);
  void on_train_batch_begin(int64_t batch, const Logs& logs);
  void on_train_batch_end(int64_t batch, const Logs& logs);
  void on_test_begin(const Logs& logs);
  void on_test_end(const Logs& logs);
  void on_test_batch_begin(int64_t batch, const Logs& logs);
  void on_test_batch_end(int64_t batch, const Logs& logs);
  void on_predict_begin(const Logs& logs);
  void on_predict_end(const Logs& logs);
  void on_predict_batch_begin(int64_t batch, const Logs& logs);
  void on_predict_batch_end(int64_t batch, const Logs& logs);

 private:
  void adopt(Callback& callback);
  void note_builtin(const std::shared_ptr<Callback>& callback);

  std::vector<std::shared_ptr<Callback>> callbacks_;
  std::shared_ptr<TrainingControl> control_ = std::make_shared<TrainingControl>();
  Model* model_ = nullptr;
  WeightsAccess* weights_ = nullptr;
  Params params_;
  std::shared_ptr<History> history_;
  std::shared_ptr<ProgbarLogger> progbar_;
};

/// The hooks of a LambdaCallback; each may be empty (then that hook does nothing).
struct LambdaCallbackOptions {
  std::function<void(const Logs&)> on_train_begin;
  std::function<void(const Logs&)> on_train_end;
  std::function<void(int64_t epoch, const Logs&)> on_epoch_begin;
  std::function<void(int64_t epoch, const Logs&)> on_epoch_end;
  std::function<void(int64_t batch, const Logs&)> on_train_batch_begin;
  std::function<void(int64_t batch, const Logs&)> on_train_batch_end;
  std::function<void(const Logs&)> on_test_begin;
  std::function<void(const Logs&)> on_test_end;
  std::function<void(int64_t batch, const Logs&)> on_test_batch_begin;
  std::function<void(int64_t batch, const Logs&)> on_test_batch_end;
  std::function<void(const Logs&)> on_predict_begin;
  std::function<void(const Logs&)> on_predict_end;
  std::function<void(int64_t batch, const Logs&)> on_predict_batch_begin;
  std::function<void(int64_t batch, const Logs&)> on_predict_batch_end;
};

/// A callback made of functions (Keras's LambdaCallback), e.g.
/// `LambdaCallback({.on_epoch_end = [](int64_t e, const Logs& l) { ... }})`.
class LambdaCallback : public Callback {
 public:
  explicit LambdaCallback(LambdaCallbackOptions hooks) : hooks_(std::move(hooks)) {}

  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_begin(int64_t epoch, const Logs& logs) override;
  void on_epoch_end(int64_t epoch, const Logs& logs) override;
  void on_train_batch_begin(int64_t batch, const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_test_begin(const Logs& logs) override;
  void on_test_end(const Logs& logs) override;
  void on_test_batch_begin(int64_t batch, const Logs& logs) override;
  void on_test_batch_end(int64_t batch, const Logs& logs) override;
  void on_predict_begin(const Logs& logs) override;
  void on_predict_end(const Logs& logs) override;
  void on_predict_batch_begin(int64_t batch, const Logs& logs) override;
  void on_predict_batch_end(int64_t batch, const Logs& logs) override;

 private:
  LambdaCallbackOptions hooks_;
};

/// Options of TerminateOnNaN.
struct TerminateOnNaNOptions {
  /// Where the message goes; nullptr means std::cout.
  std::ostream* stream = nullptr;
};

/// Stops training when a train batch ends with a NaN or infinite "loss" (Keras's
/// TerminateOnNaN): prints "Batch 7: Invalid loss, terminating training" and sets
/// control().stop_training. Logs without "loss" are ignored.
class TerminateOnNaN : public Callback {
 public:
  explicit TerminateOnNaN(TerminateOnNaNOptions options = {}) : options_(options) {}
  void on_train_batch_end(int64_t batch, const Logs& logs) override;

 private:
  TerminateOnNaNOptions options_;
};

/// Whether a monitoring callback (EarlyStopping, ReduceLROnPlateau, ModelCheckpoint) looks for a
/// decrease or an increase of the monitored value.
enum class MonitorMode {
  kAuto,  ///< from the name, see EarlyStoppingOptions::mode
  kMin,   ///< lower is better
  kMax,   ///< higher is better
};

/// The direction of a monitored log and its improvement test, shared by EarlyStopping,
/// ReduceLROnPlateau and ModelCheckpoint (Keras 3's MonitorCallback: monitor_op and
/// _is_improvement).
class MonitorComparison {
 public:
  /// Resolves `mode` for `monitor`: kAuto decides from the name as EarlyStoppingOptions::mode
  /// describes. `min_delta` must be >= 0 (callers take |min_delta| or reject negatives).
  /// Throws ingot::Error(kInvalidArgument) starting with `owner` ("EarlyStopping: ...") when
  /// kAuto cannot tell the direction, asking for kMin or kMax.
  MonitorComparison(const std::string& owner, const std::string& monitor, MonitorMode mode, double min_delta);
  /// Whether lower values are better.
  bool minimizes() const { return minimize_; }
  /// `value` is better than `reference` by more than min_delta: value + min_delta < reference
  /// when minimizing, value - min_delta > reference when maximizing (a NaN never is).
  bool is_improvement(double value, double reference) const;
  /// The best value before any was seen: +inf when minimizing, -inf when maximizing.
  double worst() const;

 private:
  bool minimize_;
  double min_delta_;
};

/// Options of EarlyStopping (Keras's keyword arguments).
struct EarlyStoppingOptions {
  /// The log to watch at each epoch end.
  std::string monitor = "val_loss";
  /// Minimum change that counts as an improvement; its absolute value is used.
  double min_delta = 0.0;
  /// Epochs without improvement after which training stops (>= 0).
  int64_t patience = 0;
  /// 1: print "Epoch 5: early stopping" and the restore message at train end.
  int verbose = 0;
  /// kAuto decides from `monitor` without its "val_" prefix: "loss", names ending in "loss",
  /// "error", "crossentropy", "hinge", "divergence" and the error abbreviations (mse, mae, mape,
  /// msle, rmse, logcosh, poisson, false_positives, false_negatives) are minimized; accuracies
  /// (ending in "accuracy" or "acc"), auc, precision, recall, f1_score, fbeta_score, r2_score,
  /// iou names, cosine_similarity, true_positives, true_negatives are maximized; any other name
  /// is an ingot::Error at construction asking for kMin or kMax.
  MonitorMode mode = MonitorMode::kAuto;
  /// Training stops unless the value gets better than this (wait is only reset by improving on
  /// both the best value and the baseline).
  std::optional<double> baseline;
  /// At train end, set the weights of the best epoch (needs Callback::weights_access()).
  bool restore_best_weights = false;
  /// Epochs to wait before monitoring starts (>= 0).
  int64_t start_from_epoch = 0;
  /// Where verbose messages go; nullptr means std::cout.
  std::ostream* stream = nullptr;
  /// Where the "monitor not available" warning goes; nullptr means std::cerr.
  std::ostream* warnings = nullptr;
};

/// Stops training when the monitored value stops improving (Keras's EarlyStopping).
///
/// At each epoch end (from start_from_epoch on) with the monitored value present: wait += 1;
/// an improvement (better than `best` by more than |min_delta|: value + |min_delta| < best when
/// minimizing, value - |min_delta| > best when maximizing) records best / best_epoch (and the
/// weights) and resets wait to 0 if it is also an improvement on the baseline; otherwise, once
/// wait >= patience and epoch > 0, it sets control().stop_training and stopped_epoch. A missing monitored value only
/// warns (e.g. epochs without validation). Keras's algorithm, step for step.
class EarlyStopping : public Callback {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option for an empty monitor, a negative
  /// patience / start_from_epoch / verbose, a non-finite min_delta or baseline, or a kAuto mode
  /// whose direction cannot be told from the monitor's name.
  explicit EarlyStopping(EarlyStoppingOptions options = {});

  /// Resets wait, best, stopped and best epoch, and the saved weights (instances are reusable).
  /// With restore_best_weights and no weights_access(): ingot::Error(kFailedPrecondition).
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int64_t epoch, const Logs& logs) override;
  /// Prints the verbose messages and restores the best weights when asked to.
  void on_train_end(const Logs& logs) override;

  /// Epochs since the last improvement (as counted above).
  int64_t wait() const { return wait_; }
  /// The epoch training was stopped at (0 when it was not stopped).
  int64_t stopped_epoch() const { return stopped_epoch_; }
  /// The best value seen (+inf for kMin / -inf for kMax before any).
  double best() const { return best_; }
  /// The epoch of the best value (0 before any).
  int64_t best_epoch() const { return best_epoch_; }
  /// Whether lower values are better (the resolved mode).
  bool minimizes() const { return monitor_.minimizes(); }
  const EarlyStoppingOptions& options() const { return options_; }

 private:
  EarlyStoppingOptions options_;
  MonitorComparison monitor_;
  int64_t wait_ = 0;
  int64_t stopped_epoch_ = 0;
  int64_t best_epoch_ = 0;
  double best_;
  std::optional<std::vector<Array>> best_weights_;
};

}  // namespace callbacks
}  // namespace ingot
