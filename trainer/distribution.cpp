#include "ingot/trainer/distribution.h"

#include <fmt/format.h>

#include "ingot/runtime/error.h"

namespace ingot::distribution {
namespace {

std::vector<MeshAxis> axes_of(const DeviceMeshOptions& o) {
  if (o.shape.size() != o.axis_names.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("DeviceMesh: shape has {} entries but axis_names {}", o.shape.size(), o.axis_names.size()),
                "give one axis name per mesh dimension");
  }
  std::vector<MeshAxis> axes;
  for (size_t i = 0; i < o.shape.size(); ++i) axes.push_back({o.axis_names[i], o.shape[i]});
  return axes;
}

}  // namespace

DeviceMesh::DeviceMesh(DeviceMeshOptions options)
    : shape_(options.shape), names_(options.axis_names), mesh_(axes_of(options), options.devices) {}

Distribution::Distribution(DeviceMesh mesh, std::string batch_dim_name)
    : mesh_(std::move(mesh)), batch_dim_name_(std::move(batch_dim_name)) {}

NamedSharding Distribution::data_sharding() const { return NamedSharding(mesh_.mesh(), PartitionSpec{batch_dim_name_}); }

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

}  // namespace ingot::distribution
