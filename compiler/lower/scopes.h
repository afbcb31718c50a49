// Internal: repeated name scopes of a graph (regional compilation), found for lower_graph.
#pragma once

#include <string>
#include <vector>

#include <set>
#include <utility>

#include "ingot/ir/graph.h"
#include "ingot/lower/lowering.h"

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

/// The repeated scopes of `graph`: the children of each scope-path prefix (the path components of
/// ir::Node::scope) are compared, children that are identical (ScopeGroup) form a group and the
/// others are searched in turn (depth first; the order is deterministic). Only nodes with `lowered` set and
/// `constant` unset take part (constant_nodes). Groups may still be unschedulable as single calls
/// (an instance that uses a value computed from its own output); lower_graph checks.
std::vector<ScopeGroup> find_repeated_scopes(const ir::Graph& graph, const std::vector<bool>& lowered,
                                             const std::vector<bool>& constant);

/// Lowers `node` into `ctx` with its op's rule. Throws ingot::Error(kUnimplemented) for an op
/// without one, or the rule's error with the op named.
void lower_node(LoweringContext& ctx, const ir::Node& node);

/// Lowers into `ctx` the constant nodes (`constant`, constant_nodes) that `node`'s inputs need and
/// `ctx` has not lowered yet: each function computes the constants it uses. Throws
/// ingot::Error(kInternal) for an input that is neither lowered nor constant.
void lower_constant_inputs(LoweringContext& ctx, const ir::Node& node, const std::vector<bool>& constant);

/// LoweringOptions::share_repeated_scopes: lowers the live nodes of `ctx`'s graph with each group
/// of repeated scopes (find_repeated_scopes) as one function (appended to `functions`) called per
/// instance; `in_place` receives the donated outputs (`donated`: lower_graph's (parameter, output)
/// pairs) those functions compute into their parameters' buffers as the parameters' last use, which
/// the entry returns without materialising them again. Counts the functions and calls in
/// `lowered`. Returns false, having lowered nothing, when there is no group or the calls cannot
/// be ordered; throws what lowering a node throws.
bool lower_with_scope_functions(LoweringContext& ctx, const std::vector<bool>& live,
                                const std::vector<std::pair<size_t, size_t>>& donated, std::string& functions,
                                LoweredModule& lowered, std::set<ir::ValueId>& in_place);

}  // namespace ingot::lower::detail
