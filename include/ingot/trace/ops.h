// The Tensor API: free functions in ingot:: that record IR ops, NumPy-style broadcasting,
// and the usual composites (softmax, logsumexp, gelu, ...) built from core ops with
// numerically stable formulations. All functions must be called inside trace().
//
// Conventions: `axis`/`axes` may be negative (counted from the end); an out-of-range axis throws
// ingot::Error(kOutOfRange) naming the axis and the rank. Binary functions broadcast their
// operands NumPy-style (trailing dimensions aligned, size-1 dims stretched) and require equal
// dtypes (ingot::Error(kDTypeMismatch) with a hint to use convert()); a `double` operand is a
// weakly typed scalar that takes the other operand's dtype, as in JAX.
#pragma once

#include <optional>
#include <vector>

#include "ingot/trace/tensor.h"

namespace ingot {

// ---- creation ---------------------------------------------------------------------------
/// Captures `value` as a `constant` node (copied into the graph).
Tensor constant(const Array& value);
/// Scalar constant of `dtype` (shape ()).
Tensor scalar(double value, DType dtype);
/// Constant of `shape` filled with `value` (a scalar constant broadcast with broadcast_in_dim).
Tensor full(const Shape& shape, double value, DType dtype);
Tensor zeros(const Shape& shape, DType dtype);
Tensor ones(const Shape& shape, DType dtype);
/// `iota`: values 0, 1, ... along `dimension` of `shape`.
Tensor iota(const Shape& shape, int64_t dimension, DType dtype);
/// Same shape and dtype as `like`, filled with `value`.
Tensor full_like(const Tensor& like, double value);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);

// ---- elementwise --------------------------------------------------------------------------
/// `convert` to `dtype` (float->int truncates toward zero; nonzero->true).
Tensor convert(const Tensor& x, DType dtype);
Tensor negate(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor tanh(const Tensor& x);
/// `logistic`: 1 / (1 + exp(-x)).
Tensor sigmoid(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
/// `round_nearest_even`.
Tensor round(const Tensor& x);
Tensor erf(const Tensor& x);
/// `not`: logical for bool, bitwise for integers.
Tensor logical_not(const Tensor& x);
/// `is_finite`: bool result.
Tensor isfinite(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);

Tensor add(const Tensor& a, const Tensor& b);
Tensor subtract(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);
Tensor divide(const Tensor& a, const Tensor& b);
/// `remainder`: sign of the dividend (C fmod), as StableHLO.
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
/// `select`: cond ? a : b, all three broadcast together; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// `clamp`(lo, x, hi); lo/hi broadcast to x.
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);
Tensor clamp(const Tensor& x, double lo, double hi);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// ---- shapes --------------------------------------------------------------------------------
/// `reshape`; one entry of `shape` may be -1 (inferred). Element counts must match.
Tensor reshape(const Tensor& x, const Shape& shape);
/// NumPy broadcast_to via `broadcast_in_dim`.
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// `broadcast_in_dim`: operand dim i maps to result dim broadcast_dimensions[i].
Tensor broadcast_in_dim(const Tensor& x, const Shape& shape, const std::vector<int64_t>& broadcast_dimensions);
/// `transpose`: result dim i is operand dim permutation[i]. Empty = reverse all dims.
Tensor transpose(const Tensor& x, const std::vector<int64_t>& permutation = {});
/// `slice` with start (inclusive), limit (exclusive) and strides (default 1).
Tensor slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
             const std::vector<int64_t>& strides = {});
/// `slice` of [start, limit) along one axis.
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t limit);
/// `pad` with `value` (low/high may be negative; interior >= 0). Empty interior = zeros.
Tensor pad(const Tensor& x, double value, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
           const std::vector<int64_t>& interior = {});
Tensor concatenate(const std::vector<Tensor>& xs, int64_t axis);
Tensor reverse(const Tensor& x, const std::vector<int64_t>& axes);
/// Inserts a size-1 dim at `axis`.
Tensor expand_dims(const Tensor& x, int64_t axis);
/// Removes size-1 dims (all of them when `axes` is empty).
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes = {});
Tensor flatten(const Tensor& x);

// ---- reductions ----------------------------------------------------------------------------
// Empty `axes` means all axes. Results drop the reduced axes unless keepdims.
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor prod(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
/// Logical reductions of a bool tensor.
Tensor all(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor any(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
/// Index of the first maximum (NaN counts as the maximum, as in NumPy/JAX) along `axis`.
Tensor argmax(const Tensor& x, int64_t axis, DType index_dtype = DType::kI32);
Tensor argmin(const Tensor& x, int64_t axis, DType index_dtype = DType::kI32);

// ---- linear algebra ----------------------------------------------------------------------
struct DotDimensions {
  std::vector<int64_t> lhs_batching, rhs_batching;
  std::vector<int64_t> lhs_contracting, rhs_contracting;
};
Tensor dot_general(const Tensor& lhs, const Tensor& rhs, const DotDimensions& dims);
/// NumPy matmul: (..., m, k) x (..., k, n) -> (..., m, n), batch dims broadcast; 1-D operands
/// are promoted as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- collectives (SPMD programs) ------------------------------------------------------------
/// The `reduction` ("sum", "mean", "max" or "min") of `x` over the devices along mesh axis
/// `axis_name`: every device gets the same result, of x's shape and dtype (JAX's lax.psum /
/// lax.pmean inside shard_map; the IR op all_reduce). Only a per-device program compiled with
/// compile_graph_spmd and run by run_spmd can execute it (include/ingot/jit/spmd.h); the
/// interpreter and compile_graph refuse it with that hint. Differentiable for sum and mean.
/// Errors (when traced): an empty axis name, an unknown reduction, a bool x.
Tensor all_reduce(const Tensor& x, const std::string& axis_name, const std::string& reduction = "sum");
/// The devices' `x` along mesh axis `axis_name` (`axis_size` devices) concatenated on dimension 0
/// in mesh order: (axis_size * x.dim(0), ...) on every device (JAX's lax.all_gather with tiled=True;
/// the IR op all_gather). The VJP is reduce_scatter sum. SPMD programs only, as all_reduce.
Tensor all_gather(const Tensor& x, const std::string& axis_name, int64_t axis_size);
/// The `reduction` of `x` over the devices along `axis_name`, each device keeping its block of
/// dimension 0: (x.dim(0) / axis_size, ...) (JAX's lax.psum_scatter with tiled=True; the IR op
/// reduce_scatter). x.dim(0) must be a multiple of axis_size. VJP for sum and mean (all_gather).
Tensor reduce_scatter(const Tensor& x, const std::string& axis_name, int64_t axis_size,
                      const std::string& reduction = "sum");
/// This device's index along mesh axis `axis_name` (`axis_size` devices), an i64 scalar in
/// [0, axis_size) (JAX's lax.axis_index). Computed by one reduce_scatter "max" of iota(axis_size):
/// device r keeps block r of the (equal) iotas, which is r. SPMD programs only, as all_reduce.
/// axis_size < 1: ingot::Error(kInvalidArgument).
Tensor axis_index(const std::string& axis_name, int64_t axis_size);

/// Options of conv2d (NHWC input, HWIO kernel, NHWC output, as Keras/TF).
struct Conv2DOptions {
  std::vector<int64_t> strides = {1, 1};
  /// "valid", "same", or explicit padding via `explicit_padding`.
  std::string padding = "valid";
  std::vector<int64_t> explicit_padding;  ///< {top, bottom, left, right} when non-empty
  std::vector<int64_t> dilation = {1, 1};
  int64_t feature_group_count = 1;
};
/// 2-D convolution: x (batch, h, w, in), kernel (kh, kw, in / groups, out) -> (batch, oh, ow, out).
Tensor conv2d(const Tensor& x, const Tensor& kernel, const Conv2DOptions& options = {});

// ---- windows and indexing -------------------------------------------------------------------
/// Max pooling over (batch, h, w, c) with `padding` "valid" or "same" (pad value -inf).
Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& pool_size, const std::vector<int64_t>& strides,
                  const std::string& padding = "valid");
/// Average pooling over (batch, h, w, c); "same" divides by the count of real (unpadded) cells.
Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& pool_size, const std::vector<int64_t>& strides,
                  const std::string& padding = "valid");
/// Embedding-style lookup: x (n, d...) indexed along axis 0 by integer `indices` (any shape s)
/// -> (s..., d...), via `gather`. Out-of-range indices are clamped (StableHLO semantics).
Tensor take(const Tensor& x, const Tensor& indices);
/// Gradient of take: zeros of `shape` with rows `indices` += `updates` (s..., d...) via `scatter`.
Tensor scatter_add_rows(const Shape& shape, const Tensor& indices, const Tensor& updates);
/// one_hot(indices (s...), depth) -> (s..., depth) of `dtype`; out-of-range rows are all zero.
Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype = DType::kF32);

// ---- random --------------------------------------------------------------------------------
/// `rng_bit_generator` (THREE_FRY): state u64[2] -> (new state u64[2], bits of `shape`, u32).
std::pair<Tensor, Tensor> rng_bit_generator(const Tensor& state, const Shape& shape, DType dtype = DType::kU32);
/// Uniform floats in [0, 1) of `shape` and `dtype` from the state; returns (new state, values).
std::pair<Tensor, Tensor> random_uniform(const Tensor& state, const Shape& shape, DType dtype = DType::kF32);

// ---- composites (numerically stable) ----------------------------------------------------------
/// max(x, 0), with relu'(0) = 0 (as jax.nn.relu) and relu(NaN) = NaN.
Tensor relu(const Tensor& x);
/// GELU; tanh approximation when `approximate` (as jax.nn.gelu's default), else exact erf form.
Tensor gelu(const Tensor& x, bool approximate = true);
Tensor silu(const Tensor& x);
/// log(1 + exp(x)) computed as logaddexp(x, 0) = max(x, 0) + log1p(exp(min(x, 0) - max(x, 0))):
/// no overflow, gradient sigmoid(x) exact at 0 and finite for any magnitude.
Tensor softplus(const Tensor& x);
/// log(sigmoid(x)) = -softplus(-x), finite for large |x| (log(logistic(x)) underflows to -inf).
Tensor log_sigmoid(const Tensor& x);
/// Elementwise binary cross-entropy of `labels` (probabilities in [0, 1]) against sigmoid(logits):
/// -labels * log_sigmoid(logits) - (1 - labels) * log_sigmoid(-logits) (optax's
/// sigmoid_binary_cross_entropy); broadcasts; finite values and gradients for any logits.
Tensor sigmoid_binary_cross_entropy(const Tensor& logits, const Tensor& labels);
/// exp(x - max) / sum(exp(x - max)) along `axis`.
Tensor softmax(const Tensor& x, int64_t axis = -1);
/// x - max - log(sum(exp(x - max))) along `axis`.
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
/// max + log(sum(exp(x - max))), with max replaced by 0 where it is infinite (as JAX).
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor variance(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);

}  // namespace ingot
