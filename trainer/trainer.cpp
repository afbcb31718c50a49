// The trainer's public calls: Model::compile / fit / evaluate / predict / *_on_batch (the
// weights I/O: trainer_weights.cpp), with explicit, donated state (TRAINER_SEMANTICS.md; behaviour of the Keras 3 JAX
// trainer in shared/reference/). Model::Trainer (trainer_state.h) holds what they run.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <chrono>
#include <cmath>
#include <iostream>

#include "ingot/trainer/safetensors.h"
#include "fit_arguments.h"
#include "rows.h"
#include "trainer_state.h"

namespace ingot {

using detail::check_fit_options;
using detail::fit_arrays;
using detail::FitArrays;
using detail::concat_rows;

// ---- loops' state scope -------------------------------------------------------------------------

namespace {

/// The state of one loop (evaluate, predict, *_on_batch; fit manages its own): takes the state
/// out of the variables when no loop holds it and gives it back at the end. Nested in a running
/// fit (called from a callback) it works on the live state and restores the metric state, so the
/// outer loop goes on unaffected.
class LoopScope {
 public:
  explicit LoopScope(Model::Trainer& t) : t_(t), owner_(!t.live), saved_m_(t.M) {
    if (owner_) t_.begin_loop();
  }
  ~LoopScope() {
    if (owner_) {
      t_.sync();
    } else {
      t_.M = saved_m_;
    }
  }
  LoopScope(const LoopScope&) = delete;
  LoopScope& operator=(const LoopScope&) = delete;

 private:
  Model::Trainer& t_;
  bool owner_;
  std::vector<Array> saved_m_;
};

}  // namespace

// ---- compile ---------------------------------------------------------------------------------

namespace {

/// compile's target: the CPU or a CUDA device; a CUDA device needs compiled steps and no
/// distribution (a distribution runs on its mesh's CPU devices).
void check_compile_target(const CompileOptions& o) {
  const bool compiled = o.jit_compile && !o.run_eagerly;
  if (o.distribution && (!compiled || (o.target && o.target->kind() != TargetKind::kCpu))) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compile: a distribution needs compiled steps on CPU devices, but {} was given",
                            !compiled ? "run_eagerly or jit_compile = false" : "target " + o.target->name()),
                "drop the distribution, or compile the steps for the CPU devices of its mesh");
  }
  if ((o.mesh_backend.target || o.mesh_backend.communicators) && !o.distribution) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compile: mesh_backend {} needs a distribution, but none was given", o.mesh_backend.name),
                "give a distribution whose DeviceMesh holds the backend's devices, or drop mesh_backend");
  }
  if (o.distribution && !o.mesh_backend.target) {
    for (const Device* d : o.distribution->device_mesh().mesh().devices()) {
      if (d->kind() != DeviceKind::kCpu) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("compile: the distribution's mesh holds {}, but no mesh_backend was given", d->name()),
                    "pass mesh_backend = cuda_mesh_backend(devices, nccl) for a mesh of CUDA devices");
      }
    }
  }
  if (!o.target) return;
  if (o.target->kind() == TargetKind::kSpmd || o.target->kind() == TargetKind::kInterpreter) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("compile: target {} is not a device", o.target->name()),
                "pass cpu_target() or cuda_target(device); use `distribution` for several devices and "
                "run_eagerly for the interpreter");
  }
  if (o.target->kind() == TargetKind::kCuda && !compiled) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compile: target {} needs compiled steps, but run_eagerly / jit_compile = false was given",
                            o.target->name()),
                "the interpreter runs on the host: drop the CUDA target, or compile the steps");
  }
}

/// compile's multi-output options that need no model: loss xor losses, finite loss weights, no
/// null metric.
void check_compile_outputs(const CompileOptions& o) {
  if (o.loss && !o.losses.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "compile: both loss and losses were given",
                "pass .loss (every output) or .losses (one per output), not both");
  }
  for (size_t i = 0; i < o.loss_weights.size(); ++i) {
    if (!std::isfinite(o.loss_weights[i])) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("compile: loss_weights[{}] is {}", i, o.loss_weights[i]),
                  "loss weights must be finite numbers");
    }
  }
  for (const auto* lists : {&o.output_metrics, &o.output_weighted_metrics}) {
    for (size_t i = 0; i < lists->size(); ++i) {
      for (size_t j = 0; j < (*lists)[i].size(); ++j) {
        if (!(*lists)[i][j]) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("compile: {}[{}][{}] is null",
                                  lists == &o.output_metrics ? "output_metrics" : "output_weighted_metrics", i, j));
        }
      }
    }
  }
}

}  // namespace

void Model::compile(CompileOptions options) {
  if (!options.loss && options.losses.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "compile: no loss",
                "pass .loss = losses::get(\"sparse_categorical_crossentropy\") or a Loss object (or .losses, one per "
                "output)");
  }
  if (options.steps_per_execution < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compile: steps_per_execution must be >= 1, got {}", options.steps_per_execution));
  }
  for (size_t i = 0; i < options.metrics.size(); ++i) {
    if (!options.metrics[i]) throw Error(ErrorCode::kInvalidArgument, fmt::format("compile: metric {} is null", i));
  }
  for (size_t i = 0; i < options.weighted_metrics.size(); ++i) {
    if (!options.weighted_metrics[i]) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("compile: weighted metric {} is null", i));
    }
  }
  check_compile_outputs(options);
  check_compile_target(options);
  if (trainer_ && (trainer_->fitting || trainer_->live)) {
    throw Error(ErrorCode::kFailedPrecondition,
                "compile called while fit/evaluate/predict is running (from a callback?)",
                "compile before or after the loop");
  }
  auto trainer = std::make_shared<Trainer>();
  trainer->model = this;
  trainer->compiled_by_user = true;
  trainer->options = std::move(options);
  // A built model's outputs are known: losses, loss_weights and metrics are checked against them
  // now (else when fit/evaluate builds it); a failed compile keeps the previous configuration.
  if (!input_types().empty()) trainer->configure_outputs();
  trainer_ = std::move(trainer);
}

namespace {

/// Under a distribution, refuses array data whose batches do not all split over the batch axis
/// (each batch's sample count a multiple of its device count), before any step runs: full batches
/// of `batch_size` and the last one of n % batch_size samples. Adapters (generators) are checked
/// batch by batch when each comes.
void check_distributed_batches(const Model::Trainer& t, const Arrays& x, int64_t batch_size, const char* who) {
  if (!t.options.distribution || !x.valid() || x[0].rank() == 0 || batch_size <= 0) return;
  const distribution::Distribution& d = *t.options.distribution;
  const int64_t n = x[0].shape()[0], devices = d.batch_axis_size();
  for (const int64_t size : {n >= batch_size ? batch_size : int64_t{0}, n % batch_size}) {
    if (size % devices != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} samples in batches of {} give a batch of {}, which does not split over the {} "
                              "devices of mesh axis '{}' ({})",
                              who, n, batch_size, size, devices, d.batch_dim_name(), d.class_name()),
                  fmt::format("use a batch size and a sample count that are multiples of {}", devices));
    }
  }
}

/// The adapter of array data or the given one; checks the arguments first.
std::shared_ptr<DataAdapter> make_adapter(const Arrays& x, const Arrays& y, const Arrays& sw,
                                          const std::shared_ptr<DataAdapter>& data, int64_t batch_size, bool shuffle,
                                          uint64_t seed, const char* who) {
  if (data) {
    for (const auto& [name, arrays] : {std::pair{"x", &x}, std::pair{"y", &y}, std::pair{"sample_weight", &sw}}) {
      if (arrays->valid()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: both a data adapter and {} were given", who, name),
                    "the adapter's batches carry x, y and sample_weight: pass either .data or the arrays");
      }
    }
    return data;
  }
  if (!x.valid()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: no data (x is empty and no data adapter)", who),
                "pass x (and y), or .data");
  }
  return std::make_shared<ArrayDataAdapter>(x, y, sw, batch_size, shuffle, seed);
}

}  // namespace

// ---- fit -------------------------------------------------------------------------------------

namespace {

/// One test pass over `it` with fresh metric state (Keras's evaluate loop; fit's validation runs
/// this same pass): the test hooks fire once per steps_per_execution batches, on_test_batch_begin
/// with the call's first batch index and on_test_batch_end with its last (Keras 3's
/// begin_step / end_step); stop_evaluating ends the pass after the current call. Returns the
/// last call's logs (on_test_end gets them too).
Logs test_pass(Model::Trainer& t, callbacks::CallbackList& cbs, EpochIterator& it) {
  t.M = t.initial_metric_state();
  cbs.control().stop_evaluating = false;
  cbs.on_test_begin({});
  it.begin_epoch(0);
  Logs logs;
  int64_t step = 0;
  // The next batch is taken before the hooks fire, so no hook fires for exhausted data.
  std::optional<Batch> b = it.next();
  while (b && !cbs.control().stop_evaluating) {
    cbs.on_test_batch_begin(step, {});
    for (int64_t k = 0; k < t.options.steps_per_execution && b; ++k, ++step, b = it.next()) logs = t.test_batch(*b);
    cbs.on_test_batch_end(step - 1, logs);
  }
  it.stop();
  cbs.on_test_end(logs);
  return logs;
}

std::vector<ir::TensorType> types_of(const Arrays& x) {
  std::vector<ir::TensorType> out;
  for (const Array& a : x) out.push_back({a.shape(), a.dtype()});
  return out;
}

/// Array data against the model's inputs and outputs (before any step): one x per input, one y
/// per output (when given), one sample weight or one per output.
void check_data_counts(const Model::Trainer& t, const Arrays& x, const Arrays& y, const Arrays& sw, const char* who) {
  if (x.valid() && x.size() != t.n_in) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} x arrays for model '{}' with {} inputs", who, x.size(), t.model->name(), t.n_in),
                "pass one array per model input, in input order");
  }
  if (y.valid() && y.size() != t.n_out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} y arrays for model '{}' with {} outputs ({})", who, y.size(), t.model->name(),
                            t.n_out, fmt::join(t.model->output_names(), ", ")),
                "pass one target array per model output, in output order");
  }
  if (sw.size() > 1 && sw.size() != t.n_out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} sample_weight arrays for model '{}' with {} outputs", who, sw.size(),
                            t.model->name(), t.n_out),
                "pass one sample_weight (for every output) or one per output");
  }
}

/// Whether fit validates after 0-based `epoch`: every validation_freq epochs, or at the 1-based
/// epochs listed in validation_epochs (Keras's validation_freq as an int or a list).
bool validates_after(const FitOptions& o, int64_t epoch) {
  if (o.validation_epochs.empty()) return (epoch + 1) % o.validation_freq == 0;
  return std::find(o.validation_epochs.begin(), o.validation_epochs.end(), epoch + 1) != o.validation_epochs.end();
}

/// One epoch's training batches from `it` (begun for the epoch): calls of steps_per_execution
/// train steps, on_train_batch_begin with the call's first step and on_train_batch_end with its
/// last (Keras 3's begin_step / end_step); stop_training ends the epoch after the current call.
/// `logs` holds the last call's logs. Returns the steps trained.
int64_t train_pass(Model::Trainer& t, callbacks::CallbackList& cbs, EpochIterator& it, Logs& logs) {
  int64_t step = 0;
  // The next batch is taken before the batch hooks fire, so no hook fires for a call that finds
  // the data exhausted.
  std::optional<Batch> b = it.next();
  while (b && !cbs.control().stop_training) {
    cbs.on_train_batch_begin(step, {});
    for (int64_t k = 0; k < t.options.steps_per_execution && b; ++k, ++step, b = it.next()) logs = t.train_batch(*b);
    cbs.on_train_batch_end(step - 1, logs);
  }
  return step;
}

/// fit's validation after an epoch, as Keras's fit calls evaluate with the same callbacks: the
/// test pass over `val_it` (the test hooks fire, the progress bar stays quiet inside fit,
/// stop_evaluating ends it early) on fresh metric state, the training metric state restored
/// after. Adds its logs to `epoch_logs` prefixed "val_" and its time to `timing`.
void validate(Model::Trainer& t, callbacks::CallbackList& cbs, EpochIterator& val_it, Logs& epoch_logs,
              FitTiming& timing) {
  const auto start = std::chrono::steady_clock::now();
  const double compile0 = t.test_fn->compile_seconds;
  const std::vector<Array> train_m = t.M;
  const Logs vl = test_pass(t, cbs, val_it);
  for (const auto& [name, value] : vl) epoch_logs.set("val_" + name, value);
  t.M = train_m;
  timing.validation_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  timing.validation_compile_seconds += t.test_fn->compile_seconds - compile0;
}

/// Clears the trainer's fitting flag however fit ends.
struct FittingFlag {
  explicit FittingFlag(bool& flag) : flag_(flag) { flag_ = true; }
  ~FittingFlag() { flag_ = false; }
  FittingFlag(const FittingFlag&) = delete;
  FittingFlag& operator=(const FittingFlag&) = delete;
  bool& flag_;
};

/// Shows the train and test steps' compile progress on `stream` while it lives (fit: a compile
/// taking over a second shows where the progress bar goes); null shows nothing.
struct ShowCompiles {
  Model::Trainer& t;
  ShowCompiles(Model::Trainer& trainer, std::ostream* stream) : t(trainer) {
    t.train_fn->show_compiles_on(stream);
    t.test_fn->show_compiles_on(stream);
  }
  ~ShowCompiles() {
    t.train_fn->show_compiles_on(nullptr);
    t.test_fn->show_compiles_on(nullptr);
  }
  ShowCompiles(const ShowCompiles&) = delete;
  ShowCompiles& operator=(const ShowCompiles&) = delete;
};

/// fit's share of the train step's time counters (FitTiming): what they held when the fit began.
struct TrainTimer {
  const Model::Trainer& t;
  const double run0, compile0, collective0;
  explicit TrainTimer(const Model::Trainer& trainer)
      : t(trainer),
        run0(t.train_fn->run_seconds),
        compile0(t.train_fn->compile_seconds),
        collective0(t.train_fn->collective_seconds()) {}
  /// Adds an epoch of `steps` train steps whose loop started at `loop_start` to `timing`, and
  /// sets the step, compile and collective seconds spent since the fit began.
  void add_epoch(FitTiming& timing, int64_t steps, std::chrono::steady_clock::time_point loop_start) const {
    timing.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
    timing.train_steps += steps;
    timing.step_seconds = t.train_fn->run_seconds - run0;
    timing.compile_seconds = t.train_fn->compile_seconds - compile0;
    timing.collective_seconds = t.train_fn->collective_seconds() - collective0;
  }
};

/// fit's validation batches (validation_data or the validation_split part), or null without.
/// Errors (kInvalidArgument, "fit: validation_data"): no y, an adapter's argument errors.
std::unique_ptr<EpochIterator> validation_iterator(Model::Trainer& t, const FitOptions& o,
                                                   const std::optional<Batch>& val) {
  if (!val) return nullptr;
  if (!val->y.valid()) throw Error(ErrorCode::kInvalidArgument, "fit: validation_data has no y", "pass Batch{x, y}");
  try {
    return std::make_unique<EpochIterator>(
        std::make_shared<ArrayDataAdapter>(val->x, val->y, val->sample_weight,
                                           o.validation_batch_size.value_or(o.batch_size), false),
        o.validation_steps, t.distribute(true), "validation_steps", o.prefetch);
  } catch (const Error& e) {
    throw e.with_context("fit: validation_data");
  }
}

/// fit's validation data fits the built model: its inputs, sample counts and labels (before any
/// epoch trains). Errors carry the context "fit: validation_data".
void check_validation_data(Model& m, Model::Trainer& t, const Batch& val) {
  try {
    m.build_model(types_of(val.x));
    check_data_counts(t, val.x, val.y, val.sample_weight, "fit: validation_data");
    t.check_labels(val.y);
  } catch (const Error& e) {
    throw e.with_context("fit: validation_data");
  }
}

}  // namespace

std::shared_ptr<callbacks::History> Model::fit(FitOptions o) {
  if (!trainer_ || !trainer_->compiled_by_user) {
    throw Error(ErrorCode::kFailedPrecondition, "fit before compile", "call model.compile(...) first");
  }
  Trainer& t = *trainer_;
  if (t.fitting) {
    throw Error(ErrorCode::kFailedPrecondition, "fit called while this model's fit is running (from a callback?)",
                "evaluate, predict and test_on_batch may run from callbacks; fit may not");
  }
  if (!t.options.optimizer) throw Error(ErrorCode::kFailedPrecondition, "fit: compile() was given no optimizer");
  check_fit_options(o);
  FitArrays arrays = fit_arrays(o);
  Arrays &x = arrays.x, &y = arrays.y, &sw = arrays.sample_weight;
  std::optional<Batch>& val = arrays.validation;
  check_distributed_batches(t, x, o.batch_size, "fit");
  if (val)
    check_distributed_batches(t, val->x, o.validation_batch_size.value_or(o.batch_size), "fit (validation data)");
  std::shared_ptr<DataAdapter> adapter = make_adapter(x, y, sw, o.data, o.batch_size, o.shuffle, o.seed, "fit");
  if (o.data && !o.class_weight.empty()) adapter = class_weighted(adapter, o.class_weight);
  EpochIterator it(adapter, o.steps_per_epoch, t.distribute(true), "steps_per_epoch", o.prefetch);
  std::unique_ptr<EpochIterator> val_it = validation_iterator(t, o, val);
  // The build pass: shapes only, no batch consumed. Validation inputs and labels are checked
  // now too, so no error surfaces after an epoch has trained.
  build_model(adapter->x_types());
  t.prepare();
  check_data_counts(t, x, y, sw, "fit");
  t.check_labels(y);
  if (val) check_validation_data(*this, t, *val);

  callbacks::CallbackList cbs(o.callbacks,
                              {.add_history = true,
                               .add_progbar = true,
                               .params = {.epochs = o.epochs, .steps = it.num_steps(), .verbose = o.verbose},
                               .model = this,
                               .weights = &t,
                               .progbar = o.progbar});
  FittingFlag fitting(t.fitting);
  // A compile taking over a second shows its progress where the progress bar goes.
  std::ostream* notices =
      o.verbose != 0 && process_id() == 0 ? (o.progbar.stream ? o.progbar.stream : &std::cout) : nullptr;
  const ShowCompiles show_compiles(t, notices);
  Logs logs;
  fit_timing_ = {};
  const TrainTimer timer(t);
  try {
    t.begin_loop();
    cbs.on_train_begin({});
    // A callback (BackupAndRestore) may resume an interrupted run at a later epoch.
    const int64_t first_epoch = cbs.control().initial_epoch.value_or(o.initial_epoch);
    cbs.control().initial_epoch.reset();
    for (int64_t epoch = first_epoch; epoch < o.epochs && !cbs.control().stop_training; ++epoch) {
      t.begin_loop();  // takes the state back from the variables (synced at the last epoch's end)
      t.M = t.initial_metric_state();
      cbs.on_epoch_begin(epoch, {});
      it.begin_epoch(epoch);
      const auto loop_start = std::chrono::steady_clock::now();
      const int64_t steps = train_pass(t, cbs, it, logs);
      timer.add_epoch(fit_timing_, steps, loop_start);
      it.stop();
      Logs epoch_logs = logs;
      if (val_it && validates_after(o, epoch)) validate(t, cbs, *val_it, epoch_logs, fit_timing_);
      t.sync();                                    // callbacks and the user see (and may assign) this epoch's weights
      logs = cbs.on_epoch_end(epoch, epoch_logs);  // with the entries callbacks added (learning_rate)
    }
  } catch (const Error& e) {
    it.stop();
    if (val_it) val_it->stop();
    if (!t.sync_after_failure()) throw t.state_lost(e);
    throw;  // nothing trained is lost
  } catch (...) {
    it.stop();
    if (val_it) val_it->stop();
    t.sync_after_failure();
    throw;
  }
  t.begin_loop();
  t.T = t.options.optimizer->finalize_variable_values(t.host_state(t.O), t.host_state(t.T));  // EMA (use_ema)
  t.sync();
  cbs.on_train_end(logs);
  return cbs.history();
}

// ---- evaluate / predict / *_on_batch -----------------------------------------------------------

namespace {

/// The callbacks of one evaluate or predict pass (Keras: no History; a progress bar unless quiet).
template <class Options>
callbacks::CallbackList one_pass_callbacks(const Options& o, const EpochIterator& it, Model& model, Model::Trainer& t) {
  return callbacks::CallbackList(o.callbacks, {.add_history = false,
                                               .add_progbar = true,
                                               .params = {.epochs = 1, .steps = it.num_steps(), .verbose = o.verbose},
                                               .model = &model,
                                               .weights = &t,
                                               .progbar = o.progbar});
}

}  // namespace

Logs Model::evaluate(EvaluateOptions o) {
  if (!trainer_ || !trainer_->compiled_by_user) {
    throw Error(ErrorCode::kFailedPrecondition, "evaluate before compile", "call model.compile(...) first");
  }
  Trainer& t = *trainer_;
  if (!o.data && !o.y.valid())
    throw Error(ErrorCode::kInvalidArgument, "evaluate: no targets y", "pass .y with the labels");
  check_distributed_batches(t, o.x, o.batch_size, "evaluate");
  std::shared_ptr<DataAdapter> adapter =
      make_adapter(o.x, o.y, o.sample_weight, o.data, o.batch_size, false, 0, "evaluate");
  EpochIterator it(adapter, o.steps, t.distribute(true), "steps");
  build_model(adapter->x_types());
  t.prepare();
  check_data_counts(t, o.x, o.y, o.sample_weight, "evaluate");
  t.check_labels(o.y);
  callbacks::CallbackList cbs = one_pass_callbacks(o, it, *this, t);
  LoopScope scope(t);
  try {
    return test_pass(t, cbs, it);
  } catch (...) {
    it.stop();
    throw;
  }
}

Array Model::predict(PredictOptions o) {
  std::vector<Array> out = predict_outputs(std::move(o));
  if (out.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("predict: model '{}' has {} outputs", name(), out.size()),
                "use predict_outputs for the list of outputs");
  }
  return out[0];
}

std::vector<Array> Model::predict_outputs(PredictOptions o) {
  if (!trainer_) {  // predict needs no compile (Keras): a trainer without loss, optimizer or metrics
    trainer_ = std::make_shared<Trainer>();
    trainer_->model = this;
  }
  Trainer& t = *trainer_;
  check_distributed_batches(t, o.x, o.batch_size, "predict");
  std::shared_ptr<DataAdapter> adapter =
      make_adapter(o.x, Arrays(), Arrays(), o.data, o.batch_size, false, 0, "predict");
  EpochIterator it(adapter, o.steps, t.distribute(false), "steps");
  build_model(adapter->x_types());
  if (t.compiled_by_user) {
    t.prepare();
  } else {
    t.prepare_predict();
  }
  check_data_counts(t, o.x, Arrays(), Arrays(), "predict");
  callbacks::CallbackList cbs = one_pass_callbacks(o, it, *this, t);
  std::vector<std::vector<Array>> parts(output_types().size());
  LoopScope scope(t);
  try {
    cbs.on_predict_begin({});
    it.begin_epoch(0);
    int64_t step = 0;
    const int64_t per_call = t.compiled_by_user ? t.options.steps_per_execution : 1;
    std::optional<Batch> b = it.next();
    while (b && !cbs.control().stop_predicting) {
      cbs.on_predict_batch_begin(step, {});
      for (int64_t k = 0; k < per_call && b; ++k, ++step, b = it.next()) {
        if (b->x.size() != t.n_in) {
          throw Error(
              ErrorCode::kInvalidArgument,
              fmt::format("predict: a batch has {} x arrays; model '{}' has {} inputs", b->x.size(), name(), t.n_in),
              "yield one array per model input");
        }
        const StepState<Array> state{.trainable = t.T, .non_trainable = t.NT, .x = b->x.list()};
        std::vector<Array> out = (*t.predict_fn)(t.step_arguments(StepLayout::predict_arguments(t.sizes()), state));
        for (size_t i = 0; i < parts.size(); ++i) parts[i].push_back(out.at(i));
      }
      cbs.on_predict_batch_end(step - 1, {});  // Keras: the last step of the call
    }
    it.stop();
  } catch (...) {
    it.stop();
    throw;
  }
  cbs.on_predict_end({});
  std::vector<Array> out;
  for (const std::vector<Array>& p : parts) out.push_back(concat_rows(p, t.target()));
  return out;
}

namespace {

/// train_on_batch / test_on_batch: one step on one batch with fresh metric state.
Logs run_on_batch(Model& model, Model::Trainer& t, bool train, const Arrays& x, const Arrays& y, const Arrays& sw) {
  const char* who = train ? "train_on_batch" : "test_on_batch";
  if (!y.valid())
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: no targets y", who), "pass y with the labels");
  // The array adapter's checks (samples, sample_weight rank) on this one batch.
  const int64_t rows = x.valid() && x[0].valid() && x[0].rank() > 0 ? x[0].shape()[0] : 1;
  ArrayDataAdapter check(x, y, sw, std::max<int64_t>(1, rows), false);
  model.build_model(check.x_types());
  t.prepare();
  check_data_counts(t, x, y, sw, who);
  t.check_labels(y);
  LoopScope scope(t);
  t.M = t.initial_metric_state();
  const auto host = [](const Arrays& a) {
    std::vector<Array> out;
    for (const Array& e : a) out.push_back(to_host(e));
    return Arrays(std::move(out));
  };
  const Batch batch{host(x), host(y), host(sw)};
  return train ? t.train_batch(batch) : t.test_batch(batch);
}

}  // namespace

Logs Model::train_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight,
                           const std::vector<std::pair<int64_t, double>>& class_weight) {
  if (!trainer_ || !trainer_->compiled_by_user) {
    throw Error(ErrorCode::kFailedPrecondition, "train_on_batch before compile", "call model.compile(...) first");
  }
  if (!trainer_->options.optimizer) {
    throw Error(ErrorCode::kFailedPrecondition, "train_on_batch: compile() was given no optimizer");
  }
  if (class_weight.empty()) return run_on_batch(*this, *trainer_, true, x, y, sample_weight);
  detail::check_class_weight("train_on_batch", class_weight);
  if (!sample_weight.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "train_on_batch: sample_weight and class_weight were both given",
                "pass one of them (class_weight becomes per-sample weights)");
  }
  if (y.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("train_on_batch: class_weight with {} outputs' targets", y.size()),
                "class_weight is for single-output models (as Keras); pass sample_weight per output instead");
  }
  return run_on_batch(*this, *trainer_, true, x, y, Arrays(class_weights_to_sample_weights(y[0], class_weight)));
}

Logs Model::test_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight) {
  if (!trainer_ || !trainer_->compiled_by_user) {
    throw Error(ErrorCode::kFailedPrecondition, "test_on_batch before compile", "call model.compile(...) first");
  }
  return run_on_batch(*this, *trainer_, false, x, y, sample_weight);
}

bool Model::trainer_live() const { return trainer_ && trainer_->live; }
callbacks::WeightsAccess& Model::trainer_weights() { return *trainer_; }

std::shared_ptr<optimizers::Optimizer> Model::optimizer() const {
  return trainer_ ? trainer_->options.optimizer : nullptr;
}

callbacks::WeightsAccess* Model::training_state() {
  if (!trainer_) return nullptr;
  if (input_type() && trainer_->options.optimizer) trainer_->prepare();  // builds the optimizer state once
  return trainer_.get();
}

double Model::train_step_collective_seconds() const {
  return trainer_ && trainer_->train_fn ? trainer_->train_fn->collective_seconds() : 0;
}

int64_t Model::train_step_kernel_count() const {
  return trainer_ && trainer_->train_fn ? trainer_->train_fn->kernel_count() : 0;
}

ir::CostAnalysis Model::train_step_cost_analysis() const {
  return trainer_ && trainer_->train_fn ? trainer_->train_fn->cost_analysis() : ir::CostAnalysis{};
}

CompileBreakdown Model::train_step_compile_breakdown() const {
  return trainer_ && trainer_->train_fn ? trainer_->train_fn->compile_breakdown() : CompileBreakdown{};
}

int64_t Model::train_step_compile_count() const {
  return trainer_ && trainer_->train_fn ? trainer_->train_fn->compile_count() : 0;
}

// ---- weights I/O -------------------------------------------------------------------------------

}  // namespace ingot
