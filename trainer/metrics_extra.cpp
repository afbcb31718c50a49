// More Keras 3 metrics with explicit state: SparseTopKCategoricalAccuracy (keras/src/metrics/
// accuracy_metrics.py, the JAX back end's in_top_k), and the confusion-matrix metrics Precision,
// Recall and AUC (keras/src/metrics/confusion_metrics.py, metrics_utils.py).
#include <fmt/format.h>

#include <cmath>
#include <tuple>

#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/losses.h"
#include "ingot/trainer/metrics.h"
#include "losses_metrics_util.h"

namespace ingot::metrics {

namespace {

using losses_metrics_detail::broadcast_shape;
using losses_metrics_detail::divide_no_nan;
using losses_metrics_detail::check_state_of;
using losses_metrics_detail::require_valid;


/// The binary decisions of a confusion-matrix metric, flattened to (N,): whether each label is
/// positive (nonzero), each prediction (f32) and its weight (f32, 1 without a sample weight).
struct Decisions {
  Tensor label_positive;
  Tensor prediction;
  Tensor weight;
};

/// The sample weight aligned with `pred` (squeezed or padded with trailing 1s so it follows the
/// leading axis) and broadcast to its shape.
Tensor aligned_weight(const std::string& metric, const Tensor& sample_weight, const Tensor& pred) {
  require_valid(metric.c_str(), "sample_weight", sample_weight);
  Tensor w = convert(sample_weight, DType::kF32);
  if (w.rank() == pred.rank() + 1 && w.dim(-1) == 1) w = squeeze(w, {-1});
  if (w.rank() < pred.rank()) {
    Shape padded = w.shape();
    padded.resize(static_cast<size_t>(pred.rank()), 1);
    w = reshape(w, padded);
  }
  const std::optional<Shape> both = broadcast_shape(w.shape(), pred.shape());
  if (!both || *both != pred.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("metric '{}': sample_weight of shape {} does not broadcast to "
                            "predictions of shape {}",
                            metric, shape_to_string(sample_weight.shape()),
                            shape_to_string(pred.shape())),
                "pass one weight per sample: shape (batch,) or (batch, 1)");
  }
  return w.shape() == pred.shape() ? w : broadcast_to(w, pred.shape());
}

Decisions flatten_decisions(const std::string& metric, const Tensor& y_true, const Tensor& y_pred,
                            const std::optional<Tensor>& sample_weight) {
  require_valid(metric.c_str(), "y_true", y_true);
  require_valid(metric.c_str(), "y_pred", y_pred);
  auto [pred, labels] = losses::squeeze_or_expand_to_same_rank(convert(y_pred, DType::kF32),
                                                               convert(y_true, DType::kF32));
  if (pred.shape() != labels.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("metric '{}': y_true shape {} and y_pred shape {} differ", metric,
                            shape_to_string(y_true.shape()), shape_to_string(y_pred.shape())),
                "pass one binary label per prediction, e.g. (batch, 1) labels for (batch, 1) "
                "outputs");
  }
  const Tensor weight =
      sample_weight ? aligned_weight(metric, *sample_weight, pred) : ones_like(pred);
  return {flatten(not_equal(labels, zeros_like(labels))), flatten(pred), flatten(weight)};
}

/// Weighted count of the decisions where `mask` holds (mask broadcasts against the weight).
Tensor weighted_count(const Tensor& mask, const Tensor& weight, int64_t axis) {
  return sum(convert(mask, DType::kF32) * weight, {axis});
}

void check_threshold(const char* owner, const std::string& name, double threshold) {
  if (!(threshold >= 0.0 && threshold <= 1.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}': thresholds = {} is invalid: it must be in [0, 1]", owner,
                            name, threshold),
                "a prediction above the threshold counts as positive; Keras's default is 0.5");
  }
}

/// (true positives, false positives, false negatives) of one batch at `threshold`.
std::tuple<Tensor, Tensor, Tensor> confusion_at(const Decisions& d, double threshold) {
  const Tensor predicted = greater(d.prediction, full_like(d.prediction, threshold));
  const Tensor actual = d.label_positive;
  return {weighted_count(logical_and(actual, predicted), d.weight, 0),
          weighted_count(logical_and(logical_not(actual), predicted), d.weight, 0),
          weighted_count(logical_and(actual, logical_not(predicted)), d.weight, 0)};
}

std::vector<Array> scalar_zeros(size_t n) {
  return std::vector<Array>(n, Array::scalar(0.0, DType::kF32));
}

}  // namespace

// ---- SparseTopKCategoricalAccuracy -------------------------------------------------------------

Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int64_t k) {
  const char* fn = "sparse_top_k_categorical_accuracy";
  if (k < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: k = {} is below 1", fn, k),
                "k is how many of the highest scores count as a hit, e.g. 5");
  }
  require_valid(fn, "y_true", y_true);
  require_valid(fn, "y_pred", y_pred);
  Tensor labels = losses::sparse_labels(fn, y_true, y_pred);
  if (!is_integer(labels.dtype())) labels = convert(labels, DType::kI32);
  const Tensor scores = convert(y_pred, DType::kF32);
  const Tensor is_label = convert(one_hot(labels, scores.dim(-1), DType::kF32), DType::kBool);
  // The label's score (zeros where the label is out of range; such rows never match).
  const Tensor at_label = sum(where(is_label, scores, zeros_like(scores)), {-1}, true);
  const Tensor in_range = any(is_label, {-1});
  const Tensor higher = sum(convert(greater(scores, at_label), DType::kF32), {-1});
  const Tensor hit = logical_and(less(higher, full_like(higher, static_cast<double>(k))),
                                 logical_and(in_range, isfinite(squeeze(at_label, {-1}))));
  return convert(hit, DType::kF32);
}

SparseTopKCategoricalAccuracy::SparseTopKCategoricalAccuracy(
    const SparseTopKCategoricalAccuracyOptions& options)
    : MeanMetricWrapper(options.name, [k = options.k](const Tensor& t, const Tensor& p) {
        return sparse_top_k_categorical_accuracy(t, p, k);
      }) {
  if (options.k < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("SparseTopKCategoricalAccuracy '{}': k = {} is below 1", options.name,
                            options.k),
                "k is how many of the highest scores count as a hit; Keras's default is 5");
  }
}

// ---- Precision and Recall ----------------------------------------------------------------------

Precision::Precision(const PrecisionOptions& options)
    : Metric(options.name), threshold_(options.thresholds) {
  check_threshold("Precision", options.name, threshold_);
}

std::vector<Array> Precision::initial_state() const { return scalar_zeros(2); }

std::vector<Tensor> Precision::update_state(const std::vector<Tensor>& state,
                                            const Tensor& y_true, const Tensor& y_pred,
                                            std::optional<Tensor> sample_weight) const {
  check_state_of(name(), state, 2, {});
  const Decisions d = flatten_decisions(name(), y_true, y_pred, sample_weight);
  const auto [tp, fp, fn] = confusion_at(d, threshold_);
  return {state[0] + tp, state[1] + fp};
}

Tensor Precision::result(const std::vector<Tensor>& state) const {
  check_state_of(name(), state, 2, {});
  return divide_no_nan(state[0], state[0] + state[1]);
}

Recall::Recall(const RecallOptions& options)
    : Metric(options.name), threshold_(options.thresholds) {
  check_threshold("Recall", options.name, threshold_);
}

std::vector<Array> Recall::initial_state() const { return scalar_zeros(2); }

std::vector<Tensor> Recall::update_state(const std::vector<Tensor>& state, const Tensor& y_true,
                                         const Tensor& y_pred,
                                         std::optional<Tensor> sample_weight) const {
  check_state_of(name(), state, 2, {});
  const Decisions d = flatten_decisions(name(), y_true, y_pred, sample_weight);
  const auto [tp, fp, fn] = confusion_at(d, threshold_);
  return {state[0] + tp, state[1] + fn};
}

Tensor Recall::result(const std::vector<Tensor>& state) const {
  check_state_of(name(), state, 2, {});
  return divide_no_nan(state[0], state[0] + state[1]);
}

// ---- AUC ---------------------------------------------------------------------------------------

AUC::AUC(const AUCOptions& options) : Metric(options.name), options_(options) {
  const int64_t n = options_.num_thresholds;
  if (n <= 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("AUC '{}': num_thresholds = {} is invalid: it must be > 1",
                            options_.name, n),
                "Keras's default is 200");
  }
  // Keras: [0 - epsilon] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + epsilon], kept as
  // the f32 values its variables hold.
  thresholds_.push_back(static_cast<double>(static_cast<float>(0.0 - losses::kEpsilon)));
  for (int64_t i = 0; i < n - 2; ++i) {
    const double t = static_cast<double>(i + 1) / static_cast<double>(n - 1);
    thresholds_.push_back(static_cast<double>(static_cast<float>(t)));
  }
  thresholds_.push_back(static_cast<double>(static_cast<float>(1.0 + losses::kEpsilon)));
}

std::vector<Array> AUC::initial_state() const {
  return std::vector<Array>(4, Array::zeros({options_.num_thresholds}, DType::kF32));
}

std::vector<Tensor> AUC::update_state(const std::vector<Tensor>& state, const Tensor& y_true,
                                      const Tensor& y_pred,
                                      std::optional<Tensor> sample_weight) const {
  const int64_t n = options_.num_thresholds;
  check_state_of(name(), state, 4, {n});
  const Decisions d = flatten_decisions(name(), y_true, y_pred, sample_weight);
  // (thresholds, N) decisions: prediction > threshold, one row per threshold.
  const Tensor thresholds =
      expand_dims(constant(Array::from_doubles(thresholds_, {n}, DType::kF32)), 1);
  const Tensor predicted = greater(expand_dims(d.prediction, 0), thresholds);
  const Tensor actual = expand_dims(d.label_positive, 0);
  const Tensor weight = expand_dims(d.weight, 0);
  const Tensor not_actual = logical_not(actual), not_predicted = logical_not(predicted);
  return {state[0] + weighted_count(logical_and(actual, predicted), weight, 1),
          state[1] + weighted_count(logical_and(not_actual, not_predicted), weight, 1),
          state[2] + weighted_count(logical_and(not_actual, predicted), weight, 1),
          state[3] + weighted_count(logical_and(actual, not_predicted), weight, 1)};
}

Tensor AUC::result(const std::vector<Tensor>& state) const {
  const int64_t n = options_.num_thresholds;
  check_state_of(name(), state, 4, {n});
  const Tensor &tp = state[0], &tn = state[1], &fp = state[2], &fn = state[3];
  const Tensor recall = divide_no_nan(tp, tp + fn);
  const Tensor fp_rate = divide_no_nan(fp, fp + tn);
  const Tensor left = slice_axis(recall, 0, 0, n - 1), right = slice_axis(recall, 0, 1, n);
  Tensor heights;
  switch (options_.summation_method) {
    case AUCSummation::kInterpolation:
      heights = (left + right) / 2.0;
      break;
    case AUCSummation::kMinoring:
      heights = minimum(left, right);
      break;
    case AUCSummation::kMajoring:
      heights = maximum(left, right);
      break;
  }
  const Tensor widths = slice_axis(fp_rate, 0, 0, n - 1) - slice_axis(fp_rate, 0, 1, n);
  return sum(widths * heights);
}

}  // namespace ingot::metrics
