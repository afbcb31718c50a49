// Devices and their allocators (CPU for now; CUDA devices arrive with the runtime issue).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ingot/runtime/event.h"

namespace ingot {

/// Allocation counters of one allocator. All sizes in bytes.
struct AllocatorStats {
  int64_t bytes_in_use = 0;       ///< currently allocated and not yet freed
  int64_t peak_bytes_in_use = 0;  ///< maximum of bytes_in_use since creation or reset_peak()
  int64_t num_allocations = 0;    ///< number of successful allocate() calls since creation
  int64_t num_frees = 0;          ///< number of deallocate() calls since creation
};

/// Interface of a device memory allocator. Thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Allocates `bytes` (>= 0) aligned to `alignment` bytes (a power of two).
  /// Throws ingot::Error(kOutOfMemory) with the requested size on failure.
  virtual void* allocate(int64_t bytes, int64_t alignment) = 0;
  /// Frees a pointer returned by allocate() with the same `bytes`.
  virtual void deallocate(void* ptr, int64_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  /// Resets peak_bytes_in_use to the current bytes_in_use.
  virtual void reset_peak() = 0;
};

/// Host memory allocator (aligned operator new) that tracks bytes in use and the peak.
class HostAllocator final : public Allocator {
 public:
  void* allocate(int64_t bytes, int64_t alignment) override;
  void deallocate(void* ptr, int64_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;

 private:
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> allocs_{0};
  std::atomic<int64_t> frees_{0};
};

enum class DeviceKind { kCpu, kCuda };

class Worker;

/// How the runtime's transfers (device_put, reshard, to_host in array.h) move bytes between host
/// memory and a device whose memory the host cannot address (a CUDA device: CudaDevice installs
/// one on its Device). Both calls block until the bytes have arrived, and order after work
/// already queued on the device that may be writing or reading the same memory (CUDA: the compute
/// stream). Errors: the device's ingot::Error. Thread-safe.
class DeviceTransfer {
 public:
  virtual ~DeviceTransfer() = default;
  /// `bytes` (>= 0) from host memory `host` to device memory `device_memory`.
  virtual void to_device(const void* host, void* device_memory, int64_t bytes) = 0;
  /// `bytes` (>= 0) from device memory `device_memory` to host memory `host`.
  virtual void to_host(const void* device_memory, void* host, int64_t bytes) = 0;
};

/// A device that owns memory through its allocator, and a worker thread that runs work queued on
/// it in order (copies, programs).
///
/// Lifetime: a Device must outlive every Buffer on it (and so every Array with data on it) and
/// every piece of work queued on it; Buffers keep a plain pointer to their device. Devices have a
/// fixed address (not copyable or movable). A Runtime owns its devices (runtime.h).
class Device {
 public:
  Device(DeviceKind kind, int id, std::unique_ptr<Allocator> allocator);
  /// Runs the work still queued, joins the worker thread (shutdown_worker()), frees the allocator.
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  DeviceKind kind() const { return kind_; }
  /// Index of the device among devices of its kind.
  int id() const { return id_; }
  /// "cpu:0", "cuda:1", ...
  std::string name() const;
  Allocator& allocator() { return *allocator_; }
  const Allocator& allocator() const { return *allocator_; }

  /// Queues `work` on this device's worker thread (started on the first call), behind all work
  /// enqueued on this device before (FIFO per device; different devices run concurrently). The
  /// Event completes once `work` ran and its captures were destroyed; an exception thrown by
  /// `work` is rethrown by Event::wait() (every call). Thread-safe. Throws
  /// ingot::Error(kInvalidArgument) for an empty function, kFailedPrecondition after
  /// shutdown_worker(). Waiting, inside work on this device, for work queued later on this same
  /// device throws kFailedPrecondition instead of deadlocking.
  std::shared_ptr<Event> enqueue(std::function<void()> work);
  /// Blocks until every piece of work enqueued on this device so far has run. Rethrows nothing
  /// (errors belong to each work's Event). Must not be called from this device's own worker
  /// (ingot::Error kFailedPrecondition).
  void synchronize();
  /// Runs the work still queued, then joins the worker thread. Afterwards enqueue() throws
  /// ingot::Error(kFailedPrecondition) (work enqueued from running work during the shutdown
  /// fails too). Idempotent; called by the destructor.
  void shutdown_worker();
  /// True if the worker thread was started and not yet shut down.
  bool has_worker() const;
  /// The transfers of a device whose memory the host cannot address (null for CPU devices: their
  /// memory is host memory). Set once by the device's owner (CudaDevice::open) before any array
  /// on it is moved; not owned, must outlive the Device's use.
  DeviceTransfer* transfer() const { return transfer_; }
  void set_transfer(DeviceTransfer* transfer) { transfer_ = transfer; }

 private:
  DeviceKind kind_;
  int id_;
  std::unique_ptr<Allocator> allocator_;
  DeviceTransfer* transfer_ = nullptr;
  // Declared after the allocator: the worker is joined before the allocator goes away.
  mutable std::mutex worker_mu_;
  std::unique_ptr<Worker> worker_;
  bool worker_shut_down_ = false;
};

/// The process's default host device "cpu:0" (created on first use, lives until exit).
/// This is the one process-wide device object; everything else is passed explicitly. It is not
/// one of a Runtime's devices (those are separate objects, also named "cpu:0".."cpu:N-1"); its
/// worker thread starts only if work is enqueued on it, and is joined at exit.
Device& default_cpu_device();

/// Memory for array data on one device. Owned through std::shared_ptr; freed on destruction.
class Buffer {
 public:
  /// Default alignment of buffer data, in bytes (one AVX-512 vector / cache line).
  static constexpr int64_t kAlignment = 64;
  /// Allocates `bytes` (>= 0) on `device`. Throws ingot::Error(kOutOfMemory).
  static std::shared_ptr<Buffer> allocate(Device& device, int64_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  int64_t size_bytes() const { return bytes_; }
  Device& device() const { return *device_; }

  /// Donation (JAX's donate_argnums): moves the memory into a new Buffer that the callee owns
  /// and marks this one as donated to `to` (e.g. "jit:train_step"). Every Array still holding
  /// this buffer then throws ingot::Error(kFailedPrecondition) "array was donated to ...".
  /// Throws that error itself if the buffer was already donated.
  std::shared_ptr<Buffer> donate(const std::string& to);
  /// Empty unless donate() was called: whom the memory was donated to.
  const std::string& donated_to() const { return donated_to_; }

 private:
  Buffer(Device& device, void* data, int64_t bytes) : device_(&device), data_(data), bytes_(bytes) {}
  Device* device_;
  void* data_;
  int64_t bytes_;
  std::string donated_to_;
};

}  // namespace ingot
