// Metrics: Mean/Sum and the loss tracker (the contract's 29/3 case), the accuracies, the
// regression metrics, MeanMetricWrapper, the factories (with Keras 3's "accuracy" resolution),
// errors, and interpreter-vs-jit agreement: every update below runs as the trainer runs it, one
// traced function per batch with the state carried between calls in Arrays.
#include "ingot/trainer/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "ingot/trace/ops.h"
#include "ingot/trainer/losses.h"
#include "ingot/trainer/model.h"
#include "losses_metrics_test_util.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::f32;
using testing::i32;
using testing::in_trace;
using testing::interpret_fn;
using testing::run_both;

struct Batch {
  Array y_true, y_pred;
  std::optional<Array> sample_weight;
};

/// Runs `update` (state..., inputs...) -> new state, then `result`, once per batch of `inputs`,
/// interpreted and jit-compiled (which must agree), carrying the state between the calls in
/// Arrays. Returns the last result; the final state goes to `final_state` when given.
double run_updates(const std::vector<Array>& initial,
                   const std::function<std::vector<Tensor>(const std::vector<Tensor>& state,
                                                           const std::vector<Tensor>& inputs)>& update,
                   const std::function<Tensor(const std::vector<Tensor>&)>& result,
                   const std::vector<std::vector<Array>>& inputs, std::vector<Array>* final_state = nullptr) {
  std::vector<Array> state = initial;
  const size_t n = state.size();
  double value = 0;
  for (const std::vector<Array>& in : inputs) {
    std::vector<Array> args = state;
    args.insert(args.end(), in.begin(), in.end());
    TraceFn fn = [&](const std::vector<Tensor>& a) {
      const std::vector<Tensor> s(a.begin(), a.begin() + static_cast<int64_t>(n));
      const std::vector<Tensor> x(a.begin() + static_cast<int64_t>(n), a.end());
      std::vector<Tensor> out = update(s, x);
      out.push_back(result(out));
      return out;
    };
    std::vector<Array> out = run_both(fn, args);
    EXPECT_EQ(out.size(), n + 1);
    EXPECT_EQ(out.back().shape(), Shape{});
    EXPECT_EQ(out.back().dtype(), DType::kF32);
    value = out.back().element_as_double(0);
    state.assign(out.begin(), out.begin() + static_cast<int64_t>(n));
  }
  if (final_state) *final_state = state;
  return value;
}

/// Runs `metric` over `batches` as the trainer does; also checks result_value on the final state.
double run_metric(const metrics::Metric& metric, const std::vector<Batch>& batches) {
  std::vector<std::vector<Array>> inputs;
  for (const Batch& b : batches) {
    std::vector<Array> in = {b.y_true, b.y_pred};
    if (b.sample_weight) in.push_back(*b.sample_weight);
    inputs.push_back(in);
  }
  std::vector<Array> state;
  const double value = run_updates(
      metric.initial_state(),
      [&metric](const std::vector<Tensor>& s, const std::vector<Tensor>& x) {
        std::optional<Tensor> w;
        if (x.size() == 3) w = x[2];
        return metric.update_state(s, x[0], x[1], w);
      },
      [&metric](const std::vector<Tensor>& s) { return metric.result(s); }, inputs, &state);
  EXPECT_EQ(metric.result_value(state), value) << metric.name();
  return value;
}

/// Runs Mean::update_state over `batches` of (values[, weight]).
double run_mean(const metrics::Mean& mean, const std::vector<std::vector<Array>>& batches,
                std::vector<Array>* final_state = nullptr) {
  return run_updates(
      mean.initial_state(),
      [&mean](const std::vector<Tensor>& s, const std::vector<Tensor>& x) {
        std::optional<Tensor> w;
        if (x.size() == 2) w = x[1];
        return mean.update_state(s, x[0], w);
      },
      [&mean](const std::vector<Tensor>& s) { return mean.result(s); }, batches, final_state);
}

Array f32_scalar(double v) { return Array::scalar(v, DType::kF32); }

// ---- Mean, Sum and the loss tracker -------------------------------------------------------------

TEST(MeanMetric, StartsAtZeroAndAveragesSamples) {
  metrics::Mean mean;
  EXPECT_EQ(mean.name(), "mean");
  const std::vector<Array> init = mean.initial_state();
  ASSERT_EQ(init.size(), 2u);
  for (const Array& a : init) {
    EXPECT_EQ(a.shape(), Shape{});
    EXPECT_EQ(a.dtype(), DType::kF32);
    EXPECT_EQ(a.element_as_double(0), 0.0);
  }
  EXPECT_EQ(mean.result_value(init), 0.0);  // 0 / 0 -> 0, not NaN
  std::vector<Array> state;
  EXPECT_EQ(run_mean(mean, {{f32({1, 2, 3})}, {f32({10})}}, &state), 4.0);  // 16 / 4
  testing::expect_values(state[0], {16});
  testing::expect_values(state[1], {4});
}

TEST(MeanMetric, SampleWeightsWeightTheMean) {
  metrics::Mean mean;
  EXPECT_EQ(run_mean(mean, {{f32({1, 2, 3}), f32({1, 0, 1})}}), 2.0);  // (1 + 3) / 2
  EXPECT_EQ(run_mean(mean, {{f32({1, 2, 3}), f32({0.5f, 1, 2})}}), static_cast<double>(8.5f / 3.5f));
  // (batch, 1) weights against (batch,) values.
  EXPECT_EQ(run_mean(mean, {{f32({1, 2, 3}), f32({1, 0, 1}, {3, 1})}}), 2.0);
  // All-zero weights: 0, never NaN.
  EXPECT_EQ(run_mean(mean, {{f32({1, 2, 3}), f32({0, 0, 0})}}), 0.0);
}

TEST(MeanMetric, ValuesAreAveragedPerSampleFirst) {
  // [[1, 3], [5, 7]]: per-sample means [2, 6]; each sample counts once: 8 / 2.
  metrics::Mean mean;
  std::vector<Array> state;
  EXPECT_EQ(run_mean(mean, {{f32({1, 3, 5, 7}, {2, 2})}}, &state), 4.0);
  testing::expect_values(state[1], {2});
  // With weights [1, 3]: (2 + 18) / 4 = 5.
  EXPECT_EQ(run_mean(mean, {{f32({1, 3, 5, 7}, {2, 2}), f32({1, 3})}}), 5.0);
  // A scalar value counts as one sample.
  EXPECT_EQ(run_mean(mean, {{f32_scalar(5)}, {f32_scalar(2)}}, &state), 3.5);
  testing::expect_values(state[1], {2});
}

TEST(LossTracker, BatchesOfTwoAndOneWithLossesTenAndNineGiveTwentyNineThirds) {
  // TRAINER_SEMANTICS.md: the tracker weights each batch's mean loss by its batch size, so the
  // epoch loss is the mean over samples: (2 * 10 + 1 * 9) / 3 = 29 / 3, not (10 + 9) / 2.
  metrics::Mean tracker("loss");
  std::vector<Array> state;
  // Each call gets (batch mean loss, the batch's targets); the batch size is the targets' static
  // leading dimension, as the trainer reads it from the batch.
  const double loss = run_updates(
      tracker.initial_state(),
      [&](const std::vector<Tensor>& s, const std::vector<Tensor>& x) {
        return tracker.add_batch(s, x[0], x[1].dim(0));
      },
      [&](const std::vector<Tensor>& s) { return tracker.result(s); },
      {{f32_scalar(10), f32({0, 0})}, {f32_scalar(9), f32({0})}}, &state);
  EXPECT_EQ(loss, static_cast<double>(29.0f / 3.0f));
  EXPECT_NE(loss, 9.5);
  testing::expect_values(state[0], {29});
  testing::expect_values(state[1], {3});
  EXPECT_EQ(tracker.result_value(state), static_cast<double>(29.0f / 3.0f));
  // The same through update_state with the batch size as a scalar sample weight (Keras's call).
  EXPECT_EQ(run_mean(tracker, {{f32_scalar(10), f32_scalar(2)}, {f32_scalar(9), f32_scalar(1)}}),
            static_cast<double>(29.0f / 3.0f));
}

TEST(LossTracker, BadBatchArgumentsAreClearErrors) {
  metrics::Mean tracker("loss");
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), f32_scalar(1)},
                 [&](const std::vector<Tensor>& a) { tracker.add_batch({a[0], a[1]}, a[2], 0); });
      },
      ErrorCode::kInvalidArgument, {"'loss'", "batch_size = 0"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), f32({1, 2})},
                 [&](const std::vector<Tensor>& a) { tracker.add_batch({a[0], a[1]}, a[2], 2); });
      },
      ErrorCode::kInvalidArgument, {"scalar", "(2,)"});
}

TEST(SumMetric, AddsWeightedValues) {
  metrics::Sum total;
  EXPECT_EQ(total.name(), "sum");
  ASSERT_EQ(total.initial_state().size(), 1u);
  std::vector<Array> state = total.initial_state();
  for (const std::vector<Array>& batch :
       {std::vector<Array>{f32({1, 2, 3}), f32({1, 0, 2})}, std::vector<Array>{f32({4})}}) {
    std::vector<Array> args = state;
    args.insert(args.end(), batch.begin(), batch.end());
    std::vector<Array> out = run_both(
        [&](const std::vector<Tensor>& a) {
          std::optional<Tensor> w;
          if (a.size() == 3) w = a[2];
          std::vector<Tensor> s = total.update_state({a[0]}, a[1], w);
          s.push_back(total.result(s));
          return s;
        },
        args);
    state = {out[0]};
  }
  EXPECT_EQ(total.result_value(state), 11.0);  // 1 + 6 + 4
}

// ---- accuracies ---------------------------------------------------------------------------------

TEST(AccuracyMetric, ExactEqualityKerasExample) {
  // Keras docs: [[1], [2], [3], [4]] vs [[0], [2], [3], [4]] -> 0.75; weights [1, 1, 0, 0] -> 0.5.
  metrics::Accuracy acc;
  const Array t = f32({1, 2, 3, 4}, {4, 1}), p = f32({0, 2, 3, 4}, {4, 1});
  EXPECT_EQ(run_metric(acc, {{t, p}}), 0.75);
  EXPECT_EQ(run_metric(acc, {{t, p, f32({1, 1, 0, 0})}}), 0.5);
}

TEST(BinaryAccuracyMetric, KerasExampleAndThreshold) {
  // Keras docs: [[1], [1], [0], [0]] vs [[0.98], [1], [0], [0.6]] -> 0.75; weights [1, 0, 0, 1]
  // -> 0.5.
  metrics::BinaryAccuracy acc;
  const Array t = f32({1, 1, 0, 0}, {4, 1}), p = f32({0.98f, 1, 0, 0.6f}, {4, 1});
  EXPECT_EQ(run_metric(acc, {{t, p}}), 0.75);
  EXPECT_EQ(run_metric(acc, {{t, p, f32({1, 0, 0, 1})}}), 0.5);
  // Strictly greater than the threshold: 0.5 counts as 0.
  EXPECT_EQ(run_metric(acc, {{f32({1, 0}, {2, 1}), f32({0.5f, 0.5f}, {2, 1})}}), 0.5);
  // Threshold 0 for logits; (batch,) labels against (batch, 1) predictions.
  metrics::BinaryAccuracy logits({.threshold = 0.0, .name = "acc"});
  EXPECT_EQ(logits.name(), "acc");
  EXPECT_EQ(run_metric(logits, {{f32({1, 0, 1}), f32({3, -2, -0.5f}, {3, 1})}}), static_cast<double>(2.0f / 3.0f));
  expect_error([] { metrics::BinaryAccuracy({.threshold = std::nan("")}); }, ErrorCode::kInvalidArgument,
               {"threshold is NaN"});
}

TEST(CategoricalAccuracyMetric, KerasExampleAcrossBatches) {
  // Keras docs: [[0, 0, 1], [0, 1, 0]] vs [[0.1, 0.9, 0.8], [0.05, 0.95, 0]] -> 0.5; weights
  // [0.7, 0.3] -> 0.3.
  metrics::CategoricalAccuracy acc;
  const Array t = f32({0, 0, 1, 0, 1, 0}, {2, 3});
  const Array p = f32({0.1f, 0.9f, 0.8f, 0.05f, 0.95f, 0}, {2, 3});
  EXPECT_EQ(run_metric(acc, {{t, p}}), 0.5);
  EXPECT_EQ(run_metric(acc, {{t, p, f32({0.7f, 0.3f})}}), static_cast<double>(0.3f / 1.0f));
  // Two batches accumulate: 1 of 2, then 1 of 1 -> 2 / 3.
  EXPECT_EQ(run_metric(acc, {{t, p}, {f32({1, 0, 0}, {1, 3}), f32({5, 1, 2}, {1, 3})}}),
            static_cast<double>(2.0f / 3.0f));
}

TEST(SparseCategoricalAccuracyMetric, KerasExampleWithEveryLabelForm) {
  // Keras docs: [[2], [1]] vs [[0.1, 0.6, 0.3], [0.05, 0.95, 0]] -> 0.5; weights [0.7, 0.3]
  // -> 0.3.
  metrics::SparseCategoricalAccuracy acc;
  const Array p = f32({0.1f, 0.6f, 0.3f, 0.05f, 0.95f, 0}, {2, 3});
  EXPECT_EQ(run_metric(acc, {{f32({2, 1}, {2, 1}), p}}), 0.5);
  EXPECT_EQ(run_metric(acc, {{i32({2, 1}, {2}), p}}), 0.5);
  EXPECT_EQ(run_metric(acc, {{Array::from_vector<int64_t>({2, 1}, {2, 1}), p}}), 0.5);
  EXPECT_EQ(run_metric(acc, {{i32({2, 1}, {2}), p, f32({0.7f, 0.3f})}}), static_cast<double>(0.3f));
  // A non-integral float label never matches.
  EXPECT_EQ(run_metric(acc, {{f32({1.5f, 1}, {2}), p}}), 0.5);
  // Accumulation: 1 of 2, then 2 of 2 -> 3 / 4.
  EXPECT_EQ(run_metric(acc, {{i32({2, 1}, {2}), p}, {i32({0, 1}, {2}), f32({3, 1, 2, 0, 4, 1}, {2, 3})}}), 0.75);
}

TEST(SparseTopKCategoricalAccuracyMetric, KerasExampleAndTwoBatches) {
  // Keras docs (k = 1): [2, 1] vs [[0.1, 0.9, 0.8], [0.05, 0.95, 0]] -> 0.5; weights [0.7, 0.3]
  // -> 0.3.
  metrics::SparseTopKCategoricalAccuracy top1({.k = 1});
  const Array p = f32({0.1f, 0.9f, 0.8f, 0.05f, 0.95f, 0}, {2, 3});
  EXPECT_EQ(run_metric(top1, {{i32({2, 1}, {2}), p}}), 0.5);
  EXPECT_EQ(run_metric(top1, {{i32({2, 1}, {2}), p, f32({0.7f, 0.3f})}}), static_cast<double>(0.3f));
  // k = 2: label 2 (0.8) is second: both hit. Default k = 5 >= classes: every label hits.
  EXPECT_EQ(run_metric(metrics::SparseTopKCategoricalAccuracy({.k = 2}), {{i32({2, 1}, {2}), p}}), 1.0);
  metrics::SparseTopKCategoricalAccuracy top5;
  EXPECT_EQ(top5.name(), "sparse_top_k_categorical_accuracy");
  EXPECT_EQ(run_metric(top5, {{i32({0, 2}, {2}), p}}), 1.0);
  // Two batches of 4 classes, k = 2, (batch, 1) float labels:
  //   batch 1: [3, 0, 1] vs rows ranking 3 first, 0 third, 1 tied for first -> 2 hits;
  //   batch 2: [2] vs a row where 2 is last -> 0 hits, and an out-of-range label 7 -> 0.
  // Total 2 of 5.
  metrics::SparseTopKCategoricalAccuracy top2({.k = 2});
  const Array p1 = f32({0.1f, 0.2f, 0.3f, 0.4f,  //
                        0.2f, 0.5f, 0.3f, 0.0f,  //
                        0.4f, 0.4f, 0.1f, 0.1f},
                       {3, 4});
  const Array p2 = f32({0.3f, 0.3f, 0.1f, 0.3f, 0.1f, 0.2f, 0.3f, 0.4f}, {2, 4});
  EXPECT_EQ(run_metric(top2, {{f32({3, 0, 1}, {3, 1}), p1}, {f32({2, 7}, {2, 1}), p2}}), static_cast<double>(0.4f));
  // A NaN score at the label never hits (the JAX back end treats it as -inf).
  EXPECT_EQ(run_metric(top5, {{i32({0}, {1}), f32({NAN, 0.5f}, {1, 2})}}), 0.0);
  expect_error([] { metrics::SparseTopKCategoricalAccuracy({.k = 0}); }, ErrorCode::kInvalidArgument,
               {"SparseTopKCategoricalAccuracy", "k = 0"});
}

/// Runs `metric` over `batches` like run_metric and returns the final state's values.
std::vector<std::vector<double>> final_state_of(const metrics::Metric& metric, const std::vector<Batch>& batches) {
  std::vector<std::vector<Array>> inputs;
  for (const Batch& b : batches) {
    std::vector<Array> in = {b.y_true, b.y_pred};
    if (b.sample_weight) in.push_back(*b.sample_weight);
    inputs.push_back(in);
  }
  std::vector<Array> state;
  run_updates(
      metric.initial_state(),
      [&metric](const std::vector<Tensor>& s, const std::vector<Tensor>& x) {
        std::optional<Tensor> w;
        if (x.size() == 3) w = x[2];
        return metric.update_state(s, x[0], x[1], w);
      },
      [&metric](const std::vector<Tensor>& s) { return metric.result(s); }, inputs, &state);
  std::vector<std::vector<double>> values;
  for (const Array& a : state) values.push_back(a.to_doubles());
  return values;
}

TEST(PrecisionRecallMetrics, KerasExamplesAndTwoBatches) {
  // Keras docs: y_true [0, 1, 1, 1], y_pred [1, 0, 1, 1] -> precision 2 / 3, recall 2 / 3; with
  // sample_weight [0, 0, 1, 0] both are 1.
  const Array t = f32({0, 1, 1, 1}), p = f32({1, 0, 1, 1});
  metrics::Precision precision;
  metrics::Recall recall;
  EXPECT_EQ(precision.name(), "precision");
  EXPECT_EQ(recall.name(), "recall");
  EXPECT_NEAR(run_metric(precision, {{t, p}}), 2.0 / 3, 1e-7);
  EXPECT_NEAR(run_metric(recall, {{t, p}}), 2.0 / 3, 1e-7);
  EXPECT_EQ(run_metric(precision, {{t, p, f32({0, 0, 1, 0})}}), 1.0);
  EXPECT_EQ(run_metric(recall, {{t, p, f32({0, 0, 1, 0})}}), 1.0);
  // Second batch (batch, 1): labels [1, 1, 0], predictions [0.5, 0.9, 0.7]; 0.5 is not above
  // the threshold. Precision: tp 2 + 1, fp 1 + 1 -> 3 / 5. Recall: tp 3, fn 1 + 1 -> 3 / 5.
  const Batch second = {f32({1, 1, 0}, {3, 1}), f32({0.5f, 0.9f, 0.7f}, {3, 1})};
  EXPECT_EQ(final_state_of(precision, {{t, p}, second}), (std::vector<std::vector<double>>{{3}, {2}}));
  EXPECT_EQ(final_state_of(recall, {{t, p}, second}), (std::vector<std::vector<double>>{{3}, {2}}));
  EXPECT_NEAR(run_metric(precision, {{t, p}, second}), 0.6, 1e-7);
  // Threshold 0.6 on the second batch alone: 0.9 and 0.7 are positive -> precision 1 / 2,
  // recall 1 / 2. Weights (batch,) [2, 1, 3]: tp 1, fp 3, fn 2.
  metrics::Precision p06({.thresholds = 0.6});
  metrics::Recall r06({.thresholds = 0.6});
  EXPECT_EQ(run_metric(p06, {second}), 0.5);
  EXPECT_EQ(run_metric(r06, {second}), 0.5);
  const Batch weighted = {second.y_true, second.y_pred, f32({2, 1, 3})};
  EXPECT_EQ(run_metric(p06, {weighted}), 0.25);
  EXPECT_NEAR(run_metric(r06, {weighted}), 1.0 / 3, 1e-7);
  // Nothing predicted positive / no positive labels: 0, not NaN.
  EXPECT_EQ(run_metric(precision, {{f32({1, 0}), f32({0.1f, 0.2f})}}), 0.0);
  EXPECT_EQ(run_metric(recall, {{f32({0, 0}), f32({0.9f, 0.2f})}}), 0.0);
}

TEST(PrecisionRecallMetrics, BadOptionsAndShapesAreClearErrors) {
  expect_error([] { metrics::Precision({.thresholds = 1.5}); }, ErrorCode::kInvalidArgument,
               {"Precision", "thresholds = 1.5", "[0, 1]"});
  expect_error([] { metrics::Recall({.thresholds = std::nan("")}); }, ErrorCode::kInvalidArgument,
               {"Recall", "thresholds = nan"});
  metrics::Precision precision;
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), f32({0, 1, 1}, {3, 1}), f32({0, 1}, {2, 1})},
                 [&](const std::vector<Tensor>& a) { precision.update_state({a[0], a[1]}, a[2], a[3]); });
      },
      ErrorCode::kShapeMismatch, {"precision", "(3, 1)", "(2, 1)"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), f32({0, 1}, {2, 1}), f32({0, 1}, {2, 1}), f32({1, 1, 1})},
                 [&](const std::vector<Tensor>& a) { precision.update_state({a[0], a[1]}, a[2], a[3], a[4]); });
      },
      ErrorCode::kShapeMismatch, {"sample_weight", "(3,)", "(2, 1)"});
}

// Two rows of four class scores (and one more row as a second batch) for top_k / class_id.
//   row 0: scores [0.1, 0.7, 0.4, 0.7], labels [0, 1, 1, 0]  (a tie at 0.7: indices 1 and 3)
//   row 1: scores [0.9, 0.2, 0.3, 0.05], labels [0, 0, 1, 1]
//   row 2: scores [0.2, 0.1, 0.6, 0.3], labels [0, 0, 1, 0]  (second batch)
Batch top_k_rows() {
  return {f32({0, 1, 1, 0, 0, 0, 1, 1}, {2, 4}), f32({0.1f, 0.7f, 0.4f, 0.7f, 0.9f, 0.2f, 0.3f, 0.05f}, {2, 4})};
}
Batch top_k_second_batch() { return {f32({0, 0, 1, 0}, {1, 4}), f32({0.2f, 0.1f, 0.6f, 0.3f}, {1, 4})}; }

TEST(PrecisionRecallMetrics, TopKKeepsTheLargestPredictionsPerRowWithKerasTies) {
  // top_k = 1, default threshold NEG_INF (-1e10): row 0's tie 0.7 / 0.7 goes to the lower index
  // (jax.lax.top_k's order), index 1 (label 1): tp; row 1: index 0 (0.9, label 0): fp.
  // Precision 1 / (1 + 1); recall: 4 positive labels, tp 1 -> 1 / 4. (Had the tie gone to index
  // 3, label 0, precision would be 0.)
  const metrics::Precision p1({.top_k = 1});
  const metrics::Recall r1({.top_k = 1});
  EXPECT_EQ(p1.threshold(), metrics::kNegInf);
  EXPECT_EQ(metrics::Precision().threshold(), 0.5);
  EXPECT_EQ(run_metric(p1, {top_k_rows()}), 0.5);
  EXPECT_EQ(run_metric(r1, {top_k_rows()}), 0.25);
  EXPECT_EQ(final_state_of(p1, {top_k_rows()}), (std::vector<std::vector<double>>{{1}, {1}}));
  // top_k = 2: row 0 keeps indices 1 and 3 (labels 1, 0): tp 1, fp 1; row 1 keeps 0 and 2
  // (0.9, 0.3; labels 0, 1): tp 1, fp 1. Precision 2 / 4; recall 2 / 4.
  EXPECT_EQ(run_metric(metrics::Precision({.top_k = 2}), {top_k_rows()}), 0.5);
  EXPECT_EQ(run_metric(metrics::Recall({.top_k = 2}), {top_k_rows()}), 0.5);
  // top_k = 2 with thresholds 0.5: row 0's 0.7 and 0.7 pass (tp 1, fp 1); row 1's 0.9 passes
  // (fp), 0.3 does not. Precision 1 / 3; recall 1 / 4.
  EXPECT_NEAR(run_metric(metrics::Precision({.thresholds = 0.5, .top_k = 2}), {top_k_rows()}), 1.0 / 3, 1e-7);
  EXPECT_EQ(run_metric(metrics::Recall({.thresholds = 0.5, .top_k = 2}), {top_k_rows()}), 0.25);
  // Sample weights (batch,) [2, 1] with top_k = 1: tp 2 (row 0), fp 1 (row 1) -> 2 / 3; the
  // positive labels weigh 2 + 2 + 1 + 1 = 6 -> recall 2 / 6.
  Batch weighted = top_k_rows();
  weighted.sample_weight = f32({2, 1});
  EXPECT_NEAR(run_metric(p1, {weighted}), 2.0 / 3, 1e-7);
  EXPECT_NEAR(run_metric(r1, {weighted}), 1.0 / 3, 1e-7);
  // Two batches accumulate: row 2's top-1 is index 2 (0.6, label 1): tp. Precision (1 + 1) /
  // (2 + 1) = 2 / 3; recall: 5 positive labels -> 2 / 5.
  EXPECT_NEAR(run_metric(p1, {top_k_rows(), top_k_second_batch()}), 2.0 / 3, 1e-7);
  EXPECT_NEAR(run_metric(r1, {top_k_rows(), top_k_second_batch()}), 0.4, 1e-7);
  EXPECT_EQ(final_state_of(r1, {top_k_rows(), top_k_second_batch()}), (std::vector<std::vector<double>>{{2}, {3}}));
}

TEST(PrecisionRecallMetrics, ClassIdUsesOneColumnAfterTheTopK) {
  // class_id = 1 (threshold 0.5): column [0.7, 0.2], labels [1, 0]: tp 1, fp 0, fn 0 -> 1, 1.
  EXPECT_EQ(run_metric(metrics::Precision({.class_id = 1}), {top_k_rows()}), 1.0);
  EXPECT_EQ(run_metric(metrics::Recall({.class_id = 1}), {top_k_rows()}), 1.0);
  // class_id = 0: column [0.1, 0.9], labels [0, 0]: fp 1 -> precision 0; no positive label ->
  // recall 0 (not NaN).
  EXPECT_EQ(run_metric(metrics::Precision({.class_id = 0}), {top_k_rows()}), 0.0);
  EXPECT_EQ(run_metric(metrics::Recall({.class_id = 0}), {top_k_rows()}), 0.0);
  // top_k = 2 with class_id = 2, Keras's order (top-k over the whole row, then the column):
  // row 0's top 2 are indices 1 and 3, so its index 2 (label 1) is negative: fn; row 1's top 2
  // are 0 and 2, so index 2 (0.3 > NEG_INF, label 1) is a tp. Precision 1 / 1, recall 1 / 2.
  // (Slicing first would keep both and give recall 1.)
  EXPECT_EQ(run_metric(metrics::Precision({.top_k = 2, .class_id = 2}), {top_k_rows()}), 1.0);
  EXPECT_EQ(run_metric(metrics::Recall({.top_k = 2, .class_id = 2}), {top_k_rows()}), 0.5);
  // With the second batch (row 2: top 2 are 2 and 3, index 2 label 1: tp) and weights [3, 1]
  // then [2]: tp 1 + 2 = 3, fn 3 -> recall 3 / 6.
  Batch first = top_k_rows(), second = top_k_second_batch();
  first.sample_weight = f32({3, 1});
  second.sample_weight = f32({2}, {1, 1});
  EXPECT_EQ(run_metric(metrics::Recall({.top_k = 2, .class_id = 2}), {first, second}), 0.5);
  EXPECT_EQ(final_state_of(metrics::Recall({.top_k = 2, .class_id = 2}), {first, second}),
            (std::vector<std::vector<double>>{{3}, {3}}));
}

TEST(PrecisionRecallMetrics, BadTopKAndClassIdAreClearErrors) {
  expect_error([] { metrics::Precision({.top_k = 0}); }, ErrorCode::kInvalidArgument,
               {"Precision", "top_k = 0", ">= 1"});
  expect_error([] { metrics::Recall({.class_id = -1}); }, ErrorCode::kInvalidArgument,
               {"Recall", "class_id = -1", ">= 0"});
  expect_error([] { metrics::Recall({.thresholds = -0.5, .top_k = 1}); }, ErrorCode::kInvalidArgument,
               {"Recall", "thresholds = -0.5", "[0, 1]"});
  auto update = [](const metrics::Metric& m, const Array& t, const Array& p) {
    in_trace({f32_scalar(0), f32_scalar(0), t, p},
             [&](const std::vector<Tensor>& a) { m.update_state({a[0], a[1]}, a[2], a[3]); });
  };
  const Batch rows = top_k_rows();
  expect_error([&] { update(metrics::Precision({.top_k = 5}), rows.y_true, rows.y_pred); }, ErrorCode::kInvalidArgument,
               {"precision", "top_k = 5", "4 entries", "(2, 4)"});
  expect_error([&] { update(metrics::Recall({.class_id = 4}), rows.y_true, rows.y_pred); }, ErrorCode::kInvalidArgument,
               {"recall", "class_id = 4", "(2, 4)", "[0, classes)"});
  expect_error([&] { update(metrics::Recall({.class_id = 0}), f32({1, 0}), f32({0.2f, 0.9f})); },
               ErrorCode::kInvalidArgument, {"recall", "class_id = 0", "(batch, classes)", "(2,)"});
  // A failed update leaves the metric usable.
  const metrics::Recall ok({.class_id = 3});
  EXPECT_EQ(run_metric(ok, {rows}), 0.0);  // column [0.7, 0.05], labels [0, 1]: fn 1
}

/// A model whose predictions are its inputs: one Dense layer of `features` units with an
/// identity kernel and no bias, so compiled metrics see exactly the x given to evaluate().
std::shared_ptr<Sequential> identity_model(int64_t features) {
  auto model = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = features, .use_bias = false})});
  model->build_model({1, features});
  std::vector<float> eye(static_cast<size_t>(features * features), 0.0f);
  for (int64_t i = 0; i < features; ++i) eye[static_cast<size_t>(i * features + i)] = 1.0f;
  model->set_weights({f32(eye, {features, features})});
  return model;
}

/// Concatenates the rows of batches (rank-2 Arrays with the same number of columns).
Array rows_of(const std::vector<Array>& parts) {
  std::vector<float> values;
  int64_t rows = 0;
  for (const Array& a : parts) {
    const std::vector<float> v = a.to_vector<float>();
    values.insert(values.end(), v.begin(), v.end());
    rows += a.shape()[0];
  }
  return f32(values, {rows, parts.front().shape()[1]});
}

/// Logs of evaluate() on the identity model with `metrics` compiled (batches of `batch_size`).
Logs evaluate_compiled(const std::vector<std::shared_ptr<metrics::Metric>>& metrics, const Array& x, const Array& y,
                       int64_t batch_size, const Array& sample_weight = Array()) {
  auto model = identity_model(x.shape()[1]);
  model->compile({.optimizer = std::make_shared<optimizers::SGD>(),
                  .loss = std::make_shared<losses::MeanSquaredError>(),
                  .weighted_metrics = metrics});
  return model->evaluate({.x = x, .y = y, .sample_weight = sample_weight, .batch_size = batch_size, .verbose = 0});
}

TEST(PrecisionRecallMetrics, CompiledEvaluateMatchesTheEagerValues) {
  // Rows 0, 1, 2 in batches of 2 and 1, as top_k_rows() then top_k_second_batch(); weights
  // [2, 1] then [1]. Precision top_k = 1: tp 2 (row 0) + 1 (row 2), fp 1 (row 1) -> 3 / 4.
  // Recall top_k = 2, class_id = 2: row 0 fn (weight 2), rows 1 and 2 tp (1 + 1) -> 2 / 4.
  Batch first = top_k_rows(), second = top_k_second_batch();
  first.sample_weight = f32({2, 1});
  second.sample_weight = f32({1});
  const metrics::Precision precision({.top_k = 1});
  const metrics::Recall recall({.top_k = 2, .class_id = 2, .name = "recall_2"});
  const double eager_precision = run_metric(precision, {first, second});
  const double eager_recall = run_metric(recall, {first, second});
  EXPECT_EQ(eager_precision, 0.75);
  EXPECT_EQ(eager_recall, 0.5);
  const Logs logs = evaluate_compiled(
      {std::make_shared<metrics::Precision>(precision), std::make_shared<metrics::Recall>(recall)},
      rows_of({first.y_pred, second.y_pred}), rows_of({first.y_true, second.y_true}), 2, f32({2, 1, 1}));
  EXPECT_EQ(*logs.get("precision"), eager_precision);
  EXPECT_EQ(*logs.get("recall_2"), eager_recall);
}

TEST(AUCMetric, KerasExampleOverTwoBatchesWithItsConfusionCounts) {
  // Keras docs: num_thresholds 3 (thresholds [-1e-7, 0.5, 1 + 1e-7]), y_true [0, 0, 1, 1],
  // y_pred [0, 0.5, 0.3, 0.9]: tp [2, 1, 0], fp [2, 0, 0], fn [0, 1, 2], tn [0, 2, 2];
  // recall [1, 0.5, 0], fp rate [1, 0, 0]; heights [0.75, 0.25]; AUC = 1 * 0.75 = 0.75.
  metrics::AUC auc({.num_thresholds = 3});
  EXPECT_EQ(auc.name(), "auc");
  ASSERT_EQ(auc.thresholds().size(), 3u);
  EXPECT_EQ(auc.thresholds()[1], 0.5);
  const std::vector<Batch> batches = {{f32({0, 0}), f32({0, 0.5f})}, {f32({1, 1}), f32({0.3f, 0.9f})}};
  EXPECT_EQ(run_metric(auc, batches), 0.75);
  // State order (Keras's): true_positives, true_negatives, false_positives, false_negatives.
  EXPECT_EQ(final_state_of(auc, batches),
            (std::vector<std::vector<double>>{{2, 1, 0}, {0, 2, 2}, {2, 0, 0}, {0, 1, 2}}));
  // Minoring / majoring: heights min [0.5, 0] / max [1, 0.5] -> 0.5 / 1.
  EXPECT_EQ(
      run_metric(metrics::AUC({.num_thresholds = 3, .summation_method = metrics::AUCSummation::kMinoring}), batches),
      0.5);
  EXPECT_EQ(
      run_metric(metrics::AUC({.num_thresholds = 3, .summation_method = metrics::AUCSummation::kMajoring}), batches),
      1.0);
  // Sample weights [1, 0, 0, 1]: only (label 0, 0.0) and (label 1, 0.9) count: tp [1, 1, 0],
  // fp [1, 0, 0], fn [0, 0, 1], tn [0, 1, 1]; recall [1, 1, 0], fp rate [1, 0, 0] -> AUC 1.
  EXPECT_EQ(
      run_metric(auc, {{f32({0, 0}), f32({0, 0.5f}), f32({1, 0})}, {f32({1, 1}), f32({0.3f, 0.9f}), f32({0, 1})}}),
      1.0);
}

TEST(AUCMetric, PRCurveWithEverySummationMethod) {
  // The Keras example above: tp [2, 1, 0], fp [2, 0, 0], fn [0, 1, 2]; recall [1, 0.5, 0],
  // precision tp / (tp + fp) = [2/4, 1/1, 0 (0/0)]. PR: x = recall, widths [0.5, 0.5].
  const std::vector<Batch> batches = {{f32({0, 0}), f32({0, 0.5f})}, {f32({1, 1}), f32({0.3f, 0.9f})}};
  using metrics::AUCCurve, metrics::AUCSummation;
  auto pr = [](AUCSummation s) {
    return metrics::AUC({.num_thresholds = 3, .curve = AUCCurve::kPR, .summation_method = s});
  };
  // Minoring: heights min(0.5, 1) = 0.5, min(1, 0) = 0 -> 0.5 * 0.5 = 0.25. Majoring: 1, 1 -> 1.
  EXPECT_EQ(run_metric(pr(AUCSummation::kMinoring), batches), 0.25);
  EXPECT_EQ(run_metric(pr(AUCSummation::kMajoring), batches), 1.0);
  // Interpolation (Keras's interpolate_pr_auc): p = tp + fp = [4, 1, 0]; dtp = [1, 1],
  // dp = [3, 1]; slope = [1/3, 1]; intercept = tp[1:] - slope * p[1:] = [1 - 1/3, 0] = [2/3, 0];
  // p ratio = [4/1, 1 (p[2] = 0)]; increments = slope * (dtp + intercept * ln(ratio)) /
  // (tp[1:] + fn[1:]) = [(1/3) (1 + (2/3) ln 4) / 2, 1 * 1 / 2] -> 1/6 + ln(4)/9 + 1/2.
  EXPECT_NEAR(run_metric(pr(AUCSummation::kInterpolation), batches), 1.0 / 6 + std::log(4.0) / 9 + 0.5, 1e-6);
  // Sample weights [1, 0, 0, 1]: tp [1, 1, 0], fp [1, 0, 0], fn [0, 0, 1]; p = [2, 1, 0],
  // dtp = [0, 1], dp = [1, 1], slope [0, 1], intercept [1, 0], ratio [2, 1]: increments
  // [0, 1 * (1 + 0) / (0 + 1)] -> 1. Minoring: recall [1, 1, 0], precision [0.5, 1, 0]:
  // widths [0, 1], heights [0.5, 0] -> 0; majoring: heights [1, 1] -> 1.
  const std::vector<Batch> weighted = {{f32({0, 0}), f32({0, 0.5f}), f32({1, 0})},
                                       {f32({1, 1}), f32({0.3f, 0.9f}), f32({0, 1})}};
  EXPECT_EQ(run_metric(pr(AUCSummation::kInterpolation), weighted), 1.0);
  EXPECT_EQ(run_metric(pr(AUCSummation::kMinoring), weighted), 0.0);
  EXPECT_EQ(run_metric(pr(AUCSummation::kMajoring), weighted), 1.0);
  // from_logits: the same probabilities as logits (sigmoid(-20) ~ 2e-9 > -1e-7, sigmoid(0) = 0.5
  // exactly, ln(0.3/0.7), ln 9) give the same ROC 0.75 and PR values.
  const std::vector<Batch> logits = {
      {f32({0, 0}), f32({-20.0f, 0.0f})},
      {f32({1, 1}), f32({static_cast<float>(std::log(0.3 / 0.7)), static_cast<float>(std::log(9.0))})}};
  EXPECT_EQ(run_metric(metrics::AUC({.num_thresholds = 3, .from_logits = true}), logits), 0.75);
  EXPECT_NEAR(run_metric(metrics::AUC({.num_thresholds = 3, .curve = AUCCurve::kPR, .from_logits = true}), logits),
              1.0 / 6 + std::log(4.0) / 9 + 0.5, 1e-6);
}

// Two labels of four samples (columns of (4, 2) inputs):
//   label 0: y_true [0, 0, 1, 1], y_pred [0, 0.5, 0.3, 0.9] (the Keras example: ROC 0.75)
//   label 1: y_true [1, 0, 0, 0], y_pred [0.8, 0.6, 0.4, 0.2]
// With 3 thresholds [-1e-7, 0.5, 1 + 1e-7], label 1 has tp [1, 1, 0], fp [3, 1, 0],
// fn [0, 0, 1], tn [0, 2, 3]: recall [1, 1, 0], fp rate [1, 1/3, 0]; ROC = (2/3) * 1 +
// (1/3) * 0.5 = 5/6.
Batch two_labels() {
  return {f32({0, 1, 0, 0, 1, 0, 1, 0}, {4, 2}), f32({0, 0.8f, 0.5f, 0.6f, 0.3f, 0.4f, 0.9f, 0.2f}, {4, 2})};
}

TEST(AUCMetric, MultiLabelAveragesThePerLabelAreas) {
  metrics::AUC auc({.num_thresholds = 3, .multi_label = true, .num_labels = 2});
  ASSERT_EQ(auc.initial_state().size(), 4u);
  EXPECT_EQ(auc.initial_state()[0].shape(), (Shape{3, 2}));
  // Mean of 0.75 and 5/6 = 19/24. Fed as batches of 3 and 1 rows.
  const Batch all = two_labels();
  const Batch first = {f32({0, 1, 0, 0, 1, 0}, {3, 2}), f32({0, 0.8f, 0.5f, 0.6f, 0.3f, 0.4f}, {3, 2})};
  const Batch second = {f32({1, 0}, {1, 2}), f32({0.9f, 0.2f}, {1, 2})};
  EXPECT_NEAR(run_metric(auc, {first, second}), 19.0 / 24, 1e-6);
  // State (thresholds, labels), row-major: tp [[2, 1], [1, 1], [0, 0]], tn [[0, 0], [2, 2],
  // [2, 3]], fp [[2, 3], [0, 1], [0, 0]], fn [[0, 0], [1, 0], [2, 1]].
  EXPECT_EQ(final_state_of(auc, {first, second}),
            (std::vector<std::vector<double>>{
                {2, 1, 1, 1, 0, 0}, {0, 0, 2, 2, 2, 3}, {2, 3, 0, 1, 0, 0}, {0, 0, 1, 0, 2, 1}}));
  // label_weights [1, 3]: (1 * 0.75 + 3 * 5/6) / 4 = 3.25 / 4.
  EXPECT_NEAR(
      run_metric(
          metrics::AUC(
              {.num_thresholds = 3, .multi_label = true, .num_labels = 2, .label_weights = std::vector<double>{1, 3}}),
          {all}),
      3.25 / 4, 1e-6);
  // Zero label weights: 0 (divide_no_nan), not NaN.
  EXPECT_EQ(
      run_metric(
          metrics::AUC(
              {.num_thresholds = 3, .multi_label = true, .num_labels = 2, .label_weights = std::vector<double>{0, 0}}),
          {all}),
      0.0);
  // Every curve / summation: the multi-label mean equals the mean of single-label AUCs of the
  // two columns.
  using metrics::AUCCurve, metrics::AUCSummation;
  const Batch col0 = {f32({0, 0, 1, 1}), f32({0, 0.5f, 0.3f, 0.9f})};
  const Batch col1 = {f32({1, 0, 0, 0}), f32({0.8f, 0.6f, 0.4f, 0.2f})};
  for (AUCCurve c : {AUCCurve::kROC, AUCCurve::kPR}) {
    for (AUCSummation s : {AUCSummation::kInterpolation, AUCSummation::kMinoring, AUCSummation::kMajoring}) {
      const metrics::AUC single({.num_thresholds = 3, .curve = c, .summation_method = s});
      const metrics::AUC multi(
          {.num_thresholds = 3, .curve = c, .summation_method = s, .multi_label = true, .num_labels = 2});
      const double expected = (run_metric(single, {col0}) + run_metric(single, {col1})) / 2;
      EXPECT_NEAR(run_metric(multi, {all}), expected, 1e-6) << static_cast<int>(c) << " " << static_cast<int>(s);
    }
  }
}

TEST(AUCMetric, LabelWeightsWithoutMultiLabelWeightEachDecision) {
  // Every element is one decision. Unweighted, the counts of the two labels add up: tp [3, 2, 0],
  // fp [5, 1, 0], fn [0, 1, 3], tn [0, 4, 5]: recall [1, 2/3, 0], fp rate [1, 1/5, 0];
  // ROC = (4/5) (1 + 2/3) / 2 + (1/5) (2/3) / 2 = 2/3 + 1/15 = 11/15.
  EXPECT_NEAR(run_metric(metrics::AUC({.num_thresholds = 3}), {two_labels()}), 11.0 / 15, 1e-6);
  // label_weights [1, 3]: label 1's counts count 3 times: tp [5, 4, 0], fp [11, 3, 0],
  // fn [0, 1, 5], tn [0, 8, 11]: recall [1, 4/5, 0], fp rate [1, 3/11, 0];
  // ROC = (8/11) (0.9) + (3/11) (0.4) = 8.4 / 11.
  const metrics::AUC weighted({.num_thresholds = 3, .label_weights = std::vector<double>{1, 3}});
  EXPECT_NEAR(run_metric(weighted, {two_labels()}), 8.4 / 11, 1e-6);
  EXPECT_EQ(final_state_of(weighted, {two_labels()}),
            (std::vector<std::vector<double>>{{5, 4, 0}, {0, 8, 11}, {11, 3, 0}, {0, 1, 5}}));
  // With sample weights [1, 1, 1, 0] too, row 3 (label 0's 0.9 positive, label 1's 0.2
  // negative) drops out: tp [1 + 3, 0 + 3, 0], fp [2 + 6, 0 + 3, 0], fn [0, 1, 1 + 3],
  // tn [0, 2 + 3, 2 + 6]: recall [1, 3/4, 0], fp rate [1, 3/8, 0];
  // ROC = (5/8) (1.75 / 2) + (3/8) (0.75 / 2) = 0.546875 + 0.140625 = 0.6875.
  Batch with_weights = two_labels();
  with_weights.sample_weight = f32({1, 1, 1, 0});
  EXPECT_NEAR(run_metric(weighted, {with_weights}), 0.6875, 1e-6);
}

TEST(AUCMetric, CompiledEvaluateMatchesTheEagerValues) {
  // Batches of 3 and 1 rows of two_labels(), through a compiled evaluate().
  const Batch first = {f32({0, 1, 0, 0, 1, 0}, {3, 2}), f32({0, 0.8f, 0.5f, 0.6f, 0.3f, 0.4f}, {3, 2})};
  const Batch second = {f32({1, 0}, {1, 2}), f32({0.9f, 0.2f}, {1, 2})};
  const metrics::AUC pr({.num_thresholds = 3, .curve = metrics::AUCCurve::kPR, .name = "pr"});
  const metrics::AUC multi({.num_thresholds = 3,
                            .name = "multi",
                            .multi_label = true,
                            .num_labels = 2,
                            .label_weights = std::vector<double>{1, 3}});
  const metrics::AUC roc(
      {.num_thresholds = 3, .summation_method = metrics::AUCSummation::kMinoring, .name = "roc_min"});
  const double eager_pr = run_metric(pr, {first, second});
  const double eager_multi = run_metric(multi, {first, second});
  const double eager_roc = run_metric(roc, {first, second});
  EXPECT_NEAR(eager_multi, 3.25 / 4, 1e-6);
  // ROC minoring of the pooled counts: recall [1, 2/3, 0], fp rate [1, 1/5, 0] -> (4/5)(2/3).
  EXPECT_NEAR(eager_roc, 8.0 / 15, 1e-6);
  const Logs logs = evaluate_compiled(
      {std::make_shared<metrics::AUC>(pr), std::make_shared<metrics::AUC>(multi), std::make_shared<metrics::AUC>(roc)},
      two_labels().y_pred, two_labels().y_true, 3);
  EXPECT_NEAR(*logs.get("pr"), eager_pr, 1e-6);
  EXPECT_NEAR(*logs.get("multi"), eager_multi, 1e-6);
  EXPECT_NEAR(*logs.get("roc_min"), eager_roc, 1e-6);
}

TEST(AUCMetric, BadCurveAndLabelOptionsAreClearErrors) {
  using metrics::AUC;
  expect_error([] { AUC({.curve = static_cast<metrics::AUCCurve>(7)}); }, ErrorCode::kInvalidArgument,
               {"AUC", "curve = 7", "kPR"});
  expect_error([] { AUC({.summation_method = static_cast<metrics::AUCSummation>(9)}); }, ErrorCode::kInvalidArgument,
               {"AUC", "summation_method = 9"});
  expect_error([] { AUC({.multi_label = true}); }, ErrorCode::kInvalidArgument,
               {"AUC", "multi_label = true needs num_labels"});
  expect_error([] { AUC({.num_labels = 0}); }, ErrorCode::kInvalidArgument, {"AUC", "num_labels = 0", ">= 1"});
  expect_error([] { AUC({.label_weights = std::vector<double>{}}); }, ErrorCode::kInvalidArgument,
               {"AUC", "label_weights is empty"});
  expect_error([] { AUC({.label_weights = std::vector<double>{1, -2}}); }, ErrorCode::kInvalidArgument,
               {"AUC", "label_weights[1] = -2", ">= 0"});
  expect_error([] { AUC({.multi_label = true, .num_labels = 3, .label_weights = std::vector<double>{1, 2}}); },
               ErrorCode::kInvalidArgument, {"AUC", "label_weights has 2 values but num_labels = 3"});
  // Shapes that do not fit the labels are caught at trace time.
  const AUC multi({.num_thresholds = 3, .multi_label = true, .num_labels = 3});
  const Batch rows = two_labels();
  auto update = [&](const AUC& auc, const Array& t, const Array& p) {
    std::vector<Array> args = auc.initial_state();
    args.push_back(t);
    args.push_back(p);
    in_trace(args, [&](const std::vector<Tensor>& a) { auc.update_state({a[0], a[1], a[2], a[3]}, a[4], a[5]); });
  };
  expect_error([&] { update(multi, rows.y_true, rows.y_pred); }, ErrorCode::kShapeMismatch,
               {"auc", "multi_label", "(batch, 3)", "(4, 2)"});
  const AUC weighted({.num_thresholds = 3, .label_weights = std::vector<double>{1, 1, 1}});
  expect_error([&] { update(weighted, rows.y_true, rows.y_pred); }, ErrorCode::kShapeMismatch,
               {"auc", "label_weights", "(batch, 3)", "(4, 2)"});
}

/// Keras's ROC AUC with interpolation, in double, from the definition (thresholds, counts,
/// trapezoids).
double roc_auc_by_hand(const std::vector<double>& labels, const std::vector<double>& preds, int64_t num_thresholds) {
  std::vector<double> thresholds = {-1e-7};
  for (int64_t i = 1; i < num_thresholds - 1; ++i) {
    thresholds.push_back(static_cast<double>(i) / static_cast<double>(num_thresholds - 1));
  }
  thresholds.push_back(1 + 1e-7);
  std::vector<double> tpr, fpr;
  for (double th : thresholds) {
    double tp = 0, fp = 0, fn = 0, tn = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
      const bool actual = labels[i] != 0, predicted = preds[i] > th;
      tp += actual && predicted;
      fp += !actual && predicted;
      fn += actual && !predicted;
      tn += !actual && !predicted;
    }
    tpr.push_back(tp + fn > 0 ? tp / (tp + fn) : 0);
    fpr.push_back(fp + tn > 0 ? fp / (fp + tn) : 0);
  }
  double area = 0;
  for (size_t i = 0; i + 1 < thresholds.size(); ++i) {
    area += (fpr[i] - fpr[i + 1]) * (tpr[i] + tpr[i + 1]) / 2;
  }
  return area;
}

TEST(AUCMetric, TwoHundredThresholdsMatchTheDefinitionAndTheRankStatistic) {
  // Predictions away from every threshold i / 199 (so f32 rounding cannot move a decision).
  const std::vector<double> labels = {1, 0, 1, 1, 0, 0, 1, 0, 0, 1};
  const std::vector<double> preds = {0.92, 0.13, 0.67, 0.41, 0.52, 0.08, 0.88, 0.35, 0.71, 0.26};
  const double expected = roc_auc_by_hand(labels, preds, 200);
  // With every positive-negative pair in different threshold buckets, the trapezoid area is the
  // Mann-Whitney statistic: the fraction of (positive, negative) pairs ranked correctly. Negatives
  // below each positive: 0.92: 5, 0.67: 4, 0.41: 3, 0.88: 5, 0.26: 2 -> 19 / 25.
  EXPECT_NEAR(expected, 19.0 / 25, 1e-12);
  metrics::AUC auc;
  EXPECT_EQ(auc.thresholds().size(), 200u);
  std::vector<float> l(labels.begin(), labels.end()), p(preds.begin(), preds.end());
  const Batch first = {f32({l.begin(), l.begin() + 6}, {6, 1}), f32({p.begin(), p.begin() + 6}, {6, 1})};
  const Batch second = {f32({l.begin() + 6, l.end()}, {4, 1}), f32({p.begin() + 6, p.end()}, {4, 1})};
  EXPECT_NEAR(run_metric(auc, {first, second}), expected, 1e-6);
  std::vector<std::vector<double>> state = final_state_of(auc, {first, second});
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].front(), 5.0);  // every positive is above -1e-7
  EXPECT_EQ(state[2].front(), 5.0);  // and every negative
  EXPECT_EQ(state[3].back(), 5.0);   // nothing is above 1 + 1e-7
  EXPECT_EQ(state[1].back(), 5.0);
}

TEST(AUCMetric, BadOptionsAndStateAreClearErrors) {
  expect_error([] { metrics::AUC({.num_thresholds = 1}); }, ErrorCode::kInvalidArgument,
               {"AUC", "num_thresholds = 1", "> 1"});
  metrics::AUC auc({.num_thresholds = 3});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), f32_scalar(0), f32_scalar(0)},
                 [&](const std::vector<Tensor>& a) { auc.result(a); });
      },
      ErrorCode::kShapeMismatch, {"auc", "state element 0", "expected f32(3,)"});
  expect_error([&] { in_trace({f32({0, 0, 0})}, [&](const std::vector<Tensor>& a) { auc.result({a[0]}); }); },
               ErrorCode::kInvalidArgument, {"auc", "1 elements, expected 4"});
}

TEST(AccuracyMetrics, BadShapesAreClearErrors) {
  metrics::CategoricalAccuracy cat;
  metrics::SparseCategoricalAccuracy sparse;
  const std::vector<Array> state_and_data = {f32_scalar(0), f32_scalar(0), f32({0, 1, 0, 1, 0, 0}, {3, 2}),
                                             f32({0.5f, 0.5f, 0.5f, 0.5f}, {2, 2})};
  expect_error(
      [&] {
        in_trace(state_and_data, [&](const std::vector<Tensor>& a) { cat.update_state({a[0], a[1]}, a[2], a[3]); });
      },
      ErrorCode::kShapeMismatch, {"categorical_accuracy", "(3, 2)", "(2, 2)"});
  expect_error(
      [&] {
        in_trace(state_and_data, [&](const std::vector<Tensor>& a) { sparse.update_state({a[0], a[1]}, a[2], a[3]); });
      },
      ErrorCode::kShapeMismatch, {"sparse_categorical_accuracy", "(3, 2)", "(2,)"});
}

// ---- regression metrics and MeanMetricWrapper ---------------------------------------------------

TEST(MeanSquaredErrorMetric, KerasExample) {
  // Keras docs: [[0, 1], [0, 0]] vs [[1, 1], [0, 0]] -> per-sample [0.5, 0] -> 0.25; weights
  // [1, 0] -> 0.5.
  metrics::MeanSquaredError mse;
  EXPECT_EQ(mse.name(), "mean_squared_error");
  const Array t = f32({0, 1, 0, 0}, {2, 2}), p = f32({1, 1, 0, 0}, {2, 2});
  EXPECT_EQ(run_metric(mse, {{t, p}}), 0.25);
  EXPECT_EQ(run_metric(mse, {{t, p, f32({1, 0})}}), 0.5);
  // Over batches of 2 and 1 samples: per-sample [0.5, 0] then [4]: 4.5 / 3.
  EXPECT_EQ(run_metric(mse, {{t, p}, {f32({0, 0}, {1, 2}), f32({2, 2}, {1, 2})}}), 1.5);
}

TEST(MeanAbsoluteErrorMetric, KerasExample) {
  metrics::MeanAbsoluteError mae;
  const Array t = f32({0, 1, 0, 0}, {2, 2}), p = f32({1, 1, 0, 0}, {2, 2});
  EXPECT_EQ(run_metric(mae, {{t, p}}), 0.25);
  EXPECT_EQ(run_metric(mae, {{t, p, f32({1, 0})}}), 0.5);
}

TEST(MeanMetricWrapperMetric, WrapsAPerSampleFunction) {
  // A custom metric: the largest absolute error per sample. Rows: max(1, 2) = 2, max(0, 4) = 4.
  metrics::MeanMetricWrapper max_error("max_error",
                                       [](const Tensor& t, const Tensor& p) { return max(abs(t - p), {-1}); });
  EXPECT_EQ(max_error.name(), "max_error");
  EXPECT_EQ(run_metric(max_error, {{f32({0, 0, 0, 0}, {2, 2}), f32({1, -2, 0, 4}, {2, 2})}}), 3.0);
  EXPECT_EQ(run_metric(max_error, {{f32({0, 0, 0, 0}, {2, 2}), f32({1, -2, 0, 4}, {2, 2}), f32({3, 1})}}),
            2.5);  // (6 + 4) / 4
  expect_error([] { metrics::MeanMetricWrapper("m", nullptr); }, ErrorCode::kInvalidArgument,
               {"metric function is empty"});
  expect_error([] { metrics::Mean(""); }, ErrorCode::kInvalidArgument, {"name is empty"});
}

TEST(CrossentropyMetrics, AreMeansOfTheLossFunctions) {
  // "sparse_categorical_crossentropy" as a metric: the mean of the per-sample losses, i.e. the
  // Keras example's 1.177 over the two samples.
  std::unique_ptr<metrics::Metric> m = metrics::get("sparse_categorical_crossentropy");
  const double v = run_metric(*m, {{i32({1, 2}, {2}), f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3})}});
  EXPECT_NEAR(v, (-std::log(0.95) - std::log(0.1)) / 2, 2e-6);
}

// ---- state checks -------------------------------------------------------------------------------

TEST(MetricState, MalformedStateAndWeightsAreClearErrors) {
  metrics::SparseCategoricalAccuracy acc;
  const Array t = i32({0, 1}, {2}), p = f32({1, 0, 0, 1}, {2, 2});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), t, p}, [&](const std::vector<Tensor>& a) { acc.update_state({a[0]}, a[1], a[2]); });
      },
      ErrorCode::kInvalidArgument, {"sparse_categorical_accuracy", "state has 1 elements", "2"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), Array::scalar(0, DType::kF64), t, p},
                 [&](const std::vector<Tensor>& a) { acc.update_state({a[0], a[1]}, a[2], a[3]); });
      },
      ErrorCode::kDTypeMismatch, {"state element 1", "f64", "f32"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32({0, 0}), t, p},
                 [&](const std::vector<Tensor>& a) { acc.update_state({a[0], a[1]}, a[2], a[3]); });
      },
      ErrorCode::kShapeMismatch, {"state element 1", "(2,)"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), t, p, f32({1, 1, 1})},
                 [&](const std::vector<Tensor>& a) { acc.update_state({a[0], a[1]}, a[2], a[3], a[4]); });
      },
      ErrorCode::kShapeMismatch, {"sample_weight", "(3,)", "(2,)"});
  expect_error([&] { acc.result_value({f32_scalar(0)}); }, ErrorCode::kInvalidArgument, {"state has 1 elements"});
  expect_error([&] { acc.result_value({f32_scalar(0), Array()}); }, ErrorCode::kInvalidArgument,
               {"state Array 1 is invalid"});
}

// ---- factories ----------------------------------------------------------------------------------

TEST(MetricFactory, KerasNamesAndAliases) {
  struct Case {
    const char* identifier;
    const char* name;
  };
  for (const Case& c :
       {Case{"accuracy", "accuracy"}, Case{"Accuracy", "accuracy"}, Case{"binary_accuracy", "binary_accuracy"},
        Case{"categorical_accuracy", "categorical_accuracy"},
        Case{"SparseCategoricalAccuracy", "sparse_categorical_accuracy"}, Case{"mse", "mean_squared_error"},
        Case{"MAE", "mean_absolute_error"}, Case{"bce", "binary_crossentropy"},
        Case{"sparse_top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy"},
        Case{"SparseTopKCategoricalAccuracy", "sparse_top_k_categorical_accuracy"}, Case{"precision", "precision"},
        Case{"Precision", "precision"}, Case{"recall", "recall"}, Case{"Recall", "recall"}, Case{"auc", "auc"},
        Case{"AUC", "auc"}}) {
    std::unique_ptr<metrics::Metric> m = metrics::get(c.identifier);
    ASSERT_NE(m, nullptr) << c.identifier;
    EXPECT_EQ(m->name(), c.name) << c.identifier;
  }
  EXPECT_NE(dynamic_cast<metrics::Accuracy*>(metrics::get("accuracy").get()), nullptr);
  EXPECT_NE(dynamic_cast<metrics::MeanSquaredError*>(metrics::get("MSE").get()), nullptr);
  EXPECT_NE(dynamic_cast<metrics::AUC*>(metrics::get("AUC").get()), nullptr);
  EXPECT_EQ(metrics::known_names().size(), 32u);
  expect_error([] { metrics::get("f1"); }, ErrorCode::kInvalidArgument,
               {"unknown metric 'f1'", "sparse_categorical_accuracy", "mse"});
}

/// The dynamic class of get_for_compile's result, as a short string.
std::string kind_of(const metrics::Metric& m) {
  if (dynamic_cast<const metrics::BinaryAccuracy*>(&m)) return "binary";
  if (dynamic_cast<const metrics::SparseCategoricalAccuracy*>(&m)) return "sparse";
  if (dynamic_cast<const metrics::CategoricalAccuracy*>(&m)) return "categorical";
  if (dynamic_cast<const metrics::Accuracy*>(&m)) return "exact";
  return "other";
}

TEST(MetricFactory, CompileResolvesAccuracyByShapesAsKeras3) {
  using Ctx = metrics::CompileContext;
  auto resolve = [](const char* id, Shape t, Shape p) {
    return metrics::get_for_compile(id, Ctx{.y_true_shape = t, .y_pred_shape = p});
  };
  EXPECT_EQ(kind_of(*resolve("accuracy", {8, 1}, {8, 1})), "binary");
  EXPECT_EQ(kind_of(*resolve("accuracy", {8}, {8, 1})), "binary");
  EXPECT_EQ(kind_of(*resolve("accuracy", {8}, {8, 10})), "sparse");
  EXPECT_EQ(kind_of(*resolve("accuracy", {8, 1}, {8, 10})), "sparse");
  EXPECT_EQ(kind_of(*resolve("accuracy", {8, 10}, {8, 10})), "categorical");
  // The logged name is the identifier as written.
  std::unique_ptr<metrics::Metric> acc = resolve("acc", {8}, {8, 10});
  EXPECT_EQ(kind_of(*acc), "sparse");
  EXPECT_EQ(acc->name(), "acc");
  EXPECT_EQ(resolve("Accuracy", {8}, {8, 10})->name(), "Accuracy");
  std::unique_ptr<metrics::Metric> mse = resolve("mse", {8, 1}, {8, 1});
  EXPECT_EQ(mse->name(), "mse");
  EXPECT_NE(dynamic_cast<metrics::MeanSquaredError*>(mse.get()), nullptr);
  // The resolved metric works: sparse accuracy of the Keras example.
  EXPECT_EQ(run_metric(*acc, {{i32({2, 1}, {2}), f32({0.1f, 0.6f, 0.3f, 0.05f, 0.95f, 0}, {2, 3})}}), 0.5);
}

TEST(MetricFactory, CompileResolvesAccuracyByTheLossWithoutShapes) {
  losses::BinaryCrossentropy bce;
  losses::CategoricalCrossentropy cce;
  losses::SparseCategoricalCrossentropy scce;
  losses::MeanSquaredError mse;
  EXPECT_EQ(kind_of(*metrics::get_for_compile("accuracy", {.loss = &bce})), "binary");
  EXPECT_EQ(kind_of(*metrics::get_for_compile("accuracy", {.loss = &cce})), "categorical");
  EXPECT_EQ(kind_of(*metrics::get_for_compile("acc", {.loss = &scce})), "sparse");
  std::unique_ptr<losses::Loss> by_name = losses::get("sparse_categorical_crossentropy");
  EXPECT_EQ(kind_of(*metrics::get_for_compile("accuracy", {.loss = by_name.get()})), "sparse");
  // Shapes win over the loss when both are known (Keras 3).
  EXPECT_EQ(kind_of(*metrics::get_for_compile(
                "accuracy", {.y_true_shape = Shape{8, 1}, .y_pred_shape = Shape{8, 5}, .loss = &bce})),
            "sparse");
  expect_error([&] { metrics::get_for_compile("accuracy", {.loss = &mse}); }, ErrorCode::kInvalidArgument,
               {"'accuracy'", "shapes", "sparse_categorical_accuracy"});
  expect_error([] { metrics::get_for_compile("accuracy", {}); }, ErrorCode::kInvalidArgument, {"cannot tell"});
  expect_error([] { metrics::get_for_compile("f1_score", {}); }, ErrorCode::kInvalidArgument,
               {"unknown metric 'f1_score'"});
  // Other names keep the identifier as written, as Keras 3's compile does.
  std::unique_ptr<metrics::Metric> auc = metrics::get_for_compile("AUC", {});
  EXPECT_NE(dynamic_cast<metrics::AUC*>(auc.get()), nullptr);
  EXPECT_EQ(auc->name(), "AUC");
}

// ---- one step with everything, as a compiled train step carries it ------------------------------

TEST(MetricsInAStep, AllMetricsAndTheTrackerInOneTracedFunctionAgreeWithJit) {
  // One function updates the loss tracker and three metrics from a sparse-CE loss on logits,
  // as the trainer's step does; state flows through two batches (sizes 3 and 2).
  losses::SparseCategoricalCrossentropy loss({.from_logits = true});
  metrics::Mean tracker("loss");
  metrics::SparseCategoricalAccuracy acc;
  std::unique_ptr<metrics::Metric> ce = metrics::get("sparse_categorical_crossentropy");
  std::vector<Array> state = tracker.initial_state();
  for (const Array& a : acc.initial_state()) state.push_back(a);
  struct Data {
    Array labels, logits;
  };
  const std::vector<Data> data = {
      {i32({0, 1, 2}, {3}), f32({2, 1, 0, 0, 3, 1, 1, 2, 0}, {3, 3})},
      {i32({1, 1}, {2}), f32({0, 1, 0, 4, 0, 0}, {2, 3})},
  };
  double host_loss_total = 0;
  int correct = 0;
  for (const Data& d : data) {
    std::vector<Array> args = state;
    args.push_back(d.labels);
    args.push_back(d.logits);
    std::vector<Array> out = run_both(
        [&](const std::vector<Tensor>& a) {
          const Tensor batch_loss = loss(a[4], a[5]);
          std::vector<Tensor> s = tracker.add_batch({a[0], a[1]}, batch_loss, a[4].dim(0));
          for (const Tensor& t : acc.update_state({a[2], a[3]}, a[4], a[5])) s.push_back(t);
          s.push_back(tracker.result({s[0], s[1]}));
          s.push_back(acc.result({s[2], s[3]}));
          return s;
        },
        args);
    state.assign(out.begin(), out.begin() + 4);
    // Host reference: per-sample -log_softmax at the label; argmax hits.
    const std::vector<float> x = d.logits.to_vector<float>();
    const std::vector<int32_t> y = d.labels.to_vector<int32_t>();
    for (size_t b = 0; b < y.size(); ++b) {
      double m = x[b * 3], s = 0;
      int best = 0;
      for (int c = 1; c < 3; ++c) {
        if (x[b * 3 + c] > m) {
          m = x[b * 3 + c];
          best = c;
        }
      }
      for (int c = 0; c < 3; ++c) s += std::exp(x[b * 3 + c] - m);
      host_loss_total += m + std::log(s) - x[b * 3 + static_cast<size_t>(y[b])];
      correct += best == y[b] ? 1 : 0;
    }
  }
  EXPECT_NEAR(tracker.result_value({state[0], state[1]}), host_loss_total / 5, 2e-6);
  EXPECT_EQ(acc.result_value({state[2], state[3]}), static_cast<double>(static_cast<float>(correct) / 5.0f));
  EXPECT_EQ(correct, 3);
}

}  // namespace
}  // namespace ingot
