// MLIR lowering rules of the window ops: pad, argmax/argmin, reduce_window, select_and_scatter
// and convolution (semantics in docs/ir.md). Each rule reproduces its interpreter kernel
// (compiler/ops/{shape,reduction,linalg}.cpp) exactly: the same combination order, the same
// NaN/tie/signed-zero rules, padding cells that are skipped rather than multiplied, and f16/bf16
// accumulation in f32 with one rounding at the end.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"

namespace ingot::ir {

namespace {

using lower::BodyBuilder;
using lower::GenericInput;
using lower::LoweringContext;
using Args = std::vector<std::string>;

TensorType out_type(const LoweringContext& ctx, const Node& node, size_t i = 0) {
  return ctx.graph().type(node.outputs.at(i));
}
TensorType in_type(const LoweringContext& ctx, const Node& node, size_t i) {
  return ctx.graph().type(node.inputs.at(i));
}
std::string ty(const TensorType& t) { return LoweringContext::type(t); }
std::string el(DType d) { return LoweringContext::element(d); }
std::string st(DType d) { return LoweringContext::storage(d); }
bool is_half(DType d) { return d == DType::kF16 || d == DType::kBF16; }
/// The dtype kernels compute in: f32 for f16/bf16, else the dtype itself.
DType compute_dtype(DType d) { return is_half(d) ? DType::kF32 : d; }
std::vector<std::string> repeat(size_t n, const std::string& s) { return std::vector<std::string>(n, s); }

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/// Function-level code (loop nests, multi-result generics) written with a BodyBuilder so that the
/// scalar helpers serve it too. Its "%b<N>" names are renamed "%k<M>_<N>" (M fresh from the
/// context) when flushed, so they cannot clash with the context's names or with the "%b<N>"
/// names of generic bodies.
class LocalCode {
 public:
  explicit LocalCode(LoweringContext& ctx) : ctx_(ctx), prefix_(ctx.fresh("k") + "_") {}
  BodyBuilder& b() { return b_; }
  /// The function-level name of local name `local`.
  std::string name(const std::string& local) const { return rename(local); }
  /// Appends the builder's lines to the function body.
  void flush() const {
    for (const std::string& l : b_.lines()) ctx_.emit(rename(l));
  }
  /// Appends one line written with local names straight to the function body.
  void emit(const std::string& line) const { ctx_.emit(rename(line)); }

 private:
  std::string rename(const std::string& text) const {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '%' && i + 2 < text.size() && text[i + 1] == 'b' &&
          std::isdigit(static_cast<unsigned char>(text[i + 2])) != 0) {
        out += prefix_;
        ++i;  // skip "%b"
        continue;
      }
      out += text[i];
    }
    return out;
  }
  LoweringContext& ctx_;
  std::string prefix_;
  int64_t counter_ = 0;
  BodyBuilder b_{&counter_};
};

std::string index_const(BodyBuilder& b, int64_t v) { return b.let(fmt::format("arith.constant {} : index", v)); }

/// Multi-index of the row-major flat index `flat` (an index value) in `shape` (all sizes > 0).
std::vector<std::string> unravel(BodyBuilder& b, const std::string& flat, const Shape& shape) {
  std::vector<std::string> idx;
  int64_t stride = num_elements(shape);
  for (int64_t size : shape) {
    stride /= size;
    const std::string q = b.let(fmt::format("arith.divui {}, {} : index", flat, index_const(b, stride)));
    idx.push_back(b.let(fmt::format("arith.remui {}, {} : index", q, index_const(b, size))));
  }
  return idx;
}

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

/// `x` edge-padded by low/high and interior-padded (the pad op's geometry) into a tensor that
/// `make_fill(type)` creates; `x` itself when there is no padding at all.
std::string padded(LoweringContext& ctx, const std::string& x, const TensorType& xt, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior,
                   const std::function<std::string(const TensorType&)>& make_fill) {
  TensorType pt{xt.shape, xt.dtype};
  bool none = true;
  for (size_t d = 0; d < xt.shape.size(); ++d) {
    const int64_t n = xt.shape[d];
    pt.shape[d] = low[d] + high[d] + n + std::max<int64_t>(n - 1, 0) * interior[d];
    none = none && low[d] == 0 && high[d] == 0 && interior[d] == 0;
  }
  if (none) return x;
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
  TensorType pt{{}, x.dtype};
  for (int64_t d = 0; d < r; ++d) {
    const int64_t n = x.shape[d];
    pt.shape.push_back(low[d] + high[d] + n + std::max<int64_t>(n - 1, 0) * interior[d]);
  }
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

/// A loop over the windows in row-major order (as the interpreter): an inner loop over the
/// window's cells selects the first cell that no later cell beats (`!(selected >= e)` moves the
/// selection for GE, `!(selected <= e)` for LE; padding cells are skipped), then the window's
/// source value is added to a flat accumulator at the selected cell.
void lower_select_and_scatter(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), source = in_type(ctx, node, 1), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const bool ge = node.attrs.get_string("select") == "GE";
  const int64_t r = x.rank();
  const Window w = read_window(node.attrs, r);
  const DType d = x.dtype, acc_dtype = compute_dtype(d);
  const int64_t n = num_elements(x.shape), windows = num_elements(source.shape);
  const int64_t cells = num_elements(w.dims);
  const TensorType flat_t{{n}, acc_dtype};
  std::string acc = splat(ctx, ctx.operand(node, 2), d, flat_t);
  if (windows > 0) {
    LocalCode code(ctx);
    BodyBuilder& b = code.b();
    const std::string c0 = index_const(b, 0), c1 = index_const(b, 1), minus1 = index_const(b, -1);
    const std::string zero = b.constant(0, d);
    const std::string result = b.fresh(), s = b.fresh(), acc_in = b.fresh();
    b.emit(fmt::format("{} = scf.for {} = {} to {} step {} iter_args({} = {}) -> ({}) {{", result, s, c0,
                       index_const(b, windows), c1, acc_in, acc, ty(flat_t)));
    const std::vector<std::string> o = unravel(b, s, source.shape);
    const std::string src_v = b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 1), fmt::join(o, ", "), ty(source)));
    const std::string sel = b.fresh(), cell = b.fresh(), bi = b.fresh(), bv = b.fresh();
    b.emit(fmt::format("{}:2 = scf.for {} = {} to {} step {} iter_args({} = {}, {} = {}) -> (index, {}) {{", sel, cell,
                       c0, index_const(b, cells), c1, bi, minus1, bv, zero, st(d)));
    const std::vector<std::string> k = unravel(b, cell, w.dims);
    std::vector<std::string> pos;
    std::string valid = b.let("arith.constant true");
    std::string flat = c0;
    int64_t stride = n;
    for (int64_t i = 0; i < r; ++i) {
      const auto id = static_cast<size_t>(i);
      const std::string base = b.let(fmt::format("arith.muli {}, {} : index", o[id], index_const(b, w.strides[id])));
      const std::string p = b.let(fmt::format("arith.subi {}, {} : index", b.let(fmt::format("arith.addi {}, {} : index", base, k[id])),
                                              index_const(b, w.padding[2 * id])));
      pos.push_back(p);
      const std::string lo_ok = b.let(fmt::format("arith.cmpi sge, {}, {} : index", p, c0));
      const std::string hi_ok = b.let(fmt::format("arith.cmpi slt, {}, {} : index", p, index_const(b, x.shape[id])));
      valid = b.let(fmt::format("arith.andi {}, {} : i1", valid, b.let(fmt::format("arith.andi {}, {} : i1", lo_ok, hi_ok))));
      stride /= x.shape[id];
      flat = b.let(fmt::format("arith.addi {}, {} : index", flat, b.let(fmt::format("arith.muli {}, {} : index", p, index_const(b, stride)))));
    }
    const std::string upd = b.fresh();
    b.emit(fmt::format("{}:2 = scf.if {} -> (index, {}) {{", upd, valid, st(d)));
    const std::string v = b.let(fmt::format("tensor.extract {}[{}] : {}", ctx.operand(node, 0), fmt::join(pos, ", "), ty(x)));
    const std::string none = b.let(fmt::format("arith.cmpi slt, {}, {} : index", bi, c0));
    const std::string keep = ge ? cmp(b, d, "oge", "ge", bv, v) : cmp(b, d, "ole", "le", bv, v);
    const std::string beaten = b.let(fmt::format("arith.xori {}, {} : i1", keep, b.let("arith.constant true")));
    const std::string move = b.let(fmt::format("arith.ori {}, {} : i1", none, beaten));
    b.emit(fmt::format("scf.yield {}, {} : index, {}", select(b, move, flat, bi, "index"), select(b, move, v, bv, st(d)), st(d)));
    b.emit("} else {");
    b.emit(fmt::format("scf.yield {}, {} : index, {}", bi, bv, st(d)));
    b.emit("}");
    b.emit(fmt::format("scf.yield {}#0, {}#1 : index, {}", upd, upd, st(d)));
    b.emit("}");
    const std::string found = b.let(fmt::format("arith.cmpi sge, {}#0, {} : index", sel, c0));
    const std::string next = b.fresh();
    b.emit(fmt::format("{} = scf.if {} -> ({}) {{", next, found, ty(flat_t)));
    const std::string cur = b.let(fmt::format("tensor.extract {}[{}#0] : {}", acc_in, sel, ty(flat_t)));
    std::string add = src_v;
    if (acc_dtype != d) add = b.let(fmt::format("arith.extf {} : {} to f32", add, el(d)));
    const std::string sum = combine(b, "add", acc_dtype, cur, add);
    const std::string inserted = b.let(fmt::format("tensor.insert {} into {}[{}#0] : {}", sum, acc_in, sel, ty(flat_t)));
    b.emit(fmt::format("scf.yield {} : {}", inserted, ty(flat_t)));
    b.emit("} else {");
    b.emit(fmt::format("scf.yield {} : {}", acc_in, ty(flat_t)));
    b.emit("}");
    b.emit(fmt::format("scf.yield {} : {}", next, ty(flat_t)));
    b.emit("}");
    code.flush();
    acc = code.name(result);
  }
  // Back to the operand's shape, then round.
  const TensorType shaped{out.shape, acc_dtype};
  if (r == 0) {
    acc = ctx.let(fmt::format("tensor.collapse_shape {} [] : {} into {}", acc, ty(flat_t), ty(shaped)), "r");
  } else if (r > 1) {
    std::vector<std::string> all;
    for (int64_t i = 0; i < r; ++i) all.push_back(std::to_string(i));
    acc = ctx.let(fmt::format("tensor.expand_shape {} [[{}]] output_shape [{}] : {} into {}", acc, fmt::join(all, ", "),
                              fmt::join(out.shape, ", "), ty(flat_t), ty(shaped)),
                  "r");
  }
  ctx.bind(node.outputs[0], round_to(ctx, acc, out));
}

// ---------------------------------------------------------------------------------------------
// convolution

struct Conv {
  std::vector<int64_t> strides, padding, lhs_dilation, rhs_dilation;
  int64_t feature_groups = 1, batch_groups = 1;
  int64_t in_batch, in_feature, k_in, k_out, out_batch, out_feature;
  std::vector<int64_t> in_spatial, k_spatial, out_spatial;
};

Conv read_conv(const Attributes& a, int64_t spatial) {
  const std::vector<int64_t> ones(static_cast<size_t>(spatial), 1);
  Conv c;
  c.strides = a.get_ints_or("window_strides", ones);
  c.padding = a.get_ints_or("padding", std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0));
  c.lhs_dilation = a.get_ints_or("lhs_dilation", ones);
  c.rhs_dilation = a.get_ints_or("rhs_dilation", ones);
  c.feature_groups = a.get_int_or("feature_group_count", 1);
  c.batch_groups = a.get_int_or("batch_group_count", 1);
  c.in_batch = a.get_int("input_batch_dimension");
  c.in_feature = a.get_int("input_feature_dimension");
  c.in_spatial = a.get_ints("input_spatial_dimensions");
  c.k_in = a.get_int("kernel_input_feature_dimension");
  c.k_out = a.get_int("kernel_output_feature_dimension");
  c.k_spatial = a.get_ints("kernel_spatial_dimensions");
  c.out_batch = a.get_int("output_batch_dimension");
  c.out_feature = a.get_int("output_feature_dimension");
  c.out_spatial = a.get_ints("output_spatial_dimensions");
  return c;
}

/// One linalg.generic over (output dims..., kernel spatial dims..., input features per group),
/// the interpreter's summation order (kernel dims of size 1 have no loop; see
/// with_unit_last_dim). The lhs is first padded and lhs-dilated with zeros; a 0/1 mask of the
/// same padded geometry makes padding cells skip their term (as the interpreter does: 0 * inf
/// would otherwise add a NaN). Groups index the lhs through floordiv maps.
void lower_convolution(LoweringContext& ctx, const Node& node) {
  const TensorType lhs = in_type(ctx, node, 0), rhs = in_type(ctx, node, 1), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const int64_t n = lhs.rank(), ns = n - 2;
  const Conv c = read_conv(node.attrs, ns);
  const DType acc_dtype = compute_dtype(out.dtype);
  const TensorType acc{out.shape, acc_dtype};
  auto size = [](const TensorType& t, int64_t d) { return t.shape[static_cast<size_t>(d)]; };
  int64_t terms = size(rhs, c.k_in);
  for (int64_t d : c.k_spatial) terms *= size(rhs, d);
  if (terms == 0) return ctx.bind(node.outputs[0], round_to(ctx, ctx.fill(acc, 0), out));
  // The lhs, zero-padded and lhs-dilated on its spatial dims.
  std::vector<int64_t> low(static_cast<size_t>(n), 0), high = low, interior = low;
  std::vector<int64_t> s_low, s_high, s_interior;
  Shape spatial_in;
  bool masked = false;
  for (int64_t i = 0; i < ns; ++i) {
    const auto d = static_cast<size_t>(c.in_spatial[static_cast<size_t>(i)]);
    low[d] = c.padding[2 * i];
    high[d] = c.padding[2 * i + 1];
    interior[d] = c.lhs_dilation[i] - 1;
    spatial_in.push_back(lhs.shape[d]);
    s_low.push_back(low[d]);
    s_high.push_back(high[d]);
    s_interior.push_back(interior[d]);
    masked = masked || low[d] > 0 || high[d] > 0 || interior[d] > 0;
  }
  const std::string p = padded(ctx, ctx.operand(node, 0), lhs, low, high, interior,
                               [&](const TensorType& t) { return ctx.fill(t, 0); });
  TensorType pt = lhs;
  for (int64_t d = 0; d < n; ++d) {
    pt.shape[d] = low[d] + high[d] + lhs.shape[d] + std::max<int64_t>(lhs.shape[d] - 1, 0) * interior[d];
  }
  // Loops: the output dims, then the kernel spatial dims and the input features of size > 1.
  std::vector<std::string> iters = repeat(static_cast<size_t>(n), "parallel");
  auto reduction_loop = [&](int64_t extent) -> std::string {
    if (extent == 1) return "";
    iters.push_back("reduction");
    return fmt::format("d{}", iters.size() - 1);
  };
  std::vector<std::string> kdim;
  for (int64_t i = 0; i < ns; ++i) kdim.push_back(reduction_loop(size(rhs, c.k_spatial[i])));
  const std::string cdim_or_empty = reduction_loop(size(rhs, c.k_in));
  const std::string cdim = cdim_or_empty.empty() ? "0" : cdim_or_empty;
  const int64_t k_out = size(rhs, c.k_out);
  const int64_t out_per_group = std::max<int64_t>(1, k_out / (c.feature_groups * c.batch_groups));
  const int64_t in_per_group = size(lhs, c.in_feature) / c.feature_groups;
  const int64_t batch_per_group = size(lhs, c.in_batch) / c.batch_groups;
  const std::string group = fmt::format("(d{} floordiv {})", c.out_feature, out_per_group);
  std::vector<std::string> lmap(static_cast<size_t>(n)), rmap(static_cast<size_t>(n)), mmap;
  lmap[c.in_batch] = c.batch_groups > 1 ? fmt::format("d{} + {} * {}", c.out_batch, group, batch_per_group)
                                        : fmt::format("d{}", c.out_batch);
  lmap[c.in_feature] = c.feature_groups > 1 ? fmt::format("{} * {} + {}", group, in_per_group, cdim) : cdim;
  rmap[c.k_out] = fmt::format("d{}", c.out_feature);
  rmap[c.k_in] = cdim;
  for (int64_t i = 0; i < ns; ++i) {
    const auto id = static_cast<size_t>(i);
    std::string e = fmt::format("d{} * {}", c.out_spatial[id], c.strides[id]);
    if (!kdim[id].empty()) e += fmt::format(" + {} * {}", kdim[id], c.rhs_dilation[id]);
    lmap[c.in_spatial[id]] = e;
    mmap.push_back(e);
    rmap[c.k_spatial[id]] = kdim[id].empty() ? "0" : kdim[id];
  }
  // Whether the lhs's last dim is read at a strided or grouped position (see with_unit_last_dim).
  const int64_t last = n - 1;
  bool strided_last = (last == c.in_feature && c.feature_groups > 1) || (last == c.in_batch && c.batch_groups > 1);
  for (int64_t i = 0; i < ns; ++i) strided_last = strided_last || (last == c.in_spatial[i] && c.strides[i] != 1);
  GenericInput lin{p, pt, lmap};
  if (strided_last) lin = with_unit_last_dim(ctx, lin);
  std::vector<GenericInput> ins = {lin, {ctx.operand(node, 1), rhs, rmap}};
  if (masked) {
    const TensorType ones_t{spatial_in, DType::kI8};
    Shape padded_spatial;
    for (int64_t i = 0; i < ns; ++i) padded_spatial.push_back(pt.shape[static_cast<size_t>(c.in_spatial[i])]);
    const std::string mask = padded(ctx, ctx.fill(ones_t, 1), ones_t, s_low, s_high, s_interior,
                                    [&](const TensorType& t) { return ctx.fill(t, 0); });
    GenericInput min{mask, {padded_spatial, DType::kI8}, mmap};
    if (c.strides[static_cast<size_t>(ns - 1)] != 1) min = with_unit_last_dim(ctx, min);
    ins.push_back(min);
  }
  const std::string result = ctx.generic(
      static_cast<int64_t>(iters.size()), iters, ins, acc, LoweringContext::identity(n), ctx.fill(acc, 0),
      [&](BodyBuilder& b, const Args& a) {
        std::string x = a[0], y = a[1];
        const std::string t = el(acc_dtype);
        if (acc_dtype != lhs.dtype) {
          x = b.let(fmt::format("arith.extf {} : {} to f32", x, el(lhs.dtype)));
          y = b.let(fmt::format("arith.extf {} : {} to f32", y, el(lhs.dtype)));
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
