// Callback, CallbackList, History, LambdaCallback, TerminateOnNaN and EarlyStopping: Keras 3's
// keras.callbacks semantics (behaviour described in docs/trainer-callbacks.md). ProgbarLogger
// lives in progbar.cpp.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <string_view>

#include "ingot/runtime/error.h"
#include "ingot/trainer/callbacks.h"

namespace ingot::callbacks {

std::vector<Array> WeightsAccess::get_optimizer_state() {
  throw Error(ErrorCode::kUnimplemented, "this WeightsAccess gives no access to the optimizer state",
              "use the trainer's (the callback's weights_access() inside fit)");
}

void WeightsAccess::set_optimizer_state(const std::vector<Array>&) {
  throw Error(ErrorCode::kUnimplemented, "this WeightsAccess gives no access to the optimizer state",
              "use the trainer's (the callback's weights_access() inside fit)");
}

namespace {

/// Throws ingot::Error(kInvalidArgument) when a hook gets a negative epoch or batch index.
void check_index(int64_t value, const char* what, const char* hook) {
  if (value < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("CallbackList::") + hook + ": " + what + " = " + std::to_string(value) + " is negative",
                std::string("pass the 0-based ") + what + " index");
  }
}

std::string joined_names(const Logs& logs) {
  std::string out;
  for (const auto& [name, value] : logs) out += (out.empty() ? "" : ",") + name;
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

/// kAuto: whether `monitor` (less a "val_" prefix) is minimized, from the names of Keras's
/// losses and metrics and their directions; nullopt when the name does not say.
std::optional<bool> minimized_by_name(std::string_view monitor) {
  std::string_view name = monitor;
  if (name.starts_with("val_")) name.remove_prefix(4);
  if (ends_with(name, "loss") || ends_with(name, "error") || ends_with(name, "crossentropy") ||
      ends_with(name, "hinge") || ends_with(name, "divergence") ||
      is_one_of(name,
                {"mse", "mae", "mape", "msle", "rmse", "logcosh", "poisson", "false_positives", "false_negatives"})) {
    return true;
  }
  if (ends_with(name, "accuracy") || ends_with(name, "acc") || ends_with(name, "iou") ||
      is_one_of(name, {"auc", "precision", "recall", "f1_score", "fbeta_score", "r2_score", "cosine_similarity",
                       "true_positives", "true_negatives", "precision_at_recall", "recall_at_precision",
                       "sensitivity_at_specificity", "specificity_at_sensitivity"})) {
    return false;
  }
  return std::nullopt;
}

bool resolve_minimize(const std::string& owner, const std::string& monitor, MonitorMode mode) {
  if (mode == MonitorMode::kMin) return true;
  if (mode == MonitorMode::kMax) return false;
  if (auto by_name = minimized_by_name(monitor)) return *by_name;
  throw Error(ErrorCode::kInvalidArgument,
              owner + ": mode = auto cannot tell whether monitor = '" + monitor + "' should be minimized or maximized",
              "pass mode = MonitorMode::kMin (lower is better) or MonitorMode::kMax");
}

void check_early_stopping_options(const EarlyStoppingOptions& o) {
  auto bad = [](const std::string& what, const std::string& hint) {
    throw Error(ErrorCode::kInvalidArgument, "EarlyStopping: " + what, hint);
  };
  if (o.monitor.empty()) bad("monitor is empty", "pass the log name to watch, e.g. \"val_loss\"");
  if (o.patience < 0) {
    bad("patience = " + std::to_string(o.patience) + " is negative",
        "pass the epochs to wait without improvement (>= 0)");
  }
  if (o.start_from_epoch < 0) {
    bad("start_from_epoch = " + std::to_string(o.start_from_epoch) + " is negative",
        "pass the epochs to skip before monitoring (>= 0)");
  }
  if (o.verbose < 0) {
    bad("verbose = " + std::to_string(o.verbose) + " is negative", "pass 0 or 1");
  }
  if (!std::isfinite(o.min_delta)) {
    bad("min_delta = " + std::to_string(o.min_delta) + " is not finite",
        "pass the smallest change that counts as an improvement");
  }
  if (o.baseline && !std::isfinite(*o.baseline)) {
    bad("baseline = " + std::to_string(*o.baseline) + " is not finite", "pass a finite baseline, or leave it unset");
  }
}

/// The weights EarlyStopping saves and restores; ingot::Error(kFailedPrecondition) when the
/// trainer provided none.
WeightsAccess& weights_of(const Callback& callback) {
  if (callback.weights_access() == nullptr) {
    throw Error(ErrorCode::kFailedPrecondition,
                "EarlyStopping: restore_best_weights = true but the callback has no access to "
                "the model's weights",
                "let the trainer provide a WeightsAccess (CallbackList::set_weights_access), "
                "or pass restore_best_weights = false");
  }
  return *callback.weights_access();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// MonitorComparison

MonitorComparison::MonitorComparison(const std::string& owner, const std::string& monitor, MonitorMode mode,
                                     double min_delta)
    : minimize_(resolve_minimize(owner, monitor, mode)), min_delta_(min_delta) {}

bool MonitorComparison::is_improvement(double value, double reference) const {
  return minimize_ ? value + min_delta_ < reference : value - min_delta_ > reference;
}

double MonitorComparison::worst() const {
  return minimize_ ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

// ---------------------------------------------------------------------------------------------
// Params, Callback

void validate(const Params& params) {
  if (params.epochs < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "callback params: epochs = " + std::to_string(params.epochs) + " is negative",
                "pass the number of epochs (>= 0)");
  }
  if (params.steps && *params.steps < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "callback params: steps = " + std::to_string(*params.steps) + " is negative",
                "pass the batches per epoch (>= 0), or nullopt when unknown");
  }
  if (params.verbose < 0 || params.verbose > 2) {
    throw Error(ErrorCode::kInvalidArgument,
                "callback params: verbose = " + std::to_string(params.verbose) + " is not 0, 1 or 2",
                "pass 0 (silent), 1 (progress bar) or 2 (one line per epoch)");
  }
}

double WeightsAccess::learning_rate() {
  throw Error(ErrorCode::kFailedPrecondition, "this WeightsAccess gives no access to a learning rate",
              "use the trainer's (fit provides it to its callbacks)");
}

void WeightsAccess::set_learning_rate(double value) {
  throw Error(
      ErrorCode::kFailedPrecondition,
      "this WeightsAccess gives no access to a learning rate (set_learning_rate(" + std::to_string(value) + "))",
      "use the trainer's (fit provides it to its callbacks)");
}

void Callback::set_params(const Params& params) {
  validate(params);
  params_ = params;
}

TrainingControl& Callback::control() const {
  if (!control_) {
    throw Error(ErrorCode::kFailedPrecondition,
                "callback has no training control (stop flags): it is not in a CallbackList",
                "add the callback to a CallbackList (fit does), or call set_control");
  }
  return *control_;
}

// ---------------------------------------------------------------------------------------------
// History

void History::on_train_begin(const Logs&) {
  history_.clear();
  epochs_.clear();
}

void History::on_epoch_end(int64_t epoch, const Logs& logs) {
  epochs_.push_back(epoch);
  for (const auto& [name, value] : logs) {
    auto it = std::find_if(history_.begin(), history_.end(), [&](const Series& s) { return s.first == name; });
    if (it == history_.end()) {
      history_.emplace_back(name, std::vector<double>{value});
    } else {
      it->second.push_back(value);
    }
  }
}

bool History::contains(const std::string& name) const {
  return std::any_of(history_.begin(), history_.end(), [&](const Series& s) { return s.first == name; });
}

const std::vector<double>& History::values(const std::string& name) const {
  for (const auto& s : history_) {
    if (s.first == name) return s.second;
  }
  std::string recorded;
  for (const auto& s : history_) recorded += (recorded.empty() ? "" : ", ") + s.first;
  throw Error(ErrorCode::kNotFound, "History has no series named '" + name + "'", "recorded names: [" + recorded + "]");
}

// ---------------------------------------------------------------------------------------------
// CallbackList

CallbackList::CallbackList(std::vector<std::shared_ptr<Callback>> callbacks, CallbackListOptions options)
    : callbacks_(std::move(callbacks)), model_(options.model), weights_(options.weights), params_(options.params) {
  validate(params_);
  for (size_t i = 0; i < callbacks_.size(); ++i) {
    if (!callbacks_[i]) {
      throw Error(ErrorCode::kInvalidArgument, "CallbackList: callbacks[" + std::to_string(i) + "] is null",
                  "pass only non-null callbacks");
    }
    note_builtin(callbacks_[i]);
  }
  if (options.add_history && !history_) {
    history_ = std::make_shared<History>();
    callbacks_.push_back(history_);
  }
  if (options.add_progbar && params_.verbose != 0 && !progbar_) {
    progbar_ = std::make_shared<ProgbarLogger>(options.progbar);
    callbacks_.push_back(progbar_);
  }
  for (auto& cb : callbacks_) adopt(*cb);
}

void CallbackList::note_builtin(const std::shared_ptr<Callback>& callback) {
  // As in Keras, the last History / ProgbarLogger among the callbacks is the list's.
  if (auto h = std::dynamic_pointer_cast<History>(callback)) history_ = h;
  if (auto p = std::dynamic_pointer_cast<ProgbarLogger>(callback)) progbar_ = p;
}

void CallbackList::adopt(Callback& callback) {
  callback.set_control(control_);
  callback.set_model(model_);
  callback.set_weights_access(weights_);
  callback.set_params(params_);
}

void CallbackList::append(std::shared_ptr<Callback> callback) {
  if (!callback) {
    throw Error(ErrorCode::kInvalidArgument, "CallbackList::append: callback is null", "pass a non-null callback");
  }
  adopt(*callback);
  note_builtin(callback);
  callbacks_.push_back(std::move(callback));
}

void CallbackList::set_model(Model* model) {
  model_ = model;
  for (auto& cb : callbacks_) cb->set_model(model);
}

void CallbackList::set_params(const Params& params) {
  validate(params);
  params_ = params;
  for (auto& cb : callbacks_) cb->set_params(params);
}

void CallbackList::set_weights_access(WeightsAccess* weights) {
  weights_ = weights;
  for (auto& cb : callbacks_) cb->set_weights_access(weights);
}

void CallbackList::on_train_begin(const Logs& logs) {
  for (auto& cb : callbacks_) cb->on_train_begin(logs);
}
void CallbackList::on_train_end(const Logs& logs) {
  for (auto& cb : callbacks_) cb->on_train_end(logs);
}
void CallbackList::on_epoch_begin(int64_t epoch, const Logs& logs) {
  check_index(epoch, "epoch", "on_epoch_begin");
  for (auto& cb : callbacks_) cb->on_epoch_begin(epoch, logs);
}
Logs CallbackList::on_epoch_end(int64_t epoch, const Logs& logs) {
  check_index(epoch, "epoch", "on_epoch_end");
  Logs shared = logs;  // Keras's one logs dict, extended by the callbacks in order
  for (auto& cb : callbacks_) {
    cb->update_epoch_logs(epoch, shared);
    cb->on_epoch_end(epoch, shared);
  }
  return shared;
}
void CallbackList::on_train_batch_begin(int64_t batch, const Logs& logs) {
  check_index(batch, "batch", "on_train_batch_begin");
  for (auto& cb : callbacks_) cb->on_train_batch_begin(batch, logs);
}
void CallbackList::on_train_batch_end(int64_t batch, const Logs& logs) {
  check_index(batch, "batch", "on_train_batch_end");
  for (auto& cb : callbacks_) cb->on_train_batch_end(batch, logs);
}
void CallbackList::on_test_begin(const Logs& logs) {
  for (auto& cb : callbacks_) cb->on_test_begin(logs);
}
void CallbackList::on_test_end(const Logs& logs) {
  for (auto& cb : callbacks_) cb->on_test_end(logs);
}
void CallbackList::on_test_batch_begin(int64_t batch, const Logs& logs) {
  check_index(batch, "batch", "on_test_batch_begin");
  for (auto& cb : callbacks_) cb->on_test_batch_begin(batch, logs);
}
void CallbackList::on_test_batch_end(int64_t batch, const Logs& logs) {
  check_index(batch, "batch", "on_test_batch_end");
  for (auto& cb : callbacks_) cb->on_test_batch_end(batch, logs);
}
void CallbackList::on_predict_begin(const Logs& logs) {
  for (auto& cb : callbacks_) cb->on_predict_begin(logs);
}
void CallbackList::on_predict_end(const Logs& logs) {
  for (auto& cb : callbacks_) cb->on_predict_end(logs);
}
void CallbackList::on_predict_batch_begin(int64_t batch, const Logs& logs) {
  check_index(batch, "batch", "on_predict_batch_begin");
  for (auto& cb : callbacks_) cb->on_predict_batch_begin(batch, logs);
}
void CallbackList::on_predict_batch_end(int64_t batch, const Logs& logs) {
  check_index(batch, "batch", "on_predict_batch_end");
  for (auto& cb : callbacks_) cb->on_predict_batch_end(batch, logs);
}

// ---------------------------------------------------------------------------------------------
// LambdaCallback

void LambdaCallback::on_train_begin(const Logs& l) {
  if (hooks_.on_train_begin) hooks_.on_train_begin(l);
}
void LambdaCallback::on_train_end(const Logs& l) {
  if (hooks_.on_train_end) hooks_.on_train_end(l);
}
void LambdaCallback::on_epoch_begin(int64_t e, const Logs& l) {
  if (hooks_.on_epoch_begin) hooks_.on_epoch_begin(e, l);
}
void LambdaCallback::on_epoch_end(int64_t e, const Logs& l) {
  if (hooks_.on_epoch_end) hooks_.on_epoch_end(e, l);
}
void LambdaCallback::on_train_batch_begin(int64_t b, const Logs& l) {
  if (hooks_.on_train_batch_begin) hooks_.on_train_batch_begin(b, l);
}
void LambdaCallback::on_train_batch_end(int64_t b, const Logs& l) {
  if (hooks_.on_train_batch_end) hooks_.on_train_batch_end(b, l);
}
void LambdaCallback::on_test_begin(const Logs& l) {
  if (hooks_.on_test_begin) hooks_.on_test_begin(l);
}
void LambdaCallback::on_test_end(const Logs& l) {
  if (hooks_.on_test_end) hooks_.on_test_end(l);
}
void LambdaCallback::on_test_batch_begin(int64_t b, const Logs& l) {
  if (hooks_.on_test_batch_begin) hooks_.on_test_batch_begin(b, l);
}
void LambdaCallback::on_test_batch_end(int64_t b, const Logs& l) {
  if (hooks_.on_test_batch_end) hooks_.on_test_batch_end(b, l);
}
void LambdaCallback::on_predict_begin(const Logs& l) {
  if (hooks_.on_predict_begin) hooks_.on_predict_begin(l);
}
void LambdaCallback::on_predict_end(const Logs& l) {
  if (hooks_.on_predict_end) hooks_.on_predict_end(l);
}
void LambdaCallback::on_predict_batch_begin(int64_t b, const Logs& l) {
  if (hooks_.on_predict_batch_begin) hooks_.on_predict_batch_begin(b, l);
}
void LambdaCallback::on_predict_batch_end(int64_t b, const Logs& l) {
  if (hooks_.on_predict_batch_end) hooks_.on_predict_batch_end(b, l);
}

// ---------------------------------------------------------------------------------------------
// TerminateOnNaN

void TerminateOnNaN::on_train_batch_end(int64_t batch, const Logs& logs) {
  const auto loss = logs.get("loss");
  if (!loss || std::isfinite(*loss)) return;
  std::ostream& out = options_.stream != nullptr ? *options_.stream : std::cout;
  out << "Batch " << batch << ": Invalid loss, terminating training\n" << std::flush;
  control().stop_training = true;
}

// ---------------------------------------------------------------------------------------------
// EarlyStopping

namespace {

/// The options with |min_delta|, checked first (so a bad option is reported before the mode).
EarlyStoppingOptions checked(EarlyStoppingOptions o) {
  check_early_stopping_options(o);
  o.min_delta = std::fabs(o.min_delta);
  return o;
}

}  // namespace

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : options_(checked(std::move(options))),
      monitor_("EarlyStopping", options_.monitor, options_.mode, options_.min_delta),
      best_(monitor_.worst()) {}

void EarlyStopping::on_train_begin(const Logs&) {
  if (options_.restore_best_weights) weights_of(*this);  // fail before training, not after
  wait_ = 0;
  stopped_epoch_ = 0;
  best_epoch_ = 0;
  best_ = monitor_.worst();
  best_weights_.reset();
}

void EarlyStopping::on_epoch_end(int64_t epoch, const Logs& logs) {
  const auto current = logs.get(options_.monitor);
  if (!current) {
    std::ostream& warn = options_.warnings != nullptr ? *options_.warnings : std::cerr;
    warn << "Warning: early stopping conditioned on metric `" << options_.monitor
         << "` which is not available. Available metrics are: " << joined_names(logs) << '\n';
    return;
  }
  if (epoch < options_.start_from_epoch) return;
  if (options_.restore_best_weights && !best_weights_) {
    // Until something better is seen, the first monitored epoch's weights are the best.
    best_weights_ = weights_of(*this).get_weights();
    best_epoch_ = epoch;
  }
  wait_ += 1;
  if (monitor_.is_improvement(*current, best_)) {
    best_ = *current;
    best_epoch_ = epoch;
    if (options_.restore_best_weights) best_weights_ = weights_of(*this).get_weights();
    // Only an improvement on both the best value and the baseline restarts the wait.
    if (!options_.baseline || monitor_.is_improvement(*current, *options_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= options_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    control().stop_training = true;
  }
}

void EarlyStopping::on_train_end(const Logs&) {
  std::ostream& out = options_.stream != nullptr ? *options_.stream : std::cout;
  if (stopped_epoch_ > 0 && options_.verbose > 0) {
    out << "Epoch " << stopped_epoch_ + 1 << ": early stopping\n" << std::flush;
  }
  if (options_.restore_best_weights && best_weights_) {
    if (options_.verbose > 0) {
      out << "Restoring model weights from the end of the best epoch: " << best_epoch_ + 1 << ".\n" << std::flush;
    }
    weights_of(*this).set_weights(*best_weights_);
  }
}

}  // namespace ingot::callbacks
