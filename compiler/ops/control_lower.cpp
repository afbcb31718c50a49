// MLIR lowering rule of the control family (op in compiler/ops/control.cpp; semantics in
// docs/ir.md): optimization_barrier binds its results to its operands (an identity).
#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"

namespace ingot::ir {

void register_control_lowerings(OpRegistry& r) {
  r.set_lowering("optimization_barrier", [](lower::LoweringContext& ctx, const Node& node) {
    for (size_t i = 0; i < node.inputs.size(); ++i) ctx.bind(node.outputs[i], ctx.operand(node, i));
  });
}

}  // namespace ingot::ir
