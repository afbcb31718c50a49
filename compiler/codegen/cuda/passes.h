// ingot's own MLIR passes of the CUDA pipeline (docs/compiler.md, "CUDA back end"):
//   ingot-cuda-gemm-epilogues   f32 GEMM + bias (+ relu) -> one cuBLASLt call with an epilogue
//   ingot-copies-to-linalg      memref.copy -> linalg.copy, so copies become kernels too
//   ingot-gpu-block-reductions  reductions as one thread block per output element (gpu.all_reduce)
//   ingot-gpu-prepare-loops     host compute into loops; each loop nest 1-D, tiled into blocks
#pragma once

namespace ingot::codegen {

/// Registers the CUDA pipeline's passes in MLIR's global pass registry (once; with the rest of
/// MLIR's pass registration).
void register_ingot_cuda_passes();

}  // namespace ingot::codegen
