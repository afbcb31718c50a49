// Optimizers as pure traced updates; see include/ingot/trainer/optimizers.h for the contract.
// The formulas and their order of operations follow Keras 3 (keras/src/optimizers/
// base_optimizer.py, sgd.py, adam.py, schedules/learning_rate_schedule.py,
// keras/src/backend/jax/optimizer.py); Python floats there are weakly typed scalars, which is
// what ingot's `Tensor op double` overloads are.
#include "ingot/trainer/optimizers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "ingot/interp/interpreter.h"
#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"

namespace ingot::optimizers {
namespace {

Error invalid_option(const std::string& owner, const std::string& option, double value,
                     const std::string& requirement, const std::string& hint = {}) {
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("{}: {} = {} is invalid: it must be {}", owner, option, value,
                           requirement),
               hint);
}

/// Throws unless `value` is finite and >= `lo` (or > `lo` when `strict`).
void check_at_least(const std::string& owner, const std::string& option, double value, double lo,
                    bool strict, const std::string& hint = {}) {
  const bool ok = std::isfinite(value) && (strict ? value > lo : value >= lo);
  if (!ok) {
    throw invalid_option(owner, option, value,
                         fmt::format("a finite number {} {}", strict ? ">" : ">=", lo), hint);
  }
}

/// Throws unless `value` lies in [lo, hi] (or [lo, hi) when `open_high`).
void check_in_range(const std::string& owner, const std::string& option, double value, double lo,
                    double hi, bool open_high) {
  const bool ok = value >= lo && (open_high ? value < hi : value <= hi);
  if (!ok) {
    throw invalid_option(owner, option, value,
                         fmt::format("in [{}, {}{}", lo, hi, open_high ? ")" : "]"));
  }
}

/// `x` converted to `dtype` (no node when it already has it).
Tensor cast(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : convert(x, dtype); }

std::string type_string(const ir::TensorType& t) {
  return fmt::format("{}[{}]", dtype_name(t.dtype), fmt::join(t.shape, ", "));
}

/// The dtype JAX promotes a list of floating dtypes to (f64 > f32 > equal narrow types; mixed
/// f16/bf16 give f32): the dtype Keras's global norm is computed in.
DType promoted_float(const std::vector<Tensor>& xs) {
  bool any_f64 = false, any_f32 = false, mixed = false;
  const DType first = xs.front().dtype();
  for (const Tensor& x : xs) {
    any_f64 |= x.dtype() == DType::kF64;
    any_f32 |= x.dtype() == DType::kF32;
    mixed |= x.dtype() != first;
  }
  if (any_f64) return DType::kF64;
  if (any_f32 || mixed) return DType::kF32;
  return first;
}

/// Keras's BaseOptimizer._clip_by_norm: g * c / max(||g||, c), with the norm's square root taken
/// only where the sum of squares is positive (so a zero gradient stays exactly zero). `whole`
/// (optional) turns the block's sum of squares into the whole gradient's (split variables).
Tensor clip_by_norm(const Tensor& g, double clipnorm, const std::function<Tensor(const Tensor&)>& whole = {},
                    int64_t copies = 1) {
  std::vector<int64_t> all_axes(static_cast<size_t>(g.rank()));
  for (size_t i = 0; i < all_axes.size(); ++i) all_axes[i] = static_cast<int64_t>(i);
  Tensor l2sum = sum(square(g), all_axes, /*keepdims=*/true);
  if (whole) l2sum = whole(copies > 1 ? l2sum / static_cast<double>(copies) : l2sum);
  const Tensor pred = greater(l2sum, zeros_like(l2sum));
  const Tensor l2sum_safe = where(pred, l2sum, ones_like(l2sum));
  const Tensor l2norm = where(pred, sqrt(l2sum_safe), l2sum);
  return (g * clipnorm) / maximum(l2norm, full_like(l2norm, clipnorm));
}

/// Keras's clip_by_global_norm: every gradient times clip * min(1 / norm, 1 / clip), where norm is
/// the L2 norm of all gradients together; a non-finite norm makes the scale NaN.
/// `split[i]`: grads[i] is one device's block, its sum of squares summed over the devices by
/// `sum_over_devices` (one collective for all of them).
std::vector<Tensor> clip_by_global_norm(const std::vector<Tensor>& grads, double clip, const std::vector<bool>& split,
                                        const std::vector<int64_t>& copies,
                                        const std::function<Tensor(const Tensor&)>& sum_over_devices) {
  const DType nd = promoted_float(grads);
  std::vector<Tensor> squared_norms, split_norms;
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor sq = reshape(cast(sum(square(grads[i])), nd), {1});
    if (split[i] && copies[i] > 1) sq = sq / static_cast<double>(copies[i]);  // each block counted once
    (split[i] ? split_norms : squared_norms).push_back(sq);
  }
  if (!split_norms.empty()) squared_norms.push_back(reshape(sum_over_devices(sum(concatenate(split_norms, 0))), {1}));
  const Tensor norm = sqrt(sum(concatenate(squared_norms, 0)));
  const Tensor scale_for_finite = clip * minimum(1.0 / norm, full_like(norm, 1.0 / clip));
  const Tensor scale = scale_for_finite + (norm - norm);
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (const Tensor& g : grads) out.push_back(cast(cast(g, nd) * scale, g.dtype()));
  return out;
}

}  // namespace

// ---- LearningRate and schedules ----------------------------------------------------------------

double LearningRate::value() const {
  if (is_schedule_) {
    throw Error(ErrorCode::kFailedPrecondition,
                "the learning rate is a schedule, not a constant value",
                "evaluate it with Optimizer::current_learning_rate(optimizer_variables)");
  }
  return value_;
}

const ScheduleFn& LearningRate::schedule() const {
  if (!is_schedule_) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("the learning rate is the constant {}, not a schedule", value_));
  }
  return schedule_;
}

namespace schedules {

ExponentialDecay::ExponentialDecay(ExponentialDecayOptions options) : options_(options) {
  const std::string owner = "ExponentialDecay";
  if (options_.decay_steps <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: decay_steps = {} is invalid: it must be > 0", owner,
                            options_.decay_steps),
                "decay_steps is the number of iterations per factor of decay_rate");
  }
  check_at_least(owner, "initial_learning_rate", options_.initial_learning_rate, 0.0, false);
  check_at_least(owner, "decay_rate", options_.decay_rate, 0.0, false);
}

Tensor ExponentialDecay::operator()(const Tensor& step) const {
  if (step.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("ExponentialDecay: the step must be a scalar, got {}",
                            type_string(step.type())));
  }
  const DType dt = DType::kF32;
  Tensor p = cast(step, dt) / scalar(static_cast<double>(options_.decay_steps), dt);
  if (options_.staircase) p = floor(p);
  return scalar(options_.initial_learning_rate, dt) * pow(scalar(options_.decay_rate, dt), p);
}

CosineDecay::CosineDecay(CosineDecayOptions options) : options_(options) {
  const std::string owner = "CosineDecay";
  if (options_.decay_steps <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: decay_steps = {} is invalid: it must be > 0", owner, options_.decay_steps),
                "decay_steps is the number of iterations over which the rate decays (e.g. epochs * steps per epoch)");
  }
  if (options_.warmup_steps < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: warmup_steps = {} is invalid: it must be >= 0", owner, options_.warmup_steps));
  }
  check_at_least(owner, "initial_learning_rate", options_.initial_learning_rate, 0.0, false);
  check_at_least(owner, "alpha", options_.alpha, 0.0, false);
  if (options_.alpha > 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: alpha = {} is invalid: it must be in [0, 1]", owner,
                                                         options_.alpha),
                "alpha is the final rate as a fraction of the decayed-from rate");
  }
  if (options_.warmup_target) check_at_least(owner, "warmup_target", *options_.warmup_target, 0.0, false);
}

Tensor CosineDecay::operator()(const Tensor& step) const {
  if (step.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("CosineDecay: the step must be a scalar, got {}", type_string(step.type())));
  }
  const DType dt = DType::kF32;
  const double decay_steps = static_cast<double>(options_.decay_steps);
  const auto decay = [&](const Tensor& s, double from) {
    const Tensor fraction = s / scalar(decay_steps, dt);
    const Tensor cosine = 0.5 * (1.0 + cos(scalar(M_PI, dt) * fraction));
    return scalar(from, dt) * ((1.0 - options_.alpha) * cosine + scalar(options_.alpha, dt));
  };
  const Tensor s = cast(step, dt);
  if (!options_.warmup_target) return decay(minimum(s, scalar(decay_steps, dt)), options_.initial_learning_rate);
  const double warmup = static_cast<double>(options_.warmup_steps);
  const double target = *options_.warmup_target;
  const Tensor clamped = minimum(s, scalar(decay_steps + warmup, dt));
  // Keras divides by warmup_steps only in the warmup branch; with 0 warmup steps that branch is
  // never taken, so the divisor is kept at 1 there to avoid 0/0 in the unselected value.
  const Tensor warming = scalar(options_.initial_learning_rate, dt) +
                         scalar(target - options_.initial_learning_rate, dt) * (clamped / scalar(std::max(warmup, 1.0), dt));
  return where(less(clamped, scalar(warmup, dt)), warming, decay(clamped - scalar(warmup, dt), target));
}

namespace {

void check_piecewise_options(const PiecewiseConstantDecayOptions& o) {
  const std::string owner = "PiecewiseConstantDecay";
  if (o.boundaries.empty() || o.values.size() != o.boundaries.size() + 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: got {} boundaries [{}] and {} values [{}]; it needs at least one "
                            "boundary and exactly one more value than boundaries",
                            owner, o.boundaries.size(), fmt::join(o.boundaries, ", "),
                            o.values.size(), fmt::join(o.values, ", ")),
                "values[i] is the rate up to and including boundaries[i]; the last value holds "
                "after the last boundary");
  }
  for (size_t i = 1; i < o.boundaries.size(); ++i) {
    if (o.boundaries[i] <= o.boundaries[i - 1]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: boundaries [{}] must increase strictly, but boundaries[{}] = {} "
                              "<= boundaries[{}] = {}",
                              owner, fmt::join(o.boundaries, ", "), i, o.boundaries[i], i - 1,
                              o.boundaries[i - 1]));
    }
  }
  for (size_t i = 0; i < o.values.size(); ++i) {
    check_at_least(owner, fmt::format("values[{}]", i), o.values[i], 0.0, false);
  }
}

}  // namespace

PiecewiseConstantDecay::PiecewiseConstantDecay(PiecewiseConstantDecayOptions options)
    : options_(std::move(options)) {
  check_piecewise_options(options_);
}

Tensor PiecewiseConstantDecay::operator()(const Tensor& step) const {
  if (step.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("PiecewiseConstantDecay: the step must be a scalar, got {}",
                            type_string(step.type())));
  }
  const DType dt = DType::kF32;
  // From the last interval down: step <= boundaries[i] selects values[i] over the later ones,
  // which is Keras's sum of disjoint interval indicators times their values.
  Tensor rate = scalar(options_.values.back(), dt);
  for (size_t i = options_.boundaries.size(); i-- > 0;) {
    const Tensor boundary = scalar(static_cast<double>(options_.boundaries[i]), step.dtype());
    rate = where(less_equal(step, boundary), scalar(options_.values[i], dt), rate);
  }
  return rate;
}

}  // namespace schedules

// ---- Optimizer ---------------------------------------------------------------------------------

namespace {

void check_learning_rate(const std::string& owner, const LearningRate& lr) {
  if (!lr.is_schedule()) {
    check_at_least(owner, "learning_rate", lr.value(), 0.0, false,
                   "pass a learning rate such as 0.001, or a schedule");
  } else if (!lr.schedule()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: learning_rate is an empty schedule function", owner),
                "pass a float or a callable Tensor(const Tensor& iterations)");
  }
}

/// Each clipping option set must be > 0, and at most one may be set (Keras's rule).
void check_clipping(const std::string& owner, const OptimizerConfig& c) {
  int set = 0;
  const std::pair<const char*, std::optional<double>> clips[] = {
      {"clipnorm", c.clipnorm}, {"clipvalue", c.clipvalue}, {"global_clipnorm", c.global_clipnorm}};
  for (const auto& [option, value] : clips) {
    if (!value) continue;
    ++set;
    check_at_least(owner, option, *value, 0.0, true, "leave it unset for no clipping");
  }
  if (set > 1) {
    auto show = [](const std::optional<double>& v) {
      return v ? fmt::format("{}", *v) : std::string("unset");
    };
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: only one of clipnorm, clipvalue and global_clipnorm can be set; "
                            "got clipnorm = {}, clipvalue = {}, global_clipnorm = {}",
                            owner, show(c.clipnorm), show(c.clipvalue), show(c.global_clipnorm)));
  }
}

/// EMA options are checked only when EMA is on, as Keras does.
void check_ema(const std::string& owner, const OptimizerConfig& c) {
  if (!c.use_ema) return;
  check_in_range(owner, "ema_momentum", c.ema_momentum, 0.0, 1.0, false);
  if (c.ema_overwrite_frequency && *c.ema_overwrite_frequency < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: ema_overwrite_frequency = {} is invalid: it must be >= 1", owner,
                            *c.ema_overwrite_frequency),
                "leave it unset to overwrite only at the end of training");
  }
}

}  // namespace

Optimizer::Optimizer(std::string class_name, std::string default_name, OptimizerConfig config)
    : class_name_(std::move(class_name)), config_(std::move(config)) {
  if (config_.name.empty()) config_.name = std::move(default_name);
  check_learning_rate(class_name_, config_.learning_rate);
  if (config_.weight_decay) {
    check_at_least(class_name_, "weight_decay", *config_.weight_decay, 0.0, false);
  }
  check_clipping(class_name_, config_);
  check_ema(class_name_, config_);
  if (config_.gradient_accumulation_steps && *config_.gradient_accumulation_steps < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: gradient_accumulation_steps = {} is invalid: it must be >= 2", class_name_,
                            *config_.gradient_accumulation_steps),
                "leave it unset to update on every step");
  }
  if (config_.loss_scale_factor) {
    check_at_least(class_name_, "loss_scale_factor", *config_.loss_scale_factor, 0.0, true);
  }
}

int64_t Optimizer::header_size() const { return config_.learning_rate.is_schedule() ? 1 : 2; }

int64_t Optimizer::num_optimizer_variables(int64_t num_variables) const {
  const int64_t per_variable = static_cast<int64_t>(slot_names().size()) + (config_.use_ema ? 1 : 0) +
                               (config_.gradient_accumulation_steps ? 1 : 0);
  return header_size() + per_variable * num_variables;
}

std::vector<OptimizerVariableInfo> Optimizer::variable_info(int64_t num_variables) const {
  std::vector<OptimizerVariableInfo> info = {{"iterations", std::nullopt}};
  if (!config_.learning_rate.is_schedule()) info.push_back({"learning_rate", std::nullopt});
  // Kind-major, as variable_types(): each kind has one entry per trainable variable.
  std::vector<std::string> kinds;
  if (config_.use_ema) kinds.emplace_back("average");
  for (const std::string& slot : slot_names()) kinds.push_back(slot);
  if (config_.gradient_accumulation_steps) kinds.emplace_back("accumulator");
  for (const std::string& kind : kinds) {
    for (int64_t i = 0; i < num_variables; ++i) info.push_back({kind, i});
  }
  return info;
}

std::optional<int64_t> Optimizer::learning_rate_index() const {
  if (config_.learning_rate.is_schedule()) return std::nullopt;
  return 1;
}

std::vector<ir::TensorType> Optimizer::variable_types(
    const std::vector<ir::TensorType>& variables) const {
  std::vector<ir::TensorType> types = {{{}, DType::kI64}};
  if (!config_.learning_rate.is_schedule()) types.push_back({{}, DType::kF32});
  const int64_t kinds = static_cast<int64_t>(slot_names().size()) + (config_.use_ema ? 1 : 0) +
                       (config_.gradient_accumulation_steps ? 1 : 0);
  for (int64_t k = 0; k < kinds; ++k) types.insert(types.end(), variables.begin(), variables.end());
  return types;
}

std::vector<Array> Optimizer::build(const std::vector<ir::TensorType>& variables) const {
  for (size_t i = 0; i < variables.size(); ++i) {
    if (!is_floating(variables[i].dtype)) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("{}.build: trainable variable {} has type {}; optimizers update "
                              "floating-point variables only",
                              class_name_, i, type_string(variables[i])),
                  "make integer state a non-trainable variable");
    }
  }
  std::vector<Array> state;
  for (const ir::TensorType& t : variable_types(variables)) {
    state.push_back(Array::zeros(t.shape, t.dtype));
  }
  if (!config_.learning_rate.is_schedule()) {
    state[1] = Array::scalar(config_.learning_rate.value(), DType::kF32);
  }
  const size_t n = variables.size();
  const size_t slots_at = static_cast<size_t>(header_size()) + (config_.use_ema ? n : 0);
  const size_t num_slots = slot_names().size();
  for (size_t k = 0; k < num_slots; ++k) {
    const double initial = slot_initial_value(k);
    if (initial == 0.0) continue;
    for (size_t i = 0; i < n; ++i) {
      state[slots_at + k * n + i] = Array::full(variables[i].shape, initial, variables[i].dtype);
    }
  }
  return state;
}

Tensor Optimizer::scale_loss(const Tensor& loss) const {
  return config_.loss_scale_factor ? loss * *config_.loss_scale_factor : loss;
}

Tensor Optimizer::scale_loss(const Tensor& loss, const std::vector<Tensor>&) const { return scale_loss(loss); }

namespace {

/// Checks the arguments of apply(); returns the indices of the variables that have a gradient.
std::vector<size_t> check_apply_arguments(const std::string& owner,
                                          const std::vector<Tensor>& variables,
                                          const std::vector<Tensor>& gradients) {
  if (gradients.size() != variables.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}.apply: got {} gradients for {} variables", owner,
                            gradients.size(), variables.size()),
                "pass one gradient per trainable variable, in the same order");
  }
  std::vector<size_t> present;
  for (size_t i = 0; i < variables.size(); ++i) {
    if (!variables[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}.apply: variable {} is an invalid Tensor", owner, i));
    }
    if (!is_floating(variables[i].dtype())) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("{}.apply: variable {} has type {}; optimizers update "
                              "floating-point variables only",
                              owner, i, type_string(variables[i].type())));
    }
    if (!gradients[i].valid()) continue;
    if (gradients[i].shape() != variables[i].shape()) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}.apply: gradient {} has type {} but its variable has type {}",
                              owner, i, type_string(gradients[i].type()),
                              type_string(variables[i].type())));
    }
    if (!is_floating(gradients[i].dtype())) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("{}.apply: gradient {} has non-floating type {}", owner, i,
                              type_string(gradients[i].type())));
    }
    present.push_back(i);
  }
  if (!variables.empty() && present.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}.apply: no gradients provided for any of the {} variables", owner,
                            variables.size()),
                "check that the loss depends on the trainable variables");
  }
  return present;
}

/// Checks that `state` has exactly the types `expected` (what build() makes).
void check_state(const std::string& owner, const std::vector<Tensor>& state,
                 const std::vector<ir::TensorType>& expected) {
  if (state.size() != expected.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}.apply: got {} optimizer variables, expected {} for these "
                            "trainable variables",
                            owner, state.size(), expected.size()),
                "pass the optimizer variables made by build() for the same variable types");
  }
  for (size_t i = 0; i < state.size(); ++i) {
    if (!state[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}.apply: optimizer variable {} is an invalid Tensor", owner, i));
    }
    const ir::TensorType got = state[i].type();
    if (got.shape != expected[i].shape || got.dtype != expected[i].dtype) {
      throw Error(got.shape != expected[i].shape ? ErrorCode::kShapeMismatch
                                                 : ErrorCode::kDTypeMismatch,
                  fmt::format("{}.apply: optimizer variable {} has type {}, expected {}", owner,
                              i, type_string(got), type_string(expected[i])),
                  "pass the optimizer variables made by build() for the same variable types");
    }
  }
}

/// The learning rate of this step from a schedule, checked to be a floating-point scalar.
Tensor scheduled_rate(const std::string& owner, const ScheduleFn& schedule,
                      const Tensor& iterations) {
  const Tensor lr = schedule(iterations);
  if (!lr.valid()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the learning-rate schedule returned an invalid Tensor", owner));
  }
  if (lr.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: the learning-rate schedule returned {}, expected a scalar",
                            owner, type_string(lr.type())));
  }
  if (!is_floating(lr.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: the learning-rate schedule returned {}, expected a "
                            "floating-point scalar",
                            owner, type_string(lr.type())),
                "convert the rate with ingot::convert(rate, DType::kF32)");
  }
  return lr;
}

/// Steps 1-2 of apply(): gradients divided by the loss scale, then clipped (Keras's
/// BaseOptimizer.apply and _clip_gradients).
/// Gradient clipping (Keras's order: clipnorm, else global_clipnorm, else clipvalue).
/// `split[j]`: grads[j] is one device's block of a split variable held by `copies[j]` devices
/// (GradientLayout).
std::vector<Tensor> clip(const OptimizerConfig& config, std::vector<Tensor> grads, const std::vector<bool>& split,
                         const std::vector<int64_t>& copies, const GradientLayout& layout) {
  if (config.clipnorm) {
    for (size_t j = 0; j < grads.size(); ++j) {
      grads[j] = clip_by_norm(grads[j], *config.clipnorm, split[j] ? layout.sum_over_devices : nullptr, copies[j]);
    }
  } else if (config.global_clipnorm) {
    grads = clip_by_global_norm(grads, *config.global_clipnorm, split, copies, layout.sum_over_devices);
  } else if (config.clipvalue) {
    for (Tensor& g : grads) g = clamp(g, -*config.clipvalue, *config.clipvalue);
  }
  return grads;
}

/// Step 5 of apply() (the JAX back end's EMA handling): every average becomes
/// m * average + (1 - m) * variable with m = ema_momentum except on the first step (m = 0), and
/// with ema_overwrite_frequency f the variables become their averages when (iterations + 1) % f
/// is 0 (selected arithmetically, average * 1 + variable * 0, as Keras does).
void update_moving_averages(const OptimizerConfig& config, const Tensor& iterations,
                            std::vector<Tensor>& averages, std::vector<Tensor>& variables) {
  const Tensor not_first_step = not_equal(iterations, zeros_like(iterations));
  std::optional<Tensor> overwrite;
  if (config.ema_overwrite_frequency) {
    const Tensor next = iterations + 1.0;
    const double frequency = static_cast<double>(*config.ema_overwrite_frequency);
    overwrite = equal(remainder(next, full_like(next, frequency)), zeros_like(next));
  }
  for (size_t i = 0; i < variables.size(); ++i) {
    const DType dt = variables[i].dtype();
    const Tensor momentum = convert(not_first_step, dt) * config.ema_momentum;
    averages[i] = momentum * averages[i] + (1.0 - momentum) * variables[i];
    if (overwrite) {
      variables[i] = averages[i] * convert(*overwrite, dt) +
                     variables[i] * convert(logical_not(*overwrite), dt);
    }
  }
}

}  // namespace

std::string GradientLayout::scope_of(size_t i) const {
  return i < scopes.size() && !scopes[i].empty() ? scopes[i] : fmt::format("variable_{}", i);
}

void GradientLayout::check(const std::string& owner) const {
  if (!sum_over_devices && std::find(split.begin(), split.end(), true) != split.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a gradient is split over the devices but the GradientLayout has no sum_over_devices",
                            owner),
                "set GradientLayout::sum_over_devices (e.g. all_reduce(x, axis, \"sum\")), or split nothing");
  }
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> Optimizer::apply(
    const std::vector<Tensor>& optimizer_variables, const std::vector<Tensor>& variables,
    const std::vector<Tensor>& gradients, const GradientLayout& layout) const {
  layout.check(class_name_);
  const std::vector<size_t> present = check_apply_arguments(class_name_, variables, gradients);
  std::vector<ir::TensorType> types;
  for (const Tensor& v : variables) types.push_back(v.type());
  check_state(class_name_, optimizer_variables, variable_types(types));
  if (variables.empty()) return {variables, optimizer_variables};  // Keras: no-op

  const size_t n = variables.size();
  const std::optional<int64_t> accumulate = config_.gradient_accumulation_steps;
  // With accumulation the schedule and the update steps count optimizer updates (Keras's
  // `iterations` property divides by gradient_accumulation_steps).
  const Tensor iterations =
      accumulate ? optimizer_variables[0] / static_cast<double>(*accumulate) : optimizer_variables[0];  // i64: floor
  const Tensor lr = config_.learning_rate.is_schedule()
                        ? scheduled_rate(class_name_, config_.learning_rate.schedule(), iterations)
                        : optimizer_variables[1];

  // 1-2. Unscale the gradients that exist; with accumulation, their mean over the window so far
  // (this step's plus the accumulators, divided by the steps); then clip.
  std::vector<Tensor> grads;
  const size_t acc_at = optimizer_variables.size() - n;
  for (size_t i : present) grads.push_back(gradients[i]);
  if (config_.loss_scale_factor) {
    for (Tensor& g : grads) g = g / *config_.loss_scale_factor;
  }
  std::vector<Tensor> accumulated;  // accumulators + this step's gradients, per present variable
  if (accumulate) {
    for (size_t j = 0; j < present.size(); ++j) {
      const Tensor& acc = optimizer_variables[acc_at + present[j]];
      accumulated.push_back(acc + cast(grads[j], acc.dtype()));
      grads[j] = accumulated.back() / static_cast<double>(*accumulate);
    }
  }
  std::vector<bool> split;
  std::vector<int64_t> copies;
  for (size_t i : present) {
    split.push_back(layout.is_split(i));
    copies.push_back(layout.copies_of(i));
  }
  grads = clip(config_, std::move(grads), split, copies, layout);

  // 3-4. Weight decay and the update step, per variable with a gradient.
  std::vector<Tensor> new_variables = variables;
  std::vector<Tensor> new_state = optimizer_variables;
  const size_t slots_at = static_cast<size_t>(header_size()) + (config_.use_ema ? n : 0);
  const size_t num_slots = slot_names().size();
  const NameScope optimizer_scope(name().empty() ? class_name() : name());
  for (size_t j = 0; j < present.size(); ++j) {
    const size_t i = present[j];
    // The update under the variable's scope (GradientLayout::scopes): alike updates are one
    // function, called per instance (lower::LoweringOptions::share_repeated_scopes).
    const NameScope variable_scope(layout.scope_of(i));
    const DType dt = variables[i].dtype();
    const Tensor var_lr = cast(lr, dt);
    Tensor var = variables[i];
    if (config_.weight_decay) var = var - var * scalar(*config_.weight_decay, dt) * var_lr;
    std::vector<Tensor> slots;
    for (size_t k = 0; k < num_slots; ++k) slots.push_back(optimizer_variables[slots_at + k * n + i]);
    auto [updated, new_slots] = update_step(cast(grads[j], dt), var, slots, var_lr, iterations);
    new_variables[i] = updated;
    for (size_t k = 0; k < num_slots; ++k) new_state[slots_at + k * n + i] = new_slots.at(k);
  }

  // 5. Moving average of all variables (after the update), and its periodic overwrite.
  if (config_.use_ema) {
    const auto avg_at = optimizer_variables.begin() + header_size();
    std::vector<Tensor> averages(avg_at, avg_at + static_cast<std::ptrdiff_t>(n));
    update_moving_averages(config_, iterations, averages, new_variables);
    std::copy(averages.begin(), averages.end(), new_state.begin() + header_size());
  }

  // With accumulation only every gradient_accumulation_steps-th call updates: the others keep
  // the variables and slots and add to the accumulators, which the update resets.
  if (accumulate) {
    const Tensor next = optimizer_variables[0] + 1.0;
    const Tensor update = equal(remainder(next, full_like(next, static_cast<double>(*accumulate))), zeros_like(next));
    for (size_t i = 0; i < n; ++i) new_variables[i] = where(update, new_variables[i], variables[i]);
    for (size_t s2 = 1; s2 < acc_at; ++s2) new_state[s2] = where(update, new_state[s2], optimizer_variables[s2]);
    for (size_t j = 0; j < present.size(); ++j) {
      const size_t a = acc_at + present[j];
      new_state[a] = where(update, zeros_like(accumulated[j]), accumulated[j]);
    }
  }

  // 6. One more iteration.
  new_state[0] = optimizer_variables[0] + 1.0;
  return {new_variables, new_state};
}

// ---- host-side access ---------------------------------------------------------------------------

int64_t Optimizer::iterations(const std::vector<Array>& optimizer_variables) {
  if (optimizer_variables.empty() || !optimizer_variables[0].valid() ||
      optimizer_variables[0].dtype() != DType::kI64 || optimizer_variables[0].rank() != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "the optimizer variables do not start with the iteration count (an i64 scalar)",
                "pass the optimizer variables made by Optimizer::build() or returned by apply()");
  }
  return to_host(optimizer_variables[0]).to_vector<int64_t>()[0];
}

double Optimizer::current_learning_rate(const std::vector<Array>& optimizer_variables) const {
  const int64_t calls = iterations(optimizer_variables);
  const int64_t step = config_.gradient_accumulation_steps ? calls / *config_.gradient_accumulation_steps : calls;
  if (!config_.learning_rate.is_schedule()) {
    if (optimizer_variables.size() < 2 || optimizer_variables[1].dtype() != DType::kF32 ||
        optimizer_variables[1].rank() != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: the optimizer variables lack the learning rate (an f32 "
                              "scalar at index 1)",
                              class_name_));
    }
    return to_host(optimizer_variables[1]).element_as_double(0);
  }
  const ScheduleFn& schedule = config_.learning_rate.schedule();
  const std::string owner = class_name_;
  const ir::Graph graph = trace(
      [&](const std::vector<Tensor>& args) {
        return std::vector<Tensor>{scheduled_rate(owner, schedule, args[0])};
      },
      {{{}, DType::kI64}}, "learning_rate_schedule");
  return interp::interpret(graph, {Array::scalar(static_cast<double>(step), DType::kI64)})[0]
      .element_as_double(0);
}

std::vector<Array> Optimizer::with_learning_rate(const std::vector<Array>& optimizer_variables,
                                                 double value) const {
  if (config_.learning_rate.is_schedule()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("{}: this optimizer was created with a learning-rate schedule, so its "
                            "learning rate is not settable",
                            class_name_),
                "create the optimizer with a float learning_rate to set it");
  }
  check_at_least(class_name_, "learning_rate", value, 0.0, false);
  if (optimizer_variables.size() < 2 || !optimizer_variables[1].valid() ||
      optimizer_variables[1].dtype() != DType::kF32 || optimizer_variables[1].rank() != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the optimizer variables lack the learning rate (an f32 scalar "
                            "at index 1)",
                            class_name_));
  }
  std::vector<Array> out = optimizer_variables;
  Device* device = out[1].num_shards() == 1 ? &out[1].device() : nullptr;  // keep it in place
  out[1] = Array::scalar(value, DType::kF32, device);
  return out;
}

std::vector<Array> Optimizer::finalize_variable_values(
    const std::vector<Array>& optimizer_variables, const std::vector<Array>& variables) const {
  if (!config_.use_ema) return variables;
  const int64_t n = static_cast<int64_t>(variables.size());
  if (static_cast<int64_t>(optimizer_variables.size()) != num_optimizer_variables(n)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}.finalize_variable_values: got {} optimizer variables, expected {} "
                            "for {} variables",
                            class_name_, optimizer_variables.size(), num_optimizer_variables(n), n));
  }
  const auto first = optimizer_variables.begin() + header_size();
  return std::vector<Array>(first, first + n);
}

// ---- SGD ---------------------------------------------------------------------------------------

namespace {

template <class Options>
OptimizerConfig common_config(const Options& o) {
  return OptimizerConfig{.learning_rate = o.learning_rate,
                         .weight_decay = o.weight_decay,
                         .clipnorm = o.clipnorm,
                         .clipvalue = o.clipvalue,
                         .global_clipnorm = o.global_clipnorm,
                         .use_ema = o.use_ema,
                         .ema_momentum = o.ema_momentum,
                         .ema_overwrite_frequency = o.ema_overwrite_frequency,
                         .loss_scale_factor = o.loss_scale_factor,
                         .gradient_accumulation_steps = o.gradient_accumulation_steps,
                         .name = o.name};
}

}  // namespace

SGD::SGD(SGDOptions options)
    : Optimizer("SGD", "SGD", common_config(options)), options_(std::move(options)) {
  check_in_range("SGD", "momentum", options_.momentum, 0.0, 1.0, false);
}

std::vector<std::string> SGD::slot_names() const {
  if (options_.momentum == 0.0) return {};
  return {"momentum"};
}

std::pair<Tensor, std::vector<Tensor>> SGD::update_step(const Tensor& gradient,
                                                        const Tensor& variable,
                                                        const std::vector<Tensor>& slots,
                                                        const Tensor& learning_rate,
                                                        const Tensor& /*iterations*/) const {
  if (slots.empty()) return {variable - gradient * learning_rate, {}};
  const Tensor momentum = scalar(options_.momentum, variable.dtype());
  const Tensor m = slots[0] * momentum - gradient * learning_rate;
  const Tensor updated =
      options_.nesterov ? variable + (m * momentum - gradient * learning_rate) : variable + m;
  return {updated, {m}};
}

// ---- Adam --------------------------------------------------------------------------------------

Adam::Adam(AdamOptions options) : Adam("Adam", std::move(options)) {}

Adam::Adam(std::string class_name, AdamOptions options)
    : Optimizer(class_name, "adam", common_config(options)), options_(std::move(options)) {
  check_in_range(class_name, "beta_1", options_.beta_1, 0.0, 1.0, true);
  check_in_range(class_name, "beta_2", options_.beta_2, 0.0, 1.0, true);
  check_at_least(class_name, "epsilon", options_.epsilon, 0.0, true);
}

std::vector<std::string> Adam::slot_names() const {
  if (options_.amsgrad) return {"momentum", "velocity", "velocity_hat"};
  return {"momentum", "velocity"};
}

std::pair<Tensor, std::vector<Tensor>> Adam::update_step(const Tensor& gradient,
                                                         const Tensor& variable,
                                                         const std::vector<Tensor>& slots,
                                                         const Tensor& learning_rate,
                                                         const Tensor& iterations) const {
  const DType dt = variable.dtype();
  const Tensor local_step = convert(iterations + 1.0, dt);
  const Tensor beta_1_power = pow(scalar(options_.beta_1, dt), local_step);
  const Tensor beta_2_power = pow(scalar(options_.beta_2, dt), local_step);
  const Tensor alpha = learning_rate * sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power);
  const Tensor m = slots[0] + (gradient - slots[0]) * (1.0 - options_.beta_1);
  const Tensor v = slots[1] + (square(gradient) - slots[1]) * (1.0 - options_.beta_2);
  std::vector<Tensor> new_slots = {m, v};
  Tensor denominator_v = v;
  if (options_.amsgrad) {
    const Tensor v_hat = maximum(slots[2], v);
    new_slots.push_back(v_hat);
    denominator_v = v_hat;
  }
  const Tensor updated = variable - (m * alpha) / (sqrt(denominator_v) + options_.epsilon);
  return {updated, new_slots};
}

// ---- AdamW -------------------------------------------------------------------------------------

namespace {

/// AdamW's options as Adam's, with the weight decay always set.
AdamOptions adam_options(const AdamWOptions& o) {
  return AdamOptions{.learning_rate = o.learning_rate,
                     .beta_1 = o.beta_1,
                     .beta_2 = o.beta_2,
                     .epsilon = o.epsilon,
                     .amsgrad = o.amsgrad,
                     .weight_decay = o.weight_decay,
                     .clipnorm = o.clipnorm,
                     .clipvalue = o.clipvalue,
                     .global_clipnorm = o.global_clipnorm,
                     .use_ema = o.use_ema,
                     .ema_momentum = o.ema_momentum,
                     .ema_overwrite_frequency = o.ema_overwrite_frequency,
                     .loss_scale_factor = o.loss_scale_factor,
                     .gradient_accumulation_steps = o.gradient_accumulation_steps,
                     .name = o.name.empty() ? std::string("adamw") : o.name};
}

}  // namespace

AdamW::AdamW(AdamWOptions options)
    : Adam("AdamW", adam_options(options)), options_(std::move(options)) {}

// ---- RMSprop -----------------------------------------------------------------------------------

RMSprop::RMSprop(RMSpropOptions options)
    : Optimizer("RMSprop", "rmsprop", common_config(options)), options_(std::move(options)) {
  check_in_range("RMSprop", "rho", options_.rho, 0.0, 1.0, false);
  check_in_range("RMSprop", "momentum", options_.momentum, 0.0, 1.0, false);
  check_at_least("RMSprop", "epsilon", options_.epsilon, 0.0, true);
}

std::vector<std::string> RMSprop::slot_names() const {
  std::vector<std::string> names = {"velocity"};
  if (options_.momentum > 0.0) names.push_back("momentum");
  if (options_.centered) names.push_back("average_gradient");
  return names;
}

std::pair<Tensor, std::vector<Tensor>> RMSprop::update_step(const Tensor& gradient,
                                                            const Tensor& variable,
                                                            const std::vector<Tensor>& slots,
                                                            const Tensor& learning_rate,
                                                            const Tensor& /*iterations*/) const {
  const double rho = options_.rho;
  const bool has_momentum = options_.momentum > 0.0;
  const Tensor velocity = slots[0] * rho + square(gradient) * (1.0 - rho);
  std::vector<Tensor> new_slots = {velocity};
  if (has_momentum) new_slots.push_back(slots[1]);  // replaced below
  Tensor denominator = velocity + options_.epsilon;
  if (options_.centered) {
    const Tensor& old_average = slots[has_momentum ? 2 : 1];
    const Tensor average = old_average * rho + gradient * (1.0 - rho);
    new_slots.push_back(average);
    denominator = velocity - square(average) + options_.epsilon;
  }
  const Tensor increment = (learning_rate * gradient) / sqrt(denominator);
  if (!has_momentum) return {variable - increment, new_slots};
  const Tensor momentum = slots[1] * options_.momentum + increment;
  new_slots[1] = momentum;
  return {variable - momentum, new_slots};
}

// ---- Adagrad -----------------------------------------------------------------------------------

Adagrad::Adagrad(AdagradOptions options)
    : Optimizer("Adagrad", "adagrad", common_config(options)), options_(std::move(options)) {
  check_at_least("Adagrad", "initial_accumulator_value", options_.initial_accumulator_value, 0.0,
                 false, "Keras's default is 0.1");
  check_at_least("Adagrad", "epsilon", options_.epsilon, 0.0, true);
}

std::vector<std::string> Adagrad::slot_names() const { return {"accumulator"}; }

double Adagrad::slot_initial_value(size_t /*slot*/) const {
  return options_.initial_accumulator_value;
}

std::pair<Tensor, std::vector<Tensor>> Adagrad::update_step(const Tensor& gradient,
                                                            const Tensor& variable,
                                                            const std::vector<Tensor>& slots,
                                                            const Tensor& learning_rate,
                                                            const Tensor& /*iterations*/) const {
  const Tensor accumulator = slots[0] + square(gradient);
  const Tensor updated =
      variable - (learning_rate * gradient) / sqrt(accumulator + options_.epsilon);
  return {updated, {accumulator}};
}

// ---- get ---------------------------------------------------------------------------------------

std::vector<std::string> known_names() { return {"adagrad", "adam", "adamw", "rmsprop", "sgd"}; }

std::unique_ptr<Optimizer> get(const std::string& name) {
  if (name == "adam" || name == "Adam") return std::make_unique<Adam>();
  if (name == "sgd" || name == "SGD") return std::make_unique<SGD>();
  if (name == "adamw" || name == "AdamW") return std::make_unique<AdamW>();
  if (name == "rmsprop" || name == "RMSprop") return std::make_unique<RMSprop>();
  if (name == "adagrad" || name == "Adagrad") return std::make_unique<Adagrad>();
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("optimizers::get: unknown optimizer '{}'; known optimizers: {}", name,
                          fmt::join(known_names(), ", ")),
              "use a Keras optimizer name (class name or lowercase), or construct the optimizer "
              "with its options struct");
}

}  // namespace ingot::optimizers
