// MLIR lowering rules of the data-movement, reduction and contraction ops (semantics in
// docs/ir.md). f16/bf16 reductions and contractions accumulate in f32 and round once at the end,
// as the interpreter does.
#include <fmt/format.h>

#include <numeric>
#include <optional>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using namespace lowering_util;


std::string reshape_value(LoweringContext& ctx, const std::string& x, const TensorType& in,
                          const Shape& to) {
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
                             cur.rank() == 0 ? "" : fmt::format("[{}]", fmt::join(all, ", ")),
                             fmt::join(to, ", "), ty(cur), ty(out)),
                 "r");
}

/// Broadcasts a rank-0 tensor `scalar` to `t`.
std::string splat(LoweringContext& ctx, const std::string& scalar, const TensorType& t,
                  DType scalar_dtype) {
  std::vector<std::string> iters(static_cast<size_t>(t.rank()), "parallel");
  return ctx.generic(t.rank(), iters, {{scalar, {{}, scalar_dtype}, {}}}, t,
                     LoweringContext::identity(t.rank()), "",
                     [&](BodyBuilder& b, const Args& a) {
                       if (scalar_dtype == t.dtype) return a[0];
                       return b.let(fmt::format("arith.extf {} : {} to {}", a[0], el(scalar_dtype), el(t.dtype)));
                     });
}

/// Rounds an f32 accumulator tensor to the half dtype `d`.
std::string round_to(LoweringContext& ctx, const std::string& acc, const TensorType& out) {
  const TensorType acc_t{out.shape, DType::kF32};
  return ctx.map({acc}, {acc_t}, out, [&](BodyBuilder& b, const Args& a) {
    return b.let(fmt::format("arith.truncf {} : f32 to {}", a[0], el(out.dtype)));
  });
}

std::string combine(BodyBuilder& b, const std::string& computation, DType d, const std::string& x,
                    const std::string& acc) {
  const std::string t = el(d);
  if (is_floating(d)) {
    const char* op = computation == "add" ? "arith.addf" : computation == "mul" ? "arith.mulf"
                     : computation == "max" ? "arith.maximumf" : "arith.minimumf";
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
  const std::string init = splat(ctx, ctx.operand(node, 1), acc, out.dtype);
  std::vector<std::string> iters, out_map;
  for (int64_t d = 0; d < x.rank(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    iters.push_back(reduced ? "reduction" : "parallel");
    if (!reduced) out_map.push_back(fmt::format("d{}", d));
  }
  std::string r = ctx.generic(x.rank(), iters, {{ctx.operand(node, 0), x, LoweringContext::identity(x.rank())}},
                              acc, out_map, init, [&](BodyBuilder& b, const Args& a) {
                                std::string v = a[0];
                                if (acc_dtype != x.dtype) v = b.let(fmt::format("arith.extf {} : {} to f32", v, el(x.dtype)));
                                return combine(b, computation, acc_dtype, v, a[1]);
                              });
  if (acc_dtype != out.dtype) r = round_to(ctx, r, out);
  ctx.bind(node.outputs[0], r);
}

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
std::optional<std::pair<TensorType, std::vector<int64_t>>> without_batch(const TensorType& t, const std::vector<int64_t>& batch,
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
bool lower_dot_as_gemm(LoweringContext& ctx, const Node& node, const TensorType& lhs_full,
                       const TensorType& rhs_full, const TensorType& out, const std::vector<int64_t>& lb,
                       const std::vector<int64_t>& rb, const std::vector<int64_t>& lc_full,
                       const std::vector<int64_t>& rc_full) {
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
  ctx.declare(fmt::format("func.func private @{}({}, {}, {}, i32, i32) attributes {{llvm.emit_c_interface}}",
                          fn, dyn, dyn, dyn));
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
  ctx.emit(fmt::format("func.call @{}({}, {}, {}, {}, {}) : ({}, {}, {}, i32, i32) -> ()", fn, av, bv, cd, ta,
                       tb, dyn, dyn, dyn));
  const TensorType flat{view_shape(m, n), out.dtype};
  const std::string t = ctx.let(fmt::format("bufferization.to_tensor {} restrict writable : {} to {}", c, memref(m, n), ty(flat)), "t");
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
      loops, iters, {{ctx.operand(node, 0), lhs, lmap}, {ctx.operand(node, 1), rhs, rmap}}, acc,
      out_map, init, [&](BodyBuilder& b, const Args& a) {
        std::string x = a[0], y = a[1];
        if (acc_dtype != lhs.dtype) {
          x = b.let(fmt::format("arith.extf {} : {} to f32", x, el(lhs.dtype)));
          y = b.let(fmt::format("arith.extf {} : {} to f32", y, el(rhs.dtype)));
        }
        const std::string t = el(acc_dtype);
        if (is_floating(acc_dtype)) {
          return b.let(fmt::format("arith.addf {}, {} : {}", a[2], b.let(fmt::format("arith.mulf {}, {} : {}", x, y, t)), t));
        }
        if (is_bool(acc_dtype)) {
          return b.let(fmt::format("arith.ori {}, {} : i1", a[2], b.let(fmt::format("arith.andi {}, {} : i1", x, y))));
        }
        return b.let(fmt::format("arith.addi {}, {} : {}", a[2], b.let(fmt::format("arith.muli {}, {} : {}", x, y, t)), t));
      });
  if (acc_dtype != out.dtype) r = round_to(ctx, r, out);
  ctx.bind(node.outputs[0], r);
}

void lower_broadcast(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  const std::vector<int64_t>& dims = node.attrs.get_ints("broadcast_dimensions");
  std::vector<std::string> map;
  for (size_t i = 0; i < dims.size(); ++i) {
    map.push_back(x.shape[i] == 1 && out.shape[dims[i]] != 1 ? "0" : fmt::format("d{}", dims[i]));
  }
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  ctx.bind(node.outputs[0], ctx.generic(out.rank(), iters, {{ctx.operand(node, 0), x, map}}, out,
                                        LoweringContext::identity(out.rank()), "",
                                        [](BodyBuilder&, const Args& a) { return a[0]; }));
}

void lower_transpose(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  const std::vector<int64_t>& perm = node.attrs.get_ints("permutation");
  std::vector<std::string> map(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) map[perm[i]] = fmt::format("d{}", i);
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  ctx.bind(node.outputs[0], ctx.generic(out.rank(), iters, {{ctx.operand(node, 0), x, map}}, out,
                                        LoweringContext::identity(out.rank()), "",
                                        [](BodyBuilder&, const Args& a) { return a[0]; }));
}

void lower_reverse(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0);
  const std::vector<int64_t>& dims = node.attrs.get_ints("dimensions");
  std::vector<std::string> map = LoweringContext::identity(x.rank());
  for (int64_t d : dims) map[d] = fmt::format("-d{} + {}", d, x.shape[d] - 1);
  std::vector<std::string> iters(static_cast<size_t>(x.rank()), "parallel");
  ctx.bind(node.outputs[0], ctx.generic(x.rank(), iters, {{ctx.operand(node, 0), x, map}}, x,
                                        LoweringContext::identity(x.rank()), "",
                                        [](BodyBuilder&, const Args& a) { return a[0]; }));
}

void lower_slice(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  if (x.rank() == 0) return ctx.bind(node.outputs[0], ctx.operand(node, 0));
  ctx.bind(node.outputs[0],
           ctx.let(fmt::format("tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", ctx.operand(node, 0),
                               fmt::join(node.attrs.get_ints("start_indices"), ", "), fmt::join(out.shape, ", "),
                               fmt::join(node.attrs.get_ints("strides"), ", "), ty(x), ty(out)),
                   "s"));
}

void lower_concatenate(LoweringContext& ctx, const Node& node) {
  const TensorType out = out_type(ctx, node);
  const int64_t dim = node.attrs.get_int("dimension");
  std::string acc = ctx.empty(out);
  int64_t offset = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const TensorType t = in_type(ctx, node, i);
    std::vector<int64_t> offsets(static_cast<size_t>(out.rank()), 0);
    offsets[dim] = offset;
    std::vector<int64_t> ones(static_cast<size_t>(out.rank()), 1);
    acc = ctx.let(fmt::format("tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", ctx.operand(node, i), acc,
                              fmt::join(offsets, ", "), fmt::join(t.shape, ", "), fmt::join(ones, ", "), ty(t), ty(out)),
                  "cat");
    offset += t.shape[dim];
  }
  ctx.bind(node.outputs[0], acc);
}

}  // namespace

void register_structural_lowerings(OpRegistry& r) {
  r.set_lowering("reshape", [](LoweringContext& ctx, const Node& node) {
    ctx.bind(node.outputs[0], reshape_value(ctx, ctx.operand(node, 0), in_type(ctx, node, 0), out_type(ctx, node).shape));
  });
  r.set_lowering("broadcast_in_dim", lower_broadcast);
  r.set_lowering("transpose", lower_transpose);
  r.set_lowering("reverse", lower_reverse);
  r.set_lowering("slice", lower_slice);
  r.set_lowering("concatenate", lower_concatenate);
  r.set_lowering("reduce", lower_reduce);
  r.set_lowering("dot_general", lower_dot_general);
  r.set_lowering("optimization_barrier", [](LoweringContext& ctx, const Node& node) {
    for (size_t i = 0; i < node.inputs.size(); ++i) ctx.bind(node.outputs[i], ctx.operand(node, i));
  });
}

}  // namespace ingot::ir
