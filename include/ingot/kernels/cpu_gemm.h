// CPU dense matrix products through a BLAS library (OpenBLAS from Debian), callable from
// JIT-compiled code: the MLIR lowering of dot_general emits `func.call @ingot_cpu_gemm_<dtype>`
// on memrefs, and the JIT resolves the symbols listed by cpu_kernel_symbols().
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ingot::kernels {

/// An MLIR 2-D memref descriptor (allocated, aligned, offset, sizes[2], strides[2]) of T.
template <class T>
struct MemRef2D {
  T* allocated;
  T* aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
};

/// C = op(A) @ op(B) with op = transpose when trans_a / trans_b is nonzero: A (m, k) or (k, m),
/// B (k, n) or (n, k), C (m, n), all row-major with unit inner stride. Shapes are checked by the
/// caller (the lowering); BLAS sgemm/dgemm does the work. The CPU reference is the interpreter's
/// dot_general kernel, which the parity tests compare against.
void gemm_f32(const MemRef2D<float>& a, const MemRef2D<float>& b, MemRef2D<float>& c,
              int32_t trans_a, int32_t trans_b);
void gemm_f64(const MemRef2D<double>& a, const MemRef2D<double>& b, MemRef2D<double>& c,
              int32_t trans_a, int32_t trans_b);

/// (symbol name, address) of every kernel JIT-compiled code may call: the GEMMs above and the
/// convolutions of cpu_conv.h, e.g. "_mlir_ciface_ingot_cpu_gemm_f32",
/// "_mlir_ciface_ingot_cpu_conv_f64".
std::vector<std::pair<std::string, void*>> cpu_kernel_symbols();

}  // namespace ingot::kernels
