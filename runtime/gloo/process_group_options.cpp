// Joining a process group from a launcher's variables (include/ingot/runtime/cluster.h) and
// ProcessGroupOptions::from_env, which uses them.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

#include "ingot/runtime/cluster.h"
#include "ingot/runtime/error.h"
#include "ingot/runtime/gloo.h"

namespace ingot {

namespace {

constexpr const char* kTorchrunHint =
    "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun sets them), e.g. RANK=0 "
    "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500";
constexpr const char* kSlurmHint = "start the processes with srun (it sets SLURM_PROCID, SLURM_NTASKS, ...)";
constexpr const char* kOmpiHint =
    "start the processes with Open MPI's mpirun (it sets OMPI_COMM_WORLD_RANK, OMPI_MCA_orte_hnp_uri, ...), or set "
    "MASTER_ADDR and MASTER_PORT to rank 0's host and a free port";
constexpr int kMaxWorld = 1 << 20;
/// JAX's coordinator ports for Slurm and Open MPI: 61440 + (job id mod 4096), the top 4096 ports.
constexpr int64_t kPortBase = 65536 - 4096;

/// Reads variables for one launcher; errors name the variable, its value and the launcher's hint.
class Vars {
 public:
  Vars(const EnvLookup& env, const char* hint) : env_(env), hint_(hint) {}

  const char* find(const char* name) const { return env_(name); }

  std::string text(const char* name) const {
    const char* value = env_(name);
    if (value == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("environment variable {} is not set", name), hint_);
    }
    return value;
  }

  int64_t integer(const char* name, int64_t lo, int64_t hi, const std::string& range) const {
    const std::string t = text(name);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (ec != std::errc() || end != t.data() + t.size() || t.empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}='{}' is not an integer", name, t), hint_);
    }
    if (value < lo || value > hi) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}={} is outside {}", name, value, range), hint_);
    }
    return value;
  }

  int integer_or(const char* name, int fallback, int lo, int hi, const std::string& range) const {
    return find(name) == nullptr ? fallback : static_cast<int>(integer(name, lo, hi, range));
  }

  std::string address(const char* name) const {
    std::string a = text(name);
    if (a.empty()) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}='' is empty", name), hint_);
    return a;
  }

  int port(const char* name) const { return static_cast<int>(integer(name, 1, 65535, "[1, 65535]")); }

 private:
  const EnvLookup& env_;
  const char* hint_;
};

/// The rank and world size from `rank_var` and `size_var`.
void read_ranks(const Vars& v, ProcessGroupOptions& g, const char* rank_var, const char* size_var) {
  g.world_size = static_cast<int>(v.integer(size_var, 1, kMaxWorld, "[1, 1048576]"));
  g.rank =
      static_cast<int>(v.integer(rank_var, 0, g.world_size - 1, fmt::format("[0, {}={})", size_var, g.world_size)));
}

void read_local(const Vars& v, ClusterEnvironment& c, const char* rank_var, int size) {
  c.local_world_size = size;
  c.local_rank = v.integer_or(rank_var, 0, 0, size - 1, fmt::format("[0, {}) (processes on this host)", size));
}

/// MASTER_ADDR / MASTER_PORT, when set, override a derived coordinator.
void read_overrides(const Vars& v, ProcessGroupOptions& g) {
  if (v.find("MASTER_ADDR") != nullptr) g.master_addr = v.address("MASTER_ADDR");
  if (v.find("MASTER_PORT") != nullptr) g.master_port = v.port("MASTER_PORT");
}

ClusterEnvironment torchrun(const EnvLookup& env) {
  const Vars v(env, kTorchrunHint);
  ClusterEnvironment c{.launcher = Launcher::kTorchrun};
  read_ranks(v, c.group, "RANK", "WORLD_SIZE");
  c.group.master_addr = v.address("MASTER_ADDR");
  c.group.master_port = v.port("MASTER_PORT");
  const int local_size = v.integer_or("LOCAL_WORLD_SIZE", c.group.world_size, 1, kMaxWorld, "[1, 1048576]");
  c.local_world_size = local_size;
  c.local_rank = v.integer_or("LOCAL_RANK", local_size == c.group.world_size ? c.group.rank : 0, 0, local_size - 1,
                              fmt::format("[0, LOCAL_WORLD_SIZE={})", local_size));
  return c;
}

/// Tasks on node `node` of SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 on nodes 0-2, 1 on node 3).
int slurm_tasks_on_node(const std::string& list, int64_t node) {
  int64_t first = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t comma = list.find(',', pos);
    const std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int64_t tasks = 0, repeat = 1;
    const size_t paren = item.find("(x");
    auto number = [&](std::string_view s, int64_t& out) {
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
      return ec == std::errc() && end == s.data() + s.size() && !s.empty() && out > 0;
    };
    const bool ok = paren == std::string::npos
                        ? number(item, tasks)
                        : number(std::string_view(item).substr(0, paren), tasks) && item.back() == ')' &&
                              number(std::string_view(item).substr(paren + 2, item.size() - paren - 3), repeat);
    if (!ok) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("SLURM_STEP_TASKS_PER_NODE='{}': '{}' is not N or N(xM)", list, item), kSlurmHint);
    }
    if (node < first + repeat) return static_cast<int>(std::min<int64_t>(tasks, kMaxWorld));
    first += repeat;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("SLURM_STEP_TASKS_PER_NODE='{}' names {} nodes, not node SLURM_NODEID={}", list, first, node),
              kSlurmHint);
}

ClusterEnvironment slurm(const EnvLookup& env) {
  const Vars v(env, kSlurmHint);
  ClusterEnvironment c{.launcher = Launcher::kSlurm};
  read_ranks(v, c.group, "SLURM_PROCID", "SLURM_NTASKS");
  int local_size = 1;
  if (v.find("SLURM_STEP_TASKS_PER_NODE") != nullptr) {
    const int64_t node =
        v.find("SLURM_NODEID") == nullptr ? 0 : v.integer("SLURM_NODEID", 0, kMaxWorld, "[0, 1048576]");
    local_size = slurm_tasks_on_node(v.text("SLURM_STEP_TASKS_PER_NODE"), node);
  }
  read_local(v, c, "SLURM_LOCALID", local_size);
  const char* list_var = nullptr;
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (list_var == nullptr && v.find(name) != nullptr) list_var = name;
  }
  if (v.find("MASTER_ADDR") == nullptr) {
    if (list_var == nullptr) {
      throw Error(ErrorCode::kInvalidArgument,
                  "environment variable SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) is not set: no coordinator host",
                  std::string(kSlurmHint) + ", or set MASTER_ADDR");
    }
    c.group.master_addr = slurm_first_host(v.text(list_var));
  }
  if (v.find("MASTER_PORT") == nullptr) {
    c.group.master_port = static_cast<int>(kPortBase + v.integer("SLURM_JOB_ID", 0, INT64_MAX, "[0, 2^63)") % 4096);
  }
  read_overrides(v, c.group);
  return c;
}

ClusterEnvironment open_mpi(const EnvLookup& env) {
  const Vars v(env, kOmpiHint);
  ClusterEnvironment c{.launcher = Launcher::kOpenMpi};
  read_ranks(v, c.group, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  const int local_size = v.integer_or("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1, kMaxWorld, "[1, 1048576]");
  read_local(v, c, "OMPI_COMM_WORLD_LOCAL_RANK", local_size);
  if (v.find("MASTER_ADDR") == nullptr || v.find("MASTER_PORT") == nullptr) {
    // "<job family>.<vpid>;tcp://<addr>[,<addr>...]:<port>[;tcp6://...]"
    const std::string uri = v.text("OMPI_MCA_orte_hnp_uri");
    const size_t dot = uri.find('.'), tcp = uri.find("tcp://");
    int64_t family = 0;
    const auto [end, ec] = std::from_chars(uri.data(), uri.data() + std::min(dot, uri.size()), family);
    if (dot == std::string::npos || ec != std::errc() || end != uri.data() + dot || tcp == std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("OMPI_MCA_orte_hnp_uri='{}' is not '<job>.<rank>;tcp://<address>:<port>'", uri),
                  kOmpiHint);
    }
    const size_t start = tcp + 6;
    const size_t stop = uri.find_first_of(",:;", start);
    c.group.master_addr = uri.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
    if (c.group.master_addr.empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("OMPI_MCA_orte_hnp_uri='{}' has an empty address", uri),
                  kOmpiHint);
    }
    c.group.master_port = static_cast<int>(kPortBase + family % 4096);
  }
  read_overrides(v, c.group);
  return c;
}

}  // namespace

std::string_view launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kTorchrun:
      return "torchrun";
    case Launcher::kSlurm:
      return "slurm";
    case Launcher::kOpenMpi:
      return "openmpi";
  }
  return "unknown";
}

std::optional<Launcher> detect_launcher(const EnvLookup& env) {
  if (env("RANK") != nullptr || env("WORLD_SIZE") != nullptr) return Launcher::kTorchrun;
  if (env("SLURM_PROCID") != nullptr) return Launcher::kSlurm;
  if (env("OMPI_COMM_WORLD_RANK") != nullptr) return Launcher::kOpenMpi;
  return std::nullopt;
}

ClusterEnvironment detect_cluster(const EnvLookup& env) {
  const std::optional<Launcher> launcher = detect_launcher(env);
  if (!launcher) {
    throw Error(ErrorCode::kInvalidArgument,
                "no launcher's variables are set: RANK and WORLD_SIZE (torchrun, ingot launch), SLURM_PROCID (srun) "
                "and OMPI_COMM_WORLD_RANK (mpirun) are all unset; environment variable RANK is not set",
                std::string(kTorchrunHint) + "; or start the processes with ingot launch, srun or mpirun");
  }
  try {
    switch (*launcher) {
      case Launcher::kTorchrun:
        return torchrun(env);
      case Launcher::kSlurm:
        return slurm(env);
      case Launcher::kOpenMpi:
        return open_mpi(env);
    }
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{} variables", launcher_name(*launcher)));
  }
  throw Error(ErrorCode::kInternal, "detect_cluster: unknown launcher");
}

ClusterEnvironment cluster_from_env() {
  return detect_cluster([](const char* name) -> const char* { return std::getenv(name); });
}

std::string slurm_first_host(std::string_view list) {
  auto bad = [&](const char* why) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("Slurm node list '{}': {}", list, why),
                 "pass a hostlist as Slurm writes it, e.g. node[001-004],login1");
  };
  // The first top-level entry: up to a ',' outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < list.size(); ++end) {
    if (list[end] == '[') ++depth;
    if (list[end] == ']') --depth;
    if (list[end] == ',' && depth == 0) break;
  }
  const std::string_view entry = list.substr(0, end);
  if (entry.empty()) throw bad("it is empty");
  const size_t open = entry.find('[');
  if (open == std::string_view::npos) return std::string(entry);
  const size_t close = entry.find(']', open);
  if (close == std::string_view::npos) throw bad("a '[' is not closed");
  const std::string_view ranges = entry.substr(open + 1, close - open - 1);
  const std::string_view first = ranges.substr(0, std::min(ranges.find_first_of(",-"), ranges.size()));
  if (first.empty()) throw bad("a bracketed range is empty");
  return std::string(entry.substr(0, open)) + std::string(first) + std::string(entry.substr(close + 1));
}

ProcessGroupOptions ProcessGroupOptions::from_env() {
  try {
    return cluster_from_env().group;
  } catch (const Error& e) {
    throw e.with_context("ProcessGroupOptions::from_env");
  }
}

}  // namespace ingot
