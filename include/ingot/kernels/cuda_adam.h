// Fused multi-tensor Adam / AdamW update (kernels/cuda/adam.cu), f32: one launch updates every
// tensor of a list in place: parameters w, gradients g, first and second moments m, v (each
// tensor i has sizes[i] elements in all four).
// Formulas: Keras's Adam (keras.optimizers.Adam; ingot's trainer/optimizers.cpp, Adam::update_step),
// Kingma & Ba 2015 with the epsilon of their section 2 ("epsilon hat"), for step t >= 1:
//   AdamW only (Loshchilov & Hutter 2019, decoupled, as Keras applies it first):
//     w = w - w * (weight_decay * lr)
//   m = m + (g - m) * (1 - beta_1)            (= beta_1 m + (1 - beta_1) g)
//   v = v + (g^2 - v) * (1 - beta_2)          (= beta_2 v + (1 - beta_2) g^2)
//   alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   w = w - (m * alpha) / (sqrt(v) + epsilon)
// i.e. w -= lr * m_hat / (sqrt(v_hat) + epsilon / sqrt(1 - beta_2^t)). alpha is computed on the
// host in double and passed as f32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ingot/kernels/cuda_launch.h"

namespace ingot::kernels {

/// Adam's hyper-parameters (Keras's defaults). weight_decay > 0 makes it AdamW.
struct AdamOptions {
  double learning_rate = 1e-3;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  double weight_decay = 0.0;
};

/// One tensor of a multi-tensor update: its element count and the device addresses of its
/// parameter, gradient, m and v buffers (f32, `size` elements each).
struct AdamTensor {
  int64_t size = 0;
  DevicePtr param = 0, grad = 0, m = 0, v = 0;
};

/// Threads per block of the Adam kernel, and the most blocks per tensor (each thread then
/// strides over its tensor).
inline constexpr int64_t kAdamThreads = 256;
inline constexpr int64_t kAdamMaxBlocksPerTensor = 4096;

/// The tensor table the kernel reads, to be copied to the device (8 * 5 * n bytes, i64):
/// [sizes (n), param addresses (n), grad addresses (n), m addresses (n), v addresses (n)].
/// Throws ingot::Error kInvalidArgument naming the tensor when a size is negative or an address
/// of a non-empty tensor is 0, or when `tensors` is empty.
std::vector<int64_t> adam_tensor_table(std::span<const AdamTensor> tensors);

/// The update's launch: grid (min(ceil(max size / 256), 4096), n), block (256); parameters:
/// table (device copy of adam_tensor_table(tensors)), n (i64), alpha, beta_1, beta_2, epsilon,
/// decay = weight_decay * learning_rate (f32). Throws ingot::Error kInvalidArgument when `table`
/// is 0, n > 65535 (split the list), step < 1, learning_rate or epsilon is negative or not
/// finite, a beta is outside [0, 1), weight_decay < 0, or as adam_tensor_table.
CudaKernelLaunch adam_launch(DevicePtr table, std::span<const AdamTensor> tensors, const AdamOptions& options,
                             int64_t step);

/// CPU reference of the kernel for one tensor, in place, with the same f32 operations
/// (alpha and decay rounded to f32 as the launcher does). Throws ingot::Error kShapeMismatch
/// when the spans' sizes differ, and as adam_launch for bad options or step; nothing is written then.
void adam_reference(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                    const AdamOptions& options, int64_t step);

}  // namespace ingot::kernels
