#include "ingot/interp/interpreter.h"

#include <fmt/format.h>

#include "ingot/ir/op_registry.h"

namespace ingot::interp {

namespace {

void check_arguments(const ir::Graph& graph, const std::vector<Array>& arguments) {
  const auto& params = graph.parameters();
  if (arguments.size() != params.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("interpret: graph '{}' takes {} arguments but {} were given",
                                                         graph.name(), params.size(), arguments.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::TensorType& t = graph.type(params[i]);
    const Array& a = arguments[i];
    if (!a.valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("interpret: argument {} is an invalid (empty) Array", i));
    }
    if (a.dtype() != t.dtype) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("interpret: argument {} has dtype {} but parameter %{} is {}", i, dtype_name(a.dtype()),
                              params[i], t.to_string()),
                  "convert the argument or retrace for this dtype");
    }
    if (a.shape() != t.shape) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("interpret: argument {} has shape {} but parameter %{} is {}", i,
                              shape_to_string(a.shape()), params[i], t.to_string()),
                  "pass an argument of the traced shape or retrace for this shape");
    }
  }
}

}  // namespace

std::vector<Array> interpret(const ir::Graph& graph, const std::vector<Array>& arguments) {
  check_arguments(graph, arguments);
  std::vector<Array> env(static_cast<size_t>(graph.num_values()));
  for (size_t i = 0; i < arguments.size(); ++i) env[graph.parameters()[i]] = arguments[i];

  // Last use of each value, so intermediate arrays are released as soon as possible.
  std::vector<int64_t> last_use(static_cast<size_t>(graph.num_values()), -1);
  for (int64_t n = 0; n < graph.num_nodes(); ++n) {
    for (ir::ValueId v : graph.nodes()[n].inputs) last_use[v] = n;
  }
  for (ir::ValueId v : graph.outputs()) last_use[v] = graph.num_nodes();

  for (int64_t n = 0; n < graph.num_nodes(); ++n) {
    const ir::Node& node = graph.nodes()[n];
    const ir::OpDef& def = graph.registry().get(node.op);
    if (!def.interpret) {
      throw Error(ErrorCode::kUnimplemented, fmt::format("no interpreter kernel for op '{}'", node.op),
                  "this op cannot run under the reference interpreter");
    }
    std::vector<Array> operands;
    operands.reserve(node.inputs.size());
    for (ir::ValueId v : node.inputs) operands.push_back(env[v]);
    std::vector<ir::TensorType> result_types;
    for (ir::ValueId v : node.outputs) result_types.push_back(graph.type(v));
    std::vector<Array> results;
    try {
      results = def.interpret(operands, node.attrs, result_types);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("interpreting node {} ({})", n, node.op));
    }
    if (results.size() != node.outputs.size()) {
      throw Error(ErrorCode::kInternal, fmt::format("interpreter kernel of '{}' returned {} results, expected {}",
                                                    node.op, results.size(), node.outputs.size()));
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const ir::TensorType& t = result_types[i];
      if (results[i].shape() != t.shape || results[i].dtype() != t.dtype) {
        throw Error(ErrorCode::kInternal,
                    fmt::format("interpreter kernel of '{}' returned {}[{}] for result {} of type {}", node.op,
                                dtype_name(results[i].dtype()), dims_to_string(results[i].shape()), i, t.to_string()));
      }
      env[node.outputs[i]] = std::move(results[i]);
    }
    for (ir::ValueId v : node.inputs) {
      if (last_use[v] == n) env[v] = Array();
    }
  }
  std::vector<Array> outputs;
  for (ir::ValueId v : graph.outputs()) outputs.push_back(env[v]);
  return outputs;
}

}  // namespace ingot::interp
