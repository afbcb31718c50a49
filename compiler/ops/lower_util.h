// Internal helpers shared by the lowering files of compiler/ops (*_lower.cpp).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"

namespace ingot::ir::lowering_util {

using lower::BodyBuilder;
using lower::GenericInput;
using lower::LoweringContext;
/// Block arguments / SSA names handed to generic-body callbacks.
using Args = std::vector<std::string>;

/// Type of result `i` / operand `i` of `node`.
inline TensorType out_type(const LoweringContext& ctx, const Node& node, size_t i = 0) {
  return ctx.graph().type(node.outputs.at(i));
}
inline TensorType in_type(const LoweringContext& ctx, const Node& node, size_t i) {
  return ctx.graph().type(node.inputs.at(i));
}
/// MLIR tensor type, scalar element type and storage element type (i8 for bool).
inline std::string ty(const TensorType& t) { return LoweringContext::type(t); }
inline std::string el(DType d) { return LoweringContext::element(d); }
inline std::string st(DType d) { return LoweringContext::storage(d); }
inline bool is_half(DType d) { return d == DType::kF16 || d == DType::kBF16; }
/// The dtype kernels compute in: f32 for f16/bf16, else the dtype itself.
inline DType compute_dtype(DType d) { return is_half(d) ? DType::kF32 : d; }
/// `n` copies of `s` (iterator types, maps).
inline std::vector<std::string> repeat(size_t n, const std::string& s) { return std::vector<std::string>(n, s); }
/// An `index` constant.
inline std::string index_const(BodyBuilder& b, int64_t v) { return b.let(fmt::format("arith.constant {} : index", v)); }

/// An `i64` constant.
inline std::string i64_const(BodyBuilder& b, int64_t v) { return b.let(fmt::format("arith.constant {} : i64", v)); }

/// `arith.select c, x, y` of the MLIR scalar type `type` ("index", "f32", a storage type, ...).
inline std::string select(BodyBuilder& b, const std::string& c, const std::string& x, const std::string& y,
                          const std::string& type) {
  return b.let(fmt::format("arith.select {}, {}, {} : {}", c, x, y, type));
}
/// The same on element type `d` (i1 for bool).
inline std::string select(BodyBuilder& b, const std::string& c, const std::string& x, const std::string& y, DType d) {
  return select(b, c, x, y, el(d));
}

/// Multi-index of the row-major flat index `flat` (an index value) in `shape` (all sizes > 0).
inline std::vector<std::string> unravel(BodyBuilder& b, const std::string& flat, const Shape& shape) {
  std::vector<std::string> idx;
  int64_t stride = num_elements(shape);
  for (int64_t size : shape) {
    stride /= size;
    const std::string q = b.let(fmt::format("arith.divui {}, {} : index", flat, index_const(b, stride)));
    idx.push_back(b.let(fmt::format("arith.remui {}, {} : index", q, index_const(b, size))));
  }
  return idx;
}

inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/// `x` (type `in`) reshaped to `to`: a collapse to 1-D (or rank 0) and/or an expand (no copy).
inline std::string reshape_value(LoweringContext& ctx, const std::string& x, const TensorType& in, const Shape& to) {
  const TensorType out{to, in.dtype};
  if (in.shape == to) return x;
  std::string v = x;
  TensorType cur = in;
  if (in.rank() > 1 || (in.rank() == 1 && to.empty())) {
    std::vector<std::string> all;
    for (int64_t i = 0; i < in.rank(); ++i) all.push_back(std::to_string(i));
    cur = TensorType{to.empty() ? Shape{} : Shape{num_elements(in.shape)}, in.dtype};
    v = ctx.let(fmt::format("tensor.collapse_shape {} [{}] : {} into {}", v,
                            to.empty() ? "" : fmt::format("[{}]", fmt::join(all, ", ")), ty(in), ty(cur)),
                "r");
  }
  if (cur.shape == to) return v;
  std::vector<std::string> all;
  for (size_t i = 0; i < to.size(); ++i) all.push_back(std::to_string(i));
  return ctx.let(fmt::format("tensor.expand_shape {} [{}] output_shape [{}] : {} into {}", v,
                             cur.rank() == 0 ? "" : fmt::format("[{}]", fmt::join(all, ", ")), fmt::join(to, ", "),
                             ty(cur), ty(out)),
                 "r");
}

/// `rank-0 tensor scalar` broadcast to `t` (extended to t's float type when they differ).
inline std::string splat(LoweringContext& ctx, const std::string& scalar, DType scalar_dtype, const TensorType& t) {
  return ctx.generic(t.rank(), repeat(static_cast<size_t>(t.rank()), "parallel"), {{scalar, {{}, scalar_dtype}, {}}}, t,
                     LoweringContext::identity(t.rank()), "", [&](BodyBuilder& b, const Args& a) {
                       if (scalar_dtype == t.dtype) return a[0];
                       return b.let(fmt::format("arith.extf {} : {} to {}", a[0], el(scalar_dtype), el(t.dtype)));
                     });
}

/// Rounds the f32 tensor `acc` to `out` (a half type); returns `acc` unchanged when `out` is not.
inline std::string round_to(LoweringContext& ctx, const std::string& acc, const TensorType& out) {
  if (!is_half(out.dtype)) return acc;
  return ctx.map({acc}, {{out.shape, DType::kF32}}, out, [&](BodyBuilder& b, const Args& a) {
    return b.let(fmt::format("arith.truncf {} : f32 to {}", a[0], el(out.dtype)));
  });
}

/// Writes `x` into `dest` (type `dt`) with element i of dim d at `low[d] + i * (interior[d] + 1)`,
/// dropping the elements that fall outside `dest` (negative low/high crop). Returns the result.
inline std::string insert_strided(LoweringContext& ctx, const std::string& x, const TensorType& xt,
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
  return ctx.let(
      fmt::format("tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", src, dest, fmt::join(offsets, ", "),
                  fmt::join(count, ", "), fmt::join(strides, ", "), ty(src_t), ty(dt)),
      "pad");
}

/// The type of `t` padded as the pad op would (edge low/high, interior).
inline TensorType padded_type(const TensorType& t, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
                              const std::vector<int64_t>& interior) {
  TensorType p = t;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    p.shape[d] = low[d] + high[d] + t.shape[d] + std::max<int64_t>(t.shape[d] - 1, 0) * interior[d];
  }
  return p;
}

/// `x` edge-padded by low/high and interior-padded (the pad op's geometry) into a tensor that
/// `make_fill(type)` creates; `x` itself when there is no padding at all.
inline std::string padded(LoweringContext& ctx, const std::string& x, const TensorType& xt,
                          const std::vector<int64_t>& low, const std::vector<int64_t>& high,
                          const std::vector<int64_t>& interior,
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
inline GenericInput with_unit_last_dim(LoweringContext& ctx, const GenericInput& in) {
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

}  // namespace ingot::ir::lowering_util
