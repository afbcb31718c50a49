// Internal: repeated name scopes of a graph (regional compilation), found for lower_graph.
#pragma once

#include <string>
#include <vector>

#include "ingot/ir/graph.h"

namespace ingot::lower::detail {

/// One occurrence of a repeated scope: the nodes recorded under one name-scope prefix (a layer's
/// call, or its backward pass), without constant nodes.
struct ScopeInstance {
  std::vector<ir::NodeId> nodes;     ///< its nodes, in graph (topological) order
  std::vector<ir::ValueId> inputs;   ///< non-constant values it uses from outside, in first-use order
  std::vector<ir::ValueId> outputs;  ///< its values used outside, in the group's order
};

/// Two or more instances that are the same computation up to the values they are given: the same
/// ops, attributes and types in the same order, wired the same way, with the same constants.
struct ScopeGroup {
  std::string scope;                     ///< the first instance's scope path (for messages)
  std::vector<ScopeInstance> instances;  ///< at least two
};

/// For each node of `graph`: whether no graph parameter reaches it (every input comes from such a
/// node; nodes without inputs are): its value is a function of attributes alone, lowered wherever
/// it is used.
std::vector<bool> constant_nodes(const ir::Graph& graph);

/// The repeated scopes of `graph`, outermost first: the children of each scope-path prefix (the
/// path components of ir::Node::scope) are compared, children that are identical (ScopeGroup)
/// form a group and the others are searched in turn. Only nodes with `lowered` set and
/// `constant` unset take part (constant_nodes). Groups may still be unschedulable as single calls
/// (an instance that uses a value computed from its own output); lower_graph checks.
std::vector<ScopeGroup> find_repeated_scopes(const ir::Graph& graph, const std::vector<bool>& lowered,
                                             const std::vector<bool>& constant);

}  // namespace ingot::lower::detail
