#include "ingot/jit/jit.h"

#include "jit/jit_internal.h"

#include <fmt/format.h>

#include <chrono>
#include <algorithm>
#include <cstdlib>

#include "ingot/lower/lowering.h"

namespace ingot {

namespace detail {

std::vector<std::pair<size_t, size_t>> donation_pairs(const ir::Graph& graph,
                                                      const std::vector<int64_t>& donate_argnums) {
  const auto& params = graph.parameters();
  const auto& outs = graph.outputs();
  std::vector<std::pair<size_t, size_t>> pairs;
  std::vector<bool> taken(outs.size(), false);
  std::vector<bool> seen(params.size(), false);
  for (int64_t a : donate_argnums) {
    if (a < 0 || a >= static_cast<int64_t>(params.size())) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("donate_argnums: {} is out of range for {} arguments", a, params.size()));
    }
    if (seen[static_cast<size_t>(a)]) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("donate_argnums: {} is repeated", a));
    }
    seen[static_cast<size_t>(a)] = true;
    const ir::ValueId p = params[static_cast<size_t>(a)];
    if (std::find(outs.begin(), outs.end(), p) != outs.end()) continue;  // returned unchanged
    for (size_t j = 0; j < outs.size(); ++j) {
      // An output value returned more than once is not paired: one buffer cannot be both the
      // donated parameter and another output.
      const bool repeated = std::count(outs.begin(), outs.end(), outs[j]) > 1;
      if (!taken[j] && !repeated && graph.type(outs[j]) == graph.type(p) && graph.value(outs[j]).producer >= 0) {
        taken[j] = true;
        pairs.emplace_back(static_cast<size_t>(a), j);
        break;
      }
    }
  }
  return pairs;
}

}  // namespace detail

std::shared_ptr<const Executable> compile_graph(const ir::Graph& graph, const codegen::CpuCompileOptions& options,
                                                const std::vector<int64_t>& donate_argnums,
                                                const lower::LoweringOptions& lowering) {
  const std::vector<std::pair<size_t, size_t>> pairs = detail::donation_pairs(graph, donate_argnums);
  const auto lower_start = std::chrono::steady_clock::now();
  const lower::LoweredModule lowered = lower::lower_graph(graph, "main", pairs, lowering);
  const double lower_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - lower_start).count();
  std::vector<std::pair<Shape, DType>> params, results;
  for (const ir::TensorType& t : lowered.params) params.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : lowered.results) results.emplace_back(t.shape, t.dtype);
  std::shared_ptr<const codegen::CpuKernel> kernel =
      codegen::compile_cpu(lowered.text, "main", params, results, options);

  // Slots: inputs, then the kernel's results.
  std::vector<std::pair<Shape, DType>> slots = params;
  slots.insert(slots.end(), results.begin(), results.end());
  Thunk thunk;
  thunk.name = "jit:" + graph.name();
  for (size_t i = 0; i < params.size(); ++i) thunk.input_slots.push_back(i);
  for (size_t i = 0; i < results.size(); ++i) thunk.output_slots.push_back(params.size() + i);
  // A donated output is written into the donated parameter's slot (its buffer).
  for (const auto& [param, output] : pairs) thunk.output_slots[lowered.result_of_output[output]] = param;
  thunk.run = [kernel, name = thunk.name](std::span<const Array> in, std::span<Array> out) {
    try {
      kernel->run(in, out);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kOutOfMemory) throw;
      throw Error(e.code(), fmt::format("{}: {}", name, e.message()), e.hint());  // name the step
    }
  };
  thunk.kernels = kernel->stats().kernels();
  thunk.compile = codegen::compile_info(*kernel);
  thunk.compile.lower_seconds = lower_seconds;
  std::vector<size_t> outputs;
  for (size_t r : lowered.result_of_output) outputs.push_back(thunk.output_slots[r]);
  std::vector<size_t> donated;
  for (int64_t a : donate_argnums) donated.push_back(static_cast<size_t>(a));
  const std::string name = thunk.name;
  return std::make_shared<const Executable>(std::move(slots), params.size(), std::vector<Thunk>{std::move(thunk)},
                                            std::move(outputs), std::move(donated), name);
}

struct Jitted::State {
  TraceFn fn;
  JitOptions options;
  std::shared_ptr<const CompileTarget> target;  ///< options.target, or the CPU
  std::string what;                             ///< "jit '<name>'", for the target's errors
  mutable std::mutex mutex;
  std::map<std::vector<std::pair<Shape, DType>>, std::shared_ptr<const Executable>> cache;
  double seconds = 0;
  int64_t last_kernels = 0;    ///< kernel_count() of the executable compiled last
  ir::CostAnalysis last_cost;  ///< cost_analysis() of the graph compiled last
  CompileBreakdown breakdown;
};

Jitted::Jitted(TraceFn fn, JitOptions options) : state_(std::make_shared<State>()) {
  state_->fn = std::move(fn);
  state_->options = std::move(options);
  state_->target = state_->options.target ? state_->options.target : cpu_target();
  state_->what = fmt::format("jit '{}'", state_->options.name);
}

std::vector<Array> Jitted::operator()(const std::vector<Array>& args) const {
  const CompileTarget& target = *state_->target;
  const std::vector<ir::TensorType> types = target.signature(args, state_->what);
  std::vector<std::pair<Shape, DType>> signature;
  for (const ir::TensorType& t : types) signature.emplace_back(t.shape, t.dtype);
  std::shared_ptr<const Executable> exe;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->cache.find(signature);
    if (it != state_->cache.end()) {
      exe = it->second;
    } else {
      const auto start = std::chrono::steady_clock::now();
      TraceStats trace_stats;
      ir::Graph graph = trace(state_->fn, types, state_->options.name, &trace_stats);
      const double traced = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      codegen::CpuCompileOptions copts = state_->options.compile;
      if (const char* dir = std::getenv("INGOT_DUMP_DIR"); copts.dump_dir.empty() && dir != nullptr) {
        // Distinct per Jitted object (its address) and per signature, so two jitted functions
        // with the same name do not overwrite each other's dumps.
        copts.dump_dir =
            fmt::format("{}/{}-{}-{}", dir, state_->options.name, fmt::ptr(state_.get()), state_->cache.size());
      }
      codegen::CudaCompileOptions cuda_opts = state_->options.cuda;
      if (cuda_opts.dump_dir.empty()) cuda_opts.dump_dir = copts.dump_dir;
      exe = target.compile(graph, state_->options.donate_argnums,
                           {.lowering = state_->options.lowering, .cpu = copts, .cuda = cuda_opts});
      state_->cache.emplace(signature, exe);
      state_->last_kernels = exe->kernel_count();
      state_->last_cost = ir::cost_analysis_if_known(graph);
      const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      state_->seconds += total;
      state_->breakdown.add(traced, trace_stats.autodiff_seconds, total, exe->compile_info());
    }
  }
  return target.run(*exe, args);
}

int64_t Jitted::compile_count() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return static_cast<int64_t>(state_->cache.size());
}

ir::CostAnalysis Jitted::cost_analysis() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last_cost;
}

int64_t Jitted::kernel_count() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last_kernels;
}

void CompileBreakdown::add(double trace_and_autodiff, double autodiff, double total, const CompileInfo& info) {
  ++compiles;
  trace_seconds += trace_and_autodiff - autodiff;
  autodiff_seconds += autodiff;
  total_seconds += total;
  backend += info;
}

CompileBreakdown Jitted::compile_breakdown() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->breakdown;
}

double Jitted::compile_seconds() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->seconds;
}

Jitted jit(TraceFn fn, JitOptions options) { return Jitted(std::move(fn), std::move(options)); }

}  // namespace ingot
