// Calling a Graph from inside a trace (inlining it into the recording graph).
#pragma once

#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/trace/tensor.h"

namespace ingot {

/// Inlines `graph` into the trace that `args` belong to (or the innermost active trace when
/// `args` is empty): re-emits every node over the mapped values and returns the Tensors of the
/// graph's outputs. `args` must match the graph's parameters in count, shape and dtype;
/// otherwise ingot::Error (kInvalidArgument / kShapeMismatch / kDTypeMismatch) names the
/// parameter index and both types. Throws kTraceError outside any trace.
std::vector<Tensor> call(const ir::Graph& graph, const std::vector<Tensor>& args);

/// Like call(), but also returns the Tensor of every value of `graph` (indexed by ValueId),
/// which autodiff uses to find the primal values of each node.
std::vector<Tensor> call_with_values(const ir::Graph& graph, const std::vector<Tensor>& args);

}  // namespace ingot
