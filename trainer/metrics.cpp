// Metrics with Keras 3 semantics (behaviour reference: keras/src/metrics/reduction_metrics.py,
// accuracy_metrics.py, regression_metrics.py and trainers/compile_utils.py), with explicit state.
#include "ingot/trainer/metrics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <tuple>

#include "ingot/interp/interpreter.h"
#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/losses.h"
#include "losses_metrics_util.h"

namespace ingot::metrics {

namespace {

using losses_metrics_detail::broadcast_shape;
using losses_metrics_detail::divide_no_nan;
using losses_metrics_detail::require_valid;

void require_name(const std::string& name, const char* what) {
  if (name.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the metric name is empty", what),
                "give the metric a name (it keys its value in the logs)");
  }
}

/// Checks that `state` has `count` valid f32 scalars; names the metric.
void check_state(const std::string& metric, const std::vector<Tensor>& state, size_t count) {
  losses_metrics_detail::check_state_of(metric, state, count, Shape{});
}

/// Axes [from, to) of a tensor.
std::vector<int64_t> axis_range(int64_t from, int64_t to) {
  std::vector<int64_t> axes(static_cast<size_t>(std::max<int64_t>(0, to - from)));
  std::iota(axes.begin(), axes.end(), from);
  return axes;
}

/// Values and weight after Keras's reduce_to_samplewise_values (with ops.mean when `use_mean`,
/// else ops.sum): values of rank <= 1 (one per sample), the weight (if any) reduced likewise.
struct Samplewise {
  Tensor values;
  std::optional<Tensor> weight;
};

Samplewise reduce_to_samplewise(const std::string& metric, const Tensor& values,
                                const std::optional<Tensor>& sample_weight, bool use_mean) {
  auto reduce = [use_mean](const Tensor& x, int64_t from) {
    const std::vector<int64_t> axes = axis_range(from, x.rank());
    return use_mean ? mean(x, axes) : sum(x, axes);
  };
  require_valid(metric.c_str(), "values", values);
  Tensor v = values.dtype() == DType::kF32 ? values : convert(values, DType::kF32);
  std::optional<Tensor> w;
  if (sample_weight) {
    require_valid(metric.c_str(), "sample_weight", *sample_weight);
    Tensor wt = convert(*sample_weight, DType::kF32);
    std::tie(v, wt) = losses::squeeze_or_expand_to_same_rank(v, wt);
    if (v.rank() > wt.rank()) v = reduce(v, wt.rank());
    const std::optional<Shape> both = broadcast_shape(wt.shape(), v.shape());
    if (!both || *both != v.shape()) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("metric '{}': sample_weight of shape {} does not broadcast to "
                              "values of shape {}",
                              metric, shape_to_string(sample_weight->shape()), shape_to_string(values.shape())),
                  "pass one weight per sample: shape (batch,) or (batch, 1)");
    }
    if (wt.shape() != v.shape()) wt = broadcast_to(wt, v.shape());
    v = v * wt;
    if (wt.rank() > 1) wt = reduce(wt, 1);
    w = wt;
  }
  if (v.rank() > 1) v = reduce(v, 1);
  return {v, w};
}

/// Traces `result` over state Arrays of their own types and runs it with the interpreter on
/// host copies of them.
double evaluate_result(const std::function<Tensor(const std::vector<Tensor>&)>& result, const std::vector<Array>& state,
                       const std::string& metric) {
  std::vector<ir::TensorType> types;
  std::vector<Array> host;
  for (size_t i = 0; i < state.size(); ++i) {
    if (!state[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("metric '{}': state Array {} is invalid (empty)", metric, i));
    }
    types.push_back({state[i].shape(), state[i].dtype()});
    host.push_back(to_host(state[i]));
  }
  const ir::Graph graph =
      trace([&](const std::vector<Tensor>& s) { return std::vector<Tensor>{result(s)}; }, types, "metric_result");
  return interp::interpret(graph, host).at(0).element_as_double(0);
}

/// The f32 0/1 of a bool tensor.
Tensor as_f32(const Tensor& matches) { return convert(matches, DType::kF32); }

}  // namespace

// ---- Mean and Sum -------------------------------------------------------------------------------

Mean::Mean(std::string name) : name_(std::move(name)) { require_name(name_, "Mean"); }

std::vector<Array> Mean::initial_state() const {
  return {Array::scalar(0.0, DType::kF32), Array::scalar(0.0, DType::kF32)};
}

std::vector<Tensor> Mean::update_state(const std::vector<Tensor>& state, const Tensor& values,
                                       std::optional<Tensor> sample_weight) const {
  check_state(name_, state, 2);
  const Samplewise s = reduce_to_samplewise(name_, values, sample_weight, true);
  Tensor added;
  if (s.weight) {
    added = sum(*s.weight);
  } else {
    const int64_t samples = s.values.rank() >= 1 ? s.values.dim(0) : 1;
    added = scalar(static_cast<double>(samples), DType::kF32);
  }
  return {state[0] + sum(s.values), state[1] + added};
}

std::vector<Tensor> Mean::add_batch(const std::vector<Tensor>& state, const Tensor& batch_loss,
                                    int64_t batch_size) const {
  require_valid(name_.c_str(), "batch_loss", batch_loss);
  if (batch_loss.rank() != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("metric '{}': add_batch takes the batch's reduced (scalar) loss, got "
                            "shape {}",
                            name_, shape_to_string(batch_loss.shape())),
                "reduce the loss first (a Loss with a reducing reduction returns a scalar)");
  }
  if (batch_size < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("metric '{}': batch_size = {} is below 1", name_, batch_size),
                "pass the number of samples in the batch");
  }
  return update_state(state, batch_loss, scalar(static_cast<double>(batch_size), DType::kF32));
}

Tensor Mean::result(const std::vector<Tensor>& state) const {
  check_state(name_, state, 2);
  return divide_no_nan(state[0], state[1]);
}

double Mean::result_value(const std::vector<Array>& state) const {
  return evaluate_result([this](const std::vector<Tensor>& s) { return result(s); }, state, name_);
}

Sum::Sum(std::string name) : name_(std::move(name)) { require_name(name_, "Sum"); }

std::vector<Array> Sum::initial_state() const { return {Array::scalar(0.0, DType::kF32)}; }

std::vector<Tensor> Sum::update_state(const std::vector<Tensor>& state, const Tensor& values,
                                      std::optional<Tensor> sample_weight) const {
  check_state(name_, state, 1);
  const Samplewise s = reduce_to_samplewise(name_, values, sample_weight, false);
  return {state[0] + sum(s.values)};
}

Tensor Sum::result(const std::vector<Tensor>& state) const {
  check_state(name_, state, 1);
  return state[0];
}

double Sum::result_value(const std::vector<Array>& state) const {
  return evaluate_result([this](const std::vector<Tensor>& s) { return result(s); }, state, name_);
}

// ---- Metric and MeanMetricWrapper ---------------------------------------------------------------

Metric::Metric(std::string name) : name_(std::move(name)) { require_name(name_, "Metric"); }

double Metric::result_value(const std::vector<Array>& state) const {
  return evaluate_result([this](const std::vector<Tensor>& s) { return result(s); }, state, name_);
}

MeanMetricWrapper::MeanMetricWrapper(std::string name, MetricFn fn)
    : Metric(name), fn_(std::move(fn)), mean_(std::move(name)) {
  if (!fn_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("MeanMetricWrapper '{}': the metric function is empty", this->name()),
                "pass a callable (y_true, y_pred) -> per-sample values");
  }
}

std::vector<Array> MeanMetricWrapper::initial_state() const { return mean_.initial_state(); }

std::vector<Tensor> MeanMetricWrapper::update_state(const std::vector<Tensor>& state, const Tensor& y_true,
                                                    const Tensor& y_pred, std::optional<Tensor> sample_weight) const {
  check_state(name(), state, 2);
  require_valid(name().c_str(), "y_true", y_true);
  require_valid(name().c_str(), "y_pred", y_pred);
  return mean_.update_state(state, fn_(y_true, y_pred), sample_weight);
}

Tensor MeanMetricWrapper::result(const std::vector<Tensor>& state) const { return mean_.result(state); }

// ---- per-sample functions -----------------------------------------------------------------------

Tensor accuracy(const Tensor& y_true, const Tensor& y_pred) {
  require_valid("accuracy", "y_true", y_true);
  require_valid("accuracy", "y_pred", y_pred);
  auto [t, p] = losses::squeeze_or_expand_to_same_rank(convert(y_true, y_pred.dtype()), y_pred);
  if (!broadcast_shape(t.shape(), p.shape())) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("accuracy: y_true shape {} and y_pred shape {} do not broadcast",
                            shape_to_string(y_true.shape()), shape_to_string(y_pred.shape())));
  }
  return as_f32(equal(t, p));
}

Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  require_valid("binary_accuracy", "y_true", y_true);
  require_valid("binary_accuracy", "y_pred", y_pred);
  auto [t, p] = losses::squeeze_or_expand_to_same_rank(convert(y_true, y_pred.dtype()), y_pred);
  if (!broadcast_shape(t.shape(), p.shape())) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("binary_accuracy: y_true shape {} and y_pred shape {} do not "
                            "broadcast",
                            shape_to_string(y_true.shape()), shape_to_string(y_pred.shape())),
                "pass (batch, 1) labels for (batch, 1) predictions");
  }
  const Tensor predicted = convert(greater(p, scalar(threshold, p.dtype())), p.dtype());
  return as_f32(equal(t, predicted));
}

Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  require_valid("categorical_accuracy", "y_true", y_true);
  require_valid("categorical_accuracy", "y_pred", y_pred);
  const Shape ts = y_true.shape(), ps = y_pred.shape();
  if (ts.empty() || ps.empty() || ts.size() != ps.size() || !std::equal(ts.begin(), ts.end() - 1, ps.begin())) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("categorical_accuracy: y_true shape {} and y_pred shape {} must "
                            "agree except in the last (class) axis, with rank >= 1",
                            shape_to_string(ts), shape_to_string(ps)),
                "pass one-hot labels (batch, classes); use sparse_categorical_accuracy for "
                "integer labels");
  }
  return as_f32(equal(argmax(y_true, -1), argmax(y_pred, -1)));
}

Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  require_valid("sparse_categorical_accuracy", "y_true", y_true);
  require_valid("sparse_categorical_accuracy", "y_pred", y_pred);
  Tensor labels = losses::sparse_labels("sparse_categorical_accuracy", y_true, y_pred);
  if (is_bool(labels.dtype())) labels = convert(labels, DType::kI32);
  const DType compare = is_integer(labels.dtype()) ? DType::kI64 : labels.dtype();
  const Tensor predicted = convert(argmax(y_pred, -1, DType::kI64), compare);
  return as_f32(equal(convert(labels, compare), predicted));
}

// ---- metric classes -----------------------------------------------------------------------------

Accuracy::Accuracy(const AccuracyOptions& options) : MeanMetricWrapper(options.name, &accuracy) {}

BinaryAccuracy::BinaryAccuracy(const BinaryAccuracyOptions& options)
    : MeanMetricWrapper(options.name, [threshold = options.threshold](const Tensor& t, const Tensor& p) {
        return binary_accuracy(t, p, threshold);
      }) {
  if (std::isnan(options.threshold)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("BinaryAccuracy '{}': threshold is NaN", options.name),
                "use a threshold such as 0.5 for probabilities or 0 for logits");
  }
}

CategoricalAccuracy::CategoricalAccuracy(const CategoricalAccuracyOptions& options)
    : MeanMetricWrapper(options.name, &categorical_accuracy) {}

SparseCategoricalAccuracy::SparseCategoricalAccuracy(const SparseCategoricalAccuracyOptions& options)
    : MeanMetricWrapper(options.name, &sparse_categorical_accuracy) {}

MeanSquaredError::MeanSquaredError(const MeanSquaredErrorOptions& options)
    : MeanMetricWrapper(options.name, &losses::mean_squared_error) {}

MeanAbsoluteError::MeanAbsoluteError(const MeanAbsoluteErrorOptions& options)
    : MeanMetricWrapper(options.name, &losses::mean_absolute_error) {}

// ---- factory ------------------------------------------------------------------------------------

namespace {

using Factory = std::unique_ptr<Metric> (*)(std::string name);

struct Entry {
  std::string identifier;
  std::string default_name;
  Factory make;
};

template <class M, class Options>
std::unique_ptr<Metric> make_named(std::string name) {
  Options options;
  options.name = std::move(name);
  return std::make_unique<M>(options);
}

std::unique_ptr<Metric> make_bce(std::string name) {
  return std::make_unique<MeanMetricWrapper>(
      std::move(name), [](const Tensor& t, const Tensor& p) { return losses::binary_crossentropy(t, p); });
}
std::unique_ptr<Metric> make_cce(std::string name) {
  return std::make_unique<MeanMetricWrapper>(
      std::move(name), [](const Tensor& t, const Tensor& p) { return losses::categorical_crossentropy(t, p); });
}
std::unique_ptr<Metric> make_scce(std::string name) {
  return std::make_unique<MeanMetricWrapper>(
      std::move(name), [](const Tensor& t, const Tensor& p) { return losses::sparse_categorical_crossentropy(t, p); });
}

const std::vector<Entry>& registry() {
  constexpr auto acc = &make_named<Accuracy, AccuracyOptions>;
  constexpr auto bin = &make_named<BinaryAccuracy, BinaryAccuracyOptions>;
  constexpr auto cat = &make_named<CategoricalAccuracy, CategoricalAccuracyOptions>;
  constexpr auto sparse = &make_named<SparseCategoricalAccuracy, SparseCategoricalAccuracyOptions>;
  constexpr auto mse = &make_named<MeanSquaredError, MeanSquaredErrorOptions>;
  constexpr auto mae = &make_named<MeanAbsoluteError, MeanAbsoluteErrorOptions>;
  constexpr auto top_k = &make_named<SparseTopKCategoricalAccuracy, SparseTopKCategoricalAccuracyOptions>;
  constexpr auto precision = &make_named<Precision, PrecisionOptions>;
  constexpr auto recall = &make_named<Recall, RecallOptions>;
  constexpr auto auc = &make_named<AUC, AUCOptions>;
  static const std::vector<Entry> entries = {
      {"accuracy", "accuracy", acc},
      {"Accuracy", "accuracy", acc},
      {"binary_accuracy", "binary_accuracy", bin},
      {"BinaryAccuracy", "binary_accuracy", bin},
      {"categorical_accuracy", "categorical_accuracy", cat},
      {"CategoricalAccuracy", "categorical_accuracy", cat},
      {"sparse_categorical_accuracy", "sparse_categorical_accuracy", sparse},
      {"SparseCategoricalAccuracy", "sparse_categorical_accuracy", sparse},
      {"sparse_top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy", top_k},
      {"SparseTopKCategoricalAccuracy", "sparse_top_k_categorical_accuracy", top_k},
      {"precision", "precision", precision},
      {"Precision", "precision", precision},
      {"recall", "recall", recall},
      {"Recall", "recall", recall},
      {"auc", "auc", auc},
      {"AUC", "auc", auc},
      {"mean_squared_error", "mean_squared_error", mse},
      {"MeanSquaredError", "mean_squared_error", mse},
      {"mse", "mean_squared_error", mse},
      {"MSE", "mean_squared_error", mse},
      {"mean_absolute_error", "mean_absolute_error", mae},
      {"MeanAbsoluteError", "mean_absolute_error", mae},
      {"mae", "mean_absolute_error", mae},
      {"MAE", "mean_absolute_error", mae},
      {"binary_crossentropy", "binary_crossentropy", &make_bce},
      {"BinaryCrossentropy", "binary_crossentropy", &make_bce},
      {"bce", "binary_crossentropy", &make_bce},
      {"BCE", "binary_crossentropy", &make_bce},
      {"categorical_crossentropy", "categorical_crossentropy", &make_cce},
      {"CategoricalCrossentropy", "categorical_crossentropy", &make_cce},
      {"sparse_categorical_crossentropy", "sparse_categorical_crossentropy", &make_scce},
      {"SparseCategoricalCrossentropy", "sparse_categorical_crossentropy", &make_scce},
  };
  return entries;
}

const Entry& find_entry(std::string_view identifier) {
  for (const Entry& e : registry()) {
    if (e.identifier == identifier) return e;
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("unknown metric '{}'", identifier),
              fmt::format("use one of: {}", fmt::join(known_names(), ", ")));
}

/// The accuracy class Keras 3 picks from the shapes
/// (compile_utils.is_binary_or_sparse_categorical).
std::unique_ptr<Metric> accuracy_from_shapes(const Shape& y_true, const Shape& y_pred, std::string name) {
  if (y_pred.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("metric '{}': y_pred is a scalar (shape ()); accuracy needs rank >= 1", name));
  }
  const int64_t y_pred_last = y_pred.back();
  if (y_pred_last == 1) return make_named<BinaryAccuracy, BinaryAccuracyOptions>(std::move(name));
  const bool sparse = y_true.size() < y_pred.size() || (!y_true.empty() && y_true.back() == 1);
  if (sparse) {
    return make_named<SparseCategoricalAccuracy, SparseCategoricalAccuracyOptions>(std::move(name));
  }
  return make_named<CategoricalAccuracy, CategoricalAccuracyOptions>(std::move(name));
}

/// The accuracy class that fits a built-in crossentropy, or null.
std::unique_ptr<Metric> accuracy_from_loss(const losses::Loss* loss, std::string name) {
  if (dynamic_cast<const losses::BinaryCrossentropy*>(loss)) {
    return make_named<BinaryAccuracy, BinaryAccuracyOptions>(std::move(name));
  }
  if (dynamic_cast<const losses::CategoricalCrossentropy*>(loss)) {
    return make_named<CategoricalAccuracy, CategoricalAccuracyOptions>(std::move(name));
  }
  if (dynamic_cast<const losses::SparseCategoricalCrossentropy*>(loss)) {
    return make_named<SparseCategoricalAccuracy, SparseCategoricalAccuracyOptions>(std::move(name));
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> known_names() {
  std::vector<std::string> names;
  for (const Entry& e : registry()) names.push_back(e.identifier);
  return names;
}

std::unique_ptr<Metric> get(std::string_view identifier) {
  const Entry& e = find_entry(identifier);
  return e.make(e.default_name);
}

std::unique_ptr<Metric> get_for_compile(std::string_view identifier, const CompileContext& context) {
  std::string lower(identifier);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string name(identifier);
  if (lower != "accuracy" && lower != "acc") return find_entry(identifier).make(name);
  if (context.y_true_shape && context.y_pred_shape) {
    return accuracy_from_shapes(*context.y_true_shape, *context.y_pred_shape, name);
  }
  if (std::unique_ptr<Metric> by_loss = accuracy_from_loss(context.loss, name)) return by_loss;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("metric '{}': cannot tell binary, categorical or sparse categorical "
                          "accuracy without the target and prediction shapes or a crossentropy "
                          "loss",
                          name),
              "resolve it once the model is built (pass y_true_shape and y_pred_shape), or name "
              "the metric explicitly, e.g. \"sparse_categorical_accuracy\"");
}

}  // namespace ingot::metrics
