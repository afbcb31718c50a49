// connect_nccl (include/ingot/runtime/nccl.h): a multi-process NCCL group bootstrapped through the
// TcpStore rank 0 serves, as torch.distributed's NCCL backend exchanges its unique id.
#include <fmt/format.h>

#include <exception>
#include <set>
#include <thread>

#include "../collective_common.h"
#include "ingot/runtime/nccl.h"
#include "ingot/runtime/tcp_store.h"

namespace ingot {

namespace {

constexpr const char* kWhat = "connect_nccl";
constexpr const char* kIdKey = "ingot/nccl/unique_id";

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
  if (devices.empty()) throw bad("no devices", "pass this process's CUDA devices (one rank each)");
  std::set<const CudaDevice*> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr || !seen.insert(devices[i]).second) {
      throw bad(fmt::format("devices[{}] is {}", i, devices[i] == nullptr ? "null" : "repeated"),
                "pass each CUDA device once");
    }
  }
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
  const int local = static_cast<int>(devices.size());
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
  // ncclCommInitRank blocks until every rank joined: one thread per local device.
  std::vector<std::unique_ptr<NcclCommunicator>> out(static_cast<size_t>(local));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(local));
  std::vector<std::thread> threads;
  for (int i = 0; i < local; ++i) {
    threads.emplace_back([&, i] {
      try {
        out[static_cast<size_t>(i)] = NcclCommunicator::create(nccl, *devices[static_cast<size_t>(i)], id,
                                                               group.rank * local + i, group.world_size * local);
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

}  // namespace ingot
