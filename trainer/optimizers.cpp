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
#include "optimizer_checks.h"

namespace ingot::optimizers {

using detail::cast;
using detail::check_at_least;
using detail::check_in_range;
using detail::invalid_option;
using detail::type_string;

namespace {

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

// ---- Optimizer ---------------------------------------------------------------------------------

namespace {

void check_learning_rate(const std::string& owner, const LearningRate& lr) {
  if (!lr.is_schedule()) {
    check_at_least(owner, "learning_rate", lr.value(), 0.0, false, "pass a learning rate such as 0.001, or a schedule");
  } else if (!lr.schedule()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: learning_rate is an empty schedule function", owner),
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
    auto show = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string("unset"); };
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
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: ema_overwrite_frequency = {} is invalid: it must be >= 1", owner, *c.ema_overwrite_frequency),
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

std::vector<ir::TensorType> Optimizer::variable_types(const std::vector<ir::TensorType>& variables) const {
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
std::vector<size_t> check_apply_arguments(const std::string& owner, const std::vector<Tensor>& variables,
                                          const std::vector<Tensor>& gradients) {
  if (gradients.size() != variables.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}.apply: got {} gradients for {} variables", owner, gradients.size(), variables.size()),
                "pass one gradient per trainable variable, in the same order");
  }
  std::vector<size_t> present;
  for (size_t i = 0; i < variables.size(); ++i) {
    if (!variables[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}.apply: variable {} is an invalid Tensor", owner, i));
    }
    if (!is_floating(variables[i].dtype())) {
      throw Error(ErrorCode::kDTypeMismatch, fmt::format("{}.apply: variable {} has type {}; optimizers update "
                                                         "floating-point variables only",
                                                         owner, i, type_string(variables[i].type())));
    }
    if (!gradients[i].valid()) continue;
    if (gradients[i].shape() != variables[i].shape()) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}.apply: gradient {} has type {} but its variable has type {}", owner, i,
                              type_string(gradients[i].type()), type_string(variables[i].type())));
    }
    if (!is_floating(gradients[i].dtype())) {
      throw Error(ErrorCode::kDTypeMismatch, fmt::format("{}.apply: gradient {} has non-floating type {}", owner, i,
                                                         type_string(gradients[i].type())));
    }
    present.push_back(i);
  }
  if (!variables.empty() && present.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}.apply: no gradients provided for any of the {} variables", owner, variables.size()),
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
      throw Error(got.shape != expected[i].shape ? ErrorCode::kShapeMismatch : ErrorCode::kDTypeMismatch,
                  fmt::format("{}.apply: optimizer variable {} has type {}, expected {}", owner, i, type_string(got),
                              type_string(expected[i])),
                  "pass the optimizer variables made by build() for the same variable types");
    }
  }
}

/// The learning rate of this step from a schedule, checked to be a floating-point scalar.
Tensor scheduled_rate(const std::string& owner, const ScheduleFn& schedule, const Tensor& iterations) {
  const Tensor lr = schedule(iterations);
  if (!lr.valid()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the learning-rate schedule returned an invalid Tensor", owner));
  }
  if (lr.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch, fmt::format("{}: the learning-rate schedule returned {}, expected a scalar",
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
void update_moving_averages(const OptimizerConfig& config, const Tensor& iterations, std::vector<Tensor>& averages,
                            std::vector<Tensor>& variables) {
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
      variables[i] = averages[i] * convert(*overwrite, dt) + variables[i] * convert(logical_not(*overwrite), dt);
    }
  }
}

}  // namespace

std::string GradientLayout::scope_of(size_t i) const {
  return i < scopes.size() && !scopes[i].empty() ? scopes[i] : fmt::format("variable_{}", i);
}

void GradientLayout::check(const std::string& owner) const {
  if (!sum_over_devices && std::find(split.begin(), split.end(), true) != split.end()) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: a gradient is split over the devices but the GradientLayout has no sum_over_devices", owner),
        "set GradientLayout::sum_over_devices (e.g. all_reduce(x, axis, \"sum\")), or split nothing");
  }
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> Optimizer::apply(const std::vector<Tensor>& optimizer_variables,
                                                                     const std::vector<Tensor>& variables,
                                                                     const std::vector<Tensor>& gradients,
                                                                     const GradientLayout& layout) const {
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
  if (optimizer_variables.empty() || !optimizer_variables[0].valid() || optimizer_variables[0].dtype() != DType::kI64 ||
      optimizer_variables[0].rank() != 0) {
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
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the optimizer variables lack the learning rate (an f32 "
                                                           "scalar at index 1)",
                                                           class_name_));
    }
    return to_host(optimizer_variables[1]).element_as_double(0);
  }
  const ScheduleFn& schedule = config_.learning_rate.schedule();
  const std::string owner = class_name_;
  const ir::Graph graph = trace(
      [&](const std::vector<Tensor>& args) { return std::vector<Tensor>{scheduled_rate(owner, schedule, args[0])}; },
      {{{}, DType::kI64}}, "learning_rate_schedule");
  return interp::interpret(graph, {Array::scalar(static_cast<double>(step), DType::kI64)})[0].element_as_double(0);
}

std::vector<Array> Optimizer::with_learning_rate(const std::vector<Array>& optimizer_variables, double value) const {
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

std::vector<Array> Optimizer::finalize_variable_values(const std::vector<Array>& optimizer_variables,
                                                       const std::vector<Array>& variables) const {
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

}  // namespace ingot::optimizers
