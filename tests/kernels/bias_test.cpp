// Bias add + activation (the cuBLASLt epilogue fallback): the CPU reference against the
// epilogues' definition on a strided column-major matrix, errors, and the launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "ingot/kernels/cuda_bias.h"
#include "ingot/runtime/error.h"

namespace ingot {
namespace {

using namespace ingot::kernels;

TEST(BiasReference, AddsOneBiasPerRowAndClampsWithRelu) {
  // m = 3 rows, n = 2 columns, ldc = 4: element 3 of each column is padding, never touched.
  const std::vector<float> start = {1, -5, 2, 99, -1, 0.5f, -3, 99};
  const std::vector<float> bias = {0.5f, 1, -1};
  for (const bool relu : {false, true}) {
    std::vector<float> c = start;
    bias_act_reference(c, bias, 3, 2, 4, relu);
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t i = 0; i < 4; ++i) {
        const size_t at = static_cast<size_t>(i + 4 * j);
        float want = start[at];
        if (i < 3)
          want = relu ? std::max(want + bias[static_cast<size_t>(i)], 0.0f) : want + bias[static_cast<size_t>(i)];
        EXPECT_EQ(c[at], want) << "relu " << relu << " at " << at;
      }
    }
  }
}

TEST(BiasReference, BadShapesThrowAndWriteNothing) {
  std::vector<float> c(6, 1.0f);
  const std::vector<float> bias(3, 1.0f);
  EXPECT_THROW(bias_act_reference(c, bias, 3, 2, 2, false), Error);                   // ldc < m
  EXPECT_THROW(bias_act_reference(c, bias, 3, 3, 3, false), Error);                   // c too short
  EXPECT_THROW(bias_act_reference(c, std::vector<float>(2), 3, 2, 3, false), Error);  // bias too short
  EXPECT_THROW(bias_act_reference(c, bias, 0, 2, 3, false), Error);
  EXPECT_EQ(c, std::vector<float>(6, 1.0f));
}

TEST(BiasLaunch, GridCoversTheMatrixWithinItsCap) {
  const CudaKernelLaunch l = bias_act_launch(0x1000, 0x2000, 300, 10, 304, true);
  EXPECT_EQ(l.kernel, "ingot_bias_act_f32");
  EXPECT_EQ(l.grid[0], (300 * 10 + 255) / 256);
  EXPECT_EQ(l.block[0], kBiasThreads);
  ASSERT_EQ(l.params.size(), 6u);
  EXPECT_EQ(l.params[5].size, 4);
  EXPECT_EQ(bias_act_launch(0x1000, 0x2000, 1 << 20, 1 << 10, 1 << 20, false).grid[0], kBiasMaxBlocks);
  try {
    bias_act_launch(0, 0x2000, 3, 2, 3, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("c"), std::string::npos) << e.what();
  }
  EXPECT_THROW(bias_act_launch(0x1000, 0x2000, 3, 2, 1, false), Error);
}

}  // namespace
}  // namespace ingot
