#include "ingot/trace/call.h"

#include <fmt/format.h>

#include <optional>

namespace ingot {

namespace {

void check_call_args(const ir::Graph& graph, const std::vector<Tensor>& args) {
  const auto& params = graph.parameters();
  if (args.size() != params.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("call: graph '{}' takes {} arguments but {} were given",
                                                         graph.name(), params.size(), args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::TensorType& want = graph.type(params[i]);
    const ir::TensorType& got = args[i].type();
    if (!(want == got)) {
      throw Error(want.dtype != got.dtype ? ErrorCode::kDTypeMismatch : ErrorCode::kShapeMismatch,
                  fmt::format("call: argument {} of graph '{}' is {} but the parameter is {}", i, graph.name(),
                              got.to_string(), want.to_string()),
                  "pass tensors of the parameter types, or retrace the graph for these types");
    }
  }
}

}  // namespace

std::vector<Tensor> call_with_values(const ir::Graph& graph, const std::vector<Tensor>& args) {
  check_call_args(graph, args);
  std::vector<Tensor> values(static_cast<size_t>(graph.num_values()));
  for (size_t i = 0; i < args.size(); ++i) values[graph.parameters()[i]] = args[i];
  for (const ir::Node& node : graph.nodes()) {
    std::vector<Tensor> inputs;
    inputs.reserve(node.inputs.size());
    for (ir::ValueId v : node.inputs) inputs.push_back(values[v]);
    std::optional<NameScope> scope;  // the node keeps its scope, inside the caller's
    if (!node.scope.empty()) scope.emplace(node.scope);
    std::vector<Tensor> outs = emit(node.op, inputs, node.attrs);
    for (size_t i = 0; i < outs.size(); ++i) values[node.outputs[i]] = outs[i];
  }
  return values;
}

std::vector<Tensor> call(const ir::Graph& graph, const std::vector<Tensor>& args) {
  std::vector<Tensor> values = call_with_values(graph, args);
  std::vector<Tensor> outs;
  for (ir::ValueId v : graph.outputs()) outs.push_back(values[v]);
  return outs;
}

}  // namespace ingot
