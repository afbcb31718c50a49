// Executable: a compiled program as an ordered list of thunks over a table of buffers.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/communicator.h"

namespace ingot {

/// How a thunk's code was compiled, where a compiler built it (zeros otherwise; CPU back end:
/// codegen::CpuKernelStats and codegen::CpuCompileReport). Seconds are wall-clock seconds.
struct CompileInfo {
  int64_t kernel_functions = 0;  ///< distinct kernel functions compiled for the loop nests
  int64_t scope_functions = 0;   ///< functions compiled once for repeated blocks (codegen::CpuKernelStats)
  double lower_seconds = 0;      ///< lowering the graph to MLIR text
  double mlir_seconds = 0;       ///< MLIR parsing and the stages up to `outline` (CpuCompileReport)
  /// LLVM optimisation and code generation, translation included (and, on the CPU's split path,
  /// the per-kernel MLIR stages after `outline`, which run in parallel with it)
  double llvm_seconds = 0;
  double link_seconds = 0;      ///< loading the object code into the JIT
  int64_t objects = 0;          ///< object files linked
  int64_t cache_hits = 0;       ///< objects loaded from the compilation cache
  int64_t cache_misses = 0;     ///< objects compiled
  int64_t step_cache_hits = 0;  ///< compiled functions loaded whole from the cache (no MLIR, no LLVM)
  /// Adds `other`'s counts and seconds to this (several compiled segments of one program).
  CompileInfo& operator+=(const CompileInfo& other);
};

/// One step of an Executable: reads some buffer slots and writes others. Slots 0..n_in-1 are the
/// executable's inputs; later slots are outputs and temporaries, allocated by Executable::run.
struct Thunk {
  std::string name;                  ///< for profiles and errors, e.g. "jit:main" or "copy"
  std::vector<size_t> input_slots;   ///< slots read
  std::vector<size_t> output_slots;  ///< slots written (allocated before the thunk runs)
  /// The work: inputs and outputs in the order of the slot lists. Must not keep references.
  std::function<void(std::span<const Array> inputs, std::span<Array> outputs)> run;
  /// Instead of `run`, for a collective (include/ingot/runtime/spmd.h builds them): the work gets
  /// the communicator the Executable runs with (one per device under run_spmd). Exactly one of
  /// `run` and `collective` is set.
  std::function<void(Communicator& communicator, std::span<const Array> inputs, std::span<Array> outputs)> collective;
  /// With `collective`: started, not waited for (an asynchronous collective, as XLA's
  /// all-reduce-start / all-reduce-done pair). It runs on a helper thread once every asynchronous
  /// collective started before it has finished (one at a time, in program order: the communicator
  /// is used by one thread at a time and every rank issues the same sequence), while the following
  /// thunks run. Its outputs count as written at its wait thunk (below): reading them earlier is
  /// refused at construction; not writing its inputs before the wait is the builder's job
  /// (compile_graph_spmd treats the wait as their last use).
  bool async = false;
  /// A wait (neither `run` nor `collective`): blocks until the asynchronous collective at this
  /// thunk index finishes, rethrowing its error. Each asynchronous collective is waited for by
  /// exactly one later thunk.
  std::optional<size_t> wait_for;
  /// Kernels one run of this thunk executes, where its builder counted them (a JIT-compiled CPU
  /// function: codegen::CpuKernelStats::kernels; a CUDA program: kernel launches plus cuBLAS and
  /// convolution calls); 0 when not counted (copies, collectives, hand-written thunks).
  int64_t kernels = 0;
  /// How the thunk's code was compiled (CompileInfo); zeros for thunks no compiler built.
  CompileInfo compile;
};

/// A program over Arrays: input types, the slot table, thunks run in order, and which slots are
/// the outputs. Immutable after construction; run() may be called concurrently.
class Executable {
 public:
  /// `slot_types[i]` is the (shape, dtype) of slot i; the first `num_inputs` slots are inputs.
  /// `outputs` lists the slots returned by run() (a slot may appear more than once).
  /// `donated_inputs` are input slots whose buffers the executable takes over (JAX's
  /// donate_argnums): thunks may write them in place and outputs may be them. `name` appears in
  /// the "array was donated to ..." error of a donated argument used afterwards.
  Executable(std::vector<std::pair<Shape, DType>> slot_types, size_t num_inputs, std::vector<Thunk> thunks,
             std::vector<size_t> outputs, std::vector<size_t> donated_inputs = {}, std::string name = "executable");

  /// Checks `inputs` against the input types (ingot::Error kInvalidArgument / kShapeMismatch /
  /// kDTypeMismatch naming the index), takes over the donated inputs' buffers (afterwards the
  /// caller's Arrays throw "array was donated to '<name>'"; donating one buffer twice, or passing
  /// a donated buffer in another argument too, is kInvalidArgument and nothing is donated),
  /// allocates the other slots on `device` (default cpu:0), runs the thunks and returns the
  /// output slots. A slot returned twice is the same Array. `communicator` is handed to the
  /// collective thunks; a collective thunk without one is ingot::Error(kFailedPrecondition)
  /// naming the thunk (run such executables with run_spmd, include/ingot/runtime/spmd.h).
  std::vector<Array> run(const std::vector<Array>& inputs, Device* device = nullptr,
                         Communicator* communicator = nullptr) const;

  size_t num_inputs() const { return num_inputs_; }
  const std::vector<Thunk>& thunks() const { return thunks_; }
  const std::vector<std::pair<Shape, DType>>& slot_types() const { return slot_types_; }
  const std::vector<size_t>& donated_inputs() const { return donated_; }
  /// The slots run() returns, in order.
  const std::vector<size_t>& outputs() const { return outputs_; }
  const std::string& name() const { return name_; }
  /// Kernels one run executes: the sum of the thunks' `kernels` counts.
  int64_t kernel_count() const {
    int64_t n = 0;
    for (const Thunk& t : thunks_) n += t.kernels;
    return n;
  }
  /// The thunks' CompileInfo, added up.
  CompileInfo compile_info() const {
    CompileInfo info;
    for (const Thunk& t : thunks_) info += t.compile;
    return info;
  }

 private:
  void check_donation(const std::vector<Array>& inputs) const;
  /// Checks wait thunk `k` (an earlier asynchronous collective, not yet waited for; no work).
  void check_wait(size_t k, std::vector<bool>& waited) const;

  std::vector<std::pair<Shape, DType>> slot_types_;
  size_t num_inputs_;
  std::vector<Thunk> thunks_;
  std::vector<size_t> outputs_;
  std::vector<size_t> donated_;
  std::string name_;
};

}  // namespace ingot
