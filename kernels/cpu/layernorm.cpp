// CPU reference of the layer-norm kernels (kernels/cuda/layernorm.cu;
// include/ingot/kernels/cuda_layernorm.h): the same f32 formulas per row and per column.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "../cuda/launch_checks.h"
#include "ingot/kernels/cuda_layernorm.h"
#include "ingot/runtime/error.h"

namespace ingot::kernels {
namespace {

void check_dims(const char* who, int64_t batch, int64_t channels) {
  detail::check_in(who, "batch", batch, 1, std::numeric_limits<int64_t>::max());
  detail::check_in(who, "channels", channels, 1, std::numeric_limits<int64_t>::max());
  detail::checked_product(who, batch, channels);
}

}  // namespace

void layernorm_forward_reference(std::span<const float> x, std::span<const float> gamma, std::span<const float> beta,
                                 std::span<float> out, std::span<float> mean, std::span<float> rstd, int64_t batch,
                                 int64_t channels, float eps) {
  const char* who = "layernorm_forward_reference";
  check_dims(who, batch, channels);
  if (!std::isfinite(eps) || eps < 0.0f) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: eps = {} is invalid: it must be finite and >= 0", who, eps));
  }
  const int64_t n = batch * channels;
  detail::check_size(who, "x", static_cast<int64_t>(x.size()), n);
  detail::check_size(who, "gamma", static_cast<int64_t>(gamma.size()), channels);
  detail::check_size(who, "beta", static_cast<int64_t>(beta.size()), channels);
  detail::check_size(who, "out", static_cast<int64_t>(out.size()), n);
  detail::check_size(who, "mean", static_cast<int64_t>(mean.size()), batch);
  detail::check_size(who, "rstd", static_cast<int64_t>(rstd.size()), batch);
  const auto cn = static_cast<float>(channels);
  for (int64_t b = 0; b < batch; ++b) {
    const std::span<const float> xr = x.subspan(b * channels, channels);
    float s = 0.0f;
    for (float v : xr) s += v;
    const float m = s / cn;
    float q = 0.0f;
    for (float v : xr) q += (v - m) * (v - m);
    const float r = 1.0f / std::sqrt(q / cn + eps);
    for (int64_t c = 0; c < channels; ++c) out[b * channels + c] = (xr[c] - m) * r * gamma[c] + beta[c];
    mean[b] = m;
    rstd[b] = r;
  }
}

void layernorm_backward_reference(std::span<const float> dout, std::span<const float> x, std::span<const float> gamma,
                                  std::span<const float> mean, std::span<const float> rstd, std::span<float> dx,
                                  std::span<float> dgamma, std::span<float> dbeta, int64_t batch, int64_t channels) {
  const char* who = "layernorm_backward_reference";
  check_dims(who, batch, channels);
  const int64_t n = batch * channels;
  detail::check_size(who, "dout", static_cast<int64_t>(dout.size()), n);
  detail::check_size(who, "x", static_cast<int64_t>(x.size()), n);
  detail::check_size(who, "gamma", static_cast<int64_t>(gamma.size()), channels);
  detail::check_size(who, "mean", static_cast<int64_t>(mean.size()), batch);
  detail::check_size(who, "rstd", static_cast<int64_t>(rstd.size()), batch);
  detail::check_size(who, "dx", static_cast<int64_t>(dx.size()), n);
  detail::check_size(who, "dgamma", static_cast<int64_t>(dgamma.size()), channels);
  detail::check_size(who, "dbeta", static_cast<int64_t>(dbeta.size()), channels);
  const auto cn = static_cast<float>(channels);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t o = b * channels;
    float a = 0.0f, q = 0.0f;
    for (int64_t c = 0; c < channels; ++c) {
      const float dnorm = dout[o + c] * gamma[c];
      a += dnorm;
      q += dnorm * (x[o + c] - mean[b]) * rstd[b];
    }
    const float dnorm_mean = a / cn, dnorm_norm_mean = q / cn;
    for (int64_t c = 0; c < channels; ++c) {
      const float norm = (x[o + c] - mean[b]) * rstd[b];
      dx[o + c] = (dout[o + c] * gamma[c] - dnorm_mean - norm * dnorm_norm_mean) * rstd[b];
    }
  }
  for (int64_t c = 0; c < channels; ++c) {
    float g = 0.0f, s = 0.0f;
    for (int64_t b = 0; b < batch; ++b) {
      const float d = dout[b * channels + c];
      g += d * ((x[b * channels + c] - mean[b]) * rstd[b]);
      s += d;
    }
    dgamma[c] = g;
    dbeta[c] = s;
  }
}

}  // namespace ingot::kernels
