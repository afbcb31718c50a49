// keras.layers.MultiHeadAttention (include/ingot/trainer/attention.h).
#include "ingot/trainer/attention.h"

#include <fmt/format.h>

#include <cmath>

#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"

namespace ingot {

namespace {

void require_at_least_one(int64_t v, const char* option) {
  if (v < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("MultiHeadAttention: {} = {} is invalid: it must be >= 1", option, v),
                "e.g. MultiHeadAttentionOptions{.num_heads = 4, .key_dim = 16}");
  }
}

void require_rank3(const Shape& s, const char* what) {
  if (s.size() != 3) {
    throw Error(
        ErrorCode::kShapeMismatch,
        fmt::format("MultiHeadAttention: {} must be (batch, length, features), got {}", what, shape_to_string(s)));
  }
}

/// Keras's Softmax-with-mask constant (keras.src.layers.activations.softmax,
/// _large_negative_number): -1e9, but -3e4 for float16, whose range ends at 65504 -- -1e9 would
/// round to -inf there and (1 - mask) * -inf is NaN where the mask is 1 (mixed_float16 models).
double large_negative(DType dtype) { return dtype == DType::kF16 ? -3e4 : -1e9; }

}  // namespace

MultiHeadAttention::MultiHeadAttention(MultiHeadAttentionOptions options)
    : Layer(options.name), o_(std::move(options)) {
  require_at_least_one(o_.num_heads, "num_heads");
  require_at_least_one(o_.key_dim, "key_dim");
  if (o_.value_dim) require_at_least_one(*o_.value_dim, "value_dim");
  if (o_.output_shape) require_at_least_one(*o_.output_shape, "output_shape");
}

void MultiHeadAttention::build(const Shape& input_shape) { build_for(input_shape, input_shape, input_shape); }

void MultiHeadAttention::build_for(const Shape& query_shape, const Shape& value_shape, const Shape& key_shape) {
  if (built()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("MultiHeadAttention '{}' is already built", name()),
                "build a layer once (its first call builds it)");
  }
  require_rank3(query_shape, "the query");
  require_rank3(value_shape, "the value");
  require_rank3(key_shape, "the key");
  const int64_t h = o_.num_heads, k = o_.key_dim, v = o_.value_dim.value_or(o_.key_dim);
  const int64_t out = o_.output_shape.value_or(query_shape.back());
  q_kernel_ = &add_weight("query/kernel", {query_shape.back(), h, k}, o_.kernel_initializer);
  k_kernel_ = &add_weight("key/kernel", {key_shape.back(), h, k}, o_.kernel_initializer);
  v_kernel_ = &add_weight("value/kernel", {value_shape.back(), h, v}, o_.kernel_initializer);
  o_kernel_ = &add_weight("attention_output/kernel", {h, v, out}, o_.kernel_initializer);
  if (o_.use_bias) {
    q_bias_ = &add_weight("query/bias", {h, k}, o_.bias_initializer);
    k_bias_ = &add_weight("key/bias", {h, k}, o_.bias_initializer);
    v_bias_ = &add_weight("value/bias", {h, v}, o_.bias_initializer);
    o_bias_ = &add_weight("attention_output/bias", {out}, o_.bias_initializer);
  }
  mark_built();
}

Tensor MultiHeadAttention::call(LayerContext& ctx, const Tensor& x) {
  return attend(ctx, x, x, {.use_causal_mask = o_.use_causal_mask});
}

Tensor MultiHeadAttention::attend(LayerContext& ctx, const Tensor& query, const Tensor& value,
                                  const AttentionInputs& inputs) {
  return attend_with_scores(ctx, query, value, inputs).output;
}

/// x (batch, L, F) through kernel (F, H, D) and bias (H, D): (batch, H, L, D).
Tensor MultiHeadAttention::project(LayerContext& ctx, const Tensor& x, const Variable& kernel,
                                   const Variable* bias) const {
  const Shape& ks = kernel.shape();
  if (x.dim(-1) != ks[0]) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("MultiHeadAttention '{}': '{}' was built for {} features, got input {}", name(),
                            kernel.name(), ks[0], shape_to_string(x.shape())),
                "feed inputs of the feature sizes the layer was built for");
  }
  Tensor y = reshape(matmul(x, reshape(ctx.value(kernel), {ks[0], ks[1] * ks[2]})), {x.dim(0), x.dim(1), ks[1], ks[2]});
  if (bias != nullptr) y = y + ctx.value(*bias);
  return transpose(y, {0, 2, 1, 3});
}

/// The combined bool mask (batch or 1, T, S), or an invalid Tensor when nothing is masked.
Tensor MultiHeadAttention::mask_for(const Tensor& query, const Tensor& value, const AttentionInputs& inputs) const {
  const int64_t t = query.dim(1), s = value.dim(1);
  std::optional<Tensor> mask;
  if (inputs.attention_mask) {
    const Tensor& m = *inputs.attention_mask;
    if (m.dtype() != DType::kBool) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("MultiHeadAttention: attention_mask must be bool, got {}", dtype_name(m.dtype())),
                  "true where a query position may attend to a key position, e.g. not_equal(tokens, 0)");
    }
    const bool fits = m.rank() == 3 && (m.dim(0) == 1 || m.dim(0) == query.dim(0)) &&
                      (m.dim(1) == 1 || m.dim(1) == t) && (m.dim(2) == 1 || m.dim(2) == s);
    if (!fits) {
      throw Error(
          ErrorCode::kShapeMismatch,
          fmt::format("MultiHeadAttention: attention_mask {} does not broadcast to (batch, T, S) = ({}, {}, {})",
                      shape_to_string(m.shape()), query.dim(0), t, s),
          "pass (batch, T, S), or (batch, 1, S) for a key padding mask");
    }
    mask = m;
  }
  if (inputs.use_causal_mask) {
    const Tensor causal = greater_equal(iota({1, t, s}, 1, DType::kI64), iota({1, t, s}, 2, DType::kI64));
    mask = mask ? logical_and(*mask, causal) : causal;
  }
  return mask ? *mask : Tensor();
}

AttentionOutput MultiHeadAttention::attend_with_scores(LayerContext& ctx, const Tensor& query, const Tensor& value,
                                                       const AttentionInputs& inputs) {
  const Tensor& key = inputs.key ? *inputs.key : value;
  require_rank3(query.shape(), "the query");
  require_rank3(value.shape(), "the value");
  require_rank3(key.shape(), "the key");
  if (value.dim(0) != query.dim(0) || key.dim(0) != query.dim(0) || key.dim(1) != value.dim(1)) {
    throw Error(
        ErrorCode::kShapeMismatch,
        fmt::format(
            "MultiHeadAttention: query {}, value {} and key {} need one batch size, and key and value one length",
            shape_to_string(query.shape()), shape_to_string(value.shape()), shape_to_string(key.shape())));
  }
  if (!built()) build_for(query.shape(), value.shape(), key.shape());
  const Tensor q = project(ctx, query, *q_kernel_, q_bias_) * (1.0 / std::sqrt(static_cast<double>(o_.key_dim)));
  const Tensor k = project(ctx, key, *k_kernel_, k_bias_);
  const Tensor v = project(ctx, value, *v_kernel_, v_bias_);
  Tensor logits = matmul(q, transpose(k, {0, 1, 3, 2}));  // (batch, H, T, S)
  const Tensor mask = mask_for(query, value, inputs);
  if (mask.valid()) {
    logits = logits + (1.0 - convert(expand_dims(mask, 1), logits.dtype())) * large_negative(logits.dtype());
  }
  const Tensor scores = softmax(logits, -1);
  const Tensor heads = transpose(matmul(scores, v), {0, 2, 1, 3});  // (batch, T, H, V)
  const Shape& ok = o_kernel_->shape();
  Tensor out = matmul(reshape(heads, {query.dim(0), query.dim(1), ok[0] * ok[1]}),
                      reshape(ctx.value(*o_kernel_), {ok[0] * ok[1], ok[2]}));
  if (o_bias_ != nullptr) out = out + ctx.value(*o_bias_);
  return {out, scores};
}

}  // namespace ingot
