#include "ingot/trace/tensor.h"

#include <fmt/format.h>

#include "trace/trace_state.h"

namespace ingot {

namespace trace_detail {
namespace {

// Per-thread stack of active traces (innermost last) and a serial counter for messages.
// Thread-local by design, as JAX's trace stack: each thread traces independently.
struct ThreadTraces {
  std::vector<std::shared_ptr<TraceState>> stack;
  int64_t next_serial = 1;
};
thread_local ThreadTraces g_thread_traces;

std::string describe(const TraceState& s) {
  return fmt::format("trace #{} ('{}'{})", s.serial, s.graph.name(), s.finished ? ", finished" : "");
}

}  // namespace

std::shared_ptr<TraceState> current_trace() {
  auto& st = g_thread_traces.stack;
  return st.empty() ? nullptr : st.back();
}

}  // namespace trace_detail

using trace_detail::TraceState;

namespace {

const TraceState& checked_state(const Tensor& t) {
  if (!t.valid()) {
    throw Error(ErrorCode::kTraceError, "use of an invalid (default-constructed) Tensor",
                "create tensors inside trace() from its arguments or ingot::constant()");
  }
  return *t.state();
}

}  // namespace

ir::TensorType Tensor::type() const { return checked_state(*this).graph.type(id_); }
Shape Tensor::shape() const { return type().shape; }
DType Tensor::dtype() const { return type().dtype; }

int64_t Tensor::dim(int64_t axis) const {
  const int64_t r = rank();
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("Tensor::dim: axis {} is out of range for rank {}", axis, r));
  }
  return shape()[static_cast<size_t>(a)];
}

void add_trace_autodiff_seconds(double seconds) {
  if (std::shared_ptr<TraceState> state = trace_detail::current_trace()) state->autodiff_seconds += seconds;
}

ir::Graph trace(const TraceFn& fn, const std::vector<ir::TensorType>& inputs, const std::string& name,
                TraceStats* stats) {
  auto& threads = trace_detail::g_thread_traces;
  auto state = std::make_shared<TraceState>(name, threads.next_serial++);
  std::vector<Tensor> args;
  for (const ir::TensorType& t : inputs) args.emplace_back(state, state->graph.add_parameter(t));

  threads.stack.push_back(state);
  struct Pop {  // pops the trace and marks it finished even when fn throws
    std::shared_ptr<TraceState> s;
    ~Pop() {
      s->finished = true;
      auto& st = trace_detail::g_thread_traces.stack;
      if (!st.empty() && st.back() == s) st.pop_back();
    }
  } pop{state};

  std::vector<Tensor> results = fn(args);
  std::vector<ir::ValueId> outs;
  for (size_t i = 0; i < results.size(); ++i) {
    const Tensor& r = results[i];
    if (!r.valid()) {
      throw Error(ErrorCode::kTraceError, fmt::format("trace '{}': result {} is an invalid Tensor", name, i));
    }
    if (r.state() != state) {
      throw Error(ErrorCode::kTraceError,
                  fmt::format("trace '{}': result {} belongs to {}, not to {}", name, i,
                              trace_detail::describe(*r.state()), trace_detail::describe(*state)),
                  "return tensors computed inside this trace");
    }
    outs.push_back(r.id());
  }
  state->graph.set_outputs(outs);
  if (stats != nullptr) stats->autodiff_seconds = state->autodiff_seconds;
  return state->graph;
}

NameScope::NameScope(const std::string& name) : state_(trace_detail::current_trace()) {
  if (name.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "NameScope: the name is empty", "give the scope a non-empty name");
  }
  if (!state_) return;
  previous_size_ = state_->scope.size();
  state_->scope += state_->scope.empty() ? name : "/" + name;
}

NameScope::~NameScope() {
  if (state_) state_->scope.resize(previous_size_);
}

std::vector<Tensor> emit(const std::string& op, const std::vector<Tensor>& inputs, ir::Attributes attrs) {
  std::shared_ptr<TraceState> state = trace_detail::current_trace();
  if (!inputs.empty()) {
    checked_state(inputs[0]);
    state = inputs[0].state();
  }
  if (!state) {
    throw Error(ErrorCode::kTraceError, fmt::format("'{}' called outside of any trace", op),
                "call tensor operations inside the function given to ingot::trace()");
  }
  if (state->finished) {
    throw Error(ErrorCode::kTraceError,
                fmt::format("'{}' used a Tensor of {}, which has already finished", op, trace_detail::describe(*state)),
                "tensors cannot leak out of the trace that made them; return them instead");
  }
  std::vector<ir::ValueId> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TraceState& s = checked_state(inputs[i]);
    if (&s != state.get()) {
      throw Error(ErrorCode::kTraceError,
                  fmt::format("'{}' mixes tensors of {} (operand 0) and {} (operand {})", op,
                              trace_detail::describe(*state), trace_detail::describe(s), i),
                  "a tensor from one trace cannot be used in another; pass it as an argument");
    }
    ids.push_back(inputs[i].id());
  }
  auto current = trace_detail::current_trace();
  if (current && current != state && !inputs.empty()) {
    throw Error(ErrorCode::kTraceError,
                fmt::format("'{}' used a Tensor of {} inside {}", op, trace_detail::describe(*state),
                            trace_detail::describe(*current)),
                "a tensor from an outer trace cannot be used in a nested trace; pass it as an "
                "argument of the nested function");
  }
  std::vector<ir::ValueId> outs = state->graph.add_node(op, ids, std::move(attrs));
  if (!state->scope.empty()) state->graph.set_scope(state->graph.num_nodes() - 1, state->scope);
  std::vector<Tensor> result;
  for (ir::ValueId v : outs) result.emplace_back(state, v);
  return result;
}

}  // namespace ingot
