// What a machine offers ingot's CUDA back end, for `ingot cuda-info` and the first run on a new
// GPU machine (docs/runtime-cuda.md): the driver, its devices, and where each NVIDIA library
// ingot dlopens was found (or why not).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/runtime/cuda.h"
#include "ingot/runtime/library_search.h"

namespace ingot {

/// One library: found (path, how, version when it tells) or missing (reason).
struct CudaLibraryReport {
  std::string name;     ///< "cuBLAS", "cuBLASLt", "cuDNN", "NCCL"
  bool found = false;   ///< loaded and has every entry point ingot uses
  std::string path;     ///< the file loaded ("" when not found)
  std::string source;   ///< LibraryCandidate::source
  std::string version;  ///< e.g. NCCL's "2.28.9"; "" when the library does not say
  std::string reason;   ///< why not found (every place tried), "" when found
};

/// One device of the driver.
struct CudaDeviceReport {
  int ordinal = 0;
  std::string name;  ///< "NVIDIA H200"
  int compute_major = 0, compute_minor = 0;
  int64_t total_memory = 0;  ///< bytes
};

/// The whole report.
struct CudaInfo {
  std::string driver_source;  ///< the driver library's path (or the fake's name)
  bool driver_available = false;
  std::string driver_reason;  ///< why not available
  int driver_version = 0;     ///< 1000 * major + 10 * minor (13000: CUDA 13.0)
  std::vector<CudaDeviceReport> devices;
  std::vector<CudaLibraryReport> libraries;  ///< cuBLAS, cuBLASLt, cuDNN, NCCL in that order
};

/// Asks `driver` (may be unavailable; devices are then empty) and loads each library with
/// `search` (CublasLibrary / CudnnLibrary / NcclLibrary::load(search)). Never throws for a
/// missing driver, device or library: each is reported.
CudaInfo cuda_info(const std::shared_ptr<CudaDriver>& driver, const LibrarySearch& search);

/// The report as text, one line per item:
///   driver: /usr/lib/x86_64-linux-gnu/libcuda.so.1, CUDA 13.0, 1 device
///   cuda:0: NVIDIA H200, compute capability 9.0, 139.8 GiB
///   cuBLAS: /usr/local/cuda/lib64/libcublas.so.13 (CUDA toolkit)
///   cuDNN: missing: the cuDNN library libcudnn.so.9 was not found; tried ...
std::string format_cuda_info(const CudaInfo& info);

}  // namespace ingot
