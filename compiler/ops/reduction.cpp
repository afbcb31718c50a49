// Reduction ops: reduce, argmax, argmin, reduce_window. Semantics follow docs/ir.md (StableHLO,
// with the reduction region replaced by a named `computation`).
//
// Numerics shared by the kernels:
// - the accumulator starts at `init` and combines the elements in row-major order;
// - f16/bf16 accumulate in f32 and round once when the result is stored (as the IR's f16/bf16
//   rule says: compute in f32, round the result);
// - integers wrap (two's complement), `max`/`min` propagate NaN;
// - on bool, add/max/or are logical OR and mul/min/and logical AND (StableHLO's bool add/mul).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ingot/trace/ops.h"
#include "ingot/autodiff/vjp_rules.h"
#include "ops/op_util.h"

namespace ingot::ir {

namespace {

using ops::list_str;
using ops::ints_attr;
using ops::ints_attr_or;
using ops::int_attr;
using ops::string_attr;

using ops::checked_mul_add;

using ops::check_dims;
using ops::for_each_index;
using ops::make_result;

/// The binary function a reduction applies.
enum class Computation { kAdd, kMul, kMax, kMin, kAnd, kOr };

// ---------------------------------------------------------------------------------------------
// Verification helpers

/// Parses the `computation` attribute. `logical` admits `and`/`or` (reduce) or not
/// (reduce_window); throws kInvalidArgument naming the op, the value and the choices.
Computation parse_computation(const std::string& op, const Attributes& attrs, bool logical) {
  const std::string name = string_attr(op, attrs, "computation");
  const char* choices = logical ? "add, mul, max, min, and, or" : "add, mul, max, min";
  if (name == "add") return Computation::kAdd;
  if (name == "mul") return Computation::kMul;
  if (name == "max") return Computation::kMax;
  if (name == "min") return Computation::kMin;
  if (logical && name == "and") return Computation::kAnd;
  if (logical && name == "or") return Computation::kOr;
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: computation = \"{}\" is not one of {}", op, name, choices),
              fmt::format("use computation = one of {}", choices));
}

/// Checks the operand dtype against the computation (and/or need bool or integers) and that
/// `init` is a scalar of the operand's dtype.
void check_operand_and_init(const std::string& op, const TensorType& x, const TensorType& init, Computation c) {
  const bool logical = c == Computation::kAnd || c == Computation::kOr;
  if (logical && is_floating(x.dtype)) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: computation = \"{}\" needs a bool or integer operand, got {}", op,
                            c == Computation::kAnd ? "and" : "or", x.to_string()),
                "use max/min for floats, or compare first to get bools");
  }
  if (init.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch, fmt::format("{}: init must be a scalar, got {}", op, init.to_string()),
                "pass a rank-0 init value");
  }
  if (init.dtype != x.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: init has type {} but the operand is {}", op, init.to_string(), x.to_string()),
                "convert init to the operand's dtype");
  }
}

/// Throws kInvalidArgument unless the list attribute `attr` has `expected` entries.
void check_length(const std::string& op, const char* attr, const std::vector<int64_t>& list, size_t expected,
                  const TensorType& operand) {
  if (list.size() != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} = {} has {} entries but must have {} for the operand {} of "
                            "rank {}",
                            op, attr, list_str(list), list.size(), expected, operand.to_string(), operand.rank()),
                std::string(attr) == "padding" ? "padding is flat: [lo0, hi0, lo1, hi1, ...]"
                                               : "give one entry per operand dimension");
  }
}

/// Throws kInvalidArgument unless every entry of `list` is >= 1.
void check_positive(const std::string& op, const char* attr, const std::vector<int64_t>& list) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {}[{}] = {} must be >= 1 ({} = {})", op, attr, i, list[i], attr, list_str(list)));
    }
  }
}

/// Shape of `x` without the dimensions in `dims` (already checked).
Shape remove_dims(const Shape& shape, const std::vector<int64_t>& dims) {
  std::vector<bool> drop(shape.size(), false);
  for (int64_t d : dims) drop[static_cast<size_t>(d)] = true;
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!drop[d]) out.push_back(shape[d]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Kernel helpers

/// a (computation) b in the compute type C. and/or are rejected for floats by verification.
template <class C>
C combine(Computation c, C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    const bool any = c == Computation::kAdd || c == Computation::kMax || c == Computation::kOr;
    return any ? (a || b) : (a && b);
  } else if constexpr (std::is_floating_point_v<C>) {
    switch (c) {
      case Computation::kAdd:
        return a + b;
      case Computation::kMul:
        return a * b;
      case Computation::kMax:
        return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? b : a);
      case Computation::kMin:
        return std::isnan(a) ? a : std::isnan(b) ? b : (b < a ? b : a);
      default:
        break;
    }
    throw Error(ErrorCode::kInternal, "reduction: and/or reached a float kernel");
  } else {
    using U = std::make_unsigned_t<C>;  // unsigned arithmetic wraps without UB
    switch (c) {
      case Computation::kAdd:
        return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
      case Computation::kMul:
        return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
      case Computation::kMax:
        return a < b ? b : a;
      case Computation::kMin:
        return b < a ? b : a;
      case Computation::kAnd:
        return static_cast<C>(a & b);
      case Computation::kOr:
        return static_cast<C>(a | b);
    }
    return a;
  }
}

/// Element `i` of a typed host array read in the compute type.
template <class T>
compute_type_t<T> load(const Array& a, int64_t i) {
  return static_cast<compute_type_t<T>>(a.data<T>()[i]);
}

// ---------------------------------------------------------------------------------------------
// reduce

std::vector<TensorType> reduce_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const Computation c = parse_computation("reduce", attrs, /*logical=*/true);
  check_operand_and_init("reduce", x, in[1], c);
  const std::vector<int64_t> dims = ints_attr("reduce", attrs, "dimensions");
  check_dims("reduce", "dimensions", dims, x.rank());
  return {TensorType{remove_dims(x.shape, dims), x.dtype}};
}

template <class T>
Array reduce_typed(const Array& x, const Array& init, const std::vector<int64_t>& dims, Computation c,
                   const TensorType& type) {
  using C = compute_type_t<T>;
  // Result stride of each operand dim (0 for reduced dims).
  std::vector<int64_t> to_result(x.shape().size(), 0);
  const std::vector<int64_t> rstr = row_major_strides(type.shape);
  std::vector<bool> reduced(x.shape().size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  for (size_t d = 0, r = 0; d < to_result.size(); ++d) {
    if (!reduced[d]) to_result[d] = rstr[r++];
  }
  std::vector<C> acc(static_cast<size_t>(num_elements(type.shape)), load<T>(init, 0));
  if (x.size() > 0) {
    const T* xp = x.data<T>();
    for_each_index(x.shape(), [&](const std::vector<int64_t>& idx, int64_t flat) {
      const auto r = static_cast<size_t>(ops::ravel_index(idx, to_result));
      acc[r] = combine<C>(c, acc[r], static_cast<C>(xp[flat]));
    });
  }
  Array out = make_result(type);
  if (out.size() > 0) {
    T* op = out.data<T>();
    for (size_t i = 0; i < acc.size(); ++i) op[i] = static_cast<T>(acc[i]);
  }
  return out;
}

std::vector<Array> reduce_kernel(std::span<const Array> in, const Attributes& attrs,
                                 std::span<const TensorType> types) {
  const Computation c = parse_computation("reduce", attrs, true);
  const std::vector<int64_t> dims = attrs.get_ints("dimensions");
  return {dispatch_dtype(in[0].dtype(), [&](auto tag) {
    return reduce_typed<typename decltype(tag)::type>(in[0], in[1], dims, c, types[0]);
  })};
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin

/// Shape rule of argmax (`is_max`) or argmin.
std::vector<TensorType> arg_extreme_shape(const std::string& op, std::span<const TensorType> in,
                                          const Attributes& attrs) {
  const TensorType& x = in[0];
  const int64_t dim = int_attr(op, attrs, "dimension");
  if (dim < 0 || dim >= x.rank()) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("{}: dimension = {} is out of range for the operand {} of rank {}", op, dim, x.to_string(),
                            x.rank()),
                x.rank() == 0 ? std::string("a scalar has no dimension to reduce")
                              : fmt::format("use a dimension in [0, {})", x.rank()));
  }
  const std::string index_dtype = string_attr(op, attrs, "index_dtype");
  if (index_dtype != "i32" && index_dtype != "i64") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: index_dtype = \"{}\" must be \"i32\" or \"i64\"", op, index_dtype));
  }
  const int64_t n = x.shape[static_cast<size_t>(dim)];
  if (n == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: dimension {} of the operand {} has size 0; an empty dimension "
                            "has no extreme element",
                            op, dim, x.to_string()),
                "reduce over a non-empty dimension");
  }
  if (index_dtype == "i32" && n - 1 > std::numeric_limits<int32_t>::max()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: dimension {} has size {}, too large for index_dtype = \"i32\"", op, dim, n),
                "use index_dtype = \"i64\"");
  }
  return {TensorType{remove_dims(x.shape, {dim}), parse_dtype(index_dtype)}};
}

/// True if `v` replaces `best` (NaN is the extreme and the first NaN wins; ties keep the first).
template <class C>
bool is_better(C v, C best, bool is_max) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(best)) return false;
    if (std::isnan(v)) return true;
  }
  return is_max ? best < v : v < best;
}

template <class T, class I>
Array arg_extreme_typed(const Array& x, int64_t dim, bool is_max, const TensorType& type) {
  using C = compute_type_t<T>;
  const auto dd = static_cast<size_t>(dim);
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  std::vector<int64_t> rstr_in_x;  // operand stride of each result dim
  for (size_t d = 0; d < xstr.size(); ++d) {
    if (d != dd) rstr_in_x.push_back(xstr[d]);
  }
  const int64_t n = x.shape()[dd];
  Array out = make_result(type);
  if (out.size() == 0) return out;
  I* op = out.data<I>();
  for_each_index(type.shape, [&](const std::vector<int64_t>& ridx, int64_t rflat) {
    const int64_t base = ops::ravel_index(ridx, rstr_in_x);
    int64_t best_k = 0;
    C best = load<T>(x, base);
    for (int64_t k = 1; k < n; ++k) {
      const C v = load<T>(x, base + k * xstr[dd]);
      if (is_better<C>(v, best, is_max)) {
        best = v;
        best_k = k;
      }
    }
    op[rflat] = static_cast<I>(best_k);
  });
  return out;
}

/// Kernel of argmax (`is_max`) or argmin.
std::vector<Array> arg_extreme_kernel(std::span<const Array> in, const Attributes& attrs,
                                      std::span<const TensorType> types, bool is_max) {
  const int64_t dim = attrs.get_int("dimension");
  return {dispatch_dtype(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (types[0].dtype == DType::kI32) {
      return arg_extreme_typed<T, int32_t>(in[0], dim, is_max, types[0]);
    }
    return arg_extreme_typed<T, int64_t>(in[0], dim, is_max, types[0]);
  })};
}

// ---------------------------------------------------------------------------------------------
// reduce_window

/// reduce_window's window attributes with the defaults filled in (strides and dilations 1,
/// padding 0).
struct Window {
  std::vector<int64_t> dims, strides, base_dilations, window_dilations, padding;
};

/// Reads and checks the window attributes of `op` for an operand of type `x`. `dilations` says
/// whether the op has base/window dilations (reduce_window) or not (select_and_scatter: ones).
Window parse_window(const std::string& op, const TensorType& x, const Attributes& attrs, bool dilations) {
  const auto rank = static_cast<size_t>(x.rank());
  const std::vector<int64_t> ones(rank, 1);
  Window w{ints_attr(op, attrs, "window_dimensions"), ints_attr_or(op, attrs, "window_strides", ones),
           dilations ? ints_attr_or(op, attrs, "base_dilations", ones) : ones,
           dilations ? ints_attr_or(op, attrs, "window_dilations", ones) : ones,
           ints_attr_or(op, attrs, "padding", std::vector<int64_t>(2 * rank, 0))};
  check_length(op, "window_dimensions", w.dims, rank, x);
  check_length(op, "window_strides", w.strides, rank, x);
  check_length(op, "base_dilations", w.base_dilations, rank, x);
  check_length(op, "window_dilations", w.window_dilations, rank, x);
  check_length(op, "padding", w.padding, 2 * rank, x);
  check_positive(op, "window_dimensions", w.dims);
  check_positive(op, "window_strides", w.strides);
  check_positive(op, "base_dilations", w.base_dilations);
  check_positive(op, "window_dilations", w.window_dilations);
  return w;
}

/// Number of windows along dim `d` (StableHLO reduce_window constraint C15).
int64_t num_windows(const std::string& op, const TensorType& x, const Window& w, size_t d) {
  const int64_t n = x.shape[d];
  const int64_t lo = w.padding[2 * d];
  const int64_t hi = w.padding[2 * d + 1];
  const int64_t dilated_input = n == 0 ? 0 : checked_mul_add(op, n - 1, w.base_dilations[d], 1);
  const int64_t padded = checked_mul_add(op, 1, checked_mul_add(op, 1, lo, dilated_input), hi);
  if (padded < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: dim {} of the padded operand would have negative size {} "
                            "(padding lo {}, hi {}, base-dilated size {})",
                            op, d, padded, lo, hi, dilated_input),
                "negative padding cannot crop more than the dimension holds");
  }
  const int64_t dilated_window = checked_mul_add(op, w.dims[d] - 1, w.window_dilations[d], 1);
  if (padded == 0 || dilated_window > padded) return 0;
  return (padded - dilated_window) / w.strides[d] + 1;
}

std::vector<TensorType> reduce_window_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const Computation c = parse_computation("reduce_window", attrs, /*logical=*/false);
  check_operand_and_init("reduce_window", x, in[1], c);
  const Window w = parse_window("reduce_window", x, attrs, /*dilations=*/true);
  Shape shape(x.shape.size());
  for (size_t d = 0; d < shape.size(); ++d) shape[d] = num_windows("reduce_window", x, w, d);
  return {TensorType{shape, x.dtype}};
}

/// Flat operand index of padded position `p` along each dim, or -1 if any position falls into
/// padding or a base-dilation hole (those cells hold init).
int64_t window_source(const Array& x, const Window& w, const std::vector<int64_t>& xstr,
                      const std::vector<int64_t>& ridx, const std::vector<int64_t>& widx) {
  int64_t off = 0;
  for (size_t d = 0; d < ridx.size(); ++d) {
    const int64_t p = ridx[d] * w.strides[d] + widx[d] * w.window_dilations[d] - w.padding[2 * d];
    const int64_t bd = w.base_dilations[d];
    if (p < 0 || p % bd != 0 || p / bd >= x.shape()[d]) return -1;
    off += (p / bd) * xstr[d];
  }
  return off;
}

template <class T>
Array reduce_window_typed(const Array& x, const Array& init, const Window& w, Computation c, const TensorType& type) {
  using C = compute_type_t<T>;
  const C init_v = load<T>(init, 0);
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  Array out = make_result(type);
  if (out.size() == 0) return out;
  T* op = out.data<T>();
  for_each_index(type.shape, [&](const std::vector<int64_t>& ridx, int64_t rflat) {
    C acc = init_v;
    for_each_index(w.dims, [&](const std::vector<int64_t>& widx, int64_t) {
      const int64_t s = window_source(x, w, xstr, ridx, widx);
      acc = combine<C>(c, acc, s >= 0 ? load<T>(x, s) : init_v);
    });
    op[rflat] = static_cast<T>(acc);
  });
  return out;
}

std::vector<Array> reduce_window_kernel(std::span<const Array> in, const Attributes& attrs,
                                        std::span<const TensorType> types) {
  const Computation c = parse_computation("reduce_window", attrs, false);
  const Window w = parse_window("reduce_window", TensorType{in[0].shape(), in[0].dtype()}, attrs, true);
  return {dispatch_dtype(in[0].dtype(), [&](auto tag) {
    return reduce_window_typed<typename decltype(tag)::type>(in[0], in[1], w, c, types[0]);
  })};
}

// ---------------------------------------------------------------------------------------------
// select_and_scatter

/// Parses select_and_scatter's `select` attribute: true for "GE" (the first maximum of a window
/// is selected), false for "LE" (the first minimum).
bool parse_select(const Attributes& attrs) {
  const std::string name = string_attr("select_and_scatter", attrs, "select");
  if (name == "GE") return true;
  if (name == "LE") return false;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("select_and_scatter: select = \"{}\" is not one of GE, LE", name),
              "use select = \"GE\" (max pooling's gradient) or \"LE\" (min pooling's)");
}

std::vector<TensorType> select_and_scatter_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const std::string op = "select_and_scatter";
  const TensorType& x = in[0];
  const TensorType& source = in[1];
  if (x.dtype == DType::kBool) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: the operand must be an integer or floating type, got {}", op, x.to_string()),
                "convert the operand to a numeric dtype");
  }
  parse_select(attrs);
  check_operand_and_init(op, x, in[2], Computation::kAdd);
  if (source.dtype != x.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: source has type {} but the operand is {}", op, source.to_string(), x.to_string()),
                "convert source to the operand's dtype");
  }
  const Window w = parse_window(op, x, attrs, /*dilations=*/false);
  Shape windows(x.shape.size());
  for (size_t d = 0; d < windows.size(); ++d) windows[d] = num_windows(op, x, w, d);
  if (source.shape != windows) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: source has shape {} but the windows of the operand {} "
                            "(window_dimensions = {}, window_strides = {}, padding = {}) give {}",
                            op, shape_to_string(source.shape), x.to_string(), list_str(w.dims), list_str(w.strides),
                            list_str(w.padding), shape_to_string(windows)),
                "source holds one value per window: the shape reduce_window would give");
  }
  return {x};
}

/// For each window of the padded operand (padding cells are never selected), selects the first
/// element e of the window, in row-major window order, that is not beaten: the selection moves
/// to a later element e when !(selected >= e) for GE (XLA's select_and_scatter loop), and adds
/// the window's source value there. The result is init plus the sums, accumulated in the
/// compute type and rounded once.
template <class T>
Array select_and_scatter_typed(const Array& x, const Array& source, const Array& init, const Window& w, bool ge,
                               const TensorType& type) {
  using C = compute_type_t<T>;
  std::vector<C> acc(static_cast<size_t>(x.size()), load<T>(init, 0));
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  if (source.size() > 0) {
    for_each_index(source.shape(), [&](const std::vector<int64_t>& ridx, int64_t sflat) {
      int64_t best = -1;
      C best_v{};
      for_each_index(w.dims, [&](const std::vector<int64_t>& widx, int64_t) {
        const int64_t s = window_source(x, w, xstr, ridx, widx);
        if (s < 0) return;  // padding
        const C v = load<T>(x, s);
        if (best < 0 || !(ge ? best_v >= v : best_v <= v)) {
          best = s;
          best_v = v;
        }
      });
      if (best >= 0) {
        const auto b = static_cast<size_t>(best);
        acc[b] = combine<C>(Computation::kAdd, acc[b], load<T>(source, sflat));
      }
    });
  }
  Array out = make_result(type);
  if (out.size() > 0) {
    T* op = out.data<T>();
    for (size_t i = 0; i < acc.size(); ++i) op[i] = static_cast<T>(acc[i]);
  }
  return out;
}

std::vector<Array> select_and_scatter_kernel(std::span<const Array> in, const Attributes& attrs,
                                             std::span<const TensorType> types) {
  const bool ge = parse_select(attrs);
  const Window w = parse_window("select_and_scatter", TensorType{in[0].shape(), in[0].dtype()}, attrs, false);
  return {dispatch_dtype(in[0].dtype(), [&](auto tag) {
    return select_and_scatter_typed<typename decltype(tag)::type>(in[0], in[1], in[2], w, ge, types[0]);
  })};
}

// ---------------------------------------------------------------------------------------------
// VJP rules (reverse mode; conventions in docs/autodiff.md). The init operand of every reduction
// is treated as a constant (JAX's reductions take their init as a literal): it gets no
// cotangent, whatever the computation.

using Cts = std::vector<std::optional<Tensor>>;

/// The cotangent `g` of a reduction result broadcast back to the operand's shape.
Tensor unreduce(const Tensor& g, const Shape& operand_shape, const std::vector<int64_t>& dims) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < static_cast<int64_t>(operand_shape.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d);
  }
  return broadcast_in_dim(g, operand_shape, kept);
}

/// Sum over `dims` (none: the tensor itself; ingot::sum would read "no axes" as all axes).
Tensor sum_over(const Tensor& t, const std::vector<int64_t>& dims) { return dims.empty() ? t : sum(t, dims); }

/// reduce max/min, JAX's chooser rule (_reduce_chooser_jvp_rule): the cotangent is split evenly
/// between the elements equal to the result (ties share it). No element equals the result in
/// two cases: init beat every element (init is a constant, so the slice gets zeros; the
/// denominator is made 1) or the result is NaN (the slice gets 0 / 0 = NaN, as in JAX).
Tensor chooser_cotangent(const Tensor& x, const Tensor& ans, const Tensor& g, const std::vector<int64_t>& dims) {
  const Shape shape = x.shape();
  const Tensor location = convert(equal(x, unreduce(ans, shape, dims)), x.dtype());
  const Tensor count = sum_over(location, dims);
  const Tensor init_won = logical_and(equal(count, zeros_like(count)), equal(ans, ans));
  const Tensor denominator = where(init_won, ones_like(count), count);
  return multiply(location, unreduce(divide(g, denominator), shape, dims));
}

/// The permutation that undoes `perm`.
std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  }
  return inverse;
}

/// Permutation that moves `dims` (any order) behind the other dims, each group keeping its order.
std::vector<int64_t> reduced_dims_last(int64_t rank, const std::vector<int64_t>& dims) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
  }
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  perm.insert(perm.end(), sorted.begin(), sorted.end());
  return perm;
}

/// g times the product of the other elements of each row of y (m, n), exact with zeros (no
/// division): the rows' product is formed by a pairwise tree over n padded with ones to a power
/// of two, and the tree is walked back from the root, each pair passing down its cotangent
/// times the partner's subtree product (the transpose of JAX's _reduce_prod_jvp_rule tree).
/// `g` has shape (m, 1).
Tensor tree_product_of_others(const Tensor& y, Tensor g) {
  const int64_t m = y.dim(0);
  const int64_t n = y.dim(1);
  int64_t width = 1;
  while (width < n) width *= 2;
  Tensor level = width > n ? pad(y, 1.0, {0, 0}, {0, width - n}) : y;
  std::vector<std::pair<Tensor, Tensor>> pairs;  // (even, odd) halves of each level
  for (int64_t w = width; w > 1; w /= 2) {
    const Tensor r = reshape(level, {m, w / 2, 2});
    const Tensor even = slice(r, {0, 0, 0}, {m, w / 2, 1});
    const Tensor odd = slice(r, {0, 0, 1}, {m, w / 2, 2});
    pairs.emplace_back(even, odd);
    level = reshape(multiply(even, odd), {m, w / 2});
  }
  for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
    const int64_t half = it->first.dim(1);
    const Tensor ct = reshape(g, {m, half, 1});
    g = reshape(concatenate({multiply(ct, it->second), multiply(ct, it->first)}, 2), {m, 2 * half});
  }
  return width > n ? slice(g, {0, 0}, {m, n}) : g;
}

/// reduce mul: x[i]'s cotangent is g * init * (product of the other elements of its slice),
/// computed exactly even with zeros (see tree_product_of_others) after moving the reduced dims
/// last and flattening them.
Tensor product_cotangent(const Tensor& x, const Tensor& init, const Tensor& g, const std::vector<int64_t>& dims) {
  const Shape shape = x.shape();
  const std::vector<int64_t> perm = reduced_dims_last(x.rank(), dims);
  const bool identity = std::is_sorted(perm.begin(), perm.end());
  const Tensor xt = identity ? x : transpose(x, perm);
  const Shape moved = xt.shape();
  const int64_t m = num_elements(g.shape());
  const int64_t n = x.size() / m;
  const Tensor g_init = multiply(g, broadcast_in_dim(init, g.shape(), {}));
  const Tensor ct = reshape(tree_product_of_others(reshape(xt, {m, n}), reshape(g_init, {m, 1})), moved);
  return identity ? ct : transpose(ct, inverse_permutation(perm));
}

/// reduce: add passes the cotangent to every element, max/min use the chooser rule, mul the
/// product of the others; the init operand gets none. and/or only see integers and bools, which
/// carry no cotangent.
Cts reduce_vjp(const VjpArgs& a) {
  const std::string& computation = a.attrs.get_string("computation");
  const Tensor& x = a.operands[0];
  const Tensor& g = *a.cotangents[0];
  const std::vector<int64_t>& dims = a.attrs.get_ints("dimensions");
  if (computation == "add") return {unreduce(g, x.shape(), dims), std::nullopt};
  if (x.size() == 0) return {std::nullopt, std::nullopt};
  if (computation == "max" || computation == "min") {
    return {chooser_cotangent(x, a.results[0], g, dims), std::nullopt};
  }
  if (computation == "mul") return {product_cotangent(x, a.operands[1], g, dims), std::nullopt};
  throw Error(ErrorCode::kUnimplemented, fmt::format("no VJP rule for 'reduce' with computation '{}'", computation),
              "only floating-point reductions (add, mul, max, min) carry gradients");
}

/// reduce_window add (JAX's _reduce_window_sum_transpose_rule): pad the cotangent by the
/// transposed-convolution padding (_conv_general_vjp_lhs_padding) with stride - 1 interior
/// zeros, then sum windows of the same size and dilation, striding by the forward base
/// dilations. Cells that held init (padding, base-dilation holes) do not reach the operand.
Tensor window_sum_cotangent(const Tensor& g, const Shape& in_shape, const Window& w) {
  const size_t rank = in_shape.size();
  std::vector<int64_t> lo(rank), hi(rank), interior(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t in_dilated = (in_shape[d] - 1) * w.base_dilations[d] + 1;
    const int64_t window_dilated = (w.dims[d] - 1) * w.window_dilations[d] + 1;
    const int64_t out_dilated = (g.dim(static_cast<int64_t>(d)) - 1) * w.strides[d] + 1;
    lo[d] = window_dilated - w.padding[2 * d] - 1;
    hi[d] = in_dilated + window_dilated - 1 - out_dilated - lo[d];
    interior[d] = w.strides[d] - 1;
  }
  const Tensor padded = pad(g, 0.0, lo, hi, interior);
  return emit("reduce_window", {padded, scalar(0.0, g.dtype())},
              {{"window_dimensions", w.dims},
               {"window_strides", w.base_dilations},
               {"base_dilations", std::vector<int64_t>(rank, 1)},
               {"window_dilations", w.window_dilations},
               {"padding", std::vector<int64_t>(2 * rank, 0)},
               {"computation", std::string("add")}})
      .at(0);
}

/// reduce_window max/min (JAX's _reduce_window_chooser_jvp_rule transposed): each window's
/// cotangent goes to the first maximal (minimal) element of the window via select_and_scatter
/// with GE (LE); padding is never selected. Base dilation is handled as JAX does: the operand
/// is dilated with -inf (+inf) holes, scattered into, and strided back. Windows whose result
/// equals a finite init pass nothing: no element beat init, a constant folded first (it keeps
/// ties). With the identity init -inf (+inf) every window passes, as in JAX (which has no init).
Tensor window_chooser_cotangent(const VjpArgs& a, const Window& w, bool is_max) {
  const Tensor& x = a.operands[0];
  const Tensor& g = *a.cotangents[0];
  const size_t rank = w.dims.size();
  for (int64_t d : w.window_dilations) {
    if (d != 1) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("no VJP rule for 'reduce_window' {} with window dilations "
                              "(window_dilations = {})",
                              is_max ? "max" : "min", list_str(w.window_dilations)),
                  "use window_dilations of 1 (JAX has no such rule either)");
    }
  }
  bool base_dilated = false;
  for (int64_t d : w.base_dilations) base_dilated = base_dilated || d != 1;
  std::vector<int64_t> holes(rank);
  for (size_t d = 0; d < rank; ++d) holes[d] = w.base_dilations[d] - 1;
  const double never = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  const std::vector<int64_t> zeros_r(rank, 0);
  const Tensor operand = base_dilated ? pad(x, never, zeros_r, zeros_r, holes) : x;
  const Tensor& ans = a.results[0];
  const Tensor init_b = broadcast_in_dim(a.operands[1], ans.shape(), {});
  const Tensor init_is_identity = equal(init_b, full_like(init_b, never));
  const Tensor passes = logical_or(not_equal(ans, init_b), init_is_identity);
  const Tensor source = where(passes, g, zeros_like(g));
  const Tensor scattered = emit("select_and_scatter", {operand, source, scalar(0.0, x.dtype())},
                                {{"window_dimensions", w.dims},
                                 {"window_strides", w.strides},
                                 {"padding", w.padding},
                                 {"select", std::string(is_max ? "GE" : "LE")}})
                               .at(0);
  if (!base_dilated) return scattered;
  const Shape dilated_shape = scattered.shape();
  return slice(scattered, zeros_r, dilated_shape, w.base_dilations);
}

/// reduce_window: add, max and min have rules (see above); init gets no cotangent.
Cts reduce_window_vjp(const VjpArgs& a) {
  const std::string& computation = a.attrs.get_string("computation");
  const Tensor& x = a.operands[0];
  const Tensor& g = *a.cotangents[0];
  const Window w = parse_window("reduce_window", x.type(), a.attrs, true);
  if (computation != "add" && computation != "max" && computation != "min") {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("no VJP rule for 'reduce_window' with computation '{}'", computation),
                "reduce_window add, max and min have gradients");
  }
  if (x.size() == 0 || g.size() == 0) return {std::nullopt, std::nullopt};
  if (computation == "add") return {window_sum_cotangent(g, x.shape(), w), std::nullopt};
  return {window_chooser_cotangent(a, w, computation == "max"), std::nullopt};
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  r.add(ops::declared(OpDef{"reduce", 2, 2, reduce_shape, reduce_kernel,
                            "folds `dimensions` with `computation` (add mul max min and or) starting at init"},
                      {"dimensions", "computation"}));
  r.add(OpDef{"argmax",
              1,
              1,
              [](std::span<const TensorType> in, const Attributes& a) { return arg_extreme_shape("argmax", in, a); },
              [](std::span<const Array> in, const Attributes& a, std::span<const TensorType> t) {
                return arg_extreme_kernel(in, a, t, /*is_max=*/true);
              },
              "index of the first maximum along `dimension` (NaN counts as the maximum)",
              {},
              std::vector<std::string>{"dimension", "index_dtype"}});
  r.add(OpDef{"argmin",
              1,
              1,
              [](std::span<const TensorType> in, const Attributes& a) { return arg_extreme_shape("argmin", in, a); },
              [](std::span<const Array> in, const Attributes& a, std::span<const TensorType> t) {
                return arg_extreme_kernel(in, a, t, /*is_max=*/false);
              },
              "index of the first minimum along `dimension` (NaN counts as the minimum)",
              {},
              std::vector<std::string>{"dimension", "index_dtype"}});
  r.add(ops::declared(
      OpDef{"reduce_window", 2, 2, reduce_window_shape, reduce_window_kernel,
            "StableHLO reduce_window with `computation` (add mul max min); padding holds init"},
      {"window_dimensions", "window_strides", "base_dilations", "window_dilations", "padding", "computation"}));
  r.add(ops::declared(OpDef{"select_and_scatter", 3, 3, select_and_scatter_shape, select_and_scatter_kernel,
                            "adds each window's source value at the window's first max (GE) / min (LE) "
                            "element, onto init"},
                      {"window_dimensions", "window_strides", "padding", "select"}));
}

}  // namespace ingot::ir

namespace ingot {

/// The VJP rules of the reduction ops (autodiff's table; see include/ingot/autodiff/vjp_rules.h).
void register_reduction_vjps(VjpRules& r) {
  r.add("reduce", ir::reduce_vjp);
  r.add("reduce_window", ir::reduce_window_vjp);
}

}  // namespace ingot
