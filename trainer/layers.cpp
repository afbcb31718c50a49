// Layers (include/ingot/trainer/layers.h).
#include "ingot/trainer/layers.h"

#include "layers_util.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace ingot {

using namespace layers_detail;

// ---- LayerContext ---------------------------------------------------------------------------

void LayerContext::bind(const Variable& variable, Tensor value) {
  values_.insert_or_assign(&variable, std::move(value));
}

Tensor LayerContext::value(const Variable& variable) const {
  const auto in_compute_dtype = [this](Tensor t) {
    return compute_dtype_ && is_floating(t.dtype()) && t.dtype() != *compute_dtype_ ? convert(t, *compute_dtype_) : t;
  };
  if (auto it = values_.find(&variable); it != values_.end()) return in_compute_dtype(it->second);
  if (build_mode_) return in_compute_dtype(constant(variable.value()));
  throw Error(ErrorCode::kNotFound,
              fmt::format("variable '{}' is not part of the state of the step being traced", variable.name()),
              "create variables with add_weight in a layer that the model tracks (Sequential::add or track())");
}

void LayerContext::set_value(const Variable& variable, Tensor value) {
  if (is_floating(value.dtype()) && is_floating(variable.dtype()) && value.dtype() != variable.dtype()) {
    value = convert(value, variable.dtype());
  }
  updates_.insert_or_assign(&variable, std::move(value));
}

std::optional<Tensor> LayerContext::new_value(const Variable& variable) const {
  if (auto it = updates_.find(&variable); it != updates_.end()) return it->second;
  return std::nullopt;
}

Tensor LayerContext::batch_mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) const {
  if (axes.empty() || axes[0] != 0) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("LayerContext::batch_mean: axes [{}] do not include the batch dim 0", fmt::join(axes, ", ")),
        "reduce over the batch dim (and any others) to take a statistic of the batch");
  }
  const Tensor local = mean(x, axes, keepdims);
  return shards_ ? all_reduce(local, shards_->axis, "mean") : local;
}

Tensor LayerContext::batch_offset(int64_t local_batch) const {
  if (!shards_) return scalar(0, DType::kI64);
  return axis_index(shards_->axis, shards_->count) * scalar(static_cast<double>(local_batch), DType::kI64);
}

// ---- Layer ----------------------------------------------------------------------------------

Layer::Layer(std::string name) : name_(std::move(name)) {}

DType dtype_policy_compute_dtype(const std::string& policy, const std::string& owner) {
  if (policy == "float32") return DType::kF32;
  if (policy == "mixed_float16") return DType::kF16;
  if (policy == "mixed_bfloat16") return DType::kBF16;
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: unknown dtype_policy '{}'", owner, policy),
              "use float32, mixed_float16 or mixed_bfloat16 (Keras's policy names)");
}

void Layer::set_dtype_policy(const std::string& policy) {
  const std::string owner = fmt::format("layer '{}' ({})", name_, class_name());
  const DType compute = dtype_policy_compute_dtype(policy, owner);
  if (built_) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("{}: cannot set dtype_policy '{}' on a built layer", owner, policy),
                "set the layer's dtype policy before the model is built (before its first call or fit)");
  }
  dtype_policy_ = policy;
  policy_compute_dtype_ = compute;
}

Tensor Layer::to_compute_dtype(const LayerContext& ctx, const Tensor& x) const {
  if (!is_floating(x.dtype())) return x;
  std::optional<DType> target = policy_compute_dtype_ ? policy_compute_dtype_ : ctx.compute_dtype();
  // Outside any mixed policy (float32 model, layer called alone) half-precision inputs -- the
  // output of a layer with its own mixed policy -- compute in f32; f64 passes (f64 layer checks).
  if (!target && (x.dtype() == DType::kF16 || x.dtype() == DType::kBF16)) target = DType::kF32;
  return target && x.dtype() != *target ? convert(x, *target) : x;
}

Tensor Layer::operator()(LayerContext& ctx, const Tensor& input) {
  const Tensor x = to_compute_dtype(ctx, input);
  try {
    if (!built_) {
      build(x.shape());
      built_ = true;
    }
    LayerContext::ComputeDTypeScope scope(ctx, policy_compute_dtype_ ? policy_compute_dtype_ : ctx.compute_dtype());
    const NameScope name_scope(scope_name());
    return call(ctx, x);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{} on input {}", describe(), shape_to_string(x.shape())));
  }
}

std::string auto_name_base(const std::string& class_name) {
  std::string out;
  for (size_t i = 0; i < class_name.size(); ++i) {
    const char c = class_name[i];
    if (std::isupper(static_cast<unsigned char>(c)) != 0) {
      if (i > 0 && std::isdigit(static_cast<unsigned char>(class_name[i - 1])) == 0) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

Tensor Layer::operator()(LayerContext& ctx, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> xs;
  std::vector<Shape> shapes;
  for (const Tensor& x : inputs) {
    xs.push_back(to_compute_dtype(ctx, x));
    shapes.push_back(x.shape());
  }
  try {
    if (!built_) {
      build_many(shapes);
      built_ = true;
    }
    LayerContext::ComputeDTypeScope scope(ctx, policy_compute_dtype_ ? policy_compute_dtype_ : ctx.compute_dtype());
    const NameScope name_scope(scope_name());
    return call_many(ctx, xs);
  } catch (const Error& e) {
    std::vector<std::string> s;
    for (const Shape& shape : shapes) s.push_back(shape_to_string(shape));
    throw e.with_context(fmt::format("{} on input{} {}", describe(), xs.size() == 1 ? "" : "s", fmt::join(s, ", ")));
  }
}

void Layer::build_many(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("layer '{}' ({}) takes one input, got {}", name_, class_name(), input_shapes.size()),
                "several inputs go to merge layers (Add, Concatenate, ...)");
  }
  build(input_shapes[0]);
}

Tensor Layer::call_many(LayerContext& ctx, const std::vector<Tensor>& xs) {
  if (xs.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("layer '{}' ({}) takes one input, got {}", name_, class_name(), xs.size()),
                "several inputs go to merge layers (Add, Concatenate, ...)");
  }
  return call(ctx, xs[0]);
}

namespace {

/// Every distinct layer node among the ancestors of `roots` (the roots included).
std::vector<const KerasTensor::Node*> layer_ancestors(const std::vector<KerasTensor>& roots) {
  std::vector<const KerasTensor::Node*> seen, stack;
  for (const KerasTensor& r : roots) stack.push_back(r.node().get());
  while (!stack.empty()) {
    const KerasTensor::Node* n = stack.back();
    stack.pop_back();
    if (!n->layer || std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    for (const auto& in : n->inputs) stack.push_back(in.get());
  }
  return seen;
}

}  // namespace

KerasTensor Layer::operator()(const KerasTensor& x) { return symbolic_call({x}, /*as_list=*/false); }

KerasTensor Layer::operator()(const std::vector<KerasTensor>& xs) { return symbolic_call(xs, /*as_list=*/true); }

KerasTensor Layer::symbolic_call(const std::vector<KerasTensor>& xs, bool as_list) {
  if (xs.empty()) throw Error(ErrorCode::kInvalidArgument, fmt::format("layer '{}' called on no KerasTensor", name_));
  for (const KerasTensor& x : xs) {
    if (!x.valid())
      throw Error(ErrorCode::kInvalidArgument, fmt::format("layer '{}' called on an empty KerasTensor", name_));
  }
  std::shared_ptr<Layer> self = weak_from_this().lock();
  if (!self) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("layer '{}' ({}) is not owned by a std::shared_ptr", name_, class_name()),
                "create layers for the functional API with std::make_shared<...>(...)");
  }
  // Name and seed unnamed / unseeded layers now, before build() creates their variables: names
  // are unique among the layers that made the inputs (Keras's "dense", "dense_1", ...), seeds
  // ModelOptions{}.seed + the number of those layers.
  const std::vector<const KerasTensor::Node*> ancestors = layer_ancestors(xs);
  const auto position = static_cast<int64_t>(ancestors.size());
  int64_t same_base = 0;
  const std::string base = auto_name_base(class_name());
  for (const KerasTensor::Node* n : ancestors) {
    const std::string& other = n->layer->name();
    if (other == base || other.rfind(base + "_", 0) == 0) ++same_base;
  }
  if (name_.empty()) name_ = same_base == 0 ? base : fmt::format("{}_{}", base, same_base);
  if (!seed_) seed_ = 1337 + static_cast<uint64_t>(position);
  std::vector<ir::TensorType> types;
  for (const KerasTensor& x : xs) {
    Shape batched = {1};
    batched.insert(batched.end(), x.shape().begin(), x.shape().end());
    types.push_back({batched, x.dtype()});
  }
  TraceFn fn = [this, as_list](const std::vector<Tensor>& a) {
    LayerContext ctx(/*training=*/false, /*build_mode=*/true);
    return std::vector<Tensor>{as_list ? (*this)(ctx, a) : (*this)(ctx, a[0])};
  };
  const ir::Graph g = trace(fn, types, name_.empty() ? "layer" : name_);
  const ir::TensorType out = g.type(g.outputs().at(0));
  auto node = std::make_shared<KerasTensor::Node>();
  node->layer = std::move(self);
  for (const KerasTensor& x : xs) node->inputs.push_back(x.node());
  node->shape = Shape(out.shape.begin() + 1, out.shape.end());
  node->dtype = out.dtype;
  return KerasTensor(std::move(node));
}

KerasTensor Input(const Shape& shape, DType dtype, std::string name) {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("Input: shape {} has a negative size", shape_to_string(shape)),
                "give the per-sample shape without the batch dim, e.g. {28, 28, 1}");
  }
  auto node = std::make_shared<KerasTensor::Node>();
  node->shape = shape;
  node->dtype = dtype;
  node->name = std::move(name);
  return KerasTensor(std::move(node));
}

Variable& Layer::add_weight(const std::string& name, const Shape& shape, const Initializer& initializer, bool trainable,
                            DType dtype) {
  const uint64_t seed = seed_.value_or(0) * 1000003u + variables_.size();
  variables_.push_back(std::make_unique<Variable>(name_ + "/" + name, initializer(shape, dtype, seed), trainable));
  return *variables_.back();
}

std::string Layer::scope_name() const {
  if (!name_.empty()) return name_;
  const std::string c = class_name();
  return c.empty() ? "layer" : c;
}

std::string Layer::describe() const {
  return name_.empty() ? fmt::format("an unnamed {} layer (called outside a model)", class_name())
                       : fmt::format("layer '{}' ({})", name_, class_name());
}

std::vector<Variable*> Layer::variables() {
  std::vector<Variable*> out;
  for (const auto& v : variables_) out.push_back(v.get());
  for (const auto& l : sublayers_) {
    for (Variable* v : l->variables()) {
      // A layer used twice (tracked twice, e.g. Sequential({d, d})) owns its variables once.
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
  }
  return out;
}

std::vector<Variable*> Layer::trainable_variables() {
  std::vector<Variable*> out;
  for (Variable* v : variables()) {
    if (v->trainable()) out.push_back(v);
  }
  return out;
}

std::vector<Variable*> Layer::non_trainable_variables() {
  std::vector<Variable*> out;
  for (Variable* v : variables()) {
    if (!v->trainable()) out.push_back(v);
  }
  return out;
}

int64_t Layer::count_params() {
  int64_t n = 0;
  for (Variable* v : variables()) n += num_elements(v->shape());
  return n;
}

// ---- activations ----------------------------------------------------------------------------

namespace {

/// The Keras activation names apply_activation knows ("" is linear, as activation=None).
constexpr const char* kActivations[] = {"",     "linear", "relu",  "sigmoid",  "tanh",       "softmax",
                                        "gelu", "silu",   "swish", "softplus", "log_softmax"};

}  // namespace

void check_activation(const std::string& name) {
  for (const char* known : kActivations) {
    if (name == known) return;
  }
  throw Error(ErrorCode::kNotFound, fmt::format("unknown activation '{}'", name),
              "known: linear, relu, sigmoid, tanh, softmax, gelu, silu (swish), softplus, log_softmax");
}

Tensor apply_activation(const std::string& name, const Tensor& x) {
  check_activation(name);
  if (name == "linear" || name.empty()) return x;
  if (name == "relu") return relu(x);
  if (name == "sigmoid") return sigmoid(x);
  if (name == "tanh") return tanh(x);
  if (name == "gelu") return gelu(x, /*approximate=*/false);  // keras.activations.gelu's default
  if (name == "silu" || name == "swish") return silu(x);
  if (name == "softplus") return softplus(x);
  if (name == "log_softmax") return log_softmax(x, -1);
  return softmax(x, -1);
}

namespace {

/// The regularizers' penalties of the kernel and (when both exist) the bias, added to the loss.
void add_regularization(LayerContext& ctx, const Regularizer& kernel_regularizer, const Variable* kernel,
                        const Regularizer& bias_regularizer, const Variable* bias) {
  if (kernel_regularizer) add_penalty(ctx, kernel_regularizer, *kernel, "kernel_regularizer");
  if (bias_regularizer && bias != nullptr) add_penalty(ctx, bias_regularizer, *bias, "bias_regularizer");
}

}  // namespace

// ---- Dense ----------------------------------------------------------------------------------

Dense::Dense(DenseOptions options) : Layer(options.name), o_(std::move(options)) {
  require_positive(o_.units, "Dense", "units");
  check_activation(o_.activation);
}

void Dense::build(const Shape& input_shape) {
  if (input_shape.size() < 2) {
    throw Error(ErrorCode::kShapeMismatch, fmt::format("{} expects inputs (batch, ..., features), got shape {}",
                                                       describe(), shape_to_string(input_shape)));
  }
  kernel_ = &add_weight("kernel", {input_shape.back(), o_.units}, o_.kernel_initializer);
  if (o_.use_bias) bias_ = &add_weight("bias", {o_.units}, o_.bias_initializer);
}

Tensor Dense::call(LayerContext& ctx, const Tensor& x) {
  if (x.dim(-1) != kernel_->shape()[0]) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Dense '{}' was built for {} input features, got input shape {}", name(),
                            kernel_->shape()[0], shape_to_string(x.shape())),
                "feed inputs of the shape the model was built for");
  }
  Tensor y = matmul(x, ctx.value(*kernel_));
  if (bias_ != nullptr) y = y + ctx.value(*bias_);
  add_regularization(ctx, o_.kernel_regularizer, kernel_, o_.bias_regularizer, bias_);
  return apply_activation(o_.activation, y);
}

// ---- Conv2D ---------------------------------------------------------------------------------

Conv2D::Conv2D(Conv2DLayerOptions options) : Layer(options.name), o_(std::move(options)) {
  require_positive(o_.filters, "Conv2D", "filters");
  require_pair(o_.kernel_size, "Conv2D", "kernel_size");
  require_pair(o_.strides, "Conv2D", "strides");
  require_padding(o_.padding, "Conv2D");
  check_activation(o_.activation);
}

void Conv2D::build(const Shape& input_shape) {
  require_rank(input_shape, 4, "Conv2D", "batch, height, width, channels");
  for (size_t d = 0; d < 2 && o_.padding == "valid"; ++d) {
    if (o_.kernel_size[d] > input_shape[d + 1]) {  // "valid" would give an empty output
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("Conv2D '{}': kernel_size [{}, {}] is larger than the input's spatial size [{}, {}]",
                              name(), o_.kernel_size[0], o_.kernel_size[1], input_shape[1], input_shape[2]),
                  "use a smaller kernel_size or padding \"same\"");
    }
  }
  kernel_ =
      &add_weight("kernel", {o_.kernel_size[0], o_.kernel_size[1], input_shape[3], o_.filters}, o_.kernel_initializer);
  if (o_.use_bias) bias_ = &add_weight("bias", {o_.filters}, o_.bias_initializer);
}

Tensor Conv2D::call(LayerContext& ctx, const Tensor& x) {
  require_rank(x.shape(), 4, "Conv2D", "batch, height, width, channels");
  Tensor y = conv2d(x, ctx.value(*kernel_), {.strides = o_.strides, .padding = o_.padding});
  if (bias_ != nullptr) y = y + ctx.value(*bias_);
  add_regularization(ctx, o_.kernel_regularizer, kernel_, o_.bias_regularizer, bias_);
  return apply_activation(o_.activation, y);
}

// ---- Dropout -----------------------------------------------------------------------------------

Dropout::Dropout(DropoutOptions options) : Layer(options.name), o_(std::move(options)) {
  if (!(o_.rate >= 0.0 && o_.rate < 1.0)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("Dropout: rate must be in [0, 1), got {}", o_.rate));
  }
}

void Dropout::build(const Shape&) {
  const uint64_t seed = o_.seed.value_or(this->seed().value_or(0));
  state_ = &add_weight(
      "seed_generator_state", {2},
      [seed](const Shape&, DType, uint64_t) { return Array::from_vector<uint64_t>({seed, 0}, {2}); },
      /*trainable=*/false, DType::kU64);
}

Tensor Dropout::call(LayerContext& ctx, const Tensor& x) {
  if (!ctx.training() || o_.rate == 0.0) return x;
  // Counter-based draws per example: example b of the global batch reads Threefry blocks
  // state[1] + b * blocks onwards, so a shard's draws start at its position in the global batch
  // and every example gets the same mask on any number of devices (JAX's partitionable
  // Threefry). With an even number of 32-bit values per example this is the whole tensor's draw.
  const Shape shape = x.shape();
  const int64_t local = shape.empty() ? 1 : shape[0];
  int64_t per_example = 1;
  for (size_t d = 1; d < shape.size(); ++d) per_example *= shape[d];
  const int64_t words = x.dtype() == DType::kF64 ? 1 : 2;  // values per Threefry block
  const int64_t blocks = (per_example + words - 1) / words;
  const Tensor state = ctx.value(*state_);
  Tensor start = state;
  if (ctx.batch_shards()) {
    const Tensor skip =
        convert(ctx.batch_offset(local) * scalar(static_cast<double>(blocks), DType::kI64), DType::kU64);
    start = state + concatenate({reshape(scalar(0, DType::kU64), {1}), reshape(skip, {1})}, 0);
  }
  Tensor u = random_uniform(start, {local, blocks * words}, x.dtype()).second;
  if (blocks * words != per_example) u = slice(u, {0, 0}, {local, per_example});
  u = reshape(u, shape);
  // Every device advances the state past the whole global batch's draws.
  const auto advance = static_cast<uint64_t>(ctx.global_batch(local) * blocks);
  ctx.set_value(*state_, state + constant(Array::from_vector<uint64_t>({0, advance}, {2})));
  const Tensor keep = greater_equal(u, constant(Array::scalar(o_.rate, x.dtype())));
  return where(keep, x * (1.0 / (1.0 - o_.rate)), constant(Array::scalar(0.0, x.dtype())));
}

// ---- MaxPooling2D, Flatten, Reshape, Activation -----------------------------------------------

MaxPooling2D::MaxPooling2D(MaxPooling2DOptions options) : Layer(options.name), o_(std::move(options)) {
  check_pool_window(o_.pool_size, o_.strides, o_.padding, "MaxPooling2D");
}

Tensor MaxPooling2D::call(LayerContext&, const Tensor& x) {
  require_rank(x.shape(), 4, "MaxPooling2D", "batch, height, width, channels");
  return max_pool2d(x, o_.pool_size, o_.strides, o_.padding);
}

Tensor Flatten::call(LayerContext&, const Tensor& x) {
  if (x.rank() < 1) throw Error(ErrorCode::kShapeMismatch, "Flatten expects inputs with a batch dim, got a scalar");
  int64_t features = 1;
  for (int64_t d = 1; d < x.rank(); ++d) features *= x.dim(d);
  return reshape(x, {x.dim(0), features});
}

Reshape::Reshape(Shape target_shape, std::string name) : Layer(std::move(name)), target_(std::move(target_shape)) {
  if (std::count(target_.begin(), target_.end(), -1) > 1 ||
      std::any_of(target_.begin(), target_.end(), [](int64_t d) { return d < -1; })) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("Reshape: target_shape {} may hold sizes >= 0 and at most one -1", shape_to_string(target_)));
  }
}

Tensor Reshape::call(LayerContext&, const Tensor& x) {
  int64_t known = 1, per_sample = 1;
  for (int64_t d : target_) known *= d == -1 ? 1 : d;
  for (int64_t d = 1; d < x.rank(); ++d) per_sample *= x.dim(d);
  Shape shape = {x.dim(0)};
  for (int64_t d : target_) shape.push_back(d == -1 && known > 0 ? per_sample / known : d);
  if (num_elements(shape) != x.size()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Reshape: cannot reshape {} to (batch,) + {}", shape_to_string(x.shape()),
                            shape_to_string(target_)),
                "the target shape must hold as many elements per sample as the input");
  }
  return reshape(x, shape);
}

Rescaling::Rescaling(double scale, double offset, std::string name)
    : Layer(std::move(name)), scale_(scale), offset_(offset) {
  if (!std::isfinite(scale) || !std::isfinite(offset)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Rescaling: scale {} and offset {} must be finite", scale, offset),
                "e.g. Rescaling(1.0 / 255) for u8 pixels");
  }
}

Tensor Rescaling::call(LayerContext& ctx, const Tensor& x) {
  const DType dt = ctx.compute_dtype().value_or(DType::kF32);
  const Tensor f = x.dtype() == dt ? x : convert(x, dt);
  Tensor y = f * scalar(scale_, dt);
  return offset_ == 0 ? y : y + scalar(offset_, dt);
}

Activation::Activation(std::string activation, std::string name)
    : Layer(std::move(name)), activation_(std::move(activation)) {
  check_activation(activation_);
}

Tensor Activation::call(LayerContext&, const Tensor& x) { return apply_activation(activation_, x); }

}  // namespace ingot
