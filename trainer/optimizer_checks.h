// Argument checks and small helpers shared by the optimizer files (optimizers.cpp,
// learning_rate_schedules.cpp, optimizers_builtin.cpp). Internal to ingot_trainer.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>

#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"

namespace ingot::optimizers::detail {

/// ingot::Error(kInvalidArgument) "<owner>: <option> = <value> is invalid: it must be <requirement>".
inline Error invalid_option(const std::string& owner, const std::string& option, double value,
                            const std::string& requirement, const std::string& hint = {}) {
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("{}: {} = {} is invalid: it must be {}", owner, option, value, requirement), hint);
}

/// Throws unless `value` is finite and >= `lo` (or > `lo` when `strict`).
inline void check_at_least(const std::string& owner, const std::string& option, double value, double lo, bool strict,
                           const std::string& hint = {}) {
  const bool ok = std::isfinite(value) && (strict ? value > lo : value >= lo);
  if (!ok) {
    throw invalid_option(owner, option, value, fmt::format("a finite number {} {}", strict ? ">" : ">=", lo), hint);
  }
}

/// Throws unless `value` lies in [lo, hi] (or [lo, hi) when `open_high`).
inline void check_in_range(const std::string& owner, const std::string& option, double value, double lo, double hi,
                           bool open_high) {
  const bool ok = value >= lo && (open_high ? value < hi : value <= hi);
  if (!ok) {
    throw invalid_option(owner, option, value, fmt::format("in [{}, {}{}", lo, hi, open_high ? ")" : "]"));
  }
}

/// `x` converted to `dtype` (no node when it already has it).
inline Tensor cast(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : convert(x, dtype); }

/// "f32[2, 3]" for error messages.
inline std::string type_string(const ir::TensorType& t) {
  return fmt::format("{}[{}]", dtype_name(t.dtype), fmt::join(t.shape, ", "));
}

}  // namespace ingot::optimizers::detail
