// Option checks shared by the layer sources (trainer/layers*.cpp); not installed.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/runtime/shape.h"
#include "ingot/trainer/layers.h"

namespace ingot::layers_detail {

inline void require_positive(int64_t value, const char* layer, const char* option) {
  if (value <= 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} must be > 0, got {}", layer, option, value));
  }
}

inline void require_pair(const std::vector<int64_t>& v, const char* layer, const char* option) {
  if (v.size() != 2 || v[0] <= 0 || v[1] <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} must be two positive sizes, got ({})", layer, option, fmt::join(v, ", ")));
  }
}

inline void require_padding(const std::string& padding, const char* layer) {
  if (padding != "valid" && padding != "same") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: padding must be \"valid\" or \"same\", got \"{}\"", layer, padding));
  }
}

/// The window options of a 2-D pooling layer: pool_size and strides pairs of positive sizes
/// (empty strides become pool_size, Keras's default) and a known padding. Shared by
/// MaxPooling2D and AveragePooling2D.
inline void check_pool_window(const std::vector<int64_t>& pool_size, std::vector<int64_t>& strides,
                              const std::string& padding, const char* layer) {
  require_pair(pool_size, layer, "pool_size");
  if (strides.empty()) strides = pool_size;
  require_pair(strides, layer, "strides");
  require_padding(padding, layer);
}

inline void require_rank(const Shape& shape, size_t rank, const char* layer, const char* what) {
  if (shape.size() != rank) {
    throw Error(
        ErrorCode::kShapeMismatch,
        fmt::format("{} expects inputs of rank {} ({}), got shape {}", layer, rank, what, shape_to_string(shape)),
        "check the model's input shape");
  }
}

/// Adds `regularizer`'s penalty of `variable` to the step's loss; a penalty that is not a scalar
/// is an ingot::Error(kShapeMismatch) naming `option`.
inline void add_penalty(LayerContext& ctx, const Regularizer& regularizer, const Variable& variable,
                        const char* option) {
  const Tensor penalty = regularizer(ctx.value(variable));
  if (penalty.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{} of '{}' returned a penalty of shape {}, not a scalar", option, variable.name(),
                            shape_to_string(penalty.shape())),
                "a Regularizer must reduce the weights to a scalar (e.g. sum)");
  }
  ctx.add_loss(penalty);
}

}  // namespace ingot::layers_detail
