// Fused multi-tensor Adam / AdamW, f32 (include/ingot/kernels/cuda_adam.h; docs/kernels-cuda.md).
// Compiled twice: by nvcc -ptx (the __CUDACC__ part: the kernel) and by the C++ compiler (the
// launcher). The CPU reference is kernels/cpu/adam.cpp.
#if defined(__CUDACC__)

#include "common.cuh"

// table: [sizes (n), params (n), grads (n), ms (n), vs (n)] (i64; addresses of f32 buffers).
// grid (blocks, n): blockIdx.y picks the tensor, the blocks stride over its elements.
extern "C" __global__ void ingot_adam_multi_tensor_f32(const int64_t* __restrict__ table, int64_t num_tensors,
                                                       float alpha, float beta_1, float beta_2, float epsilon,
                                                       float decay) {
  const int64_t t = blockIdx.y;
  if (t >= num_tensors) return;
  const int64_t size = table[t];
  float* w = reinterpret_cast<float*>(table[num_tensors + t]);
  const float* g = reinterpret_cast<const float*>(table[2 * num_tensors + t]);
  float* m = reinterpret_cast<float*>(table[3 * num_tensors + t]);
  float* v = reinterpret_cast<float*>(table[4 * num_tensors + t]);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < size; i += stride) {
    float wi = w[i];
    if (decay != 0.0f) wi = wi - wi * decay;
    const float gi = g[i];
    const float mi = m[i] + (gi - m[i]) * (1.0f - beta_1);
    const float vi = v[i] + (gi * gi - v[i]) * (1.0f - beta_2);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - (mi * alpha) / (sqrtf(vi) + epsilon);
  }
}

#else  // the launcher

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "ingot/kernels/cuda_adam.h"
#include "ingot/runtime/error.h"
#include "launch_checks.h"

namespace ingot::kernels {

std::vector<int64_t> adam_tensor_table(std::span<const AdamTensor> tensors) {
  const char* who = "adam_tensor_table";
  const auto n = static_cast<int64_t>(tensors.size());
  detail::check_in(who, "the number of tensors", n, 1, kMaxGridYZ);
  std::vector<int64_t> table(5 * n);
  for (int64_t i = 0; i < n; ++i) {
    const AdamTensor& t = tensors[i];
    detail::check_in(who, fmt::format("tensors[{}].size", i), t.size, 0, std::numeric_limits<int64_t>::max());
    if (t.size > 0) {
      for (const auto& [name, p] : {std::pair{"param", t.param}, {"grad", t.grad}, {"m", t.m}, {"v", t.v}}) {
        detail::check_address(who, fmt::format("tensors[{}].{}", i, name), p);
      }
    }
    table[i] = t.size;
    table[n + i] = static_cast<int64_t>(t.param);
    table[2 * n + i] = static_cast<int64_t>(t.grad);
    table[3 * n + i] = static_cast<int64_t>(t.m);
    table[4 * n + i] = static_cast<int64_t>(t.v);
  }
  return table;
}

CudaKernelLaunch adam_launch(DevicePtr table, std::span<const AdamTensor> tensors, const AdamOptions& options,
                             int64_t step) {
  const char* who = "adam_launch";
  detail::check_adam_options(who, options, step);
  detail::check_address(who, "table", table);
  adam_tensor_table(tensors);  // validates the list
  int64_t max_size = 0;
  for (const AdamTensor& t : tensors) max_size = std::max(max_size, t.size);
  const int64_t blocks = std::clamp<int64_t>((max_size + kAdamThreads - 1) / kAdamThreads, 1, kAdamMaxBlocksPerTensor);
  const detail::AdamScalars s = detail::adam_scalars(options, step);
  CudaKernelLaunch l{.kernel = "ingot_adam_multi_tensor_f32",
                     .grid = {blocks, static_cast<int64_t>(tensors.size()), 1},
                     .block = {kAdamThreads, 1, 1}};
  l.params = {param_ptr(table),
              param_i64(static_cast<int64_t>(tensors.size())),
              param_f32(s.alpha),
              param_f32(static_cast<float>(options.beta_1)),
              param_f32(static_cast<float>(options.beta_2)),
              param_f32(static_cast<float>(options.epsilon)),
              param_f32(s.decay)};
  check_launch_limits(l, 0, who);
  return l;
}

}  // namespace ingot::kernels

#endif
