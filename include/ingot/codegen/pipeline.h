// Pass pipelines as named stages, and the target-independent front both back ends share (tensor
// canonicalisation, fusion, float emulation, bufferization). The CPU back end
// (ingot/codegen/cpu_compiler.h) and the CUDA back end (ingot/codegen/cuda_compiler.h) append their
// own stages; docs/compiler.md describes each.
#pragma once

#include <string>
#include <vector>

namespace ingot::codegen {

/// One named step of a pipeline: an MLIR textual pass pipeline (what mlir-opt's --pass-pipeline
/// takes, without the builtin.module(...) wrapper).
struct PipelineStage {
  std::string name;      ///< e.g. "fuse", "bufferize", "lower-to-llvm"; dump files use it
  std::string pipeline;  ///< e.g. "func.func(linalg-fuse-elementwise-ops)"
};

/// Options of default_tensor_stages().
struct TensorStageOptions {
  /// The target's runtime lets a step's results live in its argument buffers (the CPU's
  /// CpuKernel::run): a donated parameter's new value is computed after its other readers and
  /// written in place (ingot-sink-donated-updates), the entry's results that are its own
  /// arguments are dropped and recorded in `ingot.result_arguments`
  /// (drop-equivalent-buffer-results, ingot-drop-argument-results), and a result out-param that
  /// may alias an argument is guarded by a copy (ingot-distinct-results{guard-argument-copies}).
  /// Off: every result is a caller-provided out-param distinct from the arguments (CUDA).
  bool results_in_argument_buffers = false;
};

/// The target-independent front of both back ends' pipelines, in order: "canonicalize"
/// (canonicalize, cse), "fuse" (elementwise fusion incl. ingot-fuse-multi-use-elementwise),
/// "emulate-floats" (f16/bf16 arithmetic in f32, rounded on store, as the interpreter does) and
/// "bufferize" (one-shot bufferization, results as caller-provided out-params; see
/// TensorStageOptions for the in-place variant). The ingot passes it names are registered by
/// either back end (codegen/tensor_passes.cpp).
std::vector<PipelineStage> default_tensor_stages(const TensorStageOptions& options = {});

/// Registers every upstream MLIR pass and pass pipeline (mlir::registerAllPasses) in MLIR's
/// process-wide pass registry. The back ends register only the passes their default pipelines
/// name (docs/compiler.md, "MLIR registration"), so a custom pipeline (CpuCompileOptions::pipeline,
/// run_pipeline, `ingot-opt --mlir-pipeline`) that names another pass fails with "bad pass
/// pipeline" until this is called. Thread-safe and idempotent. It links all of MLIR's passes into
/// the executable that calls it (tens of MiB when MLIR is linked statically).
void register_all_mlir_passes();

}  // namespace ingot::codegen
