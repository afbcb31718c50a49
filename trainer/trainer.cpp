// The trainer: Model::compile / fit / evaluate / predict / *_on_batch with explicit, donated
// state (TRAINER_SEMANTICS.md; behaviour of the Keras 3 JAX trainer in shared/reference/).
//
// State lists: T (trainable variables), NT (non-trainable), O (optimizer variables), M (metric
// variables: the loss tracker's, then each metric's). Step functions are traced once per input
// signature and run compiled (jit, state donated) or by the interpreter (run_eagerly); their
// flat argument and result lists are StepLayouts (ingot/trainer/step_state.h):
//   train_step  (T, NT, O, M, x..., y..., sw...) -> (T', NT', O', M', loss, metric results...)
//   test_step   (T, NT, M, x..., y..., sw...)    -> (M', loss, metric results...)
//   predict_step(T, NT, x...)                    -> (y_pred...)
// with one x per model input and one y and sample weight per model output.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <cstring>
#include <map>

#include "ingot/autodiff/autodiff.h"
#include "ingot/interp/interpreter.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/safetensors.h"
#include "ingot/jit/jit.h"
#include "ingot/jit/spmd.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/mesh_communicator.h"
#include "ingot/runtime/shared_memory.h"
#include "ingot/runtime/spmd.h"
#include "rows.h"

namespace ingot {

namespace {

/// A step function run compiled (jit with donation) or by the reference interpreter.
class StepFunction {
 public:
  /// The SPMD mode of a step under a distribution: traced on the per-device shapes (each
  /// argument's first shard), compiled with compile_graph_spmd (the step's all_reduce nodes become
  /// collective thunks) and run by run_spmd with one communicator per device; outputs
  /// `split_outputs` and later are split over the batch axis like the batches, the others
  /// replicated. The state is donated as in the single-device step (compile_graph_spmd).
  struct Spmd {
    const distribution::Distribution* distribution = nullptr;
    std::vector<Communicator*> communicators;
    size_t split_outputs = SIZE_MAX;
    std::vector<NamedSharding> state_outputs;  ///< the first outputs' shardings (the state's)
  };

  StepFunction(TraceFn fn, std::string name, std::vector<int64_t> donate, bool compiled,
               const CompileOptions& options, Spmd spmd)
      : fn_(std::move(fn)), name_(std::move(name)), spmd_(std::move(spmd)), lowering_(options.lowering),
        compiler_(options.compiler), donate_(donate) {
    // The compile's progress reaches notice_ (shown by fit once a compile takes over a second).
    std::function<void(int64_t, int64_t)> user_progress = compiler_.progress;
    compiler_.progress = [notice = notice_, user_progress](int64_t done, int64_t total) {
      if (user_progress) user_progress(done, total);
      notice->report(done, total);
    };
    if (compiled && spmd_.distribution == nullptr) {
      jit_.emplace(jit(fn_, {.name = name_,
                             .donate_argnums = std::move(donate),
                             .lowering = options.lowering,
                             .compile = compiler_,
                             .cuda_device = options.cuda_device,
                             .cuda = options.cuda}));
    }
  }
  /// Runs the step; adds its wall time to `run_seconds` (compilation excluded) and the time
  /// spent tracing/compiling a new signature to `compile_seconds`.
  std::vector<Array> operator()(const std::vector<Array>& args) {
    const auto start = std::chrono::steady_clock::now();
    notice_->begin(start);
    struct End {
      CompileNotice& notice;
      ~End() { notice.end(); }
    } end{*notice_};
    const double compiled_before = jit_ ? jit_->compile_seconds() : spmd_seconds_;
    std::vector<Array> out = spmd_.distribution != nullptr ? call_spmd(args) : call(args);
    const double compile = (jit_ ? jit_->compile_seconds() : spmd_seconds_) - compiled_before;
    compile_seconds += compile;
    run_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - compile;
    return out;
  }
  /// Kernels per call of the signature compiled last (Executable::kernel_count; under a
  /// distribution one device's program, collectives not counted); 0 when the step is interpreted.
  int64_t kernel_count() const {
    if (spmd_.distribution != nullptr) return spmd_kernels_;
    return jit_ ? jit_->kernel_count() : 0;
  }
  /// The cost of one call of the signature compiled last (ir::CostAnalysis; under a distribution
  /// one device's graph); zeros when interpreted.
  ir::CostAnalysis cost_analysis() const {
    if (spmd_.distribution != nullptr) return spmd_cost_;
    return jit_ ? jit_->cost_analysis() : ir::CostAnalysis{};
  }
  /// Where the compiles of this step spent their time (CompileBreakdown; zeros when interpreted).
  CompileBreakdown compile_breakdown() const {
    if (spmd_.distribution != nullptr) return spmd_breakdown_;
    return jit_ ? jit_->compile_breakdown() : CompileBreakdown{};
  }
  int64_t compile_count() const {
    if (spmd_.distribution != nullptr) return static_cast<int64_t>(spmd_cache_.size());
    return jit_ ? jit_->compile_count() : static_cast<int64_t>(graphs_.size());
  }

  /// Where the progress of a compile that takes more than a second is shown
  /// ("compiling <step>: 212/390 kernels"); nullptr: nowhere. Not owned; must outlive the calls.
  void show_compiles_on(std::ostream* stream) { notice_->stream = stream; }

  double run_seconds = 0;      ///< wall time inside the step, compilation excluded
  double compile_seconds = 0;  ///< wall time tracing and compiling (jit only)

 private:
  std::vector<Array> call(const std::vector<Array>& args) {
    if (jit_) return (*jit_)(args);
    std::string key;
    std::vector<ir::TensorType> types;
    for (const Array& a : args) {
      types.push_back({a.shape(), a.dtype()});
      key += types.back().to_string() + ";";
    }
    auto it = graphs_.find(key);
    if (it == graphs_.end()) it = graphs_.emplace(key, trace(fn_, types, name_)).first;
    return interp::interpret(it->second, args);
  }

  std::vector<Array> call_spmd(const std::vector<Array>& args) {
    std::string key;
    std::vector<ir::TensorType> types;
    for (const Array& a : args) {
      const Array shard = a.shards().front();  // the per-device shapes
      types.push_back({shard.shape(), shard.dtype()});
      key += types.back().to_string() + ";";
    }
    auto it = spmd_cache_.find(key);
    if (it == spmd_cache_.end()) {
      const auto start = std::chrono::steady_clock::now();
      TraceStats trace_stats;
      ir::Graph graph = trace(fn_, types, name_, &trace_stats);
      const double traced = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      it = spmd_cache_
               .emplace(key, compile_graph_spmd(graph, compiler_, lowering_,
                                                     {.donate_argnums = donate_,
                                                      .collective_nanoseconds = collective_ns_,
                                                      .overlap_collectives = spmd_.distribution->overlap_collectives()}))
               .first;
      const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      spmd_seconds_ += total;
      spmd_breakdown_.add(traced, trace_stats.autodiff_seconds, total, it->second->compile_info());
      spmd_kernels_ = it->second->kernel_count();
      spmd_cost_ = ir::cost_analysis_if_known(graph);
    }
    const Executable& exe = *it->second;
    const NamedSharding replicated(spmd_.distribution->device_mesh().mesh(), PartitionSpec{});
    std::vector<NamedSharding> out_shardings;
    for (size_t i = 0; i < exe.outputs().size(); ++i) {
      if (i < spmd_.state_outputs.size()) {
        out_shardings.push_back(spmd_.state_outputs[i]);
      } else {
        out_shardings.push_back(i >= spmd_.split_outputs ? spmd_.distribution->data_sharding() : replicated);
      }
    }
    return run_spmd(exe, args, out_shardings, spmd_.communicators);
  }

  TraceFn fn_;
  std::string name_;
  std::optional<Jitted> jit_;
  std::map<std::string, ir::Graph> graphs_;
  Spmd spmd_;
  lower::LoweringOptions lowering_;
  codegen::CpuCompileOptions compiler_;
  std::map<std::string, std::shared_ptr<const Executable>> spmd_cache_;
  /// The progress line of a slow compile: `report` is called from compile threads.
  struct CompileNotice {
    explicit CompileNotice(std::string what) : what(std::move(what)) {}
    std::string what;
    std::ostream* stream = nullptr;
    std::mutex mutex;
    std::chrono::steady_clock::time_point start, last;
    bool shown = false;
    void begin(std::chrono::steady_clock::time_point at) {
      std::lock_guard<std::mutex> lock(mutex);
      start = at;
      shown = false;
    }
    void report(int64_t done, int64_t total) {
      std::lock_guard<std::mutex> lock(mutex);
      const auto now = std::chrono::steady_clock::now();
      if (stream == nullptr || now - start < std::chrono::seconds(1)) return;
      if (shown && done < total && now - last < std::chrono::milliseconds(250)) return;
      *stream << fmt::format("\rcompiling {}: {}/{} kernels", what, done, total) << std::flush;
      shown = true;
      last = now;
    }
    void end() {
      std::lock_guard<std::mutex> lock(mutex);
      if (shown && stream != nullptr) *stream << "\n" << std::flush;
      shown = false;
    }
  };
  std::shared_ptr<CompileNotice> notice_ = std::make_shared<CompileNotice>(name_);

  double spmd_seconds_ = 0;
  CompileBreakdown spmd_breakdown_;  ///< the SPMD compiles' breakdown
  int64_t spmd_kernels_ = 0;  ///< kernel_count() of the SPMD executable compiled last
  ir::CostAnalysis spmd_cost_;  ///< ir::cost_analysis() of the per-device graph compiled last
  std::vector<int64_t> donate_;  ///< the SPMD steps' donated arguments (the state)
  /// Nanoseconds all devices spent in the SPMD steps' collectives (summed over the devices).
  std::shared_ptr<std::atomic<int64_t>> collective_ns_ = std::make_shared<std::atomic<int64_t>>(0);

 public:
  /// Seconds one device spent in collectives (the devices' total over their count).
  double collective_seconds() const {
    if (spmd_.distribution == nullptr) return 0;
    return 1e-9 * static_cast<double>(collective_ns_->load()) /
           static_cast<double>(spmd_.distribution->device_mesh().mesh().size());
  }
};

/// Buckets of the tensors `which` (indices into xs) of one dtype: last index first, each bucket at
/// most `cap` bytes (a larger tensor alone), the first at most min(cap, 1 MiB) (PyTorch DDP's
/// bucket_cap_mb and small first bucket).
std::vector<std::vector<size_t>> buckets(const std::vector<Tensor>& xs, const std::vector<size_t>& which, int64_t cap) {
  std::vector<std::vector<size_t>> out;
  int64_t bytes = 0;
  for (auto it = which.rbegin(); it != which.rend(); ++it) {
    const int64_t size = num_elements(xs[*it].shape()) * dtype_size(xs[*it].dtype());
    const int64_t limit = out.size() == 1 ? std::min<int64_t>(cap, int64_t{1} << 20) : cap;
    if (out.empty() || (bytes + size > limit && !out.back().empty())) {
      out.emplace_back();
      bytes = 0;
    }
    out.back().push_back(*it);
    bytes += size;
  }
  return out;
}

/// The `reduction` ("sum" or "mean") over the devices of xs[i] for i in `which`, as few
/// all_reduces: per dtype, the tensors of each bucket (buckets(), `cap` bytes) flattened and
/// concatenated, reduced, then sliced and reshaped back (PyTorch DDP's gradient buckets: one
/// collective per bucket instead of one per tensor, whose latency dominated small models'
/// data-parallel steps -- MLP step on 2 CPU devices 49-64 ms -> 5-8 ms; several buckets let the
/// scheduler start the last layers' all-reduce while the earlier layers' gradients are computed).
void all_reduce_bucketed(std::vector<Tensor>& xs, const std::vector<size_t>& which, const std::string& axis,
                         const std::string& reduction, int64_t cap) {
  std::map<DType, std::vector<size_t>> by_dtype;
  for (size_t i : which) by_dtype[xs[i].dtype()].push_back(i);
  for (const auto& [dtype, all] : by_dtype) {
    for (const std::vector<size_t>& members : buckets(xs, all, cap)) {
      std::vector<Tensor> flat;
      for (size_t i : members) flat.push_back(flatten(xs[i]));
      const Tensor bucket = all_reduce(flat.size() == 1 ? flat[0] : concatenate(flat, 0), axis, reduction);
      int64_t at = 0;
      for (size_t i : members) {
        const Shape shape = xs[i].shape();
        const int64_t n = num_elements(shape);
        xs[i] = reshape(slice_axis(bucket, 0, at, at + n), shape);
        at += n;
      }
    }
  }
}

std::vector<Tensor> slice(const std::vector<Tensor>& v, size_t begin, size_t count) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}

std::vector<Array> values_of(const std::vector<Variable*>& vars) {
  std::vector<Array> out;
  for (Variable* v : vars) out.push_back(v->value());
  return out;
}

/// A host copy of `a` (down from `cuda` when it lives there; `cuda` may be null).
Array host_of(const Array& a, CudaDevice* cuda) { return cuda != nullptr ? copy_to_host_from(*cuda, a) : to_host(a); }

double scalar(const Array& a, CudaDevice* cuda = nullptr) { return host_of(a, cuda).to_doubles().at(0); }

/// One sample-weight array per output: ones (batch,) when the batch has none (weights of 1 give
/// Keras's unweighted values), the one array for every output, or the per-output arrays.
std::vector<Array> weights_per_output(const Batch& b, size_t outputs) {
  if (!b.sample_weight.valid()) return std::vector<Array>(outputs, Array::full({b.size()}, 1.0, DType::kF32));
  if (b.sample_weight.size() == 1) return std::vector<Array>(outputs, b.sample_weight[0]);
  return b.sample_weight.list();
}

/// Concatenates arrays along dim 0 into a host array (parts on `cuda` are copied down).
Array concat_rows(const std::vector<Array>& parts, CudaDevice* cuda = nullptr) {
  if (parts.empty()) return Array();
  Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const Array& p : parts) shape[0] += p.shape()[0];
  Array out = Array::empty(shape, parts[0].dtype());
  auto* dst = static_cast<char*>(out.raw_data());
  for (const Array& p : parts) {
    const Array h = host_of(p, cuda);
    std::memcpy(dst, h.raw_data(), static_cast<size_t>(h.nbytes()));
    dst += h.nbytes();
  }
  return out;
}

/// Adds to `out`, for each variable of `layer` (named by `path`, the layer names from the model
/// down, as the name scopes of their calls read), the path of the deepest layer owning it.
void add_owner_paths(Layer& layer, const std::string& path, std::map<const Variable*, std::string>& out) {
  for (const std::shared_ptr<Layer>& child : layer.sublayers()) {
    add_owner_paths(*child, path + "/" + child->scope_name(), out);
  }
  for (Variable* v : layer.variables()) out.try_emplace(v, path);
}

}  // namespace

struct Model::Trainer : callbacks::WeightsAccess {
  Model* model = nullptr;
  bool compiled_by_user = false;  // false: made by predict() on an uncompiled model
  CompileOptions options;
  metrics::Mean loss_tracker{"loss"};
  std::vector<Variable*> trainable, non_trainable;
  /// Per trainable variable: the path of the layer owning it, the name scope its optimizer update
  /// is recorded under (GradientLayout::scopes).
  std::vector<std::string> update_scopes;
  size_t n_in = 0, n_out = 0;                          // model inputs and outputs (prepare)
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
  bool live = false;                // T/NT hold the state (variables purged)
  bool fitting = false;             // a fit is running (nested fit/compile are refused)
  std::unique_ptr<StepFunction> train_fn, test_fn, predict_fn;

  /// Under a distribution over one process's devices: one communicator per mesh device (a
  /// shared-memory group; MeshCommunicators on a mesh of several axes), for the steps' collectives.
  std::vector<std::unique_ptr<Communicator>> group;

  /// Resolves the compiled losses, loss weights and metrics against the built model's outputs
  /// (once, before the step functions exist). Errors (kInvalidArgument) name the option, its
  /// length and the model's outputs.
  void configure_outputs() {
    n_in = model->input_types().size();
    n_out = model->output_types().size();
    const std::vector<std::string> names = model->output_names();
    const auto count_error = [&](const char* what, size_t n, const char* hint) {
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("compile: {} has {} entries, model '{}' has {} outputs ({})", what, n, model->name(),
                               n_out, fmt::join(names, ", ")),
                   hint);
    };
    if (!options.losses.empty() && options.losses.size() != n_out) {
      throw count_error("losses", options.losses.size(), "give one loss per output (null for none), or one .loss");
    }
    if (!options.loss_weights.empty() && options.loss_weights.size() != n_out) {
      throw count_error("loss_weights", options.loss_weights.size(), "give one weight per output");
    }
    if (options.output_metrics.size() > n_out) {
      throw count_error("output_metrics", options.output_metrics.size(), "give at most one metric list per output");
    }
    if (options.output_weighted_metrics.size() > n_out) {
      throw count_error("output_weighted_metrics", options.output_weighted_metrics.size(),
                        "give at most one metric list per output");
    }
    if (n_out > 1 && (!options.metrics.empty() || !options.weighted_metrics.empty())) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("compile: model '{}' has {} outputs ({}); `metrics` / `weighted_metrics` do not say "
                              "which output they watch",
                              model->name(), n_out, fmt::join(names, ", ")),
                  "pass output_metrics / output_weighted_metrics: one metric list per output (Keras's list of lists)");
    }
    out_loss = options.losses.empty() ? std::vector<std::shared_ptr<losses::Loss>>(n_out, options.loss) : options.losses;
    out_weight = options.loss_weights.empty() ? std::vector<double>(n_out, 1.0) : options.loss_weights;
    if (std::none_of(out_loss.begin(), out_loss.end(), [](const auto& l) { return l != nullptr; })) {
      throw Error(ErrorCode::kInvalidArgument, "compile: no output has a loss", "give at least one output a loss");
    }
    tracked_outputs.clear();
    output_loss_trackers.clear();
    for (size_t i = 0; n_out > 1 && i < n_out; ++i) {
      if (!out_loss[i]) continue;
      tracked_outputs.push_back(i);
      output_loss_trackers.emplace_back(names[i] + "_loss");
    }
    slots.clear();
    const auto add = [&](const std::vector<std::shared_ptr<metrics::Metric>>& list, size_t output, bool weighted) {
      for (const auto& m : list) {
        const std::string prefix = n_out > 1 ? names[output] + "_" : "";
        slots.push_back({m.get(), output, weighted, prefix + m->name()});
      }
    };
    if (n_out == 1) {
      add(options.metrics, 0, false);
      add(options.weighted_metrics, 0, true);
    }
    for (size_t i = 0; i < options.output_metrics.size(); ++i) add(options.output_metrics[i], i, false);
    for (size_t i = 0; i < options.output_weighted_metrics.size(); ++i) add(options.output_weighted_metrics[i], i, true);
    // A weighted metric named like an unweighted one is logged "weighted_<name>" (Keras's
    // CompileMetrics), after the output prefix.
    for (MetricSlot& w : slots) {
      if (!w.weighted) continue;
      const bool clash = std::any_of(slots.begin(), slots.end(), [&](const MetricSlot& u) {
        return !u.weighted && u.output == w.output && u.name == w.name;
      });
      if (clash) {
        const std::string prefix = n_out > 1 ? names[w.output] + "_" : "";
        w.name = prefix + "weighted_" + w.metric->name();
      }
    }
    // Two entries logged under one name would overwrite each other in the logs (Keras does so
    // silently): refuse before any step.
    std::vector<std::string> logged = {"loss"};
    for (const metrics::Mean& m : output_loss_trackers) logged.push_back(m.name());
    for (const MetricSlot& slot : slots) {
      if (std::find(logged.begin(), logged.end(), slot.name) != logged.end()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("compile: two entries would be logged as '{}'", slot.name),
                    "give one of the metrics another name (its options' `name`)");
      }
      logged.push_back(slot.name);
    }
  }

  /// The logged names after "loss": each output's loss (several outputs), then the metrics.
  std::vector<std::string> metric_names() const {
    std::vector<std::string> names;
    for (const metrics::Mean& m : output_loss_trackers) names.push_back(m.name());
    for (const MetricSlot& s : slots) names.push_back(s.name);
    return names;
  }

  /// How long each part of the steps' state and batch is (StepLayout).
  StepSizes sizes() const {
    StepSizes s;
    s[StepPart::kTrainable] = trainable.size();
    s[StepPart::kNonTrainable] = non_trainable.size();
    s[StepPart::kOptimizer] = O.size();
    s[StepPart::kMetrics] = metric_state_size();
    s[StepPart::kX] = n_in;
    s[StepPart::kY] = n_out;
    s[StepPart::kSampleWeight] = n_out;
    return s;
  }

  size_t metric_state_size() const {
    size_t n = 2 + 2 * output_loss_trackers.size();
    for (const MetricSlot& s : slots) n += s.metric->initial_state().size();
    return n;
  }
  std::vector<Array> initial_metric_state() const {
    std::vector<Array> s = loss_tracker.initial_state();
    for (const metrics::Mean& m : output_loss_trackers) {
      for (Array& a : m.initial_state()) s.push_back(a);
    }
    for (const MetricSlot& slot : slots) {
      for (Array& a : slot.metric->initial_state()) s.push_back(a);
    }
    return s;
  }

  /// New metric state after one batch: the loss trackers (weighted by the batch size), then
  /// every metric on its output. As Keras: `metrics` see no sample weights, `weighted_metrics`
  /// the batch's `sw` of their output.
  std::vector<Tensor> update_metric_state(const std::vector<Tensor>& m, const Tensor& loss,
                                          const std::vector<Tensor>& output_losses, const std::vector<Tensor>& y,
                                          const std::vector<Tensor>& y_pred, const std::vector<Tensor>& sw) const {
    check_count(y, n_out, "y");
    check_count(y_pred, n_out, "y_pred");
    check_count(sw, n_out, "sample_weight");
    check_count(output_losses, output_loss_trackers.size(), "output_losses");
    const int64_t batch = y_pred[0].dim(0);
    std::vector<Tensor> out = loss_tracker.add_batch(slice(m, 0, 2), loss, batch);
    size_t at = 2;
    for (size_t i = 0; i < output_loss_trackers.size(); ++i, at += 2) {
      std::vector<Tensor> s = output_loss_trackers[i].add_batch(slice(m, at, 2), output_losses[i], batch);
      out.insert(out.end(), s.begin(), s.end());
    }
    for (const MetricSlot& slot : slots) {
      const size_t n = slot.metric->initial_state().size();
      const size_t o = slot.output;
      std::vector<Tensor> s;
      try {
        s = slot.weighted ? slot.metric->update_state(slice(m, at, n), y[o], y_pred[o], sw[o])
                          : slot.metric->update_state(slice(m, at, n), y[o], y_pred[o]);
      } catch (const Error& e) {
        if (n_out == 1) throw;
        throw e.with_context(fmt::format("metric '{}' of output '{}'", slot.name, model->output_names().at(o)));
      }
      out.insert(out.end(), s.begin(), s.end());
      at += n;
    }
    return out;
  }

  static void check_count(const std::vector<Tensor>& v, size_t want, const char* what) {
    if (v.size() != want) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("update_metrics: {} tensors in {}, the model needs {}", v.size(), what, want),
                  "pass one tensor per model output (output_losses: one per output with a loss, several outputs only)");
    }
  }

  /// The logged values of a metric state: the loss trackers' results, then each metric's.
  std::vector<Tensor> metric_results(const std::vector<Tensor>& m) const {
    std::vector<Tensor> results = {loss_tracker.result(slice(m, 0, 2))};
    size_t at = 2;
    for (const metrics::Mean& t : output_loss_trackers) {
      results.push_back(t.result(slice(m, at, 2)));
      at += 2;
    }
    for (const MetricSlot& slot : slots) {
      const size_t n = slot.metric->initial_state().size();
      results.push_back(slot.metric->result(slice(m, at, n)));
      at += n;
    }
    return results;
  }

  /// update_metric_state followed by the results.
  std::vector<Tensor> update_metrics(const std::vector<Tensor>& m, const Tensor& loss,
                                     const std::vector<Tensor>& output_losses, const std::vector<Tensor>& y,
                                     const std::vector<Tensor>& y_pred, const std::vector<Tensor>& sw) const {
    std::vector<Tensor> out = update_metric_state(m, loss, output_losses, y, y_pred, sw);
    std::vector<Tensor> results = metric_results(out);
    out.insert(out.end(), results.begin(), results.end());
    return out;
  }

  /// The forward pass and the loss over StepLayout::loss_arguments (T, NT, x..., y..., sw..., O...;
  /// O only when `scaled`):
  ///   [objective, NT'..., loss, output losses..., y_pred...]
  /// where loss = sum_i loss_weights[i] * loss_i(y_i, y_pred_i, sw_i) + the layers' losses, the
  /// output losses are the weighted loss_i of each output with a loss (several outputs only; what
  /// Keras logs as "<output>_loss"), and the objective is the loss, or with `scaled` (the train
  /// step; the optimizer's variables follow the batch) the optimizer's scaled loss, so the
  /// gradient is taken of the scaled loss while logs and metrics see the unscaled one.
  TraceFn loss_fn(bool training, bool scaled = false) const {
    return [this, training, scaled](const std::vector<Tensor>& b) {
      StepSizes sizes = this->sizes();
      if (!scaled) sizes[StepPart::kOptimizer] = 0;
      const StepState<Tensor> s = StepLayout::loss_arguments(sizes).unflatten(b);
      const size_t nn = non_trainable.size();
      LayerContext ctx(training);
      bind_variables(ctx, s);
      std::vector<Tensor> y_pred = model->forward(ctx, s.x);
      if (y_pred.size() != n_out) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("model '{}' returned {} outputs while built with {}", model->name(), y_pred.size(), n_out),
                    "call_outputs must return the same number of outputs on every call");
      }
      std::optional<Tensor> loss;
      std::vector<Tensor> output_losses;
      for (size_t i = 0; i < n_out; ++i) {
        if (!out_loss[i]) continue;
        Tensor li = (*out_loss[i])(s.y[i], y_pred[i], s.sample_weight[i]);
        if (out_weight[i] != 1.0) li = li * out_weight[i];
        if (n_out > 1) output_losses.push_back(li);
        loss = loss ? *loss + li : li;
      }
      for (const Tensor& extra : ctx.losses()) {
        loss = *loss + (extra.dtype() == loss->dtype() ? extra : convert(extra, loss->dtype()));
      }
      std::vector<Tensor> out = {scaled ? options.optimizer->scale_loss(*loss, s.optimizer) : *loss};
      for (size_t i = 0; i < nn; ++i) out.push_back(ctx.new_value(*non_trainable[i]).value_or(s.non_trainable[i]));
      out.push_back(*loss);
      out.insert(out.end(), output_losses.begin(), output_losses.end());
      out.insert(out.end(), y_pred.begin(), y_pred.end());
      return out;
    };
  }

  /// Binds the model's variables to the step's T (split ones all-gathered: gathered()) and NT.
  void bind_variables(LayerContext& ctx, const StepState<Tensor>& s) const {
    for (size_t i = 0; i < trainable.size(); ++i) ctx.bind(*trainable[i], gathered(i, s.trainable[i]));
    for (size_t i = 0; i < non_trainable.size(); ++i) ctx.bind(*non_trainable[i], s.non_trainable[i]);
  }

  /// Whether trainable variable i is split over the mesh (FSDP): its state is one block per device.
  bool is_split(size_t i) const {
    return options.distribution && trainable[i]->sharding() && !trainable[i]->sharding()->is_fully_replicated();
  }

  /// The mesh axes trainable variable i is split over (one per split dimension; none: replicated).
  std::vector<std::string> split_axes(size_t i) const {
    std::vector<std::string> axes;
    if (!is_split(i)) return axes;
    for (const PartitionDim& dim : trainable[i]->sharding()->spec().dims()) axes.insert(axes.end(), dim.axes.begin(), dim.axes.end());
    return axes;
  }

  /// The number of devices holding each block of trainable variable i: the product of the sizes of
  /// the mesh axes it is not split over (1 for a variable split over every axis).
  int64_t copies(size_t i) const {
    const distribution::DeviceMesh& mesh = options.distribution->device_mesh();
    const std::vector<std::string> axes = split_axes(i);
    int64_t n = 1;
    for (const std::string& a : mesh.axis_names()) {
      if (std::find(axes.begin(), axes.end(), a) == axes.end()) n *= mesh.axis_size(a);
    }
    return n;
  }

  /// Trainable variable i's whole value in the traced per-device step: its block all-gathered
  /// along each split dimension over that dimension's mesh axis (all_gather tiles dimension 0: the
  /// others are moved there and back), else as is.
  Tensor gathered(size_t i, const Tensor& block) const {
    if (!is_split(i)) return block;
    const distribution::DeviceMesh& mesh = options.distribution->device_mesh();
    const std::vector<PartitionDim>& dims = trainable[i]->sharding()->spec().dims();
    Tensor x = block;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].replicated()) continue;
      const std::string& axis = dims[d].axes.at(0);
      if (d == 0) {
        x = all_gather(x, axis, mesh.axis_size(axis));
        continue;
      }
      std::vector<int64_t> perm(static_cast<size_t>(x.rank()));
      for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int64_t>(k);
      std::swap(perm[0], perm[d]);  // its own inverse
      x = transpose(all_gather(transpose(x, perm), axis, mesh.axis_size(axis)), perm);
    }
    return x;
  }

  /// The sum of `x` over every device of the mesh (one all_reduce per axis).
  Tensor sum_over_mesh(const Tensor& x) const {
    Tensor y = x;
    for (const std::string& axis : options.distribution->device_mesh().axis_names()) y = all_reduce(y, axis, "sum");
    return y;
  }

  /// The shardings of the state entries of `layout` (its first state_size() entries), as
  /// recorded before the first step: T each variable's, NT each variable's (replicated under a
  /// distribution), O each optimizer variable's (optimizer_shardings: its reference variable's),
  /// M replicated.
  std::vector<NamedSharding> state_shardings(const StepLayout& layout) const {
    const NamedSharding replicated(options.distribution->device_mesh().mesh(), PartitionSpec{});
    std::vector<NamedSharding> out;
    for (StepPart p : layout.parts()) {
      switch (p) {
        case StepPart::kTrainable:
          for (Variable* v : trainable) out.push_back(*v->sharding());
          break;
        case StepPart::kNonTrainable:
          for (Variable* v : non_trainable) out.push_back(*v->sharding());
          break;
        case StepPart::kOptimizer:
          out.insert(out.end(), optimizer_shardings.begin(), optimizer_shardings.end());
          break;
        case StepPart::kMetrics:
          out.insert(out.end(), layout.count(p), replicated);
          break;
        default:
          break;  // the batch: split by step_arguments
      }
    }
    return out;
  }

  /// Checks the optimizer's description of its variables against the ones it built and, under a
  /// distribution, records each one's sharding. Throws ingot::Error(kInvalidArgument) naming the
  /// optimizer and the entry for a description of another length, a reference out of range, or a
  /// referenced variable of another shape than its reference.
  void describe_optimizer_state() {
    optimizer_shardings.clear();
    const std::string& cls = options.optimizer->class_name();
    optimizer_info = options.optimizer->variable_info(static_cast<int64_t>(trainable.size()));
    if (optimizer_info.size() != O.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: variable_info describes {} optimizer variables, build made {}", cls,
                              optimizer_info.size(), O.size()),
                  "an optimizer that overrides build() must override variable_info() to match it");
    }
    for (size_t j = 0; j < O.size(); ++j) {
      const std::optional<int64_t> ref = optimizer_info[j].reference;
      if (!ref) continue;
      if (*ref < 0 || *ref >= static_cast<int64_t>(trainable.size())) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: optimizer variable {} ('{}') refers to trainable variable {}; the model has {}",
                                cls, j, optimizer_info[j].name, *ref, trainable.size()),
                    "refer to an index into the trainable variables apply() gets");
      }
      const Variable& v = *trainable[static_cast<size_t>(*ref)];
      if (O[j].shape() != v.shape()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: optimizer variable {} ('{}') is made from '{}' of shape {} but has shape {}", cls, j,
                                optimizer_info[j].name, v.name(), shape_to_string(v.shape()),
                                shape_to_string(O[j].shape())),
                    "an optimizer variable of another shape has no reference (it is then replicated)");
      }
    }
    if (!options.distribution) return;
    const NamedSharding replicated(options.distribution->device_mesh().mesh(), PartitionSpec{});
    for (const optimizers::OptimizerVariableInfo& info : optimizer_info) {
      optimizer_shardings.push_back(info.reference ? *trainable[static_cast<size_t>(*info.reference)]->sharding()
                                                   : replicated);
    }
  }

  /// Under a distribution: before + all_reduce(after - before) over the batch axis: each state's
  /// per-device change summed ("sum": metric totals and counts) or averaged ("mean").
  std::vector<Tensor> combined(const std::vector<Tensor>& before, const std::vector<Tensor>& after,
                               const std::string& reduction) const {
    std::vector<Tensor> deltas;
    std::vector<size_t> all;
    for (size_t i = 0; i < after.size(); ++i) {
      deltas.push_back(after[i] - before[i]);
      all.push_back(i);
    }
    all_reduce_bucketed(deltas, all, options.distribution->batch_dim_name(), reduction,
                        options.distribution->gradient_bucket_bytes());
    std::vector<Tensor> out;
    for (size_t i = 0; i < after.size(); ++i) out.push_back(before[i] + deltas[i]);
    return out;
  }

  TraceFn train_step() const {
    return [this](const std::vector<Tensor>& a) {
      const StepSizes sizes = this->sizes();
      TrainStepState s = StepLayout::train_arguments(sizes).unflatten(a);
      const std::vector<Tensor> nt_before = s.non_trainable, m_before = s.metrics;
      model->train_step(s);
      for (StepPart p : {StepPart::kTrainable, StepPart::kNonTrainable, StepPart::kOptimizer, StepPart::kMetrics}) {
        check_state(s.part(p), sizes[p], step_part_name(p));
      }
      if (options.distribution) {  // the devices' updates combined (the gradients were, in compute_gradients)
        s.non_trainable = combined(nt_before, s.non_trainable, "mean");
        s.metrics = combined(m_before, s.metrics, "sum");
      }
      std::vector<Tensor> out = StepLayout::train_results(sizes).flatten(s);
      std::vector<Tensor> results = metric_results(s.metrics);
      out.insert(out.end(), results.begin(), results.end());
      return out;
    };
  }

  static void check_state(const std::vector<Tensor>& v, size_t want, const char* what) {
    if (v.size() != want) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("train_step left {} {} state tensors, the model has {}", v.size(), what, want),
                  "a custom train_step must keep every state list's length (replace values, do not add or drop)");
    }
  }

  TraceFn test_step() const {
    return [this](const std::vector<Tensor>& a) {
      const StepSizes sizes = this->sizes();
      const StepState<Tensor> s = StepLayout::test_arguments(sizes).unflatten(a);
      const size_t nn = non_trainable.size(), k = output_loss_trackers.size();
      StepState<Tensor> loss_args = s;
      loss_args.optimizer.clear();
      // [loss, NT'..., loss, output losses..., y_pred...]
      StepSizes loss_sizes = sizes;
      loss_sizes[StepPart::kOptimizer] = 0;
      const std::vector<Tensor> r = loss_fn(false)(StepLayout::loss_arguments(loss_sizes).flatten(loss_args));
      std::vector<Tensor> out = update_metric_state(s.metrics, r[1 + nn], slice(r, 2 + nn, k), s.y,
                                                    slice(r, 2 + nn + k, n_out), s.sample_weight);
      if (options.distribution) out = combined(s.metrics, out, "sum");
      const std::vector<Tensor> results = metric_results(out);
      out.insert(out.end(), results.begin(), results.end());
      return out;
    };
  }

  TraceFn predict_step() const {
    return [this](const std::vector<Tensor>& a) {
      const StepState<Tensor> s = StepLayout::predict_arguments(sizes()).unflatten(a);
      LayerContext ctx(false);
      bind_variables(ctx, s);
      std::vector<Tensor> out = model->forward(ctx, s.x);
      if (num_processes() > 1) {  // every device gets the whole batch's predictions (replicated outputs)
        const distribution::Distribution& d = *options.distribution;
        for (Tensor& y : out) y = all_gather(y, d.batch_dim_name(), d.batch_axis_size());
      }
      return out;
    };
  }

  bool compiled() const { return options.jit_compile && !options.run_eagerly; }

  /// The prefetch queue's distribution step (runs on its producer thread): on a CUDA device every
  /// batch is checked on the host (`checked`: batches with targets) and copied to the device there
  /// (CudaDevice::copy_async on the copy stream, after the compute work queued so far), so the
  /// step gets device arrays and the copy of batch i + 1 overlaps the host side of step i. None
  /// (the batch as is) on the CPU.
  PrefetchQueue<Batch>::Distribute distribute(bool checked) {
    if (options.distribution) {
      // Data parallel: each batch is checked and split over the batch axis on the producer
      // thread, so the copies to the devices overlap the previous step.
      return [this, checked](Batch b) {
        if (checked) check_batch(b);
        const auto split = [this](const Arrays& a) {
          std::vector<Array> out;
          for (const Array& e : a) out.push_back(split_batch_array(e));
          return Arrays(std::move(out));
        };
        // Ones for missing sample weights are made here, at the batch's whole size (the split
        // batch's size is one process's part).
        const Arrays sw = checked && !b.sample_weight.valid() ? Arrays(weights_per_output(b, n_out)) : b.sample_weight;
        return Batch{split(b.x), split(b.y), split(sw)};
      };
    }
    if (options.cuda_device == nullptr) return {};
    return [this, checked](Batch b) {
      if (checked) check_batch(b);
      CudaDevice& dev = *options.cuda_device;
      const auto to_device = [&dev](const Arrays& a) {
        std::vector<Array> out;
        for (const Array& e : a) out.push_back(copy_to_cuda_device(dev, e));
        return Arrays(std::move(out));
      };
      return Batch{to_device(b.x), to_device(b.y), to_device(b.sample_weight)};
    };
  }

  /// Every batch (arrays or a generator's): one x per input, one y per output, none, one or one
  /// sample weight per output, sparse labels in range (on the host; batches already on the CUDA
  /// device were checked by distribute()).
  void check_batch(const Batch& b) const {
    // Batches already split over a mesh or on a CUDA device were checked by distribute().
    if (b.x.valid() && (b.x[0].sharding().num_devices() > 1 || b.x[0].device().kind() != DeviceKind::kCpu)) return;
    if (!b.y.valid()) {
      throw Error(ErrorCode::kInvalidArgument, "a batch has no targets y",
                  "pass y (or validation_data.y / a generator yielding Batch{x, y, ...})");
    }
    if (b.x.size() != n_in || b.y.size() != n_out) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("a batch has {} x and {} y arrays; model '{}' has {} inputs and {} outputs", b.x.size(),
                              b.y.size(), model->name(), n_in, n_out),
                  "pass one x per model input and one y per output, in the model's order");
    }
    if (b.sample_weight.size() > 1 && b.sample_weight.size() != n_out) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("a batch has {} sample_weight arrays; model '{}' has {} outputs", b.sample_weight.size(),
                              model->name(), n_out),
                  "pass one sample_weight (for every output) or one per output");
    }
    check_labels(b.y);
  }

  /// Sparse losses: integer labels must lie in [0, classes) (checked on the host before any
  /// step; inside a step a bad label would silently give loss 0).
  void check_labels(const Arrays& y) const {
    const std::vector<ir::TensorType>& outs = model->output_types();
    if (out_loss.size() != outs.size()) return;  // before prepare
    for (size_t i = 0; i < y.size() && i < outs.size(); ++i) {
      const std::shared_ptr<losses::Loss>& loss = out_loss.at(i);
      if (!y[i].valid() || !loss || !loss->labels_are_indices()) continue;
      try {
        losses::validate_sparse_labels(y[i], outs[i].shape.back());
      } catch (const Error& e) {
        if (y.size() == 1) throw;
        throw e.with_context(fmt::format("y[{}] (output '{}')", i, model->output_names().at(i)));
      }
    }
  }

  /// The predict step only, for a model never compiled (no loss to resolve).
  void prepare_predict() {
    n_in = model->input_types().size();
    n_out = model->output_types().size();
    prepare_steps();
  }

  /// Creates the step functions once the model is built (variable lists known).
  void prepare() {
    if (train_fn) return;
    configure_outputs();
    prepare_steps();
  }

  void prepare_steps() {
    if (train_fn) return;
    trainable = model->trainable_variables();
    non_trainable = model->non_trainable_variables();
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
    StepFunction::Spmd spmd;
    if (options.distribution) {
      spmd.distribution = options.distribution.get();
      if (const std::shared_ptr<distribution::ProcessGroup>& processes = options.distribution->device_mesh().processes()) {
        spmd.communicators = processes->device_communicators();
        broadcast_variables(processes->process_communicator());
      } else {
        // The devices of one process exchange data through shared memory (Gloo's loopback TCP took
        // 3x longer for 1 MB); one group per mesh axis line besides the whole mesh's
        // (MeshCommunicator) when the mesh has several axes, so that each collective runs along
        // its axis.
        group = make_mesh_communicators(options.distribution->device_mesh().mesh(),
                                        [](int size) { return make_shared_memory_group(size); });
        for (const auto& c : group) spmd.communicators.push_back(c.get());
      }
    }
    StepFunction::Spmd train_spmd = spmd, predict_spmd = spmd;
    // Predictions are split over the batch axis like the batches; across processes they are
    // all-gathered in the step (predict_step), so every process gets all of them.
    if (num_processes() == 1) predict_spmd.split_outputs = 0;
    const StepSizes sizes = this->sizes();
    if (options.distribution) {
      // The train step returns T', NT', O', M' laid out as recorded; the logged values are replicated.
      train_spmd.state_outputs = state_shardings(StepLayout::train_results(sizes));
    }
    // The state a step returns anew is donated (none with donate_state false).
    std::vector<int64_t> donate_train, donate_test;
    if (options.donate_state) {
      donate_train = StepLayout::train_arguments(sizes).donatable(StepLayout::train_results(sizes));
      donate_test = StepLayout::test_arguments(sizes).donatable(StepLayout::test_results(sizes));
    }
    train_fn = std::make_unique<StepFunction>(train_step(), model->name() + "_train_step", donate_train, compiled(),
                                              options, train_spmd);
    test_fn = std::make_unique<StepFunction>(test_step(), model->name() + "_test_step", donate_test, compiled(), options,
                                             spmd);
    predict_fn = std::make_unique<StepFunction>(predict_step(), model->name() + "_predict_step", std::vector<int64_t>{},
                                                compiled(), options, predict_spmd);
  }

  /// Processes of the distribution (1 without one).
  int num_processes() const { return options.distribution ? options.distribution->device_mesh().num_processes() : 1; }

  /// Every variable takes process 0's value (PyTorch DDP broadcasts rank 0's parameters when it
  /// wraps a model), so processes whose weights were initialised differently still train one model.
  void broadcast_variables(Communicator& processes) {
    for (Variable* v : model->variables()) {
      Array value = to_host(v->value()).clone();
      processes.broadcast(value, 0);
      v->assign(value);
    }
  }

  /// Takes the state out of the variables (they are purged while the loop runs).
  void begin_loop() {
    if (live) return;
    T = values_of(trainable);
    NT = values_of(non_trainable);
    if (CudaDevice* cuda = options.cuda_device) {  // the live state lives on the device
      for (Array& a : T) a = copy_to_cuda_device(*cuda, a);
      for (Array& a : NT) a = copy_to_cuda_device(*cuda, a);
    }
    for (Variable* v : trainable) v->purge();
    for (Variable* v : non_trainable) v->purge();
    live = true;
  }
  /// Writes the live state back into the variables (sharing the buffers: no copy). The loop
  /// takes it again with begin_loop() before its next step (the variables may have been assigned
  /// meanwhile), so no second copy of the state ever exists.
  void sync() {
    if (!live) return;
    // On a CUDA device the variables get host copies (their values are always host arrays).
    for (size_t i = 0; i < trainable.size(); ++i) trainable[i]->sync(on_host(T[i]));
    for (size_t i = 0; i < non_trainable.size(); ++i) non_trainable[i]->sync(on_host(NT[i]));
    T.clear();
    NT.clear();
    live = false;
  }

  /// sync() after a step threw. A step that failed after taking its donated state (an SPMD step
  /// whose collective failed when a peer process died or timed out) leaves nothing to write back:
  /// then the live state is dropped (the loop is no longer running, the variables stay empty
  /// until loaded or assigned) and false is returned, so that the step's own error is reported.
  bool sync_after_failure() {
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
  /// The error of a failed step that took the model's state with it (sync_after_failure false).
  static Error state_lost(const Error& e) {
    return Error(e.code(),
                 e.message() + "; the model's weights were lost with the failed step (it had taken them over: "
                               "donated state)",
                 "load_weights (e.g. a ModelCheckpoint or BackupAndRestore file) before using the model again" +
                     (e.hint().empty() ? std::string() : "; " + e.hint()));
  }

  /// The step state and a checked batch: x..., y..., one sample weight per output.
  StepState<Array> step_state(const Batch& batch) const {
    return {T, NT, O, M, batch.x.list(), batch.y.list(), weights_per_output(batch, n_out)};
  }

  /// The flat arguments of `state` for a step taking `layout`. Under a distribution the state
  /// entries are placed with their recorded shardings (once: the steps return them there) and the
  /// batch entries are split over the batch axis.
  std::vector<Array> step_arguments(const StepLayout& layout, const StepState<Array>& state) const {
    std::vector<Array> args = layout.flatten(state);
    if (!options.distribution) return args;
    const std::vector<NamedSharding> shardings = state_shardings(layout);
    for (size_t i = 0; i < shardings.size(); ++i) {
      if (!(args[i].sharding() == shardings[i])) args[i] = device_put(state_part(args[i], shardings[i]), shardings[i]);
    }
    for (size_t i = shardings.size(); i < args.size(); ++i) args[i] = split_batch_array(args[i]);
    return args;
  }

  /// One training step on `batch`; returns the logs (loss, then the metrics).
  Logs train_batch(const Batch& batch) {
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

  /// A batch array split over the batch axis (as is when it already is): across processes, this
  /// process's block of rows (process p of P: rows [p * n / P, (p + 1) * n / P), every process
  /// reading the same batches), split over its devices. Throws ingot::Error(kInvalidArgument) when
  /// its sample count is not a multiple of the axis's devices (all processes').
  Array split_batch_array(const Array& a) const {
    const distribution::Distribution& d = *options.distribution;
    const NamedSharding split = d.data_sharding();
    if (a.sharding() == split) return a;
    const int64_t n = d.batch_axis_size(), rows = a.rank() > 0 ? a.shape()[0] : 0;
    if (rows % n != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: a batch of {} samples does not split over the {} devices of mesh axis '{}'",
                              d.class_name(), rows, n, d.batch_dim_name()),
                  fmt::format("use a batch size and a sample count whose last batch are multiples of {}", n));
    }
    const int processes = num_processes();
    if (processes == 1) return device_put(a, split);
    return device_put(process_rows(to_host(a), d.device_mesh().process_id(), processes), split);
  }

  /// Block `p` of `parts` equal blocks of `a`'s rows (a host array whose row count divides).
  static Array process_rows(const Array& a, int p, int parts) {
    const int64_t n = a.shape()[0] / parts;
    return detail::take_rows(a, detail::iota(p * n, (p + 1) * n));
  }

  /// Whether a state array laid out by `s` is split over the processes too (FSDP over a mesh
  /// spanning processes: dimension 0 over the mesh's first axis, which the processes split).
  bool across_processes(const NamedSharding& s) const { return num_processes() > 1 && !s.is_fully_replicated(); }

  /// This process's part of a whole state value (a host array or this process's replica) to be
  /// laid out by `s`: its block of rows when `s` splits it across the processes.
  Array state_part(const Array& whole, const NamedSharding& s) const {
    const Array host = to_host(whole);
    if (!across_processes(s)) return host;
    return process_rows(host, options.distribution->device_mesh().process_id(), num_processes());
  }

  /// The whole shape of a state array (a split one's rows over all processes).
  Shape whole_shape(const Array& a) const {
    Shape shape = a.shape();
    if (options.distribution && across_processes(a.sharding())) shape[0] *= num_processes();
    return shape;
  }

  /// A host copy of a state or result array (they live on the CUDA device when there is one).
  /// Under a distribution: one copy of a replicated array; a state array split across processes
  /// is all-gathered from them (every process makes the same calls, at the same points of the
  /// loop: epoch ends, callbacks' get_weights, checkpoints).
  Array on_host(const Array& a) const {
    if (!options.distribution) return options.cuda_device != nullptr ? host_of(a, options.cuda_device) : a;
    const Array local = to_host(a);
    if (!across_processes(a.sharding())) return local;
    Array whole = Array::empty(whole_shape(a), local.dtype());
    options.distribution->device_mesh().processes()->process_communicator().all_gather(local, whole);
    return whole;
  }

  /// Moves any state array whose sharding differs from the one recorded before the first step
  /// back to it (Keras's JAX trainer's _enforce_jax_state_sharding): T and NT their variables',
  /// O (under a distribution) optimizer_shardings. On a CUDA device the state stays where the
  /// step put it: the device.
  void enforce_shardings() {
    if (options.cuda_device != nullptr) return;
    const auto enforce = [](Array& a, const NamedSharding& s) {
      if (!(a.sharding() == s)) a = reshard(a, s);
    };
    for (size_t i = 0; i < trainable.size(); ++i) enforce(T[i], *trainable[i]->sharding());
    for (size_t i = 0; i < non_trainable.size(); ++i) enforce(NT[i], *non_trainable[i]->sharding());
    for (size_t i = 0; i < optimizer_shardings.size() && i < O.size(); ++i) enforce(O[i], optimizer_shardings[i]);
  }

  Logs test_batch(const Batch& batch) {
    check_batch(batch);
    const StepSizes sizes = this->sizes();
    const std::vector<Array> out = (*test_fn)(step_arguments(StepLayout::test_arguments(sizes), step_state(batch)));
    const StepLayout results = StepLayout::test_results(sizes);
    M = results.unflatten(out).metrics;
    return logs_from(out, results.size());
  }

  Logs logs_from(const std::vector<Array>& out, size_t at) const {
    Logs logs;
    logs.set("loss", scalar(out[at], options.cuda_device));
    const std::vector<std::string> names = metric_names();
    for (size_t i = 0; i < names.size(); ++i) logs.set(names[i], scalar(out[at + 1 + i], options.cuda_device));
    return logs;
  }

  // WeightsAccess for callbacks: the live state during a loop, the variables otherwise.
  std::vector<Array> get_weights() override {
    if (!live) return model->get_weights();
    std::vector<Array> out;
    for (Variable* v : model->variables()) out.push_back(on_host(state_of(v)).clone());
    return out;
  }
  void set_weights(const std::vector<Array>& weights) override {
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
  std::vector<Array> get_optimizer_state() override {
    std::vector<Array> out;
    for (const Array& a : O) out.push_back(on_host(a).clone());
    return out;
  }
  void set_optimizer_state(const std::vector<Array>& state) override {
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
      O[i] = options.cuda_device != nullptr ? copy_to_cuda_device(*options.cuda_device, to_host(state[i]))
                                            : device_put(state_part(state[i], O[i].sharding()).clone(), O[i].sharding());
    }
  }
  // The optimizer's learning rate for callbacks (LearningRateScheduler, ReduceLROnPlateau).
  double learning_rate() override {
    return options.optimizer->current_learning_rate(host_state(optimizer_state("learning_rate")));
  }
  void set_learning_rate(double value) override {
    O = options.optimizer->with_learning_rate(host_state(optimizer_state("set_learning_rate")), value);
  }
  /// Host copies of state arrays (the optimizer's, for host-side reads and updates).
  std::vector<Array> host_state(const std::vector<Array>& state) const {
    std::vector<Array> out;
    for (const Array& a : state) out.push_back(on_host(a));
    return out;
  }
  const std::vector<Array>& optimizer_state(const char* who) const {
    if (!options.optimizer || O.empty()) {
      throw Error(ErrorCode::kFailedPrecondition, fmt::format("{}: the model has no optimizer state yet", who),
                  "compile with an optimizer; the state exists once fit has built the model");
    }
    return O;
  }
  Array& state_of(Variable* v) {
    for (size_t i = 0; i < trainable.size(); ++i) {
      if (trainable[i] == v) return T[i];
    }
    for (size_t i = 0; i < non_trainable.size(); ++i) {
      if (non_trainable[i] == v) return NT[i];
    }
    throw Error(ErrorCode::kNotFound, fmt::format("variable '{}' is not in the model's state", v->name()));
  }
};

// ---- the train step's parts (Model::train_step and its helpers) --------------------------------

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

Model::Trainer& compiled_trainer(const std::shared_ptr<Model::Trainer>& t, const char* who) {
  if (!t || !t->options.optimizer) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("{} needs a model compiled with an optimizer", who),
                "call model.compile(...) first");
  }
  return *t;
}

}  // namespace

void Model::train_step(TrainStepState& state) {
  StepGradients g = compute_gradients(state);
  state.non_trainable = g.non_trainable;
  apply_gradients(state, g.gradients);
  update_metrics(state, g.loss, g.y_pred, g.output_losses);
}

StepGradients Model::compute_gradients(const TrainStepState& s) {
  Trainer& t = compiled_trainer(trainer_, "compute_gradients");
  const size_t nt = s.trainable.size(), nn = s.non_trainable.size();
  if (s.x.size() != t.n_in || s.y.size() != t.n_out || s.sample_weight.size() != t.n_out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compute_gradients: {} x, {} y, {} sample_weight tensors; model '{}' has {} inputs and {} "
                            "outputs",
                            s.x.size(), s.y.size(), s.sample_weight.size(), name(), t.n_in, t.n_out),
                "pass one x per input and one y and sample weight per output");
  }
  // The optimizer's variables are read by scale_loss, not differentiated.
  const std::vector<Tensor> b = StepLayout::loss_arguments(t.sizes()).flatten(s);
  const std::vector<int64_t> argnums = StepLayout::loss_arguments(t.sizes()).indices(StepPart::kTrainable);
  // [scaled loss, NT'..., loss, output losses (k)..., y_pred (n_out)..., grads...]; apply()
  // unscales the gradients.
  std::vector<Tensor> vg = value_and_grad(t.loss_fn(true, /*scaled=*/true), argnums, /*has_aux=*/true)(b);
  const size_t k = t.output_loss_trackers.size();
  const size_t y_at = 2 + nn + k;
  std::vector<Tensor> gradients = slice(vg, y_at + t.n_out, nt);
  if (t.options.distribution) {  // every device applies the devices' mean gradient
    const distribution::Distribution& d = *t.options.distribution;
    std::vector<size_t> averaged;  // all-reduced (mean) over the batch axis together, below
    for (size_t i = 0; i < gradients.size(); ++i) {
      if (!gradients[i].valid()) continue;
      // A split variable's gradient came through all_gather's VJP: its block summed (reduce_scatter)
      // over the devices along each axis it is split over. Along the batch axis that sums the
      // shards' gradients; along another axis the devices saw the same data, so it multiplies one
      // gradient by the axis size. Dividing by every split axis's size leaves the batch mean when
      // the batch axis is one of them, else one shard's gradient, averaged over the batch axis
      // below like a replicated variable's.
      const std::vector<std::string> axes = t.split_axes(i);
      double parts = 1;
      for (const std::string& a : axes) parts *= static_cast<double>(d.device_mesh().axis_size(a));
      if (parts > 1) gradients[i] = gradients[i] / parts;
      if (std::find(axes.begin(), axes.end(), d.batch_dim_name()) == axes.end()) averaged.push_back(i);
    }
    all_reduce_bucketed(gradients, averaged, d.batch_dim_name(), "mean", d.gradient_bucket_bytes());
  }
  return {vg[1 + nn], slice(vg, y_at, t.n_out), slice(vg, 2 + nn, k), std::move(gradients), slice(vg, 1, nn)};
}

void Model::apply_gradients(TrainStepState& s, const std::vector<Tensor>& gradients) {
  Trainer& t = compiled_trainer(trainer_, "apply_gradients");
  // Split variables' gradients are one device's block: norms and finiteness checks sum over the
  // devices (FSDP; docs/distributed.md).
  optimizers::GradientLayout layout;
  layout.scopes = t.update_scopes;
  if (t.options.distribution) {
    for (size_t i = 0; i < s.trainable.size(); ++i) {
      layout.split.push_back(t.is_split(i));
      layout.copies.push_back(t.is_split(i) ? t.copies(i) : 1);
    }
    layout.sum_over_devices = [&t](const Tensor& x) { return t.sum_over_mesh(x); };
  }
  auto [new_t, new_o] = t.options.optimizer->apply(s.optimizer, s.trainable, gradients, layout);
  s.trainable = std::move(new_t);
  s.optimizer = std::move(new_o);
}

void Model::update_metrics(TrainStepState& s, const Tensor& loss, const std::vector<Tensor>& y_pred,
                           const std::vector<Tensor>& output_losses) {
  Trainer& t = compiled_trainer(trainer_, "update_metrics");
  s.metrics = t.update_metric_state(s.metrics, loss, output_losses, s.y, y_pred, s.sample_weight);
}

// ---- compile ---------------------------------------------------------------------------------

namespace {

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
  if (options.distribution && (options.cuda_device != nullptr || options.run_eagerly || !options.jit_compile)) {
    throw Error(ErrorCode::kInvalidArgument,
                "compile: a distribution needs compiled steps on CPU devices, but cuda_device, run_eagerly or "
                "jit_compile = false was given",
                "drop the distribution, or compile the steps for the CPU devices of its mesh");
  }
  if (options.cuda_device != nullptr && (options.run_eagerly || !options.jit_compile)) {
    throw Error(ErrorCode::kInvalidArgument, "compile: cuda_device needs compiled steps, but run_eagerly / jit_compile = false was given",
                "the interpreter runs on the host: drop cuda_device, or compile the steps");
  }
  if (trainer_ && (trainer_->fitting || trainer_->live)) {
    throw Error(ErrorCode::kFailedPrecondition, "compile called while fit/evaluate/predict is running (from a callback?)",
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
  if (data) return data;
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
                fmt::format("{}: {} y arrays for model '{}' with {} outputs ({})", who, y.size(), t.model->name(), t.n_out,
                            fmt::join(t.model->output_names(), ", ")),
                "pass one target array per model output, in output order");
  }
  if (sw.size() > 1 && sw.size() != t.n_out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} sample_weight arrays for model '{}' with {} outputs", who, sw.size(), t.model->name(),
                            t.n_out),
                "pass one sample_weight (for every output) or one per output");
  }
}

void check_fit_options(const FitOptions& o) {
  if (o.batch_size <= 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: batch_size must be > 0, got {}", o.batch_size));
  if (o.epochs < 0 || o.initial_epoch < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: epochs {} / initial_epoch {} must be >= 0", o.epochs, o.initial_epoch));
  }
  if (o.sample_weight.valid() && !o.class_weight.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "fit: sample_weight and class_weight were both given",
                "pass one of them (class_weight becomes per-sample weights)");
  }
  if (!o.data && !o.y.valid()) throw Error(ErrorCode::kInvalidArgument, "fit: no targets y", "pass .y with the labels");
  if (o.validation_batch_size && *o.validation_batch_size <= 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: validation_batch_size must be > 0, got {}", *o.validation_batch_size));
  }
  if (o.validation_freq < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: validation_freq must be >= 1, got {}", o.validation_freq),
                "validate every n epochs (n >= 1), or list 1-based epochs in validation_epochs");
  }
  for (int64_t e : o.validation_epochs) {
    if (e < 1) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: validation_epochs holds {}; epochs are 1-based", e));
    }
  }
  for (size_t i = 0; i < o.class_weight.size(); ++i) {
    const auto& [cls, w] = o.class_weight[i];
    if (!std::isfinite(w) || w < 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: class_weight of class {} is {}", cls, w),
                  "class weights must be finite and >= 0");
    }
    for (size_t j = 0; j < i; ++j) {
      if (o.class_weight[j].first == cls) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: class_weight lists class {} twice", cls));
      }
    }
  }
}

/// Clears the trainer's fitting flag however fit ends.
struct FittingFlag {
  explicit FittingFlag(bool& flag) : flag_(flag) { flag_ = true; }
  ~FittingFlag() { flag_ = false; }
  FittingFlag(const FittingFlag&) = delete;
  FittingFlag& operator=(const FittingFlag&) = delete;
  bool& flag_;
};

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
  // Validation data: validation_data, or the last fraction of the arrays (before shuffling).
  std::optional<Batch> val = o.validation_data;
  Arrays x = o.x, y = o.y, sw = o.sample_weight;
  if (!o.data && x.valid() && y.valid() && x[0].valid() && x[0].rank() > 0) {
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i].valid() && (y[i].rank() == 0 || y[i].shape()[0] != x[0].shape()[0])) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("fit: x has {} samples but {} has shape {}", x[0].shape()[0],
                                y.size() == 1 ? std::string("y") : fmt::format("y[{}]", i), shape_to_string(y[i].shape())),
                    "give x and y the same number of samples");
      }
    }
  }
  if (o.validation_split != 0) {
    if (o.data) throw Error(ErrorCode::kInvalidArgument, "fit: validation_split needs array data (x, y)");
    auto [train, v] = [&] {
      try {
        return split_validation(Batch{x, y, sw}, o.validation_split);
      } catch (const Error& e) {
        throw e.with_context("fit");
      }
    }();
    x = train.x;
    y = train.y;
    sw = train.sample_weight;
    if (!val) val = v;
  }
  if (!o.class_weight.empty()) {
    if (y.size() > 1) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("fit: class_weight with {} outputs' targets", y.size()),
                  "class_weight is for single-output models (as Keras); pass sample_weight per output instead");
    }
    sw = class_weights_to_sample_weights(y[0], o.class_weight);
  }
  check_distributed_batches(t, x, o.batch_size, "fit");
  if (val) check_distributed_batches(t, val->x, o.validation_batch_size.value_or(o.batch_size), "fit (validation data)");
  std::shared_ptr<DataAdapter> adapter = make_adapter(x, y, sw, o.data, o.batch_size, o.shuffle, o.seed, "fit");
  EpochIterator it(adapter, o.steps_per_epoch, t.distribute(true), "steps_per_epoch", o.prefetch);
  std::optional<EpochIterator> val_it;
  if (val) {
    if (!val->y.valid()) throw Error(ErrorCode::kInvalidArgument, "fit: validation_data has no y", "pass Batch{x, y}");
    try {
      val_it.emplace(std::make_shared<ArrayDataAdapter>(val->x, val->y, val->sample_weight,
                                                        o.validation_batch_size.value_or(o.batch_size), false),
                     o.validation_steps, t.distribute(true), "validation_steps", o.prefetch);
    } catch (const Error& e) {
      throw e.with_context("fit: validation_data");
    }
  }
  // The build pass: shapes only, no batch consumed. Validation inputs and labels are checked
  // now too, so no error surfaces after an epoch has trained.
  build_model(adapter->x_types());
  t.prepare();
  check_data_counts(t, x, y, sw, "fit");
  t.check_labels(y);
  if (val) {
    try {
      build_model(types_of(val->x));
      check_data_counts(t, val->x, val->y, val->sample_weight, "fit: validation_data");
      t.check_labels(val->y);
    } catch (const Error& e) {
      throw e.with_context("fit: validation_data");
    }
  }

  callbacks::CallbackList cbs(o.callbacks, {.add_history = true,
                                            .add_progbar = true,
                                            .params = {.epochs = o.epochs, .steps = it.num_steps(), .verbose = o.verbose},
                                            .model = this,
                                            .weights = &t,
                                            .progbar = o.progbar});
  FittingFlag fitting(t.fitting);
  // A compile taking over a second shows its progress where the progress bar goes.
  std::ostream* notices = o.verbose != 0 && process_id() == 0 ? (o.progbar.stream ? o.progbar.stream : &std::cout) : nullptr;
  struct ShowCompiles {
    Trainer& t;
    ShowCompiles(Trainer& trainer, std::ostream* stream) : t(trainer) {
      t.train_fn->show_compiles_on(stream);
      t.test_fn->show_compiles_on(stream);
    }
    ~ShowCompiles() {
      t.train_fn->show_compiles_on(nullptr);
      t.test_fn->show_compiles_on(nullptr);
    }
  } show_compiles(t, notices);
  Logs logs;
  fit_timing_ = {};
  const double run0 = t.train_fn->run_seconds, compile0 = t.train_fn->compile_seconds,
               collective0 = t.train_fn->collective_seconds();
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
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
      const auto loop_start = Clock::now();
      int64_t step = 0;
      // The next batch is taken before the batch hooks fire, so no hook fires for a call
      // that finds the data exhausted.
      std::optional<Batch> b = it.next();
      while (b && !cbs.control().stop_training) {
        const int64_t first = step;
        cbs.on_train_batch_begin(first, {});
        for (int64_t k = 0; k < t.options.steps_per_execution && b; ++k) {
          logs = t.train_batch(*b);
          ++step;
          b = it.next();
        }
        cbs.on_train_batch_end(step - 1, logs);  // Keras: the last step of the call
      }
      fit_timing_.train_seconds += seconds_since(loop_start);
      fit_timing_.train_steps += step;
      fit_timing_.step_seconds = t.train_fn->run_seconds - run0;
      fit_timing_.compile_seconds = t.train_fn->compile_seconds - compile0;
      fit_timing_.collective_seconds = t.train_fn->collective_seconds() - collective0;
      it.stop();
      Logs epoch_logs = logs;
      const bool validate = val_it && (o.validation_epochs.empty()
                                           ? (epoch + 1) % o.validation_freq == 0
                                           : std::find(o.validation_epochs.begin(), o.validation_epochs.end(),
                                                       epoch + 1) != o.validation_epochs.end());
      if (validate) {
        // Keras's fit -> evaluate with the same callbacks: the test hooks fire (the progress bar
        // stays quiet inside fit) and stop_evaluating ends the pass early.
        const auto validation_start = Clock::now();
        const double test_compile0 = t.test_fn->compile_seconds;
        const std::vector<Array> train_m = t.M;
        const Logs vl = test_pass(t, cbs, *val_it);
        for (const auto& [name, value] : vl) epoch_logs.set("val_" + name, value);
        t.M = train_m;
        fit_timing_.validation_seconds += seconds_since(validation_start);
        fit_timing_.validation_compile_seconds += t.test_fn->compile_seconds - test_compile0;
      }
      t.sync();  // callbacks and the user see (and may assign) this epoch's weights
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
  if (!o.data && !o.y.valid()) throw Error(ErrorCode::kInvalidArgument, "evaluate: no targets y", "pass .y with the labels");
  check_distributed_batches(t, o.x, o.batch_size, "evaluate");
  std::shared_ptr<DataAdapter> adapter = make_adapter(o.x, o.y, o.sample_weight, o.data, o.batch_size, false, 0, "evaluate");
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
  std::shared_ptr<DataAdapter> adapter = make_adapter(o.x, Arrays(), Arrays(), o.data, o.batch_size, false, 0, "predict");
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
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("predict: a batch has {} x arrays; model '{}' has {} inputs", b->x.size(), name(),
                                  t.n_in),
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
  for (const std::vector<Array>& p : parts) out.push_back(concat_rows(p, t.options.cuda_device));
  return out;
}

namespace {

/// train_on_batch / test_on_batch: one step on one batch with fresh metric state.
Logs run_on_batch(Model& model, Model::Trainer& t, bool train, const Arrays& x, const Arrays& y, const Arrays& sw) {
  const char* who = train ? "train_on_batch" : "test_on_batch";
  if (!y.valid()) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: no targets y", who), "pass y with the labels");
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

Logs Model::train_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight) {
  if (!trainer_ || !trainer_->compiled_by_user) {
    throw Error(ErrorCode::kFailedPrecondition, "train_on_batch before compile", "call model.compile(...) first");
  }
  if (!trainer_->options.optimizer) {
    throw Error(ErrorCode::kFailedPrecondition, "train_on_batch: compile() was given no optimizer");
  }
  return run_on_batch(*this, *trainer_, true, x, y, sample_weight);
}

Logs Model::test_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight) {
  if (!trainer_ || !trainer_->compiled_by_user) {
    throw Error(ErrorCode::kFailedPrecondition, "test_on_batch before compile", "call model.compile(...) first");
  }
  return run_on_batch(*this, *trainer_, false, x, y, sample_weight);
}

bool Model::trainer_live() const { return trainer_ && trainer_->live; }
callbacks::WeightsAccess& Model::trainer_weights() { return *trainer_; }

std::shared_ptr<optimizers::Optimizer> Model::optimizer() const { return trainer_ ? trainer_->options.optimizer : nullptr; }

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

void Model::save_weights(const std::string& path) {
  if (!input_type()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("save_weights: model '{}' is not built", name()),
                "build it first (build_model, fit or predict)");
  }
  std::vector<std::pair<std::string, Array>> tensors;
  std::vector<Array> values = get_weights();  // the live state when called from a callback
  std::vector<Variable*> vars = variables();
  for (size_t i = 0; i < vars.size(); ++i) tensors.emplace_back(vars[i]->name(), values[i]);
  write_once([&] { save_safetensors(path, tensors, {{"format", "ingot"}, {"model", name()}}); },
             "save_weights('" + path + "')");
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
