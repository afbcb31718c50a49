// Weight regularizers (include/ingot/trainer/regularizers.h).
#include "ingot/trainer/regularizers.h"

#include <fmt/format.h>

#include <cmath>

namespace ingot::regularizers {

namespace {

void require_factor(double value, const char* who, const char* name) {
  if (!(value >= 0.0 && std::isfinite(value))) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("regularizer {}: {} must be a finite float >= 0, got {}", who, name, value),
                "e.g. regularizers::l2(1e-4)");
  }
}

}  // namespace

Regularizer l1(double l1) {
  require_factor(l1, "l1", "l1");
  return [l1](const Tensor& w) { return sum(abs(w)) * l1; };
}

Regularizer l2(double l2) {
  require_factor(l2, "l2", "l2");
  return [l2](const Tensor& w) { return sum(square(w)) * l2; };
}

Regularizer l1_l2(double l1, double l2) {
  require_factor(l1, "l1_l2", "l1");
  require_factor(l2, "l1_l2", "l2");
  return [l1, l2](const Tensor& w) { return sum(abs(w)) * l1 + sum(square(w)) * l2; };
}

Regularizer get(const std::string& name) {
  if (name == "l1") return l1();
  if (name == "l2") return l2();
  if (name == "l1_l2") return l1_l2();
  throw Error(ErrorCode::kNotFound, fmt::format("unknown regularizer '{}'", name),
              "known: l1, l2, l1_l2 (or pass a Regularizer)");
}

}  // namespace ingot::regularizers
