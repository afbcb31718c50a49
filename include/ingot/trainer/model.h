// Models (keras.Model, keras.Sequential): a layer made of tracked sublayers, built by inferring
// shapes from an input shape (no data consumed), with a pure forward function for the trainer
// and compiled prediction. compile/fit/evaluate arrive with the trainer (docs/trainer.md).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/jit/jit.h"
#include "ingot/jit/spmd.h"
#include "ingot/trainer/callbacks.h"
#include "ingot/trainer/data.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trainer/layers.h"
#include "ingot/trainer/logs.h"
#include "ingot/trainer/losses.h"
#include "ingot/trainer/metrics.h"
#include "ingot/trainer/optimizers.h"
#include "ingot/trainer/step_state.h"

namespace ingot {

class CudaDevice;
class OutputFile;

/// Options of a model.
struct ModelOptions {
  std::string name;      ///< default "sequential" / "model"
  uint64_t seed = 1337;  ///< unseeded layers get seed + their index (reproducible weights)
  /// Keras's dtype policy of every layer: "float32", or "mixed_float16" / "mixed_bfloat16"
  /// (variables f32, computation in f16 / bf16: floating inputs and variables are converted when
  /// read, and the model's floating outputs are converted back to f32 for the loss, metrics and
  /// predict, as Keras advises with a float32 output layer). With mixed_float16 use a
  /// LossScaleOptimizer. Another name: ingot::Error(kInvalidArgument).
  std::string dtype_policy = "float32";
};

/// Model::compile's arguments (keras.Model.compile).
struct CompileOptions {
  std::shared_ptr<optimizers::Optimizer> optimizer;  ///< required for fit / train_on_batch
  /// The loss of every output (Keras's `loss=` one loss: a model with several outputs applies it
  /// to each). Give `loss` or `losses`, not both.
  std::shared_ptr<losses::Loss> loss;
  /// One loss per model output, in output order (Keras's `loss=[...]`); a null entry leaves that
  /// output without a loss (Keras's None). Its length must equal the model's outputs (checked
  /// when fit/evaluate first builds the model, kInvalidArgument).
  std::vector<std::shared_ptr<losses::Loss>> losses;
  /// Keras's `loss_weights`: the minimised loss is sum_i loss_weights[i] * loss_i (+ layer
  /// losses); empty means 1 for every output; else one finite value per output.
  std::vector<double> loss_weights;
  /// Logged in this order after the loss entries; updated without sample weights (Keras's
  /// `metrics`). For a model with one output; with several use `output_metrics`.
  std::vector<std::shared_ptr<metrics::Metric>> metrics;
  /// Logged after `metrics`; updated with the batch's sample weights (fit's sample_weight or
  /// class_weight; Keras's `weighted_metrics`). One named like an unweighted metric is logged as
  /// "weighted_<name>".
  std::vector<std::shared_ptr<metrics::Metric>> weighted_metrics;
  /// Models with several outputs: output_metrics[i] are output i's metrics (Keras's `metrics`
  /// as a list of lists), logged "<output name>_<metric name>" (output names: Model::output_names).
  /// At most one list per output (fewer: the rest have none).
  std::vector<std::vector<std::shared_ptr<metrics::Metric>>> output_metrics;
  /// The same for weighted metrics (Keras's `weighted_metrics` as a list of lists).
  std::vector<std::vector<std::shared_ptr<metrics::Metric>>> output_weighted_metrics;
  /// Steps run per call of the train function; batch hooks fire once per call with the index
  /// of its first step. >= 1.
  int64_t steps_per_execution = 1;
  /// Compile the steps (jit, donated state). false runs them with the reference interpreter, as
  /// run_eagerly does (Keras's jit_compile / run_eagerly).
  bool jit_compile = true;
  bool run_eagerly = false;
  /// Donate the state to the compiled steps (JAX's donate_argnums for the state arguments): the
  /// train step writes the new variables, optimizer slots and metric state into the old ones'
  /// buffers, and the test step the metric state. false keeps the old and the new state alive
  /// together during each step (twice the state's memory, a copy per step): for measurements
  /// (`ingot bench --variants no-donation`), not in Keras.
  bool donate_state = true;
  /// Compiler options of the compiled steps (threads of the loop nests, IR dumps; docs/compiler.md).
  codegen::CpuCompileOptions compiler;
  /// Lowering choices of the compiled steps (library GEMM / convolutions or generated loops).
  lower::LoweringOptions lowering;
  /// Where the compiled steps run (jit's JitOptions::target; ingot/jit/target.h): cpu_target() or
  /// cuda_target(device) (the device not owned, must outlive the model's loops). On a CUDA device
  /// the live state lives on the device during fit/evaluate/predict, batches are copied to it per
  /// step (overlapped by the prefetch queue), and the variables get host copies back at every sync
  /// (epoch ends, loop ends), so Model::get_weights / Variable values are always host arrays.
  /// A CUDA target needs compiled steps and no distribution; an SPMD or interpreter target is
  /// refused (use `distribution` / run_eagerly): kInvalidArgument at compile. Null: the CPU.
  std::shared_ptr<const CompileTarget> target;
  /// Several devices (keras.distribution; ingot/trainer/distribution.h): DataParallel over a
  /// DeviceMesh of a Runtime's CPU devices -- the steps are traced per device, gradients are
  /// averaged over the batch axis, batches are split over it (their sizes must be multiples of its
  /// device count) and the state is replicated -- or ModelParallel with a LayoutMap, which also
  /// splits matching trainable variables and their optimizer slots over the devices (FSDP). A
  /// DataParallel mesh may span several processes (DeviceMeshOptions::processes): each process
  /// takes its block of every batch, weights start as process 0's, and files are written by
  /// process 0 (Model::write_once). Needs compiled steps and no `target` (kInvalidArgument at
  /// compile). Null: one device. docs/distributed.md.
  std::shared_ptr<distribution::Distribution> distribution;
  /// The back end of the distribution's mesh (ingot/jit/spmd.h): empty for a mesh of CPU devices
  /// (collectives through shared memory); cuda_mesh_backend(devices, nccl) for a DeviceMesh of
  /// CUDA devices (their ingot::Devices, CudaDevice::device()) in one process: every step segment
  /// compiled once for the GPUs and loaded on each, collectives over NCCL on each device's compute
  /// stream. Only with a one-process distribution (kInvalidArgument otherwise: processes
  /// join Gloo groups of CPU devices today).
  MeshBackend mesh_backend;
  /// With a CUDA target: the CUDA compiler's options of the steps (codegen::CudaCompileOptions, e.g.
  /// `.cuda_graphs = true` to capture each step into a CUDA graph and replay it; architectures).
  codegen::CudaCompileOptions cuda;
};

/// Model::fit's arguments (keras.Model.fit). Data: arrays x/y/sample_weight, or `data` (an
/// adapter, e.g. a GeneratorDataAdapter). A model with several inputs takes x as a list
/// (`.x = {a, b}`, input order), one with several outputs y as a list (output order);
/// sample_weight is one array (every output) or one per output.
struct FitOptions {
  Arrays x, y, sample_weight;
  std::shared_ptr<DataAdapter> data;
  int64_t batch_size = 32;
  int64_t epochs = 1;
  int verbose = 1;  ///< 0 silent, 1 progress bar, 2 one line per epoch
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks;
  double validation_split = 0;  ///< last fraction of x/y (before shuffling)
  std::optional<Batch> validation_data;
  bool shuffle = true;                                   ///< per-epoch seeded shuffle of array data
  uint64_t seed = 0;                                     ///< shuffle seed
  std::vector<std::pair<int64_t, double>> class_weight;  ///< class -> weight (not with sample_weight)
  int64_t initial_epoch = 0;
  std::optional<int64_t> steps_per_epoch;
  std::optional<int64_t> validation_steps;
  std::optional<int64_t> validation_batch_size;  ///< default: batch_size
  int64_t validation_freq = 1;                   ///< validate every n epochs ...
  std::vector<int64_t> validation_epochs;        ///< ... or at these 1-based epochs when given
  callbacks::ProgbarLoggerOptions progbar;       ///< output stream etc. of the progress bar
  /// Prepare the next batches on a producer thread while a step runs (the contract's two-slot
  /// PrefetchQueue; training and validation batches). false prepares each batch (slicing,
  /// shuffling, the split over a distribution's devices or the copy to the CUDA device) on the
  /// calling thread right before its step, with no overlap: for measuring what prefetching gains
  /// (`ingot bench --variants no-prefetch`), not in Keras. The batches and results are the same.
  bool prefetch = true;
};

/// Model::evaluate's arguments.
struct EvaluateOptions {
  Arrays x, y, sample_weight;  ///< as FitOptions's
  std::shared_ptr<DataAdapter> data;
  int64_t batch_size = 32;
  int verbose = 1;
  std::optional<int64_t> steps;
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks;
  callbacks::ProgbarLoggerOptions progbar;
};

/// Model::predict's arguments.
struct PredictOptions {
  Arrays x;  ///< one array per model input
  std::shared_ptr<DataAdapter> data;
  int64_t batch_size = 32;
  int verbose = 0;
  std::optional<int64_t> steps;
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks;
  callbacks::ProgbarLoggerOptions progbar;
};

/// The traced tensors of one train step, for a custom Model::train_step (Keras 3's stateless
/// train_step(state, data)): the state lists come in holding the current values and must hold
/// the new ones when train_step returns.
using TrainStepState = StepState<Tensor>;

/// What Model::compute_gradients returns.
struct StepGradients {
  Tensor loss;                 ///< the batch loss (unscaled; weighted sum over the outputs)
  std::vector<Tensor> y_pred;  ///< the forward pass's outputs (training = true)
  /// Each output's loss before loss_weights (models with several outputs; empty with one).
  std::vector<Tensor> output_losses;
  std::vector<Tensor> gradients;      ///< d loss / d trainable (of the optimizer's scaled loss)
  std::vector<Tensor> non_trainable;  ///< the non-trainable variables' new values
};

/// Where the wall time of the last Model::fit went (seconds, summed over its epochs; steady
/// clock). Not in Keras: ingot's measure of the per-step overhead outside the compiled step
/// (data slicing, the sample-weight array, logs to host, callbacks), reported by `ingot train
/// --metrics-json` and compared with PyTorch's in bench/fashion_mnist_peers.sh.
struct FitTiming {
  int64_t train_steps = 0;                ///< train steps run (all epochs)
  double train_seconds = 0;               ///< the training-batch loops: from each epoch's first batch to its last hook
  double step_seconds = 0;                ///< inside the train step function, compilation excluded
  double compile_seconds = 0;             ///< tracing and compiling train steps (first call of each batch shape)
  double validation_seconds = 0;          ///< the validation passes (test steps, their compilation, hooks)
  double validation_compile_seconds = 0;  ///< the part of validation_seconds compiling test steps
  /// Under a distribution: the part of step_seconds a device spends in the train steps'
  /// collectives (all-reduce, all-gather, reduce-scatter; averaged over the devices, waiting for
  /// the slowest included). 0 on one device.
  double collective_seconds = 0;
  /// Mean seconds per train step spent outside the step function and its compilation:
  /// (train_seconds - step_seconds - compile_seconds) / train_steps; 0 before any step.
  double overhead_per_step() const {
    return train_steps > 0 ? (train_seconds - step_seconds - compile_seconds) / static_cast<double>(train_steps) : 0;
  }
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
  /// The same for a model with several inputs: one type per input, in input order (a different
  /// count than the model was built for is kShapeMismatch too).
  void build_model(const std::vector<ir::TensorType>& input_types);
  /// The first input's type the model was built for (batch size of the build call).
  const std::optional<ir::TensorType>& input_type() const { return input_type_; }
  /// The first output's type for that input (recorded by build_model).
  const std::optional<ir::TensorType>& output_type() const { return output_type_; }
  /// Every input's and output's type (empty before build_model).
  const std::vector<ir::TensorType>& input_types() const { return input_types_; }
  const std::vector<ir::TensorType>& output_types() const { return output_types_; }
  /// The outputs' names for logs (Keras's `output_names`): Functional's output layers' names;
  /// "output_1", "output_2", ... for other models with several outputs; {name()}-less
  /// {"output_1"} for one. Valid after build_model.
  virtual std::vector<std::string> output_names() const;

  /// The model's outputs for its inputs, traced (Keras's call with a list of inputs returning a
  /// list of outputs). Override it for a subclassed model with several inputs or outputs; the
  /// default runs this layer on one input (call) or a list (call_many) and returns one output.
  virtual std::vector<Tensor> call_outputs(LayerContext& ctx, const std::vector<Tensor>& inputs);
  /// A model's call on one input. Subclasses override it (single input and output) or
  /// call_outputs; this default is reached only when neither is: kFailedPrecondition naming the
  /// model.
  Tensor call(LayerContext& ctx, const Tensor& x) override;
  /// The model's forward pass under its dtype policy: floating inputs converted to the compute
  /// dtype, `ctx` told it, floating outputs converted to f32. What the trainer, predict and
  /// build call (plain `(*model)(ctx, x)` ignores the policy).
  std::vector<Tensor> forward(LayerContext& ctx, const std::vector<Tensor>& inputs);
  /// forward for a model with one input and one output (kInvalidArgument otherwise).
  Tensor forward(LayerContext& ctx, const Tensor& x);
  /// The compute dtype of the policy (f32, f16 or bf16).
  DType compute_dtype() const;
  /// The pure forward pass for tracing: arguments (every variable in variables() order, then
  /// each input), results (each output). `training` is passed to the layers.
  TraceFn forward_fn(bool training);
  /// Runs the compiled forward pass (training = false) on one batch x (batch, ...) and returns the
  /// output as a host array; builds the model first when needed. Compiles once per input shape.
  /// Errors: x's per-sample shape or dtype differs from the built model's (kShapeMismatch /
  /// kDTypeMismatch naming both); a model with several outputs (use predict_outputs_on_batch).
  Array predict_on_batch(const Arrays& x);
  /// predict_on_batch returning every output (output order).
  std::vector<Array> predict_outputs_on_batch(const Arrays& x);

  /// Copies of the values of every variable (variables() order), as host arrays; from a callback
  /// while fit/evaluate/predict runs, of the live state.
  std::vector<Array> get_weights();
  /// Assigns every variable (from a callback during a loop: the state the next step uses);
  /// checks all shapes and dtypes first (nothing changes on error: kInvalidArgument for a wrong
  /// count, kShapeMismatch naming the variable and both shapes).
  void set_weights(const std::vector<Array>& weights);

  /// Keras-style table: layer name (type), output shape, parameter count; totals.
  std::string summary();

  // ---- training (trainer/trainer.cpp; TRAINER_SEMANTICS.md) ----------------------------------
  /// Configures training. Errors (ingot::Error kInvalidArgument): no loss, steps_per_execution < 1.
  void compile(CompileOptions options);
  /// Trains; returns the History (per-epoch logs incl. "val_" entries). Errors before any step
  /// (nothing changed): not compiled or no optimizer; x/y/sample_weight sample counts differ;
  /// sample_weight with class_weight; batch_size <= 0; validation_split outside [0, 1) or
  /// leaving a side empty; inputs not matching the built model. If anything escapes (a callback's
  /// or the data's exception), the live state is written back to the variables first.
  std::shared_ptr<callbacks::History> fit(FitOptions options);
  /// Loss and metrics over the data (metric state reset first), in compile order.
  Logs evaluate(EvaluateOptions options);
  /// Outputs for every sample, batches concatenated in order. A model with several outputs:
  /// kInvalidArgument (use predict_outputs).
  Array predict(PredictOptions options);
  /// predict returning every output (Keras's list of outputs), each concatenated over batches.
  std::vector<Array> predict_outputs(PredictOptions options);
  /// One training step on one batch; returns the logs (loss and metrics of this batch alone,
  /// as Keras with reset_metrics). `class_weight` (class -> weight, as FitOptions::class_weight
  /// and Keras's train_on_batch) weighs each sample by its label's class: single-output models,
  /// not with sample_weight (ingot::Error kInvalidArgument naming the argument, as fit).
  Logs train_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight = {},
                      const std::vector<std::pair<int64_t, double>>& class_weight = {});
  /// One test step on one batch.
  Logs test_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight = {});
  /// One training step, traced (Keras: override train_step to customise training). The default
  /// is compute_gradients, apply_gradients, update_metrics; an override may change the
  /// gradients (e.g. clip them), add terms, or update state differently. Called while tracing
  /// (once per input signature), never per step.
  virtual void train_step(TrainStepState& state);
  /// The forward pass (training = true) and the compiled loss (plus layer losses) of `state`'s
  /// batch and their gradients with respect to the trainable variables.
  StepGradients compute_gradients(const TrainStepState& state);
  /// The optimizer's update: state.trainable and state.optimizer get their new values.
  void apply_gradients(TrainStepState& state, const std::vector<Tensor>& gradients);
  /// The loss trackers (weighted by batch size: the total loss, then each output's loss from
  /// `output_losses` when the model has several outputs) and the compiled metrics of every
  /// output: state.metrics updated.
  void update_metrics(TrainStepState& state, const Tensor& loss, const std::vector<Tensor>& y_pred,
                      const std::vector<Tensor>& output_losses = {});

  /// Number of input signatures the train step was traced and compiled for (the contract: at
  /// most two per batch shape family, full and ragged last batch). For tests and benchmarks.
  int64_t train_step_compile_count() const;
  /// Kernels the compiled train step runs per call, for the signature compiled last: on the CPU
  /// the top-level loop nests plus library calls of its JIT-compiled function
  /// (codegen::CpuKernelStats::kernels, bench/README.md "Kernel count"); on a CUDA device the
  /// kernel launches plus cuBLAS / convolution library calls of its CudaExecutable; under a
  /// distribution one device's program, its collectives not counted. 0 before the first
  /// compiled step and for steps run by the interpreter (run_eagerly, jit_compile false).
  int64_t train_step_kernel_count() const;
  /// Floating-point operations, transcendentals and bytes of one call of the compiled train step,
  /// for the signature compiled last (ir::cost_analysis of its traced graph: forward, backward and
  /// optimizer update; under a distribution one device's graph), as XLA's cost_analysis counts
  /// them. Zeros before the first compiled step and for interpreted steps.
  ir::CostAnalysis train_step_cost_analysis() const;
  /// Where the train step's compiles spent their time, summed over the signatures compiled
  /// (tracing, autodiff, lowering, MLIR, LLVM, link; objects, cache hits and misses, distinct
  /// kernel functions: CompileBreakdown, docs/compiler.md "Compile time"). Zeros before the first
  /// compiled step and for interpreted steps.
  CompileBreakdown train_step_compile_breakdown() const;
  /// Seconds a device has spent in the train steps' collectives since compile (under a
  /// distribution; averaged over the devices, waiting included); 0 on one device.
  double train_step_collective_seconds() const;
  /// The timing of the last fit (zeros before the first; a fit that threw keeps what it ran).
  const FitTiming& last_fit_timing() const { return fit_timing_; }
  /// Saves every variable to a safetensors file under its name (docs/trainer-weights-io.md).
  /// Under a distribution spanning several processes the file is written once, by process 0
  /// (write_once).
  void save_weights(const std::string& path);
  /// What save_weights(path) writes, into `file` (an OutputFile the caller commits, e.g. together
  /// with other outputs so that a failing one replaces none; `ingot train` does). On every process
  /// it is called on (wrap it in write_once under several processes). Errors as save_weights.
  void save_weights(OutputFile& file);
  /// This process's rank among the processes of the compiled distribution (0 without one).
  int process_id() const;
  /// Under a distribution spanning several processes: runs `write` (writing a file) on process 0
  /// only, then every process waits for it (the processes' barrier) and learns whether it worked:
  /// process 0 rethrows its error, the others throw ingot::Error(kFailedPrecondition) naming
  /// `what`. So every process can read the file once the call returns (PyTorch's rank-0 save
  /// followed by a barrier). Otherwise runs `write`. Every process must make the same calls.
  void write_once(const std::function<void()>& write, const std::string& what);
  /// Loads every variable from a safetensors file; a missing name or another shape is an
  /// ingot::Error naming the variable and both shapes, and nothing changes.
  void load_weights(const std::string& path);
  /// The optimizer given to compile (Keras's `model.optimizer`); nullptr before compile or when
  /// compiled without one. Whole-model files (model_io.h) record its class and state.
  std::shared_ptr<optimizers::Optimizer> optimizer() const;
  /// The trainer's access to the training state (what fit gives callbacks): the live state while
  /// a loop runs, the variables otherwise, and the optimizer variables, which are built here
  /// (Optimizer::build, as fit's first step would) for a built model compiled with an optimizer.
  /// nullptr before compile or predict. Used by save_model / load_model (model_io.h).
  callbacks::WeightsAccess* training_state();

 protected:
  /// Output shape of each sublayer recorded while building (for summary()).
  void record_output(const Layer& layer, const Shape& shape) { output_shapes_.emplace_back(&layer, shape); }
  /// Gives unnamed sublayers Keras-style unique names and unseeded ones seeds.
  void name_and_seed(Layer& layer);
  /// Names every unnamed layer below the model (nested sublayers too, depth first in tracking
  /// order) with a Keras name unique in the model ("dense", "dense_1", ...), and seeds unseeded
  /// ones (seed + running index). build_model calls it first, so subclassed models' layers get
  /// distinct variable names ("<layer>/<weight>") and distinct initial weights.
  void name_nested_layers();

 private:
  void check_input(const Arrays& x) const;
  bool trainer_live() const;                    // a loop holds the state (trainer/trainer.cpp)
  callbacks::WeightsAccess& trainer_weights();  // the running loop's weight access

  ModelOptions options_;
  std::optional<ir::TensorType> input_type_, output_type_;
  std::vector<ir::TensorType> input_types_, output_types_;
  std::vector<std::pair<const Layer*, Shape>> output_shapes_;
  std::optional<Jitted> predict_;
  int64_t layer_count_ = 0;
  FitTiming fit_timing_;

 public:
  struct Trainer;  // compiled step functions and live state (trainer/trainer.cpp)

 private:
  std::shared_ptr<Trainer> trainer_;
};

/// keras.Sequential: layers applied in order.
class Sequential : public Model {
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

/// keras.Model(inputs, outputs): the functional API. `outputs` must be made from `inputs` by
/// layer calls (merge layers join branches). Several inputs and outputs are lists (Keras's
/// `Model(inputs=[a, b], outputs=[c, d])`): fit then takes x and y as lists in these orders.
/// Layers are tracked in call order; unnamed ones get Keras names.
class Functional final : public Model {
 public:
  /// Errors (ingot::Error kInvalidArgument): an empty tensor or list, an input listed twice, or
  /// an output not reachable from `inputs` (naming the input it reaches instead).
  Functional(KerasTensor inputs, KerasTensor outputs, ModelOptions options = {});
  Functional(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs, ModelOptions options = {});
  std::string class_name() const override { return "Functional"; }
  /// One input, one output (kInvalidArgument otherwise: call_outputs takes the lists).
  Tensor call(LayerContext& ctx, const Tensor& x) override;
  std::vector<Tensor> call_outputs(LayerContext& ctx, const std::vector<Tensor>& inputs) override;
  /// The layers producing the outputs, by name (Keras's output_names).
  std::vector<std::string> output_names() const override;
  /// The layers in call order (Keras's `model.layers`, without the Input layers).
  const std::vector<std::shared_ptr<Layer>>& layers() const { return sublayers(); }

 private:
  std::vector<KerasTensor> inputs_, outputs_;
  std::vector<std::shared_ptr<const KerasTensor::Node>> order_;  ///< layer nodes, inputs first
};

}  // namespace ingot
