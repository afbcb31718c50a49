// Keras's merge layers (keras.layers.Add, Subtract, Multiply, Average, Maximum, Minimum,
// Concatenate): layers of several inputs, for residual connections and branches in the functional
// API (`Add()({a, b})`) and in subclassed models (`add(ctx, {a, b})`). docs/trainer.md.
#pragma once

#include <string>
#include <vector>

#include "ingot/trainer/layers.h"

namespace ingot {

/// Base of the elementwise merge layers: inputs (batch, ...) of equal shapes or shapes that
/// broadcast together (Keras's elementwise merge shape rule) and one floating-point dtype; the
/// output has the broadcast shape. call(ctx, x) with a tensor instead of a list is
/// ingot::Error(kInvalidArgument), as is a list of fewer inputs than the layer takes (2 for
/// Subtract, exactly; 1 or more for the others, Keras 3's minimum; a list of one returns it).
/// Shapes that do not broadcast: kShapeMismatch; dtypes that differ: kDTypeMismatch.
class Merge : public Layer {
 public:
  explicit Merge(std::string name = "") : Layer(std::move(name)) {}
  Tensor call(LayerContext& ctx, const Tensor& x) override;
  Tensor call_many(LayerContext& ctx, const std::vector<Tensor>& xs) override;
  void build_many(const std::vector<Shape>& input_shapes) override;

 protected:
  /// The merge of checked inputs.
  virtual Tensor merge(const std::vector<Tensor>& xs) const = 0;
  /// Fewest inputs accepted.
  virtual size_t min_inputs() const { return 1; }
  virtual size_t max_inputs() const { return SIZE_MAX; }
};

/// keras.layers.Add: x1 + x2 + ...
class Add final : public Merge {
 public:
  explicit Add(std::string name = "") : Merge(std::move(name)) {}
  std::string class_name() const override { return "Add"; }

 protected:
  Tensor merge(const std::vector<Tensor>& xs) const override;
};

/// keras.layers.Subtract: x1 - x2 (exactly two inputs).
class Subtract final : public Merge {
 public:
  explicit Subtract(std::string name = "") : Merge(std::move(name)) {}
  std::string class_name() const override { return "Subtract"; }

 protected:
  Tensor merge(const std::vector<Tensor>& xs) const override;
  size_t min_inputs() const override { return 2; }
  size_t max_inputs() const override { return 2; }
};

/// keras.layers.Multiply: x1 * x2 * ...
class Multiply final : public Merge {
 public:
  explicit Multiply(std::string name = "") : Merge(std::move(name)) {}
  std::string class_name() const override { return "Multiply"; }

 protected:
  Tensor merge(const std::vector<Tensor>& xs) const override;
};

/// keras.layers.Average: (x1 + x2 + ... + xn) / n
class Average final : public Merge {
 public:
  explicit Average(std::string name = "") : Merge(std::move(name)) {}
  std::string class_name() const override { return "Average"; }

 protected:
  Tensor merge(const std::vector<Tensor>& xs) const override;
};

/// keras.layers.Maximum: elementwise max of the inputs (the gradient goes to the first maximal
/// input at ties, the `maximum` op's rule: docs/autodiff.md).
class Maximum final : public Merge {
 public:
  explicit Maximum(std::string name = "") : Merge(std::move(name)) {}
  std::string class_name() const override { return "Maximum"; }

 protected:
  Tensor merge(const std::vector<Tensor>& xs) const override;
};

/// keras.layers.Minimum: elementwise min of the inputs.
class Minimum final : public Merge {
 public:
  explicit Minimum(std::string name = "") : Merge(std::move(name)) {}
  std::string class_name() const override { return "Minimum"; }

 protected:
  Tensor merge(const std::vector<Tensor>& xs) const override;
};

/// keras.layers.Concatenate(axis = -1): joins inputs (batch, ...) of one rank and dtype whose
/// sizes agree except along `axis` (negative counts from the end; the batch axis 0 is allowed as
/// in Keras). Errors (ingot::Error): kInvalidArgument for fewer than 1 input or one input called
/// as call(ctx, x); kShapeMismatch for ranks that differ, an axis outside the rank, or sizes that
/// differ off the axis (naming both shapes).
class Concatenate final : public Merge {
 public:
  explicit Concatenate(int64_t axis = -1, std::string name = "") : Merge(std::move(name)), axis_(axis) {}
  std::string class_name() const override { return "Concatenate"; }
  void build_many(const std::vector<Shape>& input_shapes) override;

 protected:
  Tensor merge(const std::vector<Tensor>& xs) const override;

 private:
  int64_t axis_;
};

}  // namespace ingot
