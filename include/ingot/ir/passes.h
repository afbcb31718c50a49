// Graph-to-graph passes on the IR (named; see docs/ir.md). Each returns a new graph.
#pragma once

#include "ingot/ir/graph.h"

namespace ingot::ir {

/// "dce": removes nodes none of whose outputs reach a graph output. All ops are pure
/// (rng_bit_generator is a pure function of its state operand), so nothing else is kept.
Graph eliminate_dead_code(const Graph& graph);

/// "cse": merges nodes with the same op, attributes (constants compared bitwise) and operands,
/// then removes what became dead.
Graph eliminate_common_subexpressions(const Graph& graph);

}  // namespace ingot::ir
