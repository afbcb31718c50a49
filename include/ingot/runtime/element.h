// Element conversion with the semantics of the IR's `convert` op.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ingot/runtime/dtype.h"

namespace ingot {

/// Converts one element from storage type From to storage type To, as `convert` does:
/// - float -> float: round to nearest even (via float for f16/bf16);
/// - float -> integer: truncate toward zero; NaN -> 0; out of range saturates to the bounds
///   (what XLA's CPU backend does, and JAX users see);
/// - integer -> integer: two's complement wrap (as a C++ static_cast to the unsigned type);
/// - anything -> bool: value != 0 (NaN -> true); bool -> number: 0 or 1.
template <class To, class From>
To convert_element(From from) {
  using FC = compute_type_t<From>;
  FC v = static_cast<FC>(from);
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_floating_point_v<FC>) {
      return v != 0 || std::isnan(v);
    } else {
      return v != 0;
    }
  } else if constexpr (std::is_same_v<To, f16> || std::is_same_v<To, bf16>) {
    if constexpr (std::is_same_v<From, f16> || std::is_same_v<From, bf16>) {
      return To(static_cast<float>(v));
    } else if constexpr (std::is_same_v<FC, double>) {
      // Round f64 -> f32 -> half can double-round; go through float as XLA's CPU backend does.
      return To(static_cast<float>(v));
    } else {
      return To(static_cast<float>(v));
    }
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else {
    // To is an integer type.
    if constexpr (std::is_floating_point_v<FC>) {
      if (std::isnan(v)) return To(0);
      const double lo = static_cast<double>(std::numeric_limits<To>::min());
      const double hi = static_cast<double>(std::numeric_limits<To>::max());
      double t = std::trunc(static_cast<double>(v));
      if (t <= lo) return std::numeric_limits<To>::min();
      if (t >= hi) return std::numeric_limits<To>::max();
      return static_cast<To>(t);
    } else {
      using UTo = std::make_unsigned_t<To>;
      return static_cast<To>(static_cast<UTo>(v));
    }
  }
}

/// Reads element `i` of typed storage `p` as a double.
template <class T>
double element_to_double(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return reinterpret_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
  } else {
    return static_cast<double>(static_cast<compute_type_t<T>>(p[i]));
  }
}

}  // namespace ingot
