// CUDA devices through the driver API loaded at run time (dlopen("libcuda.so.1"); ingot never
// links libcuda): the driver, devices with a compute and a copy stream, CUDA events as
// ingot::Event, the caching device allocator over cuMemAlloc/cuMemFree, and asynchronous
// host<->device copies through pinned staging buffers.
//
// Nothing here is process-global: a CudaDriver is created explicitly and shared (shared_ptr)
// by the devices opened through it. Without a driver or a GPU, CudaDriver::available() is false
// with a reason and CudaDevice::open() throws an ingot::Error that names the device and why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/caching_allocator.h"
#include "ingot/runtime/device.h"
#include "ingot/runtime/event.h"

// Opaque driver handle types, as declared by cuda.h (CUcontext, CUstream, CUevent).
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;

namespace ingot {

namespace cuda_detail {
struct DriverApi;
}

/// Resolves one driver entry point by its versioned symbol name ("cuMemAlloc_v2"); returns
/// nullptr when the symbol is absent. dlsym on libcuda for the real driver; tests pass a fake.
using CudaSymbolResolver = std::function<void*(const char* symbol)>;

/// The CUDA driver (libcuda.so.1) loaded with dlopen, its entry points and its devices.
/// Loading never throws for a missing driver: available() is false and unavailable_reason()
/// says why (library not found, an entry point missing, cuInit failed, no device).
/// Thread-safe after construction (read-only).
class CudaDriver {
 public:
  /// dlopen(`library`), resolves the entry points with dlsym and calls cuInit(0).
  static std::shared_ptr<CudaDriver> load(const std::string& library = "libcuda.so.1");
  /// The same with entry points from `resolve`; `source` names them in messages (tests: a fake
  /// driver implemented in host memory).
  static std::shared_ptr<CudaDriver> from_resolver(std::string source, CudaSymbolResolver resolve);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  /// True when the driver initialised and has at least one device.
  bool available() const { return available_; }
  /// Why available() is false (empty when available).
  const std::string& unavailable_reason() const { return reason_; }
  /// The library path (or fake driver name) the entry points came from.
  const std::string& source() const { return source_; }
  /// Number of CUDA devices (0 when unavailable).
  int device_count() const { return device_count_; }
  /// The driver's CUDA version, 1000 * major + 10 * minor (13000 for CUDA 13.0); 0 when the
  /// driver did not initialise.
  int driver_version() const { return driver_version_; }
  /// Marketing name of device `ordinal` ("NVIDIA H200"). Errors as check_device().
  std::string device_name(int ordinal) const;
  /// Total memory of device `ordinal` in bytes. Errors as check_device().
  int64_t device_total_memory(int ordinal) const;
  /// Compute capability {major, minor} of device `ordinal` ({9, 0} for an H100/H200;
  /// cuDeviceGetAttribute). Errors as check_device().
  std::pair<int, int> device_compute_capability(int ordinal) const;
  /// Throws ingot::Error naming "cuda:<ordinal>" unless that device can be opened: kNotFound
  /// without a driver or without devices, kOutOfRange for an ordinal outside
  /// [0, device_count()); the hint says what to do.
  void check_device(int ordinal) const;

  /// The resolved entry points (valid when the driver initialised; for runtime/cuda code).
  const cuda_detail::DriverApi& api() const { return *api_; }

 private:
  CudaDriver();
  void initialise(CudaSymbolResolver& resolve);

  std::unique_ptr<cuda_detail::DriverApi> api_;
  void* library_ = nullptr;   // dlopen handle
  bool initialised_ = false;  // cuInit succeeded
  bool available_ = false;
  std::string reason_;
  std::string source_;
  int device_count_ = 0;
  int driver_version_ = 0;
};

class CudaEvent;

/// A CUDA stream of one device (owned by its CudaDevice). Enqueues nothing by itself; work
/// enqueued on one stream runs in order. Thread-safe (the driver's streams are).
class CudaStream {
 public:
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream();

  /// The CUstream (for library calls: NCCL, cuBLAS, kernel launches).
  CUstream_st* handle() const { return stream_; }
  /// "cuda:0 compute", "cuda:0 copy".
  const std::string& name() const { return name_; }
  /// Blocks until all work enqueued so far has finished; a failure of that work is an
  /// ingot::Error.
  void synchronize() const;
  /// Records an event that becomes ready when all work enqueued so far has finished.
  std::shared_ptr<CudaEvent> record() const;
  /// Work enqueued on this stream later waits (on the device, not the host) for `event`.
  void wait(const CudaEvent& event) const;

 private:
  friend class CudaDevice;
  CudaStream(std::shared_ptr<CudaDriver> driver, CUctx_st* context, std::string name);

  std::shared_ptr<CudaDriver> driver_;
  CUctx_st* context_;
  CUstream_st* stream_ = nullptr;
  std::string name_;
};

/// A CUDA event (timing disabled) recorded on a stream, as an ingot::Event: ready() polls
/// cuEventQuery, wait() blocks in cuEventSynchronize and throws the ingot::Error of a failed
/// stream (every time it is called). Thread-safe. Drop events before their CudaDevice.
class CudaEvent final : public Event {
 public:
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  bool ready() const override;
  void wait() const override;
  /// The CUevent (for cuStreamWaitEvent and library calls).
  CUevent_st* handle() const { return event_; }

 private:
  friend class CudaStream;
  CudaEvent(std::shared_ptr<CudaDriver> driver, CUctx_st* context, std::string where);

  std::shared_ptr<CudaDriver> driver_;
  CUctx_st* context_;
  CUevent_st* event_ = nullptr;
  std::string where_;  // "cuda:0 copy" for messages
};

/// Sizes of the pinned host buffers transfers are staged through.
struct CudaDeviceOptions {
  /// Bytes of each pinned staging buffer (> 0); larger copies go through several in turn.
  int64_t staging_buffer_bytes = int64_t{8} << 20;
  /// Number of staging buffers (>= 1), used round-robin so that filling one on the host
  /// overlaps the copy engine draining another.
  int num_staging_buffers = 2;
};

/// What a host-to-device copy waits for on the device before it writes.
enum class CopyOrder {
  /// The copy runs after all compute-stream work enqueued before the call (always safe: the
  /// caching allocator may hand out memory that queued compute work still reads).
  kAfterQueuedCompute,
  /// The copy may run at once, overlapping queued compute work. Only for destinations that no
  /// queued compute work uses (e.g. buffers a prefetch queue keeps for itself and hands to a
  /// step only after the copy's event).
  kImmediate,
};

/// One CUDA device opened for use: its primary context, a compute stream and a copy stream, an
/// ingot::Device (kind kCuda) whose allocator is a CachingAllocator over cuMemAlloc/cuMemFree,
/// and pinned staging buffers for transfers. Every method makes the device's context current
/// on the calling thread. Thread-safe. Destroy it only after every Buffer on device() is gone.
class CudaDevice {
 public:
  /// Opens device `ordinal` of `driver`. Errors: CudaDriver::check_device() (no driver, no
  /// device, ordinal out of range); options out of range: kInvalidArgument; driver failures
  /// while setting up (out of pinned memory, ...): the converted CUDA error.
  static std::unique_ptr<CudaDevice> open(std::shared_ptr<CudaDriver> driver, int ordinal,
                                          const CudaDeviceOptions& options = {});
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  /// The ingot::Device "cuda:<ordinal>" (arrays are allocated on it).
  Device& device() { return *device_; }
  int ordinal() const { return ordinal_; }
  /// "cuda:0".
  std::string name() const;
  /// The GPU's marketing name ("NVIDIA H200").
  const std::string& product_name() const { return product_name_; }
  CachingAllocator& allocator() { return *allocator_; }
  const CudaStream& compute_stream() const { return *compute_; }
  const CudaStream& copy_stream() const { return *copy_; }
  /// A new non-blocking stream of this device named "<device> <purpose>", owned by the caller
  /// (e.g. the private stream a CudaExecutable captures CUDA graphs on, so other threads' work
  /// on the compute stream never enters a capture). Destroy it before the device. Errors:
  /// cuStreamCreate's.
  std::unique_ptr<CudaStream> create_stream(const std::string& purpose) const;
  const std::shared_ptr<CudaDriver>& driver() const { return driver_; }
  /// Free and total device memory (cuMemGetInfo), in bytes.
  DeviceMemoryInfo memory_info() const;
  /// Makes this device's primary context current on the calling thread.
  void make_current() const;
  /// Blocks until both streams are idle.
  void synchronize() const;

  /// Copies `bytes` (>= 0) from host memory `src` to device memory `dst` on the copy stream,
  /// staged through the pinned buffers: `src` may be reused as soon as the call returns (the
  /// call blocks only while it waits for a staging buffer to come free). The event is ready
  /// when the data is on the device; make compute work that reads `dst` wait for it
  /// (compute_stream().wait(*event)). `order`: see CopyOrder.
  std::shared_ptr<CudaEvent> copy_to_device_async(const void* src, void* dst, int64_t bytes,
                                                  CopyOrder order = CopyOrder::kAfterQueuedCompute);
  /// Copies `bytes` (>= 0) from device memory `src` to host memory `dst` on the copy stream,
  /// after all compute-stream work enqueued before the call (which may be producing `src`).
  /// `dst` holds the data once the event is ready (it must stay valid until then).
  std::shared_ptr<CudaEvent> copy_to_host_async(const void* src, void* dst, int64_t bytes);
  /// Copies `bytes` (>= 0) between two buffers of this device (cuMemcpyDtoDAsync) on the
  /// compute stream, so in order with the kernels before and after it (no host round trip, no
  /// wait). The event is ready when the copy is done. Errors: kInvalidArgument for negative
  /// bytes or a null pointer; the driver's otherwise.
  std::shared_ptr<CudaEvent> copy_within_device_async(const void* src, void* dst, int64_t bytes);
  /// Array copy between the host and this device in either direction, or within this device
  /// (copy_within_device_async; `order` applies to uploads only): `src` and `dst` have the same
  /// shape and dtype (else kShapeMismatch / kDTypeMismatch naming both), and one lives on a CPU
  /// device and the other on device(), or both on device() (else kInvalidArgument naming both
  /// devices).
  std::shared_ptr<CudaEvent> copy_async(const Array& src, Array& dst, CopyOrder order = CopyOrder::kAfterQueuedCompute);

 private:
  struct StagingBuffer;
  CudaDevice(std::shared_ptr<CudaDriver> driver, int ordinal);
  void create_staging_buffers(const CudaDeviceOptions& options);
  StagingBuffer& next_staging_buffer();

  std::shared_ptr<CudaDriver> driver_;
  int ordinal_;
  std::string product_name_;
  int cu_device_ = 0;  // the CUdevice handle
  CUctx_st* context_ = nullptr;
  std::unique_ptr<CudaStream> compute_;
  std::unique_ptr<CudaStream> copy_;
  std::unique_ptr<Device> device_;
  CachingAllocator* allocator_ = nullptr;     // owned by device_
  std::mutex transfer_mu_;                    // guards the staging buffers
  std::unique_ptr<DeviceTransfer> transfer_;  // installed on device_ (device_put / to_host of its arrays)
  std::vector<std::unique_ptr<StagingBuffer>> staging_;
  size_t next_staging_ = 0;
};

/// The raw memory of one CUDA device for the CachingAllocator: cuMemAlloc/cuMemFree in the
/// device's primary context; out of memory is reported as nullptr; memory_info from
/// cuMemGetInfo. Created by CudaDevice::open().
class CudaMemoryBackend final : public RawMemoryBackend {
 public:
  CudaMemoryBackend(std::shared_ptr<CudaDriver> driver, CUctx_st* context, int ordinal);
  void* allocate_raw(int64_t bytes) override;
  void free_raw(void* ptr, int64_t bytes) override;
  DeviceMemoryInfo memory_info() const override;
  /// cuMemAlloc's guarantee.
  int64_t segment_alignment() const override { return 256; }
  std::string device_name() const override;

 private:
  std::shared_ptr<CudaDriver> driver_;
  CUctx_st* context_;
  int ordinal_;
};

}  // namespace ingot
