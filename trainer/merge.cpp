// Keras's merge layers (include/ingot/trainer/merge.h).
#include "ingot/trainer/merge.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ingot/runtime/error.h"
#include "ingot/trace/ops.h"

namespace ingot {

namespace {

std::string shapes_string(const std::vector<Shape>& shapes) {
  std::vector<std::string> parts;
  for (const Shape& s : shapes) parts.push_back(shape_to_string(s));
  return fmt::format("{}", fmt::join(parts, ", "));
}

/// NumPy broadcasting of every shape (aligned at the last dim); kShapeMismatch naming the shapes.
void check_broadcast(const std::string& layer, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  for (size_t d = 1; d <= rank; ++d) {
    int64_t size = 1;
    for (const Shape& s : shapes) {
      if (d > s.size()) continue;
      const int64_t v = s[s.size() - d];
      if (v == 1) continue;
      if (size != 1 && v != size) {
        throw Error(ErrorCode::kShapeMismatch,
                    fmt::format("{}: input shapes {} do not broadcast together", layer, shapes_string(shapes)),
                    "merge inputs of equal shapes, or shapes where every other size is 1");
      }
      size = v;
    }
  }
}

}  // namespace

Tensor Merge::call(LayerContext&, const Tensor& x) {
  throw Error(
      ErrorCode::kInvalidArgument,
      fmt::format("{} '{}' takes a list of inputs, got one tensor {}", class_name(), name(),
                  shape_to_string(x.shape())),
      fmt::format("call it on several: {}()({{a, b}}) in the functional API, or layer(ctx, {{a, b}})", class_name()));
}

void Merge::build_many(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() < min_inputs() || input_shapes.size() > max_inputs()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}' got {} inputs; it takes {}", class_name(), name(), input_shapes.size(),
                            min_inputs() == max_inputs() ? std::to_string(min_inputs())
                                                         : fmt::format("at least {}", min_inputs())));
  }
  check_broadcast(class_name(), input_shapes);
}

Tensor Merge::call_many(LayerContext&, const std::vector<Tensor>& xs) {
  std::vector<Shape> shapes;
  for (const Tensor& x : xs) shapes.push_back(x.shape());
  build_many(shapes);  // the checks hold for every call, not only the first
  for (const Tensor& x : xs) {
    if (x.dtype() != xs[0].dtype()) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("{} '{}': inputs of dtypes {} and {}", class_name(), name(), dtype_name(xs[0].dtype()),
                              dtype_name(x.dtype())),
                  "convert the inputs to one dtype first");
    }
  }
  return merge(xs);
}

Tensor Add::merge(const std::vector<Tensor>& xs) const {
  Tensor y = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) y = y + xs[i];
  return y;
}

Tensor Subtract::merge(const std::vector<Tensor>& xs) const { return xs[0] - xs[1]; }

Tensor Multiply::merge(const std::vector<Tensor>& xs) const {
  Tensor y = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) y = y * xs[i];
  return y;
}

Tensor Average::merge(const std::vector<Tensor>& xs) const {
  Tensor y = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) y = y + xs[i];
  return y * (1.0 / static_cast<double>(xs.size()));
}

Tensor Maximum::merge(const std::vector<Tensor>& xs) const {
  Tensor y = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) y = maximum(y, xs[i]);
  return y;
}

Tensor Minimum::merge(const std::vector<Tensor>& xs) const {
  Tensor y = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) y = minimum(y, xs[i]);
  return y;
}

void Concatenate::build_many(const std::vector<Shape>& shapes) {
  if (shapes.empty()) throw Error(ErrorCode::kInvalidArgument, fmt::format("Concatenate '{}' got no inputs", name()));
  const auto rank = static_cast<int64_t>(shapes[0].size());
  const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
  if (axis < 0 || axis >= rank) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Concatenate '{}': axis {} is outside inputs of rank {}", name(), axis_, rank));
  }
  for (const Shape& s : shapes) {
    bool same = static_cast<int64_t>(s.size()) == rank;
    for (int64_t d = 0; same && d < rank; ++d)
      same = d == axis || s[static_cast<size_t>(d)] == shapes[0][static_cast<size_t>(d)];
    if (!same) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("Concatenate '{}' on axis {}: input shapes {} differ off the axis", name(), axis_,
                              shapes_string(shapes)),
                  "inputs must have one rank and equal sizes except along the axis");
    }
  }
}

Tensor Concatenate::merge(const std::vector<Tensor>& xs) const {
  const int64_t axis = axis_ < 0 ? axis_ + xs[0].rank() : axis_;
  return xs.size() == 1 ? xs[0] : concatenate(xs, axis);
}

}  // namespace ingot
