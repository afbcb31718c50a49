// Communicators on a mesh of several axes (include/ingot/runtime/mesh_communicator.h).
#include "ingot/runtime/mesh_communicator.h"

#include <fmt/format.h>

#include <map>

#include "ingot/runtime/error.h"

namespace ingot {

MeshCommunicator::MeshCommunicator(std::unique_ptr<Communicator> whole,
                                   std::vector<std::pair<std::string, std::unique_ptr<Communicator>>> axes)
    : whole_(std::move(whole)), axes_(std::move(axes)) {}

Communicator& MeshCommunicator::along(const std::string& axis) {
  std::string names;
  for (auto& [name, group] : axes_) {
    if (name == axis) return *group;
    names += (names.empty() ? "" : ", ") + name;
  }
  throw Error(ErrorCode::kNotFound, fmt::format("MeshCommunicator: no mesh axis '{}' (axes: {})", axis, names),
              "name one of the mesh's axes in the collective");
}

std::vector<std::unique_ptr<Communicator>> make_mesh_communicators(const Mesh& mesh, const GroupFactory& make_group) {
  return make_mesh_device_communicators(mesh, [&make_group](const std::vector<Device*>& devices) {
    return make_group(static_cast<int>(devices.size()));
  });
}

std::vector<std::unique_ptr<Communicator>> make_mesh_device_communicators(const Mesh& mesh,
                                                                          const DeviceGroupFactory& make_group) {
  const int64_t n = mesh.size();
  std::vector<std::unique_ptr<Communicator>> whole = make_group(mesh.devices());
  if (mesh.axes().size() <= 1) return whole;
  // Per axis: the devices whose other coordinates agree form one line; its group's rank k is the
  // device with coordinate k on the axis.
  std::vector<std::vector<std::pair<std::string, std::unique_ptr<Communicator>>>> per_device(static_cast<size_t>(n));
  for (size_t a = 0; a < mesh.axes().size(); ++a) {
    std::map<std::vector<int64_t>, std::vector<int64_t>> lines;  // other coordinates -> positions
    for (int64_t p = 0; p < n; ++p) {
      std::vector<int64_t> key = mesh.coords(p);
      key.erase(key.begin() + static_cast<std::ptrdiff_t>(a));
      lines[key].push_back(p);  // ascending p: ascending coordinate on axis a
    }
    for (auto& [key, positions] : lines) {
      std::vector<Device*> line;
      for (int64_t p : positions) line.push_back(mesh.devices()[static_cast<size_t>(p)]);
      std::vector<std::unique_ptr<Communicator>> group = make_group(line);
      for (size_t k = 0; k < positions.size(); ++k) {
        per_device[static_cast<size_t>(positions[k])].emplace_back(mesh.axes()[a].name, std::move(group[k]));
      }
    }
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (int64_t p = 0; p < n; ++p) {
    out.push_back(std::make_unique<MeshCommunicator>(std::move(whole[static_cast<size_t>(p)]),
                                                     std::move(per_device[static_cast<size_t>(p)])));
  }
  return out;
}

}  // namespace ingot
