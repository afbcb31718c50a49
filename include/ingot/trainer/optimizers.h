// Optimizers as pure, traced updates (Keras 3's keras.optimizers, stateless form).
//
// An optimizer owns no state. build() returns the initial optimizer variables for a list of
// trainable-variable types; apply() maps (optimizer variables, variables, gradients) to (new
// variables, new optimizer variables) as Tensors of the current trace, so the same update runs in
// the reference interpreter (run_eagerly) and compiled with jit (the trainer donates the state).
// This is Keras's `optimizer.stateless_apply(optimizer_variables, grads, trainable_variables)`
// with its argument order changed to (optimizer variables, variables, gradients).
//
// Algorithms and their order of operations follow Keras 3 exactly (keras/src/optimizers/
// base_optimizer.py, sgd.py, adam.py, schedules/learning_rate_schedule.py and the JAX
// back end's keras/src/backend/jax/optimizer.py); one apply() is, in order:
//   1. gradients divided by `loss_scale_factor` (when set);
//   2. gradient clipping: `clipnorm` (per gradient), `global_clipnorm` (all together) or
//      `clipvalue` (elementwise), at most one of them;
//   3. decoupled weight decay: variable -= variable * weight_decay * learning_rate;
//   4. the optimizer's update_step per variable (SGD, Adam, ...);
//   5. the exponential moving average of the variables (`use_ema`) and its periodic overwrite;
//   6. iterations += 1.
// The learning rate of a step is the one at the iteration count *before* the increment.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/array.h"
#include "ingot/trace/tensor.h"

namespace ingot::optimizers {

/// A learning-rate schedule, Keras's `LearningRateSchedule.__call__(step)`: maps the optimizer's
/// iteration count (an i64 scalar Tensor: the number of applies done before this one) to the
/// learning rate of this step (a floating-point scalar Tensor). It runs inside the trace of
/// apply(), so it must be built from ingot's Tensor ops (ingot/trace/ops.h).
using ScheduleFn = std::function<Tensor(const Tensor& iterations)>;

/// The `learning_rate` argument of an optimizer: a constant (a double, Keras's float) or a
/// schedule (any callable Tensor -> Tensor, e.g. schedules::ExponentialDecay). Both convert
/// implicitly, so options read `.learning_rate = 0.1` or `.learning_rate = ExponentialDecay(...)`.
///
/// A constant rate lives in the optimizer variables (Keras's `learning_rate` variable, f32), so a
/// callback can change it between steps without retracing (Optimizer::with_learning_rate); a
/// scheduled rate is computed inside the step from the iteration count and cannot be set.
class LearningRate {
 public:
  /// A constant learning rate (must be finite and >= 0; checked by the optimizer).
  LearningRate(double value) : value_(value) {}  // NOLINT(google-explicit-constructor)
  /// A schedule: any callable taking the iteration count Tensor and returning the rate Tensor.
  template <class F>
    requires(!std::is_arithmetic_v<std::remove_cvref_t<F>> &&
             std::is_invocable_r_v<Tensor, const std::remove_cvref_t<F>&, const Tensor&>)
  LearningRate(F&& schedule)  // NOLINT(google-explicit-constructor)
      : schedule_(std::forward<F>(schedule)), is_schedule_(true) {}

  /// True when built from a callable (even an empty std::function, which optimizers reject).
  bool is_schedule() const { return is_schedule_; }
  /// The constant rate. Throws ingot::Error(kFailedPrecondition) for a schedule.
  double value() const;
  /// The schedule. Throws ingot::Error(kFailedPrecondition) for a constant rate.
  const ScheduleFn& schedule() const;

 private:
  double value_ = 0.0;
  ScheduleFn schedule_;
  bool is_schedule_ = false;
};

namespace schedules {

/// Options of ExponentialDecay (Keras's positional arguments, by name).
struct ExponentialDecayOptions {
  /// The rate at iteration 0. Finite and >= 0.
  double initial_learning_rate = 0.0;
  /// Iterations per factor of `decay_rate`. Must be > 0.
  int64_t decay_steps = 0;
  /// Factor per `decay_steps` iterations. Finite and >= 0.
  double decay_rate = 0.0;
  /// Decay in whole steps: the exponent is floor(step / decay_steps).
  bool staircase = false;
};

/// keras.optimizers.schedules.ExponentialDecay:
///   rate(step) = initial_learning_rate * decay_rate ^ (step / decay_steps)
/// with the exponent floored when `staircase`. Computed in f32 as Keras does (the schedule's
/// dtype is that of initial_learning_rate, a Python float converted to float32): step and
/// decay_steps are converted to f32, divided, optionally floored, then `power` is applied.
class ExponentialDecay {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option and its value for decay_steps <= 0,
  /// or a negative or non-finite initial_learning_rate or decay_rate.
  explicit ExponentialDecay(ExponentialDecayOptions options);
  /// The rate at `step` (an integer or floating-point scalar Tensor): an f32 scalar Tensor.
  /// Throws ingot::Error(kShapeMismatch) for a non-scalar step.
  Tensor operator()(const Tensor& step) const;
  const ExponentialDecayOptions& options() const { return options_; }

 private:
  ExponentialDecayOptions options_;
};

/// Options of CosineDecay (Keras's arguments, by name).
struct CosineDecayOptions {
  /// The rate at iteration 0 (the start of the warmup when there is one). Finite and >= 0.
  double initial_learning_rate = 0.0;
  /// Iterations of the cosine decay (after the warmup). Must be > 0.
  int64_t decay_steps = 0;
  /// The floor, as a fraction of the decayed-from rate: the rate ends at alpha * that rate.
  /// In [0, 1].
  double alpha = 0.0;
  /// With a warmup: the rate reached linearly from initial_learning_rate after warmup_steps
  /// iterations, and decayed from afterwards. Finite and >= 0. Without: decay from
  /// initial_learning_rate.
  std::optional<double> warmup_target;
  /// Iterations of the linear warmup (used only with warmup_target). >= 0.
  int64_t warmup_steps = 0;
};

/// keras.optimizers.schedules.CosineDecay (SGDR without restarts, Loshchilov & Hutter 2017,
/// arXiv:1608.03983), in f32 as Keras computes it. Without warmup_target:
///   rate(step) = initial_learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) +
///   alpha)
/// With warmup_target: for step < warmup_steps the rate rises linearly
///   initial_learning_rate + (warmup_target - initial_learning_rate) * step / warmup_steps,
/// then decays as above from warmup_target over min(step, warmup_steps + decay_steps) - warmup_steps.
class CosineDecay {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option and its value for decay_steps <= 0,
  /// warmup_steps < 0, alpha outside [0, 1], or a negative or non-finite rate.
  explicit CosineDecay(CosineDecayOptions options);
  /// The rate at `step` (an integer or floating-point scalar Tensor): an f32 scalar Tensor.
  /// Throws ingot::Error(kShapeMismatch) for a non-scalar step.
  Tensor operator()(const Tensor& step) const;
  const CosineDecayOptions& options() const { return options_; }

 private:
  CosineDecayOptions options_;
};

/// Options of PiecewiseConstantDecay (Keras's positional arguments, by name).
struct PiecewiseConstantDecayOptions {
  /// Iteration counts where the rate changes, strictly increasing; at least one.
  std::vector<int64_t> boundaries;
  /// The rates: one more than `boundaries`; each finite and >= 0.
  std::vector<double> values;
};

/// keras.optimizers.schedules.PiecewiseConstantDecay: the rate is
///   values[0]       for step <= boundaries[0],
///   values[i]       for boundaries[i-1] < step <= boundaries[i],
///   values.back()   for step > boundaries.back(),
/// an f32 scalar (Keras converts the Python float values to float32). The boundaries are
/// compared in the step's dtype, as Keras casts them to it.
class PiecewiseConstantDecay {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option and its value for no boundaries,
  /// values.size() != boundaries.size() + 1 (Keras's ValueError), boundaries that do not
  /// strictly increase, or a negative or non-finite value.
  explicit PiecewiseConstantDecay(PiecewiseConstantDecayOptions options);
  /// The rate at `step` (an integer or floating-point scalar Tensor): an f32 scalar Tensor.
  /// Throws ingot::Error(kShapeMismatch) for a non-scalar step.
  Tensor operator()(const Tensor& step) const;
  const PiecewiseConstantDecayOptions& options() const { return options_; }

 private:
  PiecewiseConstantDecayOptions options_;
};

}  // namespace schedules

/// The arguments of Keras's base optimizer that every optimizer shares. Concrete optimizers take a
/// flat options struct (SGDOptions, AdamOptions) that carries these same fields.
struct OptimizerConfig {
  LearningRate learning_rate = 0.001;
  /// Decoupled weight decay factor (>= 0); unset: none.
  std::optional<double> weight_decay;
  /// Clip each gradient to this L2 norm (> 0); unset: no clipping.
  std::optional<double> clipnorm;
  /// Clip each gradient element to [-clipvalue, clipvalue] (> 0); unset: no clipping.
  std::optional<double> clipvalue;
  /// Scale all gradients together so that their global L2 norm is at most this (> 0).
  std::optional<double> global_clipnorm;
  /// Keep an exponential moving average of the variables in the optimizer variables.
  bool use_ema = false;
  /// EMA factor in [0, 1]: average = m * average + (1 - m) * variable (m = 0 on the first step).
  double ema_momentum = 0.99;
  /// Overwrite the variables with their average every this many iterations (>= 1); unset: only
  /// finalize_variable_values() does (the trainer calls it at the end of fit).
  std::optional<int64_t> ema_overwrite_frequency;
  /// Loss scale (> 0): scale_loss() multiplies the loss by it, apply() divides the gradients.
  std::optional<double> loss_scale_factor;
  /// Keras's gradient_accumulation_steps (>= 2; unset: none): apply() adds each step's gradients
  /// to accumulators and updates the variables every this many steps with the accumulated mean
  /// (clipping, weight decay and the update step see the mean); steps in between change only the
  /// accumulators and the step count. The learning-rate schedule and the update steps (Adam's bias
  /// correction) count optimizer updates: iterations / gradient_accumulation_steps, as Keras's
  /// `optimizer.iterations` does then.
  std::optional<int64_t> gradient_accumulation_steps;
  /// The optimizer's name (Keras's `name`).
  std::string name;
};

/// How the gradients apply() gets lie over the devices of a traced per-device step (a
/// distribution; docs/distributed.md): which are one device's block of a variable split over the
/// devices (FSDP), and how to sum a per-device value over the devices. Whatever needs the whole
/// gradient -- clipnorm's and global_clipnorm's norms, LossScaleOptimizer's finiteness check -- then
/// sums the blocks' parts over the devices, so every device takes the same decision as one device
/// would. Default: every gradient whole (one device, or replicated).
struct GradientLayout {
  /// Per gradient (apply()'s order): true for one device's block. Empty: none.
  std::vector<bool> split;
  /// Per split gradient: how many devices hold each of its blocks (on a mesh of several axes, the
  /// devices along the axes it is not split over hold copies); a block's share of a sum over the
  /// devices is divided by it. Empty or missing entries: 1.
  std::vector<int64_t> copies;
  /// The sum over every device of the mesh of a per-device tensor (the trainer passes an
  /// all_reduce sum over each mesh axis); needed when any gradient is split.
  std::function<Tensor(const Tensor&)> sum_over_devices;
  /// Per gradient: the name scope (ingot::NameScope, '/'-separated) its variable's update is
  /// recorded under, inside one named after the optimizer. The trainer passes the path of the
  /// layer owning the variable, so the updates of a model's repeated blocks are alike scopes that
  /// compile once (lower::LoweringOptions::share_repeated_scopes). Empty or missing entries:
  /// "variable_<i>" (the updates of same-shaped variables are alike).
  std::vector<std::string> scopes;
  /// Whether gradient i is split.
  bool is_split(size_t i) const { return i < split.size() && split[i]; }
  /// copies[i], or 1.
  int64_t copies_of(size_t i) const { return i < copies.size() ? copies[i] : 1; }
  /// scopes[i], or "variable_<i>" when that is missing or empty.
  std::string scope_of(size_t i) const;
  /// Throws ingot::Error(kInvalidArgument) naming `owner` when a gradient is split but
  /// sum_over_devices is not set.
  void check(const std::string& owner) const;
};

/// What one optimizer variable is (Optimizer::variable_info): Keras makes each with
/// `add_variable` (a global one: iterations, the learning rate, a loss scale) or
/// `add_variable_from_reference(variable, name)` (a slot, average or accumulator made from a
/// trainable variable, whose shape, dtype and layout it takes).
struct OptimizerVariableInfo {
  /// What it holds: "iterations", "learning_rate", "average" (use_ema), a slot name
  /// ("momentum", "velocity", ...), "accumulator" (gradient accumulation), or an optimizer's own.
  std::string name;
  /// Index of the trainable variable it was made from (apply()'s `variables` order): it has that
  /// variable's shape and, under a distribution, that variable's sharding (a slot of a variable
  /// split over the devices (FSDP) is split like it). Unset: a global variable, replicated.
  std::optional<int64_t> reference;
};

/// Base class of the optimizers: Keras's BaseOptimizer with explicit state.
///
/// Optimizer variables, in order (Keras's `optimizer.variables`):
///   [0]                       iterations: i64 scalar, starts at 0;
///   [1]                       learning_rate: f32 scalar, only for a constant learning rate;
///   next n (use_ema only)     the moving averages, one per trainable variable (its type);
///   then the slots            slot kind-major: all variables' first slot (e.g. Adam's
///                             momentum), then all variables' second slot (velocity), ...;
///                             each of its variable's shape and dtype, starting at
///                             slot_initial_value(kind) (zero except Adagrad's accumulator);
///   last n (gradient_accumulation_steps only) the gradient accumulators (zero).
/// iterations counts apply() calls (micro-steps when accumulating).
/// for n trainable variables. Optimizers are immutable and may be shared between threads.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  /// Keras's optimizer name ("SGD", "adam", or the `name` option).
  virtual std::string name() const { return config_.name; }
  /// The class name ("SGD", "Adam", "AdamW", "LossScaleOptimizer", ...; Keras's
  /// `optimizer.__class__.__name__`), whatever `name` says.
  const std::string& class_name() const { return class_name_; }

  /// Initial optimizer variables for trainable variables of types `variables` (layout above):
  /// iterations 0, the learning rate, and zeros for averages and slots.
  /// Throws ingot::Error(kDTypeMismatch) naming the index for a non-floating-point variable.
  virtual std::vector<Array> build(const std::vector<ir::TensorType>& variables) const;

  /// One update step (steps 1-6 in the file comment). Pure: all arguments are Tensors of the
  /// current trace and the results are new Tensors: (new variables, new optimizer variables),
  /// of the same types as the inputs. `gradients[i]` must have the shape of `variables[i]`
  /// (its dtype is converted to the variable's, as Keras casts); an invalid (default-constructed)
  /// gradient means "no gradient": that variable and its slots are left unchanged and excluded
  /// from clipping and weight decay, as Keras filters None gradients. With no variables at all
  /// nothing changes, not even iterations (Keras returns early).
  ///
  /// Throws ingot::Error: kInvalidArgument for mismatched list lengths, an invalid variable or
  /// optimizer variable, or only missing gradients; kShapeMismatch for a gradient's shape;
  /// kShapeMismatch / kDTypeMismatch naming the index and both types for an optimizer variable
  /// that does not match build(types of `variables`); kDTypeMismatch for a non-float variable or
  /// gradient, or a schedule returning a non-float or non-scalar rate (kShapeMismatch).
  /// `layout`: which gradients are per-device blocks of split variables (GradientLayout); a split
  /// gradient without layout.sum_over_devices is kInvalidArgument.
  virtual std::pair<std::vector<Tensor>, std::vector<Tensor>> apply(const std::vector<Tensor>& optimizer_variables,
                                                                    const std::vector<Tensor>& variables,
                                                                    const std::vector<Tensor>& gradients,
                                                                    const GradientLayout& layout = {}) const;

  /// The loss as differentiated: loss * loss_scale_factor, or `loss` unchanged when unset.
  Tensor scale_loss(const Tensor& loss) const;
  /// The same, given this optimizer's variables (traced, build() layout): what the trainer calls,
  /// so that an optimizer whose scale is state (LossScaleOptimizer's dynamic scale) can read it.
  /// Default: scale_loss(loss).
  virtual Tensor scale_loss(const Tensor& loss, const std::vector<Tensor>& optimizer_variables) const;

  const OptimizerConfig& config() const { return config_; }
  const LearningRate& learning_rate() const { return config_.learning_rate; }

  // ---- host-side access to the optimizer variables (for the trainer and callbacks) ---------

  /// Number of optimizer variables for `num_variables` trainable variables.
  virtual int64_t num_optimizer_variables(int64_t num_variables) const;
  /// One entry per optimizer variable for `num_variables` trainable variables, in build()'s
  /// order: what it is and which trainable variable it was made from. The trainer lays out each
  /// optimizer variable from it (never from shapes or positions), so an optimizer that overrides
  /// build() must override this too; a size other than build()'s, or a referenced variable of
  /// another shape than its reference, is refused before the first step (kInvalidArgument).
  virtual std::vector<OptimizerVariableInfo> variable_info(int64_t num_variables) const;
  /// Index of the learning-rate variable (1), or nullopt for a schedule.
  std::optional<int64_t> learning_rate_index() const;
  /// The iteration count held by `optimizer_variables` (its first entry).
  /// Throws ingot::Error(kInvalidArgument) if it is missing or not an i64 scalar.
  static int64_t iterations(const std::vector<Array>& optimizer_variables);
  /// The learning rate the next apply() uses: the learning-rate variable, or the schedule
  /// evaluated (by the interpreter) at the stored iteration count. Errors as iterations().
  double current_learning_rate(const std::vector<Array>& optimizer_variables) const;
  /// A copy of `optimizer_variables` whose learning-rate variable is a new f32 scalar `value`
  /// (the other arrays are shared; the old learning-rate array is not written, so it may be a
  /// donated or in-flight buffer). Keras's `optimizer.learning_rate = value`.
  /// Throws ingot::Error(kFailedPrecondition) for a schedule (not settable, as in Keras),
  /// kInvalidArgument for a negative or non-finite value or a state without the variable.
  std::vector<Array> with_learning_rate(const std::vector<Array>& optimizer_variables, double value) const;
  /// Keras's finalize_variable_values: with `use_ema`, the moving averages held by
  /// `optimizer_variables` (which replace the trainable variables at the end of fit); otherwise
  /// `variables` unchanged. Throws ingot::Error(kInvalidArgument) for a state of the wrong size.
  virtual std::vector<Array> finalize_variable_values(const std::vector<Array>& optimizer_variables,
                                                      const std::vector<Array>& variables) const;

 protected:
  /// Validates the shared options (ingot::Error(kInvalidArgument) naming the option and value):
  /// learning rate negative or non-finite, or an empty schedule; weight_decay < 0;
  /// clipnorm / clipvalue / global_clipnorm <= 0 or more than one set; ema_momentum outside
  /// [0, 1] or ema_overwrite_frequency < 1 (both checked only with use_ema, as Keras);
  /// loss_scale_factor <= 0; any non-finite value. `class_name` ("SGD", "Adam") prefixes
  /// error messages; an empty config.name becomes `default_name`.
  Optimizer(std::string class_name, std::string default_name, OptimizerConfig config);

  /// Names of the per-variable slots (e.g. {"momentum", "velocity"}), in layout order.
  virtual std::vector<std::string> slot_names() const = 0;

  /// The value every element of slot kind `slot` (an index into slot_names()) starts at in
  /// build(): 0 unless overridden (Keras's add_optimizer_variables initializer, "zeros" by
  /// default; Adagrad's accumulator starts at initial_accumulator_value).
  virtual double slot_initial_value(size_t /*slot*/) const { return 0.0; }

  /// Keras's update_step for one variable: `gradient` (clipped, of the variable's dtype),
  /// `variable` (after weight decay), this variable's slots (one per slot_names() entry),
  /// `learning_rate` (scalar of the variable's dtype) and `iterations` (i64 scalar, before the
  /// increment). Returns the new variable and the new slots.
  virtual std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& gradient, const Tensor& variable,
                                                             const std::vector<Tensor>& slots,
                                                             const Tensor& learning_rate,
                                                             const Tensor& iterations) const = 0;

 private:
  /// Types of the optimizer variables for trainable variables of `variables` types.
  std::vector<ir::TensorType> variable_types(const std::vector<ir::TensorType>& variables) const;
  /// Offset of the first average (use_ema) or slot in the optimizer variables.
  int64_t header_size() const;

  std::string class_name_;
  OptimizerConfig config_;
};

/// Options of SGD (keras.optimizers.SGD's arguments, Keras's order and defaults).
struct SGDOptions {
  LearningRate learning_rate = 0.01;
  /// In [0, 1]; 0 is plain gradient descent (and SGD keeps no momentum slots).
  double momentum = 0.0;
  bool nesterov = false;
  std::optional<double> weight_decay;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::optional<int64_t> ema_overwrite_frequency;
  std::optional<double> loss_scale_factor;
  std::optional<int64_t> gradient_accumulation_steps;  ///< OptimizerConfig::gradient_accumulation_steps
  std::string name = "SGD";
};

/// keras.optimizers.SGD. With momentum 0: w -= lr * g. Otherwise one slot "momentum" per
/// variable and
///   m = m * momentum - g * lr;   w += m                         (nesterov = false)
///   m = m * momentum - g * lr;   w += m * momentum - g * lr     (nesterov = true)
/// (momentum and lr converted to the variable's dtype).
class SGD : public Optimizer {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option and value for momentum outside
  /// [0, 1] and for the shared options (see Optimizer's constructor).
  explicit SGD(SGDOptions options = {});
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<std::string> slot_names() const override;
  std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& gradient, const Tensor& variable,
                                                     const std::vector<Tensor>& slots, const Tensor& learning_rate,
                                                     const Tensor& iterations) const override;

 private:
  SGDOptions options_;
};

/// Options of Adam (keras.optimizers.Adam's arguments, Keras's order and defaults).
struct AdamOptions {
  LearningRate learning_rate = 0.001;
  /// Decay of the first-moment estimate, in [0, 1).
  double beta_1 = 0.9;
  /// Decay of the second-moment estimate, in [0, 1).
  double beta_2 = 0.999;
  /// Added to sqrt(v) ("epsilon hat" of Kingma & Ba); > 0.
  double epsilon = 1e-7;
  /// AMSGrad (Reddi et al., "On the Convergence of Adam and Beyond", 2018): divide by the running
  /// maximum of v (one more slot, "velocity_hat").
  bool amsgrad = false;
  std::optional<double> weight_decay;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::optional<int64_t> ema_overwrite_frequency;
  std::optional<double> loss_scale_factor;
  std::optional<int64_t> gradient_accumulation_steps;  ///< OptimizerConfig::gradient_accumulation_steps
  std::string name = "adam";
};

/// keras.optimizers.Adam (Kingma & Ba, "Adam: A Method for Stochastic Optimization", 2014), in
/// Keras's form. Slots "momentum" (m) and "velocity" (v) per variable, then "velocity_hat" with
/// amsgrad. With t = iterations + 1 (converted to the variable's dtype):
///   alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
///   m += (g - m) * (1 - beta_1);   v += (g^2 - v) * (1 - beta_2)
///   v_hat = max(v_hat, v) and v := v_hat                         (amsgrad only)
///   w -= m * alpha / (sqrt(v) + epsilon)
/// beta_1^t and beta_2^t are computed in the variable's dtype; 1 - beta_i in double, then
/// converted (Keras's Python floats are weakly typed).
class Adam : public Optimizer {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option and value for beta_1 or beta_2
  /// outside [0, 1), epsilon <= 0 (or non-finite), and for the shared options.
  explicit Adam(AdamOptions options = {});
  const AdamOptions& options() const { return options_; }

 protected:
  /// For subclasses (AdamW): `class_name` prefixes error messages.
  Adam(std::string class_name, AdamOptions options);
  std::vector<std::string> slot_names() const override;
  std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& gradient, const Tensor& variable,
                                                     const std::vector<Tensor>& slots, const Tensor& learning_rate,
                                                     const Tensor& iterations) const override;

 private:
  AdamOptions options_;
};

/// Options of AdamW (keras.optimizers.AdamW's arguments, Keras's order and defaults): Adam's,
/// with a weight decay that is always set.
struct AdamWOptions {
  LearningRate learning_rate = 0.001;
  /// Decoupled weight decay factor (Loshchilov & Hutter), >= 0: w -= w * weight_decay * lr
  /// before the Adam step.
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::optional<int64_t> ema_overwrite_frequency;
  std::optional<double> loss_scale_factor;
  std::optional<int64_t> gradient_accumulation_steps;  ///< OptimizerConfig::gradient_accumulation_steps
  std::string name = "adamw";
};

/// keras.optimizers.AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019,
/// arXiv:1711.05101): Adam with the base optimizer's decoupled weight decay, which Keras's AdamW
/// requires to be set (default 0.004). The update is exactly Adam's with
/// `.weight_decay = weight_decay`; the same slots and layout.
class AdamW : public Adam {
 public:
  /// Throws ingot::Error(kInvalidArgument) as Adam does, prefixed "AdamW" (weight_decay < 0 or
  /// non-finite included).
  explicit AdamW(AdamWOptions options = {});
  const AdamWOptions& options() const { return options_; }

 private:
  AdamWOptions options_;
};

/// Options of RMSprop (keras.optimizers.RMSprop's arguments, Keras's order and defaults).
struct RMSpropOptions {
  LearningRate learning_rate = 0.001;
  /// Discount of the running average of squared gradients, in [0, 1].
  double rho = 0.9;
  /// Plain (heavy-ball) momentum on the increments, in [0, 1]; 0 keeps no momentum slots.
  double momentum = 0.0;
  /// Added to the mean square under the square root; finite and > 0.
  double epsilon = 1e-7;
  /// Divide by the estimated variance (mean square minus squared mean gradient) instead of the
  /// mean square (Graves 2013, arXiv:1308.0850); keeps an "average_gradient" slot.
  bool centered = false;
  std::optional<double> weight_decay;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::optional<int64_t> ema_overwrite_frequency;
  std::optional<double> loss_scale_factor;
  std::optional<int64_t> gradient_accumulation_steps;  ///< OptimizerConfig::gradient_accumulation_steps
  std::string name = "rmsprop";
};

/// keras.optimizers.RMSprop (Hinton, Coursera lecture 6e, 2012), in Keras 3's form. Slots, in
/// layout order: "velocity" (v), then "momentum" (m, only with momentum > 0), then
/// "average_gradient" (a, only when centered). Per variable:
///   v = rho * v + (1 - rho) * g^2
///   a = rho * a + (1 - rho) * g;  denominator = v - a^2 + epsilon     (centered)
///                                 denominator = v + epsilon           (otherwise)
///   increment = lr * g / sqrt(denominator)
///   m = momentum * m + increment;  w -= m                             (momentum > 0)
///   w -= increment                                                    (otherwise)
/// (rho and epsilon converted to the variable's dtype, 1 - rho computed in double).
class RMSprop : public Optimizer {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option and value for rho or momentum
  /// outside [0, 1], epsilon <= 0 or non-finite, and for the shared options.
  explicit RMSprop(RMSpropOptions options = {});
  const RMSpropOptions& options() const { return options_; }

 protected:
  std::vector<std::string> slot_names() const override;
  std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& gradient, const Tensor& variable,
                                                     const std::vector<Tensor>& slots, const Tensor& learning_rate,
                                                     const Tensor& iterations) const override;

 private:
  RMSpropOptions options_;
};

/// Options of Adagrad (keras.optimizers.Adagrad's arguments, Keras's order and defaults).
struct AdagradOptions {
  LearningRate learning_rate = 0.001;
  /// The value every accumulator element starts at; finite and >= 0.
  double initial_accumulator_value = 0.1;
  /// Added to the accumulator under the square root; finite and > 0.
  double epsilon = 1e-7;
  std::optional<double> weight_decay;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::optional<int64_t> ema_overwrite_frequency;
  std::optional<double> loss_scale_factor;
  std::optional<int64_t> gradient_accumulation_steps;  ///< OptimizerConfig::gradient_accumulation_steps
  std::string name = "adagrad";
};

/// keras.optimizers.Adagrad (Duchi, Hazan & Singer, JMLR 12, 2011), in Keras 3's form. One slot
/// "accumulator" (acc) per variable, starting at initial_accumulator_value (not zero). Per
/// variable:
///   acc += g^2;   w -= lr * g / sqrt(acc + epsilon)
class Adagrad : public Optimizer {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option and value for a negative or
  /// non-finite initial_accumulator_value, epsilon <= 0 or non-finite, and for the shared options.
  explicit Adagrad(AdagradOptions options = {});
  const AdagradOptions& options() const { return options_; }

 protected:
  std::vector<std::string> slot_names() const override;
  double slot_initial_value(size_t slot) const override;
  std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& gradient, const Tensor& variable,
                                                     const std::vector<Tensor>& slots, const Tensor& learning_rate,
                                                     const Tensor& iterations) const override;

 private:
  AdagradOptions options_;
};

/// keras.optimizers.get for a name: a new optimizer with default options. Accepts Keras's class
/// name or its lowercase form: "SGD" / "sgd", "Adam" / "adam", "AdamW" / "adamw",
/// "RMSprop" / "rmsprop", "Adagrad" / "adagrad". Throws ingot::Error(kInvalidArgument) naming
/// `name` and listing the known names otherwise.
std::unique_ptr<Optimizer> get(const std::string& name);

/// The names get() accepts, lowercase, sorted: {"adagrad", "adam", "adamw", "rmsprop", "sgd"}.
std::vector<std::string> known_names();

}  // namespace ingot::optimizers
