#include "launch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <string_view>
#include <utility>

#include "ingot/runtime/error.h"

extern char** environ;  // POSIX: the process environment, passed on to the ranks

namespace ingot::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxProcesses = 1024;

Error bad_option(const std::string& message, const std::string& hint = {}) {
  return Error(ErrorCode::kInvalidArgument, message, hint);
}

// ---- checking the options ------------------------------------------------------------------------

/// Why `path` cannot be executed ("" when it can): missing, a directory, not executable.
std::string not_executable_reason(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (::access(path.c_str(), X_OK) != 0) return "it is not executable";
  return {};
}

/// `name` (no '/') searched on PATH as execvp does: the first executable regular file.
std::string find_on_path(const std::string& name) {
  const char* env_path = std::getenv("PATH");
  const std::string path = env_path != nullptr ? env_path : "/bin:/usr/bin";
  std::string first_unusable;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end == begin ? "." : path.substr(begin, end - begin);  // "" means "."
    const std::string candidate = dir + "/" + name;
    const std::string why = not_executable_reason(candidate);
    if (why.empty()) return candidate;
    if (first_unusable.empty() && ::access(candidate.c_str(), F_OK) == 0) first_unusable = candidate + ": " + why;
    begin = end + 1;
  }
  if (!first_unusable.empty()) {
    throw bad_option(fmt::format("program '{}' cannot be run: {}", name, first_unusable),
                     "make it executable (chmod +x) or give the path of another program");
  }
  throw Error(ErrorCode::kNotFound, fmt::format("program '{}' not found on PATH '{}'", name, path),
              "give its path (./prog) or add its directory to PATH");
}

/// The path to exec for the program `name`: itself when it has a '/', else found on PATH.
std::string resolve_program(const std::string& name) {
  if (name.empty()) throw bad_option("the program after '--' is an empty string", "name a program");
  if (name.find('/') == std::string::npos) return find_on_path(name);
  const std::string why = not_executable_reason(name);
  if (why.empty()) return name;
  throw Error(::access(name.c_str(), F_OK) == 0 ? ErrorCode::kInvalidArgument : ErrorCode::kNotFound,
              fmt::format("program '{}' cannot be run: {}", name, why), "give the path of an executable file");
}

/// The TCP addresses of `addr` (getaddrinfo, port 0); kInvalidArgument naming --master-addr when
/// it cannot be resolved.
std::unique_ptr<addrinfo, void (*)(addrinfo*)> resolve_master_addr(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(addr.c_str(), "0", &hints, &found); rc != 0) {
    throw bad_option(fmt::format("--master-addr '{}' cannot be resolved: {}", addr, ::gai_strerror(rc)),
                     "use an address of this machine such as 127.0.0.1");
  }
  return {found, ::freeaddrinfo};
}

}  // namespace

std::string check_launch(const LaunchCommand& c) {
  if (c.nproc_per_node < 1 || c.nproc_per_node > kMaxProcesses) {
    throw bad_option(fmt::format("-n/--nproc-per-node must be in [1, {}], got {}", kMaxProcesses, c.nproc_per_node),
                     "start between 1 and 1024 processes");
  }
  if (c.master_addr.empty()) throw bad_option("--master-addr is empty", "use 127.0.0.1 (the default)");
  resolve_master_addr(c.master_addr);
  if (c.master_port && (*c.master_port < 1 || *c.master_port > 65535)) {
    throw bad_option(fmt::format("--master-port must be in [1, 65535], got {}", *c.master_port),
                     "leave it out to use a free port");
  }
  if (!std::isfinite(c.grace) || c.grace <= 0) {
    throw bad_option(fmt::format("--grace must be a finite number of seconds > 0, got {}", c.grace));
  }
  if (c.command.empty()) {
    throw bad_option("no program to launch", "put it after '--': ingot launch -n 2 -- PROGRAM [ARGS...]");
  }
  return resolve_program(c.command[0]);
}

namespace {

// ---- the master port -----------------------------------------------------------------------------

/// A TCP port that is free on `addr` now: binds port 0, reads the port the kernel chose, closes.
/// (Another process may take it before rank 0 binds it; the window is short.)
int64_t pick_free_port(const std::string& addr) {
  const auto found = resolve_master_addr(addr);
  std::string last_error = "no address";
  for (const addrinfo* a = found.get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    int64_t port = 0;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      last_error = std::strerror(errno);
    }
    ::close(fd);
    if (port > 0) return port;
  }
  throw bad_option(fmt::format("no free port can be bound on --master-addr '{}': {}", addr, last_error),
                   "use an address of this machine, or pass --master-port");
}

// ---- signals -------------------------------------------------------------------------------------

/// While alive: SIGCHLD, SIGINT and SIGTERM are blocked in the calling thread (the launcher takes
/// them with sigtimedwait, so no handler and no global state are needed) and SIGCHLD has its
/// default disposition (an inherited SIG_IGN would make the kernel reap the ranks itself).
/// Restores both on destruction. The children get `original_mask()` back before exec. SIGINT or
/// SIGTERM that the launcher ignores (SIG_IGN, e.g. SIGINT of a background job of `sh`) stays
/// ignored: it is neither taken nor forwarded (the ranks inherit SIG_IGN).
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGCHLD);
    for (int s : {SIGINT, SIGTERM}) {
      struct sigaction current{};
      if (::sigaction(s, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) sigaddset(&set_, s);
    }
    ::pthread_sigmask(SIG_BLOCK, &set_, &original_mask_);
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGCHLD, &dfl, &original_chld_);
  }
  ~BlockedSignals() {
    ::sigaction(SIGCHLD, &original_chld_, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
  }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  const sigset_t& set() const { return set_; }
  const sigset_t& original_mask() const { return original_mask_; }

  /// The next of the blocked signals; 0 when `deadline` passes first (no deadline: waits).
  int wait(std::optional<Clock::time_point> deadline) const {
    for (;;) {
      int sig = 0;
      if (!deadline) {
        sig = ::sigwaitinfo(&set_, nullptr);
      } else {
        const auto left = std::max(*deadline - Clock::now(), Clock::duration::zero());
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
        sig = ::sigtimedwait(&set_, nullptr, &ts);
        if (sig < 0 && errno == EAGAIN) return 0;
      }
      if (sig > 0) return sig;
      // EINTR (another signal's handler ran): wait again.
    }
  }

 private:
  sigset_t set_{};
  sigset_t original_mask_{};
  struct sigaction original_chld_{};
};

/// "SIGKILL" for 9, "signal 77" for a number without a name.
std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// ---- the ranks -----------------------------------------------------------------------------------

/// One started rank.
struct Rank {
  int64_t rank = 0;
  pid_t pid = -1;
  bool running = true;
  int status = 0;  ///< waitpid status once reaped
};

/// The environment of rank `rank`: the launcher's minus the torchrun variables, plus their values.
std::vector<std::string> rank_environment(const LaunchCommand& c, int64_t rank, int64_t port) {
  static constexpr std::string_view kSet[] = {
      "RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT="};
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool replaced = false;
    for (std::string_view prefix : kSet) replaced = replaced || entry.substr(0, prefix.size()) == prefix;
    if (!replaced) env.emplace_back(entry);
  }
  const int64_t n = c.nproc_per_node;
  for (const auto& [name, value] : {std::pair<const char*, std::string>{"RANK", std::to_string(rank)},
                                    {"LOCAL_RANK", std::to_string(rank)},
                                    {"WORLD_SIZE", std::to_string(n)},
                                    {"LOCAL_WORLD_SIZE", std::to_string(n)},
                                    {"MASTER_ADDR", c.master_addr},
                                    {"MASTER_PORT", std::to_string(port)}}) {
    env.push_back(fmt::format("{}={}", name, value));
  }
  return env;
}

/// Null-terminated char* view of `strings` (which must outlive it).
std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// In the child after fork: restore the signal mask, exec; on failure report and exit 127 (only
/// async-signal-safe calls besides strerror, which reads a constant table).
[[noreturn]] void exec_child(const std::string& program, char* const* argv, char* const* envp, const sigset_t& mask,
                             const std::string& failure_prefix) {
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  ::execve(program.c_str(), argv, envp);
  const char* why = std::strerror(errno);
  [[maybe_unused]] ssize_t w = ::write(STDERR_FILENO, failure_prefix.data(), failure_prefix.size());
  w = ::write(STDERR_FILENO, why, std::strlen(why));
  w = ::write(STDERR_FILENO, "\n", 1);
  ::_exit(127);
}

/// Starts rank `rank`; throws kFailedPrecondition when fork fails.
Rank spawn_rank(const LaunchCommand& c, const std::string& program, int64_t rank, int64_t port,
                const BlockedSignals& signals) {
  std::vector<std::string> args = c.command;
  std::vector<std::string> env = rank_environment(c, rank, port);
  const std::vector<char*> argv = c_strings(args);
  const std::vector<char*> envp = c_strings(env);
  const std::string failure_prefix = fmt::format("ingot launch: rank {}: cannot execute '{}': ", rank, program);
  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(program, argv.data(), envp.data(), signals.original_mask(), failure_prefix);
  if (pid < 0) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("cannot start rank {}: fork failed: {}", rank, std::strerror(errno)),
                "start fewer processes (-n) or free memory and process slots");
  }
  return Rank{.rank = rank, .pid = pid};
}

/// Reaps every rank that has ended (non-blocking). Returns the index of the first one found that
/// failed (non-zero exit or a signal), or -1.
int64_t reap_ended(std::vector<Rank>& ranks) {
  int64_t failed = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    Rank& r = ranks[i];
    if (!r.running) continue;
    pid_t got = 0;
    do {
      got = ::waitpid(r.pid, &r.status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got == 0) continue;
    r.running = false;
    if (got < 0) r.status = 0;  // ECHILD: reaped by someone else; nothing to report
    const bool ok = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
    if (!ok && failed < 0) failed = static_cast<int64_t>(i);
  }
  return failed;
}

int64_t count_running(const std::vector<Rank>& ranks) {
  int64_t n = 0;
  for (const Rank& r : ranks) n += r.running ? 1 : 0;
  return n;
}

void signal_running(const std::vector<Rank>& ranks, int sig) {
  for (const Rank& r : ranks) {
    if (r.running) ::kill(r.pid, sig);
  }
}

/// Sends `sig` to the running ranks, waits up to `grace` seconds for them to end (a SIGINT or
/// SIGTERM arriving meanwhile cuts the wait short), then SIGKILLs and reaps the survivors.
void terminate_all(std::vector<Rank>& ranks, int sig, double grace, const BlockedSignals& signals) {
  signal_running(ranks, sig);
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace));
  while (count_running(ranks) > 0) {
    const int got = signals.wait(deadline);
    if (got == 0 || got == SIGINT || got == SIGTERM) break;
    reap_ended(ranks);
  }
  signal_running(ranks, SIGKILL);
  for (Rank& r : ranks) {
    if (!r.running) continue;
    while (::waitpid(r.pid, &r.status, 0) < 0 && errno == EINTR) {
    }
    r.running = false;
  }
}

/// The exit code a shell reports for `status`: the exit code, or 128 + the signal.
int shell_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) {
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), signal_name(WTERMSIG(status)));
  }
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

/// Starts all ranks; when a fork fails, kills and reaps the ones started and rethrows.
std::vector<Rank> spawn_all(const LaunchCommand& c, const std::string& program, int64_t port,
                            const BlockedSignals& signals) {
  std::vector<Rank> ranks;
  ranks.reserve(static_cast<size_t>(c.nproc_per_node));
  try {
    for (int64_t i = 0; i < c.nproc_per_node; ++i) ranks.push_back(spawn_rank(c, program, i, port, signals));
  } catch (...) {
    terminate_all(ranks, SIGKILL, 1e-3, signals);
    throw;
  }
  return ranks;
}

/// Waits for every rank; see run_launch for the failure and signal handling.
int wait_all(std::vector<Rank>& ranks, double grace, const BlockedSignals& signals, std::ostream& err) {
  while (count_running(ranks) > 0) {
    const int sig = signals.wait(std::nullopt);
    if (sig == SIGINT || sig == SIGTERM) {
      err << fmt::format("ingot launch: received {}; forwarding it to the {} running rank(s)\n", signal_name(sig),
                         count_running(ranks))
          << std::flush;
      terminate_all(ranks, sig, grace, signals);
      return 128 + sig;
    }
    const int64_t failed = reap_ended(ranks);
    if (failed >= 0) {
      const Rank& r = ranks[static_cast<size_t>(failed)];
      const int64_t others = count_running(ranks);
      err << fmt::format("ingot launch: rank {} (pid {}) {}; stopping the other {} running rank(s)\n", r.rank, r.pid,
                         how_it_ended(r.status), others)
          << std::flush;
      const int code = shell_code(r.status);
      terminate_all(ranks, SIGTERM, grace, signals);
      return code;
    }
  }
  return 0;
}

}  // namespace

int run_launch(const LaunchCommand& c, std::ostream& err) {
  const std::string program = check_launch(c);
  const int64_t port = c.master_port ? *c.master_port : pick_free_port(c.master_addr);
  const BlockedSignals signals;
  std::vector<Rank> ranks = spawn_all(c, program, port, signals);
  try {
    return wait_all(ranks, c.grace, signals, err);
  } catch (...) {  // e.g. bad_alloc while formatting the report: leave no rank behind
    terminate_all(ranks, SIGKILL, 1e-3, signals);
    throw;
  }
}

}  // namespace ingot::cli
