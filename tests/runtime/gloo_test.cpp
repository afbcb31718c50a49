// Collectives over Gloo beyond the conformance suite every host-memory communicator passes
// (collective_test.cpp): Gloo's options (reduce_scatter chunks, verify_calls = false, interfaces),
// process-group bootstrap (from_env, connect_gloo) and two processes on loopback (this binary
// re-executes itself as the worker processes).
#include "ingot/runtime/gloo.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ingot/runtime/tcp_store.h"
#include "child_process.h"
#include "collective_checks.h"
#include "test_util.h"

extern char** environ;

namespace ingot {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;
using testing::expect_values;
using testing::Group;
using testing::check_reduce_scatter;
using testing::run_ranks;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// One process, one thread per rank.

TEST(GlooLocal, GroupHasRanksSizeAndBackend) {
  Group g = make_local_gloo_group(4, 10.0);
  ASSERT_EQ(g.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(g[r]->rank(), r);
    EXPECT_EQ(g[r]->size(), 4);
    EXPECT_EQ(g[r]->backend(), "gloo");
    auto* gloo = dynamic_cast<GlooCommunicator*>(g[r].get());
    ASSERT_NE(gloo, nullptr);
    EXPECT_DOUBLE_EQ(gloo->timeout(), 10.0);
  }
}

TEST(GlooLocal, ReduceScatterInSmallChunks) {
  GlooOptions options;
  options.reduce_scatter_chunk_bytes = 96;  // blocks of 15 elements in 2-5 pieces
  Group four = make_local_gloo_group(4, 10.0, options);
  check_reduce_scatter(four, {DType::kF64, DType::kI32});
  Group three = make_local_gloo_group(3, 10.0, options);
  check_reduce_scatter(three, {DType::kF64, DType::kI32});
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(GlooErrors, WithoutVerificationCollectivesStillWork) {
  GlooOptions options;
  options.verify_calls = false;
  Group g = make_local_gloo_group(4, 10.0, options);
  run_ranks(g, [&](int rank, Communicator& c) {
    Array a = Array::from_vector<int64_t>({rank, -rank}, {2});
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{6, -6}));
    Array out = Array::zeros({8}, DType::kI64);
    c.all_gather(a, out);
    EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{6, -6, 6, -6, 6, -6, 6, -6}));
    Array rs = Array::zeros({2}, DType::kI64);
    c.reduce_scatter(out, rs, ReduceOp::kMin);
    EXPECT_EQ(rs.to_vector<int64_t>(), (std::vector<int64_t>{6, -6}));
    Array b = Array::full({1}, rank, DType::kF32);
    c.broadcast(b, 2);
    EXPECT_EQ(b.to_vector<float>()[0], 2.0f);
    c.barrier();
    // Local argument errors are still raised on the calling rank.
    expect_error([&] { c.broadcast(b, 9); }, ErrorCode::kInvalidArgument, {"root 9"});
  });
}

TEST(GlooErrors, GroupCreationArguments) {
  GlooOptions iface;
  iface.interface = "nosuchif0";
  expect_error([&] { make_local_gloo_group(2, 5.0, iface); }, ErrorCode::kInvalidArgument, {"interface 'nosuchif0'"});
  GlooOptions chunk;
  chunk.reduce_scatter_chunk_bytes = 0;
  expect_error([&] { make_local_gloo_group(2, 5.0, chunk); }, ErrorCode::kInvalidArgument,
               {"reduce_scatter_chunk_bytes = 0"});
  GlooOptions lo;
  lo.interface = "lo";  // binding an interface by name works
  Group g = make_local_gloo_group(2, 5.0, lo);
  run_ranks(g, [](int rank, Communicator& c) {
    Array a = Array::full({1}, rank + 1, DType::kI32);
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(a.to_vector<int32_t>()[0], 3);
  });
}

// ---------------------------------------------------------------------------------------------
// Process-group bootstrap.

// Sets (or unsets, for nullopt) environment variables for the scope of a test.
class EnvGuard {
 public:
  void set(const char* name, std::optional<std::string> value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(GlooProcessGroup, FromEnvReadsTorchrunVariables) {
  EnvGuard env;
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "3");
  env.set("MASTER_ADDR", "10.1.2.3");
  env.set("MASTER_PORT", "29511");
  ProcessGroupOptions g = ProcessGroupOptions::from_env();
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.world_size, 3);
  EXPECT_EQ(g.master_addr, "10.1.2.3");
  EXPECT_EQ(g.master_port, 29511);
  EXPECT_EQ(g.timeout, 30.0);
}

TEST(GlooProcessGroup, FromEnvErrorsNameTheVariableAndValue) {
  EnvGuard env;
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  auto expect_env_error = [&](const char* name, std::optional<std::string> value, std::vector<std::string> needles) {
    EnvGuard one;
    one.set(name, value);
    expect_error([] { ProcessGroupOptions::from_env(); }, ErrorCode::kInvalidArgument, needles);
  };
  expect_env_error("RANK", std::nullopt, {"RANK is not set"});
  expect_env_error("RANK", "abc", {"RANK='abc'", "not an integer"});
  expect_env_error("RANK", "1x", {"RANK='1x'"});
  expect_env_error("RANK", "2", {"RANK=2", "[0, WORLD_SIZE=2)"});
  expect_env_error("RANK", "-1", {"RANK=-1"});
  expect_env_error("WORLD_SIZE", std::nullopt, {"WORLD_SIZE is not set"});
  expect_env_error("WORLD_SIZE", "0", {"WORLD_SIZE=0"});
  expect_env_error("MASTER_ADDR", std::nullopt, {"MASTER_ADDR is not set"});
  expect_env_error("MASTER_ADDR", "", {"MASTER_ADDR=''"});
  expect_env_error("MASTER_PORT", "70000", {"MASTER_PORT=70000", "[1, 65535]"});
  expect_env_error("MASTER_PORT", "", {"MASTER_PORT=''"});
}

TEST(GlooProcessGroup, ConnectGlooOptionErrors) {
  ProcessGroupOptions g;
  g.world_size = 2;
  g.rank = 2;
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"rank 2", "[0, world_size=2)"});
  g.rank = 0;
  g.master_port = 0;
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"master_port 0"});
  g.master_port = 29500;
  g.master_addr = "";
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"master_addr is empty"});
  g.master_addr = "127.0.0.1";
  g.timeout = -1;
  expect_error([&] { connect_gloo(g); }, ErrorCode::kInvalidArgument, {"timeout -1"});
}

// Runs connect_gloo for every rank in `ranks` on its own thread (same port); returns each rank's
// communicator or error.
struct Joined {
  std::unique_ptr<Communicator> comm;
  std::optional<Error> error;
};
std::vector<Joined> connect_threads(const std::vector<ProcessGroupOptions>& ranks) {
  std::vector<Joined> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        out[i].comm = connect_gloo(ranks[i]);
      } catch (const Error& e) {
        out[i].error = e;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

ProcessGroupOptions pg(int rank, int world_size, int port, double timeout) {
  ProcessGroupOptions g;
  g.rank = rank;
  g.world_size = world_size;
  g.master_addr = "127.0.0.1";
  g.master_port = port;
  g.timeout = timeout;
  return g;
}

TEST(GlooProcessGroup, ConnectGlooThreeRanksInOneProcess) {
  int port = testing::free_port();
  std::vector<Joined> joined = connect_threads({pg(0, 3, port, 10), pg(1, 3, port, 10), pg(2, 3, port, 10)});
  Group group;
  for (size_t r = 0; r < joined.size(); ++r) {
    ASSERT_FALSE(joined[r].error) << "rank " << r << ": " << joined[r].error->what();
    ASSERT_EQ(joined[r].comm->rank(), static_cast<int>(r));
    ASSERT_EQ(joined[r].comm->size(), 3);
    group.push_back(std::move(joined[r].comm));
  }
  run_ranks(group, [](int rank, Communicator& c) {
    Array a = Array::from_vector<int32_t>({rank, 10 * rank}, {2});
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{3, 30}));
  });
  // The store was stopped once everyone connected: its port is free again.
  TcpStoreServer again("127.0.0.1", port);
  EXPECT_EQ(again.port(), port);
}

TEST(GlooProcessGroup, MissingRankTimesOutNamingAddressAndTimeout) {
  int port = testing::free_port();
  std::string address = "127.0.0.1:" + std::to_string(port);
  auto start = Clock::now();
  // Rank 0 serves the store but rank 1 never comes.
  expect_error([&] { connect_gloo(pg(0, 2, port, 0.5)); }, ErrorCode::kFailedPrecondition,
               {"connect_gloo", "rank 0 of 2", address, "0.5 s"});
  // Rank 1 finds no store.
  expect_error([&] { connect_gloo(pg(1, 2, port, 0.3)); }, ErrorCode::kFailedPrecondition, {address, "0.3 s"});
  EXPECT_LT(Clock::now() - start, 6s);
}

TEST(GlooProcessGroup, WorldSizeMismatchIsAnError) {
  int port = testing::free_port();
  // A timeout far beyond the test: rank 0 learns of the mismatch from rank 1's report, at once.
  const auto start = Clock::now();
  std::vector<Joined> joined = connect_threads({pg(0, 2, port, 20.0), pg(1, 3, port, 20.0)});
  EXPECT_LT(Clock::now() - start, 10s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(joined[r].error) << r;
    EXPECT_EQ(joined[r].error->code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(joined[r].error->what()).find("world_size is 3 on rank 1 but 2 on rank 0"), std::string::npos)
        << joined[r].error->what();
  }
  EXPECT_NE(std::string(joined[0].error->what()).find("rank 1 disagrees with rank 0"), std::string::npos);
}

TEST(GlooProcessGroup, AMissingRankAndAnUnresolvableMasterAreNamed) {
  expect_error([] { connect_gloo(pg(0, 2, testing::free_port(), 0.3)); }, ErrorCode::kFailedPrecondition,
               {"rank 0 of 2 waited for rank 1, which did not join"});
  ProcessGroupOptions bad = pg(1, 2, 29500, 0.3);
  bad.master_addr = "no-such-host.invalid";
  expect_error([&] { connect_gloo(bad); }, ErrorCode::kInvalidArgument, {"MASTER_ADDR", "no-such-host.invalid"});
}

// Two "processes" (threads here) with two ranks each: global ranks 2p and 2p + 1, and a
// one-rank-per-process group beside them.
TEST(GlooProcessGroup, SeveralRanksPerProcess) {
  const int port = testing::free_port();
  std::vector<GlooProcessGroup> groups(2);
  std::vector<std::optional<Error>> errors(2);
  {
    std::vector<std::thread> threads;
    for (int p = 0; p < 2; ++p) {
      threads.emplace_back([&, p] {
        try {
          groups[p] = connect_gloo_processes(pg(p, 2, port, 10.0), 2);
        } catch (const Error& e) {
          errors[p] = e;
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  ASSERT_FALSE(errors[0] || errors[1]) << (errors[0] ? errors[0]->what() : errors[1]->what());
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(groups[p].ranks.size(), 2u);
    EXPECT_EQ(groups[p].process->rank(), p);
    EXPECT_EQ(groups[p].process->size(), 2);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(groups[p].ranks[i]->rank(), 2 * p + i);
      EXPECT_EQ(groups[p].ranks[i]->size(), 4);
    }
  }
  // The 4 device ranks sum their rank + 1; the 2 process ranks broadcast process 1's value.
  std::vector<Array> values(4), process_values(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      values[r] = Array::full({3}, r + 1.0, DType::kF32);
      groups[r / 2].ranks[r % 2]->all_reduce(values[r], ReduceOp::kSum);
    });
  }
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      process_values[p] = Array::full({2}, 10.0 * p, DType::kF64);
      groups[p].process->broadcast(process_values[p], 1);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(values[r].to_vector<float>(), (std::vector<float>{10, 10, 10})) << r;
  for (int p = 0; p < 2; ++p) EXPECT_EQ(process_values[p].to_vector<double>(), (std::vector<double>{10, 10})) << p;
}

TEST(GlooProcessGroup, RanksPerProcessMismatchAndRangeAreErrors) {
  expect_error([] { connect_gloo_processes(pg(0, 1, 1, 1.0), 0); }, ErrorCode::kInvalidArgument,
               {"local_ranks 0 is outside [1, 4096]"});
  const int port = testing::free_port();
  std::vector<std::optional<Error>> errors(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      try {
        connect_gloo_processes(pg(p, 2, port, 1.0), p + 1);
      } catch (const Error& e) {
        errors[p] = e;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int p = 0; p < 2; ++p) {
    ASSERT_TRUE(errors[p]) << p;
    EXPECT_EQ(errors[p]->code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(errors[p]->what()).find("2 ranks per process on rank 1 but 1 on rank 0"), std::string::npos)
        << errors[p]->what();
  }
}

// ---------------------------------------------------------------------------------------------
// Two processes on loopback: this test starts two copies of this binary running
// GlooProcessWorker.RunsCollectives with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set.

constexpr const char* kWorkerFlag = "INGOT_GLOO_TEST_WORKER";

TEST(GlooProcesses, TwoProcessesOnLoopback) {
  const int port = testing::free_port();
  const char* filter = "GlooProcessWorker.RunsCollectives";
  pid_t workers[2] = {testing::spawn_self(filter, testing::rank_env(0, 2, port, kWorkerFlag)),
                      testing::spawn_self(filter, testing::rank_env(1, 2, port, kWorkerFlag))};
  auto deadline = Clock::now() + 60s;
  for (int r = 0; r < 2; ++r) {
    if (workers[r] <= 0) continue;
    EXPECT_EQ(testing::wait_child(workers[r], deadline), 0) << "worker rank " << r << " failed";
  }
}

TEST(GlooProcessWorker, RunsCollectives) {
  if (std::getenv(kWorkerFlag) == nullptr || std::getenv("RANK") == nullptr) {
    GTEST_SKIP() << "worker of GlooProcesses.TwoProcessesOnLoopback: runs only in the processes "
                    "that test starts (RANK and "
                 << kWorkerFlag << " unset)";
  }
  ProcessGroupOptions options = ProcessGroupOptions::from_env();
  options.timeout = 20;
  std::unique_ptr<Communicator> c = connect_gloo(options);
  const int rank = c->rank();
  ASSERT_EQ(rank, options.rank);
  ASSERT_EQ(c->size(), 2);
  const int64_t big = int64_t{1} << 40;
  Array a = Array::from_vector<int64_t>({rank + 1, big * rank, -rank}, {3});
  c->all_reduce(a, ReduceOp::kSum);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{3, big, -1}));
  Array m = Array::from_vector<double>({0.5 + rank, -2.0 * rank}, {2});
  c->all_reduce(m, ReduceOp::kMean);
  expect_values(m, {1.0, -1.0}, 1e-12);
  Array in = Array::from_vector<float>({1.0f * rank, 2.0f * rank + 0.5f}, {1, 2});
  Array gathered = Array::zeros({2, 2}, DType::kF32);
  c->all_gather(in, gathered);
  EXPECT_EQ(gathered.to_vector<float>(), (std::vector<float>{0.0f, 0.5f, 1.0f, 2.5f}));
  Array rs_in = Array::from_vector<int32_t>({rank, 5, -rank, 7 * rank}, {4});
  Array rs_out = Array::zeros({2}, DType::kI32);
  c->reduce_scatter(rs_in, rs_out, ReduceOp::kMax);
  EXPECT_EQ(rs_out.to_vector<int32_t>(), rank == 0 ? (std::vector<int32_t>{1, 5}) : (std::vector<int32_t>{0, 7}));
  Array b = Array::full({3}, 10.0 * rank, DType::kF32);
  c->broadcast(b, 1);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{10, 10, 10}));
  c->barrier();
}

}  // namespace
}  // namespace ingot
