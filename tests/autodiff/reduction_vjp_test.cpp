// VJP rules of the reduction family: reduce (add, mul, max, min), reduce_window (add, max, min,
// the latter through select_and_scatter) and the pooling composites. Finite-difference checks at
// random, tie-free points; exact values for the conventions (ties, zeros in products, init that
// wins, NaN) and for the named errors; second order.
#include <gtest/gtest.h>

#include <limits>

#include "gradcheck.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::check_grads;
using testing::expect_error;
using testing::expect_values;
using testing::GradCheckOptions;
using testing::grads_at;
using testing::random_f64;
using Ints = std::vector<int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A TraceFn of one argument.
TraceFn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& a) { return std::vector<Tensor>{f(a[0])}; };
}

/// f64 array of `shape` holding `v`.
Array f64(const std::vector<double>& v, const Shape& shape) { return Array::from_vector<double>(v, shape); }
Array f64(const std::vector<double>& v) { return f64(v, {static_cast<int64_t>(v.size())}); }

/// A raw `reduce` node (the Tensor API sorts axes and fixes the init).
Tensor reduce_op(const Tensor& x, const Tensor& init, const Ints& dims, const std::string& c) {
  return emit("reduce", {x, init}, {{"dimensions", dims}, {"computation", c}}).at(0);
}

/// A raw `reduce_window` node with `attrs` plus `computation`.
Tensor window_op(const Tensor& x, const Tensor& init, Attributes attrs, const std::string& c) {
  attrs.set("computation", c);
  return emit("reduce_window", {x, init}, attrs).at(0);
}

/// Window attributes: window dimensions, strides, flat padding, base and window dilations.
Attributes window(Ints dims, Ints strides, Ints padding, Ints base = {}, Ints wdil = {}) {
  Attributes a = {{"window_dimensions", dims}, {"window_strides", strides}, {"padding", padding}};
  if (!base.empty()) a.set("base_dilations", base);
  if (!wdil.empty()) a.set("window_dilations", wdil);
  return a;
}

/// d loss / d x of a scalar function of one argument.
Array grad_of(const TraceFn& f, const Array& x) { return grads_at(f, {x})[0]; }

// ---------------------------------------------------------------------------------------------
// reduce add

TEST(ReduceVjp, SumOverSeveralDims) {
  check_grads(unary([](const Tensor& x) { return sum(x, {0, 2}); }), {random_f64({2, 3, 4}, 1)});
  check_grads(unary([](const Tensor& x) { return sum(x * x, {1}, true); }), {random_f64({3, 1, 4}, 2)});
  check_grads(unary([](const Tensor& x) { return sum(x * x); }), {random_f64({2, 3}, 3)});
}

// ---------------------------------------------------------------------------------------------
// reduce max / min

TEST(ReduceVjp, MaxAndMinAtTieFreePoints) {
  for (uint64_t seed : {4, 5, 6}) {
    const Array x = random_f64({2, 3, 4}, seed);
    check_grads(unary([](const Tensor& t) { return max(t, {0}); }), {x});
    check_grads(unary([](const Tensor& t) { return max(t * t, {1, 2}); }), {x});
    check_grads(unary([](const Tensor& t) { return min(t, {0, 2}); }), {x});
    check_grads(unary([](const Tensor& t) { return min(t, {}, true); }), {x});
  }
  // Size-1 reduced dims: every element is its slice's extreme.
  check_grads(unary([](const Tensor& t) { return max(t, {1}); }), {random_f64({3, 1, 4}, 7)});
  check_grads(unary([](const Tensor& t) { return min(t, {0, 1}); }), {random_f64({1, 5}, 8)});
  // Unsorted dims and a non-identity init (below every element, so it never wins).
  check_grads(unary([](const Tensor& t) { return reduce_op(t, scalar(-2.0, DType::kF64), {2, 0}, "max"); }),
              {random_f64({2, 3, 4}, 9)});
}

TEST(ReduceVjp, MaxTiesSplitEvenly) {
  TraceFn f = unary([](const Tensor& x) { return max(x); });
  expect_values(grads_at(f, {f64({1, 3, 3, 2})})[0], {0, 0.5, 0.5, 0});
  expect_values(grads_at(f, {f64({2, 2, 2})})[0], {1.0 / 3, 1.0 / 3, 1.0 / 3});
  // Per row, weighted by the row's cotangent (2 and 3).
  TraceFn rows = unary([](const Tensor& x) { return sum(max(x, {1}) * constant(f64({2, 3}))); });
  expect_values(grads_at(rows, {f64({1, 5, 5, 4, 4, 4}, {2, 3})})[0], {0, 1, 1, 1, 1, 1});
  // All -inf (the identity init): the elements still share the cotangent, as in JAX.
  expect_values(grads_at(f, {f64({-kInf, -kInf})})[0], {0.5, 0.5});
}

TEST(ReduceVjp, MinTiesSplitEvenly) {
  TraceFn f = unary([](const Tensor& x) { return min(x, {0}); });
  expect_values(grads_at(f, {f64({4, -1, 7, -1})})[0], {0, 0.5, 0, 0.5});
  expect_values(grads_at(f, {f64({0.5})})[0], {1});
}

TEST(ReduceVjp, MaxWithNaNGivesNaNAsJax) {
  // No element equals the NaN result: count 0, and JAX's 0 / 0 makes the slice's cotangent NaN.
  TraceFn f = unary([](const Tensor& x) { return sum(max(x, {1})); });
  expect_values(grads_at(f, {f64({1, kNaN, 2, 3, 5, 4}, {2, 3})})[0], {kNaN, kNaN, kNaN, 0, 1, 0});
}

TEST(ReduceVjp, InitThatWinsGetsNothingAndPassesNothing) {
  // max(init 5, 1, 2) = 5: init is a constant, so no element gets a cotangent.
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{reduce_op(a[0], a[1], {0}, "max")}; };
  std::vector<Array> g = grads_at(f, {f64({1, 2}), Array::scalar(5.0, DType::kF64)}, {0, 1});
  expect_values(g[0], {0, 0});
  expect_values(g[1], {0});
  // init equal to the maximum: the elements equal to the result share it.
  g = grads_at(f, {f64({1, 2}), Array::scalar(2.0, DType::kF64)}, {0, 1});
  expect_values(g[0], {0, 1});
  expect_values(g[1], {0});
  // min with init below every element.
  TraceFn m = unary([](const Tensor& x) { return reduce_op(x, scalar(-3.0, DType::kF64), {0}, "min"); });
  expect_values(grads_at(m, {f64({1, -2})})[0], {0, 0});
}

// ---------------------------------------------------------------------------------------------
// reduce mul

TEST(ReduceVjp, ProductAtRandomPoints) {
  for (uint64_t seed : {10, 11}) {
    const Array x = random_f64({2, 3, 4}, seed, 0.5, 1.5);
    check_grads(unary([](const Tensor& t) { return prod(t, {0, 2}); }), {x});  // n = 8
    check_grads(unary([](const Tensor& t) { return prod(t, {1}); }), {x});     // n = 3
    check_grads(unary([](const Tensor& t) { return prod(t); }), {x});          // n = 24
    check_grads(unary([](const Tensor& t) { return reduce_op(t, scalar(1.0, DType::kF64), {2, 0}, "mul"); }), {x});
  }
  check_grads(unary([](const Tensor& t) { return prod(t); }), {random_f64({5}, 12)});
  check_grads(unary([](const Tensor& t) { return prod(t, {1}); }), {random_f64({3, 1}, 13)});
  check_grads(unary([](const Tensor& t) { return prod(t * t, {0}); }), {random_f64({1, 4}, 14)});
}

TEST(ReduceVjp, ProductScalesByInit) {
  // reduce mul with init c is c * prod(x): x's cotangent includes c; init's is zero.
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{reduce_op(a[0], a[1], {1}, "mul")}; };
  GradCheckOptions o;
  o.argnums = {0};
  check_grads(f, {random_f64({2, 3}, 15), Array::scalar(2.5, DType::kF64)}, o);
  std::vector<Array> g = grads_at(
      unary([](const Tensor& x) { return reduce_op(x, scalar(2.0, DType::kF64), {0}, "mul"); }), {f64({3, 4, 5})});
  expect_values(g[0], {40, 30, 24});
}

TEST(ReduceVjp, ProductWithZerosIsExact) {
  TraceFn f = unary([](const Tensor& x) { return prod(x); });
  // One zero: only the zero's cotangent is nonzero (the product of the others).
  expect_values(grads_at(f, {f64({2, 0, 3, 4})})[0], {0, 24, 0, 0});
  // Two zeros: every product of "the others" contains a zero.
  expect_values(grads_at(f, {f64({0, 2, 0, 3})})[0], {0, 0, 0, 0});
  // Per row, with weights 1 and -1; n = 3 is padded with a one inside the rule.
  TraceFn rows = unary([](const Tensor& x) { return sum(prod(x, {1}) * constant(f64({1, -1}))); });
  expect_values(grads_at(rows, {f64({1, 0, 2, 3, 4, 5}, {2, 3})})[0], {0, 2, 0, -20, -15, -12});
  // No zero, exact small integers.
  expect_values(grads_at(f, {f64({2, 3, 5})})[0], {15, 10, 6});
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin: integer results carry no cotangent

TEST(ReduceVjp, ArgmaxIsAnAuxiliaryValueWithoutGradient) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(a[0] * a[0]), argmax(a[0], 0), argmin(a[0], 0)};
  };
  ir::Graph g = trace(value_and_grad(f, {0}, /*has_aux=*/true), {{{3}, DType::kF64}});
  std::vector<Array> out = interp::interpret(g, {f64({1, 3, -2})});
  ASSERT_EQ(out.size(), 4u);
  expect_values(out[0], {14});
  expect_values(out[1], {1});
  expect_values(out[2], {2});
  expect_values(out[3], {2, 6, -4});
}

// ---------------------------------------------------------------------------------------------
// reduce_window add

TEST(ReduceWindowVjp, SumWindows) {
  auto win = [](Attributes a) {
    return unary([a](const Tensor& x) { return window_op(x, scalar(0.0, DType::kF64), a, "add"); });
  };
  // Strides with uneven padding; windows past the end are cut off.
  check_grads(win(window({3}, {2}, {1, 2})), {random_f64({7}, 16)});
  // Base dilation (holes hold init = 0) and window dilation.
  check_grads(win(window({2}, {1}, {1, 1}, {2})), {random_f64({4}, 17)});
  check_grads(win(window({2}, {1}, {0, 0}, {}, {2})), {random_f64({6}, 18)});
  check_grads(win(window({2}, {3}, {0, 1}, {3}, {2})), {random_f64({5}, 19)});
  // Negative padding crops; padding larger than the window gives windows of padding only.
  check_grads(win(window({2}, {2}, {-1, 1})), {random_f64({6}, 20)});
  check_grads(win(window({2}, {1}, {3, 0})), {random_f64({3}, 21)});
  // 2-D with per-dim strides and padding; a size-1 dim.
  check_grads(win(window({2, 3}, {2, 1}, {1, 0, 1, 1})), {random_f64({4, 5}, 22)});
  check_grads(win(window({1, 2}, {1, 1}, {0, 0, 0, 1})), {random_f64({1, 3}, 23)});
}

TEST(ReduceWindowVjp, SumWindowsNonzeroInitDoesNotChangeTheOperandsCotangent) {
  // Padded cells hold init = 2.5: the result shifts, x's cotangent does not; init gets none.
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(window_op(a[0], a[1], window({2}, {1}, {1, 1}), "add"))};
  };
  std::vector<Array> g = grads_at(f, {f64({1, 2, 3}), Array::scalar(2.5, DType::kF64)}, {0, 1});
  expect_values(g[0], {2, 2, 2});
  expect_values(g[1], {0});
}

TEST(ReduceWindowVjp, AveragePooling) {
  const Array x = random_f64({1, 4, 4, 2}, 24);
  check_grads(unary([](const Tensor& t) { return avg_pool2d(t, {2, 2}, {2, 2}); }), {x});
  check_grads(unary([](const Tensor& t) { return avg_pool2d(t, {3, 3}, {1, 1}, "same"); }), {x});
  check_grads(unary([](const Tensor& t) { return avg_pool2d(t, {2, 2}, {2, 2}, "same"); }),
              {random_f64({1, 5, 5, 1}, 25)});
}

// ---------------------------------------------------------------------------------------------
// reduce_window max / min

TEST(ReduceWindowVjp, MaxPoolingAtTieFreePoints) {
  for (uint64_t seed : {26, 27}) {
    const Array x = random_f64({1, 4, 4, 2}, seed);
    check_grads(unary([](const Tensor& t) { return max_pool2d(t, {2, 2}, {2, 2}); }), {x});
    check_grads(unary([](const Tensor& t) { return max_pool2d(t, {3, 3}, {1, 1}, "same"); }), {x});
  }
  check_grads(unary([](const Tensor& t) { return max_pool2d(t, {2, 2}, {2, 2}, "same"); }),
              {random_f64({1, 5, 5, 1}, 28)});
}

TEST(ReduceWindowVjp, MaxAndMinWindows) {
  auto win = [](Attributes a, double init, const std::string& c) {
    return unary([a, init, c](const Tensor& x) { return window_op(x, scalar(init, DType::kF64), a, c); });
  };
  check_grads(win(window({3}, {2}, {1, 2}), -kInf, "max"), {random_f64({7}, 29)});
  check_grads(win(window({3}, {2}, {1, 2}), kInf, "min"), {random_f64({7}, 30)});
  check_grads(win(window({2, 2}, {1, 2}, {0, 1, 1, 0}), kInf, "min"), {random_f64({3, 4}, 31)});
  // Negative padding, and base dilation (handled as JAX: holes never win).
  check_grads(win(window({2}, {1}, {-1, 0}), -kInf, "max"), {random_f64({5}, 32)});
  check_grads(win(window({3}, {1}, {1, 1}, {2}), -kInf, "max"), {random_f64({4}, 33)});
  // (A window of holes only would hold +inf and make the projected loss NaN; none here.)
  check_grads(win(window({2, 3}, {2, 1}, {0, 0, 1, 0}, {1, 3}), kInf, "min"), {random_f64({2, 3}, 34)});
  // init 0 beats the negative windows (a relu of the window maximum): those pass nothing.
  check_grads(win(window({2}, {1}, {0, 0}), 0.0, "max"), {random_f64({6}, 35)});
}

TEST(ReduceWindowVjp, MaxPoolingTiesGoToTheFirstElement) {
  TraceFn pool = unary([](const Tensor& x) { return sum(max_pool2d(x, {2, 2}, {2, 2})); });
  expect_values(grads_at(pool, {f64({1, 1, 1, 1}, {1, 2, 2, 1})})[0], {1, 0, 0, 0});
  // 3x3 "same" pooling of a constant image: each window's first real cell (padding is never
  // selected) is the top-left one it covers; cell (0, 0) is first for 4 windows.
  TraceFn same = unary([](const Tensor& x) { return sum(max_pool2d(x, {3, 3}, {1, 1}, "same")); });
  expect_values(grads_at(same, {f64(std::vector<double>(9, 7.0), {1, 3, 3, 1})})[0], {4, 2, 0, 2, 1, 0, 0, 0, 0});
  // Min windows: the first minimum.
  TraceFn mins = unary(
      [](const Tensor& x) { return sum(window_op(x, scalar(kInf, DType::kF64), window({3}, {1}, {0, 0}), "min")); });
  expect_values(grads_at(mins, {f64({2, 1, 3, 1, 1})})[0], {0, 2, 0, 1, 0});
}

TEST(ReduceWindowVjp, WindowsWhereInitWinsPassNothing) {
  // init 0.5 beats [0.1, 0.2] but not [0.2, 0.9]; [0.9, 0.4] passes to 0.9.
  TraceFn f = unary(
      [](const Tensor& x) { return sum(window_op(x, scalar(0.5, DType::kF64), window({2}, {1}, {0, 0}), "max")); });
  expect_values(grads_at(f, {f64({0.1, 0.2, 0.9, 0.4})})[0], {0, 0, 2, 0});
  // A tie with a finite init: init is folded first and keeps it.
  expect_values(grads_at(f, {f64({0.5, 0.5})})[0], {0, 0});
  // With the identity init -inf, a window of -inf still passes to its first element (as JAX).
  TraceFn g = unary(
      [](const Tensor& x) { return sum(window_op(x, scalar(-kInf, DType::kF64), window({2}, {1}, {0, 0}), "max")); });
  expect_values(grads_at(g, {f64({-kInf, -kInf, 1})})[0], {1, 0, 1});
}

TEST(ReduceWindowVjp, UnsupportedCasesAreNamedErrors) {
  const ir::TensorType t{{5}, DType::kF64};
  TraceFn dilated = unary([](const Tensor& x) {
    return sum(window_op(x, scalar(-kInf, DType::kF64), window({2}, {1}, {0, 0}, {}, {2}), "max"));
  });
  expect_error([&] { trace(grad(dilated), {t}); }, ErrorCode::kUnimplemented,
               {"no VJP rule for 'reduce_window' max", "window_dilations = [2]"});
  TraceFn product = unary(
      [](const Tensor& x) { return sum(window_op(x, scalar(1.0, DType::kF64), window({2}, {1}, {0, 0}), "mul")); });
  expect_error([&] { trace(grad(product), {t}); }, ErrorCode::kUnimplemented,
               {"no VJP rule for 'reduce_window' with computation 'mul'"});
  // select_and_scatter (max pooling's backward) has no rule of its own: no second order.
  TraceFn pool = unary([](const Tensor& x) {
    return sum(window_op(x * x, scalar(-kInf, DType::kF64), window({2}, {2}, {0, 0}), "max"));
  });
  TraceFn grad_sum = [pool](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(grad(pool)(a)[0])}; };
  expect_error([&] { trace(grad(grad_sum), {{{4}, DType::kF64}}); }, ErrorCode::kUnimplemented,
               {"no VJP rule for 'select_and_scatter'"});
}

// ---------------------------------------------------------------------------------------------
// empty shapes and narrow dtypes

TEST(ReductionVjp, EmptyOperandsAndWindowlessResults) {
  // Reducing an empty dim: the result is init; the (empty) operand's cotangent keeps its shape.
  for (const char* c : {"add", "mul", "max", "min"}) {
    TraceFn f = unary([c](const Tensor& x) {
      const double init = std::string(c) == "mul" ? 1.0 : 0.0;
      return sum(reduce_op(x, scalar(init, DType::kF64), {0}, c));
    });
    EXPECT_EQ(grads_at(f, {f64({}, {0, 3})})[0].shape(), (Shape{0, 3})) << c;
  }
  // No window fits: every element gets zero.
  for (const char* c : {"add", "max"}) {
    TraceFn f = unary([c](const Tensor& x) {
      return add(sum(window_op(x, scalar(0.0, DType::kF64), window({4}, {1}, {0, 0}), c)), sum(x));
    });
    expect_values(grads_at(f, {f64({1, 2, 3})})[0], {1, 1, 1});
  }
}

TEST(ReductionVjp, F32RulesKeepTheDtype) {
  auto f32v = [](std::vector<float> v, Shape shape) { return Array::from_vector<float>(v, shape); };
  TraceFn p = unary([](const Tensor& x) { return prod(x); });
  Array g = grads_at(p, {f32v({2, 0, 3, 4}, {4})})[0];
  EXPECT_EQ(g.dtype(), DType::kF32);
  expect_values(g, {0, 24, 0, 0});
  TraceFn pool = unary([](const Tensor& x) { return sum(max_pool2d(x, {2, 2}, {2, 2})); });
  g = grads_at(pool, {f32v({1, 1, 1, 1}, {1, 2, 2, 1})})[0];
  EXPECT_EQ(g.dtype(), DType::kF32);
  expect_values(g, {1, 0, 0, 0});
  TraceFn avg = unary([](const Tensor& x) { return sum(avg_pool2d(x, {2, 2}, {1, 1})); });
  // Windows of the 3x3 image: the centre lies in all 4, edges in 2, corners in 1; / 4.
  g = grads_at(avg, {f32v({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1})})[0];
  expect_values(g, {0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25});
  TraceFn m = unary([](const Tensor& x) { return sum(max(x, {1})); });
  g = grads_at(m, {f32v({1, 4, 4, 2}, {1, 4})})[0];
  expect_values(g, {0, 0.5, 0.5, 0});
}

// ---------------------------------------------------------------------------------------------
// second order

TEST(ReductionVjp, SecondOrderOfSumsOfSquares) {
  // grad(sum(x^2)) = 2x through reduce add and reduce_window add; their gradients are 2.
  TraceFn sum_sq = unary([](const Tensor& x) { return sum(sum(x * x, {1})); });
  TraceFn window_sq = unary(
      [](const Tensor& x) { return sum(window_op(x * x, scalar(0.0, DType::kF64), window({2}, {2}, {1, 1}), "add")); });
  check_grads(grad(sum_sq), {random_f64({2, 3}, 36)});
  check_grads(grad(window_sq), {random_f64({4}, 36)});
  TraceFn sum_of_grad = [window_sq](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(grad(window_sq)(a)[0])};
  };
  // Every element lies in exactly one window of the padded (6,): d/dx sum(2x) = 2.
  expect_values(grad_of(sum_of_grad, f64({1, -2, 3, 0.5})), {2, 2, 2, 2});
}

TEST(ReductionVjp, SecondOrderOfProduct) {
  check_grads(grad(unary([](const Tensor& x) { return prod(x); })), {random_f64({5}, 37, 0.5, 1.5)});
  // d/dx sum_i prod_{j != i} x_j for (a, b, c) = (b + c, a + c, a + b), exact with a zero.
  TraceFn sum_of_grad = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(grad(unary([](const Tensor& x) { return prod(x); }))(a)[0])};
  };
  expect_values(grad_of(sum_of_grad, f64({1, 2, 3})), {5, 4, 3});
  expect_values(grad_of(sum_of_grad, f64({0, 2, 3})), {5, 3, 2});
}

TEST(ReductionVjp, SecondOrderOfMaxAndTranspose) {
  TraceFn f =
      unary([](const Tensor& x) { return sum(max(transpose(x * x * x, {1, 0}), {1}) * constant(f64({1, 2, 3}))); });
  check_grads(grad(f), {random_f64({2, 3}, 38)});
  // Column maxima of x^3 at rows (1, 0, 1): sum(grad) = sum_c 3 w_c x^2 at the maxima, whose
  // gradient is 6 w_c x there.
  TraceFn sum_of_grad = [f](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(grad(f)(a)[0])}; };
  expect_values(grad_of(sum_of_grad, f64({1, 2, -1, 2, 1, 0.5}, {2, 3})), {0, 24, 0, 12, 0, 9});
}

}  // namespace
}  // namespace ingot
