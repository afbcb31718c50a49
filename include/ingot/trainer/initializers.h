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
/// Normal with `mean` and `stddev` (keras.initializers.RandomNormal, defaults mean 0, stddev
/// 0.05). Throws ingot::Error(kInvalidArgument) naming the argument for a non-finite mean or a
/// negative or non-finite stddev.
Initializer random_normal(double mean = 0.0, double stddev = 0.05);
/// Uniform in [minval, maxval) (keras.initializers.RandomUniform, defaults -0.05, 0.05). Throws
/// ingot::Error(kInvalidArgument) naming the arguments unless both are finite and minval <= maxval.
Initializer random_uniform(double minval = -0.05, double maxval = 0.05);
/// An orthogonal matrix times `gain` (keras.initializers.Orthogonal; Saxe et al., 2014): the
/// shape is flattened to (rows = product of all dims but the last, cols = last dim); Q of the QR
/// decomposition of a (max, min) standard normal matrix, its columns' signs fixed so R's diagonal
/// is positive, transposed when rows < cols. So the columns (rows >= cols) or the rows
/// (rows < cols) are orthonormal (times gain). Shapes of rank < 2: ingot::Error(kInvalidArgument)
/// when called; a non-finite gain: ingot::Error(kInvalidArgument) here.
Initializer orthogonal(double gain = 1.0);
/// All zeros.
Initializer zeros();
/// All ones.
Initializer ones();
/// All `value`.
Initializer constant(double value);
/// By Keras name with default arguments: "glorot_uniform", "he_normal", "random_normal" (alias
/// "normal"), "random_uniform" (alias "uniform"), "orthogonal", "zeros", "ones". Unknown:
/// ingot::Error(kNotFound) listing the known names.
Initializer get(const std::string& name);

/// Keras's compute_fans: (fan_in, fan_out) of a kernel shape (scalars and vectors: their size).
std::pair<double, double> compute_fans(const Shape& shape);

}  // namespace initializers
}  // namespace ingot
