// Shardings in JAX's model: a Mesh lays devices out on named axes, a PartitionSpec says which
// mesh axes each array dimension is split over, and a NamedSharding (mesh + spec) says which
// index range of a global array every device holds. Semantics follow jax.sharding.Mesh,
// jax.sharding.PartitionSpec and jax.sharding.NamedSharding (https://jax.readthedocs.io/en/latest/
// notebooks/Distributed_arrays_and_automatic_parallelization.html). All value types, immutable,
// thread-safe to read.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "ingot/runtime/device.h"
#include "ingot/runtime/shape.h"

namespace ingot {

/// One named axis of a Mesh.
struct MeshAxis {
  std::string name;  ///< non-empty, unique within the mesh
  int64_t size = 1;  ///< number of devices along the axis, >= 1
  bool operator==(const MeshAxis&) const = default;
};

/// Devices laid out on named axes, like jax.sharding.Mesh(np.array(devices).reshape(sizes),
/// names): the device at flat position p (row-major over the axes, last axis fastest) has
/// coordinates coords(p). The devices are not owned: they must outlive the Mesh (a Runtime's
/// devices live as long as the Runtime).
class Mesh {
 public:
  /// Throws ingot::Error(kInvalidArgument) for an empty or repeated axis name, an axis size < 1,
  /// a null or repeated device, or a device count different from the product of the axis sizes
  /// (each message names the offending axis/device and the values). Zero axes and one device is
  /// the mesh of a single-device array.
  Mesh(std::vector<MeshAxis> axes, std::vector<Device*> devices);
  /// The mesh of an unsharded array: no axes, just `device`.
  static Mesh single_device(Device& device);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  /// Devices in flat (row-major) order.
  const std::vector<Device*>& devices() const { return devices_; }
  /// Number of devices (product of the axis sizes).
  int64_t size() const { return static_cast<int64_t>(devices_.size()); }
  /// Position of axis `name` in axes(). Throws ingot::Error(kNotFound) naming `name` and the
  /// mesh's axes.
  int64_t axis_index(const std::string& name) const;
  /// Size of axis `name` (same error as axis_index).
  int64_t axis_size(const std::string& name) const;
  /// Coordinates (one per axis) of the device at flat position `position` in [0, size())
  /// (ingot::Error kOutOfRange otherwise).
  std::vector<int64_t> coords(int64_t position) const;
  /// Flat position of `device`, or -1 if it is not in the mesh.
  int64_t position_of(const Device& device) const;
  /// "Mesh('batch': 2, 'model': 2; devices: cpu:0, cpu:1, cpu:2, cpu:3)";
  /// "Mesh(device: cpu:0)" for a single-device mesh.
  std::string to_string() const;
  /// Same axes and the same device objects in the same order.
  bool operator==(const Mesh&) const = default;

 private:
  std::vector<MeshAxis> axes_;
  std::vector<Device*> devices_;
};

/// One entry of a PartitionSpec: the mesh axes an array dimension is split over, major to minor
/// (JAX: None = no axes = replicated, 'x' = one axis, ('x', 'y') = a tuple of axes). Converts
/// implicitly so that PartitionSpec{"batch", {}, {"batch", "model"}} reads like JAX's
/// P('batch', None, ('batch', 'model')) (an axis may appear only once per spec, so that exact
/// example is an error).
struct PartitionDim {
  /// Replicated along this dimension (JAX None).
  PartitionDim() = default;
  /// Split over one mesh axis.
  PartitionDim(const char* axis) : axes{axis} {}             // NOLINT(google-explicit-constructor)
  PartitionDim(std::string axis) : axes{std::move(axis)} {}  // NOLINT(google-explicit-constructor)
  /// Split over several mesh axes, the first one major (a tuple in JAX).
  PartitionDim(std::initializer_list<std::string> tuple) : axes(tuple) {}  // NOLINT
  explicit PartitionDim(std::vector<std::string> tuple) : axes(std::move(tuple)) {}
  bool replicated() const { return axes.empty(); }
  bool operator==(const PartitionDim&) const = default;

  std::vector<std::string> axes;
};

/// Per array dimension, the mesh axes it is split over (jax.sharding.PartitionSpec). Dimensions
/// beyond the spec's entries are replicated; an empty spec replicates the whole array.
class PartitionSpec {
 public:
  /// Fully replicated.
  PartitionSpec() = default;
  /// Throws ingot::Error(kInvalidArgument) if an axis name is empty or appears twice anywhere in
  /// the spec (naming the axis and the dimensions).
  PartitionSpec(std::initializer_list<PartitionDim> dims);
  explicit PartitionSpec(std::vector<PartitionDim> dims);

  const std::vector<PartitionDim>& dims() const { return dims_; }
  /// Number of entries (may be less than the array rank).
  int64_t size() const { return static_cast<int64_t>(dims_.size()); }
  /// Entry for array dimension `dim` (replicated beyond size()).
  PartitionDim dim(int64_t dim) const;
  /// The spec without trailing replicated entries (P('x', None) -> P('x')).
  PartitionSpec normalized() const;
  /// JAX's repr: "PartitionSpec()", "PartitionSpec('batch',)",
  /// "PartitionSpec('batch', None, ('x', 'y'))".
  std::string to_string() const;
  /// Entry-wise equality (P('x') != P('x', None); compare normalized() for equivalence).
  bool operator==(const PartitionSpec&) const = default;

 private:
  std::vector<PartitionDim> dims_;
};

/// Half-open index range [start, stop) along one dimension (a Python slice with step 1).
struct IndexRange {
  int64_t start = 0;
  int64_t stop = 0;
  int64_t size() const { return stop - start; }
  bool operator==(const IndexRange&) const = default;
};

/// A mesh and a spec (jax.sharding.NamedSharding): array dimension d with entry (a1, ..., ak) is
/// cut into size(a1) * ... * size(ak) equal blocks, and the device with mesh coordinates c holds
/// block index c[a1] * size(a2) * ... * size(ak) + ... + c[ak] (mixed radix, a1 major) along d.
/// Dimensions without axes are whole on every device; devices that differ only on mesh axes the
/// spec does not use hold identical copies (replicas).
class NamedSharding {
 public:
  /// Throws ingot::Error(kNotFound) if the spec names an axis the mesh lacks (naming the axis and
  /// the mesh's axes).
  NamedSharding(Mesh mesh, PartitionSpec spec);
  /// Everything on one device (the sharding of an ordinary single-device Array).
  static NamedSharding single_device(Device& device);

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  /// Number of devices (= number of shards, replicas included).
  int64_t num_devices() const { return mesh_.size(); }
  /// True if every device holds the whole array (no dimension is split).
  bool is_fully_replicated() const;
  /// Number of blocks array dimension `dim` is cut into (product of its axes' sizes; 1 if none).
  int64_t num_parts(int64_t dim) const;

  /// Checks that the sharding applies to `shape`: throws ingot::Error(kShapeMismatch) if the spec
  /// has more entries than the rank, or if a split dimension's size is not a multiple of the
  /// product of its axes' sizes (JAX requires even splits): the message names the dimension,
  /// its size and the axis (or axes) and size. `what` prefixes the message.
  void check_shape(const Shape& shape, const char* what = "NamedSharding") const;
  /// Shape of every shard of an array of `shape` (checked as check_shape).
  Shape shard_shape(const Shape& shape) const;
  /// Index range per dimension of the shard on the device at mesh position `position` (checked as
  /// check_shape; position outside [0, num_devices()) is kOutOfRange).
  std::vector<IndexRange> shard_index(int64_t position, const Shape& shape) const;
  /// shard_index for every device, in mesh order (JAX's devices_indices_map).
  std::vector<std::vector<IndexRange>> devices_indices(const Shape& shape) const;
  /// Which copy of its block the device at `position` holds: 0 .. (number of devices holding the
  /// same block) - 1, counted row-major over the mesh axes the spec does not use. Gathers read
  /// replica 0 of every block.
  int64_t replica_id(int64_t position) const;

  /// "NamedSharding(mesh=Mesh('batch': 4; devices: ...), spec=PartitionSpec('batch',))".
  std::string to_string() const;
  /// Same mesh and the same normalized spec (trailing replicated entries do not matter).
  bool operator==(const NamedSharding& other) const;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
};

}  // namespace ingot
