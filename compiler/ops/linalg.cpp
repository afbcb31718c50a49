// The linalg op family: dot_general and convolution (StableHLO semantics, see docs/ir.md).
//
// Both ops contract products of two operands of one numeric dtype. Accumulation happens in the
// operand type, except that f16/bf16 accumulate in float and round once on store, and integers
// accumulate modulo 2^64 so that the stored result wraps exactly like repeated n-bit adds would.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingot/trace/ops.h"
#include "ops/conv_config.h"
#include "ingot/autodiff/vjp_rules.h"
#include "ops/op_util.h"

namespace ingot::ir {
namespace {

using ops::check_kernel_call;
using ops::check_known_attrs;

using ops::check_dims;
using ops::for_each_index;
using ops::make_result;
using ops::require_dtype;

// ---------------------------------------------------------------------------------------------
// Attribute helpers (names the op in every message; the Graph adds the node text).

/// Reads the required integer attribute `name`, throwing kNotFound/kInvalidArgument naming `op`.
int64_t required_int(const std::string& op, const Attributes& attrs, const std::string& name) {
  if (!attrs.has(name)) {
    throw Error(ErrorCode::kNotFound, fmt::format("{}: missing attribute '{}' (int)", op, name),
                fmt::format("set '{}' as described in docs/ir.md", name));
  }
  try {
    return attrs.get_int(name);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", op, e.message()), e.hint());
  }
}

/// Reads the integer list `name`, or `fallback` when absent (nullptr fallback: required).
std::vector<int64_t> ints_attr(const std::string& op, const Attributes& attrs, const std::string& name,
                               const std::vector<int64_t>* fallback) {
  if (!attrs.has(name)) {
    if (fallback) return *fallback;
    throw Error(ErrorCode::kNotFound, fmt::format("{}: missing attribute '{}' (ints)", op, name),
                fmt::format("set '{}' as described in docs/ir.md", name));
  }
  try {
    return attrs.get_ints(name);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", op, e.message()), e.hint());
  }
}

/// "[1, 2]" for messages.
std::string list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

/// Throws kInvalidArgument unless `values` has `expected` entries.
void check_length(const std::string& op, const std::string& name, const std::vector<int64_t>& values, int64_t expected,
                  const std::string& why) {
  if (static_cast<int64_t>(values.size()) != expected) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} = {} has {} entries, but {} needs {}", op, name,
                                                         list(values), values.size(), why, expected));
  }
}

/// Throws kInvalidArgument unless every entry of `values` is >= `minimum`.
void check_at_least(const std::string& op, const std::string& name, const std::vector<int64_t>& values,
                    int64_t minimum) {
  for (int64_t v : values) {
    if (v < minimum) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} = {} contains {}, but every entry must be >= {}", op,
                                                           name, list(values), v, minimum));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Accumulation.

/// Accumulator type: float for f16/bf16, the type itself for f32/f64, uint64 for integers (a
/// product and sum modulo 2^64, truncated on store, equals the n-bit wrapping result).
template <class T>
using acc_t = std::conditional_t<std::is_integral_v<T>, uint64_t, compute_type_t<T>>;

template <class T>
acc_t<T> to_acc(T v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint64_t>(v);  // sign-extends negative values modulo 2^64
  } else {
    return static_cast<compute_type_t<T>>(v);
  }
}

template <class T>
T from_acc(acc_t<T> v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(v));  // wraps (C++20)
  } else if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    return T(v);  // one rounding to nearest even on store
  } else {
    return v;
  }
}

/// Checks that lhs/rhs share one numeric (non-bool) dtype.
void check_numeric_pair(const std::string& op, const TensorType& lhs, const TensorType& rhs) {
  if (lhs.dtype != rhs.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: operand dtypes differ: lhs is {}, rhs is {}", op, lhs.to_string(), rhs.to_string()),
                "convert one operand so both have the same dtype");
  }
  require_dtype(op, "lhs", lhs, !is_bool(lhs.dtype), "a numeric dtype (integer or float)");
}

// ---------------------------------------------------------------------------------------------
// dot_general

const char* const kDot = "dot_general";

/// Validated dot_general dimension numbers plus the derived free dimensions.
struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contract, rhs_contract;
  std::vector<int64_t> lhs_free, rhs_free;
};

/// Dimensions of `rank` that are in neither `a` nor `b`, in increasing order.
std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end()) {
      out.push_back(d);
    }
  }
  return out;
}

/// Range, repetition and overlap checks for one side's batching and contracting dimensions.
void check_dot_side(const char* side, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract,
                    int64_t rank) {
  const std::string batch_name = fmt::format("{}_batching_dimensions", side);
  const std::string contract_name = fmt::format("{}_contracting_dimensions", side);
  check_dims(kDot, batch_name.c_str(), batch, rank);
  check_dims(kDot, contract_name.c_str(), contract, rank);
  for (int64_t d : batch) {
    if (std::find(contract.begin(), contract.end(), d) != contract.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} dimension {} is in both {} = {} and {} = {}", kDot, side, d, batch_name,
                              list(batch), contract_name, list(contract)),
                  "a dimension is either batched or contracted, not both");
    }
  }
}

/// Checks that the paired dimensions of lhs and rhs have equal sizes.
void check_paired_sizes(const char* what, const std::vector<int64_t>& lhs_dims, const std::vector<int64_t>& rhs_dims,
                        const TensorType& lhs, const TensorType& rhs) {
  for (size_t i = 0; i < lhs_dims.size(); ++i) {
    const int64_t a = lhs.shape[static_cast<size_t>(lhs_dims[i])];
    const int64_t b = rhs.shape[static_cast<size_t>(rhs_dims[i])];
    if (a != b) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}: {} dimension sizes differ: lhs dim {} has {}, rhs dim {} has {} "
                              "(lhs {}, rhs {})",
                              kDot, what, lhs_dims[i], a, rhs_dims[i], b, lhs.to_string(), rhs.to_string()),
                  fmt::format("the {} dimensions of lhs and rhs must pair up with equal sizes", what));
    }
  }
}

DotDims dot_dims(const TensorType& lhs, const TensorType& rhs, const Attributes& attrs) {
  check_known_attrs(kDot, attrs,
                    {"lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
                     "rhs_contracting_dimensions"});
  // Absent lists are empty, as in StableHLO's #stablehlo.dot<...> syntax.
  const std::vector<int64_t> none;
  DotDims d;
  d.lhs_batch = ints_attr(kDot, attrs, "lhs_batching_dimensions", &none);
  d.rhs_batch = ints_attr(kDot, attrs, "rhs_batching_dimensions", &none);
  d.lhs_contract = ints_attr(kDot, attrs, "lhs_contracting_dimensions", &none);
  d.rhs_contract = ints_attr(kDot, attrs, "rhs_contracting_dimensions", &none);
  if (d.lhs_batch.size() != d.rhs_batch.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: lhs_batching_dimensions = {} and rhs_batching_dimensions = {} "
                            "have different lengths ({} vs {})",
                            kDot, list(d.lhs_batch), list(d.rhs_batch), d.lhs_batch.size(), d.rhs_batch.size()),
                "pair each lhs batching dimension with one rhs batching dimension");
  }
  if (d.lhs_contract.size() != d.rhs_contract.size()) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: lhs_contracting_dimensions = {} and rhs_contracting_dimensions = "
                    "{} have different lengths ({} vs {})",
                    kDot, list(d.lhs_contract), list(d.rhs_contract), d.lhs_contract.size(), d.rhs_contract.size()),
        "pair each lhs contracting dimension with one rhs contracting dimension");
  }
  check_dot_side("lhs", d.lhs_batch, d.lhs_contract, lhs.rank());
  check_dot_side("rhs", d.rhs_batch, d.rhs_contract, rhs.rank());
  check_paired_sizes("batch", d.lhs_batch, d.rhs_batch, lhs, rhs);
  check_paired_sizes("contracting", d.lhs_contract, d.rhs_contract, lhs, rhs);
  d.lhs_free = free_dims(lhs.rank(), d.lhs_batch, d.lhs_contract);
  d.rhs_free = free_dims(rhs.rank(), d.rhs_batch, d.rhs_contract);
  return d;
}

std::vector<TensorType> dot_general_rule(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& lhs = in[0];
  const TensorType& rhs = in[1];
  check_numeric_pair(kDot, lhs, rhs);
  const DotDims d = dot_dims(lhs, rhs, attrs);
  TensorType out{{}, lhs.dtype};
  for (int64_t b : d.lhs_batch) out.shape.push_back(lhs.shape[static_cast<size_t>(b)]);
  for (int64_t f : d.lhs_free) out.shape.push_back(lhs.shape[static_cast<size_t>(f)]);
  for (int64_t f : d.rhs_free) out.shape.push_back(rhs.shape[static_cast<size_t>(f)]);
  return {out};
}

/// Sum of index[first + i] * strides[dims[i]] over i: the offset contributed by `dims`.
int64_t offset_of(const std::vector<int64_t>& index, size_t first, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    off += index[first + i] * strides[static_cast<size_t>(dims[i])];
  }
  return off;
}

template <class T>
void dot_general_kernel(const Array& lhs, const Array& rhs, const DotDims& d, Array& out) {
  const T* a = lhs.data<T>();
  const T* b = rhs.data<T>();
  T* o = out.data<T>();
  const std::vector<int64_t> ls = row_major_strides(lhs.shape());
  const std::vector<int64_t> rs = row_major_strides(rhs.shape());
  // Offsets of every contracting index, row-major over lhs_contracting_dimensions' order.
  Shape contract_shape;
  for (int64_t c : d.lhs_contract) contract_shape.push_back(lhs.shape()[static_cast<size_t>(c)]);
  std::vector<std::pair<int64_t, int64_t>> contract_offsets;
  for_each_index(contract_shape, [&](const std::vector<int64_t>& idx, int64_t) {
    contract_offsets.emplace_back(offset_of(idx, 0, d.lhs_contract, ls), offset_of(idx, 0, d.rhs_contract, rs));
  });
  const size_t nb = d.lhs_batch.size();
  const size_t nl = d.lhs_free.size();
  for_each_index(out.shape(), [&](const std::vector<int64_t>& r, int64_t flat) {
    const int64_t lhs_base = offset_of(r, 0, d.lhs_batch, ls) + offset_of(r, nb, d.lhs_free, ls);
    const int64_t rhs_base = offset_of(r, 0, d.rhs_batch, rs) + offset_of(r, nb + nl, d.rhs_free, rs);
    acc_t<T> acc{};
    for (const auto& [lo, ro] : contract_offsets) {
      acc += to_acc(a[lhs_base + lo]) * to_acc(b[rhs_base + ro]);
    }
    o[flat] = from_acc<T>(acc);
  });
}

std::vector<Array> dot_general_interpret(std::span<const Array> in, const Attributes& attrs,
                                         std::span<const TensorType> result_types) {
  check_kernel_call(kDot, 2, dot_general_rule, in, attrs, result_types);
  const DotDims d = dot_dims({in[0].shape(), in[0].dtype()}, {in[1].shape(), in[1].dtype()}, attrs);
  Array out = make_result(result_types[0]);
  dispatch_dtype(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) dot_general_kernel<T>(in[0], in[1], d, out);
  });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// convolution

const char* const kConv = "convolution";

using ops::ConvConfig;

/// Checks one operand's dimension numbers: `spatial` has rank-2 entries and the `rank` dims
/// named by `singles` and `spatial` are distinct and in range.
void check_dimension_numbers(const char* which, int64_t rank,
                             const std::vector<std::pair<std::string, int64_t>>& singles,
                             const std::string& spatial_name, const std::vector<int64_t>& spatial) {
  check_length(kConv, spatial_name, spatial, rank - 2, fmt::format("{} of rank {}", which, rank));
  std::vector<std::pair<std::string, int64_t>> all = singles;
  for (int64_t s : spatial) all.emplace_back(spatial_name, s);
  std::vector<std::string> owner(static_cast<size_t>(rank));
  for (const auto& [name, d] : all) {
    if (d < 0 || d >= rank) {
      throw Error(
          ErrorCode::kOutOfRange,
          fmt::format("{}: {} contains dimension {}, out of range for the {} of rank {}", kConv, name, d, which, rank),
          fmt::format("dimension numbers must be in [0, {})", rank));
    }
    std::string& o = owner[static_cast<size_t>(d)];
    if (!o.empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} dimension {} is named by both {} and {}", kConv, which, d, o, name),
                  fmt::format("each {} dimension must be named exactly once", which));
    }
    o = name;
  }
}

/// Checks that lhs and rhs have equal ranks of at least 2 (batch and feature).
void check_conv_ranks(const TensorType& lhs, const TensorType& rhs) {
  if (lhs.rank() != rhs.rank()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: lhs {} and rhs {} have different ranks ({} vs {})", kConv, lhs.to_string(),
                            rhs.to_string(), lhs.rank(), rhs.rank()),
                "lhs and kernel have one batch/feature dimension pair and the same spatial rank");
  }
  if (lhs.rank() < 2) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: lhs {} has rank {}, but needs rank >= 2 (batch and feature)", kConv, lhs.to_string(),
                            lhs.rank()));
  }
}

/// Reads window_strides, padding and the dilations (defaults: 1s and zeros) for `s` spatial
/// dimensions, and the group counts (default 1).
void read_window_attrs(const Attributes& attrs, int64_t s, ConvConfig& c) {
  const std::vector<int64_t> ones(static_cast<size_t>(s), 1);
  const std::vector<int64_t> zeros(static_cast<size_t>(2 * s), 0);
  c.strides = ints_attr(kConv, attrs, "window_strides", &ones);
  c.padding = ints_attr(kConv, attrs, "padding", &zeros);
  c.lhs_dilation = ints_attr(kConv, attrs, "lhs_dilation", &ones);
  c.rhs_dilation = ints_attr(kConv, attrs, "rhs_dilation", &ones);
  const std::string spatial_why = fmt::format("{} spatial dimensions", s);
  check_length(kConv, "window_strides", c.strides, s, spatial_why);
  check_length(kConv, "padding", c.padding, 2 * s, fmt::format("[lo, hi] for each of {} spatial dimensions", s));
  check_length(kConv, "lhs_dilation", c.lhs_dilation, s, spatial_why);
  check_length(kConv, "rhs_dilation", c.rhs_dilation, s, spatial_why);
  check_at_least(kConv, "window_strides", c.strides, 1);
  check_at_least(kConv, "lhs_dilation", c.lhs_dilation, 1);
  check_at_least(kConv, "rhs_dilation", c.rhs_dilation, 1);
  c.feature_groups = attrs.has("feature_group_count") ? required_int(kConv, attrs, "feature_group_count") : 1;
  c.batch_groups = attrs.has("batch_group_count") ? required_int(kConv, attrs, "batch_group_count") : 1;
  check_at_least(kConv, "feature_group_count", {c.feature_groups}, 1);
  check_at_least(kConv, "batch_group_count", {c.batch_groups}, 1);
  if (c.feature_groups > 1 && c.batch_groups > 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: feature_group_count = {} and batch_group_count = {} are both > 1", kConv,
                            c.feature_groups, c.batch_groups),
                "at most one of the group counts may exceed 1");
  }
}

/// Reads and checks the nine (required) dimension-number attributes for operands of rank `n`.
void read_dimension_numbers(const Attributes& attrs, int64_t n, ConvConfig& c) {
  c.in_batch = required_int(kConv, attrs, "input_batch_dimension");
  c.in_feature = required_int(kConv, attrs, "input_feature_dimension");
  c.in_spatial = ints_attr(kConv, attrs, "input_spatial_dimensions", nullptr);
  c.k_in_feature = required_int(kConv, attrs, "kernel_input_feature_dimension");
  c.k_out_feature = required_int(kConv, attrs, "kernel_output_feature_dimension");
  c.k_spatial = ints_attr(kConv, attrs, "kernel_spatial_dimensions", nullptr);
  c.out_batch = required_int(kConv, attrs, "output_batch_dimension");
  c.out_feature = required_int(kConv, attrs, "output_feature_dimension");
  c.out_spatial = ints_attr(kConv, attrs, "output_spatial_dimensions", nullptr);
  check_dimension_numbers("lhs", n, {{"input_batch_dimension", c.in_batch}, {"input_feature_dimension", c.in_feature}},
                          "input_spatial_dimensions", c.in_spatial);
  check_dimension_numbers(
      "rhs", n,
      {{"kernel_input_feature_dimension", c.k_in_feature}, {"kernel_output_feature_dimension", c.k_out_feature}},
      "kernel_spatial_dimensions", c.k_spatial);
  check_dimension_numbers("result", n,
                          {{"output_batch_dimension", c.out_batch}, {"output_feature_dimension", c.out_feature}},
                          "output_spatial_dimensions", c.out_spatial);
}

ConvConfig read_conv_config(const TensorType& lhs, const TensorType& rhs, const Attributes& attrs) {
  check_known_attrs(
      kConv, attrs,
      {"window_strides", "padding", "lhs_dilation", "rhs_dilation", "feature_group_count", "batch_group_count",
       "input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions", "kernel_input_feature_dimension",
       "kernel_output_feature_dimension", "kernel_spatial_dimensions", "output_batch_dimension",
       "output_feature_dimension", "output_spatial_dimensions"});
  check_conv_ranks(lhs, rhs);
  ConvConfig c;
  read_window_attrs(attrs, lhs.rank() - 2, c);
  read_dimension_numbers(attrs, lhs.rank(), c);
  return c;
}

int64_t dim(const TensorType& t, int64_t d) { return t.shape[static_cast<size_t>(d)]; }

/// Feature/batch group consistency (StableHLO C11, C12, C15-C17).
void check_conv_groups(const ConvConfig& c, const TensorType& lhs, const TensorType& rhs) {
  const int64_t batch = dim(lhs, c.in_batch);
  const int64_t features = dim(lhs, c.in_feature);
  const int64_t k_in = dim(rhs, c.k_in_feature);
  const int64_t k_out = dim(rhs, c.k_out_feature);
  if (batch % c.batch_groups != 0) {
    throw Error(ErrorCode::kShapeMismatch, fmt::format("{}: lhs batch size {} (input_batch_dimension {} of {}) is not "
                                                       "divisible by batch_group_count = {}",
                                                       kConv, batch, c.in_batch, lhs.to_string(), c.batch_groups));
  }
  if (k_in * c.feature_groups != features) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: lhs has {} input features (input_feature_dimension {} of {}), "
                            "but kernel_input_feature_dimension {} of rhs {} has size {} and "
                            "feature_group_count = {} (expected {} * {} = {} features)",
                            kConv, features, c.in_feature, lhs.to_string(), c.k_in_feature, rhs.to_string(), k_in,
                            c.feature_groups, k_in, c.feature_groups, k_in * c.feature_groups),
                "the lhs feature count must equal kernel input features * feature_group_count");
  }
  for (const auto& [name, groups] : {std::pair<const char*, int64_t>{"feature_group_count", c.feature_groups},
                                     {"batch_group_count", c.batch_groups}}) {
    if (k_out % groups != 0) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}: kernel output features {} (kernel_output_feature_dimension {} "
                              "of {}) are not divisible by {} = {}",
                              kConv, k_out, c.k_out_feature, rhs.to_string(), name, groups),
                  "each group needs the same number of output features");
    }
  }
}

/// Output size of spatial dimension `i` (StableHLO C26); throws if the padded input is negative.
int64_t conv_window_count(const ConvConfig& c, const TensorType& lhs, const TensorType& rhs, size_t i) {
  const int64_t in = dim(lhs, c.in_spatial[i]);
  const int64_t k = dim(rhs, c.k_spatial[i]);
  const int64_t lo = c.padding[2 * i];
  const int64_t hi = c.padding[2 * i + 1];
  const int64_t dilated_in = in == 0 ? 0 : ops::checked_mul_add(kConv, in - 1, c.lhs_dilation[i], 1);
  const int64_t padded = ops::checked_mul_add(kConv, 1, ops::checked_mul_add(kConv, 1, lo, dilated_in), hi);
  if (padded < 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: spatial dimension {} (lhs dim {}, size {}) with lhs_dilation {} "
                            "and padding [{}, {}] has negative size {}",
                            kConv, i, c.in_spatial[i], in, c.lhs_dilation[i], lo, hi, padded),
                "reduce the negative padding");
  }
  const int64_t window = k == 0 ? 0 : ops::checked_mul_add(kConv, k - 1, c.rhs_dilation[i], 1);
  if (padded == 0 || window > padded) return 0;
  return (padded - window) / c.strides[i] + 1;
}

TensorType conv_result(const ConvConfig& c, const TensorType& lhs, const TensorType& rhs) {
  check_conv_groups(c, lhs, rhs);
  TensorType out{Shape(static_cast<size_t>(lhs.rank()), 0), lhs.dtype};
  out.shape[static_cast<size_t>(c.out_batch)] = dim(lhs, c.in_batch) / c.batch_groups;
  out.shape[static_cast<size_t>(c.out_feature)] = dim(rhs, c.k_out_feature);
  for (size_t i = 0; i < c.out_spatial.size(); ++i) {
    out.shape[static_cast<size_t>(c.out_spatial[i])] = conv_window_count(c, lhs, rhs, i);
  }
  return out;
}

std::vector<TensorType> convolution_rule(std::span<const TensorType> in, const Attributes& attrs) {
  check_numeric_pair(kConv, in[0], in[1]);
  const ConvConfig c = read_conv_config(in[0], in[1], attrs);
  return {conv_result(c, in[0], in[1])};
}

/// Index arithmetic of one convolution, precomputed from the config and the shapes.
struct ConvGeometry {
  std::vector<int64_t> ls, rs;    // row-major strides of lhs and rhs
  std::vector<int64_t> in_sizes;  // lhs spatial sizes
  Shape window;                   // kernel spatial sizes + [kernel input features]
  int64_t out_per_group = 1;      // output features per group
  int64_t in_per_group = 0;       // lhs input features per feature group
  int64_t batch_per_group = 0;    // lhs batch entries per batch group
};

ConvGeometry conv_geometry(const ConvConfig& c, const Array& lhs, const Array& rhs) {
  ConvGeometry g;
  g.ls = row_major_strides(lhs.shape());
  g.rs = row_major_strides(rhs.shape());
  for (int64_t d : c.in_spatial) g.in_sizes.push_back(lhs.shape()[static_cast<size_t>(d)]);
  for (int64_t d : c.k_spatial) g.window.push_back(rhs.shape()[static_cast<size_t>(d)]);
  g.window.push_back(rhs.shape()[static_cast<size_t>(c.k_in_feature)]);
  const int64_t k_out = rhs.shape()[static_cast<size_t>(c.k_out_feature)];
  g.out_per_group = std::max<int64_t>(1, k_out / (c.feature_groups * c.batch_groups));
  g.in_per_group = lhs.shape()[static_cast<size_t>(c.in_feature)] / c.feature_groups;
  g.batch_per_group = lhs.shape()[static_cast<size_t>(c.in_batch)] / c.batch_groups;
  return g;
}

/// Sums lhs * rhs over one output element's window. `o` is the output multi-index.
template <class T>
acc_t<T> conv_point(const ConvConfig& c, const ConvGeometry& g, const T* a, const T* b, const std::vector<int64_t>& o) {
  const int64_t f = o[static_cast<size_t>(c.out_feature)];
  const int64_t group = f / g.out_per_group;
  const int64_t batch = o[static_cast<size_t>(c.out_batch)] + (c.batch_groups > 1 ? group * g.batch_per_group : 0);
  const int64_t feature_base = c.feature_groups > 1 ? group * g.in_per_group : 0;
  const int64_t lhs_base = batch * g.ls[static_cast<size_t>(c.in_batch)];
  const int64_t rhs_base = f * g.rs[static_cast<size_t>(c.k_out_feature)];
  const size_t ns = c.in_spatial.size();
  acc_t<T> acc{};
  for_each_index(g.window, [&](const std::vector<int64_t>& w, int64_t) {
    int64_t lhs_off = lhs_base + (feature_base + w[ns]) * g.ls[static_cast<size_t>(c.in_feature)];
    int64_t rhs_off = rhs_base + w[ns] * g.rs[static_cast<size_t>(c.k_in_feature)];
    for (size_t i = 0; i < ns; ++i) {
      // Position in the padded, lhs-dilated input; holes and padding contribute zero.
      const int64_t p =
          o[static_cast<size_t>(c.out_spatial[i])] * c.strides[i] + w[i] * c.rhs_dilation[i] - c.padding[2 * i];
      if (p < 0 || p % c.lhs_dilation[i] != 0) return;
      const int64_t x = p / c.lhs_dilation[i];
      if (x >= g.in_sizes[i]) return;
      lhs_off += x * g.ls[static_cast<size_t>(c.in_spatial[i])];
      rhs_off += w[i] * g.rs[static_cast<size_t>(c.k_spatial[i])];
    }
    acc += to_acc(a[lhs_off]) * to_acc(b[rhs_off]);
  });
  return acc;
}

template <class T>
void convolution_kernel(const Array& lhs, const Array& rhs, const ConvConfig& c, Array& out) {
  const ConvGeometry g = conv_geometry(c, lhs, rhs);
  const T* a = lhs.data<T>();
  const T* b = rhs.data<T>();
  T* o = out.data<T>();
  for_each_index(out.shape(), [&](const std::vector<int64_t>& idx, int64_t flat) {
    o[flat] = from_acc<T>(conv_point<T>(c, g, a, b, idx));
  });
}

std::vector<Array> convolution_interpret(std::span<const Array> in, const Attributes& attrs,
                                         std::span<const TensorType> result_types) {
  check_kernel_call(kConv, 2, convolution_rule, in, attrs, result_types);
  const ConvConfig c = read_conv_config({in[0].shape(), in[0].dtype()}, {in[1].shape(), in[1].dtype()}, attrs);
  Array out = make_result(result_types[0]);
  dispatch_dtype(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) convolution_kernel<T>(in[0], in[1], c, out);
  });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// VJP rules (reverse mode; conventions in docs/autodiff.md). Both ops are bilinear, so each
// operand's cotangent is the same kind of op applied to the output cotangent `g` and the other
// operand (JAX's _dot_general_transpose_lhs/_rhs and _conv_general_dilated_transpose_lhs/_rhs).

using Cts = std::vector<std::optional<Tensor>>;

/// Inverse of the permutation `p` (p lists each of 0..n-1 once): result[p[i]] = i.
std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return inv;
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

/// `x` transposed so that its dim i becomes dim `order[i]`: the result of a dot_general whose
/// dims correspond to the operand dims `order` put back in the operand's order.
Tensor to_operand_order(const Tensor& x, const std::vector<int64_t>& order) {
  return is_identity(order) ? x : transpose(x, inverse_permutation(order));
}

/// `a` followed by `b` (and `c`).
std::vector<int64_t> cat(std::vector<int64_t> a, const std::vector<int64_t>& b, const std::vector<int64_t>& c = {}) {
  a.insert(a.end(), b.begin(), b.end());
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

/// [first, first + n).
std::vector<int64_t> range(int64_t first, size_t n) {
  std::vector<int64_t> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = first + static_cast<int64_t>(i);
  return r;
}

/// `x_contract` reordered as the paired `y_contract` would be when sorted: the x dims that the
/// free dims of a dot_general over y's contracting dims (which come out in increasing order)
/// stand for.
std::vector<int64_t> sorted_by(const std::vector<int64_t>& x_contract, const std::vector<int64_t>& y_contract) {
  std::vector<size_t> order(y_contract.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return y_contract[a] < y_contract[b]; });
  std::vector<int64_t> out;
  for (size_t i : order) out.push_back(x_contract[i]);
  return out;
}

/// One side of a dot_general seen from the operand being differentiated ("x"; "y" is the other).
struct DotSide {
  std::vector<int64_t> x_batch, x_contract, x_free, y_batch, y_contract, y_free;
  int64_t g_y_free_first = 0;  ///< first dim of g that came from y's free dims
};

/// Cotangent of x = g contracted with y over y's free dims, batched over the batch dims (JAX's
/// _dot_general_transpose_lhs). Its dims then stand for x's batch dims, x's free dims and x's
/// contracting dims (in the order of the sorted paired y dims); of the two operand orders,
/// dot_general(g, y) (JAX's) and dot_general(y, g), the one that already yields x's order is
/// used, so plain and batched matmuls need no transpose.
Tensor dot_operand_cotangent(const Tensor& g, const Tensor& y, const DotSide& s) {
  const std::vector<int64_t> g_batch = range(0, s.x_batch.size());
  const std::vector<int64_t> g_y_free = range(s.g_y_free_first, s.y_free.size());
  const std::vector<int64_t> x_contract = sorted_by(s.x_contract, s.y_contract);
  const std::vector<int64_t> g_first = cat(s.x_batch, s.x_free, x_contract);
  const std::vector<int64_t> y_first = cat(s.x_batch, x_contract, s.x_free);
  if (is_identity(y_first) && !is_identity(g_first)) {
    return dot_general(y, g, {s.y_batch, g_batch, s.y_free, g_y_free});
  }
  return to_operand_order(dot_general(g, y, {g_batch, s.y_batch, g_y_free, s.y_free}), g_first);
}

/// The DotSide of the lhs (`lhs` true) or of the rhs of a dot_general with dims `d`.
DotSide dot_side(const DotDims& d, bool lhs) {
  const int64_t nb = static_cast<int64_t>(d.lhs_batch.size());
  if (lhs) {
    return {.x_batch = d.lhs_batch,
            .x_contract = d.lhs_contract,
            .x_free = d.lhs_free,
            .y_batch = d.rhs_batch,
            .y_contract = d.rhs_contract,
            .y_free = d.rhs_free,
            .g_y_free_first = nb + static_cast<int64_t>(d.lhs_free.size())};
  }
  return {.x_batch = d.rhs_batch,
          .x_contract = d.rhs_contract,
          .x_free = d.rhs_free,
          .y_batch = d.lhs_batch,
          .y_contract = d.lhs_contract,
          .y_free = d.lhs_free,
          .g_y_free_first = nb};
}

Cts dot_general_vjp(const VjpArgs& a) {
  const Tensor& lhs = a.operands[0];
  const Tensor& rhs = a.operands[1];
  const Tensor& g = *a.cotangents[0];
  const DotDims d = dot_dims(lhs.type(), rhs.type(), a.attrs);
  return {dot_operand_cotangent(g, rhs, dot_side(d, true)), dot_operand_cotangent(g, lhs, dot_side(d, false))};
}

/// Size of a dimension of `size` after dilation by `d` (holes between elements).
int64_t dilated(int64_t size, int64_t d) { return size == 0 ? 0 : (size - 1) * d + 1; }

/// Splits dim `axis` of `x` into (groups, size / groups) (JAX's _reshape_axis_out_of).
Tensor split_axis(const Tensor& x, int64_t axis, int64_t groups) {
  Shape s = x.shape();
  const auto a = static_cast<size_t>(axis);
  const int64_t size = s[a];
  s[a] = size / groups;
  s.insert(s.begin() + axis, groups);
  return reshape(x, s);
}

/// Merges dim `src` of `x` into dim `dst` (numbered as if `src` were removed) as its major part
/// (JAX's _reshape_axis_into).
Tensor merge_axis_into(const Tensor& x, int64_t src, int64_t dst) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != src) perm.push_back(i);
  }
  perm.insert(perm.begin() + dst, src);
  Shape s = x.shape();
  const int64_t moved = s[static_cast<size_t>(src)];
  s.erase(s.begin() + src);
  s[static_cast<size_t>(dst)] *= moved;
  const Tensor t = is_identity(perm) ? x : transpose(x, perm);
  return reshape(t, s);
}

/// Emits a convolution of lhs and rhs configured by `c`.
Tensor emit_convolution(const Tensor& lhs, const Tensor& rhs, const ConvConfig& c) {
  return emit(kConv, {lhs, rhs},
              {{"window_strides", c.strides},
               {"padding", c.padding},
               {"lhs_dilation", c.lhs_dilation},
               {"rhs_dilation", c.rhs_dilation},
               {"feature_group_count", c.feature_groups},
               {"batch_group_count", c.batch_groups},
               {"input_batch_dimension", c.in_batch},
               {"input_feature_dimension", c.in_feature},
               {"input_spatial_dimensions", c.in_spatial},
               {"kernel_input_feature_dimension", c.k_in_feature},
               {"kernel_output_feature_dimension", c.k_out_feature},
               {"kernel_spatial_dimensions", c.k_spatial},
               {"output_batch_dimension", c.out_batch},
               {"output_feature_dimension", c.out_feature},
               {"output_spatial_dimensions", c.out_spatial}})[0];
}

/// Spatial sizes of a convolution's operands and result: in (lhs), window (rhs), out.
struct ConvSizes {
  std::vector<int64_t> in, window, out;
};

ConvSizes conv_sizes(const ConvConfig& c, const Shape& lhs, const Shape& rhs, const Shape& out) {
  ConvSizes s;
  for (size_t i = 0; i < c.in_spatial.size(); ++i) {
    s.in.push_back(lhs[static_cast<size_t>(c.in_spatial[i])]);
    s.window.push_back(rhs[static_cast<size_t>(c.k_spatial[i])]);
    s.out.push_back(out[static_cast<size_t>(c.out_spatial[i])]);
  }
  return s;
}

/// Kernel spatial dims of `rhs` longer than 1 (reversing the others changes nothing).
std::vector<int64_t> reversible_dims(const ConvConfig& c, const Shape& rhs) {
  std::vector<int64_t> dims;
  for (int64_t d : c.k_spatial) {
    if (rhs[static_cast<size_t>(d)] > 1) dims.push_back(d);
  }
  return dims;
}

/// Padding of the lhs cotangent's convolution (JAX's _conv_general_vjp_lhs_padding): the
/// dilated kernel hangs over each end of g dilated by the strides by exactly the amount that
/// makes every lhs position see the output positions it contributed to.
std::vector<int64_t> lhs_cotangent_padding(const ConvConfig& c, const ConvSizes& s) {
  std::vector<int64_t> padding;
  for (size_t i = 0; i < s.in.size(); ++i) {
    const int64_t window = dilated(s.window[i], c.rhs_dilation[i]);
    const int64_t before = window - c.padding[2 * i] - 1;
    const int64_t after = dilated(s.in[i], c.lhs_dilation[i]) + window - 1 - dilated(s.out[i], c.strides[i]) - before;
    padding.insert(padding.end(), {before, after});
  }
  return padding;
}

/// Padding of the rhs cotangent's convolution (JAX's _conv_general_vjp_rhs_padding): the
/// forward low padding, and a high padding that makes the result exactly the kernel's size.
std::vector<int64_t> rhs_cotangent_padding(const ConvConfig& c, const ConvSizes& s) {
  std::vector<int64_t> padding;
  for (size_t i = 0; i < s.in.size(); ++i) {
    const int64_t lo = c.padding[2 * i];
    const int64_t hi = dilated(s.out[i], c.strides[i]) - dilated(s.in[i], c.lhs_dilation[i]) +
                       dilated(s.window[i], c.rhs_dilation[i]) - lo - 1;
    padding.insert(padding.end(), {lo, hi});
  }
  return padding;
}

/// The lhs cotangent's convolution: g (laid out as the forward output) with the kernel, whose
/// input and output feature roles swap, into the forward lhs layout. The forward strides become
/// lhs dilation and the lhs dilation becomes strides; groups of either kind become feature
/// groups.
ConvConfig lhs_cotangent_config(const ConvConfig& c, const ConvSizes& s) {
  ConvConfig t;
  t.strides = c.lhs_dilation;
  t.padding = lhs_cotangent_padding(c, s);
  t.lhs_dilation = c.strides;
  t.rhs_dilation = c.rhs_dilation;
  t.feature_groups = std::max(c.feature_groups, c.batch_groups);
  t.batch_groups = 1;
  t.in_batch = c.out_batch;
  t.in_feature = c.out_feature;
  t.in_spatial = c.out_spatial;
  t.k_in_feature = c.k_out_feature;
  t.k_out_feature = c.k_in_feature;
  t.k_spatial = c.k_spatial;
  t.out_batch = c.in_batch;
  t.out_feature = c.in_feature;
  t.out_spatial = c.in_spatial;
  return t;
}

/// The rhs cotangent's convolution: the lhs with batch and feature roles swapped, with g as the
/// kernel (its batch dim contracted, its features the output features), into the kernel's
/// layout. The forward strides become rhs dilation and the rhs dilation becomes strides;
/// feature groups become batch groups and vice versa.
ConvConfig rhs_cotangent_config(const ConvConfig& c, const ConvSizes& s) {
  ConvConfig t;
  t.strides = c.rhs_dilation;
  t.padding = rhs_cotangent_padding(c, s);
  t.lhs_dilation = c.lhs_dilation;
  t.rhs_dilation = c.strides;
  t.feature_groups = c.batch_groups;
  t.batch_groups = c.feature_groups;
  t.in_batch = c.in_feature;
  t.in_feature = c.in_batch;
  t.in_spatial = c.in_spatial;
  t.k_in_feature = c.out_batch;
  t.k_out_feature = c.out_feature;
  t.k_spatial = c.out_spatial;
  t.out_batch = c.k_in_feature;
  t.out_feature = c.k_out_feature;
  t.out_spatial = c.k_spatial;
  return t;
}

/// The lhs cotangent (JAX's _conv_general_dilated_transpose_lhs): g convolved with the
/// spatially reversed kernel (this IR's convolution has no window reversal, so `reverse` does
/// it). With groups, the group part of the kernel's output features moves into its input
/// features; with batch groups the result's feature groups then move back into its batch.
Tensor conv_lhs_cotangent(const Tensor& g, Tensor rhs, const ConvConfig& c, const ConvSizes& s) {
  const int64_t groups = std::max(c.feature_groups, c.batch_groups);
  if (groups > 1) {
    rhs = split_axis(rhs, c.k_out_feature, groups);
    rhs = merge_axis_into(rhs, c.k_out_feature, c.k_in_feature);
  }
  const std::vector<int64_t> flip = reversible_dims(c, rhs.shape());
  Tensor out = emit_convolution(g, flip.empty() ? rhs : reverse(rhs, flip), lhs_cotangent_config(c, s));
  if (c.batch_groups > 1) {
    out = merge_axis_into(split_axis(out, c.in_feature, groups), c.in_feature, c.in_batch);
  }
  return out;
}

Cts convolution_vjp(const VjpArgs& a) {
  const Tensor& lhs = a.operands[0];
  const Tensor& rhs = a.operands[1];
  const Tensor& g = *a.cotangents[0];
  // With no elements on either side the output is constant (zeros) or empty: zero cotangents,
  // and no degenerate transposed convolutions (JAX likewise returns zero for an empty g).
  if (lhs.size() == 0 || rhs.size() == 0 || g.size() == 0) return {std::nullopt, std::nullopt};
  const ConvConfig c = read_conv_config(lhs.type(), rhs.type(), a.attrs);
  const ConvSizes s = conv_sizes(c, lhs.shape(), rhs.shape(), g.shape());
  // The rhs cotangent: JAX's _conv_general_dilated_transpose_rhs.
  return {conv_lhs_cotangent(g, rhs, c, s), emit_convolution(lhs, g, rhs_cotangent_config(c, s))};
}

}  // namespace

ConvConfig ops::conv_config(const TensorType& lhs, const TensorType& rhs, const Attributes& attrs) {
  return read_conv_config(lhs, rhs, attrs);
}

void register_linalg_ops(OpRegistry& r) {
  r.add(OpDef{kDot, 2, 2, dot_general_rule, dot_general_interpret,
              "generalized batched tensor contraction (batch dims, lhs free dims, rhs free dims)"});
  r.add(OpDef{kConv, 2, 2, convolution_rule, convolution_interpret,
              "N-d convolution with strides, padding, dilations, feature and batch groups"});
}

}  // namespace ingot::ir

namespace ingot {

/// The VJP rules of the linalg ops (autodiff's table; see include/ingot/autodiff/vjp_rules.h).
void register_linalg_vjps(VjpRules& r) {
  r.add(ir::kDot, ir::dot_general_vjp);
  r.add(ir::kConv, ir::convolution_vjp);
}

}  // namespace ingot
