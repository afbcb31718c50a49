// Compiling per-device (SPMD) programs: graphs holding collective ops (all_reduce, traced with
// ingot::all_reduce) become one Executable whose compiled segments run between collective thunks,
// for run_spmd (include/ingot/runtime/spmd.h) to run on every device of a mesh. jax.shard_map's
// model: the graph is written for one device's shards, collectives name the mesh axis.
// docs/distributed.md.
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/codegen/cpu_compiler.h"
#include "ingot/ir/graph.h"
#include "ingot/lower/lowering.h"
#include "ingot/jit/target.h"
#include "ingot/runtime/executable.h"
#include "ingot/runtime/sharding.h"

namespace ingot {

class CudaDevice;
class NcclLibrary;

/// Options of compile_graph_spmd beyond the CPU compiler's.
struct SpmdOptions {
  /// As compile_graph's (JAX's donate_argnums): a donated parameter paired with an output is
  /// written in place by the segment that computes that output when nothing scheduled after that
  /// segment reads the parameter (otherwise the output gets its own buffer); every donated
  /// argument's buffer is taken over. Each in [0, parameters), no repeats.
  std::vector<int64_t> donate_argnums;
  /// When given, accumulates the wall time every device spends in the collective thunks
  /// (nanoseconds, summed over the devices: divide by their count for the per-device time, which
  /// includes waiting for the slowest device; overlapped collectives count in full).
  std::shared_ptr<std::atomic<int64_t>> collective_nanoseconds;
  /// Overlap collectives with compute: each collective starts as soon as its input is computed
  /// and runs on a helper thread (Thunk::async) while the compute that does not need its result
  /// runs; its wait comes when nothing else is ready. false: the graph's order, every collective
  /// waited for where it stands (synchronous).
  bool overlap_collectives = true;
  /// Compiles one segment (a sub-graph without collectives) with its donated parameters into an
  /// Executable that runs on every device of the mesh. Empty: compile_graph with the CPU options
  /// (a mesh of CPU devices); cuda_spmd_target compiles for its CUDA devices.
  std::function<std::shared_ptr<const Executable>(const ir::Graph& segment, const std::vector<int64_t>& donate_argnums)>
      compile_segment;
  /// Copies `from` into `to` (same shape and dtype, on the device running the program) for an
  /// output that is a parameter returned unchanged. Empty: memcpy (host memory).
  std::function<void(const Array& from, Array& to)> copy;
};

/// Compiles `graph` (a per-device program) for the host CPU, split at its collective nodes
/// (all_reduce, all_gather, reduce_scatter): the nodes between two collective steps form a
/// segment compiled like compile_graph (one JIT thunk; the values later segments or the outputs
/// need are its results), and each collective becomes a collective thunk (all_reduce_thunk etc.)
/// over the communicator run_spmd hands the thunk -- asynchronous, with a wait thunk where its
/// result is first needed, when `spmd.overlap_collectives` moved compute between the two. The
/// thunks run in schedule order over one slot table: the graph's parameters, then every segment's
/// results and every collective's output. A graph without collectives is one segment. Each
/// collective runs over the group of its `axis_name` (Communicator::along): on a one-axis mesh's
/// plain group, every device; with MeshCommunicators (mesh_communicator.h), the devices along
/// that axis only.
/// Errors: what lowering and compile_graph throw for a segment (naming the segment); a
/// donate_argnum out of range or repeated (kInvalidArgument).
std::shared_ptr<const Executable> compile_graph_spmd(const ir::Graph& graph,
                                                     const codegen::CpuCompileOptions& options = {},
                                                     const lower::LoweringOptions& lowering = {},
                                                     const SpmdOptions& spmd = {});

/// The mesh an spmd_target runs on and how its programs are run there.
struct SpmdTargetOptions {
  /// One communicator per device of the mesh, in device order (run_spmd's `communicators`; not
  /// owned, must outlive the target's runs). Empty: programs without collectives only.
  std::vector<Communicator*> communicators;
  /// Sharding of output `index` of a program with `count` outputs (run_spmd's out_shardings;
  /// over the arguments' mesh). Required.
  std::function<NamedSharding(size_t index, size_t count)> out_sharding;
  /// SpmdOptions::collective_nanoseconds.
  std::shared_ptr<std::atomic<int64_t>> collective_nanoseconds;
  /// SpmdOptions::overlap_collectives.
  bool overlap_collectives = true;
};

/// A mesh of CPU devices (jax.shard_map's per-device programs; kind kSpmd): signature() is every
/// argument's first shard (the per-device shapes), compile() is compile_graph_spmd with
/// `options.lowering` / `options.cpu` and the donated arguments, run() is run_spmd with the
/// options' communicators and shardings. host_memory() is true (the shards are host arrays).
/// Errors: kInvalidArgument without `out_sharding`; run_spmd's at run.
std::shared_ptr<const CompileTarget> spmd_target(SpmdTargetOptions options);

/// A mesh of CUDA devices (`devices`, not owned, distinct, in mesh order; kind kSpmd): the same
/// per-device programs as spmd_target with every segment compiled once by the CUDA code
/// generator and loaded on each device (`options.cuda`, `options.lowering`), collectives over
/// `options.communicators` (NcclCommunicators, one per mesh device in mesh order) on each
/// device's compute stream. The target's mesh is that of `options.out_sharding(0, 1)` (its
/// devices must be among `devices`; e.g. cuda_mesh(devices) or a distribution's DeviceMesh).
/// run() takes arrays sharded over that mesh (device_put works for CUDA meshes: each device
/// receives its block) and other arrays, which it replicates over it first; outputs stay on the
/// devices, sharded by `options.out_sharding`. host_memory() is false. to_target(a): `a` itself
/// when sharded over the mesh, else a copy replicated over it; to_host(a): ingot::to_host (the
/// global array from one replica of each block). Errors: kInvalidArgument for no, null or
/// repeated devices, without `out_sharding`, or when its mesh holds another device;
/// kUnimplemented without the CUDA toolkit; run_spmd's and the CUDA compiler's otherwise.
std::shared_ptr<const CompileTarget> cuda_spmd_target(std::vector<CudaDevice*> devices, SpmdTargetOptions options);

/// The back end of a mesh of devices, for callers that build per-device programs over it (the
/// trainer's distributed steps): how a program's target is made from SpmdTargetOptions, and the
/// communicators of the mesh's devices (one per device in mesh order, a MeshCommunicator per
/// device when the mesh has several axes; they must outlive the targets' runs). Empty members:
/// a mesh of CPU devices (spmd_target; shared-memory groups).
struct MeshBackend {
  std::function<std::shared_ptr<const CompileTarget>(SpmdTargetOptions options)> target;
  std::function<std::vector<std::unique_ptr<Communicator>>(const Mesh& mesh)> communicators;
  /// A run of several processes (distribution::initialize with a backend): given `processes`, one
  /// rank per process (collective: every process calls it), one communicator per device of
  /// `devices`, global rank processes.rank() * devices.size() + i (connect_nccl).
  std::function<std::vector<std::unique_ptr<Communicator>>(Communicator& processes)> connect_processes;
  /// The backend's devices in order (not owned; empty for the CPU): the local devices of a
  /// multi-process mesh built on it.
  std::vector<Device*> devices;
  /// For messages: "CPU", "CUDA over NCCL".
  std::string name = "CPU";
};

/// The MeshBackend of `devices` (CUDA devices, distinct; not owned): cuda_spmd_target over them,
/// NCCL communicators (NcclCommunicator::create_all over the mesh's devices, and over each axis
/// line of a multi-axis mesh) from `nccl`, and for several processes connect_nccl(processes,
/// nccl, devices). The mesh given to `communicators` must consist
/// of these devices' ingot::Devices (kInvalidArgument naming the first that is not). Errors:
/// kInvalidArgument for no, null or repeated devices or a null `nccl`; kNotFound when NCCL is
/// not available; kUnimplemented without the CUDA toolkit.
MeshBackend cuda_mesh_backend(std::vector<CudaDevice*> devices, std::shared_ptr<NcclLibrary> nccl);

/// The one-axis mesh (`axis`, devices.size()) of `devices`' ingot::Devices, for sharding arrays
/// with device_put for cuda_spmd_target (kInvalidArgument for no, null or repeated devices).
Mesh cuda_mesh(const std::vector<CudaDevice*>& devices, const std::string& axis = "data");

}  // namespace ingot
