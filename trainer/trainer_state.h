// Model::Trainer: what Model::compile configures and the loops run -- the compiled losses and
// metric slots, the step builders, the step functions, the distribution's placement and the live
// state while a loop runs (TRAINER_SEMANTICS.md; behaviour of the Keras 3 JAX trainer in
// shared/reference/). Its methods live by concern:
//   trainer_config.cpp        compile configuration: losses, loss weights, metric slots, checks
//   trainer_steps.cpp         the pure step builders (loss, train, test, predict) and
//                             Model::train_step's parts
//   trainer_distribution.cpp  placement, gradient reduction and batch splitting over a mesh
//   trainer_state.cpp         the step functions, the state's life cycle and donation, callbacks'
//                             weight access
//   trainer.cpp               compile and the loops (fit, evaluate, predict, *_on_batch), weights I/O
//
// State lists: T (trainable variables), NT (non-trainable), O (optimizer variables), M (metric
// variables: the loss tracker's, then each metric's). Step functions are traced once per input
// signature and run compiled (jit, state donated) or by the interpreter (run_eagerly); their
// flat argument and result lists are StepLayouts (ingot/trainer/step_state.h):
//   train_step  (T, NT, O, M, x..., y..., sw...) -> (T', NT', O', M', loss, metric results...)
//   test_step   (T, NT, M, x..., y..., sw...)    -> (M', loss, metric results...)
//   predict_step(T, NT, x...)                    -> (y_pred...)
// with one x per model input and one y and sample weight per model output. Internal.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ingot/runtime/communicator.h"
#include "ingot/runtime/prefetch.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/step_state.h"
#include "step_function.h"
#include "trainer_helpers.h"

namespace ingot {

struct Model::Trainer : callbacks::WeightsAccess {
  Model* model = nullptr;
  bool compiled_by_user = false;  // false: made by predict() on an uncompiled model
  CompileOptions options;
  metrics::Mean loss_tracker{"loss"};
  std::vector<Variable*> trainable, non_trainable;
  /// Per trainable variable: the path of the layer owning it, the name scope its optimizer update
  /// is recorded under (GradientLayout::scopes).
  std::vector<std::string> update_scopes;
  size_t n_in = 0, n_out = 0;                           // model inputs and outputs (prepare)
  std::vector<std::shared_ptr<losses::Loss>> out_loss;  // per output (null: none)
  std::vector<double> out_weight;                       // loss_weights per output
  /// Outputs with a loss and their trackers "<output>_loss" (several outputs only; Keras logs
  /// each output's weighted loss).
  std::vector<size_t> tracked_outputs;
  std::vector<metrics::Mean> output_loss_trackers;
  /// A compiled metric, the output it watches, whether it sees sample weights, its log name.
  struct MetricSlot {
    const metrics::Metric* metric;
    size_t output;
    bool weighted;
    std::string name;
  };
  std::vector<MetricSlot> slots;
  std::vector<Array> T, NT, O, M;  // live state while a loop runs
  /// What each optimizer variable is (Optimizer::variable_info; checked against O in prepare).
  std::vector<optimizers::OptimizerVariableInfo> optimizer_info;
  /// Under a distribution: each optimizer variable's sharding, recorded before the first step
  /// from its reference variable's (Keras's add_variable_from_reference), replicated for a global one.
  std::vector<NamedSharding> optimizer_shardings;
  bool live = false;     // T/NT hold the state (variables purged)
  bool fitting = false;  // a fit is running (nested fit/compile are refused)
  std::unique_ptr<detail::StepFunction> train_fn, test_fn, predict_fn;
  /// Where the live state and the batches are placed: CompileOptions::target, else the CPU (under
  /// a distribution the steps run on an SPMD target, whose arrays are host arrays too).
  const CompileTarget& target() const { return options.target ? *options.target : *cpu_; }
  std::shared_ptr<const CompileTarget> cpu_ = cpu_target();

  /// Under a distribution over one process's devices: one communicator per mesh device (a
  /// shared-memory group; MeshCommunicators on a mesh of several axes), for the steps' collectives.
  std::vector<std::unique_ptr<Communicator>> group;

  /// Resolves the compiled losses, loss weights and metrics against the built model's outputs
  /// (once, before the step functions exist). Errors (kInvalidArgument) name the option, its
  /// length and the model's outputs.
  void configure_outputs();

  /// The logged names after "loss": each output's loss (several outputs), then the metrics.
  std::vector<std::string> metric_names() const;

  /// How long each part of the steps' state and batch is (StepLayout).
  StepSizes sizes() const;

  size_t metric_state_size() const;
  std::vector<Array> initial_metric_state() const;

  /// New metric state after one batch: the loss trackers (weighted by the batch size), then
  /// every metric on its output. As Keras: `metrics` see no sample weights, `weighted_metrics`
  /// the batch's `sw` of their output.
  std::vector<Tensor> update_metric_state(const std::vector<Tensor>& m, const Tensor& loss,
                                          const std::vector<Tensor>& output_losses, const std::vector<Tensor>& y,
                                          const std::vector<Tensor>& y_pred, const std::vector<Tensor>& sw) const;

  static void check_count(const std::vector<Tensor>& v, size_t want, const char* what);

  /// The logged values of a metric state: the loss trackers' results, then each metric's.
  std::vector<Tensor> metric_results(const std::vector<Tensor>& m) const;

  /// update_metric_state followed by the results.
  std::vector<Tensor> update_metrics(const std::vector<Tensor>& m, const Tensor& loss,
                                     const std::vector<Tensor>& output_losses, const std::vector<Tensor>& y,
                                     const std::vector<Tensor>& y_pred, const std::vector<Tensor>& sw) const;

  /// The forward pass and the loss over StepLayout::loss_arguments (T, NT, x..., y..., sw..., O...;
  /// O only when `scaled`):
  ///   [objective, NT'..., loss, output losses..., y_pred...]
  /// where loss = sum_i loss_weights[i] * loss_i(y_i, y_pred_i, sw_i) + the layers' losses, the
  /// output losses are the weighted loss_i of each output with a loss (several outputs only; what
  /// Keras logs as "<output>_loss"), and the objective is the loss, or with `scaled` (the train
  /// step; the optimizer's variables follow the batch) the optimizer's scaled loss, so the
  /// gradient is taken of the scaled loss while logs and metrics see the unscaled one.
  TraceFn loss_fn(bool training, bool scaled = false) const;

  /// Binds the model's variables to the step's T (split ones all-gathered: gathered()) and NT.
  void bind_variables(LayerContext& ctx, const StepState<Tensor>& s) const;

  /// Whether trainable variable i is split over the mesh (FSDP): its state is one block per device.
  bool is_split(size_t i) const;

  /// The mesh axes trainable variable i is split over (one per split dimension; none: replicated).
  std::vector<std::string> split_axes(size_t i) const;

  /// The number of devices holding each block of trainable variable i: the product of the sizes of
  /// the mesh axes it is not split over (1 for a variable split over every axis).
  int64_t copies(size_t i) const;

  /// Trainable variable i's whole value in the traced per-device step: its block all-gathered
  /// along each split dimension over that dimension's mesh axis (all_gather tiles dimension 0: the
  /// others are moved there and back), else as is.
  Tensor gathered(size_t i, const Tensor& block) const;

  /// The sum of `x` over every device of the mesh (one all_reduce per axis).
  Tensor sum_over_mesh(const Tensor& x) const;

  /// The shardings of the state entries of `layout` (its first state_size() entries), as
  /// recorded before the first step: T each variable's, NT each variable's (replicated under a
  /// distribution), O each optimizer variable's (optimizer_shardings: its reference variable's),
  /// M replicated.
  std::vector<NamedSharding> state_shardings(const StepLayout& layout) const;

  /// Checks the optimizer's description of its variables against the ones it built and, under a
  /// distribution, records each one's sharding. Throws ingot::Error(kInvalidArgument) naming the
  /// optimizer and the entry for a description of another length, a reference out of range, or a
  /// referenced variable of another shape than its reference.
  void describe_optimizer_state();

  /// Under a distribution: before + all_reduce(after - before) over the batch axis: each state's
  /// per-device change summed ("sum": metric totals and counts) or averaged ("mean").
  std::vector<Tensor> combined(const std::vector<Tensor>& before, const std::vector<Tensor>& after,
                               const std::string& reduction) const;
  /// Under a distribution: the non-trainable variables' new values combined by each variable's
  /// aggregation (kMean, kSum: combined(); kOnlyFirstReplica: the device's own, equal on all).
  std::vector<Tensor> combined_non_trainable(const std::vector<Tensor>& before, const std::vector<Tensor>& after) const;
  /// Refuses (ingot::Error kInvalidArgument, before any step) an aggregation the collectives cannot
  /// carry out: kMean of a non-float variable, kSum of a dtype other than f32, f64, i32, i64.
  void check_aggregations() const;
  /// How the batch is split over the devices (LayerContext::set_batch_shards); nullopt on one device.
  std::optional<BatchShards> batch_shards() const;

  TraceFn train_step() const;

  static void check_state(const std::vector<Tensor>& v, size_t want, const char* what);

  TraceFn test_step() const;

  TraceFn predict_step() const;

  bool compiled() const;

  /// The prefetch queue's distribution step (runs on its producer thread): on a CUDA device every
  /// batch is checked on the host (`checked`: batches with targets) and copied to the device there
  /// (CudaDevice::copy_async on the copy stream, after the compute work queued so far), so the
  /// step gets device arrays and the copy of batch i + 1 overlaps the host side of step i. None
  /// (the batch as is) on the CPU.
  PrefetchQueue<Batch>::Distribute distribute(bool checked);

  /// Every batch (arrays or a generator's): one x per input, one y per output, none, one or one
  /// sample weight per output, sparse labels in range (on the host; batches already on the CUDA
  /// device were checked by distribute()).
  void check_batch(const Batch& b) const;

  /// Sparse losses: integer labels must lie in [0, classes) (checked on the host before any
  /// step; inside a step a bad label would silently give loss 0).
  void check_labels(const Arrays& y) const;

  /// The predict step only, for a model never compiled (no loss to resolve).
  void prepare_predict();

  /// Creates the step functions once the model is built (variable lists known).
  void prepare();

  void prepare_steps();

  /// Processes of the distribution (1 without one).
  int num_processes() const;

  /// Every variable takes process 0's value (PyTorch DDP broadcasts rank 0's parameters when it
  /// wraps a model), so processes whose weights were initialised differently still train one model.
  void broadcast_variables(Communicator& processes);

  /// Takes the state out of the variables (they are purged while the loop runs).
  void begin_loop();
  /// Writes the live state back into the variables (sharing the buffers: no copy). The loop
  /// takes it again with begin_loop() before its next step (the variables may have been assigned
  /// meanwhile), so no second copy of the state ever exists.
  void sync();

  /// sync() after a step threw. A step that failed after taking its donated state (an SPMD step
  /// whose collective failed when a peer process died or timed out) leaves nothing to write back:
  /// then the live state is dropped (the loop is no longer running, the variables stay empty
  /// until loaded or assigned) and false is returned, so that the step's own error is reported.
  bool sync_after_failure();
  /// The error of a failed step that took the model's state with it (sync_after_failure false).
  static Error state_lost(const Error& e);

  /// The step state and a checked batch: x..., y..., one sample weight per output.
  StepState<Array> step_state(const Batch& batch) const;

  /// The flat arguments of `state` for a step taking `layout`. Under a distribution the state
  /// entries are placed with their recorded shardings (once: the steps return them there) and the
  /// batch entries are split over the batch axis.
  std::vector<Array> step_arguments(const StepLayout& layout, const StepState<Array>& state) const;

  /// One training step on `batch`; returns the logs (loss, then the metrics).
  Logs train_batch(const Batch& batch);

  /// A batch array split over the batch axis (as is when it already is): across processes, this
  /// process's block of rows (process p of P: rows [p * n / P, (p + 1) * n / P), every process
  /// reading the same batches), split over its devices. Throws ingot::Error(kInvalidArgument) when
  /// its sample count is not a multiple of the axis's devices (all processes').
  Array split_batch_array(const Array& a) const;

  /// Block `p` of `parts` equal blocks of `a`'s rows (a host array whose row count divides).
  static Array process_rows(const Array& a, int p, int parts);

  /// Whether a state array laid out by `s` is split over the processes too (FSDP over a mesh
  /// spanning processes: dimension 0 over the mesh's first axis, which the processes split).
  bool across_processes(const NamedSharding& s) const;

  /// This process's part of a whole state value (a host array or this process's replica) to be
  /// laid out by `s`: its block of rows when `s` splits it across the processes.
  Array state_part(const Array& whole, const NamedSharding& s) const;

  /// The whole shape of a state array (a split one's rows over all processes).
  Shape whole_shape(const Array& a) const;

  /// A host copy of a state or result array (they live on the CUDA device when there is one).
  /// Under a distribution: one copy of a replicated array; a state array split across processes
  /// is all-gathered from them (every process makes the same calls, at the same points of the
  /// loop: epoch ends, callbacks' get_weights, checkpoints).
  Array on_host(const Array& a) const;

  /// Moves any state array whose sharding differs from the one recorded before the first step
  /// back to it (Keras's JAX trainer's _enforce_jax_state_sharding): T and NT their variables',
  /// O (under a distribution) optimizer_shardings. On a CUDA device the state stays where the
  /// step put it: the device.
  void enforce_shardings();

  Logs test_batch(const Batch& batch);

  Logs logs_from(const std::vector<Array>& out, size_t at) const;

  // WeightsAccess for callbacks: the live state during a loop, the variables otherwise.
  std::vector<Array> get_weights() override;
  void set_weights(const std::vector<Array>& weights) override;
  std::vector<Array> get_optimizer_state() override;
  void set_optimizer_state(const std::vector<Array>& state) override;
  // The optimizer's learning rate for callbacks (LearningRateScheduler, ReduceLROnPlateau).
  double learning_rate() override;
  void set_learning_rate(double value) override;
  /// Host copies of state arrays (the optimizer's, for host-side reads and updates).
  std::vector<Array> host_state(const std::vector<Array>& state) const;
  const std::vector<Array>& optimizer_state(const char* who) const;
  Array& state_of(Variable* v);
};

}  // namespace ingot
