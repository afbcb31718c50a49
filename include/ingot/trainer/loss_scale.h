// keras.optimizers.LossScaleOptimizer: dynamic loss scaling for low-precision training
// (Micikevicius et al. 2018, "Mixed Precision Training", section 3.2). docs/trainer-optimizers.md.
#pragma once

#include <memory>
#include <string>

#include "ingot/trainer/optimizers.h"

namespace ingot::optimizers {

/// Options of LossScaleOptimizer (Keras's arguments and defaults).
struct LossScaleOptimizerOptions {
  /// The optimizer that updates the variables; required. Its own loss_scale_factor must be unset.
  std::shared_ptr<Optimizer> inner_optimizer;
  /// The first loss scale; finite and > 0 (Keras: 2^15).
  double initial_scale = 32768.0;
  /// Finite steps in a row after which the scale doubles; >= 1.
  int64_t dynamic_growth_steps = 2000;
  std::string name = "loss_scale_optimizer";
};

/// keras.optimizers.LossScaleOptimizer. The trainer differentiates loss * scale; apply() divides
/// the gradients by the scale and then, when every gradient element is finite, lets the inner
/// optimizer update and counts the step (after dynamic_growth_steps finite steps in a row the
/// scale doubles and the count restarts); when any element is inf or NaN it skips the update
/// (variables and inner state unchanged, the inner iteration count too), halves the scale and
/// restarts the count. Logs and metrics see the unscaled loss.
///
/// Optimizer variables: the inner optimizer's (its layout, so iterations and the learning rate
/// stay at [0] and [1] and learning-rate callbacks work unchanged), then step_counter (i64
/// scalar) and dynamic_scale (f32 scalar). Throws ingot::Error(kInvalidArgument) for a null inner
/// optimizer, one with loss_scale_factor, a non-positive or non-finite initial_scale, or
/// dynamic_growth_steps < 1.
class LossScaleOptimizer final : public Optimizer {
 public:
  explicit LossScaleOptimizer(LossScaleOptimizerOptions options);

  std::vector<Array> build(const std::vector<ir::TensorType>& variables) const override;
  /// Steps with a non-finite gradient anywhere (over all devices' blocks, `layout`) are skipped.
  std::pair<std::vector<Tensor>, std::vector<Tensor>> apply(const std::vector<Tensor>& optimizer_variables,
                                                            const std::vector<Tensor>& variables,
                                                            const std::vector<Tensor>& gradients,
                                                            const GradientLayout& layout = {}) const override;
  using Optimizer::scale_loss;
  /// loss * the current dynamic scale (optimizer_variables' last entry).
  Tensor scale_loss(const Tensor& loss, const std::vector<Tensor>& optimizer_variables) const override;
  int64_t num_optimizer_variables(int64_t num_variables) const override;
  /// The inner optimizer's, then "step_counter" (i64) and "dynamic_scale" (f32), both global.
  std::vector<OptimizerVariableInfo> variable_info(int64_t num_variables) const override;
  std::vector<Array> finalize_variable_values(const std::vector<Array>& optimizer_variables,
                                              const std::vector<Array>& variables) const override;

  /// The dynamic scale held by `optimizer_variables` (host side, e.g. for a callback or a test).
  static double dynamic_scale(const std::vector<Array>& optimizer_variables);
  const Optimizer& inner_optimizer() const { return *options_.inner_optimizer; }

 protected:
  std::vector<std::string> slot_names() const override { return {}; }
  std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& gradient, const Tensor& variable,
                                                     const std::vector<Tensor>& slots, const Tensor& learning_rate,
                                                     const Tensor& iterations) const override;

 private:
  LossScaleOptimizerOptions options_;
};

}  // namespace ingot::optimizers
