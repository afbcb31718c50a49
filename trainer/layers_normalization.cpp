// Normalization layers (include/ingot/trainer/layers_normalization.h).
#include "ingot/trainer/layers_normalization.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "layers_util.h"

namespace ingot {

using namespace layers_detail;

namespace {

void require_epsilon(double epsilon, const char* layer) {
  if (!(epsilon > 0.0 && std::isfinite(epsilon))) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: epsilon must be finite and > 0, got {}", layer, epsilon),
                "the default is 1e-3");
  }
}

/// `axis` resolved against `rank` (negative from the end); the batch dim 0 is refused.
int64_t resolve_axis(int64_t axis, const Shape& input_shape, const char* layer) {
  const auto rank = static_cast<int64_t>(input_shape.size());
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 1 || a >= rank) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: axis {} does not name a feature dim of inputs {} (rank {})", layer, axis,
                            shape_to_string(input_shape), rank),
                "give a dim in [1, rank) or [-(rank - 1), -1]; dim 0 is the batch");
  }
  return a;
}

/// The dims of `rank` other than `keep` (the reduction axes).
std::vector<int64_t> other_axes(int64_t rank, const std::vector<int64_t>& keep) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(keep.begin(), keep.end(), d) == keep.end()) out.push_back(d);
  }
  return out;
}

/// v (sizes of x along `axes`) reshaped to broadcast against x: ones elsewhere.
Tensor broadcastable(const Tensor& v, const Tensor& x, const std::vector<int64_t>& axes) {
  Shape shape(static_cast<size_t>(x.rank()), 1);
  for (int64_t a : axes) shape[static_cast<size_t>(a)] = x.dim(a);
  return reshape(v, shape);
}

/// x * inv + (beta - mean * inv) with inv = gamma / sqrt(var + epsilon) (keras.ops.batch_normalization).
Tensor normalize(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor* gamma, const Tensor* beta,
                 double epsilon) {
  Tensor inv = rsqrt(var + epsilon);
  if (gamma != nullptr) inv = inv * *gamma;
  Tensor res = -mean * inv;
  if (beta != nullptr) res = res + *beta;
  return x * inv + res;
}

void require_float_input(const Tensor& x, const char* layer) {
  if (!is_floating(x.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch, fmt::format("{} expects float inputs, got {}", layer, dtype_name(x.dtype())),
                "convert the inputs (e.g. a Rescaling layer first)");
  }
}

/// Keras 3's normalization under mixed precision: f16 / bf16 inputs are converted to f32, `body`
/// (mean, variance, normalization) runs on them with the context's compute dtype set to f32 (the
/// f32 variables read unconverted) and its output is converted back to the input's dtype. Other
/// dtypes run `body` as they are.
template <class Body>
Tensor in_float32(LayerContext& ctx, const Tensor& x, Body&& body) {
  if (x.dtype() != DType::kF16 && x.dtype() != DType::kBF16) return body(x);
  const LayerContext::ComputeDTypeScope scope(ctx, DType::kF32);
  return convert(body(convert(x, DType::kF32)), x.dtype());
}

}  // namespace

// ---- BatchNormalization --------------------------------------------------------------------

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer(options.name), o_(std::move(options)) {
  if (!(o_.momentum >= 0.0 && o_.momentum <= 1.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("BatchNormalization: momentum must be in [0, 1], got {}", o_.momentum),
                "the default is 0.99");
  }
  require_epsilon(o_.epsilon, "BatchNormalization");
}

void BatchNormalization::build(const Shape& input_shape) {
  axis_ = resolve_axis(o_.axis, input_shape, "BatchNormalization");
  const Shape shape = {input_shape[static_cast<size_t>(axis_)]};
  if (o_.scale) gamma_ = &add_weight("gamma", shape, o_.gamma_initializer);
  if (o_.center) beta_ = &add_weight("beta", shape, o_.beta_initializer);
  moving_mean_ = &add_weight("moving_mean", shape, o_.moving_mean_initializer, /*trainable=*/false);
  moving_variance_ = &add_weight("moving_variance", shape, o_.moving_variance_initializer, /*trainable=*/false);
}

Tensor BatchNormalization::call(LayerContext& ctx, const Tensor& x) {
  require_float_input(x, "BatchNormalization");
  if (x.rank() <= axis_ || x.dim(axis_) != moving_mean_->shape()[0]) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("BatchNormalization '{}' was built for {} features on axis {}, got input shape {}", name(),
                            moving_mean_->shape()[0], axis_, shape_to_string(x.shape())),
                "feed inputs of the shape the model was built for");
  }
  return in_float32(ctx, x, [&](const Tensor& xf) { return normalize_batch(ctx, xf); });
}

Tensor BatchNormalization::normalize_batch(LayerContext& ctx, const Tensor& x) {
  const std::vector<int64_t> axes = {axis_};
  const std::vector<int64_t> reduce = other_axes(x.rank(), axes);
  const Tensor moving_mean = ctx.value(*moving_mean_), moving_variance = ctx.value(*moving_variance_);
  Tensor mean, var;
  if (ctx.training()) {
    if (ctx.batch_shards()) {
      // Over the global batch, as on one device: the shards' means of x, then of the squared
      // deviations from that global mean (both all-reduced over the batch axis).
      mean = ctx.batch_mean(x, reduce, /*keepdims=*/true);
      var = ctx.batch_mean(square(x - mean), reduce, /*keepdims=*/true);
    } else {
      mean = ::ingot::mean(x, reduce, /*keepdims=*/true);
      var = variance(x, reduce, /*keepdims=*/true);  // biased (divided by the count)
    }
    const double m = o_.momentum;
    ctx.set_value(*moving_mean_, moving_mean * m + reshape(mean, moving_mean.shape()) * (1.0 - m));
    ctx.set_value(*moving_variance_, moving_variance * m + reshape(var, moving_variance.shape()) * (1.0 - m));
  } else {
    mean = broadcastable(moving_mean, x, axes);
    var = broadcastable(moving_variance, x, axes);
  }
  std::optional<Tensor> gamma, beta;
  if (gamma_ != nullptr) gamma = broadcastable(ctx.value(*gamma_), x, axes);
  if (beta_ != nullptr) beta = broadcastable(ctx.value(*beta_), x, axes);
  return normalize(x, mean, var, gamma ? &*gamma : nullptr, beta ? &*beta : nullptr, o_.epsilon);
}

// ---- LayerNormalization --------------------------------------------------------------------

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer(options.name), o_(std::move(options)) {
  if (o_.axis.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "LayerNormalization: axis is empty", "give at least one dim, e.g. {-1}");
  }
  require_epsilon(o_.epsilon, "LayerNormalization");
}

void LayerNormalization::build(const Shape& input_shape) {
  std::vector<int64_t> axes;
  for (int64_t a : o_.axis) axes.push_back(resolve_axis(a, input_shape, "LayerNormalization"));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("LayerNormalization: axis ({}) names a dim twice for inputs {}", fmt::join(o_.axis, ", "),
                            shape_to_string(input_shape)),
                "give each dim once");
  }
  Shape shape;
  for (int64_t a : axes) shape.push_back(input_shape[static_cast<size_t>(a)]);
  axes_ = axes;
  if (o_.scale) gamma_ = &add_weight("gamma", shape, o_.gamma_initializer);
  if (o_.center) beta_ = &add_weight("beta", shape, o_.beta_initializer);
}

Tensor LayerNormalization::call(LayerContext& ctx, const Tensor& x) {
  require_float_input(x, "LayerNormalization");
  const Variable* built = gamma_ != nullptr ? gamma_ : beta_;
  bool fits = x.rank() > axes_.back();
  for (size_t i = 0; fits && built != nullptr && i < axes_.size(); ++i) fits = x.dim(axes_[i]) == built->shape()[i];
  if (!fits) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("LayerNormalization '{}' was built for axes ({}){}, got input shape {}", name(),
                            fmt::join(axes_, ", "), built ? " of sizes " + shape_to_string(built->shape()) : "",
                            shape_to_string(x.shape())),
                "feed inputs of the shape the model was built for");
  }
  return in_float32(ctx, x, [&](const Tensor& xf) { return normalize_sample(ctx, xf); });
}

Tensor LayerNormalization::normalize_sample(LayerContext& ctx, const Tensor& x) {
  const std::vector<int64_t> axes = axes_;
  const Tensor mean = ::ingot::mean(x, axes, /*keepdims=*/true);
  const Tensor var = variance(x, axes, /*keepdims=*/true);
  std::optional<Tensor> gamma, beta;
  if (gamma_ != nullptr) gamma = broadcastable(ctx.value(*gamma_), x, axes);
  if (beta_ != nullptr) beta = broadcastable(ctx.value(*beta_), x, axes);
  return normalize(x, mean, var, gamma ? &*gamma : nullptr, beta ? &*beta : nullptr, o_.epsilon);
}

}  // namespace ingot
