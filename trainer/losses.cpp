// Losses with Keras 3 semantics (behaviour reference: keras/src/losses/loss.py and losses.py,
// and the JAX backend's crossentropies in keras/src/backend/jax/nn.py), written over Tensors.
#include "ingot/trainer/losses.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"
#include "losses_metrics_util.h"

namespace ingot::losses {

namespace {

using losses_metrics_detail::broadcast_shape;
using losses_metrics_detail::divide_no_nan;
using losses_metrics_detail::require_valid;

/// Checks that `t` is floating point; names the function and the argument.
void require_floating(const char* fn, const char* arg, const Tensor& t) {
  if (!is_floating(t.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: {} has dtype {}, expected a floating-point dtype", fn, arg, dtype_name(t.dtype())),
                "convert predictions to f32 (or pass them as floats)");
  }
}

/// Checks that y_true and y_pred broadcast, to a shape of rank >= 1 (regression losses).
void check_regression_shapes(const char* fn, const Tensor& y_true, const Tensor& y_pred) {
  const std::optional<Shape> both = broadcast_shape(y_true.shape(), y_pred.shape());
  if (!both) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: y_true shape {} and y_pred shape {} do not broadcast", fn,
                            shape_to_string(y_true.shape()), shape_to_string(y_pred.shape())),
                "pass targets with the shape of the predictions");
  }
  if (both->empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: y_true and y_pred are scalars; the loss averages over the last "
                            "axis, so they need rank >= 1",
                            fn),
                "reshape them to (batch, 1)");
  }
}

/// Normalises `axis` for a tensor of `rank`, naming the loss in the error.
int64_t normalize_axis(const char* fn, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("{}: axis {} is out of range for y_pred of rank {}", fn, axis, rank),
                "use an axis in [-rank, rank), usually -1");
  }
  return axis < 0 ? axis + rank : axis;
}

void check_delta(const char* fn, double delta) {
  if (!(std::isfinite(delta) && delta > 0.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: delta = {} is invalid: it must be a finite number > 0", fn, delta),
                "delta is the error size where the loss turns linear; Keras's default is 1.0");
  }
}

void check_label_smoothing(const char* fn, double label_smoothing) {
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: label_smoothing = {} is outside [0, 1]", fn, label_smoothing),
                "use 0 for none, or a small fraction such as 0.1");
  }
}

/// The (y_true, y_pred) of a loss function: y_pred floating, y_true converted to its dtype.
std::pair<Tensor, Tensor> prepare_inputs(const char* fn, const Tensor& y_true, const Tensor& y_pred) {
  require_valid(fn, "y_true", y_true);
  require_valid(fn, "y_pred", y_pred);
  require_floating(fn, "y_pred", y_pred);
  return {convert(y_true, y_pred.dtype()), y_pred};
}

/// Log-probabilities along `axis` from probabilities (normalised to sum 1, clipped to
/// [kEpsilon, 1 - kEpsilon]) or from logits (log_softmax), as Keras's JAX backend.
Tensor log_probabilities(const Tensor& y_pred, bool from_logits, int64_t axis) {
  if (from_logits) return log_softmax(y_pred, axis);
  const Tensor p = y_pred / sum(y_pred, {axis}, true);
  return log(clamp(p, kEpsilon, 1.0 - kEpsilon));
}

/// A class axis of size 1 makes the categorical losses constant (Keras warns); an error here.
void check_several_classes(const char* fn, const Tensor& y_pred, int64_t axis) {
  if (y_pred.dim(axis) == 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: y_pred of shape {} has a single class along axis {}, so the loss "
                            "is constant and trains nothing",
                            fn, shape_to_string(y_pred.shape()), axis),
                "use binary_crossentropy for one output unit, or give the output layer one unit "
                "per class");
  }
}

/// Keras's loss aliases and names: identifier -> factory.
using Factory = std::unique_ptr<Loss> (*)();

template <class L>
std::unique_ptr<Loss> make_default() {
  return std::make_unique<L>();
}

const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> entries = {
      {"mean_squared_error", &make_default<MeanSquaredError>},
      {"MeanSquaredError", &make_default<MeanSquaredError>},
      {"mse", &make_default<MeanSquaredError>},
      {"MSE", &make_default<MeanSquaredError>},
      {"mean_absolute_error", &make_default<MeanAbsoluteError>},
      {"MeanAbsoluteError", &make_default<MeanAbsoluteError>},
      {"mae", &make_default<MeanAbsoluteError>},
      {"MAE", &make_default<MeanAbsoluteError>},
      {"huber", &make_default<Huber>},
      {"Huber", &make_default<Huber>},
      {"kl_divergence", &make_default<KLDivergence>},
      {"KLDivergence", &make_default<KLDivergence>},
      {"kld", &make_default<KLDivergence>},
      {"KLD", &make_default<KLDivergence>},
      {"binary_crossentropy", &make_default<BinaryCrossentropy>},
      {"BinaryCrossentropy", &make_default<BinaryCrossentropy>},
      {"bce", &make_default<BinaryCrossentropy>},
      {"BCE", &make_default<BinaryCrossentropy>},
      {"categorical_crossentropy", &make_default<CategoricalCrossentropy>},
      {"CategoricalCrossentropy", &make_default<CategoricalCrossentropy>},
      {"sparse_categorical_crossentropy", &make_default<SparseCategoricalCrossentropy>},
      {"SparseCategoricalCrossentropy", &make_default<SparseCategoricalCrossentropy>},
  };
  return entries;
}

}  // namespace

// ---- reductions ---------------------------------------------------------------------------------

std::string_view reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::kSumOverBatchSize:
      return "sum_over_batch_size";
    case Reduction::kSum:
      return "sum";
    case Reduction::kMean:
      return "mean";
    case Reduction::kMeanWithSampleWeight:
      return "mean_with_sample_weight";
    case Reduction::kNone:
      return "none";
  }
  throw Error(ErrorCode::kInternal,
              fmt::format("reduction_name: unknown Reduction value {}", static_cast<int>(reduction)));
}

Reduction reduction_from_name(std::string_view name) {
  for (Reduction r : {Reduction::kSumOverBatchSize, Reduction::kSum, Reduction::kMean, Reduction::kMeanWithSampleWeight,
                      Reduction::kNone}) {
    if (reduction_name(r) == name) return r;
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("unknown loss reduction '{}'", name),
              "use one of sum_over_batch_size, sum, mean, mean_with_sample_weight, none");
}

std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(const Tensor& a, const Tensor& b, bool expand_rank_1) {
  require_valid("squeeze_or_expand_to_same_rank", "first operand", a);
  require_valid("squeeze_or_expand_to_same_rank", "second operand", b);
  Tensor x1 = a, x2 = b;
  const int64_t r1 = x1.rank(), r2 = x2.rank();
  if (r1 == r2 + 1 && x1.dim(-1) == 1) {
    if (r2 == 1 && expand_rank_1) {
      x2 = expand_dims(x2, -1);
    } else {
      x1 = squeeze(x1, {-1});
    }
  } else if (r2 == r1 + 1 && x2.dim(-1) == 1) {
    if (r1 == 1 && expand_rank_1) {
      x1 = expand_dims(x1, -1);
    } else {
      x2 = squeeze(x2, {-1});
    }
  }
  return {x1, x2};
}

namespace {

/// The weight aligned with `values` (see reduce_weighted_values): converted, squeezed or
/// expanded, padded with trailing 1s, and checked to broadcast. Returns (values, weight).
std::pair<Tensor, Tensor> align_weight(const Tensor& values, const Tensor& sample_weight) {
  require_valid("reduce_weighted_values", "sample_weight", sample_weight);
  auto [v, w] = squeeze_or_expand_to_same_rank(values, convert(sample_weight, values.dtype()));
  if (w.rank() < v.rank()) {
    Shape padded = w.shape();
    padded.resize(static_cast<size_t>(v.rank()), 1);
    w = reshape(w, padded);
  }
  if (!broadcast_shape(v.shape(), w.shape())) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("sample_weight of shape {} does not broadcast against per-sample "
                            "losses of shape {}",
                            shape_to_string(sample_weight.shape()), shape_to_string(values.shape())),
                "pass one weight per sample: shape (batch,) or (batch, 1)");
  }
  return {v, w};
}

}  // namespace

Tensor reduce_weighted_values(const Tensor& values, const std::optional<Tensor>& sample_weight, Reduction reduction) {
  require_valid("reduce_weighted_values", "values", values);
  require_floating("reduce_weighted_values", "values", values);
  Tensor v = values;
  std::optional<Tensor> w;
  if (sample_weight) {
    auto [av, aw] = align_weight(values, *sample_weight);
    w = aw;
    v = av * aw;
  }
  if (reduction == Reduction::kNone || v.rank() == 0) return v;
  const Tensor total = sum(v);
  if (reduction == Reduction::kSum) return total;
  if (reduction == Reduction::kMeanWithSampleWeight && w) return divide_no_nan(total, sum(*w));
  const int64_t count = v.size();
  return count == 0 ? total : total / static_cast<double>(count);
}

// ---- per-sample functions -----------------------------------------------------------------------

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_inputs("mean_squared_error", y_true, y_pred);
  std::tie(t, p) = squeeze_or_expand_to_same_rank(t, p);
  check_regression_shapes("mean_squared_error", t, p);
  return mean(square(t - p), {-1});
}

Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_inputs("mean_absolute_error", y_true, y_pred);
  std::tie(t, p) = squeeze_or_expand_to_same_rank(t, p);
  check_regression_shapes("mean_absolute_error", t, p);
  return mean(abs(t - p), {-1});
}

Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta) {
  check_delta("huber", delta);
  auto [t, p] = prepare_inputs("huber", y_true, y_pred);
  std::tie(t, p) = squeeze_or_expand_to_same_rank(t, p);
  check_regression_shapes("huber", t, p);
  const Tensor error = p - t;
  const Tensor abs_error = abs(error);
  const Tensor quadratic = 0.5 * square(error);
  const Tensor linear = delta * abs_error - 0.5 * delta * delta;
  return mean(where(less_equal(abs_error, full_like(abs_error, delta)), quadratic, linear), {-1});
}

Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = prepare_inputs("kl_divergence", y_true, y_pred);
  check_regression_shapes("kl_divergence", t, p);
  const Tensor tc = clamp(t, kEpsilon, 1.0);
  const Tensor pc = clamp(p, kEpsilon, 1.0);
  return sum(tc * log(tc / pc), {-1});
}

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits, double label_smoothing,
                           int64_t axis) {
  check_label_smoothing("binary_crossentropy", label_smoothing);
  auto [t, p] = prepare_inputs("binary_crossentropy", y_true, y_pred);
  std::tie(t, p) = squeeze_or_expand_to_same_rank(t, p);
  if (t.shape() != p.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("binary_crossentropy: y_true shape {} and y_pred shape {} differ",
                            shape_to_string(y_true.shape()), shape_to_string(y_pred.shape())),
                "pass one label per prediction, e.g. (batch, 1) labels for (batch, 1) outputs");
  }
  if (p.rank() == 0) {
    throw Error(ErrorCode::kInvalidArgument, "binary_crossentropy: y_true and y_pred are scalars; they need rank >= 1",
                "reshape them to (batch, 1)");
  }
  const int64_t a = normalize_axis("binary_crossentropy", axis, p.rank());
  if (label_smoothing > 0.0) t = t * (1.0 - label_smoothing) + 0.5 * label_smoothing;
  Tensor elementwise;
  if (from_logits) {
    elementwise = sigmoid_binary_cross_entropy(p, t);
  } else {
    const Tensor q = clamp(p, kEpsilon, 1.0 - kEpsilon);
    elementwise = -(t * log(q) + (1.0 - t) * log(1.0 - q));
  }
  return mean(elementwise, {a});
}

Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits, double label_smoothing,
                                int64_t axis) {
  check_label_smoothing("categorical_crossentropy", label_smoothing);
  auto [t, p] = prepare_inputs("categorical_crossentropy", y_true, y_pred);
  std::tie(t, p) = squeeze_or_expand_to_same_rank(t, p);
  if (t.shape() != p.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("categorical_crossentropy: y_true shape {} and y_pred shape {} differ",
                            shape_to_string(y_true.shape()), shape_to_string(y_pred.shape())),
                "pass one-hot labels of shape (batch, classes), or use "
                "sparse_categorical_crossentropy for integer labels");
  }
  if (p.rank() == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "categorical_crossentropy: y_true and y_pred are scalars; they need rank >= 1",
                "pass (batch, classes) tensors");
  }
  const int64_t a = normalize_axis("categorical_crossentropy", axis, p.rank());
  check_several_classes("categorical_crossentropy", p, a);
  if (label_smoothing > 0.0) {
    const double classes = static_cast<double>(t.dim(a));
    t = t * (1.0 - label_smoothing) + label_smoothing / classes;
  }
  return -sum(t * log_probabilities(p, from_logits, a), {a});
}

Tensor sparse_labels(const char* fn, const Tensor& y_true, const Tensor& y_pred) {
  if (y_pred.rank() == 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: y_pred is a scalar; it needs a class axis", fn),
                "pass y_pred of shape (batch, classes)");
  }
  Tensor labels = y_true;
  if (labels.rank() == y_pred.rank() && labels.dim(-1) == 1) labels = squeeze(labels, {-1});
  const Shape pred_shape = y_pred.shape();  // by value: one copy for both iterators
  const Shape expected(pred_shape.begin(), pred_shape.end() - 1);
  if (labels.shape() != expected) {
    throw Error(
        ErrorCode::kShapeMismatch,
        fmt::format("{}: y_true shape {} does not match y_pred shape {} without its "
                    "class axis, {}",
                    fn, shape_to_string(y_true.shape()), shape_to_string(y_pred.shape()), shape_to_string(expected)),
        "pass integer labels of shape (batch,) or (batch, 1) (one-hot labels take the "
        "categorical loss or metric)");
  }
  return labels;
}

Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits) {
  const char* fn = "sparse_categorical_crossentropy";
  require_valid(fn, "y_true", y_true);
  require_valid(fn, "y_pred", y_pred);
  require_floating(fn, "y_pred", y_pred);
  Tensor labels = sparse_labels(fn, y_true, y_pred);
  check_several_classes(fn, y_pred, y_pred.rank() - 1);
  if (!is_integer(labels.dtype())) labels = convert(labels, DType::kI32);
  const Tensor one_hot_labels = one_hot(labels, y_pred.dim(-1), y_pred.dtype());
  return -sum(one_hot_labels * log_probabilities(y_pred, from_logits, y_pred.rank() - 1), {-1});
}

void validate_sparse_labels(const Array& labels, int64_t num_classes) {
  if (num_classes < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("validate_sparse_labels: num_classes = {} is below 1", num_classes),
                "pass the size of the prediction's class axis");
  }
  if (is_bool(labels.dtype())) {
    throw Error(ErrorCode::kDTypeMismatch, "validate_sparse_labels: labels have dtype bool",
                "pass integer class indices");
  }
  const std::vector<double> values = labels.to_doubles();
  for (size_t i = 0; i < values.size(); ++i) {
    const double label = std::trunc(values[i]);
    if (!(label >= 0.0 && label < static_cast<double>(num_classes))) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("sparse labels: label {} at flat index {} is outside [0, {})", values[i], i, num_classes),
                  "labels must be class indices 0 .. classes - 1; check the data, or the size "
                  "of the model's output layer");
    }
  }
}

// ---- loss objects -------------------------------------------------------------------------------

Loss::Loss(std::string name, Reduction reduction, DType dtype)
    : name_(std::move(name)), reduction_(reduction), dtype_(dtype) {
  if (name_.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "Loss: the name is empty", "give the loss a name");
  }
  if (!is_floating(dtype_)) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("Loss '{}': dtype {} is not floating point", name_, dtype_name(dtype_)),
                "use f32 (the default), f64, f16 or bf16");
  }
}

Tensor Loss::per_sample(const Tensor& y_true, const Tensor& y_pred) const {
  require_valid(name_.c_str(), "y_true", y_true);
  require_valid(name_.c_str(), "y_pred", y_pred);
  const Tensor p = y_pred.dtype() == dtype_ ? y_pred : convert(y_pred, dtype_);
  const Tensor t = labels_are_indices() || y_true.dtype() == dtype_ ? y_true : convert(y_true, dtype_);
  return call(t, p);
}

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred, std::optional<Tensor> sample_weight) const {
  return reduce_weighted_values(per_sample(y_true, y_pred), sample_weight, reduction_);
}

MeanSquaredError::MeanSquaredError(const MeanSquaredErrorOptions& options)
    : Loss(options.name, options.reduction, options.dtype) {}

Tensor MeanSquaredError::call(const Tensor& y_true, const Tensor& y_pred) const {
  return mean_squared_error(y_true, y_pred);
}

MeanAbsoluteError::MeanAbsoluteError(const MeanAbsoluteErrorOptions& options)
    : Loss(options.name, options.reduction, options.dtype) {}

Tensor MeanAbsoluteError::call(const Tensor& y_true, const Tensor& y_pred) const {
  return mean_absolute_error(y_true, y_pred);
}

Huber::Huber(const HuberOptions& options) : Loss(options.name, options.reduction, options.dtype), options_(options) {
  check_delta("Huber", options.delta);
}

Tensor Huber::call(const Tensor& y_true, const Tensor& y_pred) const { return huber(y_true, y_pred, options_.delta); }

KLDivergence::KLDivergence(const KLDivergenceOptions& options) : Loss(options.name, options.reduction, options.dtype) {}

Tensor KLDivergence::call(const Tensor& y_true, const Tensor& y_pred) const { return kl_divergence(y_true, y_pred); }

BinaryCrossentropy::BinaryCrossentropy(const BinaryCrossentropyOptions& options)
    : Loss(options.name, options.reduction, options.dtype), options_(options) {
  check_label_smoothing("BinaryCrossentropy", options.label_smoothing);
}

Tensor BinaryCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  return binary_crossentropy(y_true, y_pred, options_.from_logits, options_.label_smoothing, options_.axis);
}

CategoricalCrossentropy::CategoricalCrossentropy(const CategoricalCrossentropyOptions& options)
    : Loss(options.name, options.reduction, options.dtype), options_(options) {
  check_label_smoothing("CategoricalCrossentropy", options.label_smoothing);
}

Tensor CategoricalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  return categorical_crossentropy(y_true, y_pred, options_.from_logits, options_.label_smoothing, options_.axis);
}

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(const SparseCategoricalCrossentropyOptions& options)
    : Loss(options.name, options.reduction, options.dtype), options_(options) {}

Tensor SparseCategoricalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  return sparse_categorical_crossentropy(y_true, y_pred, options_.from_logits);
}

LossFunctionWrapper::LossFunctionWrapper(LossFn fn, const LossFunctionWrapperOptions& options)
    : Loss(options.name, options.reduction, options.dtype), fn_(std::move(fn)) {
  if (!fn_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("LossFunctionWrapper '{}': the loss function is empty", name()),
                "pass a callable (y_true, y_pred) -> per-sample losses");
  }
}

Tensor LossFunctionWrapper::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return fn_(t, p);
}

// ---- factory ------------------------------------------------------------------------------------

std::vector<std::string> known_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Loss> get(std::string_view identifier) {
  for (const auto& [name, factory] : registry()) {
    if (name == identifier) return factory();
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("unknown loss '{}'", identifier),
              fmt::format("use one of: {}", fmt::join(known_names(), ", ")));
}

}  // namespace ingot::losses
