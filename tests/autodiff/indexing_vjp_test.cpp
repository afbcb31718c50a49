// Tests of the VJP rules of the indexing family (gather, scatter): finite-difference checks and
// exact values for embedding lookups with repeated and out-of-range (clamped) indices, slices of
// 2-D operands, index vectors along any dim, scatter-add with duplicate and out-of-bounds
// (skipped) updates, scatter-assign (last write wins) and second order.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gradcheck.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/ir/op_registry.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::check_grads;
using testing::expect_values;
using testing::grads_at;
using testing::i32;
using testing::random_f64;
using Ints = std::vector<int64_t>;

Array f64(const std::vector<double>& v, const Shape& shape) { return Array::from_vector<double>(v, shape); }

/// loss = sum(out * w) for a fixed w: d loss / d out = w.
Tensor weighted(const Tensor& out, const Array& w) { return sum(out * constant(w)); }

// ---- gather ------------------------------------------------------------------------------------

TraceFn take_fn() {
  return [](const std::vector<Tensor>& a) { return std::vector<Tensor>{take(a[0], a[1])}; };
}

TEST(IndexingVjp, TakeAccumulatesRepeatedIndices) {
  check_grads(take_fn(), {random_f64({5, 3}, 1), i32({1, 3, 1, 0})});
  check_grads(take_fn(), {random_f64({4, 2}, 2), i32({3, 3, 0, 2}, {2, 2})});  // 2-D indices
  // loss = sum(take(x, [1, 3, 1, 0]) * w): row r of dx is the sum of w's rows that read r.
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{weighted(take(a[0], a[1]), f64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}))};
  };
  const Array dx = grads_at(f, {random_f64({5, 2}, 3), i32({1, 3, 1, 0})})[0];
  expect_values(dx, {7, 8, 1 + 5, 2 + 6, 0, 0, 3, 4, 0, 0});
}

TEST(IndexingVjp, TakeOutOfRangeIndexFeedsTheClampedRow) {
  // Indices 7 and -2 read rows 3 and 0 (clamped), so those rows get their cotangents.
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{weighted(take(a[0], a[1]), f64({1, 2, 10, 20, 100, 200}, {3, 2}))};
  };
  const Array dx = grads_at(f, {random_f64({4, 2}, 4), i32({7, -2, 2})})[0];
  expect_values(dx, {10, 20, 0, 0, 100, 200, 1, 2});
  check_grads(take_fn(), {random_f64({4, 2}, 5), i32({7, -2, 2, 3})});
}

/// d/dx of sum(take(x, idx) * w) for x (200, 1) and w = [1, 2, ...] (one weight per index).
std::vector<double> take_grad_200(const Array& idx) {
  std::vector<double> w(static_cast<size_t>(idx.size()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(i + 1);
  TraceFn f = [w](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{weighted(take(a[0], a[1]), f64(w, {static_cast<int64_t>(w.size()), 1}))};
  };
  return grads_at(f, {random_f64({200, 1}, 6), idx})[0].to_doubles();
}

TEST(IndexingVjp, ClampLimitAboveTheIndexDtype) {
  // 200 rows but i8 indices: the clamp limit 199 does not fit i8 (it saturates to 127, which
  // clamps nothing), and -5 is clamped to row 0.
  std::vector<double> expected(200, 0.0);
  expected[127] = 1 + 3;
  expected[0] = 2;
  EXPECT_EQ(take_grad_200(Array::from_vector<int8_t>({127, -5, 127}, {3})), expected);
  // u8 indices: 255 is clamped to the last row 199.
  expected.assign(200, 0.0);
  expected[199] = 1;
  expected[1] = 2;
  EXPECT_EQ(take_grad_200(Array::from_vector<uint8_t>({255, 1}, {2})), expected);
}

/// gather of (2, 3) slices of a (5, 6) operand at start indices (n, 2) (index vector last).
TraceFn slices_fn() {
  return [](const std::vector<Tensor>& a) {
    return emit("gather", {a[0], a[1]},
                {{"offset_dims", Ints{1, 2}},
                 {"collapsed_slice_dims", Ints{}},
                 {"start_index_map", Ints{0, 1}},
                 {"index_vector_dim", int64_t{1}},
                 {"slice_sizes", Ints{2, 3}}});
  };
}

TEST(IndexingVjp, GatherSlicesOf2dOperand) {
  // Overlapping slices, one start (4, 5) clamped to (3, 3).
  check_grads(slices_fn(), {random_f64({5, 6}, 8), i32({0, 0, 1, 2, 4, 5}, {3, 2})});
  // loss = sum of all slices: each element counts the slices that cover it.
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(slices_fn()(a)[0])}; };
  const Array dx = grads_at(f, {random_f64({5, 6}, 9), i32({0, 0, 1, 2, 9, 9}, {3, 2})})[0];
  expect_values(dx, {1, 1, 1, 0, 0, 0,  //
                     1, 1, 2, 1, 1, 0,  //
                     0, 0, 1, 1, 1, 0,  //
                     0, 0, 0, 1, 1, 1,  //
                     0, 0, 0, 1, 1, 1});
}

TEST(IndexingVjp, GatherIndexVectorFirstWithPermutedMap) {
  // Indices (2, 3): three index vectors along dim 0, components (operand dim 1, operand dim 0).
  // Slices (1, 2) with dim 0 collapsed: result (3, 2).
  TraceFn f = [](const std::vector<Tensor>& a) {
    return emit("gather", {a[0], a[1]},
                {{"offset_dims", Ints{1}},
                 {"collapsed_slice_dims", Ints{0}},
                 {"start_index_map", Ints{1, 0}},
                 {"index_vector_dim", int64_t{0}},
                 {"slice_sizes", Ints{1, 2}}});
  };
  const Array idx = i32({0, 4, 3,    // column starts (4 is clamped to 3)
                         1, 1, -1},  // row starts (-1 is clamped to 0)
                        {2, 3});
  check_grads(f, {random_f64({4, 5}, 10), idx});
  TraceFn s = [f](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{weighted(f(a)[0], f64({1, 2, 3, 4, 5, 6}, {3, 2}))};
  };
  const Array dx = grads_at(s, {random_f64({4, 5}, 11), idx})[0];
  expect_values(dx, {0, 0, 0, 5, 6,  //
                     1, 2, 0, 3, 4,  //
                     0, 0, 0, 0, 0,  //
                     0, 0, 0, 0, 0});
}

TEST(IndexingVjp, GatherSecondOrder) {
  // f(x) = sum(take(x, idx)^2 * w): the backward scatter-add and the forward gather are
  // differentiated again (Hessian-vector product vs differences of the gradient).
  TraceFn f = [](const std::vector<Tensor>& a) {
    const Tensor t = take(a[0], a[1]);
    return std::vector<Tensor>{weighted(t * t, f64({1, -2, 3, 0.5, 2, 1}, {3, 2}))};
  };
  check_grads(grad(f), {random_f64({4, 2}, 12), i32({2, 0, 2})});
}

// ---- scatter -----------------------------------------------------------------------------------

/// scatter of rows: operand (n, d), indices (k, 1), updates (k, d).
TraceFn scatter_rows(const char* computation) {
  return [computation](const std::vector<Tensor>& a) {
    return emit("scatter", {a[0], a[1], a[2]},
                {{"update_window_dims", Ints{1}},
                 {"inserted_window_dims", Ints{0}},
                 {"scatter_dims_to_operand_dims", Ints{0}},
                 {"index_vector_dim", int64_t{1}},
                 {"computation", std::string(computation)}});
  };
}

TEST(IndexingVjp, ScatterAddDuplicateAndOutOfBoundsIndices) {
  // Row 1 is updated twice; rows 9 and -1 are out of bounds, so those updates are skipped.
  const Array idx = i32({1, 3, 1, 9, -1}, {5, 1});
  check_grads(scatter_rows("add"), {random_f64({5, 2}, 13), idx, random_f64({5, 2}, 14)});
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{weighted(scatter_rows("add")(a)[0], f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2}))};
  };
  const std::vector<Array> g = grads_at(f, {random_f64({5, 2}, 15), idx, random_f64({5, 2}, 16)}, {0, 2});
  expect_values(g[0], {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // the operand passes through
  expect_values(g[1], {3, 4, 7, 8, 3, 4, 0, 0, 0, 0});   // w at the target row, 0 if skipped
}

TEST(IndexingVjp, ScatterAddSkipsPartlyOutOfBoundsWindows) {
  // (2, 2) windows into a (4, 4) operand: start (3, 1) does not fit (gather would have clamped
  // it to (2, 1)), so its update gets no gradient; start (2, 2) fits.
  TraceFn f = [](const std::vector<Tensor>& a) {
    return emit("scatter", {a[0], a[1], a[2]},
                {{"update_window_dims", Ints{1, 2}},
                 {"inserted_window_dims", Ints{}},
                 {"scatter_dims_to_operand_dims", Ints{0, 1}},
                 {"index_vector_dim", int64_t{1}},
                 {"computation", std::string("add")}});
  };
  const Array idx = i32({3, 1, 2, 2}, {2, 2});
  check_grads(f, {random_f64({4, 4}, 17), idx, random_f64({2, 2, 2}, 18)});
  std::vector<double> w(16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(i);
  TraceFn s = [f, w](const std::vector<Tensor>& a) { return std::vector<Tensor>{weighted(f(a)[0], f64(w, {4, 4}))}; };
  const Array du = grads_at(s, {random_f64({4, 4}, 19), idx, random_f64({2, 2, 2}, 20)}, {2})[0];
  expect_values(du, {0, 0, 0, 0, 10, 11, 14, 15});
}

TEST(IndexingVjp, ScatterAddRowsHelper) {
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{scatter_add_rows({4, 3}, a[1], a[0])}; };
  check_grads(f, {random_f64({2, 2, 3}, 21), i32({0, 2, 2, 3}, {2, 2})}, {.argnums = {0}});
}

TEST(IndexingVjp, ScatterAssignLastWriteWins) {
  // Updates 0 and 2 both write row 2: update 2 (the later one) is what remains; row 7 is out of
  // bounds. Overwritten operand rows get no gradient.
  const Array idx = i32({2, 0, 2, 7}, {4, 1});
  check_grads(scatter_rows("assign"), {random_f64({4, 2}, 22), idx, random_f64({4, 2}, 23)});
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{weighted(scatter_rows("assign")(a)[0], f64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}))};
  };
  const std::vector<Array> g = grads_at(f, {random_f64({4, 2}, 24), idx, random_f64({4, 2}, 25)}, {0, 2});
  expect_values(g[0], {0, 0, 3, 4, 0, 0, 7, 8});
  expect_values(g[1], {0, 0, 1, 2, 5, 6, 0, 0});
}

TEST(IndexingVjp, ScatterSecondOrder) {
  // f(x, u) = sum(scatter_add(x, idx, u)^2): second derivatives through scatter and the
  // gathers of its rule.
  TraceFn f = [](const std::vector<Tensor>& a) {
    const Tensor s = scatter_rows("add")(a)[0];
    return std::vector<Tensor>{sum(s * s)};
  };
  const Array idx = i32({2, 0, 2, 5}, {4, 1});
  check_grads(grad(f, {0}), {random_f64({3, 2}, 26), idx, random_f64({4, 2}, 27)});
  // The updates' cotangent is masked with a select (skipped windows get exactly 0).
  check_grads(grad(f, {0, 2}), {random_f64({3, 2}, 28), idx, random_f64({4, 2}, 29)});
}

}  // namespace
}  // namespace ingot
