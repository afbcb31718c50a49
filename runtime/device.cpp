#include "ingot/runtime/device.h"

#include <fmt/format.h>

#include <cstdlib>
#include <new>

#include "ingot/runtime/error.h"
#include "ingot/runtime/worker.h"

namespace ingot {

void* HostAllocator::allocate(int64_t bytes, int64_t alignment) {
  if (bytes < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("HostAllocator::allocate: bytes = {} is negative", bytes));
  }
  void* p = nullptr;
  try {
    // Allocate at least one byte so every buffer has a distinct non-null pointer.
    // aligned_alloc needs a size that is a multiple of the alignment; allocate at least one
    // unit so every buffer has a distinct non-null pointer.
    int64_t rounded = bytes > 0 ? (bytes + alignment - 1) / alignment * alignment : alignment;
    p = std::aligned_alloc(static_cast<size_t>(alignment), static_cast<size_t>(rounded));
    if (p == nullptr) throw std::bad_alloc();
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kOutOfMemory,
                fmt::format("host allocation of {} bytes failed ({} bytes in use)", bytes, in_use_.load()),
                "reduce the batch size or free arrays that are no longer needed");
  }
  int64_t now = in_use_.fetch_add(bytes) + bytes;
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  allocs_.fetch_add(1);
  return p;
}

void HostAllocator::deallocate(void* ptr, int64_t bytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  in_use_.fetch_sub(bytes);
  frees_.fetch_add(1);
}

AllocatorStats HostAllocator::stats() const {
  return AllocatorStats{in_use_.load(), peak_.load(), allocs_.load(), frees_.load()};
}

void HostAllocator::reset_peak() { peak_.store(in_use_.load()); }

Device::Device(DeviceKind kind, int id, std::unique_ptr<Allocator> allocator)
    : kind_(kind), id_(id), allocator_(std::move(allocator)) {}

Device::~Device() { shutdown_worker(); }

std::shared_ptr<Event> Device::enqueue(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(worker_mu_);
  if (worker_shut_down_) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("Device::enqueue: the worker of {} was shut down", name()),
                "enqueue work only while the device's Runtime is alive");
  }
  if (!worker_) worker_ = std::make_unique<Worker>(name());
  return worker_->enqueue(std::move(work));
}

void Device::synchronize() {
  std::shared_ptr<Event> marker;
  {
    std::lock_guard<std::mutex> lock(worker_mu_);
    if (!worker_) return;  // nothing was ever queued, or the worker already drained
    marker = worker_->enqueue([] {});
  }
  marker->wait();
}

void Device::shutdown_worker() {
  std::unique_ptr<Worker> worker;
  {
    std::lock_guard<std::mutex> lock(worker_mu_);
    worker_shut_down_ = true;
    worker = std::move(worker_);
  }
  // Destroyed outside the lock: work still queued may call enqueue() (and get an error).
  worker.reset();
}

bool Device::has_worker() const {
  std::lock_guard<std::mutex> lock(worker_mu_);
  return worker_ != nullptr;
}

std::string Device::name() const { return fmt::format("{}:{}", kind_ == DeviceKind::kCpu ? "cpu" : "cuda", id_); }

Device& default_cpu_device() {
  static Device device(DeviceKind::kCpu, 0, std::make_unique<HostAllocator>());
  return device;
}

std::shared_ptr<Buffer> Buffer::allocate(Device& device, int64_t bytes) {
  void* p = device.allocator().allocate(bytes, kAlignment);
  return std::shared_ptr<Buffer>(new Buffer(device, p, bytes));
}

Buffer::~Buffer() {
  if (donated_to_.empty()) device_->allocator().deallocate(data_, bytes_);
}

std::shared_ptr<Buffer> Buffer::donate(const std::string& to) {
  if (!donated_to_.empty()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("array was donated to '{}' and cannot be donated again", donated_to_),
                "pass the outputs of that call instead");
  }
  std::shared_ptr<Buffer> taken(new Buffer(*device_, data_, bytes_));
  donated_to_ = to.empty() ? "a computation" : to;
  data_ = nullptr;
  return taken;
}

}  // namespace ingot
