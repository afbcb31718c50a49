// Running a CudaProgram (ingot/runtime/cuda_program.h) on a CUDA device: the kernels' PTX loaded
// as driver modules (one per kernel, the PTX of the device's architecture), constants uploaded
// once, and each run's thunks enqueued in order on the device's compute stream -- kernel launches
// with MLIR's memref-descriptor arguments, GEMMs through a BLAS (cuBLAS, loaded with dlopen
// like the driver), and convolutions through the implicit-GEMM kernel or cuDNN, whichever was
// faster at their first run (cuda_dnn.h). docs/runtime-cuda.md, "Running a CudaProgram".
//
// The pure parts (PTX choice, launch parameter words, the column-major GEMM call) are free
// functions so they are tested without a device.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/cuda_dnn.h"
#include "ingot/runtime/cuda_program.h"
#include "ingot/runtime/library_search.h"

// Opaque driver handle types, as declared by cuda.h (CUmodule, CUfunction, CUgraphExec).
struct CUmod_st;
struct CUfunc_st;
struct CUgraphExec_st;

namespace ingot {

// ---------------------------------------------------------------------------------------------
// Pure functions (no device)

/// The architecture key of `image.ptx` to load on a device of compute capability
/// `major`.`minor`: "sm_<major><minor>" when present, else the newest "sm_<digits>" key whose
/// number is <= 10 * major + minor (PTX is forward compatible: the driver JIT-compiles older PTX
/// for newer GPUs; CUDA Programming Guide, "Application Compatibility"). Keys that are not
/// "sm_<digits>" (e.g. "sm_90a", arch-specific and not forward compatible) are never chosen.
/// Throws ingot::Error kNotFound naming the kernel, the archs available and the
/// device's ("compile for sm_75 or older") when none fits; kInvalidArgument for major < 1 or
/// minor outside [0, 9].
std::string select_cuda_ptx_arch(const CudaKernelImage& image, int major, int minor);

/// The kernel parameters of `launch` as 64-bit words, in order, by MLIR's memref descriptor ABI
/// (cuda_program.h): kMemref -> allocated pointer, aligned pointer (both
/// `buffer_addresses[arg.buffer]`, NOT advanced by the offset), offset, sizes..., strides...
/// (elements) = 3 + 2 * rank words; kIndex -> `value`. Throws ingot::Error kOutOfRange naming the
/// launch's kernel and the argument for a buffer index outside `buffer_addresses`, and
/// kInvalidArgument when sizes and strides differ in length.
std::vector<uint64_t> cuda_launch_words(const CudaLaunch& launch, std::span<const uint64_t> buffer_addresses);

/// cuda_launch_words for every kernel launch of `program`, in thunk order (GEMM and
/// convolution thunks are skipped). `buffer_addresses[i]` is the device address of `program.buffers[i]`.
std::vector<std::vector<uint64_t>> cuda_launch_parameter_words(const CudaProgram& program,
                                                               std::span<const uint64_t> buffer_addresses);

/// One column-major BLAS ?gemm call with alpha = 1 and beta = 0, as BLAS defines it (reference
/// BLAS sgemm.f): C (m x n, leading dimension ldc) = op(A) op(B), op(A) (m x k) = A^T when
/// `trans_a` (A stored k x m, lda >= k) else A (lda >= m); op(B) (k x n) likewise (B stored
/// n x k with ldb >= n when `trans_b`, else k x n with ldb >= k). Pointers are device addresses
/// of the first element; dims and leading dimensions are elements.
///
/// With `batch` > 1 it is one strided-batched call (cublas?gemmStridedBatched): `batch` products
/// C_i = op(A_i) op(B_i), the i-th matrix of each operand at its pointer + i * stride (elements).
struct CudaBlasGemm {
  DType dtype = DType::kF32;  ///< f32 (sgemm), f64 (dgemm), f16 or bf16 (gemmEx, f32 compute)
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  uint64_t a = 0, b = 0, c = 0;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t batch = 1;  ///< number of products (>= 1)
  /// Elements from one matrix of A (B, C) to the next; only read when batch > 1.
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  /// kBias: C[i + j ldc] = sum + bias[i] (a vector of m elements, one per row of the column-major
  /// C, as cuBLASLt's CUBLASLT_EPILOGUE_BIAS broadcasts it along the columns); kBiasRelu: then
  /// max(., 0) (CUBLASLT_EPILOGUE_RELU_BIAS). f32 only, batch 1.
  CudaGemm::Epilogue epilogue = CudaGemm::Epilogue::kNone;
  uint64_t bias = 0;  ///< device address of the bias (kBias / kBiasRelu)
};

/// The column-major call computing the row-major `gemm` (cuda_program.h, CudaGemm): a row-major
/// matrix is its transpose in column-major order, so C = op(A) op(B) (row-major, m x n) is
/// C^T = op(B)^T op(A)^T (column-major, n x m): gemm(trans_b, trans_a, n, m, k, B, ldb, A, lda,
/// C, ldc = n) with lda = the row length of A as stored (m when trans_a, else k), ldb = that of
/// B (k when trans_b, else n). The operand addresses are `buffer_addresses[view.buffer]` plus
/// view.offset * dtype size; an epilogue's bias likewise (the row-major C's n columns are the
/// column-major C^T's rows, along which cuBLASLt's bias runs). A batched `gemm` (3-D views (batch, rows, cols)) becomes
/// one strided-batched call: batch = gemm.batch and the strides are the views' batch strides (strides[0]; a memref
/// view's batch stride is uniform), A's and B's swapped like the operands. Throws ingot::Error kOutOfRange for a buffer
/// index outside `buffer_addresses`, kInvalidArgument for a dtype other than f32/f64/f16/bf16 (is_blas_gemm_dtype), m,
/// n, k or batch < 1, or a batched view that is not 3-D.
CudaBlasGemm column_major_gemm(const CudaGemm& gemm, std::span<const uint64_t> buffer_addresses);

/// The BLAS calls that run `gemm`, in order: one call (column_major_gemm), except for a batched
/// GEMM whose C matrices overlap (C's batch stride < m * n, e.g. 0 when a (1, m, n) result is
/// broadcast): one strided call would write them concurrently, so it runs as one call per batch
/// element (CudaGemm::batch_elements), in order, as the per-element loop defines it. Errors: those
/// of column_major_gemm.
std::vector<CudaBlasGemm> cuda_blas_calls(const CudaGemm& gemm, std::span<const uint64_t> buffer_addresses);

/// The alignment of a device address in bytes as cuBLASLt's heuristic preferences take it
/// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES): the largest power of two <= 256 dividing
/// `address` (256 for 0).
uint32_t blas_alignment_bytes(uint64_t address);

/// Whether GEMM thunks of `dtype` run through a BLAS: f32 (cublasSgemm), f64 (cublasDgemm), f16 and
/// bf16 (cublasGemmEx with CUDA_R_16F / CUDA_R_16BF operands and result, CUBLAS_COMPUTE_32F:
/// products summed in f32, rounded to the dtype once).
bool is_blas_gemm_dtype(DType dtype);

/// Throws ingot::Error (kInvalidArgument / kOutOfRange / kNotFound, naming the thunk, the
/// argument or the buffer) unless `program` is runnable: every launch names a kernel of
/// `program.kernels` with grid and block sizes >= 1; every memref view (launch arguments and
/// GEMM operands) names a buffer, has as many sizes as strides, non-negative sizes, strides and
/// offset, and stays inside its buffer (offset + sum((size - 1) * stride) < elements); GEMMs
/// are f32, f64, f16 or bf16 (is_blas_gemm_dtype) and their operands have the GEMM's dtype, shapes (m, k)/(k, m), (k,
/// n)/(n, k), (m, n) and are contiguous; a GEMM with an epilogue is f32 without batch and its bias is n contiguous f32
/// starting at a multiple of 4 elements (16 bytes: buffers are allocated at least 256-byte
/// aligned); convolution operands are contiguous 1-D views of the spec's shapes in the
/// convolution's dtype (f32/f64), its kernel is in the program with a valid grid and block and
/// `params` holds a whole CudaConvParams; buffers have bytes = elements * dtype size (data too,
/// for constants); inputs and outputs match `input_types` / `output_types` and each index has
/// exactly one buffer; `donated` pairs are in range, of equal types, each input and output at
/// most once.
void validate_cuda_program(const CudaProgram& program);

// ---------------------------------------------------------------------------------------------
// BLAS

/// What runs the GEMM thunks: cuBLAS on a GPU (CublasLibrary::create), a host implementation in
/// tests. Implementations enqueue the call on `stream` (after the work already enqueued there).
class CudaBlas {
 public:
  virtual ~CudaBlas() = default;
  /// Enqueues `call` on `stream`. Throws the ingot::Error of a failed call.
  virtual void gemm(const CudaBlasGemm& call, const CudaStream& stream) = 0;
};

/// cuBLAS (libcublas.so.13 from CUDA 13) and cuBLASLt (libcublasLt.so.13, which libcublas itself
/// links, so one is never installed without the other) loaded with dlopen, never linked. Loading
/// never throws: available() is false and unavailable_reason() says why (a library not found, an
/// entry point missing). Thread-safe after construction (read-only).
class CublasLibrary {
 public:
  /// dlopen(`library`) and dlsym of cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2,
  /// cublasSgemm_v2, cublasDgemm_v2, cublas{S,D}gemmStridedBatched and cublasGetStatusString;
  /// then dlopen(`lt_library`) and dlsym of cublasLtCreate, cublasLtDestroy,
  /// cublasLtMatmulDesc{Create,Destroy,SetAttribute}, cublasLtMatrixLayout{Create,Destroy} and
  /// cublasLtMatmul.
  static std::shared_ptr<CublasLibrary> load(const std::string& library = "libcublas.so.13",
                                             const std::string& lt_library = "libcublasLt.so.13");
  /// The same, finding libcublas.so.13 with open_library(`search`) (the toolkit, the loader, a
  /// Python environment's nvidia/*/lib, ...), then libcublasLt.so.13 in cuBLAS's folder first
  /// (where cuBLAS's own dependency on it came from), then the same way. Unavailable with every
  /// place tried in unavailable_reason() when either is found nowhere.
  static std::shared_ptr<CublasLibrary> load(const LibrarySearch& search);
  ~CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  bool available() const { return available_; }
  /// Why available() is false (empty when available).
  const std::string& unavailable_reason() const { return reason_; }
  /// A cuBLAS and a cuBLASLt handle on `device` (created with its context current); its gemm()
  /// sets the handle's stream and calls cublasSgemm/cublasDgemm (batch 1) or
  /// cublasSgemmStridedBatched/cublasDgemmStridedBatched (batch > 1); a call with an epilogue runs
  /// as cublasLtMatmul (f32, CUBLAS_COMPUTE_32F, CUBLASLT_MATMUL_DESC_EPILOGUE BIAS or RELU_BIAS
  /// with CUBLASLT_MATMUL_DESC_BIAS_POINTER; the first algorithm of cublasLtMatmulAlgoGetHeuristic
  /// for the operands' alignments (blas_alignment_bytes) within a cuBLASLt workspace allocated
  /// here: 32 MiB on compute capability >= 9.0, else 4 MiB (NVIDIA's recommendation,
  /// cublasSetWorkspace), at most 1/16 of the free memory, none when it cannot be had) on
  /// `stream`: a bias not 16-byte aligned is kInvalidArgument, no algorithm kUnimplemented naming
  /// CudaCompileOptions::gemm_epilogues (CudaExecutable then runs the plain GEMM and the bias
  /// kernel instead, see epilogue_fallbacks()). The handle is destroyed with the
  /// returned object, which must not outlive `device`. Errors: kFailedPrecondition with the
  /// reason when the library is unavailable; a failed cublasCreate as kFailedPrecondition
  /// naming the cuBLAS status.
  std::unique_ptr<CudaBlas> create(CudaDevice& device) const;

  /// The files loaded (absolute when the loader says; empty when not found) and how they were
  /// found (LibraryCandidate::source; "given" for load(library, lt_library)).
  const std::string& path() const { return path_; }
  const std::string& lt_path() const { return lt_path_; }
  const std::string& source() const { return source_; }

  struct Api;  ///< the resolved entry points (runtime/cuda/cublas.cpp)

 private:
  CublasLibrary();
  bool resolve_blas(const std::string& library);  // false (reason_ set) when entry points are missing
  void resolve_lt(const std::string& lt_library);
  std::unique_ptr<Api> api_;
  void* library_ = nullptr;     // dlopen handle of cuBLAS
  void* lt_library_ = nullptr;  // and of cuBLASLt
  bool available_ = false;
  std::string reason_;
  std::string path_, lt_path_, source_;
};

// ---------------------------------------------------------------------------------------------
// CudaExecutable

/// How a CudaExecutable runs, beyond the program and its libraries (CudaExecutable::create).
/// docs/runtime-cuda.md, "CUDA graphs".
struct CudaExecutableOptions {
  /// Capture a run into a CUDA graph (cuStreamBeginCapture .. cuStreamEndCapture, then
  /// cuGraphInstantiate) and replay it (one cuGraphLaunch instead of one launch per thunk) when a
  /// later run has the same buffer addresses: graphs are keyed by the device addresses of the
  /// run's inputs and outputs. The temporaries then live in one arena allocated by create and
  /// kept for the executable's lifetime (the sum of their bytes, each rounded up to 256) instead
  /// of being allocated per run. A run whose convolution engines are not chosen yet runs
  /// uncaptured (the choice times both engines). A failed capture or instantiation turns graphs
  /// off for this executable with the reason (graph_stats().disabled_reason) and the run, and
  /// every later one, runs uncaptured. So do runs whose addresses keep changing: after
  /// 2 * graph_cache_size + 1 captures in a row without a replay, graphs are turned off with that
  /// reason (each capture costs more than the launches it saves once). Off by default until
  /// measured on a GPU.
  bool cuda_graphs = false;
  /// Graphs kept, least recently used evicted first (a trainer's batches alternate between a
  /// few addresses; donated state keeps its own). In [1, 1024] (ingot::Error kInvalidArgument
  /// at create otherwise).
  int64_t graph_cache_size = 4;
  /// Where create looks for cuBLAS and cuDNN when it loads them itself (no `blas` / `dnn` given):
  /// the toolkit's lib64, then the loader by default; `ingot` passes cuda_library_search's
  /// (INGOT_CUDA_LIB_DIRS, a Python environment's nvidia/*/lib). docs/runtime-cuda.md.
  LibrarySearch libraries;
};

/// What the graph path of a CudaExecutable did so far (CudaExecutable::graph_stats).
struct CudaGraphStats {
  int64_t captures = 0;         ///< runs captured into a new graph (then launched)
  int64_t replays = 0;          ///< runs that launched a cached graph
  int64_t uncaptured_runs = 0;  ///< runs with graphs on enqueued thunk by thunk (see CudaExecutableOptions)
  int64_t evictions = 0;        ///< graphs destroyed to keep graph_cache_size
  int64_t cached = 0;           ///< graphs held now
  int64_t arena_bytes = 0;      ///< device bytes of the temporaries' arena (0 with graphs off)
  /// Why graphs are off for this executable after a capture failed ("cuStreamEndCapture failed
  /// ..."); empty while they are on (or never were).
  std::string disabled_reason;
};

/// A CudaProgram loaded on one CudaDevice. Construction (create) validates the program, picks
/// each kernel's PTX for the device (select_cuda_ptx_arch), loads one module per kernel
/// (cuModuleLoadDataEx, with the JIT's error log in a failure; a driver too old for the PTX's ISA
/// is kFailedPrecondition naming both CUDA versions) and looks its function up by CudaKernelImage::name, allocates the
/// constant buffers from the device's allocator and uploads them once (the compute stream waits for the upload).
/// Temporaries are allocated per run from the device's caching allocator and released when run() returns: the allocator
/// is stream-ordered with respect to the compute stream, so the memory is reused only by work enqueued after this
/// run's. With CUDA graphs on (CudaExecutableOptions) they live in one arena for the executable's lifetime instead, and
/// runs with recurring buffer addresses replay a captured graph. Destroy the executable before
/// its CudaDevice. Thread-safe: concurrent run() calls are serialized.
class CudaExecutable {
 public:
  /// `blas` runs the GEMM thunks; when null and the program has any, cuBLAS is loaded
  /// (CublasLibrary::load()) and a handle created on `device`. Errors: validate_cuda_program's;
  /// select_cuda_ptx_arch's (kNotFound naming the kernel and the archs); a module the driver
  /// cannot load or a missing entry (the converted CUDA error naming the kernel and arch);
  /// kFailedPrecondition when the program has GEMMs and cuBLAS is unavailable (its reason);
  /// out of device memory for the constants (kOutOfMemory). Nothing stays loaded after an error.
  ///
  /// `dnn` is what may run the convolution thunks besides the implicit-GEMM kernel: nullopt
  /// (default) loads cuDNN when the program has convolutions (CudnnLibrary::load(); unavailable
  /// or failing to create a handle: the kernel runs them, the reason recorded), a null pointer
  /// means the kernel only, else that CudaDnn. The choice per convolution is made at its first
  /// run (conv_choices()).
  ///
  /// `options`: CUDA graphs (CudaExecutableOptions); with them on, the temporaries' arena is
  /// allocated here (kOutOfMemory when it does not fit), and a graph_cache_size outside
  /// [1, 1024] is kInvalidArgument naming the value.
  static std::unique_ptr<CudaExecutable> create(CudaProgram program, CudaDevice& device,
                                                std::shared_ptr<CudaBlas> blas = nullptr,
                                                std::optional<std::shared_ptr<CudaDnn>> dnn = std::nullopt,
                                                CudaExecutableOptions options = {});
  ~CudaExecutable();
  CudaExecutable(const CudaExecutable&) = delete;
  CudaExecutable& operator=(const CudaExecutable&) = delete;

  /// Enqueues one run on the device's compute stream: `inputs[i]` and `outputs[i]` are arrays on
  /// this device of program().input_types[i] / output_types[i] (outputs caller-allocated, written
  /// by the run; they must not share a buffer with an input or another output, except that the
  /// output of a program().donated pair may be that pair's input array: written in place). Returns an event
  /// ready when the run finished (its failure is thrown by the event's wait()). Errors, before
  /// anything is enqueued: kInvalidArgument for a wrong count, an array on another device or
  /// invalid, or aliasing outputs; kShapeMismatch / kDTypeMismatch naming the index, expected
  /// and given; kOutOfMemory for the temporaries.
  std::shared_ptr<CudaEvent> run(std::span<const Array> inputs, std::span<const Array> outputs) const;
  /// The same with outputs allocated on the device (Array::empty); returns them once enqueued
  /// (wait for the device, e.g. with a copy to the host, before reading).
  std::vector<Array> run(std::span<const Array> inputs) const;

  const CudaProgram& program() const { return program_; }
  CudaDevice& device() const { return device_; }
  /// The PTX architecture loaded for each kernel, in the order of program().kernels.
  const std::vector<std::string>& kernel_archs() const { return archs_; }
  /// How each convolution thunk runs, in the order of program().convs() (copies). At its first
  /// run, when a CudaDnn is there and cudnn_conv_mapping expresses it, both the implicit-GEMM
  /// kernel and the DNN's algorithm run on the run's operands (one warm-up and
  /// kConvTimingRuns timed runs each, timed on the host around a stream synchronisation) and the
  /// faster is kept; otherwise the kernel, with the reason. kUndecided before the first run.
  std::vector<CudaConvChoice> conv_choices() const;
  /// Timed runs per engine when choosing (see conv_choices).
  static constexpr int kConvTimingRuns = 5;
  /// Per GEMM thunk (in thunk order): empty while it runs as one call (a cuBLASLt epilogue, or
  /// no epilogue), else why its epilogue runs as a plain GEMM followed by the bias + activation
  /// kernel (kCudaBiasKernel): the error of the cuBLASLt call that found no kernel (kUnimplemented),
  /// recorded at the first run that met it; later runs go straight to the fallback. A program
  /// without that kernel (not made by compile_cuda) throws the error instead.
  std::vector<std::string> epilogue_fallbacks() const;
  const CudaExecutableOptions& options() const { return options_; }
  /// A copy of the graph counters (CudaGraphStats); all zero with graphs off.
  CudaGraphStats graph_stats() const;

 private:
  CudaExecutable(CudaProgram program, CudaDevice& device, std::shared_ptr<CudaBlas> blas);
  void load_modules();
  void upload_constants();
  void check_arrays(std::span<const Array> arrays, bool outputs) const;
  std::vector<uint64_t> buffer_addresses(std::span<const Array> inputs, std::span<const Array> outputs,
                                         std::vector<std::shared_ptr<Buffer>>& temporaries) const;
  /// Enqueues `launch` on `stream`.
  void launch(const CudaLaunch& launch, std::span<const uint64_t> addresses, const CudaStream& stream) const;
  /// The loaded function of program kernel `kernel` (validated to exist).
  CUfunc_st* function_of(const std::string& kernel) const;
  /// Enqueues convolution `c` (its implicit-GEMM kernel) on `stream`.
  void run_conv(const CudaConv& c, std::span<const uint64_t> addresses, const CudaStream& stream) const;

  /// Decides conv_choices_[index] (the first run of that convolution thunk).
  void choose_conv(size_t index, const CudaConv& c, std::span<const uint64_t> addresses) const;
  /// Enqueues convolution `c` through dnn_ with `plan` and the workspace's device address on `stream`.
  void cudnn_forward(const CudaDnnConvPlan& plan, uint64_t workspace, const CudaConv& c,
                     std::span<const uint64_t> addresses, const CudaStream& stream) const;
  /// Enqueues convolution `index` with the engine chosen on `stream`.
  void run_chosen_conv(size_t index, const CudaConv& c, std::span<const uint64_t> addresses,
                       const CudaStream& stream) const;
  /// Enqueues GEMM thunk `index` (`g`) on `stream`: its BLAS calls, or with an epilogue the
  /// cuBLASLt call or its fallback (epilogue_fallbacks; runtime/cuda/gemm_thunk.cpp).
  void run_gemm(size_t index, const CudaGemm& g, std::span<const uint64_t> addresses, const CudaStream& stream) const;
  /// Enqueues the bias kernel on the result of `call` (its c, bias, m, n, ldc, epilogue).
  void launch_bias_kernel(const CudaBlasGemm& call, const CudaStream& stream) const;
  /// Enqueues every thunk in order on `stream` (choosing undecided convolutions, which only
  /// happens on the compute stream: see run_with_graphs).
  void enqueue_thunks(std::span<const uint64_t> addresses, const CudaStream& stream) const;

  // CUDA graphs (runtime/cuda/graphs.cpp; run_mu_ held).
  /// Allocates the temporaries' arena and creates the capture stream (create, with graphs on).
  void prepare_graphs();
  /// Enqueues a run through a cached or newly captured graph, or thunk by thunk (see
  /// CudaExecutableOptions::cuda_graphs).
  void run_with_graphs(std::span<const uint64_t> addresses) const;
  /// enqueue_thunks, counted as an uncaptured run.
  void run_uncaptured(std::span<const uint64_t> addresses) const;
  /// After a failed cuGraphLaunch (`result`, while `what`): graphs off with the reason, the
  /// cached ones destroyed, and the run enqueued uncaptured.
  void fall_back(int result, const std::string& what, std::span<const uint64_t> addresses) const;
  /// Launches the cached graph of `addresses` if there is one (false otherwise).
  bool replay(std::span<const uint64_t> addresses) const;
  /// Caches `exec` for `addresses`, evicting the least recently used graph when full.
  void keep_graph(CUgraphExec_st* exec, std::span<const uint64_t> addresses) const;
  /// Captures the thunks into an instantiated graph; null (graphs turned off, the reason
  /// recorded) when capture or instantiation fails.
  CUgraphExec_st* capture(std::span<const uint64_t> addresses) const;
  /// Destroys every cached graph (the destructor, after the stream drained; or when graphs are
  /// turned off: a graph still executing is freed when it completes, as cuGraphExecDestroy does).
  void destroy_graphs() const;

  /// A captured run: its key (every buffer address) and when it was last launched.
  struct CachedGraph {
    std::vector<uint64_t> addresses;
    CUgraphExec_st* exec = nullptr;
    uint64_t last_use = 0;
  };

  CudaProgram program_;
  CudaDevice& device_;
  std::shared_ptr<CudaBlas> blas_;
  std::shared_ptr<CudaDnn> dnn_;                                  // null: the implicit-GEMM kernel only
  std::string dnn_reason_;                                        // why dnn_ is null
  mutable std::vector<CudaConvChoice> conv_choices_;              // per convolution thunk (run_mu_)
  mutable std::vector<CudaDnnConvPlan> conv_plans_;               // likewise, when cuDNN was planned
  mutable std::vector<std::shared_ptr<Buffer>> conv_workspaces_;  // likewise, cuDNN's workspace
  mutable std::vector<std::string> epilogue_fallbacks_;           // per GEMM thunk (run_mu_)
  std::vector<std::string> archs_;
  std::vector<CUmod_st*> modules_;                  // one per kernel
  std::vector<CUfunc_st*> functions_;               // one per kernel
  std::vector<std::shared_ptr<Buffer>> constants_;  // by buffer index (null for others)
  CudaExecutableOptions options_;
  std::shared_ptr<Buffer> arena_;               // the temporaries, with graphs on
  std::unique_ptr<CudaStream> capture_stream_;  // graphs are captured here, launched on compute
  std::vector<int64_t> arena_offsets_;          // bytes into arena_, by buffer index (temporaries)
  mutable std::vector<CachedGraph> graphs_;     // at most options_.graph_cache_size (run_mu_)
  mutable uint64_t graph_clock_ = 0;            // runs through the graph path (run_mu_)
  mutable int64_t captures_in_a_row_ = 0;       // captures since the last replay (run_mu_)
  mutable CudaGraphStats graph_stats_;          // run_mu_
  mutable std::mutex run_mu_;
};

}  // namespace ingot
