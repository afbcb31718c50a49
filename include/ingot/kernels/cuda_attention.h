// Causal scaled-dot-product attention, forward, flash-style (kernels/cuda/attention.cu;
// Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
// algorithm 1 with the causal mask; the online softmax of Milakov & Gimelshein 2018), f32:
// q, k, v (B, H, T, D) row-major, D <= 128 -> out (B, H, T, D) and lse (B, H, T), the
// log-sum-exp of each query's scaled, masked scores (what a backward pass needs).
// Per (b, h) and query t: out[t] = sum_{j <= t} softmax_j(scale * q[t] . k[j]) v[j], with
// scale = 1 / sqrt(D) by default; lse[t] = log(sum_{j <= t} exp(scale * q[t] . k[j])).
// The T x T score matrix is never stored: keys are processed in tiles of kAttentionKeyTile, each
// tile's maximum rescales the running sum and output (the online softmax).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ingot/kernels/cuda_launch.h"

namespace ingot::kernels {

/// Queries per block (one warp each), keys per tile, the largest head dim, and threads per block.
inline constexpr int64_t kAttentionQueryRows = 8;
inline constexpr int64_t kAttentionKeyTile = 32;
inline constexpr int64_t kAttentionMaxHeadDim = 128;
inline constexpr int64_t kAttentionThreads = kAttentionQueryRows * 32;

/// The dynamic shared memory of one block (bytes) for head dim `head_dim`: the block's query
/// rows (8 x D), a key tile padded against bank conflicts (32 x (D + 1)) and a value tile
/// (32 x D), f32.
int64_t attention_shared_bytes(int64_t head_dim);

/// The launch: grid (B * H * ceil(T / 8)), block (256), attention_shared_bytes(D) of dynamic
/// shared memory; parameters q, k, v, out, lse (device addresses), B * H, T, D (i64), scale
/// (f32; 1 / sqrt(D) unless given). Throws ingot::Error kInvalidArgument when batch, heads or
/// seq_len < 1, head_dim is outside [1, 128], scale is not finite, the grid exceeds 2^31 - 1
/// blocks, or an address is 0.
CudaKernelLaunch attention_forward_launch(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                                          int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                                          std::optional<float> scale = std::nullopt);

/// CPU reference of the kernel: the same tiles and f32 operations (score = scale * sequential
/// dot product; per tile: max, rescale, exp, sums in key order). Throws ingot::Error
/// kInvalidArgument as the launcher, kShapeMismatch naming the span whose size is wrong; nothing
/// is written then.
void attention_forward_reference(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                 std::span<float> out, std::span<float> lse, int64_t batch, int64_t heads,
                                 int64_t seq_len, int64_t head_dim, std::optional<float> scale = std::nullopt);

}  // namespace ingot::kernels
