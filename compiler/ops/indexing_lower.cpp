// MLIR lowering rules of the indexing family (ops in compiler/ops/indexing.cpp; docs/ir.md), bit
// for bit as the interpreter: gather clamps start indices into the operand; scatter applies its
// updates one at a time in row-major order (windows that do not fit skipped, f16/bf16 adds rounded).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using namespace lowering_util;

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

/// An index value of integer dtype `d` as i64, as the interpreter reads indices: sign- or
/// zero-extended, u64 values above INT64_MAX saturating to INT64_MAX.
std::string to_i64(BodyBuilder& b, DType d, const std::string& v) {
  if (d == DType::kI64) return v;
  if (d == DType::kU64) {
    const std::string negative = b.let(fmt::format("arith.cmpi slt, {}, {} : i64", v, i64_const(b, 0)));
    return b.let(
        fmt::format("arith.select {}, {}, {} : i64", negative, i64_const(b, std::numeric_limits<int64_t>::max()), v));
  }
  return b.let(fmt::format("arith.ext{}i {} : {} to i64", is_signed_integer(d) ? "s" : "u", v, el(d)));
}

/// Start index values read from the indices tensor `indices` (type `it`) for the batch position
/// `batch` (index values, one per indices dim other than index_vector_dim): one i64 per component.
std::vector<std::string> read_start(BodyBuilder& b, const std::string& indices, const TensorType& it,
                                    int64_t index_vector_dim, size_t components,
                                    const std::vector<std::string>& batch) {
  std::vector<std::string> values;
  for (size_t k = 0; k < components; ++k) {
    std::vector<std::string> pos;
    size_t bi = 0;
    for (int64_t d = 0; d < it.rank(); ++d) {
      pos.push_back(d == index_vector_dim ? index_const(b, static_cast<int64_t>(k)) : batch[bi++]);
    }
    const std::string v = b.let(fmt::format("tensor.extract {}[{}] : {}", indices, fmt::join(pos, ", "), ty(it)));
    values.push_back(to_i64(b, it.dtype, v));
  }
  return values;
}

// ---------------------------------------------------------------------------------------------
// gather

/// A parallel linalg.generic over the result: each element reads its start indices (clamped to
/// [0, operand size - slice size], as the interpreter) and extracts the operand element.
void lower_gather(LoweringContext& ctx, const Node& node) {
  const TensorType operand = in_type(ctx, node, 0), indices = in_type(ctx, node, 1), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const std::vector<int64_t> offset_dims = node.attrs.get_ints("offset_dims");
  const std::vector<int64_t> collapsed = node.attrs.get_ints("collapsed_slice_dims");
  const std::vector<int64_t> start_map = node.attrs.get_ints("start_index_map");
  const std::vector<int64_t> slice_sizes = node.attrs.get_ints("slice_sizes");
  const int64_t ivd = node.attrs.get_int("index_vector_dim");
  const std::string src = ctx.operand(node, 0), idx = ctx.operand(node, 1);
  const std::string result = ctx.generic(
      out.rank(), std::vector<std::string>(static_cast<size_t>(out.rank()), "parallel"), {}, out,
      LoweringContext::identity(out.rank()), "", [&](BodyBuilder& b, const Args&) {
        std::vector<std::string> batch, offset;
        for (int64_t d = 0; d < out.rank(); ++d) (contains(offset_dims, d) ? offset : batch).push_back(b.index(d));
        const std::vector<std::string> starts = read_start(b, idx, indices, ivd, start_map.size(), batch);
        std::vector<std::string> pos;
        size_t o = 0;
        for (int64_t d = 0; d < operand.rank(); ++d) {
          const auto dd = static_cast<size_t>(d);
          std::string p = contains(collapsed, d) ? index_const(b, 0) : offset[o++];
          const auto k = std::find(start_map.begin(), start_map.end(), d);
          if (k != start_map.end()) {
            const std::string v = starts[static_cast<size_t>(k - start_map.begin())];
            const std::string lo = b.let(fmt::format("arith.maxsi {}, {} : i64", v, i64_const(b, 0)));
            const std::string s =
                b.let(fmt::format("arith.minsi {}, {} : i64", lo, i64_const(b, operand.shape[dd] - slice_sizes[dd])));
            p = b.let(fmt::format("arith.addi {}, {} : index", p,
                                  b.let(fmt::format("arith.index_cast {} : i64 to index", s))));
          }
          pos.push_back(p);
        }
        const std::string v = b.let(fmt::format("tensor.extract {}[{}] : {}", src, fmt::join(pos, ", "), ty(operand)));
        return is_bool(out.dtype) ? b.let(fmt::format("arith.trunci {} : i8 to i1", v)) : v;
      });
  ctx.bind(node.outputs[0], result);
}

// ---------------------------------------------------------------------------------------------
// scatter

/// Scatter's attributes and the window size per operand dim (1 for inserted dims).
struct Scatter {
  std::vector<int64_t> window_dims, inserted, to_operand;
  int64_t index_vector_dim = 0;
  bool add = true;
  Shape window;
};

Scatter read_scatter(const Attributes& attrs, const TensorType& operand, const TensorType& updates) {
  Scatter s{attrs.get_ints("update_window_dims"),           attrs.get_ints("inserted_window_dims"),
            attrs.get_ints("scatter_dims_to_operand_dims"), attrs.get_int("index_vector_dim"),
            attrs.get_string("computation") == "add",       Shape(operand.shape.size(), 1)};
  for (int64_t d = 0, w = 0; d < operand.rank(); ++d) {
    if (!contains(s.inserted, d)) s.window[d] = updates.shape[static_cast<size_t>(s.window_dims[w++])];
  }
  return s;
}

/// Emits the operand position of update element `u` (its multi-index) and returns it with the
/// i1 "the whole window fits" (start in [0, size - window] along every indexed dim).
std::pair<std::vector<std::string>, std::string> scatter_position(BodyBuilder& b, const Scatter& s,
                                                                  const std::string& indices, const TensorType& it,
                                                                  const TensorType& operand,
                                                                  const std::vector<std::string>& u) {
  std::vector<std::string> batch, win;
  for (size_t d = 0; d < u.size(); ++d)
    (contains(s.window_dims, static_cast<int64_t>(d)) ? win : batch).push_back(u[d]);
  const std::vector<std::string> starts = read_start(b, indices, it, s.index_vector_dim, s.to_operand.size(), batch);
  std::string fits = b.let("arith.constant true");
  std::vector<std::string> pos;
  size_t w = 0;
  for (int64_t d = 0; d < operand.rank(); ++d) {
    const auto dd = static_cast<size_t>(d);
    std::string p = contains(s.inserted, d) ? index_const(b, 0) : win[w++];
    const auto k = std::find(s.to_operand.begin(), s.to_operand.end(), d);
    if (k != s.to_operand.end()) {
      const std::string start = starts[static_cast<size_t>(k - s.to_operand.begin())];
      const std::string lo_ok = b.let(fmt::format("arith.cmpi sge, {}, {} : i64", start, i64_const(b, 0)));
      const std::string hi_ok =
          b.let(fmt::format("arith.cmpi sle, {}, {} : i64", start, i64_const(b, operand.shape[dd] - s.window[dd])));
      fits = b.let(
          fmt::format("arith.andi {}, {} : i1", fits, b.let(fmt::format("arith.andi {}, {} : i1", lo_ok, hi_ok))));
      // Only used (inside the scf.if) when the window fits.
      p = b.let(
          fmt::format("arith.addi {}, {} : index", p, b.let(fmt::format("arith.index_cast {} : i64 to index", start))));
    }
    pos.push_back(p);
  }
  return {pos, fits};
}

/// `cur + v` with the interpreter's scatter add: integers wrap, f16/bf16 add in f32 and round.
std::string scatter_add(BodyBuilder& b, DType d, const std::string& cur, const std::string& v) {
  if (d == DType::kF16 || d == DType::kBF16) {
    const std::string x = b.let(fmt::format("arith.extf {} : {} to f32", cur, el(d)));
    const std::string y = b.let(fmt::format("arith.extf {} : {} to f32", v, el(d)));
    return b.let(
        fmt::format("arith.truncf {} : f32 to {}", b.let(fmt::format("arith.addf {}, {} : f32", x, y)), el(d)));
  }
  return b.let(fmt::format("arith.{} {}, {} : {}", is_floating(d) ? "addf" : "addi", cur, v, el(d)));
}

/// Whether memref.atomic_rmw adds `d` (addf / addi) on every target.
bool has_atomic_add(DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kI32 || d == DType::kI64; }

/// LoweringOptions::atomic_scatter: the operand copied into a fresh buffer (linalg.copy), one
/// scf.parallel over the update elements, each adding its element with memref.atomic_rmw where
/// its window fits, and the buffer as the result (bufferization.to_tensor restrict writable, as
/// library GEMM results are).
void lower_scatter_atomic(LoweringContext& ctx, const Node& node, const Scatter& s) {
  const TensorType operand = in_type(ctx, node, 0), indices = in_type(ctx, node, 1), updates = in_type(ctx, node, 2);
  const std::string mt = fmt::format(
      "memref<{}{}>", operand.rank() > 0 ? fmt::format("{}x", fmt::join(operand.shape, "x")) : "", el(operand.dtype));
  const std::string src = ctx.library_read(ctx.operand(node, 0), ty(operand), mt);
  const std::string buf = ctx.let(fmt::format("memref.alloc() {{alignment = 64 : i64}} : {}", mt), "m");
  ctx.emit(fmt::format("linalg.copy ins({} : {}) outs({} : {})", src, mt, buf, mt));
  LocalCode code(ctx);
  BodyBuilder& b = code.b();
  const std::string u = b.fresh();
  b.emit(fmt::format("scf.parallel ({}) = ({}) to ({}) step ({}) {{", u, index_const(b, 0),
                     index_const(b, num_elements(updates.shape)), index_const(b, 1)));
  const std::vector<std::string> ui = unravel(b, u, updates.shape);
  const auto [pos, fits] = scatter_position(b, s, ctx.operand(node, 1), indices, operand, ui);
  b.emit(fmt::format("scf.if {} {{", fits));
  const std::string v =
      b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 2), fmt::join(ui, ", "), ty(updates)));
  b.let(fmt::format("memref.atomic_rmw {} {}, {}[{}] : ({}, {}) -> {}", is_floating(operand.dtype) ? "addf" : "addi", v,
                    buf, fmt::join(pos, ", "), el(operand.dtype), mt, el(operand.dtype)));
  b.emit("}");
  b.emit("scf.reduce");
  b.emit("}");
  code.flush();
  ctx.bind(node.outputs[0],
           ctx.let(fmt::format("bufferization.to_tensor {} restrict writable : {} to {}", buf, mt, ty(operand)), "t"));
}

/// A copy of the operand (never the caller's buffer), then one scf.for over the update elements
/// in row-major order: each computes its window's start, skips it unless the whole window lies
/// inside the operand, and adds (or assigns) the element with tensor.extract/tensor.insert.
void lower_scatter(LoweringContext& ctx, const Node& node) {
  const TensorType operand = in_type(ctx, node, 0), indices = in_type(ctx, node, 1), updates = in_type(ctx, node, 2);
  const Scatter s = read_scatter(node.attrs, operand, updates);
  bool any_fits = num_elements(updates.shape) > 0;
  for (int64_t d = 0; d < operand.rank(); ++d) {
    // Dims without a start index start at 0: they fit iff the window does.
    if (!contains(s.to_operand, d) && operand.shape[d] < s.window[d]) any_fits = false;
  }
  if (!any_fits) return ctx.bind(node.outputs[0], ctx.operand(node, 0));
  if (ctx.options().atomic_scatter && s.add && has_atomic_add(operand.dtype)) return lower_scatter_atomic(ctx, node, s);
  const std::string t = ty(operand);
  const std::string copy =
      ctx.let(fmt::format("bufferization.alloc_tensor() copy({}) : {}", ctx.operand(node, 0), t), "cp");
  LocalCode code(ctx);
  BodyBuilder& b = code.b();
  const std::string result = b.fresh(), u = b.fresh(), acc = b.fresh();
  b.emit(fmt::format("{} = scf.for {} = {} to {} step {} iter_args({} = {}) -> ({}) {{", result, u, index_const(b, 0),
                     index_const(b, num_elements(updates.shape)), index_const(b, 1), acc, copy, t));
  const std::vector<std::string> ui = unravel(b, u, updates.shape);
  const auto [pos, fits] = scatter_position(b, s, ctx.operand(node, 1), indices, operand, ui);
  const std::string next = b.fresh();
  b.emit(fmt::format("{} = scf.if {} -> ({}) {{", next, fits, t));
  std::string v =
      b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 2), fmt::join(ui, ", "), ty(updates)));
  if (s.add)
    v = scatter_add(b, operand.dtype, b.let(fmt::format("tensor.extract {}[{}] : {}", acc, fmt::join(pos, ", "), t)),
                    v);
  b.emit(fmt::format("scf.yield {} : {}",
                     b.let(fmt::format("tensor.insert {} into {}[{}] : {}", v, acc, fmt::join(pos, ", "), t)), t));
  b.emit("} else {");
  b.emit(fmt::format("scf.yield {} : {}", acc, t));
  b.emit("}");
  b.emit(fmt::format("scf.yield {} : {}", next, t));
  b.emit("}");
  code.flush();
  ctx.bind(node.outputs[0], code.name(result));
}

}  // namespace

void register_indexing_lowerings(OpRegistry& r) {
  r.set_lowering("gather", lower_gather);
  r.set_lowering("scatter", lower_scatter);
}

}  // namespace ingot::ir
