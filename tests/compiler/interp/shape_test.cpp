// Interpreter kernels of the shape ops: exact values, all dtypes, empty dims.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::expect_values;
using testing::f32;
using testing::i32;
using testing::run_op;
using Ints = std::vector<int64_t>;

/// 0, 1, ..., n-1 as f32 of `shape`.
Array iota_f32(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return f32(v, shape);
}

// ---------------------------------------------------------------------------------------------
// reshape

TEST(ReshapeInterp, KeepsRowMajorOrder) {
  Array r = run_op("reshape", {i32({1, 2, 3, 4, 5, 6}, {2, 3})}, {{"shape", Ints{3, 2}}});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Array s = run_op("reshape", {f32({7.5f}, {1, 1})}, {{"shape", Ints{}}});
  EXPECT_EQ(s.shape(), Shape{});
  expect_values(s, {7.5});
}

TEST(ReshapeInterp, EmptyAndResultIsACopy) {
  Array e = run_op("reshape", {f32({}, {0, 3})}, {{"shape", Ints{3, 0}}});
  EXPECT_EQ(e.shape(), (Shape{3, 0}));
  EXPECT_EQ(e.size(), 0);
  Array x = i32({1, 2}, {2});
  Array r = run_op("reshape", {x}, {{"shape", Ints{1, 2}}});
  r.data<int32_t>()[0] = 99;  // the result owns its buffer
  EXPECT_EQ(x.to_vector<int32_t>(), (std::vector<int32_t>{1, 2}));
}

// ---------------------------------------------------------------------------------------------
// broadcast_in_dim

TEST(BroadcastInDimInterp, MapsOperandDimsToResultDims) {
  expect_values(
      run_op("broadcast_in_dim", {f32({1, 2, 3})}, {{"shape", Ints{2, 3}}, {"broadcast_dimensions", Ints{1}}}),
      {1, 2, 3, 1, 2, 3});
  expect_values(
      run_op("broadcast_in_dim", {f32({1, 2, 3})}, {{"shape", Ints{3, 2}}, {"broadcast_dimensions", Ints{0}}}),
      {1, 1, 2, 2, 3, 3});
  expect_values(run_op("broadcast_in_dim", {Array::scalar(-4, DType::kI8)},
                       {{"shape", Ints{2, 2}}, {"broadcast_dimensions", Ints{}}}),
                {-4, -4, -4, -4});
}

TEST(BroadcastInDimInterp, BroadcastsSizeOneDims) {
  // (2, 1) -> (2, 3): the size-1 dim repeats.
  expect_values(run_op("broadcast_in_dim", {f32({10, 20}, {2, 1})},
                       {{"shape", Ints{2, 3}}, {"broadcast_dimensions", Ints{0, 1}}}),
                {10, 10, 10, 20, 20, 20});
  // (1, 2) -> (2, 2, 2) with dims [0, 2]: the size-1 dim 0 repeats, result dim 1 is new.
  expect_values(run_op("broadcast_in_dim", {f32({5, 6}, {1, 2})},
                       {{"shape", Ints{2, 2, 2}}, {"broadcast_dimensions", Ints{0, 2}}}),
                {5, 6, 5, 6, 5, 6, 5, 6});
  Array e = run_op("broadcast_in_dim", {f32({1})}, {{"shape", Ints{3, 0}}, {"broadcast_dimensions", Ints{0}}});
  EXPECT_EQ(e.shape(), (Shape{3, 0}));
}

// ---------------------------------------------------------------------------------------------
// transpose

TEST(TransposeInterp, TwoByThree) {
  expect_values(run_op("transpose", {f32({1, 2, 3, 4, 5, 6}, {2, 3})}, {{"permutation", Ints{1, 0}}}),
                {1, 4, 2, 5, 3, 6});
}

TEST(TransposeInterp, TwoByThreeByFour) {
  // x[i, j, k] = 12 i + 4 j + k; result[k, i, j] = x[i, j, k] (permutation [2, 0, 1]).
  Array r = run_op("transpose", {iota_f32({2, 3, 4})}, {{"permutation", Ints{2, 0, 1}}});
  ASSERT_EQ(r.shape(), (Shape{4, 2, 3}));
  expect_values(r, {0, 4, 8,  12, 16, 20,    // k = 0
                    1, 5, 9,  13, 17, 21,    // k = 1
                    2, 6, 10, 14, 18, 22,    // k = 2
                    3, 7, 11, 15, 19, 23});  // k = 3
  // permutation [1, 2, 0]: result[j, k, i] = x[i, j, k].
  Array s = run_op("transpose", {iota_f32({2, 3, 4})}, {{"permutation", Ints{1, 2, 0}}});
  ASSERT_EQ(s.shape(), (Shape{3, 4, 2}));
  expect_values(s, {0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17, 6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23});
}

TEST(TransposeInterp, EveryDTypeCopiesElementBytes) {
  for (DType dt : kAllDTypes) {
    const std::vector<double> v =
        is_bool(dt) ? std::vector<double>{1, 0, 0, 1, 1, 0} : std::vector<double>{1, 2, 3, 4, 5, 6};
    const std::vector<double> want =
        is_bool(dt) ? std::vector<double>{1, 1, 0, 1, 0, 0} : std::vector<double>{1, 4, 2, 5, 3, 6};
    Array r = run_op("transpose", {Array::from_doubles(v, {2, 3}, dt)}, {{"permutation", Ints{1, 0}}});
    EXPECT_EQ(r.dtype(), dt);
    expect_values(r, want);
  }
  // NaN payloads and signed zeros survive bit for bit.
  const float nan_payload = std::bit_cast<float>(0x7fc01234u);
  Array x = f32({-0.0f, nan_payload}, {2, 1});
  Array r = run_op("transpose", {x}, {{"permutation", Ints{1, 0}}});
  EXPECT_TRUE(r.bitwise_equal(f32({-0.0f, nan_payload}, {1, 2})));
}

TEST(TransposeInterp, EmptyDims) {
  Array r = run_op("transpose", {f32({}, {0, 3})}, {{"permutation", Ints{1, 0}}});
  EXPECT_EQ(r.shape(), (Shape{3, 0}));
}

// ---------------------------------------------------------------------------------------------
// slice

Attributes slice_attrs(Ints start, Ints limit, Ints strides) {
  return {{"start_indices", start}, {"limit_indices", limit}, {"strides", strides}};
}

TEST(SliceInterp, StridedSlices) {
  // x = 0..19 as 4x5; rows 1, 3 and columns 0, 2, 4.
  expect_values(run_op("slice", {iota_f32({4, 5})}, slice_attrs({1, 0}, {4, 5}, {2, 2})), {5, 7, 9, 15, 17, 19});
  // Stride larger than the extent takes the first element only.
  expect_values(run_op("slice", {iota_f32({4, 5})}, slice_attrs({0, 3}, {2, 5}, {1, 7})), {3, 8});
  expect_values(run_op("slice", {i32({1, 2, 3, 4, 5, 6, 7})}, slice_attrs({1}, {7}, {3})), {2, 5});
}

TEST(SliceInterp, EmptySlicesAndDTypes) {
  Array e = run_op("slice", {iota_f32({4, 5})}, slice_attrs({2, 0}, {2, 5}, {1, 1}));
  EXPECT_EQ(e.shape(), (Shape{0, 5}));
  Array b = run_op("slice", {Array::from_vector<bool>({true, false, true, true}, {4})}, slice_attrs({1}, {4}, {2}));
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{false, true}));
  Array h = run_op("slice", {Array::from_doubles({0.5, 1.5, 2.5}, {3}, DType::kBF16)}, slice_attrs({2}, {3}, {1}));
  EXPECT_EQ(h.dtype(), DType::kBF16);
  expect_values(h, {2.5});
}

// ---------------------------------------------------------------------------------------------
// pad

Attributes pad_attrs(Ints low, Ints high, Ints interior) {
  return {{"edge_padding_low", low}, {"edge_padding_high", high}, {"interior_padding", interior}};
}

TEST(PadInterp, EdgeAndInteriorPadding) {
  expect_values(run_op("pad", {f32({1, 2, 3}), Array::scalar(0, DType::kF32)}, pad_attrs({1}, {2}, {1})),
                {0, 1, 0, 2, 0, 3, 0, 0});
}

TEST(PadInterp, NegativeEdgePaddingCropsAfterInteriorPadding) {
  // Interior 2: [1, p, p, 2, p, p, 3]; low -1 and high -2 crop to [p, p, 2, p].
  expect_values(run_op("pad", {f32({1, 2, 3}), Array::scalar(-1, DType::kF32)}, pad_attrs({-1}, {-2}, {2})),
                {-1, -1, 2, -1});
  // Cropping everything leaves an empty result.
  Array e = run_op("pad", {f32({1, 2}), Array::scalar(0, DType::kF32)}, pad_attrs({-1}, {-1}, {0}));
  EXPECT_EQ(e.shape(), (Shape{0}));
}

TEST(PadInterp, TwoDims) {
  // [[1, 2], [3, 4]]: dim 0 gets one padded row on top; dim 1 gets interior 1 then loses the
  // last column: rows become [a, p].
  Array r =
      run_op("pad", {i32({1, 2, 3, 4}, {2, 2}), Array::scalar(9, DType::kI32)}, pad_attrs({1, 0}, {0, -1}, {0, 1}));
  ASSERT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{9, 9, 1, 9, 3, 9}));
}

TEST(PadInterp, EmptyOperandAndOtherDTypes) {
  expect_values(run_op("pad", {f32({}, {0}), Array::scalar(7, DType::kF32)}, pad_attrs({2}, {1}, {3})), {7, 7, 7});
  Array b = run_op("pad", {Array::from_vector<bool>({true, true}, {2}), Array::from_vector<bool>({false}, {})},
                   pad_attrs({0}, {1}, {1}));
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true, false}));
  Array h = run_op("pad",
                   {Array::from_doubles({1.5}, {1}, DType::kF16),
                    Array::scalar(-std::numeric_limits<double>::infinity(), DType::kF16)},
                   pad_attrs({1}, {0}, {0}));
  expect_values(h, {-std::numeric_limits<double>::infinity(), 1.5});
}

// ---------------------------------------------------------------------------------------------
// concatenate

TEST(ConcatenateInterp, ThreeOperandsIncludingAnEmptyOne) {
  Array r = run_op("concatenate", {f32({1, 2, 3, 4}, {2, 2}), f32({}, {2, 0}), f32({5, 6}, {2, 1})},
                   {{"dimension", int64_t{1}}});
  ASSERT_EQ(r.shape(), (Shape{2, 3}));
  expect_values(r, {1, 2, 5, 3, 4, 6});
  Array s = run_op("concatenate", {i32({1, 2}, {1, 2}), i32({}, {0, 2}), i32({3, 4, 5, 6}, {2, 2})},
                   {{"dimension", int64_t{0}}});
  ASSERT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(ConcatenateInterp, SingleAndAllEmptyOperands) {
  expect_values(run_op("concatenate", {f32({1, 2})}, {{"dimension", int64_t{0}}}), {1, 2});
  Array e = run_op("concatenate", {f32({}, {0, 2}), f32({}, {0, 2})}, {{"dimension", int64_t{1}}});
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  Array u = run_op("concatenate",
                   {Array::from_vector<uint64_t>({1ull << 60}, {1}), Array::from_vector<uint64_t>({3, 4}, {2})},
                   {{"dimension", int64_t{0}}});
  EXPECT_EQ(u.to_vector<uint64_t>(), (std::vector<uint64_t>{1ull << 60, 3, 4}));
}

// ---------------------------------------------------------------------------------------------
// reverse

TEST(ReverseInterp, SeveralDims) {
  expect_values(run_op("reverse", {f32({1, 2, 3, 4, 5, 6}, {2, 3})}, {{"dimensions", Ints{0, 1}}}), {6, 5, 4, 3, 2, 1});
  expect_values(run_op("reverse", {f32({1, 2, 3, 4, 5, 6}, {2, 3})}, {{"dimensions", Ints{1}}}), {3, 2, 1, 6, 5, 4});
  // x[i, j, k] = 6 i + 2 j + k; result[i, j, k] = x[1 - i, j, 1 - k].
  expect_values(run_op("reverse", {iota_f32({2, 3, 2})}, {{"dimensions", Ints{2, 0}}}),
                {7, 6, 9, 8, 11, 10, 1, 0, 3, 2, 5, 4});
}

TEST(ReverseInterp, NoDimsAndEmpty) {
  expect_values(run_op("reverse", {i32({1, 2, 3})}, {{"dimensions", Ints{}}}), {1, 2, 3});
  Array e = run_op("reverse", {f32({}, {2, 0})}, {{"dimensions", Ints{0, 1}}});
  EXPECT_EQ(e.shape(), (Shape{2, 0}));
  Array s = run_op("reverse", {Array::scalar(3, DType::kI64)}, {{"dimensions", Ints{}}});
  expect_values(s, {3});
}

}  // namespace
}  // namespace ingot
