// StepFunction: one trainer step (train, test or predict) run compiled by jit with donated state,
// by the reference interpreter (run_eagerly), or as an SPMD program over a distribution's devices;
// each mode caches one program per input signature. Internal to ingot_trainer.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/jit/spmd.h"
#include "ingot/runtime/spmd.h"
#include "ingot/trainer/model.h"

namespace ingot::detail {

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

}  // namespace ingot::detail
