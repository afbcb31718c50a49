// Compiling per-device (SPMD) programs: graphs holding collective ops (all_reduce, traced with
// ingot::all_reduce) become one Executable whose compiled segments run between collective thunks,
// for run_spmd (include/ingot/runtime/spmd.h) to run on every device of a mesh. jax.shard_map's
// model: the graph is written for one device's shards, collectives name the mesh axis.
// docs/distributed.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "ingot/codegen/cpu_compiler.h"
#include "ingot/ir/graph.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/executable.h"

namespace ingot {

/// Compiles `graph` (a per-device program) for the host CPU, split at each all_reduce node: the
/// nodes between two collectives form a segment compiled like compile_graph (one JIT thunk; the
/// values later segments or the outputs need are its results), and each all_reduce becomes an
/// all_reduce_thunk (sum, mean, max, min) over the communicator run_spmd hands the thunk. The
/// thunks run in the graph's order over one slot table: the graph's parameters, then every
/// segment's results and every collective's output. A graph without collectives is one segment.
/// `donate_argnums` as compile_graph's (JAX's donate_argnums): a donated parameter paired with an
/// output is written in place by the segment that computes that output when nothing after that
/// segment reads the parameter (otherwise the output gets its own buffer); every donated
/// argument's buffer is taken over. The mesh axis an all_reduce names is not checked here:
/// run_spmd's communicators span the whole mesh, so a program run on a mesh whose devices all lie
/// along that axis (the data-parallel case) reduces over exactly it; reductions over one axis of a
/// several-axis mesh need sub-communicators (not built yet, docs/distributed.md).
/// `collective_nanoseconds`, when given, accumulates the wall time every device spends in the
/// collective thunks (nanoseconds, summed over the devices: divide by their count for the
/// per-device time, which includes waiting for the slowest device).
/// Errors: what lowering and compile_graph throw for a segment (naming the segment); a
/// donate_argnum out of range or repeated (kInvalidArgument).
std::shared_ptr<const Executable> compile_graph_spmd(const ir::Graph& graph,
                                                     const codegen::CpuCompileOptions& options = {},
                                                     const lower::LoweringOptions& lowering = {},
                                                     const std::vector<int64_t>& donate_argnums = {},
                                                     std::shared_ptr<std::atomic<int64_t>> collective_nanoseconds = nullptr);

}  // namespace ingot
