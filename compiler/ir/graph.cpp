#include "ingot/ir/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "ingot/ir/op_registry.h"

namespace ingot::ir {

std::string TensorType::to_string() const { return fmt::format("{}[{}]", dtype_name(dtype), dims_to_string(shape)); }

Graph::Graph(std::string name, const OpRegistry* registry)
    : name_(std::move(name)), registry_(registry ? registry : &OpRegistry::builtin()) {}

ValueId Graph::add_parameter(TensorType type) {
  check_shape(type.shape, "Graph::add_parameter");
  ValueId id = num_values();
  values_.push_back(ValueInfo{std::move(type), -1, static_cast<int64_t>(parameters_.size())});
  parameters_.push_back(id);
  return id;
}

void Graph::check_value(ValueId id, const char* what) const {
  if (id < 0 || id >= num_values()) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("{}: value %{} does not exist (graph '{}' has {} values)", what, id, name_, num_values()),
                "use value ids returned by add_parameter/add_node of this graph");
  }
}

std::string Graph::describe_node(const std::string& op, const std::vector<ValueId>& inputs) const {
  std::vector<std::string> parts;
  for (ValueId v : inputs) {
    if (v >= 0 && v < num_values()) {
      parts.push_back(fmt::format("%{}: {}", v, values_[v].type.to_string()));
    } else {
      parts.push_back(fmt::format("%{}", v));
    }
  }
  return fmt::format("in %{} = {}({})", num_values(), op, fmt::join(parts, ", "));
}

std::vector<ValueId> Graph::add_node(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs) {
  const std::string where = describe_node(op, inputs);
  std::vector<TensorType> types;
  try {
    const OpDef& def = registry_->get(op);
    for (ValueId v : inputs) check_value(v, op.c_str());
    const int64_t n = static_cast<int64_t>(inputs.size());
    if (n < def.min_operands || (def.max_operands >= 0 && n > def.max_operands)) {
      std::string expected = def.max_operands < 0 ? fmt::format("at least {}", def.min_operands)
                             : def.min_operands == def.max_operands
                                 ? fmt::format("{}", def.min_operands)
                                 : fmt::format("{} to {}", def.min_operands, def.max_operands);
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} takes {} operands but got {}", op, expected, n));
    }
    if (def.attribute_names) {
      for (const auto& [name, value] : attrs.entries()) {
        const auto& known = *def.attribute_names;
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: unknown attribute '{}'", op, name),
                      known.empty() ? fmt::format("{} takes no attributes", op)
                                    : fmt::format("{} takes the attributes {}", op, fmt::join(known, ", ")));
        }
      }
    }
    std::vector<TensorType> operand_types;
    operand_types.reserve(inputs.size());
    for (ValueId v : inputs) operand_types.push_back(values_[v].type);
    types = def.shape_rule(operand_types, attrs);
    for (const TensorType& t : types) check_shape(t.shape, op.c_str());
  } catch (const Error& e) {
    throw e.with_context(where);
  }
  const NodeId node_id = num_nodes();
  Node node{op, std::move(attrs), inputs, {}};
  for (size_t i = 0; i < types.size(); ++i) {
    node.outputs.push_back(num_values());
    values_.push_back(ValueInfo{std::move(types[i]), node_id, static_cast<int64_t>(i)});
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs;
}

std::vector<ValueId> Graph::add_node_with_types(const std::string& op, const std::vector<ValueId>& inputs,
                                                Attributes attrs, const std::vector<TensorType>& types) {
  const int64_t first_new = num_values();
  std::vector<ValueId> outs = add_node(op, inputs, std::move(attrs));
  auto rollback = [&] {
    nodes_.pop_back();
    values_.resize(static_cast<size_t>(first_new));
  };
  if (outs.size() != types.size()) {
    rollback();
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: declared {} result types but the op produces {}", op, types.size(), outs.size()));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const TensorType inferred = values_[outs[i]].type;  // a copy: rollback() frees it
    if (!(inferred == types[i])) {
      rollback();
      throw Error(inferred.dtype != types[i].dtype ? ErrorCode::kDTypeMismatch : ErrorCode::kShapeMismatch,
                  fmt::format("{}: declared result {} type {} but the shape rule infers {}", op, i,
                              types[i].to_string(), inferred.to_string()),
                  "fix the declared type after ':'");
    }
  }
  return outs;
}

void Graph::set_outputs(std::vector<ValueId> outputs) {
  for (ValueId v : outputs) check_value(v, "Graph::set_outputs");
  outputs_ = std::move(outputs);
}

const Node& Graph::node(NodeId id) const {
  if (id < 0 || id >= num_nodes()) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("node {} does not exist (graph '{}' has {} nodes)", id, name_, num_nodes()));
  }
  return nodes_[static_cast<size_t>(id)];
}

const ValueInfo& Graph::value(ValueId id) const {
  check_value(id, "Graph::value");
  return values_[static_cast<size_t>(id)];
}

void Graph::verify() const {
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    std::vector<TensorType> operand_types;
    for (ValueId v : node.inputs) {
      check_value(v, node.op.c_str());
      const ValueInfo& info = values_[v];
      if (info.producer >= static_cast<NodeId>(n)) {
        throw Error(ErrorCode::kInternal, fmt::format("node {} ({}) uses %{} before its definition", n, node.op, v));
      }
      operand_types.push_back(info.type);
    }
    std::vector<TensorType> types;
    try {
      types = registry_->get(node.op).shape_rule(operand_types, node.attrs);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("in node {} ({})", n, node.op));
    }
    if (types.size() != node.outputs.size()) {
      throw Error(ErrorCode::kInternal, fmt::format("node {} ({}) has {} outputs, rule gives {}", n, node.op,
                                                    node.outputs.size(), types.size()));
    }
    for (size_t i = 0; i < types.size(); ++i) {
      if (!(values_[node.outputs[i]].type == types[i])) {
        throw Error(ErrorCode::kInternal,
                    fmt::format("node {} ({}) result {} has type {} but the rule infers {}", n, node.op, i,
                                values_[node.outputs[i]].type.to_string(), types[i].to_string()));
      }
    }
  }
  for (ValueId v : outputs_) check_value(v, "Graph::verify outputs");
}

void Graph::set_scope(NodeId id, std::string scope) {
  node(id);  // throws for an unknown node
  nodes_[static_cast<size_t>(id)].scope = std::move(scope);
}

bool Graph::operator==(const Graph& other) const {
  if (name_ != other.name_ || parameters_.size() != other.parameters_.size() || nodes_.size() != other.nodes_.size() ||
      outputs_ != other.outputs_ || values_.size() != other.values_.size()) {
    return false;
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    const ValueInfo& a = values_[i];
    const ValueInfo& b = other.values_[i];
    if (!(a.type == b.type) || a.producer != b.producer || a.output_index != b.output_index) {
      return false;
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& a = nodes_[i];
    const Node& b = other.nodes_[i];
    if (a.op != b.op || a.inputs != b.inputs || a.outputs != b.outputs || !(a.attrs == b.attrs)) {
      return false;
    }
  }
  return parameters_ == other.parameters_;
}

}  // namespace ingot::ir
