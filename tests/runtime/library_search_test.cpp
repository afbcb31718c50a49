// Finding the NVIDIA libraries (include/ingot/runtime/library_search.h): the search order over
// real folders, with a real shared library (zlib, copied) standing in for cuBLAS.
#include <dlfcn.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ingot/runtime/error.h"
#include "ingot/runtime/library_search.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

/// A scratch tree: dirs/, toolkit/lib64/, venv/lib/python3.11/site-packages/nvidia/{cublas,cudnn}/lib/.
struct Tree {
  // Per process: ctest runs these tests in parallel processes, which must not share the tree.
  fs::path root = fs::path(::testing::TempDir()) / ("ingot_library_search_test_" + std::to_string(::getpid()));
  Tree() {
    fs::remove_all(root);
    for (const char* d : {"dirs", "toolkit/lib64", "venv/lib/python3.11/site-packages/nvidia/cublas/lib",
                          "venv/lib/python3.11/site-packages/nvidia/cudnn/lib", "venv/lib/python3.12"}) {
      fs::create_directories(root / d);
    }
  }
  ~Tree() { fs::remove_all(root); }
  /// Copies a real shared library to `rel` (so dlopen succeeds), or writes junk (so it fails).
  void put(const std::string& rel, bool loadable = true) const {
    if (loadable) {
      void* z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
      ASSERT_NE(z, nullptr);
      const std::string zlib = library_path(z);
      ASSERT_FALSE(zlib.empty());
      fs::copy_file(zlib, root / rel, fs::copy_options::overwrite_existing);
    } else {
      std::ofstream(root / rel) << "not an ELF file";
    }
  }
  LibrarySearch search() const {
    return {.dirs = {(root / "dirs").string()},
            .toolkit_root = (root / "toolkit").string(),
            .loader_path = false,
            .python_prefixes = {(root / "venv").string()}};
  }
};

TEST(LibrarySearch, CandidatesComeInTheDocumentedOrder) {
  Tree t;
  t.put("venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.13");
  t.put("toolkit/lib64/libcublas.so.13");
  t.put("dirs/libcublas.so.13");
  LibrarySearch s = t.search();
  s.loader_path = true;
  const std::vector<LibraryCandidate> c = library_candidates("libcublas.so.13", s);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].path, (t.root / "dirs/libcublas.so.13").string());
  EXPECT_EQ(c[1].source, "CUDA toolkit");
  EXPECT_EQ(c[2].path, "libcublas.so.13");
  EXPECT_EQ(c[2].source, "dynamic loader");
  EXPECT_EQ(c[3].source, "Python environment");
  EXPECT_TRUE(library_candidates("libnccl.so.2", t.search()).empty());
}

TEST(LibrarySearch, OpensTheFirstLoadableAndSaysWhereFrom) {
  Tree t;
  t.put("dirs/libcublas.so.13", /*loadable=*/false);
  t.put("venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.13");
  const OpenedLibrary lib = open_library("libcublas.so.13", t.search());
  ASSERT_NE(lib.handle, nullptr);
  EXPECT_EQ(lib.source, "Python environment");
  EXPECT_EQ(fs::path(lib.path), t.root / "venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.13");
  ASSERT_EQ(lib.failures.size(), 1u);
  EXPECT_NE(lib.failures[0].find((t.root / "dirs/libcublas.so.13").string()), std::string::npos) << lib.failures[0];
}

TEST(LibrarySearch, ALibraryFoundNowhereListsEveryPlaceTried) {
  Tree t;
  LibrarySearch s = t.search();
  s.loader_path = true;
  const OpenedLibrary lib = open_library("libingot_no_such_library.so.7", s);
  EXPECT_EQ(lib.handle, nullptr);
  ASSERT_EQ(lib.failures.size(), 1u);  // only the loader had a candidate
  EXPECT_NE(lib.failures[0].find("libingot_no_such_library.so.7 (dynamic loader)"), std::string::npos)
      << lib.failures[0];
  const OpenedLibrary none = open_library("libingot_no_such_library.so.7", t.search());
  EXPECT_EQ(none.handle, nullptr);
  ASSERT_EQ(none.failures.size(), 1u);
  EXPECT_NE(none.failures[0].find("the dynamic loader was not asked"), std::string::npos);
}

TEST(LibrarySearch, TheLoaderPathGivesTheFileItOpened) {
  const OpenedLibrary z = open_library("libz.so.1", {.toolkit_root = ""});
  ASSERT_NE(z.handle, nullptr);
  EXPECT_EQ(z.source, "dynamic loader");
  EXPECT_TRUE(fs::path(z.path).is_absolute()) << z.path;
  EXPECT_NE(z.path.find("libz.so"), std::string::npos);
}

TEST(LibrarySearch, LibdeviceIsFoundInTheDocumentedOrder) {
  Tree t;
  fs::create_directories(t.root / "venv/lib/python3.11/site-packages/nvidia/cuda_nvcc/nvvm/libdevice");
  fs::create_directories(t.root / "toolkit/nvvm/libdevice");
  t.put("venv/lib/python3.11/site-packages/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc", false);
  LibrarySearch s = t.search();
  std::vector<LibraryCandidate> c = libdevice_candidates(s);
  ASSERT_GE(c.size(), 1u);
  EXPECT_EQ(c[0].source, "Python environment");
  EXPECT_NE(c[0].path.find("cuda_nvcc/nvvm/libdevice/libdevice.10.bc"), std::string::npos) << c[0].path;
  t.put("toolkit/nvvm/libdevice/libdevice.10.bc", false);
  EXPECT_EQ(find_libdevice(s).source, "CUDA toolkit");
  t.put("dirs/libdevice.10.bc", false);
  const LibraryCandidate first = find_libdevice(s);
  EXPECT_EQ(first.path, (t.root / "dirs/libdevice.10.bc").string());
  EXPECT_EQ(first.source, "INGOT_CUDA_LIB_DIRS / LibrarySearch::dirs");
  EXPECT_GE(libdevice_candidates(s).size(), 3u);
}

TEST(LibrarySearch, LibdeviceFoundNowhereIsNotFoundListingThePlaces) {
  Tree t;
  LibrarySearch s = t.search();
  // The GPU check bundle carries a copy beside its executable: found there, then switched off.
  const std::vector<LibraryCandidate> found = libdevice_candidates(s);
  const bool bundled = !found.empty() && found.back().source == "beside the executable";
  if (bundled) s.beside_executable = false;
  try {
    find_libdevice(s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    std::vector<std::string> parts = {(t.root / "dirs/libdevice.10.bc").string(),
                                      (t.root / "toolkit/nvvm/libdevice/libdevice.10.bc").string(),
                                      "INGOT_CUDA_LIB_DIRS"};
    if (!bundled) parts.push_back("beside the executable");
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << " in " << e.what();
    }
  }
  s.beside_executable = false;
  for (const LibraryCandidate& c : libdevice_candidates(s)) EXPECT_NE(c.source, "beside the executable");
}

}  // namespace
}  // namespace ingot
