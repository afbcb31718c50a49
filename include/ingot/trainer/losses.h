// Losses with Keras 3 semantics (keras/src/losses/loss.py and losses.py): per-sample loss
// functions, loss objects that weight and reduce them, and the by-name factory compile() uses.
//
// All of it is written over ingot::Tensor, so it must run inside trace() (and therefore works the
// same interpreted and jit-compiled, and is differentiable by autodiff). Shapes below use
// `batch` for the leading (sample) axis and `C` for the class axis.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/trace/tensor.h"

namespace ingot::losses {

/// Keras's backend.epsilon(): probabilities are clipped to [kEpsilon, 1 - kEpsilon] (in the
/// computing dtype) before their logarithm when a crossentropy is not given logits.
inline constexpr double kEpsilon = 1e-7;

/// How a Loss reduces its (weighted) per-sample losses, Keras 3's `reduction` argument.
enum class Reduction {
  /// "sum_over_batch_size" (the default): sum of the weighted losses divided by their number of
  /// elements (the batch size for per-sample losses of shape (batch,)). 0 for zero elements.
  kSumOverBatchSize,
  /// "sum": sum of the weighted losses.
  kSum,
  /// "mean": identical to kSumOverBatchSize (Keras 3 treats the two the same).
  kMean,
  /// "mean_with_sample_weight": sum of the weighted losses divided by the sum of the sample
  /// weights (by the number of elements when no weights are given); 0 when the weights sum to
  /// 0, never NaN.
  kMeanWithSampleWeight,
  /// "none" (Keras also accepts None): the weighted per-sample losses, unreduced.
  kNone,
};

/// Keras's name of `reduction`: "sum_over_batch_size", "sum", "mean",
/// "mean_with_sample_weight" or "none".
std::string_view reduction_name(Reduction reduction);
/// Parses a Keras reduction name (the five of reduction_name). Throws
/// ingot::Error(kInvalidArgument) naming `name` and listing the valid names.
Reduction reduction_from_name(std::string_view name);

/// Keras's squeeze_or_expand_to_same_rank: when the ranks of `a` and `b` differ by exactly one
/// and the higher-ranked one ends in a size-1 dimension, either that dimension is squeezed away
/// or (when the other is rank 1 and `expand_rank_1`) a size-1 dimension is appended to the
/// rank-1 one. Otherwise both are returned unchanged. Throws kTraceError for invalid Tensors.
std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(const Tensor& a, const Tensor& b, bool expand_rank_1 = true);

/// Keras's reduce_weighted_values: multiplies `values` by `sample_weight` (converted to the
/// values' dtype; see below for its shape) and reduces the product per `reduction`.
///
/// Sample weights: after squeeze_or_expand_to_same_rank(values, weight), a weight of lower rank
/// than the values gets trailing size-1 dimensions so that it broadcasts along the leading
/// (batch) axes: shape (batch,) or (batch, 1) weights for (batch,) or (batch, T) losses. (Keras 3
/// would broadcast such a weight NumPy-style, aligned on the trailing axes, which fails or
/// silently misaligns when T != batch; aligning on the batch axis is what the weights mean.)
/// A scalar weight scales every value. The weighted product has the broadcast shape of both.
///
/// Values of rank 0 are returned weighted but unreduced, as Keras does. The divisor of the mean
/// reductions is computed NaN-free: a zero divisor gives 0 (Keras's divide_no_nan), and the
/// gradient through it is 0, not NaN.
///
/// Throws ingot::Error(kDTypeMismatch) when `values` is not floating point,
/// kShapeMismatch naming both shapes when the weight does not broadcast against the values.
Tensor reduce_weighted_values(const Tensor& values, const std::optional<Tensor>& sample_weight, Reduction reduction);

// ---- per-sample loss functions (Keras's keras.losses.* functions) -------------------------------
// Each computes in y_pred's dtype (which must be floating point; ingot::Error(kDTypeMismatch)
// otherwise), converts y_true to that dtype, and returns one loss per sample: the input shape
// without its last axis, e.g. (batch,) for (batch, d) inputs.

/// The class-index labels of `y_true` for predictions `y_pred` (batch..., classes): labels of
/// y_pred's shape without its class axis, or with a trailing size-1 axis (squeezed). Errors name
/// `fn`: kInvalidArgument for a scalar y_pred, kShapeMismatch naming both shapes otherwise.
Tensor sparse_labels(const char* fn, const Tensor& y_true, const Tensor& y_pred);

/// mean((y_true - y_pred)^2, axis=-1) after squeeze_or_expand_to_same_rank; y_true and y_pred
/// broadcast against each other (kShapeMismatch naming both shapes if they do not, kInvalidArgument
/// if the broadcast shape is a scalar).
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
/// mean(|y_true - y_pred|, axis=-1); shapes as mean_squared_error.
Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);
/// Huber loss (Huber 1964, "Robust Estimation of a Location Parameter"), Keras's
/// keras.losses.huber: with e = y_pred - y_true after squeeze_or_expand_to_same_rank,
///   mean(0.5 * e^2 if |e| <= delta else delta * |e| - 0.5 * delta^2, axis=-1).
/// Quadratic inside [-delta, delta], linear outside; value and slope are continuous at
/// |e| = delta. Shapes as mean_squared_error; delta must be finite and > 0 (kInvalidArgument).
Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta = 1.0);
/// Kullback-Leibler divergence KL(y_true || y_pred), Keras's keras.losses.kl_divergence: both
/// clipped to [kEpsilon, 1], then sum(y_true * log(y_true / y_pred), axis=-1). Inputs are
/// probability distributions along the last axis; y_true and y_pred broadcast against each other
/// (no squeeze or expand, as Keras), to rank >= 1 (kShapeMismatch / kInvalidArgument otherwise).
Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred);
/// Binary crossentropy averaged over `axis`. y_true (probabilities in [0, 1]) and y_pred must
/// have the same shape after squeeze_or_expand_to_same_rank (kShapeMismatch otherwise).
/// Labels are smoothed towards 0.5: y_true * (1 - label_smoothing) + 0.5 * label_smoothing.
/// With `from_logits`, -y log sigmoid(x) - (1 - y) log sigmoid(-x) (finite for any logit);
/// otherwise y_pred is clipped to [kEpsilon, 1 - kEpsilon] and
/// -(y log p + (1 - y) log(1 - p)). label_smoothing outside [0, 1] is kInvalidArgument, an
/// out-of-range axis kOutOfRange.
Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                           double label_smoothing = 0.0, int64_t axis = -1);
/// Categorical crossentropy over `axis` of one-hot (or soft) y_true and y_pred of the same shape
/// (kShapeMismatch otherwise), rank >= 1. Labels are smoothed as
/// y_true * (1 - label_smoothing) + label_smoothing / C with C = y_true.dim(axis).
/// With `from_logits`, -sum(y_true * log_softmax(y_pred)); otherwise y_pred is normalised to
/// sum 1 along `axis`, clipped to [kEpsilon, 1 - kEpsilon] and -sum(y_true * log(p)).
/// The result drops `axis`. A class axis of size 1 (the loss would be constant; Keras only
/// warns) is kInvalidArgument.
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                                double label_smoothing = 0.0, int64_t axis = -1);
/// Sparse categorical crossentropy: integer class labels y_true of shape y_pred.shape[:-1]
/// (e.g. (batch,)) or that shape with a trailing 1 (e.g. (batch, 1)), against y_pred
/// (..., C) probabilities or, with `from_logits`, logits (log_softmax form, finite for any
/// logit). Labels of a floating dtype are truncated to integers (as Keras's cast to int32).
/// A label outside [0, C) selects no class and contributes loss 0 (JAX's one_hot); check host
/// data beforehand with validate_sparse_labels(). kShapeMismatch naming both shapes for other
/// label shapes; kInvalidArgument for a scalar y_pred or a single class (C = 1: the loss would
/// be constant).
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false);

/// Host-side check of sparse labels before training: every element of `labels` (any integer or
/// floating dtype; floats are truncated as the loss does) must lie in [0, num_classes).
/// Throws ingot::Error(kOutOfRange) naming the first bad label's index and value and the range,
/// kInvalidArgument for num_classes < 1, kDTypeMismatch for bool labels.
void validate_sparse_labels(const Array& labels, int64_t num_classes);

// ---- loss objects -------------------------------------------------------------------------------

/// Base of every loss object (Keras's keras.losses.Loss): a name, a reduction and the dtype it
/// computes in. Subclasses implement call(), the per-sample loss; operator() weights and
/// reduces it. Write a custom loss by deriving from Loss (or use LossFunctionWrapper).
class Loss {
 public:
  /// Throws ingot::Error(kDTypeMismatch) when `dtype` is not floating point, kInvalidArgument for
  /// an empty name.
  Loss(std::string name, Reduction reduction, DType dtype);
  virtual ~Loss() = default;
  Loss(const Loss&) = default;
  Loss& operator=(const Loss&) = default;

  const std::string& name() const { return name_; }
  Reduction reduction() const { return reduction_; }
  /// The dtype the loss computes in and returns (Keras's loss dtype, default f32).
  DType dtype() const { return dtype_; }

  /// The per-sample losses (Keras's Loss.call after its input conversion): y_pred is converted
  /// to dtype(), and so is y_true unless the loss takes class indices (labels_are_indices()).
  /// Throws kTraceError for invalid Tensors, and what call() throws.
  Tensor per_sample(const Tensor& y_true, const Tensor& y_pred) const;
  /// The loss (Keras's Loss.__call__): per_sample() weighted by `sample_weight` (shape (batch,),
  /// (batch, 1), a scalar, or the per-sample shape; converted to dtype()) and reduced per
  /// reduction() (see reduce_weighted_values). A scalar of dtype() unless the reduction is kNone.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred, std::optional<Tensor> sample_weight = {}) const;
  /// True for losses whose y_true are class indices, passed to call() in their own dtype (a
  /// float conversion could round large labels in a low-precision loss dtype); the trainer then
  /// checks labels with validate_sparse_labels before training.
  virtual bool labels_are_indices() const { return false; }

 protected:
  /// The per-sample loss of converted inputs (Keras's `call`).
  virtual Tensor call(const Tensor& y_true, const Tensor& y_pred) const = 0;

 private:
  std::string name_;
  Reduction reduction_;
  DType dtype_;
};

/// Options of MeanSquaredError.
struct MeanSquaredErrorOptions {
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "mean_squared_error";
  DType dtype = DType::kF32;
};
/// Keras's MeanSquaredError: mean_squared_error per sample.
class MeanSquaredError final : public Loss {
 public:
  explicit MeanSquaredError(const MeanSquaredErrorOptions& options = {});

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
};

/// Options of MeanAbsoluteError.
struct MeanAbsoluteErrorOptions {
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "mean_absolute_error";
  DType dtype = DType::kF32;
};
/// Keras's MeanAbsoluteError: mean_absolute_error per sample.
class MeanAbsoluteError final : public Loss {
 public:
  explicit MeanAbsoluteError(const MeanAbsoluteErrorOptions& options = {});

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
};

/// Options of Huber (Keras's keyword arguments).
struct HuberOptions {
  /// Where the loss turns from quadratic to linear; finite and > 0.
  double delta = 1.0;
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "huber_loss";
  DType dtype = DType::kF32;
};
/// Keras's Huber: huber per sample. A delta that is not finite and > 0 is
/// ingot::Error(kInvalidArgument) at construction.
class Huber final : public Loss {
 public:
  explicit Huber(const HuberOptions& options = {});
  const HuberOptions& options() const { return options_; }

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  HuberOptions options_;
};

/// Options of KLDivergence.
struct KLDivergenceOptions {
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "kl_divergence";
  DType dtype = DType::kF32;
};
/// Keras's KLDivergence: kl_divergence per sample.
class KLDivergence final : public Loss {
 public:
  explicit KLDivergence(const KLDivergenceOptions& options = {});

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
};

/// Options of BinaryCrossentropy (Keras's keyword arguments).
struct BinaryCrossentropyOptions {
  /// y_pred holds logits (any real) instead of probabilities.
  bool from_logits = false;
  /// In [0, 1]; labels move towards 0.5 by this fraction.
  double label_smoothing = 0.0;
  /// The axis averaged over per sample.
  int64_t axis = -1;
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "binary_crossentropy";
  DType dtype = DType::kF32;
};
/// Keras's BinaryCrossentropy: binary_crossentropy per sample. label_smoothing outside [0, 1]
/// is ingot::Error(kInvalidArgument) at construction.
class BinaryCrossentropy final : public Loss {
 public:
  explicit BinaryCrossentropy(const BinaryCrossentropyOptions& options = {});
  const BinaryCrossentropyOptions& options() const { return options_; }

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  BinaryCrossentropyOptions options_;
};

/// Options of CategoricalCrossentropy (Keras's keyword arguments).
struct CategoricalCrossentropyOptions {
  /// y_pred holds logits instead of probabilities.
  bool from_logits = false;
  /// In [0, 1]; labels move towards 1 / C by this fraction.
  double label_smoothing = 0.0;
  /// The class axis.
  int64_t axis = -1;
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "categorical_crossentropy";
  DType dtype = DType::kF32;
};
/// Keras's CategoricalCrossentropy: categorical_crossentropy per sample (one-hot labels).
/// label_smoothing outside [0, 1] is ingot::Error(kInvalidArgument) at construction.
class CategoricalCrossentropy final : public Loss {
 public:
  explicit CategoricalCrossentropy(const CategoricalCrossentropyOptions& options = {});
  const CategoricalCrossentropyOptions& options() const { return options_; }

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  CategoricalCrossentropyOptions options_;
};

/// Options of SparseCategoricalCrossentropy (Keras's keyword arguments; ignore_class is not
/// supported; Keras 3 has no label_smoothing here either, only on the one-hot losses).
struct SparseCategoricalCrossentropyOptions {
  /// y_pred holds logits instead of probabilities.
  bool from_logits = false;
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "sparse_categorical_crossentropy";
  DType dtype = DType::kF32;
};
/// Keras's SparseCategoricalCrossentropy: sparse_categorical_crossentropy per sample (integer
/// labels of shape (batch,) or (batch, 1), kept in their own dtype).
class SparseCategoricalCrossentropy final : public Loss {
 public:
  bool labels_are_indices() const override { return true; }
  explicit SparseCategoricalCrossentropy(const SparseCategoricalCrossentropyOptions& options = {});
  const SparseCategoricalCrossentropyOptions& options() const { return options_; }

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  SparseCategoricalCrossentropyOptions options_;
};

/// A per-sample loss function (y_true, y_pred) -> losses, as the loss functions above.
using LossFn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

/// Options of LossFunctionWrapper.
struct LossFunctionWrapperOptions {
  Reduction reduction = Reduction::kSumOverBatchSize;
  std::string name = "loss_function_wrapper";
  DType dtype = DType::kF32;
};
/// Keras's LossFunctionWrapper: a Loss from a per-sample function. Like Keras, y_true and
/// y_pred (converted to dtype()) first go through squeeze_or_expand_to_same_rank. An empty `fn`
/// is ingot::Error(kInvalidArgument).
class LossFunctionWrapper final : public Loss {
 public:
  explicit LossFunctionWrapper(LossFn fn, const LossFunctionWrapperOptions& options = {});

 protected:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;

 private:
  LossFn fn_;
};

/// The loss `identifier` names, with default options, as Keras's keras.losses.get: the
/// snake_case function names ("mean_squared_error", "mean_absolute_error", "huber",
/// "kl_divergence", "binary_crossentropy", "categorical_crossentropy",
/// "sparse_categorical_crossentropy"), the class names ("MeanSquaredError", "Huber",
/// "KLDivergence", ...) and Keras's aliases "mse", "MSE", "mae", "MAE", "kld", "KLD", "bce",
/// "BCE". The loss's name() is its default (e.g. "mean_squared_error" for "mse", "huber_loss"
/// for "huber").
/// Throws ingot::Error(kInvalidArgument) naming the identifier and listing known_names().
std::unique_ptr<Loss> get(std::string_view identifier);
/// Every identifier get() accepts, in a fixed order.
std::vector<std::string> known_names();

}  // namespace ingot::losses
