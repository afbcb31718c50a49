// Average pooling layers (include/ingot/trainer/layers_pooling.h).
#include "ingot/trainer/layers_pooling.h"

#include "layers_util.h"

namespace ingot {

using namespace layers_detail;

AveragePooling2D::AveragePooling2D(AveragePooling2DOptions options) : Layer(options.name), o_(std::move(options)) {
  check_pool_window(o_.pool_size, o_.strides, o_.padding, "AveragePooling2D");
}

Tensor AveragePooling2D::call(LayerContext&, const Tensor& x) {
  require_rank(x.shape(), 4, "AveragePooling2D", "batch, height, width, channels");
  return avg_pool2d(x, o_.pool_size, o_.strides, o_.padding);  // "same": divides by the in-bounds count
}

GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalAveragePooling2DOptions options)
    : Layer(options.name), o_(std::move(options)) {}

Tensor GlobalAveragePooling2D::call(LayerContext&, const Tensor& x) {
  require_rank(x.shape(), 4, "GlobalAveragePooling2D", "batch, height, width, channels");
  return mean(x, {1, 2}, o_.keepdims);
}

}  // namespace ingot
