// Hand-written CUDA kernels (kernels/cuda/*.cu; docs/kernels-cuda.md): their PTX, compiled by nvcc
// at build time for each architecture in cuda_kernel_archs() and embedded in the library, and the
// launch description every family's launcher returns (kernel name, grid, block, dynamic shared
// memory and the packed kernel parameters), ready for cuModuleLoadData + cuLaunchKernel. Nothing
// here talks to a driver: a runtime loads the PTX and launches; this library stays testable
// without a GPU.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::kernels {

/// A device address (the driver API's CUdeviceptr: a 64-bit integer).
using DevicePtr = uint64_t;

/// The hardware limits every launch description is checked against (all CUDA GPUs of compute
/// capability >= 8.0): threads per block, grid x / y / z extents, and the static + dynamic
/// shared memory a block may use without opting in to more (bytes).
inline constexpr int64_t kMaxThreadsPerBlock = 1024;
inline constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxGridYZ = 65535;
inline constexpr int64_t kMaxDefaultSharedBytes = 48 * 1024;

/// One kernel parameter as cuLaunchKernel reads it: `size` bytes (4 or 8) at `bytes`.
struct CudaKernelParam {
  std::array<std::byte, 8> bytes{};
  int64_t size = 0;
};

/// Packs a pointer-sized device address / a 64-bit index / a 32-bit float / a 32-bit int.
CudaKernelParam param_ptr(DevicePtr p);
CudaKernelParam param_i64(int64_t v);
CudaKernelParam param_f32(float v);
CudaKernelParam param_i32(int32_t v);

/// One kernel launch: the `.entry` name in the family's PTX, grid and block (x, y, z), dynamic
/// shared memory (bytes) and the parameters in the kernel's order.
struct CudaKernelLaunch {
  std::string kernel;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t shared_bytes = 0;
  std::vector<CudaKernelParam> params;

  /// The `kernelParams` array of cuLaunchKernel: one pointer to each parameter's bytes. Valid
  /// while this object lives and is not modified.
  std::vector<void*> param_pointers();
};

/// The architectures the kernels' PTX is built for: {"sm_80", "sm_90"}.
std::vector<std::string> cuda_kernel_archs();

/// The kernel families: {"softmax_cross_entropy", "layernorm", "adam", "attention", "conv", "bias"}.
std::vector<std::string> cuda_kernel_families();

/// True when the library was built with the CUDA toolkit (the PTX is embedded).
bool cuda_kernels_have_ptx();

/// The PTX text of `family` (one of cuda_kernel_families()) for `arch` (one of
/// cuda_kernel_archs()), for cuModuleLoadData (NUL-terminated). Throws ingot::Error kNotFound for
/// an unknown family or arch, kUnimplemented when the library was built without the CUDA toolkit.
std::string_view cuda_kernel_ptx(std::string_view family, std::string_view arch);

/// Throws ingot::Error kInvalidArgument naming `who` and the values unless `launch`'s block has
/// 1..kMaxThreadsPerBlock threads, each grid extent is within 1..kMaxGridX (x) / kMaxGridYZ (y,
/// z) and its shared memory plus `static_shared_bytes` is within kMaxDefaultSharedBytes.
void check_launch_limits(const CudaKernelLaunch& launch, int64_t static_shared_bytes, std::string_view who);

}  // namespace ingot::kernels
