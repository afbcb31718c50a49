// CPU reference of the fused softmax cross-entropy kernels (kernels/cuda/softmax_cross_entropy.cu;
// include/ingot/kernels/cuda_softmax_cross_entropy.h): the same f32 formulas per row.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "../cuda/launch_checks.h"
#include "ingot/kernels/cuda_softmax_cross_entropy.h"
#include "ingot/runtime/error.h"

namespace ingot::kernels {
namespace {

void check_rows(const char* who, int64_t batch, int64_t classes, std::span<const int32_t> labels) {
  detail::check_in(who, "batch", batch, 1, std::numeric_limits<int64_t>::max());
  detail::check_in(who, "classes", classes, 1, std::numeric_limits<int64_t>::max());
  detail::checked_product(who, batch, classes);
  detail::check_size(who, "labels", static_cast<int64_t>(labels.size()), batch);
  for (int64_t b = 0; b < batch; ++b) {
    if (labels[b] < 0 || labels[b] >= classes) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("{}: labels[{}] = {} is outside [0, {})", who, b, labels[b], classes),
                  "labels are class indices in [0, classes)");
    }
  }
}

}  // namespace

void softmax_ce_forward_reference(std::span<const float> logits, std::span<const int32_t> labels,
                                  std::span<float> losses, std::span<float> probs, int64_t batch, int64_t classes) {
  const char* who = "softmax_ce_forward_reference";
  check_rows(who, batch, classes, labels);
  detail::check_size(who, "logits", static_cast<int64_t>(logits.size()), batch * classes);
  detail::check_size(who, "losses", static_cast<int64_t>(losses.size()), batch);
  detail::check_size(who, "probs", static_cast<int64_t>(probs.size()), batch * classes);
  for (int64_t b = 0; b < batch; ++b) {
    const std::span<const float> x = logits.subspan(b * classes, classes);
    float m = -std::numeric_limits<float>::infinity();
    for (float v : x) m = std::fmax(m, v);
    float s = 0.0f;
    for (float v : x) s += std::exp(v - m);
    const float inv_s = 1.0f / s;
    for (int64_t c = 0; c < classes; ++c) probs[b * classes + c] = std::exp(x[c] - m) * inv_s;
    losses[b] = (m - x[labels[b]]) + std::log(s);
  }
}

void softmax_ce_backward_reference(std::span<const float> probs, std::span<const int32_t> labels, float dloss,
                                   std::span<float> dlogits, int64_t batch, int64_t classes) {
  const char* who = "softmax_ce_backward_reference";
  check_rows(who, batch, classes, labels);
  detail::check_size(who, "probs", static_cast<int64_t>(probs.size()), batch * classes);
  detail::check_size(who, "dlogits", static_cast<int64_t>(dlogits.size()), batch * classes);
  const float scale = dloss / static_cast<float>(batch);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t i = b * classes + c;
      dlogits[i] = (probs[i] - (c == labels[b] ? 1.0f : 0.0f)) * scale;
    }
  }
}

}  // namespace ingot::kernels
