// Layers (keras.layers): Layer base with build/call, the LayerContext that binds variables to
// traced tensors, and the core layers Dense, Conv2D, MaxPooling2D, Flatten, Reshape, Activation,
// Dropout, Rescaling. The other built-in layers live in layers_pooling.h, layers_normalization.h
// and layers_embedding.h, included at the end of this header.
//
// A layer's forward pass is a function of ingot::Tensor (traced into the graph IR, then
// interpreted or compiled); its variables are read through the LayerContext, which maps each
// Variable to the Tensor the step function received for it (Keras 3's stateless call).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/trace/ops.h"
#include "ingot/trace/tensor.h"
#include "ingot/trainer/initializers.h"
#include "ingot/trainer/regularizers.h"
#include "ingot/trainer/variable.h"

namespace ingot {

/// How a distributed step's batch is split (data parallelism, FSDP, model parallelism with a batch
/// axis): every device's call sees one of `count` equal shards of the global batch, in mesh order
/// along mesh axis `axis`.
struct BatchShards {
  std::string axis;   ///< the mesh axis the batch (dim 0) is split over
  int64_t count = 1;  ///< devices along it (shards of the global batch)
};

/// What a layer's call sees besides its input: the traced value of every variable, the training
/// flag, how the batch is split over devices, and where to report losses (regularizers) and new
/// values of non-trainable variables.
class LayerContext {
 public:
  /// `training`: forward pass of train_step (true) or test/predict (false). `build_mode`:
  /// variables that are not bound read as constants of their current value (used while
  /// inferring shapes; such a graph is never run for training).
  explicit LayerContext(bool training, bool build_mode = false) : training_(training), build_mode_(build_mode) {}
  /// Binds `variable` to `value` (its tensor in the step being traced).
  void bind(const Variable& variable, Tensor value);
  /// The traced value of `variable`. Throws ingot::Error(kNotFound) naming the variable when it
  /// is not bound (a variable created outside the model's layers).
  Tensor value(const Variable& variable) const;
  bool training() const { return training_; }
  /// True while a model infers shapes (Model::build_model).
  bool build_mode() const { return build_mode_; }
  /// Adds a loss term (e.g. a regularizer) to the step's loss.
  void add_loss(Tensor loss) { losses_.push_back(std::move(loss)); }
  const std::vector<Tensor>& losses() const { return losses_; }
  /// A new value for a non-trainable variable (e.g. a moving average), returned as state; a value
  /// of another floating-point dtype (computed under a mixed policy) is converted to the
  /// variable's dtype.
  void set_value(const Variable& variable, Tensor value);
  /// The dtype policy's compute dtype (Keras's `layer.compute_dtype`): when set, value() returns
  /// floating-point variables converted to it (variables stay f32; the gradient flows back
  /// through the conversion), and layers create floating-point values in it. Unset (nullopt):
  /// float32 models and layers called outside a model.
  void set_compute_dtype(std::optional<DType> dtype) { compute_dtype_ = dtype; }
  std::optional<DType> compute_dtype() const { return compute_dtype_; }
  std::optional<Tensor> new_value(const Variable& variable) const;

  /// Sets how the batch is split (the trainer, under a distribution); nullopt: the call sees the
  /// whole batch (one device). Layers whose result is not computed example by example use it so
  /// that a distributed step gives the one-device result, as JAX's global-view jit does.
  void set_batch_shards(std::optional<BatchShards> shards) { shards_ = std::move(shards); }
  const std::optional<BatchShards>& batch_shards() const { return shards_; }
  /// The mean of `x` over `axes` (which must include the batch dim 0; sorted, distinct) over the
  /// global batch: the local mean, then its mean over the batch shards (all_reduce "mean"; the
  /// shards are equal, so the mean of their means is the global one). Differentiable.
  Tensor batch_mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) const;
  /// The global index of this call's first example (i64 scalar): 0 on one device, else this
  /// device's position along the batch axis (axis_index) times `local_batch`.
  Tensor batch_offset(int64_t local_batch) const;
  /// The global batch size of a call that sees `local_batch` examples.
  int64_t global_batch(int64_t local_batch) const { return shards_ ? local_batch * shards_->count : local_batch; }

  /// Switches `ctx`'s compute dtype to `dtype` for the scope's lifetime and restores the previous
  /// one when it ends, also when the scope is left by an exception (a layer with its own dtype
  /// policy; normalization layers computing in f32 under a mixed policy).
  class ComputeDTypeScope {
   public:
    ComputeDTypeScope(LayerContext& ctx, std::optional<DType> dtype) : ctx_(ctx), saved_(ctx.compute_dtype()) {
      ctx.set_compute_dtype(dtype);
    }
    ~ComputeDTypeScope() { ctx_.set_compute_dtype(saved_); }
    ComputeDTypeScope(const ComputeDTypeScope&) = delete;
    ComputeDTypeScope& operator=(const ComputeDTypeScope&) = delete;

   private:
    LayerContext& ctx_;
    std::optional<DType> saved_;
  };

 private:
  bool training_;
  bool build_mode_;
  std::optional<DType> compute_dtype_;
  std::optional<BatchShards> shards_;
  std::map<const Variable*, Tensor> values_;
  std::map<const Variable*, Tensor> updates_;
  std::vector<Tensor> losses_;
};

class Layer;

/// A symbolic tensor of the functional API (Keras's KerasTensor): what Input() returns and
/// calling a layer on a KerasTensor returns. Holds the per-sample shape (batch dim excluded),
/// the dtype and how it was made (the layer and its inputs), so a Functional model can replay it.
class KerasTensor {
 public:
  struct Node {
    std::shared_ptr<Layer> layer;                     ///< null for an Input
    std::vector<std::shared_ptr<const Node>> inputs;  ///< the layer's inputs (none for an Input)
    Shape shape;                                      ///< per sample
    DType dtype = DType::kF32;
    std::string name;
  };
  KerasTensor() = default;
  explicit KerasTensor(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  /// Per-sample shape (Keras prints (None, ...)).
  const Shape& shape() const { return node_->shape; }
  DType dtype() const { return node_->dtype; }
  const std::shared_ptr<const Node>& node() const { return node_; }
  bool valid() const { return node_ != nullptr; }

 private:
  std::shared_ptr<const Node> node_;
};

/// The compute dtype of a Keras dtype policy name: "float32" -> f32, "mixed_float16" -> f16,
/// "mixed_bfloat16" -> bf16 (variables stay f32 under each). Another name: ingot::Error
/// (kInvalidArgument) naming `owner` (e.g. "layer 'dense'") and the value, listing the names.
DType dtype_policy_compute_dtype(const std::string& policy, const std::string& owner);

/// Keras's automatic layer name stem: "MaxPooling2D" -> "max_pooling2d", "Dense" -> "dense".
std::string auto_name_base(const std::string& class_name);

/// keras.Input: a symbolic input of per-sample `shape` (e.g. {28, 28, 1}) and `dtype`.
/// Negative sizes: ingot::Error(kInvalidArgument).
KerasTensor Input(const Shape& shape, DType dtype = DType::kF32, std::string name = "input");

/// Base of every layer (keras.layers.Layer): variables created in build(input_shape), the forward
/// pass in call(ctx, x). Input shapes include the batch dim.
class Layer : public std::enable_shared_from_this<Layer> {
 public:
  explicit Layer(std::string name = "");
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  /// Sets the name (models name unnamed layers "dense", "dense_1", ... as Keras).
  void set_name(std::string name) { name_ = std::move(name); }
  /// Keras class name, e.g. "Dense" (summary() prints it).
  virtual std::string class_name() const = 0;

  /// Creates the variables for inputs of `input_shape`. Default: none.
  virtual void build(const Shape& input_shape) { (void)input_shape; }
  /// The forward pass: x (batch, ...) -> output. Called with traced tensors.
  virtual Tensor call(LayerContext& ctx, const Tensor& x) = 0;
  /// Builds on the first call (with x's shape), then calls call(). A floating x is first
  /// converted to the dtype the layer computes in (Keras's input autocasting): its own policy's
  /// (set_dtype_policy), else ctx's compute dtype (the model's policy), else f32 for f16 / bf16
  /// inputs (float32 models; f64 passes unchanged).
  Tensor operator()(LayerContext& ctx, const Tensor& x);

  /// Layers of several inputs (merge layers: Add, Concatenate, ...) override these two: the
  /// variables for the inputs' shapes, and the forward pass of the inputs. The defaults take
  /// exactly one input (build(shapes[0]) / call(ctx, xs[0])) and throw ingot::Error
  /// (kInvalidArgument) for any other count.
  virtual void build_many(const std::vector<Shape>& input_shapes);
  virtual Tensor call_many(LayerContext& ctx, const std::vector<Tensor>& xs);
  /// build_many on the first call, then call_many (for one input: build, then call); each
  /// floating input converted as by operator()(ctx, x).
  Tensor operator()(LayerContext& ctx, const std::vector<Tensor>& xs);
  /// The functional API: a symbolic call. Builds the layer for x's shape (batch size 1) and
  /// infers the output's shape by tracing call() once. An unnamed layer gets a Keras name unique
  /// along the chain ("dense", "dense_1", ...), an unseeded one the seed 1337 + its position. The
  /// layer must be owned by a std::shared_ptr (std::make_shared<Dense>(...)); otherwise
  /// ingot::Error(kFailedPrecondition).
  KerasTensor operator()(const KerasTensor& x);
  /// The functional API with several inputs (a merge layer's list, Keras's `Add()([a, b])`).
  /// Names and seeds count every distinct layer among the inputs' ancestors.
  KerasTensor operator()(const std::vector<KerasTensor>& xs);
  bool built() const { return built_; }
  /// The layers this one tracks (track()), in tracking order (Keras's `layer._layers`).
  const std::vector<std::shared_ptr<Layer>>& sublayers() const { return sublayers_; }

  /// "layer 'dense_1' (Dense)" for error messages; "an unnamed Dense layer (called outside a
  /// model)" before a model named it.
  std::string describe() const;
  /// The name scope of this layer's calls (ingot::NameScope; the optimizer's update scopes use the
  /// same names): its name, else its class name, else "layer". Never empty.
  std::string scope_name() const;
  /// Every variable of this layer and its sublayers, in creation order, each once (a sublayer
  /// tracked twice, e.g. one layer used twice in a Sequential, shares its variables).
  std::vector<Variable*> variables();
  std::vector<Variable*> trainable_variables();
  std::vector<Variable*> non_trainable_variables();
  /// Total number of elements of the variables (summary's "Param #").
  int64_t count_params();

  /// The layer's own dtype policy (Keras's `dtype=` argument of every layer): "float32",
  /// "mixed_float16" or "mixed_bfloat16". With one, operator() converts the layer's floating
  /// inputs to the policy's compute dtype and runs call() with the LayerContext's compute dtype
  /// switched to it (restored afterwards, also when call throws), so its variables are read and
  /// its values made in that dtype; its output stays in that dtype (the next layer converts, as
  /// Keras's layers convert their inputs). E.g. the output Dense / Activation("softmax") in
  /// float32 in a mixed_bfloat16 model, as Keras's mixed-precision guide advises. Set it before
  /// the layer is built. Errors (the layer is left unchanged): an unknown name
  /// ingot::Error(kInvalidArgument) naming the layer and the value; a built layer
  /// ingot::Error(kFailedPrecondition).
  void set_dtype_policy(const std::string& policy);
  /// The layer's own policy name; empty when it follows the model's (ModelOptions::dtype_policy).
  const std::string& dtype_policy() const { return dtype_policy_; }

  /// The seed variables are initialised from (a model assigns one to unseeded layers).
  std::optional<uint64_t> seed() const { return seed_; }
  void set_seed(uint64_t seed) { seed_ = seed; }

 protected:
  /// Creates a variable "<layer name>/<name>" initialised by `initializer` with seed
  /// (layer seed, weight index). Call from build().
  Variable& add_weight(const std::string& name, const Shape& shape, const Initializer& initializer,
                       bool trainable = true, DType dtype = DType::kF32);
  /// The functional API's call on one tensor (as_list false: call(ctx, x)) or a list (call_many).
  KerasTensor symbolic_call(const std::vector<KerasTensor>& xs, bool as_list);
  /// Tracks `layer` as a sublayer (its variables are this layer's too); returns it.
  template <class L>
  std::shared_ptr<L> track(std::shared_ptr<L> layer) {
    sublayers_.push_back(layer);
    return layer;
  }
  void mark_built() { built_ = true; }

 private:
  /// x converted to the dtype this layer computes in (own policy, else ctx's compute dtype, else
  /// f32 for f16 / bf16 inputs); integer inputs and other dtypes unchanged.
  Tensor to_compute_dtype(const LayerContext& ctx, const Tensor& x) const;

  std::string name_;
  bool built_ = false;
  std::string dtype_policy_;                   ///< empty: the model's
  std::optional<DType> policy_compute_dtype_;  ///< set with dtype_policy_
  std::optional<uint64_t> seed_;
  std::vector<std::unique_ptr<Variable>> variables_;
  std::vector<std::shared_ptr<Layer>> sublayers_;
};

/// Activation functions by Keras name (keras.activations), elementwise on any shape and float
/// dtype unless noted: "linear" (identity; "" too), "relu", "sigmoid", "tanh", "softmax" (last
/// axis), "gelu" (exact: 0.5 x (1 + erf(x / sqrt 2)), Hendrycks & Gimpel 2016, Keras's default
/// approximate=false), "silu" / "swish" (x sigmoid(x), Elfwing et al. 2017), "softplus"
/// (log(1 + exp(x)), overflow-free), "log_softmax" (last axis: x - logsumexp(x)). Unknown:
/// ingot::Error(kNotFound) listing the names.
Tensor apply_activation(const std::string& name, const Tensor& x);
/// Throws what apply_activation throws for an unknown name; nothing otherwise.
void check_activation(const std::string& name);

/// keras.layers.Dense: y = activation(x @ kernel + bias); x (batch, ..., in) -> (batch, ..., units).
/// Variables: kernel (in, units), bias (units,). Regularizers add their penalties of the kernel and
/// bias through LayerContext::add_loss on every call (train and test steps, as Keras's losses).
struct DenseOptions {
  int64_t units = 0;  ///< > 0
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
  Regularizer kernel_regularizer;  ///< empty: none; else its penalty of the kernel joins the loss
  Regularizer bias_regularizer;    ///< empty: none; else its penalty of the bias joins the loss
  std::string name;
};
class Dense final : public Layer {
 public:
  explicit Dense(DenseOptions options);
  std::string class_name() const override { return "Dense"; }
  void build(const Shape& input_shape) override;
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  DenseOptions o_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

/// keras.layers.Conv2D (channels_last): x (batch, h, w, in) -> (batch, oh, ow, filters).
/// Variables: kernel (kh, kw, in, filters), bias (filters,). Regularizers as Dense.
struct Conv2DLayerOptions {
  int64_t filters = 0;  ///< > 0
  std::vector<int64_t> kernel_size = {3, 3};
  std::vector<int64_t> strides = {1, 1};
  std::string padding = "valid";  ///< "valid" or "same"
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
  Regularizer kernel_regularizer;  ///< empty: none; else its penalty of the kernel joins the loss
  Regularizer bias_regularizer;    ///< empty: none; else its penalty of the bias joins the loss
  std::string name;
};
class Conv2D final : public Layer {
 public:
  explicit Conv2D(Conv2DLayerOptions options);
  std::string class_name() const override { return "Conv2D"; }
  void build(const Shape& input_shape) override;
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  Conv2DLayerOptions o_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

/// keras.layers.MaxPooling2D (channels_last); strides default to the pool size.
struct MaxPooling2DOptions {
  std::vector<int64_t> pool_size = {2, 2};
  std::vector<int64_t> strides;  ///< empty: pool_size
  std::string padding = "valid";
  std::string name;
};
class MaxPooling2D final : public Layer {
 public:
  explicit MaxPooling2D(MaxPooling2DOptions options = {});
  std::string class_name() const override { return "MaxPooling2D"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  MaxPooling2DOptions o_;
};

/// keras.layers.Dropout: in training, each element is zeroed with probability `rate` and the
/// others scaled by 1 / (1 - rate) (Srivastava et al., 2014, inverted dropout as Keras); identity
/// when not training. The random state is a non-trainable u64[2] variable "seed_generator_state"
/// (initialised from `seed`, else the layer's seed) advanced every training step, so runs repeat.
/// Draws are counter-based per example (example b of the global batch reads Threefry blocks from
/// state[1] + b * ceil(features / 2), one block per value for f64), so a distributed step masks
/// each example as one device does (docs/distributed.md, "The compiled step", 6).
struct DropoutOptions {
  double rate = 0.5;  ///< in [0, 1)
  std::optional<uint64_t> seed;
  std::string name;
};
class Dropout final : public Layer {
 public:
  explicit Dropout(DropoutOptions options = {});
  std::string class_name() const override { return "Dropout"; }
  void build(const Shape& input_shape) override;
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  DropoutOptions o_;
  Variable* state_ = nullptr;
};

/// keras.layers.Rescaling: outputs = convert(inputs, f32) * scale + offset, any shape; e.g.
/// Rescaling(1.0 / 255) takes u8 images to [0, 1] inside the model, so raw pixels (a quarter of
/// the f32 bytes) are what fit slices and copies. Integer or floating-point inputs; the output is
/// f32 (Keras's default compute dtype). Throws ingot::Error(kInvalidArgument) for a non-finite
/// scale or offset.
class Rescaling final : public Layer {
 public:
  explicit Rescaling(double scale, double offset = 0.0, std::string name = "");
  std::string class_name() const override { return "Rescaling"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  double scale_, offset_;
};

/// keras.layers.Flatten: (batch, d1, d2, ...) -> (batch, d1 * d2 * ...).
class Flatten final : public Layer {
 public:
  explicit Flatten(std::string name = "") : Layer(std::move(name)) {}
  std::string class_name() const override { return "Flatten"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;
};

/// keras.layers.Reshape: (batch, ...) -> (batch, target_shape...); one entry may be -1.
class Reshape final : public Layer {
 public:
  explicit Reshape(Shape target_shape, std::string name = "");
  std::string class_name() const override { return "Reshape"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  Shape target_;
};

/// keras.layers.Activation by name (apply_activation).
class Activation final : public Layer {
 public:
  explicit Activation(std::string activation, std::string name = "");
  std::string class_name() const override { return "Activation"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override;

 private:
  std::string activation_;
};

}  // namespace ingot

// The other built-in layers, declared in their own headers (each includes this one).
#include "ingot/trainer/layers_pooling.h"        // IWYU pragma: export
#include "ingot/trainer/layers_normalization.h"  // IWYU pragma: export
#include "ingot/trainer/layers_embedding.h"      // IWYU pragma: export
