// Losses: hand-computed values of every loss and reduction (Keras 3's documented examples and
// the trainer contract's MAE case), sample weights, numerical stability, clipping, errors, the
// by-name factory, custom losses, interpreter-vs-jit agreement and gradients.
#include "ingot/trainer/losses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "autodiff/gradcheck.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "losses_metrics_test_util.h"
#include "test_util.h"

namespace ingot {
namespace {

using losses::Reduction;
using testing::expect_error;
using testing::f32;
using testing::f64;
using testing::i32;
using testing::in_trace;
using testing::interpret_fn;
using testing::run_both;

/// Relative tolerance of f32 loss values against double hand computations (a few roundings of
/// logs and sums of O(1) values: ~1e-7 each).
constexpr double kTol = 2e-6;

void expect_close(double got, double want, double tol = kTol) {
  EXPECT_NEAR(got, want, tol * std::max(1.0, std::abs(want)));
}

/// The loss of (y_true, y_pred[, sample_weight]), run interpreted and jit-compiled (which must
/// agree); returns the interpreter's result.
Array loss_of(const losses::Loss& loss, const Array& y_true, const Array& y_pred,
              const std::optional<Array>& sample_weight = {}) {
  std::vector<Array> args = {y_true, y_pred};
  if (sample_weight) args.push_back(*sample_weight);
  TraceFn fn = [&loss](const std::vector<Tensor>& a) {
    std::optional<Tensor> w;
    if (a.size() == 3) w = a[2];
    return std::vector<Tensor>{loss(a[0], a[1], w)};
  };
  return run_both(fn, args).at(0);
}

/// As loss_of, for a reducing loss: the scalar value.
double value_of(const losses::Loss& loss, const Array& y_true, const Array& y_pred,
                const std::optional<Array>& sample_weight = {}) {
  Array r = loss_of(loss, y_true, y_pred, sample_weight);
  EXPECT_EQ(r.shape(), Shape{});
  return r.element_as_double(0);
}

/// per_sample() of the loss, interpreted.
Array per_sample_of(const losses::Loss& loss, const Array& y_true, const Array& y_pred) {
  return interpret_fn(
             [&loss](const std::vector<Tensor>& a) { return std::vector<Tensor>{loss.per_sample(a[0], a[1])}; },
             {y_true, y_pred})
      .at(0);
}

double softplus_d(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }

// ---- the trainer contract and reductions --------------------------------------------------------

TEST(LossReduction, ContractMaeWithSampleWeightIsHalf) {
  // TRAINER_SEMANTICS.md: MAE with y_true [[1],[2]], y_pred [[2],[3]], sample_weight [[0],[1]]
  // gives 0.5: per-sample losses [1, 1], weighted [0, 1], summed 1, over batch size 2.
  losses::MeanAbsoluteError mae;
  const Array t = f32({1, 2}, {2, 1}), p = f32({2, 3}, {2, 1});
  EXPECT_EQ(value_of(mae, t, p, f32({0, 1}, {2, 1})), 0.5);
  EXPECT_EQ(value_of(mae, t, p, f32({0, 1}, {2})), 0.5);  // (batch,) weights alike
  EXPECT_EQ(value_of(mae, t, p), 1.0);
}

TEST(LossReduction, EveryReductionOnTheContractCase) {
  const Array t = f32({1, 2}, {2, 1}), p = f32({2, 3}, {2, 1});
  const Array w = f32({0.5f, 1.5f}, {2, 1});
  // Per-sample losses [1, 1]; weighted [0.5, 1.5].
  EXPECT_EQ(value_of(losses::MeanAbsoluteError({.reduction = Reduction::kSum}), t, p, w), 2.0);
  EXPECT_EQ(value_of(losses::MeanAbsoluteError({.reduction = Reduction::kMean}), t, p, w), 1.0);
  EXPECT_EQ(
      value_of(losses::MeanAbsoluteError({.reduction = Reduction::kSumOverBatchSize}), t, p, f32({0.5f, 0.5f}, {2})),
      0.5);
  // mean_with_sample_weight divides by the weights' sum: (0.5 * 1 + 1.5 * 1) / 2 = 1; with
  // weights [1, 3] and per-sample losses [1, 1]: 4 / 4 = 1; with [0.5, 0] and losses [1, 1]: 1.
  EXPECT_EQ(value_of(losses::MeanAbsoluteError({.reduction = Reduction::kMeanWithSampleWeight}), t, p, w), 1.0);
  const Array t2 = f32({0, 0}, {2, 1}), p2 = f32({1, 3}, {2, 1});  // per-sample [1, 3]
  EXPECT_EQ(
      value_of(losses::MeanAbsoluteError({.reduction = Reduction::kMeanWithSampleWeight}), t2, p2, f32({1, 3}, {2})),
      2.5);  // (1 + 9) / 4
  // Without weights mean_with_sample_weight is the plain mean.
  EXPECT_EQ(value_of(losses::MeanAbsoluteError({.reduction = Reduction::kMeanWithSampleWeight}), t2, p2), 2.0);
}

TEST(LossReduction, NoneReturnsWeightedPerSampleLosses) {
  losses::MeanAbsoluteError none({.reduction = Reduction::kNone});
  const Array t = f32({0, 0}, {2, 1}), p = f32({1, 3}, {2, 1});
  Array plain = loss_of(none, t, p);
  EXPECT_EQ(plain.shape(), (Shape{2}));
  testing::expect_values(plain, {1, 3});
  Array by_vector = loss_of(none, t, p, f32({2, 0.5f}, {2}));
  EXPECT_EQ(by_vector.shape(), (Shape{2}));
  testing::expect_values(by_vector, {2, 1.5});
  // A (batch, 1) weight expands rank-1 losses to (batch, 1), as Keras's
  // squeeze_or_expand_to_same_rank does.
  Array by_column = loss_of(none, t, p, f32({2, 0.5f}, {2, 1}));
  EXPECT_EQ(by_column.shape(), (Shape{2, 1}));
  testing::expect_values(by_column, {2, 1.5});
}

TEST(LossReduction, ZeroWeightsGiveZeroNotNan) {
  const Array t = f32({1, 2}, {2, 1}), p = f32({2, 3}, {2, 1});
  const Array zero = f32({0, 0}, {2});
  EXPECT_EQ(value_of(losses::MeanAbsoluteError({.reduction = Reduction::kMeanWithSampleWeight}), t, p, zero), 0.0);
  EXPECT_EQ(value_of(losses::MeanAbsoluteError(), t, p, zero), 0.0);
  EXPECT_EQ(value_of(losses::MeanAbsoluteError({.reduction = Reduction::kSum}), t, p, zero), 0.0);
}

TEST(LossReduction, ScalarWeightScalesEverySample) {
  const Array t = f32({0, 0}, {2, 1}), p = f32({1, 3}, {2, 1});
  EXPECT_EQ(value_of(losses::MeanAbsoluteError(), t, p, Array::scalar(3.0, DType::kF32)), 6.0);
}

TEST(LossReduction, WeightsAlignWithTheBatchAxisOfSequenceLosses) {
  // Per-sample losses of shape (batch=2, T=3) (MAE over the last axis of (2, 3, 1) inputs) with
  // (batch,) weights: each row is scaled by its sample's weight (not aligned with the T axis).
  losses::MeanAbsoluteError none({.reduction = Reduction::kNone});
  const Array t = f32({0, 0, 0, 0, 0, 0}, {2, 3, 1});
  const Array p = f32({1, 2, 3, 4, 5, 6}, {2, 3, 1});
  Array r = loss_of(none, t, p, f32({10, 0}, {2}));
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  testing::expect_values(r, {10, 20, 30, 0, 0, 0});
  // sum_over_batch_size divides by the 6 elements.
  EXPECT_EQ(value_of(losses::MeanAbsoluteError(), t, p, f32({10, 0}, {2})), 10.0);
}

TEST(LossReduction, NamesRoundTripAndUnknownNamesAreErrors) {
  for (Reduction r : {Reduction::kSumOverBatchSize, Reduction::kSum, Reduction::kMean, Reduction::kMeanWithSampleWeight,
                      Reduction::kNone}) {
    EXPECT_EQ(losses::reduction_from_name(losses::reduction_name(r)), r);
  }
  EXPECT_EQ(losses::reduction_name(Reduction::kSumOverBatchSize), "sum_over_batch_size");
  expect_error([] { losses::reduction_from_name("auto"); }, ErrorCode::kInvalidArgument,
               {"auto", "sum_over_batch_size", "mean_with_sample_weight"});
}

TEST(LossReduction, MismatchedWeightShapeIsAClearError) {
  expect_error(
      [] {
        in_trace({f32({1, 2}, {2, 1}), f32({2, 3}, {2, 1}), f32({1, 1, 1}, {3})},
                 [](const std::vector<Tensor>& a) { losses::MeanAbsoluteError()(a[0], a[1], a[2]); });
      },
      ErrorCode::kShapeMismatch, {"sample_weight", "(3,)", "(2,)"});
}

// ---- regression losses --------------------------------------------------------------------------

TEST(MeanSquaredErrorLoss, KerasExampleAndWeights) {
  // Keras docs: y_true [[0, 1], [0, 0]], y_pred [[1, 1], [1, 0]]: per-sample [0.5, 0.5].
  losses::MeanSquaredError mse;
  const Array t = f32({0, 1, 0, 0}, {2, 2}), p = f32({1, 1, 1, 0}, {2, 2});
  EXPECT_EQ(value_of(mse, t, p), 0.5);
  expect_close(value_of(mse, t, p, f32({0.7f, 0.3f}, {2})), 0.25);
  EXPECT_EQ(value_of(losses::MeanSquaredError({.reduction = Reduction::kSum}), t, p), 1.0);
  testing::expect_values(per_sample_of(mse, t, p), {0.5, 0.5});
}

TEST(MeanSquaredErrorLoss, RankOneTargetsAgainstColumnPredictions) {
  // y_true (batch,) is expanded to (batch, 1): per-sample [(1-2)^2, (2-4)^2] = [1, 4].
  losses::MeanSquaredError mse;
  Array per = per_sample_of(mse, f32({1, 2}, {2}), f32({2, 4}, {2, 1}));
  EXPECT_EQ(per.shape(), (Shape{2}));
  testing::expect_values(per, {1, 4});
  EXPECT_EQ(value_of(mse, f32({1, 2}, {2}), f32({2, 4}, {2, 1})), 2.5);
}

TEST(MeanSquaredErrorLoss, ComputesInItsDtype) {
  // f64 loss on f32 inputs: the result is f64; 0.1 is not exact in f32, so the f64 result of
  // the f32-rounded inputs is (0.1f)^2 computed in double.
  losses::MeanSquaredError mse64({.dtype = DType::kF64});
  Array r = loss_of(mse64, f32({0}, {1, 1}), f32({0.1f}, {1, 1}));
  EXPECT_EQ(r.dtype(), DType::kF64);
  EXPECT_EQ(r.element_as_double(0), static_cast<double>(0.1f) * static_cast<double>(0.1f));
  Array bf16 = Array::from_doubles({0.5, -1.5}, {2, 1}, DType::kBF16);
  Array r32 = loss_of(losses::MeanSquaredError(), f32({0, 0}, {2, 1}), bf16);
  EXPECT_EQ(r32.dtype(), DType::kF32);
  EXPECT_EQ(r32.element_as_double(0), 1.25);  // (0.25 + 2.25) / 2
  // Integer predictions are converted to the loss dtype by the Loss object.
  EXPECT_EQ(value_of(losses::MeanSquaredError(), i32({1, 2}, {2, 1}), i32({3, 2}, {2, 1})), 2.0);
}

TEST(MeanAbsoluteErrorLoss, KerasExample) {
  // Keras docs: y_true [[0, 1], [0, 0]], y_pred [[1, 1], [1, 0]] -> 0.5; weights [0.7, 0.3]
  // -> 0.25; sum -> 1.0.
  const Array t = f32({0, 1, 0, 0}, {2, 2}), p = f32({1, 1, 1, 0}, {2, 2});
  EXPECT_EQ(value_of(losses::MeanAbsoluteError(), t, p), 0.5);
  expect_close(value_of(losses::MeanAbsoluteError(), t, p, f32({0.7f, 0.3f}, {2})), 0.25);
  EXPECT_EQ(value_of(losses::MeanAbsoluteError({.reduction = Reduction::kSum}), t, p), 1.0);
}

TEST(HuberLoss, KerasExampleQuadraticInsideDelta) {
  // Keras docs: y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]] -> 0.155: every |e| <= 1,
  // so per sample mean(0.5 e^2): [(0.18 + 0.18) / 2, (0.08 + 0.18) / 2] = [0.18, 0.13].
  const Array t = f32({0, 1, 0, 0}, {2, 2}), p = f32({0.6f, 0.4f, 0.4f, 0.6f}, {2, 2});
  losses::Huber huber;
  EXPECT_EQ(huber.name(), "huber_loss");
  testing::expect_values(per_sample_of(huber, t, p), {0.18, 0.13}, 1e-7);
  expect_close(value_of(huber, t, p), 0.155);
  expect_close(value_of(huber, t, p, f32({1, 0}, {2})), 0.09);
  expect_close(value_of(losses::Huber({.reduction = Reduction::kSum}), t, p), 0.31);
}

TEST(HuberLoss, LinearOutsideDeltaAndContinuousAtIt) {
  // delta 0.5, e = y_pred - y_true: |e| = 2 -> 0.5 * 2 - 0.125 = 0.875; |e| = 0.5 (the kink) ->
  // 0.5 * 0.25 = 0.125 from both formulas; |e| = 0.25 -> 0.03125; e = -3 -> 1.5 - 0.125 = 1.375.
  losses::Huber huber({.delta = 0.5, .reduction = Reduction::kNone});
  Array per = per_sample_of(huber, f32({0, 0, 1, 3}, {4, 1}), f32({2, 0.5f, 1.25f, 0}, {4, 1}));
  testing::expect_values(per, {0.875, 0.125, 0.03125, 1.375}, 1e-7);
  // Default delta 1: e = 3 -> 3 - 0.5 = 2.5; (batch,) targets are expanded against (batch, 1).
  testing::expect_values(per_sample_of(losses::Huber(), f32({0}, {1}), f32({3}, {1, 1})), {2.5});
}

TEST(HuberLoss, BadDeltaAndShapesAreClearErrors) {
  expect_error([] { losses::Huber({.delta = 0.0}); }, ErrorCode::kInvalidArgument, {"Huber", "delta = 0", "> 0"});
  expect_error([] { losses::Huber({.delta = -1.0}); }, ErrorCode::kInvalidArgument, {"delta = -1"});
  expect_error([] { losses::Huber({.delta = std::nan("")}); }, ErrorCode::kInvalidArgument, {"delta = nan"});
  expect_error(
      [] {
        in_trace({f32({1, 2, 3}, {3, 1}), f32({1, 2}, {2, 1})},
                 [](const std::vector<Tensor>& a) { losses::huber(a[0], a[1]); });
      },
      ErrorCode::kShapeMismatch, {"huber", "(3, 1)", "(2, 1)"});
}

TEST(KLDivergenceLoss, KerasExampleWithClipping) {
  // Keras docs: y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]] -> 0.458. Both are
  // clipped to [1e-7, 1], so the zero labels contribute 1e-7 * log(1e-7 / p).
  const double e = 1e-7;
  const double s0 = e * std::log(e / 0.6) + std::log(1 / 0.4);
  const double s1 = e * std::log(e / 0.4) + e * std::log(e / 0.6);
  const Array t = f32({0, 1, 0, 0}, {2, 2}), p = f32({0.6f, 0.4f, 0.4f, 0.6f}, {2, 2});
  losses::KLDivergence kld;
  EXPECT_EQ(kld.name(), "kl_divergence");
  testing::expect_values(per_sample_of(kld, t, p), {s0, s1}, 1e-6);
  expect_close(value_of(kld, t, p), (s0 + s1) / 2);
  EXPECT_NEAR(value_of(kld, t, p), 0.458, 5e-4);
  // Identical distributions diverge by 0; a prediction of 0 is clipped, not infinite.
  EXPECT_NEAR(value_of(kld, f32({0.25f, 0.75f}, {1, 2}), f32({0.25f, 0.75f}, {1, 2})), 0.0, 1e-7);
  expect_close(value_of(kld, f32({1, 0}, {1, 2}), f32({0, 1}, {1, 2})), std::log(1 / e) + e * std::log(e / 1.0), 1e-5);
  expect_error(
      [] {
        in_trace({f32({1, 2, 3}, {1, 3}), f32({1, 2}, {1, 2})},
                 [](const std::vector<Tensor>& a) { losses::kl_divergence(a[0], a[1]); });
      },
      ErrorCode::kShapeMismatch, {"kl_divergence", "(1, 3)", "(1, 2)"});
}

// ---- binary crossentropy ------------------------------------------------------------------------

TEST(BinaryCrossentropyLoss, KerasProbabilityExample) {
  // y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]] (Keras docs: 0.815):
  // sample 0: (-log 0.4 - log 0.4) / 2; sample 1: (-log 0.6 - log 0.4) / 2.
  const double s0 = -std::log(0.4), s1 = (-std::log(0.6) - std::log(0.4)) / 2;
  const Array t = f32({0, 1, 0, 0}, {2, 2}), p = f32({0.6f, 0.4f, 0.4f, 0.6f}, {2, 2});
  expect_close(value_of(losses::BinaryCrossentropy(), t, p), (s0 + s1) / 2);
  expect_close(value_of(losses::BinaryCrossentropy(), t, p, f32({1, 0}, {2})), s0 / 2);
  Array per = per_sample_of(losses::BinaryCrossentropy(), t, p);
  testing::expect_values(per, {s0, s1}, 1e-6);
}

TEST(BinaryCrossentropyLoss, KerasLogitExample) {
  // Keras docs: y_true [0, 1, 0, 0], logits [-18.6, 0.51, 2.94, -12.8] -> 0.865. A rank-1
  // input has one "sample": the loss is the mean over the last axis, unreduced further.
  const std::vector<double> x = {-18.6, 0.51, 2.94, -12.8}, y = {0, 1, 0, 0};
  double want = 0;
  for (size_t i = 0; i < 4; ++i) want += y[i] * softplus_d(-x[i]) + (1 - y[i]) * softplus_d(x[i]);
  want /= 4;
  EXPECT_NEAR(want, 0.865, 5e-4);
  const Array p = f32({-18.6f, 0.51f, 2.94f, -12.8f}, {4});
  expect_close(value_of(losses::BinaryCrossentropy({.from_logits = true}), f32({0, 1, 0, 0}, {4}), p), want, 1e-5);
}

TEST(BinaryCrossentropyLoss, LargeLogitsStayFinite) {
  // Wrong with confidence 100: loss 100 per sample (softplus(100)); right: exp(-100) ~ 0.
  losses::BinaryCrossentropy bce({.from_logits = true, .reduction = Reduction::kNone});
  Array wrong = loss_of(bce, f32({0, 1}, {2, 1}), f32({100, -100}, {2, 1}));
  testing::expect_values(wrong, {100, 100}, 1e-5);
  Array right = loss_of(bce, f32({1, 0}, {2, 1}), f32({100, -100}, {2, 1}));
  testing::expect_values(right, {0, 0}, 1e-30);
  Array huge = loss_of(bce, f32({0}, {1, 1}), f32({3e38f}, {1, 1}));
  EXPECT_TRUE(std::isfinite(huge.element_as_double(0)));
  expect_close(huge.element_as_double(0), 3e38f, 1e-6);
}

TEST(BinaryCrossentropyLoss, ProbabilitiesAreClippedToEpsilon) {
  // p = 0 with label 1 and p = 1 with label 0 would be infinite; Keras clips p to
  // [1e-7, 1 - 1e-7] in f32: -log(f32(1e-7)) and -log(1 - f32(1 - 1e-7)) = -log(2^-23).
  const double lo = static_cast<float>(1e-7);
  const double hi = static_cast<float>(1.0 - 1e-7);
  EXPECT_EQ(1.0 - hi, std::ldexp(1.0, -23));
  losses::BinaryCrossentropy bce({.reduction = Reduction::kNone});
  Array r = loss_of(bce, f32({1, 0}, {2, 1}), f32({0, 1}, {2, 1}));
  testing::expect_values(r, {-std::log(lo), -std::log(1.0 - hi)}, 1e-5);
}

TEST(BinaryCrossentropyLoss, LabelSmoothingMovesLabelsTowardsHalf) {
  // label_smoothing 0.2: labels 1 -> 0.9, 0 -> 0.1.
  const double s0 = -(0.9 * std::log(0.9) + 0.1 * std::log(0.1));
  const double s1 = -(0.1 * std::log(0.2) + 0.9 * std::log(0.8));
  losses::BinaryCrossentropy bce({.label_smoothing = 0.2, .reduction = Reduction::kNone});
  testing::expect_values(loss_of(bce, f32({1, 0}, {2, 1}), f32({0.9f, 0.2f}, {2, 1})), {s0, s1}, 2e-6);
  // The same smoothing on logits: 0.9 * softplus(-x) + 0.1 * softplus(x) at x = 2.
  losses::BinaryCrossentropy logits({.from_logits = true, .label_smoothing = 0.2});
  expect_close(value_of(logits, f32({1}, {1, 1}), f32({2}, {1, 1})), 0.9 * softplus_d(-2) + 0.1 * softplus_d(2));
}

TEST(BinaryCrossentropyLoss, ColumnLabelsForColumnPredictionsAndAxis) {
  // (batch,) labels are expanded against (batch, 1) predictions.
  losses::BinaryCrossentropy bce({.reduction = Reduction::kNone});
  Array r = loss_of(bce, f32({1, 0}, {2}), f32({0.8f, 0.4f}, {2, 1}));
  EXPECT_EQ(r.shape(), (Shape{2}));
  testing::expect_values(r, {-std::log(0.8), -std::log(0.6)}, 1e-6);
  // axis 0 averages over the leading axis instead: the transpose of the Keras example.
  const Array t = f32({0, 0, 1, 0}, {2, 2}), p = f32({0.6f, 0.4f, 0.4f, 0.6f}, {2, 2});
  losses::BinaryCrossentropy axis0({.axis = 0, .reduction = Reduction::kNone});
  testing::expect_values(loss_of(axis0, t, p), {-std::log(0.4), (-std::log(0.6) - std::log(0.4)) / 2}, 1e-6);
}

TEST(BinaryCrossentropyLoss, BadInputsAreClearErrors) {
  expect_error([] { losses::BinaryCrossentropy({.label_smoothing = 1.5}); }, ErrorCode::kInvalidArgument,
               {"label_smoothing", "1.5"});
  expect_error(
      [] {
        in_trace({f32({1, 0, 1}, {3, 1}), f32({0.5f, 0.5f}, {2, 1})},
                 [](const std::vector<Tensor>& a) { losses::binary_crossentropy(a[0], a[1]); });
      },
      ErrorCode::kShapeMismatch, {"binary_crossentropy", "(3, 1)", "(2, 1)"});
  expect_error(
      [] {
        in_trace({f32({1, 0}, {2, 1}), f32({0.5f, 0.5f}, {2, 1})},
                 [](const std::vector<Tensor>& a) { losses::binary_crossentropy(a[0], a[1], false, 0.0, 2); });
      },
      ErrorCode::kOutOfRange, {"axis 2", "rank 2"});
  expect_error(
      [] {
        in_trace({i32({1, 0}, {2, 1}), i32({1, 1}, {2, 1})},
                 [](const std::vector<Tensor>& a) { losses::binary_crossentropy(a[0], a[1]); });
      },
      ErrorCode::kDTypeMismatch, {"y_pred", "i32"});
}

// ---- categorical crossentropy -------------------------------------------------------------------

TEST(CategoricalCrossentropyLoss, KerasExample) {
  // Keras docs: y_true [[0, 1, 0], [0, 0, 1]], y_pred [[0.05, 0.95, 0], [0.1, 0.8, 0.1]]
  // -> 1.177 = (-log 0.95 - log 0.1) / 2; weights [0.3, 0.7] -> 0.814.
  const Array t = f32({0, 1, 0, 0, 0, 1}, {2, 3});
  const Array p = f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3});
  losses::CategoricalCrossentropy cce;
  expect_close(value_of(cce, t, p), (-std::log(0.95) - std::log(0.1)) / 2);
  expect_close(value_of(cce, t, p, f32({0.3f, 0.7f}, {2})), (-0.3 * std::log(0.95) - 0.7 * std::log(0.1)) / 2);
  EXPECT_NEAR(value_of(cce, t, p, f32({0.3f, 0.7f}, {2})), 0.814, 5e-4);
}

TEST(CategoricalCrossentropyLoss, ProbabilitiesAreNormalisedAndClipped) {
  // [1, 3] normalises to [0.25, 0.75]; a zero probability of the true class is clipped to 1e-7.
  losses::CategoricalCrossentropy cce({.reduction = Reduction::kNone});
  Array r = loss_of(cce, f32({0, 1, 1, 0}, {2, 2}), f32({1, 3, 0, 1}, {2, 2}));
  testing::expect_values(r, {-std::log(0.75), -std::log(static_cast<double>(1e-7f))}, 1e-5);
}

TEST(CategoricalCrossentropyLoss, LogitsMatchLogSoftmaxAndStayFinite) {
  // -log_softmax([1, 2, 3])[2] = log(e + e^2 + e^3) - 3.
  losses::CategoricalCrossentropy cce({.from_logits = true, .reduction = Reduction::kNone});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  Array r =
      loss_of(cce, f32({0, 0, 1, 0, 1, 0, 1, 0, 0}, {3, 3}), f32({1, 2, 3, 1000, 0, -1000, 1000, 0, -1000}, {3, 3}));
  testing::expect_values(r, {lse - 3, 1000, 0}, 1e-6);
}

TEST(CategoricalCrossentropyLoss, LabelSmoothingSpreadsOverClasses) {
  // label_smoothing 0.3 over 3 classes: [0, 1, 0] -> [0.1, 0.8, 0.1].
  losses::CategoricalCrossentropy cce({.label_smoothing = 0.3});
  expect_close(value_of(cce, f32({0, 1, 0}, {1, 3}), f32({0.2f, 0.7f, 0.1f}, {1, 3})),
               -(0.1 * std::log(0.2) + 0.8 * std::log(0.7) + 0.1 * std::log(0.1)));
}

TEST(CategoricalCrossentropyLoss, ClassAxisZero) {
  // The Keras example transposed to (classes, batch) with axis 0.
  const Array t = f32({0, 0, 1, 0, 0, 1}, {3, 2});
  const Array p = f32({0.05f, 0.1f, 0.95f, 0.8f, 0, 0.1f}, {3, 2});
  losses::CategoricalCrossentropy cce({.axis = 0, .reduction = Reduction::kNone});
  testing::expect_values(loss_of(cce, t, p), {-std::log(0.95), -std::log(0.1)}, 1e-6);
}

TEST(CategoricalCrossentropyLoss, BadInputsAreClearErrors) {
  expect_error(
      [] {
        in_trace({f32({0, 1, 0, 1, 0, 0}, {2, 3}), f32({0.5f, 0.5f, 0.5f, 0.5f}, {2, 2})},
                 [](const std::vector<Tensor>& a) { losses::CategoricalCrossentropy()(a[0], a[1]); });
      },
      ErrorCode::kShapeMismatch, {"categorical_crossentropy", "(2, 3)", "(2, 2)", "sparse"});
  expect_error([] { losses::CategoricalCrossentropy({.label_smoothing = -0.1}); }, ErrorCode::kInvalidArgument,
               {"label_smoothing", "-0.1"});
  // One class: softmax over a single unit makes the loss constant.
  expect_error(
      [] {
        in_trace({f32({1, 1}, {2, 1}), f32({0.3f, 0.9f}, {2, 1})},
                 [](const std::vector<Tensor>& a) { losses::CategoricalCrossentropy()(a[0], a[1]); });
      },
      ErrorCode::kInvalidArgument, {"categorical_crossentropy", "(2, 1)", "single class", "binary"});
}

// ---- sparse categorical crossentropy ------------------------------------------------------------

TEST(SparseCategoricalCrossentropyLoss, KerasExampleWithEveryLabelForm) {
  // Keras docs: labels [1, 2], y_pred [[0.05, 0.95, 0], [0.1, 0.8, 0.1]] -> 1.177.
  const Array p = f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3});
  const double want = (-std::log(0.95) - std::log(0.1)) / 2;
  losses::SparseCategoricalCrossentropy scce;
  expect_close(value_of(scce, i32({1, 2}, {2}), p), want);
  expect_close(value_of(scce, i32({1, 2}, {2, 1}), p), want);
  expect_close(value_of(scce, f32({1, 2}, {2}), p), want);
  expect_close(value_of(scce, Array::from_vector<int64_t>({1, 2}, {2}), p), want);
  expect_close(value_of(scce, i32({1, 2}, {2}), p, f32({0.3f, 0.7f}, {2, 1})),
               (-0.3 * std::log(0.95) - 0.7 * std::log(0.1)) / 2);
}

TEST(SparseCategoricalCrossentropyLoss, LogitsMatchTheLogSoftmaxForm) {
  // Random logits of moderate and huge scale: the loss is -log_softmax(x)[label] computed in
  // double on the host (max-shifted).
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t batch = 6, classes = 5;
  for (float scale : {1.0f, 1e4f}) {
    std::vector<float> x(static_cast<size_t>(batch * classes));
    for (float& v : x) v = scale * normal(rng);
    std::vector<int32_t> labels = {0, 4, 2, 3, 1, 4};
    std::vector<double> want;
    for (int64_t b = 0; b < batch; ++b) {
      const float* row = &x[static_cast<size_t>(b * classes)];
      double m = row[0];
      for (int64_t c = 1; c < classes; ++c) m = std::max(m, static_cast<double>(row[c]));
      double s = 0;
      for (int64_t c = 0; c < classes; ++c) s += std::exp(row[c] - m);
      want.push_back(m + std::log(s) - row[labels[static_cast<size_t>(b)]]);
    }
    losses::SparseCategoricalCrossentropy scce({.from_logits = true, .reduction = Reduction::kNone});
    Array r = loss_of(scce, i32(labels, {batch}), f32(x, {batch, classes}));
    EXPECT_EQ(r.shape(), (Shape{batch}));
    const std::vector<double> got = r.to_doubles();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(std::isfinite(got[i]));
      EXPECT_NEAR(got[i], want[i], 2e-6 * std::max(1.0, std::abs(want[i]))) << "sample " << i;
    }
  }
}

TEST(SparseCategoricalCrossentropyLoss, OutOfRangeLabelsSelectNothingAndHostCheckCatchesThem) {
  // JAX's one_hot of label 3 (of 3 classes) is all zeros: that sample contributes 0.
  losses::SparseCategoricalCrossentropy scce({.reduction = Reduction::kNone});
  const Array p = f32({0.5f, 0.25f, 0.25f, 0.5f, 0.25f, 0.25f}, {2, 3});
  testing::expect_values(loss_of(scce, i32({0, 3}, {2}), p), {-std::log(0.5), 0}, 1e-6);
  losses::validate_sparse_labels(i32({0, 2, 1}, {3}), 3);
  losses::validate_sparse_labels(f32({0, 2.5f}, {2, 1}), 3);  // floats truncate as in the loss
  expect_error([] { losses::validate_sparse_labels(i32({0, 3}, {2}), 3); }, ErrorCode::kOutOfRange,
               {"label 3", "flat index 1", "[0, 3)"});
  expect_error([] { losses::validate_sparse_labels(i32({-1}, {1}), 3); }, ErrorCode::kOutOfRange,
               {"label -1", "[0, 3)"});
  expect_error([] { losses::validate_sparse_labels(i32({0}, {1}), 0); }, ErrorCode::kInvalidArgument,
               {"num_classes = 0"});
}

TEST(SparseCategoricalCrossentropyLoss, BadShapesAreClearErrors) {
  expect_error(
      [] {
        in_trace({i32({0, 1, 0, 1}, {2, 2}), f32({0.5f, 0.5f, 0.5f, 0.5f, 0, 0}, {2, 3})},
                 [](const std::vector<Tensor>& a) { losses::SparseCategoricalCrossentropy()(a[0], a[1]); });
      },
      ErrorCode::kShapeMismatch, {"sparse_categorical_crossentropy", "(2, 2)", "(2, 3)", "(2,)"});
  expect_error(
      [] {
        in_trace({i32({0, 1, 2}, {3}), f32({0.5f, 0.5f, 0.5f, 0.5f}, {2, 2})},
                 [](const std::vector<Tensor>& a) { losses::SparseCategoricalCrossentropy()(a[0], a[1]); });
      },
      ErrorCode::kShapeMismatch, {"(3,)", "(2, 2)"});
  expect_error(
      [] {
        in_trace({i32({0, 0}, {2}), f32({2, -1}, {2, 1})}, [](const std::vector<Tensor>& a) {
          losses::SparseCategoricalCrossentropy({.from_logits = true})(a[0], a[1]);
        });
      },
      ErrorCode::kInvalidArgument, {"sparse_categorical_crossentropy", "single class"});
}

// ---- factory and custom losses ------------------------------------------------------------------

TEST(LossFactory, KerasNamesAndAliases) {
  struct Case {
    const char* identifier;
    const char* name;
  };
  for (const Case& c :
       {Case{"mean_squared_error", "mean_squared_error"}, Case{"mse", "mean_squared_error"},
        Case{"MSE", "mean_squared_error"}, Case{"MeanSquaredError", "mean_squared_error"},
        Case{"mae", "mean_absolute_error"}, Case{"bce", "binary_crossentropy"},
        Case{"binary_crossentropy", "binary_crossentropy"},
        Case{"categorical_crossentropy", "categorical_crossentropy"},
        Case{"sparse_categorical_crossentropy", "sparse_categorical_crossentropy"},
        Case{"SparseCategoricalCrossentropy", "sparse_categorical_crossentropy"}, Case{"huber", "huber_loss"},
        Case{"Huber", "huber_loss"}, Case{"kl_divergence", "kl_divergence"}, Case{"KLDivergence", "kl_divergence"},
        Case{"kld", "kl_divergence"}, Case{"KLD", "kl_divergence"}}) {
    std::unique_ptr<losses::Loss> loss = losses::get(c.identifier);
    ASSERT_NE(loss, nullptr) << c.identifier;
    EXPECT_EQ(loss->name(), c.name) << c.identifier;
    EXPECT_EQ(loss->reduction(), Reduction::kSumOverBatchSize);
    EXPECT_EQ(loss->dtype(), DType::kF32);
  }
  // The resolved object computes the right loss: sparse CE of the Keras example, from
  // probabilities (Keras's default from_logits = false).
  std::unique_ptr<losses::Loss> scce = losses::get("sparse_categorical_crossentropy");
  expect_close(value_of(*scce, i32({1, 2}, {2}), f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3})),
               (-std::log(0.95) - std::log(0.1)) / 2);
  EXPECT_EQ(value_of(*losses::get("mae"), f32({1, 2}, {2, 1}), f32({2, 3}, {2, 1}), f32({0, 1}, {2, 1})), 0.5);
}

TEST(LossFactory, UnknownNameListsTheKnownOnes) {
  expect_error([] { losses::get("hinge_loss"); }, ErrorCode::kInvalidArgument,
               {"hinge_loss", "mean_squared_error", "sparse_categorical_crossentropy", "mae"});
  EXPECT_EQ(losses::known_names().size(), 22u);
}

/// A custom loss written by deriving from Loss: the per-sample squared hinge of +-1 labels.
class SquaredHinge final : public losses::Loss {
 public:
  SquaredHinge() : Loss("squared_hinge", Reduction::kSumOverBatchSize, DType::kF32) {}

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override {
    return mean(square(maximum(1.0 - y_true * y_pred, zeros_like(y_pred))), {-1});
  }
};

TEST(CustomLoss, DerivedClassGetsWeightsAndReductionFromTheBase) {
  // Per-sample: max(1 - 1 * 0.5, 0)^2 = 0.25 and max(1 - (-1)(-2), 0)^2 = 0; weights [2, 1]:
  // (0.5 + 0) / 2 = 0.25.
  SquaredHinge hinge;
  EXPECT_EQ(value_of(hinge, f32({1, -1}, {2, 1}), f32({0.5f, -2}, {2, 1}), f32({2, 1}, {2})), 0.25);
}

TEST(CustomLoss, LossFunctionWrapperWrapsAPerSampleFunction) {
  losses::LossFunctionWrapper cubic(
      [](const Tensor& t, const Tensor& p) { return mean(abs(t - p) * square(t - p), {-1}); },
      {.reduction = Reduction::kSum, .name = "cubic"});
  EXPECT_EQ(cubic.name(), "cubic");
  // (batch,) targets are expanded to (batch, 1) before the function: |1-3|^3 + |0-1|^3 = 9.
  EXPECT_EQ(value_of(cubic, f32({1, 0}, {2}), f32({3, 1}, {2, 1})), 9.0);
  expect_error([] { losses::LossFunctionWrapper(nullptr); }, ErrorCode::kInvalidArgument, {"loss function is empty"});
  expect_error([] { losses::MeanSquaredError({.dtype = DType::kI32}); }, ErrorCode::kDTypeMismatch,
               {"i32", "floating"});
  expect_error([] { losses::MeanSquaredError({.name = ""}); }, ErrorCode::kInvalidArgument, {"name is empty"});
}

TEST(LossErrors, InvalidTensorsAndScalarsAreClearErrors) {
  expect_error(
      [] {
        in_trace({f32({1}, {1})}, [](const std::vector<Tensor>& a) { losses::MeanSquaredError()(a[0], Tensor()); });
      },
      ErrorCode::kTraceError, {"y_pred", "invalid"});
  expect_error(
      [] {
        in_trace({Array::scalar(1.0, DType::kF32)},
                 [](const std::vector<Tensor>& a) { losses::mean_squared_error(a[0], a[0]); });
      },
      ErrorCode::kInvalidArgument, {"scalars", "rank >= 1"});
  expect_error(
      [] {
        in_trace({f32({1, 2, 3}, {3, 1}), f32({1, 2}, {2, 1})},
                 [](const std::vector<Tensor>& a) { losses::mean_squared_error(a[0], a[1]); });
      },
      ErrorCode::kShapeMismatch, {"mean_squared_error", "(3, 1)", "(2, 1)", "broadcast"});
}

// ---- gradients ----------------------------------------------------------------------------------

TEST(LossGradients, MeanSquaredErrorMatchesFiniteDifferencesAndTheClosedForm) {
  losses::MeanSquaredError mse({.dtype = DType::kF64});
  const TraceFn fn = [&mse](const std::vector<Tensor>& a) { return std::vector<Tensor>{mse(a[0], a[1], a[2])}; };
  const Array t = testing::random_f64({3, 2}, 1), p = testing::random_f64({3, 2}, 2);
  const Array w = f64({1.0, 0.5, 2.0}, {3});
  testing::check_grads(fn, {t, p, w}, {.argnums = {1}});
  // d/dp of sum_b w_b mean_j (p - t)^2 / batch = 2 w_b (p - t) / (2 * 3).
  std::vector<Array> g = testing::grads_at(fn, {t, p, w}, {1});
  const std::vector<double> tv = t.to_doubles(), pv = p.to_doubles(), gv = g[0].to_doubles();
  for (size_t i = 0; i < gv.size(); ++i) {
    const double wb = w.to_doubles()[i / 2];
    EXPECT_NEAR(gv[i], 2 * wb * (pv[i] - tv[i]) / 6, 1e-12) << i;
  }
}

TEST(LossGradients, HuberMatchesFiniteDifferencesAtAndAroundTheKink) {
  // Errors on both sides of delta and exactly at +-delta (where the two branches meet with the
  // same slope): the gradient is clamp(e, -delta, delta) / (number of elements).
  for (double delta : {1.0, 0.5}) {
    SCOPED_TRACE(delta);
    losses::Huber huber({.delta = delta, .dtype = DType::kF64});
    const TraceFn fn = [&huber](const std::vector<Tensor>& a) { return std::vector<Tensor>{huber(a[0], a[1])}; };
    const Array t = f64({0, 0, 0, 0, 1, 1, 1, 1}, {2, 4});
    const std::vector<double> e = {-2.0, -delta, -0.3, 0.1, delta, 2.5, 0.0, -0.75 * delta};
    std::vector<double> pv(e.size());
    for (size_t i = 0; i < e.size(); ++i) pv[i] = t.to_doubles()[i] + e[i];
    const Array p = f64(pv, {2, 4});
    testing::check_grads(fn, {t, p}, {.argnums = {1}});
    std::vector<Array> g = testing::grads_at(fn, {t, p}, {1});
    for (size_t i = 0; i < e.size(); ++i) {
      EXPECT_NEAR(g[0].to_doubles()[i], std::clamp(e[i], -delta, delta) / 8.0, 1e-12) << i;
    }
  }
}

TEST(LossGradients, KLDivergenceMatchesFiniteDifferencesAndMinusTrueOverPred) {
  losses::KLDivergence kld({.dtype = DType::kF64});
  const TraceFn fn = [&kld](const std::vector<Tensor>& a) { return std::vector<Tensor>{kld(a[0], a[1])}; };
  const Array t = f64({0.2, 0.3, 0.5, 0.6, 0.1, 0.3}, {2, 3});
  const Array p = f64({0.1, 0.6, 0.3, 0.25, 0.25, 0.5}, {2, 3});
  testing::check_grads(fn, {t, p}, {.argnums = {1}});
  // d/dp of mean_b sum_j t log(t / p) = -t / p / batch.
  std::vector<Array> g = testing::grads_at(fn, {t, p}, {1});
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(g[0].to_doubles()[i], -t.to_doubles()[i] / p.to_doubles()[i] / 2, 1e-12) << i;
  }
}

TEST(LossGradients, SparseCrossentropyFromLogitsMatchesFiniteDifferencesAndSoftmaxMinusOneHot) {
  losses::SparseCategoricalCrossentropy scce({.from_logits = true, .dtype = DType::kF64});
  const TraceFn fn = [&scce](const std::vector<Tensor>& a) { return std::vector<Tensor>{scce(a[1], a[0])}; };
  const Array logits = testing::random_f64({4, 3}, 3, -3, 3);
  const Array labels = i32({2, 0, 1, 2}, {4});
  testing::check_grads(fn, {logits, labels}, {.argnums = {0}});
  // Closed form: (softmax(x) - one_hot(label)) / batch.
  std::vector<Array> g = testing::grads_at(fn, {logits, labels}, {0});
  const std::vector<double> x = logits.to_doubles(), gv = g[0].to_doubles();
  for (int64_t b = 0; b < 4; ++b) {
    double s = 0;
    for (int64_t c = 0; c < 3; ++c) s += std::exp(x[static_cast<size_t>(b * 3 + c)]);
    for (int64_t c = 0; c < 3; ++c) {
      const size_t i = static_cast<size_t>(b * 3 + c);
      const double onehot = labels.to_vector<int32_t>()[static_cast<size_t>(b)] == c ? 1 : 0;
      EXPECT_NEAR(gv[i], (std::exp(x[i]) / s - onehot) / 4, 1e-12) << b << "," << c;
    }
  }
}

TEST(LossGradients, EveryLossIsDifferentiableWithFiniteGradients) {
  // value_and_grad through every loss (f32, the trainer's case), at inputs including huge logits
  // and probabilities at the clip bounds: the gradients exist and are finite.
  struct Case {
    std::shared_ptr<losses::Loss> loss;
    Array y_true, y_pred;
  };
  const std::vector<Case> cases = {
      {std::make_shared<losses::MeanSquaredError>(), f32({1, 2}, {2, 1}), f32({0, 5}, {2, 1})},
      {std::make_shared<losses::MeanAbsoluteError>(), f32({1, 2}, {2, 1}), f32({0, 5}, {2, 1})},
      {std::make_shared<losses::BinaryCrossentropy>(), f32({1, 0}, {2, 1}), f32({0, 1}, {2, 1})},
      {std::make_shared<losses::BinaryCrossentropy>(losses::BinaryCrossentropyOptions{.from_logits = true}),
       f32({1, 0}, {2, 1}), f32({-1e4f, 1e4f}, {2, 1})},
      {std::make_shared<losses::CategoricalCrossentropy>(), f32({1, 0, 0, 1}, {2, 2}), f32({0, 1, 0.5f, 0.5f}, {2, 2})},
      {std::make_shared<losses::CategoricalCrossentropy>(losses::CategoricalCrossentropyOptions{.from_logits = true}),
       f32({1, 0, 0, 1}, {2, 2}), f32({-1e4f, 1e4f, 3, -3}, {2, 2})},
      {std::make_shared<losses::SparseCategoricalCrossentropy>(
           losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
       i32({0, 1}, {2}), f32({-1e4f, 1e4f, 3, -3}, {2, 2})},
      {std::make_shared<losses::Huber>(), f32({1, 2}, {2, 1}), f32({0, 50}, {2, 1})},
      {std::make_shared<losses::KLDivergence>(), f32({1, 0, 0.5f, 0.5f}, {2, 2}), f32({0, 1, 0.5f, 0.5f}, {2, 2})},
  };
  for (const Case& c : cases) {
    const TraceFn fn = [&c](const std::vector<Tensor>& a) { return std::vector<Tensor>{(*c.loss)(a[0], a[1])}; };
    const TraceFn vg = value_and_grad(fn, {1});
    std::vector<Array> out = run_both(vg, {c.y_true, c.y_pred}, 1e-5);
    ASSERT_EQ(out.size(), 2u) << c.loss->name();
    EXPECT_TRUE(std::isfinite(out[0].element_as_double(0))) << c.loss->name();
    EXPECT_EQ(out[1].shape(), c.y_pred.shape());
    for (double v : out[1].to_doubles()) EXPECT_TRUE(std::isfinite(v)) << c.loss->name();
  }
}

TEST(LossGradients, ZeroWeightMeanHasZeroGradientNotNan) {
  losses::MeanSquaredError mse({.reduction = Reduction::kMeanWithSampleWeight});
  const TraceFn fn = [&mse](const std::vector<Tensor>& a) { return std::vector<Tensor>{mse(a[0], a[1], a[2])}; };
  std::vector<Array> out =
      run_both(value_and_grad(fn, {1}), {f32({1, 2}, {2, 1}), f32({3, 5}, {2, 1}), f32({0, 0}, {2})});
  testing::expect_values(out[0], {0});
  testing::expect_values(out[1], {0, 0});
}

}  // namespace
}  // namespace ingot
