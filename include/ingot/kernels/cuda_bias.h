// Bias add + activation on a column-major f32 matrix (kernels/cuda/bias.cu), in place: the second
// half of a GEMM epilogue when cuBLASLt has no kernel for the fused one (runtime/cuda/cublas.cpp
// runs a plain GEMM, then this). Same result as cuBLASLt's epilogues (cublasLt.h):
//   CUBLASLT_EPILOGUE_BIAS:      C[i + j ldc] = C[i + j ldc] + bias[i]
//   CUBLASLT_EPILOGUE_RELU_BIAS: C[i + j ldc] = max(C[i + j ldc] + bias[i], 0)
// for rows i < m and columns j < n (bias has m elements: one per row of the column-major C,
// i.e. per column of the row-major matrix it stores).
#pragma once

#include <cstdint>
#include <span>

#include "ingot/kernels/cuda_launch.h"

namespace ingot::kernels {

/// Threads per block of the bias kernel, and the most blocks it is launched with (each thread
/// then strides over the m * n elements).
inline constexpr int64_t kBiasThreads = 256;
inline constexpr int64_t kBiasMaxBlocks = 4096;

/// The launch of `ingot_bias_act_f32`: grid (min(ceil(m n / 256), 4096)), block (256);
/// parameters c, bias (f32 device addresses), m, n, ldc (i64), relu (i32, 0 or 1). Throws
/// ingot::Error kInvalidArgument when c or bias is 0, m or n < 1, ldc < m, or m * n overflows.
CudaKernelLaunch bias_act_launch(DevicePtr c, DevicePtr bias, int64_t m, int64_t n, int64_t ldc, bool relu);

/// CPU reference of the kernel, in place, with the same f32 operations. `c` holds the
/// column-major matrix (at least (n - 1) ldc + m elements), `bias` m elements. Throws ingot::Error
/// kInvalidArgument for m or n < 1 or ldc < m, kShapeMismatch when a span is too short (nothing
/// written then).
void bias_act_reference(std::span<float> c, std::span<const float> bias, int64_t m, int64_t n, int64_t ldc, bool relu);

}  // namespace ingot::kernels
