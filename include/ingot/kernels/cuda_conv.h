// Implicit-GEMM convolution kernels (kernels/cuda/conv.cu; docs/kernels-cuda.md), f32 and f64:
// any StableHLO `convolution` (ConvSpec of include/ingot/kernels/cpu_conv.h: any dimension
// numbers, padding, strides, lhs/rhs dilation, feature or batch groups) with 1 to
// kConvMaxSpatial spatial dims, on row-major operand buffers. The forward convolution and both
// backward convolutions autodiff produces (input gradient: lhs dilation; weight gradient: rhs
// dilation and batch groups) are all such specs.
//
// As a GEMM per group g (convolution lowered to a matrix product without materialising the
// lowered matrix: Chetlur et al. 2014, "cuDNN: Efficient Primitives for Deep Learning",
// section 3.1): M = out batch * out spatial positions, N = out features per group,
// K = in features per group * kernel taps; A[m, k] is gathered from the input window on the fly
// (never materialised), B[k, n] from the kernel. Each block computes a 64 x 64 result tile with
// 256 threads, 16 K steps at a time through shared memory; the step's depths are decomposed
// (tap, feature) once per block, so the gathers need no divisions. CudaConvParams (passed by
// value) carries every size and stride.
//
// Numerics: each result sums its K terms in ascending k (taps row-major, input features
// innermost), as the CPU reference convolution_reference() does, in the element type (with FMA
// contraction on the GPU). Padding and dilation holes are multiplied as zeros (as cuDNN does):
// where the kernel holds an infinity or NaN the result is NaN where the reference skips the hole.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ingot/kernels/cpu_conv.h"
#include "ingot/runtime/cuda_conv_params.h"
#include "ingot/kernels/cuda_launch.h"
#include "ingot/runtime/dtype.h"

namespace ingot::kernels {

/// The kernel parameters of `s` (sizes and element strides of its row-major operands). Throws
/// ingot::Error as check_conv_spec for an invalid spec, kInvalidArgument when it has more than
/// kConvMaxSpatial spatial dims or M or K overflows int64.
CudaConvParams cuda_conv_params(const ConvSpec& s);

/// The `.entry` name of the kernel for `dtype`: "ingot_conv_implicit_gemm_f32" or "_f64".
/// Throws ingot::Error kInvalidArgument naming the dtype for any other.
std::string cuda_conv_kernel(DType dtype);

/// The launch of the kernel for `dtype`: grid (ceil(M / 64), ceil(N per group / 64), groups),
/// block (256), no dynamic shared memory (8848 bytes static for f32, 17040 for f64); parameters lhs,
/// rhs, out (device addresses of row-major buffers of the spec's shapes, in `dtype`) and then
/// the 4th, `p` itself by value: pass the address of a CudaConvParams (or of its
/// cuda_conv_param_words) after param_pointers(). Throws ingot::Error kInvalidArgument when an
/// address is 0, `p` has a size below 1 or more than kConvMaxSpatial spatial dims, the grid
/// exceeds the hardware's limits (more than 65535 groups or row tiles of 64 features) or the
/// dtype has no kernel.
CudaKernelLaunch cuda_conv_launch(const CudaConvParams& p, DType dtype, DevicePtr lhs, DevicePtr rhs, DevicePtr out);

/// `p` as int64 words (sizeof(CudaConvParams) / 8 of them, in field order): what a CudaProgram
/// carries (CudaConv::params) and the runtime passes as the kernel's 4th parameter.
std::vector<int64_t> cuda_conv_param_words(const CudaConvParams& p);

/// The inverse of cuda_conv_param_words. Throws ingot::Error kShapeMismatch when `words` does not
/// hold sizeof(CudaConvParams) / 8 words.
CudaConvParams cuda_conv_params_from_words(std::span<const int64_t> words);

/// The kernel's computation on the CPU, with its indexing (cuda_conv_params(s), the same A and B
/// gathers and the same summation order without FMA): a model of what the GPU computes, for
/// tests and the fake driver. Throws ingot::Error as cuda_conv_params, and kShapeMismatch
/// naming the operand when a span's size is not its shape's element count (nothing written).
void cuda_conv_emulate(const ConvSpec& s, std::span<const float> lhs, std::span<const float> rhs, std::span<float> out);
void cuda_conv_emulate(const ConvSpec& s, std::span<const double> lhs, std::span<const double> rhs,
                       std::span<double> out);

}  // namespace ingot::kernels
