// The CUDA back end's code generator: an MLIR module (upstream dialects, tensor level, as
// lower_graph writes it with library calls off) -> a named pass pipeline -> GPU kernels as PTX
// (one per kernel and target architecture, through MLIR's NVVM target with libdevice linked) and
// a host plan: the device buffers and the kernel launches, in order, with their launch
// configurations and arguments. Needs no GPU: the runtime turns the plan into thunks (kernel
// launches through the CUDA driver, docs/runtime-cuda.md). docs/compiler.md, "CUDA back end".
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ingot/codegen/cpu_compiler.h"
#include "ingot/runtime/dtype.h"
#include "ingot/runtime/shape.h"

namespace ingot::codegen {

/// Options of compile_cuda().
struct CudaCompileOptions {
  /// Target architectures; each kernel gets one PTX per entry ("sm_80" = A100, "sm_90" = H100 /
  /// H200). Names must be "sm_<digits>" (ingot::Error kInvalidArgument otherwise).
  std::vector<std::string> archs = {"sm_80", "sm_90"};
  /// PTX ISA version feature of the NVVM target ("+ptx80": PTX 8.0, CUDA 12.0 and later).
  std::string ptx_features = "+ptx80";
  /// Threads per block of elementwise and row-parallel kernels (the collapsed 1-D iteration space
  /// is tiled by it; smaller loops get their trip count rounded up to a warp). In [32, 1024] and a
  /// multiple of 32 (ingot::Error kInvalidArgument otherwise).
  int64_t threads_per_block = 256;
  /// NVIDIA's libdevice bitcode, linked into every kernel for math functions (exp, log, tanh,
  /// erf, ...). Missing file: ingot::Error kNotFound (MLIR would silently leave the calls
  /// unresolved).
  std::string libdevice = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  /// LLVM optimisation level (0-3) of the NVPTX code generation.
  int opt_level = 3;
  /// Stages run in order; empty means default_cuda_pipeline(*this).
  std::vector<PipelineStage> pipeline;
  /// If non-empty, the module is written to `<dump_dir>/<NN>-<stage>.mlir` after every stage and
  /// each kernel's PTX to `<dump_dir>/<kernel>.<arch>.ptx`.
  std::string dump_dir;
};

/// The default CUDA pipeline, stage by stage (docs/compiler.md): canonicalize+cse, elementwise
/// fusion (as on the CPU), f16/bf16 emulation in f32, one-shot bufferization with results as
/// out-params, copies as linalg.copy, loops (convert-linalg-to-parallel-loops, then
/// ingot-gpu-prepare-loops: host compute wrapped into kernels, each nest collapsed to 1-D and
/// tiled by the block size), gpu (gpu-map-parallel-loops, convert-parallel-loops-to-gpu,
/// gpu-kernel-outlining), nvvm (nvvm-attach-target per arch, convert-gpu-to-nvvm) and binary
/// (gpu-module-to-binary{format=isa}: PTX). Throws what CudaCompileOptions' checks throw.
std::vector<PipelineStage> default_cuda_pipeline(const CudaCompileOptions& options = {});

/// A device buffer of a CudaProgram.
struct CudaBuffer {
  enum class Kind {
    kInput,      ///< the entry function's input `index`
    kOutput,     ///< its output `index` (caller-allocated, as on the CPU)
    kTemporary,  ///< allocated for the program's run (memref.alloc)
    kConstant,   ///< uploaded once: `data` (a memref.global's dense initial value)
  };
  Kind kind = Kind::kTemporary;
  int64_t index = 0;           ///< input or output index (kInput / kOutput)
  Shape shape;                 ///< the buffer's shape (row-major, identity layout)
  DType dtype = DType::kF32;   ///< element type (bool as u8)
  int64_t bytes = 0;           ///< size in bytes
  std::vector<uint8_t> data;   ///< kConstant: the contents (`bytes` bytes, little endian)
};

/// One argument of a kernel launch, in the kernel's parameter order.
struct CudaKernelArg {
  enum class Kind {
    /// A memref: MLIR's descriptor ABI, 3 + 2 * rank parameters: the buffer's address twice
    /// (allocated, aligned), then `offset`, `sizes`, `strides` (elements, i64).
    kMemref,
    kIndex,  ///< one i64 parameter: `value`
  };
  Kind kind = Kind::kIndex;
  int64_t buffer = -1;          ///< kMemref: index into CudaProgram::buffers
  int64_t offset = 0;           ///< kMemref: element offset of the view into the buffer
  Shape sizes, strides;         ///< kMemref: the view (a subview of a buffer may be strided)
  int64_t value = 0;            ///< kIndex
};

/// A kernel launch: grid and block dimensions (x, y, z) and the arguments.
struct CudaLaunch {
  std::string kernel;  ///< CudaKernelImage::name
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  std::vector<CudaKernelArg> args;
};

/// A matrix product run by cuBLAS (the lowering's `ingot_cuda_gemm_<dtype>` calls, for f32/f64
/// products without batch dims): row-major C (m, n) = op(A) op(B), op(A) = A^T when `trans_a`
/// (A stored (k, m)), else A (stored (m, k)); likewise B (stored (n, k) when `trans_b`, else
/// (k, n)). The operands are contiguous views (offset into their buffer, in elements). A
/// column-major BLAS computes it as C^T = op(B)^T op(A)^T: gemm(op_b, op_a, n, m, k, B, A, C).
struct CudaGemm {
  DType dtype = DType::kF32;   ///< f32 (cublasSgemm) or f64 (cublasDgemm)
  CudaKernelArg a, b, c;       ///< kMemref views of 2-D shapes
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

/// One step of a run, in order: a kernel launch or a library call.
struct CudaThunk {
  enum class Kind { kLaunch, kGemm };
  Kind kind = Kind::kLaunch;
  CudaLaunch launch;  ///< kLaunch
  CudaGemm gemm;      ///< kGemm
};

/// One kernel's code: PTX text per target architecture; the entry symbol is `name`.
struct CudaKernelImage {
  std::string name;                        ///< the PTX .entry name
  std::map<std::string, std::string> ptx;  ///< arch ("sm_90") -> PTX assembly
};

/// What compile_cuda produces: kernels, buffers and the thunks of one run, in order. Running it:
/// allocate the temporaries, upload the constants (once), then run the thunks in order on one
/// stream (each reads what earlier ones wrote).
struct CudaProgram {
  std::vector<CudaKernelImage> kernels;
  std::vector<CudaBuffer> buffers;
  std::vector<CudaThunk> thunks;
  std::vector<std::pair<Shape, DType>> input_types, output_types;
  std::string host_mlir;  ///< the host function after the pipeline (for dumps and tests)
  /// The image of kernel `name` (ingot::Error kNotFound naming it otherwise).
  const CudaKernelImage& kernel(const std::string& name) const;
  /// The kernel launches among the thunks, in order (copies).
  std::vector<CudaLaunch> launches() const;
  /// The number of cuBLAS calls among the thunks.
  int64_t gemm_count() const;
};

/// Compiles `mlir_text` (a module whose function `entry` has tensor arguments and results of
/// static shapes, lowered with LoweringOptions{.gemm_function = "ingot_cuda_gemm",
/// .library_conv = false} -- cuBLAS GEMMs -- or {.blas_gemm = false, .library_conv = false} --
/// generated loops only) for NVIDIA GPUs. Errors (ingot::Error): kInvalidArgument with MLIR's
/// diagnostics for a failing stage or a host operation the plan cannot express (naming it),
/// kNotFound for a missing libdevice; bad options as CudaCompileOptions says.
CudaProgram compile_cuda(const std::string& mlir_text, const std::string& entry,
                         std::vector<std::pair<Shape, DType>> input_types,
                         std::vector<std::pair<Shape, DType>> output_types, const CudaCompileOptions& options = {});

}  // namespace ingot::codegen
