// A fake NCCL in host memory, built as a loadable module (ingot_fake_nccl) that tests hand to
// NcclLibrary::load, so NcclCommunicator and everything above it (the CUDA SPMD executor, the
// unique-id exchange through the TCP store) run without a GPU on the fake driver's "device
// memory", which is host memory.
//
// It implements the NCCL calls ingot makes, with nccl.h's ABI, and models what the caller
// depends on:
//   - ranks of one group meet in one shared mapping: ncclCommInitAll's ranks (one process, used
//     from one thread each or from one thread inside a group) share an anonymous mapping;
//     ncclCommInitRank's ranks, in one process or in several, open the POSIX shared-memory object
//     the unique id names (ncclGetUniqueId makes a fresh name; rank 0 unlinks it once all joined);
//   - a collective first runs the installed stream synchronisation on its stream (the fake
//     driver's streams are deferred queues, so the kernels, copies and host functions enqueued
//     before it have run), then moves the data at once: it is synchronous, as the fake cuBLAS;
//     the caller must still synchronise afterwards as on a GPU (nothing here checks that it does);
//   - every rank publishes its call (collective, type, op, count, root) before data moves; calls
//     that differ make every rank fail with ncclInvalidUsage and a last error naming both calls
//     (a real NCCL would hang or corrupt memory): tests see a mismatch as an error, never a hang;
//   - data moves through a staging area of 1 MiB per rank, in chunks; reductions run over the
//     ranks in rank order (so every rank gets bitwise the same result); f16 and bf16 are widened
//     to f32 (cuda_fp16.h / cuda_bf16.h's conversions), reduced in f32 and rounded once,
//     round-to-nearest-even; ncclAvg is the sum divided by the rank count (integers: truncation);
//   - a rank that waits for its peers longer than the timeout (a peer died or never called) fails
//     with ncclRemoteError and breaks the group (later calls fail at once);
//   - ncclGroupStart/ncclGroupEnd queue the calling thread's collectives and run them at the
//     outermost ncclGroupEnd, each communicator's in order on a thread of its own, so one thread
//     may drive several ranks of a group as NCCL allows.
// The log (ingot_fake_nccl_log) is per process.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_nccl.h"

namespace {

constexpr int64_t kChunkBytes = int64_t{1} << 20;  // staging per rank
constexpr int kMaxRanks = 64;
constexpr char kMagic[8] = "ingotNC";

/// One rank's published call.
struct CallDesc {
  int32_t kind = 0, type = 0, op = 0, root = 0;
  uint64_t count = 0;
};

/// The group's shared state at the start of its mapping; the staging area follows it.
struct Shared {
  std::atomic<int32_t> joined;
  std::atomic<int32_t> arrived;
  std::atomic<int64_t> generation;
  std::atomic<int32_t> broken;
  std::atomic<int32_t> nranks;
  CallDesc calls[kMaxRanks];
};
constexpr int64_t kHeaderBytes = (sizeof(Shared) + 4095) / 4096 * 4096;

/// A mapping of a group's shared state (unmapped with the last communicator using it).
struct Mapping {
  void* base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, bytes);
  }
  Shared* shared() const { return static_cast<Shared*>(base); }
  char* staging(int rank) const { return static_cast<char*>(base) + kHeaderBytes + rank * kChunkBytes; }
};

struct UniqueIdBody {
  char magic[8];
  char name[96];
};
static_assert(sizeof(UniqueIdBody) <= sizeof(ncclUniqueId));

std::mutex g_mu;
FakeNcclLog g_log;
IngotFakeNcclStreamSync g_sync = nullptr;
std::atomic<double> g_timeout{60.0};
thread_local std::string t_last_error;

enum Kind : int32_t { kAllReduce = 1, kAllGather, kReduceScatter, kBroadcast };

const char* kind_name(int32_t k) {
  switch (k) {
    case kAllReduce:
      return "ncclAllReduce";
    case kAllGather:
      return "ncclAllGather";
    case kReduceScatter:
      return "ncclReduceScatter";
    default:
      return "ncclBroadcast";
  }
}

int64_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

}  // namespace

struct ncclComm {
  std::shared_ptr<Mapping> mapping;
  int rank = 0, nranks = 1;
  std::string last_error;
};

namespace {

ncclResult_t fail(ncclComm* comm, ncclResult_t r, const std::string& message) {
  (comm != nullptr ? comm->last_error : t_last_error) = message;
  return r;
}

/// Waits until every rank of `comm`'s group arrived (sense reversal over a generation count).
ncclResult_t barrier(ncclComm* comm, const char* where) {
  Shared* s = comm->mapping->shared();
  if (s->broken.load()) return fail(comm, ncclRemoteError, std::string(where) + ": the group is broken");
  const int64_t gen = s->generation.load(std::memory_order_acquire);
  if (s->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == comm->nranks) {
    s->arrived.store(0, std::memory_order_relaxed);
    s->generation.fetch_add(1, std::memory_order_release);
    return ncclSuccess;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(g_timeout.load());
  for (int spins = 0; s->generation.load(std::memory_order_acquire) == gen; ++spins) {
    if (s->broken.load()) return fail(comm, ncclRemoteError, std::string(where) + ": a peer broke the group");
    if (std::chrono::steady_clock::now() > deadline) {
      s->broken.store(1);
      return fail(comm, ncclRemoteError,
                  std::string(where) + ": rank " + std::to_string(comm->rank) + " timed out waiting for its peers");
    }
    if (spins < 256) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return ncclSuccess;
}

template <class T>
float widen(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else {
    return __bfloat162float(v);
  }
}

template <class T>
T narrow(float v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return __float2bfloat16_rn(v);
  }
}

/// out[i] = op over the ranks (in rank order) of src[r][i], i < n.
template <class T, class Acc>
void reduce_typed(const std::vector<const char*>& src, char* out, int64_t n, ncclRedOp_t op) {
  for (int64_t i = 0; i < n; ++i) {
    Acc acc{};
    for (size_t r = 0; r < src.size(); ++r) {
      T v;
      std::memcpy(&v, src[r] + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      Acc x;
      if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
        x = widen(v);
      } else {
        x = static_cast<Acc>(v);
      }
      if (r == 0) {
        acc = x;
      } else if (op == ncclMax || op == ncclMin) {  // NaN propagates, as NCCL's fmax-free compare
        const bool nan_acc = std::isnan(static_cast<double>(acc)), nan_x = std::isnan(static_cast<double>(x));
        if (!nan_acc && (nan_x || (op == ncclMax ? x > acc : x < acc))) acc = x;
      } else if (op == ncclProd) {
        acc = static_cast<Acc>(acc * x);
      } else {
        acc = static_cast<Acc>(acc + x);
      }
    }
    if (op == ncclAvg) acc = static_cast<Acc>(acc / static_cast<Acc>(src.size()));
    T result;
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      result = narrow<T>(acc);
    } else {
      result = static_cast<T>(acc);
    }
    std::memcpy(out + i * static_cast<int64_t>(sizeof(T)), &result, sizeof(T));
  }
}

void reduce(const std::vector<const char*>& src, char* out, int64_t n, ncclDataType_t type, ncclRedOp_t op) {
  switch (type) {
    case ncclInt8:
      return reduce_typed<int8_t, int8_t>(src, out, n, op);
    case ncclUint8:
      return reduce_typed<uint8_t, uint8_t>(src, out, n, op);
    case ncclInt32:
      return reduce_typed<int32_t, int32_t>(src, out, n, op);
    case ncclUint32:
      return reduce_typed<uint32_t, uint32_t>(src, out, n, op);
    case ncclInt64:
      return reduce_typed<int64_t, int64_t>(src, out, n, op);
    case ncclUint64:
      return reduce_typed<uint64_t, uint64_t>(src, out, n, op);
    case ncclFloat16:
      return reduce_typed<__half, float>(src, out, n, op);
    case ncclBfloat16:
      return reduce_typed<__nv_bfloat16, float>(src, out, n, op);
    case ncclFloat32:
      return reduce_typed<float, float>(src, out, n, op);
    default:
      return reduce_typed<double, double>(src, out, n, op);
  }
}

/// The staged chunks of every rank, offset by `skip` bytes.
std::vector<const char*> staged(const ncclComm* comm, int64_t skip) {
  std::vector<const char*> out;
  for (int r = 0; r < comm->nranks; ++r) out.push_back(comm->mapping->staging(r) + skip);
  return out;
}

/// Runs the work enqueued on `stream` so far (on the calling thread: the fake driver needs its
/// context current there).
ncclResult_t sync_stream(ncclComm* comm, cudaStream_t stream) {
  if (g_sync == nullptr) return fail(comm, ncclInternalError, "fake NCCL: no stream synchronisation installed");
  if (g_sync(stream) != 0) return fail(comm, ncclUnhandledCudaError, "fake NCCL: synchronising the stream failed");
  return ncclSuccess;
}

/// One collective, run at once; the stream's earlier work has run (sync_stream).
ncclResult_t run_now(ncclComm* comm, const CallDesc& d, const void* send, void* recv) {
  Shared* s = comm->mapping->shared();
  s->calls[comm->rank] = d;
  if (ncclResult_t r = barrier(comm, kind_name(d.kind)); r != ncclSuccess) return r;
  std::string mismatch;
  for (int r = 1; r < comm->nranks && mismatch.empty(); ++r) {
    const CallDesc& a = s->calls[0];
    const CallDesc& b = s->calls[r];
    if (a.kind != b.kind || a.type != b.type || a.op != b.op || a.root != b.root || a.count != b.count) {
      char text[256];
      std::snprintf(
          text, sizeof(text),
          "rank 0 called %s(count %llu, type %d, op %d, root %d) but rank %d %s(count %llu, type %d, op %d, root %d)",
          kind_name(a.kind), static_cast<unsigned long long>(a.count), a.type, a.op, a.root, r, kind_name(b.kind),
          static_cast<unsigned long long>(b.count), b.type, b.op, b.root);
      mismatch = text;
    }
  }
  if (ncclResult_t r = barrier(comm, kind_name(d.kind)); r != ncclSuccess) return r;  // descriptions read
  if (!mismatch.empty()) return fail(comm, ncclInvalidUsage, "fake NCCL: " + mismatch);
  const int64_t elem = type_bytes(static_cast<ncclDataType_t>(d.type));
  const int64_t count = static_cast<int64_t>(d.count);
  const int64_t send_bytes = (d.kind == kReduceScatter ? comm->nranks * count : count) * elem;
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  const auto op = static_cast<ncclRedOp_t>(d.op);
  const auto type = static_cast<ncclDataType_t>(d.type);
  for (int64_t off = 0; off < send_bytes; off += kChunkBytes) {
    const int64_t c = std::min(kChunkBytes, send_bytes - off);
    if (d.kind != kBroadcast || comm->rank == d.root) std::memcpy(comm->mapping->staging(comm->rank), in + off, c);
    if (ncclResult_t r = barrier(comm, kind_name(d.kind)); r != ncclSuccess) return r;
    if (d.kind == kAllReduce) {
      reduce(staged(comm, 0), out + off, c / elem, type, op);
    } else if (d.kind == kBroadcast) {
      std::memcpy(out + off, comm->mapping->staging(d.root), c);
    } else if (d.kind == kAllGather) {
      for (int r = 0; r < comm->nranks; ++r) std::memcpy(out + r * send_bytes + off, comm->mapping->staging(r), c);
    } else {  // reduce-scatter: this rank's block [rank * block, (rank + 1) * block) of the send buffers
      const int64_t block = count * elem, lo = std::max(off, comm->rank * block),
                    hi = std::min(off + c, (comm->rank + 1) * block);
      if (hi > lo) reduce(staged(comm, lo - off), out + (lo - comm->rank * block), (hi - lo) / elem, type, op);
    }
    if (ncclResult_t r = barrier(comm, kind_name(d.kind)); r != ncclSuccess) return r;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  int64_t* counter = d.kind == kAllReduce       ? &g_log.all_reduce
                     : d.kind == kAllGather     ? &g_log.all_gather
                     : d.kind == kReduceScatter ? &g_log.reduce_scatter
                                                : &g_log.broadcast;
  ++*counter;
  g_log.last_type = d.type;
  return ncclSuccess;
}

/// A collective queued inside ncclGroupStart/ncclGroupEnd.
struct Queued {
  ncclComm* comm;
  CallDesc desc;
  const void* send;
  void* recv;
  cudaStream_t stream;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Queued> t_queued;

ncclResult_t submit(ncclComm* comm, const CallDesc& d, const void* send, void* recv, cudaStream_t stream) {
  if (comm == nullptr || comm->mapping == nullptr) return fail(nullptr, ncclInvalidArgument, "comm is null");
  if (type_bytes(static_cast<ncclDataType_t>(d.type)) == 0) {
    return fail(comm, ncclInvalidArgument, "fake NCCL: unsupported ncclDataType_t " + std::to_string(d.type));
  }
  if ((d.kind == kAllReduce || d.kind == kReduceScatter) && (d.op < ncclSum || d.op > ncclAvg)) {
    return fail(comm, ncclInvalidArgument, "fake NCCL: unsupported ncclRedOp_t " + std::to_string(d.op));
  }
  if (d.kind == kBroadcast && (d.root < 0 || d.root >= comm->nranks)) {
    return fail(comm, ncclInvalidArgument, "fake NCCL: root " + std::to_string(d.root) + " out of range");
  }
  if (d.count > 0 && (send == nullptr || recv == nullptr)) {
    return fail(comm, ncclInvalidArgument, "fake NCCL: null buffer");
  }
  if (t_group_depth > 0) {
    t_queued.push_back({comm, d, send, recv, stream});
    return ncclSuccess;
  }
  if (ncclResult_t r = sync_stream(comm, stream); r != ncclSuccess) return r;
  return run_now(comm, d, send, recv);
}

std::string shm_name() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  return "/ingot_fake_nccl_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
         std::to_string(rd() % 1000000000u);
}

size_t mapping_bytes(int nranks) { return static_cast<size_t>(kHeaderBytes + nranks * kChunkBytes); }

}  // namespace

extern "C" {

void ingot_fake_nccl_set_stream_sync(IngotFakeNcclStreamSync sync) { g_sync = sync; }
void ingot_fake_nccl_set_timeout(double seconds) { g_timeout = seconds; }
const FakeNcclLog* ingot_fake_nccl_log() { return &g_log; }
void ingot_fake_nccl_reset_log() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_log = FakeNcclLog{};
}

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  return comm != nullptr ? comm->last_error.c_str() : t_last_error.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(nullptr, ncclInvalidArgument, "uniqueId is null");
  std::memset(id, 0, sizeof(*id));
  UniqueIdBody body{};
  std::memcpy(body.magic, kMagic, sizeof(kMagic));
  std::snprintf(body.name, sizeof(body.name), "%s", shm_name().c_str());
  std::memcpy(id->internal, &body, sizeof(body));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (out == nullptr) return fail(nullptr, ncclInvalidArgument, "comm is null");
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    return fail(nullptr, ncclInvalidArgument,
                "fake NCCL: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  }
  UniqueIdBody body;
  std::memcpy(&body, id.internal, sizeof(body));
  if (std::memcmp(body.magic, kMagic, sizeof(kMagic)) != 0) {
    return fail(nullptr, ncclInvalidArgument, "fake NCCL: the unique id was not made by ncclGetUniqueId");
  }
  body.name[sizeof(body.name) - 1] = '\0';
  const int fd = shm_open(body.name, O_RDWR | O_CREAT, 0600);
  if (fd < 0)
    return fail(nullptr, ncclSystemError,
                std::string("fake NCCL: shm_open ") + body.name + ": " + std::strerror(errno));
  const size_t bytes = mapping_bytes(nranks);
  auto mapping = std::make_shared<Mapping>();
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      (mapping->base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
    mapping->base = nullptr;
    close(fd);
    return fail(nullptr, ncclSystemError, std::string("fake NCCL: mapping ") + body.name + ": " + std::strerror(errno));
  }
  close(fd);
  mapping->bytes = bytes;
  Shared* s = mapping->shared();
  int32_t expected = 0;
  if (!s->nranks.compare_exchange_strong(expected, nranks) && expected != nranks) {
    return fail(nullptr, ncclInvalidUsage,
                "fake NCCL: rank " + std::to_string(rank) + " joined with nranks " + std::to_string(nranks) +
                    " but the group has " + std::to_string(expected));
  }
  s->joined.fetch_add(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(g_timeout.load());
  while (s->joined.load() < nranks) {
    if (std::chrono::steady_clock::now() > deadline) {
      shm_unlink(body.name);
      return fail(nullptr, ncclRemoteError,
                  "fake NCCL: rank " + std::to_string(rank) + " timed out waiting for the group to form");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (rank == 0) shm_unlink(body.name);  // everyone has it mapped
  auto* comm = new ncclComm{std::move(mapping), rank, nranks, {}};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_log.comms_created;
  }
  *out = comm;
  return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1 || ndev > kMaxRanks) return fail(nullptr, ncclInvalidArgument, "fake NCCL: ndev");
  if (devlist != nullptr) {
    std::set<int> seen(devlist, devlist + ndev);
    if (static_cast<int>(seen.size()) != ndev) return fail(nullptr, ncclInvalidUsage, "fake NCCL: repeated device");
  }
  auto mapping = std::make_shared<Mapping>();
  const size_t bytes = mapping_bytes(ndev);
  mapping->base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapping->base == MAP_FAILED) {
    mapping->base = nullptr;
    return fail(nullptr, ncclSystemError, "fake NCCL: mmap failed");
  }
  mapping->bytes = bytes;
  mapping->shared()->nranks = ndev;
  mapping->shared()->joined = ndev;
  for (int r = 0; r < ndev; ++r) comms[r] = new ncclComm{mapping, r, ndev, {}};
  std::lock_guard<std::mutex> lock(g_mu);
  g_log.comms_created += ndev;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  delete comm;
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_log.comms_destroyed;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(comm, {kAllReduce, type, op, 0, count}, send, recv, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(comm, {kAllGather, type, 0, 0, count}, send, recv, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return submit(comm, {kReduceScatter, type, op, 0, count}, send, recv, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(comm, {kBroadcast, type, 0, root, count}, send, recv, stream);
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return fail(nullptr, ncclInvalidUsage, "fake NCCL: ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Queued> queued = std::move(t_queued);
  t_queued.clear();
  if (queued.empty()) return ncclSuccess;
  // Each communicator's calls in order, the communicators concurrently (one thread may drive
  // several ranks of a group).
  std::map<ncclComm*, std::vector<const Queued*>> by_comm;
  std::set<cudaStream_t> streams;
  for (const Queued& q : queued) {
    by_comm[q.comm].push_back(&q);
    if (streams.insert(q.stream).second) {
      if (ncclResult_t r = sync_stream(q.comm, q.stream); r != ncclSuccess) {
        t_last_error = q.comm->last_error;
        return r;
      }
    }
  }
  std::vector<ncclResult_t> results(by_comm.size(), ncclSuccess);
  std::vector<std::thread> threads;
  size_t i = 0;
  for (auto& [comm, calls] : by_comm) {
    threads.emplace_back([&results, i, calls = calls] {
      for (const Queued* q : calls) {
        results[i] = run_now(q->comm, q->desc, q->send, q->recv);
        if (results[i] != ncclSuccess) return;
      }
    });
    ++i;
  }
  for (std::thread& t : threads) t.join();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_log.groups;
    g_log.largest_group = std::max<int64_t>(g_log.largest_group, static_cast<int64_t>(queued.size()));
  }
  i = 0;
  for (auto& [comm, calls] : by_comm) {
    if (results[i] != ncclSuccess) {
      t_last_error = comm->last_error;
      return results[i];
    }
    ++i;
  }
  return ncclSuccess;
}

}  // extern "C"
