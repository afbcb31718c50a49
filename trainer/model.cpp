// Model and Sequential (include/ingot/trainer/model.h).
#include "ingot/trainer/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

namespace ingot {

namespace {

Shape per_sample(const Shape& s) { return s.empty() ? s : Shape(s.begin() + 1, s.end()); }

}  // namespace

Model::Model(ModelOptions options) : Layer(options.name.empty() ? "model" : options.name), options_(std::move(options)) {
  const std::string& p = options_.dtype_policy;
  if (p != "float32" && p != "mixed_float16" && p != "mixed_bfloat16") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("model '{}': unknown dtype_policy '{}'", name(), p),
                "use float32, mixed_float16 or mixed_bfloat16 (Keras's policy names)");
  }
}

void Model::name_and_seed(Layer& layer) {
  if (layer.name().empty()) {
    const std::string base = auto_name_base(layer.class_name());
    std::string name = base;
    for (int i = 1; std::any_of(sublayers().begin(), sublayers().end(),
                                [&](const auto& l) { return l.get() != &layer && l->name() == name; });
         ++i) {
      name = fmt::format("{}_{}", base, i);
    }
    layer.set_name(name);
  }
  if (!layer.seed()) layer.set_seed(options_.seed + static_cast<uint64_t>(layer_count_));
  ++layer_count_;
}

void Model::name_nested_layers() {
  std::vector<Layer*> all;
  std::function<void(const Layer&)> walk = [&](const Layer& layer) {
    for (const auto& sub : layer.sublayers()) {
      if (std::find(all.begin(), all.end(), sub.get()) != all.end()) continue;  // a shared layer
      all.push_back(sub.get());
      walk(*sub);
    }
  };
  walk(*this);
  for (Layer* layer : all) {
    if (layer->name().empty()) {
      const std::string base = auto_name_base(layer->class_name());
      std::string name = base;
      for (int i = 1; std::any_of(all.begin(), all.end(), [&](const Layer* l) { return l->name() == name; }); ++i) {
        name = fmt::format("{}_{}", base, i);
      }
      layer->set_name(name);
    }
    if (!layer->seed()) layer->set_seed(options_.seed + static_cast<uint64_t>(layer_count_++));
  }
}

void Model::build_model(const Shape& input_shape, DType dtype) {
  if (input_type_) {
    if (per_sample(input_type_->shape) != per_sample(input_shape) || input_type_->dtype != dtype) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("model '{}' was built for inputs {} {}, now asked for {} {}", name(),
                              dtype_name(input_type_->dtype), shape_to_string(input_type_->shape),
                              dtype_name(dtype), shape_to_string(input_shape)),
                  "feed inputs of the shape the model was built for (only the batch size may differ)");
    }
    return;
  }
  output_shapes_.clear();
  name_nested_layers();
  TraceFn fn = [this](const std::vector<Tensor>& a) {
    LayerContext ctx(/*training=*/false, /*build_mode=*/true);
    return std::vector<Tensor>{forward(ctx, a[0])};
  };
  const ir::Graph g = trace(fn, {{input_shape, dtype}}, name() + "_build");
  input_type_ = ir::TensorType{input_shape, dtype};
  output_type_ = g.type(g.outputs().at(0));
}

DType Model::compute_dtype() const {
  if (options_.dtype_policy == "mixed_float16") return DType::kF16;
  if (options_.dtype_policy == "mixed_bfloat16") return DType::kBF16;
  return DType::kF32;
}

Tensor Model::forward(LayerContext& ctx, const Tensor& x) {
  const DType compute = compute_dtype();
  if (compute == DType::kF32) return (*this)(ctx, x);
  ctx.set_compute_dtype(compute);
  const Tensor y = (*this)(ctx, is_floating(x.dtype()) ? convert(x, compute) : x);
  return is_floating(y.dtype()) && y.dtype() != DType::kF32 ? convert(y, DType::kF32) : y;
}

TraceFn Model::forward_fn(bool training) {
  return [this, training](const std::vector<Tensor>& a) {
    std::vector<Variable*> vars = variables();
    LayerContext ctx(training);
    for (size_t i = 0; i < vars.size(); ++i) ctx.bind(*vars[i], a[i]);
    return std::vector<Tensor>{forward(ctx, a.back())};
  };
}

void Model::check_input(const Array& x) const {
  if (per_sample(x.shape()) != per_sample(input_type_->shape) || x.dtype() != input_type_->dtype) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("model '{}' expects inputs {} (batch, {}), got {} {}", name(),
                            dtype_name(input_type_->dtype), fmt::join(per_sample(input_type_->shape), ", "),
                            dtype_name(x.dtype()), shape_to_string(x.shape())),
                "feed inputs of the shape the model was built for (only the batch size may differ)");
  }
}

Array Model::predict_on_batch(const Array& x) {
  if (!x.valid()) throw Error(ErrorCode::kInvalidArgument, "predict_on_batch: x is an invalid Array");
  if (!input_type_) build_model(x.shape(), x.dtype());
  check_input(x);
  if (!predict_) predict_.emplace(jit(forward_fn(false), {.name = name() + "_predict"}));
  std::vector<Array> args;
  for (Variable* v : variables()) args.push_back(v->value());
  args.push_back(to_host(x));
  return (*predict_)(args).at(0);
}

std::vector<Array> Model::get_weights() {
  if (trainer_live()) return trainer_weights().get_weights();  // from a callback: the live state
  std::vector<Array> out;
  for (Variable* v : variables()) out.push_back(v->value().clone());
  return out;
}

void Model::set_weights(const std::vector<Array>& weights) {
  if (trainer_live()) return trainer_weights().set_weights(weights);  // changes the next step's state
  std::vector<Variable*> vars = variables();
  if (weights.size() != vars.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("set_weights: {} arrays for model '{}' with {} variables", weights.size(), name(), vars.size()),
                "pass one array per variable, in get_weights() order");
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!weights[i].valid() || weights[i].shape() != vars[i]->shape() || weights[i].dtype() != vars[i]->dtype()) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("set_weights: variable '{}' is {} {}, the array is {}", vars[i]->name(),
                              dtype_name(vars[i]->dtype()), shape_to_string(vars[i]->shape()),
                              weights[i].valid() ? fmt::format("{} {}", dtype_name(weights[i].dtype()),
                                                               shape_to_string(weights[i].shape()))
                                                 : std::string("invalid")),
                  "nothing was changed; pass arrays of the variables' shapes and dtypes");
    }
  }
  for (size_t i = 0; i < vars.size(); ++i) vars[i]->assign(weights[i]);
}

std::string Model::summary() {
  std::ostringstream out;
  out << fmt::format("Model: \"{}\"\n", name());
  const std::string rule(72, '-');
  out << rule << "\n" << fmt::format("{:<34}{:<26}{:>12}\n", "Layer (type)", "Output Shape", "Param #") << rule << "\n";
  for (const auto& layer : sublayers()) {
    std::string shape = "?";
    for (const auto& [l, s] : output_shapes_) {
      if (l == layer.get()) shape = "(None, " + fmt::format("{}", fmt::join(per_sample(s), ", ")) + ")";
    }
    out << fmt::format("{:<34}{:<26}{:>12}\n", fmt::format("{} ({})", layer->name(), layer->class_name()), shape,
                       layer->count_params());
  }
  int64_t trainable = 0, total = count_params();
  for (Variable* v : trainable_variables()) trainable += num_elements(v->shape());
  out << rule << "\n"
      << fmt::format("Total params: {}\nTrainable params: {}\nNon-trainable params: {}\n", total, trainable,
                     total - trainable);
  return out.str();
}

Sequential::Sequential(ModelOptions options)
    : Model(ModelOptions{options.name.empty() ? "sequential" : options.name, options.seed, options.dtype_policy}) {}

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers, ModelOptions options) : Sequential(std::move(options)) {
  for (auto& l : layers) add(std::move(l));
}

void Sequential::add(std::shared_ptr<Layer> layer) {
  if (!layer) throw Error(ErrorCode::kInvalidArgument, fmt::format("Sequential '{}': add() got a null layer", name()));
  if (input_type()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("Sequential '{}' is already built; cannot add layer '{}'", name(), layer->name()),
                "add every layer before building, fitting or predicting");
  }
  track(layer);
  name_and_seed(*layer);
  layers_.push_back(std::move(layer));
}

Tensor Sequential::call(LayerContext& ctx, const Tensor& x) {
  if (layers_.empty()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("Sequential '{}' has no layers", name()),
                "add layers before building or calling the model");
  }
  Tensor h = x;
  for (const auto& layer : layers_) {
    h = (*layer)(ctx, h);
    if (ctx.build_mode()) record_output(*layer, h.shape());
  }
  return h;
}

namespace {

/// Post-order depth-first walk from `n`: every layer node once, each after its inputs.
void topological(const std::shared_ptr<const KerasTensor::Node>& n, const KerasTensor::Node* input,
                 std::vector<std::shared_ptr<const KerasTensor::Node>>& order) {
  if (n.get() == input || std::find(order.begin(), order.end(), n) != order.end()) return;
  if (!n->layer) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Functional: the outputs come from the input '{}', not from the given inputs", n->name),
                "build the outputs by calling layers on the KerasTensor passed as inputs");
  }
  for (const auto& in : n->inputs) topological(in, input, order);
  order.push_back(n);
}

}  // namespace

Functional::Functional(KerasTensor inputs, KerasTensor outputs, ModelOptions options)
    : Model(ModelOptions{options.name.empty() ? "functional" : options.name, options.seed, options.dtype_policy}),
      inputs_(std::move(inputs)), outputs_(std::move(outputs)) {
  if (!inputs_.valid() || !outputs_.valid()) {
    throw Error(ErrorCode::kInvalidArgument, "Functional: inputs and outputs must be KerasTensors from Input() and layer calls");
  }
  topological(outputs_.node(), inputs_.node().get(), order_);
  for (const auto& n : order_) {
    const bool seen = std::any_of(sublayers().begin(), sublayers().end(), [&](const auto& l) { return l == n->layer; });
    if (!seen) {
      track(n->layer);
      name_and_seed(*n->layer);
    }
  }
}

Tensor Functional::call(LayerContext& ctx, const Tensor& x) {
  std::map<const KerasTensor::Node*, Tensor> values = {{inputs_.node().get(), x}};
  for (const auto& n : order_) {
    std::vector<Tensor> in;
    for (const auto& i : n->inputs) in.push_back(values.at(i.get()));
    const Tensor& h = values[n.get()] = (*n->layer)(ctx, in);
    if (ctx.build_mode()) record_output(*n->layer, h.shape());
  }
  return values.at(outputs_.node().get());
}

}  // namespace ingot
