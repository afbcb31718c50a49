// Layer norm: the CPU reference against hand values and against the formulas in double (the
// forward directly; dx, dgamma, dbeta as central differences of sum(out * w) for a fixed w, so
// dout = w), its errors, and its launches.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ingot/kernels/cuda_layernorm.h"
#include "ingot/runtime/error.h"
#include "kernels_test_util.h"

namespace ingot {
namespace {

using namespace ingot::kernels;

/// sum(layernorm(x) * w) in double, for x (batch, channels).
double weighted_output(const std::vector<double>& x, const std::vector<double>& gamma, const std::vector<double>& beta,
                       const std::vector<float>& w, int64_t channels, double eps) {
  double total = 0.0;
  for (size_t o = 0; o < x.size(); o += channels) {
    double m = 0.0, v = 0.0;
    for (int64_t c = 0; c < channels; ++c) m += x[o + c] / channels;
    for (int64_t c = 0; c < channels; ++c) v += (x[o + c] - m) * (x[o + c] - m) / channels;
    for (int64_t c = 0; c < channels; ++c) {
      total += ((x[o + c] - m) / std::sqrt(v + eps) * gamma[c] + beta[c]) * w[o + c];
    }
  }
  return total;
}

/// Central differences of weighted_output with respect to each element of `target`.
std::vector<double> numeric_grad(std::vector<double>& target, const std::function<double()>& f) {
  std::vector<double> g(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    const double h = 1e-5, keep = target[i];
    target[i] = keep + h;
    const double up = f();
    target[i] = keep - h;
    const double down = f();
    target[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

TEST(LayernormReference, HandValues) {
  // Row [1, 2, 3, 4]: mean 2.5, var 1.25 -> rstd 1/sqrt(1.25); gamma 2, beta 1 on column 0.
  const std::vector<float> x = {1, 2, 3, 4}, gamma = {2, 1, 1, 1}, beta = {1, 0, 0, 0};
  std::vector<float> out(4), mean(1), rstd(1);
  layernorm_forward_reference(x, gamma, beta, out, mean, rstd, 1, 4, 0.0f);
  const float r = 1.0f / std::sqrt(1.25f);
  EXPECT_FLOAT_EQ(mean[0], 2.5f);
  EXPECT_FLOAT_EQ(rstd[0], r);
  EXPECT_FLOAT_EQ(out[0], -1.5f * r * 2 + 1);
  EXPECT_FLOAT_EQ(out[1], -0.5f * r);
  EXPECT_FLOAT_EQ(out[3], 1.5f * r);
  // dout = 1 everywhere with gamma = 1: dnorm is constant, so dx = 0; dbeta = 1, dgamma = norm.
  const std::vector<float> ones(4, 1.0f);
  std::vector<float> dx(4, 9.0f), dgamma(4), dbeta(4);
  layernorm_backward_reference(ones, x, ones, mean, rstd, dx, dgamma, dbeta, 1, 4);
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(dx[c], 0.0f, 1e-6) << c;
    EXPECT_FLOAT_EQ(dbeta[c], 1.0f);
    EXPECT_FLOAT_EQ(dgamma[c], (x[c] - 2.5f) * r);
  }
}

TEST(LayernormReference, MatchesTheFormulasInDouble) {
  const int64_t batch = 5, channels = 37;
  const float eps = 1e-3f;
  const std::vector<float> x = testing::random_floats(batch * channels, -3.0f, 5.0f, 3);
  const std::vector<float> gamma = testing::random_floats(channels, 0.5f, 1.5f, 4);
  const std::vector<float> beta = testing::random_floats(channels, -1.0f, 1.0f, 5);
  const std::vector<float> w = testing::random_floats(batch * channels, -1.0f, 1.0f, 6);
  std::vector<float> out(batch * channels), mean(batch), rstd(batch);
  layernorm_forward_reference(x, gamma, beta, out, mean, rstd, batch, channels, eps);
  std::vector<float> dx(batch * channels), dgamma(channels), dbeta(channels);
  layernorm_backward_reference(w, x, gamma, mean, rstd, dx, dgamma, dbeta, batch, channels);

  std::vector<double> xd(x.begin(), x.end()), gd(gamma.begin(), gamma.end()), bd(beta.begin(), beta.end());
  std::vector<double> want_out(batch * channels), want_mean(batch), want_rstd(batch);
  for (int64_t b = 0; b < batch; ++b) {
    double m = 0.0, v = 0.0;
    for (int64_t c = 0; c < channels; ++c) m += xd[b * channels + c] / channels;
    for (int64_t c = 0; c < channels; ++c) v += std::pow(xd[b * channels + c] - m, 2) / channels;
    want_mean[b] = m;
    want_rstd[b] = 1.0 / std::sqrt(v + eps);
    for (int64_t c = 0; c < channels; ++c) {
      want_out[b * channels + c] = (xd[b * channels + c] - m) * want_rstd[b] * gd[c] + bd[c];
    }
  }
  testing::expect_close(out, want_out, 1e-5, 1e-5, "out");
  testing::expect_close(mean, want_mean, 1e-6, 1e-6, "mean");
  testing::expect_close(rstd, want_rstd, 1e-6, 1e-5, "rstd");
  const auto f = [&] { return weighted_output(xd, gd, bd, w, channels, eps); };
  testing::expect_close(dx, numeric_grad(xd, f), 1e-4, 1e-3, "dx");
  testing::expect_close(dgamma, numeric_grad(gd, f), 1e-4, 1e-4, "dgamma");
  testing::expect_close(dbeta, numeric_grad(bd, f), 1e-4, 1e-4, "dbeta");
}

TEST(LayernormReference, BadArgumentsThrowAndWriteNothing) {
  const std::vector<float> x = {1, 2, 3, 4}, gamma = {1, 1}, beta = {0, 0};
  std::vector<float> out(4, -7.0f), mean(2, -7.0f), rstd(2, -7.0f);
  try {
    layernorm_forward_reference(x, gamma, beta, out, mean, std::span<float>(rstd).first(1), 2, 2, 1e-3f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch);
    EXPECT_NE(e.message().find("rstd has 1 elements, expected 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out, std::vector<float>(4, -7.0f));
  try {
    layernorm_forward_reference(x, gamma, beta, out, mean, rstd, 2, 2, -1.0f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("eps = -1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(layernorm_backward_reference(x, x, gamma, mean, rstd, out, out, mean, 2, 2), Error);
}

TEST(LayernormLaunch, ConfigurationsAndParameters) {
  EXPECT_EQ(layernorm_block_threads(768), 768);
  EXPECT_EQ(layernorm_block_threads(770), 800);
  EXPECT_EQ(layernorm_block_threads(4096), 1024);
  CudaKernelLaunch f = layernorm_forward_launch(1, 2, 3, 4, 5, 6, 32, 768, 1e-5f);
  EXPECT_EQ(f.kernel, "ingot_layernorm_forward_f32");
  EXPECT_EQ(f.grid, (std::array<int64_t, 3>{32, 1, 1}));
  EXPECT_EQ(f.block, (std::array<int64_t, 3>{768, 1, 1}));
  ASSERT_EQ(f.params.size(), 9u);
  EXPECT_EQ(*static_cast<float*>(f.param_pointers()[8]), 1e-5f);
  const CudaKernelLaunch dx = layernorm_backward_dx_launch(1, 2, 3, 4, 5, 6, 32, 768);
  EXPECT_EQ(dx.kernel, "ingot_layernorm_backward_dx_f32");
  EXPECT_EQ(dx.params.size(), 8u);
  const CudaKernelLaunch p = layernorm_backward_params_launch(1, 2, 3, 4, 5, 6, 32, 769);
  EXPECT_EQ(p.kernel, "ingot_layernorm_backward_params_f32");
  EXPECT_EQ(p.grid, (std::array<int64_t, 3>{4, 1, 1}));
  EXPECT_EQ(p.block, (std::array<int64_t, 3>{256, 1, 1}));
}

TEST(LayernormLaunch, BadArgumentsThrow) {
  try {
    layernorm_forward_launch(1, 2, 3, 4, 0, 6, 32, 768, 1e-5f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("mean is a null device address"), std::string::npos) << e.what();
  }
  EXPECT_THROW(layernorm_forward_launch(1, 2, 3, 4, 5, 6, 32, 768, std::nanf("")), Error);
  EXPECT_THROW(layernorm_forward_launch(1, 2, 3, 4, 5, 6, 0, 768, 1e-5f), Error);
  EXPECT_THROW(layernorm_backward_dx_launch(1, 2, 3, 4, 5, 6, 32, 0), Error);
  EXPECT_THROW(layernorm_backward_params_launch(1, 2, 3, 4, 5, 0, 32, 8), Error);
}

}  // namespace
}  // namespace ingot
