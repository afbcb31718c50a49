// ingot's target-independent MLIR passes, shared by the CPU and CUDA pipelines (the tensor and
// bufferization stages of default_tensor_stages): ingot-fuse-multi-use-elementwise,
// ingot-distinct-results, ingot-drop-argument-results, ingot-sink-donated-updates. Declared in
// tensor_passes.h, documented in docs/compiler.md.
#include "codegen/tensor_passes.h"
#include "ingot/codegen/pass_names.h"

#include <mutex>
#include <algorithm>
#include <limits>
#include "llvm/ADT/BitVector.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace ingot::codegen {

namespace {

/// Largest body (operations, terminator excluded) that multi-use fusion may create: bounds the
/// code duplicated into each consumer and guarantees the rewrite terminates.
constexpr int64_t kMaxFusedBodyOps = 48;

int64_t body_size(mlir::linalg::GenericOp op) { return static_cast<int64_t>(op.getBody()->getOperations().size()) - 1; }

/// True if `op`'s body is cheap to recompute: arith operations and linalg.index only (no math
/// dialect transcendentals, which stay computed once).
bool is_cheap_elementwise(mlir::linalg::GenericOp op) {
  for (mlir::Operation& inner : op.getBody()->without_terminator()) {
    if (!mlir::isa<mlir::arith::ArithDialect>(inner.getDialect()) && !mlir::isa<mlir::linalg::IndexOp>(inner)) {
      return false;
    }
  }
  return true;
}

/// Control of ingot's elementwise fusion. Upstream's linalg-fuse-elementwise-ops fuses a producer
/// only when it has a single use; a dense layer's bias add feeds both the compare and the select
/// of relu (and the compare's mask also feeds the backward pass), so nothing fused. This also
/// accepts a producer with several uses when recomputing it is cheap and costs no extra
/// iterations: the producer's body is cheap (is_cheap_elementwise), the consumer is all-parallel
/// and reads the producer through a permutation (same iteration space), and the fused body stays
/// within kMaxFusedBodyOps. The producer is cloned into the consumer and stays for its other
/// users (MLIR's fuseElementwiseOps semantics); it disappears once every user has fused it.
bool fuse_multi_use_control(mlir::OpOperand* operand) {
  auto producer = operand->get().getDefiningOp<mlir::linalg::GenericOp>();
  if (!producer) return false;
  if (producer->hasOneUse()) return true;
  auto consumer = mlir::dyn_cast<mlir::linalg::GenericOp>(operand->getOwner());
  if (!consumer || consumer.getNumReductionLoops() != 0) return false;
  if (!consumer.getMatchingIndexingMap(operand).isPermutation()) return false;
  if (!is_cheap_elementwise(producer)) return false;
  return body_size(producer) + body_size(consumer) <= kMaxFusedBodyOps;
}

/// `ingot-fuse-multi-use-elementwise`: MLIR's elementwise fusion patterns with
/// fuse_multi_use_control (see there), plus linalg.generic canonicalisation (drops the results
/// and operands that fusion left dead).
class FuseMultiUseElementwisePass
    : public mlir::PassWrapper<FuseMultiUseElementwisePass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FuseMultiUseElementwisePass)
  llvm::StringRef getArgument() const final { return pass_names::kFuseMultiUseElementwise; }
  llvm::StringRef getDescription() const final {
    return "Fuse cheap elementwise linalg.generic producers with several uses into each "
           "same-shaped elementwise consumer (ingot)";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::affine::AffineDialect, mlir::arith::ArithDialect, mlir::linalg::LinalgDialect,
                    mlir::tensor::TensorDialect>();
  }
  void runOnOperation() override {
    mlir::MLIRContext* ctx = &getContext();
    mlir::RewritePatternSet patterns(ctx);
    mlir::linalg::populateElementwiseOpsFusionPatterns(patterns, fuse_multi_use_control);
    mlir::linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    // Not converging within the driver's iteration limit leaves valid IR; like upstream's
    // fusion pass, that is not an error.
    (void)mlir::applyPatternsGreedily(getOperation(), std::move(patterns));
  }
};

/// `ingot-distinct-results`: makes every memref a function returns a distinct, identity-layout
/// memref.alloc of static shape (a fresh alloc + memref.copy for a repeated value, a function
/// argument, a global or a view), so that buffer-results-to-out-params can hoist each result's
/// allocation into the caller's out-param (no final copy) without two out-params sharing one
/// buffer (which crashes the MLIR 22 hoisting). With `guard-argument-copies` (the CPU pipeline),
/// the copy of a returned function argument runs only when the out-param is another buffer: a
/// donated parameter's output is written in place and its out-param is the parameter's own
/// buffer (compile_graph), where the copy would move every byte onto itself (the MLP train step
/// did 22 such copies per step). In the default CPU pipeline ingot-drop-argument-results has
/// already dropped the entry's returned arguments (and drop-equivalent-buffer-results those of
/// private functions), so the guard is for custom pipelines without them. The CUDA plan handles
/// donated outputs itself (CudaProgram).
class DistinctResultsPass : public mlir::PassWrapper<DistinctResultsPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DistinctResultsPass)
  llvm::StringRef getArgument() const final { return pass_names::kDistinctResults; }
  llvm::StringRef getDescription() const final {
    return "Make each returned memref a distinct static identity-layout allocation (ingot)";
  }
  DistinctResultsPass() = default;
  DistinctResultsPass(const DistinctResultsPass& other) : PassWrapper(other) {}
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::memref::MemRefDialect, mlir::arith::ArithDialect, mlir::scf::SCFDialect>();
  }
  Option<bool> guard_argument_copies{*this, "guard-argument-copies",
                                     llvm::cl::desc("copy a returned argument only into another buffer"),
                                     llvm::cl::init(false)};
  void runOnOperation() override {
    const bool guard = guard_argument_copies;
    getOperation().walk([guard](mlir::func::ReturnOp ret) {
      llvm::DenseSet<mlir::Value> seen;
      mlir::OpBuilder b(ret);
      for (mlir::OpOperand& operand : ret->getOpOperands()) {
        const mlir::Value v = operand.get();
        auto type = mlir::dyn_cast<mlir::MemRefType>(v.getType());
        if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity()) continue;
        if (v.getDefiningOp<mlir::memref::AllocOp>() && seen.insert(v).second) continue;
        const mlir::Location loc = ret.getLoc();
        auto alloc = mlir::memref::AllocOp::create(b, loc, type, b.getI64IntegerAttr(64));
        if (guard && mlir::isa<mlir::BlockArgument>(v)) {
          const mlir::Value from = mlir::memref::ExtractAlignedPointerAsIndexOp::create(b, loc, v);
          const mlir::Value to = mlir::memref::ExtractAlignedPointerAsIndexOp::create(b, loc, alloc);
          const mlir::Value differ = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne, from, to);
          auto guarded = mlir::scf::IfOp::create(b, loc, differ, /*withElseRegion=*/false);
          mlir::OpBuilder then = guarded.getThenBodyBuilder();
          mlir::memref::CopyOp::create(then, loc, v, alloc);
        } else {
          mlir::memref::CopyOp::create(b, loc, v, alloc);
        }
        operand.set(alloc);
        seen.insert(alloc);
      }
    });
  }
};

/// `ingot-drop-argument-results`: drops each memref result of a public function (the entry) that
/// is one of its own arguments and records the pairing in the function's attribute
/// `ingot.result_arguments` (kResultArgumentsAttr; one entry per original result: the argument's
/// index, or -1 for a result kept). Upstream's drop-equivalent-buffer-results does this for
/// private functions only (it rewrites their callers); the entry's caller is the runtime, which
/// reads the attribute: the result is the argument's buffer, written in place (a donated
/// parameter's update) or returned unchanged, and CpuKernel::run copies it only into an output
/// that is another buffer. Without it every such result became an out-param and a guarded copy
/// (ingot-distinct-results): 612 of them in the 12-block LM's train step, a third of its compile.
/// A function with callers in the module, without a body or with several returns is left as is;
/// running the pass again composes with the attribute already there.
class DropArgumentResultsPass : public mlir::PassWrapper<DropArgumentResultsPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DropArgumentResultsPass)
  llvm::StringRef getArgument() const final { return pass_names::kDropArgumentResults; }
  llvm::StringRef getDescription() const final {
    return "Drop the results of public functions that are their own arguments, recorded in "
           "ingot.result_arguments (ingot)";
  }
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    for (mlir::func::FuncOp fn : module.getOps<mlir::func::FuncOp>()) {
      if (fn.isPrivate() || fn.isExternal() || !mlir::SymbolTable::symbolKnownUseEmpty(fn, module)) continue;
      mlir::func::ReturnOp ret;
      int returns = 0;
      fn.walk([&](mlir::func::ReturnOp r) {
        ret = r;
        ++returns;
      });
      if (returns != 1) continue;
      drop(fn, ret);
    }
  }

 private:
  static void drop(mlir::func::FuncOp fn, mlir::func::ReturnOp ret) {
    const unsigned n = ret.getNumOperands();
    llvm::BitVector erase(n);
    std::vector<int64_t> current(n, -1);  // per current result: its argument, or -1
    for (unsigned i = 0; i < n; ++i) {
      auto arg = mlir::dyn_cast<mlir::BlockArgument>(ret.getOperand(i));
      if (!arg || arg.getOwner() != &fn.getBody().front() || !mlir::isa<mlir::MemRefType>(arg.getType())) continue;
      erase.set(i);
      current[i] = arg.getArgNumber();
    }
    if (erase.none()) return;
    // Compose with an earlier run: its kept results (-1) are the current results, in order.
    std::vector<int64_t> original = current;
    if (auto old = fn->getAttrOfType<mlir::DenseI64ArrayAttr>(kResultArgumentsAttr)) {
      original.clear();
      size_t next = 0;
      for (int64_t a : old.asArrayRef()) original.push_back(a >= 0 ? a : current[next++]);
    }
    if (mlir::failed(fn.eraseResults(erase))) return;
    ret->eraseOperands(erase);
    fn->setAttr(kResultArgumentsAttr, mlir::DenseI64ArrayAttr::get(fn.getContext(), original));
  }
};

/// `ingot-sink-donated-updates`: moves the op computing a donated parameter's new value (the source
/// of a `bufferization.materialize_in_destination` into a function argument) below the last
/// other reader of that argument, when nothing between needs its result. A train step computes
/// Adam's m' before the weight update that reads the old m; materialized into m's buffer, m' then
/// conflicts with that read and one-shot bufferization computes it into a temporary and copies it
/// over -- after the move it is written in place. Pure reordering of side-effect-free ops.
class SinkDonatedUpdatesPass
    : public mlir::PassWrapper<SinkDonatedUpdatesPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SinkDonatedUpdatesPass)
  llvm::StringRef getArgument() const final { return pass_names::kSinkDonatedUpdates; }
  llvm::StringRef getDescription() const final {
    return "Compute a donated argument's new value after the argument's other readers (ingot)";
  }
  void runOnOperation() override {
    llvm::SmallVector<mlir::bufferization::MaterializeInDestinationOp> anchors;
    getOperation().walk([&](mlir::bufferization::MaterializeInDestinationOp m) { anchors.push_back(m); });
    for (mlir::bufferization::MaterializeInDestinationOp m : anchors) sink(m);
  }

 private:
  static void sink(mlir::bufferization::MaterializeInDestinationOp m) {
    auto dest = mlir::dyn_cast<mlir::BlockArgument>(m.getDest());
    mlir::Operation* producer = m.getSource().getDefiningOp();
    if (!dest || producer == nullptr || producer->getBlock() != m->getBlock() || !mlir::isMemoryEffectFree(producer)) {
      return;
    }
    // The last reader of the argument (other than the anchor) after the producer.
    mlir::Operation* last = nullptr;
    for (mlir::Operation* user : dest.getUsers()) {
      mlir::Operation* in_block = m->getBlock()->findAncestorOpInBlock(*user);
      if (in_block == nullptr || in_block == m.getOperation() || in_block == producer) continue;
      if (producer->isBeforeInBlock(in_block) && (last == nullptr || last->isBeforeInBlock(in_block))) last = in_block;
    }
    if (last == nullptr || !last->isBeforeInBlock(m)) return;
    // Nothing up to `last` may use the producer's results.
    for (mlir::Value r : producer->getResults()) {
      for (mlir::Operation* user : r.getUsers()) {
        mlir::Operation* in_block = m->getBlock()->findAncestorOpInBlock(*user);
        if (in_block == nullptr || !last->isBeforeInBlock(in_block)) return;
      }
    }
    producer->moveAfter(last);
  }
};

}  // namespace

void register_tensor_passes() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::PassRegistration<FuseMultiUseElementwisePass>();
    mlir::PassRegistration<DistinctResultsPass>();
    mlir::PassRegistration<DropArgumentResultsPass>();
    mlir::PassRegistration<SinkDonatedUpdatesPass>();
  });
}

}  // namespace ingot::codegen
