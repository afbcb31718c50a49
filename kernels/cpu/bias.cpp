// CPU reference of the bias + activation kernel (kernels/cuda/bias.cu;
// include/ingot/kernels/cuda_bias.h) and the shape check its launcher shares.
#include <fmt/format.h>

#include <algorithm>

#include "../cuda/launch_checks.h"
#include "ingot/kernels/cuda_bias.h"
#include "ingot/runtime/error.h"

namespace ingot::kernels {
namespace detail {

void check_bias_shape(std::string_view who, int64_t m, int64_t n, int64_t ldc) {
  check_in(who, "m", m, 1, int64_t{1} << 40);
  check_in(who, "n", n, 1, int64_t{1} << 40);
  if (ldc < m) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: ldc = {} is less than m = {}", who, ldc, m),
                "ldc is the column-major matrix's column stride, at least its row count");
  }
}

}  // namespace detail

void bias_act_reference(std::span<float> c, std::span<const float> bias, int64_t m, int64_t n, int64_t ldc, bool relu) {
  const char* who = "bias_act_reference";
  detail::check_bias_shape(who, m, n, ldc);
  detail::check_size(who, "bias", static_cast<int64_t>(bias.size()), m);
  const int64_t needed = (n - 1) * ldc + m;
  if (static_cast<int64_t>(c.size()) < needed) {
    throw Error(
        ErrorCode::kShapeMismatch,
        fmt::format("{}: c has {} elements, a ({}, {}) matrix with ldc {} needs {}", who, c.size(), m, n, ldc, needed),
        "pass the whole column-major matrix");
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float v = c[static_cast<size_t>(i + j * ldc)] + bias[static_cast<size_t>(i)];
      if (relu) v = std::max(v, 0.0f);
      c[static_cast<size_t>(i + j * ldc)] = v;
    }
  }
}

}  // namespace ingot::kernels
