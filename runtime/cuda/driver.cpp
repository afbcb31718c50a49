// CudaDriver: libcuda.so.1 through dlopen, its entry points, and CUresult -> ingot::Error.
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "cuda/driver_api.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/error.h"

namespace ingot {
namespace cuda_detail {

std::string describe(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return fmt::format("CUresult {}", static_cast<int>(result));
  }
  if (api.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) return name;
  return fmt::format("{} ({})", name, text);
}

namespace {

ErrorCode code_of(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return ErrorCode::kOutOfMemory;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      return ErrorCode::kInvalidArgument;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
      return ErrorCode::kNotFound;
    default:
      return ErrorCode::kFailedPrecondition;
  }
}

std::string hint_of(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "reduce the batch size or the model, or free arrays that are no longer needed";
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
      return "check nvidia-smi and CUDA_VISIBLE_DEVICES";
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return "the driver cannot JIT this PTX: update the NVIDIA driver, or compile for an older "
             "PTX ISA (CudaCompileOptions) or for this GPU's architecture";
    default:
      return "a failed kernel or copy leaves the device unusable for this process; rerun with "
             "CUDA_LAUNCH_BLOCKING=1 to find the failing call";
  }
}

}  // namespace

void check(const DriverApi& api, CUresult result, std::string_view call, std::string_view context) {
  if (result == CUDA_SUCCESS) return;
  throw Error(code_of(result), fmt::format("{} failed while {}: {}", call, context, describe(api, result)),
              hint_of(result));
}

}  // namespace cuda_detail

namespace {

constexpr const char* kInstallHint =
    "install the NVIDIA driver (libcuda.so.1) on a machine with a GPU, or use CPU devices";

}  // namespace

CudaDriver::CudaDriver() : api_(std::make_unique<cuda_detail::DriverApi>()) {}

CudaDriver::~CudaDriver() {
  // A driver that initialised stays loaded: libcuda keeps threads and exit handlers that must
  // not lose their code (PyTorch and JAX never unload it either). dlopen is reference counted,
  // so this keeps one reference per CudaDriver that initialised.
  if (library_ != nullptr && !initialised_) dlclose(library_);
}

std::shared_ptr<CudaDriver> CudaDriver::load(const std::string& library) {
  std::shared_ptr<CudaDriver> d(new CudaDriver());
  d->source_ = library;
  dlerror();
  d->library_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (d->library_ == nullptr) {
    const char* err = dlerror();
    d->reason_ = fmt::format("the CUDA driver library {} could not be loaded: {}", library,
                             err != nullptr ? err : "unknown dlopen error");
    return d;
  }
  void* handle = d->library_;
  CudaSymbolResolver resolve = [handle](const char* symbol) { return dlsym(handle, symbol); };
  d->initialise(resolve);
  return d;
}

std::shared_ptr<CudaDriver> CudaDriver::from_resolver(std::string source, CudaSymbolResolver resolve) {
  std::shared_ptr<CudaDriver> d(new CudaDriver());
  d->source_ = std::move(source);
  if (!resolve) {
    d->reason_ = fmt::format("no symbol resolver was given for {}", d->source_);
    return d;
  }
  d->initialise(resolve);
  return d;
}

void CudaDriver::initialise(CudaSymbolResolver& resolve) {
  cuda_detail::DriverApi& api = *api_;
  std::vector<std::string> missing;
#define INGOT_CUDA_RESOLVE_ENTRY(name)                             \
  api.name = reinterpret_cast<decltype(api.name)>(resolve(#name)); \
  if (api.name == nullptr) missing.push_back(#name);
  INGOT_CUDA_DRIVER_ENTRY_POINTS(INGOT_CUDA_RESOLVE_ENTRY)
#undef INGOT_CUDA_RESOLVE_ENTRY
  if (!missing.empty()) {
    reason_ = fmt::format(
        "{} is not a usable CUDA driver: it lacks {} (needs a driver for "
        "CUDA 12 or newer)",
        source_, fmt::join(missing, ", "));
    return;
  }
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    reason_ = fmt::format("cuInit failed: {}", cuda_detail::describe(api, r));
    return;
  }
  initialised_ = true;
  int version = 0;
  if (api.cuDriverGetVersion(&version) == CUDA_SUCCESS) driver_version_ = version;
  int count = 0;
  r = api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    reason_ = fmt::format("cuDeviceGetCount failed: {}", cuda_detail::describe(api, r));
    return;
  }
  if (count <= 0) {
    reason_ = "the CUDA driver reports no device (cuDeviceGetCount = 0)";
    return;
  }
  device_count_ = count;
  available_ = true;
}

void CudaDriver::check_device(int ordinal) const {
  if (!available_) {
    throw Error(ErrorCode::kNotFound, fmt::format("cannot use device cuda:{}: {}", ordinal, reason_),
                initialised_ ? "check nvidia-smi and CUDA_VISIBLE_DEVICES, or use CPU devices" : kInstallHint);
  }
  if (ordinal < 0 || ordinal >= device_count_) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("cannot use device cuda:{}: index out of range, this machine has "
                            "{} CUDA device{} (cuda:0 to cuda:{})",
                            ordinal, device_count_, device_count_ == 1 ? "" : "s", device_count_ - 1),
                "pick an index below the device count (CUDA_VISIBLE_DEVICES renumbers them)");
  }
}

std::string CudaDriver::device_name(int ordinal) const {
  check_device(ordinal);
  CUdevice dev = 0;
  const std::string where = fmt::format("getting the name of cuda:{}", ordinal);
  cuda_detail::check(*api_, api_->cuDeviceGet(&dev, ordinal), "cuDeviceGet", where);
  char name[256] = {};
  cuda_detail::check(*api_, api_->cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName", where);
  return name;
}

std::pair<int, int> CudaDriver::device_compute_capability(int ordinal) const {
  check_device(ordinal);
  CUdevice dev = 0;
  const std::string where = fmt::format("reading the compute capability of cuda:{}", ordinal);
  cuda_detail::check(*api_, api_->cuDeviceGet(&dev, ordinal), "cuDeviceGet", where);
  int major = 0, minor = 0;
  cuda_detail::check(*api_, api_->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                     "cuDeviceGetAttribute", where);
  cuda_detail::check(*api_, api_->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                     "cuDeviceGetAttribute", where);
  return {major, minor};
}

int64_t CudaDriver::device_total_memory(int ordinal) const {
  check_device(ordinal);
  CUdevice dev = 0;
  const std::string where = fmt::format("getting the memory size of cuda:{}", ordinal);
  cuda_detail::check(*api_, api_->cuDeviceGet(&dev, ordinal), "cuDeviceGet", where);
  size_t bytes = 0;
  cuda_detail::check(*api_, api_->cuDeviceTotalMem_v2(&bytes, dev), "cuDeviceTotalMem", where);
  return static_cast<int64_t>(bytes);
}

}  // namespace ingot
