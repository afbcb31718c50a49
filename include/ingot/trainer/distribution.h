// Distributions of a model over several devices, as keras.distribution names them: a DeviceMesh
// of devices on named axes and DataParallel (the batch split over one axis, every variable
// replicated, gradients averaged over the devices). Given to Model::compile
// (CompileOptions::distribution); docs/distributed.md is the design and its status.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "ingot/jit/spmd.h"
#include "ingot/runtime/device.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/sharding.h"

namespace ingot::distribution {

/// This process's part in a run of several processes (what keras.distribution.initialize sets up
/// for JAX): its devices (CPU devices, or CUDA devices of a MeshBackend), its rank among the
/// processes, a Gloo communicator between the processes and communicators spanning every
/// process's devices (Gloo for CPU devices, NCCL for CUDA devices). Process p's devices are ranks p * L .. p * L + L -
/// 1 of the devices' group (L devices per process, the same in every process). Made by initialize(); shared by the
/// meshes built on it (DeviceMeshOptions::processes). The communicators are used by one step at a time: the models of a
/// process group take turns (fit, evaluate and predict block), and every process must run the same steps in the same
/// order (the same program with the same data and options).
class ProcessGroup {
 public:
  /// Takes the connected groups (connect_gloo_processes with local_devices.size() ranks).
  ProcessGroup(GlooProcessGroup groups, std::vector<Device*> local_devices, int num_processes, int process_id);
  /// Takes `process` (one rank per process) and `device_ranks` (one per local device, global
  /// ranks process_id * L + i, e.g. connect_nccl's).
  ProcessGroup(std::unique_ptr<Communicator> process, std::vector<std::unique_ptr<Communicator>> device_ranks,
               std::vector<Device*> local_devices, int num_processes, int process_id);
  int num_processes() const { return num_processes_; }
  /// This process's rank among the processes, in [0, num_processes()) (jax.process_index()).
  int process_id() const { return process_id_; }
  /// This process's devices, in mesh order (not owned).
  const std::vector<Device*>& local_devices() const { return local_devices_; }
  /// One rank per process: barriers and broadcasts between the processes themselves.
  Communicator& process_communicator() const { return *groups_.process; }
  /// One communicator per local device (global ranks process_id() * L + i), for run_spmd.
  std::vector<Communicator*> device_communicators() const;

 private:
  GlooProcessGroup groups_;
  std::vector<Device*> local_devices_;
  int num_processes_ = 1;
  int process_id_ = 0;
};

/// keras.distribution.initialize(job_addresses, num_processes, process_id): joins the processes of
/// a multi-process run (`group`: this process's rank, the number of processes and rank 0's
/// address, e.g. ProcessGroupOptions::from_env() under `ingot launch` or torchrun), contributing
/// `local_devices` (this process's CPU devices, the same number in every process; not owned: they
/// must outlive the group). Blocks until every process has joined (group.timeout seconds). Errors:
/// kInvalidArgument for no devices, a null or non-CPU device (Gloo moves host memory; naming it),
/// and connect_gloo_processes's errors (bad options, a process not joining in time, processes
/// with different device counts).
std::shared_ptr<ProcessGroup> initialize(const ProcessGroupOptions& group, std::vector<Device*> local_devices,
                                         const GlooOptions& options = {});

/// initialize for the devices of `backend` (e.g. cuda_mesh_backend(this process's GPUs, nccl)),
/// its `devices` the local devices: the processes join a Gloo group of one rank each (the process
/// communicator: variable broadcasts, gathering logged values), then the backend connects the
/// devices over it (MeshBackend::connect_processes: NCCL's unique id sent from process 0). Give
/// the same backend to Model::compile (CompileOptions::mesh_backend) with the distribution.
/// Collective and blocking like initialize. Errors: kInvalidArgument for a backend without
/// connect_processes or devices (the CPU's: use the other initialize), connect_gloo's errors and
/// connect_processes's (connect_nccl: processes with different device counts, NCCL missing).
std::shared_ptr<ProcessGroup> initialize(const ProcessGroupOptions& group, const MeshBackend& backend,
                                         const GlooOptions& options = {});

/// Options of DeviceMesh (keras.distribution.DeviceMesh(shape, axis_names, devices)).
struct DeviceMeshOptions {
  std::vector<int64_t> shape;           ///< devices along each axis, each >= 1 (all processes')
  std::vector<std::string> axis_names;  ///< one unique, non-empty name per axis
  /// The devices in row-major mesh order, product(shape) of them (not owned: they must outlive the
  /// mesh and the models using it, e.g. a Runtime's devices). With `processes`: this process's
  /// devices (empty: the process group's local devices, which they must be).
  std::vector<Device*> devices;
  /// Several processes (initialize()): the mesh's first axis is split over the processes in rank
  /// order, so shape[0] must be a multiple of the process count and each process holds
  /// product(shape) / num_processes devices (Keras/JAX: a global mesh whose devices are spread
  /// over processes). Null: every device is in this process.
  std::shared_ptr<ProcessGroup> processes;
};

/// Devices on named axes: a Mesh (include/ingot/runtime/sharding.h) made from Keras's arguments.
/// Throws ingot::Error(kInvalidArgument) naming the argument for shape and axis_names of
/// different lengths, and Mesh's errors (sizes < 1, repeated or empty names, a device count that
/// is not the product of the shape, null or repeated devices). With several processes also for
/// a shape[0] that is not a multiple of the process count and devices other than the process
/// group's.
class DeviceMesh {
 public:
  explicit DeviceMesh(DeviceMeshOptions options);
  /// This process's devices on the axes (the first axis's size divided by the process count).
  const Mesh& mesh() const { return mesh_; }
  const std::vector<std::string>& axis_names() const { return names_; }
  /// The whole mesh's shape (all processes' devices).
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Devices along axis `name` over all processes (Mesh::axis_size's error for an unknown name).
  int64_t axis_size(const std::string& name) const;
  /// The process group (null: one process).
  const std::shared_ptr<ProcessGroup>& processes() const { return processes_; }
  int num_processes() const { return processes_ ? processes_->num_processes() : 1; }
  int process_id() const { return processes_ ? processes_->process_id() : 0; }

 private:
  std::vector<int64_t> shape_;
  std::vector<std::string> names_;
  std::shared_ptr<ProcessGroup> processes_;
  Mesh mesh_;
};

/// How a model's state and batches are laid out on a mesh (keras.distribution.Distribution).
class Distribution {
 public:
  virtual ~Distribution() = default;
  const DeviceMesh& device_mesh() const { return mesh_; }
  /// The mesh axis the batch dimension is split over.
  const std::string& batch_dim_name() const { return batch_dim_name_; }
  /// Devices along the batch axis over all processes: every batch's leading dimension must be a
  /// multiple of it.
  int64_t batch_axis_size() const { return mesh_.axis_size(batch_dim_name_); }
  /// The sharding of this process's part of a batch array over its devices: dim 0 split over the
  /// batch axis (Keras's get_data_layout).
  NamedSharding data_sharding() const;
  /// The sharding of variable `path` of shape `shape` (Keras's get_variable_layout).
  virtual NamedSharding variable_sharding(const std::string& path, const Shape& shape) const = 0;
  /// Keras's class name ("DataParallel").
  virtual std::string class_name() const = 0;

  /// Whether the compiled steps overlap their collectives with the compute that does not need
  /// their results (SpmdOptions::overlap_collectives; e.g. the metric states' all-reduce with the
  /// backward pass, a gradient bucket's with the earlier layers' gradients). Default true; read
  /// when a model using the distribution first compiles its steps.
  bool overlap_collectives() const { return overlap_collectives_; }
  void set_overlap_collectives(bool on) { overlap_collectives_ = on; }
  /// The largest gradient bucket of the data-parallel all-reduce, in bytes: the replicated
  /// variables' gradients of one dtype are flattened into buckets of at most this size (a
  /// gradient larger than it is a bucket of its own), last variables first -- their gradients
  /// are computed first in the backward pass -- and the first bucket at most 1 MiB, so that it
  /// can start early (PyTorch DDP's bucket_cap_mb = 25 and first bucket). Default 25 MiB.
  int64_t gradient_bucket_bytes() const { return gradient_bucket_bytes_; }
  /// Throws ingot::Error(kInvalidArgument) naming the value for bytes < 1.
  void set_gradient_bucket_bytes(int64_t bytes);

 protected:
  Distribution(DeviceMesh mesh, std::string batch_dim_name);

 private:
  DeviceMesh mesh_;
  std::string batch_dim_name_;
  bool overlap_collectives_ = true;
  int64_t gradient_bucket_bytes_ = int64_t{25} << 20;
};

/// Data parallelism (keras.distribution.DataParallel): the batch is split over the mesh's first
/// axis, every variable is replicated, and the train step averages the gradients over the devices
/// (all_reduce mean) before the optimizer runs, so each device applies the same update: with a
/// loss that is a mean over equal shards the result is the 1-device run's on the global batch
/// (up to the order of floating-point sums). Metric and loss-tracker states are summed over the
/// devices; non-trainable variables (BatchNormalization's moving statistics) take the devices'
/// mean update -- each device normalises with its own shard's batch statistics, as Keras's data
/// parallel does. A one-axis mesh for now (docs/distributed.md).
class DataParallel final : public Distribution {
 public:
  /// Throws ingot::Error(kInvalidArgument) for a mesh of more than one axis.
  explicit DataParallel(DeviceMesh mesh);
  NamedSharding variable_sharding(const std::string& path, const Shape& shape) const override;
  std::string class_name() const override { return "DataParallel"; }
};

/// Variable-path patterns -> PartitionSpecs (keras.distribution.LayoutMap): a variable's layout is
/// the spec of the first pattern that matches anywhere in its path ("<layer>/<weight>", e.g.
/// "dense_1/kernel"; std::regex_search, as Keras's re.search), replicated when none does.
class LayoutMap {
 public:
  explicit LayoutMap(DeviceMesh mesh);
  /// Keras's `layout_map[pattern] = spec`. Throws ingot::Error(kInvalidArgument) naming the
  /// pattern for an invalid regular expression or a repeated pattern, kNotFound naming the axis
  /// and the mesh's axes for a spec naming an axis the mesh lacks.
  void set(const std::string& pattern, PartitionSpec spec);
  /// The spec of the first matching pattern, nullopt when none matches.
  std::optional<PartitionSpec> get(const std::string& path) const;
  /// Throws ingot::Error(kInvalidArgument) naming the first pattern that matches none of `paths`
  /// (a model's variable paths) and listing them (Keras warns; a pattern that lays out nothing is
  /// almost always a typo).
  void check_matches(const std::vector<std::string>& paths) const;
  const DeviceMesh& device_mesh() const { return mesh_; }

 private:
  DeviceMesh mesh_;
  std::vector<std::pair<std::string, std::regex>> patterns_;
  std::vector<PartitionSpec> specs_;
};

/// Model parallelism (keras.distribution.ModelParallel(layout_map, batch_dim_name)): batches split
/// over `batch_dim_name` (replicated along the other axes), each variable laid out by the layout
/// map: a variable may split any of its dimensions over one mesh axis each, on a mesh of any
/// number of axes (e.g. ("batch", "model") with kernels PartitionSpec{{}, "model"}). A device
/// stores and updates only its block of a split variable and of its optimizer slots; the traced
/// step all-gathers the whole variable before use (along each split dimension over its axis), and
/// its gradient comes back reduce-scattered over those axes (ZeRO-3 / FSDP generalised to every
/// axis: the state is sharded, the compute is not -- each device still computes with whole
/// weights; Megatron-style partitioned compute is not built). Across processes only dimension 0
/// over the mesh's first axis may be split (kUnimplemented otherwise, at compile).
class ModelParallel final : public Distribution {
 public:
  /// Throws ingot::Error(kNotFound) for a batch_dim_name the mesh lacks, kUnimplemented for a mesh
  /// of several axes spanning processes.
  ModelParallel(LayoutMap layout_map, std::string batch_dim_name);
  /// The layout map's spec for `path` (replicated when none matches). Throws ingot::Error:
  /// kInvalidArgument naming the variable, the dimension and the axis size when a split dimension
  /// is not a multiple of it, or for a spec longer than the variable's rank; kUnimplemented for a
  /// dimension split over several axes, or a layout across processes other than dimension 0 over
  /// the first axis.
  NamedSharding variable_sharding(const std::string& path, const Shape& shape) const override;
  std::string class_name() const override { return "ModelParallel"; }
  const LayoutMap& layout_map() const { return layout_map_; }

 private:
  LayoutMap layout_map_;
};

}  // namespace ingot::distribution
