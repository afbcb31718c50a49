// SPMD execution over a mesh and the collective thunks (include/ingot/runtime/spmd.h).
#include "ingot/runtime/spmd.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>

namespace ingot {

namespace {

Thunk collective_thunk(std::string name, size_t in, size_t out,
                       std::function<void(Communicator&, const Array&, Array&)> work) {
  Thunk t;
  t.name = std::move(name);
  t.input_slots = {in};
  t.output_slots = {out};
  t.collective = [work = std::move(work)](Communicator& c, std::span<const Array> ins, std::span<Array> outs) {
    work(c, ins[0], outs[0]);
  };
  return t;
}

/// The mesh every argument is sharded over (checked to be the same for all).
Mesh common_mesh(const std::vector<Array>& args) {
  if (args.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "run_spmd: no arguments, so no mesh to run on",
                "pass at least one argument sharded over the mesh (device_put)");
  }
  const Mesh mesh = args[0].sharding().mesh();
  for (size_t i = 1; i < args.size(); ++i) {
    if (!(args[i].sharding().mesh() == mesh)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("run_spmd: argument {} is sharded over mesh {}, argument 0 over {}", i,
                              args[i].sharding().mesh().to_string(), mesh.to_string()),
                  "device_put or reshard every argument onto the same mesh");
    }
  }
  return mesh;
}

void check_communicators(const std::vector<Communicator*>& communicators, const Mesh& mesh) {
  if (communicators.empty()) return;
  if (static_cast<int64_t>(communicators.size()) != mesh.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("run_spmd: {} communicators for a mesh of {} devices", communicators.size(), mesh.size()),
                "pass one communicator per mesh device, in mesh order (or none)");
  }
  // This process's devices are ranks first .. first + mesh.size() - 1 of a group of whole meshes'
  // worth of ranks (one process: first = 0 and the group is the mesh).
  const Communicator* c0 = communicators[0];
  const int n = static_cast<int>(mesh.size());
  const int first = c0 != nullptr ? c0->rank() : -1, size = c0 != nullptr ? c0->size() : 0;
  for (size_t p = 0; p < communicators.size(); ++p) {
    const Communicator* c = communicators[p];
    if (c == nullptr || first % n != 0 || size % n != 0 || c->rank() != first + static_cast<int>(p) ||
        c->size() != size) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("run_spmd: communicator {} is {}", p,
                              c == nullptr ? std::string("null") : fmt::format("rank {} of {}", c->rank(), c->size())),
                  fmt::format("communicator p must be rank first + p of a group whose size is a multiple of the "
                              "mesh's {} devices (first: communicator 0's rank, a multiple of {}; one process: "
                              "first = 0, a group of {})",
                              n, n, n));
    }
  }
}

}  // namespace

namespace {
/// The communicator of a collective over `axis` (empty: the whole group).
Communicator& group(Communicator& c, const std::string& axis) { return axis.empty() ? c : c.along(axis); }
}  // namespace

Thunk all_reduce_thunk(size_t in, size_t out, ReduceOp op, const std::string& axis) {
  return collective_thunk(
      fmt::format("all_reduce({})", reduce_op_name(op)), in, out,
      [op, axis](Communicator& c, const Array& x, Array& y) { group(c, axis).all_reduce_into(x, y, op); });
}

Thunk all_reduce_group_thunk(std::vector<size_t> ins, std::vector<size_t> outs, ReduceOp op, const std::string& axis) {
  if (ins.size() != outs.size() || ins.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("all_reduce_group_thunk: {} input slots and {} output slots", ins.size(), outs.size()),
                "pass one output slot per input slot, at least one");
  }
  Thunk t;
  t.name = fmt::format("all_reduce_group({}) x {}", reduce_op_name(op), ins.size());
  t.input_slots = std::move(ins);
  t.output_slots = std::move(outs);
  t.collective = [op, axis](Communicator& c, std::span<const Array> in, std::span<Array> out) {
    group(c, axis).all_reduce_group_into(in, out, op);
  };
  return t;
}

Thunk all_gather_thunk(size_t in, size_t out, const std::string& axis) {
  return collective_thunk("all_gather", in, out,
                          [axis](Communicator& c, const Array& x, Array& y) { group(c, axis).all_gather(x, y); });
}

Thunk reduce_scatter_thunk(size_t in, size_t out, ReduceOp op, const std::string& axis) {
  return collective_thunk(
      fmt::format("reduce_scatter({})", reduce_op_name(op)), in, out,
      [op, axis](Communicator& c, const Array& x, Array& y) { group(c, axis).reduce_scatter(x, y, op); });
}

Thunk broadcast_thunk(size_t in, size_t out, int root, const std::string& axis) {
  return collective_thunk(
      fmt::format("broadcast(root {})", root), in, out,
      [root, axis](Communicator& c, const Array& x, Array& y) { group(c, axis).broadcast_into(x, y, root); });
}

std::vector<Array> run_spmd(const Executable& executable, const std::vector<Array>& args,
                            const std::vector<NamedSharding>& out_shardings,
                            const std::vector<Communicator*>& communicators) {
  const Mesh mesh = common_mesh(args);
  check_communicators(communicators, mesh);
  if (out_shardings.size() != executable.outputs().size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("run_spmd: {} out_shardings for an executable with {} outputs", out_shardings.size(),
                            executable.outputs().size()),
                "give one NamedSharding per output");
  }
  for (size_t j = 0; j < out_shardings.size(); ++j) {
    if (!(out_shardings[j].mesh() == mesh)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("run_spmd: out_shardings[{}] is over mesh {}, the arguments over {}", j,
                              out_shardings[j].mesh().to_string(), mesh.to_string()),
                  "give every output a sharding over the arguments' mesh");
    }
  }
  const auto devices = static_cast<size_t>(mesh.size());
  std::vector<std::vector<Array>> local_args(devices);
  for (const Array& a : args) {
    std::vector<Array> shards = a.shards();
    for (size_t p = 0; p < devices; ++p) local_args[p].push_back(shards[p]);
  }
  std::vector<std::vector<Array>> local_out(devices);
  // The device that failed first: the others usually fail after it, waiting for it in a
  // collective (a timeout that says nothing about the cause).
  std::mutex failure_mu;
  std::exception_ptr first;
  size_t first_device = 0, failures = 0;
  std::vector<std::shared_ptr<Event>> done;
  for (size_t p = 0; p < devices; ++p) {
    Device* device = mesh.devices()[p];
    Communicator* comm = communicators.empty() ? nullptr : communicators[p];
    done.push_back(device->enqueue([&, device, comm, p] {
      try {
        local_out[p] = executable.run(local_args[p], device, comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mu);
        if (failures++ == 0) {
          first = std::current_exception();
          first_device = p;
        }
      }
    }));
  }
  for (const auto& e : done) e->wait();  // every device has stopped (they use local_out)
  if (first) {
    try {
      std::rethrow_exception(first);
    } catch (const Error& e) {
      throw e.with_context(
          fmt::format("run_spmd: device {} ({}) failed first{}", first_device, mesh.devices()[first_device]->name(),
                      failures > 1 ? fmt::format("; {} more devices failed after it", failures - 1) : std::string()));
    }
  }
  const size_t outputs = executable.outputs().size();
  std::vector<Array> result;
  for (size_t j = 0; j < outputs; ++j) {
    Shape global = local_out[0][j].shape();
    if (out_shardings[j].spec().size() > static_cast<int64_t>(global.size())) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("run_spmd: out_shardings[{}] ({}) names {} dims but output {} has rank {}", j,
                              out_shardings[j].to_string(), out_shardings[j].spec().size(), j, global.size()),
                  "give each output a PartitionSpec no longer than its rank");
    }
    for (size_t d = 0; d < global.size(); ++d) global[d] *= out_shardings[j].num_parts(static_cast<int64_t>(d));
    std::vector<Array> shards;
    for (size_t p = 0; p < devices; ++p) shards.push_back(local_out[p][j]);
    result.push_back(Array::from_shards(global, local_out[0][j].dtype(), out_shardings[j], std::move(shards)));
  }
  return result;
}

}  // namespace ingot
