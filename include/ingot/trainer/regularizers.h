// Weight regularizers (keras.regularizers): functions from a weight tensor to a scalar penalty
// that a layer adds to the step's loss with LayerContext::add_loss, so the compiled loss (fit's
// gradient, the logged and evaluated loss) includes it, as Keras adds model.losses.
#pragma once

#include <functional>
#include <string>

#include "ingot/trace/ops.h"
#include "ingot/trace/tensor.h"

namespace ingot {

/// weights (any shape, float) -> penalty (shape (), the weights' dtype). Empty: no penalty.
using Regularizer = std::function<Tensor(const Tensor& weights)>;

namespace regularizers {

/// keras.regularizers.L1: l1 * sum(|w|). Throws ingot::Error(kInvalidArgument) naming l1 unless
/// it is finite and >= 0 (Keras's validate_float_arg).
Regularizer l1(double l1 = 0.01);
/// keras.regularizers.L2: l2 * sum(w^2) (no 1/2 factor, as Keras). Same checks as l1.
Regularizer l2(double l2 = 0.01);
/// keras.regularizers.L1L2: l1 * sum(|w|) + l2 * sum(w^2); defaults 0 as Keras's L1L2.
Regularizer l1_l2(double l1 = 0.0, double l2 = 0.0);
/// By Keras name with default arguments: "l1", "l2", "l1_l2". Unknown: ingot::Error(kNotFound)
/// listing the names.
Regularizer get(const std::string& name);

}  // namespace regularizers
}  // namespace ingot
