// Initializers (include/ingot/trainer/initializers.h).
#include "ingot/trainer/initializers.h"

#include <fmt/format.h>

#include <algorithm>
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

Initializer random_normal(double mean, double stddev) {
  if (!std::isfinite(mean) || !(stddev >= 0.0 && std::isfinite(stddev))) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("random_normal: mean {} must be finite and stddev {} finite and >= 0", mean, stddev),
                "the defaults are mean 0, stddev 0.05");
  }
  return [mean, stddev](const Shape& shape, DType dtype, uint64_t seed) {
    require_float(dtype, "random_normal");
    std::normal_distribution<double> n(mean, stddev);
    return fill(shape, dtype, seed, [&](std::mt19937_64& rng) { return stddev == 0.0 ? mean : n(rng); });
  };
}

Initializer random_uniform(double minval, double maxval) {
  if (!std::isfinite(minval) || !std::isfinite(maxval) || minval > maxval) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("random_uniform: minval {} and maxval {} must be finite with minval <= maxval", minval, maxval),
        "the defaults are -0.05, 0.05");
  }
  return [minval, maxval](const Shape& shape, DType dtype, uint64_t seed) {
    require_float(dtype, "random_uniform");
    std::uniform_real_distribution<double> u(minval, maxval);
    return fill(shape, dtype, seed, [&](std::mt19937_64& rng) { return minval == maxval ? minval : u(rng); });
  };
}

namespace {

/// Orthonormalises the columns of the row-major (m, n) matrix `a` (m >= n) in place by modified
/// Gram-Schmidt, run twice for accuracy: a becomes Q of a = QR with R's diagonal positive (the
/// norms), the sign convention Keras applies with q * sign(diag(r)).
void orthonormalize_columns(std::vector<double>& a, int64_t m, int64_t n) {
  auto at = [&](int64_t r, int64_t c) -> double& { return a[static_cast<size_t>(r * n + c)]; };
  for (int64_t j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (int64_t r = 0; r < m; ++r) dot += at(r, k) * at(r, j);
        for (int64_t r = 0; r < m; ++r) at(r, j) -= dot * at(r, k);
      }
    }
    double norm = 0;
    for (int64_t r = 0; r < m; ++r) norm += at(r, j) * at(r, j);
    norm = std::sqrt(norm);
    for (int64_t r = 0; r < m; ++r) at(r, j) /= norm;
  }
}

}  // namespace

Initializer orthogonal(double gain) {
  if (!std::isfinite(gain)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("orthogonal: gain must be finite, got {}", gain),
                "the default is 1");
  }
  return [gain](const Shape& shape, DType dtype, uint64_t seed) {
    require_float(dtype, "orthogonal");
    if (shape.size() < 2) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("orthogonal: shape {} has rank {}, needs rank >= 2", shape_to_string(shape), shape.size()),
          "use it for kernels, e.g. (in, out) or (kh, kw, in, out)");
    }
    const int64_t cols = shape.back(), rows = num_elements(shape) / std::max<int64_t>(cols, 1);
    const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> q(static_cast<size_t>(m * n));
    for (double& v : q) v = normal(rng);
    orthonormalize_columns(q, m, n);
    std::vector<double> out(q.size());
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        // rows >= cols: Q itself (m = rows); rows < cols: Q transposed (n = rows, m = cols).
        const size_t dst = rows >= cols ? static_cast<size_t>(r * n + c) : static_cast<size_t>(c * m + r);
        out[dst] = gain * q[static_cast<size_t>(r * n + c)];
      }
    }
    return Array::from_doubles(out, shape, dtype);
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
  if (name == "random_normal" || name == "normal") return random_normal();
  if (name == "random_uniform" || name == "uniform") return random_uniform();
  if (name == "orthogonal") return orthogonal();
  throw Error(ErrorCode::kNotFound, fmt::format("unknown initializer '{}'", name),
              "known: glorot_uniform, he_normal, random_normal (normal), random_uniform (uniform), orthogonal, zeros, "
              "ones (or pass an Initializer)");
}

}  // namespace ingot::initializers
