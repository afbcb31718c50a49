// A fake cuBLAS + cuBLASLt in host memory, built as a loadable module (ingot_fake_cublas) that
// runtime_tests hands to CublasLibrary::load for both libraries, so the CudaBlas that cuBLAS
// gives (runtime/cuda/cublas.cpp: plain, strided-batched and cuBLASLt epilogue GEMMs) runs
// without a GPU on the fake driver's "device memory", which is host memory.
//
// It models what the caller depends on and checks what a real library would reject:
//   - ?gemm / ?gemmStridedBatched compute C = alpha op(A) op(B) + beta C column-major as
//     reference BLAS sgemm.f does, after checking lda/ldb/ldc against the dims
//     (CUBLAS_STATUS_INVALID_VALUE otherwise);
//   - cublasGemmEx / cublasGemmStridedBatchedEx take f16 or bf16 A, B and C of one type with
//     CUBLAS_COMPUTE_32F and f32 alpha/beta only (CUBLAS_STATUS_NOT_SUPPORTED otherwise, which a
//     real cuBLAS also answers for mixed types it has no kernel for): each element of the sum is
//     widened to f32 (cuda_fp16.h / cuda_bf16.h's own conversions, independent of ingot's), summed
//     in f32 and rounded to the type once, round-to-nearest-even;
//   - cuBLASLt descriptors keep their attributes; cublasLtMatmul checks that the layouts agree
//     with the transposes (A (m, k) as op(A), ...), that an epilogue with a bias has a bias
//     pointer and that an algorithm from cublasLtMatmulAlgoGetHeuristic is passed, then computes
//     D = alpha op(A) op(B) + beta C, adds bias[row] to every column (CUBLASLT_EPILOGUE_BIAS) and
//     applies max(x, 0) (RELU_BIAS; NaN -> 0 as cuBLASLt does);
//   - every call runs synchronously when made (the fake driver's streams are deferred queues: a
//     test waits for its uploads before running a program through it).
// What it saw is logged for the test (ingot_fake_cublas_log: call counts, the last epilogue and
// the alignments the heuristic was given); ingot_fake_cublas_set_no_algorithm makes the heuristic
// find nothing, ingot_fake_cublas_set_ex_unsupported the *Ex GEMMs answer NOT_SUPPORTED. The log is file-scope state:
// the module is the test's fake, loaded by one test process, as the fake driver's state is.
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "fake_cublas.h"

namespace {

FakeCublasLog g_log;
bool g_no_algorithm = false;    // cublasLtMatmulAlgoGetHeuristic finds nothing (ingot_fake_cublas_set_no_algorithm)
bool g_ex_unsupported = false;  // the *Ex GEMMs answer NOT_SUPPORTED (ingot_fake_cublas_set_ex_unsupported)

struct Desc {  // stored in cublasLtMatmulDescOpaque_t::data
  uint64_t trans_a, trans_b, epilogue, bias, compute;
};
struct Layout {  // stored in cublasLtMatrixLayoutOpaque_t::data
  uint64_t type, rows, cols;
  int64_t ld;
};
struct Preference {  // stored in cublasLtMatmulPreferenceOpaque_t::data
  uint64_t workspace;
  uint32_t alignment[4];
};
constexpr uint64_t kAlgoMagic = 0x1a90f00d;

template <class T, class Opaque>
T& view(Opaque* o) {
  static_assert(sizeof(T) <= sizeof(o->data));
  return *reinterpret_cast<T*>(o->data);
}

/// Column-major C (m x n, ldc) = alpha op(A) op(B) + beta C; op(A) is m x k.
template <class T>
void reference_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                    int64_t ldb, T beta, const T* c, int64_t ldc, T* d) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      T sum = 0;
      for (int64_t l = 0; l < k; ++l)
        sum += (ta ? a[l + i * lda] : a[i + l * lda]) * (tb ? b[j + l * ldb] : b[l + j * ldb]);
      d[i + j * ldc] = alpha * sum + (beta == T{0} ? T{0} : beta * c[i + j * ldc]);
    }
  }
}

bool bad_dims(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
  const int a_rows = ta == CUBLAS_OP_N ? m : k, b_rows = tb == CUBLAS_OP_N ? k : n;
  return m < 0 || n < 0 || k < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m);
}

template <class T>
cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha, const T* a,
                    int lda, long long sa, const T* b, int ldb, long long sb, const T* beta, T* c, int ldc,
                    long long sc, int batch) {
  if (bad_dims(ta, tb, m, n, k, lda, ldb, ldc) || batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
  for (int p = 0; p < batch; ++p) {
    reference_gemm<T>(ta != CUBLAS_OP_N, tb != CUBLAS_OP_N, m, n, k, *alpha, a + p * sa, lda, b + p * sb, ldb, *beta,
                      c + p * sc, ldc, c + p * sc);
  }
  return CUBLAS_STATUS_SUCCESS;
}

/// A 16-bit element of `type` (CUDA_R_16F or CUDA_R_16BF) at `p[i]` as f32, and back (round to
/// nearest even).
float load16(cudaDataType type, const void* p, int64_t i) {
  if (type == CUDA_R_16F) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
void store16(cudaDataType type, void* p, int64_t i, float v) {
  if (type == CUDA_R_16F)
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  else
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

/// The *Ex GEMMs: column-major C = alpha op(A) op(B) + beta C on 16-bit operands of one type,
/// summed in f32, `batch` products `sa`/`sb`/`sc` elements apart.
cublasStatus_t gemm_ex(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                       const void* a, cudaDataType at, int lda, long long sa, const void* b, cudaDataType bt, int ldb,
                       long long sb, const void* beta, void* c, cudaDataType ct, int ldc, long long sc, int batch,
                       cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  g_log.last_ex_type = static_cast<int32_t>(at);
  g_log.last_ex_compute = static_cast<int32_t>(compute);
  const bool half = at == CUDA_R_16F || at == CUDA_R_16BF;
  if (g_ex_unsupported || !half || bt != at || ct != at || compute != CUBLAS_COMPUTE_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (algo != CUBLAS_GEMM_DEFAULT) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (bad_dims(ta, tb, m, n, k, lda, ldb, ldc) || batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const bool tra = ta != CUBLAS_OP_N, trb = tb != CUBLAS_OP_N;
  for (int64_t p = 0; p < batch; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        float sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          sum += load16(at, a, p * sa + (tra ? l + i * lda : i + l * lda)) *
                 load16(at, b, p * sb + (trb ? j + l * ldb : l + j * ldb));
        }
        const int64_t o = p * sc + i + j * ldc;
        store16(at, c, o, al * sum + (be == 0.0f ? 0.0f : be * load16(at, c, o)));
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const FakeCublasLog* ingot_fake_cublas_log() { return &g_log; }
__attribute__((visibility("default"))) void ingot_fake_cublas_reset_log() {
  g_log = FakeCublasLog{};
  g_no_algorithm = false;
  g_ex_unsupported = false;
}
/// Makes the heuristic find no algorithm (as for a configuration cuBLASLt has no kernel for).
__attribute__((visibility("default"))) void ingot_fake_cublas_set_no_algorithm(bool none) { g_no_algorithm = none; }
/// Makes cublasGemmEx / cublasGemmStridedBatchedEx answer CUBLAS_STATUS_NOT_SUPPORTED (as a GPU
/// without bf16 tensor cores, compute capability < 8.0, does for bf16).
__attribute__((visibility("default"))) void ingot_fake_cublas_set_ex_unsupported(bool unsupported) {
  g_ex_unsupported = unsupported;
}

// ---- cuBLAS ------------------------------------------------------------------------------

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new uint64_t(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete reinterpret_cast<uint64_t*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "fake: success" : "fake: failure";
}
cublasStatus_t cublasSgemm_v2(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                              float* c, int ldc) {
  ++g_log.gemm_calls;
  return gemm<float>(ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}
cublasStatus_t cublasDgemm_v2(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const double* alpha, const double* a, int lda, const double* b, int ldb,
                              const double* beta, double* c, int ldc) {
  ++g_log.gemm_calls;
  return gemm<double>(ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* a, int lda, long long sa,
                                         const float* b, int ldb, long long sb, const float* beta, float* c, int ldc,
                                         long long sc, int batch) {
  ++g_log.strided_calls;
  g_log.last_batch = batch;
  return gemm<float>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double* alpha, const double* a, int lda, long long sa,
                                         const double* b, int ldb, long long sb, const double* beta, double* c, int ldc,
                                         long long sc, int batch) {
  ++g_log.strided_calls;
  g_log.last_batch = batch;
  return gemm<double>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* a, cudaDataType at, int lda, const void* b, cudaDataType bt,
                            int ldb, const void* beta, void* c, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  ++g_log.gemm_ex_calls;
  return gemm_ex(ta, tb, m, n, k, alpha, a, at, lda, 0, b, bt, ldb, 0, beta, c, ct, ldc, 0, 1, compute, algo);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* a, cudaDataType at, int lda,
                                          long long sa, const void* b, cudaDataType bt, int ldb, long long sb,
                                          const void* beta, void* c, cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  ++g_log.strided_ex_calls;
  g_log.last_batch = batch;
  return gemm_ex(ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta, c, ct, ldc, sc, batch, compute, algo);
}

// ---- cuBLASLt ----------------------------------------------------------------------------

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(new uint64_t(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<uint64_t*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;  // all the fake does
  *desc = new cublasLtMatmulDescOpaque_t{};
  view<Desc>(*desc) = Desc{CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, 0, compute};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void* value, size_t bytes) {
  Desc& d = view<Desc>(desc);
  const auto u32 = [&](uint64_t& out) {
    if (bytes != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;  // cublasOperation_t, cublasLtEpilogue_t
    uint32_t v = 0;
    std::memcpy(&v, value, sizeof(v));
    out = v;
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return u32(d.trans_a);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return u32(d.trans_b);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return u32(d.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      if (bytes != sizeof(void*)) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(&d.bias, value, sizeof(void*));
      return CUBLAS_STATUS_SUCCESS;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (ld < static_cast<int64_t>(std::max<uint64_t>(rows, 1))) return CUBLAS_STATUS_INVALID_VALUE;  // column-major
  *layout = new cublasLtMatrixLayoutOpaque_t{};
  view<Layout>(*layout) = Layout{static_cast<uint64_t>(type), rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  view<Preference>(*pref) = Preference{~0ull, {256, 256, 256, 256}};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attribute, const void* value,
                                                    size_t bytes) {
  Preference& p = view<Preference>(pref);
  if (attribute == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(uint64_t)) {
    std::memcpy(&p.workspace, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  const int index = attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
  if (index >= 0 && index < 4 && bytes == sizeof(uint32_t)) {
    std::memcpy(&p.alignment[index], value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* found) {
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const Preference& p = view<Preference>(pref);
  std::copy(std::begin(p.alignment), std::end(p.alignment), g_log.last_alignment);
  g_log.last_workspace = p.workspace;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = kAlgoMagic;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *found = g_no_algorithm ? 0 : 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              cudaStream_t) {
  ++g_log.lt_matmul_calls;
  const Desc& s = view<Desc>(desc);
  const Layout &la = view<Layout>(a_layout), &lb = view<Layout>(b_layout), &lc = view<Layout>(c_layout),
               &ld = view<Layout>(d_layout);
  g_log.last_epilogue = static_cast<uint32_t>(s.epilogue);
  const bool ta = s.trans_a != CUBLAS_OP_N, tb = s.trans_b != CUBLAS_OP_N;
  const uint64_t m = ld.rows, n = ld.cols, k = ta ? la.rows : la.cols;
  const bool shapes_agree = (ta ? la.cols : la.rows) == m && (tb ? lb.cols : lb.rows) == k &&
                            (tb ? lb.rows : lb.cols) == n && lc.rows == m && lc.cols == n && lc.ld == ld.ld;
  const bool bias_epilogue = s.epilogue == CUBLASLT_EPILOGUE_BIAS || s.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  if (!shapes_agree || (bias_epilogue && s.bias == 0)) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo == nullptr || algo->data[0] != kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;  // not the heuristic's
  auto* out = static_cast<float*>(d);
  reference_gemm<float>(ta, tb, static_cast<int64_t>(m), static_cast<int64_t>(n), static_cast<int64_t>(k),
                        *static_cast<const float*>(alpha), static_cast<const float*>(a), la.ld,
                        static_cast<const float*>(b), lb.ld, *static_cast<const float*>(beta),
                        static_cast<const float*>(c), lc.ld, out);
  const auto* bias = reinterpret_cast<const float*>(static_cast<uintptr_t>(s.bias));
  for (uint64_t j = 0; j < n; ++j) {
    for (uint64_t i = 0; i < m; ++i) {
      float& x = out[i + j * static_cast<uint64_t>(ld.ld)];
      if (bias_epilogue) x += bias[i];
      if (s.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) x = x > 0.0f ? x : 0.0f;  // NaN -> 0
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
