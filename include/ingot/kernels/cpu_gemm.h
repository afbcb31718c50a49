// CPU dense matrix products through libraries (oneDNN's sgemm for f32, OpenBLAS's dgemm for f64;
// both from Debian; kernels/cpu/gemm.cpp says why), callable from
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

/// C = op(A) @ op(B) + beta * C on raw row-major matrices: op(A) is (m, k) (A stored (m, k) with
/// leading dimension lda, or (k, m) when trans_a), op(B) is (k, n) (B stored (k, n) or (n, k) when
/// trans_b), C (m, n) with leading dimension ldc (elements, not bytes). beta = 0 (the default)
/// overwrites C without reading it; k = 0 gives C = beta * C.
/// f32: oneDNN dnnl_sgemm (OpenBLAS if oneDNN refuses the arguments); f64: OpenBLAS cblas_dgemm.
/// Never throws (these run under JIT-compiled frames); arguments are the caller's to check.
/// Multi-threaded by the libraries (oneDNN: OpenMP; OpenBLAS: its own threads).
void sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float* c, int64_t ldc, float beta = 0.0f);
void dgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                     const double* b, int64_t ldb, double* c, int64_t ldc, double beta = 0.0);

/// C = op(A) @ op(B) with op = transpose when trans_a / trans_b is nonzero: A (m, k) or (k, m),
/// B (k, n) or (n, k), C (m, n), all row-major with unit inner stride, as MLIR memref descriptors.
/// Shapes are checked by the caller (the lowering); sgemm_row_major / dgemm_row_major do the work.
/// The CPU reference is the interpreter's dot_general kernel, which the parity tests compare
/// against.
void gemm_f32(const MemRef2D<float>& a, const MemRef2D<float>& b, MemRef2D<float>& c, int32_t trans_a, int32_t trans_b);
void gemm_f64(const MemRef2D<double>& a, const MemRef2D<double>& b, MemRef2D<double>& c, int32_t trans_a,
              int32_t trans_b);

/// An MLIR 3-D memref descriptor (allocated, aligned, offset, sizes[3], strides[3]) of T.
template <class T>
struct MemRef3D {
  T* allocated;
  T* aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
};

/// Batched products: for every b in [0, batch), C[b] = op(A[b]) @ op(B[b]) with A (batch, m, k)
/// or (batch, k, m), B (batch, k, n) or (batch, n, k), C (batch, m, n), row-major with unit inner
/// stride (the lowering's `<gemm_function>_batched_<dtype>` calls, for dot_generals whose batch
/// dims lead both operands: attention's (batch, heads) products). One library GEMM per batch
/// element (each multi-threaded by the library).
void gemm_batched_f32(const MemRef3D<float>& a, const MemRef3D<float>& b, MemRef3D<float>& c, int32_t trans_a,
                      int32_t trans_b);
void gemm_batched_f64(const MemRef3D<double>& a, const MemRef3D<double>& b, MemRef3D<double>& c, int32_t trans_a,
                      int32_t trans_b);

/// (symbol name, address) of every kernel JIT-compiled code may call: the GEMMs above and the
/// convolutions of cpu_conv.h, e.g. "_mlir_ciface_ingot_cpu_gemm_f32",
/// "_mlir_ciface_ingot_cpu_conv_f64".
std::vector<std::pair<std::string, void*>> cpu_kernel_symbols();

}  // namespace ingot::kernels
