// Model's weights I/O: save_weights / load_weights through safetensors files, and write_once
// (process 0 writes, every process learns the outcome) for runs of several processes.
#include <fmt/format.h>

#include <exception>
#include <string>
#include <vector>

#include "ingot/trainer/output_file.h"
#include "ingot/trainer/safetensors.h"
#include "trainer_state.h"

namespace ingot {

void Model::save_weights(const std::string& path) {
  if (!input_type()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("save_weights: model '{}' is not built", name()),
                "build it first (build_model, fit or predict)");
  }
  write_once(
      [&] {
        OutputFile file(path, "save_safetensors");
        save_weights(file);
        file.commit();
      },
      "save_weights('" + path + "')");
}

void Model::save_weights(OutputFile& file) {
  if (!input_type()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("save_weights: model '{}' is not built", name()),
                "build it first (build_model, fit or predict)");
  }
  std::vector<std::pair<std::string, Array>> tensors;
  std::vector<Array> values = get_weights();  // the live state when called from a callback
  std::vector<Variable*> vars = variables();
  for (size_t i = 0; i < vars.size(); ++i) tensors.emplace_back(vars[i]->name(), values[i]);
  save_safetensors(file, tensors, {{"format", "ingot"}, {"model", name()}});
}

int Model::process_id() const {
  return trainer_ && trainer_->options.distribution ? trainer_->options.distribution->device_mesh().process_id() : 0;
}

void Model::write_once(const std::function<void()>& write, const std::string& what) {
  const std::shared_ptr<distribution::ProcessGroup> processes =
      trainer_ && trainer_->options.distribution ? trainer_->options.distribution->device_mesh().processes() : nullptr;
  if (!processes || processes->num_processes() == 1) {
    write();
    return;
  }
  std::exception_ptr error;
  Array failed = Array::zeros({}, DType::kI32);
  if (processes->process_id() == 0) {
    try {
      write();
    } catch (...) {
      error = std::current_exception();
      failed.data<int32_t>()[0] = 1;
    }
  }
  processes->process_communicator().broadcast(failed, 0);  // also the barrier: process 0 is done
  if (error) std::rethrow_exception(error);
  if (failed.data<int32_t>()[0] != 0) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("{}: process 0 failed to write it", what),
                "see process 0's error");
  }
}

void Model::load_weights(const std::string& path) {
  if (!input_type()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("load_weights: model '{}' is not built", name()),
                "build it first with the input shape the weights were trained for (build_model)");
  }
  if (trainer_ && trainer_->live) {
    throw Error(ErrorCode::kFailedPrecondition, "load_weights while fit/evaluate/predict is running",
                "load weights before or after the loop (or set_weights from a callback)");
  }
  const SafetensorsFile file = load_safetensors(path);
  std::vector<Array> values;
  std::vector<std::pair<std::string, Array*>> targets;
  std::vector<Variable*> vars = variables();
  values.reserve(vars.size());
  // A variable emptied by a failed fit (its state lost with the step) takes the file's value too.
  for (Variable* v : vars) values.push_back(v->purged() ? Array::empty(v->shape(), v->dtype()) : v->value());
  for (size_t i = 0; i < vars.size(); ++i) targets.emplace_back(vars[i]->name(), &values[i]);
  load_into(file, targets);  // checks every name, shape and dtype first; throws before changing anything
  for (size_t i = 0; i < vars.size(); ++i) vars[i]->assign(values[i]);
}

}  // namespace ingot
