// MLIR lowering rules of the elementwise family (semantics in docs/ir.md; each rule reproduces
// the interpreter kernel's edge cases: NaN propagation, XLA's integer division by zero,
// saturating float -> int conversion).
#include <fmt/format.h>

#include <cstring>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using lowering_util::Args;
using lowering_util::BodyBuilder;
using lowering_util::el;
using lowering_util::in_type;
using lowering_util::is_half;
using lowering_util::LoweringContext;
using lowering_util::out_type;
using lowering_util::select;

/// arith.cmpi predicate for a comparison direction on a signed/unsigned integer or bool.
std::string int_predicate(const std::string& dir, bool is_signed) {
  if (dir == "EQ") return "eq";
  if (dir == "NE") return "ne";
  const std::string s = is_signed ? "s" : "u";
  if (dir == "LT") return s + "lt";
  if (dir == "LE") return s + "le";
  if (dir == "GT") return s + "gt";
  return s + "ge";
}

/// arith.cmpf predicate: ordered comparisons, and "une" for NE (true when either is NaN), IEEE.
std::string float_predicate(const std::string& dir) {
  if (dir == "EQ") return "oeq";
  if (dir == "NE") return "une";
  if (dir == "LT") return "olt";
  if (dir == "LE") return "ole";
  if (dir == "GT") return "ogt";
  return "oge";
}

std::string cmp(BodyBuilder& b, DType d, const std::string& dir, const std::string& x, const std::string& y) {
  if (is_floating(d)) return b.let(fmt::format("arith.cmpf {}, {}, {} : {}", float_predicate(dir), x, y, el(d)));
  return b.let(fmt::format("arith.cmpi {}, {}, {} : {}", int_predicate(dir, is_signed_integer(d)), x, y, el(d)));
}

/// Integer division/remainder with XLA's semantics: x / 0 = -1 (all ones), x % 0 = x,
/// INT_MIN / -1 = INT_MIN and INT_MIN % -1 = 0; the divisor is made safe first (no UB).
std::string int_div_rem(BodyBuilder& b, DType d, const std::string& x, const std::string& y, bool rem) {
  const bool s = is_signed_integer(d);
  const std::string zero = b.constant(0, d);
  const std::string one = b.constant(1, d);
  const std::string by_zero = cmp(b, d, "EQ", y, zero);
  std::string bad = by_zero;
  std::string overflow;
  if (s) {
    const int64_t bits = dtype_size(d) * 8;
    const std::string min =
        b.let(fmt::format("arith.constant {} : {}",
                          bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)), el(d)));
    const std::string minus_one = b.constant(-1, d);
    const std::string x_min = cmp(b, d, "EQ", x, min);
    const std::string y_m1 = cmp(b, d, "EQ", y, minus_one);
    overflow = b.let(fmt::format("arith.andi {}, {} : i1", x_min, y_m1));
    bad = b.let(fmt::format("arith.ori {}, {} : i1", by_zero, overflow));
  }
  const std::string safe = select(b, bad, one, y, d);
  const std::string q =
      b.let(fmt::format("arith.{}{} {}, {} : {}", rem ? "rem" : "div", s ? "si" : "ui", x, safe, el(d)));
  if (rem) {
    std::string r = q;
    if (s) r = select(b, overflow, zero, r, d);
    return select(b, by_zero, x, r, d);
  }
  std::string r = q;
  if (s) r = select(b, overflow, x, r, d);  // INT_MIN / -1 = INT_MIN (= x)
  const std::string all_ones = b.constant(-1, d);
  return select(b, by_zero, all_ones, r, d);
}

/// Integer power with the interpreter's semantics: square-and-multiply over every bit of the
/// exponent (an scf.for of bit-width steps; extra steps with a zero exponent change nothing),
/// products wrap; a negative exponent gives 0 unless the base is 1 (1) or -1 (+-1 by parity).
std::string int_power(BodyBuilder& b, DType d, const std::string& x, const std::string& y) {
  const std::string t = el(d);
  const std::string zero = b.constant(0, d), one = b.constant(1, d);
  const std::string lb = b.let("arith.constant 0 : index");
  const std::string ub = b.let(fmt::format("arith.constant {} : index", dtype_size(d) * 8));
  const std::string step = b.let("arith.constant 1 : index");
  const std::string loop = b.fresh(), i = b.fresh(), acc = b.fresh(), base = b.fresh(), e = b.fresh();
  b.emit(fmt::format("{}:3 = scf.for {} = {} to {} step {} iter_args({} = {}, {} = {}, {} = {}) -> ({}, {}, {}) {{",
                     loop, i, lb, ub, step, acc, one, base, x, e, y, t, t, t));
  const std::string odd = cmp(b, d, "NE", b.let(fmt::format("arith.andi {}, {} : {}", e, one, t)), zero);
  const std::string product = b.let(fmt::format("arith.muli {}, {} : {}", acc, base, t));
  const std::string next_acc = select(b, odd, product, acc, d);
  const std::string square = b.let(fmt::format("arith.muli {}, {} : {}", base, base, t));
  const std::string shifted = b.let(fmt::format("arith.shrui {}, {} : {}", e, one, t));
  b.emit(fmt::format("scf.yield {}, {}, {} : {}, {}, {}", next_acc, square, shifted, t, t, t));
  b.emit("}");
  const std::string result = loop + "#0";
  if (!is_signed_integer(d)) return result;
  const std::string minus_one = b.constant(-1, d);
  const std::string exp_odd = cmp(b, d, "NE", b.let(fmt::format("arith.andi {}, {} : {}", y, one, t)), zero);
  const std::string of_minus_one = select(b, exp_odd, minus_one, one, d);
  const std::string negative =
      select(b, cmp(b, d, "EQ", x, one), one, select(b, cmp(b, d, "EQ", x, minus_one), of_minus_one, zero, d), d);
  return select(b, cmp(b, d, "LT", y, zero), negative, result, d);
}

std::string binary_scalar(BodyBuilder& b, const std::string& op, DType d, const std::string& x, const std::string& y) {
  const std::string t = el(d);
  if (is_floating(d)) {
    static const std::map<std::string, std::string> kFloat = {
        {"add", "arith.addf"},         {"subtract", "arith.subf"},    {"multiply", "arith.mulf"},
        {"divide", "arith.divf"},      {"remainder", "arith.remf"},   {"power", "math.powf"},
        {"maximum", "arith.maximumf"}, {"minimum", "arith.minimumf"}, {"atan2", "math.atan2"}};
    return b.let(fmt::format("{} {}, {} : {}", kFloat.at(op), x, y, t));
  }
  const bool s = is_signed_integer(d);
  if (op == "add") return b.let(fmt::format("arith.addi {}, {} : {}", x, y, t));
  if (op == "subtract") return b.let(fmt::format("arith.subi {}, {} : {}", x, y, t));
  if (op == "multiply") return b.let(fmt::format("arith.muli {}, {} : {}", x, y, t));
  if (op == "power") return int_power(b, d, x, y);
  if (op == "divide") return int_div_rem(b, d, x, y, false);
  if (op == "remainder") return int_div_rem(b, d, x, y, true);
  if (op == "maximum") return b.let(fmt::format("arith.max{} {}, {} : {}", s ? "si" : "ui", x, y, t));
  if (op == "minimum") return b.let(fmt::format("arith.min{} {}, {} : {}", s ? "si" : "ui", x, y, t));
  if (op == "and") return b.let(fmt::format("arith.andi {}, {} : {}", x, y, t));
  if (op == "or") return b.let(fmt::format("arith.ori {}, {} : {}", x, y, t));
  if (op == "xor") return b.let(fmt::format("arith.xori {}, {} : {}", x, y, t));
  throw Error(ErrorCode::kUnimplemented, fmt::format("no lowering for op '{}' on {}", op, dtype_name(d)),
              "run it with the reference interpreter");
}

std::string unary_scalar(BodyBuilder& b, const std::string& op, DType d, const std::string& x) {
  const std::string t = el(d);
  if (!is_floating(d)) {
    if (op == "negate") return b.let(fmt::format("arith.subi {}, {} : {}", b.constant(0, d), x, t));
    if (op == "abs") return b.let(fmt::format("math.absi {} : {}", x, t));
    if (op == "not") {
      // (BodyBuilder::constant spells a bool "arith.constant true : i1", which MLIR does not parse.)
      const std::string ones = is_bool(d) ? b.let("arith.constant true") : b.constant(-1, d);
      return b.let(fmt::format("arith.xori {}, {} : {}", x, ones, t));
    }
    if (op == "sign") {
      const std::string zero = b.constant(0, d);
      const std::string pos = b.let(fmt::format("arith.extui {} : i1 to {}", cmp(b, d, "GT", x, zero), t));
      const std::string neg = b.let(fmt::format("arith.extui {} : i1 to {}", cmp(b, d, "LT", x, zero), t));
      return b.let(fmt::format("arith.subi {}, {} : {}", pos, neg, t));
    }
    throw Error(ErrorCode::kUnimplemented, fmt::format("no lowering for op '{}' on {}", op, dtype_name(d)));
  }
  static const std::map<std::string, std::string> kMath = {{"exponential", "math.exp"},
                                                           {"log", "math.log"},
                                                           {"log_plus_one", "math.log1p"},
                                                           {"exponential_minus_one", "math.expm1"},
                                                           {"tanh", "math.tanh"},
                                                           {"sqrt", "math.sqrt"},
                                                           {"sine", "math.sin"},
                                                           {"cosine", "math.cos"},
                                                           {"floor", "math.floor"},
                                                           {"ceil", "math.ceil"},
                                                           {"round_nearest_even", "math.roundeven"},
                                                           {"erf", "math.erf"},
                                                           {"abs", "math.absf"}};
  if (auto it = kMath.find(op); it != kMath.end()) return b.let(fmt::format("{} {} : {}", it->second, x, t));
  if (op == "negate") return b.let(fmt::format("arith.negf {} : {}", x, t));
  if (op == "rsqrt") {
    const std::string s = b.let(fmt::format("math.sqrt {} : {}", x, t));
    return b.let(fmt::format("arith.divf {}, {} : {}", b.constant(1, d), s, t));
  }
  if (op == "logistic") {  // x >= 0 ? 1 / (1 + e^-x) : e^x / (1 + e^x), as the interpreter
    const std::string one = b.constant(1, d);
    const std::string en = b.let(fmt::format("math.exp {} : {}", b.let(fmt::format("arith.negf {} : {}", x, t)), t));
    const std::string pos =
        b.let(fmt::format("arith.divf {}, {} : {}", one, b.let(fmt::format("arith.addf {}, {} : {}", one, en, t)), t));
    const std::string ep = b.let(fmt::format("math.exp {} : {}", x, t));
    const std::string neg =
        b.let(fmt::format("arith.divf {}, {} : {}", ep, b.let(fmt::format("arith.addf {}, {} : {}", one, ep, t)), t));
    return select(b, cmp(b, d, "GE", x, b.constant(0, d)), pos, neg, d);
  }
  if (op == "sign") {  // NaN and +-0 unchanged, else copysign(1, x)
    const std::string zero = b.constant(0, d);
    const std::string keep = b.let(fmt::format("arith.cmpf ueq, {}, {} : {}", x, zero, t));
    const std::string unit = b.let(fmt::format("math.copysign {}, {} : {}", b.constant(1, d), x, t));
    return select(b, keep, x, unit, d);
  }
  if (op == "is_finite") {  // |x| < inf: false for inf and NaN (ordered comparison)
    const std::string a = b.let(fmt::format("math.absf {} : {}", x, t));
    return b.let(fmt::format("arith.cmpf olt, {}, {} : {}", a, b.constant(INFINITY, d), t));
  }
  throw Error(ErrorCode::kUnimplemented, fmt::format("no lowering for op '{}' on {}", op, dtype_name(d)));
}

/// convert with the interpreter's semantics (element.h's convert_element).
std::string convert_scalar(BodyBuilder& b, DType from, DType to, const std::string& x) {
  if (from == to) return x;
  const std::string tf = el(from), tt = el(to);
  if (is_bool(to)) {
    const std::string zero = b.constant(0, from);
    return is_floating(from) ? b.let(fmt::format("arith.cmpf une, {}, {} : {}", x, zero, tf))
                             : b.let(fmt::format("arith.cmpi ne, {}, {} : {}", x, zero, tf));
  }
  if (is_floating(from) && is_floating(to)) {
    // Through f32 for the half types (as the interpreter); f64 <-> f32 directly.
    std::string v = x;
    DType cur = from;
    auto to_f32 = [&] {
      if (cur == DType::kF32) return;
      v = b.let(fmt::format("arith.{} {} : {} to f32", dtype_size(cur) < 4 ? "extf" : "truncf", v, el(cur)));
      cur = DType::kF32;
    };
    if (to == DType::kF64) {
      to_f32();
      return b.let(fmt::format("arith.extf {} : f32 to f64", v));
    }
    to_f32();
    if (to == DType::kF32) return v;
    return b.let(fmt::format("arith.truncf {} : f32 to {}", v, tt));
  }
  if (!is_floating(from) && is_floating(to)) {
    const bool s = is_signed_integer(from);
    std::string v =
        b.let(fmt::format("arith.{}itofp {} : {} to {}", s ? "s" : "u", x, tf, dtype_size(to) < 4 ? "f32" : tt));
    if (dtype_size(to) < 4) v = b.let(fmt::format("arith.truncf {} : f32 to {}", v, tt));
    return v;
  }
  if (!is_floating(from) && !is_floating(to)) {
    const int64_t fs = is_bool(from) ? 0 : dtype_size(from), ts = dtype_size(to);
    if (fs == ts) return x;
    if (fs > ts) return b.let(fmt::format("arith.trunci {} : {} to {}", x, tf, tt));
    return b.let(fmt::format("arith.ext{}i {} : {} to {}", is_signed_integer(from) ? "s" : "u", x, tf, tt));
  }
  // float -> integer: truncate toward zero in f64, NaN -> 0, saturate at the bounds.
  std::string v = x;
  if (from != DType::kF64) {
    if (dtype_size(from) < 4) v = b.let(fmt::format("arith.extf {} : {} to f32", v, tf));
    v = b.let(fmt::format("arith.extf {} : f32 to f64", v));
  }
  const bool s = is_signed_integer(to);
  double lo = 0, hi = 0;
  std::string lo_int, hi_int;  // exact integer bounds (a double cannot hold INT64_MAX)
  dispatch_dtype(to, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      lo = static_cast<double>(std::numeric_limits<T>::min());
      hi = static_cast<double>(std::numeric_limits<T>::max());
      // MLIR integer literals are signless; print the bit pattern as a signed value.
      using S = std::make_signed_t<T>;
      lo_int = std::to_string(static_cast<int64_t>(static_cast<S>(std::numeric_limits<T>::min())));
      hi_int = std::to_string(static_cast<int64_t>(static_cast<S>(std::numeric_limits<T>::max())));
    }
  });
  const std::string t = b.let(fmt::format("math.trunc {} : f64", v));
  const std::string lo_c = b.constant(lo, DType::kF64), hi_c = b.constant(hi, DType::kF64);
  const std::string le = b.let(fmt::format("arith.cmpf ole, {}, {} : f64", t, lo_c));
  const std::string ge = b.let(fmt::format("arith.cmpf oge, {}, {} : f64", t, hi_c));
  const std::string nan = b.let(fmt::format("arith.cmpf uno, {}, {} : f64", t, t));
  const std::string zero = b.constant(0, DType::kF64);
  const std::string safe = b.let(fmt::format(
      "arith.select {}, {}, {} : f64",
      b.let(fmt::format("arith.ori {}, {} : i1", b.let(fmt::format("arith.ori {}, {} : i1", le, ge)), nan)), zero, t));
  std::string r = b.let(fmt::format("arith.fpto{}i {} : f64 to {}", s ? "s" : "u", safe, tt));
  const std::string min_i = b.let(fmt::format("arith.constant {} : {}", lo_int, tt));
  const std::string max_i = b.let(fmt::format("arith.constant {} : {}", hi_int, tt));
  r = select(b, le, min_i, r, to);
  r = select(b, ge, max_i, r, to);
  return r;
}

void bind1(LoweringContext& ctx, const Node& node, const std::string& v) { ctx.bind(node.outputs.at(0), v); }

/// f16/bf16 scalar `x` as f32, and back (round to nearest even).
std::string widen(BodyBuilder& b, DType d, const std::string& x) {
  return b.let(fmt::format("arith.extf {} : {} to f32", x, el(d)));
}
std::string narrow(BodyBuilder& b, DType d, const std::string& x) {
  return b.let(fmt::format("arith.truncf {} : f32 to {}", x, el(d)));
}

/// Elementwise op over same-shaped operands; scalar operands (select's pred, clamp's bounds)
/// are broadcast by a constant affine map.
std::string elementwise(LoweringContext& ctx, const Node& node,
                        const std::function<std::string(BodyBuilder&, const Args&)>& body) {
  const TensorType out = out_type(ctx, node);
  std::vector<lower::GenericInput> ins;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const TensorType t = in_type(ctx, node, i);
    std::vector<std::string> map = t.rank() == 0 ? std::vector<std::string>{} : LoweringContext::identity(out.rank());
    ins.push_back({ctx.operand(node, i), t, map});
  }
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  return ctx.generic(out.rank(), iters, ins, out, LoweringContext::identity(out.rank()), "", body);
}

std::string hex_bytes(const Array& a) {
  std::string s = "0x";
  const auto* p = static_cast<const unsigned char*>(a.raw_data());
  for (int64_t i = 0; i < a.nbytes(); ++i) s += fmt::format("{:02X}", p[i]);
  return s;
}

void lower_constant(LoweringContext& ctx, const Node& node) {
  const Array& v = node.attrs.get_array("value");
  const TensorType t{v.shape(), v.dtype()};
  if (v.size() == 0) return bind1(ctx, node, ctx.empty(t));
  const std::string literal = fmt::format("\"{}\"", hex_bytes(v));  // bools: one byte each
  bind1(ctx, node, ctx.let(fmt::format("arith.constant dense<{}> : {}", literal, LoweringContext::type(t)), "c"));
}

void lower_iota(LoweringContext& ctx, const Node& node) {
  const TensorType out = out_type(ctx, node);
  const int64_t dim = node.attrs.get_int("iota_dimension");
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  bind1(ctx, node,
        ctx.generic(out.rank(), iters, {}, out, LoweringContext::identity(out.rank()), "",
                    [&](BodyBuilder& b, const Args&) {
                      const std::string i = b.index(dim);
                      const std::string i64 = b.let(fmt::format("arith.index_cast {} : index to i64", i));
                      return convert_scalar(b, DType::kI64, out.dtype, i64);
                    }));
}

}  // namespace

void register_elementwise_lowerings(OpRegistry& r) {
  r.set_lowering("constant", lower_constant);
  r.set_lowering("iota", lower_iota);
  r.set_lowering("convert", [](LoweringContext& ctx, const Node& node) {
    const DType from = in_type(ctx, node, 0).dtype, to = out_type(ctx, node).dtype;
    bind1(ctx, node,
          elementwise(ctx, node, [&](BodyBuilder& b, const Args& a) { return convert_scalar(b, from, to, a[0]); }));
  });
  for (const char* op :
       {"negate", "abs", "sign", "exponential", "log", "log_plus_one", "exponential_minus_one", "tanh", "logistic",
        "sqrt", "rsqrt", "sine", "cosine", "floor", "ceil", "round_nearest_even", "erf", "not", "is_finite"}) {
    const std::string name = op;
    r.set_lowering(name, [name](LoweringContext& ctx, const Node& node) {
      const DType d = in_type(ctx, node, 0).dtype;
      bind1(ctx, node, elementwise(ctx, node, [&](BodyBuilder& b, const Args& a) {
              if (!is_half(d)) return unary_scalar(b, name, d, a[0]);
              // f16/bf16: the whole op in f32, rounded once on store, as the interpreter (the
              // emulate-floats stage widens arith ops only, not math ops or composite formulas).
              const std::string wide = unary_scalar(b, name, DType::kF32, widen(b, d, a[0]));
              return name == "is_finite" ? wide : narrow(b, d, wide);
            }));
    });
  }
  for (const char* op : {"add", "subtract", "multiply", "divide", "remainder", "power", "maximum", "minimum", "atan2",
                         "and", "or", "xor"}) {
    const std::string name = op;
    r.set_lowering(name, [name](LoweringContext& ctx, const Node& node) {
      const DType d = in_type(ctx, node, 0).dtype;
      bind1(ctx, node, elementwise(ctx, node, [&](BodyBuilder& b, const Args& a) {
              if (!is_half(d)) return binary_scalar(b, name, d, a[0], a[1]);
              return narrow(b, d, binary_scalar(b, name, DType::kF32, widen(b, d, a[0]), widen(b, d, a[1])));
            }));
    });
  }
  r.set_lowering("compare", [](LoweringContext& ctx, const Node& node) {
    const DType d = in_type(ctx, node, 0).dtype;
    const std::string dir = node.attrs.get_string("comparison_direction");
    bind1(ctx, node, elementwise(ctx, node, [&](BodyBuilder& b, const Args& a) { return cmp(b, d, dir, a[0], a[1]); }));
  });
  r.set_lowering("select", [](LoweringContext& ctx, const Node& node) {
    const DType d = out_type(ctx, node).dtype;
    bind1(ctx, node,
          elementwise(ctx, node, [&](BodyBuilder& b, const Args& a) { return select(b, a[0], a[1], a[2], d); }));
  });
  r.set_lowering("clamp", [](LoweringContext& ctx, const Node& node) {
    const DType d = out_type(ctx, node).dtype;
    bind1(ctx, node, elementwise(ctx, node, [&](BodyBuilder& b, const Args& a) {
            return binary_scalar(b, "minimum", d, binary_scalar(b, "maximum", d, a[1], a[0]), a[2]);
          }));
  });
}

}  // namespace ingot::ir
