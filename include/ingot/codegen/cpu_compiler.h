// The CPU back end: an MLIR module (upstream dialects, tensor level) -> a named pass pipeline ->
// LLVM -> native code at -O2 (CpuCompileOptions::opt_level) for the host CPU, one object per kernel compiled in
// parallel and linked into an in-process JIT (LLVM ORC), cached on disk (docs/compiler.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ingot/codegen/compile_cache.h"
#include "ingot/codegen/pipeline.h"
#include "ingot/runtime/array.h"
#include "ingot/runtime/executable.h"

namespace ingot::codegen {

/// Estimated operations (ingot-parallelize-outer-loops' work estimate: scalar operations times
/// iterations) below which a loop nest runs serially in the default pipeline: an OpenMP
/// fork/join costs microseconds, and smaller nests (vectorised, ~16 operations per cycle) finish
/// sooner on one core. Measured by bench/compiler_bench's `threads` section (MLP step: 2^18 was
/// fastest of 2^12, 2^15, 2^18, 2^21 on 2 cores).
inline constexpr int64_t kMinParallelWork = int64_t{1} << 18;

/// Largest CpuCompileOptions::num_threads accepted (libomp caps teams far lower anyway).
inline constexpr int kMaxThreads = 1024;

/// The default CPU pipeline, stage by stage (see docs/compiler.md for what each stage does):
/// canonicalize+cse, elementwise fusion, f16/bf16 emulation in f32, one-shot bufferization with
/// results as caller-provided out-params, deallocation, loops (outer parallel dims of big nests
/// parallel), OpenMP, lowering to LLVM (the JIT's -O2 pipeline then vectorises loops for the host
/// CPU, AVX-512 where present). `num_threads`: threads the parallel loops use, 0 for all hardware
/// threads, 1 for serial code. Throws ingot::Error(kInvalidArgument) outside [0, kMaxThreads].
/// `outline_kernels`: the "outline" stage after "deallocate" (ingot-outline-kernels: one function
/// per loop nest, identical nests share one; docs/compiler.md, "Kernel outlining and dedupe").
std::vector<PipelineStage> default_cpu_pipeline(int num_threads = 0, bool outline_kernels = true);

/// Options of compile_cpu().
struct CpuCompileOptions {
  /// Stages run in order; empty means default_cpu_pipeline().
  std::vector<PipelineStage> pipeline;
  /// If non-empty, the module is written to `<dump_dir>/<NN>-<stage>.mlir` after every stage
  /// (00-input.mlir first) and the LLVM IR to `<dump_dir>/<NN>-llvm.ll`. Created if missing.
  std::string dump_dir;
  /// Verify the module after every MLIR pass (mlir-opt's --verify-each) rather than once after
  /// each stage. Off by default: verifying after each pass was a third of the MLIR stages' time
  /// on the bench LM (docs/compiler.md, "Compile time"); turn it on to find the pass of a custom
  /// `pipeline` that leaves invalid IR (a stage's output is verified either way). Not part of the
  /// cache key (the code is the same).
  bool verify_each_pass = false;
  /// Threads the parallel loops of the default pipeline run on (OpenMP through libomp): 0 means
  /// all hardware threads, 1 serial loop nests (no OpenMP calls). Ignored when `pipeline` is
  /// given. Library kernels the code calls (oneDNN GEMM, convolutions) use all cores regardless.
  /// Fewer when the process cannot start that many threads (an address-space or thread limit):
  /// compile_cpu first makes libomp's pool start its threads (kernels::start_openmp_threads) and
  /// compiles the loops for the threads it got. Outside [0, kMaxThreads]:
  /// ingot::Error(kInvalidArgument).
  int num_threads = 0;
  /// LLVM optimisation level (0-3) of the kernels (clang's -O<level> pipeline and code generator
  /// for the host CPU; the entry is always compiled at -O0). 2 by default, as XLA:CPU's
  /// backend: -O3 spent ~13% more LLVM time on the bench LM and ran it no faster
  /// (bench/results/2026-12-02-compile-time.md). Part of the compilation cache key.
  int opt_level = 2;
  /// Outline each loop nest into its own function and compile structurally identical ones once
  /// (the default pipeline's "outline" stage). Ignored when `pipeline` is given. Off gives one
  /// function for the whole step, as before outlining existed (for comparisons).
  bool outline_kernels = true;
  /// Threads that optimise and compile the kernel functions to machine code concurrently (0: all
  /// hardware threads). The code is the same for every value (each kernel compiles alone).
  int codegen_threads = 0;
  /// The persistent compilation cache's directory (docs/compiler.md, "Compilation cache"): object
  /// code of each compiled step and kernel, keyed by the lowered IR, the pipeline, these options,
  /// the host CPU and ingot's version. Default: $XDG_CACHE_HOME/ingot, else ~/.cache/ingot
  /// (codegen::default_compile_cache_dir()); empty disables it. An unusable directory (a file,
  /// read-only, full disk) gives one warning and compiles without caching; never an error. Not
  /// used while `dump_dir` is set (a cached step would write no dumps).
  std::string compile_cache_dir = default_compile_cache_dir();
  /// Size cap of the cache directory in bytes; least recently used entries are evicted past it.
  int64_t compile_cache_max_bytes = kDefaultCompileCacheMaxBytes;
  /// Called while the kernels compile: (kernels done, kernels to compile), from compile threads
  /// (serialised). Used by fit's progress line; may be empty.
  std::function<void(int64_t, int64_t)> progress;
  /// Describe the JIT code to `perf` (LLVM's PerfJITEventListener): a jitdump file
  /// `jit-<pid>.dump` under $JITDUMPDIR (default ~/.debug/jit) that `perf inject --jit` turns into
  /// symbols, so `perf report` names each outlined parallel loop (`main..omp_par.N`). Off by
  /// default: every process would otherwise leave a file
  /// of ~0.2 MiB behind. docs/compiler.md, "Profiling".
  bool perf_jitdump = false;
  /// Shared libraries the JIT resolves runtime symbols from: MLIR's C runner utilities provide
  /// `memrefCopy` for strided copies, LLVM's OpenMP runtime the `__kmpc_*` calls of parallel
  /// loops. Default: Debian's llvm-22 copies (packages libmlir-22-dev, libomp-22-dev).
  std::vector<std::string> runtime_libraries = {"/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so",
                                                "/usr/lib/llvm-22/lib/libomp.so"};
};

/// What a CpuKernel runs per call, counted statically in its entry function's body (top-level
/// operations only, and through each call of a function the module defines -- a scope function --
/// that function's body once per call) after the last pipeline stage that leaves the entry a `func.func` (in the
/// default pipeline: after "openmp", before "lower-to-llvm"). A loop nest or call inside a
/// counted loop nest belongs to that nest; a branch (scf.if) is not counted. The measure of
/// `ingot bench`'s kernels_per_step (bench/README.md); bench/README.md, "Kernel count".
struct CpuKernelStats {
  /// Top-level loop nests: scf.for / scf.parallel / scf.forall / scf.while, affine.for /
  /// affine.parallel, omp.parallel (an OpenMP worksharing loop), and linalg operations a custom
  /// pipeline left unlowered (each one loop nest). Elementwise fusion merges loop nests, so this
  /// drops with the "fuse" stage.
  int64_t loop_nests = 0;
  /// Top-level calls of external functions (func.call: the library GEMM ingot_cpu_gemm_*, the
  /// im2col convolution ingot_cpu_conv_*).
  int64_t library_calls = 0;
  /// Distinct kernel functions compiled for the loop nests (ingot-outline-kernels; 0 when the
  /// step was compiled as one function). loop_nests / kernel_functions is the reuse from dedupe.
  int64_t kernel_functions = 0;
  /// Top-level memref.copy operations (a memcpy or MLIR's memrefCopy each; a state output copied
  /// into its donated parameter's buffer counts even where the two are one buffer at run time).
  int64_t copies = 0;
  /// Functions compiled once for the repeated blocks of the step (lower::LoweringOptions::
  /// share_repeated_scopes; 0 when lowered flat). The counts above are per call of the entry:
  /// each call of such a function counts its kernels again.
  int64_t scope_functions = 0;
  /// Bytes of the entry's own buffers (memref.alloc of static shape, the step's intermediates;
  /// not its arguments or out-params) live at once at the peak, following the allocations and
  /// the deallocations ingot-early-dealloc placed, in program order; a scope function's peak
  /// counts at each of its calls. CpuKernel::run reserves this much before running anything, so
  /// a step that cannot get its memory fails with kOutOfMemory before it changes a buffer.
  int64_t peak_alloc_bytes = 0;
  /// Kernels per call: loop_nests + library_calls + copies (each one pass of work over memory,
  /// as one launch of a generated CUDA kernel or library call is on a GPU).
  int64_t kernels() const { return loop_nests + library_calls + copies; }
};

/// Where a compile_cpu() call spent its time and what the cache did (ingot bench --json,
/// ingot train --metrics-json; docs/compiler.md, "Compile time"). Seconds of wall-clock time.
struct CpuCompileReport {
  /// Parsing the module and running the pipeline stages; with an `outline` stage and no dumps,
  /// the stages up to it and the split into parts (the later stages run per part, in llvm_seconds).
  double mlir_seconds = 0;
  /// Translation to LLVM IR, splitting, optimisation and code generation, wall clock (per-part
  /// lowering included on the split path: the stages after `outline`, run in parallel with it).
  double llvm_seconds = 0;
  double link_seconds = 0;      ///< loading the object code into the JIT and resolving the entry
  bool step_cache_hit = false;  ///< the whole step came from the compilation cache (no MLIR, no LLVM)
  int64_t objects = 0;          ///< object files linked (host entry + distinct kernels)
  int64_t cache_hits = 0;       ///< of those, loaded from the compilation cache
  int64_t cache_misses = 0;     ///< of those, compiled now
};

/// A JIT-compiled entry function `@<entry>(inputs..., outputs...)` over memrefs, taking its inputs
/// and caller-allocated outputs as identity-layout row-major buffers.
class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  /// Runs the function. `inputs` and `outputs` must have the shapes and dtypes the module was
  /// compiled for (checked: ingot::Error kShapeMismatch / kDTypeMismatch naming the index).
  /// Throws ingot::Error(kOutOfMemory) naming the entry and the bytes when the step's working
  /// memory (CpuKernelStats::peak_alloc_bytes) cannot be allocated, before any code runs: the
  /// inputs and outputs (donated buffers updated in place included) are unchanged.
  virtual void run(std::span<const Array> inputs, std::span<Array> outputs) const = 0;
  /// The input and output types the kernel was compiled for.
  virtual const std::vector<std::pair<Shape, DType>>& input_types() const = 0;
  virtual const std::vector<std::pair<Shape, DType>>& output_types() const = 0;
  /// The loop nests, library calls and copies of one call (CpuKernelStats).
  virtual const CpuKernelStats& stats() const = 0;
  /// How the compile went (CpuCompileReport).
  virtual const CpuCompileReport& report() const = 0;
};

/// The kernel's stats and report as the runtime's CompileInfo (for its Thunk).
CompileInfo compile_info(const CpuKernel& kernel);

/// Parses `mlir_text` (a module whose function `entry` has tensor arguments and results and the
/// attribute llvm.emit_c_interface), runs the pipeline and JIT-compiles it.
/// `input_types`/`output_types` describe the function's arguments and results.
/// Throws ingot::Error(kInvalidArgument) with MLIR's diagnostics (and the dump path, if any)
/// when parsing, a pass or code generation fails.
std::unique_ptr<CpuKernel> compile_cpu(const std::string& mlir_text, const std::string& entry,
                                       std::vector<std::pair<Shape, DType>> input_types,
                                       std::vector<std::pair<Shape, DType>> output_types,
                                       const CpuCompileOptions& options = {});

/// Runs `stages` on `mlir_text` and returns the resulting module text (for ingot-opt and tests).
/// Throws like compile_cpu().
std::string run_pipeline(const std::string& mlir_text, const std::vector<PipelineStage>& stages);

}  // namespace ingot::codegen
