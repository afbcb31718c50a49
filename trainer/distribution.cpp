#include "ingot/trainer/distribution.h"

#include <fmt/format.h>

#include <algorithm>

#include "ingot/runtime/error.h"

namespace ingot::distribution {
namespace {

/// The axes of this process's part of the mesh: the first axis divided by the process count.
std::vector<MeshAxis> axes_of(const DeviceMeshOptions& o) {
  if (o.shape.size() != o.axis_names.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("DeviceMesh: shape has {} entries but axis_names {}", o.shape.size(), o.axis_names.size()),
                "give one axis name per mesh dimension");
  }
  std::vector<MeshAxis> axes;
  for (size_t i = 0; i < o.shape.size(); ++i) axes.push_back({o.axis_names[i], o.shape[i]});
  if (o.processes) {
    const int p = o.processes->num_processes();
    if (axes.empty() || axes[0].size < 1 || axes[0].size % p != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("DeviceMesh: the first axis ({} devices) does not split over the {} processes",
                              axes.empty() ? 0 : axes[0].size, p),
                  fmt::format("make shape[0] a multiple of {} (each process holds shape[0] / {} of it)", p, p));
    }
    axes[0].size /= p;
  }
  return axes;
}

/// This process's devices: the process group's (checked) or the given ones.
std::vector<Device*> devices_of(const DeviceMeshOptions& o) {
  if (!o.processes || o.devices.empty()) return o.processes ? o.processes->local_devices() : o.devices;
  if (o.devices != o.processes->local_devices()) {
    throw Error(ErrorCode::kInvalidArgument, "DeviceMesh: devices are not the process group's devices (in their order)",
                "leave DeviceMeshOptions::devices empty to use the process group's devices");
  }
  return o.devices;
}

}  // namespace

ProcessGroup::ProcessGroup(GlooProcessGroup groups, std::vector<Device*> local_devices, int num_processes,
                           int process_id)
    : groups_(std::move(groups)),
      local_devices_(std::move(local_devices)),
      num_processes_(num_processes),
      process_id_(process_id) {}

ProcessGroup::ProcessGroup(std::unique_ptr<Communicator> process,
                           std::vector<std::unique_ptr<Communicator>> device_ranks, std::vector<Device*> local_devices,
                           int num_processes, int process_id)
    : ProcessGroup(GlooProcessGroup{.process = std::move(process), .ranks = std::move(device_ranks)},
                   std::move(local_devices), num_processes, process_id) {}

std::vector<Communicator*> ProcessGroup::device_communicators() const {
  std::vector<Communicator*> out;
  for (const auto& c : groups_.ranks) out.push_back(c.get());
  return out;
}

std::shared_ptr<ProcessGroup> initialize(const ProcessGroupOptions& group, std::vector<Device*> local_devices,
                                         const GlooOptions& options) {
  if (local_devices.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "distribution::initialize: no local devices",
                "pass this process's CPU devices (e.g. Runtime::devices())");
  }
  for (size_t i = 0; i < local_devices.size(); ++i) {
    if (local_devices[i] == nullptr || local_devices[i]->kind() != DeviceKind::kCpu) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("distribution::initialize: local device {} is {}", i,
                              local_devices[i] == nullptr ? std::string("null") : local_devices[i]->name()),
                  "several processes run on CPU devices (Gloo); pass the Runtime's CPU devices");
    }
  }
  GlooProcessGroup groups = connect_gloo_processes(group, static_cast<int>(local_devices.size()), options);
  return std::make_shared<ProcessGroup>(std::move(groups), std::move(local_devices), group.world_size, group.rank);
}

std::shared_ptr<ProcessGroup> initialize(const ProcessGroupOptions& group, const MeshBackend& backend,
                                         const GlooOptions& options) {
  if (!backend.connect_processes || backend.devices.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("distribution::initialize: MeshBackend {} has no {}", backend.name,
                            backend.connect_processes ? "devices" : "connect_processes"),
                "pass a device back end such as cuda_mesh_backend(devices, nccl); for CPU devices call "
                "initialize(group, runtime.devices())");
  }
  std::unique_ptr<Communicator> process = connect_gloo(group, options);
  std::vector<std::unique_ptr<Communicator>> ranks = backend.connect_processes(*process);
  if (ranks.size() != backend.devices.size()) {
    throw Error(ErrorCode::kInternal,
                fmt::format("distribution::initialize: MeshBackend {} connected {} ranks for {} devices", backend.name,
                            ranks.size(), backend.devices.size()));
  }
  return std::make_shared<ProcessGroup>(std::move(process), std::move(ranks), backend.devices, group.world_size,
                                        group.rank);
}

DeviceMesh::DeviceMesh(DeviceMeshOptions options)
    : shape_(options.shape),
      names_(options.axis_names),
      processes_(options.processes),
      mesh_(axes_of(options), devices_of(options)) {}

int64_t DeviceMesh::axis_size(const std::string& name) const {
  const int64_t local = mesh_.axis_size(name);
  return mesh_.axis_index(name) == 0 ? local * num_processes() : local;
}

Distribution::Distribution(DeviceMesh mesh, std::string batch_dim_name)
    : mesh_(std::move(mesh)), batch_dim_name_(std::move(batch_dim_name)) {}

void Distribution::set_gradient_bucket_bytes(int64_t bytes) {
  if (bytes < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("Distribution: gradient_bucket_bytes {} must be >= 1", bytes),
                "give the largest bucket size in bytes (PyTorch DDP's default: 25 MiB)");
  }
  gradient_bucket_bytes_ = bytes;
}

NamedSharding Distribution::data_sharding() const {
  return NamedSharding(mesh_.mesh(), PartitionSpec{batch_dim_name_});
}

DataParallel::DataParallel(DeviceMesh mesh)
    : Distribution(mesh, mesh.axis_names().empty() ? std::string() : mesh.axis_names()[0]) {
  if (device_mesh().axis_names().size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("DataParallel: the mesh has {} axes", device_mesh().axis_names().size()),
                "give DataParallel a one-axis mesh (e.g. shape {4}, axis_names {\"batch\"})");
  }
}

NamedSharding DataParallel::variable_sharding(const std::string&, const Shape&) const {
  return NamedSharding(device_mesh().mesh(), PartitionSpec{});
}

LayoutMap::LayoutMap(DeviceMesh mesh) : mesh_(std::move(mesh)) {}

void LayoutMap::set(const std::string& pattern, PartitionSpec spec) {
  for (const auto& [p, re] : patterns_) {
    if (p == pattern) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("LayoutMap: pattern '{}' is set twice", pattern),
                  "give each pattern one PartitionSpec");
    }
  }
  std::regex re;
  try {
    re = std::regex(pattern);
  } catch (const std::regex_error& e) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("LayoutMap: '{}' is not a regular expression: {}", pattern, e.what()),
                "use ECMAScript regex syntax, e.g. \".*dense.*/kernel\"");
  }
  NamedSharding(mesh_.mesh(), spec);  // kNotFound for an axis the mesh lacks, naming it
  patterns_.emplace_back(pattern, std::move(re));
  specs_.push_back(std::move(spec));
}

std::optional<PartitionSpec> LayoutMap::get(const std::string& path) const {
  for (size_t i = 0; i < patterns_.size(); ++i) {
    if (std::regex_search(path, patterns_[i].second)) return specs_[i];
  }
  return std::nullopt;
}

void LayoutMap::check_matches(const std::vector<std::string>& paths) const {
  for (const auto& [pattern, re] : patterns_) {
    const bool matched =
        std::any_of(paths.begin(), paths.end(), [&](const std::string& p) { return std::regex_search(p, re); });
    if (!matched) {
      std::string all;
      for (const std::string& p : paths) all += (all.empty() ? "" : ", ") + p;
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("LayoutMap: pattern '{}' matches none of the model's variables ({})", pattern, all),
                  "fix the pattern (std::regex_search on \"<layer>/<weight>\" paths) or remove it");
    }
  }
}

ModelParallel::ModelParallel(LayoutMap layout_map, std::string batch_dim_name)
    : Distribution(layout_map.device_mesh(), batch_dim_name), layout_map_(std::move(layout_map)) {
  device_mesh().mesh().axis_index(batch_dim_name);  // kNotFound naming the axis and the mesh's axes
  if (device_mesh().num_processes() > 1 && device_mesh().axis_names().size() > 1) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("ModelParallel: a mesh of {} axes spanning {} processes is not built (its per-axis groups "
                            "would span processes)",
                            device_mesh().axis_names().size(), device_mesh().num_processes()),
                "use a one-axis mesh across processes, or several axes within one process");
  }
}

NamedSharding ModelParallel::variable_sharding(const std::string& path, const Shape& shape) const {
  const std::optional<PartitionSpec> spec = layout_map_.get(path);
  const DeviceMesh& mesh = device_mesh();
  if (!spec || spec->normalized().size() == 0) return NamedSharding(mesh.mesh(), PartitionSpec{});
  const PartitionSpec s = spec->normalized();
  if (s.size() > static_cast<int64_t>(shape.size())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("ModelParallel: variable '{}' of shape {} has layout {} with more entries than dimensions",
                            path, shape_to_string(shape), s.to_string()),
                "give at most one PartitionSpec entry per dimension");
  }
  for (int64_t d = 0; d < s.size(); ++d) {
    const PartitionDim dim = s.dim(d);
    if (dim.replicated()) continue;
    if (dim.axes.size() > 1) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("ModelParallel: variable '{}' has layout {}: dimension {} split over several axes is not "
                              "built",
                              path, s.to_string(), d),
                  "split each dimension over one mesh axis");
    }
    if (mesh.num_processes() > 1 && (d != 0 || dim.axes[0] != mesh.axis_names()[0])) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("ModelParallel: variable '{}' has layout {}; across processes only dimension 0 over the "
                              "mesh's first axis '{}' is built",
                              path, s.to_string(), mesh.axis_names()[0]),
                  "split dimension 0 over the first axis, or train in one process");
    }
    const int64_t n = mesh.axis_size(dim.axes[0]);  // all processes' devices
    if (shape[static_cast<size_t>(d)] % n != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("ModelParallel: variable '{}' of shape {} cannot split dimension {} over the {} devices "
                              "of axis '{}'",
                              path, shape_to_string(shape), d, n, dim.axes[0]),
                  "choose sizes divisible by the axis, or leave the variable replicated in the LayoutMap");
    }
  }
  return NamedSharding(mesh.mesh(), s);
}

}  // namespace ingot::distribution
