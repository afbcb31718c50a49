// Argument checks shared by the launchers of kernels/cuda/ (host part; private to kernels/).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ingot/kernels/cuda_launch.h"

namespace ingot::kernels {
struct AdamOptions;
}

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

/// Adam's per-launch f32 scalars: alpha = lr * sqrt(1 - beta_2^step) / (1 - beta_1^step) and
/// decay = weight_decay * lr, computed in double (kernels/cpu/adam.cpp).
struct AdamScalars {
  float alpha = 0.0f;
  float decay = 0.0f;
};
AdamScalars adam_scalars(const AdamOptions& options, int64_t step);

/// Throws ingot::Error kInvalidArgument naming `who` and the option unless step >= 1, the
/// learning rate and epsilon are finite and >= 0, the betas are in [0, 1) and the weight decay
/// is finite and >= 0 (kernels/cpu/adam.cpp).
void check_adam_options(std::string_view who, const AdamOptions& options, int64_t step);

/// Throws ingot::Error kInvalidArgument naming `who` unless batch, heads, seq_len >= 1,
/// 1 <= head_dim <= 128, batch * heads * seq_len * head_dim fits int64 and `scale` (when given)
/// is finite (kernels/cpu/attention.cpp).
void check_attention_args(std::string_view who, int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                          std::optional<float> scale);

/// Throws ingot::Error kInvalidArgument naming `who` unless 1 <= m, n <= 2^40 and ldc >= m
/// (kernels/cpu/bias.cpp).
void check_bias_shape(std::string_view who, int64_t m, int64_t n, int64_t ldc);

}  // namespace ingot::kernels::detail
