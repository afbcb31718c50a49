// Variable (include/ingot/trainer/variable.h).
#include "ingot/trainer/variable.h"

#include <fmt/format.h>

namespace ingot {

Variable::Variable(std::string name, Array value, bool trainable) : name_(std::move(name)), trainable_(trainable) {
  if (name_.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "Variable: the name is empty", "give every variable a name");
  }
  if (!value.valid()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Variable '{}': the initial value is an invalid Array", name_));
  }
  shape_ = value.shape();
  dtype_ = value.dtype();
  aggregation_ = is_floating(dtype_) ? VariableAggregation::kMean : VariableAggregation::kOnlyFirstReplica;
  value_ = value;
}

const char* aggregation_name(VariableAggregation aggregation) {
  switch (aggregation) {
    case VariableAggregation::kMean:
      return "mean";
    case VariableAggregation::kSum:
      return "sum";
    case VariableAggregation::kOnlyFirstReplica:
      return "only_first_replica";
  }
  return "?";
}

const Array& Variable::value() const {
  if (!value_.valid()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("Variable '{}' is purged: a running fit/evaluate/predict holds its live value (or a "
                            "failed fit step lost it)",
                            name_),
                "in a callback use model.get_weights()/set_weights() (or weights_access()), which see the live state; "
                "variables hold their values again when the loop ends; after a fit that lost the weights, "
                "load_weights");
  }
  return value_;
}

void Variable::check(const Array& value, const char* what) const {
  if (!value.valid()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("Variable '{}': {} an invalid Array", name_, what));
  }
  if (value.dtype() != dtype_) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("Variable '{}' has dtype {}; {} dtype {}", name_, dtype_name(dtype_), what,
                            dtype_name(value.dtype())),
                "convert the value to the variable's dtype first");
  }
  if (value.shape() != shape_) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Variable '{}' has shape {}; {} shape {}", name_, shape_to_string(shape_), what,
                            shape_to_string(value.shape())),
                "assign a value of the variable's shape");
  }
}

void Variable::assign(const Array& value) {
  check(value, "assigned a value of");
  value_ = to_host(value).clone();
}

void Variable::purge() { value_ = Array(); }

void Variable::sync(Array value) {
  check(value, "synced a value of");
  value_ = std::move(value);
}

}  // namespace ingot
