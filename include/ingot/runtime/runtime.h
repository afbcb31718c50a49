// Runtime: an explicitly created set of devices, e.g. N virtual CPU devices in one process (JAX's
// --xla_force_host_platform_device_count, passed as an option instead of an environment variable).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "ingot/runtime/device.h"

namespace ingot {

/// Options of a Runtime.
struct RuntimeOptions {
  /// Largest accepted num_cpu_devices (each device may run a worker thread).
  static constexpr int kMaxCpuDevices = 1024;
  /// Number of virtual CPU devices "cpu:0".."cpu:N-1", in [1, kMaxCpuDevices].
  int num_cpu_devices = 1;
};

/// Owns a set of devices: `num_cpu_devices` CPU devices "cpu:0".."cpu:N-1", each with its own
/// HostAllocator (separate statistics) and its own worker thread (a FIFO work queue, started on
/// first use; Device::enqueue). These are distinct objects from default_cpu_device(), although
/// the first is also named "cpu:0". Thread-safe (the device list never changes).
///
/// Lifetime rule: the Runtime must outlive every Array, Buffer, Mesh and piece of work that uses
/// its devices. Violations are detected where cheap: check_no_live_buffers() throws while buffers
/// remain, and if buffers are still alive when the Runtime is destroyed, the destructor reports
/// them on stderr and deliberately leaks the devices (their workers are joined) so that those
/// buffers can still be freed safely later.
class Runtime {
 public:
  /// Throws ingot::Error(kInvalidArgument) if num_cpu_devices is outside [1, kMaxCpuDevices].
  explicit Runtime(const RuntimeOptions& options = {});
  /// Runs all work queued on every device and joins the workers (all devices first, so work on
  /// one device may still use buffers on another), then destroys the devices (see the lifetime
  /// rule above).
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Number of devices.
  int num_devices() const { return static_cast<int>(devices_.size()); }
  /// All devices in id order: cpu:0, cpu:1, ... (e.g. to build a Mesh).
  const std::vector<Device*>& devices() const { return devices_; }
  /// Device `index` in [0, num_devices()); ingot::Error(kOutOfRange) otherwise.
  Device& device(int index) const;
  /// Device named `name` ("cpu:2"); ingot::Error(kNotFound) naming it and the devices otherwise.
  Device& device(std::string_view name) const;

  /// Blocks until all work enqueued so far on every device has run.
  void synchronize() const;
  /// Number of buffers currently allocated on this runtime's devices (allocations minus frees).
  int64_t num_live_buffers() const;
  /// Throws ingot::Error(kFailedPrecondition) naming each device that still holds buffers, with
  /// their count and bytes; call before destroying the Runtime to catch arrays that outlive it.
  void check_no_live_buffers() const;

 private:
  std::vector<std::unique_ptr<Device>> owned_;
  std::vector<Device*> devices_;
};

}  // namespace ingot
