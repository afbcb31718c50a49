// Internal helpers shared by the op families in compiler/ops/ (shape rules and kernels).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/runtime/array.h"
#include "ingot/runtime/element.h"
#include "ingot/runtime/error.h"

namespace ingot::ir::ops {

/// `def` with the attribute names it accepts (OpDef::attribute_names) and its traits, so an op's
/// registration states them where it is defined.
inline OpDef declared(OpDef def, std::vector<std::string> attribute_names, OpTraits traits = {}) {
  def.attribute_names = std::move(attribute_names);
  def.traits = traits;
  return def;
}

/// The trait of the ops a backward pass may recompute (OpTraits::cheap_to_recompute).
inline constexpr OpTraits kCheapToRecompute{.cheap_to_recompute = true};

/// "[1, 2, 3]" for an attribute list.
inline std::string list_str(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

/// The integer-list attribute `name`; a missing or mistyped attribute names the op.
inline std::vector<int64_t> ints_attr(const std::string& op, const Attributes& attrs, const std::string& name) {
  try {
    return attrs.get_ints(name);
  } catch (const Error& e) {
    throw e.with_context(op);
  }
}

/// The integer-list attribute `name`, or `fallback` when absent; mistyped names the op.
inline std::vector<int64_t> ints_attr_or(const std::string& op, const Attributes& attrs, const std::string& name,
                                         std::vector<int64_t> fallback) {
  return attrs.has(name) ? ints_attr(op, attrs, name) : fallback;
}

/// The integer attribute `name`; a missing or mistyped attribute names the op.
inline int64_t int_attr(const std::string& op, const Attributes& attrs, const std::string& name) {
  try {
    return attrs.get_int(name);
  } catch (const Error& e) {
    throw e.with_context(op);
  }
}

/// The string attribute `name`; a missing or mistyped attribute names the op.
inline std::string string_attr(const std::string& op, const Attributes& attrs, const std::string& name) {
  try {
    return attrs.get_string(name);
  } catch (const Error& e) {
    throw e.with_context(op);
  }
}

/// Normalises `axis` (negative counts from the end) for a value of `rank`; throws
/// ingot::Error(kOutOfRange) naming the op, the attribute, the axis and the rank.
inline int64_t check_axis(const std::string& op, const char* attr, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("{}: {} = {} is out of range for rank {}", op, attr, axis, rank),
                fmt::format("use a dimension in [{}, {})", -rank, rank));
  }
  return a;
}

/// Checks that `dims` are distinct and in [0, rank); throws ingot::Error(kOutOfRange /
/// kInvalidArgument) naming the op and attribute.
inline void check_dims(const std::string& op, const char* attr, const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank > 0 ? rank : 0), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) {
      throw Error(
          ErrorCode::kOutOfRange,
          fmt::format("{}: {} = [{}] contains {}, out of range for rank {}", op, attr, fmt::join(dims, ", "), d, rank),
          fmt::format("dimensions must be in [0, {})", rank));
    }
    if (seen[static_cast<size_t>(d)]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} = [{}] repeats dimension {}", op, attr, fmt::join(dims, ", "), d));
    }
    seen[static_cast<size_t>(d)] = true;
  }
}

/// Row-major multi-index of flat index `flat` in `shape`.
inline std::vector<int64_t> unravel_index(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    const int64_t d = shape[static_cast<size_t>(i)];
    idx[static_cast<size_t>(i)] = d == 0 ? 0 : flat % d;
    flat = d == 0 ? 0 : flat / d;
  }
  return idx;
}

/// Flat offset of multi-index `idx` given row-major `strides`.
inline int64_t ravel_index(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides[i];
  return off;
}

/// Calls f(index, flat) for every multi-index of `shape` in row-major order.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  const int64_t n = num_elements(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(static_cast<const std::vector<int64_t>&>(idx), flat);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

/// a * b + c in int64; throws ingot::Error(kInvalidArgument) naming the op and the operands if it
/// overflows (shape rules use it for sizes computed from attributes: dilations, padding).
inline int64_t checked_mul_add(const std::string& op, int64_t a, int64_t b, int64_t c) {
  int64_t prod = 0;
  int64_t sum = 0;
  if (__builtin_mul_overflow(a, b, &prod) || __builtin_add_overflow(prod, c, &sum)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: size arithmetic overflows int64 ({} * {} + {})", op, a, b, c),
                "use smaller dilations, strides or padding");
  }
  return sum;
}

/// Guards a kernel called directly (without a verified graph): re-runs the shape rule on the
/// operands' actual types and checks that `result_types` agree, so a bad call throws instead of
/// reading or writing out of bounds.
inline void check_kernel_call(const char* op, size_t operands,
                              std::vector<TensorType> (*rule)(std::span<const TensorType>, const Attributes&),
                              std::span<const Array> in, const Attributes& attrs,
                              std::span<const TensorType> result_types) {
  if (in.size() != operands) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the interpreter kernel got {} operands, expected {}", op, in.size(), operands),
                "verify the graph (Graph::verify) before interpreting it");
  }
  std::vector<TensorType> operand_types;
  for (const Array& a : in) operand_types.push_back({a.shape(), a.dtype()});
  const std::vector<TensorType> expected = rule(operand_types, attrs);
  if (!std::equal(expected.begin(), expected.end(), result_types.begin(), result_types.end())) {
    std::vector<std::string> got, want;
    for (const TensorType& t : result_types) got.push_back(t.to_string());
    for (const TensorType& t : expected) want.push_back(t.to_string());
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: the interpreter kernel was asked for results ({}) but the operands "
                            "give ({})",
                            op, fmt::join(got, ", "), fmt::join(want, ", ")),
                "verify the graph (Graph::verify) before interpreting it");
  }
}

/// Throws kInvalidArgument for an attribute `op` does not define (catches typos in optional
/// attributes, whose absence would otherwise silently select the default).
inline void check_known_attrs(const std::string& op, const Attributes& attrs, const std::vector<std::string>& known) {
  for (const auto& [name, value] : attrs.entries()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: unknown attribute '{}'", op, name),
                  fmt::format("{} takes the attributes {}", op, fmt::join(known, ", ")));
    }
  }
}

/// A fresh (uninitialised) host array of `type`.
inline Array make_result(const TensorType& type) { return Array::empty(type.shape, type.dtype); }

/// Throws ingot::Error(kDTypeMismatch) unless `pred` holds for `type`'s dtype.
inline void require_dtype(const std::string& op, const char* operand, const TensorType& type, bool ok,
                          const char* allowed) {
  if (!ok) {
    throw Error(
        ErrorCode::kDTypeMismatch,
        fmt::format("{}: {} has dtype {}, but {} requires {}", op, operand, dtype_name(type.dtype), op, allowed),
        "convert the operand first");
  }
}

}  // namespace ingot::ir::ops
