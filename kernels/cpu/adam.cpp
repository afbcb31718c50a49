// CPU reference of the multi-tensor Adam kernel (kernels/cuda/adam.cu;
// include/ingot/kernels/cuda_adam.h) and the option checks and scalars its launcher shares.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "../cuda/launch_checks.h"
#include "ingot/kernels/cuda_adam.h"
#include "ingot/runtime/error.h"

namespace ingot::kernels {
namespace detail {
namespace {

void check_option(std::string_view who, std::string_view name, double value, double lo, double hi, bool hi_open) {
  const bool ok = std::isfinite(value) && value >= lo && (hi_open ? value < hi : value <= hi);
  if (!ok) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: {} = {} is invalid: it must be in [{}, {}{}", who, name, value, lo, hi, hi_open ? ")" : "]"),
        "Keras's defaults: learning_rate 1e-3, beta_1 0.9, beta_2 0.999, epsilon 1e-7");
  }
}

}  // namespace

void check_adam_options(std::string_view who, const AdamOptions& o, int64_t step) {
  constexpr double kInf = std::numeric_limits<double>::max();
  check_in(who, "step", step, 1, std::numeric_limits<int64_t>::max());
  check_option(who, "learning_rate", o.learning_rate, 0.0, kInf, false);
  check_option(who, "beta_1", o.beta_1, 0.0, 1.0, true);
  check_option(who, "beta_2", o.beta_2, 0.0, 1.0, true);
  check_option(who, "epsilon", o.epsilon, 0.0, kInf, false);
  check_option(who, "weight_decay", o.weight_decay, 0.0, kInf, false);
}

AdamScalars adam_scalars(const AdamOptions& o, int64_t step) {
  const auto t = static_cast<double>(step);
  const double alpha = o.learning_rate * std::sqrt(1.0 - std::pow(o.beta_2, t)) / (1.0 - std::pow(o.beta_1, t));
  return {static_cast<float>(alpha), static_cast<float>(o.weight_decay * o.learning_rate)};
}

}  // namespace detail

void adam_reference(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                    const AdamOptions& options, int64_t step) {
  const char* who = "adam_reference";
  detail::check_adam_options(who, options, step);
  const auto n = static_cast<int64_t>(param.size());
  detail::check_size(who, "grad", static_cast<int64_t>(grad.size()), n);
  detail::check_size(who, "m", static_cast<int64_t>(m.size()), n);
  detail::check_size(who, "v", static_cast<int64_t>(v.size()), n);
  const detail::AdamScalars s = detail::adam_scalars(options, step);
  const auto beta_1 = static_cast<float>(options.beta_1), beta_2 = static_cast<float>(options.beta_2);
  const auto epsilon = static_cast<float>(options.epsilon);
  for (int64_t i = 0; i < n; ++i) {
    float wi = param[i];
    if (s.decay != 0.0f) wi = wi - wi * s.decay;
    const float mi = m[i] + (grad[i] - m[i]) * (1.0f - beta_1);
    const float vi = v[i] + (grad[i] * grad[i] - v[i]) * (1.0f - beta_2);
    m[i] = mi;
    v[i] = vi;
    param[i] = wi - (mi * s.alpha) / (std::sqrt(vi) + epsilon);
  }
}

}  // namespace ingot::kernels
