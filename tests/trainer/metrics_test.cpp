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
double run_updates(
    const std::vector<Array>& initial,
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
  EXPECT_EQ(run_mean(mean, {{f32({1, 2, 3}), f32({0.5f, 1, 2})}}),
            static_cast<double>(8.5f / 3.5f));
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
        in_trace({f32_scalar(0), f32_scalar(0), f32_scalar(1)}, [&](const std::vector<Tensor>& a) {
          tracker.add_batch({a[0], a[1]}, a[2], 0);
        });
      },
      ErrorCode::kInvalidArgument, {"'loss'", "batch_size = 0"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), f32({1, 2})}, [&](const std::vector<Tensor>& a) {
          tracker.add_batch({a[0], a[1]}, a[2], 2);
        });
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
  EXPECT_EQ(run_metric(logits, {{f32({1, 0, 1}), f32({3, -2, -0.5f}, {3, 1})}}),
            static_cast<double>(2.0f / 3.0f));
  expect_error([] { metrics::BinaryAccuracy({.threshold = std::nan("")}); },
               ErrorCode::kInvalidArgument, {"threshold is NaN"});
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
  EXPECT_EQ(
      run_metric(acc, {{i32({2, 1}, {2}), p}, {i32({0, 1}, {2}), f32({3, 1, 2, 0, 4, 1}, {2, 3})}}),
      0.75);
}

TEST(AccuracyMetrics, BadShapesAreClearErrors) {
  metrics::CategoricalAccuracy cat;
  metrics::SparseCategoricalAccuracy sparse;
  const std::vector<Array> state_and_data = {f32_scalar(0), f32_scalar(0),
                                             f32({0, 1, 0, 1, 0, 0}, {3, 2}),
                                             f32({0.5f, 0.5f, 0.5f, 0.5f}, {2, 2})};
  expect_error(
      [&] {
        in_trace(state_and_data, [&](const std::vector<Tensor>& a) {
          cat.update_state({a[0], a[1]}, a[2], a[3]);
        });
      },
      ErrorCode::kShapeMismatch, {"categorical_accuracy", "(3, 2)", "(2, 2)"});
  expect_error(
      [&] {
        in_trace(state_and_data, [&](const std::vector<Tensor>& a) {
          sparse.update_state({a[0], a[1]}, a[2], a[3]);
        });
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
  metrics::MeanMetricWrapper max_error(
      "max_error", [](const Tensor& t, const Tensor& p) { return max(abs(t - p), {-1}); });
  EXPECT_EQ(max_error.name(), "max_error");
  EXPECT_EQ(run_metric(max_error, {{f32({0, 0, 0, 0}, {2, 2}), f32({1, -2, 0, 4}, {2, 2})}}), 3.0);
  EXPECT_EQ(
      run_metric(max_error, {{f32({0, 0, 0, 0}, {2, 2}), f32({1, -2, 0, 4}, {2, 2}), f32({3, 1})}}),
      2.5);  // (6 + 4) / 4
  expect_error([] { metrics::MeanMetricWrapper("m", nullptr); }, ErrorCode::kInvalidArgument,
               {"metric function is empty"});
  expect_error([] { metrics::Mean(""); }, ErrorCode::kInvalidArgument, {"name is empty"});
}

TEST(CrossentropyMetrics, AreMeansOfTheLossFunctions) {
  // "sparse_categorical_crossentropy" as a metric: the mean of the per-sample losses, i.e. the
  // Keras example's 1.177 over the two samples.
  std::unique_ptr<metrics::Metric> m = metrics::get("sparse_categorical_crossentropy");
  const double v =
      run_metric(*m, {{i32({1, 2}, {2}), f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3})}});
  EXPECT_NEAR(v, (-std::log(0.95) - std::log(0.1)) / 2, 2e-6);
}

// ---- state checks -------------------------------------------------------------------------------

TEST(MetricState, MalformedStateAndWeightsAreClearErrors) {
  metrics::SparseCategoricalAccuracy acc;
  const Array t = i32({0, 1}, {2}), p = f32({1, 0, 0, 1}, {2, 2});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), t, p},
                 [&](const std::vector<Tensor>& a) { acc.update_state({a[0]}, a[1], a[2]); });
      },
      ErrorCode::kInvalidArgument, {"sparse_categorical_accuracy", "state has 1 elements", "2"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), Array::scalar(0, DType::kF64), t, p},
                 [&](const std::vector<Tensor>& a) {
                   acc.update_state({a[0], a[1]}, a[2], a[3]);
                 });
      },
      ErrorCode::kDTypeMismatch, {"state element 1", "f64", "f32"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32({0, 0}), t, p}, [&](const std::vector<Tensor>& a) {
          acc.update_state({a[0], a[1]}, a[2], a[3]);
        });
      },
      ErrorCode::kShapeMismatch, {"state element 1", "(2,)"});
  expect_error(
      [&] {
        in_trace({f32_scalar(0), f32_scalar(0), t, p, f32({1, 1, 1})},
                 [&](const std::vector<Tensor>& a) {
                   acc.update_state({a[0], a[1]}, a[2], a[3], a[4]);
                 });
      },
      ErrorCode::kShapeMismatch, {"sample_weight", "(3,)", "(2,)"});
  expect_error([&] { acc.result_value({f32_scalar(0)}); }, ErrorCode::kInvalidArgument,
               {"state has 1 elements"});
  expect_error(
      [&] {
        acc.result_value({f32_scalar(0), Array()});
      },
      ErrorCode::kInvalidArgument, {"state Array 1 is invalid"});
}

// ---- factories ----------------------------------------------------------------------------------

TEST(MetricFactory, KerasNamesAndAliases) {
  struct Case {
    const char* identifier;
    const char* name;
  };
  for (const Case& c : {Case{"accuracy", "accuracy"}, Case{"Accuracy", "accuracy"},
                        Case{"binary_accuracy", "binary_accuracy"},
                        Case{"categorical_accuracy", "categorical_accuracy"},
                        Case{"SparseCategoricalAccuracy", "sparse_categorical_accuracy"},
                        Case{"mse", "mean_squared_error"}, Case{"MAE", "mean_absolute_error"},
                        Case{"bce", "binary_crossentropy"}}) {
    std::unique_ptr<metrics::Metric> m = metrics::get(c.identifier);
    ASSERT_NE(m, nullptr) << c.identifier;
    EXPECT_EQ(m->name(), c.name) << c.identifier;
  }
  EXPECT_NE(dynamic_cast<metrics::Accuracy*>(metrics::get("accuracy").get()), nullptr);
  EXPECT_NE(dynamic_cast<metrics::MeanSquaredError*>(metrics::get("MSE").get()), nullptr);
  EXPECT_EQ(metrics::known_names().size(), 24u);
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
  EXPECT_EQ(
      run_metric(*acc, {{i32({2, 1}, {2}), f32({0.1f, 0.6f, 0.3f, 0.05f, 0.95f, 0}, {2, 3})}}),
      0.5);
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
  EXPECT_EQ(
      kind_of(*metrics::get_for_compile(
          "accuracy", {.y_true_shape = Shape{8, 1}, .y_pred_shape = Shape{8, 5}, .loss = &bce})),
      "sparse");
  expect_error([&] { metrics::get_for_compile("accuracy", {.loss = &mse}); },
               ErrorCode::kInvalidArgument,
               {"'accuracy'", "shapes", "sparse_categorical_accuracy"});
  expect_error([] { metrics::get_for_compile("accuracy", {}); }, ErrorCode::kInvalidArgument,
               {"cannot tell"});
  expect_error([] { metrics::get_for_compile("precision", {}); }, ErrorCode::kInvalidArgument,
               {"unknown metric 'precision'"});
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
  EXPECT_EQ(acc.result_value({state[2], state[3]}),
            static_cast<double>(static_cast<float>(correct) / 5.0f));
  EXPECT_EQ(correct, 3);
}

}  // namespace
}  // namespace ingot
