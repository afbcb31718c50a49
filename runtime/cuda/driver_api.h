// The CUDA driver API entry points ingot uses, resolved at run time from libcuda.so.1 (never
// linked), and the one place CUresult codes become ingot::Error. Private to runtime/cuda/.
#pragma once

#include <cuda.h>

#include <string>
#include <string_view>

namespace ingot::cuda_detail {

// Every entry point, by the versioned symbol cuda.h maps its plain name to (cuMemAlloc ->
// cuMemAlloc_v2, ...), so the ABI matches the declarations in cuda.h.
#define INGOT_CUDA_DRIVER_ENTRY_POINTS(X) \
  X(cuInit)                               \
  X(cuDriverGetVersion)                   \
  X(cuGetErrorString)                     \
  X(cuGetErrorName)                       \
  X(cuDeviceGetCount)                     \
  X(cuDeviceGet)                          \
  X(cuDeviceGetName)                      \
  X(cuDeviceTotalMem_v2)                  \
  X(cuDevicePrimaryCtxRetain)             \
  X(cuDevicePrimaryCtxRelease_v2)         \
  X(cuCtxSetCurrent)                      \
  X(cuMemGetInfo_v2)                      \
  X(cuMemAlloc_v2)                        \
  X(cuMemFree_v2)                         \
  X(cuMemHostAlloc)                       \
  X(cuMemFreeHost)                        \
  X(cuMemcpyHtoDAsync_v2)                 \
  X(cuMemcpyDtoHAsync_v2)                 \
  X(cuMemcpyDtoDAsync_v2)                 \
  X(cuStreamCreate)                       \
  X(cuStreamDestroy_v2)                   \
  X(cuStreamSynchronize)                  \
  X(cuStreamWaitEvent)                    \
  X(cuLaunchHostFunc)                     \
  X(cuEventCreate)                        \
  X(cuEventRecord)                        \
  X(cuEventQuery)                         \
  X(cuEventSynchronize)                   \
  X(cuEventDestroy_v2)                    \
  X(cuDeviceGetAttribute)                 \
  X(cuModuleLoadDataEx)                   \
  X(cuModuleGetFunction)                  \
  X(cuModuleUnload)                       \
  X(cuLaunchKernel)                       \
  X(cuStreamBeginCapture_v2)              \
  X(cuStreamEndCapture)                   \
  X(cuGraphInstantiateWithFlags)          \
  X(cuGraphLaunch)                        \
  X(cuGraphExecDestroy)                   \
  X(cuGraphDestroy)

/// Function pointers to the driver's entry points (all non-null once resolved).
struct DriverApi {
#define INGOT_CUDA_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  INGOT_CUDA_DRIVER_ENTRY_POINTS(INGOT_CUDA_DECLARE_ENTRY)
#undef INGOT_CUDA_DECLARE_ENTRY
};

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for `result`, through cuGetErrorName/String.
std::string describe(const DriverApi& api, CUresult result);

/// Throws the ingot::Error for a failed call unless `result` is CUDA_SUCCESS. `call` names the
/// entry point, `context` what it was doing ("allocating 1024 bytes on cuda:0"). Codes:
/// out of memory -> kOutOfMemory; invalid value/handle -> kInvalidArgument; no/invalid device
/// -> kNotFound; anything else (a failed or lost device, a launch failure) ->
/// kFailedPrecondition.
void check(const DriverApi& api, CUresult result, std::string_view call, std::string_view context);

}  // namespace ingot::cuda_detail
