// Helpers for the layer tests: a layer's forward pass as a function of (variables..., x) that the
// interpreter runs and check_grads differentiates, with the variables bound through LayerContext.
#pragma once

#include <memory>
#include <vector>

#include "ingot/interp/interpreter.h"
#include "ingot/trainer/layers.h"

namespace ingot::testing {

/// Builds `layer` for inputs of `shape` and `dtype` by tracing one call in build mode.
inline void build_layer(Layer& layer, const Shape& shape, DType dtype = DType::kF32) {
  TraceFn fn = [&layer](const std::vector<Tensor>& a) {
    LayerContext ctx(/*training=*/false, /*build_mode=*/true);
    return std::vector<Tensor>{layer(ctx, a[0])};
  };
  (void)trace(fn, {{shape, dtype}}, "build");
}

/// (variables..., x) -> (y, new values of the variables the call set...) of a built layer.
/// Variables may be bound to tensors of another float dtype (f64 for gradient checks).
inline TraceFn layer_fn(Layer& layer, bool training, bool with_updates = false) {
  return [&layer, training, with_updates](const std::vector<Tensor>& a) {
    std::vector<Variable*> vars = layer.variables();
    LayerContext ctx(training);
    for (size_t i = 0; i < vars.size(); ++i) ctx.bind(*vars[i], a[i]);
    std::vector<Tensor> out = {layer(ctx, a.back())};
    if (with_updates) {
      for (size_t i = 0; i < vars.size(); ++i) {
        if (auto v = ctx.new_value(*vars[i])) out.push_back(*v);
      }
    }
    return out;
  };
}

/// The variables' current values, each converted to `dtype` when it is a float (f64 for
/// gradient checks), followed by x.
inline std::vector<Array> layer_args(Layer& layer, const Array& x, std::optional<DType> dtype = std::nullopt) {
  std::vector<Array> args;
  for (Variable* v : layer.variables()) {
    Array value = v->value();
    if (dtype && is_floating(value.dtype())) value = Array::from_doubles(value.to_doubles(), value.shape(), *dtype);
    args.push_back(value);
  }
  args.push_back(x);
  return args;
}

/// Runs a built layer on x with the interpreter: (y, new variable values...).
inline std::vector<Array> run_layer(Layer& layer, const Array& x, bool training, bool with_updates = false) {
  std::vector<Array> args = layer_args(layer, x);
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  return interp::interpret(trace(layer_fn(layer, training, with_updates), types, "layer"), args);
}

}  // namespace ingot::testing
