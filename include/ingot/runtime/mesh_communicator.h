// Communicators on a mesh of several axes: each device gets the whole mesh's group and one
// sub-group per axis (the devices that differ from it only along that axis), so a collective over
// one named axis (all_reduce(x, "model", ...)) runs among exactly those devices -- JAX's named-axis
// collectives, NCCL's split communicators (ncclCommSplit by color).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ingot/runtime/communicator.h"
#include "ingot/runtime/sharding.h"

namespace ingot {

/// One device's communicators on a mesh. Collectives called on it directly span the whole mesh
/// (rank = the device's mesh position, size = the mesh's); along(axis) is the axis's group (rank
/// = the device's coordinate on the axis). Used by one thread at a time (its device's worker), as
/// every Communicator.
class MeshCommunicator final : public Communicator {
 public:
  /// `whole`: the whole mesh's rank; `axes`: (axis name, that axis's group) per mesh axis.
  MeshCommunicator(std::unique_ptr<Communicator> whole,
                   std::vector<std::pair<std::string, std::unique_ptr<Communicator>>> axes);

  int rank() const override { return whole_->rank(); }
  int size() const override { return whole_->size(); }
  std::string backend() const override { return whole_->backend(); }
  void all_reduce(Array& inout, ReduceOp op) override { whole_->all_reduce(inout, op); }
  void all_gather(const Array& in, Array& out) override { whole_->all_gather(in, out); }
  void reduce_scatter(const Array& in, Array& out, ReduceOp op) override { whole_->reduce_scatter(in, out, op); }
  void broadcast(Array& inout, int root) override { whole_->broadcast(inout, root); }
  void barrier() override { whole_->barrier(); }
  /// The group along `axis`. Throws ingot::Error(kNotFound) naming the axis and the mesh's axes.
  Communicator& along(const std::string& axis) override;

 private:
  std::unique_ptr<Communicator> whole_;
  std::vector<std::pair<std::string, std::unique_ptr<Communicator>>> axes_;
};

/// A group of `size` ranks in this process (element r is rank r), e.g. make_local_gloo_group.
using GroupFactory = std::function<std::vector<std::unique_ptr<Communicator>>(int size)>;

/// The communicators of every device of `mesh` (in mesh order), each a MeshCommunicator over
/// groups made by `make_group`: one whole-mesh group, and per axis one group for each line of
/// devices along it (for a (2, 3) mesh: 3 groups of 2 along axis 0, 2 groups of 3 along axis 1).
/// A one-axis mesh needs no sub-groups: its devices get the whole group's communicators as they
/// are. Errors: what make_group throws.
std::vector<std::unique_ptr<Communicator>> make_mesh_communicators(const Mesh& mesh, const GroupFactory& make_group);

/// A group over `devices` (element r is rank r, on devices[r]), for backends whose ranks are bound
/// to devices (NCCL: NcclCommunicator::create_all).
using DeviceGroupFactory =
    std::function<std::vector<std::unique_ptr<Communicator>>(const std::vector<Device*>& devices)>;

/// make_mesh_communicators with groups made over the devices of each line (the whole mesh's in
/// mesh order, then each axis line's in axis order). Errors: what make_group throws.
std::vector<std::unique_ptr<Communicator>> make_mesh_device_communicators(const Mesh& mesh,
                                                                          const DeviceGroupFactory& make_group);

}  // namespace ingot
