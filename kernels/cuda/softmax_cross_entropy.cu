// Fused softmax cross-entropy, f32 (include/ingot/kernels/cuda_softmax_cross_entropy.h;
// docs/kernels-cuda.md). This file is compiled twice: by nvcc -ptx (the __CUDACC__ part: the
// kernels) and by the C++ compiler (the rest: the launchers). The CPU reference is
// kernels/cpu/softmax_cross_entropy.cpp.
#if defined(__CUDACC__)

#include "common.cuh"

// logits (B, C), labels (B,) i32 -> losses (B,), probs (B, C). grid (B), block: a multiple of 32.
// Per row: m = max(x), s = sum exp(x - m), loss = (m - x[label]) + log(s) (NaN for a label
// outside [0, C)), probs = exp(x - m) / s. (m - x[label] is exact-ish for huge logits where
// m + log(s) would round to m's ulp.)
extern "C" __global__ void ingot_softmax_ce_forward_f32(const float* __restrict__ logits,
                                                        const int32_t* __restrict__ labels, float* __restrict__ losses,
                                                        float* __restrict__ probs, int64_t batch, int64_t classes) {
  __shared__ float scratch[ingot_cuda::kWarpSize];
  const int64_t row = blockIdx.x;
  if (row >= batch) return;  // uniform per block
  const float* x = logits + row * classes;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = fmaxf(m, x[c]);
  m = ingot_cuda::block_reduce<true>(m, scratch);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) s += expf(x[c] - m);
  s = ingot_cuda::block_reduce<false>(s, scratch);
  const float inv_s = 1.0f / s;
  float* p = probs + row * classes;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) p[c] = expf(x[c] - m) * inv_s;
  if (threadIdx.x == 0) {
    const int64_t label = labels[row];
    losses[row] = label >= 0 && label < classes ? (m - x[label]) + logf(s) : NAN;
  }
}

// probs (B, C), labels (B,) i32, dloss (1,) -> dlogits (B, C) = (probs - onehot) * dloss / B.
// grid (B), block: any multiple of 32. dlogits may alias probs (each element read then written by
// one thread).
extern "C" __global__ void ingot_softmax_ce_backward_f32(const float* probs, const int32_t* __restrict__ labels,
                                                         const float* __restrict__ dloss, float* dlogits, int64_t batch,
                                                         int64_t classes) {
  const int64_t row = blockIdx.x;
  if (row >= batch) return;
  const float scale = dloss[0] / static_cast<float>(batch);
  const int64_t label = labels[row];
  const float* p = probs + row * classes;
  float* d = dlogits + row * classes;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) d[c] = (p[c] - (c == label ? 1.0f : 0.0f)) * scale;
}

#else  // the launchers

#include <algorithm>
#include <limits>

#include "ingot/kernels/cuda_softmax_cross_entropy.h"
#include "launch_checks.h"

namespace ingot::kernels {
namespace {

CudaKernelLaunch row_launch(const char* kernel, const char* who, std::array<DevicePtr, 4> ptrs,
                            std::array<const char*, 4> names, int64_t batch, int64_t classes) {
  detail::check_in(who, "batch", batch, 1, kMaxGridX);
  detail::check_in(who, "classes", classes, 1, std::numeric_limits<int64_t>::max());
  detail::checked_product(who, batch, classes);
  for (size_t i = 0; i < ptrs.size(); ++i) detail::check_address(who, names[i], ptrs[i]);
  CudaKernelLaunch l{.kernel = kernel, .grid = {batch, 1, 1}, .block = {softmax_ce_block_threads(classes), 1, 1}};
  for (DevicePtr p : ptrs) l.params.push_back(param_ptr(p));
  l.params.push_back(param_i64(batch));
  l.params.push_back(param_i64(classes));
  check_launch_limits(l, 32 * sizeof(float), who);
  return l;
}

}  // namespace

int64_t softmax_ce_block_threads(int64_t classes) {
  const int64_t warps = (std::max<int64_t>(classes, 1) + 31) / 32;
  return std::min<int64_t>(warps, kMaxThreadsPerBlock / 32) * 32;
}

CudaKernelLaunch softmax_ce_forward_launch(DevicePtr logits, DevicePtr labels, DevicePtr losses, DevicePtr probs,
                                           int64_t batch, int64_t classes) {
  return row_launch("ingot_softmax_ce_forward_f32", "softmax_ce_forward_launch", {logits, labels, losses, probs},
                    {"logits", "labels", "losses", "probs"}, batch, classes);
}

CudaKernelLaunch softmax_ce_backward_launch(DevicePtr probs, DevicePtr labels, DevicePtr dloss, DevicePtr dlogits,
                                            int64_t batch, int64_t classes) {
  return row_launch("ingot_softmax_ce_backward_f32", "softmax_ce_backward_launch", {probs, labels, dloss, dlogits},
                    {"probs", "labels", "dloss", "dlogits"}, batch, classes);
}

}  // namespace ingot::kernels

#endif
