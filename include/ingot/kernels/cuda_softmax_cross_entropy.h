// Fused softmax cross-entropy (kernels/cuda/softmax_cross_entropy.cu): forward per row of logits
// (B, C) f32 with integer labels (B,) i32 -> losses (B,) f32 and probabilities (B, C) f32;
// backward dlogits (B, C) = (probs - onehot(label)) * dloss / B, the gradient of the MEAN loss
// over the batch (dloss: its upstream gradient, one f32 on the device).
// Formulas: per row b, m = max_c x[b,c], s = sum_c exp(x[b,c] - m) (the log-sum-exp trick),
// loss[b] = (m - x[b,label[b]]) + log(s) = logsumexp(x[b]) - x[b,label[b]],
// probs[b,c] = exp(x[b,c] - m) / s. (Not exp(x - lse): for logits ~1e3, m + log(s) rounds to
// m's ulp, 6e-5.)
// CPU references below compute what the kernels compute, in f32 and in the same order of
// operations per row (sequential sums where the kernels use tree sums: equal to rounding).
#pragma once

#include <cstdint>
#include <span>

#include "ingot/kernels/cuda_launch.h"

namespace ingot::kernels {

/// Threads per block the softmax-CE kernels use for `classes` columns: classes rounded up to a
/// warp (32), at most 1024 (each thread then strides over the row).
int64_t softmax_ce_block_threads(int64_t classes);

/// The forward launch: grid (B), block (softmax_ce_block_threads(C)), no dynamic shared memory
/// (the block reduction uses 32 floats of static shared memory). Parameters: logits, labels,
/// losses, probs (device addresses of the shapes above), B, C (i64). A label outside [0, C)
/// gives a NaN loss for its row (the kernel cannot throw); its probabilities are still written.
/// Throws ingot::Error kInvalidArgument when batch < 1, batch > 2^31 - 1, classes < 1, or a
/// device address is 0.
CudaKernelLaunch softmax_ce_forward_launch(DevicePtr logits, DevicePtr labels, DevicePtr losses, DevicePtr probs,
                                           int64_t batch, int64_t classes);

/// The backward launch: grid (B), block (softmax_ce_block_threads(C)); parameters: probs,
/// labels, dloss (one f32), dlogits, B, C. dlogits may alias probs. A label outside [0, C)
/// contributes no one-hot term. Throws as softmax_ce_forward_launch.
CudaKernelLaunch softmax_ce_backward_launch(DevicePtr probs, DevicePtr labels, DevicePtr dloss, DevicePtr dlogits,
                                            int64_t batch, int64_t classes);

/// CPU reference of the forward kernel: logits (batch * classes), labels (batch) ->
/// losses (batch), probs (batch * classes). Throws ingot::Error kShapeMismatch when a span's
/// size disagrees with batch/classes, kInvalidArgument when batch or classes < 1, kOutOfRange
/// naming the row when a label is outside [0, classes); nothing is written then.
void softmax_ce_forward_reference(std::span<const float> logits, std::span<const int32_t> labels,
                                  std::span<float> losses, std::span<float> probs, int64_t batch, int64_t classes);

/// CPU reference of the backward kernel: dlogits = (probs - onehot(labels)) * dloss / batch.
/// Throws as softmax_ce_forward_reference.
void softmax_ce_backward_reference(std::span<const float> probs, std::span<const int32_t> labels, float dloss,
                                   std::span<float> dlogits, int64_t batch, int64_t classes);

}  // namespace ingot::kernels
