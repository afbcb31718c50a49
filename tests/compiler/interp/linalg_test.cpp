// Exact values of dot_general and convolution under the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "op_attrs.h"
#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::dot_attrs;
using testing::nhwc;
using testing::expect_values;
using testing::f32;
using testing::i32;
using testing::run_op;
using Ints = std::vector<int64_t>;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

Attributes matmul() { return dot_attrs({}, {}, {1}, {0}); }

// ----- dot_general -----

TEST(DotGeneralInterp, Matmul2x3By3x2) {
  Array a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = f32({7, 8, 9, 10, 11, 12}, {3, 2});
  Array c = run_op("dot_general", {a, b}, matmul());
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  // [1*7+2*9+3*11, 1*8+2*10+3*12; 4*7+5*9+6*11, 4*8+5*10+6*12]
  expect_values(c, {58, 64, 139, 154});
}

TEST(DotGeneralInterp, BatchedMatmul) {
  Array a = f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Array b = f32({1, 0, 0, 1, 0, 1, 1, 0}, {2, 2, 2});  // identity, then a swap
  Array c = run_op("dot_general", {a, b}, dot_attrs({0}, {0}, {2}, {1}));
  EXPECT_EQ(c.shape(), (Shape{2, 2, 2}));
  expect_values(c, {1, 2, 3, 4, 6, 5, 8, 7});
}

TEST(DotGeneralInterp, BatchDimNotLeading) {
  // lhs (3, 2) batched on dim 1, rhs (2, 3) batched on dim 0, contracting lhs 0 / rhs 1:
  // out[b] = sum_k lhs[k, b] * rhs[b, k].
  Array a = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  Array b = f32({1, 1, 1, 1, 0, -1}, {2, 3});
  Array c = run_op("dot_general", {a, b}, dot_attrs({1}, {0}, {0}, {1}));
  EXPECT_EQ(c.shape(), (Shape{2}));
  expect_values(c, {1 + 3 + 5, 2 - 6});
}

TEST(DotGeneralInterp, TransposedContraction) {
  // A^T B with A (3, 2), B (3, 2): contract dim 0 of both.
  Array a = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  Array b = f32({1, 0, 0, 1, 1, 1}, {3, 2});
  expect_values(run_op("dot_general", {a, b}, dot_attrs({}, {}, {0}, {0})), {6, 8, 8, 10});
}

TEST(DotGeneralInterp, TwoContractingDims) {
  // lhs (2, 2) and rhs (2, 2) contracted on both dims pairing lhs (0, 1) with rhs (1, 0):
  // sum_ij lhs[i, j] * rhs[j, i] = trace(lhs @ rhs).
  Array a = f32({1, 2, 3, 4}, {2, 2});
  Array b = f32({5, 6, 7, 8}, {2, 2});
  Array c = run_op("dot_general", {a, b}, dot_attrs({}, {}, {0, 1}, {1, 0}));
  EXPECT_EQ(c.shape(), Shape{});
  expect_values(c, {1 * 5 + 2 * 7 + 3 * 6 + 4 * 8});
}

TEST(DotGeneralInterp, VectorDotAndOuterProduct) {
  Array d = run_op("dot_general", {f32({1, 2, 3}), f32({4, 5, 6})}, dot_attrs({}, {}, {0}, {0}));
  EXPECT_EQ(d.shape(), Shape{});
  expect_values(d, {32});
  Array o = run_op("dot_general", {f32({1, 2}), f32({3, 4, 5})}, {});
  EXPECT_EQ(o.shape(), (Shape{2, 3}));
  expect_values(o, {3, 4, 5, 6, 8, 10});
}

TEST(DotGeneralInterp, IntegerOverflowWraps) {
  // 65536 * 65536 = 2^32 wraps to 0; (2^31 - 1) * 2^16 + 1 = 2^47 - 2^16 + 1 wraps to
  // -2^16 + 1; (2^31 - 1) + 1 wraps to INT32_MIN.
  Array a = i32({65536, 0, 2147483647, 1}, {2, 2});
  Array b = i32({65536, 1}, {2});
  expect_values(run_op("dot_general", {a, b}, matmul()), {0, -65535});
  Array c = run_op("dot_general", {i32({2147483647, 1}), i32({1, 1})}, dot_attrs({}, {}, {0}, {0}));
  EXPECT_EQ(c.to_vector<int32_t>(), std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  // i8: -3 * 5 + (-2) * (-7) = -1; 100 * 5 + 0 = 500 wraps to 500 - 512 = -12.
  Array p = Array::from_vector<int8_t>({-3, -2, 100, 0}, {2, 2});
  Array q = Array::from_vector<int8_t>({5, -7}, {2});
  EXPECT_EQ(run_op("dot_general", {p, q}, matmul()).to_vector<int8_t>(), (std::vector<int8_t>{-1, -12}));
  // u8: 200 * 2 + 100 = 500 wraps to 244.
  Array u = Array::from_vector<uint8_t>({200, 100}, {2});
  Array v = Array::from_vector<uint8_t>({2, 1}, {2});
  EXPECT_EQ(run_op("dot_general", {u, v}, dot_attrs({}, {}, {0}, {0})).to_vector<uint8_t>(), std::vector<uint8_t>{244});
  // u64: (2^64 - 1) * 2 + 3 wraps to 1.
  Array x = Array::from_vector<uint64_t>({~uint64_t{0}, 3}, {2});
  Array y = Array::from_vector<uint64_t>({2, 1}, {2});
  EXPECT_EQ(run_op("dot_general", {x, y}, dot_attrs({}, {}, {0}, {0})).to_vector<uint64_t>(), std::vector<uint64_t>{1});
}

TEST(DotGeneralInterp, Bf16AccumulatesInFloatAndRoundsOnce) {
  // 256 + 1 + 1: bf16 has spacing 2 at 256, so rounding after each add would stay at 256
  // (257 ties to even); float accumulation gives 258, which bf16 represents exactly.
  Array a = Array::from_doubles({256, 1, 1}, {3}, DType::kBF16);
  Array b = Array::from_doubles({1, 1, 1}, {3}, DType::kBF16);
  Array c = run_op("dot_general", {a, b}, dot_attrs({}, {}, {0}, {0}));
  EXPECT_EQ(c.dtype(), DType::kBF16);
  expect_values(c, {258});
  // The final store rounds to nearest even: 256 + 1 = 257 -> 256; 256 + 3 = 259 -> 260.
  Array d = Array::from_doubles({256, 1, 256, 3}, {2, 2}, DType::kBF16);
  Array e = Array::from_doubles({1, 1}, {2}, DType::kBF16);
  expect_values(run_op("dot_general", {d, e}, matmul()), {256, 260});
}

TEST(DotGeneralInterp, F16AccumulatesInFloat) {
  // f16 has spacing 2 at 2048: 2048 + 1 + 1 = 2050 only if accumulated in float.
  Array a = Array::from_doubles({2048, 1, 1}, {3}, DType::kF16);
  Array b = Array::from_doubles({1, 1, 1}, {3}, DType::kF16);
  Array c = run_op("dot_general", {a, b}, dot_attrs({}, {}, {0}, {0}));
  EXPECT_EQ(c.dtype(), DType::kF16);
  expect_values(c, {2050});
  // Overflow on store: 40000 * 2 = 80000 > 65504 rounds to +inf.
  Array big = Array::from_doubles({40000}, {1}, DType::kF16);
  Array two = Array::from_doubles({2}, {1}, DType::kF16);
  expect_values(run_op("dot_general", {big, two}, dot_attrs({}, {}, {0}, {0})), {kInf});
}

TEST(DotGeneralInterp, F64) {
  Array a = Array::from_vector<double>({0.1, 0.2}, {2});
  Array b = Array::from_vector<double>({3, 4}, {2});
  EXPECT_EQ(run_op("dot_general", {a, b}, dot_attrs({}, {}, {0}, {0})).to_vector<double>(),
            std::vector<double>{0.1 * 3 + 0.2 * 4});
}

TEST(DotGeneralInterp, EmptyContractingDimGivesZeros) {
  Array a = Array::zeros({2, 0}, DType::kF32);
  Array b = Array::zeros({0, 3}, DType::kF32);
  Array c = run_op("dot_general", {a, b}, matmul());
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  expect_values(c, {0, 0, 0, 0, 0, 0});
  Array ai = Array::zeros({2, 0}, DType::kI32);
  Array bi = Array::zeros({0}, DType::kI32);
  expect_values(run_op("dot_general", {ai, bi}, matmul()), {0, 0});
}

TEST(DotGeneralInterp, EmptyFreeDimGivesEmptyResult) {
  Array a = Array::zeros({0, 3}, DType::kF32);
  Array b = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  Array c = run_op("dot_general", {a, b}, matmul());
  EXPECT_EQ(c.shape(), (Shape{0, 2}));
  EXPECT_EQ(c.size(), 0);
}

TEST(DotGeneralInterp, NaNAndInfPropagate) {
  Array a = f32({INFINITY, 1, 1, NAN, -INFINITY, 0}, {3, 2});
  Array b = f32({1, 0, 2, 3}, {2, 2});
  // row 0: [inf*1 + 1*2, inf*0 + 1*3] = [inf, nan]; row 1: nan everywhere;
  // row 2: [-inf*1 + 0*2, -inf*0 + 0*3] = [-inf, nan].
  expect_values(run_op("dot_general", {a, b}, matmul()), {kInf, kNaN, kNaN, kNaN, -kInf, kNaN});
  // inf + -inf = nan.
  expect_values(run_op("dot_general", {f32({INFINITY, -INFINITY}), f32({1, 1})}, dot_attrs({}, {}, {0}, {0})), {kNaN});
}

// ----- convolution -----

TEST(ConvolutionInterp, NoReversalValidPadding) {
  // 3x3 image, 2x2 kernel [[1, 0], [0, 1]] applied as is (cross-correlation).
  Array x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  Array k = f32({1, 0, 0, 1}, {2, 2, 1, 1});
  Array y = run_op("convolution", {x, k}, nhwc());
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
  expect_values(y, {1 + 5, 2 + 6, 4 + 8, 5 + 9});
}

TEST(ConvolutionInterp, Stride2) {
  Array x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 4, 4, 1});
  Array k = f32({1, 1, 1, 1}, {2, 2, 1, 1});
  Array y = run_op("convolution", {x, k}, nhwc({{"window_strides", Ints{2, 2}}}));
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
  expect_values(y, {1 + 2 + 5 + 6, 3 + 4 + 7 + 8, 9 + 10 + 13 + 14, 11 + 12 + 15 + 16});
}

TEST(ConvolutionInterp, SamePadding) {
  // 3x3 box filter with one cell of zero padding on every side: sums of in-bounds neighbours.
  Array x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  Array k = Array::full({3, 3, 1, 1}, 1.0, DType::kF32);
  Array y = run_op("convolution", {x, k}, nhwc({{"padding", Ints{1, 1, 1, 1}}}));
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 1}));
  expect_values(y, {12, 21, 16, 27, 45, 33, 24, 39, 28});
}

TEST(ConvolutionInterp, SamePaddingInt32) {
  Array x = i32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  Array k = Array::full({3, 3, 1, 1}, 1.0, DType::kI32);
  Array y = run_op("convolution", {x, k}, nhwc({{"padding", Ints{1, 1, 1, 1}}}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{12, 21, 16, 27, 45, 33, 24, 39, 28}));
}

TEST(ConvolutionInterp, AsymmetricAndNegativePadding) {
  // Row [1, 2, 3, 4] with kernel [1, 10]: padding (lo 1, hi 0) prepends a zero;
  // padding (lo -1, hi 0) drops the first element.
  Array x = f32({1, 2, 3, 4}, {1, 1, 4, 1});
  Array k = f32({1, 10}, {1, 2, 1, 1});
  expect_values(run_op("convolution", {x, k}, nhwc({{"padding", Ints{0, 0, 1, 0}}})), {0 + 10, 1 + 20, 2 + 30, 3 + 40});
  expect_values(run_op("convolution", {x, k}, nhwc({{"padding", Ints{0, 0, -1, 0}}})), {2 + 30, 3 + 40});
}

TEST(ConvolutionInterp, RhsDilation) {
  // Kernel [1, 1] dilated by 2 spans 3 cells: x[i] + x[i + 2].
  Array x = f32({1, 2, 3, 4, 5}, {1, 1, 5, 1});
  Array k = f32({1, 1}, {1, 2, 1, 1});
  Array y = run_op("convolution", {x, k}, nhwc({{"rhs_dilation", Ints{1, 2}}}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 1}));
  expect_values(y, {4, 6, 8});
}

TEST(ConvolutionInterp, LhsDilation) {
  // [1, 2, 3] dilated by 2 is [1, 0, 2, 0, 3]; kernel [1, 10].
  Array x = f32({1, 2, 3}, {1, 1, 3, 1});
  Array k = f32({1, 10}, {1, 2, 1, 1});
  Array y = run_op("convolution", {x, k}, nhwc({{"lhs_dilation", Ints{1, 2}}}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 1}));
  expect_values(y, {1, 20, 2, 30});
}

TEST(ConvolutionInterp, ChannelsMixLikeAMatrixProduct) {
  // 1x1 kernel: out[o] = sum_i x[i] * k[i, o].
  Array x = f32({1, 2}, {1, 1, 1, 2});
  Array k = f32({1, 2, 3, 4, 5, 6}, {1, 1, 2, 3});
  expect_values(run_op("convolution", {x, k}, nhwc()), {9, 12, 15});
}

TEST(ConvolutionInterp, DepthwiseFeatureGroups) {
  // Two channels, feature_group_count 2: output 0 filters channel 0 with [1, 1], output 1
  // filters channel 1 with [1, -1].
  Array x = f32({1, 10, 2, 20, 3, 30}, {1, 1, 3, 2});
  Array k = f32({1, 1, 1, -1}, {1, 2, 1, 2});
  Array y = run_op("convolution", {x, k}, nhwc({{"feature_group_count", int64_t{2}}}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_values(y, {1 + 2, 10 - 20, 2 + 3, 20 - 30});
}

TEST(ConvolutionInterp, FeatureGroupsWithTwoOutputsPerGroup) {
  // Input channels (a, b, c, d), 2 groups: outputs 0-1 read (a, b), outputs 2-3 read (c, d).
  Array x = f32({1, 2, 3, 4}, {1, 1, 1, 4});
  // k[i, o] for i in 0..1 (within the group), o in 0..3.
  Array k = f32({1, 0, 1, 0, 0, 1, 0, 1}, {1, 1, 2, 4});
  Array y = run_op("convolution", {x, k}, nhwc({{"feature_group_count", int64_t{2}}}));
  expect_values(y, {1, 2, 3, 4});
}

TEST(ConvolutionInterp, BatchGroups) {
  // 1-D, NWC: batch 2 split into 2 groups; output feature 0 uses batch 0 and kernel feature 0,
  // output feature 1 uses batch 1 and kernel feature 1.
  Attributes a{{"input_batch_dimension", int64_t{0}},           {"input_feature_dimension", int64_t{2}},
               {"input_spatial_dimensions", Ints{1}},           {"kernel_input_feature_dimension", int64_t{1}},
               {"kernel_output_feature_dimension", int64_t{2}}, {"kernel_spatial_dimensions", Ints{0}},
               {"output_batch_dimension", int64_t{0}},          {"output_feature_dimension", int64_t{2}},
               {"output_spatial_dimensions", Ints{1}},          {"batch_group_count", int64_t{2}}};
  Array x = f32({1, 2, 3, 4}, {2, 2, 1});
  Array k = f32({10, 100}, {1, 1, 2});
  Array y = run_op("convolution", {x, k}, a);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2}));
  expect_values(y, {10, 300, 20, 400});
}

TEST(ConvolutionInterp, Bf16AccumulatesInFloat) {
  Array x = Array::from_doubles({256, 1, 1}, {1, 1, 3, 1}, DType::kBF16);
  Array k = Array::from_doubles({1, 1, 1}, {1, 3, 1, 1}, DType::kBF16);
  Array y = run_op("convolution", {x, k}, nhwc());
  EXPECT_EQ(y.dtype(), DType::kBF16);
  expect_values(y, {258});
}

TEST(ConvolutionInterp, NaNAndInfPropagateAndPaddingIsZero) {
  // Padding cells are zeros, so inf next to the border gives inf*w + 0*w, never 0*inf.
  Array x = f32({INFINITY, 1, NAN}, {1, 1, 3, 1});
  Array k = f32({1, 1}, {1, 2, 1, 1});
  expect_values(run_op("convolution", {x, k}, nhwc({{"padding", Ints{0, 0, 1, 1}}})), {kInf, kInf, kNaN, kNaN});
}

TEST(ConvolutionInterp, EmptyOutputAndEmptyFeatures) {
  Array x = f32({1, 2, 3, 4}, {1, 2, 2, 1});
  Array k = Array::full({3, 3, 1, 1}, 1.0, DType::kF32);
  EXPECT_EQ(run_op("convolution", {x, k}, nhwc()).shape(), (Shape{1, 0, 0, 1}));
  Array x0 = Array::zeros({1, 2, 2, 0}, DType::kF32);
  Array k0 = Array::zeros({1, 1, 0, 2}, DType::kF32);
  Array y = run_op("convolution", {x0, k0}, nhwc());
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
  expect_values(y, {0, 0, 0, 0, 0, 0, 0, 0});
}

// ----- convolution against a direct reference on random data -----

struct Conv2dCase {
  int64_t n, h, w, c, kh, kw, o;
  Ints strides, padding, lhs_dilation, rhs_dilation;
  int64_t feature_groups = 1, batch_groups = 1;
};

/// Straightforward 2-D NHWC/HWIO convolution: materialises the zero-padded, lhs-dilated input,
/// then slides the rhs-dilated kernel over it. Padding must be >= 0.
std::vector<double> reference_conv2d(const Conv2dCase& p, const std::vector<double>& x, const std::vector<double>& k,
                                     Shape* out_shape) {
  const int64_t hd = (p.h - 1) * p.lhs_dilation[0] + 1, wd = (p.w - 1) * p.lhs_dilation[1] + 1;
  const int64_t hp = p.padding[0] + hd + p.padding[1], wp = p.padding[2] + wd + p.padding[3];
  std::vector<double> padded(static_cast<size_t>(p.n * hp * wp * p.c), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t i = 0; i < p.h; ++i)
      for (int64_t j = 0; j < p.w; ++j)
        for (int64_t c = 0; c < p.c; ++c) {
          const int64_t pi = p.padding[0] + i * p.lhs_dilation[0];
          const int64_t pj = p.padding[2] + j * p.lhs_dilation[1];
          padded[static_cast<size_t>(((n * hp + pi) * wp + pj) * p.c + c)] =
              x[static_cast<size_t>(((n * p.h + i) * p.w + j) * p.c + c)];
        }
  const int64_t ekh = (p.kh - 1) * p.rhs_dilation[0] + 1, ekw = (p.kw - 1) * p.rhs_dilation[1] + 1;
  const int64_t oh = (hp - ekh) / p.strides[0] + 1, ow = (wp - ekw) / p.strides[1] + 1;
  const int64_t on = p.n / p.batch_groups;
  const int64_t ki = p.c / p.feature_groups;  // kernel input features
  const int64_t per_group = p.o / (p.feature_groups * p.batch_groups);
  *out_shape = {on, oh, ow, p.o};
  std::vector<double> out;
  for (int64_t n = 0; n < on; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t z = 0; z < ow; ++z)
        for (int64_t o = 0; o < p.o; ++o) {
          const int64_t g = o / per_group;
          const int64_t src_n = p.batch_groups > 1 ? g * on + n : n;
          const int64_t c0 = p.feature_groups > 1 ? g * ki : 0;
          double sum = 0;
          for (int64_t a = 0; a < p.kh; ++a)
            for (int64_t b = 0; b < p.kw; ++b)
              for (int64_t i = 0; i < ki; ++i) {
                const int64_t pi = y * p.strides[0] + a * p.rhs_dilation[0];
                const int64_t pj = z * p.strides[1] + b * p.rhs_dilation[1];
                sum += padded[static_cast<size_t>(((src_n * hp + pi) * wp + pj) * p.c + c0 + i)] *
                       k[static_cast<size_t>(((a * p.kw + b) * ki + i) * p.o + o)];
              }
          out.push_back(sum);
        }
  return out;
}

/// Small random integers as doubles, so every sum is exact in any order.
std::vector<double> random_ints(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

/// Transposes a rank-4 row-major array: result dim i = source dim perm[i].
std::vector<double> transpose4(const std::vector<double>& v, const Shape& shape, const Ints& perm, Shape* out_shape) {
  Shape out(4);
  for (size_t i = 0; i < 4; ++i) out[i] = shape[static_cast<size_t>(perm[i])];
  const std::vector<int64_t> src_strides = row_major_strides(shape);
  std::vector<double> r;
  for (int64_t a = 0; a < out[0]; ++a)
    for (int64_t b = 0; b < out[1]; ++b)
      for (int64_t c = 0; c < out[2]; ++c)
        for (int64_t d = 0; d < out[3]; ++d) {
          const int64_t idx[4] = {a, b, c, d};
          int64_t off = 0;
          for (size_t i = 0; i < 4; ++i) off += idx[i] * src_strides[static_cast<size_t>(perm[i])];
          r.push_back(v[static_cast<size_t>(off)]);
        }
  *out_shape = out;
  return r;
}

void check_against_reference(const Conv2dCase& p, unsigned seed) {
  std::mt19937 rng(seed);
  const Shape xs{p.n, p.h, p.w, p.c};
  const Shape ks{p.kh, p.kw, p.c / p.feature_groups, p.o};
  const std::vector<double> x = random_ints(static_cast<size_t>(num_elements(xs)), rng);
  const std::vector<double> k = random_ints(static_cast<size_t>(num_elements(ks)), rng);
  Shape expected_shape;
  const std::vector<double> expected = reference_conv2d(p, x, k, &expected_shape);
  Attributes attrs = nhwc({{"window_strides", p.strides},
                           {"padding", p.padding},
                           {"lhs_dilation", p.lhs_dilation},
                           {"rhs_dilation", p.rhs_dilation},
                           {"feature_group_count", p.feature_groups},
                           {"batch_group_count", p.batch_groups}});
  Array y = run_op("convolution", {Array::from_vector<double>(x, xs), Array::from_vector<double>(k, ks)}, attrs);
  ASSERT_EQ(y.shape(), expected_shape);
  EXPECT_EQ(y.to_vector<double>(), expected);

  // The same convolution in NCHW / OIHW / NCHW layout gives the transposed result.
  Shape xt_shape, kt_shape, et_shape;
  const std::vector<double> xt = transpose4(x, xs, {0, 3, 1, 2}, &xt_shape);
  const std::vector<double> kt = transpose4(k, ks, {3, 2, 0, 1}, &kt_shape);
  const std::vector<double> et = transpose4(expected, expected_shape, {0, 3, 1, 2}, &et_shape);
  Attributes nchw = attrs;
  nchw.set("input_feature_dimension", int64_t{1});
  nchw.set("input_spatial_dimensions", Ints{2, 3});
  nchw.set("kernel_output_feature_dimension", int64_t{0});
  nchw.set("kernel_input_feature_dimension", int64_t{1});
  nchw.set("kernel_spatial_dimensions", Ints{2, 3});
  nchw.set("output_feature_dimension", int64_t{1});
  nchw.set("output_spatial_dimensions", Ints{2, 3});
  Array yt =
      run_op("convolution", {Array::from_vector<double>(xt, xt_shape), Array::from_vector<double>(kt, kt_shape)}, nchw);
  ASSERT_EQ(yt.shape(), et_shape);
  EXPECT_EQ(yt.to_vector<double>(), et);
}

TEST(ConvolutionInterp, MatchesReferenceStridePaddingDilation) {
  check_against_reference({2, 7, 6, 3, 3, 2, 4, {2, 1}, {1, 2, 0, 1}, {1, 2}, {2, 1}, 1, 1}, 1);
}

TEST(ConvolutionInterp, MatchesReferenceFeatureGroups) {
  check_against_reference({2, 6, 5, 4, 2, 3, 6, {1, 2}, {1, 1, 2, 0}, {1, 1}, {1, 2}, 2, 1}, 2);
}

TEST(ConvolutionInterp, MatchesReferenceDepthwise) {
  check_against_reference({1, 5, 5, 3, 3, 3, 6, {1, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 3, 1}, 3);
}

TEST(ConvolutionInterp, MatchesReferenceBatchGroups) {
  check_against_reference({4, 5, 4, 2, 2, 2, 6, {1, 1}, {0, 1, 1, 0}, {2, 1}, {1, 1}, 1, 2}, 4);
}

TEST(LinalgInterp, KernelsRejectUnverifiedDirectCalls) {
  const ir::OpDef& dot = ir::OpRegistry::builtin().get("dot_general");
  std::vector<Array> in = {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 2}, {2})};
  std::vector<ir::TensorType> types = {{{2}, DType::kF32}};
  testing::expect_error([&] { dot.interpret(in, matmul(), types); }, ErrorCode::kShapeMismatch,
                        {"dot_general", "lhs dim 1 has 3", "rhs dim 0 has 2"});
  // Operands fine, but the requested result type disagrees with the shape rule.
  in[1] = f32({1, 2, 3}, {3});
  std::vector<ir::TensorType> wrong = {{{3}, DType::kF32}};
  testing::expect_error([&] { dot.interpret(in, matmul(), wrong); }, ErrorCode::kShapeMismatch,
                        {"dot_general", "f32[3]", "f32[2]"});
  const ir::OpDef& conv = ir::OpRegistry::builtin().get("convolution");
  const std::vector<Array> one = {in[0]};
  testing::expect_error([&] { conv.interpret(one, nhwc(), types); }, ErrorCode::kInvalidArgument,
                        {"convolution", "1 operands, expected 2"});
}

}  // namespace
}  // namespace ingot
