// Loading a kernel's PTX as a driver module: the driver-version check and cuModuleLoadDataEx
// with the JIT's error log (runtime/cuda/module_load.cpp); internal to runtime/cuda.
#pragma once

#include <string>

#include "cuda/driver_api.h"

namespace ingot::cuda_detail {

/// Throws ingot::Error(kFailedPrecondition) naming `what`, the PTX's ISA version (its ".version"
/// line), the CUDA version that ISA needs and the one `driver_version` (cuDriverGetVersion's
/// 1000 * major + 10 * minor) supports, when the driver is too old; nothing when the PTX has
/// no version line or one newer than the table knows.
void check_ptx_driver(const std::string& ptx, int driver_version, const std::string& what);

/// cuModuleLoadDataEx of `ptx` with an 8 KiB error log; a failure is the converted CUDA error
/// naming `what`, with the driver JIT's log appended when it wrote one.
void load_module(const DriverApi& api, CUmodule* module, const std::string& ptx, const std::string& what);

}  // namespace ingot::cuda_detail
