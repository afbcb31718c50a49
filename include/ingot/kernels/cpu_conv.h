// CPU convolutions as im2col + GEMM (the GEMM libraries of cpu_gemm.h: oneDNN for f32, OpenBLAS for f64), callable from
// JIT-compiled code: the MLIR lowering of `convolution` (compiler/ops/linalg_lower.cpp) collapses both operands and the
// result to 1-D memrefs and emits `func.call @ingot_cpu_conv_<dtype>(lhs, rhs, out, config)`, where `config` is an i64
// memref holding the encoded ConvSpec (encode_conv_spec); the JIT resolves the symbols listed by cpu_kernel_symbols()
// (include/ingot/kernels/cpu_gemm.h).
//
// Semantics: StableHLO `convolution` as docs/ir.md defines it (no window reversal), any number
// of spatial dims, any dimension numbers, strides, padding (negative = crop), lhs/rhs dilation,
// feature and batch groups. The CPU reference is convolution_reference() below, which computes
// what the interpreter's convolution kernel (compiler/ops/linalg.cpp) computes, in its order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ingot/runtime/conv_spec.h"  // ConvSpec, encode_conv_spec

namespace ingot::kernels {

/// An MLIR 1-D memref descriptor (allocated, aligned, offset, sizes[1], strides[1]) of T.
template <class T>
struct MemRef1D {
  T* allocated;
  T* aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
};

/// Decodes encode_conv_spec's layout and validates it (check_conv_spec). Throws ingot::Error
/// (kInvalidArgument) when `config` has the wrong length for its rank.
ConvSpec decode_conv_spec(std::span<const int64_t> config);

/// Checks that `s` describes a valid convolution: equal ranks >= 2, distinct in-range dimension
/// numbers, strides and dilations >= 1, group counts >= 1 (not both > 1) that divide the batch /
/// features, and an out_shape equal to StableHLO's result shape (docs/ir.md). Throws
/// ingot::Error (kInvalidArgument, kOutOfRange or kShapeMismatch) naming the field and values.
void check_conv_spec(const ConvSpec& s);

/// The convolution `s` of `lhs` with `rhs` into `out` (row-major buffers of the spec's shapes;
/// sizes checked, ingot::Error kShapeMismatch). Algorithm: per group, the padded/dilated input
/// windows are gathered into an im2col block (rows: the result positions, in the result's
/// layout order; columns: the kernel taps and input features, in the kernel's layout order) and
/// multiplied with the kernel matrix by sgemm_row_major/dgemm_row_major (cpu_gemm.h), straight into the result where
/// its feature dim is first or last (else through a temporary block). The im2col block is at most kConvBlockBytes (rows
/// and, for very long windows, columns are chunked; column chunks accumulate with beta = 1). Summation order differs
/// from the reference (BLAS blocking). Padding and dilation holes are multiplied as zeros, so where the kernel holds an
/// infinity or NaN the result would be NaN where the reference skips those cells: in that case (and for sizes beyond
/// BLAS's 32-bit indices) it computes convolution_reference() instead.
void convolution(const ConvSpec& s, std::span<const float> lhs, std::span<const float> rhs, std::span<float> out);
void convolution(const ConvSpec& s, std::span<const double> lhs, std::span<const double> rhs, std::span<double> out);

/// The CPU reference: each result element sums lhs * rhs over its window, kernel taps row-major
/// over the spatial dims with input features innermost, skipping padding and dilation holes,
/// in the element type (the interpreter's convolution kernel). Checks like convolution().
void convolution_reference(const ConvSpec& s, std::span<const float> lhs, std::span<const float> rhs,
                           std::span<float> out);
void convolution_reference(const ConvSpec& s, std::span<const double> lhs, std::span<const double> rhs,
                           std::span<double> out);

/// Upper bound of the im2col block convolution() allocates, in bytes (4 MiB).
inline constexpr int64_t kConvBlockBytes = int64_t{4} << 20;

/// The JIT entry points (`_mlir_ciface_ingot_cpu_conv_f32/f64`): decode `config`, check the
/// descriptors (unit stride, sizes matching the shapes) and run convolution(). JIT-compiled code
/// cannot propagate C++ exceptions, so a bad call (only possible from hand-written MLIR; the
/// lowering emits configs of verified nodes) prints the ingot::Error to stderr and fills `out`
/// with NaN instead of throwing.
void conv_f32(const MemRef1D<float>& lhs, const MemRef1D<float>& rhs, MemRef1D<float>& out,
              const MemRef1D<int64_t>& config);
void conv_f64(const MemRef1D<double>& lhs, const MemRef1D<double>& rhs, MemRef1D<double>& out,
              const MemRef1D<int64_t>& config);

}  // namespace ingot::kernels

// The C interface that MLIR's llvm.emit_c_interface generates calls to (descriptors by pointer);
// cpu_kernel_symbols() maps `_mlir_ciface_ingot_cpu_conv_<dtype>` to these.
extern "C" {
void ingot_cpu_conv_f32_ciface(ingot::kernels::MemRef1D<float>* lhs, ingot::kernels::MemRef1D<float>* rhs,
                               ingot::kernels::MemRef1D<float>* out, ingot::kernels::MemRef1D<int64_t>* config);
void ingot_cpu_conv_f64_ciface(ingot::kernels::MemRef1D<double>* lhs, ingot::kernels::MemRef1D<double>* rhs,
                               ingot::kernels::MemRef1D<double>* out, ingot::kernels::MemRef1D<int64_t>* config);
}
