// The built-in optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and optimizers::get; the base
// class and its contract are in optimizers.cpp / include/ingot/trainer/optimizers.h. Update rules
// and their order of operations as Keras 3's sgd.py, adam.py, adamw.py, rmsprop.py, adagrad.py.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ingot/trainer/optimizers.h"
#include "optimizer_checks.h"

namespace ingot::optimizers {

using detail::cast;
using detail::check_at_least;
using detail::check_in_range;
using detail::invalid_option;

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

SGD::SGD(SGDOptions options) : Optimizer("SGD", "SGD", common_config(options)), options_(std::move(options)) {
  check_in_range("SGD", "momentum", options_.momentum, 0.0, 1.0, false);
}

std::vector<std::string> SGD::slot_names() const {
  if (options_.momentum == 0.0) return {};
  return {"momentum"};
}

std::pair<Tensor, std::vector<Tensor>> SGD::update_step(const Tensor& gradient, const Tensor& variable,
                                                        const std::vector<Tensor>& slots, const Tensor& learning_rate,
                                                        const Tensor& /*iterations*/) const {
  if (slots.empty()) return {variable - gradient * learning_rate, {}};
  const Tensor momentum = scalar(options_.momentum, variable.dtype());
  const Tensor m = slots[0] * momentum - gradient * learning_rate;
  const Tensor updated = options_.nesterov ? variable + (m * momentum - gradient * learning_rate) : variable + m;
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

std::pair<Tensor, std::vector<Tensor>> Adam::update_step(const Tensor& gradient, const Tensor& variable,
                                                         const std::vector<Tensor>& slots, const Tensor& learning_rate,
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

AdamW::AdamW(AdamWOptions options) : Adam("AdamW", adam_options(options)), options_(std::move(options)) {}

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

std::pair<Tensor, std::vector<Tensor>> RMSprop::update_step(const Tensor& gradient, const Tensor& variable,
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
  check_at_least("Adagrad", "initial_accumulator_value", options_.initial_accumulator_value, 0.0, false,
                 "Keras's default is 0.1");
  check_at_least("Adagrad", "epsilon", options_.epsilon, 0.0, true);
}

std::vector<std::string> Adagrad::slot_names() const { return {"accumulator"}; }

double Adagrad::slot_initial_value(size_t /*slot*/) const { return options_.initial_accumulator_value; }

std::pair<Tensor, std::vector<Tensor>> Adagrad::update_step(const Tensor& gradient, const Tensor& variable,
                                                            const std::vector<Tensor>& slots,
                                                            const Tensor& learning_rate,
                                                            const Tensor& /*iterations*/) const {
  const Tensor accumulator = slots[0] + square(gradient);
  const Tensor updated = variable - (learning_rate * gradient) / sqrt(accumulator + options_.epsilon);
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
