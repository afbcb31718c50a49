// Causal flash-style attention forward, f32 (include/ingot/kernels/cuda_attention.h;
// docs/kernels-cuda.md). Compiled twice: by nvcc -ptx (the __CUDACC__ part: the kernel) and by
// the C++ compiler (the launcher). The CPU reference is kernels/cpu/attention.cpp.
#if defined(__CUDACC__)

#include "common.cuh"

namespace {

constexpr int kRows = 8;         // query rows per block, one warp each (kAttentionQueryRows)
constexpr int kTile = 32;        // keys per tile, one lane each (kAttentionKeyTile)
constexpr int kMaxDPerLane = 4;  // D <= 128 = 4 * 32: lane l owns dims l, l + 32, l + 64, l + 96

}  // namespace

// q, k, v (BH, T, D) -> out (BH, T, D), lse (BH, T). grid (BH * ceil(T / 8)), block (256),
// dynamic shared: q rows (8 x D) | key tile (32 x (D + 1)) | value tile (32 x D), f32.
// Warp w handles query row t = 8 * (block's row block) + w; per key tile, lane j scores key
// k0 + j (masked when k0 + j > t), the warp takes the tile max and rescales (online softmax),
// then accumulates p_j v_j over the tile's keys in order (p_j broadcast by shuffle).
extern "C" __global__ void __launch_bounds__(256)
    ingot_attention_forward_f32(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                float* __restrict__ out, float* __restrict__ lse, int64_t batch_heads, int64_t seq_len,
                                int64_t head_dim, float scale) {
  extern __shared__ float smem[];
  const int64_t row_blocks = (seq_len + kRows - 1) / kRows;
  const int64_t bh = blockIdx.x / row_blocks;
  if (bh >= batch_heads) return;  // uniform per block
  const int64_t q0 = (blockIdx.x % row_blocks) * kRows;
  const int64_t base = bh * seq_len * head_dim;
  const int warp = threadIdx.x / ingot_cuda::kWarpSize, lane = threadIdx.x % ingot_cuda::kWarpSize;
  const int64_t t = q0 + warp;
  const bool active = t < seq_len;
  float* q_s = smem;
  float* k_s = q_s + kRows * head_dim;
  float* v_s = k_s + kTile * (head_dim + 1);
  for (int64_t d = lane; d < head_dim; d += ingot_cuda::kWarpSize) {
    q_s[warp * head_dim + d] = active ? q[base + t * head_dim + d] : 0.0f;
  }
  float m = -INFINITY, l = 0.0f, acc[kMaxDPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int64_t kv_end = min(seq_len, q0 + kRows);
  for (int64_t k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();  // the previous tile is consumed
    for (int64_t i = threadIdx.x; i < kTile * head_dim; i += blockDim.x) {
      const int64_t j = i / head_dim, d = i % head_dim;
      const bool in = k0 + j < seq_len;
      k_s[j * (head_dim + 1) + d] = in ? k[base + (k0 + j) * head_dim + d] : 0.0f;
      v_s[i] = in ? v[base + (k0 + j) * head_dim + d] : 0.0f;
    }
    __syncthreads();
    if (!active || k0 > t) continue;  // uniform per warp
    const bool valid = k0 + lane <= t;
    float dot = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) dot += q_s[warp * head_dim + d] * k_s[lane * (head_dim + 1) + d];
    const float s = valid ? scale * dot : -INFINITY;
    const float m_new = fmaxf(m, ingot_cuda::warp_max(s));
    const float corr = expf(m - m_new);
    const float p = valid ? expf(s - m_new) : 0.0f;
    l = l * corr + ingot_cuda::warp_sum(p);
    for (int i = 0; i < kMaxDPerLane; ++i) acc[i] *= corr;
    const int64_t keys = min(static_cast<int64_t>(kTile), t - k0 + 1);
    for (int j = 0; j < keys; ++j) {
      const float pj = __shfl_sync(ingot_cuda::kFullMask, p, j);
      for (int i = 0; i < kMaxDPerLane; ++i) {
        const int64_t d = lane + i * ingot_cuda::kWarpSize;
        if (d < head_dim) acc[i] += pj * v_s[j * head_dim + d];
      }
    }
    m = m_new;
  }
  if (!active) return;
  for (int i = 0; i < kMaxDPerLane; ++i) {
    const int64_t d = lane + i * ingot_cuda::kWarpSize;
    if (d < head_dim) out[base + t * head_dim + d] = acc[i] / l;
  }
  if (lane == 0) lse[bh * seq_len + t] = m + logf(l);
}

#else  // the launcher

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ingot/kernels/cuda_attention.h"
#include "ingot/runtime/error.h"
#include "launch_checks.h"

namespace ingot::kernels {

int64_t attention_shared_bytes(int64_t head_dim) {
  return static_cast<int64_t>(sizeof(float)) *
         (kAttentionQueryRows * head_dim + kAttentionKeyTile * (head_dim + 1) + kAttentionKeyTile * head_dim);
}

CudaKernelLaunch attention_forward_launch(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                                          int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                                          std::optional<float> scale) {
  const char* who = "attention_forward_launch";
  detail::check_attention_args(who, batch, heads, seq_len, head_dim, scale);
  const int64_t batch_heads = batch * heads;
  const int64_t row_blocks = (seq_len + kAttentionQueryRows - 1) / kAttentionQueryRows;
  if (batch_heads > kMaxGridX / row_blocks) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: batch * heads * ceil(seq_len / {}) = {} * {} blocks exceed the grid's {}", who,
                            kAttentionQueryRows, batch_heads, row_blocks, kMaxGridX),
                "split the batch into several launches");
  }
  CudaKernelLaunch l{.kernel = "ingot_attention_forward_f32",
                     .grid = {batch_heads * row_blocks, 1, 1},
                     .block = {kAttentionThreads, 1, 1},
                     .shared_bytes = attention_shared_bytes(head_dim)};
  const std::array<std::pair<const char*, DevicePtr>, 5> ptrs = {
      {{"q", q}, {"k", k}, {"v", v}, {"out", out}, {"lse", lse}}};
  for (const auto& [name, p] : ptrs) {
    detail::check_address(who, name, p);
    l.params.push_back(param_ptr(p));
  }
  l.params.insert(l.params.end(), {param_i64(batch_heads), param_i64(seq_len), param_i64(head_dim),
                                   param_f32(scale.value_or(1.0f / std::sqrt(static_cast<float>(head_dim))))});
  check_launch_limits(l, 0, who);
  return l;
}

}  // namespace ingot::kernels

#endif
