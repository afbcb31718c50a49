// Model::Trainer's step functions and live state: preparing the steps once the model is built,
// taking the state out of the variables for a loop and giving it back, one train or test step on a
// batch, and callbacks' access to the live weights (trainer_state.h).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ingot/jit/spmd.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/mesh_communicator.h"
#include "ingot/runtime/shared_memory.h"
#include "trainer_state.h"

namespace ingot {

using detail::add_owner_paths;
using detail::scalar;
using detail::StepFunction;
using detail::values_of;
using detail::weights_per_output;

void Model::Trainer::prepare_predict() {
  n_in = model->input_types().size();
  n_out = model->output_types().size();
  prepare_steps();
}

void Model::Trainer::prepare() {
  if (train_fn) return;
  configure_outputs();
  prepare_steps();
}

void Model::Trainer::prepare_steps() {
  if (train_fn) return;
  trainable = model->trainable_variables();
  non_trainable = model->non_trainable_variables();
  check_aggregations();
  std::map<const Variable*, std::string> owners;
  add_owner_paths(*model, model->scope_name(), owners);
  update_scopes.clear();
  for (Variable* v : trainable) update_scopes.push_back(owners[v]);
  // Shardings are recorded before the first step and enforced on every step's outputs.
  if (const auto* mp = dynamic_cast<const distribution::ModelParallel*>(options.distribution.get())) {
    std::vector<std::string> paths;
    for (Variable* v : model->variables()) paths.push_back(v->name());
    mp->layout_map().check_matches(paths);
  }
  for (Variable* v : model->variables()) {
    if (options.distribution) {  // the distribution lays out the trainable variables (FSDP)
      const bool is_trainable = std::find(trainable.begin(), trainable.end(), v) != trainable.end();
      v->set_sharding(is_trainable ? options.distribution->variable_sharding(v->name(), v->shape())
                                   : NamedSharding(options.distribution->device_mesh().mesh(), PartitionSpec{}));
    } else if (!v->sharding()) {
      v->set_sharding(v->value().sharding());
    }
  }
  if (options.optimizer) {
    std::vector<ir::TensorType> types;
    for (Variable* v : trainable) types.push_back(v->type());
    O = options.optimizer->build(types);
    describe_optimizer_state();
  }
  std::vector<Communicator*> communicators;
  if (options.distribution) {
    if (const std::shared_ptr<distribution::ProcessGroup>& processes =
            options.distribution->device_mesh().processes()) {
      communicators = processes->device_communicators();
      broadcast_variables(processes->process_communicator());
    } else {
      // The devices of one process exchange data through shared memory (Gloo's loopback TCP took
      // 3x longer for 1 MB); one group per mesh axis line besides the whole mesh's
      // (MeshCommunicator) when the mesh has several axes, so that each collective runs along
      // its axis.
      const Mesh& mesh = options.distribution->device_mesh().mesh();
      group = options.mesh_backend.communicators
                  ? options.mesh_backend.communicators(mesh)
                  : make_mesh_communicators(mesh, [](int size) { return make_shared_memory_group(size); });
      for (const auto& c : group) communicators.push_back(c.get());
    }
  }
  const StepSizes sizes = this->sizes();
  // The state a step returns anew is donated (none with donate_state false).
  std::vector<int64_t> donate_train, donate_test;
  if (options.donate_state) {
    donate_train = StepLayout::train_arguments(sizes).donatable(StepLayout::train_results(sizes));
    donate_test = StepLayout::test_arguments(sizes).donatable(StepLayout::test_results(sizes));
  }
  const auto make = [&](TraceFn fn, const std::string& step, std::vector<int64_t> donate, size_t split_outputs,
                        std::vector<NamedSharding> state_outputs) {
    const std::string name = model->name() + "_" + step;
    if (!options.distribution) {
      std::shared_ptr<const CompileTarget> target = !compiled()      ? interpreter_target()
                                                    : options.target ? options.target
                                                                     : cpu_target();
      return std::make_unique<StepFunction>(std::move(fn), name, std::move(donate), std::move(target), options);
    }
    auto collective_ns = std::make_shared<std::atomic<int64_t>>(0);
    const std::shared_ptr<distribution::Distribution> dist = options.distribution;
    // Outputs: the state as recorded (state_outputs), then the logged values replicated, or from
    // `split_outputs` on split over the batch axis like the batches.
    SpmdTargetOptions spmd{.communicators = communicators,
                           .out_sharding =
                               [dist, split_outputs, state_outputs](size_t i, size_t) {
                                 if (i < state_outputs.size()) return state_outputs[i];
                                 if (i >= split_outputs) return dist->data_sharding();
                                 return NamedSharding(dist->device_mesh().mesh(), PartitionSpec{});
                               },
                           .collective_nanoseconds = collective_ns,
                           .overlap_collectives = dist->overlap_collectives()};
    std::shared_ptr<const CompileTarget> target =
        options.mesh_backend.target ? options.mesh_backend.target(std::move(spmd)) : spmd_target(std::move(spmd));
    return std::make_unique<StepFunction>(std::move(fn), name, std::move(donate), std::move(target), options,
                                          collective_ns, dist->device_mesh().mesh().size());
  };
  // The train step returns T', NT', O', M' laid out as recorded.
  std::vector<NamedSharding> train_state;
  if (options.distribution) train_state = state_shardings(StepLayout::train_results(sizes));
  train_fn = make(train_step(), "train_step", donate_train, SIZE_MAX, std::move(train_state));
  test_fn = make(test_step(), "test_step", donate_test, SIZE_MAX, {});
  // Predictions are split over the batch axis like the batches; across processes they are
  // all-gathered in the step (predict_step), so every process gets all of them.
  predict_fn = make(predict_step(), "predict_step", {}, num_processes() == 1 ? 0 : SIZE_MAX, {});
}

void Model::Trainer::begin_loop() {
  if (live) return;
  T = values_of(trainable);
  NT = values_of(non_trainable);
  // The live state lives on the target (a device copy on a CUDA device).
  for (Array& a : T) a = target().to_target(a);
  for (Array& a : NT) a = target().to_target(a);
  for (Variable* v : trainable) v->purge();
  for (Variable* v : non_trainable) v->purge();
  live = true;
}

void Model::Trainer::sync() {
  if (!live) return;
  // On a CUDA device the variables get host copies (their values are always host arrays).
  for (size_t i = 0; i < trainable.size(); ++i) trainable[i]->sync(on_host(T[i]));
  for (size_t i = 0; i < non_trainable.size(); ++i) non_trainable[i]->sync(on_host(NT[i]));
  T.clear();
  NT.clear();
  live = false;
}

bool Model::Trainer::sync_after_failure() {
  try {
    sync();
    return true;
  } catch (const Error&) {
    T.clear();
    NT.clear();
    live = false;
    return false;
  }
}

Error Model::Trainer::state_lost(const Error& e) {
  return Error(e.code(),
               e.message() +
                   "; the model's weights were lost with the failed step (it had taken them over: "
                   "donated state)",
               "load_weights (e.g. a ModelCheckpoint or BackupAndRestore file) before using the model again" +
                   (e.hint().empty() ? std::string() : "; " + e.hint()));
}

StepState<Array> Model::Trainer::step_state(const Batch& batch) const {
  return {T, NT, O, M, batch.x.list(), batch.y.list(), weights_per_output(batch, n_out)};
}

Logs Model::Trainer::train_batch(const Batch& batch) {
  check_batch(batch);
  const StepSizes sizes = this->sizes();
  const std::vector<Array> out = (*train_fn)(step_arguments(StepLayout::train_arguments(sizes), step_state(batch)));
  const StepLayout results = StepLayout::train_results(sizes);
  StepState<Array> s = results.unflatten(out);
  T = std::move(s.trainable);
  NT = std::move(s.non_trainable);
  O = std::move(s.optimizer);
  M = std::move(s.metrics);
  enforce_shardings();
  return logs_from(out, results.size());
}

Logs Model::Trainer::test_batch(const Batch& batch) {
  check_batch(batch);
  const StepSizes sizes = this->sizes();
  const std::vector<Array> out = (*test_fn)(step_arguments(StepLayout::test_arguments(sizes), step_state(batch)));
  const StepLayout results = StepLayout::test_results(sizes);
  M = results.unflatten(out).metrics;
  return logs_from(out, results.size());
}

Logs Model::Trainer::logs_from(const std::vector<Array>& out, size_t at) const {
  Logs logs;
  logs.set("loss", scalar(out[at], target()));
  const std::vector<std::string> names = metric_names();
  for (size_t i = 0; i < names.size(); ++i) logs.set(names[i], scalar(out[at + 1 + i], target()));
  return logs;
}

std::vector<Array> Model::Trainer::get_weights() {
  if (!live) return model->get_weights();
  std::vector<Array> out;
  for (Variable* v : model->variables()) out.push_back(on_host(state_of(v)).clone());
  return out;
}

void Model::Trainer::set_weights(const std::vector<Array>& weights) {
  if (!live) return model->set_weights(weights);
  std::vector<Variable*> vars = model->variables();
  if (weights.size() != vars.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("set_weights: {} arrays for {} variables", weights.size(), vars.size()));
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (weights[i].shape() != vars[i]->shape() || weights[i].dtype() != vars[i]->dtype()) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("set_weights: variable '{}' is {}, the array is {}", vars[i]->name(),
                              shape_to_string(vars[i]->shape()), shape_to_string(weights[i].shape())));
    }
  }
  for (size_t i = 0; i < vars.size(); ++i) state_of(vars[i]) = to_host(weights[i]).clone();
}

std::vector<Array> Model::Trainer::get_optimizer_state() {
  std::vector<Array> out;
  for (const Array& a : O) out.push_back(on_host(a).clone());
  return out;
}

void Model::Trainer::set_optimizer_state(const std::vector<Array>& state) {
  if (state.size() != O.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("set_optimizer_state: {} arrays for {} optimizer variables", state.size(), O.size()),
                "pass what get_optimizer_state returned for this model and optimizer");
  }
  for (size_t i = 0; i < O.size(); ++i) {
    if (state[i].shape() != whole_shape(O[i]) || state[i].dtype() != O[i].dtype()) {
      throw Error(state[i].dtype() != O[i].dtype() ? ErrorCode::kDTypeMismatch : ErrorCode::kShapeMismatch,
                  fmt::format("set_optimizer_state: optimizer variable {} is {} {}, the array is {} {}", i,
                              dtype_name(O[i].dtype()), shape_to_string(whole_shape(O[i])),
                              dtype_name(state[i].dtype()), shape_to_string(state[i].shape())));
    }
  }
  for (size_t i = 0; i < O.size(); ++i) {
    O[i] = !target().host_memory() ? target().to_target(to_host(state[i]))
                                   : device_put(state_part(state[i], O[i].sharding()).clone(), O[i].sharding());
  }
}

double Model::Trainer::learning_rate() {
  return options.optimizer->current_learning_rate(host_state(optimizer_state("learning_rate")));
}

void Model::Trainer::set_learning_rate(double value) {
  O = options.optimizer->with_learning_rate(host_state(optimizer_state("set_learning_rate")), value);
}

std::vector<Array> Model::Trainer::host_state(const std::vector<Array>& state) const {
  std::vector<Array> out;
  for (const Array& a : state) out.push_back(on_host(a));
  return out;
}

const std::vector<Array>& Model::Trainer::optimizer_state(const char* who) const {
  if (!options.optimizer || O.empty()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("{}: the model has no optimizer state yet", who),
                "compile with an optimizer; the state exists once fit has built the model");
  }
  return O;
}

Array& Model::Trainer::state_of(Variable* v) {
  for (size_t i = 0; i < trainable.size(); ++i) {
    if (trainable[i] == v) return T[i];
  }
  for (size_t i = 0; i < non_trainable.size(); ++i) {
    if (non_trainable[i] == v) return NT[i];
  }
  throw Error(ErrorCode::kNotFound, fmt::format("variable '{}' is not in the model's state", v->name()));
}

}  // namespace ingot
