// `ingot launch`: starts N copies of a program on this machine with the torchrun environment
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), waits for them and stops them all when one
// fails -- torch.distributed.run's single-node behaviour. docs/distributed.md ("Processes") is the
// guide. POSIX only.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace ingot::cli {

/// Options of `ingot launch` (each field is the CLI option of the same name).
struct LaunchCommand {
  /// -n / --nproc-per-node (torchrun's name): processes to start, in [1, 1024].
  int64_t nproc_per_node = 1;
  /// --master-addr: the address rank 0 serves the rendezvous store on (MASTER_ADDR); non-empty.
  std::string master_addr = "127.0.0.1";
  /// --master-port: the store's TCP port (MASTER_PORT), in [1, 65535]. Unset: a free port the
  /// launcher picks (binds port 0 on master_addr, reads the port, closes the socket) -- torchrun
  /// defaults to 29500, a free port keeps concurrent runs and tests from clashing.
  std::optional<int64_t> master_port;
  /// --grace: seconds, finite and > 0, that the ranks get to exit after SIGTERM (or the signal
  /// the launcher received) before the survivors are sent SIGKILL.
  double grace = 5.0;
  /// Everything after `--`: the program (looked up on PATH like execvp when it has no '/') and
  /// its arguments, passed verbatim. Non-empty.
  std::vector<std::string> command;
};

/// Checks every option of `command` before anything starts: nproc_per_node in [1, 1024], a
/// non-empty master_addr that resolves (getaddrinfo), master_port in [1, 65535], grace finite and > 0, a non-empty
/// command whose program exists and is executable (searched on PATH, or "/bin:/usr/bin" when PATH is unset, when it has
/// no '/'). Returns the program's path (as found on PATH, or as given). Throws ingot::Error kInvalidArgument naming the
/// option and its value, kNotFound for a program that is not on PATH or does not exist. These are command-line errors
/// (the CLI exits with 2).
std::string check_launch(const LaunchCommand& command);

/// Runs `ingot launch`: checks the options (check_launch), picks the master port if unset, starts
/// the nproc_per_node ranks (fork + execve of the checked program) with the launcher's
/// environment plus RANK = LOCAL_RANK = i, WORLD_SIZE = LOCAL_WORLD_SIZE = nproc_per_node,
/// MASTER_ADDR and MASTER_PORT, and waits for all of them. Children share the launcher's stdin,
/// stdout and stderr. A rank whose exec fails writes "ingot launch: rank i: cannot execute ..."
/// to stderr and exits 127.
///
/// Returns 0 when every rank exits 0. When a rank exits non-zero or is killed by a signal, the
/// others get SIGTERM, then SIGKILL after `grace` seconds; one line naming that first failing
/// rank, its pid and how it ended is written to `err`, and the result is its exit code (128 + s
/// for signal s, as shells report it). SIGINT or SIGTERM sent to the launcher (unless it ignores
/// that signal, SIG_IGN, as a background job of `sh` does SIGINT) is forwarded to the running ranks, followed by the
/// same grace period and SIGKILL (a second one sends SIGKILL at once); the result is then 128 + that signal. Every
/// child is reaped before returning, on every path. The calling thread's signal mask and the SIGCHLD disposition are
/// restored on return; call it while the process has no other threads (they would receive the signals instead).
///
/// Throws ingot::Error: what check_launch throws (nothing started); kInvalidArgument when no free
/// port can be bound on master_addr (an address of another machine); kFailedPrecondition when fork fails (the ranks
/// already started are killed and reaped first).
int run_launch(const LaunchCommand& command, std::ostream& err);

}  // namespace ingot::cli
