// compile_graph_spmd (include/ingot/jit/spmd.h): a per-device graph split at its collectives into
// compiled segments and collective thunks over one slot table.
#include "ingot/jit/spmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <system_error>
#include <thread>

#include "ingot/jit/jit.h"
#include "ingot/runtime/spmd.h"
#include "jit/jit_internal.h"

namespace ingot {
namespace {

bool is_collective(const ir::Node& node) {
  return node.op == "all_reduce" || node.op == "all_gather" || node.op == "reduce_scatter";
}

ReduceOp reduce_op(const std::string& reduction) {
  if (reduction == "sum") return ReduceOp::kSum;
  if (reduction == "mean") return ReduceOp::kMean;
  if (reduction == "max") return ReduceOp::kMax;
  return ReduceOp::kMin;  // the op's shape rule admits nothing else
}

/// One step of an SPMD program's schedule: a compute node, or the start or the end (wait) of a
/// collective node.
struct Step {
  enum Kind { kNode, kStart, kWait } kind;
  size_t node;
};

/// The graph's nodes in the order they run, collectives split into start and wait. Without
/// `overlap`: the graph's order, each collective waited for at once. With it, list scheduling
/// (the start/done split of XLA's async collectives): a collective starts as soon as its input is
/// computed, ready compute nodes run in graph order, and a collective is waited for (oldest
/// first) only when no compute node is ready without it. In a data-parallel train step the last
/// layers' gradient bucket so reduces while the earlier layers' gradients are computed, and the
/// metric states' all-reduce while the optimizer updates the first buckets' variables. (Ranking
/// ready nodes by the collective they feed started the metric all-reduce before the backward
/// pass, but cut the step into more segments: the CNN step compiled in 3.8 s instead of 2.8 s,
/// 1.6 s in graph order, for no measurable step-time gain on 2 cores.)
std::vector<Step> schedule(const ir::Graph& g, bool overlap) {
  const size_t n = g.nodes().size();
  std::vector<Step> steps;
  if (!overlap) {
    for (size_t i = 0; i < n; ++i) {
      if (!is_collective(g.nodes()[i])) {
        steps.push_back({Step::kNode, i});
      } else {
        steps.push_back({Step::kStart, i});
        steps.push_back({Step::kWait, i});
      }
    }
    return steps;
  }
  // Predecessor and successor nodes (through the nodes' inputs).
  std::vector<std::vector<size_t>> preds(n), succs(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<size_t> from;
    for (ir::ValueId v : g.nodes()[i].inputs) {
      if (g.value(v).producer >= 0) from.insert(static_cast<size_t>(g.value(v).producer));
    }
    preds[i].assign(from.begin(), from.end());
    for (size_t p : from) succs[p].push_back(i);
  }
  std::vector<size_t> missing(n);
  for (size_t i = 0; i < n; ++i) missing[i] = preds[i].size();
  std::set<size_t> ready_compute;
  std::set<size_t> ready_collectives;
  std::vector<size_t> in_flight;  // FIFO
  auto make_ready = [&](size_t i) {
    if (is_collective(g.nodes()[i])) {
      ready_collectives.insert(i);
    } else {
      ready_compute.insert(i);
    }
  };
  auto available = [&](size_t i) {  // node i's outputs can be read
    for (size_t s : succs[i]) {
      if (--missing[s] == 0) make_ready(s);
    }
  };
  for (size_t i = 0; i < n; ++i) {
    if (missing[i] == 0) make_ready(i);
  }
  while (!ready_collectives.empty() || !ready_compute.empty() || !in_flight.empty()) {
    if (!ready_collectives.empty()) {
      const size_t c = *ready_collectives.begin();
      ready_collectives.erase(ready_collectives.begin());
      steps.push_back({Step::kStart, c});
      in_flight.push_back(c);
    } else if (!ready_compute.empty()) {
      const size_t i = *ready_compute.begin();
      ready_compute.erase(ready_compute.begin());
      steps.push_back({Step::kNode, i});
      available(i);
    } else {
      const size_t c = in_flight.front();
      in_flight.erase(in_flight.begin());
      steps.push_back({Step::kWait, c});
      available(c);
    }
  }
  return steps;
}

/// Builds the Executable: the slot of every graph value computed so far, the slot types and the
/// thunks, segment by segment along the schedule.
class SpmdBuilder {
 public:
  SpmdBuilder(const ir::Graph& graph, const codegen::CpuCompileOptions& options, const lower::LoweringOptions& lowering,
              const SpmdOptions& spmd)
      : g_(graph),
        options_(options),
        lowering_(lowering),
        donate_argnums_(spmd.donate_argnums),
        collective_ns_(spmd.collective_nanoseconds),
        compile_segment_(spmd.compile_segment),
        copy_(spmd.copy),
        steps_(schedule(graph, spmd.overlap_collectives)) {
    for (ir::ValueId p : g_.parameters()) {
      slot_of_[p] = slots_.size();
      slots_.emplace_back(g_.type(p).shape, g_.type(p).dtype);
    }
    // The last use of each value (schedule position; a collective reads its input until its wait;
    // outputs count as after every step).
    for (size_t p = 0; p < steps_.size(); ++p) {
      const ir::Node& node = g_.nodes()[steps_[p].node];
      if (steps_[p].kind == Step::kStart) continue;
      for (ir::ValueId v : node.inputs) last_use_[v] = p;
    }
    for (ir::ValueId v : g_.outputs()) last_use_[v] = steps_.size();
    // Donation: each donated parameter paired with an output (as compile_graph pairs them) is
    // written in place by the segment that computes that output, if no later step reads it.
    for (const auto& [param, output] : detail::donation_pairs(g_, donate_argnums_)) {
      donate_into_[g_.outputs()[output]] = g_.parameters()[param];
    }
  }

  std::shared_ptr<const Executable> build() {
    // 1. The events in schedule order: segments (prepared, not yet compiled), collective starts
    // and waits.
    std::vector<size_t> segment;  // schedule positions of consecutive compute nodes
    for (size_t p = 0; p < steps_.size(); ++p) {
      const Step& step = steps_[p];
      if (step.kind == Step::kNode) {
        segment.push_back(p);
        continue;
      }
      prepare_segment(segment);
      segment.clear();
      // A start waited for at once is a plain (synchronous) collective.
      const bool async = step.kind == Step::kStart && (p + 1 >= steps_.size() || steps_[p + 1].kind != Step::kWait ||
                                                       steps_[p + 1].node != step.node);
      events_.push_back({step.kind == Step::kStart ? Event::kStart : Event::kWait, step.node, async});
    }
    prepare_segment(segment);
    // 2. The segments compile concurrently (each compile_graph has its own MLIR context and JIT).
    const std::vector<std::shared_ptr<const Executable>> compiled = compile_segments();
    // 3. The thunks in schedule order over one slot table.
    // Asynchronous all_reduces started one after the other (several gradient buckets ready at
    // once) are one grouped thunk, waited for where the first of them is.
    std::map<size_t, size_t> started;  // collective node -> its start thunk
    std::set<size_t> waited;           // start thunks already waited for
    for (size_t i = 0; i < events_.size(); ++i) {
      const Event& e = events_[i];
      if (e.kind == Event::kSegment) {
        append(*compiled[e.index], pending_[e.index].external, pending_[e.index].ordered);
      } else if (e.kind == Event::kStart) {
        size_t end = i + 1;
        while (end < events_.size() && groupable(i, end)) ++end;
        for (size_t k = i; k < end; ++k) started[events_[k].index] = thunks_.size();
        if (end - i > 1) {
          add_all_reduce_group(i, end);
          i = end - 1;
        } else {
          add_collective(g_.nodes()[e.index], e.async);
        }
      } else if (const size_t t = started.at(e.index); thunks_[t].async && waited.insert(t).second) {
        Thunk wait;
        wait.name = "wait " + thunks_[t].name;
        wait.wait_for = t;
        thunks_.push_back(std::move(wait));
      }
    }
    std::vector<size_t> outputs;
    for (ir::ValueId v : g_.outputs()) outputs.push_back(output_slot(v));
    std::vector<size_t> donated;
    for (int64_t a : donate_argnums_) donated.push_back(static_cast<size_t>(a));
    return std::make_shared<const Executable>(std::move(slots_), g_.parameters().size(), std::move(thunks_),
                                              std::move(outputs), std::move(donated), "spmd:" + g_.name());
  }

 private:
  /// Whether value `v` is read after schedule position `last`.
  bool used_after(ir::ValueId v, size_t last) const {
    const auto it = last_use_.find(v);
    return it != last_use_.end() && it->second > last;
  }

  /// A segment's sub-graph (the nodes at schedule `positions`), its donations and the graph values
  /// it reads and produces for later steps, queued for compile_segments(); dead code is dropped.
  void prepare_segment(const std::vector<size_t>& positions) {
    if (positions.empty()) return;
    const size_t end = positions.back();
    std::vector<size_t> nodes;
    for (size_t p : positions) nodes.push_back(steps_[p].node);
    ir::Graph sub(fmt::format("{}_segment{}", g_.name(), segments_), &g_.registry());
    std::map<ir::ValueId, ir::ValueId> local;  // graph value -> sub value
    std::vector<ir::ValueId> external;         // graph values the segment reads from outside
    std::set<ir::ValueId> produced;
    for (size_t n : nodes) {
      const ir::Node& node = g_.nodes()[n];
      std::vector<ir::ValueId> inputs;
      for (ir::ValueId v : node.inputs) {
        if (!local.count(v)) {
          local[v] = sub.add_parameter(g_.type(v));
          external.push_back(v);
        }
        inputs.push_back(local[v]);
      }
      std::vector<ir::TensorType> types;
      for (ir::ValueId v : node.outputs) types.push_back(g_.type(v));
      const std::vector<ir::ValueId> outs = sub.add_node_with_types(node.op, inputs, node.attrs, types);
      for (size_t i = 0; i < outs.size(); ++i) {
        local[node.outputs[i]] = outs[i];
        produced.insert(node.outputs[i]);
      }
    }
    std::vector<ir::ValueId> results;  // produced here and read later
    for (ir::ValueId v : produced) {
      if (used_after(v, end)) results.push_back(v);
    }
    ++segments_;
    if (results.empty()) return;  // nothing of it is read: dead code
    // Results written into a donated parameter's buffer come first, in donation order, so that
    // compile_graph pairs each donated sub-parameter with its own result.
    std::vector<int64_t> sub_donate;
    std::vector<ir::ValueId> ordered;
    for (ir::ValueId v : results) {
      const auto d = donate_into_.find(v);
      if (d == donate_into_.end() || used_after(d->second, end)) continue;
      if (!local.count(d->second)) {  // the segment does not read the parameter: it is only the destination
        local[d->second] = sub.add_parameter(g_.type(d->second));
        external.push_back(d->second);
      }
      const ir::ValueId sub_param = local[d->second];
      const auto& params = sub.parameters();
      sub_donate.push_back(std::find(params.begin(), params.end(), sub_param) - params.begin());
      ordered.push_back(v);
    }
    for (ir::ValueId v : results) {
      if (std::find(ordered.begin(), ordered.end(), v) == ordered.end()) ordered.push_back(v);
    }
    std::vector<ir::ValueId> sub_outputs;
    for (ir::ValueId v : ordered) sub_outputs.push_back(local[v]);
    sub.set_outputs(sub_outputs);
    events_.push_back({Event::kSegment, pending_.size(), false});
    pending_.push_back({std::move(sub), std::move(sub_donate), std::move(external), std::move(ordered), segments_ - 1});
  }

  /// Compiles the prepared segments, at most hardware_concurrency() at a time; the first failing
  /// segment's error (in schedule order) is thrown, naming it.
  std::vector<std::shared_ptr<const Executable>> compile_segments() const {
    std::vector<std::shared_ptr<const Executable>> out(pending_.size());
    std::vector<std::exception_ptr> errors(pending_.size());
    std::atomic<size_t> next{0};
    const auto work = [&] {
      for (size_t i = next++; i < pending_.size(); i = next++) {
        try {
          out[i] = compile_segment_ ? compile_segment_(pending_[i].graph, pending_[i].donate)
                                    : compile_graph(pending_[i].graph, options_, pending_[i].donate, lowering_);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    const size_t workers = std::min<size_t>(pending_.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t w = 1; w < workers; ++w) {
      try {
        threads.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // no more threads to be had (a thread or address-space limit): fewer compile the segments
      }
    }
    work();
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < errors.size(); ++i) {
      if (!errors[i]) continue;
      try {
        std::rethrow_exception(errors[i]);
      } catch (const Error& e) {
        throw e.with_context(fmt::format("compile_graph_spmd: segment {} of '{}'", pending_[i].number, g_.name()));
      }
    }
    return out;
  }

  /// Appends `exe`'s thunks with its slots mapped into the global table: its inputs to the slots
  /// of `external`, every other slot to a new one; then records the slots of `results`.
  void append(const Executable& exe, const std::vector<ir::ValueId>& external,
              const std::vector<ir::ValueId>& results) {
    std::vector<size_t> global(exe.slot_types().size());
    for (size_t s = 0; s < global.size(); ++s) {
      if (s < exe.num_inputs()) {
        global[s] = slot_of_.at(external[s]);
      } else {
        global[s] = slots_.size();
        slots_.push_back(exe.slot_types()[s]);
      }
    }
    for (Thunk t : exe.thunks()) {
      for (size_t& s : t.input_slots) s = global[s];
      for (size_t& s : t.output_slots) s = global[s];
      thunks_.push_back(std::move(t));
    }
    for (size_t i = 0; i < results.size(); ++i) slot_of_[results[i]] = global[exe.outputs()[i]];
  }

  void add_collective(const ir::Node& node, bool async) {
    const size_t in = slot_of_.at(node.inputs[0]), out = slots_.size();
    slots_.emplace_back(g_.type(node.outputs[0]).shape, g_.type(node.outputs[0]).dtype);
    const std::string& axis = node.attrs.get_string("axis_name");
    if (node.op == "all_gather") {
      thunks_.push_back(all_gather_thunk(in, out, axis));
    } else if (node.op == "reduce_scatter") {
      thunks_.push_back(reduce_scatter_thunk(in, out, reduce_op(node.attrs.get_string("reduction")), axis));
    } else {
      thunks_.push_back(all_reduce_thunk(in, out, reduce_op(node.attrs.get_string("reduction")), axis));
    }
    if (collective_ns_) timed(thunks_.back());
    thunks_.back().async = async;
    slot_of_[node.outputs[0]] = out;
  }

  /// Whether start event `j` joins the group of start event `i`: both asynchronous all_reduces
  /// with the same reduction over the same axis.
  bool groupable(size_t i, size_t j) const {
    const auto& a = events_[i];
    const auto& b = events_[j];
    if (a.kind != Event::kStart || b.kind != Event::kStart || !a.async || !b.async) return false;
    const ir::Node& x = g_.nodes()[a.index];
    const ir::Node& y = g_.nodes()[b.index];
    return x.op == "all_reduce" && y.op == "all_reduce" &&
           x.attrs.get_string("reduction") == y.attrs.get_string("reduction") &&
           x.attrs.get_string("axis_name") == y.attrs.get_string("axis_name");
  }

  /// One asynchronous all_reduce_group thunk for the start events [first, end) (groupable).
  void add_all_reduce_group(size_t first, size_t end) {
    std::vector<size_t> ins, outs;
    for (size_t k = first; k < end; ++k) {
      const ir::Node& node = g_.nodes()[events_[k].index];
      ins.push_back(slot_of_.at(node.inputs[0]));
      outs.push_back(slots_.size());
      slots_.emplace_back(g_.type(node.outputs[0]).shape, g_.type(node.outputs[0]).dtype);
      slot_of_[node.outputs[0]] = outs.back();
    }
    const ir::Node& node = g_.nodes()[events_[first].index];
    thunks_.push_back(all_reduce_group_thunk(std::move(ins), std::move(outs),
                                             reduce_op(node.attrs.get_string("reduction")),
                                             node.attrs.get_string("axis_name")));
    if (collective_ns_) timed(thunks_.back());
    thunks_.back().async = true;
  }

  /// Makes `t` add its wall time to collective_ns_.
  void timed(Thunk& t) const {
    t.collective = [inner = std::move(t.collective), total = collective_ns_](Communicator& c, std::span<const Array> in,
                                                                             std::span<Array> out) {
      const auto start = std::chrono::steady_clock::now();
      inner(c, in, out);
      *total += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    };
  }

  /// The slot holding graph output `v`; a graph parameter returned as is gets a copy in its own
  /// slot (outputs never alias the caller's non-donated inputs, as compile_graph).
  size_t output_slot(ir::ValueId v) {
    const size_t slot = slot_of_.at(v);
    // A computed value in a parameter's slot was written into a donated buffer: returned as is.
    if (slot >= g_.parameters().size() || g_.value(v).producer >= 0) return slot;
    const size_t out = slots_.size();
    slots_.push_back(slots_[slot]);
    Thunk copy;
    copy.name = "copy";
    copy.input_slots = {slot};
    copy.output_slots = {out};
    if (copy_) {
      copy.run = [c = copy_](std::span<const Array> in, std::span<Array> o) { c(in[0], o[0]); };
    } else {
      copy.run = [](std::span<const Array> in, std::span<Array> o) {  // host memory: CPU devices
        if (in[0].nbytes() > 0) std::memcpy(o[0].raw_data(), in[0].raw_data(), static_cast<size_t>(in[0].nbytes()));
      };
    }
    thunks_.push_back(std::move(copy));
    return out;
  }

  const ir::Graph& g_;
  const codegen::CpuCompileOptions& options_;
  const lower::LoweringOptions& lowering_;
  std::vector<std::pair<Shape, DType>> slots_;
  std::vector<Thunk> thunks_;
  std::map<ir::ValueId, size_t> slot_of_;
  std::map<ir::ValueId, size_t> last_use_;
  std::vector<int64_t> donate_argnums_;
  std::map<ir::ValueId, ir::ValueId> donate_into_;  ///< graph output -> the donated parameter it may overwrite
  std::shared_ptr<std::atomic<int64_t>> collective_ns_;
  decltype(SpmdOptions::compile_segment) compile_segment_;
  decltype(SpmdOptions::copy) copy_;
  std::vector<Step> steps_;
  int segments_ = 0;
  /// A segment prepared for compilation: its sub-graph and donated parameters, the graph values
  /// its parameters are (external) and its results (ordered), its number (for errors).
  struct PendingSegment {
    ir::Graph graph;
    std::vector<int64_t> donate;
    std::vector<ir::ValueId> external, ordered;
    int number;
  };
  /// What build() emits, in schedule order: a prepared segment (index into pending_), or a
  /// collective's start (async: waited for later) or wait (index: the collective node).
  struct Event {
    enum Kind { kSegment, kStart, kWait } kind;
    size_t index;
    bool async;
  };
  std::vector<PendingSegment> pending_;
  std::vector<Event> events_;
};

}  // namespace

std::shared_ptr<const Executable> compile_graph_spmd(const ir::Graph& graph, const codegen::CpuCompileOptions& options,
                                                     const lower::LoweringOptions& lowering, const SpmdOptions& spmd) {
  return SpmdBuilder(graph, options, lowering, spmd).build();
}

}  // namespace ingot
