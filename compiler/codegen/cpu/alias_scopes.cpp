// ingot-noalias-scopes: the `llvm.noalias` arguments of a function as alias scopes on its memory
// accesses, so that they survive OpenMP outlining (docs/compiler.md, "Kernel outlining and
// dedupe"). Declared in passes.h.
#include <fmt/format.h>
#include "ingot/codegen/pass_names.h"

#include <optional>

#include "codegen/cpu/passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Pass/Pass.h"

namespace ingot::codegen {

namespace {

/// The argument of `fn` a pointer is computed from (through getelementptr, casts and the
/// pointer fields of a memref descriptor built with insertvalue: what convert-to-llvm emits for
/// a bare-pointer memref argument), or nullopt when it comes from anything else.
std::optional<unsigned> pointer_argument(mlir::Value v, mlir::LLVM::LLVMFuncOp fn) {
  while (true) {
    if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
      if (arg.getOwner() != &fn.getBody().front()) return std::nullopt;
      return arg.getArgNumber();
    }
    mlir::Operation* def = v.getDefiningOp();
    if (auto gep = mlir::dyn_cast<mlir::LLVM::GEPOp>(def)) {
      v = gep.getBase();
    } else if (mlir::isa<mlir::LLVM::BitcastOp, mlir::LLVM::AddrSpaceCastOp>(def)) {
      v = def->getOperand(0);
    } else if (auto extract = mlir::dyn_cast<mlir::LLVM::ExtractValueOp>(def)) {
      // Find the insertvalue that wrote this position of the aggregate.
      mlir::Value aggregate = extract.getContainer();
      while (true) {
        auto insert = aggregate.getDefiningOp<mlir::LLVM::InsertValueOp>();
        if (!insert) return std::nullopt;
        if (insert.getPosition() == extract.getPosition()) {
          v = insert.getValue();
          break;
        }
        aggregate = insert.getContainer();
      }
    } else {
      return std::nullopt;
    }
  }
}

/// `ingot-noalias-scopes` (on llvm.func): gives each `llvm.noalias` pointer argument of a function
/// an alias scope of its own, and each memory access (load, store, memory intrinsics) whose
/// pointers all come from arguments (pointer_argument) the scopes of its noalias arguments and
/// the others' as noalias scopes -- what LLVM's inliner does when it inlines a call with noalias
/// arguments (LLVM LangRef, "!alias.scope and !noalias metadata"). The accesses keep the fact
/// when MLIR's OpenMP translation moves the loop bodies into outlined functions, which receive
/// the pointers through memory and so lose the argument attribute; LLVM's loop vectoriser then
/// needs no run-time overlap checks and no scalar copy of each loop. Accesses that already have
/// scopes, or whose pointers come from elsewhere, are left as they are (no claim is made).
class NoAliasScopesPass : public mlir::PassWrapper<NoAliasScopesPass, mlir::OperationPass<mlir::LLVM::LLVMFuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(NoAliasScopesPass)
  llvm::StringRef getArgument() const final { return pass_names::kNoaliasScopes; }
  llvm::StringRef getDescription() const final {
    return "Alias scopes on memory accesses from the function's noalias arguments (ingot)";
  }

  void runOnOperation() override {
    mlir::LLVM::LLVMFuncOp fn = getOperation();
    if (fn.isExternal()) return;
    mlir::MLIRContext* ctx = fn.getContext();
    const llvm::StringRef noalias_name = mlir::LLVM::LLVMDialect::getNoAliasAttrName();
    llvm::SmallVector<mlir::Attribute> scopes(fn.getNumArguments());  // null: not noalias
    mlir::LLVM::AliasScopeDomainAttr domain;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      if (!fn.getArgAttr(i, noalias_name)) continue;
      if (!domain) domain = mlir::LLVM::AliasScopeDomainAttr::get(ctx, mlir::StringAttr::get(ctx, fn.getName()));
      scopes[i] = mlir::LLVM::AliasScopeAttr::get(domain, mlir::StringAttr::get(ctx, fmt::format("arg{}", i)));
    }
    if (!domain) return;
    fn.walk([&](mlir::LLVM::AliasAnalysisOpInterface access) {
      if (access.getAliasScopesOrNull() || access.getNoAliasScopesOrNull()) return;
      llvm::SmallVector<bool> based_on(fn.getNumArguments(), false);
      for (mlir::Value pointer : access.getAccessedOperands()) {
        std::optional<unsigned> arg = pointer_argument(pointer, fn);
        if (!arg) return;
        based_on[*arg] = true;
      }
      llvm::SmallVector<mlir::Attribute> own, others;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        if (scopes[i]) (based_on[i] ? own : others).push_back(scopes[i]);
      }
      if (!own.empty()) access.setAliasScopes(mlir::ArrayAttr::get(ctx, own));
      if (!others.empty()) access.setNoAliasScopes(mlir::ArrayAttr::get(ctx, others));
    });
  }
};

}  // namespace

void register_noalias_scopes_pass() { mlir::PassRegistration<NoAliasScopesPass>(); }

}  // namespace ingot::codegen
