// ingot's MLIR passes of the CPU pipeline only (ingot-parallelize-outer-loops here; the others in
// their own files); declared in passes.h, documented in docs/compiler.md. The passes both back ends
// share are in codegen/tensor_passes.cpp.
#include "codegen/cpu/passes.h"
#include "ingot/codegen/pass_names.h"
#include "codegen/tensor_passes.h"

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
// ---------------------------------------------------------------------------------------------
// ingot-parallelize-outer-loops

/// Trip count assumed for a loop whose bounds are not constants (large: worth parallelising).
constexpr int64_t kUnknownTripCount = int64_t{1} << 20;

int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : a * b;
}

int64_t saturating_add(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

/// Iterations of one loop dimension: ceil((ub - lb) / step) when all three are constants.
int64_t trip_count(mlir::Value lb, mlir::Value ub, mlir::Value step) {
  auto l = mlir::getConstantIntValue(lb), u = mlir::getConstantIntValue(ub), s = mlir::getConstantIntValue(step);
  if (!l || !u || !s || *s <= 0) return kUnknownTripCount;
  return *u <= *l ? 0 : (*u - *l + *s - 1) / *s;
}

std::vector<int64_t> trip_counts(mlir::scf::ParallelOp op) {
  std::vector<int64_t> trips;
  for (unsigned i = 0; i < op.getNumLoops(); ++i) {
    trips.push_back(trip_count(op.getLowerBound()[i], op.getUpperBound()[i], op.getStep()[i]));
  }
  return trips;
}

/// Estimated work of a region: the number of operations it executes, counting every iteration of
/// nested scf.for / scf.parallel loops (constant trip counts; kUnknownTripCount otherwise).
int64_t region_work(mlir::Region& region) {
  int64_t work = 0;
  for (mlir::Block& block : region) {
    for (mlir::Operation& op : block) {
      int64_t inner = 0;
      for (mlir::Region& r : op.getRegions()) inner = saturating_add(inner, region_work(r));
      int64_t trips = 1;
      if (auto f = mlir::dyn_cast<mlir::scf::ForOp>(op)) {
        trips = trip_count(f.getLowerBound(), f.getUpperBound(), f.getStep());
      } else if (auto p = mlir::dyn_cast<mlir::scf::ParallelOp>(op)) {
        for (int64_t t : trip_counts(p)) trips = saturating_mul(trips, t);
      }
      work = saturating_add(work, saturating_add(1, saturating_mul(trips, inner)));
    }
  }
  return work;
}

/// Rebuilds `op` (an scf.parallel without reductions) as an scf.parallel over its first
/// `num_parallel` dims whose body is an scf.for nest over the remaining dims (num_parallel == 0:
/// only the scf.for nest), then erases `op`. Iteration order within a thread is unchanged.
void rebuild_parallel(mlir::scf::ParallelOp op, unsigned num_parallel) {
  mlir::OpBuilder b(op);
  const mlir::Location loc = op.getLoc();
  auto lbs = op.getLowerBound(), ubs = op.getUpperBound(), steps = op.getStep();
  const mlir::SmallVector<mlir::Value> ivs = op.getInductionVars();
  auto inner = [&](mlir::OpBuilder& ob, mlir::Location l, mlir::ValueRange outer_ivs) {
    mlir::scf::buildLoopNest(ob, l, lbs.drop_front(num_parallel), ubs.drop_front(num_parallel),
                             steps.drop_front(num_parallel),
                             [&](mlir::OpBuilder& ib, mlir::Location, mlir::ValueRange inner_ivs) {
                               mlir::IRMapping map;
                               for (unsigned i = 0; i < outer_ivs.size(); ++i) map.map(ivs[i], outer_ivs[i]);
                               for (unsigned i = 0; i < inner_ivs.size(); ++i) {
                                 map.map(ivs[num_parallel + i], inner_ivs[i]);
                               }
                               for (mlir::Operation& body_op : op.getBody()->without_terminator()) {
                                 ib.clone(body_op, map);
                               }
                             });
  };
  if (num_parallel == 0) {
    inner(b, loc, {});
  } else {
    mlir::scf::ParallelOp::create(b, loc, lbs.take_front(num_parallel), ubs.take_front(num_parallel),
                                  steps.take_front(num_parallel), inner);
  }
  op.erase();
}

/// `ingot-parallelize-outer-loops`: decides which loops run on several cores, after
/// convert-linalg-to-parallel-loops and before convert-scf-to-openmp. For each outermost
/// scf.parallel (not nested in another): when its estimated work (region_work) is below
/// `min-work` operations or `threads` is 1, it becomes a serial scf.for nest (a fork/join would
/// cost more than it saves); otherwise it keeps as few leading dims parallel as give every
/// thread at least 4 chunks (so the contiguous innermost dim stays a plain loop that LLVM
/// vectorises) and the rest become scf.for loops inside. Nested scf.parallel loops become scf.for
/// (one level of parallelism, as OpenMP runs nested regions serially anyway). Loops carrying
/// reductions (init values) are left alone. Sums keep their order: reduction dims are scf.for
/// loops inside one thread, so results are bitwise those of the serial loops.
class ParallelizeOuterLoopsPass
    : public mlir::PassWrapper<ParallelizeOuterLoopsPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ParallelizeOuterLoopsPass)
  ParallelizeOuterLoopsPass() = default;
  ParallelizeOuterLoopsPass(const ParallelizeOuterLoopsPass& other) : PassWrapper(other) {}
  llvm::StringRef getArgument() const final { return pass_names::kParallelizeOuterLoops; }
  llvm::StringRef getDescription() const final {
    return "Keep outermost scf.parallel loops with enough work parallel (leading dims only), "
           "serialise the rest to scf.for (ingot)";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::scf::SCFDialect, mlir::arith::ArithDialect>();
  }
  void runOnOperation() override {
    std::vector<mlir::scf::ParallelOp> loops;
    getOperation().walk([&](mlir::scf::ParallelOp op) { loops.push_back(op); });  // inner first
    for (mlir::scf::ParallelOp op : loops) {
      if (op.getNumReductions() != 0) continue;
      if (op->getParentOfType<mlir::scf::ParallelOp>()) {
        rebuild_parallel(op, 0);
        continue;
      }
      rebuild_parallel(op, parallel_dims(op));
    }
  }

  Option<int64_t> min_work{*this, "min-work",
                           llvm::cl::desc("Operations (estimated) below which a loop nest stays serial"),
                           llvm::cl::init(1 << 15)};
  Option<int64_t> threads{*this, "threads", llvm::cl::desc("Threads the loops will run on (1: all serial)"),
                          llvm::cl::init(2)};

 private:
  /// How many leading dims of `op` stay parallel (0: none).
  unsigned parallel_dims(mlir::scf::ParallelOp op) {
    if (threads <= 1) return 0;
    mlir::scf::ParallelOp p = op;
    int64_t body = region_work(p.getRegion());
    const std::vector<int64_t> trips = trip_counts(op);
    int64_t total = body;
    for (int64_t t : trips) total = saturating_mul(total, t);
    if (total < min_work) return 0;
    int64_t chunks = 1;
    unsigned dims = 0;
    while (dims < trips.size() && chunks < 4 * threads) chunks = saturating_mul(chunks, trips[dims++]);
    return chunks >= 2 ? dims : 0;
  }
};

}  // namespace

void register_cpu_passes() {
  register_tensor_passes();
  mlir::PassRegistration<ParallelizeOuterLoopsPass>();
  register_outline_kernels_pass();
  register_noalias_scopes_pass();
  register_early_dealloc_pass();
  register_approximate_math_pass();
}

}  // namespace ingot::codegen
