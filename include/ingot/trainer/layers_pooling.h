// Average pooling layers (keras.layers.AveragePooling2D, GlobalAveragePooling2D), channels_last.
// Included by layers.h.
#pragma once

#include <string>
#include <vector>

#include "ingot/trainer/layers.h"

namespace ingot {

/// keras.layers.AveragePooling2D (channels_last): x (batch, h, w, c) float -> (batch, oh, ow, c),
/// each output the mean of a pool_size window moved by `strides` (default: pool_size).
/// "valid": oh = floor((h - pool_h) / stride_h) + 1; "same": oh = ceil(h / stride_h), and a window
/// that overhangs the border averages only its in-bounds elements (as Keras/TF; the padding is
/// not counted). Bad options: ingot::Error(kInvalidArgument) naming the option; inputs of another
/// rank: ingot::Error(kShapeMismatch).
struct AveragePooling2DOptions {
  std::vector<int64_t> pool_size = {2, 2};  ///< two sizes > 0
  std::vector<int64_t> strides;             ///< empty: pool_size
  std::string padding = "valid";            ///< "valid" or "same"
  std::string name;
};
class AveragePooling2D final : public Layer {
 public:
  explicit AveragePooling2D(AveragePooling2DOptions options = {});
  std::string class_name() const override { return "AveragePooling2D"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  AveragePooling2DOptions o_;
};

/// keras.layers.GlobalAveragePooling2D (channels_last): x (batch, h, w, c) float -> the mean over
/// h and w, (batch, c), or (batch, 1, 1, c) with keepdims. Inputs of another rank:
/// ingot::Error(kShapeMismatch).
struct GlobalAveragePooling2DOptions {
  bool keepdims = false;
  std::string name;
};
class GlobalAveragePooling2D final : public Layer {
 public:
  explicit GlobalAveragePooling2D(GlobalAveragePooling2DOptions options = {});
  std::string class_name() const override { return "GlobalAveragePooling2D"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  GlobalAveragePooling2DOptions o_;
};

}  // namespace ingot
