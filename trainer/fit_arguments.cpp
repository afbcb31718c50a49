// fit's argument checks and training/validation arrays (fit_arguments.h).
#include "fit_arguments.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "ingot/runtime/error.h"

namespace ingot::detail {

void check_fit_options(const FitOptions& o) {
  if (o.batch_size <= 0)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: batch_size must be > 0, got {}", o.batch_size));
  if (o.epochs < 0 || o.initial_epoch < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("fit: epochs {} / initial_epoch {} must be >= 0", o.epochs, o.initial_epoch));
  }
  if (o.sample_weight.valid() && !o.class_weight.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "fit: sample_weight and class_weight were both given",
                "pass one of them (class_weight becomes per-sample weights)");
  }
  if (!o.data && !o.y.valid()) throw Error(ErrorCode::kInvalidArgument, "fit: no targets y", "pass .y with the labels");
  if (o.validation_batch_size && *o.validation_batch_size <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("fit: validation_batch_size must be > 0, got {}", *o.validation_batch_size));
  }
  if (o.validation_freq < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("fit: validation_freq must be >= 1, got {}", o.validation_freq),
                "validate every n epochs (n >= 1), or list 1-based epochs in validation_epochs");
  }
  for (int64_t e : o.validation_epochs) {
    if (e < 1) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: validation_epochs holds {}; epochs are 1-based", e));
    }
  }
  check_class_weight("fit", o.class_weight);
}

void check_class_weight(const char* who, const std::vector<std::pair<int64_t, double>>& class_weight) {
  for (size_t i = 0; i < class_weight.size(); ++i) {
    const auto& [cls, w] = class_weight[i];
    if (!std::isfinite(w) || w < 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: class_weight of class {} is {}", who, cls, w),
                  "class weights must be finite and >= 0");
    }
    for (size_t j = 0; j < i; ++j) {
      if (class_weight[j].first == cls) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: class_weight lists class {} twice", who, cls));
      }
    }
  }
}

/// The training arrays of `o` and its validation data: validation_data, or the last
/// validation_split fraction of the arrays (taken before shuffling, as Keras); class_weight
/// becomes per-sample weights. Errors (kInvalidArgument, "fit: ..."): x and y of different
/// sample counts, validation_split with a data adapter, class_weight with several outputs.
FitArrays fit_arrays(const FitOptions& o) {
  std::optional<Batch> val = o.validation_data;
  Arrays x = o.x, y = o.y, sw = o.sample_weight;
  if (!o.data && x.valid() && y.valid() && x[0].valid() && x[0].rank() > 0) {
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i].valid() && (y[i].rank() == 0 || y[i].shape()[0] != x[0].shape()[0])) {
        throw Error(
            ErrorCode::kInvalidArgument,
            fmt::format("fit: x has {} samples but {} has shape {}", x[0].shape()[0],
                        y.size() == 1 ? std::string("y") : fmt::format("y[{}]", i), shape_to_string(y[i].shape())),
            "give x and y the same number of samples");
      }
    }
  }
  if (o.validation_split != 0) {
    if (o.data) throw Error(ErrorCode::kInvalidArgument, "fit: validation_split needs array data (x, y)");
    auto [train, v] = [&] {
      try {
        return split_validation(Batch{x, y, sw}, o.validation_split);
      } catch (const Error& e) {
        throw e.with_context("fit");
      }
    }();
    x = train.x;
    y = train.y;
    sw = train.sample_weight;
    if (!val) val = v;
  }
  if (!o.class_weight.empty() && !o.data) {  // with an adapter: per batch (Model::fit, class_weighted)
    if (y.size() > 1) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: class_weight with {} outputs' targets", y.size()),
                  "class_weight is for single-output models (as Keras); pass sample_weight per output instead");
    }
    sw = class_weights_to_sample_weights(y[0], o.class_weight);
  }
  return {x, y, sw, val};
}

}  // namespace ingot::detail
