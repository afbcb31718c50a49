// The state and batch of one trainer step as named parts, and the layout of a step's flat
// argument and result lists (TRAINER_SEMANTICS.md; Keras's JAX trainer passes the same parts as
// the tuple `state = (trainable_variables, non_trainable_variables, optimizer_variables,
// metrics_variables)` plus `data = (x, y, sample_weight)`).
//
// A traced step takes one flat list of tensors. StepLayout says which parts that list holds, in
// which order and how long each is, so step builders, SPMD placement and buffer donation name
// parts (StepPart::kOptimizer) instead of counting offsets:
//   train   arguments T NT O M x y sw   results T NT O M (then the logged values)
//   test    arguments T NT   M x y sw   results       M (then the logged values)
//   predict arguments T NT     x        results y_pred
//   loss    arguments T NT     x y sw O (O: the optimizer's variables, read by scale_loss only)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace ingot {

/// A named part of a step's state or batch.
enum class StepPart : uint8_t {
  kTrainable,     ///< trainable variables (Model::trainable_variables order)
  kNonTrainable,  ///< non-trainable variables
  kOptimizer,     ///< optimizer variables (Optimizer::build layout)
  kMetrics,       ///< metric variables: the loss trackers', then each metric's
  kX,             ///< the batch's inputs, one per model input
  kY,             ///< its targets, one per model output
  kSampleWeight,  ///< one (batch,) f32 per output (ones when none was given)
};

/// Number of StepPart values.
inline constexpr size_t kNumStepParts = 7;

/// The part's name as logged in errors: "trainable", "non_trainable", "optimizer", "metrics",
/// "x", "y", "sample_weight".
const char* step_part_name(StepPart part);

/// Whether `part` is state (variables a step may return updated, and donate) rather than batch.
constexpr bool is_state_part(StepPart part) { return part <= StepPart::kMetrics; }

/// The parts of one step as lists of `T` (ingot::Tensor inside a traced step, ingot::Array
/// outside). Model::train_step's TrainStepState is StepState<Tensor>.
template <class T>
struct StepState {
  std::vector<T> trainable;      ///< trainable variables (Model::trainable_variables order)
  std::vector<T> non_trainable;  ///< non-trainable variables
  std::vector<T> optimizer;      ///< optimizer variables (Optimizer::build layout)
  std::vector<T> metrics;        ///< metric variables: the loss trackers', then each metric's
  std::vector<T> x;              ///< the batch's inputs, one per model input
  std::vector<T> y;              ///< its targets, one per model output
  std::vector<T> sample_weight;  ///< one (batch,) f32 per output; ones when none was given

  /// The list of `part`.
  std::vector<T>& part(StepPart p) {
    switch (p) {
      case StepPart::kTrainable:
        return trainable;
      case StepPart::kNonTrainable:
        return non_trainable;
      case StepPart::kOptimizer:
        return optimizer;
      case StepPart::kMetrics:
        return metrics;
      case StepPart::kX:
        return x;
      case StepPart::kY:
        return y;
      case StepPart::kSampleWeight:
        break;
    }
    return sample_weight;
  }
  const std::vector<T>& part(StepPart p) const { return const_cast<StepState*>(this)->part(p); }
};

/// How many entries each part has (the model's variable counts, the optimizer's and metrics'
/// state sizes, its inputs and outputs), indexed by StepPart.
struct StepSizes {
  std::array<size_t, kNumStepParts> counts{};
  size_t& operator[](StepPart p) { return counts[static_cast<size_t>(p)]; }
  size_t operator[](StepPart p) const { return counts[static_cast<size_t>(p)]; }
};

/// The parts a step's flat argument (or result) list holds, in order, with their sizes.
class StepLayout {
 public:
  /// `parts` in list order (each at most once), each `sizes[part]` entries long.
  StepLayout(std::initializer_list<StepPart> parts, const StepSizes& sizes);

  /// The train step's arguments: T NT O M x y sw.
  static StepLayout train_arguments(const StepSizes& sizes);
  /// The train step's state results: T NT O M (the logged values follow them).
  static StepLayout train_results(const StepSizes& sizes);
  /// The test step's arguments: T NT M x y sw.
  static StepLayout test_arguments(const StepSizes& sizes);
  /// The test step's state results: M (the logged values follow).
  static StepLayout test_results(const StepSizes& sizes);
  /// The predict step's arguments: T NT x.
  static StepLayout predict_arguments(const StepSizes& sizes);
  /// The loss function's arguments: T NT x y sw O (the trainable variables first: the ones
  /// differentiated; O may have size 0 when the loss is not scaled).
  static StepLayout loss_arguments(const StepSizes& sizes);

  const std::vector<StepPart>& parts() const { return parts_; }
  /// Entries in the whole list.
  size_t size() const { return size_; }
  bool has(StepPart p) const;
  /// Entries of `p` (0 when the layout does not hold it).
  size_t count(StepPart p) const { return has(p) ? sizes_[p] : 0; }
  /// Index of `p`'s first entry. Throws ingot::Error(kInternal) when the layout does not hold it.
  size_t offset(StepPart p) const;
  /// Entries of the state parts (they come first in every layout above).
  size_t state_size() const;
  /// The flat indices of `p`'s entries.
  std::vector<int64_t> indices(StepPart p) const;

  /// The indices of this (argument) layout's entries of the parts `results` also holds: the
  /// arguments a compiled step may donate, since it returns new values for them (Keras's JAX
  /// trainer donates the state it returns).
  std::vector<int64_t> donatable(const StepLayout& results) const;

  /// The parts of `state` in layout order. Throws ingot::Error(kInvalidArgument) naming the part
  /// when one's list does not have its size.
  template <class T>
  std::vector<T> flatten(const StepState<T>& state) const {
    std::vector<T> out;
    out.reserve(size_);
    for (StepPart p : parts_) {
      const std::vector<T>& v = state.part(p);
      check_count(p, v.size());
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  /// The parts of the first size() entries of `flat` (later entries, e.g. a step's logged
  /// values, are ignored); parts the layout does not hold stay empty. Throws
  /// ingot::Error(kInvalidArgument) when `flat` is shorter than size().
  template <class T>
  StepState<T> unflatten(const std::vector<T>& flat) const {
    check_length(flat.size());
    StepState<T> state;
    size_t at = 0;
    for (StepPart p : parts_) {
      const size_t n = sizes_[p];
      state.part(p).assign(flat.begin() + static_cast<std::ptrdiff_t>(at),
                           flat.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
    return state;
  }

 private:
  void check_count(StepPart p, size_t got) const;
  void check_length(size_t got) const;

  std::vector<StepPart> parts_;
  StepSizes sizes_;
  size_t size_ = 0;
};

}  // namespace ingot
