// Implicit-GEMM convolution for any StableHLO convolution (include/ingot/kernels/cuda_conv.h;
// docs/kernels-cuda.md): any dimension numbers, padding (negative = crop), strides, lhs/rhs
// dilation, feature and batch groups, 1-3 spatial dims, f32 and f64. Compiled twice: by nvcc
// -ptx (the __CUDACC__ part: the kernels) and by the C++ compiler (the launcher and the CPU
// emulation of the kernel's indexing). The CPU reference is convolution_reference() of
// kernels/cpu/conv.cpp.
#if defined(__CUDACC__)

#include "ingot/runtime/cuda_conv_params.h"

namespace {

using ingot::kernels::CudaConvParams;
constexpr int kMaxSpatial = static_cast<int>(ingot::kernels::kConvMaxSpatial);
constexpr int kTM = 64, kTN = 64, kTK = 16;  // kConvTileM/N/K
constexpr int kThreads = 256;                // kConvThreads: 16 x 16 threads, 4 x 4 results each
constexpr int kSub = 16;                     // threads along M (and N) of the compute layout

/// GEMM row m -> the lhs offset of its batch (and group) in `base` and the window origin
/// o_i * stride_i - pad_low_i per spatial dim in `origin`. False when m is past the rows.
__device__ __forceinline__ bool row_origin(const CudaConvParams& p, int64_t m, int64_t group, int64_t& base,
                                           int64_t (&origin)[kMaxSpatial]) {
  if (m >= p.m) return false;
  int64_t rest = m;
#pragma unroll
  for (int i = kMaxSpatial - 1; i >= 0; --i) {
    origin[i] = 0;
    if (i < p.num_spatial) {
      const int64_t o = rest % p.out_size[i];
      rest /= p.out_size[i];
      origin[i] = o * p.stride[i] - p.pad_low[i];
    }
  }
  base = rest * p.lhs_batch_stride + group * p.lhs_group_offset;
  return true;
}

/// The decomposition of the K step's 16 depths k0 + kk, computed once per block (so the
/// gathers need no divisions): k = tap * c_per_group + c, taps row-major over k_size.
struct KStep {
  int64_t lhs[kTK];               // c * lhs_feature_stride
  int64_t rhs[kTK];               // c * rhs_in_stride + sum t_i * rhs_stride_i
  int64_t tap[kMaxSpatial][kTK];  // t_i * rhs_dil_i
  bool ok[kTK];                   // k < K
};

/// Thread kk < 16 decomposes depth k0 + kk into `step`.
__device__ __forceinline__ void decompose(const CudaConvParams& p, int64_t k0, int kk, KStep& step) {
  const int64_t k = k0 + kk;
  step.ok[kk] = k < p.k;
  if (k >= p.k) return;
  int64_t tap = k / p.c_per_group;
  const int64_t c = k - tap * p.c_per_group;
  int64_t rhs = c * p.rhs_in_stride;
#pragma unroll
  for (int i = kMaxSpatial - 1; i >= 0; --i) {
    step.tap[i][kk] = 0;
    if (i < p.num_spatial) {
      const int64_t t = tap % p.k_size[i];
      tap /= p.k_size[i];
      step.tap[i][kk] = t * p.rhs_dil[i];
      rhs += t * p.rhs_stride[i];
    }
  }
  step.lhs[kk] = c * p.lhs_feature_stride;
  step.rhs[kk] = rhs;
}

/// A_g[m, kk]: the input element under depth kk of row m's window (`base`, `origin`: row_origin),
/// 0 in a padding or dilation hole or past K.
template <class T>
__device__ __forceinline__ T load_a(const CudaConvParams& p, const T* __restrict__ lhs, int64_t base,
                                    const int64_t (&origin)[kMaxSpatial], const KStep& step, int kk) {
  if (!step.ok[kk]) return T(0);
  int64_t off = base + step.lhs[kk];
#pragma unroll
  for (int i = 0; i < kMaxSpatial; ++i) {
    if (i < p.num_spatial) {
      int64_t pos = origin[i] + step.tap[i][kk];
      if (pos < 0) return T(0);
      if (p.lhs_dil[i] != 1) {
        if (pos % p.lhs_dil[i] != 0) return T(0);
        pos /= p.lhs_dil[i];
      }
      if (pos >= p.lhs_size[i]) return T(0);
      off += pos * p.lhs_stride[i];
    }
  }
  return lhs[off];
}

/// B_g[kk, n]: the kernel element of depth kk for output feature n of group g (0 past K or N).
template <class T>
__device__ __forceinline__ T load_b(const CudaConvParams& p, const T* __restrict__ rhs, int64_t group, int64_t n,
                                    const KStep& step, int kk) {
  if (!step.ok[kk] || n >= p.n_per_group) return T(0);
  return rhs[(group * p.n_per_group + n) * p.rhs_out_stride + step.rhs[kk]];
}

/// The result offset of GEMM row m (without the feature term).
__device__ __forceinline__ int64_t out_row_offset(const CudaConvParams& p, int64_t m) {
  int64_t rest = m, off = 0;
#pragma unroll
  for (int i = kMaxSpatial - 1; i >= 0; --i) {
    if (i < p.num_spatial) {
      off += (rest % p.out_size[i]) * p.out_stride[i];
      rest /= p.out_size[i];
    }
  }
  return off + rest * p.out_batch_stride;
}

// lhs, rhs, out: the operands' row-major buffers (shapes in the launcher's ConvSpec); p: by value.
// grid (ceil(M / 64), ceil(N_per_group / 64), groups), block (256). Per K step of 16, threads
// 0..15 decompose the step's depths into shared memory; then each thread loads 4 elements of the
// A tile (its row tid % 64, depths tid / 64 + 4j) and 4 of the B tile (column tid % 64) into
// shared memory, and accumulates the 4 x 4 results of rows tid % 16 + 16i and columns
// tid / 16 + 16j in ascending k.
template <class T>
__device__ void conv_implicit_gemm(const T* __restrict__ lhs, const T* __restrict__ rhs, T* __restrict__ out,
                                   const CudaConvParams& p) {
  __shared__ T a_tile[kTK][kTM];
  __shared__ T b_tile[kTK][kTN];
  __shared__ KStep step;
  const int tid = threadIdx.x;
  const int64_t group = blockIdx.z;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTM, n0 = static_cast<int64_t>(blockIdx.y) * kTN;
  const int lane = tid % kTM, depth = tid / kTM;  // loader layout
  int64_t base = 0;
  int64_t origin[kMaxSpatial];
  const bool row_ok = row_origin(p, m0 + lane, group, base, origin);
  const int tx = tid % kSub, ty = tid / kSub;  // compute layout
  T acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = T(0);
  }
  for (int64_t k0 = 0; k0 < p.k; k0 += kTK) {
    if (tid < kTK) decompose(p, k0, tid, step);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTK * kTM / kThreads; ++j) {
      const int kk = depth + (kThreads / kTM) * j;
      a_tile[kk][lane] = row_ok ? load_a(p, lhs, base, origin, step, kk) : T(0);
      b_tile[kk][lane] = load_b(p, rhs, group, n0 + lane, step, kk);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTK; ++kk) {
      T a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = a_tile[kk][tx + kSub * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = b_tile[kk][ty + kSub * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + tx + kSub * i;
    if (m >= p.m) continue;
    const int64_t row = out_row_offset(p, m);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + ty + kSub * j;
      if (n < p.n_per_group) out[row + (group * p.n_per_group + n) * p.out_feature_stride] = acc[i][j];
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    ingot_conv_implicit_gemm_f32(const float* __restrict__ lhs, const float* __restrict__ rhs, float* __restrict__ out,
                                 const CudaConvParams p) {
  conv_implicit_gemm<float>(lhs, rhs, out, p);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    ingot_conv_implicit_gemm_f64(const double* __restrict__ lhs, const double* __restrict__ rhs,
                                 double* __restrict__ out, const CudaConvParams p) {
  conv_implicit_gemm<double>(lhs, rhs, out, p);
}

#else  // the launcher and the CPU emulation

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "ingot/kernels/cuda_conv.h"
#include "ingot/runtime/error.h"
#include "launch_checks.h"

namespace ingot::kernels {
namespace {

constexpr const char* kWho = "cuda_conv_params";

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

size_t at(int64_t i) { return static_cast<size_t>(i); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

CudaConvParams cuda_conv_params(const ConvSpec& s) {
  check_conv_spec(s);
  const auto ns = static_cast<int64_t>(s.in_spatial.size());
  if (ns > kConvMaxSpatial) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the convolution has {} spatial dims; the CUDA kernels take at most {}", kWho, ns,
                            kConvMaxSpatial),
                "reshape the convolution to fewer spatial dims or run it on the CPU");
  }
  const std::vector<int64_t> ls = row_major_strides(s.lhs_shape), rs = row_major_strides(s.rhs_shape),
                             os = row_major_strides(s.out_shape);
  CudaConvParams p;
  p.num_spatial = ns;
  p.groups = s.feature_groups * s.batch_groups;
  p.out_batch = s.out_shape[at(s.out_batch)];
  p.c_per_group = s.rhs_shape[at(s.k_in_feature)];
  p.n_per_group = s.out_shape[at(s.out_feature)] / p.groups;
  p.m = p.out_batch;
  p.k = p.c_per_group;
  for (int64_t i = 0; i < ns; ++i) {
    const size_t si = at(i);
    p.lhs_size[si] = s.lhs_shape[at(s.in_spatial[si])];
    p.lhs_stride[si] = ls[at(s.in_spatial[si])];
    p.k_size[si] = s.rhs_shape[at(s.k_spatial[si])];
    p.rhs_stride[si] = rs[at(s.k_spatial[si])];
    p.out_size[si] = s.out_shape[at(s.out_spatial[si])];
    p.out_stride[si] = os[at(s.out_spatial[si])];
    p.stride[si] = s.strides[si];
    p.pad_low[si] = s.padding[2 * si];
    p.lhs_dil[si] = s.lhs_dilation[si];
    p.rhs_dil[si] = s.rhs_dilation[si];
    p.m = detail::checked_product(kWho, p.m, p.out_size[si]);
    p.k = detail::checked_product(kWho, p.k, p.k_size[si]);
  }
  p.lhs_batch_stride = ls[at(s.in_batch)];
  p.lhs_feature_stride = ls[at(s.in_feature)];
  p.lhs_group_offset = s.batch_groups > 1     ? p.out_batch * p.lhs_batch_stride
                       : s.feature_groups > 1 ? p.c_per_group * p.lhs_feature_stride
                                              : 0;
  p.rhs_in_stride = rs[at(s.k_in_feature)];
  p.rhs_out_stride = rs[at(s.k_out_feature)];
  p.out_batch_stride = os[at(s.out_batch)];
  p.out_feature_stride = os[at(s.out_feature)];
  return p;
}

std::string cuda_conv_kernel(DType dtype) {
  if (dtype == DType::kF32) return "ingot_conv_implicit_gemm_f32";
  if (dtype == DType::kF64) return "ingot_conv_implicit_gemm_f64";
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("cuda_conv_kernel: dtype {} has no convolution kernel", dtype_name(dtype)),
              "use f32 or f64 (other dtypes get generated loops)");
}

CudaKernelLaunch cuda_conv_launch(const CudaConvParams& p, DType dtype, DevicePtr lhs, DevicePtr rhs, DevicePtr out) {
  const char* who = "cuda_conv_launch";
  detail::check_in(who, "params.num_spatial", p.num_spatial, 0, kConvMaxSpatial);
  for (const auto& [name, v] : {std::pair{"params.m", p.m},
                                {"params.n_per_group", p.n_per_group},
                                {"params.k", p.k},
                                {"params.groups", p.groups}}) {
    detail::check_in(who, name, v, 1, std::numeric_limits<int64_t>::max());
  }
  detail::check_address(who, "lhs", lhs);
  detail::check_address(who, "rhs", rhs);
  detail::check_address(who, "out", out);
  CudaKernelLaunch l{.kernel = cuda_conv_kernel(dtype),
                     .grid = {ceil_div(p.m, kConvTileM), ceil_div(p.n_per_group, kConvTileN), p.groups},
                     .block = {kConvThreads, 1, 1}};
  l.params = {param_ptr(lhs), param_ptr(rhs), param_ptr(out)};
  check_launch_limits(l, kConvTileK * (kConvTileM + kConvTileN) * dtype_size(dtype) + kConvStepBytes, who);
  return l;
}

std::vector<int64_t> cuda_conv_param_words(const CudaConvParams& p) {
  std::vector<int64_t> words(sizeof(CudaConvParams) / sizeof(int64_t));
  std::memcpy(words.data(), &p, sizeof(CudaConvParams));
  return words;
}

CudaConvParams cuda_conv_params_from_words(std::span<const int64_t> words) {
  const auto want = static_cast<int64_t>(sizeof(CudaConvParams) / sizeof(int64_t));
  detail::check_size("cuda_conv_params_from_words", "words", static_cast<int64_t>(words.size()), want);
  CudaConvParams p;
  static_assert(std::is_trivially_copyable_v<CudaConvParams>);
  std::memcpy(static_cast<void*>(&p), words.data(), sizeof(CudaConvParams));
  return p;
}

namespace {

/// The kernel's A_g[m, k] (load_a), on the CPU.
template <class T>
T emulate_a(const CudaConvParams& p, const T* lhs, int64_t m, int64_t g, int64_t k) {
  int64_t rest = m, origin[kConvMaxSpatial] = {};
  for (int64_t i = p.num_spatial - 1; i >= 0; --i) {
    origin[at(i)] = (rest % p.out_size[at(i)]) * p.stride[at(i)] - p.pad_low[at(i)];
    rest /= p.out_size[at(i)];
  }
  int64_t tap = k / p.c_per_group;
  int64_t off = rest * p.lhs_batch_stride + g * p.lhs_group_offset + (k % p.c_per_group) * p.lhs_feature_stride;
  for (int64_t i = p.num_spatial - 1; i >= 0; --i) {
    const size_t si = at(i);
    int64_t pos = origin[si] + (tap % p.k_size[si]) * p.rhs_dil[si];
    tap /= p.k_size[si];
    if (pos < 0 || pos % p.lhs_dil[si] != 0 || pos / p.lhs_dil[si] >= p.lhs_size[si]) return T(0);
    off += pos / p.lhs_dil[si] * p.lhs_stride[si];
  }
  return lhs[off];
}

template <class T>
T emulate_b(const CudaConvParams& p, const T* rhs, int64_t g, int64_t n, int64_t k) {
  int64_t tap = k / p.c_per_group;
  int64_t off = (g * p.n_per_group + n) * p.rhs_out_stride + (k % p.c_per_group) * p.rhs_in_stride;
  for (int64_t i = p.num_spatial - 1; i >= 0; --i) {
    off += (tap % p.k_size[at(i)]) * p.rhs_stride[at(i)];
    tap /= p.k_size[at(i)];
  }
  return rhs[off];
}

int64_t emulate_out(const CudaConvParams& p, int64_t m, int64_t g, int64_t n) {
  int64_t rest = m, off = 0;
  for (int64_t i = p.num_spatial - 1; i >= 0; --i) {
    off += (rest % p.out_size[at(i)]) * p.out_stride[at(i)];
    rest /= p.out_size[at(i)];
  }
  return off + rest * p.out_batch_stride + (g * p.n_per_group + n) * p.out_feature_stride;
}

template <class T>
void emulate(const ConvSpec& s, std::span<const T> lhs, std::span<const T> rhs, std::span<T> out) {
  const CudaConvParams p = cuda_conv_params(s);
  const char* who = "cuda_conv_emulate";
  const struct {
    const char* name;
    size_t size;
    const std::vector<int64_t>& shape;
  } operands[] = {{"lhs", lhs.size(), s.lhs_shape}, {"rhs", rhs.size(), s.rhs_shape}, {"out", out.size(), s.out_shape}};
  for (const auto& o : operands) {
    int64_t n = 1;
    for (int64_t d : o.shape) n = detail::checked_product(who, n, d);
    detail::check_size(who, o.name, static_cast<int64_t>(o.size), n);
  }
  for (int64_t g = 0; g < p.groups; ++g) {
    for (int64_t m = 0; m < p.m; ++m) {
      for (int64_t n = 0; n < p.n_per_group; ++n) {
        T acc = T(0);
        for (int64_t k = 0; k < p.k; ++k) acc += emulate_a(p, lhs.data(), m, g, k) * emulate_b(p, rhs.data(), g, n, k);
        out[at(emulate_out(p, m, g, n))] = acc;
      }
    }
  }
}

}  // namespace

void cuda_conv_emulate(const ConvSpec& s, std::span<const float> lhs, std::span<const float> rhs,
                       std::span<float> out) {
  emulate(s, lhs, rhs, out);
}
void cuda_conv_emulate(const ConvSpec& s, std::span<const double> lhs, std::span<const double> rhs,
                       std::span<double> out) {
  emulate(s, lhs, rhs, out);
}

}  // namespace ingot::kernels

#endif
