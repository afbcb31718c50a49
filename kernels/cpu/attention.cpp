// CPU reference of the causal flash-style attention kernel (kernels/cuda/attention.cu;
// include/ingot/kernels/cuda_attention.h): the kernel's key tiles and online softmax in f32.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "../cuda/launch_checks.h"
#include "ingot/kernels/cuda_attention.h"
#include "ingot/runtime/error.h"

namespace ingot::kernels {
namespace detail {

void check_attention_args(std::string_view who, int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                          std::optional<float> scale) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  check_in(who, "batch", batch, 1, kMax);
  check_in(who, "heads", heads, 1, kMax);
  check_in(who, "seq_len", seq_len, 1, kMax);
  check_in(who, "head_dim", head_dim, 1, kAttentionMaxHeadDim);
  checked_product(who, checked_product(who, batch, heads), checked_product(who, seq_len, head_dim));
  if (scale && !std::isfinite(*scale)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: scale = {} is invalid: it must be finite", who, *scale),
                "omit it for 1 / sqrt(head_dim)");
  }
}

}  // namespace detail

namespace {

/// One query row of one (b, h) as the kernel's warp computes it: out_row (D), returns the lse.
float attend_row(const float* q_row, const float* k, const float* v, float* out_row, int64_t t, int64_t head_dim,
                 float scale) {
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  std::vector<float> acc(head_dim, 0.0f);
  std::array<float, kAttentionKeyTile> p{};
  for (int64_t k0 = 0; k0 <= t; k0 += kAttentionKeyTile) {
    const int64_t keys = std::min(kAttentionKeyTile, t - k0 + 1);
    std::array<float, kAttentionKeyTile> s{};
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < keys; ++j) {
      float dot = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) dot += q_row[d] * k[(k0 + j) * head_dim + d];
      s[j] = scale * dot;
      tile_max = std::fmax(tile_max, s[j]);
    }
    const float m_new = std::fmax(m, tile_max);
    const float corr = std::exp(m - m_new);
    float sum = 0.0f;
    for (int64_t j = 0; j < keys; ++j) sum += (p[j] = std::exp(s[j] - m_new));
    l = l * corr + sum;
    for (float& a : acc) a *= corr;
    for (int64_t j = 0; j < keys; ++j) {
      for (int64_t d = 0; d < head_dim; ++d) acc[d] += p[j] * v[(k0 + j) * head_dim + d];
    }
    m = m_new;
  }
  for (int64_t d = 0; d < head_dim; ++d) out_row[d] = acc[d] / l;
  return m + std::log(l);
}

}  // namespace

void attention_forward_reference(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                 std::span<float> out, std::span<float> lse, int64_t batch, int64_t heads,
                                 int64_t seq_len, int64_t head_dim, std::optional<float> scale) {
  const char* who = "attention_forward_reference";
  detail::check_attention_args(who, batch, heads, seq_len, head_dim, scale);
  const int64_t bh = batch * heads, n = bh * seq_len * head_dim;
  for (const auto& [name, size] : {std::pair{"q", q.size()}, {"k", k.size()}, {"v", v.size()}, {"out", out.size()}}) {
    detail::check_size(who, name, static_cast<int64_t>(size), n);
  }
  detail::check_size(who, "lse", static_cast<int64_t>(lse.size()), bh * seq_len);
  const float sc = scale.value_or(1.0f / std::sqrt(static_cast<float>(head_dim)));
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t base = h * seq_len * head_dim;
    for (int64_t t = 0; t < seq_len; ++t) {
      lse[h * seq_len + t] = attend_row(q.data() + base + t * head_dim, k.data() + base, v.data() + base,
                                        out.data() + base + t * head_dim, t, head_dim, sc);
    }
  }
}

}  // namespace ingot::kernels
