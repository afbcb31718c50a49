// Shape (data-movement) ops: reshape, broadcast_in_dim, transpose, slice, pad, concatenate,
// reverse. Semantics follow docs/ir.md (StableHLO). The kernels move element bytes, so every
// dtype works; every result element is located in the operand through 64-bit index arithmetic.
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ingot/trace/ops.h"
#include "ingot/autodiff/vjp_rules.h"
#include "ops/op_util.h"

namespace ingot::ir {

namespace {

using ops::list_str;
using ops::ints_attr;
using ops::int_attr;

using ops::check_dims;
using ops::for_each_index;
using ops::declared;
using ops::make_result;

// ---------------------------------------------------------------------------------------------
// Verification helpers

/// Throws kInvalidArgument unless the list attribute `attr` has one entry per operand dim.
void check_length(const std::string& op, const char* attr, const std::vector<int64_t>& list,
                  const TensorType& operand) {
  if (static_cast<int64_t>(list.size()) != operand.rank()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} = {} has {} entries but the operand {} has rank {}", op, attr, list_str(list),
                            list.size(), operand.to_string(), operand.rank()),
                fmt::format("give one {} entry per operand dimension", attr));
  }
}

/// Throws kInvalidArgument naming the attribute if a size in `shape` is negative; returns the
/// element count, throwing if it overflows int64.
int64_t checked_num_elements(const std::string& op, const char* attr, const Shape& shape) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: {} = {} has negative size {} at dimension {}", op, attr, list_str(shape), shape[i], i),
          "dimension sizes must be >= 0 (there is no -1 size inference)");
    }
  }
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} = {} has more than 2^63 elements", op, attr, list_str(shape)));
    }
  }
  return n;
}

/// a + b and a * b, or kInvalidArgument naming the op if the size arithmetic overflows int64.
int64_t checked_add(const std::string& op, int64_t a, int64_t b) { return ops::checked_mul_add(op, 1, a, b); }
int64_t checked_mul(const std::string& op, int64_t a, int64_t b) { return ops::checked_mul_add(op, a, b, 0); }

/// Checks a single-dimension attribute (no negative counting): 0 <= value < rank.
void check_dimension(const std::string& op, const char* attr, int64_t value, int64_t rank) {
  if (value < 0 || value >= rank) {
    throw Error(
        ErrorCode::kOutOfRange, fmt::format("{}: {} = {} is out of range for rank {}", op, attr, value, rank),
        rank == 0 ? std::string("a scalar has no dimension to use") : fmt::format("use a dimension in [0, {})", rank));
  }
}

// ---------------------------------------------------------------------------------------------
// Kernel helpers

/// Builds an array of `type` whose element at each multi-index `idx` is a copy of the operand
/// element at flat index `source(idx)`, or of the scalar `fill` when `source` returns -1.
template <class F>
Array copy_elements(const Array& operand, const TensorType& type, F&& source, const Array* fill = nullptr) {
  Array out = make_result(type);
  const int64_t esize = dtype_size(type.dtype);
  if (out.size() == 0) return out;
  auto* dst = static_cast<char*>(out.raw_data());
  const char* src = operand.size() > 0 ? static_cast<const char*>(operand.raw_data()) : nullptr;
  const char* fill_bytes = fill ? static_cast<const char*>(fill->raw_data()) : nullptr;
  for_each_index(type.shape, [&](const std::vector<int64_t>& idx, int64_t flat) {
    const int64_t s = source(idx);
    const char* from = s >= 0 ? src + s * esize : fill_bytes;
    if (from == nullptr) {
      throw Error(ErrorCode::kInternal, "copy_elements: an element has no source");
    }
    std::memcpy(dst + flat * esize, from, static_cast<size_t>(esize));
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// reshape

std::vector<TensorType> reshape_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const Shape shape = ints_attr("reshape", attrs, "shape");
  const int64_t n_out = checked_num_elements("reshape", "shape", shape);
  const int64_t n_in = num_elements(x.shape);
  if (n_in != n_out) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("reshape: cannot reshape operand shape {} ({} elements) to shape {} "
                            "({} elements)",
                            shape_to_string(x.shape), n_in, shape_to_string(shape), n_out),
                "the element count must stay the same");
  }
  return {TensorType{shape, x.dtype}};
}

std::vector<Array> reshape_kernel(std::span<const Array> in, const Attributes&, std::span<const TensorType> types) {
  return {in[0].clone().reshaped(types[0].shape)};
}

// ---------------------------------------------------------------------------------------------
// broadcast_in_dim

std::vector<TensorType> broadcast_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const std::string op = "broadcast_in_dim";
  const TensorType& x = in[0];
  const Shape shape = ints_attr(op, attrs, "shape");
  checked_num_elements(op, "shape", shape);
  const std::vector<int64_t> dims = ints_attr(op, attrs, "broadcast_dimensions");
  check_length(op, "broadcast_dimensions", dims, x);
  const int64_t rank = static_cast<int64_t>(shape.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= rank) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("{}: broadcast_dimensions = {} contains {}, out of range for the "
                              "result rank {} (shape = {})",
                              op, list_str(dims), dims[i], rank, list_str(shape)),
                  fmt::format("result dimensions are in [0, {})", rank));
    }
    if (i > 0 && dims[i] <= dims[i - 1]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: broadcast_dimensions = {} is not strictly increasing", op, list_str(dims)),
                  "use transpose to reorder dimensions before broadcasting");
    }
    const int64_t xs = x.shape[i];
    const int64_t rs = shape[static_cast<size_t>(dims[i])];
    if (xs != 1 && xs != rs) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}: operand dim {} has size {} but result dim {} has size {} "
                              "(operand shape {}, shape = {}, broadcast_dimensions = {})",
                              op, i, xs, dims[i], rs, shape_to_string(x.shape), list_str(shape), list_str(dims)),
                  "an operand dim must equal its result dim or be 1");
    }
  }
  return {TensorType{shape, x.dtype}};
}

std::vector<Array> broadcast_kernel(std::span<const Array> in, const Attributes& attrs,
                                    std::span<const TensorType> types) {
  const Array& x = in[0];
  const std::vector<int64_t> dims = attrs.get_ints("broadcast_dimensions");
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  return {copy_elements(x, types[0], [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (x.shape()[i] != 1) off += idx[static_cast<size_t>(dims[i])] * xstr[i];
    }
    return off;
  })};
}

// ---------------------------------------------------------------------------------------------
// transpose

std::vector<TensorType> transpose_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const std::vector<int64_t> perm = ints_attr("transpose", attrs, "permutation");
  check_length("transpose", "permutation", perm, x);
  try {
    check_dims("transpose", "permutation", perm, x.rank());
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}; it is not a permutation of [0, {})", e.message(), x.rank()),
                fmt::format("list each of 0..{} exactly once", x.rank() - 1));
  }
  Shape shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) shape[i] = x.shape[static_cast<size_t>(perm[i])];
  return {TensorType{shape, x.dtype}};
}

std::vector<Array> transpose_kernel(std::span<const Array> in, const Attributes& attrs,
                                    std::span<const TensorType> types) {
  const Array& x = in[0];
  const std::vector<int64_t> perm = attrs.get_ints("permutation");
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  return {copy_elements(x, types[0], [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < perm.size(); ++i) off += idx[i] * xstr[static_cast<size_t>(perm[i])];
    return off;
  })};
}

// ---------------------------------------------------------------------------------------------
// slice

/// Checks one dimension's slice bounds and returns its result size.
int64_t slice_dim(const TensorType& x, size_t d, int64_t start, int64_t limit, int64_t stride,
                  const std::vector<int64_t>& strides) {
  const int64_t size = x.shape[d];
  if (stride < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("slice: strides[{}] = {} must be >= 1 (strides = {})", d, stride, list_str(strides)),
                "reverse the operand to walk backwards");
  }
  if (start < 0) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("slice: start_indices[{}] = {} is negative", d, start),
                "slice indices are not counted from the end");
  }
  if (limit > size) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("slice: limit_indices[{}] = {} exceeds the size {} of dim {} "
                            "(operand {})",
                            d, limit, size, d, x.to_string()),
                "limit indices are exclusive and at most the dimension size");
  }
  if (start > limit) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("slice: start_indices[{}] = {} is greater than limit_indices[{}] = {}", d, start, d, limit),
                "use start <= limit (an empty slice has start == limit)");
  }
  return (limit - start + stride - 1) / stride;
}

std::vector<TensorType> slice_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const std::vector<int64_t> start = ints_attr("slice", attrs, "start_indices");
  const std::vector<int64_t> limit = ints_attr("slice", attrs, "limit_indices");
  const std::vector<int64_t> strides = ints_attr("slice", attrs, "strides");
  check_length("slice", "start_indices", start, x);
  check_length("slice", "limit_indices", limit, x);
  check_length("slice", "strides", strides, x);
  Shape shape(x.shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    shape[d] = slice_dim(x, d, start[d], limit[d], strides[d], strides);
  }
  return {TensorType{shape, x.dtype}};
}

std::vector<Array> slice_kernel(std::span<const Array> in, const Attributes& attrs, std::span<const TensorType> types) {
  const Array& x = in[0];
  const std::vector<int64_t> start = attrs.get_ints("start_indices");
  const std::vector<int64_t> strides = attrs.get_ints("strides");
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  return {copy_elements(x, types[0], [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += (start[d] + idx[d] * strides[d]) * xstr[d];
    return off;
  })};
}

// ---------------------------------------------------------------------------------------------
// pad

/// Result size of one padded dimension: low + high + n + max(n - 1, 0) * interior.
int64_t padded_size(const std::string& op, int64_t n, int64_t low, int64_t high, int64_t interior) {
  const int64_t holes = checked_mul(op, n > 0 ? n - 1 : 0, interior);
  return checked_add(op, checked_add(op, checked_add(op, low, high), n), holes);
}

std::vector<TensorType> pad_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const TensorType& value = in[1];
  if (value.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("pad: padding_value must be a scalar, got {}", value.to_string()),
                "pass a rank-0 padding value");
  }
  if (value.dtype != x.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("pad: padding_value has type {} but the operand is {}", value.to_string(), x.to_string()),
                "convert the padding value to the operand's dtype");
  }
  const std::vector<int64_t> low = ints_attr("pad", attrs, "edge_padding_low");
  const std::vector<int64_t> high = ints_attr("pad", attrs, "edge_padding_high");
  const std::vector<int64_t> interior = ints_attr("pad", attrs, "interior_padding");
  check_length("pad", "edge_padding_low", low, x);
  check_length("pad", "edge_padding_high", high, x);
  check_length("pad", "interior_padding", interior, x);
  Shape shape(x.shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (interior[d] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("pad: interior_padding[{}] = {} is negative (interior_padding = {})", d, interior[d],
                              list_str(interior)),
                  "interior padding must be >= 0; only edge padding may be negative (crop)");
    }
    shape[d] = padded_size("pad", x.shape[d], low[d], high[d], interior[d]);
    if (shape[d] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("pad: dim {} would have negative size {} (operand size {}, "
                              "edge_padding_low {}, edge_padding_high {}, interior_padding {})",
                              d, shape[d], x.shape[d], low[d], high[d], interior[d]),
                  "negative edge padding cannot crop more than the padded dimension holds");
    }
  }
  return {TensorType{shape, x.dtype}};
}

std::vector<Array> pad_kernel(std::span<const Array> in, const Attributes& attrs, std::span<const TensorType> types) {
  const Array& x = in[0];
  const std::vector<int64_t> low = attrs.get_ints("edge_padding_low");
  const std::vector<int64_t> interior = attrs.get_ints("interior_padding");
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  auto source = [&](const std::vector<int64_t>& idx) -> int64_t {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      const int64_t p = idx[d] - low[d];  // position in the interior-padded operand
      const int64_t step = interior[d] + 1;
      if (p < 0 || p % step != 0 || p / step >= x.shape()[d]) return -1;
      off += (p / step) * xstr[d];
    }
    return off;
  };
  return {copy_elements(x, types[0], source, &in[1])};
}

// ---------------------------------------------------------------------------------------------
// concatenate

/// Checks that operand `k` can be concatenated with operand 0 along `dim`.
void check_concat_operand(const TensorType& first, const TensorType& other, size_t k, int64_t dim) {
  if (other.dtype != first.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("concatenate: operand {} has type {} but operand 0 has type {}", k, other.to_string(),
                            first.to_string()),
                "convert the operands to one dtype");
  }
  bool ok = other.rank() == first.rank();
  for (int64_t d = 0; ok && d < first.rank(); ++d) {
    ok = d == dim || other.shape[static_cast<size_t>(d)] == first.shape[static_cast<size_t>(d)];
  }
  if (!ok) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("concatenate: operand {} has shape {} but operand 0 has shape {}; "
                            "only dimension {} may differ",
                            k, shape_to_string(other.shape), shape_to_string(first.shape), dim),
                "all operands need the same rank and equal sizes outside the concatenated "
                "dimension");
  }
}

std::vector<TensorType> concatenate_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& first = in[0];
  const int64_t dim = int_attr("concatenate", attrs, "dimension");
  check_dimension("concatenate", "dimension", dim, first.rank());
  Shape shape = first.shape;
  for (size_t k = 1; k < in.size(); ++k) {
    check_concat_operand(first, in[k], k, dim);
    shape[static_cast<size_t>(dim)] =
        checked_add("concatenate", shape[static_cast<size_t>(dim)], in[k].shape[static_cast<size_t>(dim)]);
  }
  return {TensorType{shape, first.dtype}};
}

std::vector<Array> concatenate_kernel(std::span<const Array> in, const Attributes& attrs,
                                      std::span<const TensorType> types) {
  const auto dim = static_cast<size_t>(attrs.get_int("dimension"));
  Array out = make_result(types[0]);
  const int64_t esize = dtype_size(types[0].dtype);
  const std::vector<int64_t> ostr = row_major_strides(types[0].shape);
  int64_t offset = 0;  // where the current operand starts along `dim`
  for (const Array& x : in) {
    if (x.size() > 0) {
      auto* dst = static_cast<char*>(out.raw_data());
      const auto* src = static_cast<const char*>(x.raw_data());
      for_each_index(x.shape(), [&](const std::vector<int64_t>& idx, int64_t flat) {
        const int64_t o = ops::ravel_index(idx, ostr) + offset * ostr[dim];
        std::memcpy(dst + o * esize, src + flat * esize, static_cast<size_t>(esize));
      });
    }
    offset += x.shape()[dim];
  }
  return {out};
}

// ---------------------------------------------------------------------------------------------
// reverse

std::vector<TensorType> reverse_shape(std::span<const TensorType> in, const Attributes& attrs) {
  const std::vector<int64_t> dims = ints_attr("reverse", attrs, "dimensions");
  check_dims("reverse", "dimensions", dims, in[0].rank());
  return {in[0]};
}

std::vector<Array> reverse_kernel(std::span<const Array> in, const Attributes& attrs,
                                  std::span<const TensorType> types) {
  const Array& x = in[0];
  std::vector<bool> flip(x.shape().size(), false);
  for (int64_t d : attrs.get_ints("dimensions")) flip[static_cast<size_t>(d)] = true;
  const std::vector<int64_t> xstr = row_major_strides(x.shape());
  return {copy_elements(x, types[0], [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      off += (flip[d] ? x.shape()[d] - 1 - idx[d] : idx[d]) * xstr[d];
    }
    return off;
  })};
}

// ---------------------------------------------------------------------------------------------
// VJP rules (reverse mode; conventions in docs/autodiff.md).

using Cts = std::vector<std::optional<Tensor>>;

Cts reshape_vjp(const VjpArgs& a) { return {reshape(*a.cotangents[0], a.operands[0].shape())}; }

/// The cotangent of broadcast_in_dim sums over the result dims that the operand does not map to
/// and over mapped dims where the operand has size 1 but the result does not, then reshapes to
/// the operand's shape (NumPy broadcasting's "unbroadcast").
Cts broadcast_vjp(const VjpArgs& a) {
  const Tensor& g = *a.cotangents[0];
  const Shape in_shape = a.operands[0].shape();
  const Shape out_shape = g.shape();
  const std::vector<int64_t>& dims = a.attrs.get_ints("broadcast_dimensions");
  std::vector<bool> kept(out_shape.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const size_t d = static_cast<size_t>(dims[i]);
    kept[d] = in_shape[i] == out_shape[d];
  }
  std::vector<int64_t> summed;
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (!kept[d]) summed.push_back(static_cast<int64_t>(d));
  }
  Tensor r = summed.empty() ? g : sum(g, summed);
  return {reshape(r, in_shape)};
}

/// transpose: the cotangent is transposed back by the inverse permutation.
Cts transpose_vjp(const VjpArgs& a) {
  const std::vector<int64_t>& perm = a.attrs.get_ints("permutation");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  }
  const Tensor& g = *a.cotangents[0];
  return {perm.empty() ? g : transpose(g, inverse)};
}

/// reverse: reversing is its own inverse.
Cts reverse_vjp(const VjpArgs& a) {
  const std::vector<int64_t>& dims = a.attrs.get_ints("dimensions");
  const Tensor& g = *a.cotangents[0];
  return {dims.empty() ? g : reverse(g, dims)};
}

/// slice: the cotangent goes back to the positions it was taken from; the rest of the operand
/// gets zeros. That is pad(g, 0) with low = start, interior = stride - 1 and high = whatever
/// remains up to the operand's size (JAX's _slice_transpose_rule).
Cts slice_vjp(const VjpArgs& a) {
  const std::vector<int64_t>& start = a.attrs.get_ints("start_indices");
  const std::vector<int64_t>& strides = a.attrs.get_ints("strides");
  const Tensor& g = *a.cotangents[0];
  const Shape in_shape = a.operands[0].shape();
  const Shape out_shape = g.shape();
  std::vector<int64_t> high(in_shape.size()), interior(in_shape.size());
  for (size_t d = 0; d < in_shape.size(); ++d) {
    interior[d] = strides[d] - 1;
    const int64_t m = out_shape[d];
    const int64_t covered = m == 0 ? 0 : m + (m - 1) * interior[d];
    high[d] = in_shape[d] - start[d] - covered;
  }
  return {pad(g, 0.0, start, high, interior)};
}

/// pad (JAX's _pad_transpose): the operand's cotangent undoes the edge padding by padding g with
/// the negated edges (a negative forward edge cropped elements; they get zeros back), then takes
/// every (interior + 1)-th element. The padding value fills every other result element, so its
/// cotangent is sum(g) - sum(operand's cotangent).
Cts pad_vjp(const VjpArgs& a) {
  const std::vector<int64_t>& low = a.attrs.get_ints("edge_padding_low");
  const std::vector<int64_t>& high = a.attrs.get_ints("edge_padding_high");
  const std::vector<int64_t>& interior = a.attrs.get_ints("interior_padding");
  const Tensor& g = *a.cotangents[0];
  std::vector<int64_t> neg_low(low.size()), neg_high(high.size()), step(interior.size());
  for (size_t d = 0; d < low.size(); ++d) {
    neg_low[d] = -low[d];
    neg_high[d] = -high[d];
    step[d] = interior[d] + 1;
  }
  const Tensor unpadded = pad(g, 0.0, neg_low, neg_high);
  const Shape unpadded_shape = unpadded.shape();
  const Tensor gx = slice(unpadded, std::vector<int64_t>(low.size(), 0), unpadded_shape, step);
  return {gx, subtract(sum(g), sum(gx))};
}

/// concatenate: each operand gets its own slab of the cotangent along `dimension`.
Cts concatenate_vjp(const VjpArgs& a) {
  const int64_t dim = a.attrs.get_int("dimension");
  const Tensor& g = *a.cotangents[0];
  Cts cts;
  int64_t offset = 0;
  for (const Tensor& x : a.operands) {
    const int64_t n = x.dim(dim);
    cts.push_back(a.operands.size() == 1 ? g : slice_axis(g, dim, offset, offset + n));
    offset += n;
  }
  return cts;
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add(declared(OpDef{"reshape", 1, 1, reshape_shape, reshape_kernel,
                       "same elements in row-major order with attribute `shape` (equal element count)"},
                 {"shape"}));
  r.add(declared(OpDef{"broadcast_in_dim", 1, 1, broadcast_shape, broadcast_kernel,
                       "operand dim i -> result dim broadcast_dimensions[i] (size equal or 1) of `shape`"},
                 {"shape", "broadcast_dimensions"}, ops::kCheapToRecompute));
  r.add(
      declared(OpDef{"transpose", 1, 1, transpose_shape, transpose_kernel, "result dim i = operand dim permutation[i]"},
               {"permutation"}));
  r.add(declared(OpDef{"slice", 1, 1, slice_shape, slice_kernel,
                       "elements start_indices <= i < limit_indices stepping by strides"},
                 {"start_indices", "limit_indices", "strides"}));
  r.add(declared(OpDef{"pad", 2, 2, pad_shape, pad_kernel,
                       "edge (negative crops) and interior padding with a scalar padding_value"},
                 {"edge_padding_low", "edge_padding_high", "interior_padding"}));
  r.add(declared(OpDef{"concatenate", 1, -1, concatenate_shape, concatenate_kernel,
                       "joins operands along `dimension` (other dims equal)"},
                 {"dimension"}));
  r.add(declared(
      OpDef{"reverse", 1, 1, reverse_shape, reverse_kernel, "reverses the order of elements along `dimensions`"},
      {"dimensions"}));
}

}  // namespace ingot::ir

namespace ingot {

/// The VJP rules of the shape ops (autodiff's table; see include/ingot/autodiff/vjp_rules.h).
void register_shape_vjps(VjpRules& r) {
  r.add("reshape", ir::reshape_vjp);
  r.add("broadcast_in_dim", ir::broadcast_vjp);
  r.add("transpose", ir::transpose_vjp);
  r.add("slice", ir::slice_vjp);
  r.add("pad", ir::pad_vjp);
  r.add("concatenate", ir::concatenate_vjp);
  r.add("reverse", ir::reverse_vjp);
}

}  // namespace ingot
