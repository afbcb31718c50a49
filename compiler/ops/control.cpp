// Control ops: optimization_barrier (StableHLO): an identity on any number of values that
// passes may not look through, so values computed after it are not merged (CSE) or moved across
// it. Autodiff's rematerialisation uses it, as jax.checkpoint does.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "ingot/autodiff/vjp_rules.h"
#include "ops/op_util.h"

namespace ingot::ir {

namespace {

std::vector<TensorType> barrier_shape(std::span<const TensorType> operands, const Attributes& attrs) {
  if (!attrs.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("optimization_barrier: takes no attributes but got {}", attrs.entries().begin()->first));
  }
  return std::vector<TensorType>(operands.begin(), operands.end());
}

std::vector<Array> barrier_kernel(std::span<const Array> operands, const Attributes&, std::span<const TensorType>) {
  return std::vector<Array>(operands.begin(), operands.end());
}

std::vector<std::optional<Tensor>> barrier_vjp(const VjpArgs& args) {
  return std::vector<std::optional<Tensor>>(args.cotangents.begin(), args.cotangents.end());
}

}  // namespace

void register_control_ops(OpRegistry& r) {
  r.add(OpDef{"optimization_barrier", 1, -1, barrier_shape, barrier_kernel,
              "identity on its operands that passes do not look through"});
}

}  // namespace ingot::ir

namespace ingot {

/// The VJP rules of the control ops (autodiff's table; see include/ingot/autodiff/vjp_rules.h).
void register_control_vjps(VjpRules& r) { r.add("optimization_barrier", ir::barrier_vjp); }

}  // namespace ingot
