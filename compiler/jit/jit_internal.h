// Helpers shared by compiler/jit's targets; internal to compiler/jit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ingot/codegen/cuda_compiler.h"
#include "ingot/ir/graph.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/array.h"
#include "ingot/runtime/executable.h"

namespace ingot {
class CudaDevice;
}

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

/// The signature of a per-device (SPMD) program over `args` (spmd_target, cuda_spmd_target):
/// each argument's first shard's shape and dtype. Throws kInvalidArgument naming the index of an
/// invalid Array; `what` names the caller.
std::vector<ir::TensorType> shard_signature(const std::vector<Array>& args, const std::string& what);

/// compile_graph_cuda for several devices: the graph lowered and compiled once, loaded on each of
/// `devices` (non-empty; one CudaExecutable each); the Executable's one thunk runs the executable
/// of the device its arrays live on (the device Executable::run allocates on), and throws
/// kInvalidArgument naming that device when it is none of them. Architectures are narrowed to
/// those the devices load. Errors: compile_graph_cuda's; kUnimplemented without the CUDA toolkit.
std::shared_ptr<const Executable> compile_graph_cuda_devices(const ir::Graph& graph,
                                                             const std::vector<CudaDevice*>& devices,
                                                             const codegen::CudaCompileOptions& options,
                                                             const std::vector<int64_t>& donate_argnums,
                                                             const lower::LoweringOptions& lowering);

}  // namespace ingot::detail
