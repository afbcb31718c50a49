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
#include "ingot/autodiff/vjp_rules.h"
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

/// The reduction of a differentiated `op` node: sum or mean (max and min have no VJP rule here:
/// kUnimplemented naming the op and the reduction).
const std::string& differentiable_reduction(const char* op, const VjpArgs& args) {
  const std::string& reduction = args.attrs.get_string("reduction");
  if (reduction != "sum" && reduction != "mean") {
    throw Error(ErrorCode::kUnimplemented, fmt::format("no VJP rule for {} with reduction '{}'", op, reduction),
                fmt::format("differentiate through {} sum or mean only", op));
  }
  return reduction;
}

std::vector<std::optional<Tensor>> all_reduce_vjp(const VjpArgs& args) {
  const std::string& reduction = differentiable_reduction("all_reduce", args);
  if (!args.cotangents[0]) return {std::nullopt};
  return {all_reduce(*args.cotangents[0], args.attrs.get_string("axis_name"), reduction)};
}

void lower_all_reduce(lower::LoweringContext&, const Node& node) {
  throw Error(
      ErrorCode::kUnimplemented,
      fmt::format("all_reduce over mesh axis '{}' is not lowered into a kernel", node.attrs.get_string("axis_name")),
      kSpmdHint);
}

/// all_gather / reduce_scatter attributes: the axis (name and device count) and dimension 0.
int64_t check_split_attrs(const char* op, const Attributes& attrs) {
  if (attrs.get_string("axis_name").empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: axis_name is empty", op), "name the mesh axis");
  }
  const int64_t size = attrs.get_int("axis_size");
  if (size < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: axis_size is {}", op, size),
                "give the number of devices along the axis (>= 1)");
  }
  if (attrs.get_int_or("dimension", 0) != 0) {
    throw Error(
        ErrorCode::kUnimplemented,
        fmt::format("{}: dimension {} (only dimension 0 is gathered or scattered)", op, attrs.get_int("dimension")),
        "shard the leading dimension");
  }
  return size;
}

std::vector<TensorType> all_gather_shape(std::span<const TensorType> operands, const Attributes& attrs) {
  const int64_t n = check_split_attrs("all_gather", attrs);
  TensorType t = operands[0];
  if (t.rank() == 0) throw Error(ErrorCode::kShapeMismatch, "all_gather: the operand is a scalar", "gather arrays");
  t.shape[0] *= n;
  return {t};
}

std::vector<TensorType> reduce_scatter_shape(std::span<const TensorType> operands, const Attributes& attrs) {
  const int64_t n = check_split_attrs("reduce_scatter", attrs);
  check_reduction(attrs.get_string("reduction"));
  TensorType t = operands[0];
  if (t.rank() == 0 || t.shape[0] % n != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("reduce_scatter: dimension 0 of {} does not split into {} parts", t.to_string(), n),
                "scatter an array whose leading dimension is a multiple of the axis size");
  }
  t.shape[0] /= n;
  return {t};
}

std::vector<Array> split_kernel(std::span<const Array>, const Attributes& attrs, std::span<const TensorType>) {
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("a collective over mesh axis '{}' cannot run on one device", attrs.get_string("axis_name")),
              kSpmdHint);
}

/// The VJP of all_gather: the cotangent's blocks summed over the devices, each device keeping its
/// own block (reduce_scatter sum); of reduce_scatter sum: the cotangents gathered; of mean: gathered
/// and divided by the axis size.
std::vector<std::optional<Tensor>> all_gather_vjp(const VjpArgs& args) {
  if (!args.cotangents[0]) return {std::nullopt};
  return {
      reduce_scatter(*args.cotangents[0], args.attrs.get_string("axis_name"), args.attrs.get_int("axis_size"), "sum")};
}

std::vector<std::optional<Tensor>> reduce_scatter_vjp(const VjpArgs& args) {
  const std::string& reduction = differentiable_reduction("reduce_scatter", args);
  if (!args.cotangents[0]) return {std::nullopt};
  const int64_t n = args.attrs.get_int("axis_size");
  Tensor g = all_gather(*args.cotangents[0], args.attrs.get_string("axis_name"), n);
  if (reduction == "mean") g = g / static_cast<double>(n);
  return {g};
}

void lower_split(lower::LoweringContext&, const Node& node) {
  throw Error(
      ErrorCode::kUnimplemented,
      fmt::format("{} over mesh axis '{}' is not lowered into a kernel", node.op, node.attrs.get_string("axis_name")),
      kSpmdHint);
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  r.add(OpDef{"all_gather", 1, 1, all_gather_shape, split_kernel,
              "the devices' blocks along a mesh axis concatenated on dimension 0 (SPMD programs)", lower_split,
              std::vector<std::string>{"axis_name", "axis_size", "dimension"}});
  r.add(OpDef{"reduce_scatter", 1, 1, reduce_scatter_shape, split_kernel,
              "sum/mean/max/min over a mesh axis, each device keeping its block of dimension 0 (SPMD programs)",
              lower_split, std::vector<std::string>{"axis_name", "axis_size", "dimension", "reduction"}});
  r.add(OpDef{"all_reduce", 1, 1, all_reduce_shape, all_reduce_kernel,
              "sum/mean/max/min of the operand over a mesh axis (SPMD programs; compile_graph_spmd)", lower_all_reduce,
              std::vector<std::string>{"axis_name", "reduction"}});
}

}  // namespace ingot::ir

namespace ingot {

/// The VJP rules of the collective ops (autodiff's table; see include/ingot/autodiff/vjp_rules.h).
void register_collective_vjps(VjpRules& r) {
  r.add("all_gather", ir::all_gather_vjp);
  r.add("reduce_scatter", ir::reduce_scatter_vjp);
  r.add("all_reduce", ir::all_reduce_vjp);
}

}  // namespace ingot
