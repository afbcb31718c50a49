// The jit's CUDA helpers (compiler/jit/jit_cuda.cpp); internal to compiler/jit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/array.h"

namespace ingot {

class CudaDevice;

/// The ingot::Device of `device` (where its arrays live).
Device& cuda_device_of(CudaDevice& device);
/// A copy of the host array `host` on `device` (waits for the copy).
Array copy_to_cuda(CudaDevice& device, const Array& host);

namespace detail {
/// Pairs each donated parameter of `graph` with the first unpaired output of the same type that
/// the graph computes (not a parameter returned unchanged, not an output returned twice): the
/// (parameter, output) pairs whose output is written into the parameter's buffer (compile_graph,
/// compile_graph_cuda). Throws ingot::Error(kInvalidArgument) for a donate_argnum out of range or
/// repeated.
std::vector<std::pair<size_t, size_t>> donation_pairs(const ir::Graph& graph, const std::vector<int64_t>& donate_argnums);
}  // namespace detail

}  // namespace ingot
