// Lowering repeated scopes as functions (LoweringOptions::share_repeated_scopes; scopes.h): the
// entry's schedule of calls and nodes, the scope functions' text, and in-place donated updates.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <tuple>

#include "lower/scopes.h"

namespace ingot::lower::detail {

namespace {

/// The order in which the entry lowers its units -- each instance of `groups` one call, every
/// other lowered non-constant node itself -- as (group, instance) pairs, instance -1 for a node
/// (its id in `group`): the units' dependency order, ties by their first node, except that the
/// instances of groups with `defer` set (their calls update donated parameters in place) wait until
/// nothing else is ready, so the parameters' other readers come first. Empty when the dependencies
/// have a cycle (an instance needs a value that is computed from one of its outputs).
std::vector<std::pair<int64_t, int64_t>> schedule_units(const ir::Graph& g, const std::vector<bool>& live,
                                                        const std::vector<bool>& constant,
                                                        const std::vector<ScopeGroup>& groups,
                                                        const std::vector<bool>& defer) {
  std::vector<std::pair<int64_t, int64_t>> units;
  std::vector<std::vector<ir::NodeId>> members;
  std::vector<int64_t> unit_of(static_cast<size_t>(g.num_nodes()), -1);
  for (size_t k = 0; k < groups.size(); ++k) {
    for (size_t i = 0; i < groups[k].instances.size(); ++i) {
      for (ir::NodeId n : groups[k].instances[i].nodes)
        unit_of[static_cast<size_t>(n)] = static_cast<int64_t>(units.size());
      units.emplace_back(static_cast<int64_t>(k), static_cast<int64_t>(i));
      members.push_back(groups[k].instances[i].nodes);
    }
  }
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!live[static_cast<size_t>(n)] || constant[static_cast<size_t>(n)] || unit_of[static_cast<size_t>(n)] >= 0)
      continue;
    unit_of[static_cast<size_t>(n)] = static_cast<int64_t>(units.size());
    units.emplace_back(n, -1);
    members.push_back({n});
  }
  std::vector<std::vector<size_t>> next(units.size());
  std::vector<int64_t> waiting(units.size(), 0);
  for (size_t u = 0; u < units.size(); ++u) {
    for (ir::NodeId n : members[u]) {
      for (ir::ValueId v : g.node(n).inputs) {
        const ir::NodeId p = g.value(v).producer;
        if (p < 0 || unit_of[static_cast<size_t>(p)] < 0 || unit_of[static_cast<size_t>(p)] == static_cast<int64_t>(u))
          continue;
        next[static_cast<size_t>(unit_of[static_cast<size_t>(p)])].push_back(u);
        ++waiting[u];
      }
    }
  }
  using Ready = std::tuple<bool, ir::NodeId, size_t>;  // (deferred, first node, unit)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  auto deferred = [&](size_t u) { return units[u].second >= 0 && defer[static_cast<size_t>(units[u].first)]; };
  for (size_t u = 0; u < units.size(); ++u) {
    if (waiting[u] == 0) ready.emplace(deferred(u), members[u].front(), u);
  }
  std::vector<std::pair<int64_t, int64_t>> order;
  while (!ready.empty()) {
    const size_t u = std::get<2>(ready.top());
    ready.pop();
    order.push_back(units[u]);
    for (size_t w : next[u]) {
      if (--waiting[w] == 0) ready.emplace(deferred(w), members[w].front(), w);
    }
  }
  if (order.size() != units.size()) order.clear();
  return order;
}

/// `func.func private @<name>` computing `instance` (a representative of its group): parameters
/// its inputs, results its outputs (output q computed into input donated_into[q] when that is not
/// -1); the number of parameters as `ingot.scope_inputs` (the out-parameters bufferization appends
/// after them are fresh buffers at every call).
std::string scope_function(const ir::Graph& g, const LoweringOptions& options, const std::string& name,
                           const ScopeInstance& instance, const std::vector<int64_t>& donated_into,
                           const std::vector<bool>& constant, LoweringContext& outer) {
  LoweringContext ctx(g, options);
  std::vector<std::string> params, result_types, results;
  for (size_t i = 0; i < instance.inputs.size(); ++i) {
    const std::string arg = fmt::format("%a{}", i);
    ctx.bind(instance.inputs[i], arg);
    params.push_back(fmt::format("{}: {}", arg, LoweringContext::type(g.type(instance.inputs[i]))));
  }
  for (ir::NodeId n : instance.nodes) {
    lower_constant_inputs(ctx, g.node(n), constant);
    lower_node(ctx, g.node(n));
  }
  for (size_t q = 0; q < instance.outputs.size(); ++q) {
    const ir::ValueId v = instance.outputs[q];
    const std::string type = LoweringContext::type(g.type(v));
    // A donated output is computed into its parameter's buffer, which the function is given: the
    // result is then that argument (bufferization drops it; no copy, no out-parameter).
    results.push_back(donated_into[q] < 0
                          ? ctx.value(v)
                          : ctx.let(fmt::format("bufferization.materialize_in_destination {} in %a{} : ({}, {}) -> {}",
                                                ctx.value(v), donated_into[q], type, type, type),
                                    "donated"));
    result_types.push_back(type);
  }
  for (const std::string& d : ctx.declarations()) outer.declare(d);
  std::string text =
      fmt::format("  func.func private @{}({}) -> ({}) attributes {{ingot.scope_inputs = {} : i64}} {{\n", name,
                  fmt::join(params, ", "), fmt::join(result_types, ", "), params.size());
  for (const std::string& l : ctx.lines()) text += l + "\n";
  text += fmt::format("    return {}{}{}\n  }}\n", fmt::join(results, ", "), results.empty() ? "" : " : ",
                      fmt::join(result_types, ", "));
  return text;
}

/// Emits the call of `instance` of function `name` into `ctx` and binds its outputs.
void call_scope_function(LoweringContext& ctx, const std::string& name, const ScopeInstance& instance) {
  const ir::Graph& g = ctx.graph();
  std::vector<std::string> args, arg_types, result_types;
  for (ir::ValueId v : instance.inputs) {
    args.push_back(ctx.value(v));
    arg_types.push_back(LoweringContext::type(g.type(v)));
  }
  for (ir::ValueId v : instance.outputs) result_types.push_back(LoweringContext::type(g.type(v)));
  const std::string call = fmt::format("func.call @{}({}) : ({}) -> ({})", name, fmt::join(args, ", "),
                                       fmt::join(arg_types, ", "), fmt::join(result_types, ", "));
  if (instance.outputs.empty()) {
    ctx.emit(call);
    return;
  }
  const std::string r = ctx.fresh("s");
  const size_t n = instance.outputs.size();
  ctx.emit(n == 1 ? fmt::format("{} = {}", r, call) : fmt::format("{}:{} = {}", r, n, call));
  for (size_t i = 0; i < n; ++i) ctx.bind(instance.outputs[i], n == 1 ? r : fmt::format("{}#{}", r, i));
}

/// For each output position of `group`'s instances, the input position of the parameter it is
/// donated into (`donated`: lower_graph's (parameter, output) pairs), when every instance has that
/// output donated into the parameter at that input position; -1 otherwise (the entry then copies
/// the result into the parameter's buffer, as for any donated output computed elsewhere).
std::vector<int64_t> donated_positions(const ir::Graph& g, const ScopeGroup& group,
                                       const std::vector<std::pair<size_t, size_t>>& donated) {
  const size_t outputs = group.instances.front().outputs.size();
  std::vector<int64_t> into(outputs, -1);
  for (size_t q = 0; q < outputs; ++q) {
    for (size_t i = 0; i < group.instances.size(); ++i) {
      const ScopeInstance& instance = group.instances[i];
      int64_t at = -1;
      for (const auto& [param, output] : donated) {
        if (g.outputs()[output] != instance.outputs[q]) continue;
        auto it = std::find(instance.inputs.begin(), instance.inputs.end(), g.parameters()[param]);
        if (it != instance.inputs.end()) at = it - instance.inputs.begin();
      }
      if (i == 0) into[q] = at;
      if (at != into[q]) {
        into[q] = -1;
        break;
      }
    }
  }
  return into;
}

/// Whether the in-place update of donated parameter `p` by the call of `instance` at schedule
/// position `at` is the last use of p's old value: no lowered node outside the instance that reads
/// p, or a value computed from it without the instance, comes later (`position`: each node's
/// schedule position). Otherwise the entry keeps its own materialisation of the result into p, and
/// bufferization copies p before the call (a later reader may see p through a view).
bool last_use_of_parameter(const ir::Graph& g, ir::ValueId p, const ScopeInstance& instance, size_t at,
                           const std::vector<int64_t>& position, const std::vector<std::vector<ir::NodeId>>& users,
                           std::vector<bool>& seen) {
  std::vector<ir::NodeId> inside = instance.nodes;  // sorted: graph order
  std::vector<ir::ValueId> work = {p}, marked;
  bool last = true;
  while (!work.empty() && last) {
    const ir::ValueId v = work.back();
    work.pop_back();
    for (ir::NodeId n : users[static_cast<size_t>(v)]) {
      if (seen[static_cast<size_t>(n)] || std::binary_search(inside.begin(), inside.end(), n)) continue;
      seen[static_cast<size_t>(n)] = true;
      marked.push_back(n);
      if (position[static_cast<size_t>(n)] > static_cast<int64_t>(at)) {
        last = false;
        break;
      }
      for (ir::ValueId o : g.node(n).outputs) work.push_back(o);
    }
  }
  for (ir::NodeId n : marked) seen[static_cast<size_t>(n)] = false;
  return last;
}

}  // namespace

bool lower_with_scope_functions(LoweringContext& ctx, const std::vector<bool>& live,
                                const std::vector<std::pair<size_t, size_t>>& donated, std::string& functions,
                                LoweredModule& lowered, std::set<ir::ValueId>& in_place) {
  const ir::Graph& g = ctx.graph();
  const std::vector<bool> constant = constant_nodes(g);
  const std::vector<ScopeGroup> groups = find_repeated_scopes(g, live, constant);
  if (groups.empty()) return false;
  std::vector<std::vector<int64_t>> into;
  std::vector<bool> defer;
  for (const ScopeGroup& group : groups) {
    into.push_back(donated_positions(g, group, donated));
    defer.push_back(std::any_of(into.back().begin(), into.back().end(), [](int64_t k) { return k >= 0; }));
  }
  const std::vector<std::pair<int64_t, int64_t>> order = schedule_units(g, live, constant, groups, defer);
  if (order.empty()) return false;

  // Each node's schedule position, for the last-use check of in-place updates.
  std::vector<int64_t> position(static_cast<size_t>(g.num_nodes()), -1);
  for (size_t t = 0; t < order.size(); ++t) {
    const auto [unit, instance] = order[t];
    if (instance < 0) {
      position[static_cast<size_t>(unit)] = static_cast<int64_t>(t);
    } else {
      for (ir::NodeId n : groups[static_cast<size_t>(unit)].instances[static_cast<size_t>(instance)].nodes) {
        position[static_cast<size_t>(n)] = static_cast<int64_t>(t);
      }
    }
  }
  std::vector<std::vector<ir::NodeId>> users(static_cast<size_t>(g.num_values()));
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (position[static_cast<size_t>(n)] < 0) continue;
    for (ir::ValueId v : g.node(n).inputs) users[static_cast<size_t>(v)].push_back(n);
  }
  std::vector<bool> seen(static_cast<size_t>(g.num_nodes()), false);

  std::vector<std::string> names;
  for (size_t k = 0; k < groups.size(); ++k) {
    names.push_back(fmt::format("ingot_scope_{}", k));
    functions += scope_function(g, ctx.options(), names.back(), groups[k].instances.front(), into[k], constant, ctx);
  }
  for (size_t t = 0; t < order.size(); ++t) {
    const auto [unit, instance] = order[t];
    if (instance >= 0) {
      const ScopeInstance& inst = groups[static_cast<size_t>(unit)].instances[static_cast<size_t>(instance)];
      const std::vector<int64_t>& in = into[static_cast<size_t>(unit)];
      for (size_t q = 0; q < in.size(); ++q) {
        if (in[q] >= 0 &&
            last_use_of_parameter(g, inst.inputs[static_cast<size_t>(in[q])], inst, t, position, users, seen)) {
          in_place.insert(inst.outputs[q]);
        }
      }
      call_scope_function(ctx, names[static_cast<size_t>(unit)], inst);
      ++lowered.scope_calls;
      continue;
    }
    const ir::Node& node = g.node(unit);
    lower_constant_inputs(ctx, node, constant);
    lower_node(ctx, node);
  }
  // Outputs computed from constants alone have no lowered user to have brought them in.
  for (ir::ValueId v : g.outputs()) {
    const ir::NodeId p = g.value(v).producer;
    if (ctx.bound(v) || p < 0) continue;
    lower_constant_inputs(ctx, g.node(p), constant);
    lower_node(ctx, g.node(p));
  }
  lowered.scope_functions = static_cast<int64_t>(groups.size());
  return true;
}

}  // namespace ingot::lower::detail
