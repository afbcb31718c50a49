// Tests of the elementwise family's VJP rules (compiler/ops/elementwise.cpp):
// - finite-difference checks of every differentiable op at random points of several shapes
//   (scalars, size-1 dims, empty dims, and size-1 operands broadcast by the tracer), with the
//   points kept away from kinks and singularities;
// - exact values at the kinks and singularities (the conventions table of docs/autodiff.md);
// - second derivatives (grad of grad) against closed forms and against finite differences of
//   the gradient, and a Hessian-vector product;
// - the rules in f32, f16 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/autodiff/vjp_rules.h"
#include "ingot/ir/op_registry.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::check_grads;
using testing::expect_values;
using testing::GradCheckOptions;
using testing::grads_at;

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
using Accept = std::function<bool(double)>;
using AcceptPair = std::function<bool(double, double)>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Array f64(const std::vector<double>& v, const Shape& shape) { return Array::from_vector<double>(v, shape); }
Array f64v(const std::vector<double>& v) { return f64(v, {static_cast<int64_t>(v.size())}); }
Array f64s(double v) { return Array::scalar(v, DType::kF64); }
Array bools(const std::vector<bool>& v, const Shape& shape) { return Array::from_vector<bool>(v, shape); }

TraceFn unary_fn(Unary op) {
  return [op](const std::vector<Tensor>& a) { return std::vector<Tensor>{op(a[0])}; };
}
TraceFn binary_fn(Binary op) {
  return [op](const std::vector<Tensor>& a) { return std::vector<Tensor>{op(a[0], a[1])}; };
}
/// The scalar loss sum(op(x)).
TraceFn summed(Unary op) {
  return [op](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(op(a[0]))}; };
}
/// The scalar loss sum(op(a, b)).
TraceFn summed2(Binary op) {
  return [op](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(op(a[0], a[1]))}; };
}

bool any_value(double) { return true; }
/// Away from 0 (the kink of abs and the jump of sign).
bool off_zero(double x) { return std::abs(x) > 0.1; }
/// Away from the integers and half-integers (the jumps of floor, ceil and round).
bool off_halves(double x) { return std::abs(2 * x - std::round(2 * x)) > 0.1; }

/// f64 array of `shape` with entries drawn uniformly from [lo, hi), each redrawn until `ok`.
Array draw(const Shape& shape, uint64_t seed, double lo, double hi, const Accept& ok) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  for (double& x : v) {
    do {
      x = u(rng);
    } while (!ok(x));
  }
  return f64(v, shape);
}

/// Flat index into an operand of shape `in` of the element that NumPy broadcasting pairs with
/// element `flat` of the broadcast result of shape `out` (trailing dimensions aligned).
int64_t broadcast_source(const Shape& out, int64_t flat, const Shape& in) {
  int64_t index = 0, stride = 1;
  for (size_t i = 0; i < out.size(); ++i) {  // i counts from the last dimension
    const int64_t size = out[out.size() - 1 - i];
    const int64_t coord = flat % size;
    flat /= size;
    if (i >= in.size()) continue;
    const int64_t in_size = in[in.size() - 1 - i];
    index += (in_size == 1 ? 0 : coord) * stride;
    stride *= in_size;
  }
  return index;
}

/// NumPy broadcast of two shapes that are known to be compatible.
Shape broadcast_pair(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

/// Whether `ok` holds for every pair of elements of `a` and `b` that broadcasting brings together.
bool pairs_ok(const Array& a, const Array& b, const AcceptPair& ok) {
  const Shape out = broadcast_pair(a.shape(), b.shape());
  for (int64_t i = 0; i < num_elements(out); ++i) {
    const double x = a.element_as_double(broadcast_source(out, i, a.shape()));
    const double y = b.element_as_double(broadcast_source(out, i, b.shape()));
    if (!ok(x, y)) return false;
  }
  return true;
}

// ---- registry --------------------------------------------------------------------------------

TEST(ElementwiseVjp, EveryOpWithFloatResultsAndOperandsHasARule) {
  const VjpRules& r = VjpRules::builtin();
  for (const char* op : {"negate",
                         "abs",
                         "sign",
                         "exponential",
                         "log",
                         "log_plus_one",
                         "exponential_minus_one",
                         "tanh",
                         "logistic",
                         "sqrt",
                         "rsqrt",
                         "sine",
                         "cosine",
                         "floor",
                         "ceil",
                         "round_nearest_even",
                         "erf",
                         "add",
                         "subtract",
                         "multiply",
                         "divide",
                         "remainder",
                         "power",
                         "maximum",
                         "minimum",
                         "atan2",
                         "convert",
                         "select",
                         "clamp"}) {
    EXPECT_NE(r.find(op), nullptr) << op << " has no VJP rule";
  }
  // Bool results (or no operands) never carry a cotangent, so these need no rule.
  for (const char* op : {"compare", "not", "and", "or", "xor", "is_finite", "iota", "constant"}) {
    EXPECT_EQ(r.find(op), nullptr) << op << " has an unexpected VJP rule";
  }
}

TEST(VjpRules, EveryRuleBelongsToARegisteredOpAndAddRefusesDuplicates) {
  for (const std::string& op : VjpRules::builtin().ops()) {
    EXPECT_NE(ir::OpRegistry::builtin().find(op), nullptr) << "VJP rule for unknown op " << op;
  }
  VjpRules rules;
  rules.add("negate", [](const VjpArgs&) { return std::vector<std::optional<Tensor>>{}; });
  EXPECT_THROW(rules.add("negate", [](const VjpArgs&) { return std::vector<std::optional<Tensor>>{}; }), Error);
  EXPECT_THROW(rules.add("abs", VjpRule{}), Error);
}

// ---- finite differences: unary ops ----------------------------------------------------------

struct UnaryCase {
  const char* name;
  Unary op;
  double lo, hi;          ///< sampling interval
  Accept ok = any_value;  ///< keeps points away from kinks
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"negate", [](const Tensor& x) { return negate(x); }, -2, 2},
      {"abs", [](const Tensor& x) { return abs(x); }, -2, 2, off_zero},
      {"sign", [](const Tensor& x) { return sign(x); }, -2, 2, off_zero},
      {"exponential", [](const Tensor& x) { return exp(x); }, -2, 2},
      {"log", [](const Tensor& x) { return log(x); }, 0.2, 3},
      {"log_plus_one", [](const Tensor& x) { return log1p(x); }, -0.8, 3},
      {"exponential_minus_one", [](const Tensor& x) { return expm1(x); }, -2, 2},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -2, 2},
      {"logistic", [](const Tensor& x) { return sigmoid(x); }, -3, 3},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.2, 3},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.2, 3},
      {"sine", [](const Tensor& x) { return sin(x); }, -3, 3},
      {"cosine", [](const Tensor& x) { return cos(x); }, -3, 3},
      {"floor", [](const Tensor& x) { return floor(x); }, -3, 3, off_halves},
      {"ceil", [](const Tensor& x) { return ceil(x); }, -3, 3, off_halves},
      {"round_nearest_even", [](const Tensor& x) { return round(x); }, -3, 3, off_halves},
      {"erf", [](const Tensor& x) { return erf(x); }, -2, 2},
  };
}

TEST(ElementwiseVjp, UnaryOpsMatchFiniteDifferences) {
  const std::vector<Shape> shapes = {{}, {3}, {2, 3}, {2, 1}, {2, 0}};
  for (const UnaryCase& c : unary_cases()) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      SCOPED_TRACE(std::string(c.name) + " at shape " + shape_to_string(shapes[s]));
      check_grads(unary_fn(c.op), {draw(shapes[s], 100 + s, c.lo, c.hi, c.ok)});
    }
  }
}

TEST(ElementwiseVjp, UnaryOpsOfASizeOneOperandBroadcastByMultiply) {
  // op(x) with x (2, 1) times w (2, 3): the cotangent of op(x) is summed over the broadcast dim.
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    TraceFn f = [op = c.op](const std::vector<Tensor>& a) { return std::vector<Tensor>{op(a[0]) * a[1]}; };
    check_grads(f, {draw({2, 1}, 7, c.lo, c.hi, c.ok), draw({2, 3}, 8, -1, 1, any_value)});
  }
}

// ---- finite differences: binary ops ---------------------------------------------------------

struct BinaryCase {
  const char* name;
  Binary op;
  double lo_a, hi_a, lo_b, hi_b;  ///< sampling intervals
  Accept ok_b = any_value;
  AcceptPair ok = [](double, double) { return true; };  ///< on pairs that meet
};

/// a / b at least 0.1 away from an integer: off the jumps of remainder.
bool off_integer_quotient(double a, double b) {
  const double q = a / b;
  return std::abs(q - std::round(q)) > 0.1;
}

std::vector<BinaryCase> binary_cases() {
  const AcceptPair distinct = [](double a, double b) { return std::abs(a - b) > 0.1; };
  // Off the origin, and off atan2's branch cut (a = 0, b < 0) where it jumps from pi to -pi.
  const AcceptPair atan2_ok = [](double a, double b) { return a * a + b * b > 0.1 && !(b < 0 && std::abs(a) < 0.1); };
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, -2, 2, -2, 2},
      {"subtract", [](const Tensor& a, const Tensor& b) { return a - b; }, -2, 2, -2, 2},
      {"multiply", [](const Tensor& a, const Tensor& b) { return a * b; }, -2, 2, -2, 2},
      {"divide", [](const Tensor& a, const Tensor& b) { return a / b; }, -2, 2, -2, 2,
       [](double b) { return std::abs(b) > 0.3; }},
      {"remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, -4, 4, -2, 2,
       [](double b) { return std::abs(b) > 0.4; }, off_integer_quotient},
      {"power", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.2, 2.5, -2, 2},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, -2, 2, -2, 2, any_value, distinct},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, -2, 2, -2, 2, any_value, distinct},
      {"atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); }, -2, 2, -2, 2, any_value, atan2_ok},
  };
}

/// `a` rounded to `dtype` and back to f64.
Array rounded(const Array& a, DType dtype) {
  const Array narrow = Array::from_doubles(a.to_doubles(), a.shape(), dtype);
  return Array::from_doubles(narrow.to_doubles(), a.shape(), DType::kF64);
}

/// f64 operands of shapes `sa` and `sb` for `c`, exactly representable in `dtype`, redrawn with
/// new seeds until every pair is accepted.
std::vector<Array> binary_point(const BinaryCase& c, const Shape& sa, const Shape& sb, uint64_t seed,
                                DType dtype = DType::kF64) {
  for (uint64_t attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t s = seed + 7919 * attempt;
    Array a = rounded(draw(sa, s, c.lo_a, c.hi_a, any_value), dtype);
    Array b = rounded(draw(sb, s + 1, c.lo_b, c.hi_b, c.ok_b), dtype);
    if (pairs_ok(a, b, c.ok)) return {a, b};
  }
  ADD_FAILURE() << c.name << ": no acceptable point found";
  return {};
}

TEST(ElementwiseVjp, BinaryOpsMatchFiniteDifferences) {
  // Equal shapes, and size-1 / scalar operands broadcast by the tracer (the broadcast_in_dim rule
  // sums their cotangents).
  const std::vector<std::pair<Shape, Shape>> shapes = {{{}, {}},         {{3}, {3}},       {{2, 3}, {2, 3}},
                                                       {{2, 1}, {2, 3}}, {{2, 3}, {2, 1}}, {{2, 3}, {}},
                                                       {{1, 3}, {2, 1}}, {{0, 3}, {0, 3}}};
  for (const BinaryCase& c : binary_cases()) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      const auto& [sa, sb] = shapes[s];
      SCOPED_TRACE(std::string(c.name) + " at shapes " + shape_to_string(sa) + ", " + shape_to_string(sb));
      std::vector<Array> point = binary_point(c, sa, sb, 200 + 10 * s);
      ASSERT_EQ(point.size(), 2u);
      check_grads(binary_fn(c.op), point);
    }
  }
}

// ---- finite differences: select and clamp -------------------------------------------------

TEST(ElementwiseVjp, SelectMatchesFiniteDifferences) {
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{where(a[0], a[1], a[2])}; };
  const Array t = draw({2, 3}, 1, -2, 2, any_value);
  const Array e = draw({2, 3}, 2, -2, 2, any_value);
  check_grads(f, {bools({true, false, false, true, true, false}, {2, 3}), t, e});
  check_grads(f, {bools({true}, {}), t, e});  // scalar pred: select takes it as is
  check_grads(f, {bools({false}, {}), t, e});
  // pred (2, 1) and on_true (2, 1) broadcast against on_false (2, 3).
  check_grads(f, {bools({true, false}, {2, 1}), draw({2, 1}, 3, -2, 2, any_value), e});
}

TEST(ElementwiseVjp, ClampMatchesFiniteDifferences) {
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{clamp(a[1], a[0], a[2])}; };
  const double lo = -0.5, hi = 0.7;
  const Accept off_bounds = [&](double x) { return std::abs(x - lo) > 0.1 && std::abs(x - hi) > 0.1; };
  // Scalar bounds: their cotangents are summed over x's elements.
  check_grads(f, {f64s(lo), draw({2, 3}, 4, -1.5, 1.5, off_bounds), f64s(hi)});
  check_grads(f, {f64s(lo), draw({}, 5, -1.5, 1.5, off_bounds), f64s(hi)});
  // Bounds of x's shape.
  check_grads(f, {f64v({-1, 0.2, -0.3, 0.5}), f64v({-1.5, 0.5, 0.4, 0.3}), f64v({1, 0.3, 0.9, 0.4})});
  // Degenerate lo > hi: the result is hi everywhere, so all of the cotangent goes to hi.
  check_grads(f, {f64s(1), draw({3}, 6, -2, 2, [](double x) { return std::abs(x) > 1.1; }), f64s(-1)});
  check_grads(f, {f64s(1), f64v({0.0, 0.5, -0.5}), f64s(-1)});
  // lo (2, 1) broadcast by the tracer against x (2, 3), scalar hi.
  check_grads(f, {f64({-0.5, 0.0}, {2, 1}), f64({-1, -0.2, 0.3, -0.3, 0.5, 2}, {2, 3}), f64s(0.4)});
}

TEST(ElementwiseVjp, FunctionsOfSeveralOps) {
  // A softplus-like mix of rules, and gelu (tanh form) and silu from the tracer.
  TraceFn f = [](const std::vector<Tensor>& a) {
    const Tensor x = a[0];
    return std::vector<Tensor>{relu(x) + log1p(exp(-abs(x))), gelu(x), silu(x)};
  };
  check_grads(f, {draw({2, 3}, 9, -3, 3, off_zero)});
}

// ---- convert ---------------------------------------------------------------------------------

TEST(ElementwiseVjp, ConvertBetweenFloatsConvertsTheCotangentBack) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    Tensor y = convert(a[0], DType::kF32);
    return std::vector<Tensor>{sum(y * y)};
  };
  std::vector<Array> g = grads_at(f, {f64v({1.5, -2.0, 0.25})});
  EXPECT_EQ(g[0].dtype(), DType::kF64);
  expect_values(g[0], {3.0, -4.0, 0.5});
  for (DType narrow : {DType::kF16, DType::kBF16, DType::kF64}) {
    TraceFn h = [narrow](const std::vector<Tensor>& a) {
      return std::vector<Tensor>{sum(convert(convert(a[0], narrow), DType::kF32) * 3.0)};
    };
    std::vector<Array> gh = grads_at(h, {testing::f32({1.5f, -2.0f})});
    EXPECT_EQ(gh[0].dtype(), DType::kF32);
    expect_values(gh[0], {3.0, 3.0});
  }
}

TEST(ElementwiseVjp, ConvertThroughAnIntegerStopsTheGradient) {
  // Float -> int -> float: no gradient flows through the integer (as JAX's float0), so the
  // gradient is exactly 0, and the convert from int to float needs a (zero) rule.
  TraceFn f = [](const std::vector<Tensor>& a) {
    Tensor n = convert(convert(a[0], DType::kI32), DType::kF64);
    return std::vector<Tensor>{sum(n * a[0])};
  };
  expect_values(grads_at(f, {f64v({1.5, -2.7})})[0], {1.0, -2.0});  // d/dx (trunc(x) * x)
}

// ---- exact values at kinks and singularities (docs/autodiff.md conventions) ------------------

TEST(ElementwiseVjp, AbsAtZeroIsOne) {
  expect_values(grads_at(summed([](const Tensor& x) { return abs(x); }), {f64v({0.0, -0.0, 2.0, -3.0, kNaN})})[0],
                {1.0, 1.0, 1.0, -1.0, -1.0});
}

TEST(ElementwiseVjp, MaximumAndMinimumSplitTies) {
  // maximum(x, 0) at x = 0 splits the tie: 0.5 (ingot::relu is a select instead: relu'(0) = 0).
  expect_values(
      grads_at(summed([](const Tensor& x) { return maximum(x, zeros_like(x)); }), {f64v({0.0, 1.0, -1.0, -0.0})})[0],
      {0.5, 1.0, 0.0, 0.5});
  const Array a = f64v({1, 2, 3, kNaN, 1});
  const Array b = f64v({1, 5, 0, 1, kNaN});
  // A NaN operand makes the result NaN, which equals neither operand: both get 0.
  std::vector<Array> gmin =
      grads_at(summed2([](const Tensor& x, const Tensor& y) { return minimum(x, y); }), {a, b}, {0, 1});
  expect_values(gmin[0], {0.5, 1, 0, 0, 0});
  expect_values(gmin[1], {0.5, 0, 1, 0, 0});
  std::vector<Array> gmax =
      grads_at(summed2([](const Tensor& x, const Tensor& y) { return maximum(x, y); }), {a, b}, {0, 1});
  expect_values(gmax[0], {0.5, 0, 1, 0, 0});
  expect_values(gmax[1], {0.5, 1, 0, 0, 0});
}

TEST(ElementwiseVjp, ClampPassesTheGradientOnlyStrictlyInside) {
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(clamp(a[1], a[0], a[2]))}; };
  // x at lo, at hi, inside, above, below, far above.
  std::vector<Array> g = grads_at(f, {f64s(-1), f64v({-1, 1, 0.5, 2, -2, 3}), f64s(1)}, {0, 1, 2});
  expect_values(g[0], {1});  // only x = -2 is below lo; x == lo gives nothing to anyone
  expect_values(g[1], {0, 0, 1, 0, 0, 0});
  expect_values(g[2], {2});  // x = 2 and 3
  // lo == hi: the result is the bound. Above it, hi alone moves the result (hi < x); at or
  // below it lo and hi tie and get 0.
  g = grads_at(f, {f64s(1), f64v({0, 1, 2}), f64s(1)}, {0, 1, 2});
  expect_values(g[0], {0});
  expect_values(g[1], {0, 0, 0});
  expect_values(g[2], {1});
  // lo > hi: the result is hi everywhere.
  g = grads_at(f, {f64s(2), f64v({0, 1.5, 3}), f64s(1)}, {0, 1, 2});
  expect_values(g[0], {0});
  expect_values(g[1], {0, 0, 0});
  expect_values(g[2], {3});
  // NaN x: the result is NaN and nothing gets a gradient.
  g = grads_at(f, {f64s(-1), f64v({kNaN}), f64s(1)}, {0, 1, 2});
  expect_values(g[0], {0});
  expect_values(g[1], {0});
  expect_values(g[2], {0});
}

TEST(ElementwiseVjp, SqrtAtZeroIsInfiniteAndNormAtZeroIsNaN) {
  expect_values(grads_at(summed([](const Tensor& x) { return sqrt(x); }), {f64v({0.0, 4.0})})[0], {kInf, 0.25});
  // sqrt(sum(x^2)) at 0: sqrt' = inf times d(x^2) = 2x = 0 gives NaN (as JAX).
  TraceFn norm = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sqrt(sum(a[0] * a[0]))}; };
  expect_values(grads_at(norm, {f64v({0.0, 0.0})})[0], {kNaN, kNaN});
  expect_values(grads_at(norm, {f64v({3.0, 4.0})})[0], {0.6, 0.8}, 1e-15);
  // sum(x^2) at 0 is smooth: 0.
  expect_values(grads_at(summed([](const Tensor& x) { return x * x; }), {f64v({0.0, -0.0})})[0], {0.0, 0.0});
  // rsqrt'(0) = -0.5 * inf / 0 = -inf.
  expect_values(grads_at(summed([](const Tensor& x) { return rsqrt(x); }), {f64v({0.0, 4.0})})[0], {-kInf, -0.0625});
}

TEST(ElementwiseVjp, LogAndLog1pAtTheirPoles) {
  expect_values(grads_at(summed([](const Tensor& x) { return log(x); }), {f64v({0.0, -0.0, 0.5, -2.0})})[0],
                {kInf, -kInf, 2.0, -0.5});
  expect_values(grads_at(summed([](const Tensor& x) { return log1p(x); }), {f64v({-1.0, 1.0})})[0], {kInf, 0.5});
}

TEST(ElementwiseVjp, DivideByZero) {
  std::vector<Array> g = grads_at(summed2([](const Tensor& a, const Tensor& b) { return a / b; }),
                                  {f64v({1, -1, 1, 0, 6}), f64v({0, 0, -0.0, 0, 2})}, {0, 1});
  expect_values(g[0], {kInf, kInf, -kInf, kInf, 0.5});    // 1 / b: the sign of the zero
  expect_values(g[1], {-kInf, kInf, -kInf, kNaN, -1.5});  // -a / b^2; 0 / 0 is NaN
}

TEST(ElementwiseVjp, PowerWithZeroBaseOrZeroExponent) {
  TraceFn f = summed2([](const Tensor& a, const Tensor& b) { return pow(a, b); });
  std::vector<Array> g = grads_at(f, {f64v({0, 0, 0, 0, 2, 2, -3}), f64v({2, 0, 0.5, 1, 0, 3, 2})}, {0, 1});
  // d/da: 2 * 0 = 0; 0 (a^0 is constant, also at a = 0); 0.5 * 0^-0.5 = inf; 1 * 0^0 = 1;
  // 0 * 2^-1 = 0; 3 * 2^2 = 12; 2 * -3 = -6.
  expect_values(g[0], {0, 0, kInf, 1, 0, 12, -6});
  // d/db = log(a) * a^b with log(a) -> log(1) = 0 at a = 0; log of a negative base is NaN.
  expect_values(g[1], {0, 0, 0, 0, std::log(2.0), 8 * std::log(2.0), kNaN}, 1e-15);
}

TEST(ElementwiseVjp, RemainderAndAtan2AtTheirSingularPoints) {
  // At a = k * b, remainder's d/db is -trunc(a / b) = -k (the one-sided derivative from the side
  // where |a / b| >= |k|); d/da is always 1.
  std::vector<Array> g = grads_at(summed2([](const Tensor& a, const Tensor& b) { return remainder(a, b); }),
                                  {f64v({3.0, -3.0, 2.0, 2.5}), f64v({1.5, 1.5, -1.0, -1.0})}, {0, 1});
  expect_values(g[0], {1, 1, 1, 1});
  expect_values(g[1], {-2, 2, 2, 2});
  // atan2 at the origin: 0 / 0 in both partials.
  g = grads_at(summed2([](const Tensor& a, const Tensor& b) { return atan2(a, b); }),
               {f64v({0.0, 1.0}), f64v({0.0, 1.0})}, {0, 1});
  expect_values(g[0], {kNaN, 0.5});
  expect_values(g[1], {kNaN, -0.5});
}

TEST(ElementwiseVjp, PiecewiseConstantOpsHaveZeroGradient) {
  const Array x = f64v({-2.0, -0.0, 0.0, 0.5, 1.5, 2.5, kInf});
  const std::vector<double> zeros(7, 0.0);
  for (const UnaryCase& c : unary_cases()) {
    const std::string name = c.name;
    if (name != "sign" && name != "floor" && name != "ceil" && name != "round_nearest_even") {
      continue;
    }
    SCOPED_TRACE(name);
    // The cotangent reaching the op is 2; the rule turns it into a zero.
    TraceFn f = summed([op = c.op](const Tensor& t) { return op(t) * 2.0; });
    expect_values(grads_at(f, {x})[0], zeros);
  }
}

TEST(ElementwiseVjp, SelectGivesThePredicateNothingAndTheUntakenBranchZero) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(where(a[0], a[1] * 3.0, a[2] * 5.0))};
  };
  const Array t = f64v({1, 2, 3});
  const Array e = f64v({4, 5, 6});
  std::vector<Array> g = grads_at(f, {bools({true, false, true}, {3}), t, e}, {1, 2});
  expect_values(g[0], {3, 0, 3});
  expect_values(g[1], {0, 5, 0});
  g = grads_at(f, {bools({false}, {}), t, e}, {1, 2});  // scalar pred
  expect_values(g[0], {0, 0, 0});
  expect_values(g[1], {5, 5, 5});
  // A predicate computed from x: x only gets the gradient of the branch taken.
  TraceFn h = summed([](const Tensor& x) {
    const Tensor positive = greater(x, zeros_like(x));
    return where(positive, x * x, x * -1.0);
  });
  expect_values(grads_at(h, {f64v({2.0, -3.0, 0.0})})[0], {4.0, -1.0, -1.0});
  // The "double where" idiom: log only sees x where x > 0, so the inf that log' has at 0 never
  // meets the zero cotangent of the untaken branch (which would make 0 * inf = NaN).
  TraceFn safe_log = summed([](const Tensor& x) {
    const Tensor positive = greater(x, zeros_like(x));
    return where(positive, log(where(positive, x, ones_like(x))), zeros_like(x));
  });
  expect_values(grads_at(safe_log, {f64v({0.5, 0.0, -1.0})})[0], {2.0, 0.0, 0.0});
}

// ---- second order ------------------------------------------------------------------------------

/// f''(x) elementwise for f = sum(op(x)), whose Hessian is diagonal: the gradient of sum(f'(x)).
Array second_derivative(const Unary& op, const Array& x) {
  TraceFn df = grad(summed(op));
  TraceFn sum_df = [df](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(df(a)[0])}; };
  return grads_at(sum_df, {x})[0];
}

void expect_second_derivative(const Unary& op, const std::vector<double>& xs,
                              const std::function<double(double)>& closed_form) {
  std::vector<double> want;
  for (double x : xs) want.push_back(closed_form(x));
  const std::vector<double> got = second_derivative(op, f64v(xs)).to_doubles();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-13 * (1 + std::abs(want[i]))) << "at x = " << xs[i];
  }
}

TEST(ElementwiseVjp, SecondDerivativesMatchClosedForms) {
  const std::vector<double> xs = {-1.3, -0.4, 0.5, 1.7};
  {
    SCOPED_TRACE("exp");
    expect_second_derivative([](const Tensor& x) { return exp(x); }, xs, [](double x) { return std::exp(x); });
  }
  {
    SCOPED_TRACE("tanh");
    expect_second_derivative([](const Tensor& x) { return tanh(x); }, xs,
                             [](double x) {
                               const double t = std::tanh(x);
                               return -2 * t * (1 - t * t);
                             });
  }
  {
    SCOPED_TRACE("logistic");
    expect_second_derivative([](const Tensor& x) { return sigmoid(x); }, xs,
                             [](double x) {
                               const double s = 1 / (1 + std::exp(-x));
                               return s * (1 - s) * (1 - 2 * s);
                             });
  }
  {
    SCOPED_TRACE("sine");
    expect_second_derivative([](const Tensor& x) { return sin(x); }, xs, [](double x) { return -std::sin(x); });
  }
  {
    SCOPED_TRACE("multiply: x^3");
    expect_second_derivative([](const Tensor& x) { return x * x * x; }, xs, [](double x) { return 6 * x; });
  }
  {
    SCOPED_TRACE("divide: 1 / x");
    expect_second_derivative([](const Tensor& x) { return 1.0 / x; }, xs, [](double x) { return 2 / (x * x * x); });
  }
  {
    SCOPED_TRACE("power: x^3");
    expect_second_derivative([](const Tensor& x) { return pow(x, full_like(x, 3.0)); }, xs,
                             [](double x) { return 6 * x; });
  }
  {
    SCOPED_TRACE("power: 2^x");
    expect_second_derivative([](const Tensor& x) { return pow(full_like(x, 2.0), x); }, xs,
                             [](double x) { return std::pow(std::log(2.0), 2) * std::exp2(x); });
  }
}

TEST(ElementwiseVjp, MixedSecondDerivativesMatchClosedForms) {
  // d/db of sum(d/da f(a, b)) for f = a * b * b, a / b and a^b.
  auto mixed = [](Binary op, const Array& a, const Array& b) {
    TraceFn df_da = grad(summed2(std::move(op)), {0});
    TraceFn sum_df = [df_da](const std::vector<Tensor>& t) { return std::vector<Tensor>{sum(df_da(t)[0])}; };
    return grads_at(sum_df, {a, b}, {1})[0].to_doubles();
  };
  const std::vector<double> av = {0.5, 1.5, 2.0};
  const std::vector<double> bv = {-1.2, 0.7, 2.5};
  const std::vector<double> prod =
      mixed([](const Tensor& a, const Tensor& b) { return a * b * b; }, f64v(av), f64v(bv));
  const std::vector<double> quot = mixed([](const Tensor& a, const Tensor& b) { return a / b; }, f64v(av), f64v(bv));
  const std::vector<double> powr =
      mixed([](const Tensor& a, const Tensor& b) { return pow(a, b); }, f64v(av), f64v(bv));
  for (size_t i = 0; i < av.size(); ++i) {
    const double a = av[i], b = bv[i];
    EXPECT_NEAR(prod[i], 2 * b, 1e-14);
    EXPECT_NEAR(quot[i], -1 / (b * b), 1e-14);
    const double want = std::pow(a, b - 1) * (1 + b * std::log(a));
    EXPECT_NEAR(powr[i], want, 1e-13 * (1 + std::abs(want)));
  }
}

TEST(ElementwiseVjp, PowerSecondDerivativeIsFiniteAtZeroExponent) {
  // d/da a^b is select(b == 0, 0, b * a'^(b - 1)) with a' = 1 where b == 0, so no 0 * inf reaches
  // the second derivatives at b == 0, even at a = 0. The select makes d/da identically 0 there, so
  // its derivatives are 0 too (d/db d/da at (a, 0) is 0, not the limit 1/a).
  TraceFn df_da = grad(summed2([](const Tensor& a, const Tensor& b) { return pow(a, b); }), {0});
  TraceFn sum_df = [df_da](const std::vector<Tensor>& t) { return std::vector<Tensor>{sum(df_da(t)[0])}; };
  std::vector<Array> g = grads_at(sum_df, {f64v({0.0, 2.0}), f64v({0.0, 0.0})}, {0, 1});
  expect_values(g[0], {0.0, 0.0});
  expect_values(g[1], {0.0, 0.0});
}

TEST(ElementwiseVjp, SecondDerivativesOfEveryOpMatchFiniteDifferences) {
  // check_grads of grad(f) compares the rules' own derivatives (the Hessian) with central
  // differences of the gradient; this needs every op a rule emits to have a rule.
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    check_grads(grad(summed(c.op)), {draw({2, 3}, 300, c.lo, c.hi, c.ok)});
  }
  for (const BinaryCase& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Array> point = binary_point(c, {2, 3}, {2, 3}, 400);
    ASSERT_EQ(point.size(), 2u);
    check_grads(grad(summed2(c.op), {0, 1}), point);
  }
  TraceFn clamp_grads = grad(
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(clamp(a[1], a[0], a[2]) * a[1])}; }, {0, 1, 2});
  check_grads(clamp_grads, {f64s(-0.5), f64v({-1.0, 0.2, 0.9}), f64s(0.7)});
  TraceFn select_grads =
      grad([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(where(a[0], a[1] * a[1], a[2] * a[1]))}; },
           {1, 2});
  check_grads(select_grads, {bools({true, false, true}, {3}), f64v({0.3, -1.2, 2.0}), f64v({1.1, 0.4, -0.6})});
}

TEST(ElementwiseVjp, HessianVectorProductMatchesFiniteDifferencesOfTheGradient) {
  // f(x) = sum(tanh(x) * x^2); hvp(x, v) = grad_x (grad f(x) . v).
  TraceFn f = summed([](const Tensor& x) { return tanh(x) * (x * x); });
  TraceFn df = grad(f);
  TraceFn dot_v = [df](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(df({a[0]})[0] * a[1])}; };
  const ir::TensorType vec{{4}, DType::kF64};
  const ir::Graph hvp = trace(grad(dot_v, {0}), {vec, vec}, "hvp");
  const ir::Graph gradient = trace(df, {vec}, "grad");
  const std::vector<double> x = {-1.1, -0.3, 0.4, 1.6};
  const std::vector<double> v = {0.7, -1.3, 0.5, 2.0};
  const std::vector<double> got = interp::interpret(hvp, {f64v(x), f64v(v)}).at(0).to_doubles();
  // Central differences of the gradient along v: (grad f(x + h v) - grad f(x - h v)) / 2h.
  const double h = 1e-5;
  auto grad_at = [&](double step) {
    std::vector<double> shifted = x;
    for (size_t i = 0; i < x.size(); ++i) shifted[i] += step * v[i];
    return interp::interpret(gradient, {f64v(shifted)}).at(0).to_doubles();
  };
  const std::vector<double> plus = grad_at(h), minus = grad_at(-h);
  for (size_t i = 0; i < x.size(); ++i) {
    const double numeric = (plus[i] - minus[i]) / (2 * h);
    EXPECT_NEAR(got[i], numeric, 1e-8 * (1 + std::abs(numeric))) << "element " << i;
    // The Hessian is diagonal: f_i'' = t'' x^2 + 4 t' x + 2 t with t = tanh(x_i).
    const double t = std::tanh(x[i]), t1 = 1 - t * t, t2 = -2 * t * t1;
    const double exact = (t2 * x[i] * x[i] + 4 * t1 * x[i] + 2 * t) * v[i];
    EXPECT_NEAR(got[i], exact, 1e-13 * (1 + std::abs(exact))) << "element " << i;
  }
}

TEST(ElementwiseVjp, RematerialisedForwardValuesGiveTheSameGradients) {
  // With rematerialize_elementwise the rules that use their result (tanh, sqrt, maximum, divide,
  // power) get a recomputed one; the gradients must not change.
  TraceFn f = summed([](const Tensor& x) {
    const Tensor t = tanh(x) * sqrt(x);
    const Tensor m = maximum(x, full_like(x, 0.5)) / x;
    return t + m + pow(x, x);
  });
  const ir::TensorType vec{{4}, DType::kF64};
  const Array x = f64v({0.3, 0.5, 1.2, 2.0});
  VjpOptions remat;
  remat.rematerialize_elementwise = true;
  const ir::Graph remat_graph = trace(grad(f, {0}, false, remat), {vec});
  int barriers = 0;
  for (const ir::Node& n : remat_graph.nodes()) barriers += n.op == "optimization_barrier";
  EXPECT_GT(barriers, 0) << "nothing was recomputed";
  const Array plain = interp::interpret(trace(grad(f), {vec}), {x}).at(0);
  expect_values(interp::interpret(remat_graph, {x}).at(0), plain.to_doubles());
}

// ---- other float dtypes ------------------------------------------------------------------------

TEST(ElementwiseVjp, FiniteDifferencesInF32WithLooserTolerance) {
  // In f32 the loss carries a rounding error of a few ulps (u = 6e-8 relative) that the
  // difference quotient divides by 2 eps, while truncation error grows as eps^2: with eps = 1e-3
  // both stay below ~1e-4 relative (the f32 floor of central differences is u^(2/3) ~ 2e-5; the
  // usual rule of thumb is sqrt(u) ~ 3e-4). rtol = 1e-2 keeps a margin of 100 and still catches
  // any wrong rule (errors of O(1)).
  GradCheckOptions options;
  options.eps = 1e-3;
  options.rtol = 1e-2;
  options.atol = 1e-3;
  auto to_f32 = [](const Array& a) { return Array::from_doubles(a.to_doubles(), a.shape(), DType::kF32); };
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    check_grads(unary_fn(c.op), {to_f32(draw({2, 3}, 500, c.lo, c.hi, c.ok))}, options);
  }
  for (const BinaryCase& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Array> point = binary_point(c, {2, 3}, {2, 1}, 600, DType::kF32);
    ASSERT_EQ(point.size(), 2u);
    check_grads(binary_fn(c.op), {to_f32(point[0]), to_f32(point[1])}, options);
  }
}

/// Gradients of sum(op(args)) in `dtype` against the f64 gradients at the same (rounded) points.
void expect_close_to_f64(const TraceFn& f, const std::vector<Array>& args, const std::vector<int64_t>& argnums,
                         DType dtype, double rtol) {
  std::vector<Array> narrow, wide;
  for (const Array& a : args) {
    narrow.push_back(Array::from_doubles(a.to_doubles(), a.shape(), dtype));
    wide.push_back(Array::from_doubles(narrow.back().to_doubles(), a.shape(), DType::kF64));
  }
  const std::vector<Array> got = grads_at(f, narrow, argnums);
  const std::vector<Array> want = grads_at(f, wide, argnums);
  for (size_t k = 0; k < argnums.size(); ++k) {
    EXPECT_EQ(got[k].dtype(), dtype);
    const std::vector<double> g = got[k].to_doubles(), w = want[k].to_doubles();
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_NEAR(g[i], w[i], rtol * (1 + std::abs(w[i]))) << "arg " << k << " element " << i;
    }
  }
}

TEST(ElementwiseVjp, RulesWorkInEveryFloatDType) {
  // The rules build their constants in the operand's dtype and return cotangents of its type
  // (autodiff rejects any other type); their values are checked against the f64 rules (whose
  // correctness the finite-difference tests establish) with tolerances of a few ulps of each
  // dtype through the handful of rounded ops of a rule: f32 u = 6e-8, f16 4.9e-4, bf16 3.9e-3.
  const std::vector<std::pair<DType, double>> dtypes = {{DType::kF32, 1e-5}, {DType::kF16, 1e-2}, {DType::kBF16, 5e-2}};
  for (const auto& [dtype, rtol] : dtypes) {
    for (const UnaryCase& c : unary_cases()) {
      SCOPED_TRACE(std::string(c.name) + " in " + std::string(dtype_name(dtype)));
      expect_close_to_f64(summed(c.op), {draw({4}, 700, c.lo, c.hi, c.ok)}, {0}, dtype, rtol);
    }
    for (const BinaryCase& c : binary_cases()) {
      SCOPED_TRACE(std::string(c.name) + " in " + std::string(dtype_name(dtype)));
      std::vector<Array> point = binary_point(c, {4}, {4}, 800, dtype);
      ASSERT_EQ(point.size(), 2u);
      expect_close_to_f64(summed2(c.op), point, {0, 1}, dtype, rtol);
    }
  }
}

}  // namespace
}  // namespace ingot
