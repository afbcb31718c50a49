// Joining a process group from torchrun's, Slurm's and Open MPI's variables
// (include/ingot/runtime/cluster.h): the parsing against maps of variables, and two processes on
// loopback that meet with only Slurm's or only Open MPI's variables set.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "child_process.h"
#include "ingot/runtime/cluster.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

/// A fake environment.
struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

ClusterEnvironment detect(const Env& e) { return detect_cluster(e.lookup()); }

TEST(Cluster, TorchrunVariablesWithAndWithoutTheLocalOnes) {
  Env e{{{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}};
  ClusterEnvironment c = detect(e);
  EXPECT_EQ(c.launcher, Launcher::kTorchrun);
  EXPECT_EQ(c.group.rank, 3);
  EXPECT_EQ(c.group.world_size, 4);
  EXPECT_EQ(c.group.master_addr, "10.0.0.1");
  EXPECT_EQ(c.group.master_port, 29500);
  EXPECT_EQ(c.local_rank, 3);  // one host: the local rank is the rank
  EXPECT_EQ(c.local_world_size, 4);
  e.vars["LOCAL_RANK"] = "1";
  e.vars["LOCAL_WORLD_SIZE"] = "2";
  c = detect(e);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);
  e.vars["LOCAL_RANK"] = "2";
  expect_error([&] { detect(e); }, ErrorCode::kInvalidArgument,
               {"torchrun variables", "LOCAL_RANK=2", "[0, LOCAL_WORLD_SIZE=2)"});
}

TEST(Cluster, SlurmVariablesAsSrunSetsThem) {
  Env e{{{"SLURM_PROCID", "5"},
         {"SLURM_NTASKS", "8"},
         {"SLURM_LOCALID", "1"},
         {"SLURM_NODEID", "2"},
         {"SLURM_STEP_TASKS_PER_NODE", "2(x3),2"},
         {"SLURM_STEP_NODELIST", "gpu[007-010]"},
         {"SLURM_JOB_NODELIST", "other[1-4]"},
         {"SLURM_JOB_ID", "1234567"}}};
  ClusterEnvironment c = detect(e);
  EXPECT_EQ(c.launcher, Launcher::kSlurm);
  EXPECT_EQ(c.group.rank, 5);
  EXPECT_EQ(c.group.world_size, 8);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);
  EXPECT_EQ(c.group.master_addr, "gpu007");  // the step's first node, not the job's
  EXPECT_EQ(c.group.master_port, 61440 + 1234567 % 4096);
  e.vars.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(detect(e).group.master_addr, "other1");
  e.vars["MASTER_ADDR"] = "10.1.1.1";
  e.vars["MASTER_PORT"] = "29400";
  c = detect(e);
  EXPECT_EQ(c.group.master_addr, "10.1.1.1");
  EXPECT_EQ(c.group.master_port, 29400);
  EXPECT_EQ(c.launcher, Launcher::kSlurm);  // MASTER_* alone do not make it torchrun
}

TEST(Cluster, SlurmErrorsNameTheVariable) {
  const Env base{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n1"}, {"SLURM_JOB_ID", "7"}}};
  auto with = [&](const std::string& name, const std::string& value) {
    Env e = base;
    e.vars[name] = value;
    return e;
  };
  auto without = [&](const std::string& name) {
    Env e = base;
    e.vars.erase(name);
    return e;
  };
  expect_error([&] { detect(with("SLURM_PROCID", "2")); }, ErrorCode::kInvalidArgument,
               {"slurm variables", "SLURM_PROCID=2", "[0, SLURM_NTASKS=2)"});
  expect_error([&] { detect(without("SLURM_NTASKS")); }, ErrorCode::kInvalidArgument,
               {"SLURM_NTASKS is not set", "srun"});
  expect_error([&] { detect(without("SLURM_JOB_ID")); }, ErrorCode::kInvalidArgument, {"SLURM_JOB_ID is not set"});
  expect_error([&] { detect(without("SLURM_JOB_NODELIST")); }, ErrorCode::kInvalidArgument,
               {"SLURM_STEP_NODELIST", "MASTER_ADDR"});
  expect_error([&] { detect(with("SLURM_JOB_NODELIST", "n[1-")); }, ErrorCode::kInvalidArgument,
               {"'n[1-'", "not closed"});
  expect_error([&] { detect(with("SLURM_STEP_TASKS_PER_NODE", "2(x")); }, ErrorCode::kInvalidArgument,
               {"SLURM_STEP_TASKS_PER_NODE='2(x'"});
  Env far = with("SLURM_STEP_TASKS_PER_NODE", "1(x2)");
  far.vars["SLURM_NODEID"] = "2";
  expect_error([&] { detect(far); }, ErrorCode::kInvalidArgument, {"names 2 nodes", "SLURM_NODEID=2"});
  Env local = with("SLURM_STEP_TASKS_PER_NODE", "2");
  local.vars["SLURM_LOCALID"] = "2";
  expect_error([&] { detect(local); }, ErrorCode::kInvalidArgument, {"SLURM_LOCALID=2", "[0, 2)"});
}

TEST(Cluster, SlurmHostLists) {
  EXPECT_EQ(slurm_first_host("node[001-004,010],login2"), "node001");
  EXPECT_EQ(slurm_first_host("gpu-a,gpu-b"), "gpu-a");
  EXPECT_EQ(slurm_first_host("n[3,1]-ib"), "n3-ib");
  EXPECT_EQ(slurm_first_host("localhost"), "localhost");
  expect_error([] { slurm_first_host(""); }, ErrorCode::kInvalidArgument, {"empty"});
  expect_error([] { slurm_first_host("n[]"); }, ErrorCode::kInvalidArgument, {"range is empty"});
}

TEST(Cluster, OpenMpiVariablesAsMpirunSetsThem) {
  Env e{{{"OMPI_COMM_WORLD_RANK", "2"},
         {"OMPI_COMM_WORLD_SIZE", "4"},
         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
         {"OMPI_MCA_orte_hnp_uri", "3197894656.0;tcp://10.0.0.5,172.17.0.1:41219"}}};
  ClusterEnvironment c = detect(e);
  EXPECT_EQ(c.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(c.group.rank, 2);
  EXPECT_EQ(c.group.world_size, 4);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.local_world_size, 2);
  EXPECT_EQ(c.group.master_addr, "10.0.0.5");
  EXPECT_EQ(c.group.master_port, 61440 + static_cast<int>(3197894656LL % 4096));
  e.vars["OMPI_MCA_orte_hnp_uri"] = "12.0;tcp6://[::1]:5";
  expect_error([&] { detect(e); }, ErrorCode::kInvalidArgument,
               {"openmpi variables", "OMPI_MCA_orte_hnp_uri='12.0;tcp6"});
  e.vars.erase("OMPI_MCA_orte_hnp_uri");
  expect_error([&] { detect(e); }, ErrorCode::kInvalidArgument, {"OMPI_MCA_orte_hnp_uri is not set", "MASTER_ADDR"});
  e.vars["MASTER_ADDR"] = "127.0.0.1";
  e.vars["MASTER_PORT"] = "29600";
  EXPECT_EQ(detect(e).group.master_port, 29600);
}

TEST(Cluster, TorchrunComesFirstAndNoLauncherIsAnError) {
  Env e{{{"SLURM_PROCID", "0"}, {"OMPI_COMM_WORLD_RANK", "0"}}};
  EXPECT_EQ(detect_launcher(e.lookup()), Launcher::kSlurm);
  e.vars["WORLD_SIZE"] = "1";
  EXPECT_EQ(detect_launcher(e.lookup()), Launcher::kTorchrun);
  EXPECT_EQ(detect_launcher(Env{}.lookup()), std::nullopt);
  expect_error([] { detect(Env{}); }, ErrorCode::kInvalidArgument, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"});
  EXPECT_EQ(launcher_name(Launcher::kOpenMpi), "openmpi");
}

// ---------------------------------------------------------------------------------------------
// Two processes on loopback that join with one launcher's variables only.

constexpr const char* kClusterWorkerFlag = "INGOT_CLUSTER_TEST_WORKER";

/// A free loopback port in Slurm's / Open MPI's derived range [61440, 65535], or 0.
int free_derived_port() {
  for (int port = 61440 + static_cast<int>(::getpid() % 4096), tries = 0; tries < 4096; ++tries) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (ok) return port;
    port = port == 65535 ? 61440 : port + 1;
  }
  return 0;
}

/// Our environment without any launcher's variables, plus `vars` and the worker flag.
std::vector<std::string> launcher_env(const std::vector<std::string>& vars) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool drop = entry.rfind("GTEST_OUTPUT=", 0) == 0 || entry.rfind(kClusterWorkerFlag, 0) == 0;
    for (const char* prefix : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
                               "MASTER_PORT=", "SLURM_", "OMPI_"}) {
      drop |= entry.rfind(prefix, 0) == 0;
    }
    if (!drop) env.push_back(entry);
  }
  env.insert(env.end(), vars.begin(), vars.end());
  env.push_back(std::string(kClusterWorkerFlag) + "=1");
  return env;
}

void run_pair(const std::vector<std::vector<std::string>>& per_rank) {
  const char* filter = "ClusterWorker.JoinsAndAllReduces";
  std::vector<pid_t> workers;
  for (const auto& vars : per_rank) workers.push_back(testing::spawn_self(filter, launcher_env(vars)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t r = 0; r < workers.size(); ++r) {
    if (workers[r] > 0) EXPECT_EQ(testing::wait_child(workers[r], deadline), 0) << "worker " << r << " failed";
  }
}

TEST(ClusterProcesses, TwoSrunTasksMeetOnTheFirstNode) {
  const int port = free_derived_port();
  ASSERT_NE(port, 0) << "no free port in [61440, 65535]";
  const std::string job = "SLURM_JOB_ID=" + std::to_string(4096 * 7 + (port - 61440));
  std::vector<std::vector<std::string>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back({"SLURM_PROCID=" + std::to_string(r), "SLURM_NTASKS=2", "SLURM_LOCALID=" + std::to_string(r),
                     "SLURM_NODEID=0", "SLURM_STEP_TASKS_PER_NODE=2", "SLURM_STEP_NODELIST=localhost", job});
  }
  run_pair(ranks);
}

TEST(ClusterProcesses, TwoMpirunRanksMeetAtTheHnpHost) {
  const int port = free_derived_port();
  ASSERT_NE(port, 0) << "no free port in [61440, 65535]";
  const std::string uri =
      "OMPI_MCA_orte_hnp_uri=" + std::to_string(4096 * 3 + (port - 61440)) + ".0;tcp://127.0.0.1,10.255.0.1:1024";
  std::vector<std::vector<std::string>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back({"OMPI_COMM_WORLD_RANK=" + std::to_string(r), "OMPI_COMM_WORLD_SIZE=2",
                     "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(r), "OMPI_COMM_WORLD_LOCAL_SIZE=2", uri});
  }
  run_pair(ranks);
}

TEST(ClusterWorker, JoinsAndAllReduces) {
  if (std::getenv(kClusterWorkerFlag) == nullptr) {
    GTEST_SKIP() << "worker of ClusterProcesses.*: runs only in the processes those tests start (" << kClusterWorkerFlag
                 << " unset)";
  }
  const ClusterEnvironment c = cluster_from_env();
  ASSERT_NE(c.launcher, Launcher::kTorchrun);
  EXPECT_EQ(c.local_rank, c.group.rank);
  EXPECT_EQ(c.local_world_size, 2);
  ProcessGroupOptions options = ProcessGroupOptions::from_env();
  options.timeout = 20;
  std::unique_ptr<Communicator> comm = connect_gloo(options);
  ASSERT_EQ(comm->size(), 2);
  Array a = Array::from_vector<int32_t>({comm->rank() + 1}, {1});
  comm->all_reduce(a, ReduceOp::kSum);
  EXPECT_EQ(a.to_vector<int32_t>(), std::vector<int32_t>{3});
}

}  // namespace
}  // namespace ingot
