// Interpreter kernels of the reduction ops: exact values incl. inf/NaN, wrapping, bools,
// empty dims, f16/bf16 rounding and reduce_window padding/dilation.
#include <gtest/gtest.h>

#include <cstdint>
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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

/// 0, 1, ..., n-1 as f32 of `shape`.
Array iota_f32(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return f32(v, shape);
}

/// reduce of `x` over `dims` with `computation`, starting at scalar `init` of x's dtype.
Array reduce(const Array& x, double init, Ints dims, const std::string& computation) {
  return run_op("reduce", {x, Array::scalar(init, x.dtype())}, {{"dimensions", dims}, {"computation", computation}});
}

Array arg(const std::string& op, const Array& x, int64_t dim, const std::string& index_dtype) {
  return run_op(op, {x}, {{"dimension", dim}, {"index_dtype", index_dtype}});
}

/// reduce_window of `x` with `attrs` plus `computation`, starting at scalar `init`.
Array reduce_window(const Array& x, double init, Attributes attrs, const std::string& computation) {
  attrs.set("computation", computation);
  return run_op("reduce_window", {x, Array::scalar(init, x.dtype())}, attrs);
}

// ---------------------------------------------------------------------------------------------
// reduce: values

TEST(ReduceInterp, SumsOverSeveralDims) {
  // x[i, j, k] = 12 i + 4 j + k.
  Array x = iota_f32({2, 3, 4});
  Array r = reduce(x, 0, {0, 2}, "add");
  ASSERT_EQ(r.shape(), (Shape{3}));
  expect_values(r, {60, 92, 124});
  // Over dim 1 only: 36 i + 12 + 3 k.
  expect_values(reduce(x, 0, {1}, "add"), {12, 15, 18, 21, 48, 51, 54, 57});
  // Everything, starting at 1: 1 + (0 + ... + 23).
  Array all = reduce(x, 1, {2, 0, 1}, "add");
  EXPECT_EQ(all.shape(), Shape{});
  expect_values(all, {277});
  // No dims: each element combined with init once.
  expect_values(reduce(f32({1, 2}), 10, {}, "add"), {11, 12});
}

TEST(ReduceInterp, InitIsCombinedOnceAndMulWorks) {
  Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(reduce(x, 10, {1}, "add"), {16, 25});
  expect_values(reduce(x, 1, {1}, "mul"), {6, 120});
  expect_values(reduce(x, 2, {0}, "mul"), {8, 20, 36});
}

TEST(ReduceInterp, MaxMinWithInfinities) {
  Array x = f32({-kInfF, -kInfF, 1, -kInfF}, {2, 2});
  expect_values(reduce(x, -kInf, {1}, "max"), {-kInf, 1});
  expect_values(reduce(x, kInf, {0}, "min"), {-kInf, -kInf});
  expect_values(reduce(f32({kInfF, 1}), 0, {0}, "add"), {kInf});
}

TEST(ReduceInterp, NaNPropagates) {
  expect_values(reduce(f32({1, kNaNF, 3}), -kInf, {0}, "max"), {kNaN});
  expect_values(reduce(f32({1, kNaNF, 3}), kInf, {0}, "min"), {kNaN});
  expect_values(reduce(f32({1, 2}), kNaN, {0}, "max"), {kNaN});  // a NaN init too
  expect_values(reduce(f32({kInfF, -kInfF}), 0, {0}, "add"), {kNaN});
  expect_values(reduce(f32({kNaNF, 1, 2, 3}, {2, 2}), -kInf, {1}, "max"), {kNaN, 3});
  expect_values(reduce(Array::from_doubles({2, kNaN}, {2}, DType::kF64), 0, {0}, "mul"), {kNaN});
}

TEST(ReduceInterp, IntegerSumsWrap) {
  Array a = i32({std::numeric_limits<int32_t>::max(), 1});
  EXPECT_EQ(reduce(a, 0, {0}, "add").to_vector<int32_t>(), std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  EXPECT_EQ(reduce(Array::from_vector<uint8_t>({200, 100}, {2}), 0, {0}, "add").to_vector<uint8_t>(),
            std::vector<uint8_t>{44});
  EXPECT_EQ(reduce(Array::from_vector<int8_t>({16, 16}, {2}), 1, {0}, "mul").to_vector<int8_t>(),
            std::vector<int8_t>{0});
  EXPECT_EQ(reduce(Array::from_vector<int8_t>({-128}, {1}), -1, {0}, "add").to_vector<int8_t>(),
            std::vector<int8_t>{127});
  EXPECT_EQ(reduce(Array::from_vector<uint32_t>({0xFFFFFFFFu, 2}, {2}), 0, {0}, "add").to_vector<uint32_t>(),
            std::vector<uint32_t>{1});
  Array l = Array::from_vector<int64_t>({std::numeric_limits<int64_t>::max(), 1}, {2});
  EXPECT_EQ(run_op("reduce", {l, Array::from_vector<int64_t>({0}, {})},
                   {{"dimensions", Ints{0}}, {"computation", std::string("add")}})
                .to_vector<int64_t>(),
            std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
}

TEST(ReduceInterp, IntegerMaxMinAndBitwise) {
  Array u = Array::from_vector<uint64_t>({1ull << 63, 1}, {2});
  EXPECT_EQ(run_op("reduce", {u, Array::from_vector<uint64_t>({0}, {})},
                   {{"dimensions", Ints{0}}, {"computation", std::string("max")}})
                .to_vector<uint64_t>(),
            std::vector<uint64_t>{1ull << 63});
  EXPECT_EQ(reduce(Array::from_vector<int8_t>({-128, 127}, {2}), 127, {0}, "min").to_vector<int8_t>(),
            std::vector<int8_t>{-128});
  EXPECT_EQ(reduce(i32({12, 10}), -1, {0}, "and").to_vector<int32_t>(), std::vector<int32_t>{8});
  EXPECT_EQ(reduce(i32({12, 10}), 0, {0}, "or").to_vector<int32_t>(), std::vector<int32_t>{14});
  EXPECT_EQ(reduce(Array::from_vector<uint8_t>({0xF0, 0x3C}, {2}), 0xFF, {0}, "and").to_vector<uint8_t>(),
            std::vector<uint8_t>{0x30});
}

TEST(ReduceInterp, BoolAndOr) {
  Array b = Array::from_vector<bool>({true, false, true, true}, {2, 2});
  EXPECT_EQ(reduce(b, 1, {1}, "and").to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(reduce(b, 0, {0}, "or").to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(reduce(b, 0, {1}, "or").to_vector<bool>(), (std::vector<bool>{true, true}));
  // On bool, add/max are OR and mul/min are AND (StableHLO).
  EXPECT_EQ(reduce(b, 0, {1}, "add").to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(reduce(b, 1, {1}, "mul").to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(reduce(b, 0, {0}, "max").to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(reduce(b, 1, {0}, "min").to_vector<bool>(), (std::vector<bool>{true, false}));
  // An empty and/or gives init.
  Array e = Array::from_vector<bool>({}, {2, 0});
  EXPECT_EQ(reduce(e, 1, {1}, "and").to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(reduce(e, 0, {1}, "or").to_vector<bool>(), (std::vector<bool>{false, false}));
}

TEST(ReduceInterp, EmptyDimensionGivesInit) {
  expect_values(reduce(f32({}, {2, 0}), 5, {1}, "add"), {5, 5});
  expect_values(reduce(f32({}, {2, 0}), -kInf, {1}, "max"), {-kInf, -kInf});
  expect_values(reduce(f32({}, {0, 3}), 1, {0}, "mul"), {1, 1, 1});
  Array s = reduce(f32({}, {0, 3}), 4, {0, 1}, "min");
  EXPECT_EQ(s.shape(), Shape{});
  expect_values(s, {4});
  // Reducing a non-empty dim of an empty array gives an empty result.
  EXPECT_EQ(reduce(f32({}, {0, 3}), 0, {1}, "add").shape(), (Shape{0}));
}

TEST(ReduceInterp, HalfSumsAccumulateInF32AndRoundOnce) {
  // bf16 has 8 significant bits: between 256 and 512 the spacing is 2.
  auto bf = [](std::vector<double> v) {
    return Array::from_doubles(v, {static_cast<int64_t>(v.size())}, DType::kBF16);
  };
  expect_values(reduce(bf({256, 1, 1}), 0, {0}, "add"), {258});  // f32 sum 258, exact
  expect_values(reduce(bf({256, 1}), 0, {0}, "add"), {256});     // 257 ties to even 256
  expect_values(reduce(bf({256, 3}), 0, {0}, "add"), {260});     // 259 ties to even 260
  EXPECT_EQ(reduce(bf({1}), 0, {0}, "add").dtype(), DType::kBF16);
  // f16 has 11 significant bits: between 2048 and 4096 the spacing is 2.
  auto h = [](std::vector<double> v) { return Array::from_doubles(v, {static_cast<int64_t>(v.size())}, DType::kF16); };
  expect_values(reduce(h({2048, 1, 1}), 0, {0}, "add"), {2050});
  expect_values(reduce(h({2048, 1}), 0, {0}, "add"), {2048});
  expect_values(reduce(h({2048, 3}), 0, {0}, "add"), {2052});
  expect_values(reduce(h({60000, 60000}), 0, {0}, "add"), {kInf});  // above f16 max 65504
  expect_values(reduce(h({1, kNaN}), -kInf, {0}, "max"), {kNaN});
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin

TEST(ArgmaxInterp, FirstIndexWinsTies) {
  Array a = arg("argmax", f32({3, 1, 3}), 0, "i32");
  EXPECT_EQ(a.dtype(), DType::kI32);
  EXPECT_EQ(a.to_vector<int32_t>(), std::vector<int32_t>{0});
  EXPECT_EQ(arg("argmin", f32({1, 0, 0}), 0, "i32").to_vector<int32_t>(), std::vector<int32_t>{1});
  EXPECT_EQ(arg("argmax", f32({-kInfF, -kInfF}), 0, "i32").to_vector<int32_t>(), std::vector<int32_t>{0});
  EXPECT_EQ(arg("argmin", f32({kInfF, -kInfF, -kInfF}), 0, "i32").to_vector<int32_t>(), std::vector<int32_t>{1});
  EXPECT_EQ(arg("argmax", f32({-kInfF, kInfF}), 0, "i32").to_vector<int32_t>(), std::vector<int32_t>{1});
}

TEST(ArgmaxInterp, NaNIsTheExtreme) {
  Array x = f32({1, kNaNF, 5, kNaNF});
  EXPECT_EQ(arg("argmax", x, 0, "i32").to_vector<int32_t>(), std::vector<int32_t>{1});
  EXPECT_EQ(arg("argmin", x, 0, "i32").to_vector<int32_t>(), std::vector<int32_t>{1});
  Array y = f32({kNaNF, 5, kInfF});
  EXPECT_EQ(arg("argmax", y, 0, "i64").to_vector<int64_t>(), std::vector<int64_t>{0});
  EXPECT_EQ(arg("argmin", y, 0, "i64").to_vector<int64_t>(), std::vector<int64_t>{0});
}

TEST(ArgmaxInterp, AlongEachDimOfMultiDimArrays) {
  Array x = f32({1, 9, 5, 9, 5, 2}, {3, 2});
  Array a0 = arg("argmax", x, 0, "i64");
  EXPECT_EQ(a0.dtype(), DType::kI64);
  EXPECT_EQ(a0.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(arg("argmin", x, 0, "i64").to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(arg("argmax", x, 1, "i32").to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 0}));
  // Middle dim of a 2x3x2 array.
  Array y = i32({1, 6, 3, 2, 3, 6, 0, 0, -1, 0, 0, -5}, {2, 3, 2});
  EXPECT_EQ(arg("argmax", y, 1, "i32").to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 0, 0}));
  EXPECT_EQ(arg("argmin", y, 1, "i32").to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 2}));
}

TEST(ArgmaxInterp, OtherDTypesAndEmptyResult) {
  EXPECT_EQ(arg("argmax", Array::from_vector<bool>({false, true, true}, {3}), 0, "i32").to_vector<int32_t>(),
            std::vector<int32_t>{1});
  EXPECT_EQ(arg("argmin", Array::from_vector<bool>({true, false, false}, {3}), 0, "i32").to_vector<int32_t>(),
            std::vector<int32_t>{1});
  EXPECT_EQ(arg("argmax", Array::from_vector<uint8_t>({3, 255, 255}, {3}), 0, "i32").to_vector<int32_t>(),
            std::vector<int32_t>{1});
  EXPECT_EQ(arg("argmin", Array::from_vector<int8_t>({-128, 0, -128}, {3}), 0, "i32").to_vector<int32_t>(),
            std::vector<int32_t>{0});
  EXPECT_EQ(arg("argmax", Array::from_doubles({1, 3, 2}, {3}, DType::kBF16), 0, "i64").to_vector<int64_t>(),
            std::vector<int64_t>{1});
  Array e = arg("argmax", f32({}, {0, 3}), 1, "i32");
  EXPECT_EQ(e.shape(), (Shape{0}));
  EXPECT_EQ(e.dtype(), DType::kI32);
}

// ---------------------------------------------------------------------------------------------
// reduce_window

TEST(ReduceWindowInterp, MaxPool2x2Stride2) {
  Array x = f32({1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16}, {4, 4});
  Attributes a{{"window_dimensions", Ints{2, 2}}, {"window_strides", Ints{2, 2}}};
  Array r = reduce_window(x, -kInf, a, "max");
  ASSERT_EQ(r.shape(), (Shape{2, 2}));
  expect_values(r, {4, 8, 12, 16});
  // A NaN poisons only its own window.
  Array y = f32({1, 2, 5, 6, 3, kNaNF, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16}, {4, 4});
  expect_values(reduce_window(y, -kInf, a, "max"), {kNaN, 8, 12, 16});
}

TEST(ReduceWindowInterp, SameLikePaddedSumAndCounts) {
  Attributes a{{"window_dimensions", Ints{3, 3}}, {"padding", Ints{1, 1, 1, 1}}};
  Array sums = reduce_window(f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}), 0, a, "add");
  ASSERT_EQ(sums.shape(), (Shape{3, 3}));
  expect_values(sums, {12, 21, 16, 27, 45, 33, 24, 39, 28});
  // Dividing by these counts gives the average pool.
  Array counts = reduce_window(f32(std::vector<float>(9, 1.0f), {3, 3}), 0, a, "add");
  expect_values(counts, {4, 6, 4, 6, 9, 6, 4, 6, 4});
}

TEST(ReduceWindowInterp, BaseAndWindowDilationByHand) {
  // x = [5, -1, 7, -3]; base dilation 2 and padding lo 1 give the 8 cells
  //   [p, 5, h, -1, h, 7, h, -3]   (p: padding, h: hole; both hold init)
  // a window of 2 with dilation 3 reads cells (s, s + 3) at s = 0, 2, 4 (stride 2):
  //   (p, -1), (h, 7), (h, -3).
  Attributes a{{"window_dimensions", Ints{2}},
               {"window_strides", Ints{2}},
               {"base_dilations", Ints{2}},
               {"window_dilations", Ints{3}},
               {"padding", Ints{1, 0}}};
  Array x = f32({5, -1, 7, -3});
  Array sums = reduce_window(x, 0, a, "add");
  ASSERT_EQ(sums.shape(), (Shape{3}));
  expect_values(sums, {-1, 7, -3});
  expect_values(reduce_window(x, 0, a, "max"), {0, 7, 0});
}

TEST(ReduceWindowInterp, StableHloSpecExample) {
  Attributes a{{"window_dimensions", Ints{2, 1}},
               {"window_strides", Ints{4, 1}},
               {"base_dilations", Ints{2, 1}},
               {"window_dilations", Ints{3, 1}},
               {"padding", Ints{2, 1, 0, 0}}};
  Array r = reduce_window(i32({1, 2, 3, 4, 5, 6}, {3, 2}), 0, a, "add");
  ASSERT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 3, 4}));
}

TEST(ReduceWindowInterp, PaddedCellsHoldInit) {
  // Padded cells contribute init, so a non-identity init shows them: [p, 1, 2] with init 10
  // gives 10 + 10 + 1 and 10 + 1 + 2.
  Attributes a{{"window_dimensions", Ints{2}}, {"padding", Ints{1, 0}}};
  expect_values(reduce_window(f32({1, 2}), 10, a, "add"), {21, 13});
  // min with +inf padding ignores the padded cell.
  Attributes b{{"window_dimensions", Ints{2}}, {"padding", Ints{0, 1}}};
  expect_values(reduce_window(f32({3, 1, 2}), kInf, b, "min"), {1, 1, 2});
  // Negative padding crops: [1, 2, 3, 4] without its first element.
  Attributes c{{"window_dimensions", Ints{2}}, {"padding", Ints{-1, 0}}};
  expect_values(reduce_window(f32({1, 2, 3, 4}), 0, c, "add"), {5, 7});
}

TEST(ReduceWindowInterp, MulIntegersAndHalfRounding) {
  Attributes a{{"window_dimensions", Ints{2}}, {"window_strides", Ints{2}}};
  expect_values(reduce_window(f32({1, 2, 3, 4}), 1, a, "mul"), {2, 12});
  Attributes w2{{"window_dimensions", Ints{2}}};
  EXPECT_EQ(reduce_window(Array::from_vector<int8_t>({100, 100}, {2}), 0, w2, "add").to_vector<int8_t>(),
            std::vector<int8_t>{-56});
  Attributes w3{{"window_dimensions", Ints{3}}};
  expect_values(reduce_window(Array::from_doubles({2048, 1, 1}, {3}, DType::kF16), 0, w3, "add"), {2050});
  expect_values(reduce_window(Array::from_doubles({256, 1, 1, 1}, {4}, DType::kBF16), 0, w2, "add"), {256, 2, 2});
}

TEST(ReduceWindowInterp, EmptyCases) {
  Array none = reduce_window(f32({1, 2}), 0, {{"window_dimensions", Ints{3}}}, "add");
  EXPECT_EQ(none.shape(), (Shape{0}));
  // An empty operand padded to two cells: one window of init cells, 3 + 3 + 3.
  Attributes a{{"window_dimensions", Ints{2}}, {"padding", Ints{1, 1}}};
  expect_values(reduce_window(f32({}, {0}), 3, a, "add"), {9});
  Array e = reduce_window(f32({}, {0, 4}), 0, {{"window_dimensions", Ints{1, 2}}}, "max");
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
}

}  // namespace
}  // namespace ingot
