// Whole-model checkpoints (include/ingot/trainer/model_io.h).
#include "ingot/trainer/model_io.h"

#include <fmt/format.h>

#include <new>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "ingot/runtime/error.h"
#include "ingot/trainer/model.h"

namespace ingot {
namespace {

using Json = nlohmann::json;

/// WeightsAccess of a model without a trainer (never compiled, never predicted): its variables.
class VariablesAccess final : public callbacks::WeightsAccess {
 public:
  explicit VariablesAccess(Model& model) : model_(model) {}
  std::vector<Array> get_weights() override { return model_.get_weights(); }
  void set_weights(const std::vector<Array>& weights) override { model_.set_weights(weights); }

 private:
  Model& model_;
};

/// The layer's own variables: its variables() without its sublayers'.
std::vector<Variable*> own_variables(Layer& layer) {
  std::vector<Variable*> inner;
  for (const auto& sub : layer.sublayers()) {
    for (Variable* v : sub->variables()) inner.push_back(v);
  }
  std::vector<Variable*> out;
  for (Variable* v : layer.variables()) {
    if (std::find(inner.begin(), inner.end(), v) == inner.end()) out.push_back(v);
  }
  return out;
}

Json layer_json(Layer& layer) {
  Json vars = Json::array();
  for (Variable* v : own_variables(layer)) {
    vars.push_back({{"name", v->name()},
                    {"shape", v->shape()},
                    {"dtype", std::string(dtype_name(v->dtype()))},
                    {"trainable", v->trainable()}});
  }
  Json layers = Json::array();
  for (const auto& sub : layer.sublayers()) layers.push_back(layer_json(*sub));
  return {{"name", layer.name()}, {"class", layer.class_name()}, {"variables", vars}, {"layers", layers}};
}

Json architecture_json(Model& model) {
  Json layers = Json::array();
  for (const auto& sub : model.sublayers()) layers.push_back(layer_json(*sub));
  return {{"class", model.class_name()}, {"name", model.name()}, {"layers", layers}};
}

/// A difference between the file's architecture and the model's.
struct Difference {
  ErrorCode code;
  std::string what;
};

std::string describe(const Json& layer) {
  return fmt::format("'{}' ({})", layer.at("name").get<std::string>(), layer.at("class").get<std::string>());
}

std::string type_text(const Json& var) {
  return fmt::format("{} {}", var.at("dtype").get<std::string>(), shape_to_string(var.at("shape").get<Shape>()));
}

std::optional<Difference> compare_variables(const Json& saved, const Json& live, const std::string& where) {
  const size_t n = std::min(saved.size(), live.size());
  for (size_t i = 0; i < n; ++i) {
    const Json &s = saved[i], &l = live[i];
    if (s.at("name") != l.at("name")) {
      return Difference{ErrorCode::kNotFound,
                        fmt::format("{}: variable {} is '{}' in the file, '{}' in the model", where, i,
                                    s.at("name").get<std::string>(), l.at("name").get<std::string>())};
    }
    if (s.at("shape") != l.at("shape") || s.at("dtype") != l.at("dtype")) {
      const ErrorCode code = s.at("shape") != l.at("shape") ? ErrorCode::kShapeMismatch : ErrorCode::kDTypeMismatch;
      return Difference{code, fmt::format("variable '{}' is {} in the file, {} in the model",
                                          s.at("name").get<std::string>(), type_text(s), type_text(l))};
    }
  }
  if (saved.size() > n) {
    return Difference{ErrorCode::kNotFound, fmt::format("{}: the file's variable '{}' is missing from the model", where,
                                                        saved[n].at("name").get<std::string>())};
  }
  if (live.size() > n) {
    return Difference{ErrorCode::kNotFound, fmt::format("{}: the model's variable '{}' is not in the file", where,
                                                        live[n].at("name").get<std::string>())};
  }
  return std::nullopt;
}

/// The first difference between two lists of layer descriptions (depth first).
std::optional<Difference> compare_layers(const Json& saved, const Json& live, const std::string& where) {
  const size_t n = std::min(saved.size(), live.size());
  for (size_t i = 0; i < n; ++i) {
    const Json &s = saved[i], &l = live[i];
    if (s.at("name") != l.at("name") || s.at("class") != l.at("class")) {
      return Difference{ErrorCode::kInvalidArgument, fmt::format("{}: layer {} is {} in the file, {} in the model",
                                                                 where, i, describe(s), describe(l))};
    }
    const std::string inner = fmt::format("layer '{}'", s.at("name").get<std::string>());
    if (auto d = compare_variables(s.at("variables"), l.at("variables"), inner)) return d;
    if (auto d = compare_layers(s.at("layers"), l.at("layers"), inner)) return d;
  }
  if (saved.size() > n) {
    return Difference{ErrorCode::kNotFound,
                      fmt::format("{}: the file's layer {} is missing from the model", where, describe(saved[n]))};
  }
  if (live.size() > n) {
    return Difference{ErrorCode::kNotFound,
                      fmt::format("{}: the model's layer {} is not in the file", where, describe(live[n]))};
  }
  return std::nullopt;
}

/// Checks the structure model_architecture writes (throws nlohmann's exceptions otherwise), so the
/// comparison reads only well-formed entries.
void check_layers(const Json& layers) {
  for (const Json& layer : layers.get<std::vector<Json>>()) {
    (void)layer.at("name").get<std::string>();
    (void)layer.at("class").get<std::string>();
    for (const Json& v : layer.at("variables").get<std::vector<Json>>()) {
      (void)v.at("name").get<std::string>();
      (void)v.at("shape").get<Shape>();
      (void)v.at("dtype").get<std::string>();
      (void)v.at("trainable").get<bool>();
    }
    check_layers(layer.at("layers"));
  }
}

/// What load_model reads from the metadata before touching the model.
struct Header {
  std::string model_class, model_name, optimizer;
  Shape input_shape;
  DType input_dtype = DType::kF32;
  std::vector<ir::TensorType> input_types;  ///< every input (first: input_shape / input_dtype)
  Json architecture;
  int64_t optimizer_variables = 0;
};

const std::string& meta(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata.find(key);
  if (it == file.metadata.end()) {
    throw Error(ErrorCode::kParseError, fmt::format("load_model: '{}' has no metadata '{}'", file.path, key),
                "the file is damaged or not written by save_model; save the model again");
  }
  return it->second;
}

void check_format(const SafetensorsFile& file) {
  const auto it = file.metadata.find("format");
  const std::string format = it == file.metadata.end() ? "" : it->second;
  if (format == kModelFileFormat) return;
  const std::string what = format == "ingot"            ? "holds weights only (Model::save_weights)"
                           : format == "ingot-backup-1" ? "is a BackupAndRestore backup"
                                                        : fmt::format("has format '{}'", format);
  throw Error(ErrorCode::kParseError,
              fmt::format("load_model: '{}' {}, not a whole-model file ('{}')", file.path, what, kModelFileFormat),
              format == "ingot" ? "read it with Model::load_weights" : "pass a file written by save_model");
}

Header read_header(const SafetensorsFile& file) {
  check_format(file);
  Header h;
  h.model_class = meta(file, "model_class");
  h.model_name = meta(file, "model");
  h.optimizer = meta(file, "optimizer");
  std::string key;
  try {
    key = "input_shape";
    h.input_shape = Json::parse(meta(file, key)).get<Shape>();
    key = "input_dtype";
    h.input_dtype = parse_dtype(meta(file, key));
    key = "input_types";
    for (const Json& t : Json::parse(meta(file, key))) {
      h.input_types.push_back({t.at("shape").get<Shape>(), parse_dtype(t.at("dtype").get<std::string>())});
    }
    if (h.input_types.empty()) throw Error(ErrorCode::kParseError, "no input types");
    key = "architecture";
    h.architecture = Json::parse(meta(file, key));
    check_layers(h.architecture.at("layers"));
    key = "optimizer_variables";
    h.optimizer_variables = std::stoll(meta(file, key));
    if (const auto it = file.metadata.find("iterations"); it != file.metadata.end()) {
      key = "iterations";  // informational (the optimizer's own tensor counts), but must be a count
      size_t used = 0;
      const long long n = std::stoll(it->second, &used);
      if (used != it->second.size() || n < 0) throw std::invalid_argument("not a step count");
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kParseError) throw;
    throw Error(ErrorCode::kParseError,
                fmt::format("load_model: '{}' has a malformed '{}': {}", file.path, key, e.what()),
                "the file is damaged; save the model again");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kParseError,
                fmt::format("load_model: '{}' has a malformed '{}': {}", file.path, key, e.what()),
                "the file is damaged; save the model again");
  }
  return h;
}

Shape per_sample(const Shape& s) { return s.empty() ? s : Shape(s.begin() + 1, s.end()); }

/// Builds an unbuilt model from the recorded input; checks a built one's input.
void build_or_check_input(Model& model, const Header& h, const std::string& path) {
  if (!model.input_type()) {
    try {
      model.build_model(h.input_types);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kParseError,
                  fmt::format("load_model: building model '{}' for the input types in '{}' ran out of memory",
                              model.name(), path),
                  "the file's input_types are probably damaged; build the model yourself (build_model) before loading");
    }
    return;
  }
  const std::vector<ir::TensorType>& ins = model.input_types();
  if (ins.size() != h.input_types.size()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("load_model: '{}' was saved from a model with {} inputs; model '{}' takes {}", path,
                            h.input_types.size(), model.name(), ins.size()),
                "load it into a model with the same inputs");
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    const ir::TensorType& in = ins[i];
    const ir::TensorType& saved = h.input_types[i];
    if (per_sample(in.shape) != per_sample(saved.shape) || in.dtype != saved.dtype) {
      throw Error(
          in.dtype != saved.dtype ? ErrorCode::kDTypeMismatch : ErrorCode::kShapeMismatch,
          fmt::format("load_model: '{}' was saved from a model with {} {} {}; model '{}' takes {} {}", path,
                      ins.size() == 1 ? std::string("inputs") : fmt::format("input {}", i), dtype_name(saved.dtype),
                      shape_to_string(saved.shape), model.name(), dtype_name(in.dtype), shape_to_string(in.shape)),
          "load it into a model built for the same per-sample input shape");
    }
  }
}

/// Whether the optimizer state is restored: the model's optimizer must be the recorded one.
bool check_optimizer(Model& model, const Header& h, callbacks::WeightsAccess& access, const std::string& path) {
  const std::shared_ptr<optimizers::Optimizer> opt = model.optimizer();
  if (!opt || h.optimizer.empty()) return false;
  if (opt->class_name() != h.optimizer) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("load_model: '{}' holds the state of the optimizer {}; model '{}' is compiled with {}",
                            path, h.optimizer, model.name(), opt->class_name()),
                fmt::format("compile the model with the optimizer {} (the same options) before loading", h.optimizer));
  }
  const auto count = static_cast<int64_t>(access.get_optimizer_state().size());
  if (count != h.optimizer_variables) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("load_model: '{}' holds {} {} optimizer variables, model '{}' has {}", path,
                            h.optimizer_variables, h.optimizer, model.name(), count),
                "compile with the saved optimizer's options (momentum, use_ema, a schedule or a constant rate)");
  }
  return true;
}

}  // namespace

std::string model_architecture(Model& model) { return architecture_json(model).dump(); }

namespace model_io {

std::string optimizer_tensor_name(size_t i) { return fmt::format("__optimizer__/{:04}", i); }

std::vector<std::pair<std::string, Array>> training_state_tensors(Model& model, callbacks::WeightsAccess& access,
                                                                  bool with_optimizer) {
  std::vector<std::pair<std::string, Array>> tensors;
  const std::vector<Array> weights = access.get_weights();
  const std::vector<Variable*> vars = model.variables();
  for (size_t i = 0; i < vars.size(); ++i) tensors.emplace_back(vars[i]->name(), weights[i]);
  if (!with_optimizer) return tensors;
  const std::vector<Array> state = access.get_optimizer_state();
  for (size_t i = 0; i < state.size(); ++i) tensors.emplace_back(optimizer_tensor_name(i), state[i]);
  return tensors;
}

void restore_training_state(const SafetensorsFile& file, Model& model, callbacks::WeightsAccess& access,
                            bool with_optimizer) {
  // Weights by variable name, then the optimizer state in its layout; everything is checked
  // (load_into, then set_optimizer_state's same checks) before anything changes.
  std::vector<Array> weights = access.get_weights(), state;
  if (with_optimizer) state = access.get_optimizer_state();
  std::vector<std::pair<std::string, Array*>> targets;
  const std::vector<Variable*> vars = model.variables();
  for (size_t i = 0; i < vars.size(); ++i) targets.emplace_back(vars[i]->name(), &weights[i]);
  for (size_t i = 0; i < state.size(); ++i) targets.emplace_back(optimizer_tensor_name(i), &state[i]);
  load_into(file, targets);
  if (with_optimizer) access.set_optimizer_state(state);
  access.set_weights(weights);
}

}  // namespace model_io

namespace {

/// Every input's type: [{"shape": [...], "dtype": "..."}, ...] (batch size of the build call).
std::string input_types_json(const Model& model) {
  Json list = Json::array();
  for (const ir::TensorType& t : model.input_types()) {
    list.push_back({{"shape", t.shape}, {"dtype", std::string(dtype_name(t.dtype))}});
  }
  return list.dump();
}

}  // namespace

void save_model(Model& model, const std::string& path) {
  if (!model.input_type()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("save_model: model '{}' is not built", model.name()),
                "build it first (build_model, fit or predict)");
  }
  VariablesAccess plain(model);
  callbacks::WeightsAccess* trainer = model.training_state();
  const std::shared_ptr<optimizers::Optimizer> opt = model.optimizer();
  callbacks::WeightsAccess& access = trainer != nullptr ? *trainer : plain;
  const auto tensors = model_io::training_state_tensors(model, access, opt != nullptr);
  std::map<std::string, std::string> metadata = {{"format", kModelFileFormat},
                                                 {"model", model.name()},
                                                 {"model_class", model.class_name()},
                                                 {"input_shape", Json(model.input_type()->shape).dump()},
                                                 {"input_dtype", std::string(dtype_name(model.input_type()->dtype))},
                                                 {"input_types", input_types_json(model)},
                                                 {"architecture", model_architecture(model)},
                                                 {"optimizer", opt ? opt->class_name() : ""},
                                                 {"optimizer_variables", "0"}};
  if (opt) {
    const std::vector<Array> state = access.get_optimizer_state();
    metadata["optimizer_variables"] = std::to_string(state.size());
    metadata["iterations"] = std::to_string(optimizers::Optimizer::iterations(state));
  }
  model.write_once([&] { save_safetensors(path, tensors, metadata); }, "save_model('" + path + "')");
}

void load_model(Model& model, const std::string& path) {
  const SafetensorsFile file = load_safetensors(path);
  const Header h = read_header(file);
  if (h.model_class != model.class_name()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("load_model: '{}' holds a {} model ('{}'); model '{}' is a {}", path, h.model_class,
                            h.model_name, model.name(), model.class_name()),
                "load it into a model made by the code that saved it");
  }
  build_or_check_input(model, h, path);
  if (auto d = compare_layers(h.architecture.at("layers"), architecture_json(model).at("layers"),
                              fmt::format("model '{}'", model.name()))) {
    throw Error(d->code, fmt::format("load_model: '{}' does not fit: {}", path, d->what),
                "load it into a model made by the code that saved it; nothing was changed");
  }
  VariablesAccess plain(model);
  callbacks::WeightsAccess* trainer = model.training_state();
  callbacks::WeightsAccess& access = trainer != nullptr ? *trainer : plain;
  const bool with_optimizer = check_optimizer(model, h, access, path);
  model_io::restore_training_state(file, model, access, with_optimizer);
}

}  // namespace ingot
