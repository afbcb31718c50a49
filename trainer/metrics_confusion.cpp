// The confusion-matrix metrics of Keras 3 with explicit state: Precision, Recall and AUC
// (behaviour reference: keras/src/metrics/confusion_metrics.py and metrics_utils.py's
// update_confusion_matrix_variables, _filter_top_k and interpolate_pr_auc).
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
using losses_metrics_detail::check_state_of;
using losses_metrics_detail::divide_no_nan;
using losses_metrics_detail::require_valid;

/// y_true, y_pred and the sample weight of a confusion-matrix metric, all f32 of one shape:
/// y_pred's after squeeze_or_expand_to_same_rank.
struct Aligned {
  Tensor labels;
  Tensor pred;
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
                            metric, shape_to_string(sample_weight.shape()), shape_to_string(pred.shape())),
                "pass one weight per sample: shape (batch,) or (batch, 1)");
  }
  return w.shape() == pred.shape() ? w : broadcast_to(w, pred.shape());
}

Aligned align_inputs(const std::string& metric, const Tensor& y_true, const Tensor& y_pred,
                     const std::optional<Tensor>& sample_weight) {
  require_valid(metric.c_str(), "y_true", y_true);
  require_valid(metric.c_str(), "y_pred", y_pred);
  auto [pred, labels] =
      losses::squeeze_or_expand_to_same_rank(convert(y_pred, DType::kF32), convert(y_true, DType::kF32));
  if (pred.shape() != labels.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("metric '{}': y_true shape {} and y_pred shape {} differ", metric,
                            shape_to_string(y_true.shape()), shape_to_string(y_pred.shape())),
                "pass one binary label per prediction, e.g. (batch, 1) labels for (batch, 1) "
                "outputs");
  }
  Tensor weight = sample_weight ? aligned_weight(metric, *sample_weight, pred) : ones_like(pred);
  return {labels, pred, weight};
}

/// Weighted count of the decisions where `mask` holds (mask broadcasts against the weight).
Tensor weighted_count(const Tensor& mask, const Tensor& weight, int64_t axis) {
  return sum(convert(mask, DType::kF32) * weight, {axis});
}

/// `n` f32 zero Arrays of `shape`, each with its own buffer (the trainer donates every state
/// element, so they must not alias).
std::vector<Array> distinct_zeros(size_t n, const Shape& shape) {
  std::vector<Array> zeros;
  for (size_t i = 0; i < n; ++i) zeros.push_back(Array::zeros(shape, DType::kF32));
  return zeros;
}

// ---- Precision / Recall options ----------------------------------------------------------------

/// The options Precision and Recall share, checked.
struct ThresholdOptions {
  double threshold;
  std::optional<int64_t> top_k;
  std::optional<int64_t> class_id;
};

/// Keras's parse_init_thresholds with one threshold: the given one must be in [0, 1]; without
/// one, 0.5, or NEG_INF with top_k (default_threshold). Checks top_k >= 1 and class_id >= 0.
ThresholdOptions check_threshold_options(const char* owner, const std::string& name, std::optional<double> thresholds,
                                         std::optional<int64_t> top_k, std::optional<int64_t> class_id) {
  if (thresholds && !(*thresholds >= 0.0 && *thresholds <= 1.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}': thresholds = {} is invalid: it must be in [0, 1]", owner, name, *thresholds),
                "a prediction above the threshold counts as positive; Keras's default is 0.5");
  }
  if (top_k && *top_k < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}': top_k = {} is invalid: it must be >= 1", owner, name, *top_k),
                "top_k is how many of the largest predictions per row can count as positive; "
                "leave it unset to use every prediction");
  }
  if (class_id && *class_id < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}': class_id = {} is invalid: it must be >= 0", owner, name, *class_id),
                "class_id is the index of the class (column of y_pred's last axis) to measure");
  }
  const double fallback = top_k ? kNegInf : 0.5;
  return {thresholds.value_or(fallback), top_k, class_id};
}

/// Whether each entry of `pred` (..., C) is among the k largest of its row (last axis): fewer
/// than k entries rank before it, where an entry ranks before another when it is larger, or
/// equal with a lower index (the order of jax.lax.top_k, which Keras's ops.top_k uses). The
/// comparison is (..., C, C), so it costs O(C^2) per row.
Tensor top_k_mask(const Tensor& pred, int64_t k) {
  const int64_t rank = pred.rank(), c = pred.dim(rank - 1);
  const Tensor entry = expand_dims(pred, rank);      // (..., C, 1): the entry j
  const Tensor other = expand_dims(pred, rank - 1);  // (..., 1, C): every entry i of its row
  const Tensor lower_index = less(iota({c, c}, 1, DType::kI32), iota({c, c}, 0, DType::kI32));
  const Tensor before = logical_or(greater(other, entry), logical_and(equal(other, entry), lower_index));
  const Tensor ahead = sum(convert(before, DType::kF32), {rank});
  return less(ahead, full_like(ahead, static_cast<double>(k)));
}

/// Column `class_id` of the last axis, kept as a size-1 axis (Keras's x[..., class_id, None]).
Tensor class_column(const Tensor& x, int64_t class_id) { return slice_axis(x, x.rank() - 1, class_id, class_id + 1); }

/// Checks top_k and class_id against y_pred's shape (known at trace time).
void check_against_shape(const std::string& metric, const ThresholdOptions& o, const Tensor& pred) {
  const int64_t classes = pred.rank() >= 1 ? pred.dim(pred.rank() - 1) : 1;
  if (o.top_k && (pred.rank() < 1 || *o.top_k > classes)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("metric '{}': top_k = {} exceeds the {} entries of the last axis of "
                            "y_pred (shape {})",
                            metric, *o.top_k, classes, shape_to_string(pred.shape())),
                "choose top_k <= the number of classes, as Keras's ops.top_k requires");
  }
  if (o.class_id && pred.rank() < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("metric '{}': class_id = {} needs y_pred of shape (batch, classes), "
                            "got shape {}",
                            metric, *o.class_id, shape_to_string(pred.shape())),
                "pass predictions with a class axis, as Keras requires with class_id");
  }
  if (o.class_id && *o.class_id >= classes) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("metric '{}': class_id = {} is out of range for y_pred of shape {} "
                            "({} classes)",
                            metric, *o.class_id, shape_to_string(pred.shape()), classes),
                "class_id must be in [0, classes)");
  }
}

/// (true positives, false positives, false negatives) of one batch, as Keras's
/// update_confusion_matrix_variables with one threshold, top_k and class_id.
std::tuple<Tensor, Tensor, Tensor> confusion_at(const std::string& metric, const ThresholdOptions& o,
                                                const Tensor& y_true, const Tensor& y_pred,
                                                const std::optional<Tensor>& sample_weight) {
  const Aligned in = align_inputs(metric, y_true, y_pred, sample_weight);
  check_against_shape(metric, o, in.pred);
  Tensor predicted = greater(in.pred, full_like(in.pred, o.threshold));
  if (o.top_k) predicted = logical_and(predicted, top_k_mask(in.pred, *o.top_k));
  Tensor actual = not_equal(in.labels, zeros_like(in.labels)), weight = in.weight;
  if (o.class_id) {
    predicted = class_column(predicted, *o.class_id);
    actual = class_column(actual, *o.class_id);
    weight = class_column(weight, *o.class_id);
  }
  predicted = flatten(predicted);
  actual = flatten(actual);
  weight = flatten(weight);
  return {weighted_count(logical_and(actual, predicted), weight, 0),
          weighted_count(logical_and(logical_not(actual), predicted), weight, 0),
          weighted_count(logical_and(actual, logical_not(predicted)), weight, 0)};
}

}  // namespace

// ---- Precision and Recall ----------------------------------------------------------------------

Precision::Precision(const PrecisionOptions& options) : Metric(options.name) {
  const ThresholdOptions o =
      check_threshold_options("Precision", options.name, options.thresholds, options.top_k, options.class_id);
  threshold_ = o.threshold;
  top_k_ = o.top_k;
  class_id_ = o.class_id;
}

std::vector<Array> Precision::initial_state() const { return distinct_zeros(2, {}); }

std::vector<Tensor> Precision::update_state(const std::vector<Tensor>& state, const Tensor& y_true,
                                            const Tensor& y_pred, std::optional<Tensor> sample_weight) const {
  check_state_of(name(), state, 2, {});
  const auto [tp, fp, fn] = confusion_at(name(), {threshold_, top_k_, class_id_}, y_true, y_pred, sample_weight);
  return {state[0] + tp, state[1] + fp};
}

Tensor Precision::result(const std::vector<Tensor>& state) const {
  check_state_of(name(), state, 2, {});
  return divide_no_nan(state[0], state[0] + state[1]);
}

Recall::Recall(const RecallOptions& options) : Metric(options.name) {
  const ThresholdOptions o =
      check_threshold_options("Recall", options.name, options.thresholds, options.top_k, options.class_id);
  threshold_ = o.threshold;
  top_k_ = o.top_k;
  class_id_ = o.class_id;
}

std::vector<Array> Recall::initial_state() const { return distinct_zeros(2, {}); }

std::vector<Tensor> Recall::update_state(const std::vector<Tensor>& state, const Tensor& y_true, const Tensor& y_pred,
                                         std::optional<Tensor> sample_weight) const {
  check_state_of(name(), state, 2, {});
  const auto [tp, fp, fn] = confusion_at(name(), {threshold_, top_k_, class_id_}, y_true, y_pred, sample_weight);
  return {state[0] + tp, state[1] + fn};
}

Tensor Recall::result(const std::vector<Tensor>& state) const {
  check_state_of(name(), state, 2, {});
  return divide_no_nan(state[0], state[0] + state[1]);
}

// ---- AUC ---------------------------------------------------------------------------------------

namespace {

void check_auc_enums(const AUCOptions& o) {
  if (o.curve != AUCCurve::kROC && o.curve != AUCCurve::kPR) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("AUC '{}': curve = {} is invalid", o.name, static_cast<int>(o.curve)),
                "use AUCCurve::kROC (Keras's \"ROC\", the default) or AUCCurve::kPR (\"PR\")");
  }
  const AUCSummation s = o.summation_method;
  if (s != AUCSummation::kInterpolation && s != AUCSummation::kMinoring && s != AUCSummation::kMajoring) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("AUC '{}': summation_method = {} is invalid", o.name, static_cast<int>(s)),
                "use AUCSummation::kInterpolation (the default), kMinoring or kMajoring");
  }
}

void check_auc_labels(const AUCOptions& o) {
  if (o.num_labels && *o.num_labels < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("AUC '{}': num_labels = {} is invalid: it must be >= 1", o.name, *o.num_labels),
                "num_labels is the size of the last axis of (batch, num_labels) inputs");
  }
  if (o.multi_label && !o.num_labels) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("AUC '{}': multi_label = true needs num_labels", o.name),
                "pass num_labels, the size of the last axis of (batch, num_labels) inputs (the "
                "state (num_thresholds, num_labels) is made before the first batch)");
  }
  if (!o.label_weights) return;
  const std::vector<double>& w = *o.label_weights;
  if (w.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("AUC '{}': label_weights is empty", o.name),
                "pass one weight per label, or leave label_weights unset");
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (!(std::isfinite(w[i]) && w[i] >= 0.0)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("AUC '{}': label_weights[{}] = {} is invalid: it must be finite "
                              "and >= 0",
                              o.name, i, w[i]),
                  "label weights are non-negative importances of the labels");
    }
  }
  if (o.multi_label && static_cast<int64_t>(w.size()) != *o.num_labels) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("AUC '{}': label_weights has {} values but num_labels = {}", o.name, w.size(), *o.num_labels),
        "pass one weight per label");
  }
}

/// The constant label weights, shape (labels,).
Tensor label_weight_tensor(const std::vector<double>& w) {
  return constant(Array::from_doubles(w, {static_cast<int64_t>(w.size())}, DType::kF32));
}

}  // namespace

AUC::AUC(const AUCOptions& options) : Metric(options.name), options_(options) {
  const int64_t n = options_.num_thresholds;
  if (n <= 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("AUC '{}': num_thresholds = {} is invalid: it must be > 1", options_.name, n),
                "Keras's default is 200");
  }
  check_auc_enums(options_);
  check_auc_labels(options_);
  // Keras: [0 - epsilon] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + epsilon], kept as
  // the f32 values its variables hold.
  thresholds_.push_back(static_cast<double>(static_cast<float>(0.0 - losses::kEpsilon)));
  for (int64_t i = 0; i < n - 2; ++i) {
    const double t = static_cast<double>(i + 1) / static_cast<double>(n - 1);
    thresholds_.push_back(static_cast<double>(static_cast<float>(t)));
  }
  thresholds_.push_back(static_cast<double>(static_cast<float>(1.0 + losses::kEpsilon)));
}

Shape AUC::state_shape() const {
  if (options_.multi_label) return {options_.num_thresholds, *options_.num_labels};
  return {options_.num_thresholds};
}

std::vector<Array> AUC::initial_state() const { return distinct_zeros(4, state_shape()); }

void AUC::check_label_shape(const Tensor& labels, const Tensor& pred) const {
  const int64_t want =
      options_.multi_label ? *options_.num_labels : static_cast<int64_t>(options_.label_weights->size());
  if (pred.rank() != 2 || pred.dim(1) != want) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("metric '{}': {} needs y_true and y_pred of shape (batch, {}), got "
                            "{} and {}",
                            name(), options_.multi_label ? "multi_label" : "label_weights", want,
                            shape_to_string(labels.shape()), shape_to_string(pred.shape())),
                options_.multi_label ? "num_labels must be the size of the label axis"
                                     : "pass one label weight per column of y_pred");
  }
}

std::vector<Tensor> AUC::update_state(const std::vector<Tensor>& state, const Tensor& y_true, const Tensor& y_pred,
                                      std::optional<Tensor> sample_weight) const {
  const int64_t n = options_.num_thresholds;
  check_state_of(name(), state, 4, state_shape());
  require_valid(name().c_str(), "y_pred", y_pred);
  const Tensor probabilities = options_.from_logits ? sigmoid(convert(y_pred, DType::kF32)) : y_pred;
  const Aligned in = align_inputs(name(), y_true, probabilities, sample_weight);
  if (options_.multi_label || options_.label_weights) check_label_shape(in.labels, in.pred);
  Tensor pred = in.pred, actual = not_equal(in.labels, zeros_like(in.labels)), weight = in.weight;
  if (options_.label_weights && !options_.multi_label) {
    weight = weight * expand_dims(label_weight_tensor(*options_.label_weights), 0);
  }
  // Decisions get a leading threshold axis: (thresholds, N) flattened, or (thresholds, batch,
  // labels) with multi_label; the counts sum over axis 1 (the samples).
  if (!options_.multi_label) {
    pred = flatten(pred);
    actual = flatten(actual);
    weight = flatten(weight);
  }
  Shape threshold_shape(static_cast<size_t>(pred.rank() + 1), 1);
  threshold_shape[0] = n;
  const Tensor thresholds = reshape(constant(Array::from_doubles(thresholds_, {n}, DType::kF32)), threshold_shape);
  const Tensor predicted = greater(expand_dims(pred, 0), thresholds);
  actual = expand_dims(actual, 0);
  weight = expand_dims(weight, 0);
  const Tensor not_actual = logical_not(actual), not_predicted = logical_not(predicted);
  return {state[0] + weighted_count(logical_and(actual, predicted), weight, 1),
          state[1] + weighted_count(logical_and(not_actual, not_predicted), weight, 1),
          state[2] + weighted_count(logical_and(not_actual, predicted), weight, 1),
          state[3] + weighted_count(logical_and(actual, not_predicted), weight, 1)};
}

Tensor AUC::riemann_area(const std::vector<Tensor>& state) const {
  const int64_t n = options_.num_thresholds;
  const Tensor &tp = state[0], &tn = state[1], &fp = state[2], &fn = state[3];
  const Tensor recall = divide_no_nan(tp, tp + fn);
  const bool roc = options_.curve == AUCCurve::kROC;
  const Tensor x = roc ? divide_no_nan(fp, fp + tn) : recall;
  const Tensor y = roc ? recall : divide_no_nan(tp, tp + fp);
  const Tensor left = slice_axis(y, 0, 0, n - 1), right = slice_axis(y, 0, 1, n);
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
  const Tensor widths = slice_axis(x, 0, 0, n - 1) - slice_axis(x, 0, 1, n);
  return sum(widths * heights, {0});
}

Tensor AUC::interpolated_pr_area(const std::vector<Tensor>& state) const {
  const int64_t n = options_.num_thresholds;
  auto head = [n](const Tensor& v) { return slice_axis(v, 0, 0, n - 1); };
  auto tail = [n](const Tensor& v) { return slice_axis(v, 0, 1, n); };
  auto positive_part = [](const Tensor& v) { return maximum(v, zeros_like(v)); };
  const Tensor &tp = state[0], &fp = state[2], &fn = state[3];
  const Tensor p = tp + fp;  // predicted positive
  const Tensor dtp = head(tp) - tail(tp), dp = head(p) - tail(p);
  const Tensor slope = divide_no_nan(dtp, positive_part(dp));
  const Tensor intercept = tail(tp) - slope * tail(p);
  const Tensor zero = zeros_like(tail(p));
  const Tensor both_positive = logical_and(greater(head(p), zero), greater(tail(p), zero));
  const Tensor p_ratio = where(both_positive, divide_no_nan(head(p), positive_part(tail(p))), ones_like(zero));
  const Tensor increment = divide_no_nan(slope * (dtp + intercept * log(p_ratio)), positive_part(tail(tp) + tail(fn)));
  return sum(increment, {0});
}

Tensor AUC::result(const std::vector<Tensor>& state) const {
  check_state_of(name(), state, 4, state_shape());
  const bool pr_interpolation =
      options_.curve == AUCCurve::kPR && options_.summation_method == AUCSummation::kInterpolation;
  const Tensor area = pr_interpolation ? interpolated_pr_area(state) : riemann_area(state);
  if (!options_.multi_label) return area;
  if (!options_.label_weights) return mean(area);
  const Tensor weights = label_weight_tensor(*options_.label_weights);
  return divide_no_nan(sum(area * weights), sum(weights));
}

}  // namespace ingot::metrics
