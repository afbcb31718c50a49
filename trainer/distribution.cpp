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
    throw Error(ErrorCode::kInvalidArgument, fmt::format("LayoutMap: '{}' is not a regular expression: {}", pattern, e.what()),
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

ModelParallel::ModelParallel(LayoutMap layout_map, std::string batch_dim_name)
    : Distribution(layout_map.device_mesh(), batch_dim_name), layout_map_(std::move(layout_map)) {
  device_mesh().mesh().axis_index(batch_dim_name);  // kNotFound naming the axis and the mesh's axes
}

NamedSharding ModelParallel::variable_sharding(const std::string& path, const Shape& shape) const {
  const std::optional<PartitionSpec> spec = layout_map_.get(path);
  const Mesh& mesh = device_mesh().mesh();
  if (!spec || spec->normalized().size() == 0) return NamedSharding(mesh, PartitionSpec{});
  const PartitionSpec s = spec->normalized();
  if (s.size() != 1 || s.dim(0).axes != std::vector<std::string>{batch_dim_name()}) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("ModelParallel: variable '{}' has layout {}; only dimension 0 split over the batch axis "
                            "'{}' (FSDP) is built",
                            path, s.to_string(), batch_dim_name()),
                "use PartitionSpec{\"" + batch_dim_name() + "\"} or leave the variable replicated");
  }
  const int64_t n = mesh.axis_size(batch_dim_name());
  if (shape.empty() || shape[0] % n != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("ModelParallel: variable '{}' of shape {} cannot split dimension 0 over the {} devices of "
                            "axis '{}'",
                            path, shape_to_string(shape), n, batch_dim_name()),
                "choose sizes divisible by the axis, or leave the variable replicated in the LayoutMap");
  }
  return NamedSharding(mesh, s);
}

}  // namespace ingot::distribution
