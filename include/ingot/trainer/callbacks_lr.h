// Learning-rate callbacks: LearningRateScheduler and ReduceLROnPlateau (keras.callbacks). Both
// read and set the optimizer's live learning rate through WeightsAccess::learning_rate /
// set_learning_rate, which fit provides. Guide: docs/trainer-callbacks.md.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "ingot/trainer/callbacks.h"

namespace ingot::callbacks {

/// Options of LearningRateScheduler (Keras's arguments, by name).
struct LearningRateSchedulerOptions {
  /// schedule(epoch, learning_rate) -> the learning rate of that epoch: `epoch` is 0-based,
  /// `learning_rate` the optimizer's current rate. Required; must return a finite value >= 0.
  std::function<double(int64_t epoch, double learning_rate)> schedule;
  /// 1: print "\nEpoch 3: LearningRateScheduler setting learning rate to 0.05." at each epoch
  /// begin (the rate as Python's repr); 0: quiet.
  int verbose = 0;
  /// Where verbose messages go; nullptr means std::cout.
  std::ostream* stream = nullptr;
};

/// Sets the optimizer's learning rate at every epoch begin to schedule(epoch, current rate)
/// (Keras's LearningRateScheduler) and adds the rate used as "learning_rate" to the epoch's
/// logs (Keras 3 does so at epoch end). The rate is stored in the optimizer state as f32, so
/// the logged value is the f32 rounding of what the schedule returned.
class LearningRateScheduler : public Callback {
 public:
  /// Throws ingot::Error(kInvalidArgument) for an empty schedule or a verbose < 0.
  explicit LearningRateScheduler(LearningRateSchedulerOptions options);

  /// Checks the access to the rate first: no weights_access() or an optimizer built with a
  /// learning-rate schedule (not settable, as Keras raises) is ingot::Error(kFailedPrecondition).
  void on_train_begin(const Logs& logs) override;
  /// Calls the schedule and sets the rate. A non-finite or negative result is
  /// ingot::Error(kInvalidArgument) naming the epoch and the value (the rate is unchanged).
  void on_epoch_begin(int64_t epoch, const Logs& logs) override;
  /// logs["learning_rate"] = the optimizer's current rate.
  void update_epoch_logs(int64_t epoch, Logs& logs) override;

  const LearningRateSchedulerOptions& options() const { return options_; }

 private:
  LearningRateSchedulerOptions options_;
};

/// Options of ReduceLROnPlateau (Keras's keyword arguments and defaults).
struct ReduceLROnPlateauOptions {
  /// The log to watch at each epoch end.
  std::string monitor = "val_loss";
  /// new rate = rate * factor. In [0, 1) (Keras rejects factor >= 1).
  double factor = 0.1;
  /// Epochs without improvement after which the rate is reduced (>= 0).
  int64_t patience = 10;
  /// 1: print "\nEpoch 5: ReduceLROnPlateau reducing learning rate to 0.010000000149011612."
  int verbose = 0;
  /// As EarlyStoppingOptions::mode (Keras's ReduceLROnPlateau decides auto by whether the name
  /// contains "acc"; ingot uses the shared name rules, which agree on Keras's metric names and
  /// reject names they cannot tell).
  MonitorMode mode = MonitorMode::kAuto;
  /// Minimum change that counts as an improvement; finite and >= 0.
  double min_delta = 1e-4;
  /// Epochs after a reduction during which the wait does not count (>= 0).
  int64_t cooldown = 0;
  /// The rate is never reduced below this (finite, >= 0).
  double min_lr = 0.0;
  /// Where verbose messages go; nullptr means std::cout.
  std::ostream* stream = nullptr;
  /// Where the "monitor not available" warning goes; nullptr means std::cerr.
  std::ostream* warnings = nullptr;
};

/// Reduces the learning rate when the monitored value stops improving (Keras's
/// ReduceLROnPlateau), at each epoch end, step for step as Keras:
/// - logs["learning_rate"] = the current rate (before any reduction at this epoch end);
/// - a missing monitored value only warns;
/// - in cooldown: cooldown_counter -= 1 and wait = 0;
/// - an improvement on `best` (MonitorComparison with min_delta) records it and resets wait;
/// - otherwise, when not in cooldown: wait += 1, and once wait >= patience, if the rate is
///   above float32(min_lr): rate = max(rate * factor, min_lr), cooldown_counter = cooldown,
///   wait = 0.
class ReduceLROnPlateau : public Callback {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option for an empty monitor, a factor
  /// outside [0, 1), a negative patience / cooldown / verbose, a negative or non-finite
  /// min_delta or min_lr, or a kAuto mode whose direction the name does not tell.
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});

  /// Resets best, wait and cooldown (Keras's _reset; instances are reusable) and checks that the
  /// rate is readable and settable: ingot::Error(kFailedPrecondition) otherwise (no
  /// weights_access(), or an optimizer built with a learning-rate schedule).
  void on_train_begin(const Logs& logs) override;
  /// logs["learning_rate"] = the current rate.
  void update_epoch_logs(int64_t epoch, Logs& logs) override;
  void on_epoch_end(int64_t epoch, const Logs& logs) override;

  /// Epochs without improvement counted so far.
  int64_t wait() const { return wait_; }
  /// Epochs of cooldown left.
  int64_t cooldown_counter() const { return cooldown_counter_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  /// The best value seen (+inf for kMin / -inf for kMax before any).
  double best() const { return best_; }
  bool minimizes() const { return monitor_.minimizes(); }
  const ReduceLROnPlateauOptions& options() const { return options_; }

 private:
  void reduce(int64_t epoch);

  ReduceLROnPlateauOptions options_;
  MonitorComparison monitor_;
  int64_t wait_ = 0;
  int64_t cooldown_counter_ = 0;
  double best_;
};

}  // namespace ingot::callbacks
