// Interpreter kernel of select_and_scatter: exact values for the XLA example, overlapping windows,
// first-wins ties, padding (never selected, windows of padding only, negative padding), NaN under
// XLA's selection loop, f16/bf16 accumulation, integer wrap and empty shapes.
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

constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

/// select_and_scatter of `source` onto `x` starting at the scalar `init` of x's dtype.
Array sas(const Array& x, const Array& source, double init, Ints window, Ints strides, Ints padding,
          const std::string& select = "GE") {
  return run_op("select_and_scatter", {x, source, Array::scalar(init, x.dtype())},
                {{"window_dimensions", window}, {"window_strides", strides}, {"padding", padding}, {"select", select}});
}

TEST(SelectAndScatterInterp, XlaDocumentationExample) {
  // XLA's SelectAndScatter example: 2x3 windows, stride 2x3, max selection, init 0.
  Array x = f32({7, 2, 5, 3, 10, 2,  //
                 3, 8, 9, 3, 4,  2,  //
                 1, 5, 7, 5, 6,  1,  //
                 0, 6, 2, 7, 2,  8},
                {4, 6});
  Array r = sas(x, f32({2, 6, 3, 1}, {2, 2}), 0, {2, 3}, {2, 3}, {0, 0, 0, 0});
  ASSERT_EQ(r.shape(), (Shape{4, 6}));
  expect_values(r, {0, 0, 0, 0, 6, 0,  //
                    0, 0, 2, 0, 0, 0,  //
                    0, 0, 3, 0, 0, 0,  //
                    0, 0, 0, 0, 0, 1});
}

TEST(SelectAndScatterInterp, OverlappingWindowsAddOntoInit) {
  // Windows [1 5 2], [5 2 5], [2 5 3]: the first 5 wins the tie in the middle window.
  Array x = f32({1, 5, 2, 5, 3});
  expect_values(sas(x, f32({10, 20, 40}), 1, {3}, {1}, {0, 0}), {1, 31, 1, 41, 1});
  // LE selects the first minimum: windows [1 5 2] -> 1, [5 2 5] -> 2, [2 5 3] -> 2.
  expect_values(sas(x, f32({10, 20, 40}), 0, {3}, {1}, {0, 0}, "LE"), {10, 0, 60, 0, 0});
}

TEST(SelectAndScatterInterp, PaddingIsNeverSelected) {
  // Padded [p -3 -1 -2], windows of 2 with stride 2: [p -3] -> -3 although every element is
  // negative, [-1 -2] -> -1.
  expect_values(sas(f32({-3, -1, -2}), f32({5, 7}), 0, {2}, {2}, {1, 0}), {5, 7, 0});
  // A window of padding only drops its source value: [p p] [3 1] over padded [p p 3 1 2].
  expect_values(sas(f32({3, 1, 2}), f32({100, 7}), 0, {2}, {2}, {2, 0}), {7, 0, 0});
  // Negative padding crops: windows of 1 over [1 2] (x[0] cropped).
  expect_values(sas(f32({3, 1, 2}), f32({5, 6}), 0, {1}, {1}, {-1, 0}), {0, 5, 6});
  // 2-D "same" 3x3 pooling shape of a constant 2x2 image: each window picks its first real cell,
  // (0, 0) for all four windows.
  expect_values(sas(f32({4, 4, 4, 4}, {2, 2}), f32({1, 2, 3, 4}, {2, 2}), 0, {3, 3}, {1, 1}, {1, 1, 1, 1}),
                {10, 0, 0, 0});
}

TEST(SelectAndScatterInterp, NaNFollowsXlasSelectionLoop) {
  // The selection moves to e when !(selected >= e): 1 -> NaN (1 >= NaN is false) -> 3
  // (NaN >= 3 is false), so the last element is selected.
  expect_values(sas(f32({1, kNaNF, 3}), f32({5}), 0, {3}, {1}, {0, 0}), {0, 0, 5});
  // A NaN source value is added like any other.
  expect_values(sas(f32({1, 2}), f32({kNaNF}), 0, {2}, {1}, {0, 0}), {0, kNaNF});
}

TEST(SelectAndScatterInterp, HalfAccumulatesInF32AndRoundsOnce) {
  // Three windows over padded [p p 9 p p] all select the 9: 1 + 2^-11 + 2^-11 = 1 + 2^-10,
  // exact in f16 (whereas rounding after each add would stay at 1: 1 + 2^-11 ties to even).
  const double e = 1.0 / 2048;
  auto h = [](std::vector<double> v) { return Array::from_doubles(v, {static_cast<int64_t>(v.size())}, DType::kF16); };
  Array r = sas(h({9}), h({1, e, e}), 0, {3}, {1}, {2, 2});
  EXPECT_EQ(r.dtype(), DType::kF16);
  expect_values(r, {1 + 2 * e});
  // bf16 (8 significant bits): 256 + 1 + 1 = 258 exactly, but 256 + 1 alone ties to 256.
  auto bf = [](std::vector<double> v) {
    return Array::from_doubles(v, {static_cast<int64_t>(v.size())}, DType::kBF16);
  };
  expect_values(sas(bf({9}), bf({256, 1, 1}), 0, {3}, {1}, {2, 2}), {258});
  expect_values(sas(bf({9}), bf({256, 1}), 0, {2}, {1}, {1, 1}), {256});
}

TEST(SelectAndScatterInterp, IntegersWrapAndCompareExactly) {
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  Array r = run_op("select_and_scatter", {i32({4, 9, 9}), i32({1, 2}), Array::from_vector<int32_t>({kMax}, {})},
                   {{"window_dimensions", Ints{2}},
                    {"window_strides", Ints{1}},
                    {"padding", Ints{0, 0}},
                    {"select", std::string("GE")}});
  // Windows [4 9] and [9 9] both select index 1: kMax + 1 + 2 wraps to INT_MIN + 2.
  EXPECT_EQ(r.dtype(), DType::kI32);
  expect_values(r, {static_cast<double>(kMax), static_cast<double>(INT32_MIN + 2), static_cast<double>(kMax)});
}

TEST(SelectAndScatterInterp, EmptyShapes) {
  // No windows fit: the result is init everywhere.
  expect_values(sas(f32({1, 2}), f32({}, {0}), 3, {3}, {1}, {0, 0}), {3, 3});
  // An empty operand.
  Array r = sas(f32({}, {0, 2}), f32({}, {0, 2}), 0, {1, 1}, {1, 1}, {0, 0, 0, 0});
  EXPECT_EQ(r.shape(), (Shape{0, 2}));
}

}  // namespace
}  // namespace ingot
