// Models (keras.Model, keras.Sequential): a layer made of tracked sublayers, built by inferring
// shapes from an input shape (no data consumed), with a pure forward function for the trainer
// and compiled prediction. compile/fit/evaluate arrive with the trainer (docs/trainer.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/jit/jit.h"
#include "ingot/trainer/layers.h"

namespace ingot {

/// Options of a model.
struct ModelOptions {
  std::string name;        ///< default "sequential" / "model"
  uint64_t seed = 1337;    ///< unseeded layers get seed + their index (reproducible weights)
};

/// keras.Model: subclass it and override call() (and build() for own variables), tracking
/// sublayers with track(); or use Sequential.
class Model : public Layer {
 public:
  explicit Model(ModelOptions options = {});
  std::string class_name() const override { return "Model"; }

  /// Builds every layer for inputs of `input_shape` (batch dim included) and `dtype` by tracing
  /// the forward pass once on a throwaway graph: shape inference, no data consumed (the
  /// contract's build pass). A second call with another shape is an error (kShapeMismatch)
  /// naming both shapes, unless only the batch size differs.
  void build_model(const Shape& input_shape, DType dtype = DType::kF32);
  /// The input type the model was built for (batch size of the build call).
  const std::optional<ir::TensorType>& input_type() const { return input_type_; }

  /// The pure forward pass for tracing: arguments (every variable in variables() order, then x),
  /// results {y}. `training` is passed to the layers.
  TraceFn forward_fn(bool training);
  /// Runs the compiled forward pass (training = false) on one batch x (batch, ...) and returns the
  /// output as a host array; builds the model first when needed. Compiles once per input shape.
  /// Errors: x's per-sample shape or dtype differs from the built model's (kShapeMismatch /
  /// kDTypeMismatch naming both).
  Array predict_on_batch(const Array& x);

  /// The values of every variable (variables() order), as host arrays.
  std::vector<Array> get_weights();
  /// Assigns every variable; checks all shapes and dtypes first (nothing changes on error:
  /// kInvalidArgument for a wrong count, kShapeMismatch naming the variable and both shapes).
  void set_weights(const std::vector<Array>& weights);

  /// Keras-style table: layer name (type), output shape, parameter count; totals.
  std::string summary();

 protected:
  /// Output shape of each sublayer recorded while building (for summary()).
  void record_output(const Layer& layer, const Shape& shape) { output_shapes_.emplace_back(&layer, shape); }
  /// Gives unnamed sublayers Keras-style unique names and unseeded ones seeds.
  void name_and_seed(Layer& layer);

 private:
  void check_input(const Array& x) const;

  ModelOptions options_;
  std::optional<ir::TensorType> input_type_;
  std::vector<std::pair<const Layer*, Shape>> output_shapes_;
  std::optional<Jitted> predict_;
  int64_t layer_count_ = 0;
};

/// keras.Sequential: layers applied in order.
class Sequential final : public Model {
 public:
  explicit Sequential(ModelOptions options = {});
  /// Sequential with these layers (std::make_shared<Dense>(DenseOptions{...}), ...).
  Sequential(std::vector<std::shared_ptr<Layer>> layers, ModelOptions options = {});
  std::string class_name() const override { return "Sequential"; }
  /// Appends a layer (named "dense", "dense_1", ... when unnamed). Adding after the model was
  /// built is an error (kFailedPrecondition).
  void add(std::shared_ptr<Layer> layer);
  const std::vector<std::shared_ptr<Layer>>& layers() const { return layers_; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
};

}  // namespace ingot
