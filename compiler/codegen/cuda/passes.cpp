// ingot's own MLIR passes of the CUDA pipeline; declared in passes.h, documented in
// docs/compiler.md ("CUDA back end").
#include "codegen/cuda/passes.h"

#include <algorithm>
#include <numeric>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

namespace ingot::codegen {

namespace {

/// `ingot-copies-to-linalg`: every memref.copy becomes a linalg.copy, which
/// convert-linalg-to-parallel-loops turns into a loop nest (a kernel), so device buffers are never
/// copied by host code.
class CopiesToLinalgPass
    : public mlir::PassWrapper<CopiesToLinalgPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopiesToLinalgPass)
  llvm::StringRef getArgument() const final { return "ingot-copies-to-linalg"; }
  llvm::StringRef getDescription() const final { return "Rewrite memref.copy as linalg.copy (ingot, CUDA)"; }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::linalg::LinalgDialect>();
  }
  void runOnOperation() override {
    getOperation().walk([](mlir::memref::CopyOp copy) {
      mlir::OpBuilder b(copy);
      mlir::linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(), copy.getTarget());
      copy.erase();
    });
  }
};

/// Host-side operations that stay on the host: buffer allocation, globals, views, constants,
/// library calls (cuBLAS GEMMs, which the host plan turns into thunks) and loops that already go
/// to the GPU. Anything else at the top of a function computes on device
/// memory and is moved into a kernel.
bool stays_on_host(mlir::Operation& op) {
  return mlir::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp, mlir::memref::DeallocOp,
                   mlir::memref::GetGlobalOp, mlir::memref::CastOp, mlir::memref::ExpandShapeOp,
                   mlir::memref::CollapseShapeOp, mlir::memref::SubViewOp, mlir::memref::ReinterpretCastOp,
                   mlir::arith::ConstantOp, mlir::scf::ParallelOp, mlir::func::ReturnOp, mlir::func::CallOp>(op);
}

/// Host scalar code a loop nest reads (e.g. the random-number state loaded from its buffer before
/// the bits are generated) would stay on the host, computing on device memory. Each top-level
/// scf.parallel gets its own copy of the pure or loading operations it uses that are defined at
/// the top level (cloned, operands first, at the start of its body: every thread recomputes the
/// scalars); the originals are erased once unused.
void sink_host_values_into_loops(mlir::func::FuncOp func) {
  mlir::Block& body = func.getBody().front();
  const auto sinkable = [&](mlir::Operation* op) {
    return op != nullptr && op->getBlock() == &body && !stays_on_host(*op) &&
           (mlir::isPure(op) || mlir::isa<mlir::memref::LoadOp>(op));
  };
  for (mlir::Operation& top : body) {
    auto par = mlir::dyn_cast<mlir::scf::ParallelOp>(top);
    if (!par) continue;
    // The top-level operations the loop depends on, transitively through sinkable operands.
    llvm::SetVector<mlir::Operation*> needed;
    llvm::SetVector<mlir::Value> above;
    mlir::getUsedValuesDefinedAbove(par.getRegion(), above);
    std::vector<mlir::Value> work(above.begin(), above.end());
    while (!work.empty()) {
      mlir::Operation* def = work.back().getDefiningOp();
      work.pop_back();
      if (!sinkable(def) || !needed.insert(def)) continue;
      for (mlir::Value v : def->getOperands()) work.push_back(v);
    }
    if (needed.empty()) continue;
    std::vector<mlir::Operation*> order(needed.begin(), needed.end());
    std::sort(order.begin(), order.end(), [](mlir::Operation* a, mlir::Operation* b) { return a->isBeforeInBlock(b); });
    mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(par.getBody());
    mlir::IRMapping map;
    for (mlir::Operation* op : order) b.clone(*op, map);
    for (mlir::Operation* op : order) {
      for (mlir::OpResult r : op->getResults()) {
        r.replaceUsesWithIf(map.lookup(mlir::Value(r)), [&](mlir::OpOperand& use) {
          return par->isProperAncestor(use.getOwner());
        });
      }
    }
  }
  // Erase the originals nothing uses any more (users first).
  for (bool changed = true; changed;) {
    changed = false;
    for (mlir::Operation& op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (sinkable(&op) && op.use_empty()) {
        op.erase();
        changed = true;
      }
    }
  }
}

/// Moves each run of consecutive host compute operations (serial loops of reductions without
/// parallel dimensions, the scalar code of 0-D linalg ops) into a one-iteration scf.parallel, so
/// it becomes a kernel. Fails (emitting an error) when a moved value is used after the run.
mlir::LogicalResult wrap_host_compute(mlir::func::FuncOp func) {
  mlir::Block& body = func.getBody().front();
  std::vector<std::vector<mlir::Operation*>> runs(1);
  for (mlir::Operation& op : body) {
    if (stays_on_host(op)) {
      if (!runs.back().empty()) runs.emplace_back();
    } else {
      runs.back().push_back(&op);
    }
  }
  for (const std::vector<mlir::Operation*>& run : runs) {
    if (run.empty()) continue;
    for (mlir::Operation* op : run) {
      for (mlir::Operation* user : op->getUsers()) {
        mlir::Operation* top = body.findAncestorOpInBlock(*user);
        if (std::find(run.begin(), run.end(), top) == run.end()) {
          return op->emitOpError("computes on the host a value used outside its kernel (ingot-gpu-prepare-loops)");
        }
      }
    }
    mlir::OpBuilder b(run.front());
    const mlir::Location loc = run.front()->getLoc();
    mlir::Value zero = mlir::arith::ConstantIndexOp::create(b, loc, 0);
    mlir::Value one = mlir::arith::ConstantIndexOp::create(b, loc, 1);
    auto par = mlir::scf::ParallelOp::create(b, loc, mlir::ValueRange{zero}, mlir::ValueRange{one},
                                             mlir::ValueRange{one});
    for (mlir::Operation* op : run) op->moveBefore(par.getBody()->getTerminator());
  }
  return mlir::success();
}

/// Static trip count of a loop nest (the product over its dimensions); nullopt if not constant.
std::optional<int64_t> trip_count(mlir::scf::ParallelOp par) {
  int64_t n = 1;
  for (auto [lb, ub, step] : llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    auto l = mlir::getConstantIntValue(lb), u = mlir::getConstantIntValue(ub), s = mlir::getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0) return std::nullopt;
    n *= std::max<int64_t>(0, (*u - *l + *s - 1) / *s);
  }
  return n;
}

/// `ingot-gpu-prepare-loops{threads=N}`: host compute is wrapped into loops (wrap_host_compute);
/// then every top-level scf.parallel nest is collapsed to one dimension (the row-major linear
/// index, so consecutive threads touch consecutive innermost elements: coalesced) and tiled by
/// the block size: min(threads, the trip count rounded up to a warp of 32). gpu-map-parallel-loops
/// then maps the tile loop to blockIdx.x and the intra-tile loop to threadIdx.x; the tail is
/// guarded by scf.if (tileParallelLoop's noMinMaxBounds form, so blocks have a constant size).
class GpuPrepareLoopsPass
    : public mlir::PassWrapper<GpuPrepareLoopsPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuPrepareLoopsPass)
  GpuPrepareLoopsPass() = default;
  GpuPrepareLoopsPass(const GpuPrepareLoopsPass& other) : PassWrapper(other) {}
  llvm::StringRef getArgument() const final { return "ingot-gpu-prepare-loops"; }
  llvm::StringRef getDescription() const final {
    return "Move host compute into loops, collapse each parallel loop nest to 1-D and tile it into "
           "blocks (ingot, CUDA)";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::arith::ArithDialect, mlir::scf::SCFDialect>();
  }
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.isExternal()) return;
    sink_host_values_into_loops(func);
    if (mlir::failed(wrap_host_compute(func))) return signalPassFailure();
    std::vector<mlir::scf::ParallelOp> nests;
    for (mlir::Operation& op : func.getBody().front()) {
      if (auto par = mlir::dyn_cast<mlir::scf::ParallelOp>(op)) nests.push_back(par);
    }
    mlir::IRRewriter rewriter(&getContext());
    for (mlir::scf::ParallelOp par : nests) {
      const std::optional<int64_t> n = trip_count(par);
      if (!n) {
        par.emitOpError("has a dynamic trip count; the CUDA back end needs static shapes");
        return signalPassFailure();
      }
      if (par.getNumLoops() > 1) {
        std::vector<unsigned> all(par.getNumLoops());
        std::iota(all.begin(), all.end(), 0u);
        // The collapsed loop (and its bound computations) is created where the nest was.
        mlir::Operation* before = par->getPrevNode();
        mlir::Block* block = par->getBlock();
        rewriter.setInsertionPoint(par);
        mlir::collapseParallelLoops(rewriter, par, {all});
        mlir::Operation* it = before != nullptr ? before->getNextNode() : &block->front();
        while (it != nullptr && !mlir::isa<mlir::scf::ParallelOp>(it)) it = it->getNextNode();
        par = it != nullptr ? mlir::cast<mlir::scf::ParallelOp>(it) : mlir::scf::ParallelOp();
        if (!par) {
          func.emitOpError("ingot-gpu-prepare-loops: collapsing a loop nest did not give an scf.parallel");
          return signalPassFailure();
        }
      }
      const int64_t block = std::min<int64_t>(threads, std::max<int64_t>(32, (*n + 31) / 32 * 32));
      mlir::scf::tileParallelLoop(par, {block}, /*noMinMaxBounds=*/true);
    }
  }

  Option<int64_t> threads{*this, "threads", llvm::cl::desc("threads per block (<= 1024)"), llvm::cl::init(256)};
};

}  // namespace

void register_ingot_cuda_passes() {
  mlir::PassRegistration<CopiesToLinalgPass>();
  mlir::PassRegistration<GpuPrepareLoopsPass>();
}

}  // namespace ingot::codegen
