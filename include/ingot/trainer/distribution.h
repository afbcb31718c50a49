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

#include "ingot/runtime/device.h"
#include "ingot/runtime/sharding.h"

namespace ingot::distribution {

/// Options of DeviceMesh (keras.distribution.DeviceMesh(shape, axis_names, devices)).
struct DeviceMeshOptions {
  std::vector<int64_t> shape;           ///< devices along each axis, each >= 1
  std::vector<std::string> axis_names;  ///< one unique, non-empty name per axis
  /// The devices in row-major mesh order, product(shape) of them (not owned: they must outlive the
  /// mesh and the models using it, e.g. a Runtime's devices).
  std::vector<Device*> devices;
};

/// Devices on named axes: a Mesh (include/ingot/runtime/sharding.h) made from Keras's arguments.
/// Throws ingot::Error(kInvalidArgument) naming the argument for shape and axis_names of
/// different lengths, and Mesh's errors (sizes < 1, repeated or empty names, a device count that
/// is not the product of the shape, null or repeated devices).
class DeviceMesh {
 public:
  explicit DeviceMesh(DeviceMeshOptions options);
  const Mesh& mesh() const { return mesh_; }
  const std::vector<std::string>& axis_names() const { return names_; }
  const std::vector<int64_t>& shape() const { return shape_; }

 private:
  std::vector<int64_t> shape_;
  std::vector<std::string> names_;
  Mesh mesh_;
};

/// How a model's state and batches are laid out on a mesh (keras.distribution.Distribution).
class Distribution {
 public:
  virtual ~Distribution() = default;
  const DeviceMesh& device_mesh() const { return mesh_; }
  /// The mesh axis the batch dimension is split over.
  const std::string& batch_dim_name() const { return batch_dim_name_; }
  /// Devices along the batch axis: every batch's leading dimension must be a multiple of it.
  int64_t batch_axis_size() const { return mesh_.mesh().axis_size(batch_dim_name_); }
  /// The sharding of a batch array: dim 0 split over the batch axis (Keras's get_data_layout).
  NamedSharding data_sharding() const;
  /// The sharding of variable `path` of shape `shape` (Keras's get_variable_layout).
  virtual NamedSharding variable_sharding(const std::string& path, const Shape& shape) const = 0;
  /// Keras's class name ("DataParallel").
  virtual std::string class_name() const = 0;

 protected:
  Distribution(DeviceMesh mesh, std::string batch_dim_name);

 private:
  DeviceMesh mesh_;
  std::string batch_dim_name_;
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
  const DeviceMesh& device_mesh() const { return mesh_; }

 private:
  DeviceMesh mesh_;
  std::vector<std::pair<std::string, std::regex>> patterns_;
  std::vector<PartitionSpec> specs_;
};

/// Model parallelism (keras.distribution.ModelParallel(layout_map, batch_dim_name)): batches split
/// over `batch_dim_name`, each variable laid out by the layout map. Built so far: FSDP on a one-axis
/// mesh -- a variable may be split on its dimension 0 over the batch axis ({"batch"}); it is
/// all-gathered before the forward pass, its gradient reduce-scattered (mean) and the optimizer
/// updates each device's block, so a device holds 1/N of the variable and of its optimizer slots.
/// Other layouts (other dimensions, other axes: tensor parallelism) are kUnimplemented at compile.
class ModelParallel final : public Distribution {
 public:
  /// Throws ingot::Error(kNotFound) for a batch_dim_name the mesh lacks.
  ModelParallel(LayoutMap layout_map, std::string batch_dim_name);
  /// The layout map's spec for `path` (replicated when none matches). Throws ingot::Error:
  /// kInvalidArgument naming the variable, the dimension and the axis size when a split dimension
  /// is not a multiple of it; kUnimplemented for a layout other than dimension 0 over the batch axis.
  NamedSharding variable_sharding(const std::string& path, const Shape& shape) const override;
  std::string class_name() const override { return "ModelParallel"; }
  const LayoutMap& layout_map() const { return layout_map_; }

 private:
  LayoutMap layout_map_;
};

}  // namespace ingot::distribution
