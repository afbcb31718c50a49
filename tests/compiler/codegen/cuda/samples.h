// Sample graphs the CUDA suites share: graphs that together use every registry op, and the MLP
// and CNN train steps (forward, gradients, SGD). The `ptx` suite compiles them; the `gpu` suite
// runs them on a device against the interpreter.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "compiler/codegen/mlp_step.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/ir/graph.h"
#include "ingot/trace/ops.h"
#include "ingot/trace/tensor.h"

namespace ingot::testing {

/// One compiled sample: a traced function over inputs of the given types.
struct Sample {
  std::string name;
  TraceFn fn;
  std::vector<ir::TensorType> inputs;
};

inline ir::TensorType f32_type(Shape s) { return {std::move(s), DType::kF32}; }

/// Graphs that together use every op in the registry (checked by EverySampleOpIsCovered).
inline std::vector<Sample> samples() {
  using V = std::vector<Tensor>;
  return {
      {"unary_float",
       [](const V& a) {
         const Tensor& x = a[0];
         return V{negate(abs(x)) + sign(x) + exp(x) + log(abs(x) + 1.0) + log1p(abs(x)) + expm1(x) + tanh(x) +
                      sigmoid(x) + sqrt(abs(x)) + rsqrt(abs(x) + 1.0) + sin(x) + cos(x) + floor(x) + ceil(x) +
                      round(x) + erf(x),
                  convert(isfinite(x), DType::kF32)};
       },
       {f32_type({7, 33})}},
      {"binary",
       [](const V& a) {
         const Tensor &x = a[0], &y = a[1];
         return V{x + y,          x - y,         x * y,         x / (abs(y) + 1.0), remainder(x, y),
                  pow(abs(x), y), maximum(x, y), minimum(x, y), atan2(x, y)};
       },
       {f32_type({5, 40}), f32_type({5, 40})}},
      {"integer_and_bool",
       [](const V& a) {
         const Tensor &i = a[0], &j = a[1];
         const Tensor b = less(i, j), c = greater_equal(i, j);
         return V{i + j * i - j,     maximum(i, j),  remainder(i, j + 10), logical_and(b, c),  logical_or(b, c),
                  logical_xor(b, c), logical_not(b), where(b, i, j),       clamp(i, 0.0, 5.0), convert(i, DType::kF32)};
       },
       {{{6, 9}, DType::kI32}, {{6, 9}, DType::kI32}}},
      {"half",
       [](const V& a) { return V{convert(exp(a[0]) * a[0] + 1.0, DType::kF32), convert(sum(a[1], {1}), DType::kF32)}; },
       {{{4, 64}, DType::kF16}, {{4, 64}, DType::kBF16}}},
      {"structural",
       [](const V& a) {
         const Tensor& x = a[0];
         return V{transpose(x, {1, 0}),
                  reshape(x, {3, 24}),
                  slice(x, {1, 2}, {7, 9}, {2, 3}),
                  pad(x, 0.5, {1, 0}, {2, 3}, {0, 1}),
                  concatenate({x, x}, 0),
                  reverse(x, {0, 1}),
                  broadcast_to(expand_dims(sum(x, {0}), 0), {4, 8, 9}),
                  iota({4, 5}, 1, DType::kF32)};
       },
       {f32_type({8, 9})}},
      {"reductions",
       [](const V& a) {
         const Tensor& x = a[0];
         return V{sum(x),
                  mean(x, {1}),
                  max(x, {0}),
                  min(x, {2}),
                  prod(x, {1}),
                  convert(all(greater(x, full_like(x, -1.0)), {2}), DType::kF32),
                  convert(argmax(x, 2), DType::kF32),
                  convert(argmin(x, 1), DType::kF32),
                  logsumexp(x, {2}),
                  variance(x, {0})};
       },
       {f32_type({3, 5, 70})}},
      {"dot_general",
       [](const V& a) {
         return V{
             dot_general(a[0], a[1],
                         {.lhs_batching = {0}, .rhs_batching = {0}, .lhs_contracting = {2}, .rhs_contracting = {1}}),
             matmul(a[2], a[3])};
       },
       {f32_type({2, 6, 7}), f32_type({2, 7, 3}), f32_type({33, 17}), f32_type({17, 9})}},
      {"gather_scatter",
       [](const V& a) { return V{take(a[0], a[1]), scatter_add_rows({10, 4}, a[1], a[2])}; },
       {f32_type({10, 4}), {{6}, DType::kI32}, f32_type({6, 4})}},
      {"random_and_barrier",
       [](const V& a) {
         auto [state, bits] = rng_bit_generator(a[0], {16, 8});
         const Tensor kept = emit("optimization_barrier", {convert(bits, DType::kF32)})[0];
         return V{state, kept};
       },
       {{{2}, DType::kU64}}},
  };
}

/// The op names of the samples, the MLP and the CNN steps (their gradients included).
inline std::set<std::string> ops_of(const ir::Graph& g) {
  std::set<std::string> out;
  for (const ir::Node& n : g.nodes()) out.insert(n.op);
  return out;
}

inline ir::Graph mlp_train_step_graph() {
  const MlpSizes sizes{.widths = {784, 64, 10}};
  std::vector<ir::TensorType> types;
  for (size_t l = 0; l < sizes.num_layers(); ++l) {
    types.push_back(f32_type({sizes.widths[l], sizes.widths[l + 1]}));
    types.push_back(f32_type({sizes.widths[l + 1]}));
  }
  types.push_back(f32_type({32, 784}));
  types.push_back({{32}, DType::kI32});
  return trace(mlp_train_step(sizes, 0.1), types, "mlp_step");
}

/// conv 3x3 (1 -> 8) + relu + 2x2 max pool + dense (8*13*13 -> 10) + softmax cross-entropy, its
/// gradients and an SGD update: (kernel, bias, w, b, x (4, 28, 28, 1), labels (4,)) -> (new
/// parameters..., loss).
inline ir::Graph cnn_train_step_graph() {
  TraceFn loss = [](const std::vector<Tensor>& a) {
    Tensor h = relu(conv2d(a[4], a[0]) + a[1]);
    h = max_pool2d(h, {2, 2}, {2, 2});
    h = reshape(h, {4, 8 * 13 * 13});
    const Tensor logits = matmul(h, a[2]) + a[3];
    return std::vector<Tensor>{mean(negate(sum(one_hot(a[5], 10) * log_softmax(logits), {1})))};
  };
  TraceFn step = [loss](const std::vector<Tensor>& a) {
    std::vector<Tensor> vg = value_and_grad(loss, {0, 1, 2, 3})(a);
    std::vector<Tensor> out;
    for (size_t i = 0; i < 4; ++i) out.push_back(a[i] - vg[1 + i] * 0.01);
    out.push_back(vg[0]);
    return out;
  };
  return trace(step,
               {f32_type({3, 3, 1, 8}),
                f32_type({8}),
                f32_type({8 * 13 * 13, 10}),
                f32_type({10}),
                f32_type({4, 28, 28, 1}),
                {{4}, DType::kI32}},
               "cnn_step");
}

}  // namespace ingot::testing
