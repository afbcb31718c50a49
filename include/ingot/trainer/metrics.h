// Metrics with Keras 3 semantics (keras/src/metrics/), with explicit state so that a traced,
// compiled step can carry them: initial_state() gives the starting Arrays (Keras's metric
// variables), update_state() is a pure function from the old state Tensors to the new ones, and
// result() computes the metric's value from a state. Everything taking Tensors must run inside
// trace() (interpreted or jit-compiled alike).
//
// State convention: every state element is an f32 Array, the totals and counts that Keras keeps
// in its metric variables, in the order initial_state() returns them: scalars (shape ()) for
// every metric except AUC, whose confusion counts are vectors (num_thresholds,), or
// (num_thresholds, num_labels) with multi_label.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/runtime/shape.h"
#include "ingot/trace/tensor.h"

namespace ingot::losses {
class Loss;
}

namespace ingot::metrics {

/// Mean of values with Keras's sample weighting (keras.metrics.Mean). Not a Metric: it reduces
/// values, not (y_true, y_pred). State: {total, count}, both f32 scalars starting at 0.
///
/// update_state follows Keras's reduce_to_samplewise_values: values (converted to f32) of shape
/// (batch, ...) are averaged over their non-batch axes, so each sample counts once; with a
/// sample weight (aligned by losses::squeeze_or_expand_to_same_rank, values first averaged down
/// to the weight's rank, the weight broadcast to the values' shape) total += sum(values * weight)
/// and count += sum(weight) (the weight averaged over its non-batch axes first); without one,
/// total += sum(values) and count += batch size (1 for a scalar value).
/// result() = total / count, and 0 (never NaN) while count is 0.
///
/// The trainer's loss tracker is a Mean named "loss" fed with add_batch(): each step's mean loss
/// weighted by its batch size, so an epoch's result is the mean over all samples even when the
/// last batch is smaller (batches of 2 and 1 with losses 10 and 9 give 29 / 3).
class Mean {
 public:
  /// Throws ingot::Error(kInvalidArgument) for an empty name.
  explicit Mean(std::string name = "mean");
  const std::string& name() const { return name_; }
  /// {total, count}: two f32 zeros.
  std::vector<Array> initial_state() const;
  /// The state after accumulating `values` (any shape and real dtype) weighted by
  /// `sample_weight`. Throws ingot::Error(kInvalidArgument) for a state of the wrong size,
  /// kShapeMismatch/kDTypeMismatch for a state element that is not an f32 scalar, kShapeMismatch
  /// naming both shapes when the weight does not broadcast to the values.
  std::vector<Tensor> update_state(const std::vector<Tensor>& state, const Tensor& values,
                                   std::optional<Tensor> sample_weight = {}) const;
  /// Loss-tracker update: `batch_loss` (a scalar, the batch's reduced loss) weighted by
  /// `batch_size` (Keras: update_state(loss, sample_weight=batch_size)). Throws
  /// ingot::Error(kInvalidArgument) for batch_size < 1 or a non-scalar batch_loss.
  std::vector<Tensor> add_batch(const std::vector<Tensor>& state, const Tensor& batch_loss, int64_t batch_size) const;
  /// total / count (f32 scalar), 0 when count is 0.
  Tensor result(const std::vector<Tensor>& state) const;
  /// result() of state Arrays (on any device; copied to the host, traced and run by the
  /// interpreter). Throws ingot::Error(kInvalidArgument) for an invalid Array, and what result()
  /// throws for a malformed state.
  double result_value(const std::vector<Array>& state) const;

 private:
  std::string name_;
};

/// Sum of weighted values (keras.metrics.Sum). State: {total}, an f32 scalar starting at 0.
/// update_state adds sum(values * sample_weight) with the weight aligned as in Mean (values are
/// summed over the axes the weight lacks); result() is the total.
class Sum {
 public:
  /// Throws ingot::Error(kInvalidArgument) for an empty name.
  explicit Sum(std::string name = "sum");
  const std::string& name() const { return name_; }
  /// {total}: one f32 zero.
  std::vector<Array> initial_state() const;
  /// The state after adding the weighted `values`. Errors as Mean::update_state.
  std::vector<Tensor> update_state(const std::vector<Tensor>& state, const Tensor& values,
                                   std::optional<Tensor> sample_weight = {}) const;
  /// The total (f32 scalar).
  Tensor result(const std::vector<Tensor>& state) const;
  /// As Mean::result_value.
  double result_value(const std::vector<Array>& state) const;

 private:
  std::string name_;
};

/// Base of the metrics compile() takes (Keras's Metric with update_state(y_true, y_pred,
/// sample_weight)). Implementations are stateless objects; the state lives in Tensors.
class Metric {
 public:
  /// Throws ingot::Error(kInvalidArgument) for an empty name.
  explicit Metric(std::string name);
  virtual ~Metric() = default;
  Metric(const Metric&) = default;
  Metric& operator=(const Metric&) = default;

  /// The metric's name, the key of its value in the logs.
  const std::string& name() const { return name_; }
  /// The state before any update (f32 Arrays, scalars except for AUC).
  virtual std::vector<Array> initial_state() const = 0;
  /// Pure update: the new state after one batch. `sample_weight` has shape (batch,) or
  /// (batch, 1) (or a scalar). Throws ingot::Error for a malformed state or inputs.
  virtual std::vector<Tensor> update_state(const std::vector<Tensor>& state, const Tensor& y_true, const Tensor& y_pred,
                                           std::optional<Tensor> sample_weight = {}) const = 0;
  /// The metric's value (f32 scalar) for `state`.
  virtual Tensor result(const std::vector<Tensor>& state) const = 0;
  /// result() of state Arrays (on any device; copied to the host, traced and run by the
  /// interpreter). Throws ingot::Error(kInvalidArgument) for an invalid Array, and what result()
  /// throws for a malformed state.
  double result_value(const std::vector<Array>& state) const;

 private:
  std::string name_;
};

/// A per-sample metric function (y_true, y_pred) -> values of shape (batch, ...).
using MetricFn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

/// Keras's MeanMetricWrapper: the sample-weighted Mean of `fn(y_true, y_pred)` (values averaged
/// per sample over their non-batch axes, see Mean). State: {total, count}. An empty `fn` is
/// ingot::Error(kInvalidArgument).
class MeanMetricWrapper : public Metric {
 public:
  MeanMetricWrapper(std::string name, MetricFn fn);
  std::vector<Array> initial_state() const override;
  std::vector<Tensor> update_state(const std::vector<Tensor>& state, const Tensor& y_true, const Tensor& y_pred,
                                   std::optional<Tensor> sample_weight = {}) const override;
  Tensor result(const std::vector<Tensor>& state) const override;

 private:
  MetricFn fn_;
  Mean mean_;
};

// ---- per-sample functions (keras.metrics.*) -----------------------------------------------------
// Each returns f32 matches (1 where right, 0 where wrong).

/// Keras's sparse_top_k_categorical_accuracy (in_top_k of the JAX back end): 1 where the score
/// of the label class is among the k largest of y_pred's last axis, i.e. fewer than k classes
/// score strictly higher (ties count in the label's favour); a NaN score at the label never
/// matches, and neither does a label outside [0, C). Labels as sparse_categorical_accuracy
/// (shape y_pred.shape[:-1] or with a trailing 1; floats truncated to integers); result shape
/// y_pred.shape[:-1]. k < 1 is kInvalidArgument.
Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int64_t k = 5);
/// Elementwise y_true == y_pred (y_true converted to y_pred's dtype) after
/// squeeze_or_expand_to_same_rank; shapes must broadcast (kShapeMismatch otherwise).
Tensor accuracy(const Tensor& y_true, const Tensor& y_pred);
/// Elementwise y_true == (y_pred > threshold), in y_pred's dtype, shapes as accuracy().
Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);
/// argmax(y_true, -1) == argmax(y_pred, -1): one-hot labels (..., C1) against scores (..., C2);
/// shape y_pred.shape[:-1]. The leading shapes must agree (kShapeMismatch), ranks >= 1.
Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
/// y_true == argmax(y_pred, -1) for class labels of shape y_pred.shape[:-1] or that with a
/// trailing 1 (kShapeMismatch otherwise); shape y_pred.shape[:-1]. Integer labels are compared
/// exactly as integers; floating labels are compared in their own dtype (so 1.5 never matches).
Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);

// ---- metric classes -----------------------------------------------------------------------------

/// Options of the metrics without parameters: only the name.
struct AccuracyOptions {
  std::string name = "accuracy";
};
/// keras.metrics.Accuracy: how often y_pred equals y_true exactly (not argmax; see
/// CategoricalAccuracy and SparseCategoricalAccuracy for class scores).
class Accuracy final : public MeanMetricWrapper {
 public:
  explicit Accuracy(const AccuracyOptions& options = {});
};

/// Options of BinaryAccuracy.
struct BinaryAccuracyOptions {
  /// A prediction above `threshold` (strictly) counts as 1.
  double threshold = 0.5;
  std::string name = "binary_accuracy";
};
/// keras.metrics.BinaryAccuracy: binary_accuracy averaged per sample. A NaN threshold is
/// ingot::Error(kInvalidArgument).
class BinaryAccuracy final : public MeanMetricWrapper {
 public:
  explicit BinaryAccuracy(const BinaryAccuracyOptions& options = {});
};

struct CategoricalAccuracyOptions {
  std::string name = "categorical_accuracy";
};
/// keras.metrics.CategoricalAccuracy: categorical_accuracy (one-hot labels).
class CategoricalAccuracy final : public MeanMetricWrapper {
 public:
  explicit CategoricalAccuracy(const CategoricalAccuracyOptions& options = {});
};

struct SparseCategoricalAccuracyOptions {
  std::string name = "sparse_categorical_accuracy";
};
/// keras.metrics.SparseCategoricalAccuracy: sparse_categorical_accuracy (integer labels).
class SparseCategoricalAccuracy final : public MeanMetricWrapper {
 public:
  explicit SparseCategoricalAccuracy(const SparseCategoricalAccuracyOptions& options = {});
};

struct MeanSquaredErrorOptions {
  std::string name = "mean_squared_error";
};
/// keras.metrics.MeanSquaredError: the mean over samples of losses::mean_squared_error (mean of
/// squares over the last axis per sample).
class MeanSquaredError final : public MeanMetricWrapper {
 public:
  explicit MeanSquaredError(const MeanSquaredErrorOptions& options = {});
};

struct MeanAbsoluteErrorOptions {
  std::string name = "mean_absolute_error";
};
/// keras.metrics.MeanAbsoluteError: the mean over samples of losses::mean_absolute_error.
class MeanAbsoluteError final : public MeanMetricWrapper {
 public:
  explicit MeanAbsoluteError(const MeanAbsoluteErrorOptions& options = {});
};

struct SparseTopKCategoricalAccuracyOptions {
  /// How many of the highest scores count as a hit; >= 1.
  int64_t k = 5;
  std::string name = "sparse_top_k_categorical_accuracy";
};
/// keras.metrics.SparseTopKCategoricalAccuracy: sparse_top_k_categorical_accuracy averaged per
/// sample. k < 1 is ingot::Error(kInvalidArgument) at construction.
class SparseTopKCategoricalAccuracy final : public MeanMetricWrapper {
 public:
  explicit SparseTopKCategoricalAccuracy(const SparseTopKCategoricalAccuracyOptions& options = {});
};

/// Keras's NEG_INF (metrics_utils.NEG_INF = -1e10): the threshold Precision and Recall use by
/// default with `top_k` (every top-k entry above it counts as positive).
inline constexpr double kNegInf = -1e10;

/// Options of Precision (Keras's keyword arguments thresholds, top_k, class_id, name; one
/// threshold, since the logs hold one scalar per metric).
struct PrecisionOptions {
  /// A prediction strictly above it counts as positive; in [0, 1] when given. Not given: 0.5, or
  /// kNegInf (-1e10) with `top_k` (Keras's default_threshold).
  std::optional<double> thresholds;
  /// When given (>= 1): only the k largest predictions of each row of y_pred's last axis can
  /// count as positive, the others count as negative (Keras's _filter_top_k). Ties are resolved
  /// as jax.lax.top_k, which Keras's ops.top_k uses: the lower index wins. k above the number of
  /// classes is an error at trace time, as in Keras.
  std::optional<int64_t> top_k;
  /// When given (>= 0): only column class_id of y_true / y_pred's last axis is used (after the
  /// top-k, which looks at the whole row, as Keras). y_pred must have rank >= 2 and class_id must
  /// be below its last dimension (checked at trace time).
  std::optional<int64_t> class_id;
  std::string name = "precision";
};
/// Options of Recall: as PrecisionOptions (same defaults and rules).
struct RecallOptions {
  /// As PrecisionOptions::thresholds (0.5, or kNegInf with top_k, when not given).
  std::optional<double> thresholds;
  /// As PrecisionOptions::top_k.
  std::optional<int64_t> top_k;
  /// As PrecisionOptions::class_id.
  std::optional<int64_t> class_id;
  std::string name = "recall";
};

/// keras.metrics.Precision with one threshold: tp / (tp + fp), 0 while nothing was predicted
/// positive. Every element of y_true / y_pred (after the class_id column is taken, if any) is one
/// binary decision (the inputs are flattened, as Keras's update_confusion_matrix_variables does):
/// a label is positive when nonzero, a prediction when it is > the threshold (and, with top_k,
/// among the k largest of its row); each decision adds its sample weight (default 1) to
/// true_positives or false_positives. State: {true_positives, false_positives} (f32 scalars).
/// y_true and y_pred (any real dtype, shape (batch, ...) or (batch, classes)) must have the same
/// shape after squeeze_or_expand_to_same_rank (kShapeMismatch naming both); the weight is aligned
/// with the leading axis and broadcast to y_pred's shape (kShapeMismatch if it does not
/// broadcast). Construction throws kInvalidArgument for a threshold outside [0, 1] (or NaN),
/// top_k < 1 or class_id < 0; update_state throws kInvalidArgument for top_k above y_pred's last
/// dimension, class_id not below it, or class_id with a y_pred of rank < 2.
class Precision final : public Metric {
 public:
  explicit Precision(const PrecisionOptions& options = {});
  std::vector<Array> initial_state() const override;
  std::vector<Tensor> update_state(const std::vector<Tensor>& state, const Tensor& y_true, const Tensor& y_pred,
                                   std::optional<Tensor> sample_weight = {}) const override;
  Tensor result(const std::vector<Tensor>& state) const override;
  /// The threshold in use (the given one, or the default).
  double threshold() const { return threshold_; }

 private:
  double threshold_;
  std::optional<int64_t> top_k_;
  std::optional<int64_t> class_id_;
};

/// keras.metrics.Recall with one threshold: tp / (tp + fn), 0 while there was no positive label.
/// Inputs, options, weights and errors as Precision. State: {true_positives, false_negatives}.
class Recall final : public Metric {
 public:
  explicit Recall(const RecallOptions& options = {});
  std::vector<Array> initial_state() const override;
  std::vector<Tensor> update_state(const std::vector<Tensor>& state, const Tensor& y_true, const Tensor& y_pred,
                                   std::optional<Tensor> sample_weight = {}) const override;
  Tensor result(const std::vector<Tensor>& state) const override;
  /// The threshold in use (the given one, or the default).
  double threshold() const { return threshold_; }

 private:
  double threshold_;
  std::optional<int64_t> top_k_;
  std::optional<int64_t> class_id_;
};

/// Which curve AUC measures (Keras's `curve`).
enum class AUCCurve {
  /// "ROC": the receiver operating characteristic, true positive rate (recall) over false
  /// positive rate.
  kROC,
  /// "PR": precision over recall.
  kPR,
};

/// How AUC sums the area under its piecewise curve (Keras's `summation_method`).
enum class AUCSummation {
  /// "interpolation": for ROC, trapezoids (the mean of the two heights of each interval); for
  /// PR, the Davis & Goadrich (2006) interpolation of precision (see AUC).
  kInterpolation,
  /// "minoring": the lower height of each interval (a lower bound of the area).
  kMinoring,
  /// "majoring": the higher height (an upper bound).
  kMajoring,
};

/// Options of AUC (Keras's keyword arguments and defaults, in Keras's order; no explicit
/// `thresholds`).
struct AUCOptions {
  /// Number of thresholds, > 1: 0 - 1e-7, then i / (num_thresholds - 1) for i in
  /// [1, num_thresholds - 2], then 1 + 1e-7 (Keras's evenly spaced thresholds with epsilon).
  int64_t num_thresholds = 200;
  AUCCurve curve = AUCCurve::kROC;
  AUCSummation summation_method = AUCSummation::kInterpolation;
  std::string name = "auc";
  /// When true, y_true / y_pred are (batch, num_labels) and each label keeps its own confusion
  /// counts (state (num_thresholds, num_labels)); the result is the mean of the per-label AUCs,
  /// or their label_weights-weighted mean. When false, every element is one decision.
  bool multi_label = false;
  /// The number of labels (>= 1); required with multi_label (the state's shape must be known
  /// before the first batch), ignored without it (as Keras).
  std::optional<int64_t> num_labels;
  /// One non-negative weight per label (the last axis of (batch, labels) inputs). With
  /// multi_label the result is sum(auc_l * w_l) / sum(w_l) (0 when the sum is 0) and there
  /// must be num_labels of them; without it each decision of label l is weighted by w_l (times
  /// its sample weight), Keras's behaviour.
  std::optional<std::vector<double>> label_weights;
  /// When true, y_pred holds logits and goes through the sigmoid first.
  bool from_logits = false;
};

/// keras.metrics.AUC: the area under the ROC or PR curve, approximated over the thresholds by a
/// Riemann sum. Per threshold t the confusion counts (weighted; label positive when nonzero,
/// prediction positive when y_pred > t) accumulate over batches; then
///   recall = tp / (tp + fn), fp_rate = fp / (fp + tn), precision = tp / (tp + fp)
///   (0 where the divisor is 0)
///   AUC = sum_i (x[i] - x[i+1]) * height_i
/// with (x, y) = (fp_rate, recall) for ROC and (recall, precision) for PR, and height_i =
/// (y[i] + y[i+1]) / 2 for kInterpolation, their minimum (kMinoring) or maximum (kMajoring).
/// PR with kInterpolation instead uses Keras's interpolate_pr_auc (Davis & Goadrich 2006,
/// "The relationship between precision-recall and ROC curves", section 4): within each interval
/// tp varies linearly with p = tp + fp, so with dtp = tp[i] - tp[i+1], dp = p[i] - p[i+1],
/// slope = dtp / max(dp, 0) and intercept = tp[i+1] - slope * p[i+1], the interval adds
///   slope * (dtp + intercept * log(p[i] / p[i+1])) / (tp[i+1] + fn[i+1])
/// (divisions by 0 give 0; the log term is 0 unless p[i] and p[i+1] are both > 0).
/// Predictions are expected in [0, 1] (probabilities), or logits with from_logits.
/// State: {true_positives, true_negatives, false_positives, false_negatives} (Keras's order),
/// each f32 (num_thresholds,), or (num_thresholds, num_labels) with multi_label.
/// Inputs and weights as Precision (y_true and y_pred of one shape after
/// squeeze_or_expand_to_same_rank, the sample weight following the leading axis); with
/// multi_label or label_weights they must be (batch, labels) with labels = num_labels / the
/// number of label_weights (kShapeMismatch naming the shapes). Construction throws
/// kInvalidArgument naming the option and value for num_thresholds <= 1, a curve or
/// summation_method outside its enum, num_labels < 1, multi_label without num_labels, empty,
/// negative or non-finite label_weights, or multi_label with label_weights not of num_labels.
class AUC final : public Metric {
 public:
  explicit AUC(const AUCOptions& options = {});
  std::vector<Array> initial_state() const override;
  std::vector<Tensor> update_state(const std::vector<Tensor>& state, const Tensor& y_true, const Tensor& y_pred,
                                   std::optional<Tensor> sample_weight = {}) const override;
  Tensor result(const std::vector<Tensor>& state) const override;
  /// The thresholds, in increasing order (num_thresholds values, as f32 like Keras's variables).
  const std::vector<double>& thresholds() const { return thresholds_; }

 private:
  /// The shape of each state element: (num_thresholds,) or (num_thresholds, num_labels).
  Shape state_shape() const;
  /// Checks the (batch, labels) shape multi_label / label_weights need.
  void check_label_shape(const Tensor& labels, const Tensor& pred) const;
  /// The area per label ((num_labels,) with multi_label, else a scalar) from the counts.
  Tensor riemann_area(const std::vector<Tensor>& state) const;
  Tensor interpolated_pr_area(const std::vector<Tensor>& state) const;

  AUCOptions options_;
  std::vector<double> thresholds_;
};

// ---- factory ------------------------------------------------------------------------------------

/// The metric `identifier` names, as keras.metrics.get, named by its default name:
/// "accuracy"/"Accuracy" (exact equality), "binary_accuracy", "categorical_accuracy",
/// "sparse_categorical_accuracy", "sparse_top_k_categorical_accuracy", "precision", "recall",
/// "auc", "mean_squared_error"/"mse"/"MSE", "mean_absolute_error"/
/// "mae"/"MAE", the class names ("BinaryAccuracy", "AUC", ...), and the crossentropies
/// "binary_crossentropy"/"bce"/"BCE", "categorical_crossentropy",
/// "sparse_categorical_crossentropy" (MeanMetricWrappers of the loss functions on
/// probabilities). Throws ingot::Error(kInvalidArgument) naming the identifier and listing
/// known_names().
std::unique_ptr<Metric> get(std::string_view identifier);
/// Every identifier get() accepts, in a fixed order.
std::vector<std::string> known_names();

/// What compile() knows when it resolves a metric name (see get_for_compile).
struct CompileContext {
  /// Shapes of one batch's targets and predictions (known once the model is built).
  std::optional<Shape> y_true_shape;
  std::optional<Shape> y_pred_shape;
  /// The compiled loss, if any.
  const losses::Loss* loss = nullptr;
};

/// Keras 3's compile-time metric resolution (trainers/compile_utils.get_metric): the metric is
/// named by `identifier` as written (e.g. "mse" stays "mse" in the logs), and "accuracy" or
/// "acc" becomes the accuracy that fits the problem:
///   - with both shapes: Keras 3's rule: BinaryAccuracy when y_pred's last dim is 1, else
///     SparseCategoricalAccuracy when y_true has lower rank than y_pred or ends in a size-1 dim,
///     else CategoricalAccuracy;
///   - otherwise by the loss (the rule of older Keras): BinaryCrossentropy -> BinaryAccuracy,
///     CategoricalCrossentropy -> CategoricalAccuracy, SparseCategoricalCrossentropy ->
///     SparseCategoricalAccuracy (for the built-in classes and their get() names).
/// Shapes win when both are given. Throws ingot::Error(kInvalidArgument) for "accuracy" when
/// neither decides (no shapes, no crossentropy loss), and what get() throws for other names.
std::unique_ptr<Metric> get_for_compile(std::string_view identifier, const CompileContext& context);

}  // namespace ingot::metrics
