// Multi-tensor Adam / AdamW: the CPU reference against hand values and the formulas in double
// over several steps (Keras's form, and the textbook m_hat / (sqrt(v_hat) + eps) form it equals
// up to epsilon's scaling), the tensor table, errors, and the launch.
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/kernels/cuda_adam.h"
#include "ingot/runtime/error.h"
#include "kernels_test_util.h"

namespace ingot {
namespace {

using namespace ingot::kernels;

TEST(AdamReference, FirstStepMovesEachWeightByTheLearningRate) {
  // Step 1 with epsilon 0: m = 0.1 g, v = 0.001 g^2, alpha = lr sqrt(0.001) / 0.1, so the update
  // is lr * sign(g) whatever |g|.
  std::vector<float> w = {1.0f, 1.0f, -2.0f}, m(3, 0.0f), v(3, 0.0f);
  const std::vector<float> g = {0.5f, -40.0f, 1e-3f};
  adam_reference(w, g, m, v, AdamOptions{.learning_rate = 0.1, .epsilon = 0.0}, 1);
  EXPECT_NEAR(w[0], 0.9f, 1e-6);
  EXPECT_NEAR(w[1], 1.1f, 1e-6);
  EXPECT_NEAR(w[2], -2.1f, 1e-6);
  EXPECT_NEAR(m[1], -4.0f, 1e-6);
  EXPECT_NEAR(v[1], 1.6f, 1e-4);  // 1 - 0.999f is 0.000999987 in f32
  // AdamW: w = 1 - 1 * (0.5 * 0.1) = 0.95 first, then the same -0.1.
  std::vector<float> w2 = {1.0f}, m2 = {0.0f}, v2 = {0.0f};
  adam_reference(w2, std::vector<float>{0.5f}, m2, v2,
                 AdamOptions{.learning_rate = 0.1, .epsilon = 0.0, .weight_decay = 0.5}, 1);
  EXPECT_NEAR(w2[0], 0.85f, 1e-6);
}

TEST(AdamReference, MatchesTheFormulasInDoubleOverSteps) {
  const AdamOptions o{.learning_rate = 0.01, .beta_1 = 0.8, .beta_2 = 0.99, .epsilon = 1e-6, .weight_decay = 0.04};
  const size_t n = 50;
  std::vector<float> w = testing::random_floats(n, -1.0f, 1.0f, 7), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> wd(w.begin(), w.end()), md(n, 0.0), vd(n, 0.0), wt(w.begin(), w.end());
  for (int64_t t = 1; t <= 5; ++t) {
    const std::vector<float> g = testing::random_floats(n, -2.0f, 2.0f, 100 + static_cast<unsigned>(t));
    adam_reference(w, g, m, v, o, t);
    for (size_t i = 0; i < n; ++i) {
      wd[i] -= o.learning_rate * o.weight_decay * wd[i];
      md[i] = o.beta_1 * md[i] + (1 - o.beta_1) * g[i];
      vd[i] = o.beta_2 * vd[i] + (1 - o.beta_2) * g[i] * g[i];
      const double m_hat = md[i] / (1 - std::pow(o.beta_1, t)), v_hat = vd[i] / (1 - std::pow(o.beta_2, t));
      const double eps_hat = o.epsilon / std::sqrt(1 - std::pow(o.beta_2, t));  // Keras's epsilon scaling
      wd[i] -= o.learning_rate * m_hat / (std::sqrt(v_hat) + eps_hat);
      wt[i] -= o.learning_rate * o.weight_decay * wt[i];
      wt[i] -= o.learning_rate * m_hat / (std::sqrt(v_hat) + o.epsilon);  // textbook, eps inside
    }
    testing::expect_close(m, md, 1e-6, 1e-5, "m at step " + std::to_string(t));
    testing::expect_close(v, vd, 1e-7, 1e-5, "v at step " + std::to_string(t));
    testing::expect_close(w, wd, 1e-6, 1e-5, "w at step " + std::to_string(t));
    testing::expect_close(w, wt, 1e-5, 1e-4, "w (textbook form) at step " + std::to_string(t));
  }
}

TEST(AdamReference, BadArgumentsThrowAndWriteNothing) {
  std::vector<float> w = {1.0f, 2.0f}, m = {0.0f, 0.0f}, v = {0.0f, 0.0f};
  try {
    adam_reference(w, std::vector<float>{1.0f, 1.0f}, m, v, AdamOptions{.beta_2 = 1.0}, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("beta_2 = 1 is invalid"), std::string::npos) << e.what();
  }
  EXPECT_THROW(adam_reference(w, std::vector<float>{1.0f}, m, v, {}, 1), Error);
  EXPECT_THROW(adam_reference(w, std::vector<float>{1.0f, 1.0f}, m, v, {}, 0), Error);
  EXPECT_THROW(adam_reference(w, std::vector<float>{1.0f, 1.0f}, m, v, AdamOptions{.learning_rate = NAN}, 1), Error);
  EXPECT_EQ(w, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(m, (std::vector<float>{0.0f, 0.0f}));
}

TEST(AdamLaunch, TableAndConfiguration) {
  const std::vector<AdamTensor> tensors = {{.size = 10, .param = 0x10, .grad = 0x20, .m = 0x30, .v = 0x40},
                                           {.size = 300000, .param = 0x50, .grad = 0x60, .m = 0x70, .v = 0x80},
                                           {.size = 0}};
  EXPECT_EQ(adam_tensor_table(tensors),
            (std::vector<int64_t>{10, 300000, 0, 0x10, 0x50, 0, 0x20, 0x60, 0, 0x30, 0x70, 0, 0x40, 0x80, 0}));
  const AdamOptions o{.learning_rate = 0.1, .epsilon = 1e-7, .weight_decay = 0.01};
  CudaKernelLaunch l = adam_launch(0x1000, tensors, o, 1);
  EXPECT_EQ(l.kernel, "ingot_adam_multi_tensor_f32");
  EXPECT_EQ(l.grid, (std::array<int64_t, 3>{1172, 3, 1}));  // ceil(300000 / 256)
  EXPECT_EQ(l.block, (std::array<int64_t, 3>{256, 1, 1}));
  ASSERT_EQ(l.params.size(), 7u);
  const std::vector<void*> p = l.param_pointers();
  EXPECT_EQ(*static_cast<int64_t*>(p[1]), 3);
  EXPECT_NEAR(*static_cast<float*>(p[2]), 0.1 * std::sqrt(0.001) / 0.1, 1e-7);  // alpha at step 1
  EXPECT_NEAR(*static_cast<float*>(p[6]), 0.001f, 1e-9);                        // decay = wd * lr
  const std::vector<AdamTensor> huge = {{.size = int64_t{1} << 40, .param = 1, .grad = 2, .m = 3, .v = 4}};
  EXPECT_EQ(adam_launch(0x1000, huge, o, 3).grid[0], kAdamMaxBlocksPerTensor);
}

TEST(AdamLaunch, BadArgumentsThrow) {
  const std::vector<AdamTensor> bad = {{.size = 10, .param = 0x10, .grad = 0, .m = 0x30, .v = 0x40}};
  try {
    adam_tensor_table(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("tensors[0].grad is a null device address"), std::string::npos) << e.what();
  }
  const std::vector<AdamTensor> ok = {{.size = 10, .param = 0x10, .grad = 0x20, .m = 0x30, .v = 0x40}};
  EXPECT_THROW(adam_launch(0, ok, {}, 1), Error);
  EXPECT_THROW(adam_launch(0x1000, {}, {}, 1), Error);
  EXPECT_THROW(adam_launch(0x1000, ok, AdamOptions{.weight_decay = -1}, 1), Error);
  EXPECT_THROW(adam_launch(0x1000, ok, {}, 0), Error);
  EXPECT_THROW(adam_launch(0x1000, std::vector<AdamTensor>(65536, ok[0]), {}, 1), Error);
}

}  // namespace
}  // namespace ingot
