// keras.layers.Embedding. Included by layers.h.
#pragma once

#include <string>

#include "ingot/trainer/layers.h"

namespace ingot {

/// keras.layers.Embedding: integer indices x (batch, ...) -> rows of the embeddings table,
/// (batch, ..., output_dim) f32, e.g. (batch, seq) -> (batch, seq, output_dim). Float inputs are
/// converted to i32 first (truncated toward zero, as Keras casts them); bool inputs are an
/// ingot::Error(kDTypeMismatch). Variable: embeddings (input_dim, output_dim), trainable; its
/// gradient adds each looked-up row's cotangent into that row (scatter-add).
/// Out-of-range indices: the lookup is a StableHLO gather, which clamps start indices, so an
/// index < 0 reads row 0 and an index >= input_dim reads row input_dim - 1 (and their gradient
/// goes to that row); the interpreter and the compiled code agree. (Keras on JAX returns NaN rows
/// instead; validate indices beforehand when that matters.)
/// Bad options: ingot::Error(kInvalidArgument) naming the option.
struct EmbeddingOptions {
  int64_t input_dim = 0;                                                ///< vocabulary size (rows), > 0
  int64_t output_dim = 0;                                               ///< embedding size (columns), > 0
  Initializer embeddings_initializer = initializers::random_uniform();  ///< Keras's "uniform": U(-0.05, 0.05)
  Regularizer embeddings_regularizer;  ///< empty: none; else its penalty of the table joins the loss
  std::string name;
};
class Embedding final : public Layer {
 public:
  explicit Embedding(EmbeddingOptions options);
  std::string class_name() const override { return "Embedding"; }
  void build(const Shape& input_shape) override;
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  EmbeddingOptions o_;
  Variable* embeddings_ = nullptr;
};

}  // namespace ingot
