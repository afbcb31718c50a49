// The `ptx` suite (no GPU needed): graphs compiled by the CUDA code generator give PTX that
// ptxas assembles for sm_80 and sm_90, launches within the hardware limits, and the expected
// host plan (buffers, launch order, arguments).
#include <gtest/gtest.h>

#include <filesystem>

#include "ingot/trace/ops.h"
#include "ptx_util.h"

namespace ingot {
namespace {

using testing::compile_for_cuda;
using testing::expect_valid_program;

class Ptx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(testing::kPtxas)) GTEST_SKIP() << "no ptxas at " << testing::kPtxas << " (CUDA toolkit)";
  }
};

TEST_F(Ptx, AnElementwiseGraphIsOneCoalescedKernel) {
  // exp(x) * y + 1 over (64, 100): one fused kernel over 6400 elements in blocks of 256.
  const ir::Graph g = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{exp(a[0]) * a[1] + 1.0}; },
                            {{{64, 100}, DType::kF32}, {{64, 100}, DType::kF32}}, "ew");
  const codegen::CudaProgram p = compile_for_cuda(g);
  expect_valid_program(p, "ew");
  ASSERT_EQ(p.launches.size(), 1u) << p.host_mlir;
  const codegen::CudaLaunch& l = p.launches[0];
  EXPECT_EQ(l.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(l.grid, (std::array<int64_t, 3>{25, 1, 1}));  // ceil(6400 / 256)
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].ptx.size(), 2u);
  EXPECT_NE(p.kernels[0].ptx.at("sm_90").find(".target sm_90"), std::string::npos);
  EXPECT_NE(p.kernels[0].ptx.at("sm_80").find(".target sm_80"), std::string::npos);
  // Buffers: the two inputs and the output; the kernel reads and writes them.
  ASSERT_EQ(p.buffers.size(), 3u);
  EXPECT_EQ(p.buffers[0].kind, codegen::CudaBuffer::Kind::kInput);
  EXPECT_EQ(p.buffers[2].kind, codegen::CudaBuffer::Kind::kOutput);
  EXPECT_EQ(p.buffers[2].bytes, 64 * 100 * 4);
  int memrefs = 0;
  for (const codegen::CudaKernelArg& a : l.args) memrefs += a.kind == codegen::CudaKernelArg::Kind::kMemref ? 1 : 0;
  EXPECT_EQ(memrefs, 3);
}

}  // namespace
}  // namespace ingot
