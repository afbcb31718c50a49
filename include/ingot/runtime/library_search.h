// Finding the NVIDIA libraries ingot dlopens (cuBLAS, cuBLASLt, cuDNN, NCCL) and the libdevice
// bitcode the CUDA code generator links, where they are
// installed in practice: folders the user names, the CUDA toolkit, the dynamic loader's own path,
// and the nvidia/*/lib folders that pip wheels (nvidia-cublas-cu13, ...) unpack into a Python
// environment, which the loader does not search. Every open says where the library came from.
#pragma once

#include <string>
#include <vector>

namespace ingot {

/// Where open_library looks for a library, in this order (SharedLibrarySearch: the defaults are
/// the toolkit and the loader; the CLI adds INGOT_CUDA_LIB_DIRS and the active Python
/// environment, docs/runtime-cuda.md).
struct LibrarySearch {
  /// Folders searched first, in order (e.g. from `INGOT_CUDA_LIB_DIRS=/a:/b`, which only the
  /// `ingot` CLI reads; the library never reads environment variables).
  std::vector<std::string> dirs;
  /// The CUDA toolkit: its lib64/ and targets/x86_64-linux/lib/ are searched next ("" skips it).
  std::string toolkit_root = "/usr/local/cuda";
  /// Then the dynamic loader's own search (LD_LIBRARY_PATH, RUNPATH, ld.so.cache, /usr/lib).
  bool loader_path = true;
  /// Then, for each prefix (a virtualenv's or conda environment's root, e.g. $VIRTUAL_ENV or
  /// $CONDA_PREFIX), every <prefix>/lib/python3*/site-packages/nvidia/*/lib/ folder (sorted).
  std::vector<std::string> python_prefixes;
  /// find_libdevice only: last, <the running executable's folder>/../share/ingot/ (the GPU check
  /// bundle's copy).
  bool beside_executable = true;
};

/// One place a library may be: a file `path` (or a bare soname for the loader) and how it was
/// found ("INGOT_CUDA_LIB_DIRS / dirs", "CUDA toolkit", "dynamic loader", "Python environment").
struct LibraryCandidate {
  std::string path;
  std::string source;
};

/// The candidates for `soname` (e.g. "libcublas.so.13") in `search`'s order: files that exist in
/// the folders, then the bare soname when loader_path. Never throws for missing folders.
std::vector<LibraryCandidate> library_candidates(const std::string& soname, const LibrarySearch& search);

/// A library opened by open_library.
struct OpenedLibrary {
  void* handle = nullptr;  ///< dlopen's handle (RTLD_NOW | RTLD_LOCAL), or null when not found
  std::string path;        ///< the file opened (the loader's answer for a bare soname)
  std::string source;      ///< LibraryCandidate::source of the one that opened
  /// Why each candidate tried before failed, "path: dlerror" (all of them when handle is null).
  std::vector<std::string> failures;
};

/// Opens the first candidate of library_candidates(soname, search) that dlopen accepts. Never
/// throws: a library found nowhere has a null handle and its failures list every place tried
/// (a soname the loader does not know adds "libX.so.N: not found by the dynamic loader").
OpenedLibrary open_library(const std::string& soname, const LibrarySearch& search);

/// NVIDIA's libdevice bitcode (libdevice.10.bc, the math functions every CUDA kernel links), in
/// this order: <dir>/libdevice.10.bc for each of `search.dirs`; <toolkit_root>/nvvm/libdevice/;
/// each Python prefix's <prefix>/lib/python3*/site-packages/nvidia/*/nvvm/libdevice/ (the
/// nvidia-cuda-nvcc wheels); when beside_executable, <the running executable's folder>/../share/ingot/ (where the GPU
/// check bundle carries a copy, tools/make_gpu_bundle.sh). The candidates that exist, in order
/// (source: "INGOT_CUDA_LIB_DIRS / LibrarySearch::dirs", "CUDA toolkit", "Python environment",
/// "beside the executable"); never throws.
std::vector<LibraryCandidate> libdevice_candidates(const LibrarySearch& search);

/// The first of libdevice_candidates(search). Throws ingot::Error(kNotFound) listing every place
/// looked in when there is none, with what to do (install the toolkit, name a folder).
LibraryCandidate find_libdevice(const LibrarySearch& search);

/// The file the loader opened for `handle` (dlinfo's link map), or "" when it cannot tell.
std::string library_path(void* handle);

}  // namespace ingot
