// LearningRateScheduler and ReduceLROnPlateau: Keras 3's keras.callbacks semantics over
// WeightsAccess::learning_rate / set_learning_rate. Guide: docs/trainer-callbacks.md.
#include "ingot/trainer/callbacks_lr.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <utility>

#include "ingot/runtime/error.h"
#include "ingot/trainer/callbacks_logging.h"

namespace ingot::callbacks {
namespace {

/// The trainer's access to the rate; kFailedPrecondition naming `owner` when there is none.
WeightsAccess& rate_access(const Callback& callback, const std::string& owner) {
  if (callback.weights_access() == nullptr) {
    throw Error(ErrorCode::kFailedPrecondition, owner + ": the callback has no access to the optimizer's learning rate",
                "pass it to fit (which provides the access), or give the CallbackList a WeightsAccess");
  }
  return *callback.weights_access();
}

/// Fails unless the rate can be read and set: writing the current value back changes nothing
/// (an f32 read as double converts back exactly) and throws for a learning-rate schedule.
void check_settable(const Callback& callback, const std::string& owner) {
  WeightsAccess& access = rate_access(callback, owner);
  try {
    access.set_learning_rate(access.learning_rate());
  } catch (const Error& e) {
    throw e.with_context(owner);
  }
}

std::ostream& out_or_cout(std::ostream* stream) { return stream != nullptr ? *stream : std::cout; }

Error lr_option_error(const std::string& owner, const std::string& what, const std::string& hint) {
  return Error(ErrorCode::kInvalidArgument, owner + ": " + what, hint);
}

void check_plateau_options(const ReduceLROnPlateauOptions& o) {
  const std::string owner = "ReduceLROnPlateau";
  if (o.monitor.empty())
    throw lr_option_error(owner, "monitor is empty", "pass the log name to watch, e.g. \"val_loss\"");
  if (!(o.factor >= 0.0 && o.factor < 1.0)) {
    throw lr_option_error(owner, "factor = " + python_float(o.factor) + " is not in [0, 1)",
                          "pass the factor the rate is multiplied by, e.g. 0.1 or 0.5");
  }
  if (o.patience < 0) {
    throw lr_option_error(owner, "patience = " + std::to_string(o.patience) + " is negative",
                          "pass the epochs to wait without improvement (>= 0)");
  }
  if (o.cooldown < 0) {
    throw lr_option_error(owner, "cooldown = " + std::to_string(o.cooldown) + " is negative",
                          "pass the epochs to wait after a reduction (>= 0)");
  }
  if (o.verbose < 0)
    throw lr_option_error(owner, "verbose = " + std::to_string(o.verbose) + " is negative", "pass 0 or 1");
  if (!(std::isfinite(o.min_delta) && o.min_delta >= 0.0)) {
    throw lr_option_error(owner, "min_delta = " + python_float(o.min_delta) + " is negative or not finite",
                          "pass the smallest change that counts as an improvement (>= 0)");
  }
  if (!(std::isfinite(o.min_lr) && o.min_lr >= 0.0)) {
    throw lr_option_error(owner, "min_lr = " + python_float(o.min_lr) + " is negative or not finite",
                          "pass the lowest learning rate to reduce to (>= 0)");
  }
}

ReduceLROnPlateauOptions checked(ReduceLROnPlateauOptions o) {
  check_plateau_options(o);
  return o;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LearningRateScheduler

LearningRateScheduler::LearningRateScheduler(LearningRateSchedulerOptions options) : options_(std::move(options)) {
  if (!options_.schedule) {
    throw lr_option_error("LearningRateScheduler", "schedule is empty",
                          "pass a function (epoch, learning_rate) -> learning_rate");
  }
  if (options_.verbose < 0) {
    throw lr_option_error("LearningRateScheduler", "verbose = " + std::to_string(options_.verbose) + " is negative",
                          "pass 0 or 1");
  }
}

void LearningRateScheduler::on_train_begin(const Logs&) { check_settable(*this, "LearningRateScheduler"); }

void LearningRateScheduler::on_epoch_begin(int64_t epoch, const Logs&) {
  WeightsAccess& access = rate_access(*this, "LearningRateScheduler");
  const double rate = options_.schedule(epoch, access.learning_rate());
  if (!(std::isfinite(rate) && rate >= 0.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                "LearningRateScheduler: schedule(" + std::to_string(epoch) + ", ...) returned " + python_float(rate) +
                    ", not a finite learning rate >= 0",
                "make the schedule return a finite, non-negative rate for every epoch");
  }
  access.set_learning_rate(rate);
  if (options_.verbose > 0) {
    out_or_cout(options_.stream) << "\nEpoch " << epoch + 1 << ": LearningRateScheduler setting learning rate to "
                                 << python_float(rate) << ".\n"
                                 << std::flush;
  }
}

void LearningRateScheduler::update_epoch_logs(int64_t, Logs& logs) {
  logs.set("learning_rate", rate_access(*this, "LearningRateScheduler").learning_rate());
}

// ---------------------------------------------------------------------------------------------
// ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options)
    : options_(checked(std::move(options))),
      monitor_("ReduceLROnPlateau", options_.monitor, options_.mode, options_.min_delta),
      best_(monitor_.worst()) {}

void ReduceLROnPlateau::on_train_begin(const Logs&) {
  check_settable(*this, "ReduceLROnPlateau");
  best_ = monitor_.worst();
  wait_ = 0;
  cooldown_counter_ = 0;
}

void ReduceLROnPlateau::update_epoch_logs(int64_t, Logs& logs) {
  logs.set("learning_rate", rate_access(*this, "ReduceLROnPlateau").learning_rate());
}

void ReduceLROnPlateau::on_epoch_end(int64_t epoch, const Logs& logs) {
  const std::optional<double> current = logs.get(options_.monitor);
  if (!current) {
    std::string names;
    for (const auto& [name, value] : logs) names += (names.empty() ? "" : ",") + name;
    std::ostream& warn = options_.warnings != nullptr ? *options_.warnings : std::cerr;
    warn << "Warning: Learning rate reduction is conditioned on metric `" << options_.monitor
         << "` which is not available. Available metrics are: " << names << '\n';
    return;
  }
  if (in_cooldown()) {
    cooldown_counter_ -= 1;
    wait_ = 0;
  }
  if (monitor_.is_improvement(*current, best_)) {
    best_ = *current;
    wait_ = 0;
  } else if (!in_cooldown()) {
    wait_ += 1;
    if (wait_ >= options_.patience) reduce(epoch);
  }
}

void ReduceLROnPlateau::reduce(int64_t epoch) {
  WeightsAccess& access = rate_access(*this, "ReduceLROnPlateau");
  const double old_lr = access.learning_rate();
  // Keras compares with np.float32(min_lr): a rate already at min_lr (stored as f32) stays.
  if (!(old_lr > static_cast<double>(static_cast<float>(options_.min_lr)))) return;
  const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
  access.set_learning_rate(new_lr);
  if (options_.verbose > 0) {
    out_or_cout(options_.stream) << "\nEpoch " << epoch + 1 << ": ReduceLROnPlateau reducing learning rate to "
                                 << python_float(new_lr) << ".\n"
                                 << std::flush;
  }
  cooldown_counter_ = options_.cooldown;
  wait_ = 0;
}

}  // namespace ingot::callbacks
