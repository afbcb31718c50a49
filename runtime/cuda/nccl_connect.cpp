// connect_nccl (include/ingot/runtime/nccl.h): a multi-process NCCL group bootstrapped through the
// TcpStore rank 0 serves, as torch.distributed's NCCL backend exchanges its unique id.
#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <optional>
#include <set>
#include <thread>

#include "../collective_common.h"
#include "ingot/runtime/nccl.h"
#include "ingot/runtime/tcp_store.h"

namespace ingot {

namespace {

constexpr const char* kWhat = "connect_nccl";
constexpr const char* kIdKey = "ingot/nccl/unique_id";

void check_devices(const std::vector<CudaDevice*>& devices);

void check_options(const ProcessGroupOptions& g, const std::vector<CudaDevice*>& devices) {
  auto bad = [](std::string message, std::string hint) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", kWhat, message), std::move(hint));
  };
  const char* env_hint = "see ProcessGroupOptions (or RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT read by from_env)";
  if (g.world_size < 1) throw bad(fmt::format("world_size {} must be >= 1", g.world_size), env_hint);
  if (g.rank < 0 || g.rank >= g.world_size) {
    throw bad(fmt::format("rank {} is outside [0, world_size={})", g.rank, g.world_size), env_hint);
  }
  if (g.master_addr.empty()) throw bad("master_addr is empty", env_hint);
  if (g.master_port < 1 || g.master_port > 65535) {
    throw bad(fmt::format("master_port {} is outside [1, 65535]", g.master_port), env_hint);
  }
  check_devices(devices);
}

void check_devices(const std::vector<CudaDevice*>& devices) {
  auto bad = [](std::string message, std::string hint) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", kWhat, message), std::move(hint));
  };
  if (devices.empty()) throw bad("no devices", "pass this process's CUDA devices (one rank each)");
  std::set<const CudaDevice*> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr || !seen.insert(devices[i]).second) {
      throw bad(fmt::format("devices[{}] is {}", i, devices[i] == nullptr ? "null" : "repeated"),
                "pass each CUDA device once");
    }
  }
}

/// Process `process` of `processes` joins the group of `id` with its `devices`: ncclCommInitRank
/// blocks until every rank joined, so one thread per local device (global rank process * L + i).
std::vector<std::unique_ptr<NcclCommunicator>> join_ranks(const std::shared_ptr<NcclLibrary>& nccl,
                                                          const std::vector<CudaDevice*>& devices,
                                                          const NcclUniqueId& id, int process, int processes) {
  const int local = static_cast<int>(devices.size());
  std::vector<std::unique_ptr<NcclCommunicator>> out(static_cast<size_t>(local));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(local));
  std::vector<std::thread> threads;
  for (int i = 0; i < local; ++i) {
    threads.emplace_back([&, i] {
      try {
        out[static_cast<size_t>(i)] = NcclCommunicator::create(nccl, *devices[static_cast<size_t>(i)], id,
                                                               process * local + i, processes * local);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

}  // namespace

std::string nccl_unique_id_to_hex(const NcclUniqueId& id) {
  std::string hex;
  hex.reserve(id.size() * 2);
  for (char c : id) hex += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return hex;
}

NcclUniqueId nccl_unique_id_from_hex(const std::string& hex) {
  NcclUniqueId id{};
  if (hex.size() != id.size() * 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("nccl_unique_id_from_hex: {} characters, expected {}", hex.size(), id.size() * 2),
                "pass the text nccl_unique_id_to_hex made");
  }
  auto digit = [&](size_t i) {
    const char c = hex[i];
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("nccl_unique_id_from_hex: character {} ('{}') is not a lowercase hex digit", i, c),
                "pass the text nccl_unique_id_to_hex made");
  };
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(digit(2 * i) * 16 + digit(2 * i + 1));
  return id;
}

std::vector<std::unique_ptr<NcclCommunicator>> connect_nccl(const ProcessGroupOptions& group,
                                                            std::shared_ptr<NcclLibrary> nccl,
                                                            const std::vector<CudaDevice*>& devices) {
  if (nccl == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: nccl is null", kWhat),
                "load it with NcclLibrary::load()");
  }
  check_options(group, devices);
  nccl->check_available(kWhat);
  const std::chrono::milliseconds timeout = timeout_from_seconds(group.timeout, kWhat);
  const std::string where = fmt::format("{}: the store at master_addr:master_port (MASTER_ADDR:MASTER_PORT) {}:{}",
                                        kWhat, group.master_addr, group.master_port);
  std::unique_ptr<TcpStoreServer> server;
  NcclUniqueId id;
  try {
    if (group.rank == 0) server = std::make_unique<TcpStoreServer>(group.master_addr, group.master_port);
    TcpStore store(group.master_addr, group.master_port, timeout);
    if (group.rank == 0) {
      id = nccl->unique_id();
      store.set(kIdKey, nccl_unique_id_to_hex(id));
      // Every other process has read the id before the server goes away with this call.
      std::vector<std::string> joined;
      for (int r = 1; r < group.world_size; ++r) joined.push_back(fmt::format("ingot/nccl/read/{}", r));
      store.wait(joined);
    } else {
      id = nccl_unique_id_from_hex(store.get(kIdKey));
      store.set(fmt::format("ingot/nccl/read/{}", group.rank), "1");
    }
  } catch (const Error& e) {
    throw e.with_context(where);
  }
  return join_ranks(nccl, devices, id, group.rank, group.world_size);
}

std::vector<std::unique_ptr<NcclCommunicator>> connect_nccl(Communicator& processes, std::shared_ptr<NcclLibrary> nccl,
                                                            const std::vector<CudaDevice*>& devices) {
  if (nccl == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: nccl is null", kWhat),
                "load it with NcclLibrary::load()");
  }
  check_devices(devices);
  const int process = processes.rank(), count = processes.size();
  // Every process learns every process's device count and whether rank 0 made the id, so that a
  // mismatch or a failure is the same error everywhere rather than a hang in ncclCommInitRank.
  Array local = Array::from_vector<int32_t>({static_cast<int32_t>(devices.size())}, {1});
  Array counts = Array::empty({count}, DType::kI32);
  processes.all_gather(local, counts);
  const std::vector<int32_t> per_process = counts.to_vector<int32_t>();
  for (int p = 1; p < count; ++p) {
    if (per_process[static_cast<size_t>(p)] != per_process[0]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: process {} passes {} devices but process 0 passes {}", kWhat, p,
                              per_process[static_cast<size_t>(p)], per_process[0]),
                  "give every process as many CUDA devices");
    }
  }
  // Byte 0: 1 when rank 0 made the id; bytes 1..128: the id.
  Array message = Array::empty({1 + static_cast<int64_t>(NcclUniqueId{}.size())}, DType::kU8);
  std::memset(message.raw_data(), 0, static_cast<size_t>(message.nbytes()));
  std::optional<Error> failed;
  if (process == 0) {
    try {
      nccl->check_available(kWhat);
      const NcclUniqueId id = nccl->unique_id();
      auto* bytes = static_cast<char*>(message.raw_data());
      bytes[0] = 1;
      std::memcpy(bytes + 1, id.data(), id.size());
    } catch (const Error& e) {
      failed = e;
    }
  }
  processes.broadcast(message, 0);
  if (failed) throw *failed;
  const auto* bytes = static_cast<const char*>(message.raw_data());
  if (bytes[0] != 1) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("{}: process 0 could not create NCCL's unique id (its error says why)", kWhat),
                "see process 0's output");
  }
  nccl->check_available(kWhat);
  NcclUniqueId id;
  std::memcpy(id.data(), bytes + 1, id.size());
  return join_ranks(nccl, devices, id, process, count);
}

}  // namespace ingot
