// Loading a kernel's PTX as a driver module (runtime/cuda/module_load.h).
#include "cuda/module_load.h"

#include <fmt/format.h>

#include <cstdio>

#include "ingot/runtime/error.h"

namespace ingot::cuda_detail {

namespace {

/// The CUDA version (1000 * major + 10 * minor) whose driver first accepts PTX ISA
/// `major`.`minor` (NVIDIA's PTX ISA release notes: 7.x came with CUDA 11.x, 8.0-8.4 with
/// 12.0-12.4, 8.5 with 12.5, 8.6-8.8 with 12.7-12.9, 9.0 with 13.0); 0 when not in the table.
int cuda_for_ptx_isa(int major, int minor) {
  if (major == 7 && minor >= 0 && minor <= 8) return 11000 + 10 * minor;
  if (major == 8 && minor >= 0 && minor <= 5) return 12000 + 10 * minor;
  if (major == 8 && minor >= 6 && minor <= 8) return 12010 + 10 * minor;
  if (major == 9 && minor >= 0 && minor <= 1) return 13000 + 10 * minor;
  return 0;
}

}  // namespace

void check_ptx_driver(const std::string& ptx, int driver_version, const std::string& what) {
  const size_t at = ptx.find(".version ");
  if (at == std::string::npos || driver_version <= 0) return;
  int major = 0, minor = 0;
  if (std::sscanf(ptx.c_str() + at, ".version %d.%d", &major, &minor) != 2) return;
  const int needed = cuda_for_ptx_isa(major, minor);
  if (needed == 0 || driver_version >= needed) return;
  throw Error(
      ErrorCode::kFailedPrecondition,
      fmt::format("{}: the PTX is ISA {}.{}, which needs a driver for CUDA {}.{} or newer; this driver supports "
                  "CUDA {}.{}",
                  what, major, minor, needed / 1000, needed % 1000 / 10, driver_version / 1000,
                  driver_version % 1000 / 10),
      "update the NVIDIA driver (CUDA 13.0 needs driver 580 or newer), or compile for an older PTX ISA "
      "(CudaCompileOptions)");
}

void load_module(const DriverApi& api, CUmodule* module, const std::string& ptx, const std::string& what) {
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(sizeof(log))};
  const CUresult r = api.cuModuleLoadDataEx(module, ptx.c_str(), 2, options, values);
  if (r == CUDA_SUCCESS) return;
  try {
    check(api, r, "cuModuleLoadDataEx", what);
  } catch (const Error& e) {
    if (log[0] == '\0') throw;
    throw Error(e.code(), fmt::format("{}; the driver's JIT log: {}", e.message(), log), e.hint());
  }
}

}  // namespace ingot::cuda_detail
