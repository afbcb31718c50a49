// Splitting an outlined MLIR module into per-kernel modules (mlir_split.h).
#include "codegen/cpu/mlir_split.h"

#include <fmt/format.h>

#include <set>

#include "codegen/cpu/passes.h"
#include "ingot/runtime/error.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/SymbolTable.h"

namespace ingot::codegen::detail {

namespace {

/// Every operation's and block argument's location becomes unknown: a part's bytecode (its cache
/// key) then depends on its code only, not on where the lowering or the input text put it.
void strip_locations(mlir::Operation* root) {
  const mlir::Location unknown = mlir::UnknownLoc::get(root->getContext());
  root->walk([&](mlir::Operation* op) {
    op->setLoc(unknown);
    for (mlir::Region& region : op->getRegions()) {
      for (mlir::Block& block : region) {
        for (mlir::BlockArgument arg : block.getArguments()) arg.setLoc(unknown);
      }
    }
  });
}

std::string bytecode(mlir::ModuleOp module, const std::string& name) {
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (mlir::failed(mlir::writeBytecodeToFile(module, os))) {
    throw Error(ErrorCode::kInternal, fmt::format("MLIR: part '{}' could not be written as bytecode", name),
                "this is a bug in ingot's CPU back end: report it with the IR dump (CpuCompileOptions::dump_dir)");
  }
  os.flush();
  return bytes;
}

/// A module holding a copy of `kernel` and of the symbols it references, transitively: every
/// other function as a private declaration (the host part defines it), everything else
/// (memref.global) as a private copy.
mlir::OwningOpRef<mlir::ModuleOp> kernel_module(mlir::ModuleOp module, mlir::SymbolTable& table,
                                                mlir::func::FuncOp kernel) {
  mlir::OpBuilder b(module.getContext());
  mlir::OwningOpRef<mlir::ModuleOp> part = mlir::ModuleOp::create(b.getUnknownLoc());
  (*part)->setAttrs(module->getAttrDictionary());
  b.setInsertionPointToEnd(part->getBody());
  std::set<std::string> copied = {kernel.getSymName().str()};
  std::vector<mlir::Operation*> work = {b.clone(*kernel.getOperation())};
  while (!work.empty()) {
    mlir::Operation* op = work.back();
    work.pop_back();
    std::optional<mlir::SymbolTable::UseRange> uses = mlir::SymbolTable::getSymbolUses(op);
    if (!uses) continue;
    for (const mlir::SymbolTable::SymbolUse& use : *uses) {
      const std::string name = use.getSymbolRef().getRootReference().str();
      if (!copied.insert(name).second) continue;
      mlir::Operation* symbol = table.lookup(name);
      if (symbol == nullptr) continue;  // the verifier of the lowering reports it
      // Functions are declared and called across objects by name (func-to-llvm gives every
      // function external linkage, private ones included): the host part keeps the definition.
      if (auto fn = mlir::dyn_cast<mlir::func::FuncOp>(symbol)) {
        auto decl = mlir::cast<mlir::func::FuncOp>(b.clone(*symbol));
        if (!decl.isExternal()) decl.eraseBody();
        decl.setPrivate();
        continue;
      }
      // Globals get the part's own copy, private (a private memref.global has private linkage in
      // LLVM): the host part keeps its definition, and two objects defining one public symbol do
      // not link.
      mlir::Operation* copy = b.clone(*symbol);
      mlir::SymbolTable::setSymbolVisibility(copy, mlir::SymbolTable::Visibility::Private);
      work.push_back(copy);
    }
  }
  strip_locations(part->getOperation());
  return part;
}

}  // namespace

std::vector<MlirPart> split_mlir_module(mlir::ModuleOp module) {
  std::vector<mlir::func::FuncOp> kernels;
  for (mlir::func::FuncOp fn : module.getOps<mlir::func::FuncOp>()) {
    if (fn->hasAttr(kKernelAttr) && !fn.isExternal()) kernels.push_back(fn);
  }
  // A global that is not a constant is state the parts would each get a copy of: keep the module
  // whole (one part, optimised like a kernel), so the entry and its kernels share it.
  for (mlir::memref::GlobalOp global : module.getOps<mlir::memref::GlobalOp>()) {
    if (!global.getConstant()) {
      strip_locations(module.getOperation());
      return {{"host", bytecode(module, "host"), false}};
    }
  }
  mlir::SymbolTable table(module);
  std::vector<MlirPart> parts(1);
  for (mlir::func::FuncOp kernel : kernels) {
    mlir::OwningOpRef<mlir::ModuleOp> part = kernel_module(module, table, kernel);
    const std::string name = kernel.getSymName().str();
    parts.push_back({name, bytecode(*part, name), false});
  }
  for (mlir::func::FuncOp kernel : kernels) {
    kernel.eraseBody();
    kernel.setPrivate();
  }
  strip_locations(module.getOperation());
  parts[0] = {"host", bytecode(module, "host"), !kernels.empty()};
  return parts;
}

}  // namespace ingot::codegen::detail
