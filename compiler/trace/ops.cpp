// The Tensor API (include/ingot/trace/ops.h): typed functions that record IR ops through emit(),
// with NumPy-style broadcasting, axis normalisation and numerically stable composites.
//
// Choices made here (the header's doc comments stay the contract):
// - mean/variance/avg_pool2d of an integer or bool tensor is an error (kDTypeMismatch with a hint
//   to convert first) rather than a silent conversion: the result dtype would otherwise differ
//   from the operand's, which no other function here does.
// - Reductions over no axes (a rank-0 tensor) return the operand itself; reshape, convert and the
//   broadcasting helpers also skip their node when it would be the identity.
// - matmul with a 2-D (or 1-D) right operand contracts directly (dot_general with no batching
//   dims, the left batch dims stay in front); otherwise batch dims are broadcast with
//   broadcast_in_dim and dot_general batches over them.
// - random_uniform: the IR has no bitcast or shift, so the "mantissa in [1, 2) minus 1" value is
//   computed arithmetically with the same result bit for bit: (word / 2^(bits - nmant)) * 2^-nmant,
//   nmant = 52 (f64, u64 words), 23 (f32), 10 (f16) or 7 (bf16) (u32 words). For f16/bf16 the
//   value is exact in the narrow type, so converting it never rounds up to 1.
// - Tensor::shape() refers into the trace's graph, which moves when a node is added; functions
//   that take a Shape or index list and emit a node before their last use of it copy it first
//   (full_like(x) passes x.shape() to full(), and users may pass shapes just as well).
// - Tensors that feed a function which creates constants (scalar operands, reduction inits, pad
//   values, ...) are checked against the active trace first, so a leaked or outer-trace Tensor
//   gets a kTraceError naming the function instead of a constant in the wrong trace.
#include "ingot/trace/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <string_view>

#include "trace/trace_state.h"

namespace ingot {

namespace {

using Ints = std::vector<int64_t>;

Tensor emit1(const std::string& op, const std::vector<Tensor>& inputs, ir::Attributes attrs = {}) {
  return emit(op, inputs, std::move(attrs)).at(0);
}

std::string dtype_str(DType dtype) { return std::string(dtype_name(dtype)); }

Ints iota_ints(int64_t begin, int64_t end) {
  Ints out(static_cast<size_t>(std::max<int64_t>(end - begin, 0)));
  std::iota(out.begin(), out.end(), begin);
  return out;
}

std::string describe_trace(const trace_detail::TraceState& s) {
  return fmt::format("trace #{} ('{}')", s.serial, s.graph.name());
}

/// Throws kTraceError unless `x` belongs to the active trace (constants made for it go there).
void require_active(const Tensor& x, std::string_view fn) {
  if (!x.valid()) {
    throw Error(ErrorCode::kTraceError, fmt::format("{}: use of an invalid (default-constructed) Tensor", fn),
                "create tensors inside trace() from its arguments or ingot::constant()");
  }
  const auto current = trace_detail::current_trace();
  const auto& owner = *x.state();
  if (owner.finished) {
    throw Error(ErrorCode::kTraceError,
                fmt::format("{}: the Tensor belongs to {}, which has already finished", fn, describe_trace(owner)),
                "tensors cannot leak out of the trace that made them; return them instead");
  }
  if (current != x.state()) {
    throw Error(ErrorCode::kTraceError,
                fmt::format("{}: the Tensor belongs to {} but the active trace is {}", fn, describe_trace(owner),
                            current ? describe_trace(*current) : std::string("none")),
                "a tensor from an outer trace cannot be used in a nested trace; pass it as an "
                "argument of the nested function");
  }
}

int64_t norm_axis(std::string_view fn, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    throw Error(
        ErrorCode::kOutOfRange, fmt::format("{}: axis {} is out of range for rank {}", fn, axis, rank),
        rank == 0 ? std::string("a rank-0 tensor has no axes") : fmt::format("use an axis in [{}, {})", -rank, rank));
  }
  return a;
}

/// Normalised, sorted, distinct axes; an empty list means all axes when `all_if_empty`.
Ints norm_axes(std::string_view fn, const Ints& axes, int64_t rank, bool all_if_empty = true) {
  if (axes.empty() && all_if_empty) return iota_ints(0, rank);
  Ints out;
  for (int64_t axis : axes) {
    const int64_t a = norm_axis(fn, axis, rank);
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: axes [{}] name axis {} twice (rank {})", fn, fmt::join(axes, ", "), a, rank),
                  "list each axis once");
    }
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// NumPy broadcast shape of `shapes`; kShapeMismatch naming `fn`, the shapes and the dimension.
Shape broadcast_shapes(std::string_view fn, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {  // i counts from the last dimension
    const size_t d = rank - 1 - i;
    for (const Shape& s : shapes) {
      const int64_t size = i < s.size() ? s[s.size() - 1 - i] : 1;
      if (size == out[d] || size == 1) continue;
      if (out[d] != 1) {
        std::vector<std::string> names;
        for (const Shape& t : shapes) names.push_back(shape_to_string(t));
        throw Error(ErrorCode::kShapeMismatch,
                    fmt::format("{}: shapes {} cannot be broadcast together: dimension -{} has "
                                "sizes {} and {}",
                                fn, fmt::join(names, " and "), i + 1, out[d], size),
                    "sizes must be equal or 1 along each trailing dimension; reshape or "
                    "broadcast_to first");
      }
      out[d] = size;
    }
  }
  return out;
}

/// Broadcasts `x` (already known compatible) to `shape`, trailing dimensions aligned.
Tensor broadcast_as(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t offset = static_cast<int64_t>(shape.size()) - x.rank();
  return broadcast_in_dim(x, shape, iota_ints(offset, offset + x.rank()));
}

void require_same_dtype(std::string_view fn, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: operand dtypes differ: {} vs {}", fn, a.type().to_string(), b.type().to_string()),
                "convert one operand with ingot::convert(x, dtype) first");
  }
}

/// A binary op with equal dtypes and NumPy broadcasting.
Tensor binary(std::string_view fn, const std::string& op, const Tensor& a, const Tensor& b, ir::Attributes attrs = {}) {
  require_same_dtype(fn, a, b);
  const Shape s = broadcast_shapes(fn, {a.shape(), b.shape()});
  return emit1(op, {broadcast_as(a, s), broadcast_as(b, s)}, std::move(attrs));
}

Tensor compare(std::string_view fn, const char* direction, const Tensor& a, const Tensor& b) {
  return binary(fn, "compare", a, b, {{"comparison_direction", std::string(direction)}});
}

/// A scalar constant of `x`'s dtype in `x`'s (active) trace.
/// A weakly typed `double` operand as a scalar of x's dtype. For integer and bool tensors the
/// value must convert exactly (JAX would promote `int_array * 0.5` to float; ingot keeps lax's
/// equal-dtype rule, so a silent truncation or saturation is refused instead).
Tensor scalar_like(const Tensor& x, double value, std::string_view fn) {
  require_active(x, fn);
  const DType dtype = x.dtype();
  if (!is_floating(dtype) && !std::isnan(value)) {
    const double back = Array::scalar(value, dtype).element_as_double(0);
    if (back != value) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("{}: the scalar {} is not representable in the tensor's dtype {} "
                              "(it would become {})",
                              fn, value, dtype_name(dtype), back),
                  "convert the tensor to a floating-point dtype first, e.g. "
                  "ingot::convert(x, DType::kF32)");
    }
  }
  return scalar(value, dtype);
}

/// Scalar holding the lowest (or highest) value of `dtype`: -inf/+inf for floats.
Array extreme_scalar(DType dtype, bool lowest) {
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_floating_point_v<T>) {
      const double inf = std::numeric_limits<double>::infinity();
      return Array::scalar(lowest ? -inf : inf, dtype);
    } else {
      const T v = lowest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      return Array::from_vector<T>({v}, {});
    }
  });
}

void require_floating(std::string_view fn, const Tensor& x) {
  if (!is_floating(x.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: x has dtype {}, but {} needs a floating dtype", fn, dtype_name(x.dtype()), fn),
                fmt::format("convert first, e.g. ingot::{}(ingot::convert(x, DType::kF32), ...)", fn));
  }
}

void require_integer(std::string_view fn, const char* what, const Tensor& x) {
  if (!is_integer(x.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: {} have dtype {}, but must be an integer dtype", fn, what, dtype_name(x.dtype())),
                "convert them with ingot::convert(indices, DType::kI32)");
  }
}

/// `shape` with the (sorted) `axes` set to 1, for keepdims.
Shape kept_shape(Shape shape, const Ints& axes) {
  for (int64_t a : axes) shape[static_cast<size_t>(a)] = 1;
  return shape;
}

/// `reduce` of `x` over `axes` with `computation` and scalar `init` of x's dtype.
Tensor reduce(std::string_view fn, const Tensor& x, const Ints& axes, bool keepdims, const char* computation,
              const Array& init) {
  require_active(x, fn);
  const Ints dims = norm_axes(fn, axes, x.rank());
  if (dims.empty()) return x;
  Tensor r = emit1("reduce", {x, constant(init)}, {{"dimensions", dims}, {"computation", std::string(computation)}});
  return keepdims ? reshape(r, kept_shape(x.shape(), dims)) : r;
}

void require_bool(std::string_view fn, const Tensor& x) {
  if (!is_bool(x.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: x has dtype {}, but {} needs bool", fn, dtype_name(x.dtype()), fn),
                "compare first (e.g. ingot::not_equal(x, zeros_like(x))) or convert to bool");
  }
}

/// Index of the single -1 in reshape's target `to` (or -1 if none); rejects other negatives.
int64_t reshape_unknown_index(const Shape& from, const Shape& to) {
  int64_t unknown = -1;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] >= 0) continue;
    const bool extra = to[i] == -1 && unknown >= 0;
    if (to[i] != -1 || extra) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("reshape: cannot reshape {} to {}: {}", shape_to_string(from), shape_to_string(to),
                              extra ? "more than one -1" : fmt::format("size {} is negative", to[i])),
                  "sizes are >= 0, and at most one may be -1 (inferred)");
    }
    unknown = static_cast<int64_t>(i);
  }
  return unknown;
}

/// reshape's target `to` with its -1 (if any) inferred from `from`'s element count.
Shape infer_reshape(const Shape& from, const Shape& to) {
  const int64_t unknown = reshape_unknown_index(from, to);
  int64_t known = 1;
  for (int64_t size : to) known *= size == -1 ? 1 : size;
  const int64_t n = num_elements(from);
  const auto fail = [&](ErrorCode code, const std::string& why) {
    return Error(code,
                 fmt::format("reshape: cannot reshape {} to {}: {}", shape_to_string(from), shape_to_string(to), why),
                 "the element counts must be equal");
  };
  if (unknown < 0 && known != n) {
    throw fail(ErrorCode::kShapeMismatch, fmt::format("{} elements vs {}", n, known));
  }
  if (unknown < 0) return to;
  if (known == 0) {
    throw fail(ErrorCode::kInvalidArgument, "the -1 is ambiguous when the other sizes multiply to 0");
  }
  if (n % known != 0) {
    throw fail(ErrorCode::kShapeMismatch, fmt::format("{} elements are not divisible by {}", n, known));
  }
  Shape out = to;
  out[static_cast<size_t>(unknown)] = n / known;
  return out;
}

/// Checks a 2-element list of positive integers (strides, dilation, pool size).
void require_pair(std::string_view fn, const char* what, const Ints& v) {
  const bool ok = v.size() == 2 && v[0] >= 1 && v[1] >= 1;
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} must be 2 positive integers (h, w), got [{}]", fn, what, fmt::join(v, ", ")));
  }
}

void require_rank(std::string_view fn, const char* what, const Tensor& x, int64_t rank, const char* layout) {
  if (x.rank() != rank) {
    throw Error(ErrorCode::kShapeMismatch, fmt::format("{}: {} must have rank {} {}, got shape {}", fn, what, rank,
                                                       layout, shape_to_string(x.shape())));
  }
}

/// TF/Keras "same" padding (low, high) of one spatial dim for an (effective) window size.
std::pair<int64_t, int64_t> same_padding(int64_t in, int64_t window, int64_t stride) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + window - in, 0);
  return {total / 2, total - total / 2};
}

/// Flat {top, bottom, left, right} padding for "valid"/"same" over spatial (h, w).
Ints padding_2d(std::string_view fn, const std::string& padding, const Shape& in, const Ints& window,
                const Ints& strides) {
  if (padding == "valid") return {0, 0, 0, 0};
  if (padding != "same") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: unknown padding '{}'", fn, padding),
                "use \"valid\" or \"same\" (conv2d also takes explicit_padding)");
  }
  const auto [t, b] = same_padding(in[0], window[0], strides[0]);
  const auto [l, r] = same_padding(in[1], window[1], strides[1]);
  return {t, b, l, r};
}

Ints conv_padding(const Tensor& x, const Tensor& kernel, const Conv2DOptions& o) {
  if (o.explicit_padding.empty()) {
    if (o.padding == "explicit") {
      throw Error(ErrorCode::kInvalidArgument, "conv2d: padding 'explicit' but explicit_padding is empty",
                  "give explicit_padding = {top, bottom, left, right}");
    }
    const Ints window = {(kernel.dim(0) - 1) * o.dilation[0] + 1, (kernel.dim(1) - 1) * o.dilation[1] + 1};
    return padding_2d("conv2d", o.padding, {x.dim(1), x.dim(2)}, window, o.strides);
  }
  if (o.explicit_padding.size() != 4 || (o.padding != "valid" && o.padding != "explicit")) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("conv2d: explicit_padding [{}] with padding '{}'", fmt::join(o.explicit_padding, ", "), o.padding),
        "explicit_padding needs 4 values {top, bottom, left, right} and padding "
        "\"explicit\" (or the default \"valid\")");
  }
  return o.explicit_padding;
}

void check_conv_shapes(const Tensor& x, const Tensor& kernel, const Conv2DOptions& o) {
  require_rank("conv2d", "x", x, 4, "(batch, h, w, in)");
  require_rank("conv2d", "kernel", kernel, 4, "(kh, kw, in / groups, out)");
  require_same_dtype("conv2d", x, kernel);
  require_pair("conv2d", "strides", o.strides);
  require_pair("conv2d", "dilation", o.dilation);
  const int64_t g = o.feature_group_count;
  const bool ok = g >= 1 && x.dim(3) % g == 0 && kernel.dim(2) * g == x.dim(3) && kernel.dim(3) % g == 0;
  if (!ok) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("conv2d: x {} and kernel {} do not fit feature_group_count {}", shape_to_string(x.shape()),
                            shape_to_string(kernel.shape()), g),
                "kernel dim 2 must be in / groups, and in and out divisible by groups");
  }
}

/// Validated strides of a pool (empty means the pool size, as Keras).
Ints pool_strides(std::string_view fn, const Tensor& x, const Ints& pool_size, const Ints& strides) {
  require_rank(fn, "x", x, 4, "(batch, h, w, c)");
  require_pair(fn, "pool_size", pool_size);
  const Ints s = strides.empty() ? pool_size : strides;
  require_pair(fn, "strides", s);
  return s;
}

/// `reduce_window` over the spatial dims of NHWC `x`.
Tensor pool(std::string_view fn, const Tensor& x, const Ints& pool_size, const Ints& strides,
            const std::string& padding, const char* computation, const Array& init) {
  const Ints pads = padding_2d(fn, padding, {x.dim(1), x.dim(2)}, pool_size, strides);
  if (padding == "valid" && (pool_size[0] > x.dim(1) || pool_size[1] > x.dim(2))) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: pool_size [{}] is larger than the spatial size ({}, {}) of x {} "
                            "with 'valid' padding",
                            fn, fmt::join(pool_size, ", "), x.dim(1), x.dim(2), shape_to_string(x.shape())),
                "use a smaller pool or padding \"same\"");
  }
  require_active(x, fn);
  return emit1("reduce_window", {x, constant(init)},
               {{"window_dimensions", Ints{1, pool_size[0], pool_size[1], 1}},
                {"window_strides", Ints{1, strides[0], strides[1], 1}},
                {"base_dilations", Ints{1, 1, 1, 1}},
                {"window_dilations", Ints{1, 1, 1, 1}},
                {"padding", Ints{0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0}},
                {"computation", std::string(computation)}});
}

/// True when every index in [0, depth) is representable in `dtype`.
bool depth_fits(DType dtype, int64_t depth) {
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      return static_cast<double>(depth - 1) <= static_cast<double>(std::numeric_limits<T>::max());
    } else {
      return false;
    }
  });
}

/// Mantissa bits of a float dtype used by random_uniform.
int random_mantissa_bits(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return 52;
    case DType::kF32:
      return 23;
    case DType::kF16:
      return 10;
    default:
      return 7;  // bf16
  }
}

}  // namespace

// ---- creation ---------------------------------------------------------------------------

Tensor constant(const Array& value) {
  if (!value.valid()) {
    throw Error(ErrorCode::kInvalidArgument, "constant: the Array is invalid (default-constructed)",
                "capture an Array that holds data");
  }
  return emit1("constant", {}, {{"value", value.clone()}});
}

Tensor scalar(double value, DType dtype) { return constant(Array::scalar(value, dtype)); }

Tensor full(const Shape& shape, double value, DType dtype) {
  const Shape to = shape;  // may alias a tensor's shape, which scalar() can move
  check_shape(to, "full: shape");
  const Tensor s = scalar(value, dtype);
  return to.empty() ? s : broadcast_in_dim(s, to, {});
}

Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor iota(const Shape& shape, int64_t dimension, DType dtype) {
  check_shape(shape, "iota: shape");
  const int64_t d = norm_axis("iota", dimension, static_cast<int64_t>(shape.size()));
  return emit1("iota", {}, {{"shape", shape}, {"dtype", dtype_str(dtype)}, {"iota_dimension", d}});
}

Tensor full_like(const Tensor& like, double value) {
  require_active(like, "full_like");
  return full(like.shape(), value, like.dtype());
}
Tensor zeros_like(const Tensor& like) { return full_like(like, 0.0); }
Tensor ones_like(const Tensor& like) { return full_like(like, 1.0); }

// ---- elementwise --------------------------------------------------------------------------

Tensor convert(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return emit1("convert", {x}, {{"dtype", dtype_str(dtype)}});
}

Tensor negate(const Tensor& x) { return emit1("negate", {x}); }
Tensor abs(const Tensor& x) { return emit1("abs", {x}); }
Tensor sign(const Tensor& x) { return emit1("sign", {x}); }
Tensor exp(const Tensor& x) { return emit1("exponential", {x}); }
Tensor log(const Tensor& x) { return emit1("log", {x}); }
Tensor log1p(const Tensor& x) { return emit1("log_plus_one", {x}); }
Tensor expm1(const Tensor& x) { return emit1("exponential_minus_one", {x}); }
Tensor tanh(const Tensor& x) { return emit1("tanh", {x}); }
Tensor sigmoid(const Tensor& x) { return emit1("logistic", {x}); }
Tensor sqrt(const Tensor& x) { return emit1("sqrt", {x}); }
Tensor rsqrt(const Tensor& x) { return emit1("rsqrt", {x}); }
Tensor sin(const Tensor& x) { return emit1("sine", {x}); }
Tensor cos(const Tensor& x) { return emit1("cosine", {x}); }
Tensor floor(const Tensor& x) { return emit1("floor", {x}); }
Tensor ceil(const Tensor& x) { return emit1("ceil", {x}); }
Tensor round(const Tensor& x) { return emit1("round_nearest_even", {x}); }
Tensor erf(const Tensor& x) { return emit1("erf", {x}); }
Tensor logical_not(const Tensor& x) { return emit1("not", {x}); }
Tensor isfinite(const Tensor& x) { return emit1("is_finite", {x}); }
Tensor square(const Tensor& x) { return multiply(x, x); }
Tensor reciprocal(const Tensor& x) { return divide(scalar_like(x, 1.0, "reciprocal"), x); }

Tensor add(const Tensor& a, const Tensor& b) { return binary("add", "add", a, b); }
Tensor subtract(const Tensor& a, const Tensor& b) { return binary("subtract", "subtract", a, b); }
Tensor multiply(const Tensor& a, const Tensor& b) { return binary("multiply", "multiply", a, b); }
Tensor divide(const Tensor& a, const Tensor& b) { return binary("divide", "divide", a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return binary("remainder", "remainder", a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary("pow", "power", a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary("maximum", "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary("minimum", "minimum", a, b); }
Tensor atan2(const Tensor& a, const Tensor& b) { return binary("atan2", "atan2", a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary("logical_and", "and", a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary("logical_or", "or", a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return binary("logical_xor", "xor", a, b); }
Tensor equal(const Tensor& a, const Tensor& b) { return compare("equal", "EQ", a, b); }
Tensor not_equal(const Tensor& a, const Tensor& b) { return compare("not_equal", "NE", a, b); }
Tensor less(const Tensor& a, const Tensor& b) { return compare("less", "LT", a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) { return compare("less_equal", "LE", a, b); }
Tensor greater(const Tensor& a, const Tensor& b) { return compare("greater", "GT", a, b); }
Tensor greater_equal(const Tensor& a, const Tensor& b) { return compare("greater_equal", "GE", a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (!is_bool(cond.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("where: cond has dtype {}, but must be bool", dtype_name(cond.dtype())),
                "build cond with a comparison (ingot::greater, ...) or ingot::convert(c, kBool)");
  }
  require_same_dtype("where", a, b);
  const Shape s = broadcast_shapes("where", {cond.shape(), a.shape(), b.shape()});
  const Tensor pred = cond.rank() == 0 ? cond : broadcast_as(cond, s);  // select takes a scalar
  return emit1("select", {pred, broadcast_as(a, s), broadcast_as(b, s)});
}

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  require_same_dtype("clamp", x, lo);
  require_same_dtype("clamp", x, hi);
  const Shape s = broadcast_shapes("clamp", {lo.shape(), x.shape(), hi.shape()});
  const auto bound = [&](const Tensor& t) { return t.rank() == 0 ? t : broadcast_as(t, s); };
  return emit1("clamp", {bound(lo), broadcast_as(x, s), bound(hi)});
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  const Tensor lo_t = scalar_like(x, lo, "clamp");  // sequenced: node order is deterministic
  return clamp(x, lo_t, scalar_like(x, hi, "clamp"));
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return subtract(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return multiply(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return divide(a, b); }
Tensor operator-(const Tensor& x) { return negate(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(a, b, "operator+")); }
Tensor operator-(const Tensor& a, double b) { return subtract(a, scalar_like(a, b, "operator-")); }
Tensor operator*(const Tensor& a, double b) { return multiply(a, scalar_like(a, b, "operator*")); }
Tensor operator/(const Tensor& a, double b) { return divide(a, scalar_like(a, b, "operator/")); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a, "operator+"), b); }
Tensor operator-(double a, const Tensor& b) { return subtract(scalar_like(b, a, "operator-"), b); }
Tensor operator*(double a, const Tensor& b) { return multiply(scalar_like(b, a, "operator*"), b); }
Tensor operator/(double a, const Tensor& b) { return divide(scalar_like(b, a, "operator/"), b); }

// ---- shapes --------------------------------------------------------------------------------

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape to = infer_reshape(x.shape(), shape);
  if (to == x.shape()) return x;
  return emit1("reshape", {x}, {{"shape", to}});
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  check_shape(shape, "broadcast_to: shape");
  const int64_t offset = static_cast<int64_t>(shape.size()) - x.rank();
  for (int64_t i = 0; i < x.rank(); ++i) {
    const int64_t size = x.shape()[static_cast<size_t>(i)];
    if (offset >= 0 && (size == 1 || size == shape[static_cast<size_t>(i + offset)])) continue;
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("broadcast_to: cannot broadcast {} to {}: dimension {} has size {}",
                            shape_to_string(x.shape()), shape_to_string(shape), i, size),
                "the target needs at least x's rank, and each trailing size equal or x's 1");
  }
  return broadcast_as(x, shape);
}

Tensor broadcast_in_dim(const Tensor& x, const Shape& shape, const std::vector<int64_t>& broadcast_dimensions) {
  return emit1("broadcast_in_dim", {x}, {{"shape", shape}, {"broadcast_dimensions", broadcast_dimensions}});
}

Tensor transpose(const Tensor& x, const std::vector<int64_t>& permutation) {
  Ints perm = permutation;
  if (perm.empty()) {
    perm = iota_ints(0, x.rank());
    std::reverse(perm.begin(), perm.end());
  }
  return emit1("transpose", {x}, {{"permutation", perm}});
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
             const std::vector<int64_t>& strides) {
  const Ints s = strides.empty() ? Ints(static_cast<size_t>(x.rank()), 1) : strides;
  return emit1("slice", {x}, {{"start_indices", start}, {"limit_indices", limit}, {"strides", s}});
}

Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t limit) {
  const size_t a = static_cast<size_t>(norm_axis("slice_axis", axis, x.rank()));
  Ints starts(static_cast<size_t>(x.rank()), 0);
  Ints limits = x.shape();
  starts[a] = start;
  limits[a] = limit;
  return slice(x, starts, limits);
}

Tensor pad(const Tensor& x, double value, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
           const std::vector<int64_t>& interior) {
  const Ints in = interior.empty() ? Ints(static_cast<size_t>(x.rank()), 0) : interior;
  ir::Attributes attrs = {{"edge_padding_low", low}, {"edge_padding_high", high}, {"interior_padding", in}};
  return emit1("pad", {x, scalar_like(x, value, "pad")}, std::move(attrs));
}

Tensor concatenate(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "concatenate: the list of tensors is empty", "pass at least one tensor");
  }
  const int64_t a = norm_axis("concatenate", axis, xs[0].rank());
  if (xs.size() == 1) return xs[0];
  return emit1("concatenate", xs, {{"dimension", a}});
}

Tensor reverse(const Tensor& x, const std::vector<int64_t>& axes) {
  return emit1("reverse", {x}, {{"dimensions", norm_axes("reverse", axes, x.rank(), false)}});
}

Tensor expand_dims(const Tensor& x, int64_t axis) {
  const int64_t a = norm_axis("expand_dims", axis, x.rank() + 1);
  Shape s = x.shape();
  s.insert(s.begin() + a, 1);
  return reshape(x, s);
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes) {
  const Ints drop = norm_axes("squeeze", axes, x.rank(), false);
  Shape s;
  for (int64_t i = 0; i < x.rank(); ++i) {
    const int64_t size = x.shape()[static_cast<size_t>(i)];
    const bool listed = std::find(drop.begin(), drop.end(), i) != drop.end();
    if (listed && size != 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("squeeze: axis {} of shape {} has size {}, not 1", i, shape_to_string(x.shape()), size),
                  "only size-1 axes can be squeezed");
    }
    if (!(listed || (axes.empty() && size == 1))) s.push_back(size);
  }
  return reshape(x, s);
}

Tensor flatten(const Tensor& x) { return reshape(x, {x.size()}); }

// ---- reductions ----------------------------------------------------------------------------

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce("sum", x, axes, keepdims, "add", Array::scalar(0.0, x.dtype()));
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  require_floating("mean", x);
  int64_t count = 1;
  for (int64_t a : norm_axes("mean", axes, x.rank())) count *= x.shape()[static_cast<size_t>(a)];
  const Tensor s = sum(x, axes, keepdims);
  return divide(s, scalar_like(s, static_cast<double>(count), "mean"));
}

Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce("max", x, axes, keepdims, "max", extreme_scalar(x.dtype(), true));
}

Tensor min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce("min", x, axes, keepdims, "min", extreme_scalar(x.dtype(), false));
}

Tensor prod(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce("prod", x, axes, keepdims, "mul", Array::scalar(1.0, x.dtype()));
}

Tensor all(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  require_bool("all", x);
  return reduce("all", x, axes, keepdims, "and", Array::scalar(1.0, DType::kBool));
}

Tensor any(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  require_bool("any", x);
  return reduce("any", x, axes, keepdims, "or", Array::scalar(0.0, DType::kBool));
}

namespace {
Tensor arg_extreme(const char* fn, const Tensor& x, int64_t axis, DType index_dtype) {
  if (index_dtype != DType::kI32 && index_dtype != DType::kI64) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: index_dtype {} is not i32 or i64", fn, dtype_name(index_dtype)));
  }
  const int64_t a = norm_axis(fn, axis, x.rank());
  return emit1(fn, {x}, {{"dimension", a}, {"index_dtype", dtype_str(index_dtype)}});
}
}  // namespace

Tensor argmax(const Tensor& x, int64_t axis, DType index_dtype) { return arg_extreme("argmax", x, axis, index_dtype); }

Tensor argmin(const Tensor& x, int64_t axis, DType index_dtype) { return arg_extreme("argmin", x, axis, index_dtype); }

// ---- linear algebra ----------------------------------------------------------------------

Tensor dot_general(const Tensor& lhs, const Tensor& rhs, const DotDimensions& dims) {
  return emit1("dot_general", {lhs, rhs},
               {{"lhs_batching_dimensions", dims.lhs_batching},
                {"rhs_batching_dimensions", dims.rhs_batching},
                {"lhs_contracting_dimensions", dims.lhs_contracting},
                {"rhs_contracting_dimensions", dims.rhs_contracting}});
}

namespace {

/// Shapes of matmul's operands after NumPy's 1-D promotion; checks ranks, dtypes and k.
std::pair<Shape, Shape> matmul_shapes(const Tensor& a, const Tensor& b) {
  const std::string both = fmt::format("{} and {}", shape_to_string(a.shape()), shape_to_string(b.shape()));
  if (a.rank() == 0 || b.rank() == 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("matmul: operands must have rank >= 1, got shapes {}", both),
                "use multiply for scalars");
  }
  require_same_dtype("matmul", a, b);
  const Shape as = a.rank() == 1 ? Shape{1, a.dim(0)} : a.shape();
  const Shape bs = b.rank() == 1 ? Shape{b.dim(0), 1} : b.shape();
  if (as.back() != bs[bs.size() - 2]) {
    throw Error(
        ErrorCode::kShapeMismatch,
        fmt::format("matmul: shapes {} do not align: contracting sizes {} vs {}", both, as.back(), bs[bs.size() - 2]),
        "a's last dimension must equal b's second-to-last (b's only one if 1-D)");
  }
  return {as, bs};
}

}  // namespace

namespace {

/// dot_general of (batch_a..., m, k) x (batch_b..., k, n) with both batch shapes broadcast to
/// `batch` first (broadcast_in_dim), batching over them.
Tensor batched_dot(const Tensor& a, const Tensor& b, const Shape& batch) {
  const auto nb = static_cast<int64_t>(batch.size());
  Shape a_full = batch, b_full = batch;
  a_full.insert(a_full.end(), {a.dim(-2), a.dim(-1)});
  b_full.insert(b_full.end(), {b.dim(-2), b.dim(-1)});
  const Tensor a_b = broadcast_as(a, a_full);
  return dot_general(a_b, broadcast_as(b, b_full), {iota_ints(0, nb), iota_ints(0, nb), {nb + 1}, {nb}});
}

}  // namespace

Tensor all_reduce(const Tensor& x, const std::string& axis_name, const std::string& reduction) {
  return emit1("all_reduce", {x}, ir::Attributes{{"axis_name", axis_name}, {"reduction", reduction}});
}

Tensor all_gather(const Tensor& x, const std::string& axis_name, int64_t axis_size) {
  return emit1("all_gather", {x}, ir::Attributes{{"axis_name", axis_name}, {"axis_size", axis_size}});
}

Tensor reduce_scatter(const Tensor& x, const std::string& axis_name, int64_t axis_size, const std::string& reduction) {
  return emit1("reduce_scatter", {x},
               ir::Attributes{{"axis_name", axis_name}, {"axis_size", axis_size}, {"reduction", reduction}});
}

Tensor axis_index(const std::string& axis_name, int64_t axis_size) {
  if (axis_size < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("axis_index: axis_size of mesh axis '{}' is {}", axis_name, axis_size),
                "pass the number of devices along the axis (>= 1)");
  }
  const Tensor block = reduce_scatter(iota({axis_size}, 0, DType::kI64), axis_name, axis_size, "max");
  return reshape(block, {});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const auto [as, bs] = matmul_shapes(a, b);
  const Shape b_batch(bs.begin(), bs.end() - 2);
  const Shape batch = broadcast_shapes(
      fmt::format("matmul (batch dims of {} and {})", shape_to_string(a.shape()), shape_to_string(b.shape())),
      {Shape(as.begin(), as.end() - 2), b_batch});
  const Tensor a2 = reshape(a, as);
  const Tensor b2 = reshape(b, bs);
  // A matrix on the right contracts directly, a's batch dims staying in front.
  const Tensor r = b_batch.empty() ? dot_general(a2, b2, {{}, {}, {a2.rank() - 1}, {0}}) : batched_dot(a2, b2, batch);
  Shape out = r.shape();  // drop the dims that NumPy's 1-D promotion added
  if (b.rank() == 1) out.pop_back();
  if (a.rank() == 1) out.erase(out.end() - (b.rank() == 1 ? 1 : 2));
  return reshape(r, out);
}

Tensor conv2d(const Tensor& x, const Tensor& kernel, const Conv2DOptions& options) {
  check_conv_shapes(x, kernel, options);
  const Ints pads = conv_padding(x, kernel, options);
  return emit1("convolution", {x, kernel},
               {{"window_strides", options.strides},
                {"padding", pads},
                {"lhs_dilation", Ints{1, 1}},
                {"rhs_dilation", options.dilation},
                {"feature_group_count", options.feature_group_count},
                {"batch_group_count", int64_t{1}},
                {"input_batch_dimension", int64_t{0}},
                {"input_feature_dimension", int64_t{3}},
                {"input_spatial_dimensions", Ints{1, 2}},
                {"kernel_input_feature_dimension", int64_t{2}},
                {"kernel_output_feature_dimension", int64_t{3}},
                {"kernel_spatial_dimensions", Ints{0, 1}},
                {"output_batch_dimension", int64_t{0}},
                {"output_feature_dimension", int64_t{3}},
                {"output_spatial_dimensions", Ints{1, 2}}});
}

// ---- windows and indexing -------------------------------------------------------------------

Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& pool_size, const std::vector<int64_t>& strides,
                  const std::string& padding) {
  const Ints s = pool_strides("max_pool2d", x, pool_size, strides);
  return pool("max_pool2d", x, pool_size, s, padding, "max", extreme_scalar(x.dtype(), true));
}

Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& pool_size, const std::vector<int64_t>& strides,
                  const std::string& padding) {
  const Ints window = pool_size;  // copied: used after nodes are added
  const Ints s = pool_strides("avg_pool2d", x, window, strides);
  require_floating("avg_pool2d", x);
  const Array zero = Array::scalar(0.0, x.dtype());
  const Tensor sums = pool("avg_pool2d", x, window, s, padding, "add", zero);
  const Ints pads = padding_2d("avg_pool2d", padding, {x.dim(1), x.dim(2)}, window, s);
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    return sums / static_cast<double>(window[0] * window[1]);
  }
  // Count the real cells of each window: the same window over ones, padded with zeros.
  const Tensor ones_hw = ones({1, x.dim(1), x.dim(2), 1}, x.dtype());
  return sums / pool("avg_pool2d", ones_hw, window, s, padding, "add", zero);
}

Tensor take(const Tensor& x, const Tensor& indices) {
  if (x.rank() < 1) {
    throw Error(ErrorCode::kShapeMismatch, "take: x must have rank >= 1 (rows first), got ()",
                "reshape the table to (n, ...)");
  }
  require_integer("take", "indices", indices);
  const int64_t q = indices.rank();
  Ints slice_sizes = x.shape();
  slice_sizes[0] = 1;
  return emit1("gather", {x, indices},
               {{"offset_dims", iota_ints(q, q + x.rank() - 1)},
                {"collapsed_slice_dims", Ints{0}},
                {"start_index_map", Ints{0}},
                {"index_vector_dim", q},
                {"slice_sizes", slice_sizes},
                {"indices_are_sorted", false}});
}

Tensor scatter_add_rows(const Shape& shape_in, const Tensor& indices, const Tensor& updates) {
  const Shape shape = shape_in;  // zeros() below adds nodes; shape_in may alias a tensor's shape
  check_shape(shape, "scatter_add_rows: shape");
  require_integer("scatter_add_rows", "indices", indices);
  Shape expected = indices.shape();
  if (!shape.empty()) expected.insert(expected.end(), shape.begin() + 1, shape.end());
  if (shape.empty() || updates.shape() != expected) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("scatter_add_rows: updates {} do not fit indices {} and shape {}: "
                            "expected {}",
                            shape_to_string(updates.shape()), shape_to_string(indices.shape()), shape_to_string(shape),
                            shape_to_string(expected)),
                "shape must have rank >= 1 and updates = indices' shape + shape[1:]");
  }
  require_active(updates, "scatter_add_rows");
  const int64_t q = indices.rank();
  const auto r = static_cast<int64_t>(shape.size());
  return emit1("scatter", {zeros(shape, updates.dtype()), indices, updates},
               {{"update_window_dims", iota_ints(q, q + r - 1)},
                {"inserted_window_dims", Ints{0}},
                {"scatter_dims_to_operand_dims", Ints{0}},
                {"index_vector_dim", q},
                {"computation", std::string("add")},
                {"indices_are_sorted", false},
                {"unique_indices", false}});
}

Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype) {
  require_integer("one_hot", "indices", indices);
  if (depth < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("one_hot: depth {} is negative", depth));
  }
  require_active(indices, "one_hot");
  const int64_t q = indices.rank();
  Shape out = indices.shape();
  out.push_back(depth);
  const DType idt = depth_fits(indices.dtype(), depth) ? indices.dtype() : DType::kI64;
  const Tensor ind = broadcast_in_dim(convert(indices, idt), out, iota_ints(0, q));
  return convert(equal(ind, iota(out, q, idt)), dtype);
}

// ---- random --------------------------------------------------------------------------------

std::pair<Tensor, Tensor> rng_bit_generator(const Tensor& state, const Shape& shape, DType dtype) {
  std::vector<Tensor> r =
      emit("rng_bit_generator", {state},
           {{"algorithm", std::string("THREE_FRY")}, {"shape", shape}, {"dtype", dtype_str(dtype)}});
  return {r.at(0), r.at(1)};
}

std::pair<Tensor, Tensor> random_uniform(const Tensor& state, const Shape& shape, DType dtype) {
  if (!is_floating(dtype)) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("random_uniform: dtype {} is not a floating dtype", dtype_name(dtype)),
                "generate floats and convert, or use rng_bit_generator for integers");
  }
  const bool wide = dtype == DType::kF64;
  const DType word = wide ? DType::kU64 : DType::kU32;
  const DType compute = wide ? DType::kF64 : DType::kF32;
  const int nmant = random_mantissa_bits(dtype);
  const auto [new_state, bits] = rng_bit_generator(state, shape, word);
  // bits >> (word_bits - nmant): the top nmant bits, i.e. the mantissa of a float in [1, 2).
  const Tensor top = bits / std::ldexp(1.0, (wide ? 64 : 32) - nmant);
  const Tensor value = convert(top, compute) * std::ldexp(1.0, -nmant);  // = float in [1,2) - 1
  return {new_state, convert(value, dtype)};
}

// ---- composites (numerically stable) ----------------------------------------------------------

// relu is a select rather than maximum(x, 0) so that its gradient at 0 is 0 (jax.nn.relu's
// custom JVP; maximum splits ties 0.5/0.5) while relu(NaN) stays NaN.
Tensor relu(const Tensor& x) {
  const Tensor zero = zeros_like(x);
  const Tensor non_positive = less_equal(x, zero);
  return where(non_positive, zero, x);
}

// Composites name their intermediates so the recorded node order does not depend on the
// compiler's (unspecified) order of evaluating operands.
Tensor gelu(const Tensor& x, bool approximate) {
  require_floating("gelu", x);
  const Tensor half_x = x * 0.5;
  if (approximate) {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    const Tensor inner = (x + x * x * x * 0.044715) * c;
    return half_x * (tanh(inner) + 1.0);
  }
  return half_x * (erf(x / std::numbers::sqrt2) + 1.0);
}

Tensor silu(const Tensor& x) {
  require_floating("silu", x);
  return x * sigmoid(x);
}

// softplus(x) = logaddexp(x, 0) = hi + log1p(exp(lo - hi)) with hi = max(x, 0), lo = min(x, 0):
// no overflow, and because maximum/minimum split ties evenly its gradient at 0 is exactly 0.5
// (the form max(x, 0) + log1p(exp(-|x|)) would give 0 there: JAX issue #2107).
Tensor softplus(const Tensor& x) {
  require_floating("softplus", x);
  const Tensor zero = scalar_like(x, 0.0, "softplus");
  const Tensor hi = maximum(x, zero);
  const Tensor lo = minimum(x, zero);
  return hi + log1p(exp(lo - hi));
}

Tensor log_sigmoid(const Tensor& x) {
  require_floating("log_sigmoid", x);
  return negate(softplus(negate(x)));
}

Tensor sigmoid_binary_cross_entropy(const Tensor& logits, const Tensor& labels) {
  require_floating("sigmoid_binary_cross_entropy", logits);
  const Tensor log_p = log_sigmoid(logits);
  const Tensor log_not_p = log_sigmoid(negate(logits));
  const Tensor positive = labels * log_p;
  const Tensor negative = (1.0 - labels) * log_not_p;
  return negate(positive + negative);
}

Tensor softmax(const Tensor& x, int64_t axis) {
  require_floating("softmax", x);
  const Ints axes = {norm_axis("softmax", axis, x.rank())};
  const Tensor e = exp(x - max(x, axes, true));
  return e / sum(e, axes, true);
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  require_floating("log_softmax", x);
  const Ints axes = {norm_axis("log_softmax", axis, x.rank())};
  const Tensor shifted = x - max(x, axes, true);
  return shifted - log(sum(exp(shifted), axes, true));
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  require_floating("logsumexp", x);
  const Ints dims = norm_axes("logsumexp", axes, x.rank());
  const Tensor m = max(x, dims, true);
  const Tensor finite = isfinite(m);
  const Tensor safe_m = where(finite, m, zeros_like(m));  // all -inf rows give -inf, not NaN
  const Tensor r = safe_m + log(sum(exp(x - safe_m), dims, true));
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (keepdims || !std::binary_search(dims.begin(), dims.end(), i)) {
      out.push_back(r.shape()[static_cast<size_t>(i)]);
    }
  }
  return reshape(r, out);
}

Tensor variance(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  require_floating("variance", x);
  const Ints dims = axes;  // copied: used after nodes are added
  return mean(square(x - mean(x, dims, true)), dims, keepdims);
}

}  // namespace ingot
