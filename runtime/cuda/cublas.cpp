// CublasLibrary: libcublas and libcublasLt through dlopen, and a CudaBlas over one cuBLAS handle
// (plain and strided-batched GEMMs: f32/f64 through ?gemm, f16/bf16 through cublasGemmEx with f32
// compute) and one cuBLASLt handle (GEMMs with a bias/relu epilogue).
#include <cublasLt.h>
#include <cublas_api.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>

#include "cuda/driver_api.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/error.h"

namespace ingot {

#define INGOT_CUBLAS_ENTRY_POINTS(X) \
  X(cublasCreate_v2)                 \
  X(cublasDestroy_v2)                \
  X(cublasSetStream_v2)              \
  X(cublasSgemm_v2)                  \
  X(cublasDgemm_v2)                  \
  X(cublasSgemmStridedBatched)       \
  X(cublasDgemmStridedBatched)       \
  X(cublasGetStatusString)

#define INGOT_CUBLASLT_ENTRY_POINTS(X)    \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

/// cublasGemmEx and cublasGemmStridedBatchedEx as libcublas exports them (cublas_api.h also
/// declares C++ overloads taking a cudaDataType compute type, so decltype(&::name) is ambiguous).
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, long long,
                                                      const void*, cudaDataType, int, long long, const void*, void*,
                                                      cudaDataType, int, long long, int, cublasComputeType_t,
                                                      cublasGemmAlgo_t);

#define INGOT_CUBLAS_EX_ENTRY_POINTS(X) \
  X(cublasGemmEx, CublasGemmEx)         \
  X(cublasGemmStridedBatchedEx, CublasGemmStridedBatchedEx)

/// Function pointers to cuBLAS's and cuBLASLt's entry points (all non-null once resolved).
struct CublasLibrary::Api {
#define INGOT_CUBLAS_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  INGOT_CUBLAS_ENTRY_POINTS(INGOT_CUBLAS_DECLARE_ENTRY)
  INGOT_CUBLASLT_ENTRY_POINTS(INGOT_CUBLAS_DECLARE_ENTRY)
#undef INGOT_CUBLAS_DECLARE_ENTRY
#define INGOT_CUBLAS_DECLARE_TYPED_ENTRY(name, type) type name = nullptr;
  INGOT_CUBLAS_EX_ENTRY_POINTS(INGOT_CUBLAS_DECLARE_TYPED_ENTRY)
#undef INGOT_CUBLAS_DECLARE_TYPED_ENTRY
};

namespace {

/// Throws the ingot::Error of a failed cuBLAS call: invalid value -> kInvalidArgument, anything
/// else (not initialized, allocation, execution failed, ...) -> kFailedPrecondition.
void check(const CublasLibrary::Api& api, cublasStatus_t status, std::string_view call, std::string_view context) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* text = api.cublasGetStatusString(status);
  const bool usage = status == CUBLAS_STATUS_INVALID_VALUE;
  throw Error(usage ? ErrorCode::kInvalidArgument : ErrorCode::kFailedPrecondition,
              fmt::format("{} failed while {}: {} (cublasStatus_t {})", call, context,
                          text != nullptr ? text : "unknown status", static_cast<int>(status)),
              usage ? "the GEMM's dimensions or leading dimensions are invalid (a malformed CudaProgram)"
                    : "check the device with nvidia-smi; a failed kernel earlier leaves the device unusable");
}

void check_int_range(const CudaBlasGemm& c) {
  for (int64_t v : {c.m, c.n, c.k, c.lda, c.ldb, c.ldc, c.batch}) {
    if (v < 1 || v > 0x7fffffff) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cuBLAS GEMM: m = {}, n = {}, k = {}, lda = {}, ldb = {}, ldc = {}, batch = {} must be "
                              "in [1, 2^31 - 1]",
                              c.m, c.n, c.k, c.lda, c.ldb, c.ldc, c.batch),
                  "split the product; cuBLAS's 32-bit API takes int dimensions");
    }
  }
}

/// The cuBLASLt descriptors of one call, destroyed with it.
struct LtDescriptors {
  const CublasLibrary::Api& api;
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    for (cublasLtMatrixLayout_t l : {a, b, c}) {
      if (l != nullptr) (void)api.cublasLtMatrixLayoutDestroy(l);
    }
    if (matmul != nullptr) (void)api.cublasLtMatmulDescDestroy(matmul);
    if (preference != nullptr) (void)api.cublasLtMatmulPreferenceDestroy(preference);
  }
};

/// The error of an epilogue GEMM cuBLASLt has no kernel for.
[[noreturn]] void no_lt_kernel(const CudaBlasGemm& c, const std::string& what, std::string_view why) {
  throw Error(ErrorCode::kUnimplemented,
              fmt::format("cuBLASLt has no kernel for {} with the {} epilogue (trans_a = {}, trans_b = {}, "
                          "alignments A {} B {} C {} bytes): {}",
                          what, epilogue_name(c.epilogue), c.trans_a, c.trans_b, blas_alignment_bytes(c.a),
                          blas_alignment_bytes(c.b), blas_alignment_bytes(c.c), why),
              "compile with CudaCompileOptions::gemm_epilogues = false (the bias add stays a generated kernel)");
}

/// The cuBLASLt epilogue of `e` (cublasLt.h: BIAS adds the bias vector to every column of D,
/// RELU_BIAS then applies max(x, 0)).
cublasLtEpilogue_t lt_epilogue(CudaGemm::Epilogue e) {
  return e == CudaGemm::Epilogue::kBiasRelu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
}

/// A cuBLAS and a cuBLASLt handle of one device (see CublasLibrary::create).
class CublasBlas final : public CudaBlas {
 public:
  /// `api` is copied: a usable cuBLAS is never unloaded, so its entry points stay valid.
  CublasBlas(const CublasLibrary::Api& api, CudaDevice& device) : api_(api), device_(device) {
    device_.make_current();
    check(api_, api_.cublasCreate_v2(&handle_), "cublasCreate",
          fmt::format("creating a cuBLAS handle on {}", device_.name()));
    const cublasStatus_t lt = api_.cublasLtCreate(&lt_);
    if (lt != CUBLAS_STATUS_SUCCESS) {
      (void)api_.cublasDestroy_v2(handle_);
      handle_ = nullptr;
      check(api_, lt, "cublasLtCreate", fmt::format("creating a cuBLASLt handle on {}", device_.name()));
    }
    allocate_lt_workspace();
  }
  ~CublasBlas() override {
    if (handle_ == nullptr) return;
    try {
      device_.make_current();
    } catch (const Error&) {  // destroy regardless: the context is the device's primary one
    }
    if (lt_ != nullptr) (void)api_.cublasLtDestroy(lt_);
    (void)api_.cublasDestroy_v2(handle_);
  }
  CublasBlas(const CublasBlas&) = delete;
  CublasBlas& operator=(const CublasBlas&) = delete;

  void gemm(const CudaBlasGemm& c, const CudaStream& stream) override {
    const std::string what = fmt::format("running a {} GEMM (m = {}, n = {}, k = {}) on {}", dtype_name(c.dtype), c.m,
                                         c.n, c.k, stream.name());
    check_int_range(c);
    device_.make_current();
    if (c.epilogue != CudaGemm::Epilogue::kNone) return lt_matmul(c, stream, what);
    check(api_, api_.cublasSetStream_v2(handle_, stream.handle()), "cublasSetStream", what);
    const cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    auto i = [](int64_t v) { return static_cast<int>(v); };
    if (c.dtype == DType::kF16 || c.dtype == DType::kBF16) {
      gemm_ex(c, ta, tb, what);
    } else if (c.batch > 1) {
      strided_batched(c, ta, tb, what);
    } else if (c.dtype == DType::kF32) {
      const float one = 1.0f, zero = 0.0f;
      check(api_,
            api_.cublasSgemm_v2(handle_, ta, tb, i(c.m), i(c.n), i(c.k), &one, pointer<float>(c.a), i(c.lda),
                                pointer<float>(c.b), i(c.ldb), &zero, pointer<float>(c.c), i(c.ldc)),
            "cublasSgemm", what);
    } else if (c.dtype == DType::kF64) {
      const double one = 1.0, zero = 0.0;
      check(api_,
            api_.cublasDgemm_v2(handle_, ta, tb, i(c.m), i(c.n), i(c.k), &one, pointer<double>(c.a), i(c.lda),
                                pointer<double>(c.b), i(c.ldb), &zero, pointer<double>(c.c), i(c.ldc)),
            "cublasDgemm", what);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cuBLAS GEMM: dtype {} is not f32, f64, f16 or bf16", dtype_name(c.dtype)),
                  "only f32, f64, f16 and bf16 products become cuBLAS calls (is_blas_gemm_dtype)");
    }
  }

 private:
  /// The cuBLASLt workspace, allocated once here (never during a run, which may be a CUDA-graph
  /// capture): NVIDIA's recommended size (cuBLAS documentation, cublasSetWorkspace: 32 MiB on
  /// Hopper, 4 MiB before), at most 1/16 of the device's free memory, none when even that
  /// cannot be had (the heuristic then picks among the algorithms that need none).
  void allocate_lt_workspace() {
    const auto [major, minor] = device_.driver()->device_compute_capability(device_.ordinal());
    (void)minor;
    int64_t bytes = major >= 9 ? int64_t{32} << 20 : int64_t{4} << 20;
    bytes = std::min(bytes, device_.memory_info().free_bytes / 16);
    if (bytes <= 0) return;
    try {
      workspace_ = Buffer::allocate(device_.device(), bytes);
      workspace_bytes_ = bytes;
    } catch (const Error&) {
      workspace_ = nullptr;  // out of memory: run without
    }
  }

  /// cublasLtMatmul with the bias (+ relu) epilogue, D = C in place, f32 with f32 compute, the
  /// workspace of allocate_lt_workspace, the algorithm cublasLtMatmulAlgoGetHeuristic picks for the operands' actual
  /// alignments (its default preference assumes 256-byte aligned pointers, which views into a
  /// buffer need not be).
  void lt_matmul(const CudaBlasGemm& c, const CudaStream& stream, const std::string& what) {
    if (c.bias % 16 != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cuBLASLt GEMM epilogue {}: the bias at 0x{:x} is not 16-byte aligned",
                              epilogue_name(c.epilogue), c.bias),
                  "cuBLASLt's heuristic does not take the bias's alignment and its kernels may assume 16 bytes "
                  "(validate_cuda_program requires a bias offset that is a multiple of 4 elements)");
    }
    if (c.dtype != DType::kF32 || c.batch != 1 || c.bias == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cuBLASLt GEMM epilogue {}: needs an f32 GEMM of batch 1 and a bias, got {} batch {}",
                              epilogue_name(c.epilogue), dtype_name(c.dtype), c.batch),
                  "epilogues are folded into f32 GEMMs without batch only (validate_cuda_program)");
    }
    LtDescriptors d{api_};
    const auto set = [&](cublasLtMatmulDescAttributes_t attribute, const void* value, size_t bytes) {
      check(api_, api_.cublasLtMatmulDescSetAttribute(d.matmul, attribute, value, bytes),
            "cublasLtMatmulDescSetAttribute", what);
    };
    check(api_, api_.cublasLtMatmulDescCreate(&d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate",
          what);
    const cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = lt_epilogue(c.epilogue);
    const void* bias = pointer<const float>(c.bias);
    set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    // Stored shapes (column-major): A is (m, k), or (k, m) when transposed; B (k, n) or (n, k).
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    check(api_,
          api_.cublasLtMatrixLayoutCreate(&d.a, CUDA_R_32F, u(c.trans_a ? c.k : c.m), u(c.trans_a ? c.m : c.k), c.lda),
          "cublasLtMatrixLayoutCreate", what);
    check(api_,
          api_.cublasLtMatrixLayoutCreate(&d.b, CUDA_R_32F, u(c.trans_b ? c.n : c.k), u(c.trans_b ? c.k : c.n), c.ldb),
          "cublasLtMatrixLayoutCreate", what);
    check(api_, api_.cublasLtMatrixLayoutCreate(&d.c, CUDA_R_32F, u(c.m), u(c.n), c.ldc), "cublasLtMatrixLayoutCreate",
          what);
    const cublasLtMatmulAlgo_t algo = lt_algorithm(c, d, what);
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t status = api_.cublasLtMatmul(
        lt_, d.matmul, &one, pointer<const float>(c.a), d.a, pointer<const float>(c.b), d.b, &zero,
        pointer<const float>(c.c), d.c, pointer<float>(c.c), d.c, &algo,
        workspace_ == nullptr ? nullptr : workspace_->data(), static_cast<size_t>(workspace_bytes_), stream.handle());
    if (status == CUBLAS_STATUS_NOT_SUPPORTED)
      no_lt_kernel(c, what, "cublasLtMatmul returned CUBLAS_STATUS_NOT_SUPPORTED");
    check(api_, status, "cublasLtMatmul", what);
  }

  /// The heuristic's first algorithm for `d` within the workspace and the operands' alignments
  /// (C is D: the same pointer).
  cublasLtMatmulAlgo_t lt_algorithm(const CudaBlasGemm& c, LtDescriptors& d, const std::string& what) {
    check(api_, api_.cublasLtMatmulPreferenceCreate(&d.preference), "cublasLtMatmulPreferenceCreate", what);
    const auto set = [&](cublasLtMatmulPreferenceAttributes_t attribute, const void* value, size_t bytes) {
      check(api_, api_.cublasLtMatmulPreferenceSetAttribute(d.preference, attribute, value, bytes),
            "cublasLtMatmulPreferenceSetAttribute", what);
    };
    const auto workspace = static_cast<uint64_t>(workspace_bytes_);
    const uint32_t align_a = blas_alignment_bytes(c.a), align_b = blas_alignment_bytes(c.b);
    const uint32_t align_c = blas_alignment_bytes(c.c);
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c));
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        api_.cublasLtMatmulAlgoGetHeuristic(lt_, d.matmul, d.a, d.b, d.c, d.c, d.preference, 1, &result, &found);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
      no_lt_kernel(c, what, "cublasLtMatmulAlgoGetHeuristic found no algorithm");
    }
    check(api_, status, "cublasLtMatmulAlgoGetHeuristic", what);
    return result.algo;
  }

  /// cublasGemmEx (batch 1) or cublasGemmStridedBatchedEx on f16/bf16 operands and result with
  /// CUBLAS_COMPUTE_32F (f32 alpha = 1 and beta = 0; the f32 sums rounded to the dtype once) and
  /// CUBLAS_GEMM_DEFAULT (cuBLAS picks the algorithm; tensor cores where the shapes allow).
  void gemm_ex(const CudaBlasGemm& c, cublasOperation_t ta, cublasOperation_t tb, const std::string& what) {
    auto i = [](int64_t v) { return static_cast<int>(v); };
    auto s = [](int64_t v) { return static_cast<long long>(v); };
    const cudaDataType t = c.dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
    const float one = 1.0f, zero = 0.0f;
    const void* a = pointer<const void>(c.a);
    const void* b = pointer<const void>(c.b);
    void* out = pointer<void>(c.c);
    const bool one_call = c.batch == 1;
    const cublasStatus_t status =
        one_call
            ? api_.cublasGemmEx(handle_, ta, tb, i(c.m), i(c.n), i(c.k), &one, a, t, i(c.lda), b, t, i(c.ldb), &zero,
                                out, t, i(c.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
            : api_.cublasGemmStridedBatchedEx(handle_, ta, tb, i(c.m), i(c.n), i(c.k), &one, a, t, i(c.lda),
                                              s(c.stride_a), b, t, i(c.ldb), s(c.stride_b), &zero, out, t, i(c.ldc),
                                              s(c.stride_c), i(c.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    const char* call = one_call ? "cublasGemmEx" : "cublasGemmStridedBatchedEx";
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("{} has no {} kernel with f32 compute on {} while {} (CUBLAS_STATUS_NOT_SUPPORTED)", call,
                              dtype_name(c.dtype), device_.name(), what),
                  "bf16 GEMMs need compute capability 8.0 or newer; on this GPU train with the float32 dtype policy "
                  "(or lower with LoweringOptions::blas_gemm = false: generated loops)");
    }
    check(api_, status, call, what);
  }

  /// cublas{S,D}gemmStridedBatched for `c.batch` products (64-bit strides in elements).
  void strided_batched(const CudaBlasGemm& c, cublasOperation_t ta, cublasOperation_t tb, const std::string& what) {
    auto i = [](int64_t v) { return static_cast<int>(v); };
    auto s = [](int64_t v) { return static_cast<long long>(v); };
    if (c.dtype == DType::kF32) {
      const float one = 1.0f, zero = 0.0f;
      check(api_,
            api_.cublasSgemmStridedBatched(handle_, ta, tb, i(c.m), i(c.n), i(c.k), &one, pointer<float>(c.a), i(c.lda),
                                           s(c.stride_a), pointer<float>(c.b), i(c.ldb), s(c.stride_b), &zero,
                                           pointer<float>(c.c), i(c.ldc), s(c.stride_c), i(c.batch)),
            "cublasSgemmStridedBatched", what);
    } else if (c.dtype == DType::kF64) {
      const double one = 1.0, zero = 0.0;
      check(api_,
            api_.cublasDgemmStridedBatched(handle_, ta, tb, i(c.m), i(c.n), i(c.k), &one, pointer<double>(c.a),
                                           i(c.lda), s(c.stride_a), pointer<double>(c.b), i(c.ldb), s(c.stride_b),
                                           &zero, pointer<double>(c.c), i(c.ldc), s(c.stride_c), i(c.batch)),
            "cublasDgemmStridedBatched", what);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cuBLAS GEMM: dtype {} is not f32, f64, f16 or bf16", dtype_name(c.dtype)),
                  "only f32, f64, f16 and bf16 products become cuBLAS calls (is_blas_gemm_dtype)");
    }
  }

  template <typename T>
  static T* pointer(uint64_t address) {
    return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
  }

  CublasLibrary::Api api_;
  CudaDevice& device_;
  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  std::shared_ptr<Buffer> workspace_;  // cuBLASLt's workspace (may be null)
  int64_t workspace_bytes_ = 0;
};

}  // namespace

bool is_blas_gemm_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 || dtype == DType::kBF16;
}

CublasLibrary::CublasLibrary() : api_(std::make_unique<Api>()) {}

CublasLibrary::~CublasLibrary() {
  // A usable cuBLAS stays loaded (it registers exit handlers with the CUDA runtime, as libcuda
  // does); dlopen is reference counted.
  if (library_ != nullptr && !available_) dlclose(library_);
  if (lt_library_ != nullptr && !available_) dlclose(lt_library_);
}

std::shared_ptr<CublasLibrary> CublasLibrary::load(const std::string& library, const std::string& lt_library) {
  std::shared_ptr<CublasLibrary> lib(new CublasLibrary());
  dlerror();
  lib->library_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->library_ == nullptr) {
    const char* err = dlerror();
    lib->reason_ = fmt::format("the cuBLAS library {} could not be loaded: {}", library,
                               err != nullptr ? err : "unknown dlopen error");
    return lib;
  }
  lib->path_ = library_path(lib->library_);
  lib->source_ = "given";
  if (!lib->resolve_blas(library)) return lib;
  // After cuBLAS: its own dependency on cuBLASLt (found through its RUNPATH) is what a bare
  // soname then finds.
  lib->lt_library_ = dlopen(lt_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->lt_library_ == nullptr) {
    const char* err = dlerror();
    lib->reason_ = fmt::format("the cuBLASLt library {} could not be loaded: {}", lt_library,
                               err != nullptr ? err : "unknown dlopen error");
    return lib;
  }
  lib->lt_path_ = library_path(lib->lt_library_);
  lib->resolve_lt(lt_library);
  return lib;
}

std::shared_ptr<CublasLibrary> CublasLibrary::load(const LibrarySearch& search) {
  std::shared_ptr<CublasLibrary> lib(new CublasLibrary());
  const OpenedLibrary blas = open_library("libcublas.so.13", search);
  if (blas.handle == nullptr) {
    lib->reason_ =
        fmt::format("the cuBLAS library libcublas.so.13 was not found; tried {}", fmt::join(blas.failures, "; "));
    return lib;
  }
  lib->library_ = blas.handle;
  lib->path_ = blas.path;
  lib->source_ = blas.source;
  if (!lib->resolve_blas(blas.path)) return lib;
  // cuBLASLt from cuBLAS's folder first (where cuBLAS's own dependency on it came from).
  LibrarySearch same = search;
  const size_t slash = blas.path.find_last_of('/');
  if (slash != std::string::npos) same.dirs.insert(same.dirs.begin(), blas.path.substr(0, slash));
  const OpenedLibrary lt = open_library("libcublasLt.so.13", same);
  if (lt.handle == nullptr) {
    lib->reason_ =
        fmt::format("the cuBLASLt library libcublasLt.so.13 was not found; tried {}", fmt::join(lt.failures, "; "));
    return lib;
  }
  lib->lt_library_ = lt.handle;
  lib->lt_path_ = lt.path;
  lib->resolve_lt(lt.path);
  return lib;
}

bool CublasLibrary::resolve_blas(const std::string& library) {
  CublasLibrary* lib = this;
  Api& api = *lib->api_;
  std::vector<std::string> missing;
#define INGOT_CUBLAS_RESOLVE_ENTRY(name)                                        \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib->library_, #name)); \
  if (api.name == nullptr) missing.push_back(#name);
  INGOT_CUBLAS_ENTRY_POINTS(INGOT_CUBLAS_RESOLVE_ENTRY)
#undef INGOT_CUBLAS_RESOLVE_ENTRY
#define INGOT_CUBLAS_RESOLVE_TYPED_ENTRY(name, type)              \
  api.name = reinterpret_cast<type>(dlsym(lib->library_, #name)); \
  if (api.name == nullptr) missing.push_back(#name);
  INGOT_CUBLAS_EX_ENTRY_POINTS(INGOT_CUBLAS_RESOLVE_TYPED_ENTRY)
#undef INGOT_CUBLAS_RESOLVE_TYPED_ENTRY
  if (!missing.empty()) {
    lib->reason_ = fmt::format("{} is not a usable cuBLAS: it lacks {}", library, fmt::join(missing, ", "));
    return false;
  }
  return true;
}

void CublasLibrary::resolve_lt(const std::string& lt_library) {
  CublasLibrary* lib = this;
  Api& api = *lib->api_;
  std::vector<std::string> missing;
#define INGOT_CUBLASLT_RESOLVE_ENTRY(name)                                         \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib->lt_library_, #name)); \
  if (api.name == nullptr) missing.push_back(#name);
  INGOT_CUBLASLT_ENTRY_POINTS(INGOT_CUBLASLT_RESOLVE_ENTRY)
#undef INGOT_CUBLASLT_RESOLVE_ENTRY
  if (!missing.empty()) {
    lib->reason_ = fmt::format("{} is not a usable cuBLASLt: it lacks {}", lt_library, fmt::join(missing, ", "));
    return;
  }
  lib->available_ = true;
}

std::unique_ptr<CudaBlas> CublasLibrary::create(CudaDevice& device) const {
  if (!available_) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("cannot run GEMMs on {}: {}", device.name(), reason_),
                "install cuBLAS (CUDA 13: libcublas.so.13) where the dynamic loader finds it, e.g. add "
                "/usr/local/cuda/lib64 to LD_LIBRARY_PATH, or pass a CudaBlas");
  }
  return std::make_unique<CublasBlas>(*api_, device);
}

}  // namespace ingot
