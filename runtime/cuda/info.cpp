// `ingot cuda-info`'s report (include/ingot/runtime/cuda_info.h).
#include "ingot/runtime/cuda_info.h"

#include <fmt/format.h>

#include <tuple>

#include "ingot/runtime/cuda_dnn.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/error.h"
#include "ingot/runtime/nccl.h"

namespace ingot {

namespace {

CudaLibraryReport report(std::string name, bool available, const std::string& path, const std::string& source,
                         const std::string& reason) {
  CudaLibraryReport r{.name = std::move(name), .found = available, .path = path, .source = source};
  if (!available) r.reason = reason;
  return r;
}

}  // namespace

CudaInfo cuda_info(const std::shared_ptr<CudaDriver>& driver, const LibrarySearch& search) {
  CudaInfo info;
  info.driver_source = driver->source();
  info.driver_available = driver->available();
  info.driver_reason = driver->unavailable_reason();
  info.driver_version = driver->driver_version();
  if (driver->available()) {
    for (int i = 0; i < driver->device_count(); ++i) {
      CudaDeviceReport d{.ordinal = i};
      try {
        d.name = driver->device_name(i);
        std::tie(d.compute_major, d.compute_minor) = driver->device_compute_capability(i);
        d.total_memory = driver->device_total_memory(i);
      } catch (const Error& e) {
        d.name = fmt::format("(error: {})", e.what());
      }
      info.devices.push_back(d);
    }
  }
  const auto blas = CublasLibrary::load(search);
  info.libraries.push_back(
      report("cuBLAS", blas->available(), blas->path(), blas->source(), blas->unavailable_reason()));
  info.libraries.push_back(
      report("cuBLASLt", blas->available(), blas->lt_path(), blas->source(), blas->unavailable_reason()));
  const auto dnn = CudnnLibrary::load(search);
  info.libraries.push_back(report("cuDNN", dnn->available(), dnn->path(), dnn->source(), dnn->unavailable_reason()));
  const auto nccl = NcclLibrary::load(search);
  info.libraries.push_back(report("NCCL", nccl->available(), nccl->path(), nccl->source(), nccl->unavailable_reason()));
  info.libraries.back().version = nccl->version_string();
  return info;
}

std::string format_cuda_info(const CudaInfo& info) {
  std::string out;
  if (info.driver_available) {
    out += fmt::format("driver: {}, CUDA {}.{}, {} device{}\n", info.driver_source, info.driver_version / 1000,
                       info.driver_version % 1000 / 10, info.devices.size(), info.devices.size() == 1 ? "" : "s");
  } else {
    out += fmt::format("driver: not usable: {}\n", info.driver_reason);
  }
  for (const CudaDeviceReport& d : info.devices) {
    out += fmt::format("cuda:{}: {}, compute capability {}.{}, {:.1f} GiB\n", d.ordinal, d.name, d.compute_major,
                       d.compute_minor, static_cast<double>(d.total_memory) / (1 << 30));
  }
  for (const CudaLibraryReport& l : info.libraries) {
    if (l.found) {
      out +=
          fmt::format("{}: {} ({}{}{})\n", l.name, l.path, l.source, l.version.empty() ? "" : ", version ", l.version);
    } else {
      out += fmt::format("{}: missing: {}\n", l.name, l.reason);
    }
  }
  return out;
}

}  // namespace ingot
