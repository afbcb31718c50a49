// The im2col + BLAS convolution kernel (kernels/cpu/conv.cpp) called directly, against the
// interpreter's convolution (the oracle): its reference loops bitwise, the BLAS path within
// rtol 1e-5 (f32) / 1e-12 (f64). Covers the paths of the kernel that small graphs do not reach:
// chunked rows, column chunks accumulated with beta = 1, every result and kernel layout mode, the
// reference fallback for non-finite kernels over padding, the config encoding and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ingot/kernels/cpu_conv.h"
#include "parity.h"
#include "test_util.h"

namespace ingot {
namespace {

using Ints = std::vector<int64_t>;
using kernels::ConvSpec;

/// A spec from layouts given as [batch / out-feature, feature / in-feature, spatial...] dimension
/// numbers; the result shape comes from the op's shape rule.
ConvSpec make_spec(const Shape& lhs, const Shape& rhs, Ints in, Ints k, Ints out, Ints strides, Ints padding,
                   Ints lhs_dilation, Ints rhs_dilation, int64_t feature_groups = 1, int64_t batch_groups = 1) {
  ConvSpec s;
  s.lhs_shape = lhs;
  s.rhs_shape = rhs;
  s.in_batch = in[0];
  s.in_feature = in[1];
  s.in_spatial.assign(in.begin() + 2, in.end());
  s.k_out_feature = k[0];
  s.k_in_feature = k[1];
  s.k_spatial.assign(k.begin() + 2, k.end());
  s.out_batch = out[0];
  s.out_feature = out[1];
  s.out_spatial.assign(out.begin() + 2, out.end());
  s.strides = strides;
  s.padding = padding;
  s.lhs_dilation = lhs_dilation;
  s.rhs_dilation = rhs_dilation;
  s.feature_groups = feature_groups;
  s.batch_groups = batch_groups;
  return s;
}

ir::Attributes attrs_of(const ConvSpec& s) {
  return {{"input_batch_dimension", s.in_batch},
          {"input_feature_dimension", s.in_feature},
          {"input_spatial_dimensions", s.in_spatial},
          {"kernel_input_feature_dimension", s.k_in_feature},
          {"kernel_output_feature_dimension", s.k_out_feature},
          {"kernel_spatial_dimensions", s.k_spatial},
          {"output_batch_dimension", s.out_batch},
          {"output_feature_dimension", s.out_feature},
          {"output_spatial_dimensions", s.out_spatial},
          {"window_strides", s.strides},
          {"padding", s.padding},
          {"lhs_dilation", s.lhs_dilation},
          {"rhs_dilation", s.rhs_dilation},
          {"feature_group_count", s.feature_groups},
          {"batch_group_count", s.batch_groups}};
}

/// Runs the kernel and its reference on `lhs`, `rhs` (f32 or f64) and compares both with the
/// interpreter: the reference bitwise, the kernel within rtol (NaN where the interpreter has NaN).
template <class T>
void expect_matches_interpreter(ConvSpec s, const Array& lhs, const Array& rhs) {
  const DType d = lhs.dtype();
  s.out_shape = testing::infer("convolution", {{lhs.shape(), d}, {rhs.shape(), d}}, attrs_of(s))[0].shape;
  const Array want = testing::run_op("convolution", {lhs, rhs}, attrs_of(s));
  const std::vector<T> a = lhs.to_vector<T>(), b = rhs.to_vector<T>();
  std::vector<T> got(static_cast<size_t>(want.size())), ref(got.size());
  kernels::convolution(s, a, b, got);
  kernels::convolution_reference(s, a, b, ref);
  const double rtol = d == DType::kF32 ? 1e-5 : 1e-12;
  const std::vector<double> w = want.to_doubles();
  int reported = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const bool ref_ok = (std::isnan(w[i]) && std::isnan(ref[i])) || w[i] == static_cast<double>(ref[i]);
    const double g = got[i];
    const bool got_ok = (std::isnan(w[i]) && std::isnan(g)) || w[i] == g ||
                        std::abs(w[i] - g) <= rtol * std::max({std::abs(w[i]), std::abs(g), 1.0});
    if ((!ref_ok || !got_ok) && reported++ < 5) {
      ADD_FAILURE() << "element " << i << ": interpreter " << w[i] << ", kernel " << g << ", reference " << ref[i];
    }
  }
}

void expect_both_dtypes(const ConvSpec& s, uint64_t seed) {
  for (DType d : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(d));
    const Array lhs = testing::random_array(s.lhs_shape, d, seed),
                rhs = testing::random_array(s.rhs_shape, d, seed + 1);
    if (d == DType::kF32)
      expect_matches_interpreter<float>(s, lhs, rhs);
    else
      expect_matches_interpreter<double>(s, lhs, rhs);
  }
}

/// Random integers in [-3, 3] stored as `dtype`: every sum of their products is exact in f32
/// (below 2^24), so long windows compare exactly whatever the summation order.
Array small_ints(const Shape& shape, DType dtype, uint64_t seed) {
  return Array::from_doubles(testing::random_array(shape, DType::kI32, seed, -3, 3).to_doubles(), shape, dtype);
}

const Ints kNhwc = {0, 3, 1, 2}, kHwio = {3, 2, 0, 1}, kNchw = {0, 1, 2, 3}, kOihw = {0, 1, 2, 3};

TEST(ConvKernel, LayoutModesGroupsAndDilations) {
  // Result features last / first / in the middle; kernel output features last / first / middle.
  expect_both_dtypes(
      make_spec({2, 9, 7, 4}, {3, 3, 2, 6}, kNhwc, kHwio, kNhwc, {2, 1}, {1, 1, 2, 2}, {1, 1}, {1, 2}, 2), 1);
  expect_both_dtypes(make_spec({2, 3, 6, 5}, {5, 3, 2, 3}, kNchw, kOihw, kNchw, {1, 2}, {1, 2, 0, 1}, {2, 1}, {1, 1}),
                     3);
  expect_both_dtypes(make_spec({3, 9, 4}, {6, 2, 3}, {0, 2, 1}, {0, 1, 2}, {1, 0, 2}, {2}, {1, 1}, {1}, {1}, 2), 5);
  expect_both_dtypes(make_spec({4, 3, 8}, {3, 4, 3}, {0, 1, 2}, {1, 2, 0}, {0, 1, 2}, {1}, {0, 2}, {1}, {2}, 1, 2), 7);
  expect_both_dtypes(
      make_spec({4, 5, 5, 3}, {2, 2, 3, 4}, kNhwc, kHwio, kNhwc, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 2), 9);
  // 1-D crop with depthwise groups; no spatial dims; 3 spatial dims.
  expect_both_dtypes(make_spec({1, 10, 3}, {3, 1, 3}, {0, 2, 1}, {2, 1, 0}, {0, 2, 1}, {1}, {-2, 1}, {1}, {1}, 3), 11);
  expect_both_dtypes(make_spec({3, 4}, {4, 5}, {0, 1}, {1, 0}, {0, 1}, {}, {}, {}, {}), 13);
  expect_both_dtypes(make_spec({2, 5, 4, 6, 3}, {2, 3, 2, 3, 4}, {0, 4, 1, 2, 3}, {4, 3, 0, 1, 2}, {0, 4, 1, 2, 3},
                               {1, 2, 1}, {1, 0, 0, 1, 1, 1}, {1, 1, 2}, {2, 1, 1}),
                     15);
  // An empty lhs spatial dim whose padding still makes windows: all padding, zeros.
  expect_both_dtypes(make_spec({2, 0, 3}, {2, 3, 2}, {0, 2, 1}, {2, 1, 0}, {0, 2, 1}, {1}, {2, 1}, {1}, {1}), 17);
}

TEST(ConvKernel, ChunkedRowsAndColumns) {
  // 398 * 398 rows of 9 columns: more than one 4 MiB im2col block of f32 rows (gathered
  // transposed: runs along the result's width).
  ConvSpec rows = make_spec({1, 400, 400, 1}, {3, 3, 1, 2}, kNhwc, kHwio, kNhwc, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1});
  expect_matches_interpreter<float>(rows, testing::random_array({1, 400, 400, 1}, DType::kF32, 20),
                                    testing::random_array({3, 3, 1, 2}, DType::kF32, 21));
  // 17000 columns (f32) / 9000 (f64) for 64 rows: the columns are split and the GEMMs accumulate,
  // into the result directly (features last / first) and through the block (features middle).
  // Small integers keep these long sums exact (the interpreter's f32 sum of 17000 random terms
  // would itself be off by ~1e-4 relative).
  const Ints nwc = {0, 2, 1}, wio = {2, 1, 0}, cnw = {1, 0, 2}, ncw = {0, 1, 2};
  for (const Ints& out : {nwc, cnw, ncw}) {
    SCOPED_TRACE(::testing::PrintToString(out));
    expect_matches_interpreter<float>(make_spec({64, 17, 1000}, {17, 1000, 2}, nwc, wio, out, {1}, {0, 0}, {1}, {1}),
                                      small_ints({64, 17, 1000}, DType::kF32, 22),
                                      small_ints({17, 1000, 2}, DType::kF32, 23));
    expect_matches_interpreter<double>(make_spec({64, 9, 1000}, {9, 1000, 2}, nwc, wio, out, {1}, {0, 0}, {1}, {1}),
                                       small_ints({64, 9, 1000}, DType::kF64, 24),
                                       small_ints({9, 1000, 2}, DType::kF64, 25));
    // Result width 81 > kernel width 20: the block is gathered transposed (runs along the
    // result's width), in two row chunks and two column chunks.
    expect_matches_interpreter<float>(
        make_spec({1, 1000, 100}, {2, 1000, 20}, ncw, {0, 1, 2}, out, {1}, {0, 0}, {1}, {1}),
        small_ints({1, 1000, 100}, DType::kF32, 26), small_ints({2, 1000, 20}, DType::kF32, 27));
  }
}

TEST(ConvKernel, NonFiniteKernelOverPaddingMatchesTheInterpreter) {
  // Padding and lhs-dilation holes are skipped, not multiplied: inf * 0 would be NaN.
  ConvSpec s = make_spec({1, 3, 1}, {3, 1, 1}, {0, 2, 1}, {2, 1, 0}, {0, 2, 1}, {1}, {1, 1}, {2}, {1});
  expect_matches_interpreter<float>(s, Array::from_vector<float>({1, 2, 3}, {1, 3, 1}),
                                    Array::from_vector<float>({INFINITY, 1, -INFINITY}, {3, 1, 1}));
  expect_matches_interpreter<double>(s, Array::from_vector<double>({1, 2, 3}, {1, 3, 1}),
                                     Array::from_vector<double>({NAN, 1, 2}, {3, 1, 1}));
  // Without padding the BLAS path runs: the infinity reaches exactly the windows it covers.
  ConvSpec plain = make_spec({1, 3, 1}, {3, 1, 1}, {0, 2, 1}, {2, 1, 0}, {0, 2, 1}, {1}, {0, 0}, {1}, {1});
  plain.out_shape = {1, 1, 1};
  std::vector<float> out(1);
  kernels::convolution(plain, std::vector<float>{1, 2, 3}, std::vector<float>{INFINITY, 1, 1}, out);
  EXPECT_EQ(out[0], INFINITY);
}

TEST(ConvKernel, ConfigRoundTripsAndBadConfigsAreErrors) {
  ConvSpec s = make_spec({2, 9, 7, 4}, {3, 3, 2, 6}, kNhwc, kHwio, kNhwc, {2, 1}, {1, 1, 2, 2}, {1, 1}, {1, 2}, 2);
  s.out_shape = {2, 5, 7, 6};
  const std::vector<int64_t> c = kernels::encode_conv_spec(s);
  EXPECT_EQ(c.size(), 9u + 3 * 4 + 8 * 2);
  const ConvSpec d = kernels::decode_conv_spec(c);
  EXPECT_EQ(d.lhs_shape, s.lhs_shape);
  EXPECT_EQ(d.rhs_shape, s.rhs_shape);
  EXPECT_EQ(d.out_shape, s.out_shape);
  EXPECT_EQ(d.in_spatial, s.in_spatial);
  EXPECT_EQ(d.k_spatial, s.k_spatial);
  EXPECT_EQ(d.out_spatial, s.out_spatial);
  EXPECT_EQ(d.padding, s.padding);
  EXPECT_EQ(d.rhs_dilation, s.rhs_dilation);
  EXPECT_EQ(d.strides, s.strides);
  EXPECT_EQ(d.feature_groups, 2);
  EXPECT_EQ(kernels::encode_conv_spec(d), c);

  auto expect_error = [](std::vector<int64_t> config, ErrorCode code, const std::string& text) {
    try {
      kernels::decode_conv_spec(config);
      ADD_FAILURE() << "no error for a config with " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error({}, ErrorCode::kInvalidArgument, "not an encoded convolution");
  expect_error(std::vector<int64_t>(c.begin(), c.end() - 1), ErrorCode::kInvalidArgument, "needs 37");
  std::vector<int64_t> bad = c;
  bad[3] = 7;  // input_batch_dimension out of range
  expect_error(bad, ErrorCode::kOutOfRange, "out of range");
  bad = c;
  bad[4] = 0;  // input feature = input batch
  expect_error(bad, ErrorCode::kInvalidArgument, "named twice");
  bad = c;
  bad[9 + 12 + 3] = 0;  // stride 0 of spatial dim 0
  expect_error(bad, ErrorCode::kInvalidArgument, "strides holds 0");
  bad = c;
  bad[9 + 8 + 1] = 6;  // result height 6 instead of 5
  expect_error(bad, ErrorCode::kShapeMismatch, "result shape");
  bad = c;
  bad[2] = 2;  // batch groups 2 with feature groups 2
  expect_error(bad, ErrorCode::kInvalidArgument, "both > 1");

  // Buffers must hold the shapes' element counts.
  std::vector<float> lhs(2 * 9 * 7 * 4), rhs(3 * 3 * 2 * 6), out(2 * 5 * 7 * 6 - 1);
  try {
    kernels::convolution(s, lhs, rhs, out);
    ADD_FAILURE() << "no error for a short result buffer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch);
  }
}

TEST(ConvKernel, JitEntryFillsNaNInsteadOfThrowing) {
  std::vector<float> lhs(4, 1.0f), rhs(4, 1.0f), out(3, 5.0f);
  std::vector<int64_t> config = {2, 1, 1, 0, 0, 0, 0, 0, 0};  // rank 2 needs 15 entries
  kernels::MemRef1D<float> l{lhs.data(), lhs.data(), 0, {4}, {1}}, r{rhs.data(), rhs.data(), 0, {4}, {1}};
  kernels::MemRef1D<float> o{out.data(), out.data(), 0, {3}, {1}};
  kernels::MemRef1D<int64_t> c{config.data(), config.data(), 0, {9}, {1}};
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(kernels::conv_f32(l, r, o, c));
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("needs 15"), std::string::npos);
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  // A good config through the same entry: (2, 2) x (2, 2) as a matrix product.
  ConvSpec matmul = make_spec({2, 2}, {2, 2}, {0, 1}, {1, 0}, {0, 1}, {}, {}, {}, {});
  matmul.out_shape = {2, 2};
  config = kernels::encode_conv_spec(matmul);
  lhs = {1, 2, 3, 4};
  rhs = {1, 0, 0, 2};
  out.assign(4, 0.0f);
  o = {out.data(), out.data(), 0, {4}, {1}};
  c = {config.data(), config.data(), 0, {static_cast<int64_t>(config.size())}, {1}};
  kernels::conv_f32(l, r, o, c);
  EXPECT_EQ(out, (std::vector<float>{1, 4, 3, 8}));
}

}  // namespace
}  // namespace ingot
