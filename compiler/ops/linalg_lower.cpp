// MLIR lowering rules of the linalg family (ops in compiler/ops/linalg.cpp; semantics in
// docs/ir.md): dot_general and convolution, as loops or as calls to the GEMM / im2col + BLAS
// kernels (docs/compiler.md). f16/bf16 accumulate in f32 and round once at the end.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/kernels/cpu_conv.h"
#include "ingot/lower/lowering.h"
#include "ops/conv_config.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using namespace lowering_util;

// ---------------------------------------------------------------------------------------------
// dot_general

/// How one dot_general operand is seen as a row-major matrix for GEMM: its contracting dims must
/// be consecutive and either its leading dims (the matrix is (K, free)) or its trailing dims
/// ((free, K)); the free dims collapse into the other side. nullopt otherwise.
struct GemmOperand {
  bool contract_first = false;
  int64_t free = 1, k = 1;
};

std::optional<GemmOperand> gemm_view(const TensorType& t, const std::vector<int64_t>& contracting) {
  const auto n = static_cast<int64_t>(contracting.size());
  if (n == 0) return std::nullopt;
  for (int64_t i = 1; i < n; ++i) {
    if (contracting[static_cast<size_t>(i)] != contracting[0] + i) return std::nullopt;
  }
  GemmOperand g;
  const bool first = contracting[0] == 0, last = contracting.back() == t.rank() - 1;
  if (!first && !last) return std::nullopt;
  g.contract_first = first && !last;  // all dims contracting: see it as (1, K) / (K, 1) below
  for (int64_t d = 0; d < t.rank(); ++d) {
    const bool c = d >= contracting[0] && d <= contracting.back();
    (c ? g.k : g.free) *= t.shape[static_cast<size_t>(d)];
  }
  return g;
}

/// The operand without its leading `nb` batch dims (contracting dims renumbered), or nullopt when
/// its batch dims are not exactly its leading dims in order.
std::optional<std::pair<TensorType, std::vector<int64_t>>> without_batch(const TensorType& t,
                                                                         const std::vector<int64_t>& batch,
                                                                         const std::vector<int64_t>& contracting) {
  const auto nb = static_cast<int64_t>(batch.size());
  for (int64_t i = 0; i < nb; ++i) {
    if (batch[static_cast<size_t>(i)] != i) return std::nullopt;
  }
  TensorType rest{Shape(t.shape.begin() + nb, t.shape.end()), t.dtype};
  std::vector<int64_t> c;
  for (int64_t d : contracting) c.push_back(d - nb);
  return std::make_pair(rest, c);
}

/// Whether `dtype` products become GEMM calls of `gemm_function`: f32 and f64 always; f16 and bf16
/// only for the CUDA back end's "ingot_cuda_gemm" (cuBLAS's GemmEx with f32 compute, rounding the
/// product to the output dtype once, as the interpreter's f32 accumulation does; the CPU's GEMM
/// kernels are f32/f64 only).
bool gemm_dtype(const std::string& gemm_function, DType dtype) {
  if (dtype == DType::kF32 || dtype == DType::kF64) return true;
  return gemm_function == "ingot_cuda_gemm" && is_half(dtype);
}

/// A matrix product on f32/f64 operands (and f16/bf16 ones for CUDA: gemm_dtype) whose
/// contracting dims are a consecutive leading or trailing group of each operand (Dense on
/// (batch, ..., features) inputs, its weight gradient contracting over (batch, ...), plain 2-D
/// products) as a call to the library kernel
/// `<gemm_function>_<dtype>(A, B, C, trans_a, trans_b)` on row-major 2-D views (collapse/expand of
/// identity layouts: no copies). Batch dims that lead both operands in order (attention's
/// (batch, heads) products) call `<gemm_function>_batched_<dtype>` on 3-D views
/// (batch, rows, cols): one product per batch element.
bool lower_dot_as_gemm(LoweringContext& ctx, const Node& node, const TensorType& lhs_full, const TensorType& rhs_full,
                       const TensorType& out, const std::vector<int64_t>& lb, const std::vector<int64_t>& rb,
                       const std::vector<int64_t>& lc_full, const std::vector<int64_t>& rc_full) {
  if (!ctx.options().blas_gemm || !gemm_dtype(ctx.options().gemm_function, out.dtype)) return false;
  const auto l = without_batch(lhs_full, lb, lc_full), r = without_batch(rhs_full, rb, rc_full);
  if (!l || !r) return false;
  const auto& [lhs, lc] = *l;
  const auto& [rhs, rc] = *r;
  int64_t batch = 1;
  for (size_t i = 0; i < lb.size(); ++i) batch *= lhs_full.shape[i];
  std::optional<GemmOperand> a = gemm_view(lhs, lc), b = gemm_view(rhs, rc);
  if (!a || !b || a->free == 0 || b->free == 0 || a->k == 0 || batch == 0) return false;
  // An all-contracting operand is a row (1, K): the lhs as A, the rhs as B transposed.
  const int64_t m = a->free, n = b->free, k = a->k;
  const bool batched = !lb.empty();
  const std::string e = el(out.dtype);
  const std::string dyn = batched ? fmt::format("memref<?x?x?x{}>", e) : fmt::format("memref<?x?x{}>", e);
  const std::string fn = fmt::format("{}{}_{}", ctx.options().gemm_function, batched ? "_batched" : "", e);
  ctx.declare(fmt::format("func.func private @{}({}, {}, {}, i32, i32) attributes {{llvm.emit_c_interface}}", fn, dyn,
                          dyn, dyn));
  auto view_shape = [&](int64_t rows, int64_t cols) { return batched ? Shape{batch, rows, cols} : Shape{rows, cols}; };
  auto memref = [&](int64_t rows, int64_t cols) {
    return fmt::format("memref<{}x{}>", fmt::join(view_shape(rows, cols), "x"), e);
  };
  auto as_buffer = [&](const std::string& v, const TensorType& t, int64_t rows, int64_t cols) {
    const Shape shape = view_shape(rows, cols);
    const std::string v2 = reshape_value(ctx, v, t, shape);
    const std::string mr = ctx.library_read(v2, ty(TensorType{shape, t.dtype}), memref(rows, cols));
    return ctx.let(fmt::format("memref.cast {} : {} to {}", mr, memref(rows, cols), dyn), "m");
  };
  const std::string av = a->contract_first ? as_buffer(ctx.operand(node, 0), lhs_full, k, m)
                                           : as_buffer(ctx.operand(node, 0), lhs_full, m, k);
  const std::string bv = b->contract_first ? as_buffer(ctx.operand(node, 1), rhs_full, k, n)
                                           : as_buffer(ctx.operand(node, 1), rhs_full, n, k);
  const std::string c = ctx.let(fmt::format("memref.alloc() {{alignment = 64 : i64}} : {}", memref(m, n)), "m");
  const std::string cd = ctx.let(fmt::format("memref.cast {} : {} to {}", c, memref(m, n), dyn), "m");
  const std::string ta = ctx.let(fmt::format("arith.constant {} : i32", a->contract_first ? 1 : 0), "c");
  const std::string tb = ctx.let(fmt::format("arith.constant {} : i32", b->contract_first ? 0 : 1), "c");
  ctx.emit(fmt::format("func.call @{}({}, {}, {}, {}, {}) : ({}, {}, {}, i32, i32) -> ()", fn, av, bv, cd, ta, tb, dyn,
                       dyn, dyn));
  const TensorType flat{view_shape(m, n), out.dtype};
  const std::string t =
      ctx.let(fmt::format("bufferization.to_tensor {} restrict writable : {} to {}", c, memref(m, n), ty(flat)), "t");
  ctx.bind(node.outputs[0], reshape_value(ctx, t, flat, out.shape));
  return true;
}

void lower_dot_general(LoweringContext& ctx, const Node& node) {
  const TensorType lhs = in_type(ctx, node, 0), rhs = in_type(ctx, node, 1);
  const TensorType out = out_type(ctx, node);
  const std::vector<int64_t> lb = node.attrs.get_ints_or("lhs_batching_dimensions", {});
  const std::vector<int64_t> rb = node.attrs.get_ints_or("rhs_batching_dimensions", {});
  const std::vector<int64_t> lc = node.attrs.get_ints_or("lhs_contracting_dimensions", {});
  const std::vector<int64_t> rc = node.attrs.get_ints_or("rhs_contracting_dimensions", {});
  auto free_dims = [](int64_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d) {
      if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end()) f.push_back(d);
    }
    return f;
  };
  if (lower_dot_as_gemm(ctx, node, lhs, rhs, out, lb, rb, lc, rc)) return;
  const std::vector<int64_t> lf = free_dims(lhs.rank(), lb, lc), rf = free_dims(rhs.rank(), rb, rc);
  const int64_t nb = static_cast<int64_t>(lb.size()), nlf = static_cast<int64_t>(lf.size());
  const int64_t nrf = static_cast<int64_t>(rf.size()), nc = static_cast<int64_t>(lc.size());
  const int64_t loops = nb + nlf + nrf + nc;
  // Loop order (batch, lhs free, contracting, rhs free): the innermost loop runs over the rhs's
  // free (usually contiguous) dim with the accumulator indexed by it, so LLVM vectorises it
  // without reassociating the sum; each output element still sums k in ascending order, as the
  // interpreter does.
  auto d = [](int64_t i) { return fmt::format("d{}", i); };
  std::vector<std::string> lmap(static_cast<size_t>(lhs.rank())), rmap(static_cast<size_t>(rhs.rank()));
  for (int64_t i = 0; i < nb; ++i) {
    lmap[lb[i]] = d(i);
    rmap[rb[i]] = d(i);
  }
  for (int64_t i = 0; i < nlf; ++i) lmap[lf[i]] = d(nb + i);
  for (int64_t i = 0; i < nc; ++i) {
    lmap[lc[i]] = d(nb + nlf + i);
    rmap[rc[i]] = d(nb + nlf + i);
  }
  for (int64_t i = 0; i < nrf; ++i) rmap[rf[i]] = d(nb + nlf + nc + i);
  std::vector<std::string> iters, out_map;
  for (int64_t i = 0; i < loops; ++i) {
    const bool contracting = i >= nb + nlf && i < nb + nlf + nc;
    iters.push_back(contracting ? "reduction" : "parallel");
    if (!contracting) out_map.push_back(d(i));
  }
  const DType acc_dtype = is_half(out.dtype) ? DType::kF32 : out.dtype;
  const TensorType acc{out.shape, acc_dtype};
  const std::string init = ctx.fill(acc, 0);
  std::string r = ctx.generic(
      loops, iters, {{ctx.operand(node, 0), lhs, lmap}, {ctx.operand(node, 1), rhs, rmap}}, acc, out_map, init,
      [&](BodyBuilder& b, const Args& a) {
        std::string x = a[0], y = a[1];
        if (acc_dtype != lhs.dtype) {
          x = b.let(fmt::format("arith.extf {} : {} to f32", x, el(lhs.dtype)));
          y = b.let(fmt::format("arith.extf {} : {} to f32", y, el(rhs.dtype)));
        }
        const std::string t = el(acc_dtype);
        if (is_floating(acc_dtype)) {
          return b.let(
              fmt::format("arith.addf {}, {} : {}", a[2], b.let(fmt::format("arith.mulf {}, {} : {}", x, y, t)), t));
        }
        if (is_bool(acc_dtype)) {
          return b.let(fmt::format("arith.ori {}, {} : i1", a[2], b.let(fmt::format("arith.andi {}, {} : i1", x, y))));
        }
        return b.let(
            fmt::format("arith.addi {}, {} : {}", a[2], b.let(fmt::format("arith.muli {}, {} : {}", x, y, t)), t));
      });
  if (acc_dtype != out.dtype) r = round_to(ctx, r, out);
  ctx.bind(node.outputs[0], r);
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
                           padded_type(ones, s_low, s_high, s_interior),
                           {}};
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
  lmap[c.in_feature] =
      c.feature_groups > 1 ? fmt::format("{} * {} + {}", group, size(lt, c.in_feature) / c.feature_groups, cdim) : cdim;
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
/// (kernels/cpu/conv.cpp; `<LoweringOptions::conv_function>_<dtype>` in general): both operands and the result as 1-D
/// memrefs in their row-major layouts, the configuration as a dense i64 constant (kernels::encode_conv_spec). Returns
/// false when the generated loops are to be used instead.
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
  if (in.mask)
    ins.push_back(c.strides.back() != 1 ? with_unit_last_dim(ctx, *in.mask) : *in.mask);  // mask => spatial dims
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

void register_linalg_lowerings(OpRegistry& r) {
  r.set_lowering("dot_general", lower_dot_general);
  r.set_lowering("convolution", lower_convolution);
}

}  // namespace ingot::ir
