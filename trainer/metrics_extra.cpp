// More Keras 3 metrics with explicit state: SparseTopKCategoricalAccuracy (keras/src/metrics/
// accuracy_metrics.py, the JAX back end's in_top_k). The confusion-matrix metrics are in
// metrics_confusion.cpp.
#include <fmt/format.h>

#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/losses.h"
#include "ingot/trainer/metrics.h"
#include "losses_metrics_util.h"

namespace ingot::metrics {

using losses_metrics_detail::require_valid;

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

SparseTopKCategoricalAccuracy::SparseTopKCategoricalAccuracy(const SparseTopKCategoricalAccuracyOptions& options)
    : MeanMetricWrapper(options.name, [k = options.k](const Tensor& t, const Tensor& p) {
        return sparse_top_k_categorical_accuracy(t, p, k);
      }) {
  if (options.k < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("SparseTopKCategoricalAccuracy '{}': k = {} is below 1", options.name, options.k),
                "k is how many of the highest scores count as a hit; Keras's default is 5");
  }
}

}  // namespace ingot::metrics
