// A mesh of CUDA devices as a compile target (cuda_spmd_target, include/ingot/jit/spmd.h):
// compile_graph_spmd with its segments compiled once by the CUDA code generator and loaded on
// every device, run by run_spmd with NCCL communicators; and the host <-> mesh transfers it needs.
#include <fmt/format.h>

#include <set>

#include "ingot/jit/spmd.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/mesh_communicator.h"
#include "ingot/runtime/nccl.h"
#include "ingot/runtime/spmd.h"
#include "jit/jit_internal.h"

namespace ingot {

#ifdef INGOT_HAVE_CUDA_TOOLKIT

namespace {

void check_devices(const std::vector<CudaDevice*>& devices, const char* what) {
  if (devices.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: no CUDA devices", what),
                "pass the CUDA devices of the mesh (CudaDevice::open)");
  }
  std::set<const CudaDevice*> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr || !seen.insert(devices[i]).second) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: devices[{}] is {}", what, i, devices[i] == nullptr ? "null" : "repeated"),
                  "pass each CUDA device once");
    }
  }
}

/// The CudaDevice among `devices` whose ingot::Device is `device` (kInvalidArgument otherwise).
CudaDevice& cuda_device_of(const Device& device, const std::vector<CudaDevice*>& devices, const char* what) {
  for (CudaDevice* d : devices) {
    if (&d->device() == &device) return *d;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: {} is not one of the {} CUDA devices given", what, device.name(), devices.size()),
              "shard arrays over a mesh of those devices (cuda_mesh)");
}

class CudaSpmdTarget final : public CompileTarget {
 public:
  CudaSpmdTarget(std::vector<CudaDevice*> devices, SpmdTargetOptions options)
      : devices_(std::move(devices)), options_(std::move(options)), mesh_(options_.out_sharding(0, 1).mesh()) {
    for (const Device* d : mesh_.devices()) cuda_device_of(*d, devices_, "cuda_spmd_target: out_sharding's mesh");
  }
  TargetKind kind() const override { return TargetKind::kSpmd; }
  std::string name() const override { return fmt::format("spmd over {} CUDA devices", devices_.size()); }
  bool host_memory() const override { return false; }
  std::vector<ir::TensorType> signature(const std::vector<Array>& args, const std::string& what) const override {
    return detail::shard_signature(args, what);
  }
  std::shared_ptr<const Executable> compile(const ir::Graph& graph, const std::vector<int64_t>& donate_argnums,
                                            const TargetCompileOptions& options) const override {
    std::vector<CudaDevice*> devices = devices_;
    return compile_graph_spmd(
        graph, options.cpu, options.lowering,
        {.donate_argnums = donate_argnums,
         .collective_nanoseconds = options_.collective_nanoseconds,
         .overlap_collectives = options_.overlap_collectives,
         .compile_segment =
             [devices, cuda = options.cuda, lowering = options.lowering](const ir::Graph& segment,
                                                                         const std::vector<int64_t>& donate) {
               return detail::compile_graph_cuda_devices(segment, devices, cuda, donate, lowering);
             },
         .copy =
             [devices](const Array& from, Array& to) {
               // A parameter returned unchanged: a copy on the device's compute stream,
               // in order with the segments around it.
               cuda_device_of(from.device(), devices, "cuda_spmd_target copy").copy_async(from, to);
             }});
  }
  std::vector<Array> run(const Executable& exe, const std::vector<Array>& args) const override {
    std::vector<Array> placed;
    placed.reserve(args.size());
    for (const Array& a : args) {
      placed.push_back(a.valid() && a.sharding().mesh() == mesh_ ? a : to_target(a));
    }
    const size_t n = exe.outputs().size();
    std::vector<NamedSharding> out_shardings;
    out_shardings.reserve(n);
    for (size_t i = 0; i < n; ++i) out_shardings.push_back(options_.out_sharding(i, n));
    return run_spmd(exe, placed, out_shardings, options_.communicators);
  }
  Array to_target(const Array& host) const override {
    if (host.valid() && host.sharding().mesh() == mesh_) return host;
    return device_put(ingot::to_host(host), NamedSharding(mesh_, PartitionSpec{}));
  }
  Array to_host(const Array& array) const override { return ingot::to_host(array); }

 private:
  std::vector<CudaDevice*> devices_;
  SpmdTargetOptions options_;
  Mesh mesh_;
};

}  // namespace

Mesh cuda_mesh(const std::vector<CudaDevice*>& devices, const std::string& axis) {
  check_devices(devices, "cuda_mesh");
  std::vector<Device*> mesh_devices;
  for (CudaDevice* d : devices) mesh_devices.push_back(&d->device());
  return Mesh({MeshAxis{axis, static_cast<int64_t>(devices.size())}}, std::move(mesh_devices));
}

std::shared_ptr<const CompileTarget> cuda_spmd_target(std::vector<CudaDevice*> devices, SpmdTargetOptions options) {
  check_devices(devices, "cuda_spmd_target");
  if (!options.out_sharding) {
    throw Error(ErrorCode::kInvalidArgument, "cuda_spmd_target: SpmdTargetOptions::out_sharding is empty",
                "give the sharding of every output (e.g. replicated over cuda_mesh(devices))");
  }
  return std::make_shared<CudaSpmdTarget>(std::move(devices), std::move(options));
}

MeshBackend cuda_mesh_backend(std::vector<CudaDevice*> devices, std::shared_ptr<NcclLibrary> nccl) {
  check_devices(devices, "cuda_mesh_backend");
  if (nccl == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "cuda_mesh_backend: nccl is null",
                "load it with NcclLibrary::load(LibrarySearch{})");
  }
  nccl->check_available("cuda_mesh_backend");
  MeshBackend backend;
  backend.name = "CUDA over NCCL";
  backend.target = [devices](SpmdTargetOptions options) { return cuda_spmd_target(devices, std::move(options)); };
  backend.communicators = [devices, nccl](const Mesh& mesh) {
    return make_mesh_device_communicators(mesh, [&](const std::vector<Device*>& line) {
      std::vector<CudaDevice*> cuda;
      for (const Device* d : line) cuda.push_back(&cuda_device_of(*d, devices, "cuda_mesh_backend"));
      std::vector<std::unique_ptr<Communicator>> group;
      for (auto& c : NcclCommunicator::create_all(nccl, cuda)) group.push_back(std::move(c));
      return group;
    });
  };
  backend.connect_processes = [devices, nccl](Communicator& processes) {
    std::vector<std::unique_ptr<Communicator>> group;
    for (auto& c : connect_nccl(processes, nccl, devices)) group.push_back(std::move(c));
    return group;
  };
  for (CudaDevice* d : devices) backend.devices.push_back(&d->device());
  return backend;
}

#else

namespace {
[[noreturn]] void no_toolkit(const char* what) {
  throw Error(ErrorCode::kUnimplemented, fmt::format("{}: ingot was built without the CUDA toolkit", what),
              "install the CUDA toolkit (/usr/local/cuda) and rebuild to use CUDA devices");
}
}  // namespace

Mesh cuda_mesh(const std::vector<CudaDevice*>&, const std::string&) { no_toolkit("cuda_mesh"); }
std::shared_ptr<const CompileTarget> cuda_spmd_target(std::vector<CudaDevice*>, SpmdTargetOptions) {
  no_toolkit("cuda_spmd_target");
}
MeshBackend cuda_mesh_backend(std::vector<CudaDevice*>, std::shared_ptr<NcclLibrary>) {
  no_toolkit("cuda_mesh_backend");
}

#endif

}  // namespace ingot
