// Learning-rate schedules (keras.optimizers.schedules: ExponentialDecay, CosineDecay,
// PiecewiseConstantDecay) and LearningRate; see include/ingot/trainer/optimizers.h. Formulas as
// Keras 3's schedules/learning_rate_schedule.py.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "ingot/interp/interpreter.h"
#include "ingot/trainer/optimizers.h"
#include "optimizer_checks.h"

namespace ingot::optimizers {

using detail::cast;
using detail::check_at_least;
using detail::check_in_range;
using detail::invalid_option;
using detail::type_string;

// ---- LearningRate and schedules ----------------------------------------------------------------

double LearningRate::value() const {
  if (is_schedule_) {
    throw Error(ErrorCode::kFailedPrecondition, "the learning rate is a schedule, not a constant value",
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
                fmt::format("{}: decay_steps = {} is invalid: it must be > 0", owner, options_.decay_steps),
                "decay_steps is the number of iterations per factor of decay_rate");
  }
  check_at_least(owner, "initial_learning_rate", options_.initial_learning_rate, 0.0, false);
  check_at_least(owner, "decay_rate", options_.decay_rate, 0.0, false);
}

Tensor ExponentialDecay::operator()(const Tensor& step) const {
  if (step.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("ExponentialDecay: the step must be a scalar, got {}", type_string(step.type())));
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
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: alpha = {} is invalid: it must be in [0, 1]", owner, options_.alpha),
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
  const Tensor warming =
      scalar(options_.initial_learning_rate, dt) +
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
                            owner, o.boundaries.size(), fmt::join(o.boundaries, ", "), o.values.size(),
                            fmt::join(o.values, ", ")),
                "values[i] is the rate up to and including boundaries[i]; the last value holds "
                "after the last boundary");
  }
  for (size_t i = 1; i < o.boundaries.size(); ++i) {
    if (o.boundaries[i] <= o.boundaries[i - 1]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: boundaries [{}] must increase strictly, but boundaries[{}] = {} "
                              "<= boundaries[{}] = {}",
                              owner, fmt::join(o.boundaries, ", "), i, o.boundaries[i], i - 1, o.boundaries[i - 1]));
    }
  }
  for (size_t i = 0; i < o.values.size(); ++i) {
    check_at_least(owner, fmt::format("values[{}]", i), o.values[i], 0.0, false);
  }
}

}  // namespace

PiecewiseConstantDecay::PiecewiseConstantDecay(PiecewiseConstantDecayOptions options) : options_(std::move(options)) {
  check_piecewise_options(options_);
}

Tensor PiecewiseConstantDecay::operator()(const Tensor& step) const {
  if (step.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("PiecewiseConstantDecay: the step must be a scalar, got {}", type_string(step.type())));
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

}  // namespace ingot::optimizers
