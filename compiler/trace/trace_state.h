// Internal: the state of one running trace.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/trace/tensor.h"

namespace ingot::trace_detail {

/// The graph being recorded plus bookkeeping. Shared by every Tensor of the trace so a Tensor
/// that outlives its trace can say which trace it came from.
struct TraceState {
  explicit TraceState(std::string name, int64_t serial) : graph(std::move(name)), serial(serial) {}
  ir::Graph graph;
  int64_t serial;               ///< 1, 2, ... per thread, for error messages
  bool finished = false;        ///< set when trace() returns
  double autodiff_seconds = 0;  ///< TraceStats::autodiff_seconds
  std::string scope;            ///< the live NameScopes' names joined by '/' (ir::Node::scope)
};

/// The innermost active trace of this thread, or nullptr.
std::shared_ptr<TraceState> current_trace();

}  // namespace ingot::trace_detail
