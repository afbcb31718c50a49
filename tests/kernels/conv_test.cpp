// The implicit-GEMM convolution kernels' host side (include/ingot/kernels/cuda_conv.h): their
// parameters by hand, the CPU model of the kernel (cuda_conv_emulate) and the CPU reference
// (convolution_reference, kernels/cpu/conv.cpp) against an independent direct loop written from
// StableHLO's definition, for forward, input-gradient and weight-gradient shaped specs, feature
// and batch groups, 1-D to 3-D; the launch and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "ingot/kernels/cpu_conv.h"
#include "ingot/kernels/cuda_conv.h"
#include "ingot/runtime/error.h"
#include "kernels_test_util.h"

namespace ingot {
namespace {

using namespace ingot::kernels;

size_t at(int64_t i) { return static_cast<size_t>(i); }

int64_t elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

/// A spec from lhs/rhs shapes and dimension numbers; the result's shape from StableHLO's
/// formula: out spatial = floor((dilated in + pads - dilated kernel) / stride) + 1, dilated(n, d)
/// = (n - 1) d + 1; batch = in batch / batch groups; features = kernel out features.
struct SpecBuilder {
  ConvSpec s;
  std::vector<int64_t> out_dims;  // out batch, out feature, out spatial... positions
  ConvSpec build() {
    const size_t ns = s.in_spatial.size();
    auto fill = [&](std::vector<int64_t>& v, size_t n, int64_t value) {
      if (v.empty()) v.assign(n, value);
    };
    fill(s.strides, ns, 1);
    fill(s.padding, 2 * ns, 0);
    fill(s.lhs_dilation, ns, 1);
    fill(s.rhs_dilation, ns, 1);
    s.out_shape.assign(s.lhs_shape.size(), 0);
    s.out_shape[at(s.out_batch)] = s.lhs_shape[at(s.in_batch)] / s.batch_groups;
    s.out_shape[at(s.out_feature)] = s.rhs_shape[at(s.k_out_feature)];
    for (size_t i = 0; i < ns; ++i) {
      const int64_t in = (s.lhs_shape[at(s.in_spatial[i])] - 1) * s.lhs_dilation[i] + 1;
      const int64_t k = (s.rhs_shape[at(s.k_spatial[i])] - 1) * s.rhs_dilation[i] + 1;
      s.out_shape[at(s.out_spatial[i])] = (in + s.padding[2 * i] + s.padding[2 * i + 1] - k) / s.strides[i] + 1;
    }
    return s;
  }
};

/// Row-major offset of multi-index `idx` in `shape`.
int64_t offset(const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}

/// Advances `idx` row-major within `shape`; false after the last index.
bool next(std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/// StableHLO's convolution, directly: for each result element and each kernel element of its
/// group, the input element under the kernel element (in the lhs-dilated, padded input), in
/// double. Written from the spec's definition, independently of the library's indexing.
std::vector<double> direct_convolution(const ConvSpec& s, const std::vector<double>& lhs,
                                       const std::vector<double>& rhs) {
  const size_t ns = s.in_spatial.size();
  const int64_t groups = s.feature_groups * s.batch_groups;
  const int64_t out_features_per_group = s.out_shape[at(s.out_feature)] / groups;
  std::vector<double> out(at(elements(s.out_shape)), 0.0);
  std::vector<int64_t> o(s.out_shape.size(), 0);
  do {
    const int64_t g = o[at(s.out_feature)] / out_features_per_group;
    std::vector<int64_t> k(s.rhs_shape.size(), 0);
    double sum = 0.0;
    do {
      if (k[at(s.k_out_feature)] != o[at(s.out_feature)]) continue;
      std::vector<int64_t> in(s.lhs_shape.size(), 0);
      in[at(s.in_batch)] = o[at(s.out_batch)] + (s.batch_groups > 1 ? g * s.out_shape[at(s.out_batch)] : 0);
      in[at(s.in_feature)] = k[at(s.k_in_feature)] + (s.feature_groups > 1 ? g * s.rhs_shape[at(s.k_in_feature)] : 0);
      bool hole = false;
      for (size_t i = 0; i < ns; ++i) {
        const int64_t dilated =
            o[at(s.out_spatial[i])] * s.strides[i] + k[at(s.k_spatial[i])] * s.rhs_dilation[i] - s.padding[2 * i];
        const int64_t size = s.lhs_shape[at(s.in_spatial[i])];
        if (dilated < 0 || dilated % s.lhs_dilation[i] != 0 || dilated / s.lhs_dilation[i] >= size)
          hole = true;
        else
          in[at(s.in_spatial[i])] = dilated / s.lhs_dilation[i];
      }
      if (!hole) sum += lhs[at(offset(s.lhs_shape, in))] * rhs[at(offset(s.rhs_shape, k))];
    } while (next(k, s.rhs_shape));
    out[at(offset(s.out_shape, o))] = sum;
  } while (next(o, s.out_shape));
  return out;
}

/// Forward NCHW / OIHW, stride 2, asymmetric padding.
ConvSpec forward_nchw() {
  SpecBuilder b;
  b.s = {.lhs_shape = {2, 3, 9, 8},
         .rhs_shape = {5, 3, 3, 2},
         .in_batch = 0,
         .in_feature = 1,
         .in_spatial = {2, 3},
         .k_in_feature = 1,
         .k_out_feature = 0,
         .k_spatial = {2, 3},
         .out_batch = 0,
         .out_feature = 1,
         .out_spatial = {2, 3},
         .strides = {2, 1},
         .padding = {1, 0, 2, 1}};
  return b.build();
}

/// Forward NHWC / HWIO (TensorFlow's layout), rhs dilation and a negative (cropping) pad.
ConvSpec forward_nhwc() {
  SpecBuilder b;
  b.s = {.lhs_shape = {2, 10, 7, 4},
         .rhs_shape = {2, 3, 4, 6},
         .in_batch = 0,
         .in_feature = 3,
         .in_spatial = {1, 2},
         .k_in_feature = 2,
         .k_out_feature = 3,
         .k_spatial = {0, 1},
         .out_batch = 0,
         .out_feature = 3,
         .out_spatial = {1, 2},
         .padding = {-1, 1, 1, 1},
         .rhs_dilation = {2, 1}};
  return b.build();
}

/// The input gradient of a stride-2 3x3 convolution: dy (N, O, 4, 4) with the kernel's out
/// features as its input features, lhs dilation 2 and padding k - 1 - p.
ConvSpec input_gradient() {
  SpecBuilder b;
  b.s = {.lhs_shape = {2, 5, 4, 4},
         .rhs_shape = {5, 3, 3, 3},
         .in_batch = 0,
         .in_feature = 1,
         .in_spatial = {2, 3},
         .k_in_feature = 0,
         .k_out_feature = 1,
         .k_spatial = {2, 3},
         .out_batch = 0,
         .out_feature = 1,
         .out_spatial = {2, 3},
         .padding = {1, 2, 1, 2},
         .lhs_dilation = {2, 2}};
  return b.build();
}

/// The weight gradient of a stride-2 convolution: x with its batch as the feature dim and dy as
/// the kernel (batch as its input features), rhs dilation 2; the result is (C, O, kh, kw)-shaped
/// with C in the batch position.
ConvSpec weight_gradient() {
  SpecBuilder b;
  b.s = {.lhs_shape = {3, 3, 9, 9},
         .rhs_shape = {3, 4, 4, 4},
         .in_batch = 1,
         .in_feature = 0,
         .in_spatial = {2, 3},
         .k_in_feature = 0,
         .k_out_feature = 1,
         .k_spatial = {2, 3},
         .out_batch = 0,
         .out_feature = 1,
         .out_spatial = {2, 3},
         .padding = {1, 1, 1, 1},
         .rhs_dilation = {2, 2}};
  return b.build();
}

/// Feature groups 2 (a grouped convolution), 1-D.
ConvSpec feature_groups() {
  SpecBuilder b;
  b.s = {.lhs_shape = {2, 4, 11},
         .rhs_shape = {6, 2, 3},
         .in_batch = 0,
         .in_feature = 1,
         .in_spatial = {2},
         .k_in_feature = 1,
         .k_out_feature = 0,
         .k_spatial = {2},
         .out_batch = 0,
         .out_feature = 1,
         .out_spatial = {2},
         .strides = {2},
         .feature_groups = 2};
  return b.build();
}

/// Batch groups 3 (the weight gradient of a grouped convolution), 1-D.
ConvSpec batch_groups() {
  SpecBuilder b;
  b.s = {.lhs_shape = {6, 2, 8},
         .rhs_shape = {6, 2, 3},
         .in_batch = 0,
         .in_feature = 1,
         .in_spatial = {2},
         .k_in_feature = 1,
         .k_out_feature = 0,
         .k_spatial = {2},
         .out_batch = 0,
         .out_feature = 1,
         .out_spatial = {2},
         .padding = {1, 1},
         .batch_groups = 3};
  return b.build();
}

/// 3-D, features last, output dims permuted (out feature first).
ConvSpec three_d() {
  SpecBuilder b;
  b.s = {.lhs_shape = {1, 5, 4, 6, 2},
         .rhs_shape = {3, 2, 2, 2, 3},
         .in_batch = 0,
         .in_feature = 4,
         .in_spatial = {1, 2, 3},
         .k_in_feature = 3,
         .k_out_feature = 4,
         .k_spatial = {0, 1, 2},
         .out_batch = 4,
         .out_feature = 0,
         .out_spatial = {1, 2, 3},
         .strides = {1, 2, 1},
         .padding = {0, 0, 1, 0, 0, 1}};
  return b.build();
}

struct NamedSpec {
  const char* name;
  ConvSpec spec;
};

std::vector<NamedSpec> all_specs() {
  return {{"forward NCHW", forward_nchw()},
          {"forward NHWC", forward_nhwc()},
          {"input gradient", input_gradient()},
          {"weight gradient", weight_gradient()},
          {"feature groups", feature_groups()},
          {"batch groups", batch_groups()},
          {"3-D", three_d()}};
}

TEST(CudaConv, KernelModelAndReferenceMatchTheDirectLoop) {
  unsigned seed = 1;
  for (const NamedSpec& n : all_specs()) {
    const ConvSpec& s = n.spec;
    ASSERT_NO_THROW(check_conv_spec(s)) << n.name;
    const std::vector<float> lhs = testing::random_floats(at(elements(s.lhs_shape)), -1.0f, 1.0f, seed++);
    const std::vector<float> rhs = testing::random_floats(at(elements(s.rhs_shape)), -1.0f, 1.0f, seed++);
    const std::vector<double> want = direct_convolution(s, {lhs.begin(), lhs.end()}, {rhs.begin(), rhs.end()});
    std::vector<float> model(want.size(), NAN), reference(want.size(), NAN);
    cuda_conv_emulate(s, lhs, rhs, model);
    convolution_reference(s, lhs, rhs, reference);
    testing::expect_close(model, want, 1e-5, 1e-5, std::string(n.name) + " (kernel model)");
    testing::expect_close(reference, want, 1e-5, 1e-5, std::string(n.name) + " (reference)");
    // Not all zeros: the specs read real data.
    EXPECT_GT(std::count_if(want.begin(), want.end(), [](double v) { return std::fabs(v) > 1e-3; }),
              static_cast<long>(want.size() / 2))
        << n.name;
    // f64 the same way, tighter.
    const std::vector<double> lhs64(lhs.begin(), lhs.end()), rhs64(rhs.begin(), rhs.end());
    std::vector<double> model64(want.size(), NAN);
    cuda_conv_emulate(s, lhs64, rhs64, model64);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(model64[i], want[i], 1e-12) << n.name << " f64 [" << i << "]";
  }
}

TEST(CudaConv, ParamsOfAForwardNchwConvolutionByHand) {
  // lhs (2, 3, 9, 8), rhs (5, 3, 3, 2), out (2, 5, 4, 10): (9 + 1 - 3) / 2 + 1 = 4, 8 + 3 - 2 + 1 = 10.
  const ConvSpec s = forward_nchw();
  ASSERT_EQ(s.out_shape, (std::vector<int64_t>{2, 5, 4, 10}));
  const CudaConvParams p = cuda_conv_params(s);
  EXPECT_EQ(p.num_spatial, 2);
  EXPECT_EQ(p.m, 2 * 4 * 10);
  EXPECT_EQ(p.n_per_group, 5);
  EXPECT_EQ(p.k, 3 * 3 * 2);
  EXPECT_EQ(p.groups, 1);
  EXPECT_EQ(p.out_batch, 2);
  EXPECT_EQ(p.c_per_group, 3);
  EXPECT_EQ(p.lhs_group_offset, 0);
  EXPECT_EQ(p.lhs_batch_stride, 3 * 9 * 8);
  EXPECT_EQ(p.lhs_feature_stride, 9 * 8);
  EXPECT_EQ(p.lhs_size[0], 9);
  EXPECT_EQ(p.lhs_size[1], 8);
  EXPECT_EQ(p.lhs_stride[0], 8);
  EXPECT_EQ(p.lhs_stride[1], 1);
  EXPECT_EQ(p.rhs_out_stride, 3 * 3 * 2);
  EXPECT_EQ(p.rhs_in_stride, 3 * 2);
  EXPECT_EQ(p.k_size[0], 3);
  EXPECT_EQ(p.rhs_stride[0], 2);
  EXPECT_EQ(p.out_batch_stride, 5 * 4 * 10);
  EXPECT_EQ(p.out_feature_stride, 4 * 10);
  EXPECT_EQ(p.out_stride[0], 10);
  EXPECT_EQ(p.stride[0], 2);
  EXPECT_EQ(p.pad_low[0], 1);
  EXPECT_EQ(p.pad_low[1], 2);
  EXPECT_EQ(p.lhs_size[2], 0);  // unused spatial slots stay 0
  // Groups: the lhs slices of consecutive groups.
  EXPECT_EQ(cuda_conv_params(feature_groups()).lhs_group_offset, 2 * 11);   // 2 features of 11
  EXPECT_EQ(cuda_conv_params(batch_groups()).lhs_group_offset, 2 * 2 * 8);  // 2 batch rows of (2, 8)
  EXPECT_EQ(cuda_conv_params(batch_groups()).groups, 3);
  EXPECT_EQ(cuda_conv_params(batch_groups()).n_per_group, 2);
}

TEST(CudaConv, ParamWordsRoundTrip) {
  const CudaConvParams p = cuda_conv_params(three_d());
  const std::vector<int64_t> words = cuda_conv_param_words(p);
  ASSERT_EQ(words.size(), sizeof(CudaConvParams) / 8);
  EXPECT_EQ(words[0], 3);  // num_spatial leads
  EXPECT_EQ(words[1], p.m);
  const CudaConvParams back = cuda_conv_params_from_words(words);
  EXPECT_EQ(cuda_conv_param_words(back), words);
  try {
    cuda_conv_params_from_words(std::span<const int64_t>(words.data(), words.size() - 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch);
    EXPECT_NE(e.message().find("words"), std::string::npos) << e.what();
  }
}

TEST(CudaConv, LaunchTilesMByNAndGroups) {
  const CudaConvParams p = cuda_conv_params(batch_groups());  // m = 2 * 8, n = 2 per group, 3 groups
  const CudaKernelLaunch l = cuda_conv_launch(p, DType::kF64, 0x100, 0x200, 0x300);
  EXPECT_EQ(l.kernel, "ingot_conv_implicit_gemm_f64");
  EXPECT_EQ(l.grid, (std::array<int64_t, 3>{1, 1, 3}));
  EXPECT_EQ(l.block, (std::array<int64_t, 3>{256, 1, 1}));
  ASSERT_EQ(l.params.size(), 3u);
  EXPECT_EQ(l.params[2].bytes[1], std::byte{0x03});  // out = 0x300, little endian
  CudaConvParams big = p;
  big.m = 64 * 1000 + 1;
  big.n_per_group = 130;
  const CudaKernelLaunch l2 = cuda_conv_launch(big, DType::kF32, 1, 2, 3);
  EXPECT_EQ(l2.kernel, "ingot_conv_implicit_gemm_f32");
  EXPECT_EQ(l2.grid, (std::array<int64_t, 3>{1001, 3, 3}));
}

TEST(CudaConv, BadArgumentsThrowNamingThem) {
  const CudaConvParams p = cuda_conv_params(forward_nchw());
  auto expect_error = [](auto&& f, ErrorCode code, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "expected an error naming " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { cuda_conv_launch(p, DType::kF32, 0, 1, 1); }, ErrorCode::kInvalidArgument, "lhs");
  expect_error([&] { cuda_conv_launch(p, DType::kF16, 1, 1, 1); }, ErrorCode::kInvalidArgument, "f16");
  CudaConvParams many_groups = p;
  many_groups.groups = 70000;
  expect_error([&] { cuda_conv_launch(many_groups, DType::kF32, 1, 1, 1); }, ErrorCode::kInvalidArgument, "grid z");
  CudaConvParams empty = p;
  empty.k = 0;
  expect_error([&] { cuda_conv_launch(empty, DType::kF32, 1, 1, 1); }, ErrorCode::kInvalidArgument, "params.k");
  // Four spatial dims: more than the kernels take.
  SpecBuilder b;
  b.s = {.lhs_shape = {1, 1, 2, 2, 2, 2},
         .rhs_shape = {1, 1, 1, 1, 1, 1},
         .in_batch = 0,
         .in_feature = 1,
         .in_spatial = {2, 3, 4, 5},
         .k_in_feature = 1,
         .k_out_feature = 0,
         .k_spatial = {2, 3, 4, 5},
         .out_batch = 0,
         .out_feature = 1,
         .out_spatial = {2, 3, 4, 5}};
  expect_error([&] { cuda_conv_params(b.build()); }, ErrorCode::kInvalidArgument, "4 spatial dims");
  // An invalid spec: check_conv_spec's error.
  ConvSpec bad = forward_nchw();
  bad.out_shape[1] = 4;
  EXPECT_THROW(cuda_conv_params(bad), Error);
  // Wrong buffer sizes: nothing written.
  const ConvSpec s = forward_nchw();
  std::vector<float> lhs(at(elements(s.lhs_shape))), rhs(at(elements(s.rhs_shape)) - 1),
      out(at(elements(s.out_shape)), 7.0f);
  expect_error([&] { cuda_conv_emulate(s, lhs, rhs, out); }, ErrorCode::kShapeMismatch, "rhs");
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == 7.0f; }));
}

}  // namespace
}  // namespace ingot
