// jit: trace + lower + compile a function once per input signature and cache the executable
// (jax.jit's contract on the CPU back end).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ingot/codegen/cpu_compiler.h"
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/ir/cost.h"
#include "ingot/ir/graph.h"
#include "ingot/jit/target.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/executable.h"
#include "ingot/trace/tensor.h"

namespace ingot {

/// Compiles `graph` for the host CPU into an Executable with one JIT-compiled thunk
/// ("jit:<graph name>"); repeated outputs share one buffer. Throws what lowering and the
/// back end throw (kUnimplemented "no lowering for op 'X'", MLIR diagnostics as kInvalidArgument).
///
/// `donate_argnums` (JAX's name): parameters whose buffers are reused for outputs of the same
/// shape and dtype (each donated parameter is paired with the first unpaired such output), so an
/// in-place update allocates no second copy. A donated parameter that is also returned unchanged
/// is not paired (its old value must survive); unpaired donated buffers are still consumed.
/// A donate_argnum out of range or repeated is ingot::Error(kInvalidArgument).
std::shared_ptr<const Executable> compile_graph(const ir::Graph& graph, const codegen::CpuCompileOptions& options = {},
                                                const std::vector<int64_t>& donate_argnums = {},
                                                const lower::LoweringOptions& lowering = {});

class CudaDevice;

/// Compiles `graph` for the CUDA device `device` (ingot/runtime/cuda.h): lowered with f32/f64/
/// f16/bf16 matrix products as cuBLAS calls (f16/bf16 through cublasGemmEx with f32 compute) (`lowering.blas_gemm`,
/// default on; off: generated kernels; `gemm_function` is set for CUDA), f32/f64 convolutions as convolution thunks
/// (`library_conv`, default on; `library_conv_min_k` and `conv_function` are set for CUDA) and everything else as
/// generated kernels
/// (codegen::compile_cuda), loaded by a CudaExecutable, wrapped as one thunk "cuda:<graph name>"
/// of an Executable whose run() takes and returns arrays on that device (it waits for the device
/// before returning). `donate_argnums` as compile_graph: a donated parameter's buffer receives its
/// paired output in place on the device (CudaProgram::donated), so a train step's updated state
/// takes no second copy of device memory. Errors: what
/// lowering, compile_cuda and CudaExecutable::create throw; ingot::Error(kUnimplemented) in a build
/// without the CUDA toolkit.
std::shared_ptr<const Executable> compile_graph_cuda(const ir::Graph& graph, CudaDevice& device,
                                                     const codegen::CudaCompileOptions& options = {},
                                                     const std::vector<int64_t>& donate_argnums = {},
                                                     const lower::LoweringOptions& lowering = {});

/// Options of jit().
struct JitOptions {
  /// Name of the traced graph (appears in dumps and thunk names).
  std::string name = "jit";
  /// Arguments whose buffers are donated to the computation (see compile_graph): the caller's
  /// Arrays become unusable ("array was donated to 'jit:<name>'").
  std::vector<int64_t> donate_argnums;
  /// Lowering choices (e.g. BLAS GEMM or generated loops for matrix products).
  lower::LoweringOptions lowering;
  /// Where the function is compiled and run (ingot/jit/target.h): cpu_target() (null: the CPU),
  /// cuda_target(device) -- arguments on the host are copied to the device first, results stay on
  /// it --, spmd_target(...) for per-device programs over a mesh, or interpreter_target().
  std::shared_ptr<const CompileTarget> target;
  /// The CPU back end's options (CPU and SPMD targets). When `compile.dump_dir` is empty and the
  /// environment variable INGOT_DUMP_DIR is set, dumps go to $INGOT_DUMP_DIR/<name>-<id>-<n> (<id>
  /// tells jitted functions apart; the one documented debug switch; see docs/compiler.md). That
  /// directory also serves CUDA compiles whose `cuda.dump_dir` is empty.
  codegen::CpuCompileOptions compile;
  /// The CUDA code generator's options (a CUDA target).
  codegen::CudaCompileOptions cuda;
};

/// Where compiles spent their wall-clock time, summed over compiles (docs/compiler.md, "Compile
/// time"): tracing, autodiff (the pullbacks inside the trace), lowering to MLIR, the MLIR stages,
/// LLVM code generation and linking (`backend`, which also counts objects, cache hits and misses
/// and distinct kernel functions). Seconds.
struct CompileBreakdown {
  int64_t compiles = 0;         ///< signatures compiled
  double trace_seconds = 0;     ///< tracing, autodiff excluded
  double autodiff_seconds = 0;  ///< reverse-mode differentiation inside the traces
  double total_seconds = 0;     ///< everything, first trace to linked code
  CompileInfo backend;          ///< lowering, MLIR, LLVM, link and cache figures, summed
  /// Adds one compile: `trace_and_autodiff` seconds in trace() of which `autodiff` differentiating,
  /// `total` seconds in all, and the compiled executable's CompileInfo.
  void add(double trace_and_autodiff, double autodiff, double total, const CompileInfo& info);
};

/// The callable returned by jit(). Thread-safe.
class Jitted {
 public:
  Jitted(TraceFn fn, JitOptions options);
  /// Traces and compiles on the first call with a new signature (shapes and dtypes of `args`),
  /// then runs the cached executable on the arguments' device (outputs are allocated there).
  /// Throws what tracing and compilation throw, and what the target's signature() refuses (on the
  /// CPU: kUnimplemented for an argument sharded over several devices -- use spmd_target --,
  /// kInvalidArgument for arguments on different devices).
  std::vector<Array> operator()(const std::vector<Array>& args) const;
  /// Number of distinct signatures compiled so far.
  int64_t compile_count() const;
  /// Total seconds spent tracing and compiling (the interpreter target: tracing).
  double compile_seconds() const;
  /// Kernels one call runs (Executable::kernel_count) of the signature compiled last: on the CPU
  /// the loop nests, library calls and copies of the JIT-compiled function (codegen::
  /// CpuKernelStats), on a CUDA device the kernel launches plus cuBLAS and convolution calls,
  /// under SPMD one device's (collectives not counted). 0 before the first call and when
  /// interpreted.
  int64_t kernel_count() const;
  /// Where the compiles so far spent their time (CompileBreakdown).
  CompileBreakdown compile_breakdown() const;
  /// The floating-point operations, transcendentals and bytes of one call of the signature
  /// compiled last (ir::cost_analysis of its traced graph, XLA's cost_analysis). Zeros before the
  /// first call or when the graph has an op without a cost rule.
  ir::CostAnalysis cost_analysis() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// jax.jit: returns a callable that traces `fn` and compiles it for `options.target` (the CPU by
/// default) once per input signature, caching the executables.
Jitted jit(TraceFn fn, JitOptions options = {});

}  // namespace ingot
