// Argument checks shared by the launchers of kernels/cuda/ (host part; private to kernels/).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ingot/kernels/cuda_launch.h"

namespace ingot::kernels::detail {

/// Throws ingot::Error kInvalidArgument "<who>: <name> = <value> is invalid: it must be in
/// [lo, hi]" unless lo <= value <= hi.
void check_in(std::string_view who, std::string_view name, int64_t value, int64_t lo, int64_t hi);

/// Throws ingot::Error kInvalidArgument naming `who` and `name` when `p` is 0 (a null address).
void check_address(std::string_view who, std::string_view name, DevicePtr p);

/// Throws ingot::Error kShapeMismatch "<who>: <name> has <size> elements, expected <expected>".
void check_size(std::string_view who, std::string_view name, int64_t size, int64_t expected);

/// rows * cols, or ingot::Error kInvalidArgument naming `who` when it overflows int64.
int64_t checked_product(std::string_view who, int64_t rows, int64_t cols);

}  // namespace ingot::kernels::detail
