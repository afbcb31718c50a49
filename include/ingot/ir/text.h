// Textual form of the graph IR: printing and parsing (round-trip exact).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ingot/ir/graph.h"

namespace ingot::ir {

/// Prints `graph` in ingot's IR text form (see docs/ir.md), e.g.
///
///   func @main(%0: f32[2,3], %1: f32[3]) -> (f32[2,3]) {
///     %2 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = [2, 3]} : f32[2,3]
///     %3 = add(%0, %2) : f32[2,3]
///     return %3
///   }
///
/// Values are numbered densely in definition order, so the text is canonical; floats are
/// printed in their shortest round-trip form, so parse_graph(print_graph(g)) == g.
std::string print_graph(const Graph& graph);

/// Largest constant (dense literal) parse_graph builds: 1 GiB of data. A splat (`dense<0.0> :
/// f32[N,M]`) declares its size without spelling its elements, so without a cap a few bytes of
/// text could ask for any amount of memory; larger constants are a kParseError naming the type.
inline constexpr int64_t kMaxTextConstantBytes = int64_t{1} << 30;

/// Parses the text form. Throws ingot::Error(kParseError) with "line L, column C:" and what was
/// expected, e.g. for a dense literal over kMaxTextConstantBytes; shape-rule errors of a node are
/// reported with its line.
/// Ids are assigned in definition order (parameters first), whatever numbers the text uses.
Graph parse_graph(std::string_view text, const OpRegistry* registry = nullptr);

}  // namespace ingot::ir
