// The command-line names of ingot's MLIR passes (what `ingot-opt --mlir-pipeline` and the
// pipeline stages spell), in one place: each pass's getArgument() returns its constant, and the
// stage texts (pipeline.cpp, cpu_compiler.cpp, cuda_compiler.cpp) are built from them.
// docs/compiler.md, "The pipeline", lists what each does; tests/mlir/ has a FileCheck test per pass.
#pragma once

#include <string_view>

namespace ingot::codegen::pass_names {

// Target-independent tensor passes (compiler/codegen/tensor_passes.cpp).
inline constexpr std::string_view kFuseMultiUseElementwise = "ingot-fuse-multi-use-elementwise";
inline constexpr std::string_view kDistinctResults = "ingot-distinct-results";
inline constexpr std::string_view kDropArgumentResults = "ingot-drop-argument-results";
inline constexpr std::string_view kSinkDonatedUpdates = "ingot-sink-donated-updates";

// The CPU back end's passes (compiler/codegen/cpu/).
inline constexpr std::string_view kEarlyDealloc = "ingot-early-dealloc";
inline constexpr std::string_view kOutlineKernels = "ingot-outline-kernels";
inline constexpr std::string_view kParallelizeOuterLoops = "ingot-parallelize-outer-loops";
inline constexpr std::string_view kApproximateMath = "ingot-approximate-math";
inline constexpr std::string_view kNoaliasScopes = "ingot-noalias-scopes";

// The CUDA back end's passes (compiler/codegen/cuda/passes.cpp).
inline constexpr std::string_view kCudaGemmEpilogues = "ingot-cuda-gemm-epilogues";
inline constexpr std::string_view kCopiesToLinalg = "ingot-copies-to-linalg";
inline constexpr std::string_view kGpuBlockReductions = "ingot-gpu-block-reductions";
inline constexpr std::string_view kGpuPrepareLoops = "ingot-gpu-prepare-loops";

}  // namespace ingot::codegen::pass_names
