// The CUDA back end's code generator: an MLIR module (upstream dialects, tensor level, as
// lower_graph writes it, matrix products as `ingot_cuda_gemm_*` calls or generated loops) -> a
// named pass pipeline -> GPU kernels as PTX (one per kernel and target architecture, through
// MLIR's NVVM target with libdevice linked) and a host plan: the device buffers and the thunks of
// one run, in order (kernel launches with their launch configurations and arguments, cuBLAS
// GEMMs). Needs no GPU: the runtime runs the plan (CudaExecutable, docs/runtime-cuda.md).
// docs/compiler.md, "CUDA back end".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ingot/codegen/pipeline.h"
#include "ingot/runtime/cuda_program.h"
#include "ingot/runtime/dtype.h"
#include "ingot/runtime/library_search.h"
#include "ingot/runtime/shape.h"

namespace ingot::codegen {

/// Options of compile_cuda().
struct CudaCompileOptions {
  /// Target architectures; each kernel gets one PTX per entry ("sm_80" = A100, "sm_90" = H100 /
  /// H200). Names must be "sm_<digits>" (ingot::Error kInvalidArgument otherwise).
  /// compile_graph_cuda (and so jit on a CUDA device) keeps only the one its device will load
  /// (select_cuda_ptx_arch), since code generation runs once per architecture.
  std::vector<std::string> archs = {"sm_80", "sm_90"};
  /// PTX ISA version feature of the NVVM target ("+ptx80": PTX 8.0, CUDA 12.0 and later).
  std::string ptx_features = "+ptx80";
  /// Threads per block of elementwise and row-parallel kernels (the collapsed 1-D iteration space
  /// is tiled by it; smaller loops get their trip count rounded up to a warp). In [32, 1024] and a
  /// multiple of 32 (ingot::Error kInvalidArgument otherwise).
  int64_t threads_per_block = 256;
  /// Reductions of at least this many elements per output element get one block per output
  /// element with a tree reduction (ingot-gpu-block-reductions); shorter ones one thread per
  /// output element. >= 1 (ingot::Error kInvalidArgument otherwise).
  int64_t block_reduction_min = 64;
  /// NVIDIA's libdevice bitcode, linked into every kernel for math functions (exp, log, tanh,
  /// erf, ...). Empty (the default): found through `libraries` (find_libdevice: its dirs, the
  /// toolkit's nvvm/libdevice, a Python environment's nvidia/*/nvvm/libdevice, a copy beside the
  /// executable). Missing file, or found nowhere: ingot::Error kNotFound naming the places (MLIR
  /// would silently leave the calls unresolved).
  std::string libdevice;
  /// Fold bias adds (and relus) into the f32 cuBLAS GEMMs that produce their operand, run as
  /// cuBLASLt epilogues (the ingot-cuda-gemm-epilogues stage, docs/compiler.md "GEMM
  /// epilogues"). false keeps them generated kernels (e.g. where cuBLASLt has no kernel for a
  /// shape, or to keep relu(NaN) = NaN).
  bool gemm_epilogues = true;
  /// LLVM optimisation level (0-3) of the NVPTX code generation.
  int opt_level = 3;
  /// Stages run in order; empty means default_cuda_pipeline(*this).
  std::vector<PipelineStage> pipeline;
  /// If non-empty, the module is written to `<dump_dir>/<NN>-<stage>.mlir` after every stage and
  /// each kernel's PTX to `<dump_dir>/<kernel>.<arch>.ptx`.
  std::string dump_dir;
  /// Verify the module after every MLIR pass (mlir-opt's --verify-each) rather than once after
  /// each stage, to find the pass that breaks a custom pipeline. Off by default (as on the CPU).
  bool verify_each_pass = false;
  /// Run the compiled program through CUDA graphs (CudaExecutableOptions::cuda_graphs, which
  /// compile_graph_cuda and so jit pass it to): a run is captured once per set of input/output
  /// addresses and replayed as one cuGraphLaunch, the temporaries held in a per-executable arena.
  /// Off by default until measured on a GPU (docs/runtime-cuda.md, "CUDA graphs").
  bool cuda_graphs = false;
  /// Where libdevice is found (when `libdevice` is empty) and where the compiled program's
  /// executable finds cuBLAS and cuDNN (CudaExecutableOptions::libraries, which
  /// compile_graph_cuda and so jit pass it to).
  LibrarySearch libraries;
};

/// The default CUDA pipeline, stage by stage (docs/compiler.md): canonicalize+cse, gemm-epilogues
/// (ingot-cuda-gemm-epilogues; only with options.gemm_epilogues), elementwise fusion (as on the CPU), f16/bf16
/// emulation in f32, one-shot bufferization with results as out-params, copies as linalg.copy, reductions (long ones:
/// one block per output element with gpu.all_reduce), loops (convert-linalg-to-parallel-loops, then
/// ingot-gpu-prepare-loops: host compute wrapped into kernels, each nest collapsed to 1-D and
/// tiled by the block size), gpu (gpu-map-parallel-loops, convert-parallel-loops-to-gpu,
/// gpu-kernel-outlining), nvvm (nvvm-attach-target per arch, convert-gpu-to-nvvm) and binary
/// (gpu-module-to-binary{format=isa}: PTX). Throws what CudaCompileOptions' checks throw.
std::vector<PipelineStage> default_cuda_pipeline(const CudaCompileOptions& options = {});

/// Runs `stages` on `mlir_text` in the CUDA back end's context (the GPU and NVVM dialects and
/// passes, ingot's CUDA passes such as ingot-gpu-prepare-loops) and returns the module's text:
/// `ingot-opt --target cuda --mlir-pipeline` and the .mlir pass tests (tests/mlir/). The module is
/// verified after every pass. Throws ingot::Error(kInvalidArgument) for text that does not parse,
/// a bad pipeline or a failing pass (the diagnostics in the message).
std::string run_cuda_pipeline(const std::string& mlir_text, const std::vector<PipelineStage>& stages);

// The program types (CudaProgram, CudaBuffer, CudaThunk, ...) are the runtime's
// (ingot/runtime/cuda_program.h): the code generator fills them, the runtime runs them.
using ::ingot::CudaBuffer;
using ::ingot::CudaConv;
using ::ingot::CudaGemm;
using ::ingot::CudaKernelArg;
using ::ingot::CudaKernelImage;
using ::ingot::CudaLaunch;
using ::ingot::CudaProgram;
using ::ingot::CudaThunk;

/// Compiles `mlir_text` (a module whose function `entry` has tensor arguments and results of
/// static shapes, lowered with LoweringOptions{.gemm_function = "ingot_cuda_gemm",
/// .library_conv_min_k = 0, .conv_function = "ingot_cuda_conv"} -- cuBLAS GEMMs and convolution
/// thunks -- or {.blas_gemm = false, .library_conv = false} -- generated loops only) for NVIDIA
/// GPUs. Errors (ingot::Error): kInvalidArgument with MLIR's
/// diagnostics for a failing stage or a host operation the plan cannot express (naming it),
/// kNotFound for a missing libdevice; bad options as CudaCompileOptions says.
CudaProgram compile_cuda(const std::string& mlir_text, const std::string& entry,
                         std::vector<std::pair<Shape, DType>> input_types,
                         std::vector<std::pair<Shape, DType>> output_types, const CudaCompileOptions& options = {});

}  // namespace ingot::codegen
