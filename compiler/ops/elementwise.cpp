// The elementwise op family: constant, iota, convert, unary math, binary arithmetic/logic,
// compare, select and clamp (semantics in docs/ir.md).
//
// Every op gets a shape rule (which also verifies dtypes and attributes) and a reference
// interpreter kernel. Kernels compute f16/bf16 in float and round on store, do integer
// arithmetic in the unsigned type (so overflow wraps without undefined behaviour) and use
// 64-bit flat indices.

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/runtime/element.h"
#include "ingot/trace/ops.h"
#include "ingot/autodiff/vjp_rules.h"
#include "ops/op_util.h"

namespace ingot::ir {

namespace {

using ops::declared;
using ops::kCheapToRecompute;
using ops::make_result;
using ops::require_dtype;

// ---------------------------------------------------------------------------------------------
// Dtype classes: which dtypes an op accepts, as a bit set usable at compile and run time.

/// Bits of a dtype class.
enum DKind : unsigned {
  kBoolKind = 1u,
  kSignedKind = 2u,
  kUnsignedKind = 4u,
  kFloatKind = 8u,
};
constexpr unsigned kFloatOnly = kFloatKind;
constexpr unsigned kSignedOrFloat = kSignedKind | kFloatKind;
constexpr unsigned kNumeric = kSignedKind | kUnsignedKind | kFloatKind;
constexpr unsigned kBoolOrInteger = kBoolKind | kSignedKind | kUnsignedKind;
constexpr unsigned kAnyKind = kBoolKind | kSignedKind | kUnsignedKind | kFloatKind;

/// The class bit of a storage type T.
template <class T>
constexpr unsigned kind_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return kBoolKind;
  } else if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_floating_point_v<T>) {
    return kFloatKind;
  } else if constexpr (std::is_signed_v<T>) {
    return kSignedKind;
  } else {
    return kUnsignedKind;
  }
}

/// Whether dtype class `kinds` admits storage type T (compile time).
template <unsigned kinds, class T>
constexpr bool admits_type() {
  return (kinds & kind_of<T>()) != 0;
}

/// Whether dtype class `kinds` admits `dtype` (run time).
bool admits(unsigned kinds, DType dtype) {
  return dispatch_dtype(dtype, [&](auto tag) { return (kinds & kind_of<typename decltype(tag)::type>()) != 0; });
}

/// "one of f16, bf16, f32, f64" for the dtypes in `kinds`.
std::string describe_kinds(unsigned kinds) {
  std::vector<std::string_view> names;
  for (DType d : kAllDTypes) {
    if (admits(kinds, d)) names.push_back(dtype_name(d));
  }
  return fmt::format("one of {}", fmt::join(names, ", "));
}

/// Throws ingot::Error(kDTypeMismatch) naming op, operand and dtype unless `kinds` admits it.
void check_kind(const std::string& op, const char* operand, const TensorType& type, unsigned kinds) {
  require_dtype(op, operand, type, admits(kinds, type.dtype), describe_kinds(kinds).c_str());
}

/// Thrown by kernels reached with a dtype their shape rule rejects (only possible when a
/// kernel is called directly, bypassing Graph verification).
[[noreturn]] void unsupported_kernel_dtype(const std::string& op, DType dtype) {
  throw Error(
      ErrorCode::kDTypeMismatch,
      fmt::format("{}: the interpreter kernel got dtype {}, which {} does not accept", op, dtype_name(dtype), op),
      "verify the graph (Graph::verify) before interpreting it");
}

/// Guards kernels against operands that do not match the verified result shape (only possible
/// when a kernel is called directly): `x` must have `shape`, or be a scalar if `scalar_ok`.
void check_kernel_operand(const std::string& op, const char* operand, const Array& x, const Shape& shape,
                          bool scalar_ok = false) {
  if (x.shape() == shape || (scalar_ok && x.rank() == 0)) return;
  throw Error(ErrorCode::kShapeMismatch,
              fmt::format("{}: the interpreter kernel got {} of shape {} for a result of shape {}", op, operand,
                          shape_to_string(x.shape()), shape_to_string(shape)),
              "verify the graph (Graph::verify) before interpreting it");
}

// ---------------------------------------------------------------------------------------------
// Attribute access that names the op in its errors.

/// Calls `get()` (an Attributes getter); an error it throws is prefixed with `op`.
template <class Get>
decltype(auto) op_attr(const std::string& op, Get&& get) {
  try {
    return get();
  } catch (const Error& e) {
    throw e.with_context(op);
  }
}

/// The dtype named by string attribute `name`; errors name the op and the attribute.
DType dtype_attr(const std::string& op, const Attributes& attrs, const std::string& name) {
  const std::string& s = op_attr(op, [&]() -> const std::string& { return attrs.get_string(name); });
  try {
    return parse_dtype(s);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{}: attribute '{}'", op, name));
  }
}

// ---------------------------------------------------------------------------------------------
// Element functions. Each is called with the compute type C (float for f16/bf16).

/// Integer arithmetic done in the unsigned type so that overflow wraps (two's complement).
template <class C, class F>
C wrap(C a, C b, F f) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(f(static_cast<U>(a), static_cast<U>(b))));
}

template <class C>
C negate_fn(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return -x;
  } else {
    return wrap(C(0), x, [](auto a, auto b) { return a - b; });
  }
}

template <class C>
C abs_fn(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::fabs(x);
  } else {
    return x < 0 ? negate_fn(x) : x;  // abs(INT_MIN) wraps to INT_MIN, as in XLA
  }
}

template <class C>
C sign_fn(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x) || x == 0) return x;  // keeps NaN and the sign of zero
    return x > 0 ? C(1) : C(-1);
  } else {
    return static_cast<C>((x > 0) - (x < 0));
  }
}

/// 1 / (1 + exp(-x)) without overflow: exp is only taken of a non-positive number.
template <class C>
C logistic_fn(C x) {
  if (x >= 0) return C(1) / (C(1) + std::exp(-x));
  const C e = std::exp(x);  // also reached for NaN, which propagates
  return e / (C(1) + e);
}

/// Round half to even without depending on the floating-point environment's rounding mode.
/// std::remainder(x, 1) is exact and picks the nearest integer with ties to even.
template <class C>
C round_nearest_even_fn(C x) {
  if (!std::isfinite(x)) return x;
  return std::copysign(x - std::remainder(x, C(1)), x);
}

template <class C>
C not_fn(C x) {
  if constexpr (std::is_same_v<C, bool>) {
    return !x;
  } else {
    return static_cast<C>(~x);
  }
}

template <class C>
C add_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return a + b;
  } else {
    return wrap(a, b, [](auto x, auto y) { return x + y; });
  }
}

template <class C>
C subtract_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return a - b;
  } else {
    return wrap(a, b, [](auto x, auto y) { return x - y; });
  }
}

template <class C>
C multiply_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return a * b;
  } else {
    // Promote to at least unsigned int so that u8 * u8 does not become a signed int product.
    using W = std::common_type_t<std::make_unsigned_t<C>, unsigned>;
    return wrap(a, b, [](auto x, auto y) { return static_cast<W>(x) * static_cast<W>(y); });
  }
}

/// True for the one signed quotient that overflows: min / -1.
template <class C>
bool is_min_by_minus_one(C a, C b) {
  if constexpr (std::is_signed_v<C>) {
    return a == std::numeric_limits<C>::min() && b == C(-1);
  } else {
    return false;
  }
}

template <class C>
C divide_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return a / b;
  } else {
    if (b == 0) return static_cast<C>(-1);  // all bits set, as XLA
    if (is_min_by_minus_one(a, b)) return a;
    return static_cast<C>(a / b);
  }
}

template <class C>
C remainder_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) return a;
    if (is_min_by_minus_one(a, b)) return C(0);
    return static_cast<C>(a % b);
  }
}

/// Integer power by squaring with wrap-around; negative exponents give 0 unless |base| == 1.
template <class C>
C integer_power(C base, C exponent) {
  if constexpr (std::is_signed_v<C>) {
    if (exponent < 0) {
      if (base == 1) return C(1);
      if (base == -1) return (exponent % 2 == 0) ? C(1) : C(-1);
      return C(0);
    }
  }
  C result = 1;
  while (exponent != 0) {
    if (exponent & 1) result = multiply_fn(result, base);
    base = multiply_fn(base, base);
    exponent = static_cast<C>(exponent >> 1);
  }
  return result;
}

template <class C>
C power_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::pow(a, b);
  } else {
    return integer_power(a, b);
  }
}

/// NaN-propagating maximum; max(-0, +0) = +0.
template <class C>
C maximum_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? b : a;
  }
  return a > b ? a : b;
}

/// NaN-propagating minimum; min(-0, +0) = -0.
template <class C>
C minimum_fn(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? a : b;
  }
  return a < b ? a : b;
}

template <class C>
C and_fn(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a && b;
  } else {
    return static_cast<C>(a & b);
  }
}

template <class C>
C or_fn(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a || b;
  } else {
    return static_cast<C>(a | b);
  }
}

template <class C>
C xor_fn(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a != b;
  } else {
    return static_cast<C>(a ^ b);
  }
}

/// Comparison directions of `compare`.
enum class Direction { kEQ, kNE, kLT, kLE, kGT, kGE };

/// Parses `comparison_direction`; throws kInvalidArgument naming the op and the bad value.
Direction parse_direction(const std::string& op, const Attributes& attrs) {
  const std::string& s = op_attr(op, [&]() -> const std::string& { return attrs.get_string("comparison_direction"); });
  static constexpr std::pair<const char*, Direction> kNames[] = {{"EQ", Direction::kEQ}, {"NE", Direction::kNE},
                                                                 {"LT", Direction::kLT}, {"LE", Direction::kLE},
                                                                 {"GT", Direction::kGT}, {"GE", Direction::kGE}};
  for (const auto& [name, dir] : kNames) {
    if (s == name) return dir;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: comparison_direction = \"{}\" is not a known direction", op, s),
              "use one of EQ, NE, LT, LE, GT, GE");
}

/// IEEE comparison: every direction but NE is false when an operand is NaN.
template <class C>
bool compare_fn(Direction dir, C a, C b) {
  switch (dir) {
    case Direction::kEQ:
      return a == b;
    case Direction::kNE:
      return a != b;
    case Direction::kLT:
      return a < b;
    case Direction::kLE:
      return a <= b;
    case Direction::kGT:
      return a > b;
    case Direction::kGE:
      return a >= b;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Kernel drivers.

/// Applies `fn` (on compute values) to each element of `x`; results are stored as R (the
/// operand's storage type, or bool when `bool_result`). `kinds` limits the instantiated dtypes.
template <unsigned kinds, bool bool_result, class Fn>
Array map_unary(const std::string& op, const Array& x, const TensorType& result_type, Fn fn) {
  check_kernel_operand(op, "operand", x, result_type.shape);
  Array out = make_result(result_type);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (admits_type<kinds, T>()) {
      using C = compute_type_t<T>;
      using R = std::conditional_t<bool_result, bool, T>;
      const T* in = x.data<T>();
      R* o = out.data<R>();
      const int64_t n = x.size();
      for (int64_t i = 0; i < n; ++i) o[i] = R(fn(static_cast<C>(in[i])));
    } else {
      unsupported_kernel_dtype(op, x.dtype());
    }
  });
  return out;
}

/// Applies `fn` to pairs of elements of equally typed `a` and `b`.
template <unsigned kinds, bool bool_result, class Fn>
Array map_binary(const std::string& op, const Array& a, const Array& b, const TensorType& result_type, Fn fn) {
  check_kernel_operand(op, "lhs", a, result_type.shape);
  check_kernel_operand(op, "rhs", b, result_type.shape);
  Array out = make_result(result_type);
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (admits_type<kinds, T>()) {
      using C = compute_type_t<T>;
      using R = std::conditional_t<bool_result, bool, T>;
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      R* o = out.data<R>();
      const int64_t n = a.size();
      for (int64_t i = 0; i < n; ++i) {
        o[i] = R(fn(static_cast<C>(pa[i]), static_cast<C>(pb[i])));
      }
    } else {
      unsupported_kernel_dtype(op, a.dtype());
    }
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Shape rules.

/// Shape rule of a one-operand op: operand dtype in `kinds`; result has the operand's shape
/// and its dtype (or bool).
ShapeRule unary_rule(std::string op, unsigned kinds, bool bool_result) {
  return [op = std::move(op), kinds, bool_result](std::span<const TensorType> in, const Attributes&) {
    check_kind(op, "operand", in[0], kinds);
    TensorType t = in[0];
    if (bool_result) t.dtype = DType::kBool;
    return std::vector<TensorType>{t};
  };
}

/// Throws unless lhs and rhs have identical types (no implicit broadcasting or promotion).
void check_same_type(const std::string& op, const TensorType& lhs, const TensorType& rhs) {
  if (lhs.shape != rhs.shape) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: operand shapes differ: {} vs {} (lhs {}, rhs {})", op, shape_to_string(lhs.shape),
                            shape_to_string(rhs.shape), lhs.to_string(), rhs.to_string()),
                fmt::format("broadcast explicitly with broadcast_in_dim, or use ingot::{} "
                            "(the tracer's op broadcasts)",
                            op));
  }
  if (lhs.dtype != rhs.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: operand dtypes differ: {} vs {} (lhs {}, rhs {})", op, dtype_name(lhs.dtype),
                            dtype_name(rhs.dtype), lhs.to_string(), rhs.to_string()),
                "convert one operand with convert so both have the same dtype");
  }
}

/// Shape rule of a two-operand op: identical operand types with dtype in `kinds`.
ShapeRule binary_rule(std::string op, unsigned kinds, bool bool_result) {
  return [op = std::move(op), kinds, bool_result](std::span<const TensorType> in, const Attributes&) {
    check_same_type(op, in[0], in[1]);
    check_kind(op, "lhs", in[0], kinds);
    TensorType t = in[0];
    if (bool_result) t.dtype = DType::kBool;
    return std::vector<TensorType>{t};
  };
}

std::vector<TensorType> compare_rule(std::span<const TensorType> in, const Attributes& attrs) {
  check_same_type("compare", in[0], in[1]);
  parse_direction("compare", attrs);
  return {TensorType{in[0].shape, DType::kBool}};
}

std::vector<TensorType> constant_rule(std::span<const TensorType>, const Attributes& attrs) {
  const Array& value = op_attr("constant", [&]() -> const Array& { return attrs.get_array("value"); });
  if (!value.valid()) {
    throw Error(ErrorCode::kInvalidArgument, "constant: attribute 'value' is an invalid (default-constructed) Array",
                "set 'value' to an Array holding the literal");
  }
  return {TensorType{value.shape(), value.dtype()}};
}

std::vector<TensorType> iota_rule(std::span<const TensorType>, const Attributes& attrs) {
  const std::vector<int64_t>& shape =
      op_attr("iota", [&]() -> const std::vector<int64_t>& { return attrs.get_ints("shape"); });
  for (int64_t d : shape) {
    if (d < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("iota: shape = [{}] has a negative size {}", fmt::join(shape, ", "), d),
                  "dimension sizes must be >= 0");
    }
  }
  const DType dtype = dtype_attr("iota", attrs, "dtype");
  if (dtype == DType::kBool) {
    throw Error(ErrorCode::kInvalidArgument, "iota: dtype = \"bool\" is not a numeric dtype",
                "use an integer or floating-point dtype and compare the result");
  }
  const int64_t dim = op_attr("iota", [&] { return attrs.get_int("iota_dimension"); });
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (dim < 0 || dim >= rank) {
    throw Error(
        ErrorCode::kOutOfRange,
        fmt::format("iota: iota_dimension = {} is out of range for shape [{}] (rank {})", dim, fmt::join(shape, ", "),
                    rank),
        rank == 0 ? std::string("iota needs a shape of rank >= 1") : fmt::format("use a dimension in [0, {})", rank));
  }
  return {TensorType{shape, dtype}};
}

std::vector<TensorType> convert_rule(std::span<const TensorType> in, const Attributes& attrs) {
  return {TensorType{in[0].shape, dtype_attr("convert", attrs, "dtype")}};
}

std::vector<TensorType> select_rule(std::span<const TensorType> in, const Attributes&) {
  const TensorType& pred = in[0];
  const TensorType& on_true = in[1];
  const TensorType& on_false = in[2];
  if (pred.dtype != DType::kBool) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("select: pred has type {}, but pred must be bool", pred.to_string()),
                "make the predicate with compare, or convert it to bool");
  }
  if (on_true != on_false) {
    throw Error(
        on_true.shape != on_false.shape ? ErrorCode::kShapeMismatch : ErrorCode::kDTypeMismatch,
        fmt::format("select: on_true has type {} but on_false has type {}", on_true.to_string(), on_false.to_string()),
        "on_true and on_false must have identical types; broadcast or convert first");
  }
  if (!pred.shape.empty() && pred.shape != on_true.shape) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("select: pred has shape {} but on_true has shape {}", shape_to_string(pred.shape),
                            shape_to_string(on_true.shape)),
                "pred must be a scalar or have on_true's shape; use ingot::select to broadcast");
  }
  return {on_true};
}

/// Checks one bound of clamp: x's dtype, scalar or x's shape.
void check_clamp_bound(const char* name, const TensorType& bound, const TensorType& x) {
  if (bound.dtype != x.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("clamp: {} has dtype {} but operand has dtype {}", name, dtype_name(bound.dtype),
                            dtype_name(x.dtype)),
                fmt::format("convert {} to {}", name, dtype_name(x.dtype)));
  }
  if (!bound.shape.empty() && bound.shape != x.shape) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("clamp: {} has shape {} but operand has shape {}", name, shape_to_string(bound.shape),
                            shape_to_string(x.shape)),
                "bounds must be scalars or have the operand's shape; use ingot::clamp to "
                "broadcast");
  }
}

std::vector<TensorType> clamp_rule(std::span<const TensorType> in, const Attributes&) {
  const TensorType& x = in[1];
  check_kind("clamp", "operand", x, kNumeric);
  check_clamp_bound("min", in[0], x);
  check_clamp_bound("max", in[2], x);
  return {x};
}

// ---------------------------------------------------------------------------------------------
// Kernels of the ops that are not plain maps.

std::vector<Array> constant_kernel(std::span<const Array>, const Attributes& attrs, std::span<const TensorType>) {
  return {op_attr("constant", [&]() -> const Array& { return attrs.get_array("value"); }).clone()};
}

std::vector<Array> iota_kernel(std::span<const Array>, const Attributes& attrs,
                               std::span<const TensorType> result_types) {
  const TensorType& rt = result_types[0];
  const int64_t dim = attrs.get_int("iota_dimension");
  Array out = make_result(rt);
  dispatch_dtype(rt.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = out.data<T>();
    ops::for_each_index(rt.shape, [&](const std::vector<int64_t>& idx, int64_t flat) {
      o[flat] = convert_element<T>(idx[static_cast<size_t>(dim)]);
    });
  });
  return {out};
}

std::vector<Array> convert_kernel(std::span<const Array> in, const Attributes&,
                                  std::span<const TensorType> result_types) {
  const Array& x = in[0];
  check_kernel_operand("convert", "operand", x, result_types[0].shape);
  Array out = make_result(result_types[0]);
  dispatch_dtype(x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    dispatch_dtype(out.dtype(), [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* p = x.data<From>();
      To* o = out.data<To>();
      const int64_t n = x.size();
      for (int64_t i = 0; i < n; ++i) o[i] = convert_element<To>(p[i]);
    });
  });
  return {out};
}

std::vector<Array> compare_kernel(std::span<const Array> in, const Attributes& attrs,
                                  std::span<const TensorType> result_types) {
  const Direction dir = parse_direction("compare", attrs);
  return {map_binary<kAnyKind, true>("compare", in[0], in[1], result_types[0],
                                     [dir](auto a, auto b) { return compare_fn(dir, a, b); })};
}

/// Copies element bytes from on_true or on_false; pred is read per element or as a scalar.
std::vector<Array> select_kernel(std::span<const Array> in, const Attributes&,
                                 std::span<const TensorType> result_types) {
  const Array& pred = in[0];
  const Shape& shape = result_types[0].shape;
  check_kernel_operand("select", "pred", pred, shape, /*scalar_ok=*/true);
  check_kernel_operand("select", "on_true", in[1], shape);
  check_kernel_operand("select", "on_false", in[2], shape);
  if (in[1].dtype() != result_types[0].dtype || in[2].dtype() != result_types[0].dtype) {
    unsupported_kernel_dtype("select", in[1].dtype() != result_types[0].dtype ? in[1].dtype() : in[2].dtype());
  }
  Array out = make_result(result_types[0]);
  const int64_t n = out.size();
  const auto width = static_cast<size_t>(dtype_size(out.dtype()));
  const bool* p = pred.data<bool>();
  const auto* t = static_cast<const unsigned char*>(in[1].raw_data());
  const auto* f = static_cast<const unsigned char*>(in[2].raw_data());
  auto* o = static_cast<unsigned char*>(out.raw_data());
  const bool scalar_pred = pred.rank() == 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool take_true = p[scalar_pred ? 0 : i];
    const auto offset = static_cast<size_t>(i) * width;
    std::memcpy(o + offset, (take_true ? t : f) + offset, width);
  }
  return {out};
}

/// min(max(x, lo), hi) with the NaN-propagating maximum/minimum; bounds may be scalars.
std::vector<Array> clamp_kernel(std::span<const Array> in, const Attributes&,
                                std::span<const TensorType> result_types) {
  const Array& lo = in[0];
  const Array& x = in[1];
  const Array& hi = in[2];
  const Shape& shape = result_types[0].shape;
  check_kernel_operand("clamp", "min", lo, shape, /*scalar_ok=*/true);
  check_kernel_operand("clamp", "operand", x, shape);
  check_kernel_operand("clamp", "max", hi, shape, /*scalar_ok=*/true);
  Array out = make_result(result_types[0]);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (admits_type<kNumeric, T>()) {
      using C = compute_type_t<T>;
      const T* pl = lo.data<T>();
      const T* px = x.data<T>();
      const T* ph = hi.data<T>();
      T* o = out.data<T>();
      const bool scalar_lo = lo.rank() == 0;
      const bool scalar_hi = hi.rank() == 0;
      const int64_t n = x.size();
      for (int64_t i = 0; i < n; ++i) {
        const C l = static_cast<C>(pl[scalar_lo ? 0 : i]);
        const C h = static_cast<C>(ph[scalar_hi ? 0 : i]);
        o[i] = T(minimum_fn(maximum_fn(static_cast<C>(px[i]), l), h));
      }
    } else {
      unsupported_kernel_dtype("clamp", x.dtype());
    }
  });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// VJP rules (reverse mode; conventions in docs/autodiff.md). As in JAX's lax.py, `g` is the
// output cotangent, `x` (or `a`, `b`) the operands and `ans` the result. Rules emit only ops
// that have rules themselves (compare/and/or, whose bool results carry no cotangent, aside), so
// backward graphs can be differentiated again. Constants come from full_like or a `double`
// operand (`t * 0.5`), which take the tensor's dtype, so every float dtype works. Intermediates
// get names so that the node order does not depend on the order of evaluating arguments.

using Cts = std::vector<std::optional<Tensor>>;

const Tensor& cotangent(const VjpArgs& a) { return *a.cotangents[0]; }

/// select(cond, t, 0).
Tensor where_or_zero(const Tensor& cond, const Tensor& t) {
  const Tensor zero = zeros_like(t);
  return where(cond, t, zero);
}

/// Zero derivative almost everywhere (sign, floor, ceil, round_nearest_even): a symbolic zero.
Cts zero_vjp(const VjpArgs&) { return {std::nullopt}; }

Cts add_vjp(const VjpArgs& a) { return {cotangent(a), cotangent(a)}; }
Cts subtract_vjp(const VjpArgs& a) { return {cotangent(a), negate(cotangent(a))}; }
Cts multiply_vjp(const VjpArgs& a) {
  const Tensor& g = cotangent(a);
  const Tensor da = g * a.operands[1];
  return {da, g * a.operands[0]};
}
Cts exponential_vjp(const VjpArgs& a) { return {cotangent(a) * a.results[0]}; }

Cts negate_vjp(const VjpArgs& a) { return {negate(cotangent(a))}; }

/// abs'(0) = 1 as in JAX: g where x >= 0 (+0 and -0 alike), -g elsewhere (and for NaN).
Cts abs_vjp(const VjpArgs& a) {
  const Tensor& x = a.operands[0];
  const Tensor& g = cotangent(a);
  const Tensor nonnegative = greater_equal(x, zeros_like(x));
  const Tensor minus_g = negate(g);
  return {where(nonnegative, g, minus_g)};
}

Cts log_vjp(const VjpArgs& a) { return {cotangent(a) / a.operands[0]}; }
Cts log_plus_one_vjp(const VjpArgs& a) { return {cotangent(a) / (a.operands[0] + 1.0)}; }
Cts exponential_minus_one_vjp(const VjpArgs& a) { return {cotangent(a) * (a.results[0] + 1.0)}; }

/// g * (1 - ans^2) as JAX writes it, (g + g * ans) * (1 - ans): ans^2 is not rounded near 1.
Cts tanh_vjp(const VjpArgs& a) {
  const Tensor& g = cotangent(a);
  const Tensor& ans = a.results[0];
  const Tensor g_plus = g + g * ans;
  return {g_plus * (1.0 - ans)};
}

Cts logistic_vjp(const VjpArgs& a) {
  const Tensor& ans = a.results[0];
  return {cotangent(a) * (ans * (1.0 - ans))};
}

/// g * 0.5 / ans: sqrt'(0) = inf.
Cts sqrt_vjp(const VjpArgs& a) { return {(cotangent(a) * 0.5) / a.results[0]}; }

/// g * (-0.5 * ans / x), i.e. -0.5 x^(-3/2) through the stored result.
Cts rsqrt_vjp(const VjpArgs& a) {
  const Tensor ratio = a.results[0] / a.operands[0];
  return {cotangent(a) * (ratio * -0.5)};
}

Cts sine_vjp(const VjpArgs& a) { return {cotangent(a) * cos(a.operands[0])}; }
Cts cosine_vjp(const VjpArgs& a) { return {negate(cotangent(a) * sin(a.operands[0]))}; }

/// 2 / sqrt(pi) * g * exp(-x^2).
Cts erf_vjp(const VjpArgs& a) {
  const Tensor& x = a.operands[0];
  const Tensor gaussian = exp(negate(x * x));
  return {(cotangent(a) * gaussian) * (2.0 / std::sqrt(std::numbers::pi))};
}

/// (g / b, -g * (ans / b)): the rhs term uses the result a / b, so that it is -g * a / b^2
/// without forming b^2 (which overflows for |b| > 1e154 in f64); x / 0 gives +-inf as JAX.
Cts divide_vjp(const VjpArgs& a) {
  const Tensor& g = cotangent(a);
  const Tensor& b = a.operands[1];
  const Tensor da = g / b;
  const Tensor ans_over_b = a.results[0] / b;
  return {da, negate(g) * ans_over_b};
}

/// (g, -g * trunc(a / b)) with trunc(q) = sign(q) * floor(|q|), as JAX.
Cts remainder_vjp(const VjpArgs& a) {
  const Tensor& g = cotangent(a);
  const Tensor q = a.operands[0] / a.operands[1];
  const Tensor magnitude = floor(abs(q));
  const Tensor trunc_q = sign(q) * magnitude;
  return {g, negate(g) * trunc_q};
}

/// d/da = g * b * a^(b - 1), but 0 where b == 0: a^0 = 1 is constant in a (also at a = 0,
/// where the formula is 0 * inf = NaN). a is replaced by 1 where b == 0 (the "double where") so
/// the masked-out branch stays finite and second derivatives get no 0 * inf either.
Tensor power_lhs(const Tensor& g, const Tensor& a, const Tensor& b) {
  const Tensor b_is_zero = equal(b, zeros_like(b));
  const Tensor safe_a = where(b_is_zero, ones_like(a), a);
  const Tensor slope = b * pow(safe_a, b - 1.0);
  const Tensor zero = zeros_like(slope);
  return g * where(b_is_zero, zero, slope);
}

/// d/db = g * log(a') * ans with a' = select(a == 0, 1, a) (JAX's _replace_zero): 0 at a = 0.
Tensor power_rhs(const Tensor& g, const Tensor& a, const Tensor& ans) {
  const Tensor a_is_zero = equal(a, zeros_like(a));
  const Tensor safe_a = where(a_is_zero, ones_like(a), a);
  const Tensor log_a = log(safe_a);
  return g * (log_a * ans);
}

Cts power_vjp(const VjpArgs& a) {
  const Tensor& g = cotangent(a);
  const Tensor da = power_lhs(g, a.operands[0], a.operands[1]);
  return {da, power_rhs(g, a.operands[0], a.results[0])};
}

/// JAX's _balanced_eq: 1 where x == ans, halved where y == ans too, else 0 (NaN: 0).
Tensor balanced_eq(const Tensor& x, const Tensor& ans, const Tensor& y) {
  const Tensor x_won = equal(x, ans);
  const Tensor tie = equal(y, ans);
  const Tensor half = full_like(ans, 0.5);
  const Tensor share = where(tie, half, ones_like(ans));
  return where_or_zero(x_won, share);
}

/// maximum and minimum: the cotangent goes to the operand equal to the result; ties split it
/// 0.5 / 0.5 (so relu'(0) = 0.5 through maximum(x, 0)), as JAX.
Cts extremum_vjp(const VjpArgs& a) {
  const Tensor& g = cotangent(a);
  const Tensor& ans = a.results[0];
  const Tensor da = g * balanced_eq(a.operands[0], ans, a.operands[1]);
  return {da, g * balanced_eq(a.operands[1], ans, a.operands[0])};
}

/// atan2(a, b): (g * b / (a^2 + b^2), -g * a / (a^2 + b^2)), as JAX.
Cts atan2_vjp(const VjpArgs& a) {
  const Tensor& g = cotangent(a);
  const Tensor& y = a.operands[0];
  const Tensor& x = a.operands[1];
  const Tensor y2 = y * y;
  const Tensor radius2 = y2 + x * x;
  const Tensor da = g * (x / radius2);
  const Tensor minus_gy = g * negate(y);
  return {da, minus_gy / radius2};
}

/// select(pred, t, f): pred gets nothing, each branch the cotangent where it was taken (pred may
/// be a scalar; select takes a scalar pred as is).
Cts select_vjp(const VjpArgs& a) {
  const Tensor& pred = a.operands[0];
  const Tensor& g = cotangent(a);
  const Tensor zero = zeros_like(g);
  const Tensor dt = where(pred, g, zero);
  return {std::nullopt, dt, where(pred, zero, g)};
}

/// The cotangent of a clamp bound: summed to a scalar when the bound was a scalar.
Tensor to_bound(const Tensor& ct, const Tensor& bound) { return bound.rank() == 0 ? sum(ct) : ct; }

/// clamp(lo, x, hi) = min(max(x, lo), hi). x gets g where lo < x < hi strictly (JAX); lo where
/// x < lo < hi (JAX); hi where hi < max(x, lo), i.e. x > hi or lo > hi (JAX has only x > hi,
/// which misses the degenerate lo > hi where the result is hi). At x == lo or x == hi every
/// operand gets 0.
Cts clamp_vjp(const VjpArgs& a) {
  const Tensor& lo = a.operands[0];
  const Tensor& x = a.operands[1];
  const Tensor& hi = a.operands[2];
  const Tensor& g = cotangent(a);
  const Tensor above_lo = less(lo, x);
  const Tensor inside = logical_and(above_lo, less(x, hi));
  const Tensor below_lo = less(x, lo);
  const Tensor at_lo = logical_and(below_lo, less(lo, hi));
  const Tensor above_hi = less(hi, x);
  const Tensor at_hi = logical_or(above_hi, less(hi, lo));
  const Tensor dlo = to_bound(where_or_zero(at_lo, g), lo);
  const Tensor dx = where_or_zero(inside, g);
  return {dlo, dx, to_bound(where_or_zero(at_hi, g), hi)};
}

/// convert: float -> float converts the cotangent back; to or from a non-float type no gradient
/// flows (as JAX's float0).
Cts convert_vjp(const VjpArgs& a) {
  const DType from = a.operands[0].dtype();
  if (!is_floating(from) || !is_floating(a.results[0].dtype())) return {std::nullopt};
  return {convert(cotangent(a), from)};
}

// ---------------------------------------------------------------------------------------------
// Registration helpers.

/// Registers a one-operand map op; `fn` is a generic callable on compute values.
template <unsigned kinds, bool bool_result = false, class Fn>
void add_unary(OpRegistry& r, const std::string& name, const std::string& summary, Fn fn) {
  InterpretRule kernel = [name, fn](std::span<const Array> in, const Attributes&,
                                    std::span<const TensorType> result_types) {
    return std::vector<Array>{map_unary<kinds, bool_result>(name, in[0], result_types[0], fn)};
  };
  r.add(declared(OpDef{name, 1, 1, unary_rule(name, kinds, bool_result), std::move(kernel), summary}, {},
                 kCheapToRecompute));
}

/// Registers a two-operand map op with identical operand types.
template <unsigned kinds, class Fn>
void add_binary(OpRegistry& r, const std::string& name, const std::string& summary, Fn fn) {
  InterpretRule kernel = [name, fn](std::span<const Array> in, const Attributes&,
                                    std::span<const TensorType> result_types) {
    return std::vector<Array>{map_binary<kinds, false>(name, in[0], in[1], result_types[0], fn)};
  };
  r.add(
      declared(OpDef{name, 2, 2, binary_rule(name, kinds, false), std::move(kernel), summary}, {}, kCheapToRecompute));
}

void register_unary_ops(OpRegistry& r) {
  add_unary<kSignedOrFloat>(r, "negate", "-x (integers wrap)", [](auto x) { return negate_fn(x); });
  add_unary<kSignedOrFloat>(r, "abs", "|x| (abs(INT_MIN) wraps to INT_MIN)", [](auto x) { return abs_fn(x); });
  add_unary<kSignedOrFloat>(r, "sign", "-1, 0 or 1; sign(+-0) = +-0, sign(NaN) = NaN",
                            [](auto x) { return sign_fn(x); });
  add_unary<kFloatOnly>(r, "exponential", "e^x", [](auto x) { return std::exp(x); });
  add_unary<kFloatOnly>(r, "log", "natural logarithm; log(0) = -inf, log(x < 0) = NaN",
                        [](auto x) { return std::log(x); });
  add_unary<kFloatOnly>(r, "log_plus_one", "log(1 + x), accurate near 0", [](auto x) { return std::log1p(x); });
  add_unary<kFloatOnly>(r, "exponential_minus_one", "e^x - 1, accurate near 0", [](auto x) { return std::expm1(x); });
  add_unary<kFloatOnly>(r, "tanh", "hyperbolic tangent", [](auto x) { return std::tanh(x); });
  add_unary<kFloatOnly>(r, "logistic", "1 / (1 + e^-x), without overflow", [](auto x) { return logistic_fn(x); });
  add_unary<kFloatOnly>(r, "sqrt", "square root; sqrt(x < 0) = NaN", [](auto x) { return std::sqrt(x); });
  add_unary<kFloatOnly>(r, "rsqrt", "1 / sqrt(x); rsqrt(0) = inf",
                        [](auto x) { return decltype(x)(1) / std::sqrt(x); });
  add_unary<kFloatOnly>(r, "sine", "sin(x), x in radians", [](auto x) { return std::sin(x); });
  add_unary<kFloatOnly>(r, "cosine", "cos(x), x in radians", [](auto x) { return std::cos(x); });
  add_unary<kFloatOnly>(r, "floor", "largest integer <= x", [](auto x) { return std::floor(x); });
  add_unary<kFloatOnly>(r, "ceil", "smallest integer >= x", [](auto x) { return std::ceil(x); });
  add_unary<kFloatOnly>(r, "round_nearest_even", "nearest integer, ties to even",
                        [](auto x) { return round_nearest_even_fn(x); });
  add_unary<kFloatOnly>(r, "erf", "the error function", [](auto x) { return std::erf(x); });
  add_unary<kBoolOrInteger>(r, "not", "logical not (bool) or bitwise not (integers)", [](auto x) { return not_fn(x); });
  add_unary<kFloatOnly, true>(r, "is_finite", "true where x is neither inf nor NaN",
                              [](auto x) { return static_cast<bool>(std::isfinite(x)); });
}

void register_binary_ops(OpRegistry& r) {
  add_binary<kNumeric>(r, "add", "a + b (integers wrap)", [](auto a, auto b) { return add_fn(a, b); });
  add_binary<kNumeric>(r, "subtract", "a - b (integers wrap)", [](auto a, auto b) { return subtract_fn(a, b); });
  add_binary<kNumeric>(r, "multiply", "a * b (integers wrap)", [](auto a, auto b) { return multiply_fn(a, b); });
  add_binary<kNumeric>(r, "divide", "a / b; integers truncate, x / 0 = -1, INT_MIN / -1 = INT_MIN",
                       [](auto a, auto b) { return divide_fn(a, b); });
  add_binary<kNumeric>(r, "remainder", "a - b * trunc(a / b) (dividend's sign); x % 0 = x",
                       [](auto a, auto b) { return remainder_fn(a, b); });
  add_binary<kNumeric>(r, "power", "a^b; integer a^(b < 0) is 0 unless |a| = 1",
                       [](auto a, auto b) { return power_fn(a, b); });
  add_binary<kNumeric>(r, "maximum", "larger of a and b; NaN propagates",
                       [](auto a, auto b) { return maximum_fn(a, b); });
  add_binary<kNumeric>(r, "minimum", "smaller of a and b; NaN propagates",
                       [](auto a, auto b) { return minimum_fn(a, b); });
  add_binary<kFloatOnly>(r, "atan2", "angle of the point (b, a), in (-pi, pi]",
                         [](auto a, auto b) { return std::atan2(a, b); });
  add_binary<kBoolOrInteger>(r, "and", "logical/bitwise and", [](auto a, auto b) { return and_fn(a, b); });
  add_binary<kBoolOrInteger>(r, "or", "logical/bitwise or", [](auto a, auto b) { return or_fn(a, b); });
  add_binary<kBoolOrInteger>(r, "xor", "logical/bitwise exclusive or", [](auto a, auto b) { return xor_fn(a, b); });
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add(
      declared(OpDef{"constant", 0, 0, constant_rule, constant_kernel, "the literal in attribute `value`"}, {"value"}));
  r.add(declared(OpDef{"iota", 0, 0, iota_rule, iota_kernel, "index along `iota_dimension` of `shape`, as `dtype`"},
                 {"shape", "dtype", "iota_dimension"}));
  r.add(declared(OpDef{"convert", 1, 1, convert_rule, convert_kernel,
                       "element type conversion to `dtype` (float->int truncates and saturates)"},
                 {"dtype"}, kCheapToRecompute));
  register_unary_ops(r);
  register_binary_ops(r);
  r.add(declared(OpDef{"compare", 2, 2, compare_rule, compare_kernel,
                       "a <dir> b as bool, dir = comparison_direction (EQ NE LT LE GT GE); IEEE NaN"},
                 {"comparison_direction"}, kCheapToRecompute));
  r.add(declared(OpDef{"select", 3, 3, select_rule, select_kernel,
                       "pred ? on_true : on_false elementwise (pred scalar or same shape)"},
                 {}, kCheapToRecompute));
  r.add(declared(OpDef{"clamp", 3, 3, clamp_rule, clamp_kernel, "min(max(x, min), max); bounds scalar or x's shape"},
                 {}, kCheapToRecompute));
}

}  // namespace ingot::ir

namespace ingot {

/// The VJP rules of the elementwise ops (autodiff's table; see include/ingot/autodiff/vjp_rules.h).
void register_elementwise_vjps(VjpRules& r) {
  r.add("negate", ir::negate_vjp);
  r.add("abs", ir::abs_vjp);
  r.add("sign", ir::zero_vjp);
  r.add("exponential", ir::exponential_vjp);
  r.add("log", ir::log_vjp);
  r.add("log_plus_one", ir::log_plus_one_vjp);
  r.add("exponential_minus_one", ir::exponential_minus_one_vjp);
  r.add("tanh", ir::tanh_vjp);
  r.add("logistic", ir::logistic_vjp);
  r.add("sqrt", ir::sqrt_vjp);
  r.add("rsqrt", ir::rsqrt_vjp);
  r.add("sine", ir::sine_vjp);
  r.add("cosine", ir::cosine_vjp);
  r.add("floor", ir::zero_vjp);
  r.add("ceil", ir::zero_vjp);
  r.add("round_nearest_even", ir::zero_vjp);
  r.add("erf", ir::erf_vjp);
  r.add("add", ir::add_vjp);
  r.add("subtract", ir::subtract_vjp);
  r.add("multiply", ir::multiply_vjp);
  r.add("divide", ir::divide_vjp);
  r.add("remainder", ir::remainder_vjp);
  r.add("power", ir::power_vjp);
  r.add("maximum", ir::extremum_vjp);
  r.add("minimum", ir::extremum_vjp);
  r.add("atan2", ir::atan2_vjp);
  r.add("convert", ir::convert_vjp);
  r.add("select", ir::select_vjp);
  r.add("clamp", ir::clamp_vjp);
}

}  // namespace ingot
