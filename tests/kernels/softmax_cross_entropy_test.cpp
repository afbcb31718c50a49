// The fused softmax cross-entropy: its CPU reference against hand values and against the formulas
// in double (loss = logsumexp - logit[label]; dlogits = the central-difference gradient of the
// mean loss), its errors, and its launches.
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/kernels/cuda_softmax_cross_entropy.h"
#include "ingot/runtime/error.h"
#include "kernels_test_util.h"

namespace ingot {
namespace {

using namespace ingot::kernels;

/// The mean cross-entropy of `logits` (batch, classes) in double.
double mean_loss(const std::vector<double>& logits, const std::vector<int32_t>& labels, int64_t classes) {
  const auto batch = static_cast<int64_t>(labels.size());
  double total = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(logits[b * classes + c]);
    total += std::log(sum) - logits[b * classes + labels[b]];
  }
  return total / static_cast<double>(batch);
}

TEST(SoftmaxCrossEntropyReference, HandValues) {
  // Row 0: exp(logits) = 1, 2, 3 -> probs 1/6, 1/3, 1/2; label 2 -> loss = -log(1/2).
  // Row 1: two equal huge logits (no overflow thanks to the max) -> 0.5 each, loss log 2.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), 1000.0f, 1000.0f, -1e30f};
  const std::vector<int32_t> labels = {2, 0};
  std::vector<float> losses(2), probs(6);
  softmax_ce_forward_reference(logits, labels, losses, probs, 2, 3);
  EXPECT_NEAR(losses[0], std::log(2.0), 1e-6);
  EXPECT_NEAR(losses[1], std::log(2.0), 1e-6);
  const std::vector<float> want = {1.0f / 6, 1.0f / 3, 0.5f, 0.5f, 0.5f, 0.0f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(probs[i], want[i], 1e-6) << i;

  // dlogits = (probs - onehot) * dloss / batch with dloss = 3, batch = 2.
  std::vector<float> dlogits(6);
  softmax_ce_backward_reference(probs, labels, 3.0f, dlogits, 2, 3);
  const std::vector<float> dwant = {1.5f / 6, 1.5f / 3, -0.75f, -0.75f, 0.75f, 0.0f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(dlogits[i], dwant[i], 1e-6) << i;
}

TEST(SoftmaxCrossEntropyReference, MatchesTheFormulasInDouble) {
  const int64_t batch = 7, classes = 45;
  const std::vector<float> logits = testing::random_floats(batch * classes, -8.0f, 8.0f, 11);
  std::vector<int32_t> labels(batch);
  for (int64_t b = 0; b < batch; ++b) labels[b] = static_cast<int32_t>((b * 13) % classes);
  std::vector<float> losses(batch), probs(batch * classes), dlogits(batch * classes);
  softmax_ce_forward_reference(logits, labels, losses, probs, batch, classes);
  softmax_ce_backward_reference(probs, labels, 1.0f, dlogits, batch, classes);

  std::vector<double> x(logits.begin(), logits.end());
  std::vector<double> want_loss(batch), want_probs(batch * classes), want_grad(batch * classes);
  for (int64_t b = 0; b < batch; ++b) {
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[b * classes + c]);
    want_loss[b] = std::log(sum) - x[b * classes + labels[b]];
    for (int64_t c = 0; c < classes; ++c) want_probs[b * classes + c] = std::exp(x[b * classes + c]) / sum;
  }
  for (size_t i = 0; i < x.size(); ++i) {  // central differences of the mean loss
    const double h = 1e-5, keep = x[i];
    x[i] = keep + h;
    const double up = mean_loss(x, labels, classes);
    x[i] = keep - h;
    const double down = mean_loss(x, labels, classes);
    x[i] = keep;
    want_grad[i] = (up - down) / (2 * h);
  }
  testing::expect_close(losses, want_loss, 1e-5, 1e-5, "losses");
  testing::expect_close(probs, want_probs, 1e-7, 1e-5, "probs");
  testing::expect_close(dlogits, want_grad, 1e-6, 1e-4, "dlogits");
}

TEST(SoftmaxCrossEntropyReference, BadLabelOrSizesThrowAndWriteNothing) {
  const std::vector<float> logits = {1, 2, 3, 4};
  std::vector<float> losses = {-7, -7}, probs(4, -7.0f);
  try {
    softmax_ce_forward_reference(logits, std::vector<int32_t>{0, 2}, losses, probs, 2, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_NE(e.message().find("labels[1] = 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(losses, (std::vector<float>{-7, -7}));
  EXPECT_EQ(probs, std::vector<float>(4, -7.0f));
  try {
    softmax_ce_forward_reference(logits, std::vector<int32_t>{0, 1}, losses, probs, 2, 3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch);
    EXPECT_NE(e.message().find("logits has 4 elements, expected 6"), std::string::npos) << e.what();
  }
  EXPECT_THROW(softmax_ce_backward_reference(probs, std::vector<int32_t>{0, -1}, 1.0f, probs, 2, 2), Error);
  EXPECT_THROW(softmax_ce_forward_reference({}, {}, {}, {}, 0, 2), Error);
}

TEST(SoftmaxCrossEntropyLaunch, OneBlockPerRowWithWarpMultipleThreads) {
  EXPECT_EQ(softmax_ce_block_threads(1), 32);
  EXPECT_EQ(softmax_ce_block_threads(33), 64);
  EXPECT_EQ(softmax_ce_block_threads(1000), 1024);
  EXPECT_EQ(softmax_ce_block_threads(50257), 1024);
  CudaKernelLaunch l = softmax_ce_forward_launch(0x100, 0x200, 0x300, 0x400, 64, 10);
  EXPECT_EQ(l.kernel, "ingot_softmax_ce_forward_f32");
  EXPECT_EQ(l.grid, (std::array<int64_t, 3>{64, 1, 1}));
  EXPECT_EQ(l.block, (std::array<int64_t, 3>{32, 1, 1}));
  EXPECT_EQ(l.shared_bytes, 0);
  ASSERT_EQ(l.params.size(), 6u);
  const std::vector<void*> p = l.param_pointers();
  EXPECT_EQ(*static_cast<uint64_t*>(p[3]), 0x400u);
  EXPECT_EQ(*static_cast<int64_t*>(p[4]), 64);
  EXPECT_EQ(*static_cast<int64_t*>(p[5]), 10);
  const CudaKernelLaunch b = softmax_ce_backward_launch(0x100, 0x200, 0x300, 0x100, 3, 50257);
  EXPECT_EQ(b.kernel, "ingot_softmax_ce_backward_f32");
  EXPECT_EQ(b.block[0], 1024);
  EXPECT_EQ(b.grid[0], 3);
}

TEST(SoftmaxCrossEntropyLaunch, BadArgumentsThrow) {
  try {
    softmax_ce_forward_launch(0x100, 0, 0x300, 0x400, 4, 10);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("labels is a null device address"), std::string::npos) << e.what();
  }
  EXPECT_THROW(softmax_ce_forward_launch(1, 2, 3, 4, 0, 10), Error);
  EXPECT_THROW(softmax_ce_forward_launch(1, 2, 3, 4, int64_t{1} << 31, 10), Error);
  EXPECT_THROW(softmax_ce_backward_launch(1, 2, 3, 4, 4, 0), Error);
}

}  // namespace
}  // namespace ingot
