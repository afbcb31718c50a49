// keras.optimizers.LossScaleOptimizer (include/ingot/trainer/loss_scale.h).
#include "ingot/trainer/loss_scale.h"

#include <fmt/format.h>

#include <cmath>

#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"

namespace ingot::optimizers {

namespace {

/// The wrapper shares the inner optimizer's configuration (learning rate, EMA), so the host-side
/// accessors of the base class read the inner layout at the front of the state.
OptimizerConfig checked_config(const LossScaleOptimizerOptions& o) {
  const std::string owner = "LossScaleOptimizer";
  if (!o.inner_optimizer) {
    throw Error(ErrorCode::kInvalidArgument, owner + ": inner_optimizer is null",
                "wrap an optimizer: LossScaleOptimizer({.inner_optimizer = std::make_shared<Adam>()})");
  }
  if (o.inner_optimizer->config().loss_scale_factor) {
    throw Error(ErrorCode::kInvalidArgument, owner + ": the inner optimizer has a loss_scale_factor",
                "use one kind of loss scaling: drop loss_scale_factor from the inner optimizer");
  }
  if (!(std::isfinite(o.initial_scale) && o.initial_scale > 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: initial_scale = {} is invalid: it must be finite and > 0", owner, o.initial_scale));
  }
  if (o.dynamic_growth_steps < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: dynamic_growth_steps = {} is invalid: it must be >= 1",
                                                         owner, o.dynamic_growth_steps));
  }
  OptimizerConfig c = o.inner_optimizer->config();
  c.name = o.name;
  return c;
}

std::vector<Tensor> take(const std::vector<Tensor>& v, size_t begin, size_t count) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}

}  // namespace

LossScaleOptimizer::LossScaleOptimizer(LossScaleOptimizerOptions options)
    : Optimizer("LossScaleOptimizer", "loss_scale_optimizer", checked_config(options)), options_(std::move(options)) {}

std::vector<Array> LossScaleOptimizer::build(const std::vector<ir::TensorType>& variables) const {
  std::vector<Array> state = options_.inner_optimizer->build(variables);
  state.push_back(Array::scalar(0, DType::kI64));
  state.push_back(Array::scalar(options_.initial_scale, DType::kF32));
  return state;
}

int64_t LossScaleOptimizer::num_optimizer_variables(int64_t num_variables) const {
  return options_.inner_optimizer->num_optimizer_variables(num_variables) + 2;
}

std::vector<OptimizerVariableInfo> LossScaleOptimizer::variable_info(int64_t num_variables) const {
  std::vector<OptimizerVariableInfo> info = options_.inner_optimizer->variable_info(num_variables);
  info.push_back({"step_counter", std::nullopt});
  info.push_back({"dynamic_scale", std::nullopt});
  return info;
}

Tensor LossScaleOptimizer::scale_loss(const Tensor& loss, const std::vector<Tensor>& optimizer_variables) const {
  if (optimizer_variables.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "LossScaleOptimizer::scale_loss: no optimizer variables given",
                "pass the optimizer's state (build() layout): the dynamic scale is its last entry");
  }
  return loss * convert(optimizer_variables.back(), loss.dtype());
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> LossScaleOptimizer::apply(const std::vector<Tensor>& state,
                                                                              const std::vector<Tensor>& variables,
                                                                              const std::vector<Tensor>& gradients,
                                                                              const GradientLayout& layout) const {
  const int64_t want = num_optimizer_variables(static_cast<int64_t>(variables.size()));
  if (static_cast<int64_t>(state.size()) != want) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("LossScaleOptimizer::apply: {} optimizer variables for {} variables, expected {}",
                            state.size(), variables.size(), want),
                "pass the state build() made for these variables");
  }
  const size_t n_inner = state.size() - 2;
  const Tensor& counter = state[n_inner];
  const Tensor& scale = state[n_inner + 1];
  std::vector<Tensor> unscaled;
  Tensor finite = constant(Array::scalar(1, DType::kBool));
  Tensor split_nonfinite;  // devices whose block of a split gradient has a non-finite value
  for (size_t i = 0; i < gradients.size(); ++i) {
    const Tensor& g = gradients[i];
    if (!g.valid()) {
      unscaled.push_back(g);
      continue;
    }
    if (layout.is_split(i)) {
      const Tensor bad = convert(logical_not(all(isfinite(g))), DType::kF32);
      split_nonfinite = split_nonfinite.valid() ? split_nonfinite + bad : bad;
    } else {
      finite = logical_and(finite, all(isfinite(g)));
    }
    unscaled.push_back(g / convert(scale, g.dtype()));
  }
  if (split_nonfinite.valid()) {
    layout.check(class_name());
    finite = logical_and(finite, equal(layout.sum_over_devices(split_nonfinite), zeros_like(split_nonfinite)));
  }
  const std::vector<Tensor> inner_state = take(state, 0, n_inner);
  auto [new_vars, new_inner] = options_.inner_optimizer->apply(inner_state, variables, unscaled, layout);
  std::vector<Tensor> vars_out, state_out;
  for (size_t i = 0; i < variables.size(); ++i) vars_out.push_back(where(finite, new_vars[i], variables[i]));
  for (size_t i = 0; i < n_inner; ++i) state_out.push_back(where(finite, new_inner[i], inner_state[i]));
  // Keras: a finite step counts; at dynamic_growth_steps the scale doubles and the count restarts;
  // a non-finite step halves the scale and restarts the count.
  const Tensor counted = counter + constant(Array::scalar(1, DType::kI64));
  const Tensor grow = logical_and(
      finite,
      greater_equal(counted, constant(Array::scalar(static_cast<double>(options_.dynamic_growth_steps), DType::kI64))));
  const Tensor zero = constant(Array::scalar(0, DType::kI64));
  state_out.push_back(where(finite, where(grow, zero, counted), zero));
  state_out.push_back(where(finite, where(grow, scale * 2.0, scale), scale * 0.5));
  return {vars_out, state_out};
}

std::vector<Array> LossScaleOptimizer::finalize_variable_values(const std::vector<Array>& optimizer_variables,
                                                                const std::vector<Array>& variables) const {
  if (optimizer_variables.size() < 2) {
    throw Error(ErrorCode::kInvalidArgument, "LossScaleOptimizer::finalize_variable_values: the state is too short");
  }
  return options_.inner_optimizer->finalize_variable_values(
      std::vector<Array>(optimizer_variables.begin(), optimizer_variables.end() - 2), variables);
}

double LossScaleOptimizer::dynamic_scale(const std::vector<Array>& optimizer_variables) {
  if (optimizer_variables.empty() || optimizer_variables.back().dtype() != DType::kF32 ||
      optimizer_variables.back().rank() != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "LossScaleOptimizer::dynamic_scale: the state's last entry is not the f32 scale");
  }
  return to_host(optimizer_variables.back()).to_doubles().at(0);
}

std::pair<Tensor, std::vector<Tensor>> LossScaleOptimizer::update_step(const Tensor&, const Tensor&,
                                                                       const std::vector<Tensor>&, const Tensor&,
                                                                       const Tensor&) const {
  throw Error(ErrorCode::kInternal,
              "LossScaleOptimizer::update_step is never called: apply() delegates to the inner optimizer");
}

}  // namespace ingot::optimizers
