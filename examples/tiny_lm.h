// A small decoder-only transformer language model (Radford et al. 2018's GPT layout: token and
// position embeddings, pre-LayerNorm blocks of causal multi-head attention and a GELU MLP, a
// final LayerNorm and a vocabulary head), shared by examples/tiny_transformer_lm.cpp and
// `ingot bench` (tools/bench.cpp) -- and mirrored layer for layer by bench/peers/bench_peers.py.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ingot/trainer/attention.h"
#include "ingot/trainer/model.h"

namespace examples {

/// The LM's sizes. Inputs are (batch, context) i32 tokens in [0, vocab); outputs (batch, context,
/// vocab) f32 logits of the next token.
struct TinyLmConfig {
  int64_t context = 64;  ///< tokens per sequence (the position table's length)
  int64_t width = 64;    ///< model width; a multiple of heads
  int64_t heads = 4;     ///< attention heads (key_dim = width / heads)
  int64_t blocks = 2;    ///< transformer blocks
  int64_t vocab = 256;   ///< vocabulary size (256: bytes)
};

/// x + attention(norm(x)), then h + mlp(norm(h)): a pre-LayerNorm transformer block on
/// (batch, T, width); the MLP is Dense 4 * width GELU then Dense width.
class TinyLmBlock final : public ingot::Layer {
 public:
  explicit TinyLmBlock(const TinyLmConfig& c)
      : ln1_(track(std::make_shared<ingot::LayerNormalization>(ingot::LayerNormalizationOptions{}))),
        attn_(track(std::make_shared<ingot::MultiHeadAttention>(
            ingot::MultiHeadAttentionOptions{.num_heads = c.heads, .key_dim = c.width / c.heads}))),
        ln2_(track(std::make_shared<ingot::LayerNormalization>(ingot::LayerNormalizationOptions{}))),
        up_(track(std::make_shared<ingot::Dense>(ingot::DenseOptions{.units = 4 * c.width, .activation = "gelu"}))),
        down_(track(std::make_shared<ingot::Dense>(ingot::DenseOptions{.units = c.width}))) {}
  std::string class_name() const override { return "TinyLmBlock"; }
  ingot::Tensor call(ingot::LayerContext& ctx, const ingot::Tensor& x) override {
    const ingot::Tensor n = (*ln1_)(ctx, x);
    const ingot::Tensor h = x + attn_->attend(ctx, n, n, {.use_causal_mask = true});
    return h + (*down_)(ctx, (*up_)(ctx, (*ln2_)(ctx, h)));
  }

 private:
  std::shared_ptr<ingot::LayerNormalization> ln1_;
  std::shared_ptr<ingot::MultiHeadAttention> attn_;
  std::shared_ptr<ingot::LayerNormalization> ln2_;
  std::shared_ptr<ingot::Dense> up_, down_;
};

/// Tokens (batch, T) i32 with T <= context -> next-token logits (batch, T, vocab).
class TinyLm final : public ingot::Model {
 public:
  /// `options`: the model's name, weight seed and dtype policy (ingot::ModelOptions).
  explicit TinyLm(const TinyLmConfig& c = {}, ingot::ModelOptions options = {.name = "tiny_lm"})
      : Model(std::move(options)),
        tokens_(track(
            std::make_shared<ingot::Embedding>(ingot::EmbeddingOptions{.input_dim = c.vocab, .output_dim = c.width}))),
        positions_(track(std::make_shared<ingot::Embedding>(
            ingot::EmbeddingOptions{.input_dim = c.context, .output_dim = c.width}))),
        norm_(track(std::make_shared<ingot::LayerNormalization>(ingot::LayerNormalizationOptions{}))),
        head_(track(std::make_shared<ingot::Dense>(ingot::DenseOptions{.units = c.vocab}))) {
    for (int64_t i = 0; i < c.blocks; ++i) blocks_.push_back(track(std::make_shared<TinyLmBlock>(c)));
  }
  ingot::Tensor call(ingot::LayerContext& ctx, const ingot::Tensor& x) override {
    ingot::Tensor h = (*tokens_)(ctx, x) + (*positions_)(ctx, ingot::iota({1, x.dim(1)}, 1, ingot::DType::kI32));
    for (const auto& block : blocks_) h = (*block)(ctx, h);
    return (*head_)(ctx, (*norm_)(ctx, h));
  }

 private:
  std::shared_ptr<ingot::Embedding> tokens_, positions_;
  std::vector<std::shared_ptr<TinyLmBlock>> blocks_;
  std::shared_ptr<ingot::LayerNormalization> norm_;
  std::shared_ptr<ingot::Dense> head_;
};

}  // namespace examples
