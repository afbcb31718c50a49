// StepFunction: one trainer step (train, test or predict) jitted for a compile target -- the CPU or
// a CUDA device with donated state, an SPMD mesh under a distribution, the reference interpreter
// (run_eagerly) -- with one program cache per step. Internal to ingot_trainer.
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

#include "ingot/jit/jit.h"
#include "ingot/trainer/model.h"

namespace ingot::detail {

/// A step function: traced, compiled for its target and cached per input signature by one Jitted
/// (the CPU or a CUDA device with donated state, an SPMD mesh under a distribution, or the
/// reference interpreter for run_eagerly).
class StepFunction {
 public:
  /// `target`: where the step compiles and runs (CompileTarget); `donate`: the state arguments it
  /// takes over; `options`: the lowering and back-end options. `collective_ns` (an SPMD target's
  /// SpmdTargetOptions::collective_nanoseconds, or null) is summed over `devices` devices.
  StepFunction(TraceFn fn, std::string name, std::vector<int64_t> donate, std::shared_ptr<const CompileTarget> target,
               const CompileOptions& options, std::shared_ptr<std::atomic<int64_t>> collective_ns = nullptr,
               int64_t devices = 1)
      : name_(std::move(name)), collective_ns_(std::move(collective_ns)), devices_(devices) {
    // The compile's progress reaches notice_ (shown by fit once a compile takes over a second).
    codegen::CpuCompileOptions compiler = options.compiler;
    std::function<void(int64_t, int64_t)> user_progress = compiler.progress;
    compiler.progress = [notice = notice_, user_progress](int64_t done, int64_t total) {
      if (user_progress) user_progress(done, total);
      notice->report(done, total);
    };
    jit_.emplace(jit(std::move(fn), {.name = name_,
                                     .donate_argnums = std::move(donate),
                                     .lowering = options.lowering,
                                     .target = std::move(target),
                                     .compile = compiler,
                                     .cuda = options.cuda}));
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
    const double compiled_before = jit_->compile_seconds();
    std::vector<Array> out = (*jit_)(args);
    const double compile = jit_->compile_seconds() - compiled_before;
    compile_seconds += compile;
    run_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - compile;
    return out;
  }
  /// Kernels per call of the signature compiled last (Jitted::kernel_count; under a distribution
  /// one device's program, collectives not counted); 0 when the step is interpreted.
  int64_t kernel_count() const { return jit_->kernel_count(); }
  /// The cost of one call of the signature compiled last (ir::CostAnalysis; under a distribution
  /// one device's graph).
  ir::CostAnalysis cost_analysis() const { return jit_->cost_analysis(); }
  /// Where the compiles of this step spent their time (CompileBreakdown; interpreted: tracing).
  CompileBreakdown compile_breakdown() const { return jit_->compile_breakdown(); }
  int64_t compile_count() const { return jit_->compile_count(); }
  /// Seconds one device spent in collectives (the devices' total over their count); 0 without
  /// an SPMD target.
  double collective_seconds() const {
    if (!collective_ns_) return 0;
    return 1e-9 * static_cast<double>(collective_ns_->load()) / static_cast<double>(devices_);
  }

  /// Where the progress of a compile that takes more than a second is shown
  /// ("compiling <step>: 212/390 kernels"); nullptr: nowhere. Not owned; must outlive the calls.
  void show_compiles_on(std::ostream* stream) { notice_->stream = stream; }

  double run_seconds = 0;      ///< wall time inside the step, compilation excluded
  double compile_seconds = 0;  ///< wall time tracing and compiling

 private:
  std::string name_;
  std::optional<Jitted> jit_;
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

  std::shared_ptr<std::atomic<int64_t>> collective_ns_;  ///< the SPMD target's collective time, or null
  int64_t devices_ = 1;                                  ///< devices collective_ns_ sums over
};

}  // namespace ingot::detail
