// Creating Gloo process groups: in one process (Gloo's HashStore, one connecting thread per
// rank) and across processes (a TcpStore served by rank 0, adapted to Gloo's rendezvous Store).
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <fmt/format.h>

#include <exception>
#include <thread>
#include <vector>

#include "gloo_state.h"
#include "ingot/runtime/tcp_store.h"
#include "socket.h"

namespace ingot {

namespace {

// Gloo's rendezvous Store interface over a TcpStore client, with keys under `prefix`.
// TcpStore errors (ingot::Error) propagate through Gloo's rendezvous to connect_gloo.
class TcpStoreForGloo final : public gloo::rendezvous::Store {
 public:
  TcpStoreForGloo(TcpStore& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = store_.get(prefix_ + key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_.wait(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    // Gloo passes 0 (gloo::kNoTimeout) for "no timeout": use the store's, never wait forever.
    store_.wait(prefixed(keys), timeout.count() > 0 ? timeout : store_.timeout());
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const std::string& k : keys) out.push_back(prefix_ + k);
    return out;
  }

  TcpStore& store_;
  std::string prefix_;
};

void check_options(const GlooOptions& options, const char* what) {
  if (options.reduce_scatter_chunk_bytes < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: GlooOptions::reduce_scatter_chunk_bytes = {} must be >= 1", what,
                            options.reduce_scatter_chunk_bytes));
  }
}

// Gloo's TCP transport bound to `options.interface`, else `options.hostname`, else
// `default_host` (empty: Gloo's default, this machine's host name).
std::shared_ptr<gloo::transport::Device> make_device(const GlooOptions& options, const std::string& default_host,
                                                     const char* what) {
  gloo::transport::tcp::attr attr;
  std::string where;
  if (!options.interface.empty()) {
    attr.iface = options.interface;
    where = fmt::format("interface '{}'", options.interface);
  } else {
    attr.hostname = options.hostname.empty() ? default_host : options.hostname;
    where = attr.hostname.empty() ? "this machine's host name" : "host '" + attr.hostname + "'";
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: cannot create Gloo's TCP transport on {}: {}", what, where, e.what()),
                "set GlooOptions::hostname to an address of this machine (e.g. 127.0.0.1) or "
                "GlooOptions::interface to an existing interface (e.g. lo)");
  }
}

std::unique_ptr<GlooCommunicator::State> make_state(std::shared_ptr<gloo::transport::Device> device,
                                                    std::shared_ptr<gloo::Context> context, const GlooOptions& options,
                                                    std::chrono::milliseconds timeout) {
  auto state = std::make_unique<GlooCommunicator::State>();
  state->device = std::move(device);
  state->context = std::move(context);
  state->options = options;
  state->timeout = timeout;
  return state;
}

// Connects rank `rank` of `size` through `store` (Gloo's full-mesh rendezvous). Gloo failures
// become kFailedPrecondition naming `where` (the store) and the timeout.
std::shared_ptr<gloo::Context> connect_full_mesh(int rank, int size, gloo::rendezvous::Store& store,
                                                 std::shared_ptr<gloo::transport::Device>& device,
                                                 std::chrono::milliseconds timeout, const std::string& where,
                                                 const char* what) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(timeout);
  try {
    context->connectFullMesh(store, device);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{}: rank {} of {}", what, rank, size));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("{}: rank {} of {} could not connect to its peers through {} within "
                            "{}: {}",
                            what, rank, size, where, net::seconds_text(timeout), e.what()),
                "every rank must start and call the same group creation; raise the timeout if "
                "ranks start far apart");
  }
  return context;
}

bool is_loopback(const std::string& host) { return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0; }

void check_group(const ProcessGroupOptions& g) {
  auto bad = [](std::string message) {
    return Error(ErrorCode::kInvalidArgument, "connect_gloo: " + std::move(message),
                 "see ProcessGroupOptions (or the RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT "
                 "environment variables read by from_env)");
  };
  if (g.world_size < 1) throw bad(fmt::format("world_size {} must be >= 1", g.world_size));
  if (g.rank < 0 || g.rank >= g.world_size) {
    throw bad(fmt::format("rank {} is outside [0, world_size={})", g.rank, g.world_size));
  }
  if (g.master_addr.empty()) throw bad("master_addr is empty");
  if (g.master_port < 1 || g.master_port > 65535) {
    throw bad(fmt::format("master_port {} is outside [1, 65535]", g.master_port));
  }
}

// Rank 0 publishes its world size and ranks per process; every other rank compares its own with
// them and reports the result under "ingot/checked/<rank>" (empty: agreed), which rank 0 waits for,
// so that a mismatch is one clear error on both sides at once instead of rank 0 timing out later
// in the rendezvous.
void check_world_size(TcpStore& store, const ProcessGroupOptions& g, int local_ranks, const char* what) {
  const std::string key = "ingot/world_size", local_key = "ingot/local_ranks";
  const auto checked = [](int rank) { return "ingot/checked/" + std::to_string(rank); };
  if (g.rank == 0) {
    store.set(key, std::to_string(g.world_size));
    store.set(local_key, std::to_string(local_ranks));
    for (int r = 1; r < g.world_size; ++r) {
      std::string report;
      try {
        report = store.get(checked(r));
      } catch (const Error& e) {
        throw e.with_context(
            fmt::format("{}: rank 0 of {} waited for rank {}, which did not join", what, g.world_size, r));
      }
      if (!report.empty()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: rank {} disagrees with rank 0: {}", what, r, report),
                    "start every process with the same WORLD_SIZE and the same number of devices");
      }
    }
    return;
  }
  const std::string rank0 = store.get(key), local0 = store.get(local_key);
  std::string report;
  if (rank0 != std::to_string(g.world_size)) {
    report = fmt::format("world_size is {} on rank {} but {} on rank 0", g.world_size, g.rank, rank0);
  } else if (local0 != std::to_string(local_ranks)) {
    report = fmt::format("{} ranks per process on rank {} but {} on rank 0", local_ranks, g.rank, local0);
  }
  store.set(checked(g.rank), report);
  if (!report.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", what, report),
                report.starts_with("world_size") ? "start every rank with the same WORLD_SIZE"
                                                 : "give every process the same number of devices");
  }
}

// Runs f(0) .. f(n - 1) on n threads, joins them all, then rethrows the first error (by index).
template <class F>
void on_threads(int n, F&& f) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  auto run = [&](int i) {
    try {
      f(i);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  };
  try {
    for (int i = 0; i < n; ++i) threads.emplace_back(run, i);
  } catch (...) {
    for (std::thread& th : threads) th.join();
    throw;
  }
  for (std::thread& th : threads) th.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// The groups of one process: `local_ranks` ranks of world_size * local_ranks and, when
// `with_process`, one rank of world_size. Each connects from its own thread with its own store
// client (a TcpStore client serves one thread).
GlooProcessGroup join_processes(const ProcessGroupOptions& g, int local_ranks, bool with_process,
                                const GlooOptions& options, const char* what) {
  check_group(g);
  if (local_ranks < 1 || local_ranks > 4096) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: local_ranks {} is outside [1, 4096]", what, local_ranks),
                "pass the number of this process's devices");
  }
  const std::chrono::milliseconds t = timeout_from_seconds(g.timeout, what);
  check_options(options, what);
  const std::string host = is_loopback(g.master_addr) ? g.master_addr : "";
  const int n = local_ranks + (with_process ? 1 : 0);
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  for (int i = 0; i < n; ++i) devices.push_back(make_device(options, host, what));
  std::unique_ptr<TcpStoreServer> server;
  std::vector<std::shared_ptr<gloo::Context>> contexts(static_cast<size_t>(n));
  const std::string where = fmt::format("{}: the store at master_addr:master_port (MASTER_ADDR:MASTER_PORT) {}:{}",
                                        what, g.master_addr, g.master_port);
  std::unique_ptr<TcpStore> store;
  try {
    if (g.rank == 0) server = std::make_unique<TcpStoreServer>(g.master_addr, g.master_port);
    store = std::make_unique<TcpStore>(g.master_addr, g.master_port, t);
  } catch (const Error& e) {
    throw e.with_context(where);
  }
  check_world_size(*store, g, local_ranks, what);
  store.reset();
  on_threads(n, [&](int i) {
    TcpStore store(g.master_addr, g.master_port, t);
    const bool process = i == local_ranks;
    TcpStoreForGloo gloo_store(store, process ? "ingot/gloo/process/" : "ingot/gloo/ranks/");
    const int rank = process ? g.rank : g.rank * local_ranks + i;
    const int size = process ? g.world_size : g.world_size * local_ranks;
    contexts[static_cast<size_t>(i)] = connect_full_mesh(rank, size, gloo_store, devices[static_cast<size_t>(i)], t,
                                                         "the store at " + store.address(), what);
  });
  GlooProcessGroup out;
  for (int i = 0; i < n; ++i) {
    auto comm = std::make_unique<GlooCommunicator>(
        make_state(devices[static_cast<size_t>(i)], contexts[static_cast<size_t>(i)], options, t));
    if (i == local_ranks) {
      out.process = std::move(comm);
    } else {
      out.ranks.push_back(std::move(comm));
    }
  }
  // After the barriers every rank is connected and done with the store: rank 0 may stop it.
  on_threads(n, [&](int i) { (i == local_ranks ? *out.process : *out.ranks[static_cast<size_t>(i)]).barrier(); });
  return out;
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_gloo_group(int size, double timeout, const GlooOptions& options) {
  constexpr const char* what = "make_local_gloo_group";
  if (size < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: size {} must be >= 1", what, size));
  }
  const std::chrono::milliseconds t = timeout_from_seconds(timeout, what);
  check_options(options, what);
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  for (int r = 0; r < size; ++r) devices.push_back(make_device(options, "127.0.0.1", what));

  gloo::rendezvous::HashStore store;
  std::vector<std::shared_ptr<gloo::Context>> contexts(static_cast<size_t>(size));
  on_threads(size, [&](int r) {
    contexts[static_cast<size_t>(r)] =
        connect_full_mesh(r, size, store, devices[static_cast<size_t>(r)], t, "an in-process HashStore", what);
  });
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < size; ++r) {
    group.push_back(std::make_unique<GlooCommunicator>(make_state(devices[r], contexts[r], options, t)));
  }
  return group;
}

std::unique_ptr<Communicator> connect_gloo(const ProcessGroupOptions& group, const GlooOptions& options) {
  return std::move(join_processes(group, 1, false, options, "connect_gloo").ranks.front());
}

GlooProcessGroup connect_gloo_processes(const ProcessGroupOptions& group, int local_ranks, const GlooOptions& options) {
  return join_processes(group, local_ranks, true, options, "connect_gloo_processes");
}

}  // namespace ingot
