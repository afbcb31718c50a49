// ingot-outline-kernels: one function per loop nest, structurally identical nests compiled once
// (docs/compiler.md, "Kernel outlining and dedupe"). Declared in passes.h.
#include <fmt/format.h>
#include "ingot/codegen/pass_names.h"

#include <optional>
#include <string>

#include "codegen/cpu/passes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/xxhash.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/RegionUtils.h"

namespace ingot::codegen {

namespace {

/// A top-level operation of a function body that becomes a kernel: a loop nest over memrefs (a
/// linalg operation on buffers with at least one loop, or an scf/affine loop) that returns nothing.
bool is_outlinable(mlir::Operation& op) {
  if (op.getNumResults() != 0) return false;
  // A linalg operation without loops (on rank-0 buffers) is a few scalar instructions: it stays
  // in the entry (and, as before outlining, is not counted as a loop nest).
  if (auto linalg = mlir::dyn_cast<mlir::linalg::LinalgOp>(op)) return linalg.getNumLoops() > 0;
  return mlir::isa<mlir::scf::ForOp, mlir::scf::ParallelOp, mlir::scf::ForallOp, mlir::scf::WhileOp,
                   mlir::affine::AffineForOp, mlir::affine::AffineParallelOp>(op);
}

/// Constants without operands are cloned into the kernel (its loop bounds, fill values) rather
/// than passed: two nests that differ only in which buffers they touch then print the same.
bool is_clonable_constant(mlir::Value v) {
  mlir::Operation* def = v.getDefiningOp();
  return def != nullptr && def->hasTrait<mlir::OpTrait::ConstantLike>() && def->getNumOperands() == 0 &&
         def->getNumRegions() == 0;
}

/// Whether an argument of type `t` can be passed as a bare pointer (MLIR's `llvm.bareptr`
/// convention: a memref of static shape, strides and offset is passed as its aligned pointer, the
/// rest of its descriptor rebuilt from the type inside the callee); other types pass unchanged.
bool bare_pointer_compatible(mlir::Type t) {
  if (mlir::isa<mlir::UnrankedMemRefType>(t)) return false;
  auto memref = mlir::dyn_cast<mlir::MemRefType>(t);
  if (!memref) return true;
  if (!memref.hasStaticShape()) return false;
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (mlir::failed(memref.getStridesAndOffset(strides, offset))) return false;
  return !mlir::ShapedType::isDynamic(offset) && llvm::none_of(strides, mlir::ShapedType::isDynamic);
}

/// What the noalias marking needs to know of the module: itself (the root class of parameters and
/// writable globals), the names of its constant memref.globals (read-only memory) and the fresh
/// out-parameters of its scope functions, collected once per run so that no symbol lookup scans
/// the module per nest.
struct ModuleMemory {
  const mlir::Operation* module;
  llvm::DenseSet<mlir::Attribute> constant_globals;

  /// The out-parameters of scope functions (lower::LoweringOptions::share_repeated_scopes: the
  /// parameters after the `ingot.scope_inputs` first) whose every call passes distinct fresh
  /// memref.allocs there: distinct memory from everything else the function can see.
  llvm::DenseSet<mlir::Value> fresh_parameters;

  explicit ModuleMemory(mlir::ModuleOp m) : module(m.getOperation()) {
    for (mlir::memref::GlobalOp g : m.getOps<mlir::memref::GlobalOp>()) {
      if (g.getConstant()) constant_globals.insert(g.getSymNameAttr());
    }
    collect_fresh_parameters(m);
  }
  bool is_constant(mlir::memref::GetGlobalOp get) const {
    return constant_globals.contains(get.getNameAttr().getAttr());
  }

 private:
  void collect_fresh_parameters(mlir::ModuleOp m) {
    llvm::StringMap<int64_t> inputs;  // scope function -> its first out-parameter (-1: not all calls fresh)
    for (mlir::func::FuncOp fn : m.getOps<mlir::func::FuncOp>()) {
      if (auto n = fn->getAttrOfType<mlir::IntegerAttr>("ingot.scope_inputs"); n && !fn.isExternal()) {
        inputs[fn.getSymName()] = n.getInt();
      }
    }
    if (inputs.empty()) return;
    m.walk([&](mlir::func::CallOp call) {
      auto it = inputs.find(call.getCallee());
      if (it == inputs.end() || it->second < 0) return;
      llvm::DenseSet<mlir::Value> seen;
      for (size_t i = static_cast<size_t>(it->second); i < call.getNumOperands(); ++i) {
        mlir::Value v = call.getOperand(static_cast<unsigned>(i));
        if (!v.getDefiningOp<mlir::memref::AllocOp>() || !seen.insert(v).second) it->second = -1;
      }
    });
    for (mlir::func::FuncOp fn : m.getOps<mlir::func::FuncOp>()) {
      auto it = inputs.find(fn.getSymName());
      if (it == inputs.end() || it->second < 0) continue;
      for (size_t i = static_cast<size_t>(it->second); i < fn.getNumArguments(); ++i) {
        fresh_parameters.insert(fn.getArgument(static_cast<unsigned>(i)));
      }
    }
  }
};

/// The memory a buffer (a memref value of a function body) is a view of, followed through view
/// operations (subview, reshapes, casts): its memref.alloc / memref.alloca, its constant
/// memref.global (by name), or -- one class for all of them, `module` -- a function parameter or a
/// writable memref.global (two parameters may be one buffer: a donated parameter is also its step
/// output; a function called inside the module may be given a global). Null when unknown (another
/// block's argument, a call's result). Distinct non-null roots are distinct memory while both are
/// alive, or read-only.
const void* buffer_root(mlir::Value v, const ModuleMemory& memory) {
  while (true) {
    if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
      mlir::Block* block = arg.getOwner();
      const bool parameter = block->isEntryBlock() && mlir::isa<mlir::func::FuncOp>(block->getParentOp());
      if (parameter && memory.fresh_parameters.contains(v)) return v.getAsOpaquePointer();
      return parameter ? memory.module : nullptr;
    }
    mlir::Operation* def = v.getDefiningOp();
    if (mlir::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp>(def)) return def;
    if (auto global = mlir::dyn_cast<mlir::memref::GetGlobalOp>(def)) {
      return memory.is_constant(global) ? global.getNameAttr().getAsOpaquePointer() : memory.module;
    }
    if (auto view = mlir::dyn_cast<mlir::ViewLikeOpInterface>(def)) {
      v = view.getViewSource();
    } else if (auto cast = mlir::dyn_cast<mlir::memref::CastOp>(def)) {
      v = cast.getSource();
    } else {
      return nullptr;
    }
  }
}

/// Whether `nest` (with `args`, the values it uses from outside) can reach memory only through
/// its memref arguments: every argument is a memref of numbers or a number, and the nest has no
/// call, no get_global of a writable global, no pointer taken as an integer
/// (memref.extract_aligned_pointer_as_index) and no LLVM dialect operation. Otherwise it could
/// reach an argument's memory another way, and none is marked noalias.
bool reaches_memory_only_through_arguments(mlir::Operation& nest, llvm::ArrayRef<mlir::Value> args,
                                           const ModuleMemory& memory) {
  auto number = [](mlir::Type t) { return mlir::isa<mlir::IntegerType, mlir::IndexType, mlir::FloatType>(t); };
  for (mlir::Value v : args) {
    auto memref = mlir::dyn_cast<mlir::BaseMemRefType>(v.getType());
    if (memref ? !number(memref.getElementType()) : !number(v.getType())) return false;
  }
  const mlir::WalkResult walk = nest.walk([&](mlir::Operation* op) {
    auto global = mlir::dyn_cast<mlir::memref::GetGlobalOp>(op);
    const bool escapes = mlir::isa<mlir::CallOpInterface, mlir::memref::ExtractAlignedPointerAsIndexOp>(op) ||
                         mlir::isa<mlir::LLVM::LLVMDialect>(op->getDialect()) ||
                         (global && !memory.is_constant(global));
    return escapes ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

/// Marks `llvm.noalias` the memref arguments of `kernel` whose memory no other argument of this
/// call can reach (buffer_root unique among `args`), when every memref argument's root is known and
/// the nest reaches memory only through them (reaches_memory_only_through_arguments): C's
/// `restrict`, which lets LLVM vectorise the kernel's loops without run-time overlap checks and a
/// scalar copy of each loop (ingot-noalias-scopes carries it into the OpenMP bodies).
void mark_noalias_arguments(mlir::func::FuncOp kernel, mlir::Operation& nest, llvm::ArrayRef<mlir::Value> args,
                            const ModuleMemory& memory) {
  if (!reaches_memory_only_through_arguments(nest, args, memory)) return;
  llvm::SmallVector<const void*> roots;
  for (mlir::Value v : args) {
    if (!mlir::isa<mlir::BaseMemRefType>(v.getType())) continue;
    roots.push_back(buffer_root(v, memory));
    if (roots.back() == nullptr) return;
  }
  mlir::UnitAttr unit = mlir::UnitAttr::get(kernel.getContext());
  size_t memref_index = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!mlir::isa<mlir::BaseMemRefType>(args[i].getType())) continue;
    if (llvm::count(roots, roots[memref_index++]) == 1) {
      kernel.setArgAttr(static_cast<unsigned>(i), mlir::LLVM::LLVMDialect::getNoAliasAttrName(), unit);
    }
  }
}

/// `ingot-outline-kernels`: after bufferization, moves every outlinable top-level operation of each
/// function body (is_outlinable) into a function of its own, `func.func @ingot_k_<hash>(buffers...)`
/// marked `ingot.kernel`, and calls it. The kernel's arguments are the values the nest uses from
/// outside (buffers, views, scalars) in order of first use; operand-free constants are cloned in.
/// Kernels are deduplicated by their printed form (with one placeholder name, no locations):
/// nests that are identical up to the buffers they are given (the blocks of a transformer, the
/// optimizer update of same-shaped variables) share one function, so LLVM compiles each once. The
/// name hashes that form (xxh3, 64 bits), so it is the same in every process; the rest of the
/// pipeline and the code generator then see many small functions instead of one huge one, and
/// the CPU compiler compiles them in parallel (compile_cpu). A kernel whose memref arguments all
/// have static shapes, strides and offsets (every kernel of a static-shape step) is marked
/// `llvm.bareptr`: each buffer is passed as one pointer instead of a descriptor of 3 + 2 * rank
/// values, which shrinks the entry (the 4-block LM's calls passed ~20k descriptor words) and the
/// kernels' prologues; the loops index with the type's constant strides either way. A bare-pointer
/// kernel's buffers that no other buffer of its call can overlap are marked `llvm.noalias`
/// (mark_noalias_arguments; part of the printed form, so calls that may overlap get their own).
class OutlineKernelsPass : public mlir::PassWrapper<OutlineKernelsPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(OutlineKernelsPass)
  llvm::StringRef getArgument() const final { return pass_names::kOutlineKernels; }
  llvm::StringRef getDescription() const final {
    return "Outline each top-level loop nest into a function, identical nests into one (ingot)";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::func::FuncDialect, mlir::LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    by_text_.clear();
    memory_.emplace(module);
    std::vector<mlir::func::FuncOp> hosts;
    for (mlir::func::FuncOp fn : module.getOps<mlir::func::FuncOp>()) {
      if (!fn.isExternal() && !fn->hasAttr(kKernelAttr)) hosts.push_back(fn);
    }
    for (mlir::func::FuncOp host : hosts) {
      for (mlir::Block& block : host.getBody()) {
        for (mlir::Operation& op : llvm::make_early_inc_range(block)) {
          if (is_outlinable(op)) outline(module, op);
        }
      }
    }
  }

 private:
  /// Replaces `op` by a call of its kernel (created, or found by its printed form).
  void outline(mlir::ModuleOp module, mlir::Operation& op) {
    llvm::SetVector<mlir::Value> used;
    for (mlir::Value v : op.getOperands()) used.insert(v);
    mlir::getUsedValuesDefinedAbove(op.getRegions(), used);
    llvm::SmallVector<mlir::Value> args;
    llvm::SmallVector<mlir::Operation*> constants;
    for (mlir::Value v : used) {
      if (is_clonable_constant(v)) {
        constants.push_back(v.getDefiningOp());
      } else {
        args.push_back(v);
      }
    }
    mlir::OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    llvm::SmallVector<mlir::Type> types;
    for (mlir::Value v : args) types.push_back(v.getType());
    auto kernel = mlir::func::FuncOp::create(b, op.getLoc(), "ingot_kernel", b.getFunctionType(types, {}));
    kernel->setAttr(kKernelAttr, b.getUnitAttr());
    if (llvm::all_of(types, bare_pointer_compatible)) {
      kernel->setAttr("llvm.bareptr", b.getUnitAttr());
      mark_noalias_arguments(kernel, op, args, *memory_);
    }
    mlir::Block* body = kernel.addEntryBlock();
    mlir::IRMapping map;
    for (size_t i = 0; i < args.size(); ++i) map.map(args[i], body->getArgument(static_cast<unsigned>(i)));
    mlir::OpBuilder kb = mlir::OpBuilder::atBlockBegin(body);
    for (mlir::Operation* c : constants) {
      if (!map.contains(c->getResult(0))) kb.clone(*c, map);
    }
    kb.clone(op, map);
    mlir::func::ReturnOp::create(kb, op.getLoc());

    std::string text;
    llvm::raw_string_ostream os(text);
    kernel->print(os, mlir::OpPrintingFlags().useLocalScope());
    std::string name;
    if (auto it = by_text_.find(text); it != by_text_.end()) {
      name = it->second;
      kernel.erase();
    } else {
      name = unique_name(module, llvm::xxh3_64bits(text));
      kernel.setSymName(name);
      by_text_[text] = name;
    }
    mlir::OpBuilder cb(&op);
    mlir::func::CallOp::create(cb, op.getLoc(), name, mlir::TypeRange{}, args);
    op.erase();
  }

  /// "ingot_k_<16 hex digits of hash>", with a suffix in the (astronomically unlikely) case that
  /// two different kernels hash alike.
  static std::string unique_name(mlir::ModuleOp module, uint64_t hash) {
    std::string name = fmt::format("ingot_k_{:016x}", hash);
    for (int i = 1; mlir::SymbolTable::lookupSymbolIn(module, name) != nullptr; ++i) {
      name = fmt::format("ingot_k_{:016x}_{}", hash, i);
    }
    return name;
  }

  llvm::StringMap<std::string> by_text_;  ///< printed kernel (placeholder name) -> its symbol
  std::optional<ModuleMemory> memory_;    ///< of the module being run on
};

}  // namespace

void register_outline_kernels_pass() { mlir::PassRegistration<OutlineKernelsPass>(); }

}  // namespace ingot::codegen
