// The parameter block of the implicit-GEMM convolution kernels (kernels/cuda/conv.cu), shared by
// the kernels (nvcc) and their launcher (include/ingot/kernels/cuda_conv.h): plain int64 fields
// only, so that its bytes are the same on both sides and it can be carried as int64 words
// (CudaConv::params in include/ingot/runtime/cuda_program.h). No C++20 here: nvcc compiles it
// as C++17. At the runtime level because the program format carries it (the runtime checks a
// CudaConv step's word count); in namespace ingot::kernels, where it was made.
#pragma once

#include <cstdint>

namespace ingot::kernels {

/// The most spatial dims the CUDA convolution kernels take (3: 1-D, 2-D and 3-D convolutions).
inline constexpr int64_t kConvMaxSpatial = 3;

/// One convolution as the kernels see it, as an implicit GEMM per group g in [0, groups):
///   out[m, g * n_per_group + n] = sum over k of A_g[m, k] * B_g[k, n]
/// with m = (out batch index, out spatial indices) row-major over (out_batch, out_size...),
/// n an output feature within group g, k = (kernel tap, input feature within the group) with the
/// feature innermost: k = tap * c_per_group + c, taps row-major over k_size. A_g[m, k] is the
/// input element at batch b (+ the group's offset), feature c (+ the group's offset) and spatial
/// positions p_i = o_i * stride_i - pad_low_i + t_i * rhs_dil_i, read only where p_i is a
/// multiple of lhs_dil_i and p_i / lhs_dil_i is inside lhs_size_i (padding and lhs-dilation holes
/// are zeros). All strides are in elements of the row-major operand buffers. Spatial arrays
/// hold num_spatial entries; the rest are 0 (unused).
struct CudaConvParams {
  int64_t num_spatial = 0;       ///< spatial dims, 0..kConvMaxSpatial
  int64_t m = 0;                 ///< out_batch * prod(out_size): GEMM rows
  int64_t n_per_group = 0;       ///< output features per group: GEMM columns
  int64_t k = 0;                 ///< c_per_group * prod(k_size): GEMM depth
  int64_t groups = 1;            ///< feature_groups * batch_groups (one of them is 1)
  int64_t out_batch = 0;         ///< size of the result's batch dim
  int64_t c_per_group = 0;       ///< input features per group (the kernel's input-feature dim)
  int64_t lhs_group_offset = 0;  ///< elements between the lhs slices of consecutive groups
  int64_t lhs_batch_stride = 0, lhs_feature_stride = 0;
  int64_t rhs_in_stride = 0, rhs_out_stride = 0;
  int64_t out_batch_stride = 0, out_feature_stride = 0;
  int64_t lhs_size[kConvMaxSpatial] = {}, lhs_stride[kConvMaxSpatial] = {};
  int64_t k_size[kConvMaxSpatial] = {}, rhs_stride[kConvMaxSpatial] = {};
  int64_t out_size[kConvMaxSpatial] = {}, out_stride[kConvMaxSpatial] = {};
  int64_t stride[kConvMaxSpatial] = {}, pad_low[kConvMaxSpatial] = {};
  int64_t lhs_dil[kConvMaxSpatial] = {}, rhs_dil[kConvMaxSpatial] = {};
};

/// Tile sizes of the kernels: a block computes kConvTileM x kConvTileN results of one group with
/// kConvThreads threads (4 x 4 results each), stepping through K by kConvTileK through shared
/// memory (2 * kConvTileK * 64 elements: 8 KiB for f32, 16 KiB for f64, plus kConvStepBytes for
/// the step's depth decomposition).
inline constexpr int64_t kConvTileM = 64;
inline constexpr int64_t kConvTileN = 64;
inline constexpr int64_t kConvTileK = 16;
inline constexpr int64_t kConvThreads = 256;
/// Static shared memory of a K step's decomposition (bytes): per depth an lhs and an rhs offset,
/// kConvMaxSpatial tap offsets (int64) and a flag.
inline constexpr int64_t kConvStepBytes = kConvTileK * (2 + kConvMaxSpatial) * 8 + kConvTileK;

}  // namespace ingot::kernels
