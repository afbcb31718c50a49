// MLIR lowering rules of the reduction family (ops in compiler/ops/reduction.cpp; semantics in
// docs/ir.md): reduce, argmax, argmin, reduce_window and select_and_scatter. f16/bf16 accumulate
// in f32 and round once at the end, as the interpreter does.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using namespace lowering_util;

// ---------------------------------------------------------------------------------------------
// Scalar helpers

std::string cmp(BodyBuilder& b, DType d, const std::string& pred_float, const std::string& pred_int,
                const std::string& x, const std::string& y) {
  if (is_floating(d)) return b.let(fmt::format("arith.cmpf {}, {}, {} : {}", pred_float, x, y, el(d)));
  const std::string p = (is_signed_integer(d) ? "s" : "u") + pred_int;
  return b.let(fmt::format("arith.cmpi {}, {}, {} : {}", p, x, y, st(d)));
}

/// acc (computation) x with the interpreter's combine(): add/mul, and max/min that keep the
/// accumulator on ties (so max(+0, -0) keeps the first zero) and return the first NaN.
std::string combine(BodyBuilder& b, const std::string& computation, DType d, const std::string& acc,
                    const std::string& x) {
  const std::string t = el(d);
  if (is_bool(d)) {
    const bool any = computation == "add" || computation == "max";
    return b.let(fmt::format("arith.{} {}, {} : i1", any ? "ori" : "andi", acc, x));
  }
  if (computation == "add" || computation == "mul") {
    const char* op =
        is_floating(d) ? (computation == "add" ? "addf" : "mulf") : (computation == "add" ? "addi" : "muli");
    return b.let(fmt::format("arith.{} {}, {} : {}", op, acc, x, t));
  }
  const bool is_max = computation == "max";
  // max: acc < x ? x : acc; min: x < acc ? x : acc.
  const std::string better = is_max ? cmp(b, d, "olt", "lt", acc, x) : cmp(b, d, "olt", "lt", x, acc);
  std::string r = select(b, better, x, acc, t);
  if (is_floating(d)) {
    r = select(b, b.let(fmt::format("arith.cmpf uno, {}, {} : {}", x, x, t)), x, r, t);
    r = select(b, b.let(fmt::format("arith.cmpf uno, {}, {} : {}", acc, acc, t)), acc, r, t);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// reduce

/// `x` (computation) `acc` as reduce combines them: floats with arith.addf/mulf/maximumf/minimumf,
/// bools as or/and (combine() above, for the window ops, spells max/min as compare and select).
std::string reduce_combine(BodyBuilder& b, const std::string& computation, DType d, const std::string& x,
                           const std::string& acc) {
  const std::string t = el(d);
  if (is_floating(d)) {
    const char* op = computation == "add"   ? "arith.addf"
                     : computation == "mul" ? "arith.mulf"
                     : computation == "max" ? "arith.maximumf"
                                            : "arith.minimumf";
    return b.let(fmt::format("{} {}, {} : {}", op, x, acc, t));
  }
  if (is_bool(d)) {
    const bool is_or = computation == "add" || computation == "max" || computation == "or";
    return b.let(fmt::format("arith.{} {}, {} : i1", is_or ? "ori" : "andi", x, acc));
  }
  const bool s = is_signed_integer(d);
  if (computation == "add") return b.let(fmt::format("arith.addi {}, {} : {}", x, acc, t));
  if (computation == "mul") return b.let(fmt::format("arith.muli {}, {} : {}", x, acc, t));
  if (computation == "max") return b.let(fmt::format("arith.max{}i {}, {} : {}", s ? "s" : "u", x, acc, t));
  if (computation == "min") return b.let(fmt::format("arith.min{}i {}, {} : {}", s ? "s" : "u", x, acc, t));
  if (computation == "and") return b.let(fmt::format("arith.andi {}, {} : {}", x, acc, t));
  return b.let(fmt::format("arith.ori {}, {} : {}", x, acc, t));
}

void lower_reduce(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0);
  const TensorType out = out_type(ctx, node);
  const std::vector<int64_t>& dims = node.attrs.get_ints("dimensions");
  const std::string computation = node.attrs.get_string("computation");
  const DType acc_dtype = is_half(out.dtype) ? DType::kF32 : out.dtype;
  const TensorType acc{out.shape, acc_dtype};
  const std::string init = splat(ctx, ctx.operand(node, 1), out.dtype, acc);
  std::vector<std::string> iters, out_map;
  for (int64_t d = 0; d < x.rank(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    iters.push_back(reduced ? "reduction" : "parallel");
    if (!reduced) out_map.push_back(fmt::format("d{}", d));
  }
  std::string r = ctx.generic(x.rank(), iters, {{ctx.operand(node, 0), x, LoweringContext::identity(x.rank())}}, acc,
                              out_map, init, [&](BodyBuilder& b, const Args& a) {
                                std::string v = a[0];
                                if (acc_dtype != x.dtype)
                                  v = b.let(fmt::format("arith.extf {} : {} to f32", v, el(x.dtype)));
                                return reduce_combine(b, computation, acc_dtype, v, a[1]);
                              });
  if (acc_dtype != out.dtype) r = round_to(ctx, r, out);
  ctx.bind(node.outputs[0], r);
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin

/// One linalg.generic with two outputs carrying (best value, best index) along `dimension`,
/// initialised with the slice at index 0. The candidate at index k replaces the best when
/// the best is not NaN and (k is NaN or k is strictly better): the first NaN wins, and ties keep
/// the first index (the interpreter's is_better).
void lower_arg_extreme(LoweringContext& ctx, const Node& node, bool is_max) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const int64_t dim = node.attrs.get_int("dimension");
  // One candidate: index 0 (and no single-trip reduction loop; see with_unit_last_dim).
  if (x.shape[static_cast<size_t>(dim)] == 1) return ctx.bind(node.outputs[0], ctx.fill(out, 0));
  const int64_t r = x.rank();
  const TensorType best_t{out.shape, x.dtype};
  std::vector<int64_t> zeros(static_cast<size_t>(r), 0), sizes = x.shape, ones(static_cast<size_t>(r), 1);
  sizes[static_cast<size_t>(dim)] = 1;
  const std::string best0 =
      ctx.let(fmt::format("tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", ctx.operand(node, 0),
                          fmt::join(zeros, ", "), fmt::join(sizes, ", "), fmt::join(ones, ", "), ty(x), ty(best_t)),
              "s");
  const std::string index0 = ctx.fill(out, 0);
  std::vector<std::string> iters, out_map;
  for (int64_t d = 0; d < r; ++d) {
    iters.push_back(d == dim ? "\"reduction\"" : "\"parallel\"");
    if (d != dim) out_map.push_back(fmt::format("d{}", d));
  }
  LocalCode code(ctx);
  BodyBuilder& b = code.b();
  const std::string v = b.fresh(), best = b.fresh(), best_k = b.fresh();
  const DType d = x.dtype;
  // Bools compare as their 0/1 storage bytes (false < true).
  const DType cd = is_bool(d) ? DType::kU8 : d;
  std::string better = is_max ? cmp(b, cd, "olt", "lt", best, v) : cmp(b, cd, "olt", "lt", v, best);
  if (is_floating(d)) {
    const std::string v_nan = b.let(fmt::format("arith.cmpf uno, {}, {} : {}", v, v, el(d)));
    const std::string best_ok = b.let(fmt::format("arith.cmpf ord, {}, {} : {}", best, best, el(d)));
    better = b.let(
        fmt::format("arith.andi {}, {} : i1", best_ok, b.let(fmt::format("arith.ori {}, {} : i1", v_nan, better))));
  }
  const std::string it = el(out.dtype);
  const std::string k = b.let(fmt::format("arith.index_cast {} : index to {}", b.index(dim), it));
  const std::string nv = select(b, better, v, best, st(d)), nk = select(b, better, k, best_k, it);
  const std::string result = b.fresh();
  code.emit(
      fmt::format("{}:2 = linalg.generic {{indexing_maps = [{}, {}, {}], iterator_types = [{}]}} ins({} : {}) "
                  "outs({}, {} : {}, {}) {{",
                  result, LoweringContext::affine_map(r, LoweringContext::identity(r)),
                  LoweringContext::affine_map(r, out_map), LoweringContext::affine_map(r, out_map),
                  fmt::join(iters, ", "), ctx.operand(node, 0), ty(x), best0, index0, ty(best_t), ty(out)));
  code.emit(fmt::format("^bb0({}: {}, {}: {}, {}: {}):", v, st(d), best, st(d), best_k, it));
  code.flush();
  code.emit(fmt::format("  linalg.yield {}, {} : {}, {}", nv, nk, st(d), it));
  code.emit(fmt::format("}} -> ({}, {})", ty(best_t), ty(out)));
  ctx.bind(node.outputs[0], code.name(result) + "#1");
}

// ---------------------------------------------------------------------------------------------
// reduce_window

struct Window {
  std::vector<int64_t> dims, strides, base_dilations, window_dilations, padding;
};

Window read_window(const Attributes& attrs, int64_t rank) {
  const std::vector<int64_t> ones(static_cast<size_t>(rank), 1);
  return {attrs.get_ints("window_dimensions"), attrs.get_ints_or("window_strides", ones),
          attrs.get_ints_or("base_dilations", ones), attrs.get_ints_or("window_dilations", ones),
          attrs.get_ints_or("padding", std::vector<int64_t>(static_cast<size_t>(2 * rank), 0))};
}

/// The operand padded with init (edge padding and base-dilation holes hold init), then one
/// linalg.generic over (output dims..., window dims...) reading it at
/// `o * stride + w * window_dilation`, combining into an accumulator initialised with init in
/// row-major window order (as the interpreter).
void lower_reduce_window(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const std::string computation = node.attrs.get_string("computation");
  const int64_t r = x.rank();
  const Window w = read_window(node.attrs, r);
  std::vector<int64_t> low, high, interior;
  for (int64_t d = 0; d < r; ++d) {
    low.push_back(w.padding[2 * d]);
    high.push_back(w.padding[2 * d + 1]);
    interior.push_back(w.base_dilations[d] - 1);
  }
  const std::string init = ctx.operand(node, 1);
  const std::string p = padded(ctx, ctx.operand(node, 0), x, low, high, interior,
                               [&](const TensorType& t) { return splat(ctx, init, x.dtype, t); });
  const TensorType pt = padded_type(x, low, high, interior);
  const DType acc_dtype = compute_dtype(x.dtype);
  const TensorType acc{out.shape, acc_dtype};
  // Loops: the output dims, then the window dims of size > 1 (see with_unit_last_dim).
  std::vector<std::string> pmap, wmap, iters = repeat(static_cast<size_t>(r), "parallel");
  Shape active;
  for (int64_t d = 0; d < r; ++d) {
    std::string e = fmt::format("d{} * {}", d, w.strides[d]);
    if (w.dims[d] > 1) {
      const int64_t loop = r + static_cast<int64_t>(active.size());
      e += fmt::format(" + d{} * {}", loop, w.window_dilations[d]);
      wmap.push_back(fmt::format("d{}", loop));
      iters.push_back("reduction");
      active.push_back(w.dims[d]);
    }
    pmap.push_back(e);
  }
  GenericInput pin{p, pt, pmap};
  if (r > 0 && w.strides[r - 1] != 1) pin = with_unit_last_dim(ctx, pin);
  std::vector<GenericInput> ins = {pin};
  // A window-shaped (unread) operand gives the window loops their extents.
  if (!active.empty()) ins.push_back({ctx.empty({active, DType::kI8}), {active, DType::kI8}, wmap});
  const std::string result =
      ctx.generic(static_cast<int64_t>(iters.size()), iters, ins, acc, LoweringContext::identity(r),
                  splat(ctx, init, x.dtype, acc), [&](BodyBuilder& b, const Args& a) {
                    std::string v = a[0];
                    if (acc_dtype != x.dtype) v = b.let(fmt::format("arith.extf {} : {} to f32", v, el(x.dtype)));
                    return combine(b, computation, acc_dtype, a.back(), v);
                  });
  ctx.bind(node.outputs[0], round_to(ctx, result, out));
}

// ---------------------------------------------------------------------------------------------
// select_and_scatter

/// Emits `scf.yield` in the then-branch, `else_values` in an else-branch, and closes the scf.if.
void close_if(BodyBuilder& b, const std::string& then_values, const std::string& else_values,
              const std::string& types) {
  b.emit(fmt::format("scf.yield {} : {}", then_values, types));
  b.emit("} else {");
  b.emit(fmt::format("scf.yield {} : {}", else_values, types));
  b.emit("}");
}

/// Emits the selection loop over one window's cells (window multi-index `o`): returns the flat
/// operand index of the selected cell, or -1 when the window holds only padding. The selection
/// starts at the first non-padding cell and moves to a later cell e when `!(selected >= e)`
/// (GE) or `!(selected <= e)` (LE), as the interpreter; padding cells are never read.
std::string select_in_window(BodyBuilder& b, const std::string& operand, const TensorType& x, const Window& w, bool ge,
                             const std::vector<std::string>& o) {
  const DType d = x.dtype;
  const std::string c0 = index_const(b, 0), c1 = index_const(b, 1);
  const std::string sel = b.fresh(), cell = b.fresh(), best = b.fresh(), best_v = b.fresh();
  b.emit(fmt::format("{}:2 = scf.for {} = {} to {} step {} iter_args({} = {}, {} = {}) -> (index, {}) {{", sel, cell,
                     c0, index_const(b, num_elements(w.dims)), c1, best, index_const(b, -1), best_v, b.constant(0, d),
                     st(d)));
  const std::vector<std::string> k = unravel(b, cell, w.dims);
  std::vector<std::string> pos;
  std::string valid = b.let("arith.constant true"), flat = c0;
  int64_t stride = num_elements(x.shape);
  for (size_t i = 0; i < x.shape.size(); ++i) {
    const std::string base = b.let(fmt::format("arith.muli {}, {} : index", o[i], index_const(b, w.strides[i])));
    const std::string p =
        b.let(fmt::format("arith.subi {}, {} : index", b.let(fmt::format("arith.addi {}, {} : index", base, k[i])),
                          index_const(b, w.padding[2 * i])));
    pos.push_back(p);
    const std::string lo_ok = b.let(fmt::format("arith.cmpi sge, {}, {} : index", p, c0));
    const std::string hi_ok = b.let(fmt::format("arith.cmpi slt, {}, {} : index", p, index_const(b, x.shape[i])));
    valid =
        b.let(fmt::format("arith.andi {}, {} : i1", valid, b.let(fmt::format("arith.andi {}, {} : i1", lo_ok, hi_ok))));
    stride /= x.shape[i];
    flat = b.let(fmt::format("arith.addi {}, {} : index", flat,
                             b.let(fmt::format("arith.muli {}, {} : index", p, index_const(b, stride)))));
  }
  const std::string next = b.fresh();
  b.emit(fmt::format("{}:2 = scf.if {} -> (index, {}) {{", next, valid, st(d)));
  const std::string v = b.let(fmt::format("tensor.extract {}[{}] : {}", operand, fmt::join(pos, ", "), ty(x)));
  const std::string none = b.let(fmt::format("arith.cmpi slt, {}, {} : index", best, c0));
  const std::string keep = ge ? cmp(b, d, "oge", "ge", best_v, v) : cmp(b, d, "ole", "le", best_v, v);
  const std::string beaten = b.let(fmt::format("arith.xori {}, {} : i1", keep, b.let("arith.constant true")));
  const std::string move = b.let(fmt::format("arith.ori {}, {} : i1", none, beaten));
  close_if(b, fmt::format("{}, {}", select(b, move, flat, best, "index"), select(b, move, v, best_v, st(d))),
           fmt::format("{}, {}", best, best_v), fmt::format("index, {}", st(d)));
  b.emit(fmt::format("scf.yield {}#0, {}#1 : index, {}", next, next, st(d)));
  b.emit("}");
  return sel + "#0";
}

/// The flat accumulator `acc` (type `t`, 1-D) reshaped to `shape`.
std::string unflatten(LoweringContext& ctx, const std::string& acc, const TensorType& t, const Shape& shape) {
  const TensorType shaped{shape, t.dtype};
  if (shape.empty())
    return ctx.let(fmt::format("tensor.collapse_shape {} [] : {} into {}", acc, ty(t), ty(shaped)), "r");
  if (shape.size() == 1) return acc;
  std::vector<std::string> all;
  for (size_t i = 0; i < shape.size(); ++i) all.push_back(std::to_string(i));
  return ctx.let(fmt::format("tensor.expand_shape {} [[{}]] output_shape [{}] : {} into {}", acc, fmt::join(all, ", "),
                             fmt::join(shape, ", "), ty(t), ty(shaped)),
                 "r");
}

/// A loop over the windows in row-major order (as the interpreter): each selects its cell
/// (select_in_window) and adds its source value there, into a flat accumulator of the compute
/// type that starts at init (f16/bf16 accumulate in f32 and round once at the end).
/// True when every operand cell lies in at most one window and every window lies inside the
/// operand: strides equal to the window, no padding or dilation, `source` one cell per window
/// (max pooling's usual 2x2 / stride 2 gradient).
bool windows_tile_the_operand(const Window& w, const TensorType& x, const TensorType& source) {
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (w.strides[i] != w.dims[i] || w.base_dilations[i] != 1 || w.window_dilations[i] != 1 || w.padding[2 * i] != 0 ||
        w.padding[2 * i + 1] != 0 || source.shape[i] != x.shape[i] / w.dims[i]) {
      return false;
    }
  }
  return true;
}

/// select_and_scatter when windows tile the operand: one parallel linalg.generic over the
/// operand. Cell p belongs to window o = p / stride; it receives init + source[o] when it is the
/// window's selected cell, else init. Each cell gets at most one term, so the result is bitwise
/// the serial scatter's (init + value), without the serial loop over the windows.
std::string select_and_scatter_tiled(LoweringContext& ctx, const Node& node, const TensorType& x,
                                     const TensorType& source, const Window& w, DType acc_dtype) {
  const DType d = x.dtype;
  const int64_t n = x.rank();
  const TensorType acc{x.shape, acc_dtype};
  const bool ge = node.attrs.get_string("select") == "GE";
  return ctx.generic(
      n, repeat(static_cast<size_t>(n), "parallel"), {}, acc, LoweringContext::identity(n), "",
      [&](BodyBuilder& b, const Args&) {
        std::vector<std::string> o;
        std::string inside = b.let("arith.constant true"), flat = index_const(b, 0);
        int64_t stride = num_elements(x.shape);
        for (int64_t i = 0; i < n; ++i) {
          const auto u = static_cast<size_t>(i);
          const std::string p = b.index(i);
          const std::string oi = b.let(fmt::format("arith.divui {}, {} : index", p, index_const(b, w.strides[u])));
          const std::string last = index_const(b, std::max<int64_t>(source.shape[u] - 1, 0));
          inside = b.let(
              fmt::format("arith.andi {}, {} : i1", inside,
                          b.let(fmt::format("arith.cmpi ult, {}, {} : index", oi, index_const(b, source.shape[u])))));
          o.push_back(b.let(fmt::format("arith.minui {}, {} : index", oi, last)));
          stride /= x.shape[u];
          flat = b.let(fmt::format("arith.addi {}, {} : index", flat,
                                   b.let(fmt::format("arith.muli {}, {} : index", p, index_const(b, stride)))));
        }
        const std::string at = select_in_window(b, ctx.operand(node, 0), x, w, ge, o);
        const std::string hit = b.let(fmt::format("arith.andi {}, {} : i1", inside,
                                                  b.let(fmt::format("arith.cmpi eq, {}, {} : index", at, flat))));
        std::string init = b.let(fmt::format("tensor.extract {}[] : {}", ctx.operand(node, 2), ty(TensorType{{}, d})));
        std::string value =
            b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 1), fmt::join(o, ", "), ty(source)));
        if (acc_dtype != d) {
          init = b.let(fmt::format("arith.extf {} : {} to f32", init, el(d)));
          value = b.let(fmt::format("arith.extf {} : {} to f32", value, el(d)));
        }
        return select(b, hit, combine(b, "add", acc_dtype, init, value), init, el(acc_dtype));
      });
}

void lower_select_and_scatter(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), source = in_type(ctx, node, 1), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const Window w = read_window(node.attrs, x.rank());
  if (!is_bool(x.dtype) && num_elements(source.shape) > 0 && windows_tile_the_operand(w, x, source)) {
    const DType acc_dtype = compute_dtype(x.dtype);
    return ctx.bind(node.outputs[0], round_to(ctx, select_and_scatter_tiled(ctx, node, x, source, w, acc_dtype), out));
  }
  const DType d = x.dtype, acc_dtype = compute_dtype(d);
  const TensorType flat_t{{num_elements(x.shape)}, acc_dtype};
  std::string acc = splat(ctx, ctx.operand(node, 2), d, flat_t);
  if (num_elements(source.shape) > 0) {
    LocalCode code(ctx);
    BodyBuilder& b = code.b();
    const std::string result = b.fresh(), s = b.fresh(), acc_in = b.fresh();
    b.emit(fmt::format("{} = scf.for {} = {} to {} step {} iter_args({} = {}) -> ({}) {{", result, s, index_const(b, 0),
                       index_const(b, num_elements(source.shape)), index_const(b, 1), acc_in, acc, ty(flat_t)));
    const std::vector<std::string> o = unravel(b, s, source.shape);
    const std::string at = select_in_window(b, ctx.operand(node, 0), x, w, node.attrs.get_string("select") == "GE", o);
    const std::string next = b.fresh();
    b.emit(fmt::format("{} = scf.if {} -> ({}) {{", next,
                       b.let(fmt::format("arith.cmpi sge, {}, {} : index", at, index_const(b, 0))), ty(flat_t)));
    std::string value =
        b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 1), fmt::join(o, ", "), ty(source)));
    if (acc_dtype != d) value = b.let(fmt::format("arith.extf {} : {} to f32", value, el(d)));
    const std::string sum =
        combine(b, "add", acc_dtype, b.let(fmt::format("tensor.extract {}[{}] : {}", acc_in, at, ty(flat_t))), value);
    close_if(b, b.let(fmt::format("tensor.insert {} into {}[{}] : {}", sum, acc_in, at, ty(flat_t))), acc_in,
             ty(flat_t));
    b.emit(fmt::format("scf.yield {} : {}", next, ty(flat_t)));
    b.emit("}");
    code.flush();
    acc = code.name(result);
  }
  ctx.bind(node.outputs[0], round_to(ctx, unflatten(ctx, acc, flat_t, out.shape), out));
}

}  // namespace

void register_reduction_lowerings(OpRegistry& r) {
  r.set_lowering("reduce", lower_reduce);
  r.set_lowering("argmax", [](LoweringContext& ctx, const Node& node) { lower_arg_extreme(ctx, node, true); });
  r.set_lowering("argmin", [](LoweringContext& ctx, const Node& node) { lower_arg_extreme(ctx, node, false); });
  r.set_lowering("reduce_window", lower_reduce_window);
  r.set_lowering("select_and_scatter", lower_select_and_scatter);
}

}  // namespace ingot::ir
