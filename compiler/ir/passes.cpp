// Graph-to-graph passes: dead code elimination and common subexpression elimination.
#include "ingot/ir/passes.h"

#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>

#include "ingot/ir/op_registry.h"

namespace ingot::ir {
namespace {

/// Copies `source` into a new graph (same name and registry): every parameter first, then the
/// nodes for which `keep(node_id)` holds, in order, with each input `v` replaced by
/// `replace[v]`; outputs are replaced too. Every node goes through Graph::add_node, so the
/// result is verified.
Graph rebuild(const Graph& source, const std::function<bool(NodeId)>& keep, const std::vector<ValueId>& replace) {
  Graph out(source.name(), &source.registry());
  std::vector<ValueId> new_id(static_cast<size_t>(source.num_values()), -1);
  for (ValueId p : source.parameters()) new_id[p] = out.add_parameter(source.type(p));
  auto mapped = [&](ValueId v) { return new_id[replace[v]]; };
  for (NodeId n = 0; n < source.num_nodes(); ++n) {
    if (!keep(n)) continue;
    const Node& node = source.node(n);
    std::vector<ValueId> inputs;
    for (ValueId v : node.inputs) inputs.push_back(mapped(v));
    std::vector<ValueId> results = out.add_node(node.op, inputs, node.attrs);
    if (!node.scope.empty()) out.set_scope(out.num_nodes() - 1, node.scope);
    for (size_t i = 0; i < results.size(); ++i) new_id[node.outputs[i]] = results[i];
  }
  std::vector<ValueId> outputs;
  for (ValueId v : source.outputs()) outputs.push_back(mapped(v));
  out.set_outputs(std::move(outputs));
  return out;
}

/// The identity replacement for `g`'s values.
std::vector<ValueId> identity(const Graph& g) {
  std::vector<ValueId> ids(static_cast<size_t>(g.num_values()));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<ValueId>(i);
  return ids;
}

void hash_combine(size_t& seed, size_t value) { seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

/// Hash of a node's op, attributes and (already replaced) inputs.
size_t hash_node(const Node& node, const std::vector<ValueId>& inputs) {
  size_t seed = std::hash<std::string>{}(node.op);
  for (ValueId v : inputs) hash_combine(seed, std::hash<ValueId>{}(v));
  hash_combine(seed, hash_attributes(node.attrs));
  return seed;
}

std::vector<ValueId> replaced_inputs(const Node& node, const std::vector<ValueId>& replace) {
  std::vector<ValueId> inputs;
  for (ValueId v : node.inputs) inputs.push_back(replace[v]);
  return inputs;
}

}  // namespace

Graph eliminate_dead_code(const Graph& graph) {
  std::vector<bool> live(static_cast<size_t>(graph.num_values()), false);
  for (ValueId v : graph.outputs()) live[v] = true;
  std::vector<bool> keep(static_cast<size_t>(graph.num_nodes()), false);
  for (NodeId n = graph.num_nodes() - 1; n >= 0; --n) {
    const Node& node = graph.node(n);
    for (ValueId v : node.outputs) keep[n] = keep[n] || live[v];
    if (!keep[n]) continue;
    for (ValueId v : node.inputs) live[v] = true;
  }
  return rebuild(graph, [&](NodeId n) { return keep[n]; }, identity(graph));
}

Graph eliminate_common_subexpressions(const Graph& graph) {
  std::vector<ValueId> replace = identity(graph);
  std::vector<bool> keep(static_cast<size_t>(graph.num_nodes()), true);
  std::vector<std::vector<ValueId>> inputs(static_cast<size_t>(graph.num_nodes()));
  std::unordered_map<size_t, std::vector<NodeId>> buckets;  // hash -> kept nodes
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.node(n);
    inputs[n] = replaced_inputs(node, replace);
    std::vector<NodeId>& bucket = buckets[hash_node(node, inputs[n])];
    for (NodeId first : bucket) {
      const Node& other = graph.node(first);
      if (other.op != node.op || inputs[first] != inputs[n] || !(other.attrs == node.attrs) ||
          other.outputs.size() != node.outputs.size()) {
        continue;
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) replace[node.outputs[i]] = other.outputs[i];
      keep[n] = false;
      break;
    }
    if (keep[n]) bucket.push_back(n);
  }
  return eliminate_dead_code(rebuild(graph, [&](NodeId n) { return keep[n]; }, replace));
}

}  // namespace ingot::ir
