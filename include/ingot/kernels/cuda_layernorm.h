// Layer normalisation over the last dim (kernels/cuda/layernorm.cu; Ba, Kiros & Hinton 2016,
// "Layer Normalization"), f32: x (B, C), gamma and beta (C) -> out (B, C), and the saved
// statistics mean (B) and rstd (B) the backward pass reads.
// Forward, per row b: mean = sum_c x / C, var = sum_c (x - mean)^2 / C (biased, as Keras's
// LayerNormalization), rstd = 1 / sqrt(var + eps), norm = (x - mean) * rstd,
// out = norm * gamma + beta.
// Backward (the formulas of llm.c's layernorm_backward), with dout (B, C):
//   dnorm = dout * gamma, dx = (dnorm - mean_c(dnorm) - norm * mean_c(dnorm * norm)) * rstd,
//   dgamma[c] = sum_b dout * norm, dbeta[c] = sum_b dout.
// dx, dgamma and dbeta are overwritten (not accumulated). CPU references below compute the same
// f32 formulas in the same order per row / column (sequential sums where the kernels use trees).
#pragma once

#include <cstdint>
#include <span>

#include "ingot/kernels/cuda_launch.h"

namespace ingot::kernels {

/// Threads per block of the per-row layer-norm kernels: C rounded up to a warp, at most 1024.
int64_t layernorm_block_threads(int64_t channels);

/// Threads per block of the dgamma/dbeta kernel (one thread per column).
inline constexpr int64_t kLayernormParamsThreads = 256;

/// Forward: grid (B), block (layernorm_block_threads(C)); parameters x, gamma, beta, out, mean,
/// rstd (device addresses), B, C (i64), eps (f32). Throws ingot::Error kInvalidArgument when
/// B < 1 or > 2^31 - 1, C < 1, eps is negative or not finite, or an address is 0.
CudaKernelLaunch layernorm_forward_launch(DevicePtr x, DevicePtr gamma, DevicePtr beta, DevicePtr out, DevicePtr mean,
                                          DevicePtr rstd, int64_t batch, int64_t channels, float eps);

/// Backward, dx: grid (B), block (layernorm_block_threads(C)); parameters dout, x, gamma, mean,
/// rstd, dx, B, C. Throws as layernorm_forward_launch.
CudaKernelLaunch layernorm_backward_dx_launch(DevicePtr dout, DevicePtr x, DevicePtr gamma, DevicePtr mean,
                                              DevicePtr rstd, DevicePtr dx, int64_t batch, int64_t channels);

/// Backward, dgamma and dbeta: grid (ceil(C / 256)), block (256), each thread sums one column
/// over the rows (deterministic, no atomics); parameters dout, x, mean, rstd, dgamma, dbeta,
/// B, C. Throws as layernorm_forward_launch (C at most 256 * (2^31 - 1)).
CudaKernelLaunch layernorm_backward_params_launch(DevicePtr dout, DevicePtr x, DevicePtr mean, DevicePtr rstd,
                                                  DevicePtr dgamma, DevicePtr dbeta, int64_t batch, int64_t channels);

/// CPU reference of the forward kernel (spans of the shapes above). Throws ingot::Error
/// kInvalidArgument for B or C < 1 or a negative / non-finite eps, kShapeMismatch naming the
/// span whose size is wrong; nothing is written then.
void layernorm_forward_reference(std::span<const float> x, std::span<const float> gamma, std::span<const float> beta,
                                 std::span<float> out, std::span<float> mean, std::span<float> rstd, int64_t batch,
                                 int64_t channels, float eps);

/// CPU reference of both backward kernels: dx (B, C), dgamma (C), dbeta (C). Throws as
/// layernorm_forward_reference.
void layernorm_backward_reference(std::span<const float> dout, std::span<const float> x, std::span<const float> gamma,
                                  std::span<const float> mean, std::span<const float> rstd, std::span<float> dx,
                                  std::span<float> dgamma, std::span<float> dbeta, int64_t batch, int64_t channels);

}  // namespace ingot::kernels
