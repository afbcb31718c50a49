// `ingot cuda-info`'s report (include/ingot/runtime/cuda_info.h) on the fake driver, with
// libraries found in the toolkit or nowhere.
#if INGOT_HAVE_CUDA_TOOLKIT

#include "ingot/runtime/cuda_info.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fake_cuda_driver.h"

namespace ingot {
namespace {

TEST(CudaInfo, ReportsTheDriverItsDevicesAndMissingLibraries) {
  testing::FakeCudaScope fake;
  const CudaInfo info = cuda_info(fake.driver(), LibrarySearch{.toolkit_root = "", .loader_path = false});
  EXPECT_TRUE(info.driver_available);
  ASSERT_EQ(info.devices.size(), 2u);  // the fake has two devices of compute capability 9.0
  EXPECT_EQ(info.devices[1].name, "Fake GPU 1");
  EXPECT_EQ(info.devices[1].compute_major, 9);
  EXPECT_EQ(info.devices[1].compute_minor, 0);
  EXPECT_GT(info.devices[1].total_memory, 0);
  ASSERT_EQ(info.libraries.size(), 4u);
  for (const CudaLibraryReport& l : info.libraries) {
    EXPECT_FALSE(l.found) << l.name;
    EXPECT_NE(l.reason.find("was not found"), std::string::npos) << l.name << ": " << l.reason;
  }
  const std::string text = format_cuda_info(info);
  EXPECT_NE(text.find("2 devices"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda:1: Fake GPU 1, compute capability 9.0"), std::string::npos) << text;
  EXPECT_NE(text.find("cuDNN: missing: the cuDNN library libcudnn.so.9 was not found"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL: missing"), std::string::npos) << text;
}

TEST(CudaInfo, AnUnusableDriverIsReportedNotThrown) {
  const CudaInfo info = cuda_info(CudaDriver::load("libingot_no_such_cuda.so.1"), LibrarySearch{.toolkit_root = ""});
  EXPECT_FALSE(info.driver_available);
  EXPECT_TRUE(info.devices.empty());
  const std::string text = format_cuda_info(info);
  EXPECT_NE(text.find("driver: not usable:"), std::string::npos) << text;
  EXPECT_NE(text.find("libingot_no_such_cuda.so.1"), std::string::npos) << text;
}

TEST(CudaInfo, TheToolkitsLibrariesAreFoundWithTheirPaths) {
  if (!std::filesystem::exists("/usr/local/cuda/lib64/libcublas.so.13")) {
    GTEST_SKIP() << "no CUDA 13 toolkit at /usr/local/cuda on this machine";
  }
  const CudaInfo info = cuda_info(CudaDriver::load("libingot_no_such_cuda.so.1"),
                                  LibrarySearch{.toolkit_root = "/usr/local/cuda", .loader_path = false});
  EXPECT_TRUE(info.libraries[0].found) << info.libraries[0].reason;
  EXPECT_EQ(info.libraries[0].source, "CUDA toolkit");
  EXPECT_NE(format_cuda_info(info).find("cuBLAS: /usr/local/cuda/"), std::string::npos) << format_cuda_info(info);
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_HAVE_CUDA_TOOLKIT
