// MLIR lowering rules of the shape family (ops in compiler/ops/shape.cpp; semantics in
// docs/ir.md): reshape, broadcast_in_dim, transpose, reverse, slice, concatenate and pad.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using namespace lowering_util;

void lower_broadcast(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  const std::vector<int64_t>& dims = node.attrs.get_ints("broadcast_dimensions");
  std::vector<std::string> map;
  for (size_t i = 0; i < dims.size(); ++i) {
    map.push_back(x.shape[i] == 1 && out.shape[dims[i]] != 1 ? "0" : fmt::format("d{}", dims[i]));
  }
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  ctx.bind(node.outputs[0],
           ctx.generic(out.rank(), iters, {{ctx.operand(node, 0), x, map}}, out, LoweringContext::identity(out.rank()),
                       "", [](BodyBuilder&, const Args& a) { return a[0]; }));
}

void lower_transpose(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  const std::vector<int64_t>& perm = node.attrs.get_ints("permutation");
  std::vector<std::string> map(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) map[perm[i]] = fmt::format("d{}", i);
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  ctx.bind(node.outputs[0],
           ctx.generic(out.rank(), iters, {{ctx.operand(node, 0), x, map}}, out, LoweringContext::identity(out.rank()),
                       "", [](BodyBuilder&, const Args& a) { return a[0]; }));
}

void lower_reverse(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0);
  const std::vector<int64_t>& dims = node.attrs.get_ints("dimensions");
  std::vector<std::string> map = LoweringContext::identity(x.rank());
  for (int64_t d : dims) map[d] = fmt::format("-d{} + {}", d, x.shape[d] - 1);
  std::vector<std::string> iters(static_cast<size_t>(x.rank()), "parallel");
  ctx.bind(node.outputs[0],
           ctx.generic(x.rank(), iters, {{ctx.operand(node, 0), x, map}}, x, LoweringContext::identity(x.rank()), "",
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
    acc =
        ctx.let(fmt::format("tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", ctx.operand(node, i), acc,
                            fmt::join(offsets, ", "), fmt::join(t.shape, ", "), fmt::join(ones, ", "), ty(t), ty(out)),
                "cat");
    offset += t.shape[dim];
  }
  ctx.bind(node.outputs[0], acc);
}

void lower_pad(LoweringContext& ctx, const Node& node) {
  const TensorType x = in_type(ctx, node, 0), out = out_type(ctx, node);
  if (num_elements(out.shape) == 0) return ctx.bind(node.outputs[0], ctx.empty(out));
  const std::string value = ctx.operand(node, 1);
  ctx.bind(node.outputs[0], padded(ctx, ctx.operand(node, 0), x, node.attrs.get_ints("edge_padding_low"),
                                   node.attrs.get_ints("edge_padding_high"), node.attrs.get_ints("interior_padding"),
                                   [&](const TensorType& t) { return splat(ctx, value, x.dtype, t); }));
}

}  // namespace

void register_shape_lowerings(OpRegistry& r) {
  r.set_lowering("reshape", [](LoweringContext& ctx, const Node& node) {
    ctx.bind(node.outputs[0],
             reshape_value(ctx, ctx.operand(node, 0), in_type(ctx, node, 0), out_type(ctx, node).shape));
  });
  r.set_lowering("broadcast_in_dim", lower_broadcast);
  r.set_lowering("transpose", lower_transpose);
  r.set_lowering("reverse", lower_reverse);
  r.set_lowering("slice", lower_slice);
  r.set_lowering("concatenate", lower_concatenate);
  r.set_lowering("pad", lower_pad);
}

}  // namespace ingot::ir
