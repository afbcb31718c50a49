// fit's argument checks and the arrays it trains and validates on (Keras's fit argument
// handling: validation_split before shuffling, class_weight to sample weights). Internal to
// ingot_trainer; used by Model::fit (trainer.cpp).
#pragma once

#include <optional>

#include "ingot/trainer/data.h"
#include "ingot/trainer/model.h"

namespace ingot::detail {

/// fit's options that need no model: batch_size > 0, epochs and initial_epoch >= 0, not both
/// sample_weight and class_weight, targets given, validation_batch_size > 0, validation_freq >= 1,
/// 1-based validation_epochs, finite non-negative class weights listed once. Throws
/// ingot::Error(kInvalidArgument) naming the option and its value.
void check_fit_options(const FitOptions& o);

/// Keras's class_weight as `who` ("fit", "train_on_batch") takes it: finite weights >= 0, each
/// class listed once. Throws ingot::Error(kInvalidArgument) naming `who`, the class and the weight.
void check_class_weight(const char* who, const std::vector<std::pair<int64_t, double>>& class_weight);

/// fit's training arrays and validation batch.
struct FitArrays {
  Arrays x, y, sample_weight;
  std::optional<Batch> validation;
};

/// The training arrays of `o` and its validation data: validation_data, or the last
/// validation_split fraction of the arrays (taken before shuffling, as Keras); class_weight
/// becomes per-sample weights. Errors (kInvalidArgument, "fit: ..."): x and y of different
/// sample counts, validation_split with a data adapter, class_weight with several outputs.
FitArrays fit_arrays(const FitOptions& o);

}  // namespace ingot::detail
