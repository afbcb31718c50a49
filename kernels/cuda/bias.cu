// Bias add + activation on a column-major f32 matrix, in place (include/ingot/kernels/cuda_bias.h;
// docs/kernels-cuda.md): the fallback of a cuBLASLt epilogue. Compiled twice: by nvcc -ptx (the
// __CUDACC__ part: the kernel) and by the C++ compiler (the launcher). The CPU reference is
// kernels/cpu/bias.cpp.
#if defined(__CUDACC__)

#include "common.cuh"

// c: (m rows, n columns, leading dimension ldc), column-major; bias: (m). Grid-stride over m * n.
extern "C" __global__ void ingot_bias_act_f32(float* __restrict__ c, const float* __restrict__ bias, int64_t m,
                                              int64_t n, int64_t ldc, int relu) {
  const int64_t total = m * n;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t i = e % m, j = e / m;
    float v = c[i + j * ldc] + bias[i];
    if (relu != 0) v = fmaxf(v, 0.0f);
    c[i + j * ldc] = v;
  }
}

#else  // the launcher

#include <algorithm>

#include "ingot/kernels/cuda_bias.h"
#include "launch_checks.h"

namespace ingot::kernels {

CudaKernelLaunch bias_act_launch(DevicePtr c, DevicePtr bias, int64_t m, int64_t n, int64_t ldc, bool relu) {
  const char* who = "bias_act_launch";
  detail::check_address(who, "c", c);
  detail::check_address(who, "bias", bias);
  detail::check_bias_shape(who, m, n, ldc);
  const int64_t total = detail::checked_product(who, m, n);
  CudaKernelLaunch l;
  l.kernel = "ingot_bias_act_f32";
  l.grid = {std::min((total + kBiasThreads - 1) / kBiasThreads, kBiasMaxBlocks), 1, 1};
  l.block = {kBiasThreads, 1, 1};
  l.params = {param_ptr(c), param_ptr(bias), param_i64(m), param_i64(n), param_i64(ldc), param_i32(relu ? 1 : 0)};
  check_launch_limits(l, 0, who);
  return l;
}

}  // namespace ingot::kernels

#endif
