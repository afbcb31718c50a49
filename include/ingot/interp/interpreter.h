// The reference interpreter: executes any Graph on host Arrays. It is the oracle that every
// compiled result is tested against.
#pragma once

#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/array.h"

namespace ingot::interp {

/// Runs `graph` on `arguments` (one per parameter, matching its shape and dtype) with each op's
/// interpreter kernel, in node order, and returns the graph outputs.
///
/// Throws ingot::Error(kInvalidArgument) for a wrong argument count, kShapeMismatch /
/// kDTypeMismatch naming the parameter index and both types for a mismatched argument, and
/// kUnimplemented naming the op when it has no interpreter kernel.
std::vector<Array> interpret(const ir::Graph& graph, const std::vector<Array>& arguments);

}  // namespace ingot::interp
