// BLAS-backed GEMM kernels for JIT-compiled code (see include/ingot/kernels/cpu_gemm.h).
#include "ingot/kernels/cpu_gemm.h"

#include "ingot/kernels/cpu_conv.h"

#include <cblas.h>

namespace ingot::kernels {

namespace {

template <class T, class Gemm>
void gemm(const MemRef2D<T>& a, const MemRef2D<T>& b, MemRef2D<T>& c, int32_t ta, int32_t tb,
          Gemm blas) {
  const int64_t m = c.sizes[0], n = c.sizes[1];
  const int64_t k = ta ? a.sizes[0] : a.sizes[1];
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS leaves C untouched for k = 0 with beta = 0 on some builds: zero it
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c.aligned[c.offset + i * c.strides[0] + j] = T(0);
    }
    return;
  }
  blas(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
       static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), T(1),
       a.aligned + a.offset, static_cast<blasint>(a.strides[0]), b.aligned + b.offset,
       static_cast<blasint>(b.strides[0]), T(0), c.aligned + c.offset,
       static_cast<blasint>(c.strides[0]));
}

}  // namespace

void gemm_f32(const MemRef2D<float>& a, const MemRef2D<float>& b, MemRef2D<float>& c,
              int32_t trans_a, int32_t trans_b) {
  gemm(a, b, c, trans_a, trans_b, cblas_sgemm);
}

void gemm_f64(const MemRef2D<double>& a, const MemRef2D<double>& b, MemRef2D<double>& c,
              int32_t trans_a, int32_t trans_b) {
  gemm(a, b, c, trans_a, trans_b, cblas_dgemm);
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
}

namespace ingot::kernels {

std::vector<std::pair<std::string, void*>> cpu_kernel_symbols() {
  return {{"_mlir_ciface_ingot_cpu_gemm_f32", reinterpret_cast<void*>(&ingot_cpu_gemm_f32_ciface)},
          {"_mlir_ciface_ingot_cpu_gemm_f64", reinterpret_cast<void*>(&ingot_cpu_gemm_f64_ciface)},
          {"_mlir_ciface_ingot_cpu_conv_f32", reinterpret_cast<void*>(&ingot_cpu_conv_f32_ciface)},
          {"_mlir_ciface_ingot_cpu_conv_f64", reinterpret_cast<void*>(&ingot_cpu_conv_f64_ciface)}};
}

}  // namespace ingot::kernels
