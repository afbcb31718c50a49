// Initializers (include/ingot/trainer/initializers.h).
#include "ingot/trainer/initializers.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

namespace ingot::initializers {

std::pair<double, double> compute_fans(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  if (shape.size() == 2) return {static_cast<double>(shape[0]), static_cast<double>(shape[1])};
  double receptive = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) receptive *= static_cast<double>(shape[i]);
  return {static_cast<double>(shape[shape.size() - 2]) * receptive,
          static_cast<double>(shape[shape.size() - 1]) * receptive};
}

namespace {

void require_float(DType dtype, const char* who) {
  if (!is_floating(dtype)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("initializer {}: dtype {} is not a floating-point type", who, dtype_name(dtype)),
                "use zeros/ones/constant for integer variables");
  }
}

template <class Draw>
Array fill(const Shape& shape, DType dtype, uint64_t seed, Draw draw) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  for (double& x : v) x = draw(rng);
  return Array::from_doubles(v, shape, dtype);
}

}  // namespace

Initializer glorot_uniform() {
  return [](const Shape& shape, DType dtype, uint64_t seed) {
    require_float(dtype, "glorot_uniform");
    const auto [fan_in, fan_out] = compute_fans(shape);
    const double limit = std::sqrt(6.0 / std::max(1.0, fan_in + fan_out));
    std::uniform_real_distribution<double> u(-limit, limit);
    return fill(shape, dtype, seed, [&](std::mt19937_64& rng) { return u(rng); });
  };
}

Initializer he_normal() {
  return [](const Shape& shape, DType dtype, uint64_t seed) {
    require_float(dtype, "he_normal");
    const double stddev = std::sqrt(2.0 / std::max(1.0, compute_fans(shape).first));
    std::normal_distribution<double> n(0.0, 1.0);
    return fill(shape, dtype, seed, [&](std::mt19937_64& rng) {
      double z = n(rng);
      while (std::abs(z) > 2.0) z = n(rng);  // truncated at 2 standard deviations
      // Keras scales a truncated normal's stddev by 1/0.8796 so the variance is 2/fan_in.
      return z * stddev / 0.87962566103423978;
    });
  };
}

Initializer constant(double value) {
  return [value](const Shape& shape, DType dtype, uint64_t) { return Array::full(shape, value, dtype); };
}

Initializer zeros() { return constant(0); }
Initializer ones() { return constant(1); }

Initializer get(const std::string& name) {
  if (name == "glorot_uniform") return glorot_uniform();
  if (name == "he_normal") return he_normal();
  if (name == "zeros") return zeros();
  if (name == "ones") return ones();
  throw Error(ErrorCode::kNotFound, fmt::format("unknown initializer '{}'", name),
              "known: glorot_uniform, he_normal, zeros, ones (or pass an Initializer)");
}

}  // namespace ingot::initializers
