// Element-wise operations of the host-memory collectives (Gloo's kernels, runtime/gloo/
// reduce_kernels.h, and the shared-memory group): integer sums wrap around (computed in the
// unsigned type: no signed overflow); float max/min propagate NaN (as torch.maximum); kMean is
// the sum followed by divide.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace ingot::reduce_ops {

/// a + b (integers wrap around).
struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

/// The larger of a and b; NaN if either is NaN.
struct Max {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return a < b ? b : a;
  }
};

/// The smaller of a and b; NaN if either is NaN.
struct Min {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return b < a ? b : a;
  }
};

/// data[i] /= divisor (integers: truncation toward zero), for kMean.
template <class T>
void divide(T* data, int64_t n, int divisor) {
  const T d = static_cast<T>(divisor);
  for (int64_t i = 0; i < n; ++i) data[i] = data[i] / d;
}

}  // namespace ingot::reduce_ops
