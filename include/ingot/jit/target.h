// CompileTarget: where jit compiles a traced graph and runs the result -- the host CPU, a CUDA
// device, an SPMD mesh of CPU devices (ingot/jit/spmd.h: spmd_target) or the reference
// interpreter. One narrow interface above the back ends (IREE's HAL driver model): compile a graph
// with donated arguments into an Executable, run it on the target, and move arrays to and from it.
// jit() (ingot/jit/jit.h) and the trainer's steps (CompileOptions::target) hold one; nothing above
// compiler/jit branches on the kind of back end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/codegen/cpu_compiler.h"
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/ir/graph.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/executable.h"

namespace ingot {

class CudaDevice;

/// The back end a CompileTarget compiles for.
enum class TargetKind {
  kCpu,          ///< the host CPU (compile_graph): arrays live in host memory
  kCuda,         ///< one CUDA device (compile_graph_cuda): arrays live in its memory
  kSpmd,         ///< a mesh of CPU devices (compile_graph_spmd + run_spmd): sharded host arrays
  kInterpreter,  ///< the reference interpreter (interp::interpret): nothing is compiled
};

/// The compiler choices of one compile, per back end; each target reads the parts it uses (the CPU
/// and SPMD targets `lowering` and `cpu`, the CUDA target `lowering` and `cuda`, the interpreter
/// none).
struct TargetCompileOptions {
  lower::LoweringOptions lowering;   ///< library GEMM / convolutions or generated loops
  codegen::CpuCompileOptions cpu;    ///< the CPU back end's (threads, dumps, compile cache)
  codegen::CudaCompileOptions cuda;  ///< the CUDA code generator's (architectures, CUDA graphs)
};

/// A back end to compile for and run on. Implementations are immutable and thread-safe; the
/// Executables they return run only through the same target's run().
class CompileTarget {
 public:
  virtual ~CompileTarget() = default;
  /// What the back end is.
  virtual TargetKind kind() const = 0;
  /// For messages: "cpu", "cuda:0", "spmd over 4 devices", "interpreter".
  virtual std::string name() const = 0;
  /// Whether the arrays run() takes and returns live in host memory (CPU, SPMD over CPU devices,
  /// interpreter): then to_target/to_host copy nothing.
  virtual bool host_memory() const = 0;

  /// The types a program for `args` is traced with: each argument's shape and dtype (SPMD: its
  /// first shard's, the per-device program's), checking that the arguments can run here.
  /// `what` names the caller in errors. Errors (ingot::Error, kInvalidArgument naming the argument
  /// index): an invalid Array; CPU: arguments on different devices, or sharded over several
  /// (kUnimplemented: use an SPMD target); CUDA: an argument on another accelerator.
  virtual std::vector<ir::TensorType> signature(const std::vector<Array>& args, const std::string& what) const = 0;

  /// Compiles `graph` into an Executable for this target. `donate_argnums` (JAX's): parameters
  /// whose buffers outputs of the same type may reuse in place (compile_graph's pairing); the
  /// interpreter donates nothing. Errors: what lowering and the back end throw; a donate_argnum
  /// out of range or repeated (kInvalidArgument).
  virtual std::shared_ptr<const Executable> compile(const ir::Graph& graph, const std::vector<int64_t>& donate_argnums,
                                                    const TargetCompileOptions& options) const = 0;

  /// Runs `exe` (from this target's compile) on `args`: host arguments are copied to the target
  /// first (CUDA); outputs stay on the target. Errors: Executable::run's and run_spmd's.
  virtual std::vector<Array> run(const Executable& exe, const std::vector<Array>& args) const = 0;

  /// `host` (a host array) on the target: itself where host_memory(), else a device copy (waits).
  virtual Array to_target(const Array& host) const = 0;
  /// A host copy of `array` (waits): arrays on the target's device are copied down, others go
  /// through ingot::to_host (a host array comes back as itself).
  virtual Array to_host(const Array& array) const = 0;
};

/// The host CPU: compile_graph, run on the arguments' device (cpu:0 without arguments).
std::shared_ptr<const CompileTarget> cpu_target();

/// The CUDA device `device` (ingot/runtime/cuda.h; not owned, must outlive the target and its
/// Executables): compile_graph_cuda; run() copies host arguments to the device first (arguments on
/// another device are kInvalidArgument) and returns arrays on the device. Errors: kUnimplemented at
/// compile and transfer in a build without the CUDA toolkit.
std::shared_ptr<const CompileTarget> cuda_target(CudaDevice& device);

/// The reference interpreter (interp::interpret, what run_eagerly uses): compile() wraps the graph
/// in one thunk "interpret:<graph name>" (0 kernels) without compiling, donates nothing, runs on
/// the host.
std::shared_ptr<const CompileTarget> interpreter_target();

}  // namespace ingot
