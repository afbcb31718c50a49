// ingot-early-dealloc: every memref.dealloc moved up to just after the last use of its buffer, so a
// step's temporaries live no longer than they are needed (docs/compiler.md, "Passes"). Declared
// in passes.h.
#include "codegen/cpu/passes.h"
#include "ingot/codegen/pass_names.h"

#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Block.h"
#include "mlir/Pass/Pass.h"

namespace ingot::codegen {

namespace {

/// `root` and every value that may alias it, transitively: each memref result of an operation
/// that takes one of them as an operand (views, casts, calls, selects: any operation, to be
/// safe), the memref block arguments of the regions of such an operation (loop-carried buffers),
/// and the memref results of the parent of a terminator that yields one of them.
llvm::SetVector<mlir::Value> may_alias(mlir::Value root) {
  llvm::SetVector<mlir::Value> set;
  set.insert(root);
  auto add_memrefs = [&](mlir::ValueRange values) {
    for (mlir::Value v : values) {
      if (mlir::isa<mlir::BaseMemRefType>(v.getType())) set.insert(v);
    }
  };
  for (size_t i = 0; i < set.size(); ++i) {
    for (mlir::Operation* user : set[i].getUsers()) {
      add_memrefs(user->getResults());
      for (mlir::Region& region : user->getRegions()) {
        for (mlir::Block& block : region) add_memrefs(block.getArguments());
      }
      if (user->hasTrait<mlir::OpTrait::IsTerminator>() && user->getParentOp() != nullptr) {
        add_memrefs(user->getParentOp()->getResults());
      }
    }
  }
  return set;
}

/// Moves `dealloc` to just after the last operation of its block that uses its buffer (or an
/// alias of it, may_alias), when the buffer is a memref.alloc of the same block and every use is
/// inside that block. Leaves it where it is otherwise (a use in another block, a use after it).
void move_up(mlir::memref::DeallocOp dealloc) {
  mlir::Block* block = dealloc->getBlock();
  mlir::Operation* alloc = dealloc.getMemref().getDefiningOp<mlir::memref::AllocOp>();
  if (alloc == nullptr || alloc->getBlock() != block) return;
  mlir::Operation* last = alloc;
  for (mlir::Value v : may_alias(dealloc.getMemref())) {
    for (mlir::Operation* user : v.getUsers()) {
      if (user == dealloc.getOperation()) continue;
      mlir::Operation* in_block = block->findAncestorOpInBlock(*user);
      if (in_block == nullptr || dealloc->isBeforeInBlock(in_block)) return;
      if (last->isBeforeInBlock(in_block)) last = in_block;
    }
  }
  if (last->getNextNode() != dealloc.getOperation()) dealloc->moveAfter(last);
}

/// `ingot-early-dealloc`. MLIR's ownership-based buffer deallocation frees each buffer at the end
/// of the block that owns it: in a train step's entry that is the end of the step, so every
/// block's residuals, gradients and temporaries were live at once (the 4-block LM's step held
/// ~900 MiB of heap for a 38 MiB peak of arrays). This runs after the deallocation pipeline and
/// frees each buffer right after its last use instead; the program is the same otherwise.
class EarlyDeallocPass : public mlir::PassWrapper<EarlyDeallocPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(EarlyDeallocPass)
  llvm::StringRef getArgument() const final { return pass_names::kEarlyDealloc; }
  llvm::StringRef getDescription() const final {
    return "Move each memref.dealloc to just after the last use of its buffer (ingot)";
  }
  void runOnOperation() override {
    llvm::SmallVector<mlir::memref::DeallocOp> deallocs;
    getOperation().walk([&](mlir::memref::DeallocOp d) { deallocs.push_back(d); });
    for (mlir::memref::DeallocOp d : deallocs) move_up(d);
  }
};

}  // namespace

void register_early_dealloc_pass() { mlir::PassRegistration<EarlyDeallocPass>(); }

}  // namespace ingot::codegen
