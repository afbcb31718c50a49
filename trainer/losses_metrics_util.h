// Helpers shared by losses.cpp and metrics.cpp (private to ingot_trainer).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/runtime/shape.h"
#include "ingot/trace/ops.h"

namespace ingot::losses_metrics_detail {

/// Throws ingot::Error(kTraceError) naming `fn` and `arg` when `t` is an invalid (default) Tensor.
inline void require_valid(const char* fn, const char* arg, const Tensor& t) {
  if (!t.valid()) {
    throw Error(ErrorCode::kTraceError, fmt::format("{}: {} is an invalid (empty) Tensor", fn, arg),
                "pass a Tensor of the current trace");
  }
}

/// NumPy's broadcast shape of `a` and `b` (trailing dimensions aligned, size 1 stretches), or
/// nullopt when they do not broadcast.
inline std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

/// Keras's divide_no_nan: x / y where y != 0, else 0. The division runs on a divisor with its
/// zeros replaced by 1, so neither the value nor the gradient of the unselected branch is NaN.
inline Tensor divide_no_nan(const Tensor& x, const Tensor& y) {
  const Tensor is_zero = equal(y, zeros_like(y));
  const Tensor safe = where(is_zero, ones_like(y), y);
  const Tensor q = x / safe;
  return where(is_zero, zeros_like(q), q);
}

/// Checks that `state` has `count` valid f32 elements of shape `shape`; names the metric.
inline void check_state_of(const std::string& metric, const std::vector<Tensor>& state, size_t count,
                           const Shape& shape) {
  if (state.size() != count) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("metric '{}': state has {} elements, expected {}", metric, state.size(), count),
                "pass the state that initial_state() / update_state() of this metric returned");
  }
  for (size_t i = 0; i < state.size(); ++i) {
    require_valid(metric.c_str(), "a state element", state[i]);
    if (state[i].dtype() != DType::kF32 || state[i].shape() != shape) {
      throw Error(state[i].dtype() != DType::kF32 ? ErrorCode::kDTypeMismatch : ErrorCode::kShapeMismatch,
                  fmt::format("metric '{}': state element {} is {}{}, expected f32{}", metric, i,
                              dtype_name(state[i].dtype()), shape_to_string(state[i].shape()), shape_to_string(shape)),
                  "pass the state that initial_state() / update_state() of this metric returned");
    }
  }
}

}  // namespace ingot::losses_metrics_detail
