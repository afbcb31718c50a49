// Element-wise reduction kernels of the Gloo collectives, in the two signatures Gloo calls:
// gloo::allreduce's `c = op(a, b)` over void pointers and gloo::ReductionFunction's in-place
// `x = op(x, y)`. Integer sums wrap around (computed in the unsigned type: no signed overflow);
// float max/min propagate NaN (as torch.maximum); kMean reduces with the sum and divides after.
#pragma once

#include <gloo/algorithm.h>
#include <gloo/allreduce.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ingot/runtime/communicator.h"

namespace ingot::gloo_kernels {

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

/// c[i] = Op(a[i], b[i]); c may alias a or b.
template <class T, class Op>
void reduce3(void* c, const void* a, const void* b, size_t n) {
  T* out = static_cast<T*>(c);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = Op::apply(x[i], y[i]);
}

/// x[i] = Op(x[i], y[i]).
template <class T, class Op>
void reduce2(T* x, const T* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = Op::apply(x[i], y[i]);
}

/// The kernel for gloo::AllreduceOptions::setReduceFunction (kMean: the sum).
template <class T>
gloo::AllreduceOptions::Func all_reduce_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return &reduce3<T, Max>;
    case ReduceOp::kMin: return &reduce3<T, Min>;
    case ReduceOp::kSum:
    case ReduceOp::kMean: break;
  }
  return &reduce3<T, Sum>;
}

/// The gloo::ReductionFunction for Gloo's old-style algorithms (kMean: the sum).
template <class T>
gloo::ReductionFunction<T> reduction_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return gloo::ReductionFunction<T>(gloo::CUSTOM, &reduce2<T, Max>);
    case ReduceOp::kMin: return gloo::ReductionFunction<T>(gloo::CUSTOM, &reduce2<T, Min>);
    case ReduceOp::kSum:
    case ReduceOp::kMean: break;
  }
  return gloo::ReductionFunction<T>(gloo::CUSTOM, &reduce2<T, Sum>);
}

/// data[i] /= divisor (integers: truncation toward zero), for kMean.
template <class T>
void divide(T* data, int64_t n, int divisor) {
  const T d = static_cast<T>(divisor);
  for (int64_t i = 0; i < n; ++i) data[i] = data[i] / d;
}

}  // namespace ingot::gloo_kernels
