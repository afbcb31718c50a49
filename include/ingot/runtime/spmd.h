// SPMD execution: one Executable run on every device of a mesh, each on its own shards, with
// collectives as thunks (jax.shard_map's model: the program sees per-device shapes; the
// collectives name the whole mesh).
#pragma once

#include <string>
#include <vector>

#include "ingot/runtime/communicator.h"
#include "ingot/runtime/executable.h"
#include "ingot/runtime/sharding.h"

namespace ingot {

/// Collective thunks over the communicator run_spmd hands each device, or its group along mesh
/// axis `axis` (Communicator::along; empty or the one axis of a plain group: the whole group).

/// A thunk that writes slot `out` = the all_reduce (`op`) over the devices of slot `in` (same
/// shape and dtype; `in` is left unchanged). Errors are the communicator's.
Thunk all_reduce_thunk(size_t in, size_t out, ReduceOp op, const std::string& axis = {});
/// Slots `outs[i]` = the all_reduce (`op`) of slots `ins[i]`, issued together
/// (Communicator::all_reduce_group_into: one NCCL group). kInvalidArgument for lists of
/// different lengths or empty ones.
Thunk all_reduce_group_thunk(std::vector<size_t> ins, std::vector<size_t> outs, ReduceOp op,
                             const std::string& axis = {});
/// Slot `out` (devices * in.shape[0], in.shape[1:]...) = every device's slot `in` concatenated
/// along dim 0 in mesh order.
Thunk all_gather_thunk(size_t in, size_t out, const std::string& axis = {});
/// Slot `out` (in.shape[0] / devices, ...) = this device's block of the reduction of slot `in`.
Thunk reduce_scatter_thunk(size_t in, size_t out, ReduceOp op, const std::string& axis = {});
/// Slot `out` = device `root`'s slot `in` (rank `root` of the group).
Thunk broadcast_thunk(size_t in, size_t out, int root, const std::string& axis = {});

/// Runs `executable` once per device of the mesh that `args` are sharded over, SPMD: device p's
/// run gets shard p of every argument (Array::shards()), runs on that device's worker
/// (Device::enqueue; the devices run concurrently) and allocates its slots there, with
/// `communicators[p]` for the collective thunks. Output j is assembled from the devices' j-th
/// outputs as an Array with sharding `out_shardings[j]` (over the same mesh): its global shape is
/// the per-device shape times the number of parts of each dim; replicated dims must hold equal
/// copies (not checked, as jax.shard_map's out_specs).
///
/// Blocks until every device finished; then rethrows the error of the device that failed first
/// (the others typically fail after it, timing out in a collective), with the context
/// "run_spmd: device p (<name>) failed first; k more devices failed after it". Errors (ingot::Error): arguments sharded
/// over different meshes, or an out_sharding over another mesh (kInvalidArgument naming the index); no arguments
/// (kInvalidArgument); `communicators` neither empty nor one per device with communicators[p]->rank() == first + p,
/// where first (communicators[0]'s rank) and the group's size are multiples of the mesh's device
/// count -- first = 0 and a group of the mesh's size in one process; several processes each run
/// their part of a larger mesh, the collectives spanning all of them (kInvalidArgument); out_shardings.size() != the
/// executable's outputs (kInvalidArgument). Without communicators, a collective thunk fails (Executable::run).
std::vector<Array> run_spmd(const Executable& executable, const std::vector<Array>& args,
                            const std::vector<NamedSharding>& out_shardings,
                            const std::vector<Communicator*>& communicators = {});

}  // namespace ingot
