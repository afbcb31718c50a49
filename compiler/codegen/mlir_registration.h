// The MLIR dialects, interfaces and passes ingot's pipelines use, registered one by one instead of
// MLIR's register-everything helpers (mlir/InitAll*.h). What a process links is what it registers:
// registerAllDialects/Passes pull every upstream dialect and pass into each executable (~200 MiB
// stripped for one statically linked test binary); this list keeps the GPU check bundle small
// (docs/building.md, "The GPU check bundle") and makes what the back ends rely on explicit.
// Internal to compiler/codegen; includes MLIR headers. docs/compiler.md, "MLIR registration".
#pragma once

#include "mlir/IR/DialectRegistry.h"

namespace ingot::codegen::detail {

/// Adds the dialects the CPU and CUDA pipelines create or read (affine, arith, bufferization, cf,
/// DLTI, func, gpu, index, linalg, llvm, math, memref, nvvm, omp, scf, tensor, ub, vector) and
/// the external interface models their passes need: bufferization (one-shot-bufferize,
/// eliminate-empty-tensors, buffer-deallocation-pipeline), value bounds, tiling, inliner, and the
/// ConvertToLLVM interfaces that `convert-to-llvm` and `convert-gpu-to-nvvm` dispatch through.
/// The NVVM target attribute's model (nvvm-attach-target, gpu-module-to-binary) and the
/// translations to LLVM IR are added by each back end.
void register_mlir_dialects(mlir::DialectRegistry& registry);

/// Registers, in MLIR's process-wide pass registry, every upstream pass and pass pipeline named
/// in default_cpu_pipeline() and default_cuda_pipeline() (so parsePassPipeline finds them).
/// Idempotent (MLIR accepts re-registration of the same pass); call it once per process, e.g.
/// from a std::call_once. Custom pipelines that name other upstream passes need those passes
/// registered first (ingot-opt registers all of them: mlir::registerAllPasses()).
void register_mlir_passes();

}  // namespace ingot::codegen::detail
