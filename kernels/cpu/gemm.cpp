// GEMM kernels for JIT-compiled code (see include/ingot/kernels/cpu_gemm.h): f32 through
// oneDNN's dnnl_sgemm, f64 through OpenBLAS's cblas_dgemm.
//
// Why oneDNN for f32 (bench/compiler_bench's "GEMM library" table): Debian's OpenBLAS 0.3.21
// picks its kernels by CPU model and falls back to SSE3 ("Prescott") kernels on CPUs it does not
// know, such as this machine's Xeon (~60 GFLOP/s on 2 cores); oneDNN picks its JIT kernels by
// CPUID feature bits (AVX-512 here; ~310 GFLOP/s on the same shapes). oneDNN has no f64 GEMM.
#include "ingot/kernels/cpu_gemm.h"

#include "ingot/kernels/cpu_conv.h"

#include <cblas.h>
#include <dnnl.h>

namespace ingot::kernels {

namespace {

/// C = beta * C for an empty sum (k = 0), without relying on the library's k = 0 handling;
/// beta = 0 writes zeros (never 0 * NaN).
template <class T>
void scale_c(int64_t m, int64_t n, T* c, int64_t ldc, T beta) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  }
}

}  // namespace

void sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float* c, int64_t ldc, float beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, c, ldc, beta);
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  if (status == dnnl_success) return;
  // oneDNN rejects only invalid arguments, which the callers rule out; OpenBLAS computes the
  // same product if that ever changes (never an exception: this runs under JIT-compiled frames).
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void dgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                     const double* b, int64_t ldb, double* c, int64_t ldc, double beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, c, ldc, beta);
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void gemm_f32(const MemRef2D<float>& a, const MemRef2D<float>& b, MemRef2D<float>& c, int32_t trans_a,
              int32_t trans_b) {
  sgemm_row_major(trans_a != 0, trans_b != 0, c.sizes[0], c.sizes[1], trans_a ? a.sizes[0] : a.sizes[1],
                  a.aligned + a.offset, a.strides[0], b.aligned + b.offset, b.strides[0], c.aligned + c.offset,
                  c.strides[0]);
}

void gemm_f64(const MemRef2D<double>& a, const MemRef2D<double>& b, MemRef2D<double>& c, int32_t trans_a,
              int32_t trans_b) {
  dgemm_row_major(trans_a != 0, trans_b != 0, c.sizes[0], c.sizes[1], trans_a ? a.sizes[0] : a.sizes[1],
                  a.aligned + a.offset, a.strides[0], b.aligned + b.offset, b.strides[0], c.aligned + c.offset,
                  c.strides[0]);
}

namespace {

/// One row-major GEMM (`gemm`: sgemm_row_major or dgemm_row_major) per batch element.
template <class T, class Gemm>
void gemm_batched(const MemRef3D<T>& a, const MemRef3D<T>& b, MemRef3D<T>& c, int32_t trans_a, int32_t trans_b,
                  Gemm gemm) {
  for (int64_t i = 0; i < c.sizes[0]; ++i) {
    gemm(trans_a != 0, trans_b != 0, c.sizes[1], c.sizes[2], trans_a ? a.sizes[1] : a.sizes[2],
         a.aligned + a.offset + i * a.strides[0], a.strides[1], b.aligned + b.offset + i * b.strides[0], b.strides[1],
         c.aligned + c.offset + i * c.strides[0], c.strides[1], T(0));
  }
}

}  // namespace

void gemm_batched_f32(const MemRef3D<float>& a, const MemRef3D<float>& b, MemRef3D<float>& c, int32_t trans_a,
                      int32_t trans_b) {
  gemm_batched(a, b, c, trans_a, trans_b, sgemm_row_major);
}

void gemm_batched_f64(const MemRef3D<double>& a, const MemRef3D<double>& b, MemRef3D<double>& c, int32_t trans_a,
                      int32_t trans_b) {
  gemm_batched(a, b, c, trans_a, trans_b, dgemm_row_major);
}

}  // namespace ingot::kernels

// The C interface MLIR's llvm.emit_c_interface generates calls to: descriptors by pointer.
extern "C" {
void ingot_cpu_gemm_f32_ciface(ingot::kernels::MemRef2D<float>* a, ingot::kernels::MemRef2D<float>* b,
                               ingot::kernels::MemRef2D<float>* c, int32_t ta, int32_t tb) {
  ingot::kernels::gemm_f32(*a, *b, *c, ta, tb);
}
void ingot_cpu_gemm_f64_ciface(ingot::kernels::MemRef2D<double>* a, ingot::kernels::MemRef2D<double>* b,
                               ingot::kernels::MemRef2D<double>* c, int32_t ta, int32_t tb) {
  ingot::kernels::gemm_f64(*a, *b, *c, ta, tb);
}
void ingot_cpu_gemm_batched_f32_ciface(ingot::kernels::MemRef3D<float>* a, ingot::kernels::MemRef3D<float>* b,
                                       ingot::kernels::MemRef3D<float>* c, int32_t ta, int32_t tb) {
  ingot::kernels::gemm_batched_f32(*a, *b, *c, ta, tb);
}
void ingot_cpu_gemm_batched_f64_ciface(ingot::kernels::MemRef3D<double>* a, ingot::kernels::MemRef3D<double>* b,
                                       ingot::kernels::MemRef3D<double>* c, int32_t ta, int32_t tb) {
  ingot::kernels::gemm_batched_f64(*a, *b, *c, ta, tb);
}
}

namespace ingot::kernels {

std::vector<std::pair<std::string, void*>> cpu_kernel_symbols() {
  return {{"_mlir_ciface_ingot_cpu_gemm_f32", reinterpret_cast<void*>(&ingot_cpu_gemm_f32_ciface)},
          {"_mlir_ciface_ingot_cpu_gemm_f64", reinterpret_cast<void*>(&ingot_cpu_gemm_f64_ciface)},
          {"_mlir_ciface_ingot_cpu_gemm_batched_f32", reinterpret_cast<void*>(&ingot_cpu_gemm_batched_f32_ciface)},
          {"_mlir_ciface_ingot_cpu_gemm_batched_f64", reinterpret_cast<void*>(&ingot_cpu_gemm_batched_f64_ciface)},
          {"_mlir_ciface_ingot_cpu_conv_f32", reinterpret_cast<void*>(&ingot_cpu_conv_f32_ciface)},
          {"_mlir_ciface_ingot_cpu_conv_f64", reinterpret_cast<void*>(&ingot_cpu_conv_f64_ciface)}};
}

}  // namespace ingot::kernels
