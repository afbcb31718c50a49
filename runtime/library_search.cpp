// Finding and opening the NVIDIA libraries (include/ingot/runtime/library_search.h).
#include "ingot/runtime/library_search.h"

#include <dlfcn.h>
#include <link.h>

#include <fmt/format.h>

#include "ingot/runtime/error.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace ingot {

namespace fs = std::filesystem;

namespace {

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows symbolic links, as the loader does
}

/// The sorted entries of `dir` that are folders and satisfy `keep`; none when it is not a folder.
template <class Keep>
std::vector<fs::path> subfolders(const fs::path& dir, Keep keep) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2) && keep(it->path().filename().string())) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Every <prefix>/lib/python3*/site-packages/nvidia/<package>/ folder of the search's Python
/// prefixes, in prefix order, each level sorted (where pip's nvidia-* wheels unpack).
std::vector<fs::path> nvidia_packages(const LibrarySearch& search) {
  std::vector<fs::path> out;
  for (const std::string& prefix : search.python_prefixes) {
    const auto pythons =
        subfolders(fs::path(prefix) / "lib", [](const std::string& n) { return n.rfind("python3", 0) == 0; });
    for (const fs::path& python : pythons) {
      for (const fs::path& package :
           subfolders(python / "site-packages" / "nvidia", [](const std::string&) { return true; })) {
        out.push_back(package);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<LibraryCandidate> library_candidates(const std::string& soname, const LibrarySearch& search) {
  std::vector<LibraryCandidate> out;
  auto add_if_file = [&](const fs::path& dir, const char* source) {
    const fs::path p = dir / soname;
    if (is_file(p)) out.push_back({p.string(), source});
  };
  for (const std::string& dir : search.dirs) add_if_file(dir, "INGOT_CUDA_LIB_DIRS / LibrarySearch::dirs");
  if (!search.toolkit_root.empty()) {
    add_if_file(fs::path(search.toolkit_root) / "lib64", "CUDA toolkit");
    add_if_file(fs::path(search.toolkit_root) / "targets" / "x86_64-linux" / "lib", "CUDA toolkit");
  }
  if (search.loader_path) out.push_back({soname, "dynamic loader"});
  for (const fs::path& package : nvidia_packages(search)) add_if_file(package / "lib", "Python environment");
  return out;
}

namespace {

constexpr const char* kLibdevice = "libdevice.10.bc";

/// The places libdevice_candidates looks in, existing or not, with their sources.
std::vector<LibraryCandidate> libdevice_places(const LibrarySearch& search) {
  std::vector<LibraryCandidate> out;
  for (const std::string& dir : search.dirs)
    out.push_back({(fs::path(dir) / kLibdevice).string(), "INGOT_CUDA_LIB_DIRS / LibrarySearch::dirs"});
  if (!search.toolkit_root.empty())
    out.push_back({(fs::path(search.toolkit_root) / "nvvm" / "libdevice" / kLibdevice).string(), "CUDA toolkit"});
  for (const fs::path& package : nvidia_packages(search))
    out.push_back({(package / "nvvm" / "libdevice" / kLibdevice).string(), "Python environment"});
  std::error_code ec;
  const fs::path exe = search.beside_executable ? fs::read_symlink("/proc/self/exe", ec) : fs::path();
  if (search.beside_executable && !ec) {
    out.push_back(
        {(exe.parent_path().parent_path() / "share" / "ingot" / kLibdevice).string(), "beside the executable"});
  }
  return out;
}

}  // namespace

std::vector<LibraryCandidate> libdevice_candidates(const LibrarySearch& search) {
  std::vector<LibraryCandidate> out;
  for (LibraryCandidate& c : libdevice_places(search)) {
    if (is_file(c.path)) out.push_back(std::move(c));
  }
  return out;
}

LibraryCandidate find_libdevice(const LibrarySearch& search) {
  const std::vector<LibraryCandidate> found = libdevice_candidates(search);
  if (!found.empty()) return found.front();
  std::string tried;
  for (const LibraryCandidate& c : libdevice_places(search)) tried += fmt::format("\n  {} ({})", c.path, c.source);
  throw Error(ErrorCode::kNotFound,
              fmt::format("NVIDIA's libdevice ({}) was not found; looked in:{}", kLibdevice,
                          tried.empty() ? std::string(" nowhere (an empty search)") : tried),
              "install the CUDA toolkit (nvvm/libdevice/libdevice.10.bc), name its folder in INGOT_CUDA_LIB_DIRS / "
              "LibrarySearch::dirs, or set CudaCompileOptions::libdevice to the file");
}

std::string library_path(void* handle) {
  link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) {
    return {};
  }
  return map->l_name;
}

OpenedLibrary open_library(const std::string& soname, const LibrarySearch& search) {
  OpenedLibrary out;
  for (const LibraryCandidate& c : library_candidates(soname, search)) {
    dlerror();
    void* handle = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      out.failures.push_back(fmt::format("{} ({}): {}", c.path, c.source, err != nullptr ? err : "dlopen failed"));
      continue;
    }
    out.handle = handle;
    out.source = c.source;
    out.path = library_path(handle);
    if (out.path.empty()) out.path = c.path;
    return out;
  }
  if (!search.loader_path) out.failures.push_back(fmt::format("{}: the dynamic loader was not asked", soname));
  return out;
}

}  // namespace ingot
