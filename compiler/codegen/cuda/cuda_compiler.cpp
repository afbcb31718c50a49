// The CUDA back end's code generator (include/ingot/codegen/cuda_compiler.h): the only translation
// unit of codegen/cuda that includes MLIR's GPU and NVVM headers.
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/codegen/pass_names.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>

#include "codegen/cuda/passes.h"
#include "codegen/mlir_common.h"
#include "codegen/mlir_registration.h"
#include "codegen/tensor_passes.h"
#include "ingot/kernels/cuda_conv.h"
#include "ingot/runtime/error.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace ingot::codegen {

namespace {

/// The GEMM calls the host plan turns into cuBLAS thunks (LoweringOptions::gemm_function).
constexpr llvm::StringLiteral kGemmFunction = "ingot_cuda_gemm_";
constexpr llvm::StringLiteral kBatchedGemmFunction = "ingot_cuda_gemm_batched_";
/// The convolution calls the host plan turns into convolution thunks (LoweringOptions::conv_function).
constexpr llvm::StringLiteral kConvFunction = "ingot_cuda_conv_";
/// GEMMs with a bias operand (ingot-cuda-gemm-epilogues): (A, B, bias, C, trans_a, trans_b).
constexpr llvm::StringLiteral kBiasGemmFunction = "ingot_cuda_gemm_bias_";
constexpr llvm::StringLiteral kBiasReluGemmFunction = "ingot_cuda_gemm_bias_relu_";

constexpr const char* kDumpHint = "set CudaCompileOptions::dump_dir to see the IR after each stage";

void check_options(const CudaCompileOptions& o) {
  if (o.archs.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "CudaCompileOptions::archs is empty",
                "name at least one target architecture, e.g. {\"sm_80\", \"sm_90\"}");
  }
  static const std::regex arch_name("sm_[0-9]+a?");
  for (const std::string& a : o.archs) {
    if (!std::regex_match(a, arch_name)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("CudaCompileOptions::archs holds '{}'", a),
                  "use NVIDIA's names: sm_80 (A100), sm_89, sm_90 (H100/H200)");
    }
  }
  if (o.threads_per_block < 32 || o.threads_per_block > 1024 || o.threads_per_block % 32 != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CudaCompileOptions::threads_per_block is {}", o.threads_per_block),
                "use a multiple of 32 (a warp) in [32, 1024]");
  }
  if (o.block_reduction_min < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CudaCompileOptions::block_reduction_min is {}", o.block_reduction_min),
                "use >= 1 (elements per output element from which a reduction gets a whole block)");
  }
  if (o.opt_level < 0 || o.opt_level > 3) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("CudaCompileOptions::opt_level is {}", o.opt_level),
                "use 0-3");
  }
}

/// The libdevice file `o` links: CudaCompileOptions::libdevice when set (kNotFound when it is not
/// a file), else find_libdevice(o.libraries) (kNotFound naming the places looked in).
std::string libdevice_of(const CudaCompileOptions& o) {
  if (o.libdevice.empty()) return find_libdevice(o.libraries).path;
  if (!std::filesystem::is_regular_file(o.libdevice)) {
    throw Error(ErrorCode::kNotFound, fmt::format("libdevice '{}' not found", o.libdevice),
                "install the CUDA toolkit (nvvm/libdevice/libdevice.10.bc), or set CudaCompileOptions::libdevice to "
                "the file (empty: searched, find_libdevice)");
  }
  return o.libdevice;
}

void initialise_mlir_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    detail::register_mlir_passes();
    register_tensor_passes();
    register_ingot_cuda_passes();
  });
}

mlir::DialectRegistry make_registry() {
  mlir::DialectRegistry registry;
  detail::register_mlir_dialects(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  return registry;
}

std::optional<DType> dtype_of(mlir::Type t) {
  if (t.isF32()) return DType::kF32;
  if (t.isF64()) return DType::kF64;
  if (t.isF16()) return DType::kF16;
  if (t.isBF16()) return DType::kBF16;
  if (t.isInteger(8)) return DType::kU8;  // bool and u8 are stored as bytes; the graph knows which
  if (t.isInteger(32)) return DType::kI32;
  if (t.isInteger(64)) return DType::kI64;
  return std::nullopt;
}

/// Collects the host plan from the entry function after the pipeline.
class PlanBuilder {
 public:
  PlanBuilder(CudaProgram& program, mlir::ModuleOp module, std::vector<std::string> archs)
      : p_(program), module_(module), archs_(std::move(archs)) {}

  void run(mlir::func::FuncOp entry) {
    const size_t n_in = p_.input_types.size(), n_out = p_.output_types.size();
    if (entry.getNumArguments() != n_in + n_out) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("CUDA back end: entry '{}' takes {} buffers after bufferization, expected {} inputs + {} "
                              "outputs",
                              entry.getName().str(), entry.getNumArguments(), n_in, n_out),
                  "pass the entry's tensor types as input_types and output_types");
    }
    for (size_t i = 0; i < n_in + n_out; ++i) {
      const bool in = i < n_in;
      const auto& [shape, dtype] = in ? p_.input_types[i] : p_.output_types[i - n_in];
      roots_[entry.getArgument(static_cast<unsigned>(i))] =
          add_buffer({.kind = in ? CudaBuffer::Kind::kInput : CudaBuffer::Kind::kOutput,
                      .index = static_cast<int64_t>(in ? i : i - n_in),
                      .shape = shape,
                      .dtype = dtype,
                      .bytes = num_elements(shape) * dtype_size(dtype)});
    }
    for (mlir::Operation& op : entry.getBody().front()) visit(op);
  }

 private:
  int64_t add_buffer(CudaBuffer b) {
    p_.buffers.push_back(std::move(b));
    return static_cast<int64_t>(p_.buffers.size()) - 1;
  }

  [[noreturn]] static void unsupported(mlir::Operation& op, const std::string& why) {
    std::string text;
    llvm::raw_string_ostream os(text);
    op.print(os);
    throw Error(ErrorCode::kInvalidArgument, fmt::format("CUDA back end: host operation {} {}", text, why),
                "this op is not supported on the CUDA back end yet; run the step on the CPU (docs/compiler.md)");
  }

  static CudaBuffer buffer_of(mlir::Operation& op, mlir::MemRefType type) {
    const std::optional<DType> dt = dtype_of(type.getElementType());
    if (!dt || !type.hasStaticShape()) unsupported(op, "allocates a buffer of a dynamic shape or unknown type");
    Shape shape(type.getShape().begin(), type.getShape().end());
    return {.kind = CudaBuffer::Kind::kTemporary,
            .shape = shape,
            .dtype = *dt,
            .bytes = num_elements(shape) * dtype_size(*dt)};
  }

  void visit(mlir::Operation& op) {
    if (auto alloc = mlir::dyn_cast<mlir::memref::AllocOp>(op)) {
      roots_[alloc.getResult()] = add_buffer(buffer_of(op, alloc.getType()));
    } else if (auto get = mlir::dyn_cast<mlir::memref::GetGlobalOp>(op)) {
      roots_[get.getResult()] = constant(op, get);
    } else if (mlir::isa<mlir::memref::CastOp, mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp,
                         mlir::memref::SubViewOp, mlir::memref::ReinterpretCastOp>(op)) {
      const auto it = roots_.find(op.getOperand(0));
      if (it == roots_.end()) unsupported(op, "views a buffer the plan does not know");
      roots_[op.getResult(0)] = it->second;  // a view: same buffer, layout from its type
      // A cast to a dynamic shape (the GEMM calls' memref<?x?x...>) keeps its source's static view.
      mlir::MemRefType view = mlir::cast<mlir::MemRefType>(op.getResult(0).getType());
      if (mlir::isa<mlir::memref::CastOp>(op)) {
        const auto known = static_type_.find(op.getOperand(0));
        view = known != static_type_.end() ? known->second : mlir::cast<mlir::MemRefType>(op.getOperand(0).getType());
      }
      static_type_[op.getResult(0)] = view;
    } else if (auto launch = mlir::dyn_cast<mlir::gpu::LaunchFuncOp>(op)) {
      p_.thunks.push_back({.kind = CudaThunk::Kind::kLaunch, .launch = launch_of(launch), .gemm = {}});
    } else if (auto call = mlir::dyn_cast<mlir::func::CallOp>(op);
               call && call.getCallee().starts_with(kGemmFunction)) {
      p_.thunks.push_back({.kind = CudaThunk::Kind::kGemm, .launch = {}, .gemm = gemm_of(call)});
    } else if (auto conv = mlir::dyn_cast<mlir::func::CallOp>(op);
               conv && conv.getCallee().starts_with(kConvFunction)) {
      p_.thunks.push_back({.kind = CudaThunk::Kind::kConv, .launch = {}, .gemm = {}, .conv = conv_of(conv)});
    } else if (!mlir::isa<mlir::arith::ConstantOp, mlir::memref::DeallocOp, mlir::func::ReturnOp>(op)) {
      unsupported(op, "is left on the host after the GPU stages");
    }
  }

  int64_t constant(mlir::Operation& op, mlir::memref::GetGlobalOp get) {
    auto global = mlir::SymbolTable::lookupNearestSymbolFrom<mlir::memref::GlobalOp>(&op, get.getNameAttr());
    if (!global || !global.getConstant() || !global.getInitialValue()) {
      unsupported(op, "reads a global that is not a constant with a value");
    }
    auto dense = mlir::dyn_cast<mlir::DenseElementsAttr>(*global.getInitialValue());
    if (!dense) unsupported(op, "reads a global without dense data");
    CudaBuffer b = buffer_of(op, get.getType());
    b.kind = CudaBuffer::Kind::kConstant;
    b.data.resize(static_cast<size_t>(b.bytes));
    const int64_t width = dtype_size(b.dtype);
    const llvm::ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat() || static_cast<int64_t>(raw.size()) != b.bytes) {
      // A splat stores one element; an i1 splat of 8-bit storage stores it as a bit.
      if (static_cast<int64_t>(raw.size()) < width && !dense.getElementType().isInteger(1)) {
        unsupported(op, "reads a global of an unexpected storage size");
      }
      std::vector<uint8_t> one(static_cast<size_t>(width), 0);
      if (dense.getElementType().isInteger(1)) {
        one[0] = dense.template getSplatValue<bool>() ? 1 : 0;
      } else {
        std::memcpy(one.data(), raw.data(), static_cast<size_t>(width));
      }
      for (int64_t i = 0; i < b.bytes; i += width)
        std::memcpy(b.data.data() + i, one.data(), static_cast<size_t>(width));
    } else {
      std::memcpy(b.data.data(), raw.data(), static_cast<size_t>(b.bytes));
    }
    return add_buffer(std::move(b));
  }

  static int64_t constant_index(mlir::Operation& user, mlir::Value v, const char* what) {
    const std::optional<int64_t> c = mlir::getConstantIntValue(v);
    if (!c) unsupported(user, fmt::format("has a non-constant {}", what));
    return *c;
  }

  /// The epilogue of a GEMM call, by its callee's name.
  static CudaGemm::Epilogue epilogue_of(mlir::func::CallOp call) {
    if (call.getCallee().starts_with(kBiasReluGemmFunction)) return CudaGemm::Epilogue::kBiasRelu;
    return call.getCallee().starts_with(kBiasGemmFunction) ? CudaGemm::Epilogue::kBias : CudaGemm::Epilogue::kNone;
  }

  CudaGemm gemm_of(mlir::func::CallOp call) {
    CudaGemm g;
    g.epilogue = epilogue_of(call);
    const unsigned bias = g.epilogue == CudaGemm::Epilogue::kNone ? 0 : 1;  // the bias operand precedes C
    if (call.getNumOperands() != 5 + bias) {
      unsupported(*call, bias ? "is not a GEMM call (A, B, bias, C, trans_a, trans_b)"
                              : "is not a GEMM call (A, B, C, trans_a, trans_b)");
    }
    const std::optional<DType> dt =
        dtype_of(mlir::cast<mlir::MemRefType>(call.getOperand(0).getType()).getElementType());
    // f16/bf16: cublasGemmEx with f32 compute (the lowering emits them for "ingot_cuda_gemm").
    const bool gemm_dtype =
        dt && (*dt == DType::kF32 || *dt == DType::kF64 || *dt == DType::kF16 || *dt == DType::kBF16);
    if (!gemm_dtype) unsupported(*call, "is a GEMM of an unsupported dtype");
    g.dtype = *dt;
    g.a = arg_of(*call, call.getOperand(0));
    g.b = arg_of(*call, call.getOperand(1));
    if (bias) {
      g.bias = arg_of(*call, call.getOperand(2));
      // Where cuBLASLt has no kernel for the epilogue, CudaExecutable runs the plain GEMM and this.
      add_embedded_kernel("bias", kCudaBiasKernel);
    }
    g.c = arg_of(*call, call.getOperand(2 + bias));
    g.trans_a = constant_index(*call, call.getOperand(3 + bias), "transpose flag") != 0;
    g.trans_b = constant_index(*call, call.getOperand(4 + bias), "transpose flag") != 0;
    g.batched = call.getCallee().starts_with(kBatchedGemmFunction);
    const size_t rank = g.batched ? 3 : 2, r = rank - 2;  // r: the first matrix dim
    for (const CudaKernelArg* a : {&g.a, &g.b, &g.c}) {
      if (a->sizes.size() != rank) unsupported(*call, fmt::format("passes a GEMM operand that is not {}-D", rank));
    }
    g.batch = g.batched ? g.c.sizes[0] : 1;
    g.m = g.c.sizes[r];
    g.n = g.c.sizes[r + 1];
    g.k = g.trans_a ? g.a.sizes[r] : g.a.sizes[r + 1];
    const int64_t a_m = g.trans_a ? g.a.sizes[r + 1] : g.a.sizes[r];
    const int64_t b_k = g.trans_b ? g.b.sizes[r + 1] : g.b.sizes[r], b_n = g.trans_b ? g.b.sizes[r] : g.b.sizes[r + 1];
    const bool batches = !g.batched || (g.a.sizes[0] == g.batch && g.b.sizes[0] == g.batch);
    if (a_m != g.m || b_k != g.k || b_n != g.n || !batches)
      unsupported(*call, "has GEMM operands of mismatched shapes");
    return g;
  }

  /// A convolution call (lhs, rhs, out, config): the config is a constant buffer of the
  /// encoded ConvSpec (kernels::encode_conv_spec); the thunk gets the implicit-GEMM kernel's
  /// launch and that kernel's image is added to the program once per dtype.
  CudaConv conv_of(mlir::func::CallOp call) {
    if (call.getNumOperands() != 4) unsupported(*call, "is not a convolution call (lhs, rhs, out, config)");
    CudaConv c;
    const std::optional<DType> dt =
        dtype_of(mlir::cast<mlir::MemRefType>(call.getOperand(0).getType()).getElementType());
    if (!dt || (*dt != DType::kF32 && *dt != DType::kF64))
      unsupported(*call, "is a convolution of an unsupported dtype");
    c.dtype = *dt;
    c.lhs = arg_of(*call, call.getOperand(0));
    c.rhs = arg_of(*call, call.getOperand(1));
    c.out = arg_of(*call, call.getOperand(2));
    const CudaKernelArg config = arg_of(*call, call.getOperand(3));
    const CudaBuffer& cb = p_.buffers[static_cast<size_t>(config.buffer)];
    if (cb.kind != CudaBuffer::Kind::kConstant || cb.dtype != DType::kI64 || config.sizes.size() != 1 ||
        config.offset != 0 || config.sizes[0] * 8 != cb.bytes) {
      unsupported(*call, "passes a convolution configuration that is not a whole constant i64 buffer");
    }
    std::vector<int64_t> words(static_cast<size_t>(config.sizes[0]));
    std::memcpy(words.data(), cb.data.data(), static_cast<size_t>(cb.bytes));
    try {
      c.spec = kernels::decode_conv_spec(words);
      const kernels::CudaConvParams params = kernels::cuda_conv_params(c.spec);
      const kernels::CudaKernelLaunch l = kernels::cuda_conv_launch(params, c.dtype, 1, 1, 1);  // addresses at run time
      c.kernel = l.kernel;
      c.grid = l.grid;
      c.block = l.block;
      c.params = kernels::cuda_conv_param_words(params);
    } catch (const Error& e) {
      unsupported(*call, fmt::format("has a convolution the CUDA kernels cannot run: {}", e.message()));
    }
    const struct {
      const CudaKernelArg& view;
      const std::vector<int64_t>& shape;
    } operands[] = {{c.lhs, c.spec.lhs_shape}, {c.rhs, c.spec.rhs_shape}, {c.out, c.spec.out_shape}};
    for (const auto& o : operands) {
      if (o.view.sizes != Shape{num_elements(o.shape)} || o.view.strides != Shape{1}) {
        unsupported(*call, "passes a convolution operand that is not a contiguous 1-D view of its shape");
      }
    }
    add_embedded_kernel("conv", c.kernel);
    return c;
  }

  /// Hand-written kernel `name` of `family` (kernels/cuda/<family>.cu: the implicit-GEMM
  /// convolutions, the epilogue fallback's bias kernel) as an image for every target arch: the
  /// newest embedded PTX at or below it (PTX runs on its architecture and newer ones).
  void add_embedded_kernel(const std::string& family, const std::string& name) {
    if (std::any_of(p_.kernels.begin(), p_.kernels.end(), [&](const auto& k) { return k.name == name; })) return;
    CudaKernelImage image{.name = name, .ptx = {}};
    for (const std::string& arch : archs_) {
      std::string best;
      for (const std::string& a : kernels::cuda_kernel_archs()) {
        if (arch_number(a) <= arch_number(arch) && (best.empty() || arch_number(a) > arch_number(best))) best = a;
      }
      if (best.empty()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("CUDA back end: the {} kernels have no PTX for {} or older",
                                family == "conv" ? "convolution" : family, arch),
                    "target sm_80 or newer (CudaCompileOptions::archs)");
      }
      image.ptx[arch] = std::string(kernels::cuda_kernel_ptx(family, best));
    }
    p_.kernels.push_back(std::move(image));
  }

  /// The number of "sm_<digits>[a]".
  static int arch_number(const std::string& arch) { return std::stoi(arch.substr(3)); }

  CudaKernelArg arg_of(mlir::Operation& user, mlir::Value v) {
    if (auto type = mlir::dyn_cast<mlir::MemRefType>(v.getType())) {
      const auto it = roots_.find(v);
      if (it == roots_.end()) unsupported(user, "passes a buffer the plan does not know");
      if (const auto st = static_type_.find(v); st != static_type_.end()) type = st->second;
      int64_t offset = 0;
      llvm::SmallVector<int64_t> strides;
      if (mlir::failed(type.getStridesAndOffset(strides, offset)) || mlir::ShapedType::isDynamic(offset) ||
          llvm::any_of(strides, mlir::ShapedType::isDynamic)) {
        unsupported(user, "passes a view with a dynamic layout");
      }
      return {.kind = CudaKernelArg::Kind::kMemref,
              .buffer = it->second,
              .offset = offset,
              .sizes = Shape(type.getShape().begin(), type.getShape().end()),
              .strides = Shape(strides.begin(), strides.end())};
    }
    if (v.getType().isIndex() || v.getType().isInteger(64) || v.getType().isInteger(32)) {
      return {.kind = CudaKernelArg::Kind::kIndex, .value = constant_index(user, v, "scalar argument")};
    }
    unsupported(user, "passes an argument of an unsupported type");
  }

  CudaLaunch launch_of(mlir::gpu::LaunchFuncOp launch) {
    CudaLaunch l;
    l.kernel = launch.getKernelModuleName().str() + "." + launch.getKernelName().str();
    const mlir::gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    const mlir::gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    mlir::Operation& op = *launch;
    l.grid = {constant_index(op, grid.x, "grid size"), constant_index(op, grid.y, "grid size"),
              constant_index(op, grid.z, "grid size")};
    l.block = {constant_index(op, block.x, "block size"), constant_index(op, block.y, "block size"),
               constant_index(op, block.z, "block size")};
    for (mlir::Value v : launch.getKernelOperands()) l.args.push_back(arg_of(op, v));
    return l;
  }

  CudaProgram& p_;
  mlir::ModuleOp module_;
  std::vector<std::string> archs_;  ///< CudaCompileOptions::archs
  llvm::DenseMap<mlir::Value, int64_t> roots_;
  llvm::DenseMap<mlir::Value, mlir::MemRefType> static_type_;  ///< views cast to dynamic shapes
};

/// Every gpu.binary's objects: one PTX per arch and kernel module. A module's kernels share it
/// (outlining gives each launch its own module, so in practice one kernel per module).
void collect_kernels(CudaProgram& p, mlir::ModuleOp module, const CudaCompileOptions& o) {
  std::map<std::string, std::map<std::string, std::string>> ptx_of_module;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute a : binary.getObjects()) {
      auto object = mlir::cast<mlir::gpu::ObjectAttr>(a);
      auto target = mlir::dyn_cast<mlir::NVVM::NVVMTargetAttr>(object.getTarget());
      if (!target) continue;
      ptx_of_module[binary.getName().str()][target.getChip().str()] = object.getObject().str();
    }
  });
  for (const CudaLaunch& l : p.launches()) {
    if (std::any_of(p.kernels.begin(), p.kernels.end(), [&](const auto& k) { return k.name == l.kernel; })) continue;
    const std::string module_name = l.kernel.substr(0, l.kernel.find('.'));
    const auto it = ptx_of_module.find(module_name);
    if (it == ptx_of_module.end()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("CUDA back end: no PTX for kernel '{}'", l.kernel),
                  "the binary stage must run last (gpu-module-to-binary{format=isa})");
    }
    CudaKernelImage image{.name = l.kernel, .ptx = {}};
    for (const std::string& arch : o.archs) {
      const auto ptx = it->second.find(arch);
      if (ptx == it->second.end()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("CUDA back end: kernel '{}' has no PTX for {}", l.kernel, arch),
                    "the nvvm stage must attach every arch (nvvm-attach-target)");
      }
      if (ptx->second.find(".extern .func __nv_") != std::string::npos) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("CUDA back end: kernel '{}' calls libdevice functions that were not linked", l.kernel),
                    "check CudaCompileOptions::libdevice");
      }
      image.ptx[arch] = ptx->second;
      if (!o.dump_dir.empty()) {
        detail::write_file(std::filesystem::path(o.dump_dir) / fmt::format("{}.{}.ptx", l.kernel, arch), ptx->second);
      }
    }
    p.kernels.push_back(std::move(image));
  }
}

}  // namespace

std::vector<PipelineStage> default_cuda_pipeline(const CudaCompileOptions& o) {
  check_options(o);
  // Without libdevice anywhere the pipeline still prints (ingot-opt), naming the toolkit's file;
  // compile_cuda refuses to run it (libdevice_of).
  std::string libdevice = o.libdevice;
  if (libdevice.empty()) {
    const std::vector<LibraryCandidate> found = libdevice_candidates(o.libraries);
    libdevice = found.empty() ? "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc" : found.front().path;
  }
  std::string attach;
  for (const std::string& arch : o.archs) {
    attach += fmt::format("nvvm-attach-target{{chip={} features={} O={} l={}}},", arch, o.ptx_features, o.opt_level,
                          libdevice);
  }
  std::vector<PipelineStage> stages = default_tensor_stages();
  // Bias adds (and relus) folded into cuBLAS GEMM calls as cuBLASLt epilogues, before fusion.
  if (o.gemm_epilogues) {
    stages.insert(stages.begin() + 1,
                  {"gemm-epilogues", fmt::format("{},canonicalize,cse", pass_names::kCudaGemmEpilogues)});
  }
  stages.back().pipeline += fmt::format(",func.func({})", pass_names::kCopiesToLinalg);  // copies become kernels too
  const std::vector<PipelineStage> back = {
      // Long reductions become one block per output element (gpu.all_reduce: warp shuffles and
      // shared memory) before the loop path.
      {"reductions", fmt::format("func.func({}{{threads={} min-reduced={}}})", pass_names::kGpuBlockReductions,
                                 o.threads_per_block, o.block_reduction_min)},
      {"loops", fmt::format("func.func(convert-linalg-to-parallel-loops),func.func({}{{threads={}}})",
                            pass_names::kGpuPrepareLoops, o.threads_per_block)},
      {"gpu",
       "func.func(gpu-map-parallel-loops),func.func(convert-parallel-loops-to-gpu),lower-affine,"
       "gpu-launch-sink-index-computations,gpu-kernel-outlining,canonicalize,cse"},
      {"nvvm", attach + "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,canonicalize,reconcile-unrealized-casts)"},
      {"binary", "gpu-module-to-binary{format=isa}"},
  };
  stages.insert(stages.end(), back.begin(), back.end());
  return stages;
}

std::string run_cuda_pipeline(const std::string& mlir_text, const std::vector<PipelineStage>& stages) {
  initialise_mlir_once();
  mlir::MLIRContext ctx(make_registry());
  return detail::module_text(*detail::parse_and_run(
      ctx, mlir_text, stages, "",
      "run the passes one at a time (ingot-opt --target cuda --mlir-pipeline) to find the one that fails",
      /*verify_each_pass=*/true));
}

CudaProgram compile_cuda(const std::string& mlir_text, const std::string& entry,
                         std::vector<std::pair<Shape, DType>> input_types,
                         std::vector<std::pair<Shape, DType>> output_types, const CudaCompileOptions& options) {
  check_options(options);
  CudaCompileOptions resolved = options;
  resolved.libdevice = libdevice_of(options);
  initialise_mlir_once();
  mlir::MLIRContext ctx(make_registry());
  const std::vector<PipelineStage> stages =
      options.pipeline.empty() ? default_cuda_pipeline(resolved) : options.pipeline;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      detail::parse_and_run(ctx, mlir_text, stages, options.dump_dir, kDumpHint, options.verify_each_pass);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>(entry);
  if (!fn || fn.isExternal()) {
    throw Error(ErrorCode::kNotFound, fmt::format("CUDA back end: the module has no function '{}'", entry));
  }
  CudaProgram program;
  program.input_types = std::move(input_types);
  program.output_types = std::move(output_types);
  PlanBuilder(program, *module, options.archs).run(fn);
  collect_kernels(program, *module, options);
  std::string host;
  llvm::raw_string_ostream os(host);
  fn.print(os);
  program.host_mlir = host;
  return program;
}

}  // namespace ingot::codegen
