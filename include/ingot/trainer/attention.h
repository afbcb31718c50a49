// keras.layers.MultiHeadAttention (Vaswani et al. 2017, "Attention Is All You Need", section
// 3.2): scaled dot-product attention over several heads with learned projections.
// docs/trainer.md, "Attention".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ingot/trainer/layers.h"

namespace ingot {

/// Options of MultiHeadAttention (Keras's arguments, by name and default).
struct MultiHeadAttentionOptions {
  int64_t num_heads = 0;                ///< > 0
  int64_t key_dim = 0;                  ///< size of each head for query and key; > 0
  std::optional<int64_t> value_dim;     ///< size of each head for value; default key_dim
  bool use_bias = true;                 ///< biases in the four projections
  std::optional<int64_t> output_shape;  ///< output features; default the query's last dim
  /// Mask future positions when the layer is called as a self-attention layer (call(ctx, x)):
  /// Keras's `use_causal_mask` call argument, an option here because call() takes one tensor.
  bool use_causal_mask = false;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
  std::string name;
};

/// What an attention call takes besides query and value (Keras's call arguments).
struct AttentionInputs {
  /// Keys (batch, S, key features); default: the value.
  std::optional<Tensor> key;
  /// Which query position may attend to which key position: bool, broadcastable to
  /// (batch, T, S) (e.g. a key padding mask (batch, 1, S)); true = attend. Default: all.
  std::optional<Tensor> attention_mask;
  /// And a causal mask: query position i attends to key positions j <= i (Keras: row index >=
  /// column index of a (T, S) matrix).
  bool use_causal_mask = false;
};

/// Output and attention weights of MultiHeadAttention::attend_with_scores.
struct AttentionOutput {
  Tensor output;  ///< (batch, T, output features)
  Tensor scores;  ///< (batch, num_heads, T, S): softmax weights after masking
};

/// keras.layers.MultiHeadAttention without attention dropout. Weights (Keras's layout and
/// names): query/kernel (query features, num_heads, key_dim), key/kernel (key features, num_heads,
/// key_dim), value/kernel (value features, num_heads, value_dim), each with a bias
/// (num_heads, dim); attention_output/kernel (num_heads, value_dim, output features) and its bias
/// (output features). The attention: q = query W_q + b_q scaled by 1/sqrt(key_dim), k, v likewise
/// unscaled; scores = softmax over S of q.k with masked positions set to -1e9 first (Keras's
/// Softmax with a mask; a fully masked row therefore attends uniformly); output = (scores . v)
/// projected by attention_output. Inputs are (batch, T, features), f32 (the weights' dtype; the
/// computation follows the inputs' floating-point dtype).
///
/// Throws ingot::Error: kInvalidArgument for num_heads, key_dim, value_dim or output_shape < 1
/// (constructor); kShapeMismatch for inputs that are not rank 3, batch sizes or key/value lengths
/// that differ, feature sizes other than those built for, or a mask that does not broadcast to
/// (batch, T, S); kDTypeMismatch for a mask that is not bool.
class MultiHeadAttention final : public Layer {
 public:
  explicit MultiHeadAttention(MultiHeadAttentionOptions options);
  std::string class_name() const override { return "MultiHeadAttention"; }

  /// Self-attention weights for inputs (batch, T, features): query, key and value features alike.
  void build(const Shape& input_shape) override;
  /// Weights for query (batch, T, Fq), value (batch, S, Fv) and key (batch, S, Fk) shapes; marks
  /// the layer built. ingot::Error(kFailedPrecondition) when it is built already.
  void build_for(const Shape& query_shape, const Shape& value_shape, const Shape& key_shape);
  /// Self-attention: attend(ctx, x, x, {.use_causal_mask = options.use_causal_mask}).
  Tensor call(LayerContext& ctx, const Tensor& x) override;
  /// Attention of `query` (batch, T, Fq) over `value` (batch, S, Fv); builds on first use.
  Tensor attend(LayerContext& ctx, const Tensor& query, const Tensor& value, const AttentionInputs& inputs = {});
  /// attend() and the attention weights (Keras's return_attention_scores=True).
  AttentionOutput attend_with_scores(LayerContext& ctx, const Tensor& query, const Tensor& value,
                                     const AttentionInputs& inputs = {});

 private:
  Tensor project(LayerContext& ctx, const Tensor& x, const Variable& kernel, const Variable* bias) const;
  Tensor mask_for(const Tensor& query, const Tensor& value, const AttentionInputs& inputs) const;

  MultiHeadAttentionOptions o_;
  Variable *q_kernel_ = nullptr, *q_bias_ = nullptr, *k_kernel_ = nullptr, *k_bias_ = nullptr;
  Variable *v_kernel_ = nullptr, *v_bias_ = nullptr, *o_kernel_ = nullptr, *o_bias_ = nullptr;
};

}  // namespace ingot
