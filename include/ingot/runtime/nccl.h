// Collectives between CUDA devices over NCCL (libnccl.so.2 loaded with dlopen at run time; ingot
// never links it): the ingot::Communicator interface on each device's compute stream.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ingot/runtime/communicator.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/library_search.h"

// Opaque NCCL communicator, as declared by nccl.h (ncclComm_t is ncclComm*).
struct ncclComm;

namespace ingot {

namespace nccl_detail {
struct NcclApi;
}

/// The 128 opaque bytes of an ncclUniqueId: rank 0 creates it, every rank passes it to
/// NcclCommunicator::create (sending it between processes is the caller's job).
using NcclUniqueId = std::array<char, 128>;

/// libnccl.so.2 loaded with dlopen. Loading never throws: available() is false and
/// unavailable_reason() says why. Thread-safe (read-only after construction).
class NcclLibrary {
 public:
  /// dlopen(`library`) and resolves the entry points with dlsym.
  static std::shared_ptr<NcclLibrary> load(const std::string& library = "libnccl.so.2");
  /// The same, finding libnccl.so.2 with open_library(`search`); unavailable with every place
  /// tried in unavailable_reason() when it is found nowhere.
  static std::shared_ptr<NcclLibrary> load(const LibrarySearch& search);
  /// The file loaded (empty when not found) and how it was found ("given" for load(library)).
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  ~NcclLibrary();
  NcclLibrary(const NcclLibrary&) = delete;
  NcclLibrary& operator=(const NcclLibrary&) = delete;

  bool available() const { return available_; }
  /// Why available() is false (empty when available).
  const std::string& unavailable_reason() const { return reason_; }
  /// NCCL's version code (ncclGetVersion: 22809 for 2.28.9); 0 when unavailable.
  int version() const { return version_; }
  /// "2.28.9" ("" when unavailable).
  std::string version_string() const;
  /// A fresh unique id (ncclGetUniqueId) for a group created with NcclCommunicator::create.
  /// Unavailable library or NCCL failure: ingot::Error.
  NcclUniqueId unique_id() const;
  /// Throws ingot::Error(kNotFound) with the reason and a hint unless available().
  void check_available(const std::string& what) const;

  /// The resolved entry points (for runtime/cuda code).
  const nccl_detail::NcclApi& api() const { return *api_; }

 private:
  NcclLibrary();
  void resolve(const std::string& library);
  std::unique_ptr<nccl_detail::NcclApi> api_;
  void* library_ = nullptr;
  bool available_ = false;
  std::string reason_;
  int version_ = 0;
  std::string path_, source_;
};

/// One rank of an NCCL group, bound to one CudaDevice (torch.distributed's NCCL backend).
/// Collectives run on a stream of their own ("<device> nccl rank R", as torch's NCCL process
/// groups use their own streams) that first waits for the work queued on the device's compute
/// stream, and the call returns once that stream has finished them (Communicator: calls block
/// until this rank's part is done), so kernels queued on the compute stream meanwhile (by
/// another thread: run_spmd's asynchronous collectives) run alongside the collective. Arrays
/// passed in live on device().device() (else kInvalidArgument naming both devices); work that
/// produced them must be on the compute stream or waited for (e.g.
/// compute_stream().wait(*copy_event)).
/// Dtypes f32, f64, i32, i64, f16 and bf16 (ncclFloat16 / ncclBfloat16: NCCL reduces them on
/// the device in their own precision or wider, so sums may round differently from an f32 sum
/// rounded once). kMean: ncclAvg for floats (each contribution scaled by 1/size
/// and summed, so equal to sum/size up to rounding); for integers the sum divided by size()
/// with truncation on the host (two extra copies, as the interface's integer mean must match
/// torch's truncating division exactly). Used by one thread at a time.
class NcclCommunicator final : public Communicator {
 public:
  /// One communicator per device of this process (ncclCommInitAll): element r is rank r, on
  /// devices[r]. Devices must be distinct (NCCL allows one rank per GPU); empty or repeated
  /// devices: kInvalidArgument.
  static std::vector<std::unique_ptr<NcclCommunicator>> create_all(std::shared_ptr<NcclLibrary> nccl,
                                                                   const std::vector<CudaDevice*>& devices);
  /// Rank `rank` of `size` ranks that may live in several processes (ncclCommInitRank): every
  /// rank calls this with the same `id` (from rank 0's NcclLibrary::unique_id()); it blocks
  /// until all have joined. rank outside [0, size) or size < 1: kInvalidArgument.
  static std::unique_ptr<NcclCommunicator> create(std::shared_ptr<NcclLibrary> nccl, CudaDevice& device,
                                                  const NcclUniqueId& id, int rank, int size);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  CudaDevice& device() const { return *device_; }

  void all_reduce(Array& inout, ReduceOp op) override;
  void all_gather(const Array& in, Array& out) override;
  void reduce_scatter(const Array& in, Array& out, ReduceOp op) override;
  void broadcast(Array& inout, int root) override;
  /// An all_reduce of one int32 on the device, then a stream synchronisation.
  void barrier() override;
  /// ncclAllReduce from `in` into `out` on the device (in and out on this rank's device, same
  /// shape and dtype; they may be the same buffer). Errors as all_reduce, plus
  /// kShapeMismatch / kDTypeMismatch naming both arrays.
  void all_reduce_into(const Array& in, Array& out, ReduceOp op) override;
  /// ncclBroadcast from root's `in` into every rank's `out` on the device. Errors as
  /// all_reduce_into and broadcast.
  void broadcast_into(const Array& in, Array& out, int root) override;
  /// The all_reduces inside one ncclGroupStart/ncclGroupEnd, then one stream synchronisation
  /// (integer means are divided on the host afterwards). Every array is checked before any call
  /// is made.
  void all_reduce_group(std::span<Array* const> inouts, ReduceOp op) override;
  /// The all_reduce_into of each pair inside one ncclGroupStart/ncclGroupEnd, one stream
  /// synchronisation. Every pair is checked (as all_reduce_into) before any call is made.
  void all_reduce_group_into(std::span<const Array> ins, std::span<Array> outs, ReduceOp op) override;

 private:
  NcclCommunicator(std::shared_ptr<NcclLibrary> nccl, CudaDevice& device, ncclComm* comm, int rank, int size);
  void check_array(const Array& a, const char* call, const char* arg) const;
  /// check_array for both, then equal shapes and dtypes.
  void check_pair(const Array& in, const Array& out, const char* call) const;
  /// Enqueues ncclAllReduce(in -> out) without synchronising.
  void enqueue_all_reduce(const void* in, void* out, const Array& a, ReduceOp op, const char* call);
  /// The all_reduces of `pairs` (in -> out; checked) in one NCCL group, then one synchronisation.
  void run_group(std::span<const std::pair<const Array*, Array*>> pairs, ReduceOp op, const char* call);
  /// Makes the device current and the collectives' stream wait for the compute stream.
  void begin();
  /// Blocks until the collectives' stream is done.
  void finish();
  void divide_on_host(Array& a);

  std::shared_ptr<NcclLibrary> nccl_;
  CudaDevice* device_;
  std::unique_ptr<CudaStream> stream_;  // the collectives' stream (destroyed before device_)
  ncclComm* comm_;
  int rank_;
  int size_;
  Array scratch_;  // one int32 on the device, for barrier()
};

/// Joins the multi-process NCCL group described by `group` (torchrun's environment:
/// ProcessGroupOptions::from_env) with this process's `devices` (one rank each, distinct): global
/// rank group.rank * devices.size() + i on devices[i], of group.world_size * devices.size() ranks
/// (every process passes as many devices). Rank 0 serves the TcpStore on master_addr:master_port
/// for the duration of the call, creates the NCCL unique id and sets it there (hex, key
/// "ingot/nccl/unique_id"); the others read it (within group.timeout); then every device joins
/// with ncclCommInitRank from a thread of its own. One process driving all its GPUs
/// (world_size 1) is the same call. Errors (ingot::Error): kInvalidArgument for a null `nccl`,
/// no or repeated devices, or options connect_gloo rejects (naming the field); kNotFound when
/// NCCL is not available; kFailedPrecondition naming the store address and the timeout when the
/// store cannot be served or reached or the id does not arrive in time; NCCL's errors of
/// create().
std::vector<std::unique_ptr<NcclCommunicator>> connect_nccl(const ProcessGroupOptions& group,
                                                            std::shared_ptr<NcclLibrary> nccl,
                                                            const std::vector<CudaDevice*>& devices);

/// The same join with NCCL's unique id sent over `processes` (one rank per process, e.g. a
/// connect_gloo communicator or distribution::ProcessGroup::process_communicator) instead of a
/// TcpStore of its own, for processes already joined (the store's port is then free for nothing
/// else): every process learns every process's device count (all_gather), rank 0 creates the id
/// and broadcasts it, then each of `devices` joins as global rank processes.rank() *
/// devices.size() + i of processes.size() * devices.size() on a thread of its own. Collective:
/// every process calls it. Errors (the same on every process where it can be): kInvalidArgument
/// for a null `nccl`, no or repeated devices, or processes with different device counts (naming
/// both); kNotFound when NCCL is not available; kFailedPrecondition when process 0 could not
/// create the id; `processes`' errors (e.g. a peer gone) and NcclCommunicator::create's.
std::vector<std::unique_ptr<NcclCommunicator>> connect_nccl(Communicator& processes, std::shared_ptr<NcclLibrary> nccl,
                                                            const std::vector<CudaDevice*>& devices);

/// The hex text of `id` (256 lowercase digits) and back; from_hex throws kInvalidArgument naming
/// the length or the first non-hex character.
std::string nccl_unique_id_to_hex(const NcclUniqueId& id);
NcclUniqueId nccl_unique_id_from_hex(const std::string& hex);

}  // namespace ingot
