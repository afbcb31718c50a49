// Causal flash-style attention: the CPU reference (the kernel's tiles and online softmax) against
// hand values and against the naive softmax(Q K^T / sqrt(D) + causal mask) V in double, its
// errors, and the launch.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ingot/kernels/cuda_attention.h"
#include "ingot/runtime/error.h"
#include "kernels_test_util.h"

namespace ingot {
namespace {

using namespace ingot::kernels;

/// Naive causal attention in double: the full score matrix with -inf above the diagonal.
void naive_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int64_t bh,
                     int64_t seq, int64_t dim, std::vector<double>& out, std::vector<double>& lse) {
  out.assign(bh * seq * dim, 0.0);
  lse.assign(bh * seq, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t base = h * seq * dim;
    for (int64_t t = 0; t < seq; ++t) {
      std::vector<double> s(seq, -INFINITY);
      double mx = -INFINITY;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < dim; ++d) dot += double{q[base + t * dim + d]} * k[base + j * dim + d];
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < seq; ++j) sum += std::exp(s[j] - mx);  // exp(-inf) = 0: the mask
      for (int64_t j = 0; j < seq; ++j) {
        for (int64_t d = 0; d < dim; ++d) out[base + t * dim + d] += std::exp(s[j] - mx) / sum * v[base + j * dim + d];
      }
      lse[h * seq + t] = mx + std::log(sum);
    }
  }
}

TEST(AttentionReference, HandValues) {
  // D = 1 (scale 1), T = 2: row 0 sees key 0 only -> out v0, lse q0 k0 = 0; row 1 scores
  // 1 * 0 and 1 * ln 3 -> weights 1/4, 3/4 -> out 4/4 + 3 * 8/4 = 7, lse ln 4.
  const std::vector<float> q = {0.0f, 1.0f}, k = {0.0f, std::log(3.0f)}, v = {4.0f, 8.0f};
  std::vector<float> out(2), lse(2);
  attention_forward_reference(q, k, v, out, lse, 1, 1, 2, 1);
  EXPECT_FLOAT_EQ(out[0], 4.0f);
  EXPECT_NEAR(out[1], 7.0f, 1e-5);
  EXPECT_FLOAT_EQ(lse[0], 0.0f);
  EXPECT_NEAR(lse[1], std::log(4.0f), 1e-6);
}

TEST(AttentionReference, MatchesNaiveCausalSoftmaxInDouble) {
  // Sequence lengths across tile edges (31, 32, 33, 70), head dims 1 .. 128.
  const std::vector<std::array<int64_t, 4>> shapes = {{1, 1, 1, 8},  {2, 3, 70, 16}, {1, 2, 33, 128},
                                                      {1, 1, 32, 1}, {2, 1, 31, 48}, {1, 1, 100, 64}};
  unsigned seed = 20;
  for (const auto& [b, h, t, d] : shapes) {
    const size_t n = b * h * t * d;
    const std::vector<float> q = testing::random_floats(n, -2.0f, 2.0f, seed++);
    const std::vector<float> k = testing::random_floats(n, -2.0f, 2.0f, seed++);
    const std::vector<float> v = testing::random_floats(n, -1.0f, 1.0f, seed++);
    std::vector<float> out(n), lse(b * h * t);
    attention_forward_reference(q, k, v, out, lse, b, h, t, d);
    std::vector<double> want_out, want_lse;
    naive_attention(q, k, v, b * h, t, d, want_out, want_lse);
    const std::string what = fmt::format("B={} H={} T={} D={}", b, h, t, d);
    testing::expect_close(out, want_out, 1e-5, 1e-4, "out " + what);
    testing::expect_close(lse, want_lse, 1e-5, 1e-5, "lse " + what);
  }
}

TEST(AttentionReference, ExplicitScaleAndLargeScores) {
  // Scores of ~1e3 (scale 100): the online softmax's max keeps exp finite; the largest score wins.
  const std::vector<float> q = {1, 1, 1}, k = {1, 10, 5}, v = {1, 2, 3};
  std::vector<float> out(3), lse(3);
  attention_forward_reference(q, k, v, out, lse, 1, 1, 3, 1, 100.0f);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
  EXPECT_FLOAT_EQ(out[2], 2.0f);
  EXPECT_NEAR(lse[2], 1000.0f, 1e-3);
}

TEST(AttentionReference, BadArgumentsThrowAndWriteNothing) {
  const std::vector<float> x(2 * 129, 1.0f);
  std::vector<float> out(2 * 129, -7.0f), lse(2, -7.0f);
  try {
    attention_forward_reference(x, x, x, out, lse, 1, 1, 2, 129);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("head_dim = 129 is invalid"), std::string::npos) << e.what();
  }
  try {
    attention_forward_reference(x, x, x, out, std::span<float>(lse).first(1), 1, 2, 1, 129 - 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch);
  }
  EXPECT_THROW(attention_forward_reference(x, x, x, out, lse, 1, 1, 2, 129, NAN), Error);
  EXPECT_EQ(out, std::vector<float>(2 * 129, -7.0f));
  EXPECT_EQ(lse, std::vector<float>(2, -7.0f));
}

TEST(AttentionLaunch, ConfigurationsWithinLimits) {
  EXPECT_EQ(attention_shared_bytes(128), 4 * (8 * 128 + 32 * 129 + 32 * 128));
  CudaKernelLaunch l = attention_forward_launch(1, 2, 3, 4, 5, 4, 12, 1024, 64);
  EXPECT_EQ(l.kernel, "ingot_attention_forward_f32");
  EXPECT_EQ(l.grid, (std::array<int64_t, 3>{4 * 12 * 128, 1, 1}));
  EXPECT_EQ(l.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(l.shared_bytes, attention_shared_bytes(64));
  ASSERT_EQ(l.params.size(), 9u);
  const std::vector<void*> p = l.param_pointers();
  EXPECT_EQ(*static_cast<int64_t*>(p[5]), 48);
  EXPECT_EQ(*static_cast<int64_t*>(p[6]), 1024);
  EXPECT_EQ(*static_cast<float*>(p[8]), 0.125f);
  CudaKernelLaunch big = attention_forward_launch(1, 2, 3, 4, 5, 1, 1, 9, 128, 0.5f);
  EXPECT_EQ(big.grid[0], 2);
  EXPECT_LE(big.shared_bytes, kMaxDefaultSharedBytes);
  EXPECT_EQ(*static_cast<float*>(big.param_pointers()[8]), 0.5f);
}

TEST(AttentionLaunch, BadArgumentsThrow) {
  EXPECT_THROW(attention_forward_launch(1, 2, 3, 4, 5, 1, 1, 8, 0), Error);
  EXPECT_THROW(attention_forward_launch(1, 2, 3, 4, 5, 1, 1, 0, 8), Error);
  EXPECT_THROW(attention_forward_launch(1, 2, 0, 4, 5, 1, 1, 8, 8), Error);
  try {
    attention_forward_launch(1, 2, 3, 4, 5, int64_t{1} << 20, 1 << 10, 1 << 10, 8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("exceed the grid"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ingot
