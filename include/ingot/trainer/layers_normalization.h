// Normalization layers (keras.layers.BatchNormalization, LayerNormalization). Included by
// layers.h.
#pragma once

#include <string>
#include <vector>

#include "ingot/trainer/layers.h"

namespace ingot {

/// keras.layers.BatchNormalization (Ioffe & Szegedy, 2015): x (batch, ...) float, any rank >= 2,
/// normalised per feature along `axis` (a channel dim, e.g. -1 for channels_last images) over all
/// the other dims: y = (x - mean) / sqrt(var + epsilon) * gamma + beta.
/// - Training (fit's train step): mean and var are the batch's statistics (var biased, divided by
///   the count, as jnp.var); the non-trainable moving statistics are updated through
///   LayerContext::set_value as Keras does: moving = moving * momentum + batch_stat * (1 - momentum).
///   Under a distribution the statistics are the global batch's (all-reduced over the batch axis,
///   LayerContext::batch_mean), so every device count gives the one-device result.
/// - Inference (evaluate, predict, training=false): mean and var are the moving statistics.
/// - Mixed precision (as Keras 3): f16 / bf16 inputs are converted to f32; the statistics, the
///   moving-statistics updates and the normalization are computed in f32 with the f32 variables,
///   and the output is converted back to the input's dtype (the compute dtype).
/// Variables, each (features,) f32 with features = input_shape[axis], in Keras's order: gamma
/// (if scale, trainable), beta (if center, trainable), moving_mean, moving_variance (non-trainable).
/// Bad options: ingot::Error(kInvalidArgument) naming the option (at construction; `axis` when
/// built on inputs it does not fit, before any variable is created).
struct BatchNormalizationOptions {
  int64_t axis = -1;       ///< the feature dim; negative counts from the end; not the batch dim
  double momentum = 0.99;  ///< in [0, 1]
  double epsilon = 1e-3;   ///< > 0, added to the variance
  bool center = true;      ///< learn the offset beta
  bool scale = true;       ///< learn the scale gamma
  Initializer beta_initializer = initializers::zeros();
  Initializer gamma_initializer = initializers::ones();
  Initializer moving_mean_initializer = initializers::zeros();
  Initializer moving_variance_initializer = initializers::ones();
  std::string name;
};
class BatchNormalization final : public Layer {
 public:
  explicit BatchNormalization(BatchNormalizationOptions options = {});
  std::string class_name() const override { return "BatchNormalization"; }
  void build(const Shape& input_shape) override;
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  /// call()'s computation on x of a checked shape, in x's dtype.
  Tensor normalize_batch(LayerContext& ctx, const Tensor& x);

  BatchNormalizationOptions o_;
  int64_t axis_ = -1;  ///< resolved against the built rank
  Variable* gamma_ = nullptr;
  Variable* beta_ = nullptr;
  Variable* moving_mean_ = nullptr;
  Variable* moving_variance_ = nullptr;
};

/// keras.layers.LayerNormalization (Ba et al., 2016): x (batch, ...) float, normalised per sample
/// over the dims in `axis` (default the last): y = (x - mean) / sqrt(var + epsilon) * gamma + beta,
/// mean and var (biased) over `axis`, the same in training and inference; f16 / bf16 inputs are
/// normalised in f32 and the output converted back (Keras 3's mixed precision). Variables (f32,
/// trainable): gamma (if scale), beta (if center), each of the input's sizes along the axes in
/// ascending order (features,) for the default axis. Bad options: ingot::Error(kInvalidArgument)
/// naming the option (`axis` when built on inputs it does not fit, before any variable exists).
struct LayerNormalizationOptions {
  std::vector<int64_t> axis = {-1};  ///< distinct dims, negative from the end; not the batch dim
  double epsilon = 1e-3;             ///< > 0, added to the variance
  bool center = true;                ///< learn the offset beta
  bool scale = true;                 ///< learn the scale gamma
  Initializer beta_initializer = initializers::zeros();
  Initializer gamma_initializer = initializers::ones();
  std::string name;
};
class LayerNormalization final : public Layer {
 public:
  explicit LayerNormalization(LayerNormalizationOptions options = {});
  std::string class_name() const override { return "LayerNormalization"; }
  void build(const Shape& input_shape) override;
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  /// call()'s computation on x of a checked shape, in x's dtype.
  Tensor normalize_sample(LayerContext& ctx, const Tensor& x);

  LayerNormalizationOptions o_;
  std::vector<int64_t> axes_;  ///< resolved against the built rank, ascending
  Variable* gamma_ = nullptr;
  Variable* beta_ = nullptr;
};

}  // namespace ingot
