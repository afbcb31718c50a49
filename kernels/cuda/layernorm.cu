// Layer normalisation, f32 (include/ingot/kernels/cuda_layernorm.h; docs/kernels-cuda.md).
// Compiled twice: by nvcc -ptx (the __CUDACC__ part: the kernels) and by the C++ compiler (the
// launchers). The CPU reference is kernels/cpu/layernorm.cpp.
#if defined(__CUDACC__)

#include "common.cuh"

// x (B, C), gamma (C), beta (C) -> out (B, C), mean (B), rstd (B). grid (B), block: multiple of
// 32. Two passes over the row (mean, then the centred variance) for accuracy.
extern "C" __global__ void ingot_layernorm_forward_f32(const float* __restrict__ x, const float* __restrict__ gamma,
                                                       const float* __restrict__ beta, float* __restrict__ out,
                                                       float* __restrict__ mean, float* __restrict__ rstd,
                                                       int64_t batch, int64_t channels, float eps) {
  __shared__ float scratch[ingot_cuda::kWarpSize];
  const int64_t row = blockIdx.x;
  if (row >= batch) return;
  const float* xr = x + row * channels;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) s += xr[c];
  const float m = ingot_cuda::block_reduce<false>(s, scratch) / static_cast<float>(channels);
  float q = 0.0f;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) q += (xr[c] - m) * (xr[c] - m);
  const float var = ingot_cuda::block_reduce<false>(q, scratch) / static_cast<float>(channels);
  const float r = 1.0f / sqrtf(var + eps);
  float* o = out + row * channels;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) o[c] = (xr[c] - m) * r * gamma[c] + beta[c];
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dout, x (B, C), gamma (C), mean, rstd (B) -> dx (B, C). grid (B), block: multiple of 32.
extern "C" __global__ void ingot_layernorm_backward_dx_f32(const float* __restrict__ dout, const float* __restrict__ x,
                                                           const float* __restrict__ gamma,
                                                           const float* __restrict__ mean,
                                                           const float* __restrict__ rstd, float* __restrict__ dx,
                                                           int64_t batch, int64_t channels) {
  __shared__ float scratch[ingot_cuda::kWarpSize];
  const int64_t row = blockIdx.x;
  if (row >= batch) return;
  const float* xr = x + row * channels;
  const float* dr = dout + row * channels;
  const float m = mean[row], r = rstd[row];
  float a = 0.0f, b = 0.0f;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const float dnorm = dr[c] * gamma[c];
    a += dnorm;
    b += dnorm * (xr[c] - m) * r;
  }
  const float n = static_cast<float>(channels);
  const float dnorm_mean = ingot_cuda::block_reduce<false>(a, scratch) / n;
  const float dnorm_norm_mean = ingot_cuda::block_reduce<false>(b, scratch) / n;
  float* d = dx + row * channels;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const float norm = (xr[c] - m) * r;
    d[c] = (dr[c] * gamma[c] - dnorm_mean - norm * dnorm_norm_mean) * r;
  }
}

// dout, x (B, C), mean, rstd (B) -> dgamma (C), dbeta (C). grid (ceil(C / blockDim.x)), one
// thread per column summing over the rows in order (reads of a row are coalesced across threads).
extern "C" __global__ void ingot_layernorm_backward_params_f32(const float* __restrict__ dout,
                                                               const float* __restrict__ x,
                                                               const float* __restrict__ mean,
                                                               const float* __restrict__ rstd,
                                                               float* __restrict__ dgamma, float* __restrict__ dbeta,
                                                               int64_t batch, int64_t channels) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float g = 0.0f, b = 0.0f;
  for (int64_t row = 0; row < batch; ++row) {
    const float d = dout[row * channels + c];
    g += d * ((x[row * channels + c] - mean[row]) * rstd[row]);
    b += d;
  }
  dgamma[c] = g;
  dbeta[c] = b;
}

#else  // the launchers

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ingot/kernels/cuda_layernorm.h"
#include "ingot/runtime/error.h"
#include "launch_checks.h"

namespace ingot::kernels {
namespace {

constexpr int64_t kStaticShared = 32 * sizeof(float);

void check_dims(const char* who, int64_t batch, int64_t channels, int64_t max_batch) {
  detail::check_in(who, "batch", batch, 1, max_batch);
  detail::check_in(who, "channels", channels, 1, std::numeric_limits<int64_t>::max());
  detail::checked_product(who, batch, channels);
}

template <size_t N>
void add_pointers(CudaKernelLaunch& l, const char* who, const std::array<DevicePtr, N>& ptrs,
                  const std::array<const char*, N>& names) {
  for (size_t i = 0; i < N; ++i) {
    detail::check_address(who, names[i], ptrs[i]);
    l.params.push_back(param_ptr(ptrs[i]));
  }
}

}  // namespace

int64_t layernorm_block_threads(int64_t channels) {
  const int64_t warps = (std::max<int64_t>(channels, 1) + 31) / 32;
  return std::min<int64_t>(warps, kMaxThreadsPerBlock / 32) * 32;
}

CudaKernelLaunch layernorm_forward_launch(DevicePtr x, DevicePtr gamma, DevicePtr beta, DevicePtr out, DevicePtr mean,
                                          DevicePtr rstd, int64_t batch, int64_t channels, float eps) {
  const char* who = "layernorm_forward_launch";
  check_dims(who, batch, channels, kMaxGridX);
  if (!std::isfinite(eps) || eps < 0.0f) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: eps = {} is invalid: it must be finite and >= 0", who, eps),
                "Keras's default epsilon is 1e-3");
  }
  CudaKernelLaunch l{.kernel = "ingot_layernorm_forward_f32",
                     .grid = {batch, 1, 1},
                     .block = {layernorm_block_threads(channels), 1, 1}};
  add_pointers<6>(l, who, {x, gamma, beta, out, mean, rstd}, {"x", "gamma", "beta", "out", "mean", "rstd"});
  l.params.insert(l.params.end(), {param_i64(batch), param_i64(channels), param_f32(eps)});
  check_launch_limits(l, kStaticShared, who);
  return l;
}

CudaKernelLaunch layernorm_backward_dx_launch(DevicePtr dout, DevicePtr x, DevicePtr gamma, DevicePtr mean,
                                              DevicePtr rstd, DevicePtr dx, int64_t batch, int64_t channels) {
  const char* who = "layernorm_backward_dx_launch";
  check_dims(who, batch, channels, kMaxGridX);
  CudaKernelLaunch l{.kernel = "ingot_layernorm_backward_dx_f32",
                     .grid = {batch, 1, 1},
                     .block = {layernorm_block_threads(channels), 1, 1}};
  add_pointers<6>(l, who, {dout, x, gamma, mean, rstd, dx}, {"dout", "x", "gamma", "mean", "rstd", "dx"});
  l.params.insert(l.params.end(), {param_i64(batch), param_i64(channels)});
  check_launch_limits(l, kStaticShared, who);
  return l;
}

CudaKernelLaunch layernorm_backward_params_launch(DevicePtr dout, DevicePtr x, DevicePtr mean, DevicePtr rstd,
                                                  DevicePtr dgamma, DevicePtr dbeta, int64_t batch, int64_t channels) {
  const char* who = "layernorm_backward_params_launch";
  check_dims(who, batch, channels, std::numeric_limits<int64_t>::max());
  detail::check_in(who, "channels", channels, 1, kMaxGridX * kLayernormParamsThreads);
  CudaKernelLaunch l{.kernel = "ingot_layernorm_backward_params_f32",
                     .grid = {(channels + kLayernormParamsThreads - 1) / kLayernormParamsThreads, 1, 1},
                     .block = {kLayernormParamsThreads, 1, 1}};
  add_pointers<6>(l, who, {dout, x, mean, rstd, dgamma, dbeta}, {"dout", "x", "mean", "rstd", "dgamma", "dbeta"});
  l.params.insert(l.params.end(), {param_i64(batch), param_i64(channels)});
  check_launch_limits(l, 0, who);
  return l;
}

}  // namespace ingot::kernels

#endif
