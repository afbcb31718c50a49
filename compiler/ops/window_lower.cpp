// MLIR lowering rules of the window ops: pad, argmax/argmin, reduce_window, select_and_scatter
// and convolution (semantics in docs/ir.md). Each rule reproduces its interpreter kernel
// (compiler/ops/{shape,reduction,linalg}.cpp) exactly: the same combination order, the same
// NaN/tie/signed-zero rules, padding cells that are skipped rather than multiplied, and f16/bf16
// accumulation in f32 with one rounding at the end. The one exception is the library path of
// f32/f64 convolutions (LoweringOptions::library_conv): a call to the im2col + BLAS kernel of
// kernels/cpu/conv.cpp, which sums in BLAS's order (equal up to rounding; padding is skipped
// there too, see docs/compiler.md).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>

#include "ingot/ir/op_registry.h"
#include "ingot/kernels/cpu_conv.h"
#include "ingot/lower/lowering.h"
#include "ops/conv_config.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using namespace lowering_util;

std::string st(DType d) { return LoweringContext::storage(d); }
/// The dtype kernels compute in: f32 for f16/bf16, else the dtype itself.
DType compute_dtype(DType d) { return is_half(d) ? DType::kF32 : d; }
std::vector<std::string> repeat(size_t n, const std::string& s) { return std::vector<std::string>(n, s); }

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }


/// `rank-0 tensor scalar` broadcast to `t` (extended to t's float type when they differ).
std::string splat(LoweringContext& ctx, const std::string& scalar, DType scalar_dtype, const TensorType& t) {
  return ctx.generic(t.rank(), repeat(static_cast<size_t>(t.rank()), "parallel"), {{scalar, {{}, scalar_dtype}, {}}}, t,
                     LoweringContext::identity(t.rank()), "", [&](BodyBuilder& b, const Args& a) {
                       if (scalar_dtype == t.dtype) return a[0];
                       return b.let(fmt::format("arith.extf {} : {} to {}", a[0], el(scalar_dtype), el(t.dtype)));
                     });
}

/// Rounds the f32 tensor `acc` to `out` (a half type); returns `acc` unchanged when `out` is not.
std::string round_to(LoweringContext& ctx, const std::string& acc, const TensorType& out) {
  if (!is_half(out.dtype)) return acc;
  return ctx.map({acc}, {{out.shape, DType::kF32}}, out, [&](BodyBuilder& b, const Args& a) {
    return b.let(fmt::format("arith.truncf {} : f32 to {}", a[0], el(out.dtype)));
  });
}

/// Writes `x` into `dest` (type `dt`) with element i of dim d at `low[d] + i * (interior[d] + 1)`,
/// dropping the elements that fall outside `dest` (negative low/high crop). Returns the result.
std::string insert_strided(LoweringContext& ctx, const std::string& x, const TensorType& xt,
                           const std::string& dest, const TensorType& dt, const std::vector<int64_t>& low,
                           const std::vector<int64_t>& interior) {
  if (xt.rank() == 0) return x;
  const auto r = static_cast<size_t>(xt.rank());
  std::vector<int64_t> first(r), count(r), offsets(r), strides(r), ones(r, 1);
  bool whole = true;
  for (size_t d = 0; d < r; ++d) {
    const int64_t step = interior[d] + 1;
    first[d] = low[d] >= 0 ? 0 : ceil_div(-low[d], step);
    const int64_t last = std::min(xt.shape[d] - 1, floor_div(dt.shape[d] - 1 - low[d], step));
    count[d] = last - first[d] + 1;
    if (count[d] <= 0) return dest;  // nothing of x lands inside dest
    offsets[d] = first[d] * step + low[d];
    strides[d] = step;
    whole = whole && first[d] == 0 && count[d] == xt.shape[d];
  }
  std::string src = x;
  const TensorType src_t{count, xt.dtype};
  if (!whole) {
    src = ctx.let(fmt::format("tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", x, fmt::join(first, ", "),
                              fmt::join(count, ", "), fmt::join(ones, ", "), ty(xt), ty(src_t)),
                  "s");
  }
  return ctx.let(fmt::format("tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", src, dest,
                             fmt::join(offsets, ", "), fmt::join(count, ", "), fmt::join(strides, ", "), ty(src_t),
                             ty(dt)),
                 "pad");
}

/// The type of `t` padded as the pad op would (edge low/high, interior).
TensorType padded_type(const TensorType& t, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
                       const std::vector<int64_t>& interior) {
  TensorType p = t;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    p.shape[d] = low[d] + high[d] + t.shape[d] + std::max<int64_t>(t.shape[d] - 1, 0) * interior[d];
  }
  return p;
}

/// `x` edge-padded by low/high and interior-padded (the pad op's geometry) into a tensor that
/// `make_fill(type)` creates; `x` itself when there is no padding at all.
std::string padded(LoweringContext& ctx, const std::string& x, const TensorType& xt, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior,
                   const std::function<std::string(const TensorType&)>& make_fill) {
  const TensorType pt = padded_type(xt, low, high, interior);
  if (pt == xt && std::all_of(low.begin(), low.end(), [](int64_t v) { return v == 0; })) return x;
  if (num_elements(pt.shape) == 0) return ctx.empty(pt);
  return insert_strided(ctx, x, xt, make_fill(pt), pt, low, interior);
}

/// Workarounds for the vectorize stage (affine-super-vectorize). It takes an access whose last
/// (fastest) dim varies with a loop for unit-stride whatever the coefficient (so `o * 2 + w` or a
/// floordiv there would be vectorized as if contiguous), and it vectorizes single-trip loops even
/// when a store does not depend on them (an invalid broadcast write). So the window/kernel loops
/// of trip count 1 are left out of the loop nests, and an operand read at a strided position in
/// its last dim gets a trailing unit dim (an expand_shape, no copy): the loops that move it then
/// vary it along a different dim than the result, and the vectorizer leaves them scalar.
GenericInput with_unit_last_dim(LoweringContext& ctx, const GenericInput& in) {
  const int64_t r = in.type.rank();
  TensorType t = in.type;
  t.shape.push_back(1);
  std::vector<std::string> groups;
  for (int64_t d = 0; d + 1 < r; ++d) groups.push_back(fmt::format("[{}]", d));
  groups.push_back(fmt::format("[{}, {}]", r - 1, r));
  const std::string v = ctx.let(fmt::format("tensor.expand_shape {} [{}] output_shape [{}] : {} into {}", in.value,
                                            fmt::join(groups, ", "), fmt::join(t.shape, ", "), ty(in.type), ty(t)),
                                "r");
  std::vector<std::string> map = in.map;
  map.push_back("0");
  return {v, t, map};
}

// ---------------------------------------------------------------------------------------------
// Scalar helpers

std::string cmp(BodyBuilder& b, DType d, const std::string& pred_float, const std::string& pred_int,
                const std::string& x, const std::string& y) {
  if (is_floating(d)) return b.let(fmt::format("arith.cmpf {}, {}, {} : {}", pred_float, x, y, el(d)));
  const std::string p = (is_signed_integer(d) ? "s" : "u") + pred_int;
  return b.let(fmt::format("arith.cmpi {}, {}, {} : {}", p, x, y, st(d)));
}

std::string select(BodyBuilder& b, const std::string& c, const std::string& x, const std::string& y,
                   const std::string& type) {
  return b.let(fmt::format("arith.select {}, {}, {} : {}", c, x, y, type));
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
    const char* op = is_floating(d) ? (computation == "add" ? "addf" : "mulf") : (computation == "add" ? "addi" : "muli");
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
// pad

void lower_pad(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const std::string value = ctx.operand(node, 1);
  ctx.bind(node.outputs[0],
           padded(ctx, ctx.operand(node, 0), x, node.attrs.get_ints("edge_padding_low"),
                  node.attrs.get_ints("edge_padding_high"), node.attrs.get_ints("interior_padding"),
                  [&](const TensorType& t) { return splat(ctx, value, x.dtype, t); }));
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
  const std::string best0 = ctx.let(fmt::format("tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", ctx.operand(node, 0),
                                                fmt::join(zeros, ", "), fmt::join(sizes, ", "), fmt::join(ones, ", "),
                                                ty(x), ty(best_t)),
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
    better = b.let(fmt::format("arith.andi {}, {} : i1", best_ok, b.let(fmt::format("arith.ori {}, {} : i1", v_nan, better))));
  }
  const std::string it = el(out.dtype);
  const std::string k = b.let(fmt::format("arith.index_cast {} : index to {}", b.index(dim), it));
  const std::string nv = select(b, better, v, best, st(d)), nk = select(b, better, k, best_k, it);
  const std::string result = b.fresh();
  code.emit(fmt::format("{}:2 = linalg.generic {{indexing_maps = [{}, {}, {}], iterator_types = [{}]}} ins({} : {}) "
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
void close_if(BodyBuilder& b, const std::string& then_values, const std::string& else_values, const std::string& types) {
  b.emit(fmt::format("scf.yield {} : {}", then_values, types));
  b.emit("} else {");
  b.emit(fmt::format("scf.yield {} : {}", else_values, types));
  b.emit("}");
}

/// Emits the selection loop over one window's cells (window multi-index `o`): returns the flat
/// operand index of the selected cell, or -1 when the window holds only padding. The selection
/// starts at the first non-padding cell and moves to a later cell e when `!(selected >= e)`
/// (GE) or `!(selected <= e)` (LE), as the interpreter; padding cells are never read.
std::string select_in_window(BodyBuilder& b, const std::string& operand, const TensorType& x, const Window& w,
                             bool ge, const std::vector<std::string>& o) {
  const DType d = x.dtype;
  const std::string c0 = index_const(b, 0), c1 = index_const(b, 1);
  const std::string sel = b.fresh(), cell = b.fresh(), best = b.fresh(), best_v = b.fresh();
  b.emit(fmt::format("{}:2 = scf.for {} = {} to {} step {} iter_args({} = {}, {} = {}) -> (index, {}) {{", sel, cell, c0,
                     index_const(b, num_elements(w.dims)), c1, best, index_const(b, -1), best_v, b.constant(0, d), st(d)));
  const std::vector<std::string> k = unravel(b, cell, w.dims);
  std::vector<std::string> pos;
  std::string valid = b.let("arith.constant true"), flat = c0;
  int64_t stride = num_elements(x.shape);
  for (size_t i = 0; i < x.shape.size(); ++i) {
    const std::string base = b.let(fmt::format("arith.muli {}, {} : index", o[i], index_const(b, w.strides[i])));
    const std::string p = b.let(fmt::format("arith.subi {}, {} : index", b.let(fmt::format("arith.addi {}, {} : index", base, k[i])),
                                            index_const(b, w.padding[2 * i])));
    pos.push_back(p);
    const std::string lo_ok = b.let(fmt::format("arith.cmpi sge, {}, {} : index", p, c0));
    const std::string hi_ok = b.let(fmt::format("arith.cmpi slt, {}, {} : index", p, index_const(b, x.shape[i])));
    valid = b.let(fmt::format("arith.andi {}, {} : i1", valid, b.let(fmt::format("arith.andi {}, {} : i1", lo_ok, hi_ok))));
    stride /= x.shape[i];
    flat = b.let(fmt::format("arith.addi {}, {} : index", flat, b.let(fmt::format("arith.muli {}, {} : index", p, index_const(b, stride)))));
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
  if (shape.empty()) return ctx.let(fmt::format("tensor.collapse_shape {} [] : {} into {}", acc, ty(t), ty(shaped)), "r");
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
    if (w.strides[i] != w.dims[i] || w.base_dilations[i] != 1 || w.window_dilations[i] != 1 ||
        w.padding[2 * i] != 0 || w.padding[2 * i + 1] != 0 || source.shape[i] != x.shape[i] / w.dims[i]) {
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
  return ctx.generic(n, repeat(static_cast<size_t>(n), "parallel"), {}, acc, LoweringContext::identity(n), "",
                     [&](BodyBuilder& b, const Args&) {
                       std::vector<std::string> o;
                       std::string inside = b.let("arith.constant true"), flat = index_const(b, 0);
                       int64_t stride = num_elements(x.shape);
                       for (int64_t i = 0; i < n; ++i) {
                         const auto u = static_cast<size_t>(i);
                         const std::string p = b.index(i);
                         const std::string oi = b.let(fmt::format("arith.divui {}, {} : index", p, index_const(b, w.strides[u])));
                         const std::string last = index_const(b, std::max<int64_t>(source.shape[u] - 1, 0));
                         inside = b.let(fmt::format("arith.andi {}, {} : i1", inside,
                                                    b.let(fmt::format("arith.cmpi ult, {}, {} : index", oi,
                                                                      index_const(b, source.shape[u])))));
                         o.push_back(b.let(fmt::format("arith.minui {}, {} : index", oi, last)));
                         stride /= x.shape[u];
                         flat = b.let(fmt::format("arith.addi {}, {} : index", flat,
                                                  b.let(fmt::format("arith.muli {}, {} : index", p, index_const(b, stride)))));
                       }
                       const std::string at = select_in_window(b, ctx.operand(node, 0), x, w, ge, o);
                       const std::string hit = b.let(fmt::format(
                           "arith.andi {}, {} : i1", inside, b.let(fmt::format("arith.cmpi eq, {}, {} : index", at, flat))));
                       std::string init = b.let(fmt::format("tensor.extract {}[] : {}", ctx.operand(node, 2),
                                                            ty(TensorType{{}, d})));
                       std::string value = b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 1),
                                                             fmt::join(o, ", "), ty(source)));
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
    return ctx.bind(node.outputs[0],
                    round_to(ctx, select_and_scatter_tiled(ctx, node, x, source, w, acc_dtype), out));
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
    const std::string at =
        select_in_window(b, ctx.operand(node, 0), x, w, node.attrs.get_string("select") == "GE", o);
    const std::string next = b.fresh();
    b.emit(fmt::format("{} = scf.if {} -> ({}) {{", next, b.let(fmt::format("arith.cmpi sge, {}, {} : index", at, index_const(b, 0))),
                       ty(flat_t)));
    std::string value = b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 1), fmt::join(o, ", "), ty(source)));
    if (acc_dtype != d) value = b.let(fmt::format("arith.extf {} : {} to f32", value, el(d)));
    const std::string sum = combine(b, "add", acc_dtype, b.let(fmt::format("tensor.extract {}[{}] : {}", acc_in, at, ty(flat_t))), value);
    close_if(b, b.let(fmt::format("tensor.insert {} into {}[{}] : {}", sum, acc_in, at, ty(flat_t))), acc_in, ty(flat_t));
    b.emit(fmt::format("scf.yield {} : {}", next, ty(flat_t)));
    b.emit("}");
    code.flush();
    acc = code.name(result);
  }
  ctx.bind(node.outputs[0], round_to(ctx, unflatten(ctx, acc, flat_t, out.shape), out));
}

// ---------------------------------------------------------------------------------------------
// convolution

using ops::ConvConfig;

/// The lhs of a convolution zero-padded and lhs-dilated on its spatial dims and, when that adds
/// cells, a 0/1 mask (i8, spatial dims only) of the same geometry that marks the real cells.
struct ConvInput {
  GenericInput lhs;
  std::optional<GenericInput> mask;
};

ConvInput conv_input(LoweringContext& ctx, const std::string& lhs, const TensorType& lt, const ConvConfig& c) {
  const size_t n = lt.shape.size();
  std::vector<int64_t> low(n, 0), high(n, 0), interior(n, 0), s_low, s_high, s_interior;
  Shape spatial;
  for (size_t i = 0; i < c.in_spatial.size(); ++i) {
    const auto d = static_cast<size_t>(c.in_spatial[i]);
    low[d] = c.padding[2 * i];
    high[d] = c.padding[2 * i + 1];
    interior[d] = c.lhs_dilation[i] - 1;
    s_low.push_back(low[d]);
    s_high.push_back(high[d]);
    s_interior.push_back(interior[d]);
    spatial.push_back(lt.shape[d]);
  }
  auto zeros = [&](const TensorType& t) { return ctx.fill(t, 0); };
  ConvInput in{{padded(ctx, lhs, lt, low, high, interior, zeros), padded_type(lt, low, high, interior), {}}, {}};
  const bool adds_cells = std::any_of(s_low.begin(), s_low.end(), [](int64_t v) { return v > 0; }) ||
                          std::any_of(s_high.begin(), s_high.end(), [](int64_t v) { return v > 0; }) ||
                          std::any_of(s_interior.begin(), s_interior.end(), [](int64_t v) { return v > 0; });
  if (adds_cells) {
    const TensorType ones{spatial, DType::kI8};
    in.mask = GenericInput{padded(ctx, ctx.fill(ones, 1), ones, s_low, s_high, s_interior, zeros),
                           padded_type(ones, s_low, s_high, s_interior), {}};
  }
  return in;
}

/// Fills the affine maps of the lhs (`in.lhs`), rhs and mask over the loops (output dims...,
/// kernel spatial dims..., input features), appending the reduction loops of extent > 1 to
/// `iters`. Group g = output feature floordiv (output features per group) selects the lhs
/// features (feature groups) or batch entries (batch groups), as the interpreter.
std::vector<std::string> conv_maps(const ConvConfig& c, const TensorType& lt, const TensorType& rt, ConvInput& in,
                                   std::vector<std::string>& iters) {
  auto size = [](const TensorType& t, int64_t d) { return t.shape[static_cast<size_t>(d)]; };
  auto reduction_loop = [&](int64_t extent) -> std::string {
    if (extent == 1) return "";
    iters.push_back("reduction");
    return fmt::format("d{}", iters.size() - 1);
  };
  const size_t ns = c.in_spatial.size();
  std::vector<std::string> kdim;
  for (size_t i = 0; i < ns; ++i) kdim.push_back(reduction_loop(size(rt, c.k_spatial[i])));
  std::string cdim = reduction_loop(size(rt, c.k_in_feature));
  if (cdim.empty()) cdim = "0";
  const int64_t out_per_group = std::max<int64_t>(1, size(rt, c.k_out_feature) / (c.feature_groups * c.batch_groups));
  const std::string group = fmt::format("(d{} floordiv {})", c.out_feature, out_per_group);
  std::vector<std::string>& lmap = in.lhs.map;
  std::vector<std::string> rmap(lt.shape.size());
  lmap.assign(lt.shape.size(), "");
  lmap[c.in_batch] = c.batch_groups > 1
                         ? fmt::format("d{} + {} * {}", c.out_batch, group, size(lt, c.in_batch) / c.batch_groups)
                         : fmt::format("d{}", c.out_batch);
  lmap[c.in_feature] = c.feature_groups > 1
                           ? fmt::format("{} * {} + {}", group, size(lt, c.in_feature) / c.feature_groups, cdim)
                           : cdim;
  rmap[c.k_out_feature] = fmt::format("d{}", c.out_feature);
  rmap[c.k_in_feature] = cdim;
  for (size_t i = 0; i < ns; ++i) {
    std::string e = fmt::format("d{} * {}", c.out_spatial[i], c.strides[i]);
    if (!kdim[i].empty()) e += fmt::format(" + {} * {}", kdim[i], c.rhs_dilation[i]);
    lmap[c.in_spatial[i]] = e;
    if (in.mask) in.mask->map.push_back(e);
    rmap[c.k_spatial[i]] = kdim[i].empty() ? "0" : kdim[i];
  }
  return rmap;
}

/// Whether the lhs's last dim is read at a strided or grouped position (see with_unit_last_dim).
bool lhs_last_dim_strided(const ConvConfig& c, int64_t rank) {
  const int64_t last = rank - 1;
  if ((last == c.in_feature && c.feature_groups > 1) || (last == c.in_batch && c.batch_groups > 1)) return true;
  for (size_t i = 0; i < c.in_spatial.size(); ++i) {
    if (last == c.in_spatial[i] && c.strides[i] != 1) return true;
  }
  return false;
}

/// `v` (a tensor of type `t`, rank >= 1) as a 1-D memref<?x...> of its elements, row-major
/// (tensor.collapse_shape, then bufferization.to_buffer: no copy for an identity layout).
std::string flat_buffer(LoweringContext& ctx, const std::string& v, const TensorType& t) {
  const TensorType flat{{num_elements(t.shape)}, t.dtype};
  std::vector<std::string> all;
  for (int64_t d = 0; d < t.rank(); ++d) all.push_back(std::to_string(d));
  const std::string c = t.rank() == 1 ? v
                                      : ctx.let(fmt::format("tensor.collapse_shape {} [[{}]] : {} into {}", v,
                                                            fmt::join(all, ", "), ty(t), ty(flat)),
                                                "r");
  const std::string memref = fmt::format("memref<{}x{}>", flat.shape[0], st(t.dtype));
  const std::string m = ctx.library_read(c, ty(flat), memref);
  return ctx.let(fmt::format("memref.cast {} : {} to memref<?x{}>", m, memref, st(t.dtype)), "m");
}

/// The kernel library's description of the convolution `c` of `lt` with `rt` into `out`.
kernels::ConvSpec conv_spec(const ConvConfig& c, const TensorType& lt, const TensorType& rt, const TensorType& out) {
  kernels::ConvSpec s;
  s.lhs_shape = lt.shape;
  s.rhs_shape = rt.shape;
  s.out_shape = out.shape;
  s.in_batch = c.in_batch;
  s.in_feature = c.in_feature;
  s.in_spatial = c.in_spatial;
  s.k_in_feature = c.k_in_feature;
  s.k_out_feature = c.k_out_feature;
  s.k_spatial = c.k_spatial;
  s.out_batch = c.out_batch;
  s.out_feature = c.out_feature;
  s.out_spatial = c.out_spatial;
  s.strides = c.strides;
  s.padding = c.padding;
  s.lhs_dilation = c.lhs_dilation;
  s.rhs_dilation = c.rhs_dilation;
  s.feature_groups = c.feature_groups;
  s.batch_groups = c.batch_groups;
  return s;
}

/// A convolution with f32/f64 operands (when LoweringOptions::library_conv and its K reaches
/// library_conv_min_k) as a call to the
/// im2col + BLAS GEMM kernel ingot_cpu_conv_<dtype>(lhs, rhs, result, config)
/// (kernels/cpu/conv.cpp; `<LoweringOptions::conv_function>_<dtype>` in general): both operands and the result as 1-D memrefs in their row-major
/// layouts, the configuration as a dense i64 constant (kernels::encode_conv_spec). Returns false
/// when the generated loops are to be used instead.
bool lower_convolution_as_library(LoweringContext& ctx, const Node& node, const ConvConfig& c, const TensorType& lt,
                                  const TensorType& rt, const TensorType& out) {
  if (!ctx.options().library_conv || (out.dtype != DType::kF32 && out.dtype != DType::kF64)) return false;
  int64_t k = rt.shape[static_cast<size_t>(c.k_in_feature)];
  for (int64_t d : c.k_spatial) k *= rt.shape[static_cast<size_t>(d)];
  if (k < ctx.options().library_conv_min_k) return false;
  const std::string e = el(out.dtype);
  const std::string dyn = fmt::format("memref<?x{}>", e);
  const std::string fn = fmt::format("{}_{}", ctx.options().conv_function, e);
  ctx.declare(fmt::format("func.func private @{}({}, {}, {}, memref<?xi64>) attributes {{llvm.emit_c_interface}}", fn,
                          dyn, dyn, dyn));
  const std::string lhs = flat_buffer(ctx, ctx.operand(node, 0), lt);
  const std::string rhs = flat_buffer(ctx, ctx.operand(node, 1), rt);
  const std::vector<int64_t> config = kernels::encode_conv_spec(conv_spec(c, lt, rt, out));
  const TensorType config_t{{static_cast<int64_t>(config.size())}, DType::kI64};
  const std::string cv =
      ctx.let(fmt::format("arith.constant dense<[{}]> : {}", fmt::join(config, ", "), ty(config_t)), "c");
  const std::string cm = flat_buffer(ctx, cv, config_t);
  const TensorType flat{{num_elements(out.shape)}, out.dtype};
  const std::string memref = fmt::format("memref<{}x{}>", flat.shape[0], e);
  const std::string r = ctx.let(fmt::format("memref.alloc() {{alignment = 64 : i64}} : {}", memref), "m");
  const std::string rd = ctx.let(fmt::format("memref.cast {} : {} to {}", r, memref, dyn), "m");
  ctx.emit(fmt::format("func.call @{}({}, {}, {}, {}) : ({}, {}, {}, memref<?xi64>) -> ()", fn, lhs, rhs, rd, cm, dyn,
                       dyn, dyn));
  const std::string t =
      ctx.let(fmt::format("bufferization.to_tensor {} restrict writable : {} to {}", r, memref, ty(flat)), "t");
  std::vector<std::string> all;
  for (int64_t d = 0; d < out.rank(); ++d) all.push_back(std::to_string(d));
  ctx.bind(node.outputs[0], ctx.let(fmt::format("tensor.expand_shape {} [[{}]] output_shape [{}] : {} into {}", t,
                                                fmt::join(all, ", "), fmt::join(out.shape, ", "), ty(flat), ty(out)),
                                    "r"));
  return true;
}

/// One linalg.generic over (output dims..., kernel spatial dims..., input features per group),
/// the interpreter's summation order (kernel dims of size 1 have no loop; see
/// with_unit_last_dim), reading the padded lhs (conv_input); where the mask marks padding, the
/// term is skipped rather than added as 0 * w (which is NaN for an infinite weight).
void lower_convolution(LoweringContext& ctx, const Node& node) {
  const TensorType lt = in_type(ctx, node, 0), rt = in_type(ctx, node, 1), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const int64_t n = lt.rank();
  const ConvConfig c = ops::conv_config(lt, rt, node.attrs);
  const DType acc_dtype = compute_dtype(out.dtype);
  const TensorType acc{out.shape, acc_dtype};
  int64_t terms = rt.shape[static_cast<size_t>(c.k_in_feature)];
  for (int64_t d : c.k_spatial) terms *= rt.shape[static_cast<size_t>(d)];
  if (terms == 0) return ctx.bind(node.outputs[0], round_to(ctx, ctx.fill(acc, 0), out));
  if (lower_convolution_as_library(ctx, node, c, lt, rt, out)) return;
  ConvInput in = conv_input(ctx, ctx.operand(node, 0), lt, c);
  std::vector<std::string> iters = repeat(static_cast<size_t>(n), "parallel");
  const std::vector<std::string> rmap = conv_maps(c, lt, rt, in, iters);
  std::vector<GenericInput> ins = {lhs_last_dim_strided(c, n) ? with_unit_last_dim(ctx, in.lhs) : in.lhs,
                                   {ctx.operand(node, 1), rt, rmap}};
  if (in.mask) ins.push_back(c.strides.back() != 1 ? with_unit_last_dim(ctx, *in.mask) : *in.mask);  // mask => spatial dims
  const bool masked = in.mask.has_value();
  const std::string result = ctx.generic(
      static_cast<int64_t>(iters.size()), iters, ins, acc, LoweringContext::identity(n), ctx.fill(acc, 0),
      [&](BodyBuilder& b, const Args& a) {
        std::string x = a[0], y = a[1];
        const std::string t = el(acc_dtype);
        if (acc_dtype != lt.dtype) {
          x = b.let(fmt::format("arith.extf {} : {} to f32", x, el(lt.dtype)));
          y = b.let(fmt::format("arith.extf {} : {} to f32", y, el(lt.dtype)));
        }
        const bool f = is_floating(acc_dtype);
        const std::string prod = b.let(fmt::format("arith.{} {}, {} : {}", f ? "mulf" : "muli", x, y, t));
        const std::string sum = b.let(fmt::format("arith.{} {}, {} : {}", f ? "addf" : "addi", a.back(), prod, t));
        if (!masked) return sum;
        const std::string real = b.let(fmt::format("arith.cmpi ne, {}, {} : i8", a[2], b.constant(0, DType::kI8)));
        return select(b, real, sum, a.back(), t);
      });
  ctx.bind(node.outputs[0], round_to(ctx, result, out));
}

}  // namespace

void register_window_lowerings(OpRegistry& r) {
  r.set_lowering("pad", lower_pad);
  r.set_lowering("argmax", [](LoweringContext& ctx, const Node& node) { lower_arg_extreme(ctx, node, true); });
  r.set_lowering("argmin", [](LoweringContext& ctx, const Node& node) { lower_arg_extreme(ctx, node, false); });
  r.set_lowering("reduce_window", lower_reduce_window);
  r.set_lowering("select_and_scatter", lower_select_and_scatter);
  r.set_lowering("convolution", lower_convolution);
}

}  // namespace ingot::ir
