// Tests that run copies of their own binary as torchrun-style ranks: a free loopback port for the
// rendezvous, spawning "/proc/self/exe --gtest_filter=<worker test>" with RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT and a worker flag set, and waiting for it with a deadline. The worker
// test skips (with that reason) unless its flag is set, so a plain run of the suite skips it.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace ingot::testing {

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read, closed).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// The environment of rank `rank`: ours without the rendezvous variables, gtest's output setting
/// and `flag`, plus RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, `flag`=1 and `extra`
/// ("NAME=value" entries).
inline std::vector<std::string> rank_env(int rank, int world_size, int port, const std::string& flag,
                                         const std::vector<std::string>& extra = {}) {
  std::vector<std::string> env;
  const std::vector<std::string> drop = {
      "RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=", "GTEST_OUTPUT=", flag + "="};
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    bool dropped = false;
    for (const std::string& prefix : drop) dropped |= entry.rfind(prefix, 0) == 0;
    if (!dropped) env.push_back(entry);
  }
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(world_size));
  env.push_back("MASTER_ADDR=127.0.0.1");
  env.push_back("MASTER_PORT=" + std::to_string(port));
  env.push_back(flag + "=1");
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

/// Starts this test binary running only `gtest_filter` with environment `env`; -1 on failure
/// (recorded as a test failure).
inline pid_t spawn_self(const std::string& gtest_filter, std::vector<std::string> env) {
  std::vector<std::string> args = {"/proc/self/exe", "--gtest_filter=" + gtest_filter, "--gtest_brief=1"};
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  for (std::string& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
  EXPECT_EQ(rc, 0) << "posix_spawn failed: " << std::strerror(rc);
  return rc == 0 ? pid : -1;
}

/// Waits for `pid` until `deadline` (then kills it, a test failure); returns its exit status, -1
/// if it did not exit normally.
inline int wait_child(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "child " << pid << " did not finish in time";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Starts `world_size` copies of this binary running only `worker_filter` as ranks 0 ..
/// world_size - 1 (rank_env with `flag` and a free port) and expects each to exit 0 within
/// `seconds` (a failure names the rank).
inline void run_worker_ranks(const std::string& worker_filter, const std::string& flag, int world_size, int seconds) {
  const int port = free_port();
  std::vector<pid_t> workers;
  for (int r = 0; r < world_size; ++r)
    workers.push_back(spawn_self(worker_filter, rank_env(r, world_size, port, flag)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (int r = 0; r < world_size; ++r) {
    if (workers[static_cast<size_t>(r)] <= 0) continue;
    EXPECT_EQ(wait_child(workers[static_cast<size_t>(r)], deadline), 0) << "worker rank " << r << " failed";
  }
}

}  // namespace ingot::testing
