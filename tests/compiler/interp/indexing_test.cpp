// Exact values of gather and scatter under the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "op_attrs.h"
#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::gather_attrs;
using testing::scatter_attrs;
using testing::expect_values;
using testing::f32;
using testing::i32;
using testing::run_op;
using Ints = std::vector<int64_t>;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Rows of a (n, d) table at (k,) indices.
Attributes embedding(int64_t d) { return gather_attrs({1}, {0}, {0}, 1, {1, d}); }

/// The (5, 3) table whose row r is [3r, 3r + 1, 3r + 2].
Array table() { return f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {5, 3}); }

// ----- gather -----

TEST(GatherInterp, EmbeddingLookupClampsOutOfRangeIndex) {
  Array y = run_op("gather", {table(), i32({3, 7})}, embedding(3));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  // Index 7 is clamped to the last row (4).
  expect_values(y, {9, 10, 11, 12, 13, 14});
}

TEST(GatherInterp, NegativeIndexClampsToZero) {
  expect_values(run_op("gather", {table(), i32({-2, 1})}, embedding(3)), {0, 1, 2, 3, 4, 5});
}

TEST(GatherInterp, HugeUnsignedIndexClamps) {
  Array idx = Array::from_vector<uint64_t>({(uint64_t{1} << 63) + 5, 2}, {2});
  expect_values(run_op("gather", {table(), idx}, embedding(3)), {12, 13, 14, 6, 7, 8});
  Array idx8 = Array::from_vector<int8_t>({-128, 127}, {2});
  expect_values(run_op("gather", {table(), idx8}, embedding(3)), {0, 1, 2, 12, 13, 14});
}

TEST(GatherInterp, BatchOfSequencesWithImplicitIndexVector) {
  // indices (2, 2), index_vector_dim 2 = rank: every element is one row index.
  Array y = run_op("gather", {table(), i32({0, 4, 2, 2}, {2, 2})}, gather_attrs({2}, {0}, {0}, 2, {1, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  expect_values(y, {0, 1, 2, 12, 13, 14, 6, 7, 8, 6, 7, 8});
}

TEST(GatherInterp, OffsetDimBeforeBatchDim) {
  Array y = run_op("gather", {table(), i32({1, 4})}, gather_attrs({0}, {0}, {0}, 1, {1, 3}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  expect_values(y, {3, 12, 4, 13, 5, 14});
}

TEST(GatherInterp, StableHloSpecExample) {
  Array operand =
      i32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}, {3, 4, 2});
  Array idx = Array::from_vector<int64_t>({0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 0, 2}, {2, 3, 2});
  Array y = run_op("gather", {operand, idx}, gather_attrs({2, 3}, {0}, {1, 0}, 2, {1, 2, 2}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 2,  3,  4,  3,  4,  5,  6,  13, 14, 15, 16,
                                                          9, 10, 11, 12, 11, 12, 13, 14, 17, 18, 19, 20}));
}

TEST(GatherInterp, IndexVectorDimZeroReadsColumns) {
  // indices (2, 3) with index_vector_dim 0: index vectors (0, 0), (1, 2), (2, 1).
  Array operand = f32({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3});
  Array y = run_op("gather", {operand, i32({0, 1, 2, 0, 2, 1}, {2, 3})}, gather_attrs({}, {0, 1}, {0, 1}, 0, {1, 1}));
  EXPECT_EQ(y.shape(), (Shape{3}));
  expect_values(y, {0, 5, 7});
}

TEST(GatherInterp, StartIndexMapPermutesComponents) {
  // Index vector (1, 2) maps component 0 to operand dim 1 and component 1 to dim 0:
  // operand[2, 1] of a (3, 4) iota is 9.
  Array operand = f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Array y = run_op("gather", {operand, i32({1, 2}, {1, 2})}, gather_attrs({}, {0, 1}, {1, 0}, 1, {1, 1}));
  expect_values(y, {9});
}

TEST(GatherInterp, WindowStartIsClampedSoTheSliceFits) {
  // A 2x2 window at (-1, 3) of a 4x4 iota is clamped to start (0, 2).
  Array operand = f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {4, 4});
  Array y = run_op("gather", {operand, i32({-1, 3})}, gather_attrs({0, 1}, {}, {0, 1}, 0, {2, 2}));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  expect_values(y, {2, 3, 6, 7});
}

TEST(GatherInterp, CopiesSpecialValuesAndOtherDTypes) {
  Array special = f32({INFINITY, NAN, -INFINITY, -0.0f}, {2, 2});
  expect_values(run_op("gather", {special, i32({1, 0})}, embedding(2)), {-kInf, 0, kInf, kNaN});
  Array b = Array::from_vector<bool>({true, false, false, true}, {2, 2});
  EXPECT_EQ(run_op("gather", {b, i32({1})}, embedding(2)).to_vector<bool>(), (std::vector<bool>{false, true}));
  Array h = Array::from_doubles({1.5, 2.5, 3.5, 4.5}, {2, 2}, DType::kBF16);
  Array y = run_op("gather", {h, i32({1, 1})}, embedding(2));
  EXPECT_EQ(y.dtype(), DType::kBF16);
  expect_values(y, {3.5, 4.5, 3.5, 4.5});
}

TEST(GatherInterp, EmptyIndicesGiveEmptyResult) {
  Array y = run_op("gather", {table(), Array::zeros({0}, DType::kI32)}, embedding(3));
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  EXPECT_EQ(y.size(), 0);
}

// ----- scatter -----

/// Row updates of a (n, d) table at (k,) indices.
Attributes rows(const std::string& computation) { return scatter_attrs({1}, {0}, {0}, 1, computation); }

TEST(ScatterInterp, EmbeddingGradientAccumulatesDuplicatesAndSkipsOutOfBounds) {
  Array grad = Array::zeros({5, 3}, DType::kF32);
  Array idx = i32({1, 3, 1, 9, -1});
  Array upd = f32({1, 2, 3, 10, 20, 30, 100, 200, 300, 7, 7, 7, 5, 5, 5}, {5, 3});
  Array y = run_op("scatter", {grad, idx, upd}, rows("add"));
  EXPECT_EQ(y.shape(), (Shape{5, 3}));
  // Row 1 gets both of its updates; indices 9 and -1 are out of bounds and skipped.
  expect_values(y, {0, 0, 0, 101, 202, 303, 0, 0, 0, 10, 20, 30, 0, 0, 0});
}

TEST(ScatterInterp, AddsOntoTheOperand) {
  Array y = run_op("scatter", {table(), i32({4}), f32({1, 1, 1}, {1, 3})}, rows("add"));
  expect_values(y, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15});
}

TEST(ScatterInterp, WindowThatDoesNotFitIsSkippedWhole) {
  // 1-D operand of 5, windows of 3: start 3 would need [3, 6) and is skipped entirely (not
  // clipped); start 2 fits exactly.
  Array operand = Array::zeros({5}, DType::kF32);
  Array idx = i32({3, 2}, {2, 1});
  Array upd = f32({1, 1, 1, 10, 20, 30}, {2, 3});
  Array y = run_op("scatter", {operand, idx, upd}, scatter_attrs({1}, {}, {0}, 1, "add"));
  expect_values(y, {0, 0, 10, 20, 30});
}

TEST(ScatterInterp, AssignLastUpdateWinsForDuplicates) {
  // indices (3,) with index_vector_dim 1 = rank: scalar updates into a vector.
  Array operand = f32({1, 2, 3, 4, 5});
  Array y = run_op("scatter", {operand, i32({0, 4, 0}), f32({10, 50, 99})}, scatter_attrs({}, {0}, {0}, 1, "assign"));
  expect_values(y, {99, 2, 3, 4, 50});
}

TEST(ScatterInterp, AssignRowsAndBool) {
  Array y = run_op("scatter", {table(), i32({2, 0}), f32({-1, -2, -3, -4, -5, -6}, {2, 3})}, rows("assign"));
  expect_values(y, {-4, -5, -6, 3, 4, 5, -1, -2, -3, 9, 10, 11, 12, 13, 14});
  Array b = Array::from_vector<bool>({false, false, false}, {3});
  Array bu = Array::from_vector<bool>({true}, {1});
  EXPECT_EQ(run_op("scatter", {b, i32({1}), bu}, scatter_attrs({}, {0}, {0}, 1, "assign")).to_vector<bool>(),
            (std::vector<bool>{false, true, false}));
}

TEST(ScatterInterp, StableHloSpecExample) {
  Array operand =
      i32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}, {3, 4, 2});
  Array idx = Array::from_vector<int64_t>({0, 2, 1, 0, 2, 1, 0, 1, 1, 0, 2, 0}, {2, 3, 2});
  Array upd = Array::full({2, 3, 2, 2}, 1.0, DType::kI32);
  Array y = run_op("scatter", {operand, idx, upd}, scatter_attrs({2, 3}, {0}, {1, 0}, 2, "add"));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1,  2,  5,  6,  8,  9,  8,  9,  10, 11, 12, 13,
                                                          14, 15, 16, 17, 18, 19, 20, 21, 21, 22, 23, 24}));
}

TEST(ScatterInterp, IntegerAddWraps) {
  Array operand = i32({std::numeric_limits<int32_t>::max(), 0});
  Array y = run_op("scatter", {operand, i32({0}), i32({1})}, scatter_attrs({}, {0}, {0}, 1, "add"));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 0}));
  Array u = Array::from_vector<uint8_t>({250}, {1});
  Array uu = Array::from_vector<uint8_t>({3, 4}, {2});
  EXPECT_EQ(run_op("scatter", {u, i32({0, 0}), uu}, scatter_attrs({}, {0}, {0}, 1, "add")).to_vector<uint8_t>(),
            std::vector<uint8_t>{1});
}

TEST(ScatterInterp, Bf16RoundsAfterEveryUpdate) {
  // Each update is one `add` whose result is stored in bf16 (spacing 2 at 256): 256 + 1 = 257
  // rounds to 256 (ties to even), twice.
  Array operand = Array::from_doubles({256}, {1}, DType::kBF16);
  Array upd = Array::from_doubles({1, 1}, {2}, DType::kBF16);
  Array y = run_op("scatter", {operand, i32({0, 0}), upd}, scatter_attrs({}, {0}, {0}, 1, "add"));
  EXPECT_EQ(y.dtype(), DType::kBF16);
  expect_values(y, {256});
}

TEST(ScatterInterp, NaNAndInfPropagate) {
  Array operand = f32({1, INFINITY, 3});
  Array upd = f32({NAN, -INFINITY, INFINITY});
  Array y = run_op("scatter", {operand, i32({0, 1, 2}), upd}, scatter_attrs({}, {0}, {0}, 1, "add"));
  expect_values(y, {kNaN, kNaN, kInf});
}

TEST(ScatterInterp, EmptyUpdatesLeaveOperandUnchanged) {
  Array y =
      run_op("scatter", {table(), Array::zeros({0}, DType::kI32), Array::zeros({0, 3}, DType::kF32)}, rows("add"));
  expect_values(y, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
}

TEST(ScatterInterp, DoesNotModifyTheInputArray) {
  Array operand = f32({1, 2, 3});
  run_op("scatter", {operand, i32({0}), f32({5})}, scatter_attrs({}, {0}, {0}, 1, "assign"));
  expect_values(operand, {1, 2, 3});
}

TEST(IndexingInterp, KernelsRejectUnverifiedDirectCalls) {
  const ir::OpDef& gather = ir::OpRegistry::builtin().get("gather");
  std::vector<ir::TensorType> types = {{{2, 3}, DType::kF32}};
  const std::vector<Array> bad = {table(), f32({1, 2})};
  testing::expect_error([&] { gather.interpret(bad, embedding(3), types); }, ErrorCode::kDTypeMismatch,
                        {"gather", "start_indices", "f32"});
  const ir::OpDef& scatter = ir::OpRegistry::builtin().get("scatter");
  std::vector<ir::TensorType> wrong = {{{5, 4}, DType::kF32}};
  const std::vector<Array> in = {table(), i32({1}), f32({1, 1, 1}, {1, 3})};
  testing::expect_error([&] { scatter.interpret(in, rows("add"), wrong); }, ErrorCode::kShapeMismatch,
                        {"scatter", "f32[5,4]", "f32[5,3]"});
}

}  // namespace
}  // namespace ingot
