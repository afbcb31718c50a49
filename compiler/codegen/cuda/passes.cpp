// ingot's own MLIR passes of the CUDA pipeline; declared in passes.h, documented in
// docs/compiler.md ("CUDA back end").
#include "codegen/cuda/passes.h"
#include "ingot/codegen/pass_names.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FormatVariadic.h"

namespace ingot::codegen {

namespace {

/// `ingot-copies-to-linalg`: every memref.copy becomes a linalg.copy, which
/// convert-linalg-to-parallel-loops turns into a loop nest (a kernel), so device buffers are never
/// copied by host code.
class CopiesToLinalgPass : public mlir::PassWrapper<CopiesToLinalgPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopiesToLinalgPass)
  llvm::StringRef getArgument() const final { return pass_names::kCopiesToLinalg; }
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
  return mlir::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp, mlir::memref::DeallocOp, mlir::memref::GetGlobalOp,
                   mlir::memref::CastOp, mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp,
                   mlir::memref::SubViewOp, mlir::memref::ReinterpretCastOp, mlir::arith::ConstantOp,
                   mlir::scf::ParallelOp, mlir::func::ReturnOp, mlir::func::CallOp, mlir::gpu::LaunchOp>(op);
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
        r.replaceUsesWithIf(map.lookup(mlir::Value(r)),
                            [&](mlir::OpOperand& use) { return par->isProperAncestor(use.getOwner()); });
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
    auto par =
        mlir::scf::ParallelOp::create(b, loc, mlir::ValueRange{zero}, mlir::ValueRange{one}, mlir::ValueRange{one});
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

/// The passes' `threads` option must be a CUDA block size, 1 .. 1024 (a pipeline given as text
/// can hold anything; a negative size built loops with a negative step). Emits the error on `fn`.
mlir::LogicalResult check_threads(mlir::func::FuncOp fn, int64_t threads, std::string_view pass) {
  if (threads >= 1 && threads <= 1024) return mlir::success();
  return fn.emitError() << llvm::StringRef(pass) << ": threads=" << threads
                        << " is not a CUDA block size (1 .. 1024 threads)";
}

/// `ingot-gpu-prepare-loops{threads=N}`: host compute is wrapped into loops (wrap_host_compute);
/// then every top-level scf.parallel nest is collapsed to one dimension (the row-major linear
/// index, so consecutive threads touch consecutive innermost elements: coalesced) and tiled by
/// the block size: min(threads, the trip count rounded up to a warp of 32). gpu-map-parallel-loops
/// then maps the tile loop to blockIdx.x and the intra-tile loop to threadIdx.x; the tail is
/// guarded by scf.if (tileParallelLoop's noMinMaxBounds form, so blocks have a constant size).
class GpuPrepareLoopsPass : public mlir::PassWrapper<GpuPrepareLoopsPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuPrepareLoopsPass)
  GpuPrepareLoopsPass() = default;
  GpuPrepareLoopsPass(const GpuPrepareLoopsPass& other) : PassWrapper(other) {}
  llvm::StringRef getArgument() const final { return pass_names::kGpuPrepareLoops; }
  llvm::StringRef getDescription() const final {
    return "Move host compute into loops, collapse each parallel loop nest to 1-D and tile it into "
           "blocks (ingot, CUDA)";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    // collapseParallelLoops builds affine.apply ops: without the affine dialect loaded (the pass
    // run alone, ingot-opt) MLIR crashed creating them.
    registry.insert<mlir::affine::AffineDialect, mlir::arith::ArithDialect, mlir::scf::SCFDialect>();
  }
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.isExternal()) return;
    if (mlir::failed(check_threads(func, threads, pass_names::kGpuPrepareLoops))) return signalPassFailure();
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
          func.emitOpError() << llvm::StringRef(pass_names::kGpuPrepareLoops)
                             << ": collapsing a loop nest did not give an scf.parallel";
          return signalPassFailure();
        }
      }
      const int64_t block = std::min<int64_t>(threads, std::max<int64_t>(32, (*n + 31) / 32 * 32));
      mlir::scf::tileParallelLoop(par, {block}, /*noMinMaxBounds=*/true);
    }
  }

  Option<int64_t> threads{*this, "threads", llvm::cl::desc("threads per block (<= 1024)"), llvm::cl::init(256)};
};

/// The gpu.all_reduce operation and the identity of a reduction body's combining op, if it is
/// one all_reduce supports (sum, product, min, max, and, or, xor).
struct Combiner {
  mlir::gpu::AllReduceOperation op;
  mlir::TypedAttr identity;
};

std::optional<Combiner> combiner_of(mlir::Operation* op, mlir::Type t) {
  using R = mlir::gpu::AllReduceOperation;
  mlir::Builder b(op->getContext());
  const auto f = [&](double v) { return mlir::TypedAttr(b.getFloatAttr(t, v)); };
  const auto i = [&](const llvm::APInt& v) { return mlir::TypedAttr(b.getIntegerAttr(t, v)); };
  const unsigned w = t.isIntOrIndex() ? t.getIntOrFloatBitWidth() : 0;
  const double inf = std::numeric_limits<double>::infinity();
  if (mlir::isa<mlir::arith::AddFOp>(op)) return Combiner{R::ADD, f(0.0)};
  if (mlir::isa<mlir::arith::MulFOp>(op)) return Combiner{R::MUL, f(1.0)};
  if (mlir::isa<mlir::arith::MaximumFOp>(op)) return Combiner{R::MAXIMUMF, f(-inf)};
  if (mlir::isa<mlir::arith::MinimumFOp>(op)) return Combiner{R::MINIMUMF, f(inf)};
  if (mlir::isa<mlir::arith::MaxNumFOp>(op)) return Combiner{R::MAXNUMF, f(-inf)};
  if (mlir::isa<mlir::arith::MinNumFOp>(op)) return Combiner{R::MINNUMF, f(inf)};
  if (w == 0) return std::nullopt;
  if (mlir::isa<mlir::arith::AddIOp>(op)) return Combiner{R::ADD, i(llvm::APInt(w, 0))};
  if (mlir::isa<mlir::arith::MulIOp>(op)) return Combiner{R::MUL, i(llvm::APInt(w, 1))};
  if (mlir::isa<mlir::arith::MaxSIOp>(op)) return Combiner{R::MAXSI, i(llvm::APInt::getSignedMinValue(w))};
  if (mlir::isa<mlir::arith::MinSIOp>(op)) return Combiner{R::MINSI, i(llvm::APInt::getSignedMaxValue(w))};
  if (mlir::isa<mlir::arith::OrIOp>(op)) return Combiner{R::OR, i(llvm::APInt(w, 0))};
  if (mlir::isa<mlir::arith::XOrIOp>(op)) return Combiner{R::XOR, i(llvm::APInt(w, 0))};
  if (mlir::isa<mlir::arith::AndIOp>(op)) return Combiner{R::AND, i(llvm::APInt::getAllOnes(w))};
  return std::nullopt;
}

/// A reduction linalg.generic the block-reduction rewrite handles: one output, buffer semantics,
/// static loop bounds, a body whose yield is `combine(out, e)` with the output read nowhere else.
struct ReductionMatch {
  mlir::Operation* combine;
  mlir::Value term;  ///< e: the per-element value
  Combiner combiner;
  int64_t parallel = 1, reduced = 1;  ///< products of the parallel / reduction loop extents
};

std::optional<ReductionMatch> match_reduction(mlir::linalg::GenericOp g) {
  if (!g.hasPureBufferSemantics() || g.getNumDpsInits() != 1 || g.getNumReductionLoops() == 0) return std::nullopt;
  mlir::Block& body = *g.getBody();
  auto yield = mlir::cast<mlir::linalg::YieldOp>(body.getTerminator());
  mlir::Value out = body.getArgument(body.getNumArguments() - 1);
  mlir::Operation* combine = yield->getOperand(0).getDefiningOp();
  if (combine == nullptr || combine->getBlock() != &body || combine->getNumOperands() != 2) return std::nullopt;
  const bool lhs = combine->getOperand(0) == out, rhs = combine->getOperand(1) == out;
  if (lhs == rhs || !out.hasOneUse()) return std::nullopt;
  const std::optional<Combiner> c = combiner_of(combine, out.getType());
  if (!c) return std::nullopt;
  ReductionMatch m{combine, combine->getOperand(lhs ? 1 : 0), *c};
  const llvm::SmallVector<int64_t> ranges = g.getStaticLoopRanges();
  const llvm::SmallVector<mlir::utils::IteratorType> kinds = g.getIteratorTypesArray();
  for (size_t d = 0; d < ranges.size(); ++d) {
    if (mlir::ShapedType::isDynamic(ranges[d])) return std::nullopt;
    (kinds[d] == mlir::utils::IteratorType::parallel ? m.parallel : m.reduced) *= ranges[d];
  }
  return m;
}

/// `lin` split into the dims `dims` (row-major over their extents `ranges`), written into `iv`.
void delinearize(mlir::OpBuilder& b, mlir::Location loc, mlir::Value lin, const std::vector<size_t>& dims,
                 const llvm::SmallVector<int64_t>& ranges, llvm::SmallVector<mlir::Value>& iv) {
  for (size_t j = dims.size(); j-- > 0;) {
    mlir::Value extent = mlir::arith::ConstantIndexOp::create(b, loc, ranges[dims[j]]);
    iv[dims[j]] = j == 0 ? lin : mlir::arith::RemUIOp::create(b, loc, lin, extent).getResult();
    if (j > 0) lin = mlir::arith::DivUIOp::create(b, loc, lin, extent);
  }
}

/// The generic as one block per output element: the threads stride over the (linearised)
/// reduction loops, each folding its share into a register, then gpu.all_reduce (warp shuffles
/// and shared memory) combines the block's partial results and thread 0 folds the result into the
/// output element (which holds the init value, as linalg's semantics say).
void rewrite_as_block_reduction(mlir::linalg::GenericOp g, const ReductionMatch& m, int64_t threads) {
  mlir::OpBuilder b(g);
  const mlir::Location loc = g.getLoc();
  const llvm::SmallVector<int64_t> ranges = g.getStaticLoopRanges();
  const llvm::SmallVector<mlir::utils::IteratorType> kinds = g.getIteratorTypesArray();
  std::vector<size_t> par_dims, red_dims;
  for (size_t d = 0; d < ranges.size(); ++d) {
    (kinds[d] == mlir::utils::IteratorType::parallel ? par_dims : red_dims).push_back(d);
  }
  auto c = [&](int64_t v) { return mlir::arith::ConstantIndexOp::create(b, loc, v).getResult(); };
  mlir::Value one = c(1);
  auto launch = mlir::gpu::LaunchOp::create(b, loc, c(m.parallel), one, one, c(threads), one, one);
  mlir::Block& kb = launch.getBody().front();
  b.setInsertionPointToStart(&kb);
  llvm::SmallVector<mlir::Value> iv(ranges.size());
  delinearize(b, loc, launch.getBlockIds().x, par_dims, ranges, iv);
  mlir::Value init = mlir::arith::ConstantOp::create(b, loc, m.combiner.identity);
  auto loop = mlir::scf::ForOp::create(b, loc, launch.getThreadIds().x, c(m.reduced), launch.getBlockSize().x,
                                       mlir::ValueRange{init});
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    delinearize(b, loc, loop.getInductionVar(), red_dims, ranges, iv);
    mlir::IRMapping map;
    mlir::Block& body = *g.getBody();
    for (mlir::OpOperand* in : g.getDpsInputOperands()) {
      const mlir::AffineMap amap = g.getMatchingIndexingMap(in);
      llvm::SmallVector<mlir::Value> idx;
      for (mlir::AffineExpr e : amap.getResults()) {
        idx.push_back(mlir::affine::AffineApplyOp::create(b, loc, mlir::AffineMap::get(amap.getNumDims(), 0, e), iv));
      }
      mlir::Value v = mlir::isa<mlir::MemRefType>(in->get().getType())
                          ? mlir::memref::LoadOp::create(b, loc, in->get(), idx).getResult()
                          : in->get();  // a scalar input
      map.map(body.getArgument(in->getOperandNumber()), v);
    }
    for (mlir::Operation& op : body.without_terminator()) {
      if (&op == m.combine) break;
      if (auto index = mlir::dyn_cast<mlir::linalg::IndexOp>(op)) {
        map.map(index.getResult(), iv[index.getDim()]);  // the loop index the body asks for
        continue;
      }
      b.clone(op, map);
    }
    mlir::Operation* folded = b.clone(*m.combine, map);
    folded->setOperands({loop.getRegionIterArgs()[0], map.lookupOrDefault(m.term)});
    mlir::scf::YieldOp::create(b, loc, folded->getResult(0));
  }
  b.setInsertionPointAfter(loop);
  for (size_t d : red_dims) iv[d] = c(0);  // the output's map reads no reduction dim
  mlir::Value partial = loop.getResult(0);
  auto reduced = mlir::gpu::AllReduceOp::create(b, loc, partial.getType(), partial,
                                                mlir::gpu::AllReduceOperationAttr::get(b.getContext(), m.combiner.op),
                                                b.getUnitAttr());
  mlir::Value first =
      mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, launch.getThreadIds().x, c(0));
  auto store = mlir::scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&store.getThenRegion().front());
    mlir::OpOperand* out = g.getDpsInitOperand(0);
    const mlir::AffineMap omap = g.getMatchingIndexingMap(out);
    llvm::SmallVector<mlir::Value> idx;
    for (mlir::AffineExpr e : omap.getResults()) {
      idx.push_back(mlir::affine::AffineApplyOp::create(b, loc, mlir::AffineMap::get(omap.getNumDims(), 0, e), iv));
    }
    mlir::Value old = mlir::memref::LoadOp::create(b, loc, out->get(), idx);
    mlir::Operation* fold = b.clone(*m.combine);
    fold->setOperands({old, reduced.getResult()});
    mlir::memref::StoreOp::create(b, loc, fold->getResult(0), out->get(), idx);
  }
  b.setInsertionPointToEnd(&kb);
  mlir::gpu::TerminatorOp::create(b, loc);
  g.erase();
}

/// `ingot-gpu-block-reductions{threads=N min-reduced=M}`: reduction linalg.generics (after
/// bufferization) whose reduction loops cover at least `min-reduced` elements become one block of
/// `threads` threads per output element with a tree reduction (rewrite_as_block_reduction), not
/// one thread per output element looping over the whole reduction. Other generics (several
/// outputs, e.g. argmax; bodies that are not `combine(out, e)`; short reductions) stay for the
/// loop path.
class GpuBlockReductionsPass
    : public mlir::PassWrapper<GpuBlockReductionsPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuBlockReductionsPass)
  GpuBlockReductionsPass() = default;
  GpuBlockReductionsPass(const GpuBlockReductionsPass& other) : PassWrapper(other) {}
  llvm::StringRef getArgument() const final { return pass_names::kGpuBlockReductions; }
  llvm::StringRef getDescription() const final {
    return "Rewrite reductions as one thread block per output element with gpu.all_reduce (ingot, CUDA)";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::affine::AffineDialect, mlir::arith::ArithDialect, mlir::gpu::GPUDialect,
                    mlir::memref::MemRefDialect, mlir::scf::SCFDialect>();
  }
  void runOnOperation() override {
    if (mlir::failed(check_threads(getOperation(), threads, pass_names::kGpuBlockReductions)))
      return signalPassFailure();
    std::vector<std::pair<mlir::linalg::GenericOp, ReductionMatch>> work;
    getOperation().walk([&](mlir::linalg::GenericOp g) {
      if (g->getParentOfType<mlir::gpu::LaunchOp>()) return;
      if (std::optional<ReductionMatch> m = match_reduction(g); m && m->reduced >= min_reduced)
        work.emplace_back(g, *m);
    });
    for (auto& [g, m] : work) rewrite_as_block_reduction(g, m, threads);
  }

  Option<int64_t> threads{*this, "threads", llvm::cl::desc("threads per block (<= 1024)"), llvm::cl::init(256)};
  Option<int64_t> min_reduced{*this, "min-reduced",
                              llvm::cl::desc("smallest reduction (elements per output) given a block"),
                              llvm::cl::init(64)};
};

// ---------------------------------------------------------------------------------------------
// ingot-cuda-gemm-epilogues

/// The op computing the value a linalg.generic's body yields (its only result), or null.
mlir::Operation* yielded_op(mlir::linalg::GenericOp g) {
  auto yield = mlir::cast<mlir::linalg::YieldOp>(g.getBody()->getTerminator());
  return yield.getNumOperands() == 1 ? yield.getOperand(0).getDefiningOp() : nullptr;
}

/// Whether `v` is block argument `index` of `g`'s body.
bool is_body_arg(mlir::Value v, mlir::linalg::GenericOp g, unsigned index) {
  auto arg = mlir::dyn_cast<mlir::BlockArgument>(v);
  return arg && arg.getOwner() == g.getBody() && arg.getArgNumber() == index;
}

/// An elementwise generic on tensors of rank `rank`: `inputs` inputs, one init, identity maps,
/// parallel loops.
mlir::linalg::GenericOp elementwise(mlir::Operation* op, unsigned inputs, unsigned rank) {
  auto g = mlir::dyn_cast_or_null<mlir::linalg::GenericOp>(op);
  if (!g || !g.hasPureTensorSemantics() || g.getNumDpsInputs() != inputs || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != rank || g.getNumParallelLoops() != rank) {
    return {};
  }
  for (mlir::AffineMap m : g.getIndexingMapsArray()) {
    if (!m.isIdentity()) return {};
  }
  return g;
}

/// The rank-1 tensor `v` broadcasts along the last dim of a tensor of rank `rank` (a generic
/// yielding its one input through the map (d0, ..., d_{rank-1}) -> (d_{rank-1})), or null.
mlir::Value row_broadcast_source(mlir::Value v, unsigned rank) {
  auto g = v.getDefiningOp<mlir::linalg::GenericOp>();
  if (!g || !g.hasPureTensorSemantics() || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != rank || g.getNumParallelLoops() != rank) {
    return {};
  }
  const llvm::SmallVector<mlir::AffineMap> maps = g.getIndexingMapsArray();
  mlir::MLIRContext* ctx = g.getContext();
  const mlir::AffineMap row = mlir::AffineMap::get(rank, 0, {mlir::getAffineDimExpr(rank - 1, ctx)}, ctx);
  auto yield = mlir::cast<mlir::linalg::YieldOp>(g.getBody()->getTerminator());
  if (maps[0] != row || !maps[1].isIdentity() || !is_body_arg(yield.getOperand(0), g, 0)) return {};
  return g.getDpsInputs()[0];
}

/// Whether `attr` is a splat of +0.0.
bool is_positive_zero_splat(mlir::Attribute attr) {
  auto dense = mlir::dyn_cast_or_null<mlir::DenseFPElementsAttr>(attr);
  return dense && dense.isSplat() && dense.getSplatValue<llvm::APFloat>().isPosZero();
}

/// Whether `v` is a tensor of +0.0: a splat constant, or a scalar +0.0 broadcast by a generic.
bool is_zero_tensor(mlir::Value v) {
  if (auto c = v.getDefiningOp<mlir::arith::ConstantOp>()) return is_positive_zero_splat(c.getValue());
  auto g = v.getDefiningOp<mlir::linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1) return false;
  auto yield = mlir::cast<mlir::linalg::YieldOp>(g.getBody()->getTerminator());
  if (!is_body_arg(yield.getOperand(0), g, 0)) return false;
  auto c = g.getDpsInputs()[0].getDefiningOp<mlir::arith::ConstantOp>();
  return c && is_positive_zero_splat(c.getValue());
}

/// ingot's relu on `x` (trace/ops.cpp: select(x <= 0, 0, x), so relu(NaN) = NaN): the select
/// generic when `x`'s only users are the compare and the select; null otherwise. The mask may
/// have other users (in training the backward pass reads it): fold_epilogue then computes it from
/// the relu's output.
mlir::linalg::GenericOp relu_of(mlir::Value x) {
  const auto rank = static_cast<unsigned>(mlir::cast<mlir::RankedTensorType>(x.getType()).getRank());
  mlir::linalg::GenericOp cmp, sel;
  for (mlir::Operation* user : x.getUsers()) {
    mlir::linalg::GenericOp g = elementwise(user, user->getNumOperands() == 3 ? 2 : 3, rank);
    if (!g) return {};
    (g.getNumDpsInputs() == 2 ? cmp : sel) = g;
  }
  if (!cmp || !sel || std::distance(x.getUsers().begin(), x.getUsers().end()) != 2) return {};
  auto ext = mlir::dyn_cast_or_null<mlir::arith::ExtUIOp>(yielded_op(cmp));
  auto f = ext ? ext.getIn().getDefiningOp<mlir::arith::CmpFOp>() : nullptr;
  if (!f || f.getPredicate() != mlir::arith::CmpFPredicate::OLE || !is_body_arg(f.getLhs(), cmp, 0) ||
      !is_body_arg(f.getRhs(), cmp, 1) || cmp.getDpsInputs()[0] != x || !is_zero_tensor(cmp.getDpsInputs()[1])) {
    return {};
  }
  auto s = mlir::dyn_cast_or_null<mlir::arith::SelectOp>(yielded_op(sel));
  const mlir::Value mask = cmp->getResult(0);
  if (!s || sel.getDpsInputs()[0] != mask || !is_zero_tensor(sel.getDpsInputs()[1]) || sel.getDpsInputs()[2] != x ||
      !is_body_arg(s.getTrueValue(), sel, 1) || !is_body_arg(s.getFalseValue(), sel, 2)) {
    return {};
  }
  auto t = s.getCondition().getDefiningOp<mlir::arith::TruncIOp>();
  if (!t || !is_body_arg(t.getIn(), sel, 0)) return {};
  return sel;
}

/// One foldable GEMM: the call, the tensor of its result and that tensor as the add reads it (the
/// same, or its expand_shape back to the Dense layer's (batch, ..., units)), the bias add, the
/// bias (rank 1) and the relu's select (null when only the bias folds).
struct EpilogueMatch {
  mlir::func::CallOp call;
  mlir::bufferization::ToTensorOp product;
  mlir::Value value;
  mlir::linalg::GenericOp add;
  mlir::Value bias;
  mlir::linalg::GenericOp relu;
};

/// The product as the bias add reads it: `t` itself, or its only user when that is an expand_shape
/// keeping the last dim (the columns) as its own group; null when it has other uses.
mlir::Value as_read(mlir::Value t) {
  if (!t.hasOneUse()) return {};
  auto expand = mlir::dyn_cast<mlir::tensor::ExpandShapeOp>(*t.getUsers().begin());
  if (!expand) return t;
  const llvm::SmallVector<mlir::ReassociationIndices> groups = expand.getReassociationIndices();
  const auto last = static_cast<int64_t>(expand.getResultType().getRank()) - 1;
  if (groups.back().size() != 1 || groups.back()[0] != last || !expand.getResult().hasOneUse()) return {};
  return expand.getResult();
}

/// `call` (an f32 `ingot_cuda_gemm_f32`) when its result's only use is an add of a bias broadcast
/// along the rows (the last dim), the bias defined before the call.
std::optional<EpilogueMatch> match_epilogue(mlir::func::CallOp call) {
  if (call.getCallee() != "ingot_cuda_gemm_f32" || call.getNumOperands() != 5) return std::nullopt;
  auto cast = call.getOperand(2).getDefiningOp<mlir::memref::CastOp>();
  auto alloc = cast ? cast.getSource().getDefiningOp<mlir::memref::AllocOp>() : nullptr;
  if (!alloc) return std::nullopt;
  // C is written by the call and read once, as a tensor: nothing else sees the product before the
  // bias is added.
  mlir::bufferization::ToTensorOp product;
  for (mlir::Operation* user : alloc->getUsers()) {
    if (auto t = mlir::dyn_cast<mlir::bufferization::ToTensorOp>(user)) {
      if (product) return std::nullopt;
      product = t;
    } else if (user != cast.getOperation() || !cast->hasOneUse()) {
      return std::nullopt;
    }
  }
  const mlir::Value value = product ? as_read(product->getResult(0)) : mlir::Value();
  if (!value) return std::nullopt;
  const auto rank = static_cast<unsigned>(mlir::cast<mlir::RankedTensorType>(value.getType()).getRank());
  mlir::linalg::GenericOp add = elementwise(*value.getUsers().begin(), 2, rank);
  auto f = mlir::dyn_cast_or_null<mlir::arith::AddFOp>(add ? yielded_op(add) : nullptr);
  if (!f || !((is_body_arg(f.getLhs(), add, 0) && is_body_arg(f.getRhs(), add, 1)) ||
              (is_body_arg(f.getLhs(), add, 1) && is_body_arg(f.getRhs(), add, 0)))) {
    return std::nullopt;
  }
  const unsigned other = add.getDpsInputs()[0] == value ? 1 : 0;
  const mlir::Value bias = row_broadcast_source(add.getDpsInputs()[other], rank);
  if (!bias) return std::nullopt;
  if (mlir::Operation* def = bias.getDefiningOp();
      def && (def->getBlock() != call->getBlock() || !def->isBeforeInBlock(call))) {
    return std::nullopt;  // the bias is computed after the product: it cannot be an operand of the call
  }
  // A whole buffer (a parameter, a constant, a computed tensor), never a slice: cuBLASLt wants
  // the bias 16-byte aligned, and buffers start 256-byte aligned (validate_cuda_program checks).
  if (mlir::Operation* def = bias.getDefiningOp();
      def && !mlir::isa<mlir::linalg::LinalgOp, mlir::arith::ConstantOp>(def)) {
    return std::nullopt;
  }
  return EpilogueMatch{call, product, value, add, bias, relu_of(add->getResult(0))};
}

/// Replaces the call by `ingot_cuda_gemm_bias[_relu]_f32(A, B, bias, C, trans_a, trans_b)` and the
/// add (and relu) by the product as the add read it.
void fold_epilogue(EpilogueMatch m, mlir::ModuleOp module, int64_t index) {
  mlir::OpBuilder b(m.call);
  const mlir::Location loc = m.call.getLoc();
  auto bias_type = mlir::cast<mlir::RankedTensorType>(m.bias.getType());
  auto buffer = mlir::bufferization::ToBufferOp::create(
      b, loc, mlir::MemRefType::get(bias_type.getShape(), bias_type.getElementType()), m.bias, /*read_only=*/true);
  buffer->setAttr("ingot.read",
                  b.getStringAttr(llvm::formatv("bias{0}", index).str()));  // distinct reads stay distinct
  auto dynamic = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, bias_type.getElementType());
  mlir::Value bias = mlir::memref::CastOp::create(b, loc, dynamic, buffer.getResult());
  const std::string name = m.relu ? "ingot_cuda_gemm_bias_relu_f32" : "ingot_cuda_gemm_bias_f32";
  llvm::SmallVector<mlir::Value> operands = {m.call.getOperand(0), m.call.getOperand(1), bias,
                                             m.call.getOperand(2), m.call.getOperand(3), m.call.getOperand(4)};
  if (!module.lookupSymbol(name)) {
    mlir::OpBuilder top(module.getBodyRegion());
    auto type = b.getFunctionType(mlir::ValueRange(operands).getTypes(), {});
    auto decl = mlir::func::FuncOp::create(top, loc, name, type);
    decl.setPrivate();
    decl->setAttr("llvm.emit_c_interface", top.getUnitAttr());
  }
  mlir::func::CallOp::create(b, loc, name, mlir::TypeRange{}, operands);
  m.call.erase();
  const mlir::Value product = m.value;
  if (m.relu) {
    mlir::Operation* cmp = m.relu.getDpsInputs()[0].getDefiningOp();
    m.relu->getResult(0).replaceAllUsesWith(product);
    m.relu.erase();
    if (cmp->getResult(0).use_empty())
      cmp->erase();
    else
      cmp->setOperand(0, product);  // x <= 0 iff relu(x) <= 0 (the backward pass's mask)
  }
  m.add->getResult(0).replaceAllUsesWith(product);
  m.add.erase();
}

/// `ingot-cuda-gemm-epilogues` (module pass, tensors, before fusion): an f32 cuBLAS GEMM whose
/// product (or its expand_shape to a Dense layer's (batch, ..., units)) only feeds
/// `add(product, broadcast_in_dim(bias along the last dim))` becomes
/// `ingot_cuda_gemm_bias_f32(A, B, bias, C, trans_a, trans_b)` (cuBLASLt's BIAS epilogue), and
/// when the sum only feeds ingot's relu (select(x <= 0, 0, x)) `ingot_cuda_gemm_bias_relu_f32`
/// (RELU_BIAS; a NaN pre-activation then gives 0, not NaN). A mask read elsewhere (the backward
/// pass's) compares the relu's output instead: relu(x) <= 0 iff x <= 0 for every non-NaN x. f64
/// products are left alone (docs/compiler.md, "GEMM epilogues").
/// The bias broadcasts and zero tensors left unused are removed by the next canonicalize.
class GemmEpiloguesPass : public mlir::PassWrapper<GemmEpiloguesPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GemmEpiloguesPass)
  llvm::StringRef getArgument() const final { return pass_names::kCudaGemmEpilogues; }
  llvm::StringRef getDescription() const final {
    return "fold a bias add (and relu) into the cuBLAS GEMM call that produces its operand";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::bufferization::BufferizationDialect, mlir::memref::MemRefDialect, mlir::func::FuncDialect>();
  }

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    std::vector<EpilogueMatch> matches;
    module.walk([&](mlir::func::CallOp call) {
      if (std::optional<EpilogueMatch> m = match_epilogue(call)) matches.push_back(*m);
    });
    int64_t index = 0;
    for (EpilogueMatch& m : matches) fold_epilogue(m, module, index++);
  }
};

}  // namespace

void register_ingot_cuda_passes() {
  mlir::PassRegistration<GemmEpiloguesPass>();
  mlir::PassRegistration<GpuBlockReductionsPass>();
  mlir::PassRegistration<CopiesToLinalgPass>();
  mlir::PassRegistration<GpuPrepareLoopsPass>();
}

}  // namespace ingot::codegen
