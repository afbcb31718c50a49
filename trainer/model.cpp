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

Model::Model(ModelOptions options)
    : Layer(options.name.empty() ? "model" : options.name), options_(std::move(options)) {
  dtype_policy_compute_dtype(options_.dtype_policy, fmt::format("model '{}'", name()));  // validates the name
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

void Model::build_model(const Shape& input_shape, DType dtype) { build_model({ir::TensorType{input_shape, dtype}}); }

namespace {

std::string types_to_string(const std::vector<ir::TensorType>& types) {
  std::vector<std::string> parts;
  for (const ir::TensorType& t : types)
    parts.push_back(fmt::format("{} {}", dtype_name(t.dtype), shape_to_string(t.shape)));
  return types.size() == 1 ? parts[0] : fmt::format("[{}]", fmt::join(parts, ", "));
}

bool same_but_batch(const std::vector<ir::TensorType>& a, const std::vector<ir::TensorType>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    // Floating inputs of another width are cast by forward (Keras casts to the compute dtype).
    const bool dtype_ok = a[i].dtype == b[i].dtype || (is_floating(a[i].dtype) && is_floating(b[i].dtype));
    if (per_sample(a[i].shape) != per_sample(b[i].shape) || !dtype_ok) return false;
  }
  return true;
}

}  // namespace

void Model::build_model(const std::vector<ir::TensorType>& input_types) {
  if (input_types.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("build_model: model '{}' given no input types", name()),
                "pass one type (shape with the batch dimension, dtype) per model input");
  }
  if (!input_types_.empty()) {
    if (!same_but_batch(input_types_, input_types)) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("model '{}' was built for inputs {}, now asked for {}", name(),
                              types_to_string(input_types_), types_to_string(input_types)),
                  "feed inputs of the shape the model was built for (only the batch size may differ)");
    }
    return;
  }
  output_shapes_.clear();
  name_nested_layers();
  TraceFn fn = [this](const std::vector<Tensor>& a) {
    LayerContext ctx(/*training=*/false, /*build_mode=*/true);
    return forward(ctx, a);
  };
  const ir::Graph g = trace(fn, input_types, name() + "_build");
  input_types_ = input_types;
  output_types_.clear();
  for (const auto& out : g.outputs()) output_types_.push_back(g.type(out));
  input_type_ = input_types_.at(0);
  output_type_ = output_types_.at(0);
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < std::max<size_t>(1, output_types_.size()); ++i)
    names.push_back(fmt::format("output_{}", i + 1));
  return names;
}

DType Model::compute_dtype() const {
  return dtype_policy_compute_dtype(options_.dtype_policy, fmt::format("model '{}'", name()));
}

std::vector<Tensor> Model::call_outputs(LayerContext& ctx, const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {(*this)(ctx, inputs[0])};
  return {(*this)(ctx, inputs)};
}

Tensor Model::call(LayerContext&, const Tensor&) {
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("model '{}' ({}) overrides neither call nor call_outputs", name(), class_name()),
              "override call(ctx, x) for one input and output, or call_outputs(ctx, inputs) for lists");
}

std::vector<Tensor> Model::forward(LayerContext& ctx, const std::vector<Tensor>& inputs) {
  const DType compute = compute_dtype();
  if (compute == DType::kF32) {
    // Keras casts floating inputs to the policy's compute dtype: f64 (or f16/bf16) data feeds an
    // f32 model.
    std::vector<Tensor> in;
    for (const Tensor& x : inputs)
      in.push_back(is_floating(x.dtype()) && x.dtype() != DType::kF32 ? convert(x, DType::kF32) : x);
    return call_outputs(ctx, in);
  }
  ctx.set_compute_dtype(compute);
  std::vector<Tensor> in;
  for (const Tensor& x : inputs) in.push_back(is_floating(x.dtype()) ? convert(x, compute) : x);
  std::vector<Tensor> out = call_outputs(ctx, in);
  for (Tensor& y : out) {
    if (is_floating(y.dtype()) && y.dtype() != DType::kF32) y = convert(y, DType::kF32);
  }
  return out;
}

Tensor Model::forward(LayerContext& ctx, const Tensor& x) {
  std::vector<Tensor> out = forward(ctx, std::vector<Tensor>{x});
  if (out.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("model '{}' has {} outputs; forward(ctx, x) returns one", name(), out.size()),
                "call forward(ctx, {inputs...}) for the list of outputs");
  }
  return out[0];
}

TraceFn Model::forward_fn(bool training) {
  return [this, training](const std::vector<Tensor>& a) {
    std::vector<Variable*> vars = variables();
    LayerContext ctx(training);
    for (size_t i = 0; i < vars.size(); ++i) ctx.bind(*vars[i], a[i]);
    return forward(ctx, std::vector<Tensor>(a.begin() + static_cast<std::ptrdiff_t>(vars.size()), a.end()));
  };
}

void Model::check_input(const Arrays& x) const {
  std::vector<ir::TensorType> types;
  for (const Array& a : x) types.push_back({a.shape(), a.dtype()});
  if (!same_but_batch(input_types_, types)) {
    std::vector<std::string> want;
    for (const ir::TensorType& t : input_types_) {
      want.push_back(fmt::format("{} (batch, {})", dtype_name(t.dtype), fmt::join(per_sample(t.shape), ", ")));
    }
    throw Error(
        ErrorCode::kShapeMismatch,
        fmt::format("model '{}' expects inputs {}, got {}", name(),
                    want.size() == 1 ? want[0] : fmt::format("[{}]", fmt::join(want, ", ")), types_to_string(types)),
        "feed inputs of the shape the model was built for (only the batch size may differ)");
  }
}

std::vector<Array> Model::predict_outputs_on_batch(const Arrays& x) {
  if (!x.valid()) throw Error(ErrorCode::kInvalidArgument, "predict_on_batch: no x", "pass one array per model input");
  std::vector<ir::TensorType> types;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!x[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("predict_on_batch: x[{}] is an invalid Array", i));
    }
    types.push_back({x[i].shape(), x[i].dtype()});
  }
  if (input_types_.empty()) build_model(types);
  check_input(x);
  if (!predict_) predict_.emplace(jit(forward_fn(false), {.name = name() + "_predict"}));
  std::vector<Array> args;
  for (Variable* v : variables()) args.push_back(v->value());
  for (const Array& a : x) args.push_back(to_host(a));
  return (*predict_)(args);
}

Array Model::predict_on_batch(const Arrays& x) {
  std::vector<Array> out = predict_outputs_on_batch(x);
  if (out.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("predict_on_batch: model '{}' has {} outputs", name(), out.size()),
                "use predict_outputs_on_batch for the list of outputs");
  }
  return out[0];
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
    throw Error(
        ErrorCode::kInvalidArgument,
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
  // Columns widen for long layer names and shapes (Keras's 34 / 26 / 12 at least).
  std::vector<std::pair<std::string, std::string>> rows;
  size_t name_w = 34, shape_w = 26;
  for (const auto& layer : sublayers()) {
    std::string shape = "?";
    for (const auto& [l, s] : output_shapes_) {
      if (l == layer.get()) shape = "(None, " + fmt::format("{}", fmt::join(per_sample(s), ", ")) + ")";
    }
    rows.emplace_back(fmt::format("{} ({})", layer->name(), layer->class_name()), shape);
    name_w = std::max(name_w, rows.back().first.size() + 2);
    shape_w = std::max(shape_w, rows.back().second.size() + 2);
  }
  const std::string rule(name_w + shape_w + 12, '-');
  out << rule << "\n"
      << fmt::format("{:<{}}{:<{}}{:>12}\n", "Layer (type)", name_w, "Output Shape", shape_w, "Param #") << rule
      << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    out << fmt::format("{:<{}}{:<{}}{:>12}\n", rows[i].first, name_w, rows[i].second, shape_w,
                       sublayers()[i]->count_params());
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

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers, ModelOptions options)
    : Sequential(std::move(options)) {
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
void topological(const std::shared_ptr<const KerasTensor::Node>& n, const std::vector<const KerasTensor::Node*>& inputs,
                 std::vector<std::shared_ptr<const KerasTensor::Node>>& order) {
  if (std::find(inputs.begin(), inputs.end(), n.get()) != inputs.end() ||
      std::find(order.begin(), order.end(), n) != order.end()) {
    return;
  }
  if (!n->layer) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Functional: the outputs come from the input '{}', not from the given inputs", n->name),
                "build the outputs by calling layers on the KerasTensor passed as inputs");
  }
  for (const auto& in : n->inputs) topological(in, inputs, order);
  order.push_back(n);
}

}  // namespace

Functional::Functional(KerasTensor inputs, KerasTensor outputs, ModelOptions options)
    : Functional(std::vector<KerasTensor>{std::move(inputs)}, std::vector<KerasTensor>{std::move(outputs)},
                 std::move(options)) {}

Functional::Functional(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs, ModelOptions options)
    : Model(ModelOptions{options.name.empty() ? "functional" : options.name, options.seed, options.dtype_policy}),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)) {
  if (inputs_.empty() || outputs_.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Functional: {} inputs and {} outputs", inputs_.size(), outputs_.size()),
                "pass at least one input (from Input()) and one output (from layer calls)");
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!inputs_[i].valid())
      throw Error(ErrorCode::kInvalidArgument, fmt::format("Functional: inputs[{}] is empty", i));
    if (inputs_[i].node()->layer) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Functional: inputs[{}] is a layer's output, not an Input", i),
                  "pass the KerasTensors returned by Input()");
    }
    for (size_t j = 0; j < i; ++j) {
      if (inputs_[j].node() == inputs_[i].node()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("Functional: inputs[{}] and inputs[{}] are the same Input", j, i));
      }
    }
  }
  std::vector<const KerasTensor::Node*> input_nodes;
  for (const KerasTensor& in : inputs_) input_nodes.push_back(in.node().get());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (!outputs_[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("Functional: outputs[{}] is empty", i),
                  "inputs and outputs must be KerasTensors from Input() and layer calls");
    }
    topological(outputs_[i].node(), input_nodes, order_);
  }
  for (const auto& n : order_) {
    const bool seen = std::any_of(sublayers().begin(), sublayers().end(), [&](const auto& l) { return l == n->layer; });
    if (!seen) {
      track(n->layer);
      name_and_seed(*n->layer);
    }
  }
}

std::vector<Tensor> Functional::call_outputs(LayerContext& ctx, const std::vector<Tensor>& inputs) {
  if (inputs.size() != inputs_.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("model '{}' takes {} inputs, got {}", name(), inputs_.size(), inputs.size()),
                "pass one array per Input, in the order given to the model");
  }
  std::map<const KerasTensor::Node*, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.emplace(inputs_[i].node().get(), inputs[i]);
  for (const auto& n : order_) {
    std::vector<Tensor> in;
    for (const auto& i : n->inputs) in.push_back(values.at(i.get()));
    const Tensor& h = values[n.get()] = (*n->layer)(ctx, in);
    if (ctx.build_mode()) record_output(*n->layer, h.shape());
  }
  std::vector<Tensor> out;
  for (const KerasTensor& o : outputs_) out.push_back(values.at(o.node().get()));
  return out;
}

Tensor Functional::call(LayerContext& ctx, const Tensor& x) {
  std::vector<Tensor> out = call_outputs(ctx, {x});
  if (out.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("model '{}' has {} outputs", name(), out.size()),
                "a model with several outputs is called through call_outputs / forward");
  }
  return out[0];
}

std::vector<std::string> Functional::output_names() const {
  std::vector<std::string> names;
  for (const KerasTensor& o : outputs_) names.push_back(o.node()->layer ? o.node()->layer->name() : o.node()->name);
  return names;
}

}  // namespace ingot
