// Helpers shared by compiler/jit's targets; internal to compiler/jit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/array.h"

namespace ingot::detail {

/// Pairs each donated parameter of `graph` with the first unpaired output of the same type that
/// the graph computes (not a parameter returned unchanged, not an output returned twice): the
/// (parameter, output) pairs whose output is written into the parameter's buffer (compile_graph,
/// compile_graph_cuda). Throws ingot::Error(kInvalidArgument) for a donate_argnum out of range or
/// repeated.
std::vector<std::pair<size_t, size_t>> donation_pairs(const ir::Graph& graph,
                                                      const std::vector<int64_t>& donate_argnums);

/// The signature of `args` on one host device (CompileTarget::signature of the CPU and the
/// interpreter): valid, unsharded, all on one device object. `what` names the caller in errors.
std::vector<ir::TensorType> host_signature(const std::vector<Array>& args, const std::string& what);

}  // namespace ingot::detail
