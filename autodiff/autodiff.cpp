// Reverse-mode AD: trace the function into a subgraph, inline it into the current trace, and
// build the pullback by walking the subgraph's nodes backwards, calling each op's VJP rule.
#include "ingot/autodiff/autodiff.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <set>

#include "ingot/autodiff/vjp_rules.h"
#include "ingot/ir/op_registry.h"
#include "ingot/ir/passes.h"
#include "ingot/trace/call.h"
#include "ingot/trace/ops.h"

namespace ingot {

namespace {

/// The state shared by a vjp's outputs and its pullback: the traced subgraph and the Tensor of
/// each of its values in the outer trace.
struct Tape {
  ir::Graph graph;
  std::vector<Tensor> values;
  VjpOptions options;
};

void check_cotangent(const Tensor& ct, const Tensor& out, size_t i) {
  if (!(ct.type() == out.type())) {
    throw Error(
        ct.dtype() != out.dtype() ? ErrorCode::kDTypeMismatch : ErrorCode::kShapeMismatch,
        fmt::format("vjp: cotangent {} is {} but output {} is {}", i, ct.type().to_string(), i, out.type().to_string()),
        "pass one cotangent per output, of the output's shape and dtype");
  }
}

/// Adds `ct` into the cotangent slot `slot` (gradient accumulation when a value fans out).
void accumulate(std::optional<Tensor>& slot, const Tensor& ct) { slot = slot ? emit("add", {*slot, ct}).at(0) : ct; }

/// The forward value `v` for use in the backward pass: the stored Tensor, or with
/// rematerialisation a recomputation of its cheap elementwise producer from barrier'd inputs.
class BackwardValues {
 public:
  explicit BackwardValues(const Tape& tape) : tape_(tape) {}

  Tensor get(ir::ValueId v) {
    const ir::ValueInfo& info = tape_.graph.value(v);
    if (!tape_.options.rematerialize_elementwise || info.producer < 0) return tape_.values[v];
    const ir::Node& node = tape_.graph.node(info.producer);
    // The op's trait decides (OpTraits::cheap_to_recompute: elementwise maps, compare, select, ...).
    if (!tape_.graph.registry().get(node.op).traits.cheap_to_recompute) return tape_.values[v];
    auto it = recomputed_.find(v);
    if (it != recomputed_.end()) return it->second;
    std::vector<Tensor> inputs;
    for (ir::ValueId in : node.inputs) inputs.push_back(tape_.values[in]);
    // optimization_barrier keeps CSE from merging the recomputation back into the forward
    // pass (what jax.checkpoint does with StableHLO's optimization_barrier).
    std::vector<Tensor> barred = emit("optimization_barrier", inputs);
    std::vector<Tensor> outs = emit(node.op, barred, node.attrs);
    for (size_t i = 0; i < outs.size(); ++i) recomputed_[node.outputs[i]] = outs[i];
    return recomputed_.at(v);
  }

 private:
  const Tape& tape_;
  std::map<ir::ValueId, Tensor> recomputed_;
};

std::vector<Tensor> run_pullback_timed(const Tape& tape, const std::vector<Tensor>& cotangents);

/// Pullbacks nested in this thread's running pullback (0: outermost), so nested derivatives add
/// their time to the trace once (add_trace_autodiff_seconds).
thread_local int pullback_depth = 0;

std::vector<Tensor> run_pullback(const Tape& tape, const std::vector<Tensor>& cotangents) {
  const auto start = std::chrono::steady_clock::now();
  ++pullback_depth;
  struct Leave {
    std::chrono::steady_clock::time_point start;
    ~Leave() {
      if (--pullback_depth == 0) {
        add_trace_autodiff_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    }
  } leave{start};
  return run_pullback_timed(tape, cotangents);
}

std::vector<Tensor> run_pullback_timed(const Tape& tape, const std::vector<Tensor>& cotangents) {
  const ir::Graph& g = tape.graph;
  if (cotangents.size() != g.outputs().size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("pullback: {} cotangents given for {} outputs", cotangents.size(), g.outputs().size()),
                "pass one cotangent per output (an invalid Tensor() for a zero cotangent)");
  }
  std::vector<std::optional<Tensor>> ct(static_cast<size_t>(g.num_values()));
  for (size_t i = 0; i < cotangents.size(); ++i) {
    if (!cotangents[i].valid()) continue;
    const Tensor& out = tape.values[g.outputs()[i]];
    check_cotangent(cotangents[i], out, i);
    if (is_floating(out.dtype())) accumulate(ct[g.outputs()[i]], cotangents[i]);
  }
  BackwardValues values(tape);
  for (int64_t n = g.num_nodes() - 1; n >= 0; --n) {
    const ir::Node& node = g.nodes()[n];
    std::vector<std::optional<Tensor>> out_ct;
    bool any = false;
    for (ir::ValueId v : node.outputs) {
      out_ct.push_back(ct[v]);
      any = any || ct[v].has_value();
    }
    if (!any || node.inputs.empty()) continue;  // symbolic zero, or nothing to propagate into
    // The backward nodes of a forward node are named after it (a layer's backward pass is
    // "transpose/<layer scope>"), so the lowering recognises repeated blocks' backward passes.
    const NameScope scope(node.scope.empty() ? std::string("transpose") : "transpose/" + node.scope);
    const VjpRule* rule = VjpRules::builtin().find(node.op);
    if (rule == nullptr) {
      throw Error(ErrorCode::kUnimplemented, fmt::format("no VJP rule for '{}'", node.op),
                  "this op is not differentiable; stop the gradient before it");
    }
    std::vector<Tensor> operands, results;
    for (ir::ValueId v : node.inputs) operands.push_back(values.get(v));
    for (ir::ValueId v : node.outputs) results.push_back(values.get(v));
    std::vector<std::optional<Tensor>> in_ct = (*rule)(VjpArgs{node.attrs, operands, results, out_ct});
    if (in_ct.size() != node.inputs.size()) {
      throw Error(ErrorCode::kInternal, fmt::format("VJP rule of '{}' returned {} cotangents for {} operands", node.op,
                                                    in_ct.size(), node.inputs.size()));
    }
    for (size_t i = 0; i < in_ct.size(); ++i) {
      if (!in_ct[i]) continue;
      const ir::TensorType& want = g.type(node.inputs[i]);
      if (!is_floating(want.dtype)) continue;  // no cotangent for integer/bool values
      if (!(in_ct[i]->type() == want)) {
        throw Error(ErrorCode::kInternal, fmt::format("VJP rule of '{}' returned {} for operand {} of type {}", node.op,
                                                      in_ct[i]->type().to_string(), i, want.to_string()));
      }
      accumulate(ct[node.inputs[i]], *in_ct[i]);
    }
  }
  std::vector<Tensor> result;
  for (size_t i = 0; i < g.parameters().size(); ++i) {
    const std::optional<Tensor>& c = ct[g.parameters()[i]];
    result.push_back(c ? *c : zeros_like(tape.values[g.parameters()[i]]));
  }
  return result;
}

std::vector<ir::TensorType> types_of(const std::vector<Tensor>& ts) {
  std::vector<ir::TensorType> types;
  for (const Tensor& t : ts) types.push_back(t.type());
  return types;
}

void check_argnums(const std::vector<int64_t>& argnums, size_t num_args) {
  if (argnums.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "value_and_grad: argnums is empty",
                "name at least one argument to differentiate with respect to");
  }
  std::set<int64_t> seen;
  for (int64_t a : argnums) {
    if (a < 0 || a >= static_cast<int64_t>(num_args)) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("value_and_grad: argnum {} is out of range for {} arguments", a, num_args),
                  fmt::format("use argnums in [0, {})", num_args));
    }
    if (!seen.insert(a).second) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("value_and_grad: argnum {} is repeated", a));
    }
  }
}

void check_loss(const Tensor& loss) {
  if (loss.rank() != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("value_and_grad: the loss (output 0) must be a scalar but has shape {}",
                            shape_to_string(loss.shape())),
                "reduce the loss with ingot::sum or ingot::mean, or use vjp for non-scalar outputs");
  }
  if (!is_floating(loss.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("value_and_grad: the loss must be floating point but is {}", dtype_name(loss.dtype())),
                "convert the loss to f32");
  }
}

/// Shared body of value_and_grad and grad: returns (outputs of fn, grads for argnums).
std::pair<std::vector<Tensor>, std::vector<Tensor>> loss_and_grads(const TraceFn& fn, const std::vector<Tensor>& args,
                                                                   const std::vector<int64_t>& argnums, bool has_aux,
                                                                   const VjpOptions& options) {
  check_argnums(argnums, args.size());
  auto [outs, pullback] = vjp(fn, args, options);
  if (outs.empty() || (!has_aux && outs.size() != 1)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("value_and_grad: the function returned {} outputs; expected {}", outs.size(),
                            has_aux ? "the loss followed by aux values" : "exactly 1"),
                has_aux ? "return at least the loss" : "pass has_aux = true to return aux values");
  }
  check_loss(outs[0]);
  std::vector<Tensor> cts(outs.size());
  cts[0] = ones_like(outs[0]);
  std::vector<Tensor> all = pullback(cts);
  std::vector<Tensor> grads;
  for (int64_t a : argnums) grads.push_back(all[static_cast<size_t>(a)]);
  return {outs, grads};
}

}  // namespace

std::pair<std::vector<Tensor>, Pullback> vjp(const TraceFn& fn, const std::vector<Tensor>& primals,
                                             const VjpOptions& options) {
  auto tape = std::make_shared<Tape>();
  tape->graph = trace(fn, types_of(primals), "vjp");
  tape->options = options;
  tape->values = call_with_values(tape->graph, primals);
  std::vector<Tensor> outs;
  for (ir::ValueId v : tape->graph.outputs()) outs.push_back(tape->values[v]);
  Pullback pullback = [tape](const std::vector<Tensor>& cts) { return run_pullback(*tape, cts); };
  return {outs, pullback};
}

TraceFn value_and_grad(TraceFn fn, std::vector<int64_t> argnums, bool has_aux, VjpOptions options) {
  return [fn = std::move(fn), argnums = std::move(argnums), has_aux, options](const std::vector<Tensor>& args) {
    auto [outs, grads] = loss_and_grads(fn, args, argnums, has_aux, options);
    outs.insert(outs.end(), grads.begin(), grads.end());
    return outs;
  };
}

TraceFn grad(TraceFn fn, std::vector<int64_t> argnums, bool has_aux, VjpOptions options) {
  return [fn = std::move(fn), argnums = std::move(argnums), has_aux, options](const std::vector<Tensor>& args) {
    auto [outs, grads] = loss_and_grads(fn, args, argnums, has_aux, options);
    grads.insert(grads.end(), outs.begin() + 1, outs.end());
    return grads;
  };
}

ir::Graph value_and_grad_graph(const ir::Graph& graph, std::vector<int64_t> argnums, bool has_aux, VjpOptions options) {
  std::vector<ir::TensorType> types;
  for (ir::ValueId p : graph.parameters()) types.push_back(graph.type(p));
  TraceFn fn = [&graph](const std::vector<Tensor>& args) { return call(graph, args); };
  ir::Graph g =
      trace(value_and_grad(fn, std::move(argnums), has_aux, options), types, graph.name() + "_value_and_grad");
  return ir::eliminate_common_subexpressions(ir::eliminate_dead_code(g));
}

}  // namespace ingot
