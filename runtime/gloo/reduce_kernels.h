// Element-wise reduction kernels of the Gloo collectives, in the two signatures Gloo calls:
// gloo::allreduce's `c = op(a, b)` over void pointers and gloo::ReductionFunction's in-place
// `x = op(x, y)`, over the element-wise operations of reduce_ops.h (kMean reduces with the sum
// and divides after).
#pragma once

#include <gloo/algorithm.h>
#include <gloo/allreduce.h>

#include <cstddef>
#include <cstdint>

#include "ingot/runtime/communicator.h"
#include "reduce_ops.h"

namespace ingot::gloo_kernels {

using reduce_ops::Max;
using reduce_ops::Min;
using reduce_ops::Sum;
using reduce_ops::divide;

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
    case ReduceOp::kMax:
      return &reduce3<T, Max>;
    case ReduceOp::kMin:
      return &reduce3<T, Min>;
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      break;
  }
  return &reduce3<T, Sum>;
}

/// The gloo::ReductionFunction for Gloo's old-style algorithms (kMean: the sum).
template <class T>
gloo::ReductionFunction<T> reduction_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return gloo::ReductionFunction<T>(gloo::CUSTOM, &reduce2<T, Max>);
    case ReduceOp::kMin:
      return gloo::ReductionFunction<T>(gloo::CUSTOM, &reduce2<T, Min>);
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      break;
  }
  return gloo::ReductionFunction<T>(gloo::CUSTOM, &reduce2<T, Sum>);
}

}  // namespace ingot::gloo_kernels
