// A compiled CUDA program as the runtime runs it: device buffers (inputs, outputs, temporaries,
// constants), kernel images (PTX per architecture) and the thunks of one run, in order (kernel
// launches with their grid, block and arguments; cuBLAS GEMMs). The CUDA code generator
// (ingot/codegen/cuda_compiler.h) produces it; docs/compiler.md, "CUDA back end".
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ingot/runtime/conv_spec.h"
#include "ingot/runtime/dtype.h"
#include "ingot/runtime/shape.h"

namespace ingot {

/// A device buffer of a CudaProgram.
struct CudaBuffer {
  enum class Kind {
    kInput,      ///< the entry function's input `index`
    kOutput,     ///< its output `index` (caller-allocated, as on the CPU)
    kTemporary,  ///< allocated for the program's run (memref.alloc)
    kConstant,   ///< uploaded once: `data` (a memref.global's dense initial value)
  };
  Kind kind = Kind::kTemporary;
  int64_t index = 0;          ///< input or output index (kInput / kOutput)
  Shape shape;                ///< the buffer's shape (row-major, identity layout)
  DType dtype = DType::kF32;  ///< element type (bool as u8)
  int64_t bytes = 0;          ///< size in bytes
  std::vector<uint8_t> data;  ///< kConstant: the contents (`bytes` bytes, little endian)
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
  int64_t buffer = -1;   ///< kMemref: index into CudaProgram::buffers
  int64_t offset = 0;    ///< kMemref: element offset of the view into the buffer
  Shape sizes, strides;  ///< kMemref: the view (a subview of a buffer may be strided)
  int64_t value = 0;     ///< kIndex
};

/// A kernel launch: grid and block dimensions (x, y, z) and the arguments.
struct CudaLaunch {
  std::string kernel;  ///< CudaKernelImage::name
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  std::vector<CudaKernelArg> args;
};

/// A matrix product run by cuBLAS (the lowering's `ingot_cuda_gemm_<dtype>` calls, for f32/f64/
/// f16/bf16 products without batch dims): row-major C (m, n) = op(A) op(B), op(A) = A^T when `trans_a`
/// (A stored (k, m)), else A (stored (m, k)); likewise B (stored (n, k) when `trans_b`, else
/// (k, n)). The operands are contiguous views (offset into their buffer, in elements). A
/// column-major BLAS computes it as C^T = op(B)^T op(A)^T: gemm(op_b, op_a, n, m, k, B, A, C).
struct CudaGemm {
  /// f32 (cublasSgemm), f64 (cublasDgemm), f16 or bf16 (cublasGemmEx: operands and C in the dtype,
  /// CUBLAS_COMPUTE_32F, so the sums are f32 rounded to the dtype once, as the interpreter does)
  DType dtype = DType::kF32;
  CudaKernelArg a, b, c;  ///< kMemref views of 2-D shapes (3-D (batch, rows, cols) when batched)
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  /// Batched products (the lowering's `ingot_cuda_gemm_batched_<dtype>`, dot_generals whose batch
  /// dims lead both operands): C[i] = op(A[i]) op(B[i]) for i in [0, batch), the views 3-D.
  int64_t batch = 1;
  bool batched = false;  ///< the views are 3-D (even when batch is 1)
  /// The 2-D products of a batched GEMM, one per batch element (offsets advanced by the views'
  /// batch strides); {*this} when not batched.
  std::vector<CudaGemm> batch_elements() const;

  /// What is applied to the product before it is stored (cuBLASLt's epilogues, folded in by the
  /// compiler's ingot-cuda-gemm-epilogues pass from the lowering's `ingot_cuda_gemm_bias_f32` /
  /// `ingot_cuda_gemm_bias_relu_f32` calls): kBias C[i][j] = (op(A) op(B))[i][j] + bias[j];
  /// kBiasRelu C[i][j] = max(that, 0) (cuBLASLt maps NaN to 0 there, unlike ingot's relu; see
  /// docs/compiler.md, "GEMM epilogues"). Only for f32 GEMMs without batch (validate_cuda_program).
  enum class Epilogue { kNone, kBias, kBiasRelu };
  Epilogue epilogue = Epilogue::kNone;
  /// kBias / kBiasRelu: a kMemref view of n contiguous elements of the GEMM's dtype (one per column
  /// of C).
  CudaKernelArg bias;
};

/// "none", "bias" or "bias_relu".
const char* epilogue_name(CudaGemm::Epilogue e);

/// A convolution (the lowering's `ingot_cuda_conv_<dtype>` calls, f32/f64): `spec` (StableHLO
/// semantics, include/ingot/kernels/cpu_conv.h) of the row-major buffers viewed by lhs, rhs and
/// out (1-D contiguous kMemref views of num_elements(spec's shape) elements). It runs as the
/// implicit-GEMM kernel `kernel` (a CudaKernelImage of the program: kernels/cuda/conv.cu) with
/// `grid`, `block` and parameters (lhs, rhs, out addresses, then `params`, the kernel's
/// CudaConvParams as int64 words, by value), or through cuDNN when CudaExecutable's first run
/// timed it faster (CudaExecutable::conv_choices()).
struct CudaConv {
  DType dtype = DType::kF32;    ///< f32 or f64
  CudaKernelArg lhs, rhs, out;  ///< kMemref views: input, kernel, result
  kernels::ConvSpec spec;       ///< the convolution (shapes, dimension numbers, windows, groups)
  std::string kernel;           ///< CudaKernelImage::name of the implicit-GEMM kernel
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  std::vector<int64_t> params;  ///< kernels::cuda_conv_param_words(cuda_conv_params(spec))
};

/// One step of a run, in order: a kernel launch or a library call.
struct CudaThunk {
  enum class Kind { kLaunch, kGemm, kConv };
  Kind kind = Kind::kLaunch;
  CudaLaunch launch;  ///< kLaunch
  CudaGemm gemm;      ///< kGemm
  CudaConv conv;      ///< kConv
};

/// One kernel's code: PTX text per target architecture. `name` is "<module>.<kernel>" as
/// compile_cuda names it (CudaLaunch::kernel refers to it); the PTX .entry symbol is the part
/// after the last '.' (PTX identifiers cannot contain '.'), which CudaExecutable looks up.
/// The `.entry` of the bias + activation kernel (kernels/cuda/bias.cu, include/ingot/kernels/cuda_bias.h)
/// that compile_cuda adds to every program with a GEMM epilogue, so that CudaExecutable can run
/// the epilogue as a plain GEMM plus this kernel where cuBLASLt has no fused one. Parameters: c,
/// bias (f32 device addresses), m, n, ldc (i64), relu (i32): C[i + j ldc] = act(C[i + j ldc] +
/// bias[i]) over the column-major (m, n) matrix, grid-stride.
inline constexpr const char* kCudaBiasKernel = "ingot_bias_act_f32";

struct CudaKernelImage {
  std::string name;                        ///< "<module>.<kernel>" (or a bare entry name)
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
  /// Donated inputs: (input, output) pairs whose output may be the input's own array (the run
  /// writes the result into the donated buffer; JAX's donate_argnums). The program must have been
  /// lowered with those pairs (lower_graph's `donated`: the result is computed in the parameter's
  /// buffer, then copied onto itself), as compile_graph_cuda does; other outputs never alias an
  /// input. Each input and output appears at most once, with equal types.
  std::vector<std::pair<int64_t, int64_t>> donated;
  std::string host_mlir;  ///< the host function after the pipeline (for dumps and tests)
  /// The image of kernel `name` (ingot::Error kNotFound naming it otherwise).
  const CudaKernelImage& kernel(const std::string& name) const;
  /// The kernel launches among the thunks, in order (copies).
  std::vector<CudaLaunch> launches() const;
  /// The number of cuBLAS calls among the thunks.
  int64_t gemm_count() const;
  /// The convolution thunks, in order (copies).
  std::vector<CudaConv> convs() const;
  /// A readable listing (what `ingot-opt --target cuda` prints): one line per buffer
  /// ("buffer 3: temporary f32 (32, 64), 8192 bytes"), then one per thunk in run order
  /// ("launch main_kernel_2 grid (25, 1, 1) block (256, 1, 1), 3 buffers" or
  /// "gemm f32 m=32 n=64 k=784 A=buffer 4 B=buffer 0 C=buffer 6" or "conv f32 lhs (8, 1, 28, 28)
  /// rhs (8, 1, 3, 3) out (8, 8, 26, 26) groups 1x1 lhs=buffer 0 rhs=buffer 1 out=buffer 5").
  std::string describe() const;
};

}  // namespace ingot
