// VJP rules of the shape family (transpose, reverse, slice, pad, concatenate; reshape and
// broadcast_in_dim through composites): finite-difference checks at random points and shapes,
// exact values for pad's padding-value cotangent and for cropped/strided positions, and second
// order (each rule's backward graph is made of shape ops that have rules themselves).
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::check_grads;
using testing::expect_values;
using testing::grads_at;
using testing::random_f64;
using Ints = std::vector<int64_t>;

/// A TraceFn of one argument.
TraceFn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& a) { return std::vector<Tensor>{f(a[0])}; };
}

/// f64 array of `shape` holding `v`.
Array f64(const std::vector<double>& v, const Shape& shape) { return Array::from_vector<double>(v, shape); }

/// pad with a Tensor padding value (ingot::pad takes a constant).
Tensor pad_with(const Tensor& x, const Tensor& value, const Ints& low, const Ints& high, const Ints& interior) {
  return emit("pad", {x, value},
              {{"edge_padding_low", low}, {"edge_padding_high", high}, {"interior_padding", interior}})
      .at(0);
}

// ---------------------------------------------------------------------------------------------
// transpose, reverse

TEST(ShapeVjp, Transpose) {
  check_grads(unary([](const Tensor& x) { return transpose(x, {2, 0, 1}); }), {random_f64({2, 3, 4}, 1)});
  check_grads(unary([](const Tensor& x) { return transpose(x, {1, 0}); }), {random_f64({1, 3}, 2)});
  check_grads(unary([](const Tensor& x) { return transpose(x, {1, 2, 0}); }), {random_f64({3, 1, 2}, 3)});
  // Identity permutation and a scalar.
  check_grads(unary([](const Tensor& x) { return transpose(x, {0, 1}); }), {random_f64({2, 2}, 4)});
  check_grads(unary([](const Tensor& x) { return multiply(transpose(x, {}), x); }), {random_f64({}, 5)});
}

TEST(ShapeVjp, TransposeInsideAProduct) {
  // x^T * x elementwise for a square x couples x[i, j] with x[j, i].
  check_grads(unary([](const Tensor& x) { return multiply(transpose(x, {1, 0}), x); }), {random_f64({3, 3}, 6)});
  // The inverse permutation matters for 3-cycles: (2, 0, 1) is undone by (1, 2, 0).
  TraceFn f = unary([](const Tensor& x) { return sum(transpose(x, {2, 0, 1}) * iota({4, 2, 3}, 0, DType::kF64)); });
  std::vector<Array> g = grads_at(f, {random_f64({2, 3, 4}, 7)});
  // d/dx[i, j, k] = (iota along result dim 0 = operand dim 2) = k.
  std::vector<double> want;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) want.push_back(k);
    }
  }
  expect_values(g[0], want);
}

TEST(ShapeVjp, Reverse) {
  check_grads(unary([](const Tensor& x) { return reverse(x, {0}); }), {random_f64({3}, 8)});
  check_grads(unary([](const Tensor& x) { return reverse(x, {0, 2}); }), {random_f64({2, 3, 4}, 9)});
  check_grads(unary([](const Tensor& x) { return reverse(x, {0}); }), {random_f64({1, 4}, 10)});
  check_grads(unary([](const Tensor& x) { return multiply(reverse(x, {1}), x); }), {random_f64({2, 5}, 11)});
}

// ---------------------------------------------------------------------------------------------
// slice

TEST(ShapeVjp, Slice) {
  check_grads(unary([](const Tensor& x) { return slice(x, {1}, {4}); }), {random_f64({5}, 12)});
  // Strided in both dims; the stride does not land on the limit.
  check_grads(unary([](const Tensor& x) { return slice(x, {1, 0}, {6, 5}, {2, 3}); }), {random_f64({6, 5}, 13)});
  check_grads(unary([](const Tensor& x) { return slice(x, {2}, {7}, {3}); }), {random_f64({8}, 14)});
  // Size-1 dims and a full slice.
  check_grads(unary([](const Tensor& x) { return slice(x, {0, 1}, {1, 4}, {1, 2}); }), {random_f64({1, 4}, 15)});
  // Overlapping slices of the same operand accumulate.
  check_grads(unary([](const Tensor& x) { return multiply(slice(x, {0}, {4}), slice(x, {2}, {6})); }),
              {random_f64({6}, 16)});
}

TEST(ShapeVjp, SliceCotangentIsZeroOutsideTheSlice) {
  // sum(slice(x, 1:6:2)) * 1 puts ones at positions 1, 3, 5 only.
  TraceFn f = unary([](const Tensor& x) { return sum(slice(x, {1}, {6}, {2})); });
  expect_values(grads_at(f, {random_f64({7}, 17)})[0], {0, 1, 0, 1, 0, 1, 0});
  // An empty slice passes nothing.
  TraceFn empty = unary([](const Tensor& x) { return add(sum(slice(x, {2}, {2})), sum(x)); });
  expect_values(grads_at(empty, {random_f64({3}, 18)})[0], {1, 1, 1});
}

// ---------------------------------------------------------------------------------------------
// pad

TEST(ShapeVjp, PadEdgesAndInterior) {
  check_grads(unary([](const Tensor& x) { return pad(x, 0.5, {1}, {2}); }), {random_f64({3}, 19)});
  check_grads(unary([](const Tensor& x) { return pad(x, 0.0, {0, 2}, {1, 0}, {1, 2}); }), {random_f64({3, 2}, 20)});
  // Size-1 dims: interior padding adds nothing there.
  check_grads(unary([](const Tensor& x) { return pad(x, 1.0, {1, 0}, {0, 1}, {3, 1}); }), {random_f64({1, 3}, 21)});
}

TEST(ShapeVjp, PadNegativeEdgesCrop) {
  check_grads(unary([](const Tensor& x) { return pad(x, 0.0, {-1}, {-2}); }), {random_f64({6}, 22)});
  // Negative edges combined with interior padding: (4 - 1) * 2 + 4 - 1 - 2 = 7 cells.
  check_grads(unary([](const Tensor& x) { return pad(x, 0.0, {-1}, {-2}, {2}); }), {random_f64({4}, 23)});
  check_grads(unary([](const Tensor& x) { return pad(x, 2.0, {-1, 2}, {1, -3}, {1, 1}); }), {random_f64({3, 4}, 24)});
}

TEST(ShapeVjp, PadValueGetsTheCotangentOfEveryPaddedCell) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{pad_with(a[0] * a[0], a[1], {1, -1}, {0, 2}, {1, 0})};
  };
  check_grads(f, {random_f64({2, 3}, 25), Array::scalar(0.3, DType::kF64)});
  check_grads(f, {random_f64({2, 3}, 26), Array::scalar(-1.5, DType::kF64)});
}

TEST(ShapeVjp, PadValueCotangentExact) {
  // x (2, 3), low (1, -1), high (0, 2), interior (1, 0): rows 1 and 3 of the (4, 4) result
  // hold x's columns 1, 2 (column 0 is cropped); the other 12 cells hold the value.
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(pad_with(a[0], a[1], {1, -1}, {0, 2}, {1, 0}))};
  };
  std::vector<Array> g = grads_at(f, {random_f64({2, 3}, 27), Array::scalar(0.25, DType::kF64)}, {0, 1});
  expect_values(g[0], {0, 1, 1, 0, 1, 1});
  expect_values(g[1], {12});
  // Weighted: the value's cotangent is the sum of the weights on padded cells.
  TraceFn w = [](const std::vector<Tensor>& a) {
    Tensor p = pad_with(a[0], a[1], {1}, {1}, {1});  // [v, x0, v, x1, v]
    return std::vector<Tensor>{sum(p * constant(f64({1, 2, 3, 4, 5}, {5})))};
  };
  g = grads_at(w, {f64({7, 8}, {2}), Array::scalar(0.0, DType::kF64)}, {0, 1});
  expect_values(g[0], {2, 4});
  expect_values(g[1], {9});
  // Padding a scalar: no padded cell, so the value gets zero.
  TraceFn s = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{pad_with(a[0], a[1], {}, {}, {}) * a[0]}; };
  g = grads_at(s, {Array::scalar(3.0, DType::kF64), Array::scalar(1.0, DType::kF64)}, {0, 1});
  expect_values(g[0], {6});
  expect_values(g[1], {0});
}

TEST(ShapeVjp, PadValueCotangentInF32) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(pad_with(a[0], a[1], {2}, {-1}, {1}))};  // [v v x0 v]
  };
  std::vector<Array> g = grads_at(f, {Array::from_vector<float>({1, 2}, {2}), Array::scalar(0.5, DType::kF32)}, {0, 1});
  EXPECT_EQ(g[0].dtype(), DType::kF32);
  EXPECT_EQ(g[1].dtype(), DType::kF32);
  expect_values(g[0], {1, 0});
  expect_values(g[1], {3});
}

// ---------------------------------------------------------------------------------------------
// concatenate

TEST(ShapeVjp, ConcatenateThreeOperands) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{concatenate({a[0], a[1] * a[1], a[2]}, 1)};
  };
  check_grads(f, {random_f64({2, 1}, 28), random_f64({2, 3}, 29), random_f64({2, 2}, 30)});
  TraceFn g = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{concatenate({a[0], a[1], a[2]}, 0)}; };
  // An empty operand in the middle.
  check_grads(g, {random_f64({1, 3}, 31), random_f64({0, 3}, 32), random_f64({2, 3}, 33)});
}

TEST(ShapeVjp, ConcatenateSameOperandTwiceAccumulates) {
  TraceFn f = unary(
      [](const Tensor& x) { return sum(concatenate({x, x, x * x}, 0) * constant(f64({1, 2, 3, 4, 5, 6}, {6}))); });
  // x = (a, b): 1 a + 2 b + 3 a + 4 b + 5 a^2 + 6 b^2.
  expect_values(grads_at(f, {f64({1, 2}, {2})})[0], {1 + 3 + 10, 2 + 4 + 24});
  // A single operand.
  TraceFn one = unary([](const Tensor& x) { return emit("concatenate", {x}, {{"dimension", int64_t{0}}}).at(0); });
  check_grads(one, {random_f64({3}, 34)});
}

// ---------------------------------------------------------------------------------------------
// composites and second order

TEST(ShapeVjp, CompositeOfShapeOps) {
  // A shifted-difference stencil with crops, flips, broadcasts and reshapes.
  TraceFn f = unary([](const Tensor& x) {
    Tensor left = slice(x, {0, 0}, {3, 3});
    Tensor right = reverse(slice(x, {0, 1}, {3, 4}), {1});
    Tensor d = transpose(left - right, {1, 0});
    Tensor p = pad(d * d, 0.0, {1, 0}, {0, -1}, {0, 1});
    return reshape(concatenate({p, broadcast_to(sum(x, {0}, true), {2, 4})}, 0), {-1});
  });
  check_grads(f, {random_f64({3, 4}, 35)});
  check_grads(f, {random_f64({3, 4}, 36)});
}

TEST(ShapeVjp, SecondOrder) {
  // grad of sum((shape ops of x)^2) is linear in x; its own gradient goes through the backward
  // graphs of the shape rules (slice <-> pad, concatenate -> slice, transpose, reverse).
  TraceFn loss = unary([](const Tensor& x) {
    Tensor t = transpose(reverse(x, {0}), {1, 0});
    Tensor c = concatenate({slice(t, {0, 0}, {3, 2}, {2, 1}), pad(t, 0.0, {1, -1}, {0, 0}, {0, 1})}, 0);
    return sum(c * c);
  });
  check_grads(grad(loss), {random_f64({2, 3}, 37)});
  // Exact: d/dx sum(grad(sum(x^2))) = d/dx sum(2 x) = 2.
  TraceFn sum_sq = unary([](const Tensor& x) {
    Tensor y = slice(pad(x, 0.0, {2}, {1}, {1}), {2}, {7});
    return sum(y * y);
  });
  TraceFn sum_of_grad = [sum_sq](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(grad(sum_sq)(a)[0])}; };
  expect_values(grads_at(sum_of_grad, {f64({1, -2, 3}, {3})})[0], {2, 2, 2});
}

}  // namespace
}  // namespace ingot
