// The indexing op family: gather and scatter (StableHLO semantics without batching dimensions,
// see docs/ir.md).
//
// gather clamps each start index so that the whole slice lies inside the operand (as XLA does).
// A collapsed slice dimension must have slice size exactly 1 (StableHLO allows 0 as well, but a
// collapsed empty slice would have to read elements that do not exist).
// scatter applies the updates in row-major order of the update index space (so with "assign" the
// last duplicate wins) and skips every update window that does not lie entirely inside the
// operand. Each "add" is one computation whose result is stored: integers wrap, f16/bf16 add in
// float and round to the storage type after every update, as XLA's scatter region does.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
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

using ops::check_kernel_call;
using ops::check_known_attrs;

using ops::check_dims;
using ops::for_each_index;
using ops::make_result;
using ops::require_dtype;

// ---------------------------------------------------------------------------------------------
// Attribute helpers (names the op in every message; the Graph adds the node text).

/// Re-throws an attribute getter's error with `op` in front of its message.
template <class F>
auto with_op(const std::string& op, F&& get) {
  try {
    return get();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", op, e.message()), e.hint());
  }
}

/// An integer list attribute; absent means empty (as in StableHLO's #stablehlo.gather<...>).
std::vector<int64_t> list_attr(const std::string& op, const Attributes& attrs, const std::string& name) {
  return with_op(op, [&] { return attrs.get_ints_or(name, {}); });
}

/// A required attribute, read with `get`.
template <class F>
auto required_attr(const std::string& op, const Attributes& attrs, const std::string& name, const char* kind, F&& get) {
  if (!attrs.has(name)) {
    throw Error(ErrorCode::kNotFound, fmt::format("{}: missing attribute '{}' ({})", op, name, kind),
                fmt::format("set '{}' as described in docs/ir.md", name));
  }
  return with_op(op, get);
}

/// Checks that an optional hint attribute (indices_are_sorted, unique_indices) is a bool.
void check_optional_bool(const std::string& op, const Attributes& attrs, const std::string& name) {
  if (attrs.has(name)) with_op(op, [&] { return attrs.get_bool(name); });
}

std::string list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

/// check_dims plus "sorted ascending" (StableHLO requires it of offset/window/collapsed dims).
void check_sorted_dims(const std::string& op, const char* name, const std::vector<int64_t>& dims, int64_t rank) {
  check_dims(op, name, dims, rank);
  if (!std::is_sorted(dims.begin(), dims.end())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} = {} is not sorted in ascending order", op, name, list(dims)),
                "list the dimensions in increasing order");
  }
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// ---------------------------------------------------------------------------------------------
// Index vectors shared by gather and scatter.

/// How start indices are read: the indices operand's shape and where its index vector lies.
struct IndexLayout {
  Shape indices_shape;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> operand_dims;  ///< start_index_map / scatter_dims_to_operand_dims
  /// Sizes of the indices' batch dims (indices_shape without index_vector_dim).
  Shape batch_shape() const {
    Shape s;
    for (size_t d = 0; d < indices_shape.size(); ++d) {
      if (static_cast<int64_t>(d) != index_vector_dim) s.push_back(indices_shape[d]);
    }
    return s;
  }
};

/// Validates index_vector_dim, the integer dtype of the indices and the map to operand dims
/// (`map_name`) against an operand of rank `operand_rank`.
IndexLayout index_layout(const std::string& op, const TensorType& indices, const char* indices_name,
                         const Attributes& attrs, const char* map_name, int64_t operand_rank) {
  require_dtype(op, indices_name, indices, is_integer(indices.dtype), "an integer dtype");
  IndexLayout l;
  l.indices_shape = indices.shape;
  l.index_vector_dim =
      required_attr(op, attrs, "index_vector_dim", "int", [&] { return attrs.get_int("index_vector_dim"); });
  if (l.index_vector_dim < 0 || l.index_vector_dim > indices.rank()) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("{}: index_vector_dim = {} is out of range for {} {} (must be in "
                            "[0, {}])",
                            op, l.index_vector_dim, indices_name, indices.to_string(), indices.rank()),
                "index_vector_dim equal to the rank means an implicit trailing index vector of 1");
  }
  l.operand_dims = list_attr(op, attrs, map_name);
  const int64_t vector_size =
      l.index_vector_dim < indices.rank() ? indices.shape[static_cast<size_t>(l.index_vector_dim)] : 1;
  if (static_cast<int64_t>(l.operand_dims.size()) != vector_size) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: {} = {} has {} entries, but the index vectors of {} {} "
                            "(index_vector_dim = {}) have {} components",
                            op, map_name, list(l.operand_dims), l.operand_dims.size(), indices_name,
                            indices.to_string(), l.index_vector_dim, vector_size),
                fmt::format("give one operand dimension per index component in {}", map_name));
  }
  check_dims(op, map_name, l.operand_dims, operand_rank);
  return l;
}

/// All index values as int64 (u64 values above INT64_MAX saturate; they are out of range
/// anyway, so gather clamps them and scatter skips them exactly as it would the true value).
std::vector<int64_t> read_indices(const Array& a) {
  std::vector<int64_t> out(static_cast<size_t>(a.size()));
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = a.data<T>();
      for (size_t i = 0; i < out.size(); ++i) {
        if constexpr (std::is_same_v<T, uint64_t>) {
          out[i] = p[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                       ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(p[i]);
        } else {
          out[i] = static_cast<int64_t>(p[i]);
        }
      }
    }
  });
  return out;
}

/// The start index (one entry per operand dim, 0 for unmapped dims) for the indices' batch
/// index `batch` (the indices' multi-index without index_vector_dim).
std::vector<int64_t> full_start_index(const IndexLayout& l, const std::vector<int64_t>& values,
                                      const std::vector<int64_t>& strides, const std::vector<int64_t>& batch,
                                      int64_t operand_rank) {
  std::vector<int64_t> start(static_cast<size_t>(operand_rank), 0);
  const size_t rank = l.indices_shape.size();
  for (size_t k = 0; k < l.operand_dims.size(); ++k) {
    int64_t off = 0;
    size_t b = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t i = static_cast<int64_t>(d) == l.index_vector_dim ? static_cast<int64_t>(k) : batch[b++];
      off += i * strides[d];
    }
    start[static_cast<size_t>(l.operand_dims[k])] = values[static_cast<size_t>(off)];
  }
  return start;
}

// ---------------------------------------------------------------------------------------------
// gather

const char* const kGather = "gather";

struct GatherConfig {
  IndexLayout layout;
  std::vector<int64_t> offset_dims, collapsed, slice_sizes;
};

/// Reads slice_sizes and collapsed_slice_dims: one size in [0, dim] per operand dim, and
/// collapsed dims sorted, distinct and of slice size 1.
void read_slices(const Attributes& attrs, const TensorType& operand, GatherConfig& c) {
  c.slice_sizes = required_attr(kGather, attrs, "slice_sizes", "ints", [&] { return attrs.get_ints("slice_sizes"); });
  if (static_cast<int64_t>(c.slice_sizes.size()) != operand.rank()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: slice_sizes = {} has {} entries, but operand {} has rank {}", kGather,
                            list(c.slice_sizes), c.slice_sizes.size(), operand.to_string(), operand.rank()),
                "give one slice size per operand dimension");
  }
  for (size_t d = 0; d < c.slice_sizes.size(); ++d) {
    if (c.slice_sizes[d] < 0 || c.slice_sizes[d] > operand.shape[d]) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("{}: slice_sizes = {} has {} for operand dim {}, which has size {} "
                              "(operand {})",
                              kGather, list(c.slice_sizes), c.slice_sizes[d], d, operand.shape[d], operand.to_string()),
                  "each slice size must be in [0, operand dimension size]");
    }
  }
  c.collapsed = list_attr(kGather, attrs, "collapsed_slice_dims");
  check_sorted_dims(kGather, "collapsed_slice_dims", c.collapsed, operand.rank());
  for (int64_t d : c.collapsed) {
    // StableHLO allows <= 1; a collapsed size-0 slice would read elements that do not exist.
    if (c.slice_sizes[static_cast<size_t>(d)] != 1) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: collapsed_slice_dims = {} contains dimension {}, but "
                      "slice_sizes[{}] = {} (slice_sizes = {})",
                      kGather, list(c.collapsed), d, d, c.slice_sizes[static_cast<size_t>(d)], list(c.slice_sizes)),
          "only dimensions with slice size 1 can be collapsed");
    }
  }
}

GatherConfig gather_config(const TensorType& operand, const TensorType& indices, const Attributes& attrs) {
  check_known_attrs(kGather, attrs,
                    {"offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes",
                     "indices_are_sorted"});
  check_optional_bool(kGather, attrs, "indices_are_sorted");
  GatherConfig c;
  c.layout = index_layout(kGather, indices, "start_indices", attrs, "start_index_map", operand.rank());
  read_slices(attrs, operand, c);
  c.offset_dims = list_attr(kGather, attrs, "offset_dims");
  const int64_t offset_count = operand.rank() - static_cast<int64_t>(c.collapsed.size());
  if (static_cast<int64_t>(c.offset_dims.size()) != offset_count) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: offset_dims = {} has {} entries, but operand {} has rank {} "
                            "with {} collapsed_slice_dims = {}, leaving {} offset dimensions",
                            kGather, list(c.offset_dims), c.offset_dims.size(), operand.to_string(), operand.rank(),
                            c.collapsed.size(), list(c.collapsed), offset_count),
                "rank(operand) must equal size(offset_dims) + size(collapsed_slice_dims)");
  }
  const int64_t result_rank = static_cast<int64_t>(c.layout.batch_shape().size()) + offset_count;
  check_sorted_dims(kGather, "offset_dims", c.offset_dims, result_rank);
  return c;
}

TensorType gather_result(const GatherConfig& c, const TensorType& operand) {
  const Shape batch = c.layout.batch_shape();
  Shape offsets;
  for (size_t d = 0; d < c.slice_sizes.size(); ++d) {
    if (!contains(c.collapsed, static_cast<int64_t>(d))) offsets.push_back(c.slice_sizes[d]);
  }
  TensorType out{{}, operand.dtype};
  size_t b = 0, o = 0;
  for (size_t d = 0; d < batch.size() + offsets.size(); ++d) {
    out.shape.push_back(contains(c.offset_dims, static_cast<int64_t>(d)) ? offsets[o++] : batch[b++]);
  }
  return out;
}

std::vector<TensorType> gather_rule(std::span<const TensorType> in, const Attributes& attrs) {
  return {gather_result(gather_config(in[0], in[1], attrs), in[0])};
}

template <class T>
void gather_kernel(const Array& operand, const Array& indices, const GatherConfig& c, Array& out) {
  const std::vector<int64_t> values = read_indices(indices);
  const std::vector<int64_t> index_strides = row_major_strides(indices.shape());
  const std::vector<int64_t> operand_strides = row_major_strides(operand.shape());
  const int64_t rank = operand.rank();
  const T* src = operand.data<T>();
  T* dst = out.data<T>();
  std::vector<int64_t> batch, offset;
  for_each_index(out.shape(), [&](const std::vector<int64_t>& r, int64_t flat) {
    batch.clear();
    offset.clear();
    for (size_t d = 0; d < r.size(); ++d) {
      (contains(c.offset_dims, static_cast<int64_t>(d)) ? offset : batch).push_back(r[d]);
    }
    std::vector<int64_t> start = full_start_index(c.layout, values, index_strides, batch, rank);
    int64_t src_off = 0;
    size_t o = 0;
    for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
      const int64_t hi = operand.shape()[d] - c.slice_sizes[d];
      const int64_t s = std::clamp<int64_t>(start[d], 0, hi);
      const int64_t within = contains(c.collapsed, static_cast<int64_t>(d)) ? 0 : offset[o++];
      src_off += (s + within) * operand_strides[d];
    }
    dst[flat] = src[src_off];
  });
}

std::vector<Array> gather_interpret(std::span<const Array> in, const Attributes& attrs,
                                    std::span<const TensorType> result_types) {
  check_kernel_call(kGather, 2, gather_rule, in, attrs, result_types);
  const GatherConfig c = gather_config({in[0].shape(), in[0].dtype()}, {in[1].shape(), in[1].dtype()}, attrs);
  Array out = make_result(result_types[0]);
  dispatch_dtype(in[0].dtype(), [&](auto tag) { gather_kernel<typename decltype(tag)::type>(in[0], in[1], c, out); });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// scatter

const char* const kScatter = "scatter";

struct ScatterConfig {
  IndexLayout layout;
  std::vector<int64_t> update_window_dims, inserted;
  bool add = true;  ///< computation: "add" (true) or "assign" (false)
};

/// Checks updates' rank, scatter dim sizes and window dim sizes (StableHLO C4, C7, C8).
void check_updates_shape(const ScatterConfig& c, const TensorType& operand, const TensorType& updates) {
  const Shape batch = c.layout.batch_shape();
  const int64_t expected_rank = static_cast<int64_t>(batch.size() + c.update_window_dims.size());
  if (updates.rank() != expected_rank) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: updates {} has rank {}, but expected {} = {} scatter dims "
                            "(scatter_indices {} without index_vector_dim {}) + {} "
                            "update_window_dims = {}",
                            kScatter, updates.to_string(), updates.rank(), expected_rank, batch.size(),
                            shape_to_string(c.layout.indices_shape), c.layout.index_vector_dim,
                            c.update_window_dims.size(), list(c.update_window_dims)));
  }
  check_sorted_dims(kScatter, "update_window_dims", c.update_window_dims, updates.rank());
  size_t b = 0, w = 0;
  for (size_t d = 0; d < updates.shape.size(); ++d) {
    const int64_t size = updates.shape[d];
    if (!contains(c.update_window_dims, static_cast<int64_t>(d))) {
      if (size != batch[b]) {
        throw Error(ErrorCode::kShapeMismatch, fmt::format("{}: updates {} dim {} has size {}, but scatter dim {} of "
                                                           "scatter_indices {} has size {}",
                                                           kScatter, updates.to_string(), d, size, b,
                                                           shape_to_string(c.layout.indices_shape), batch[b]));
      }
      ++b;
      continue;
    }
    while (contains(c.inserted, static_cast<int64_t>(w))) ++w;
    if (size > operand.shape[w]) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}: update window dim {} of updates {} has size {}, larger than "
                              "operand {} dim {} of size {}",
                              kScatter, d, updates.to_string(), size, operand.to_string(), w, operand.shape[w]),
                  "an update window must fit in the operand");
    }
    ++w;
  }
}

/// Reads `computation`: true for "add" (numeric operands only), false for "assign".
bool read_computation(const Attributes& attrs, const TensorType& operand) {
  const std::string computation =
      required_attr(kScatter, attrs, "computation", "string", [&] { return attrs.get_string("computation"); });
  if (computation != "add" && computation != "assign") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: computation = \"{}\" is not supported", kScatter, computation),
                "use \"add\" or \"assign\"");
  }
  if (computation == "add") {
    require_dtype(kScatter, "operand", operand, !is_bool(operand.dtype), "a numeric dtype for computation = \"add\"");
  }
  return computation == "add";
}

ScatterConfig scatter_config(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& operand = in[0];
  const TensorType& updates = in[2];
  check_known_attrs(kScatter, attrs,
                    {"update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "index_vector_dim",
                     "computation", "indices_are_sorted", "unique_indices"});
  check_optional_bool(kScatter, attrs, "indices_are_sorted");
  check_optional_bool(kScatter, attrs, "unique_indices");
  if (updates.dtype != operand.dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: updates {} and operand {} have different dtypes", kScatter, updates.to_string(),
                            operand.to_string()),
                "convert the updates to the operand's dtype");
  }
  ScatterConfig c;
  c.add = read_computation(attrs, operand);
  c.layout = index_layout(kScatter, in[1], "scatter_indices", attrs, "scatter_dims_to_operand_dims", operand.rank());
  c.inserted = list_attr(kScatter, attrs, "inserted_window_dims");
  check_sorted_dims(kScatter, "inserted_window_dims", c.inserted, operand.rank());
  c.update_window_dims = list_attr(kScatter, attrs, "update_window_dims");
  const int64_t window_count = operand.rank() - static_cast<int64_t>(c.inserted.size());
  if (static_cast<int64_t>(c.update_window_dims.size()) != window_count) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: update_window_dims = {} has {} entries, but operand {} has rank "
                            "{} with {} inserted_window_dims = {}, leaving {} window dimensions",
                            kScatter, list(c.update_window_dims), c.update_window_dims.size(), operand.to_string(),
                            operand.rank(), c.inserted.size(), list(c.inserted), window_count),
                "rank(operand) must equal size(update_window_dims) + size(inserted_window_dims)");
  }
  check_updates_shape(c, operand, updates);
  return c;
}

std::vector<TensorType> scatter_rule(std::span<const TensorType> in, const Attributes& attrs) {
  scatter_config(in, attrs);
  return {in[0]};
}

/// Window size per operand dim: 1 for inserted dims, else the matching update window dim.
Shape window_sizes(const ScatterConfig& c, int64_t operand_rank, const Shape& updates_shape) {
  Shape sizes(static_cast<size_t>(operand_rank), 1);
  size_t w = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (contains(c.inserted, static_cast<int64_t>(d))) continue;
    sizes[d] = updates_shape[static_cast<size_t>(c.update_window_dims[w++])];
  }
  return sizes;
}

template <class T>
void scatter_kernel(const Array& indices, const Array& updates, const ScatterConfig& c, Array& out) {
  const std::vector<int64_t> values = read_indices(indices);
  const std::vector<int64_t> index_strides = row_major_strides(indices.shape());
  const std::vector<int64_t> out_strides = row_major_strides(out.shape());
  const Shape& shape = out.shape();
  const int64_t rank = out.rank();
  const Shape window = window_sizes(c, rank, updates.shape());
  const T* upd = updates.data<T>();
  T* dst = out.data<T>();
  std::vector<int64_t> scatter, win;
  for_each_index(updates.shape(), [&](const std::vector<int64_t>& u, int64_t flat) {
    scatter.clear();
    win.clear();
    for (size_t d = 0; d < u.size(); ++d) {
      (contains(c.update_window_dims, static_cast<int64_t>(d)) ? win : scatter).push_back(u[d]);
    }
    const std::vector<int64_t> start = full_start_index(c.layout, values, index_strides, scatter, rank);
    int64_t off = 0;
    size_t w = 0;
    for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
      // Skip the whole window unless all of it lies inside the operand.
      if (start[d] < 0 || start[d] > shape[d] - window[d]) return;
      const int64_t within = contains(c.inserted, static_cast<int64_t>(d)) ? 0 : win[w++];
      off += (start[d] + within) * out_strides[d];
    }
    if constexpr (std::is_same_v<T, bool>) {
      dst[off] = upd[flat];  // bool only allows "assign"
    } else {
      using C = compute_type_t<T>;
      if (!c.add) {
        dst[off] = upd[flat];
      } else if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        dst[off] = static_cast<T>(static_cast<U>(static_cast<U>(dst[off]) + static_cast<U>(upd[flat])));
      } else {
        dst[off] = T(static_cast<C>(dst[off]) + static_cast<C>(upd[flat]));
      }
    }
  });
}

std::vector<Array> scatter_interpret(std::span<const Array> in, const Attributes& attrs,
                                     std::span<const TensorType> result_types) {
  check_kernel_call(kScatter, 3, scatter_rule, in, attrs, result_types);
  const std::vector<TensorType> types = {
      {in[0].shape(), in[0].dtype()}, {in[1].shape(), in[1].dtype()}, {in[2].shape(), in[2].dtype()}};
  const ScatterConfig c = scatter_config(types, attrs);
  Array out = in[0].clone();
  dispatch_dtype(in[0].dtype(), [&](auto tag) { scatter_kernel<typename decltype(tag)::type>(in[1], in[2], c, out); });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// VJP rules (reverse mode; conventions in docs/autodiff.md). Indices are integers and get no
// cotangent. gather and scatter-add are each other's transposes (JAX's _gather_transpose_rule and
// _scatter_add_transpose_rule); the clamping of gather and the skipping of scatter are made
// explicit so that gradients go exactly where the forward pass read or wrote.

using Cts = std::vector<std::optional<Tensor>>;

/// The bool attribute `name`, false when absent.
bool flag(const Attributes& attrs, const std::string& name) { return attrs.has(name) && attrs.get_bool(name); }

/// The largest in-bounds start of each index component: operand size - window size of the
/// operand dim the component maps to.
std::vector<int64_t> start_limits(const IndexLayout& l, const Shape& operand, const Shape& window) {
  std::vector<int64_t> limits;
  for (int64_t d : l.operand_dims) {
    limits.push_back(operand[static_cast<size_t>(d)] - window[static_cast<size_t>(d)]);
  }
  return limits;
}

/// `values` (one per index component) as a tensor of `indices`' type and shape, laid along
/// index_vector_dim. A value above the index dtype's maximum saturates to it (every index is
/// then below the limit anyway).
Tensor per_component(const std::vector<int64_t>& values, const Tensor& indices, const IndexLayout& l) {
  const DType dtype = indices.dtype();
  const double max = dispatch_dtype(dtype, [](auto tag) {
    using T = typename decltype(tag)::type;
    return static_cast<double>(std::numeric_limits<T>::max());
  });
  std::vector<double> v;
  for (int64_t x : values) v.push_back(std::min(static_cast<double>(x), max));
  const Shape shape = indices.shape();
  if (l.index_vector_dim == indices.rank()) return full(shape, v.at(0), dtype);
  const Tensor c = constant(Array::from_doubles(v, {static_cast<int64_t>(v.size())}, dtype));
  return broadcast_in_dim(c, shape, {l.index_vector_dim});
}

/// The start indices as gather uses them: each component clamped to [0, limit].
Tensor clamp_indices(const Tensor& indices, const IndexLayout& l, const std::vector<int64_t>& limits) {
  const Tensor zero = scalar(0, indices.dtype());
  return clamp(indices, zero, per_component(limits, indices, l));
}

/// Bool over the indices' batch dims: true where every component lies in [0, limit], i.e. where
/// scatter applies the update window instead of skipping it.
Tensor in_bounds(const Tensor& indices, const IndexLayout& l, const std::vector<int64_t>& limits) {
  const Tensor zero = scalar(0, indices.dtype());
  const Tensor ok = logical_and(greater_equal(indices, zero), less_equal(indices, per_component(limits, indices, l)));
  return l.index_vector_dim == indices.rank() ? ok : all(ok, {l.index_vector_dim});
}

/// gather's cotangent: g scatter-added into zeros at the clamped start indices, its offset dims
/// as update window dims and its collapsed dims as inserted dims; repeated indices accumulate.
Cts gather_vjp(const VjpArgs& a) {
  const Tensor& operand = a.operands[0];
  const Tensor& indices = a.operands[1];
  const GatherConfig c = gather_config(operand.type(), indices.type(), a.attrs);
  const Shape shape = operand.shape();
  const Tensor start = clamp_indices(indices, c.layout, start_limits(c.layout, shape, c.slice_sizes));
  const Tensor zero = zeros(shape, operand.dtype());
  const Tensor ct = emit(kScatter, {zero, start, *a.cotangents[0]},
                         {{"update_window_dims", c.offset_dims},
                          {"inserted_window_dims", c.collapsed},
                          {"scatter_dims_to_operand_dims", c.layout.operand_dims},
                          {"index_vector_dim", c.layout.index_vector_dim},
                          {"computation", std::string("add")},
                          {"indices_are_sorted", flag(a.attrs, "indices_are_sorted")},
                          {"unique_indices", false}})[0];
  return {ct, std::nullopt};
}

/// The gather that reads back what a scatter with config `c` wrote: one update window per
/// scatter index (clamped where the scatter skipped it; callers mask those).
Attributes mirrored_gather(const ScatterConfig& c, const Attributes& attrs, const Shape& window) {
  return {{"offset_dims", c.update_window_dims},
          {"collapsed_slice_dims", c.inserted},
          {"start_index_map", c.layout.operand_dims},
          {"index_vector_dim", c.layout.index_vector_dim},
          {"slice_sizes", window},
          {"indices_are_sorted", flag(attrs, "indices_are_sorted")}};
}

/// Dims of the updates that are not window dims (the scatter dims, in order).
std::vector<int64_t> scatter_dims(const ScatterConfig& c, int64_t updates_rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < updates_rank; ++d) {
    if (!contains(c.update_window_dims, d)) dims.push_back(d);
  }
  return dims;
}

/// scatter "assign": an operand element keeps its cotangent only where no update overwrote it,
/// and an update element gets the cotangent of its target only if it is the one left there (the
/// last in row-major update order, as the kernel applies them; skipped windows get none). Found
/// as in JAX's scatter JVP: scatter each update element's id, gather the ids back and compare.
Cts scatter_assign_vjp(const VjpArgs& a, const Attributes& gather_attrs) {
  const Tensor& g = *a.cotangents[0];
  const Tensor& indices = a.operands[1];
  const Shape updates_shape = a.operands[2].shape();
  const Tensor ids = reshape(iota({num_elements(updates_shape)}, 0, DType::kI64), updates_shape);
  const Tensor none = full(a.operands[0].shape(), -1, DType::kI64);
  const Tensor written = emit(kScatter, {none, indices, ids}, a.attrs)[0];
  const Tensor kept = equal(written, scalar(-1, DType::kI64));
  const Tensor won = equal(emit(kGather, {written, indices}, gather_attrs)[0], ids);
  const Tensor read = emit(kGather, {g, indices}, gather_attrs)[0];
  return {where(kept, g, zeros_like(g)), std::nullopt, where(won, read, zeros_like(read))};
}

/// scatter: with "add", the operand's cotangent is g and each update element gets g at its
/// target, read back with the mirrored gather, or zero where its window was skipped (out of
/// bounds); "assign" is scatter_assign_vjp.
Cts scatter_vjp(const VjpArgs& a) {
  const Tensor& g = *a.cotangents[0];
  const Tensor& indices = a.operands[1];
  const Tensor& updates = a.operands[2];
  const std::vector<TensorType> types = {a.operands[0].type(), indices.type(), updates.type()};
  const ScatterConfig c = scatter_config(types, a.attrs);
  const Shape shape = g.shape();
  const Shape window = window_sizes(c, g.rank(), updates.shape());
  const Attributes gather_attrs = mirrored_gather(c, a.attrs, window);
  if (!c.add) return scatter_assign_vjp(a, gather_attrs);
  const Tensor ok = broadcast_in_dim(in_bounds(indices, c.layout, start_limits(c.layout, shape, window)),
                                     updates.shape(), scatter_dims(c, updates.rank()));
  const Tensor read = emit(kGather, {g, indices}, gather_attrs)[0];
  return {g, std::nullopt, where(ok, read, zeros_like(read))};
}

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  r.add(OpDef{kGather, 2, 2, gather_rule, gather_interpret, "gathers slices of an operand at (clamped) start indices"});
  r.add(OpDef{kScatter, 3, 3, scatter_rule, scatter_interpret,
              "adds or assigns update windows into an operand; out-of-bounds windows are skipped"});
}

}  // namespace ingot::ir

namespace ingot {

/// The VJP rules of the indexing ops (autodiff's table; see include/ingot/autodiff/vjp_rules.h).
void register_indexing_vjps(VjpRules& r) {
  r.add(ir::kGather, ir::gather_vjp);
  r.add(ir::kScatter, ir::scatter_vjp);
}

}  // namespace ingot
