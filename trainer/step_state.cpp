// StepLayout: the flat argument and result lists of the trainer's steps (ingot/trainer/step_state.h).
#include "ingot/trainer/step_state.h"

#include <fmt/format.h>

#include <algorithm>

#include "ingot/runtime/error.h"

namespace ingot {

const char* step_part_name(StepPart part) {
  switch (part) {
    case StepPart::kTrainable:
      return "trainable";
    case StepPart::kNonTrainable:
      return "non_trainable";
    case StepPart::kOptimizer:
      return "optimizer";
    case StepPart::kMetrics:
      return "metrics";
    case StepPart::kX:
      return "x";
    case StepPart::kY:
      return "y";
    case StepPart::kSampleWeight:
      break;
  }
  return "sample_weight";
}

StepLayout::StepLayout(std::initializer_list<StepPart> parts, const StepSizes& sizes) : parts_(parts), sizes_(sizes) {
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (std::find(parts_.begin(), parts_.begin() + static_cast<std::ptrdiff_t>(i), parts_[i]) !=
        parts_.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw Error(ErrorCode::kInternal, fmt::format("StepLayout: part '{}' listed twice", step_part_name(parts_[i])));
    }
    size_ += sizes_[parts_[i]];
  }
}

StepLayout StepLayout::train_arguments(const StepSizes& s) {
  using P = StepPart;
  return {{P::kTrainable, P::kNonTrainable, P::kOptimizer, P::kMetrics, P::kX, P::kY, P::kSampleWeight}, s};
}
StepLayout StepLayout::train_results(const StepSizes& s) {
  using P = StepPart;
  return {{P::kTrainable, P::kNonTrainable, P::kOptimizer, P::kMetrics}, s};
}
StepLayout StepLayout::test_arguments(const StepSizes& s) {
  using P = StepPart;
  return {{P::kTrainable, P::kNonTrainable, P::kMetrics, P::kX, P::kY, P::kSampleWeight}, s};
}
StepLayout StepLayout::test_results(const StepSizes& s) { return {{StepPart::kMetrics}, s}; }
StepLayout StepLayout::predict_arguments(const StepSizes& s) {
  using P = StepPart;
  return {{P::kTrainable, P::kNonTrainable, P::kX}, s};
}
StepLayout StepLayout::loss_arguments(const StepSizes& s) {
  using P = StepPart;
  return {{P::kTrainable, P::kNonTrainable, P::kX, P::kY, P::kSampleWeight, P::kOptimizer}, s};
}

bool StepLayout::has(StepPart p) const { return std::find(parts_.begin(), parts_.end(), p) != parts_.end(); }

size_t StepLayout::offset(StepPart p) const {
  size_t at = 0;
  for (StepPart q : parts_) {
    if (q == p) return at;
    at += sizes_[q];
  }
  throw Error(ErrorCode::kInternal, fmt::format("StepLayout: the layout holds no '{}' part", step_part_name(p)));
}

size_t StepLayout::state_size() const {
  size_t n = 0;
  for (StepPart p : parts_) n += is_state_part(p) ? sizes_[p] : 0;
  return n;
}

std::vector<int64_t> StepLayout::indices(StepPart p) const {
  std::vector<int64_t> out;
  if (!has(p)) return out;
  const size_t at = offset(p);
  for (size_t i = 0; i < sizes_[p]; ++i) out.push_back(static_cast<int64_t>(at + i));
  return out;
}

std::vector<int64_t> StepLayout::donatable(const StepLayout& results) const {
  std::vector<int64_t> out;
  for (StepPart p : parts_) {
    if (!results.has(p)) continue;
    const std::vector<int64_t> idx = indices(p);
    out.insert(out.end(), idx.begin(), idx.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void StepLayout::check_count(StepPart p, size_t got) const {
  if (got != sizes_[p]) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("step state: part '{}' has {} entries, the step takes {}", step_part_name(p), got, sizes_[p]),
        "keep every state list's length (replace values, do not add or drop) and pass one x per model input "
        "and one y and sample weight per output");
  }
}

void StepLayout::check_length(size_t got) const {
  if (got < size_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("step state: a flat list of {} entries for a layout of {}", got, size_),
                "pass the step's whole argument or result list");
  }
}

}  // namespace ingot
