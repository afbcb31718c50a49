// The graph IR: an SSA graph of StableHLO-named ops over statically shaped tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ingot/ir/attributes.h"
#include "ingot/runtime/dtype.h"
#include "ingot/runtime/shape.h"

namespace ingot::ir {

class OpRegistry;

/// Index of a value in its Graph (dense, 0-based).
using ValueId = int64_t;
/// Index of a node in its Graph (dense, 0-based; nodes are in topological order).
using NodeId = int64_t;

/// Static type of an IR value: shape and element type.
struct TensorType {
  Shape shape;
  DType dtype = DType::kF32;
  bool operator==(const TensorType&) const = default;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// IR text form: "f32[2,3]", "i32[]" for a scalar.
  std::string to_string() const;
};

/// A value: a graph parameter (producer == -1) or one output of a node.
struct ValueInfo {
  TensorType type;
  NodeId producer = -1;      ///< node that defines it, or -1 for a graph parameter
  int64_t output_index = 0;  ///< which output of the producer (or which parameter)
};

/// An operation instance: op name (StableHLO spelling), attributes, operands and results.
struct Node {
  std::string op;
  Attributes attrs;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  /// The name scope the node was recorded in: the names of the active ingot::NameScope objects
  /// (a layer's name while it is called, "transpose" around the backward pass of a node, as
  /// jax.named_scope names) joined by '/'; empty outside any. Metadata only: not part of
  /// Graph::operator==, not printed. The lowering compiles repeated scopes once
  /// (lower::LoweringOptions::share_repeated_scopes).
  std::string scope;
};

/// A function-like graph: parameters, nodes in topological order, outputs.
///
/// Nodes can only use values that already exist, so insertion order is a topological order.
/// Every node added through add_node() is verified immediately by its op's shape rule; a bad
/// node throws ingot::Error naming the op, the node and the operand types, and leaves the graph
/// unchanged.
class Graph {
 public:
  /// `name` appears in the printed form ("func @name(...)"); `registry` supplies the op rules
  /// (default: OpRegistry::builtin()). The registry must outlive the graph.
  explicit Graph(std::string name = "main", const OpRegistry* registry = nullptr);

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const OpRegistry& registry() const { return *registry_; }

  /// Adds a parameter of `type`; returns its value id.
  ValueId add_parameter(TensorType type);
  /// Adds a node of `op` over `inputs`, infers and verifies its output types with the op's
  /// shape rule, and returns the new output value ids.
  /// Throws ingot::Error(kNotFound) for an unknown op, or the shape rule's error prefixed with
  /// the node ("in %7 = add(%3, %5)"); the graph is unchanged on error.
  std::vector<ValueId> add_node(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs = {});
  /// Like add_node() but with declared output types (used by the parser); throws
  /// ingot::Error(kShapeMismatch/kDTypeMismatch) if they differ from the inferred types.
  std::vector<ValueId> add_node_with_types(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs,
                                           const std::vector<TensorType>& types);
  /// Sets node `id`'s name scope (Node::scope). Throws ingot::Error(kNotFound) for an unknown node.
  void set_scope(NodeId id, std::string scope);
  /// Sets the graph's results. Throws ingot::Error(kNotFound) for an unknown value id.
  void set_outputs(std::vector<ValueId> outputs);

  const std::vector<ValueId>& parameters() const { return parameters_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(NodeId id) const;
  const ValueInfo& value(ValueId id) const;
  const TensorType& type(ValueId id) const { return value(id).type; }
  int64_t num_values() const { return static_cast<int64_t>(values_.size()); }
  int64_t num_nodes() const { return static_cast<int64_t>(nodes_.size()); }

  /// Re-runs every node's shape rule and checks all ids; throws the first error found.
  void verify() const;

  /// Structural equality: same name, parameter types, nodes (op, attrs, inputs, output types)
  /// in the same order, and outputs.
  bool operator==(const Graph& other) const;

 private:
  void check_value(ValueId id, const char* what) const;
  std::string describe_node(const std::string& op, const std::vector<ValueId>& inputs) const;

  std::string name_;
  const OpRegistry* registry_;
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> parameters_;
  std::vector<ValueId> outputs_;
};

}  // namespace ingot::ir
