// CUDA devices: primary context, compute and copy streams, events, the caching allocator's
// cuMemAlloc backend, and host<->device copies staged through pinned buffers.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "cuda/driver_api.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/error.h"

namespace ingot {
namespace {

CUdeviceptr device_ptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

/// Makes `context` current on this thread (every driver call below needs it).
void set_current(const CudaDriver& driver, CUctx_st* context, std::string_view where) {
  cuda_detail::check(driver.api(), driver.api().cuCtxSetCurrent(context), "cuCtxSetCurrent", where);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CudaEvent

CudaEvent::CudaEvent(std::shared_ptr<CudaDriver> driver, CUctx_st* context, std::string where)
    : driver_(std::move(driver)), context_(context), where_(std::move(where)) {
  const cuda_detail::DriverApi& api = driver_->api();
  const std::string what = fmt::format("creating an event on {}", where_);
  set_current(*driver_, context_, what);
  cuda_detail::check(api, api.cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate", what);
}

CudaEvent::~CudaEvent() {
  if (event_ == nullptr) return;
  // Errors cannot be reported from a destructor; a failed context frees its events anyway.
  (void)driver_->api().cuCtxSetCurrent(context_);
  (void)driver_->api().cuEventDestroy_v2(event_);
}

bool CudaEvent::ready() const {
  const cuda_detail::DriverApi& api = driver_->api();
  if (api.cuCtxSetCurrent(context_) != CUDA_SUCCESS) return true;  // wait() reports it
  // Not ready only while the work is pending; a failure counts as done (wait() throws it).
  return api.cuEventQuery(event_) != CUDA_ERROR_NOT_READY;
}

void CudaEvent::wait() const {
  const std::string what = fmt::format("waiting for work on {}", where_);
  set_current(*driver_, context_, what);
  cuda_detail::check(driver_->api(), driver_->api().cuEventSynchronize(event_), "cuEventSynchronize", what);
}

// ---------------------------------------------------------------------------------------------
// CudaStream

CudaStream::CudaStream(std::shared_ptr<CudaDriver> driver, CUctx_st* context, std::string name)
    : driver_(std::move(driver)), context_(context), name_(std::move(name)) {
  const std::string what = fmt::format("creating stream {}", name_);
  set_current(*driver_, context_, what);
  cuda_detail::check(driver_->api(), driver_->api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate",
                     what);
}

std::unique_ptr<CudaStream> CudaDevice::create_stream(const std::string& purpose) const {
  return std::unique_ptr<CudaStream>(new CudaStream(driver_, context_, name() + " " + purpose));
}

CudaStream::~CudaStream() {
  if (stream_ == nullptr) return;
  (void)driver_->api().cuCtxSetCurrent(context_);
  (void)driver_->api().cuStreamDestroy_v2(stream_);
}

void CudaStream::synchronize() const {
  const std::string what = fmt::format("synchronizing stream {}", name_);
  set_current(*driver_, context_, what);
  cuda_detail::check(driver_->api(), driver_->api().cuStreamSynchronize(stream_), "cuStreamSynchronize", what);
}

std::shared_ptr<CudaEvent> CudaStream::record() const {
  std::shared_ptr<CudaEvent> e(new CudaEvent(driver_, context_, name_));
  cuda_detail::check(driver_->api(), driver_->api().cuEventRecord(e->handle(), stream_), "cuEventRecord",
                     fmt::format("recording an event on {}", name_));
  return e;
}

void CudaStream::wait(const CudaEvent& event) const {
  const std::string what = fmt::format("making stream {} wait for an event", name_);
  set_current(*driver_, context_, what);
  cuda_detail::check(driver_->api(), driver_->api().cuStreamWaitEvent(stream_, event.handle(), 0), "cuStreamWaitEvent",
                     what);
}

// ---------------------------------------------------------------------------------------------
// CudaMemoryBackend

CudaMemoryBackend::CudaMemoryBackend(std::shared_ptr<CudaDriver> driver, CUctx_st* context, int ordinal)
    : driver_(std::move(driver)), context_(context), ordinal_(ordinal) {}

std::string CudaMemoryBackend::device_name() const { return fmt::format("cuda:{}", ordinal_); }

void* CudaMemoryBackend::allocate_raw(int64_t bytes) {
  const std::string what = fmt::format("allocating {} on {}", format_bytes(bytes), device_name());
  set_current(*driver_, context_, what);
  CUdeviceptr p = 0;
  const CUresult r = driver_->api().cuMemAlloc_v2(&p, static_cast<size_t>(bytes));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  cuda_detail::check(driver_->api(), r, "cuMemAlloc", what);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

void CudaMemoryBackend::free_raw(void* ptr, int64_t bytes) {
  const std::string what = fmt::format("freeing {} on {}", format_bytes(bytes), device_name());
  set_current(*driver_, context_, what);
  cuda_detail::check(driver_->api(), driver_->api().cuMemFree_v2(device_ptr(ptr)), "cuMemFree", what);
}

DeviceMemoryInfo CudaMemoryBackend::memory_info() const {
  const std::string what = fmt::format("querying the free memory of {}", device_name());
  set_current(*driver_, context_, what);
  size_t free_bytes = 0, total_bytes = 0;
  cuda_detail::check(driver_->api(), driver_->api().cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo", what);
  return DeviceMemoryInfo{static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

// ---------------------------------------------------------------------------------------------
// CudaDevice

namespace {

/// The staging-to-destination copy a device-to-host transfer runs on the copy stream.
struct HostCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

/// Runs on the copy stream (cuLaunchHostFunc) after a device-to-staging copy.
void CUDA_CB copy_out_of_staging(void* user_data) {
  const auto* job = static_cast<const HostCopy*>(user_data);
  std::memcpy(job->dst, job->src, job->bytes);
}

}  // namespace

/// One pinned host buffer and the event of the last copy that used it (the buffer is refilled
/// only after that event). `pending` lives here so it outlives the stream's host function.
struct CudaDevice::StagingBuffer {
  void* host = nullptr;
  int64_t bytes = 0;
  std::shared_ptr<CudaEvent> last_use;
  HostCopy pending;
};

namespace {

void check_options(const CudaDeviceOptions& options) {
  if (options.staging_buffer_bytes <= 0 || options.num_staging_buffers < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CudaDeviceOptions: staging_buffer_bytes = {} and "
                            "num_staging_buffers = {} must be >= 1",
                            options.staging_buffer_bytes, options.num_staging_buffers),
                "the defaults (two 8 MiB buffers) suit most input pipelines");
  }
}

}  // namespace

namespace {

/// The runtime's transfers (device_put, reshard, to_host) for a CUDA device's arrays: blocking
/// copies through the device's staging buffers, ordered after its queued compute work.
class CudaTransfer final : public DeviceTransfer {
 public:
  explicit CudaTransfer(CudaDevice& device) : device_(device) {}
  void to_device(const void* host, void* device_memory, int64_t bytes) override {
    device_.copy_to_device_async(host, device_memory, bytes)->wait();
  }
  void to_host(const void* device_memory, void* host, int64_t bytes) override {
    device_.copy_to_host_async(device_memory, host, bytes)->wait();
  }

 private:
  CudaDevice& device_;
};

}  // namespace

CudaDevice::CudaDevice(std::shared_ptr<CudaDriver> driver, int ordinal)
    : driver_(std::move(driver)), ordinal_(ordinal) {}

std::unique_ptr<CudaDevice> CudaDevice::open(std::shared_ptr<CudaDriver> driver, int ordinal,
                                             const CudaDeviceOptions& options) {
  if (driver == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("CudaDevice::open(cuda:{}): driver is null", ordinal),
                "create one with CudaDriver::load()");
  }
  driver->check_device(ordinal);
  check_options(options);
  std::unique_ptr<CudaDevice> d(new CudaDevice(driver, ordinal));
  const cuda_detail::DriverApi& api = driver->api();
  const std::string what = fmt::format("opening {}", d->name());
  d->product_name_ = driver->device_name(ordinal);
  CUdevice dev = 0;
  cuda_detail::check(api, api.cuDeviceGet(&dev, ordinal), "cuDeviceGet", what);
  d->cu_device_ = dev;
  CUcontext ctx = nullptr;
  cuda_detail::check(api, api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", what);
  d->context_ = ctx;
  d->compute_.reset(new CudaStream(driver, ctx, d->name() + " compute"));
  d->copy_.reset(new CudaStream(driver, ctx, d->name() + " copy"));
  auto allocator = std::make_unique<CachingAllocator>(std::make_unique<CudaMemoryBackend>(driver, ctx, ordinal));
  d->allocator_ = allocator.get();
  d->device_ = std::make_unique<Device>(DeviceKind::kCuda, ordinal, std::move(allocator));
  d->create_staging_buffers(options);
  d->transfer_ = std::make_unique<CudaTransfer>(*d);
  d->device_->set_transfer(d->transfer_.get());
  return d;
}

void CudaDevice::create_staging_buffers(const CudaDeviceOptions& options) {
  const cuda_detail::DriverApi& api = driver_->api();
  make_current();
  for (int i = 0; i < options.num_staging_buffers; ++i) {
    auto sb = std::make_unique<StagingBuffer>();
    sb->bytes = options.staging_buffer_bytes;
    cuda_detail::check(api, api.cuMemHostAlloc(&sb->host, static_cast<size_t>(sb->bytes), CU_MEMHOSTALLOC_PORTABLE),
                       "cuMemHostAlloc",
                       fmt::format("allocating a {} pinned staging buffer for {}", format_bytes(sb->bytes), name()));
    staging_.push_back(std::move(sb));
  }
}

CudaDevice::~CudaDevice() {
  if (context_ == nullptr) return;
  const cuda_detail::DriverApi& api = driver_->api();
  (void)api.cuCtxSetCurrent(context_);
  // Pending copies read or write the staging buffers: let both streams drain first. Errors of
  // that work were (or will be) reported through its events.
  if (compute_) (void)api.cuStreamSynchronize(compute_->handle());
  if (copy_) (void)api.cuStreamSynchronize(copy_->handle());
  for (auto& sb : staging_) {
    sb->last_use.reset();
    if (sb->host != nullptr) (void)api.cuMemFreeHost(sb->host);
  }
  device_.reset();  // the allocator returns its segments (cuMemFree)
  copy_.reset();
  compute_.reset();
  (void)api.cuDevicePrimaryCtxRelease_v2(cu_device_);
}

std::string CudaDevice::name() const { return fmt::format("cuda:{}", ordinal_); }

void CudaDevice::make_current() const { set_current(*driver_, context_, "using " + name()); }

DeviceMemoryInfo CudaDevice::memory_info() const { return allocator_->backend().memory_info(); }

void CudaDevice::synchronize() const {
  compute_->synchronize();
  copy_->synchronize();
}

CudaDevice::StagingBuffer& CudaDevice::next_staging_buffer() {
  StagingBuffer& sb = *staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % staging_.size();
  // The copy that used this buffer last must be done before the buffer is refilled.
  if (sb.last_use != nullptr) sb.last_use->wait();
  return sb;
}

namespace {

void check_copy_arguments(const char* what, const void* src, const void* dst, int64_t bytes) {
  if (bytes < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: bytes = {} is negative", what, bytes),
                "pass the number of bytes to copy");
  }
  if (bytes > 0 && (src == nullptr || dst == nullptr)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} is null for a copy of {} bytes", what, src == nullptr ? "src" : "dst", bytes),
                "pass valid host and device pointers");
  }
}

}  // namespace

std::shared_ptr<CudaEvent> CudaDevice::copy_to_device_async(const void* src, void* dst, int64_t bytes,
                                                            CopyOrder order) {
  check_copy_arguments("CudaDevice::copy_to_device_async", src, dst, bytes);
  std::lock_guard<std::mutex> lock(transfer_mu_);
  make_current();
  if (order == CopyOrder::kAfterQueuedCompute) copy_->wait(*compute_->record());
  const cuda_detail::DriverApi& api = driver_->api();
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  std::shared_ptr<CudaEvent> last;
  for (int64_t offset = 0; offset < bytes;) {
    StagingBuffer& sb = next_staging_buffer();
    const int64_t n = std::min(sb.bytes, bytes - offset);
    std::memcpy(sb.host, from + offset, static_cast<size_t>(n));
    cuda_detail::check(
        api, api.cuMemcpyHtoDAsync_v2(device_ptr(to + offset), sb.host, static_cast<size_t>(n), copy_->handle()),
        "cuMemcpyHtoDAsync", fmt::format("copying {} from the host to {}", format_bytes(n), name()));
    sb.last_use = copy_->record();
    last = sb.last_use;
    offset += n;
  }
  return last != nullptr ? last : copy_->record();
}

std::shared_ptr<CudaEvent> CudaDevice::copy_to_host_async(const void* src, void* dst, int64_t bytes) {
  check_copy_arguments("CudaDevice::copy_to_host_async", src, dst, bytes);
  std::lock_guard<std::mutex> lock(transfer_mu_);
  make_current();
  copy_->wait(*compute_->record());
  const cuda_detail::DriverApi& api = driver_->api();
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  std::shared_ptr<CudaEvent> last;
  for (int64_t offset = 0; offset < bytes;) {
    StagingBuffer& sb = next_staging_buffer();
    const int64_t n = std::min(sb.bytes, bytes - offset);
    const std::string what = fmt::format("copying {} from {} to the host", format_bytes(n), name());
    cuda_detail::check(
        api, api.cuMemcpyDtoHAsync_v2(sb.host, device_ptr(from + offset), static_cast<size_t>(n), copy_->handle()),
        "cuMemcpyDtoHAsync", what);
    sb.pending = {to + offset, sb.host, static_cast<size_t>(n)};
    cuda_detail::check(api, api.cuLaunchHostFunc(copy_->handle(), copy_out_of_staging, &sb.pending), "cuLaunchHostFunc",
                       what);
    sb.last_use = copy_->record();
    last = sb.last_use;
    offset += n;
  }
  return last != nullptr ? last : copy_->record();
}

std::shared_ptr<CudaEvent> CudaDevice::copy_within_device_async(const void* src, void* dst, int64_t bytes) {
  check_copy_arguments("CudaDevice::copy_within_device_async", src, dst, bytes);
  make_current();
  if (bytes > 0) {
    const cuda_detail::DriverApi& api = driver_->api();
    cuda_detail::check(
        api, api.cuMemcpyDtoDAsync_v2(device_ptr(dst), device_ptr(src), static_cast<size_t>(bytes), compute_->handle()),
        "cuMemcpyDtoDAsync", fmt::format("copying {} within {}", format_bytes(bytes), name()));
  }
  return compute_->record();
}

std::shared_ptr<CudaEvent> CudaDevice::copy_async(const Array& src, Array& dst, CopyOrder order) {
  if (src.shape() != dst.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("CudaDevice::copy_async: src has shape {} but dst has shape {}",
                            shape_to_string(src.shape()), shape_to_string(dst.shape())),
                "allocate dst with the shape of src");
  }
  if (src.dtype() != dst.dtype()) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("CudaDevice::copy_async: src has dtype {} but dst has dtype {}", dtype_name(src.dtype()),
                            dtype_name(dst.dtype())),
                "allocate dst with the dtype of src");
  }
  Device& from = src.device();
  Device& to = dst.device();
  if (from.kind() == DeviceKind::kCpu && &to == device_.get()) {
    return copy_to_device_async(src.raw_data(), dst.raw_data(), src.nbytes(), order);
  }
  if (&from == device_.get() && to.kind() == DeviceKind::kCpu) {
    return copy_to_host_async(src.raw_data(), dst.raw_data(), src.nbytes());
  }
  if (&from == device_.get() && &to == device_.get()) {
    return copy_within_device_async(src.raw_data(), dst.raw_data(), src.nbytes());
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("CudaDevice::copy_async on {}: copies from {} to {} are neither between the "
                          "host and this device nor within it",
                          name(), from.name(), to.name()),
              "copy through the host, or call copy_async on the CudaDevice that owns the array");
}

}  // namespace ingot
