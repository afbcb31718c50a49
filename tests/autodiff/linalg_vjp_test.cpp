// Tests of the VJP rules of the linalg family (dot_general, convolution): finite-difference
// checks over batch dims, contracting dims in any order, free dims on both sides, strides,
// padding, dilations and groups in several layouts, exact values on small hand-computed cases,
// empty operands, and second order (Hessian-vector products through dot_general/convolution).
#include <gtest/gtest.h>

#include <string>
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
using testing::random_f64;
using Ints = std::vector<int64_t>;

Array f64(const std::vector<double>& v, const Shape& shape) { return Array::from_vector<double>(v, shape); }

/// f(lhs, rhs) = dot_general(lhs, rhs, dims).
TraceFn dot(const DotDimensions& dims) {
  return [dims](const std::vector<Tensor>& a) { return std::vector<Tensor>{dot_general(a[0], a[1], dims)}; };
}

/// Checks the gradients of dot_general(lhs, rhs, dims) at random points of the given shapes.
void check_dot(const Shape& lhs, const Shape& rhs, const DotDimensions& dims, uint64_t seed) {
  check_grads(dot(dims), {random_f64(lhs, seed), random_f64(rhs, seed + 1)}, {.seed = seed});
}

// ---- dot_general -----------------------------------------------------------------------------

TEST(LinalgVjp, DotGeneralMatmul) {
  check_dot({2, 3}, {3, 4}, {{}, {}, {1}, {0}}, 1);
  check_dot({1, 3}, {3, 1}, {{}, {}, {1}, {0}}, 2);  // size-1 free dims
  check_dot({3, 2}, {4, 3}, {{}, {}, {0}, {1}}, 3);  // both operands contracted "transposed"
}

TEST(LinalgVjp, DotGeneralBatched) {
  check_dot({2, 3, 4}, {2, 4, 5}, {{0}, {0}, {2}, {1}}, 4);
  // The batch dim in the middle of both operands: the cotangents need a transpose.
  check_dot({3, 2, 4}, {4, 2, 5}, {{1}, {1}, {2}, {0}}, 5);
  // Two batch dims paired in swapped order.
  check_dot({2, 3, 4}, {3, 2, 4, 5}, {{0, 1}, {1, 0}, {2}, {2}}, 6);
}

TEST(LinalgVjp, DotGeneralContractsTwoDimsInSwappedOrder) {
  // lhs dim 1 (3) pairs with rhs dim 2, lhs dim 2 (4) with rhs dim 0.
  check_dot({2, 3, 4}, {4, 5, 3}, {{}, {}, {1, 2}, {2, 0}}, 7);
  // Free dims on both sides of the contracting dims, with a batch dim.
  check_dot({2, 3, 2, 4}, {4, 2, 3, 5}, {{2}, {1}, {3, 1}, {0, 2}}, 8);
}

TEST(LinalgVjp, DotGeneralVectorDotAndOuterProduct) {
  check_dot({4}, {4}, {{}, {}, {0}, {0}}, 9);  // scalar result
  check_dot({3}, {2}, {{}, {}, {}, {}}, 10);   // outer product: nothing contracted
}

TEST(LinalgVjp, MatmulBroadcastsBatchDims) {
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; };
  // Batch shapes (2, 1) and (3,) broadcast to (2, 3): the cotangent sums over the broadcast.
  check_grads(f, {random_f64({2, 1, 3, 4}, 11), random_f64({3, 4, 5}, 12)});
  // A vector on the left (NumPy promotion) against a batched matrix.
  check_grads(f, {random_f64({4}, 13), random_f64({2, 4, 3}, 14)});
}

TEST(LinalgVjp, MatmulExactValues) {
  // loss = sum(A B): dA[i, k] = sum_j B[k, j] (row sums of B), dB[k, j] = sum_i A[i, k].
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(matmul(a[0], a[1]))}; };
  const Array A = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Array B = f64({1, 0, 2, -1, 3, 1, 0, 4, -2, 5, 1, 1}, {3, 4});
  const std::vector<Array> g = grads_at(f, {A, B}, {0, 1});
  expect_values(g[0], {2, 8, 5, 2, 8, 5});
  expect_values(g[1], {5, 5, 5, 5, 7, 7, 7, 7, 9, 9, 9, 9});
}

TEST(LinalgVjp, DotGeneralKeepsTheDtype) {
  // f32 and bf16 operands get f32/bf16 cotangents (exact for these small integers).
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    TraceFn f = [](const std::vector<Tensor>& a) {
      return std::vector<Tensor>{sum(dot_general(a[0], a[1], {{}, {}, {0}, {0}}))};
    };
    const Array x = Array::from_doubles({1, 2, 3}, {3}, dtype);
    const Array y = Array::from_doubles({4, -5, 6}, {3}, dtype);
    const std::vector<Array> g = grads_at(f, {x, y}, {0, 1});
    EXPECT_EQ(g[0].dtype(), dtype);
    EXPECT_EQ(g[1].dtype(), dtype);
    expect_values(g[0], {4, -5, 6});
    expect_values(g[1], {1, 2, 3});
  }
}

TEST(LinalgVjp, DotGeneralEmptyDims) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(dot_general(a[0], a[1], {{}, {}, {1}, {0}}))};
  };
  // No rows: the loss is an empty sum, so the rhs gets zeros.
  std::vector<Array> g = grads_at(f, {Array::zeros({0, 3}, DType::kF64), random_f64({3, 2}, 15)}, {0, 1});
  EXPECT_EQ(g[0].shape(), (Shape{0, 3}));
  expect_values(g[1], {0, 0, 0, 0, 0, 0});
  // An empty contraction: the output is zeros (2, 2) and both cotangents are empty.
  g = grads_at(f, {Array::zeros({2, 0}, DType::kF64), Array::zeros({0, 2}, DType::kF64)}, {0, 1});
  EXPECT_EQ(g[0].shape(), (Shape{2, 0}));
  EXPECT_EQ(g[1].shape(), (Shape{0, 2}));
}

// ---- second order through dot_general --------------------------------------------------------

/// f(W) = sum((x W)^2) for a fixed x (2, 3); grad f(W) = 2 x^T x W.
const Array& fixed_x() {
  static const Array x = f64({0.5, -1.0, 2.0, 1.5, 0.25, -0.75}, {2, 3});
  return x;
}

TraceFn squared_matmul_loss() {
  return [](const std::vector<Tensor>& a) {
    const Tensor y = matmul(constant(fixed_x()), a[0]);
    return std::vector<Tensor>{sum(y * y)};
  };
}

TEST(LinalgVjp, SecondOrderHessianVectorProduct) {
  // check_grads on grad f compares <V, grad f(W)>'s gradient (the Hessian-vector product H V)
  // with finite differences of the gradient.
  check_grads(grad(squared_matmul_loss()), {random_f64({3, 4}, 16)}, {.seed = 17});
  // Exact: H V = 2 x^T x V, independent of W.
  const Array V = random_f64({3, 4}, 18);
  TraceFn hvp_loss = [V](const std::vector<Tensor>& a) {
    const Tensor gw = grad(squared_matmul_loss())({a[0]})[0];
    return std::vector<Tensor>{sum(gw * constant(V))};
  };
  const Array hv = grads_at(hvp_loss, {random_f64({3, 4}, 19)})[0];
  const std::vector<double> x = fixed_x().to_doubles();
  const std::vector<double> v = V.to_doubles();
  std::vector<double> expected(12, 0.0);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 3; ++k) {
        const double xtx = x[0 * 3 + i] * x[0 * 3 + k] + x[1 * 3 + i] * x[1 * 3 + k];
        expected[static_cast<size_t>(i * 4 + j)] += 2 * xtx * v[static_cast<size_t>(k * 4 + j)];
      }
    }
  }
  expect_values(hv, expected, 1e-12);
}

TEST(LinalgVjp, SecondOrderMixedPartials) {
  // d/dx of d/dW sum((x W)^2): differentiates the backward dot_generals again.
  TraceFn f = [](const std::vector<Tensor>& a) {
    const Tensor y = matmul(a[0], a[1]);
    return std::vector<Tensor>{sum(y * y)};
  };
  check_grads(grad(f, {1}), {random_f64({2, 3}, 20), random_f64({3, 4}, 21)}, {.seed = 22});
  check_grads(grad(f, {0, 1}), {random_f64({2, 3}, 23), random_f64({3, 4}, 24)}, {.seed = 25});
}

// ---- convolution -----------------------------------------------------------------------------

/// A raw convolution: layouts as letter strings (lhs "N", "C", spatial letters; kernel "O",
/// "I", the same spatial letters; output "N", "C", spatial letters); empty vectors leave the
/// attribute out (the op's defaults).
struct ConvSpec {
  std::string lhs = "NHWC", rhs = "HWIO", out = "NHWC";
  Ints strides, padding, lhs_dilation, rhs_dilation;
  int64_t feature_groups = 1, batch_groups = 1;
};

int64_t letter(const std::string& layout, char c) { return static_cast<int64_t>(layout.find(c)); }

Ints spatial(const std::string& lhs_layout, const std::string& layout) {
  Ints dims;
  for (char c : lhs_layout) {
    if (c != 'N' && c != 'C') dims.push_back(letter(layout, c));
  }
  return dims;
}

ir::Attributes conv_attrs(const ConvSpec& s) {
  ir::Attributes a = {{"feature_group_count", s.feature_groups},
                      {"batch_group_count", s.batch_groups},
                      {"input_batch_dimension", letter(s.lhs, 'N')},
                      {"input_feature_dimension", letter(s.lhs, 'C')},
                      {"input_spatial_dimensions", spatial(s.lhs, s.lhs)},
                      {"kernel_input_feature_dimension", letter(s.rhs, 'I')},
                      {"kernel_output_feature_dimension", letter(s.rhs, 'O')},
                      {"kernel_spatial_dimensions", spatial(s.lhs, s.rhs)},
                      {"output_batch_dimension", letter(s.out, 'N')},
                      {"output_feature_dimension", letter(s.out, 'C')},
                      {"output_spatial_dimensions", spatial(s.lhs, s.out)}};
  if (!s.strides.empty()) a.set("window_strides", s.strides);
  if (!s.padding.empty()) a.set("padding", s.padding);
  if (!s.lhs_dilation.empty()) a.set("lhs_dilation", s.lhs_dilation);
  if (!s.rhs_dilation.empty()) a.set("rhs_dilation", s.rhs_dilation);
  return a;
}

TraceFn raw_conv(const ConvSpec& s) {
  return [s](const std::vector<Tensor>& a) { return emit("convolution", {a[0], a[1]}, conv_attrs(s)); };
}

TraceFn conv2d_fn(const Conv2DOptions& o) {
  return [o](const std::vector<Tensor>& a) { return std::vector<Tensor>{conv2d(a[0], a[1], o)}; };
}

void check_conv(const TraceFn& f, const Shape& lhs, const Shape& rhs, uint64_t seed) {
  check_grads(f, {random_f64(lhs, seed), random_f64(rhs, seed + 1)}, {.seed = seed});
}

TEST(LinalgVjp, Conv2dStridesAndPadding) {
  check_conv(conv2d_fn({.strides = {2, 2}, .padding = "same"}), {1, 5, 5, 2}, {3, 3, 2, 3}, 30);
  // VALID with stride 2 leaves the last row and column of x unread: their cotangent is zero.
  check_conv(conv2d_fn({.strides = {2, 2}}), {2, 6, 5, 1}, {3, 2, 1, 2}, 32);
  check_conv(conv2d_fn({.strides = {1, 2}, .explicit_padding = {2, 0, 1, 3}}), {1, 4, 4, 2}, {2, 3, 2, 2}, 34);
}

TEST(LinalgVjp, Conv2dDilation) {
  check_conv(conv2d_fn({.padding = "same", .dilation = {2, 2}}), {1, 6, 6, 2}, {2, 2, 2, 2}, 36);
  check_conv(conv2d_fn({.strides = {2, 1}, .dilation = {2, 1}}), {1, 7, 4, 1}, {2, 3, 1, 2}, 38);
}

TEST(LinalgVjp, Conv2dFeatureGroupsAndDepthwise) {
  check_conv(conv2d_fn({.padding = "same", .feature_group_count = 2}), {1, 4, 4, 4}, {3, 3, 2, 4}, 40);
  // Depthwise with channel multiplier 2.
  check_conv(conv2d_fn({.strides = {1, 2}, .feature_group_count = 3}), {1, 4, 4, 3}, {3, 3, 1, 6}, 42);
}

TEST(LinalgVjp, ConvolutionBatchGroups) {
  // 4 images in 2 batch groups: output batch 2, each group of 2 output features sees its own
  // half of the batch.
  check_conv(raw_conv({.batch_groups = 2}), {4, 3, 3, 2}, {2, 2, 2, 4}, 44);
  ConvSpec nchw{
      .lhs = "NCHW", .rhs = "OIHW", .out = "NCHW", .strides = {1, 2}, .padding = {1, 0, 0, 1}, .batch_groups = 2};
  check_conv(raw_conv(nchw), {4, 2, 3, 3}, {4, 2, 2, 2}, 46);
}

TEST(LinalgVjp, ConvolutionNchwLayouts) {
  ConvSpec s{.lhs = "NCHW", .rhs = "OIHW", .out = "NCHW", .strides = {2, 1}, .padding = {1, 1, 0, 1}};
  check_conv(raw_conv(s), {2, 3, 5, 4}, {2, 3, 3, 2}, 48);
  // Kernel output features before input features, with feature groups, and an NHWC output.
  s = {.lhs = "NCHW", .rhs = "OIHW", .out = "NHWC", .padding = {1, 1, 1, 1}, .feature_groups = 2};
  check_conv(raw_conv(s), {1, 4, 3, 3}, {4, 2, 2, 2}, 50);
  // Spatial dims in unusual places and orders.
  s = {.lhs = "HNWC", .rhs = "IWOH", .out = "WCNH", .strides = {1, 2}};
  check_conv(raw_conv(s), {4, 2, 5, 2}, {2, 2, 3, 2}, 52);
}

TEST(LinalgVjp, ConvolutionLhsDilationAndNegativePadding) {
  // 1-D: lhs dilation (a transposed convolution), rhs dilation, stride 3, cropping on the left.
  ConvSpec s{.lhs = "NWC",
             .rhs = "WIO",
             .out = "NWC",
             .strides = {3},
             .padding = {-1, 2},
             .lhs_dilation = {2},
             .rhs_dilation = {2}};
  check_conv(raw_conv(s), {1, 5, 2}, {3, 2, 2}, 54);
  s = {.lhs = "NHWC",
       .rhs = "HWIO",
       .out = "NHWC",
       .strides = {2, 1},
       .padding = {0, -1, 2, 1},
       .lhs_dilation = {3, 2},
       .rhs_dilation = {1, 2}};
  check_conv(raw_conv(s), {2, 3, 3, 1}, {2, 2, 1, 2}, 56);
}

TEST(LinalgVjp, ConvolutionExactValues) {
  // 1-D x = [1, 2, 3, 4, 5], k = [1, 1], stride 2 (VALID): out = [x0 + x1, x2 + x3]; x4 is not
  // read. loss = sum(out): dx = [1, 1, 1, 1, 0], dk = [x0 + x2, x1 + x3] = [4, 6].
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(raw_conv({.lhs = "NWC", .rhs = "WIO", .out = "NWC", .strides = {2}})(a)[0])};
  };
  const std::vector<Array> g = grads_at(f, {f64({1, 2, 3, 4, 5}, {1, 5, 1}), f64({1, 1}, {2, 1, 1})}, {0, 1});
  expect_values(g[0], {1, 1, 1, 1, 0});
  expect_values(g[1], {4, 6});
  // Stride 1, padding 1 on both sides: every x is read by both taps except at the ends, where
  // one tap falls on padding.
  TraceFn h = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(raw_conv({.lhs = "NWC", .rhs = "WIO", .out = "NWC", .padding = {1, 1}})(a)[0])};
  };
  const std::vector<Array> gh = grads_at(h, {f64({1, 2, 3}, {1, 3, 1}), f64({10, 100}, {2, 1, 1})}, {0, 1});
  // out = [100 x0, 10 x0 + 100 x1, 10 x1 + 100 x2, 10 x2]
  expect_values(gh[0], {110, 110, 110});
  expect_values(gh[1], {6, 6});
}

TEST(LinalgVjp, ConvolutionEmptyOperands) {
  TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(conv2d(a[0], a[1]))}; };
  // An empty batch: no output, the kernel gets zeros.
  std::vector<Array> g = grads_at(f, {Array::zeros({0, 3, 3, 1}, DType::kF64), random_f64({2, 2, 1, 2}, 58)}, {0, 1});
  EXPECT_EQ(g[0].shape(), (Shape{0, 3, 3, 1}));
  expect_values(g[1], std::vector<double>(8, 0.0));
  // No input features: the output is zeros, both cotangents are empty.
  g = grads_at(f, {Array::zeros({1, 3, 3, 0}, DType::kF64), Array::zeros({2, 2, 0, 2}, DType::kF64)}, {0, 1});
  EXPECT_EQ(g[0].shape(), (Shape{1, 3, 3, 0}));
  EXPECT_EQ(g[1].shape(), (Shape{2, 2, 0, 2}));
}

TEST(LinalgVjp, ConvolutionSecondOrder) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    const Tensor y = conv2d(a[0], a[1], {.strides = {2, 1}, .padding = "same"});
    return std::vector<Tensor>{sum(y * y)};
  };
  // A 1x1 kernel needs no reversal.
  check_grads(grad(f, {0, 1}), {random_f64({1, 3, 3, 2}, 60), random_f64({1, 1, 2, 2}, 61)}, {.seed = 62});
  // A 2x2 kernel is reversed in the lhs cotangent, so the second order needs reverse's rule.
  check_grads(grad(f, {0, 1}), {random_f64({1, 3, 3, 2}, 63), random_f64({2, 2, 2, 2}, 64)}, {.seed = 65});
}

}  // namespace
}  // namespace ingot
