// compiler_bench: the CPU compiler against the reference interpreter on the Fashion-MNIST MLP
// train step (784-256-128-10, batch 128, f32, value_and_grad + SGD; BLAS GEMM and generated
// loops), the CNN train step (32c3-pool-64c3-pool-128-10, batch 32), compile times and the host
// overhead of one tiny Executable call, and forward convolution throughput; convolutions and
// matrix products each through their library call and as generated loops. Prints a Markdown
// report with ratios measured in the same run (bench/README.md: ratios, never absolute
// thresholds).
//
//   compiler_bench [--quick] [mlp|tiny|cnn|cnn128|conv ...]
//     --quick: fewer repetitions, for a smoke run; sections: only those (default all)
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ingot/kernels/cpu_peak.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/codegen/cpu_compiler.h"
#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/lower/lowering.h"
#include "ingot/trace/ops.h"

namespace ingot::bench {
namespace {

constexpr int64_t kBatch = 128;
const std::vector<int64_t> kWidths = {784, 256, 128, 10};
constexpr double kLearningRate = 0.05;

/// Repetition counts (median of `runs` after `warmup` untimed runs).
struct Plan {
  int interp_warmup = 1, interp_runs = 5;
  int step_warmup = 5, step_runs = 50;
  int compile_runs = 3;
  int tiny_warmup = 1000, tiny_runs = 20000;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Median wall time of `runs` calls of `fn` after `warmup` untimed calls, in seconds.
double median_seconds(int warmup, int runs, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t(static_cast<size_t>(runs));
  for (double& s : t) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    s = seconds_since(start);
  }
  std::nth_element(t.begin(), t.begin() + runs / 2, t.end());
  return t[static_cast<size_t>(runs / 2)];
}

/// Median seconds per call of `fn`, timed in blocks of `block` calls (tiny calls are shorter
/// than the clock's resolution is useful for).
double median_per_call(int warmup, int runs, int block, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  return median_seconds(0, runs / block,
                        [&] {
                          for (int i = 0; i < block; ++i) fn();
                        }) /
         block;
}

/// The MLP's cross-entropy loss: arguments w0, b0, w1, b1, w2, b2, x, labels.
TraceFn mlp_loss() {
  return [](const std::vector<Tensor>& a) {
    const size_t layers = kWidths.size() - 1;
    Tensor h = a[2 * layers];
    for (size_t l = 0; l < layers; ++l) {
      h = matmul(h, a[2 * l]) + a[2 * l + 1];
      if (l + 1 < layers) h = relu(h);
    }
    Tensor onehot = one_hot(a[2 * layers + 1], kWidths.back(), DType::kF32);
    return std::vector<Tensor>{mean(negate(sum(onehot * log_softmax(h), {1})))};
  };
}

/// One SGD step: returns the updated parameters and the loss.
TraceFn train_step() {
  return [](const std::vector<Tensor>& a) {
    const int64_t params = 2 * static_cast<int64_t>(kWidths.size() - 1);
    std::vector<int64_t> argnums;
    for (int64_t i = 0; i < params; ++i) argnums.push_back(i);
    std::vector<Tensor> vg = value_and_grad(mlp_loss(), argnums)(a);
    std::vector<Tensor> out;
    for (int64_t i = 0; i < params; ++i) out.push_back(a[i] - kLearningRate * vg[1 + i]);
    out.push_back(vg[0]);
    return out;
  };
}

std::vector<ir::TensorType> step_types() {
  std::vector<ir::TensorType> t;
  for (size_t l = 0; l + 1 < kWidths.size(); ++l) {
    t.push_back({{kWidths[l], kWidths[l + 1]}, DType::kF32});
    t.push_back({{kWidths[l + 1]}, DType::kF32});
  }
  t.push_back({{kBatch, kWidths[0]}, DType::kF32});
  t.push_back({{kBatch}, DType::kI32});
  return t;
}

/// Seeded arguments: Glorot-uniform weights, zero biases, pixels in [0, 1), labels in [0, 10).
std::vector<Array> step_args() {
  std::mt19937 rng(42);
  const std::vector<ir::TensorType> types = step_types();
  const size_t x_index = types.size() - 2;
  std::vector<Array> args;
  for (size_t i = 0; i < types.size(); ++i) {
    const ir::TensorType& t = types[i];
    Array a = Array::zeros(t.shape, t.dtype);
    if (t.dtype == DType::kI32) {
      for (int64_t j = 0; j < a.size(); ++j) a.data<int32_t>()[j] = static_cast<int32_t>(rng() % 10);
    } else if (t.shape.size() == 2) {
      const float limit =
          i == x_index ? 1.0f : static_cast<float>(std::sqrt(6.0 / static_cast<double>(t.shape[0] + t.shape[1])));
      std::uniform_real_distribution<float> u(i == x_index ? 0.0f : -limit, limit);
      for (int64_t j = 0; j < a.size(); ++j) a.data<float>()[j] = u(rng);
    }
    args.push_back(a);
  }
  return args;
}

/// The largest relative difference between two output lists.
double max_rel_diff(const std::vector<Array>& a, const std::vector<Array>& b) {
  double worst = 0;
  for (size_t o = 0; o < a.size(); ++o) {
    std::vector<double> x = a[o].to_doubles(), y = b[o].to_doubles();
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(x[i] - y[i]) / std::max({std::abs(x[i]), std::abs(y[i]), 1.0}));
    }
  }
  return worst;
}

std::string ms(double s) { return fmt::format("{:.3f} ms", s * 1e3); }
std::string us(double s) { return fmt::format("{:.2f} us", s * 1e6); }

void report_train_step(const Plan& plan) {
  const std::vector<Array> args = step_args();
  auto start = std::chrono::steady_clock::now();
  const ir::Graph graph = trace(train_step(), step_types(), "mlp_step");
  const double trace_s = seconds_since(start);
  start = std::chrono::steady_clock::now();
  const std::string mlir = lower::lower_to_mlir(graph);
  const double lower_s = seconds_since(start);

  std::shared_ptr<const Executable> exe;
  const double compile_s = median_seconds(0, plan.compile_runs, [&] { exe = compile_graph(graph); });
  Jitted jitted = jit(train_step(), {.name = "mlp_step"});
  start = std::chrono::steady_clock::now();
  jitted(args);
  const double first_call_s = seconds_since(start);

  std::vector<Array> compiled_out, interp_out;
  const double step_s = median_seconds(plan.step_warmup, plan.step_runs, [&] {
    compiled_out = exe->run(args);
    benchmark::DoNotOptimize(compiled_out.data());
  });
  // The same step with matrix products as generated loop nests instead of BLAS GEMM calls.
  std::shared_ptr<const Executable> loops_exe = compile_graph(graph, {}, {}, {.blas_gemm = false});
  const double loops_step_s = median_seconds(plan.step_warmup, plan.step_runs, [&] {
    std::vector<Array> out = loops_exe->run(args);
    benchmark::DoNotOptimize(out.data());
  });
  const double jit_step_s = median_seconds(plan.step_warmup, plan.step_runs, [&] {
    compiled_out = jitted(args);
    benchmark::DoNotOptimize(compiled_out.data());
  });
  // Donated weights: each step consumes its parameters, so the loop feeds the new ones back.
  std::vector<int64_t> params;
  for (int64_t i = 0; i < 2 * static_cast<int64_t>(kWidths.size() - 1); ++i) params.push_back(i);
  Jitted donating = jit(train_step(), {.name = "mlp_step_donated", .donate_argnums = params});
  std::vector<Array> state;
  for (const Array& a : args) state.push_back(a.clone());
  const double donated_step_s = median_seconds(plan.step_warmup, plan.step_runs, [&] {
    std::vector<Array> out = donating(state);
    for (size_t i = 0; i < params.size(); ++i) state[i] = out[i];
    benchmark::DoNotOptimize(out.data());
  });
  const double interp_s = median_seconds(plan.interp_warmup, plan.interp_runs, [&] {
    interp_out = interp::interpret(graph, args);
    benchmark::DoNotOptimize(interp_out.data());
  });
  const double gap = max_rel_diff(interp_out, compiled_out);

  fmt::print("## MLP train step ({}, batch {}, f32, value_and_grad + SGD)\n\n", fmt::join(kWidths, "-"), kBatch);
  fmt::print("Graph: {} nodes after tracing; MLIR module {} KiB.\n\n", graph.num_nodes(), mlir.size() / 1024);
  fmt::print("| measurement | time |\n|---|---|\n");
  fmt::print("| trace (value_and_grad included) | {} |\n", ms(trace_s));
  fmt::print("| lower to MLIR text | {} |\n", ms(lower_s));
  fmt::print("| compile_graph (pipeline + LLVM -O3 JIT), median of {} | {} |\n", plan.compile_runs, ms(compile_s));
  fmt::print("| first jit call (trace + compile + run) | {} |\n", ms(first_call_s));
  fmt::print("| compiled step: Executable::run, median of {} after {} warm-up | {} |\n", plan.step_runs,
             plan.step_warmup, ms(step_s));
  fmt::print("| compiled step: jitted call (cache lookup + run) | {} |\n", ms(jit_step_s));
  fmt::print("| compiled step with generated GEMM loops instead of BLAS (LoweringOptions::blas_gemm = false) | {} |\n",
             ms(loops_step_s));
  fmt::print("| compiled step with donated parameters (donate_argnums, new weights fed back) | {} |\n",
             ms(donated_step_s));
  fmt::print("| interpreter step, median of {} after {} warm-up | {} |\n\n", plan.interp_runs, plan.interp_warmup,
             ms(interp_s));
  fmt::print("| ratio | value |\n|---|---|\n");
  fmt::print("| interpreter step / compiled step (speed-up) | {:.1f}x |\n", interp_s / step_s);
  fmt::print("| compile time / compiled step | {:.1f} steps |\n", compile_s / step_s);
  fmt::print("| break-even: compile time / (interpreter step - compiled step) | {:.2f} steps |\n",
             compile_s / (interp_s - step_s));
  fmt::print("| jitted call / Executable::run | {:.3f} |\n", jit_step_s / step_s);
  fmt::print("| donated step / jitted step | {:.3f} |\n", donated_step_s / jit_step_s);
  fmt::print("| generated-loop GEMM step / BLAS GEMM step | {:.2f} |\n", loops_step_s / step_s);
  fmt::print("| max relative difference compiled vs interpreter (all outputs) | {:.2e} |\n\n", gap);
}

void report_tiny_call(const Plan& plan) {
  TraceFn add_fn = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + a[1]}; };
  const std::vector<ir::TensorType> types = {{{1}, DType::kF32}, {{1}, DType::kF32}};
  const ir::Graph graph = trace(add_fn, types, "tiny_add");
  std::shared_ptr<const Executable> exe = compile_graph(graph);
  Jitted jitted = jit(add_fn, {.name = "tiny_add"});
  const std::vector<Array> args = {Array::full({1}, 1.5, DType::kF32), Array::full({1}, 2.0, DType::kF32)};
  jitted(args);
  // The same lowered module compiled straight to a CpuKernel: the call without the Executable.
  const lower::LoweredModule lowered = lower::lower_graph(graph, "main");
  auto kernel =
      codegen::compile_cpu(lowered.text, "main", {{{1}, DType::kF32}, {{1}, DType::kF32}}, {{{1}, DType::kF32}});
  std::vector<Array> out = {Array::zeros({1}, DType::kF32)};

  const int block = 100;
  const double kernel_s = median_per_call(plan.tiny_warmup, plan.tiny_runs, block, [&] {
    kernel->run(args, out);
    benchmark::DoNotOptimize(out.data());
  });
  std::vector<Array> result;
  const double exe_s = median_per_call(plan.tiny_warmup, plan.tiny_runs, block, [&] {
    result = exe->run(args);
    benchmark::DoNotOptimize(result.data());
  });
  const double jit_s = median_per_call(plan.tiny_warmup, plan.tiny_runs, block, [&] {
    result = jitted(args);
    benchmark::DoNotOptimize(result.data());
  });
  const double interp_s = median_per_call(plan.tiny_warmup, plan.tiny_runs, block, [&] {
    result = interp::interpret(graph, args);
    benchmark::DoNotOptimize(result.data());
  });
  if (result[0].to_vector<float>()[0] != 3.5f || out[0].to_vector<float>()[0] != 3.5f) {
    fmt::print("ERROR: the tiny add computed {} / {}, not 3.5\n", result[0].to_string(), out[0].to_string());
  }
  fmt::print("## Host overhead of one call on tiny inputs (a (1,)-element f32 add)\n\n");
  fmt::print("Median per call over {} calls (blocks of {}) after {} warm-up calls.\n\n", plan.tiny_runs, block,
             plan.tiny_warmup);
  fmt::print("| path | per call | vs raw kernel |\n|---|---|---|\n");
  fmt::print("| CpuKernel::run (caller-allocated output; argument checks, descriptors) | {} | 1.00 |\n", us(kernel_s));
  fmt::print("| Executable::run (allocates the output slot, one thunk) | {} | {:.2f} |\n", us(exe_s), exe_s / kernel_s);
  fmt::print("| jitted call (signature + cache lookup under a mutex, then Executable::run) | {} | {:.2f} |\n",
             us(jit_s), jit_s / kernel_s);
  fmt::print("| interpreter (interp::interpret of the one-node graph) | {} | {:.2f} |\n\n", us(interp_s),
             interp_s / kernel_s);
}

// ---------------------------------------------------------------------------------------------
// GEMM throughput against the machine's measured peak, and thread scaling

/// GFLOP/s of a compiled (m, k) @ (k, n) f32 matrix product, BLAS GEMM or generated loops.
double gemm_gflops(const Plan& plan, int64_t m, int64_t k, int64_t n, bool blas) {
  TraceFn fn = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; };
  const ir::Graph graph = trace(fn, {{{m, k}, DType::kF32}, {{k, n}, DType::kF32}}, "gemm");
  std::shared_ptr<const Executable> exe = compile_graph(graph, {}, {}, {.blas_gemm = blas});
  const std::vector<Array> args = {Array::full({m, k}, 0.5, DType::kF32), Array::full({k, n}, 0.25, DType::kF32)};
  const double s = median_seconds(plan.step_warmup, plan.step_runs, [&] {
    std::vector<Array> out = exe->run(args);
    benchmark::DoNotOptimize(out.data());
  });
  return 2.0 * static_cast<double>(m * k * n) / s / 1e9;
}

void report_gemm(const Plan& plan) {
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const double peak = kernels::measured_fma_peak_gflops(threads);
  fmt::print("## GEMM throughput (f32) against the measured peak\n\n");
  fmt::print("Measured peak: {:.1f} GFLOP/s on {} threads ({} FMA chains; `kernels::measured_fma_peak_gflops`).\n\n",
             peak, threads, __builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2");
  fmt::print("| (m, k) @ (k, n) | BLAS GEMM (chosen) | fraction of peak | generated loops | BLAS / loops |\n");
  fmt::print("|---|---|---|---|---|\n");
  const std::vector<std::array<int64_t, 3>> shapes = {
      {128, 784, 256}, {128, 256, 128}, {784, 128, 256}, {1024, 1024, 1024}};
  for (const auto& [m, k, n] : shapes) {
    const double blas = gemm_gflops(plan, m, k, n, true), loops = gemm_gflops(plan, m, k, n, false);
    fmt::print("| ({}, {}) @ ({}, {}) | {:.1f} GFLOP/s | {:.0f}% | {:.1f} GFLOP/s | {:.2f} |\n", m, k, k, n, blas,
               100 * blas / peak, loops, blas / loops);
  }
  fmt::print("\n");
}

/// The default pipeline for all hardware threads with ingot-parallelize-outer-loops' `min-work`
/// set to `min_work` (the default is codegen::kMinParallelWork).
std::vector<codegen::PipelineStage> pipeline_with_min_work(int64_t min_work) {
  std::vector<codegen::PipelineStage> stages = codegen::default_cpu_pipeline(0);
  for (codegen::PipelineStage& s : stages) {
    const std::string key = fmt::format("min-work={}", codegen::kMinParallelWork);
    if (const size_t at = s.pipeline.find(key); at != std::string::npos) {
      s.pipeline.replace(at, key.size(), fmt::format("min-work={}", min_work));
    }
  }
  return stages;
}

/// The MLP train step compiled for 1 thread against all hardware threads (parallel loop nests
/// through OpenMP; CpuCompileOptions::num_threads), for several parallelisation thresholds.
void report_threads(const Plan& plan) {
  const std::vector<Array> args = step_args();
  const ir::Graph graph = trace(train_step(), step_types(), "mlp_step");
  auto step = [&](const codegen::CpuCompileOptions& options) {
    std::shared_ptr<const Executable> exe = compile_graph(graph, options);
    return median_seconds(plan.step_warmup, plan.step_runs, [&] {
      std::vector<Array> out = exe->run(args);
      benchmark::DoNotOptimize(out.data());
    });
  };
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const double serial = step({.num_threads = 1});
  fmt::print("## Thread scaling of the MLP train step ({} hardware threads)\n\n", threads);
  fmt::print("| loops | step | serial / this |\n|---|---|---|\n");
  fmt::print("| serial (num_threads = 1) | {} | 1.00 |\n", ms(serial));
  for (const int64_t min_work : {codegen::kMinParallelWork / 8, codegen::kMinParallelWork,
                                 codegen::kMinParallelWork * 8, codegen::kMinParallelWork * 64}) {
    const double t = step({.pipeline = pipeline_with_min_work(min_work)});
    fmt::print("| parallel outer loops, all {} threads, min-work {}{} | {} | {:.2f} |\n", threads, min_work,
               min_work == codegen::kMinParallelWork ? " (default)" : "", ms(t), serial / t);
  }
  fmt::print("\n");
}

}  // namespace
}  // namespace ingot::bench

namespace ingot::bench {
namespace {

/// The Fashion-MNIST CNN 32c3-pool-64c3-pool-128-10 (the design's peer model) train step:
/// arguments k1 (3,3,1,32), c1 (32,), k2 (3,3,32,64), c2 (64,), w3 (1600,128), b3 (128,),
/// w4 (128,10), b4 (10,), x (batch,28,28,1), labels (batch,) i32; SGD on all parameters.
TraceFn cnn_train_step() {
  TraceFn loss = [](const std::vector<Tensor>& a) {
    Tensor h = max_pool2d(relu(conv2d(a[8], a[0]) + a[1]), {2, 2}, {2, 2});  // (b,13,13,32)
    h = max_pool2d(relu(conv2d(h, a[2]) + a[3]), {2, 2}, {2, 2});            // (b,5,5,64)
    h = relu(matmul(reshape(h, {h.dim(0), 1600}), a[4]) + a[5]);
    Tensor logits = matmul(h, a[6]) + a[7];
    Tensor onehot = one_hot(a[9], 10, DType::kF32);
    return std::vector<Tensor>{mean(negate(sum(onehot * log_softmax(logits), {1})))};
  };
  return [loss](const std::vector<Tensor>& a) {
    std::vector<Tensor> vg = value_and_grad(loss, {0, 1, 2, 3, 4, 5, 6, 7})(a);
    std::vector<Tensor> out;
    for (size_t i = 0; i < 8; ++i) out.push_back(a[i] - kLearningRate * vg[1 + i]);
    out.push_back(vg[0]);
    return out;
  };
}

/// Seeded CNN step arguments (uniform in [-0.1, 0.1), labels in [0, 10)) and their types.
void cnn_args(int64_t batch, std::vector<ir::TensorType>& types, std::vector<Array>& args) {
  const std::vector<Shape> shapes = {{3, 3, 1, 32}, {32}, {3, 3, 32, 64},    {64}, {1600, 128}, {128},
                                     {128, 10},     {10}, {batch, 28, 28, 1}};
  std::mt19937 rng(7);
  for (const Shape& s : shapes) {
    types.push_back({s, DType::kF32});
    Array a = Array::zeros(s, DType::kF32);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    for (int64_t j = 0; j < a.size(); ++j) a.data<float>()[j] = u(rng);
    args.push_back(a);
  }
  types.push_back({{batch}, DType::kI32});
  Array labels = Array::zeros({batch}, DType::kI32);
  for (int64_t j = 0; j < batch; ++j) labels.data<int32_t>()[j] = static_cast<int32_t>(rng() % 10);
  args.push_back(labels);
}

/// The CNN train step with convolutions through the im2col + BLAS kernel (the default) and as
/// generated loop nests (LoweringOptions::library_conv = false); the interpreter when asked.
void report_cnn_step(const Plan& plan, int64_t batch, bool with_interpreter) {
  std::vector<ir::TensorType> types;
  std::vector<Array> args;
  cnn_args(batch, types, args);
  ir::Graph graph = trace(cnn_train_step(), types, "cnn_step");
  std::shared_ptr<const Executable> exe, loops_exe;
  const double compile_s = median_seconds(0, 1, [&] { exe = compile_graph(graph); });
  std::shared_ptr<const Executable> all_library_exe = compile_graph(graph, {}, {}, {.library_conv_min_k = 0});
  std::shared_ptr<const Executable> serial_exe = compile_graph(graph, {.num_threads = 1});
  const double loops_compile_s =
      median_seconds(0, 1, [&] { loops_exe = compile_graph(graph, {}, {}, {.library_conv = false}); });
  std::vector<Array> compiled_out, loops_out, interp_out;
  const int runs = std::max(3, plan.step_runs / 5);
  const double step_s = median_seconds(2, runs, [&] { compiled_out = exe->run(args); });
  const double all_library_s = median_seconds(2, runs, [&] {
    std::vector<Array> out = all_library_exe->run(args);
    benchmark::DoNotOptimize(out.data());
  });
  const double serial_s = median_seconds(2, runs, [&] {
    std::vector<Array> out = serial_exe->run(args);
    benchmark::DoNotOptimize(out.data());
  });
  const double loops_step_s = median_seconds(1, std::max(3, runs / 4), [&] { loops_out = loops_exe->run(args); });
  fmt::print("## CNN train step (32c3-pool-64c3-pool-128-10, batch {}, f32, value_and_grad + SGD)\n\n", batch);
  const auto convs = std::count_if(graph.nodes().begin(), graph.nodes().end(),
                                   [](const ir::Node& n) { return n.op == "convolution"; });
  fmt::print("Graph: {} nodes, {} of them convolutions (forward, input and kernel cotangents).\n\n", graph.num_nodes(),
             convs);
  fmt::print("| measurement | time |\n|---|---|\n");
  fmt::print("| compile_graph, default (library convolutions for K >= {}, loops below) | {:.1f} ms |\n",
             lower::LoweringOptions{}.library_conv_min_k, compile_s * 1e3);
  fmt::print("| compile_graph, generated-loop convolutions | {:.1f} ms |\n", loops_compile_s * 1e3);
  fmt::print("| compiled step, default, median of {} | {:.1f} ms |\n", runs, step_s * 1e3);
  fmt::print("| compiled step, every convolution through the library (library_conv_min_k = 0) | {:.1f} ms |\n",
             all_library_s * 1e3);
  fmt::print(
      "| compiled step, default but serial loop nests (num_threads = 1; libraries still threaded) | {:.1f} ms |\n",
      serial_s * 1e3);
  fmt::print("| compiled step, generated-loop convolutions (LoweringOptions::library_conv = false) | {:.1f} ms |\n",
             loops_step_s * 1e3);
  double interp_s = 0;
  if (with_interpreter) {
    interp_s = median_seconds(0, 1, [&] { interp_out = interp::interpret(graph, args); });
    fmt::print("| interpreter step (one run) | {:.1f} ms |\n", interp_s * 1e3);
  }
  fmt::print("\n| ratio | value |\n|---|---|\n");
  fmt::print("| generated-loop step / default step | {:.2f}x |\n", loops_step_s / step_s);
  fmt::print("| all-library step / default step | {:.2f}x |\n", all_library_s / step_s);
  fmt::print("| serial-loops step / default step (parallel loop nests' speed-up) | {:.2f}x |\n", serial_s / step_s);
  fmt::print("| max relative difference library vs loops | {:.2e} |\n", max_rel_diff(loops_out, compiled_out));
  if (with_interpreter) {
    fmt::print("| interpreter step / default step | {:.1f}x |\n", interp_s / step_s);
    fmt::print("| max relative difference library vs interpreter | {:.2e} |\n", max_rel_diff(interp_out, compiled_out));
    fmt::print("| max relative difference loops vs interpreter | {:.2e} |\n", max_rel_diff(interp_out, loops_out));
  }
  fmt::print("\n");
}

/// Forward convolutions alone (NHWC / HWIO, f32, batch `batch`): GFLOP/s (2 flops per
/// multiply-add of the result's windows) of the library kernel and of the generated loops, at the
/// CNN's shapes and over a sweep of the reduction length K (kernel taps x input features), where
/// the two cross over.
void report_conv_gflops(const Plan& plan, int64_t batch) {
  struct Case {
    std::string name;
    Shape x, k;
    std::string padding;
  };
  std::vector<Case> cases = {{"CNN layer 1: 28x28x1 -> 3x3x32, valid", {batch, 28, 28, 1}, {3, 3, 1, 32}, "valid"},
                             {"CNN layer 2: 13x13x32 -> 3x3x64, valid", {batch, 13, 13, 32}, {3, 3, 32, 64}, "valid"},
                             {"14x14x32 -> 3x3x64, same", {batch, 14, 14, 32}, {3, 3, 32, 64}, "same"}};
  for (int64_t c : {2, 4, 5, 6, 8}) {
    cases.push_back({fmt::format("28x28x{} -> 3x3x32, valid", c), {batch, 28, 28, c}, {3, 3, c, 32}, "valid"});
  }
  for (int64_t c : {32, 48, 64}) {
    cases.push_back({fmt::format("14x14x{} -> 1x1x32", c), {batch, 14, 14, c}, {1, 1, c, 32}, "valid"});
  }
  fmt::print("## Forward convolution throughput (batch {}, NHWC / HWIO, f32)\n\n", batch);
  fmt::print("K = kernel taps x input features (multiply-adds per result element).\n\n");
  fmt::print("| convolution | K | library | generated loops | library / loops |\n|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    Conv2DOptions options;
    options.padding = c.padding;
    TraceFn fn = [options](const std::vector<Tensor>& a) { return std::vector<Tensor>{conv2d(a[0], a[1], options)}; };
    const ir::Graph graph = trace(fn, {{c.x, DType::kF32}, {c.k, DType::kF32}}, "conv");
    std::mt19937 rng(3);
    std::vector<Array> args;
    for (const Shape& s : {c.x, c.k}) {
      Array a = Array::zeros(s, DType::kF32);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (int64_t j = 0; j < a.size(); ++j) a.data<float>()[j] = u(rng);
      args.push_back(a);
    }
    const Shape out = graph.type(graph.outputs()[0]).shape;
    const int64_t k = c.k[0] * c.k[1] * c.k[2];
    const double flops = 2.0 * static_cast<double>(num_elements(out)) * static_cast<double>(k);
    double gflops[2];
    for (bool library : {true, false}) {
      std::shared_ptr<const Executable> exe =
          compile_graph(graph, {}, {}, {.library_conv = library, .library_conv_min_k = 0});
      const double s = median_seconds(2, std::max(5, plan.step_runs / 5), [&] {
        std::vector<Array> r = exe->run(args);
        benchmark::DoNotOptimize(r.data());
      });
      gflops[library ? 0 : 1] = flops / s * 1e-9;
    }
    fmt::print("| {} | {} | {:.1f} GFLOP/s | {:.1f} GFLOP/s | {:.2f}x |\n", c.name, k, gflops[0], gflops[1],
               gflops[0] / gflops[1]);
  }
  fmt::print("\n");
}

}  // namespace
}  // namespace ingot::bench

/// compiler_bench [--quick] [section...]: sections mlp, tiny, gemm (GFLOP/s against the measured
/// peak), threads (1 vs all threads), cnn (batch 32 with the interpreter), cnn128 (batch 128, library vs loops), conv
/// (forward GFLOP/s); default all.
int main(int argc, char** argv) {
  ingot::bench::Plan plan;
  std::vector<std::string> sections;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      plan = {.interp_warmup = 0,
              .interp_runs = 1,
              .step_warmup = 1,
              .step_runs = 3,
              .compile_runs = 1,
              .tiny_warmup = 100,
              .tiny_runs = 1000};
    } else {
      sections.emplace_back(argv[i]);
    }
  }
  const std::vector<std::string> known = {"mlp", "tiny", "gemm", "threads", "cnn", "cnn128", "conv"};
  for (const std::string& s : sections) {
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      fmt::print(stderr, "compiler_bench: unknown section '{}' (known: {})\n", s, fmt::join(known, ", "));
      return 2;
    }
  }
  auto wanted = [&](const char* s) {
    return sections.empty() || std::find(sections.begin(), sections.end(), s) != sections.end();
  };
  try {
    fmt::print("# ingot CPU compiler benchmark\n\n");
    if (wanted("mlp")) ingot::bench::report_train_step(plan);
    if (wanted("tiny")) ingot::bench::report_tiny_call(plan);
    if (wanted("gemm")) ingot::bench::report_gemm(plan);
    if (wanted("threads")) ingot::bench::report_threads(plan);
    if (wanted("cnn")) ingot::bench::report_cnn_step(plan, 32, true);
    if (wanted("cnn128")) ingot::bench::report_cnn_step(plan, 128, false);
    if (wanted("conv")) ingot::bench::report_conv_gflops(plan, 32);
  } catch (const std::exception& e) {
    fmt::print(stderr, "compiler_bench: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
