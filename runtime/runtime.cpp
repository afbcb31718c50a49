#include "ingot/runtime/runtime.h"

#include <fmt/format.h>

#include <cstdio>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "ingot/runtime/error.h"

namespace ingot {

namespace {

int64_t live_buffers(const Device& d) {
  const AllocatorStats s = d.allocator().stats();
  return s.num_allocations - s.num_frees;
}

// "cpu:1 (2 buffers, 96 bytes), cpu:3 (1 buffer, 32 bytes)"; empty if nothing is alive.
std::string describe_live_buffers(const std::vector<Device*>& devices) {
  std::string out;
  for (const Device* d : devices) {
    const int64_t n = live_buffers(*d);
    if (n == 0) continue;
    out += fmt::format("{}{} ({} buffer{}, {} bytes)", out.empty() ? "" : ", ", d->name(), n, n == 1 ? "" : "s",
                       d->allocator().stats().bytes_in_use);
  }
  return out;
}

}  // namespace

Runtime::Runtime(const RuntimeOptions& options) {
  if (options.num_cpu_devices < 1 || options.num_cpu_devices > RuntimeOptions::kMaxCpuDevices) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Runtime: num_cpu_devices = {} is outside [1, {}]", options.num_cpu_devices,
                            RuntimeOptions::kMaxCpuDevices),
                "ask for at least one CPU device");
  }
  for (int i = 0; i < options.num_cpu_devices; ++i) {
    owned_.push_back(std::make_unique<Device>(DeviceKind::kCpu, i, std::make_unique<HostAllocator>()));
    devices_.push_back(owned_.back().get());
  }
}

Runtime::~Runtime() {
  for (Device* d : devices_) d->shutdown_worker();
  const std::string live = describe_live_buffers(devices_);
  if (live.empty()) return;
  std::fprintf(stderr,
               "ingot: Runtime destroyed while buffers on its devices are alive: %s. The Runtime "
               "must outlive its arrays; its devices are leaked so those buffers stay valid.\n",
               live.c_str());
  for (auto& d : owned_) {
    Device* leaked = d.release();  // deliberate leak, see the lifetime rule
#if defined(__SANITIZE_ADDRESS__)
    __lsan_ignore_object(leaked);  // intended: tell LeakSanitizer so it does not report it
#endif
    (void)leaked;
  }
}

Device& Runtime::device(int index) const {
  if (index < 0 || index >= num_devices()) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("Runtime::device: index {} is outside [0, {})", index, num_devices()));
  }
  return *devices_[static_cast<size_t>(index)];
}

Device& Runtime::device(std::string_view name) const {
  std::string names;
  for (Device* d : devices_) {
    if (d->name() == name) return *d;
    names += (names.empty() ? "" : ", ") + d->name();
  }
  throw Error(ErrorCode::kNotFound,
              fmt::format("Runtime::device: no device named '{}'; the runtime has {}", name, names));
}

void Runtime::synchronize() const {
  for (Device* d : devices_) d->synchronize();
}

int64_t Runtime::num_live_buffers() const {
  int64_t n = 0;
  for (const Device* d : devices_) n += live_buffers(*d);
  return n;
}

void Runtime::check_no_live_buffers() const {
  const std::string live = describe_live_buffers(devices_);
  if (!live.empty()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("Runtime: buffers are still alive on {}", live),
                "release every Array on the runtime's devices before destroying the Runtime");
  }
}

}  // namespace ingot
