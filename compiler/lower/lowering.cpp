#include "ingot/lower/lowering.h"

#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>
#include <set>

#include "ingot/ir/op_registry.h"
#include "lower/scopes.h"

namespace ingot::lower {

std::string BodyBuilder::fresh() { return fmt::format("%b{}", (*counter_)++); }

std::string BodyBuilder::let(const std::string& rhs) {
  std::string n = fresh();
  emit(fmt::format("{} = {}", n, rhs));
  return n;
}

namespace {

/// A float literal MLIR parses back exactly: hex bit pattern for non-finite values (and always
/// for the half types), shortest round-trip decimal otherwise.
std::string float_literal(double value, DType dtype) {
  auto hex = [](uint64_t bits, int width) { return fmt::format("0x{:0{}X}", bits, width); };
  switch (dtype) {
    case DType::kF16: return hex(float_to_half_bits(static_cast<float>(value)), 4);
    case DType::kBF16: return hex(float_to_bf16_bits(static_cast<float>(value)), 4);
    case DType::kF32: {
      float f = static_cast<float>(value);
      uint32_t bits = 0;
      std::memcpy(&bits, &f, 4);
      return hex(bits, 8);
    }
    default: {
      uint64_t bits = 0;
      std::memcpy(&bits, &value, 8);
      return hex(bits, 16);
    }
  }
}

}  // namespace

std::string BodyBuilder::constant(double value, DType dtype) {
  const std::string ty = LoweringContext::element(dtype);
  if (is_bool(dtype)) return let(fmt::format("arith.constant {}", value != 0 ? "true" : "false"));
  if (is_floating(dtype)) return let(fmt::format("arith.constant {} : {}", float_literal(value, dtype), ty));
  return let(fmt::format("arith.constant {} : {}", static_cast<int64_t>(value), ty));
}

std::string BodyBuilder::index(int64_t d) { return let(fmt::format("linalg.index {} : index", d)); }

const std::string& LoweringContext::value(ir::ValueId v) const {
  const std::string& n = names_.at(static_cast<size_t>(v));
  if (n.empty()) {
    throw Error(ErrorCode::kInternal, fmt::format("lowering: value %{} used before it was lowered", v));
  }
  return n;
}

void LoweringContext::bind(ir::ValueId v, std::string ssa) { names_.at(static_cast<size_t>(v)) = std::move(ssa); }

std::string LoweringContext::fresh(const std::string& hint) { return fmt::format("%{}{}", hint, counter_++); }

void LoweringContext::emit(const std::string& line) { lines_.push_back("    " + line); }

std::string LoweringContext::let(const std::string& rhs, const std::string& hint) {
  std::string n = fresh(hint);
  emit(fmt::format("{} = {}", n, rhs));
  return n;
}

std::string LoweringContext::library_read(const std::string& tensor, const std::string& tensor_type,
                                          const std::string& memref_type) {
  const std::string n = fresh("m");
  emit(fmt::format("{} = bufferization.to_buffer {} read_only {{ingot.read = \"{}\"}} : {} to {}", n, tensor, n.substr(1),
                   tensor_type, memref_type));
  return n;
}

std::string LoweringContext::element(DType d) {
  switch (d) {
    case DType::kBool: return "i1";
    case DType::kI8:
    case DType::kU8: return "i8";
    case DType::kI32:
    case DType::kU32: return "i32";
    case DType::kI64:
    case DType::kU64: return "i64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
  }
  return "f32";
}

std::string LoweringContext::storage(DType d) { return d == DType::kBool ? "i8" : element(d); }

std::string LoweringContext::type(const ir::TensorType& t) {
  std::string dims;
  for (int64_t d : t.shape) dims += fmt::format("{}x", d);
  return fmt::format("tensor<{}{}>", dims, storage(t.dtype));
}

std::vector<std::string> LoweringContext::identity(int64_t rank) {
  std::vector<std::string> e;
  for (int64_t i = 0; i < rank; ++i) e.push_back(fmt::format("d{}", i));
  return e;
}

std::string LoweringContext::affine_map(int64_t loop_rank, const std::vector<std::string>& exprs) {
  return fmt::format("affine_map<({}) -> ({})>", fmt::join(identity(loop_rank), ", "),
                     fmt::join(exprs, ", "));
}

std::string LoweringContext::empty(const ir::TensorType& t) {
  return let(fmt::format("tensor.empty() : {}", type(t)), "e");
}

std::string LoweringContext::fill(const ir::TensorType& t, double value) {
  BodyBuilder b(&counter_);
  // Bools are stored as i8 (one byte each, as ingot::Array stores them).
  std::string scalar = t.dtype == DType::kBool ? b.constant(value != 0 ? 1 : 0, DType::kI8)
                                               : b.constant(value, t.dtype);
  for (const std::string& l : b.lines()) emit(l);
  const std::string e = empty(t);
  return let(fmt::format("linalg.fill ins({} : {}) outs({} : {}) -> {}", scalar, storage(t.dtype), e,
                         type(t), type(t)),
             "f");
}

std::string LoweringContext::generic(
    int64_t loop_rank, const std::vector<std::string>& iterators, const std::vector<GenericInput>& ins,
    const ir::TensorType& out, const std::vector<std::string>& out_map, const std::string& init,
    const std::function<std::string(BodyBuilder&, const std::vector<std::string>&)>& body) {
  const std::string out_init = init.empty() ? empty(out) : init;
  std::vector<std::string> maps, in_names, in_types, iters, args;
  for (const GenericInput& in : ins) {
    maps.push_back(affine_map(loop_rank, in.map));
    in_names.push_back(in.value);
    in_types.push_back(type(in.type));
  }
  maps.push_back(affine_map(loop_rank, out_map));
  for (const std::string& it : iterators) iters.push_back(fmt::format("\"{}\"", it));
  BodyBuilder b(&counter_);
  std::vector<std::string> block_args;
  for (size_t i = 0; i <= ins.size(); ++i) {
    const DType dt = i < ins.size() ? ins[i].type.dtype : out.dtype;
    std::string a = b.fresh();
    args.push_back(fmt::format("{}: {}", a, storage(dt)));
    // Bool storage is i8; the body computes on i1.
    if (dt == DType::kBool) a = b.let(fmt::format("arith.trunci {} : i8 to i1", a));
    block_args.push_back(a);
  }
  std::string yielded = body(b, block_args);
  if (out.dtype == DType::kBool) yielded = b.let(fmt::format("arith.extui {} : i1 to i8", yielded));
  const std::string result = fresh("g");
  const std::string ins_clause =
      ins.empty() ? "" : fmt::format("ins({} : {}) ", fmt::join(in_names, ", "), fmt::join(in_types, ", "));
  emit(fmt::format("{} = linalg.generic {{indexing_maps = [{}], iterator_types = [{}]}} {}outs({} : {}) {{",
                   result, fmt::join(maps, ", "), fmt::join(iters, ", "), ins_clause, out_init, type(out)));
  emit(fmt::format("^bb0({}):", fmt::join(args, ", ")));
  for (const std::string& l : b.lines()) emit("  " + l);
  emit(fmt::format("  linalg.yield {} : {}", yielded, storage(out.dtype)));
  emit(fmt::format("}} -> {}", type(out)));
  return result;
}

std::string LoweringContext::map(
    const std::vector<std::string>& operands, const std::vector<ir::TensorType>& types,
    const ir::TensorType& out,
    const std::function<std::string(BodyBuilder&, const std::vector<std::string>&)>& body) {
  std::vector<GenericInput> ins;
  for (size_t i = 0; i < operands.size(); ++i) ins.push_back({operands[i], types[i], identity(out.rank())});
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  return generic(out.rank(), iters, ins, out, identity(out.rank()), "", body);
}

void LoweringContext::declare(const std::string& declaration) {
  if (std::find(declarations_.begin(), declarations_.end(), declaration) == declarations_.end()) {
    declarations_.push_back(declaration);
  }
}

namespace {

/// For each node of `graph` (topological order), whether one of its outputs reaches a graph
/// output.
std::vector<bool> live_nodes(const ir::Graph& graph) {
  std::vector<bool> live_value(static_cast<size_t>(graph.num_values()), false);
  for (ir::ValueId o : graph.outputs()) live_value[static_cast<size_t>(o)] = true;
  std::vector<bool> live(graph.nodes().size(), false);
  for (size_t n = graph.nodes().size(); n-- > 0;) {
    const ir::Node& node = graph.nodes()[n];
    for (ir::ValueId o : node.outputs) live[n] = live[n] || live_value[static_cast<size_t>(o)];
    if (!live[n]) continue;
    for (ir::ValueId i : node.inputs) live_value[static_cast<size_t>(i)] = true;
  }
  return live;
}


/// Lowers `node` into `ctx` with its op's rule.
void lower_node(LoweringContext& ctx, const ir::Node& node) {
  const ir::OpDef& def = ctx.graph().registry().get(node.op);
  if (!def.lower) {
    throw Error(ErrorCode::kUnimplemented, fmt::format("no lowering for op '{}'", node.op),
                "run this graph with the reference interpreter (ingot::interp::interpret)");
  }
  try {
    def.lower(ctx, node);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("lowering '{}'", node.op));
  }
}

/// Lowers into `ctx` the constant nodes (detail::constant_nodes) that `node`'s inputs need and
/// `ctx` has not lowered yet: each function computes the constants it uses.
void lower_constant_inputs(LoweringContext& ctx, const ir::Node& node, const std::vector<bool>& constant) {
  for (ir::ValueId v : node.inputs) {
    if (ctx.bound(v)) continue;
    const ir::NodeId p = ctx.graph().value(v).producer;
    if (p < 0 || !constant[static_cast<size_t>(p)]) {
      throw Error(ErrorCode::kInternal, fmt::format("lowering: value %{} used before it was lowered", v));
    }
    lower_constant_inputs(ctx, ctx.graph().node(p), constant);
    lower_node(ctx, ctx.graph().node(p));
  }
}

/// The order in which the entry lowers its units -- each instance of `groups` one call, every
/// other lowered non-constant node itself -- as (group, instance) pairs, instance -1 for a node
/// (its id in `group`): the units' dependency order, ties by their first node. Empty when the
/// dependencies have a cycle (an instance needs a value that is computed from one of its outputs).
std::vector<std::pair<int64_t, int64_t>> schedule_units(const ir::Graph& g, const std::vector<bool>& live,
                                                        const std::vector<bool>& constant,
                                                        const std::vector<detail::ScopeGroup>& groups) {
  std::vector<std::pair<int64_t, int64_t>> units;
  std::vector<std::vector<ir::NodeId>> members;
  std::vector<int64_t> unit_of(static_cast<size_t>(g.num_nodes()), -1);
  for (size_t k = 0; k < groups.size(); ++k) {
    for (size_t i = 0; i < groups[k].instances.size(); ++i) {
      for (ir::NodeId n : groups[k].instances[i].nodes) unit_of[static_cast<size_t>(n)] = static_cast<int64_t>(units.size());
      units.emplace_back(static_cast<int64_t>(k), static_cast<int64_t>(i));
      members.push_back(groups[k].instances[i].nodes);
    }
  }
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!live[static_cast<size_t>(n)] || constant[static_cast<size_t>(n)] || unit_of[static_cast<size_t>(n)] >= 0) continue;
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
        if (p < 0 || unit_of[static_cast<size_t>(p)] < 0 || unit_of[static_cast<size_t>(p)] == static_cast<int64_t>(u)) continue;
        next[static_cast<size_t>(unit_of[static_cast<size_t>(p)])].push_back(u);
        ++waiting[u];
      }
    }
  }
  using Ready = std::pair<ir::NodeId, size_t>;  // (first node, unit)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (size_t u = 0; u < units.size(); ++u) {
    if (waiting[u] == 0) ready.emplace(members[u].front(), u);
  }
  std::vector<std::pair<int64_t, int64_t>> order;
  while (!ready.empty()) {
    const size_t u = ready.top().second;
    ready.pop();
    order.push_back(units[u]);
    for (size_t w : next[u]) {
      if (--waiting[w] == 0) ready.emplace(members[w].front(), w);
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
                           const detail::ScopeInstance& instance, const std::vector<int64_t>& donated_into,
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
    results.push_back(donated_into[q] < 0 ? ctx.value(v)
                                          : ctx.let(fmt::format("bufferization.materialize_in_destination {} in %a{} : ({}, {}) -> {}",
                                                                ctx.value(v), donated_into[q], type, type, type),
                                                    "donated"));
    result_types.push_back(type);
  }
  for (const std::string& d : ctx.declarations()) outer.declare(d);
  std::string text = fmt::format("  func.func private @{}({}) -> ({}) attributes {{ingot.scope_inputs = {} : i64}} {{\n",
                                 name, fmt::join(params, ", "), fmt::join(result_types, ", "), params.size());
  for (const std::string& l : ctx.lines()) text += l + "\n";
  text += fmt::format("    return {}{}{}\n  }}\n", fmt::join(results, ", "), results.empty() ? "" : " : ",
                      fmt::join(result_types, ", "));
  return text;
}

/// Emits the call of `instance` of function `name` into `ctx` and binds its outputs.
void call_scope_function(LoweringContext& ctx, const std::string& name, const detail::ScopeInstance& instance) {
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
std::vector<int64_t> donated_positions(const ir::Graph& g, const detail::ScopeGroup& group,
                                       const std::vector<std::pair<size_t, size_t>>& donated) {
  const size_t outputs = group.instances.front().outputs.size();
  std::vector<int64_t> into(outputs, -1);
  for (size_t q = 0; q < outputs; ++q) {
    for (size_t i = 0; i < group.instances.size(); ++i) {
      const detail::ScopeInstance& instance = group.instances[i];
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

/// LoweringOptions::share_repeated_scopes: lowers the live nodes of `ctx`'s graph with each group
/// of repeated scopes (detail::find_repeated_scopes) as one function (appended to `functions`)
/// called per instance; `in_place` receives the donated outputs those functions compute into their
/// parameters' buffers. Returns false, having lowered nothing, when there is no group or the calls
/// cannot be ordered (schedule_units).
bool lower_with_scope_functions(LoweringContext& ctx, const std::vector<bool>& live,
                                const std::vector<std::pair<size_t, size_t>>& donated, std::string& functions,
                                LoweredModule& lowered, std::set<ir::ValueId>& in_place) {
  const ir::Graph& g = ctx.graph();
  const std::vector<bool> constant = detail::constant_nodes(g);
  const std::vector<detail::ScopeGroup> groups = detail::find_repeated_scopes(g, live, constant);
  if (groups.empty()) return false;
  const std::vector<std::pair<int64_t, int64_t>> order = schedule_units(g, live, constant, groups);
  if (order.empty()) return false;
  std::vector<std::string> names;
  for (size_t k = 0; k < groups.size(); ++k) {
    names.push_back(fmt::format("ingot_scope_{}", k));
    const std::vector<int64_t> into = donated_positions(g, groups[k], donated);
    functions += scope_function(g, ctx.options(), names.back(), groups[k].instances.front(), into, constant, ctx);
    for (const detail::ScopeInstance& instance : groups[k].instances) {
      for (size_t q = 0; q < into.size(); ++q) {
        if (into[q] >= 0) in_place.insert(instance.outputs[q]);
      }
    }
  }
  for (const auto& [unit, instance] : order) {
    if (instance >= 0) {
      call_scope_function(ctx, names[static_cast<size_t>(unit)], groups[static_cast<size_t>(unit)].instances[static_cast<size_t>(instance)]);
      ++lowered.scope_calls;
      continue;
    }
    const ir::Node& node = g.node(unit);
    lower_constant_inputs(ctx, node, constant);
    lower_node(ctx, node);
  }
  lowered.scope_functions = static_cast<int64_t>(groups.size());
  return true;
}
}  // namespace

LoweredModule lower_graph(const ir::Graph& graph, const std::string& entry,
                          const std::vector<std::pair<size_t, size_t>>& donated,
                          const LoweringOptions& options) {
  if (options.library_conv_min_k < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("LoweringOptions::library_conv_min_k is {}", options.library_conv_min_k),
                "use 0 to send every f32/f64 convolution to the library, or a positive reduction length");
  }
  LoweringContext ctx(graph, options);
  LoweredModule lowered;
  std::vector<std::string> params;
  for (size_t i = 0; i < graph.parameters().size(); ++i) {
    const ir::ValueId p = graph.parameters()[i];
    const std::string name = fmt::format("%p{}", i);
    ctx.bind(p, name);
    params.push_back(fmt::format("{}: {}", name, LoweringContext::type(graph.type(p))));
    lowered.params.push_back(graph.type(p));
  }
  const std::vector<bool> live = live_nodes(graph);
  std::string functions;
  std::set<ir::ValueId> in_place;  // donated outputs a scope function computed into their parameter
  if (!options.share_repeated_scopes || !lower_with_scope_functions(ctx, live, donated, functions, lowered, in_place)) {
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      // Dead nodes (no output reaches a graph output, e.g. an input cotangent nobody asked for in
      // a traced train step) are not lowered: MLIR drops unused loop nests, but a library call
      // (GEMM, convolution) is opaque to its dead-code elimination and would still run.
      if (live[n]) lower_node(ctx, graph.nodes()[n]);
    }
  }
  std::vector<std::string> out_names, out_types;
  std::vector<ir::ValueId> unique;
  for (size_t j = 0; j < graph.outputs().size(); ++j) {
    const ir::ValueId v = graph.outputs()[j];
    auto pair = std::find_if(donated.begin(), donated.end(), [&](const auto& p) { return p.second == j; });
    if (pair != donated.end()) {  // computed into the donated parameter's buffer
      const ir::TensorType& t = graph.type(v);
      const std::string type = LoweringContext::type(t);
      // A scope function already computed it into the parameter (its call's result is that
      // buffer); a materialization here would only make the entry's bufferization work harder.
      const std::string into =
          in_place.count(v) != 0
              ? ctx.value(v)
              : ctx.let(fmt::format("bufferization.materialize_in_destination {} in %p{} : ({}, {}) -> {}",
                                    ctx.value(v), pair->first, type, type, type),
                        "donated");
      lowered.result_of_output.push_back(out_names.size());
      unique.push_back(-1);  // never shared with another output
      out_names.push_back(into);
      out_types.push_back(type);
      lowered.results.push_back(t);
      continue;
    }
    auto it = std::find(unique.begin(), unique.end(), v);
    if (it == unique.end()) {
      lowered.result_of_output.push_back(unique.size());
      unique.push_back(v);
      out_names.push_back(ctx.value(v));
      out_types.push_back(LoweringContext::type(graph.type(v)));
      lowered.results.push_back(graph.type(v));
    } else {
      lowered.result_of_output.push_back(static_cast<size_t>(it - unique.begin()));
    }
  }
  std::string text = fmt::format("func.func @{}({}) -> ({}) attributes {{llvm.emit_c_interface}} {{\n",
                                 entry, fmt::join(params, ", "), fmt::join(out_types, ", "));
  for (const std::string& l : ctx.lines()) text += l + "\n";
  text += fmt::format("    return {}{}{}\n  }}\n", fmt::join(out_names, ", "),
                      out_names.empty() ? "" : " : ", fmt::join(out_types, ", "));
  std::string decls;
  for (const std::string& d : ctx.declarations()) decls += "  " + d + "\n";
  lowered.text = "module {\n" + decls + functions + "  " + text + "}\n";
  return lowered;
}

std::string lower_to_mlir(const ir::Graph& graph, const std::string& entry) {
  return lower_graph(graph, entry).text;
}

}  // namespace ingot::lower
