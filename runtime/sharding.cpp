// Mesh, PartitionSpec and NamedSharding: validation and the index arithmetic of JAX's
// NamedSharding (which block of each dimension a device holds).
#include "ingot/runtime/sharding.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ingot/runtime/error.h"

namespace ingot {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string axes_to_string(const std::vector<MeshAxis>& axes) {
  std::string out;
  for (size_t i = 0; i < axes.size(); ++i) {
    out += fmt::format("{}{}: {}", i ? ", " : "", quoted(axes[i].name), axes[i].size);
  }
  return out;
}

std::string device_names(const std::vector<Device*>& devices) {
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i) {
    out += (i ? ", " : "") + (devices[i] ? devices[i]->name() : std::string("null"));
  }
  return out;
}

// "'batch'" for one axis, "('batch', 'model')" for a tuple, "None" for none.
std::string dim_to_string(const PartitionDim& d) {
  if (d.axes.empty()) return "None";
  if (d.axes.size() == 1) return quoted(d.axes[0]);
  std::string out = "(";
  for (size_t i = 0; i < d.axes.size(); ++i) out += (i ? ", " : "") + quoted(d.axes[i]);
  return out + ")";
}

void check_axes(const std::vector<MeshAxis>& axes) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].name.empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("Mesh: axis {} has an empty name", i),
                  "name every mesh axis, e.g. {\"batch\", 4}");
    }
    if (axes[i].size < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Mesh: axis '{}' has size {}; sizes must be >= 1", axes[i].name, axes[i].size));
    }
    for (size_t j = 0; j < i; ++j) {
      if (axes[j].name == axes[i].name) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("Mesh: axis name '{}' is used twice (axes {} and {})", axes[i].name, j, i),
                    "mesh axis names must be unique");
      }
    }
  }
}

void check_devices(const std::vector<MeshAxis>& axes, const std::vector<Device*>& devices) {
  int64_t product = 1;
  for (const MeshAxis& a : axes) {
    // Axis sizes are >= 1; a product beyond any plausible device count is reported as is.
    product = product > (int64_t{1} << 40) / a.size ? (int64_t{1} << 40) : product * a.size;
  }
  if (static_cast<int64_t>(devices.size()) != product) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("Mesh: {} devices given for axes ({}) whose sizes multiply to {}", devices.size(),
                    axes_to_string(axes), product),
        fmt::format("pass exactly {} devices (e.g. from Runtime({{.num_cpu_devices = {}}}))", product, product));
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("Mesh: device {} is null", i));
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == devices[i]) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("Mesh: device {} appears twice (positions {} and {})", devices[i]->name(), j, i),
                    "every device may appear in a mesh once");
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Mesh

Mesh::Mesh(std::vector<MeshAxis> axes, std::vector<Device*> devices)
    : axes_(std::move(axes)), devices_(std::move(devices)) {
  check_axes(axes_);
  check_devices(axes_, devices_);
}

Mesh Mesh::single_device(Device& device) { return Mesh({}, {&device}); }

int64_t Mesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) return static_cast<int64_t>(i);
  }
  throw Error(ErrorCode::kNotFound,
              fmt::format("mesh axis '{}' does not exist; the mesh has axes ({})", name, axes_to_string(axes_)),
              "use one of the mesh's axis names");
}

int64_t Mesh::axis_size(const std::string& name) const { return axes_[static_cast<size_t>(axis_index(name))].size; }

std::vector<int64_t> Mesh::coords(int64_t position) const {
  if (position < 0 || position >= size()) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("Mesh::coords: position {} is outside [0, {})", position, size()));
  }
  std::vector<int64_t> c(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    c[i] = position % axes_[i].size;
    position /= axes_[i].size;
  }
  return c;
}

int64_t Mesh::position_of(const Device& device) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] == &device) return static_cast<int64_t>(i);
  }
  return -1;
}

std::string Mesh::to_string() const {
  if (axes_.empty()) return fmt::format("Mesh(device: {})", devices_[0]->name());
  return fmt::format("Mesh({}; devices: {})", axes_to_string(axes_), device_names(devices_));
}

// ---------------------------------------------------------------------------------------------
// PartitionSpec

PartitionSpec::PartitionSpec(std::initializer_list<PartitionDim> dims)
    : PartitionSpec(std::vector<PartitionDim>(dims)) {}

PartitionSpec::PartitionSpec(std::vector<PartitionDim> dims) : dims_(std::move(dims)) {
  std::map<std::string, size_t> first_dim;
  for (size_t d = 0; d < dims_.size(); ++d) {
    for (const std::string& axis : dims_[d].axes) {
      if (axis.empty()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("PartitionSpec: dimension {} names an empty mesh axis", d),
                    "use PartitionDim() (None) to replicate a dimension");
      }
      auto [it, inserted] = first_dim.emplace(axis, d);
      if (!inserted) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("PartitionSpec: mesh axis '{}' is used twice (dimension {} and "
                                "dimension {})",
                                axis, it->second, d),
                    "a mesh axis can split at most one array dimension, once");
      }
    }
  }
}

PartitionDim PartitionSpec::dim(int64_t dim) const {
  if (dim >= 0 && dim < size()) return dims_[static_cast<size_t>(dim)];
  return PartitionDim();
}

PartitionSpec PartitionSpec::normalized() const {
  std::vector<PartitionDim> dims = dims_;
  while (!dims.empty() && dims.back().replicated()) dims.pop_back();
  return PartitionSpec(std::move(dims));
}

std::string PartitionSpec::to_string() const {
  std::string out = "PartitionSpec(";
  for (size_t d = 0; d < dims_.size(); ++d) out += (d ? ", " : "") + dim_to_string(dims_[d]);
  if (dims_.size() == 1) out += ",";
  return out + ")";
}

// ---------------------------------------------------------------------------------------------
// NamedSharding

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec) : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  for (size_t d = 0; d < spec_.dims().size(); ++d) {
    for (const std::string& axis : spec_.dims()[d].axes) {
      const bool known =
          std::any_of(mesh_.axes().begin(), mesh_.axes().end(), [&](const MeshAxis& a) { return a.name == axis; });
      if (!known) {
        throw Error(ErrorCode::kNotFound,
                    fmt::format("NamedSharding: {} (dimension {}) names mesh axis '{}', which {} "
                                "lacks",
                                spec_.to_string(), d, axis, mesh_.to_string()),
                    "use the mesh's axis names in the PartitionSpec");
      }
    }
  }
}

NamedSharding NamedSharding::single_device(Device& device) {
  return NamedSharding(Mesh::single_device(device), PartitionSpec());
}

bool NamedSharding::is_fully_replicated() const {
  for (const PartitionDim& d : spec_.dims()) {
    for (const std::string& axis : d.axes) {
      if (mesh_.axis_size(axis) > 1) return false;
    }
  }
  return true;
}

int64_t NamedSharding::num_parts(int64_t dim) const {
  int64_t parts = 1;
  for (const std::string& axis : spec_.dim(dim).axes) parts *= mesh_.axis_size(axis);
  return parts;
}

void NamedSharding::check_shape(const Shape& shape, const char* what) const {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (spec_.size() > rank) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: {} has {} entries but the array of shape {} has rank {}", what, spec_.to_string(),
                            spec_.size(), shape_to_string(shape), rank),
                "give at most one PartitionSpec entry per array dimension");
  }
  for (int64_t d = 0; d < spec_.size(); ++d) {
    const PartitionDim& entry = spec_.dims()[static_cast<size_t>(d)];
    if (entry.replicated()) continue;
    const int64_t parts = num_parts(d);
    const int64_t size = shape[static_cast<size_t>(d)];
    if (size % parts != 0) {
      const std::string axes = entry.axes.size() == 1
                                   ? fmt::format("mesh axis '{}' of size {}", entry.axes[0], parts)
                                   : fmt::format("mesh axes {} of total size {}", dim_to_string(entry), parts);
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}: dimension {} of shape {} has size {}, which does not split "
                              "evenly over {}",
                              what, d, shape_to_string(shape), size, axes),
                  fmt::format("shardings need even splits (as JAX's device_put): make dimension "
                              "{} a multiple of {}, or replicate it (None in the PartitionSpec)",
                              d, parts));
    }
  }
}

Shape NamedSharding::shard_shape(const Shape& shape) const {
  check_shape(shape, "NamedSharding::shard_shape");
  Shape out = shape;
  for (size_t d = 0; d < out.size(); ++d) out[d] /= num_parts(static_cast<int64_t>(d));
  return out;
}

std::vector<IndexRange> NamedSharding::shard_index(int64_t position, const Shape& shape) const {
  check_shape(shape, "NamedSharding::shard_index");
  const std::vector<int64_t> c = mesh_.coords(position);
  std::vector<IndexRange> out(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t block = 0;
    for (const std::string& axis : spec_.dim(static_cast<int64_t>(d)).axes) {
      const int64_t a = mesh_.axis_index(axis);
      block = block * mesh_.axes()[static_cast<size_t>(a)].size + c[static_cast<size_t>(a)];
    }
    const int64_t len = shape[d] / num_parts(static_cast<int64_t>(d));
    out[d] = IndexRange{block * len, (block + 1) * len};
  }
  return out;
}

std::vector<std::vector<IndexRange>> NamedSharding::devices_indices(const Shape& shape) const {
  std::vector<std::vector<IndexRange>> out;
  for (int64_t p = 0; p < num_devices(); ++p) out.push_back(shard_index(p, shape));
  return out;
}

int64_t NamedSharding::replica_id(int64_t position) const {
  const std::vector<int64_t> c = mesh_.coords(position);
  std::vector<bool> used(mesh_.axes().size(), false);
  for (const PartitionDim& d : spec_.dims()) {
    for (const std::string& axis : d.axes) used[static_cast<size_t>(mesh_.axis_index(axis))] = true;
  }
  int64_t id = 0;
  for (size_t a = 0; a < used.size(); ++a) {
    if (!used[a]) id = id * mesh_.axes()[a].size + c[a];
  }
  return id;
}

std::string NamedSharding::to_string() const {
  return fmt::format("NamedSharding(mesh={}, spec={})", mesh_.to_string(), spec_.to_string());
}

bool NamedSharding::operator==(const NamedSharding& other) const {
  return mesh_ == other.mesh_ && spec_.normalized() == other.spec_.normalized();
}

}  // namespace ingot
