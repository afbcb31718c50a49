// Weight initializers (keras.initializers): functions from (shape, dtype, seed) to a new Array.
// Fans follow Keras's compute_fans: a 2-D (in, out) kernel has fan_in = in, fan_out = out; a
// convolution kernel (spatial..., in, out) multiplies both by the receptive field size.
#pragma once

#include <cstdint>
#include <functional>

#include "ingot/runtime/array.h"

namespace ingot {

/// (shape, dtype (a float dtype), seed) -> a new host Array. The same seed gives the same values.
using Initializer = std::function<Array(const Shape& shape, DType dtype, uint64_t seed)>;

namespace initializers {

/// Uniform in [-limit, limit], limit = sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010).
Initializer glorot_uniform();
/// Truncated normal (cut at 2 standard deviations, redrawn) with stddev sqrt(2 / fan_in)
/// (He et al., 2015; Keras's he_normal).
Initializer he_normal();
/// All zeros.
Initializer zeros();
/// All ones.
Initializer ones();
/// All `value`.
Initializer constant(double value);
/// By Keras name: "glorot_uniform", "he_normal", "zeros", "ones". Unknown: ingot::Error(kNotFound)
/// listing the known names.
Initializer get(const std::string& name);

/// Keras's compute_fans: (fan_in, fan_out) of a kernel shape (scalars and vectors: their size).
std::pair<double, double> compute_fans(const Shape& shape);

}  // namespace initializers
}  // namespace ingot
