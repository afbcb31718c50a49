// Cost rules per op (include/ingot/ir/cost.h): one table, so the IR core's op definitions stay
// free of it, as JAX keeps its per-transformation rule tables apart.
#include "ingot/ir/cost.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <string>

#include "ingot/runtime/error.h"

namespace ingot::ir {

namespace {

double elements(const TensorType& t) {
  double n = 1;
  for (int64_t d : t.shape) n *= static_cast<double>(d);
  return n;
}

double bytes(const TensorType& t) { return elements(t) * static_cast<double>(dtype_size(t.dtype)); }

/// The types a rule sees: the node's operands and results.
struct NodeTypes {
  const Node& node;
  std::vector<TensorType> in, out;
  bool floating_in(size_t i = 0) const { return i < in.size() && is_floating(in[i].dtype); }
  bool floating_out() const { return !out.empty() && is_floating(out[0].dtype); }
};

/// (flops, transcendentals) of one node.
using CostRule = std::function<std::pair<double, double>(const NodeTypes&)>;

std::pair<double, double> per_element(const NodeTypes& t, double n) {
  return {t.floating_out() ? n * elements(t.out[0]) : 0.0, 0.0};
}

std::pair<double, double> dot_cost(const NodeTypes& t) {
  double contracted = 1;
  for (int64_t d : t.node.attrs.get_ints_or("lhs_contracting_dimensions", {})) {
    contracted *= static_cast<double>(t.in[0].shape[static_cast<size_t>(d)]);
  }
  return {t.floating_out() ? 2 * elements(t.out[0]) * contracted : 0.0, 0.0};
}

std::pair<double, double> conv_cost(const NodeTypes& t) {
  const auto k_out = static_cast<size_t>(t.node.attrs.get_int("kernel_output_feature_dimension"));
  const double out_features = static_cast<double>(t.in[1].shape[k_out]);
  if (!t.floating_out() || out_features == 0) return {0.0, 0.0};
  return {2 * elements(t.out[0]) * elements(t.in[1]) / out_features, 0.0};
}

std::pair<double, double> reduce_cost(const NodeTypes& t) {
  double flops = 0;
  const size_t operands = t.in.size() / 2;  // operands, then their init values
  for (size_t i = 0; i < operands; ++i) flops += is_floating(t.in[i].dtype) ? elements(t.in[i]) : 0.0;
  return {flops, 0.0};
}

std::pair<double, double> reduce_window_cost(const NodeTypes& t) {
  double window = 1;
  for (int64_t d : t.node.attrs.get_ints_or("window_dimensions", {})) window *= static_cast<double>(d);
  return per_element(t, window);
}

std::pair<double, double> select_and_scatter_cost(const NodeTypes& t) {
  // operand, source, init: a compare per source element and window element, an add per source.
  double window = 1;
  for (int64_t d : t.node.attrs.get_ints_or("window_dimensions", {})) window *= static_cast<double>(d);
  if (!t.floating_out()) return {0.0, 0.0};
  return {elements(t.in[1]) * (window + 1), 0.0};
}

const std::map<std::string, CostRule>& rules() {
  static const std::map<std::string, CostRule> table = [] {
    std::map<std::string, CostRule> m;
    const CostRule one = [](const NodeTypes& t) { return per_element(t, 1); };
    const CostRule zero = [](const NodeTypes&) { return std::pair<double, double>{0.0, 0.0}; };
    const CostRule transcendental = [](const NodeTypes& t) {
      return std::pair<double, double>{0.0, t.floating_out() ? elements(t.out[0]) : 0.0};
    };
    const CostRule compare_in = [](const NodeTypes& t) {  // a bool or index result of float inputs
      return std::pair<double, double>{t.floating_in() ? elements(t.in[0]) : 0.0, 0.0};
    };
    for (const char* op : {"add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder", "abs", "negate",
                           "sign", "ceil", "floor", "round_nearest_even"}) {
      m[op] = one;
    }
    for (const char* op : {"exponential", "exponential_minus_one", "log", "log_plus_one", "logistic", "tanh", "erf",
                           "sine", "cosine", "sqrt", "rsqrt", "power", "atan2"}) {
      m[op] = transcendental;
    }
    m["compare"] = [](const NodeTypes& t) {
      return std::pair<double, double>{t.floating_in() ? elements(t.out[0]) : 0.0, 0.0};
    };
    m["is_finite"] = m["compare"];
    m["argmax"] = compare_in;
    m["argmin"] = compare_in;
    m["clamp"] = [](const NodeTypes& t) { return per_element(t, 2); };
    m["dot_general"] = dot_cost;
    m["convolution"] = conv_cost;
    m["reduce"] = reduce_cost;
    m["reduce_window"] = reduce_window_cost;
    m["select_and_scatter"] = select_and_scatter_cost;
    m["scatter"] = [](const NodeTypes& t) {
      const bool add = t.node.attrs.has("computation") && t.node.attrs.get_string("computation") == "add";
      return std::pair<double, double>{add && t.floating_out() && t.in.size() >= 3 ? elements(t.in[2]) : 0.0, 0.0};
    };
    for (const char* op : {"all_gather",
                           "all_reduce",
                           "and",
                           "broadcast_in_dim",
                           "concatenate",
                           "constant",
                           "convert",
                           "gather",
                           "iota",
                           "not",
                           "optimization_barrier",
                           "or",
                           "pad",
                           "reduce_scatter",
                           "reshape",
                           "reverse",
                           "rng_bit_generator",
                           "select",
                           "slice",
                           "transpose",
                           "xor"}) {
      m[op] = zero;
    }
    return m;
  }();
  return table;
}

}  // namespace

CostAnalysis& CostAnalysis::operator+=(const CostAnalysis& other) {
  flops += other.flops;
  transcendentals += other.transcendentals;
  bytes_accessed += other.bytes_accessed;
  for (const auto& [op, f] : other.flops_by_op) flops_by_op[op] += f;
  return *this;
}

bool has_cost_rule(const std::string& op) { return rules().count(op) > 0; }

CostAnalysis cost_analysis(const Graph& graph) {
  // Nodes none of whose outputs reach a graph output are not run (the lowering and MLIR drop
  // them; ir::eliminate_dead_code): not counted.
  std::vector<bool> live_value(static_cast<size_t>(graph.num_values()), false);
  for (ValueId v : graph.outputs()) live_value[static_cast<size_t>(v)] = true;
  std::vector<bool> live_node(graph.nodes().size(), false);
  for (size_t i = graph.nodes().size(); i-- > 0;) {
    const Node& node = graph.nodes()[i];
    for (ValueId v : node.outputs) live_node[i] = live_node[i] || live_value[static_cast<size_t>(v)];
    if (!live_node[i]) continue;
    for (ValueId v : node.inputs) live_value[static_cast<size_t>(v)] = true;
  }
  CostAnalysis c;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    if (!live_node[i]) continue;
    const Node& node = graph.nodes()[i];
    const auto rule = rules().find(node.op);
    if (rule == rules().end()) {
      throw Error(ErrorCode::kUnimplemented, fmt::format("cost_analysis: op '{}' has no cost rule", node.op),
                  "add one to compiler/ir/cost.cpp (its flops and transcendentals per element)");
    }
    NodeTypes t{node, {}, {}};
    for (ValueId v : node.inputs) t.in.push_back(graph.type(v));
    for (ValueId v : node.outputs) t.out.push_back(graph.type(v));
    const auto [flops, transcendentals] = rule->second(t);
    c.flops += flops;
    if (flops > 0) c.flops_by_op[node.op] += flops;
    c.transcendentals += transcendentals;
    for (const TensorType& x : t.in) c.bytes_accessed += bytes(x);
    for (const TensorType& x : t.out) c.bytes_accessed += bytes(x);
  }
  return c;
}

CostAnalysis cost_analysis_if_known(const Graph& graph) {
  for (const Node& node : graph.nodes()) {
    if (!has_cost_rule(node.op)) return {};
  }
  return cost_analysis(graph);
}

}  // namespace ingot::ir
