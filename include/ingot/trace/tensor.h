// Tensor: a symbolic value inside a trace, and trace() which turns a C++ function into a Graph.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/array.h"

namespace ingot {

namespace trace_detail {
struct TraceState;
}

/// A symbolic tensor: one IR value of the trace that is recording it.
///
/// Tensors are cheap handles. Every operation on them appends a node to their trace's Graph.
/// Using a Tensor after its trace has finished, or inside a different trace, throws
/// ingot::Error(kTraceError) naming both traces.
class Tensor {
 public:
  Tensor() = default;
  bool valid() const { return state_ != nullptr; }
  /// Shape and type are returned by value: the graph's storage moves as nodes are added, so a
  /// reference could dangle across the next operation.
  Shape shape() const;
  DType dtype() const;
  int64_t rank() const { return static_cast<int64_t>(shape().size()); }
  /// Size of dimension `axis` (negative counts from the end). Throws kOutOfRange.
  int64_t dim(int64_t axis) const;
  int64_t size() const { return num_elements(shape()); }
  ir::TensorType type() const;
  /// The IR value id in the trace's graph.
  ir::ValueId id() const { return id_; }

  // Internal: used by the tracer implementation.
  Tensor(std::shared_ptr<trace_detail::TraceState> state, ir::ValueId id) : state_(std::move(state)), id_(id) {}
  const std::shared_ptr<trace_detail::TraceState>& state() const { return state_; }

 private:
  std::shared_ptr<trace_detail::TraceState> state_;
  ir::ValueId id_ = -1;
};

/// A function from tensors to tensors, the unit that trace() records.
using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// What one trace() call measured (compile-time breakdowns: ingot bench --json).
struct TraceStats {
  /// Wall-clock seconds of the trace spent differentiating (autodiff's pullbacks, outermost
  /// ones only, so nested derivatives are not counted twice); the rest of the trace is tracing.
  double autodiff_seconds = 0;
};

/// Records `fn` applied to fresh parameters of types `inputs` into a new Graph named `name`.
///
/// Arrays the function turns into tensors (ingot::constant) become `constant` nodes
/// ("captured constants"). Calls to other C++ functions inside `fn` are simply inlined. A
/// trace may run inside another trace's function (nested tracing); tensors do not cross between
/// them. Throws whatever an op throws (shape errors name the op and shapes), and
/// ingot::Error(kTraceError) if `fn` returns a Tensor of another trace or an invalid Tensor.
///
/// `stats`, when given, receives what the trace measured (TraceStats).
ir::Graph trace(const TraceFn& fn, const std::vector<ir::TensorType>& inputs, const std::string& name = "main",
                TraceStats* stats = nullptr);

/// Adds `seconds` to the autodiff time of this thread's innermost active trace (TraceStats); a
/// no-op outside any trace. Called by autodiff.
void add_trace_autodiff_seconds(double seconds);

/// Names the nodes recorded while it is alive, as jax.named_scope and tf.name_scope do: every node
/// the innermost active trace records gets the names of the live NameScopes of that trace, outer
/// first, joined by '/' (ir::Node::scope). Layers open one with their name around each call, and
/// autodiff one named "transpose/<the forward node's scope>" around a node's backward pass, so a
/// model's repeated blocks (forward and backward) are recognisable in the traced step: the CPU
/// compiler compiles each repeated, structurally identical scope once
/// (lower::LoweringOptions::share_repeated_scopes). Outside any trace it does nothing. Scopes must
/// be destroyed in reverse order of construction (a stack, as RAII gives). Throws
/// ingot::Error(kInvalidArgument) for an empty `name`.
class NameScope {
 public:
  explicit NameScope(const std::string& name);
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;

 private:
  std::shared_ptr<trace_detail::TraceState> state_;  ///< the trace it names nodes of; null outside any
  size_t previous_size_ = 0;                         ///< the trace's scope path length before it
};

/// Appends a raw node of `op` with `attrs` over `inputs` to the trace the inputs belong to
/// (or, with no inputs, the innermost active trace) and returns its outputs. All the typed
/// functions in ops.h go through this. Throws kTraceError outside any trace.
std::vector<Tensor> emit(const std::string& op, const std::vector<Tensor>& inputs, ir::Attributes attrs = {});

}  // namespace ingot
