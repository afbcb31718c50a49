// Device helpers shared by the kernel families of kernels/cuda/ (included by their device part
// only): warp reductions by shuffle and block reductions through shared memory.
#pragma once

#include <cstdint>

namespace ingot_cuda {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

/// The max / sum of `v` over the 32 lanes of the warp, in every lane (butterfly shuffles).
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// The max (kMax) or sum of `v` over the block, in every thread. blockDim.x must be a multiple of
/// 32 (<= 1024); every thread of the block must call it (it synchronises). `scratch` holds 32
/// floats of shared memory, reusable once this returns.
template <bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (num_warps == 1) return v;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < num_warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  r = kMax ? warp_max(r) : warp_sum(r);
  __syncthreads();  // scratch may be reused by the caller's next reduction
  return r;
}

}  // namespace ingot_cuda
