// The embedded PTX of every hand-written kernel family assembles with ptxas for every
// architecture, defines the kernels the launchers name, and fits the largest block its launcher
// uses (registers x threads within the 64K-register file, no spills, static shared memory within
// 48 KiB).
#include <gtest/gtest.h>

#include <filesystem>

#include "ingot/kernels/cuda_launch.h"
#include "ingot/runtime/error.h"
#include "kernels_test_util.h"

namespace ingot {
namespace {

using kernels::cuda_kernel_archs;
using kernels::cuda_kernel_families;
using kernels::cuda_kernel_ptx;

/// Each kernel with the most threads per block any launch of it uses.
const std::map<std::string, std::pair<std::string, int64_t>>& expected_kernels() {
  static const std::map<std::string, std::pair<std::string, int64_t>> k = {
      {"ingot_softmax_ce_forward_f32", {"softmax_cross_entropy", 1024}},
      {"ingot_softmax_ce_backward_f32", {"softmax_cross_entropy", 1024}},
      {"ingot_layernorm_forward_f32", {"layernorm", 1024}},
      {"ingot_layernorm_backward_dx_f32", {"layernorm", 1024}},
      {"ingot_layernorm_backward_params_f32", {"layernorm", 256}},
      {"ingot_adam_multi_tensor_f32", {"adam", 256}},
      {"ingot_attention_forward_f32", {"attention", 256}},
      {"ingot_conv_implicit_gemm_f32", {"conv", 256}},
      {"ingot_conv_implicit_gemm_f64", {"conv", 256}},
      {"ingot_bias_act_f32", {"bias", 256}},
  };
  return k;
}

class KernelsPtx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::cuda_kernels_have_ptx()) GTEST_SKIP() << "ingot was built without the CUDA toolkit: no PTX";
    if (!std::filesystem::exists(testing::kPtxas)) GTEST_SKIP() << "no ptxas at " << testing::kPtxas;
  }
};

TEST_F(KernelsPtx, EveryFamilyAssemblesForEveryArchWithinResourceLimits) {
  std::map<std::string, int> seen;
  for (const std::string& family : cuda_kernel_families()) {
    for (const std::string& arch : cuda_kernel_archs()) {
      const std::string_view ptx = cuda_kernel_ptx(family, arch);
      EXPECT_NE(ptx.find(".target " + arch), std::string_view::npos) << family << " " << arch;
      const testing::PtxasResult r = testing::run_ptxas(ptx, arch, family, /*verbose=*/true);
      ASSERT_TRUE(r.ok) << family << " for " << arch << ":\n" << r.output;
      for (const auto& [kernel, res] : testing::parse_ptxas_resources(r.output)) {
        ++seen[kernel];
        const auto it = expected_kernels().find(kernel);
        ASSERT_NE(it, expected_kernels().end()) << "unexpected kernel " << kernel;
        EXPECT_EQ(it->second.first, family) << kernel;
        EXPECT_GT(res.registers, 0) << kernel;
        EXPECT_LE(res.registers * it->second.second, 65536) << kernel << " on " << arch;
        EXPECT_EQ(res.spill_bytes, 0) << kernel << " on " << arch;
        EXPECT_LE(res.shared_bytes, kernels::kMaxDefaultSharedBytes) << kernel;
      }
    }
  }
  for (const auto& [kernel, info] : expected_kernels()) {
    EXPECT_EQ(seen[kernel], static_cast<int>(cuda_kernel_archs().size())) << kernel << " missing from the PTX";
  }
}

TEST_F(KernelsPtx, UnknownFamilyOrArchIsNotFound) {
  try {
    cuda_kernel_ptx("softmax", "sm_80");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(e.message().find("'softmax'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda_kernel_ptx("softmax_cross_entropy", "sm_70"), Error);
}

TEST(KernelsLaunch, ParamsPackTheirBytesAndPointersAddressThem) {
  kernels::CudaKernelLaunch l;
  l.params = {kernels::param_ptr(0x1234567890ull), kernels::param_i64(-5), kernels::param_f32(1.5f),
              kernels::param_i32(7)};
  EXPECT_EQ(l.params[0].size, 8);
  EXPECT_EQ(l.params[2].size, 4);
  const std::vector<void*> p = l.param_pointers();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(*static_cast<uint64_t*>(p[0]), 0x1234567890ull);
  EXPECT_EQ(*static_cast<int64_t*>(p[1]), -5);
  EXPECT_EQ(*static_cast<float*>(p[2]), 1.5f);
  EXPECT_EQ(*static_cast<int32_t*>(p[3]), 7);
}

TEST(KernelsLaunch, LimitsAreChecked) {
  kernels::CudaKernelLaunch l{.kernel = "k", .grid = {1, 1, 1}, .block = {1024, 1, 1}};
  EXPECT_NO_THROW(kernels::check_launch_limits(l, 0, "t"));
  l.block = {32, 32, 2};
  EXPECT_THROW(kernels::check_launch_limits(l, 0, "t"), Error);
  l.block = {32, 1, 1};
  l.grid = {1, 65536, 1};
  EXPECT_THROW(kernels::check_launch_limits(l, 0, "t"), Error);
  l.grid = {0, 1, 1};
  EXPECT_THROW(kernels::check_launch_limits(l, 0, "t"), Error);
  l.grid = {1, 1, 1};
  l.shared_bytes = 40 * 1024;
  EXPECT_NO_THROW(kernels::check_launch_limits(l, 8 * 1024, "t"));
  EXPECT_THROW(kernels::check_launch_limits(l, 8 * 1024 + 1, "t"), Error);
}

}  // namespace
}  // namespace ingot
