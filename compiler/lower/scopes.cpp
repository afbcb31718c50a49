// Repeated name scopes (scopes.h): the structurally identical scope instances that lower_graph
// lowers as one function called once per instance (regional compilation).
#include "lower/scopes.h"

#include <functional>
#include <map>
#include <string_view>
#include <unordered_map>

namespace ingot::lower::detail {

namespace {

void hash_combine(size_t& seed, size_t value) { seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

size_t hash_type(const ir::TensorType& t) {
  size_t seed = static_cast<size_t>(t.dtype);
  for (int64_t d : t.shape) hash_combine(seed, std::hash<int64_t>{}(d));
  return seed;
}

/// Whether nodes `a` and `b` have the same op, attributes and output types.
bool same_operation(const ir::Graph& g, const ir::Node& a, const ir::Node& b) {
  if (a.op != b.op || a.outputs.size() != b.outputs.size() || a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (!(g.type(a.outputs[i]) == g.type(b.outputs[i]))) return false;
  }
  return a.attrs == b.attrs;
}

/// For each constant value, the first value computed the same way (same op, attributes, types and
/// -- recursively -- inputs): two instances' own copies of a constant then compare equal.
std::vector<ir::ValueId> constant_classes(const ir::Graph& g, const std::vector<bool>& constant) {
  std::vector<ir::ValueId> cls(static_cast<size_t>(g.num_values()), -1);
  std::unordered_map<size_t, std::vector<ir::NodeId>> buckets;
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!constant[static_cast<size_t>(n)]) continue;
    const ir::Node& node = g.node(n);
    size_t h = std::hash<std::string>{}(node.op);
    hash_combine(h, ir::hash_attributes(node.attrs));
    for (ir::ValueId v : node.inputs) hash_combine(h, std::hash<ir::ValueId>{}(cls[static_cast<size_t>(v)]));
    for (ir::ValueId v : node.outputs) hash_combine(h, hash_type(g.type(v)));
    std::vector<ir::NodeId>& bucket = buckets[h];
    ir::NodeId same = n;
    for (ir::NodeId other : bucket) {
      const ir::Node& o = g.node(other);
      bool equal = same_operation(g, node, o);
      for (size_t i = 0; equal && i < node.inputs.size(); ++i) {
        equal = cls[static_cast<size_t>(node.inputs[i])] == cls[static_cast<size_t>(o.inputs[i])];
      }
      if (equal) {
        same = other;
        break;
      }
    }
    if (same == n) bucket.push_back(n);
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      cls[static_cast<size_t>(node.outputs[i])] = g.node(same).outputs[i];
    }
  }
  return cls;
}

/// A node set in canonical form: per node, each input as (kind, a, b) -- 0: the `b`th output of
/// the set's `a`th node; 1: the constant of class `a`; 2: the set's `a`th input --, and a hash of
/// that and of the nodes' operations.
struct Canonical {
  size_t hash = 0;
  std::vector<int64_t> codes;
  std::vector<ir::ValueId> inputs;
};

/// The scratch state of canonicalising node sets of one graph.
class Canonicaliser {
 public:
  Canonicaliser(const ir::Graph& g, const std::vector<bool>& constant, std::vector<ir::ValueId> classes)
      : g_(g),
        constant_(constant),
        classes_(std::move(classes)),
        local_(static_cast<size_t>(g.num_nodes()), -1),
        input_index_(static_cast<size_t>(g.num_values()), -1) {}

  Canonical canonical(const std::vector<ir::NodeId>& nodes) {
    Canonical c;
    c.hash = nodes.size();
    for (size_t i = 0; i < nodes.size(); ++i) local_[static_cast<size_t>(nodes[i])] = static_cast<int64_t>(i);
    for (ir::NodeId n : nodes) {
      const ir::Node& node = g_.node(n);
      hash_combine(c.hash, std::hash<std::string>{}(node.op));
      hash_combine(c.hash, ir::hash_attributes(node.attrs));
      for (ir::ValueId v : node.outputs) hash_combine(c.hash, hash_type(g_.type(v)));
      for (ir::ValueId v : node.inputs) {
        const ir::ValueInfo& info = g_.value(v);
        int64_t code[3];
        if (info.producer >= 0 && local_[static_cast<size_t>(info.producer)] >= 0) {
          code[0] = 0, code[1] = local_[static_cast<size_t>(info.producer)], code[2] = info.output_index;
        } else if (info.producer >= 0 && constant_[static_cast<size_t>(info.producer)]) {
          code[0] = 1, code[1] = classes_[static_cast<size_t>(v)], code[2] = 0;
        } else {
          int64_t& index = input_index_[static_cast<size_t>(v)];
          if (index < 0) {
            index = static_cast<int64_t>(c.inputs.size());
            c.inputs.push_back(v);
          }
          code[0] = 2, code[1] = index, code[2] = 0;
        }
        for (int64_t x : code) {
          c.codes.push_back(x);
          hash_combine(c.hash, std::hash<int64_t>{}(x));
        }
      }
    }
    for (ir::NodeId n : nodes) local_[static_cast<size_t>(n)] = -1;
    for (ir::ValueId v : c.inputs) input_index_[static_cast<size_t>(v)] = -1;
    return c;
  }

  /// Whether the node sets `a` and `b` (with their canonical forms) are the same computation.
  bool same(const std::vector<ir::NodeId>& a, const Canonical& ca, const std::vector<ir::NodeId>& b,
            const Canonical& cb) const {
    if (a.size() != b.size() || ca.hash != cb.hash || ca.codes != cb.codes || ca.inputs.size() != cb.inputs.size()) {
      return false;
    }
    for (size_t i = 0; i < ca.inputs.size(); ++i) {
      if (!(g_.type(ca.inputs[i]) == g_.type(cb.inputs[i]))) return false;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (!same_operation(g_, g_.node(a[i]), g_.node(b[i]))) return false;
    }
    return true;
  }

 private:
  const ir::Graph& g_;
  const std::vector<bool>& constant_;
  std::vector<ir::ValueId> classes_;
  std::vector<int64_t> local_;        ///< node -> index in the set being canonicalised, or -1
  std::vector<int64_t> input_index_;  ///< value -> index among the set's inputs, or -1
};

/// The tree of scope-path prefixes: each prefix's nodes (those whose path starts with it).
struct Prefix {
  std::string path;
  std::vector<size_t> children;  ///< in order of first appearance
  std::vector<ir::NodeId> nodes;
};

std::vector<Prefix> prefix_tree(const ir::Graph& g, const std::vector<bool>& lowered,
                                const std::vector<bool>& constant) {
  std::vector<Prefix> tree(1);
  std::map<std::pair<size_t, std::string_view>, size_t> child;
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    const std::string& scope = g.node(n).scope;
    if (scope.empty() || !lowered[static_cast<size_t>(n)] || constant[static_cast<size_t>(n)]) continue;
    size_t at = 0;
    for (size_t begin = 0; begin <= scope.size();) {
      size_t end = scope.find('/', begin);
      if (end == std::string::npos) end = scope.size();
      const std::string_view name(scope.data() + begin, end - begin);
      auto [it, added] = child.try_emplace({at, name}, tree.size());
      if (added) {
        Prefix p;
        p.path = scope.substr(0, end);
        tree.push_back(std::move(p));
        tree[at].children.push_back(it->second);
      }
      at = it->second;
      tree[at].nodes.push_back(n);
      begin = end + 1;
    }
  }
  return tree;
}

/// `instance`'s values used outside it (by a lowered node or as a graph output), as (node index
/// in the instance, output index) positions.
void add_used_outside(const ir::Graph& g, const std::vector<ir::NodeId>& instance,
                      const std::vector<std::vector<ir::NodeId>>& users, const std::vector<bool>& is_output,
                      std::vector<int64_t>& member, std::map<std::pair<size_t, size_t>, bool>& positions) {
  for (ir::NodeId n : instance) member[static_cast<size_t>(n)] = 1;
  for (size_t i = 0; i < instance.size(); ++i) {
    const ir::Node& node = g.node(instance[i]);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ir::ValueId v = node.outputs[o];
      bool outside = is_output[static_cast<size_t>(v)];
      for (ir::NodeId u : users[static_cast<size_t>(v)]) outside = outside || member[static_cast<size_t>(u)] == 0;
      if (outside) positions[{i, o}] = true;
    }
  }
  for (ir::NodeId n : instance) member[static_cast<size_t>(n)] = 0;
}

}  // namespace

std::vector<bool> constant_nodes(const ir::Graph& g) {
  std::vector<bool> constant(static_cast<size_t>(g.num_nodes()), false);
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    bool c = true;
    for (ir::ValueId v : g.node(n).inputs) {
      const ir::NodeId p = g.value(v).producer;
      c = c && p >= 0 && constant[static_cast<size_t>(p)];
    }
    constant[static_cast<size_t>(n)] = c;
  }
  return constant;
}

std::vector<ScopeGroup> find_repeated_scopes(const ir::Graph& g, const std::vector<bool>& lowered,
                                             const std::vector<bool>& constant) {
  const std::vector<Prefix> tree = prefix_tree(g, lowered, constant);
  Canonicaliser canon(g, constant, constant_classes(g, constant));
  std::vector<std::vector<ir::NodeId>> users(static_cast<size_t>(g.num_values()));
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!lowered[static_cast<size_t>(n)]) continue;
    for (ir::ValueId v : g.node(n).inputs) users[static_cast<size_t>(v)].push_back(n);
  }
  std::vector<bool> is_output(static_cast<size_t>(g.num_values()), false);
  for (ir::ValueId v : g.outputs()) is_output[static_cast<size_t>(v)] = true;
  std::vector<int64_t> member(static_cast<size_t>(g.num_nodes()), 0);

  std::vector<ScopeGroup> groups;
  std::vector<size_t> work = {0};
  while (!work.empty()) {
    const Prefix& parent = tree[work.back()];
    work.pop_back();
    // The children that are the same computation, in groups (by their first member's order).
    std::vector<std::vector<size_t>> same;
    std::vector<Canonical> forms;
    std::unordered_map<size_t, std::vector<size_t>> by_hash;  // hash -> indices into `same`
    for (size_t c : parent.children) {
      Canonical form = canon.canonical(tree[c].nodes);
      std::vector<size_t>& candidates = by_hash[form.hash];
      size_t joined = same.size();
      for (size_t s : candidates) {
        if (canon.same(tree[same[s][0]].nodes, forms[s], tree[c].nodes, form)) {
          joined = s;
          break;
        }
      }
      if (joined == same.size()) {
        candidates.push_back(joined);
        same.push_back({});
        forms.push_back(std::move(form));
      }
      same[joined].push_back(c);
    }
    for (size_t s = 0; s < same.size(); ++s) {
      if (same[s].size() < 2) {
        work.push_back(same[s][0]);
        continue;
      }
      ScopeGroup group;
      group.scope = tree[same[s][0]].path;
      std::map<std::pair<size_t, size_t>, bool> positions;
      for (size_t c : same[s]) add_used_outside(g, tree[c].nodes, users, is_output, member, positions);
      for (size_t c : same[s]) {
        ScopeInstance instance;
        instance.nodes = tree[c].nodes;
        instance.inputs = canon.canonical(instance.nodes).inputs;
        for (const auto& [at, unused] : positions) {
          instance.outputs.push_back(g.node(instance.nodes[at.first]).outputs[at.second]);
        }
        group.instances.push_back(std::move(instance));
      }
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

}  // namespace ingot::lower::detail
