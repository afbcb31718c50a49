// Collective ops: all_reduce (StableHLO's name; JAX's lax.psum / lax.pmean inside shard_map).
// A graph holding one is a per-device (SPMD) program: compile_graph_spmd (include/ingot/jit/spmd.h)
// splits it at each collective into compiled segments and collective thunks run by run_spmd. The
// op has no interpreter kernel of its own (one device cannot know the others' values) and its
// lowering is a named error pointing there. docs/distributed.md.
//
// Attributes: `axis_name` (string, the mesh axis the reduction spans) and `reduction` ("sum",
// "mean", "max" or "min"). Shape rule: the operand's type (floating or integer; bool refused).
// VJP (JAX's transpose rule of psum, jax/_src/lax/parallel.py): the cotangent of a sum is the sum
// of the cotangents over the axis, of a mean their mean; max and min have no rule.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "ingot/trace/ops.h"
#include "ops/lower_util.h"
#include "ops/op_util.h"

namespace ingot::ir {

namespace {

constexpr const char* kSpmdHint =
    "all_reduce is a collective: compile the per-device graph with compile_graph_spmd and run it with run_spmd "
    "(include/ingot/jit/spmd.h), or train with a distribution (docs/distributed.md)";

void check_reduction(const std::string& reduction) {
  if (reduction != "sum" && reduction != "mean" && reduction != "max" && reduction != "min") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("all_reduce: reduction is '{}'", reduction),
                "use sum, mean, max or min");
  }
}

std::vector<TensorType> all_reduce_shape(std::span<const TensorType> operands, const Attributes& attrs) {
  if (attrs.get_string("axis_name").empty()) {
    throw Error(ErrorCode::kInvalidArgument, "all_reduce: axis_name is empty", "name the mesh axis to reduce over");
  }
  check_reduction(attrs.get_string("reduction"));
  if (operands[0].dtype == DType::kBool) {
    throw Error(ErrorCode::kDTypeMismatch, "all_reduce: the operand is bool", "convert it to a number first");
  }
  return {operands[0]};
}

std::vector<Array> all_reduce_kernel(std::span<const Array>, const Attributes& attrs, std::span<const TensorType>) {
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("all_reduce over mesh axis '{}' cannot run on one device", attrs.get_string("axis_name")),
              kSpmdHint);
}

std::vector<std::optional<Tensor>> all_reduce_vjp(const VjpArgs& args) {
  const std::string& reduction = args.attrs.get_string("reduction");
  if (reduction != "sum" && reduction != "mean") {
    throw Error(ErrorCode::kUnimplemented, fmt::format("no VJP rule for all_reduce with reduction '{}'", reduction),
                "differentiate through all_reduce sum or mean only");
  }
  if (!args.cotangents[0]) return {std::nullopt};
  return {all_reduce(*args.cotangents[0], args.attrs.get_string("axis_name"), reduction)};
}

void lower_all_reduce(lower::LoweringContext&, const Node& node) {
  throw Error(ErrorCode::kUnimplemented,
              fmt::format("all_reduce over mesh axis '{}' is not lowered into a kernel", node.attrs.get_string("axis_name")),
              kSpmdHint);
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  r.add(OpDef{"all_reduce", 1, 1, all_reduce_shape, all_reduce_kernel,
              "sum/mean/max/min of the operand over a mesh axis (SPMD programs; compile_graph_spmd)", all_reduce_vjp,
              lower_all_reduce, std::vector<std::string>{"axis_name", "reduction"}});
}

}  // namespace ingot::ir
