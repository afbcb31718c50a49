// Collectives over Gloo (Facebook's collective communications library, Debian libgloo) between
// host-memory arrays: ranks in one process (make_local_gloo_group, one thread per rank) or in
// several processes (connect_gloo, bootstrapped torchrun-style through a TcpStore served by
// rank 0). Transport: Gloo's TCP transport (loopback by default).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/runtime/communicator.h"

namespace ingot {

/// Options of the Gloo transport and of the communicators built on it.
struct GlooOptions {
  /// Address (IP literal or host name) Gloo's TCP transport binds and advertises to peers.
  /// Empty: "127.0.0.1" for make_local_gloo_group; for connect_gloo, MASTER_ADDR when it is a
  /// loopback address (127.x.x.x, ::1, localhost), else Gloo's default (this machine's host
  /// name).
  std::string hostname;
  /// Network interface to bind instead of `hostname` (e.g. "lo", "eth0"); empty: use hostname.
  std::string interface;
  /// Before every collective, the ranks exchange a 128-byte description of their call (which
  /// collective, op, dtype, shape, root, whether its arguments passed the local checks) and
  /// every rank throws the same ingot::Error if they disagree, instead of exchanging mismatched
  /// buffers. Costs one small all-gather (one round of latency) per call. Must be the same on
  /// every rank. When false the caller guarantees matching calls: a rank whose local checks
  /// fail throws at once (its peers then time out), and mismatched sizes reach Gloo, whose TCP
  /// transport terminates the process on them (an assertion in its event-loop thread that no
  /// caller can catch).
  bool verify_calls = true;
  /// reduce_scatter reduces its input in pieces of at most this many bytes (over all ranks'
  /// blocks), bounding its scratch memory. >= 1; larger values are capped at 2^31 - 1 (Gloo's
  /// halving-doubling reduce-scatter counts bytes in int).
  int64_t reduce_scatter_chunk_bytes = int64_t{64} << 20;
};

/// Where and how to bootstrap a process group (the torchrun environment, see from_env).
struct ProcessGroupOptions {
  int rank = 0;                           ///< this process's rank, in [0, world_size)
  int world_size = 1;                     ///< number of processes, >= 1
  std::string master_addr = "127.0.0.1";  ///< address rank 0 serves the TcpStore on
  int master_port = 29500;                ///< port of that store, in [1, 65535]
  double timeout = 30.0;                  ///< seconds, > 0: store, connection and every collective

  /// The group of the launcher that started this process (cluster_from_env in
  /// ingot/runtime/cluster.h): RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the names torchrun
  /// and `ingot launch` set), else Slurm's srun variables, else Open MPI's mpirun variables; the
  /// timeout keeps its default. Only called explicitly: nothing in ingot reads these variables
  /// implicitly. Errors: ingot::Error kInvalidArgument naming the variable and its value when
  /// one is missing, not an integer, or out of range (RANK outside [0, WORLD_SIZE),
  /// WORLD_SIZE < 1, MASTER_PORT outside [1, 65535], MASTER_ADDR empty), and detect_cluster's.
  static ProcessGroupOptions from_env();
};

/// One rank of a Gloo process group: the Communicator for host-memory arrays (CPU devices).
///
/// all_reduce / reduce_scatter: f32, f64, i32, i64 (others: kInvalidArgument naming the dtype).
/// Sums of integers wrap around (two's complement); kMean divides the sum by size() (integers:
/// truncation toward zero); kMax / kMin of floats propagate NaN. Float sums may differ from a
/// sequential sum in the last bits (Gloo's ring order) but are identical on every rank.
/// all_gather / broadcast: any dtype (the bytes are moved unchanged).
/// Arrays must live on a CPU device (kInvalidArgument naming the device otherwise); `in` and
/// `out` must not share a buffer (kInvalidArgument). Size-0 arrays are valid and exchange
/// nothing.
///
/// Errors beyond the Communicator contract: kFailedPrecondition when Gloo fails (a peer exited,
/// the timeout passed, ...), naming the collective, the rank and the timeout; the communicator
/// is then broken and every later call throws kFailedPrecondition (create a new group).
/// Argument errors detected before any data moved leave it usable.
///
/// Algorithms (Gloo's): all_reduce ring; all_gather ring; broadcast binomial tree; barrier
/// all-to-one; reduce_scatter recursive halving (ReduceScatterHalvingDoubling) when size() is a
/// power of two, else a ring all-reduce of which each rank keeps its block (Gloo's
/// halving-doubling may overwrite data still being sent for other sizes).
class GlooCommunicator final : public Communicator {
 public:
  /// Internal state (Gloo context, transport device, options); built by the factory functions.
  struct State;
  explicit GlooCommunicator(std::unique_ptr<State> state);
  ~GlooCommunicator() override;
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string backend() const override;

  void all_reduce(Array& inout, ReduceOp op) override;
  void all_gather(const Array& in, Array& out) override;
  void reduce_scatter(const Array& in, Array& out, ReduceOp op) override;
  void broadcast(Array& inout, int root) override;
  void barrier() override;

  /// The timeout of every collective, in seconds.
  double timeout() const;

 private:
  std::unique_ptr<State> state_;
};

/// `size` (>= 1) ranks in this process, connected through Gloo's in-memory HashStore and its
/// TCP transport (loopback unless `options` say otherwise). Element r is rank r; use each from
/// its own thread (every rank must take part in every collective). Connecting is done with one
/// thread per rank, joined before returning. `timeout` (seconds, > 0) bounds connecting and
/// every collective. Errors: kInvalidArgument (size < 1, timeout <= 0 or not finite, an
/// unusable hostname / interface, naming it); kFailedPrecondition when connecting fails.
std::vector<std::unique_ptr<Communicator>> make_local_gloo_group(int size, double timeout = 30.0,
                                                                 const GlooOptions& options = {});

/// Joins the process group described by `group` (every rank calls this with the same
/// world_size, master_addr and master_port): rank 0 serves a TcpStore on master_addr:master_port
/// for the duration of the call, all ranks exchange Gloo's transport addresses through it, connect
/// a full mesh of TCP pairs, and pass a barrier (after which rank 0 stops the store).
/// Errors: kInvalidArgument for bad options (naming the field and value) or a WORLD_SIZE that
/// differs from rank 0's; kFailedPrecondition naming the store address and the timeout when a
/// rank does not show up in time, or when the port cannot be served.
std::unique_ptr<Communicator> connect_gloo(const ProcessGroupOptions& group, const GlooOptions& options = {});

/// A process's communicators in a multi-process group with several ranks per process
/// (connect_gloo_processes): one per local device and one for the process itself.
struct GlooProcessGroup {
  /// One rank per process (rank = ProcessGroupOptions::rank, size = world_size): host-level
  /// barriers and broadcasts between the processes (e.g. rank 0's checkpoint written before the
  /// others read it).
  std::unique_ptr<Communicator> process;
  /// `local_ranks` ranks of a group of world_size * local_ranks: element i is global rank
  /// rank * local_ranks + i (processes in rank order, each one's ranks consecutive), to be used
  /// from one thread each (e.g. one per local device, by run_spmd).
  std::vector<std::unique_ptr<Communicator>> ranks;
};

/// Joins the process group described by `group` with `local_ranks` (>= 1) ranks from this process
/// (every process passes the same world_size, master address and port, and local_ranks): rank 0
/// serves the TcpStore for the duration of the call; every rank (one connecting thread each)
/// exchanges Gloo's transport addresses through it; both groups pass a barrier before returning.
/// connect_gloo is this with local_ranks = 1 (its `ranks[0]`).
/// Errors: those of connect_gloo; kInvalidArgument for local_ranks < 1 or above 4096, or when it
/// differs from rank 0's (naming both values).
GlooProcessGroup connect_gloo_processes(const ProcessGroupOptions& group, int local_ranks,
                                        const GlooOptions& options = {});

}  // namespace ingot
