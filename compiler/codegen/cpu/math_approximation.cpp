// ingot-approximate-math: f32 exp, expm1, erf, tanh, log and log1p rewritten as MLIR's
// polynomial approximations (plain arith ops) instead of calls to libm, so that LLVM's loop
// vectoriser vectorises the loops around them (docs/compiler.md, "The pipeline", "Math functions"). Declared in
// passes.h.
#include "codegen/cpu/passes.h"
#include "ingot/codegen/pass_names.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace ingot::codegen {

bool approximated_math_op(llvm::StringRef name) {
  name.consume_front("math.");
  return name == "exp" || name == "expm1" || name == "erf" || name == "tanh" || name == "log" || name == "log1p";
}

namespace {

/// erf(x) as copysign(erf(x), x): MLIR's approximation returns +0 for -0 (erf is odd, so this is
/// exact for every other input, NaN included).
void keep_erf_sign(mlir::func::FuncOp fn) {
  mlir::OpBuilder b(fn.getContext());
  fn.walk([&](mlir::math::ErfOp op) {
    if (!op.getType().isF32()) return;
    b.setInsertionPointAfter(op);
    auto signed_erf = mlir::math::CopySignOp::create(b, op.getLoc(), op.getResult(), op.getOperand());
    op.getResult().replaceAllUsesExcept(signed_erf, signed_erf);
  });
}

/// log(x) of a subnormal x as log(x * 2^24) - 24 ln 2: MLIR's approximation reads the exponent
/// field and is wrong by up to ~16 below FLT_MIN (a probability that underflowed, say).
void scale_log_subnormals(mlir::func::FuncOp fn) {
  mlir::OpBuilder b(fn.getContext());
  fn.walk([&](mlir::math::LogOp op) {
    if (!op.getType().isF32()) return;
    const mlir::Location loc = op.getLoc();
    const mlir::Value x = op.getOperand();
    b.setInsertionPoint(op);
    auto f32 = [&](double v) {
      return mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(static_cast<float>(v)));
    };
    auto above_zero = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OGT, x, f32(0.0));
    auto below_min = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OLT, x, f32(0x1p-126));
    auto subnormal = mlir::arith::AndIOp::create(b, loc, above_zero, below_min);
    auto scaled = mlir::arith::MulFOp::create(b, loc, x, f32(0x1p24));
    op->setOperand(0, mlir::arith::SelectOp::create(b, loc, subnormal, scaled, x));
    b.setInsertionPointAfter(op);
    auto shifted = mlir::arith::SubFOp::create(b, loc, op.getResult(), f32(24.0 * 0.69314718055994530942));
    auto result = mlir::arith::SelectOp::create(b, loc, subnormal, shifted, op.getResult());
    op.getResult().replaceAllUsesExcept(result, llvm::SmallPtrSet<mlir::Operation*, 2>{shifted, result});
  });
}

/// `ingot-approximate-math`. Without it `math.exp` becomes `llvm.exp` and `math.erf` a libm
/// `erff` call: LLVM cannot vectorise a loop that calls a scalar function, so a GELU's or a
/// softmax's loop ran one element at a time through libm (5% of the 12-block LM's step in
/// `perf`, bench/results/2026-12-02-lm-large-epyc-2c/NOTES.md). MLIR's approximations
/// (mlir/lib/Dialect/Math/Transforms/PolynomialApproximation.cpp: Cephes-style range reduction and
/// minimax polynomials, as XLA:CPU also does for these functions) are arith and math.fma ops that
/// vectorise; their error against libm is measured by tests/compiler/codegen/math_approximation_test.cpp
/// (at most 5 ulp; inf, nan, signed zeros and the overflow and underflow ranges as libm's, with
/// the two fixes above). Only f32 ops match (the patterns' own condition); f64 keeps libm, and
/// f16/bf16 are f32 by then (emulate-floats). The fixes apply to scalar f32 ops, the only kind
/// ingot's loops hold.
class ApproximateMathPass : public mlir::PassWrapper<ApproximateMathPass, mlir::OperationPass<mlir::func::FuncOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApproximateMathPass)
  llvm::StringRef getArgument() const final { return pass_names::kApproximateMath; }
  llvm::StringRef getDescription() const final {
    return "Rewrite f32 exp, expm1, erf, tanh, log, log1p as vectorisable polynomial approximations (ingot)";
  }
  void getDependentDialects(mlir::DialectRegistry& registry) const override {
    registry.insert<mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::vector::VectorDialect>();
  }
  void runOnOperation() override {
    keep_erf_sign(getOperation());
    scale_log_subnormals(getOperation());
    mlir::RewritePatternSet patterns(&getContext());
    mlir::populateMathPolynomialApproximationPatterns(patterns, approximated_math_op);
    if (mlir::failed(mlir::applyPatternsGreedily(getOperation(), std::move(patterns)))) signalPassFailure();
  }
};

}  // namespace

void register_approximate_math_pass() { mlir::PassRegistration<ApproximateMathPass>(); }

}  // namespace ingot::codegen
