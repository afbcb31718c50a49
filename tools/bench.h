// `ingot bench`: train-step speed of the benchmark models (the Fashion-MNIST MLP and CNN, a small
// transformer LM) and GEMM throughput, on the CPU or a CUDA device, as JSON that
// bench/peers/bench_peers.py mirrors for PyTorch and JAX (bench/README.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ingot::cli {

/// Options of `ingot bench` (each field is the CLI option of the same name).
struct BenchCommand {
  /// Models to time, in order: "mlp" (Flatten, Dense 256/128 relu, Dense 10; inputs (batch, 28, 28)),
  /// "cnn" (examples/fashion_mnist_common.h; inputs (batch, 28, 28, 1)), "lm" (examples/tiny_lm.h
  /// with lm_* sizes; inputs (lm_batch, lm_context) i32 tokens).
  std::vector<std::string> models = {"mlp", "cnn", "lm"};
  std::string device = "cpu";  ///< "cpu" or "cuda" (CUDA device 0)
  /// With --device cpu: train data parallel over this many CPU virtual devices of a Runtime
  /// (distribution::DataParallel; batch sizes must be multiples of it); 1: the process's cpu:0.
  int64_t cpu_devices = 1;
  /// With cpu_devices > 1: run the collectives synchronously in the step's graph order instead of
  /// overlapping them with compute (Distribution::set_overlap_collectives(false)), to measure what
  /// the overlap gains; recorded in the JSON's config.
  bool sync_collectives = false;
  int64_t batch_size = 128;  ///< samples per step of mlp and cnn, >= 1
  int64_t warmup = 3;        ///< untimed steps after the first (compiling) one, >= 0
  int64_t steps = 20;        ///< timed steps, >= 1
  int64_t lm_batch = 32;     ///< sequences per LM step, >= 1
  int64_t lm_context = 128;  ///< tokens per sequence, >= 1
  int64_t lm_width = 256;    ///< model width, a multiple of lm_heads
  int64_t lm_heads = 4;      ///< attention heads, >= 1
  int64_t lm_blocks = 4;     ///< transformer blocks, >= 1
  /// Compilation cache directory, "default" ($XDG_CACHE_HOME/ingot) or "off"
  /// (codegen::compile_cache_dir_option; docs/compiler.md, "Compilation cache").
  std::string compile_cache = "default";
  /// Size cap of the cache directory (codegen::compile_cache_size_option: bytes, or K/M/G/T).
  std::string compile_cache_max_size = "default";
  /// CpuCompileOptions::perf_jitdump: describe the compiled steps' functions to `perf` (a jitdump
  /// for `perf inject --jit`), so that `perf report` attributes the step's time per kernel
  /// (docs/compiler.md, "Profiling the compiled code"). CPU only; off by default.
  bool perf_jitdump = false;
  /// Text whose bytes the LM trains on: lm_batch windows of lm_context + 1 bytes at seeded random
  /// offsets (inputs and next-byte targets). Default: the GNU GPL 3 every Debian system ships
  /// (package base-files); a regular file of at most 1 GiB. "none" (or empty, from C++): uniform
  /// random tokens.
  std::string lm_text = "/usr/share/common-licenses/GPL-3";
  /// Square f32 GEMM sizes n (an (n, n) x (n, n) product) timed through jit with the library GEMM
  /// (oneDNN / cuBLAS) and with generated kernels, and on CUDA through cuBLAS directly (the
  /// peak the others are compared with). Empty: none.
  std::vector<int64_t> gemm_sizes;
  /// Keras dtype policy of every model: "float32", "mixed_float16" (with loss scaling) or
  /// "mixed_bfloat16".
  std::string dtype_policy = "float32";
  /// With --device cuda: capture each step into a CUDA graph and replay it
  /// (CudaCompileOptions::cuda_graphs); recorded in the JSON's config.
  bool cuda_graphs = false;
  /// Variants each model is additionally timed under, with Model::fit (run_bench): "baseline"
  /// (the default options), "no-fusion" (the CPU or CUDA pipeline without its "fuse" stage),
  /// "no-donation" (CompileOptions::donate_state false), "no-prefetch" (FitOptions::prefetch
  /// false), "spe8" (CompileOptions::steps_per_execution 8; the timed steps rounded up to a
  /// multiple of 8), "codegen-gemm" (LoweringOptions::blas_gemm false: generated GEMM loops), "no-outline"
  /// (CpuCompileOptions::outline_kernels false: the step as one function, as before outlining),
  /// "no-scope-functions" (LoweringOptions::share_repeated_scopes false: repeated blocks lowered
  /// flat, each compiled on its own), in
  /// this order; {"all"}: every one. Each applies with --device cuda and --cpu-devices too. Empty
  /// (the default): none.
  std::vector<std::string> variants;
  uint64_t seed = 1337;  ///< seeds the weights and the synthetic data
  std::string json;      ///< write the results here (empty: print only)
  /// An existing directory: each model's initial weights (drawn from `seed`, before its first
  /// step) are written to `<dir>/<model>.safetensors` (Model::save_weights: "<layer>/<weight>"
  /// names, Keras layouts) and its batch to `<dir>/<model>.batch.safetensors` ("x", "y"), so that
  /// bench/peers (--inputs) trains the same weights on the same batch. Empty: none.
  std::string save_inputs;
};

/// Times each model's Keras-style train step (Adam 1e-3, sparse categorical cross-entropy from
/// logits, train_on_batch on one batch of the model's shapes: uniform [0, 1) pixels with uniform
/// labels, or byte windows of lm_text): the first step (tracing + compiling + running; "compile_s"),
/// `warmup` steps, then `steps` steps timed one by one (each returns its loss to the host, so the
/// device has finished). Prints one line per model and per GEMM size and writes, when asked, JSON:
/// {"framework": "ingot", "device", "device_name", "dtype_policy", "steps", "warmup", "config"
/// (batch_size, lm_* sizes, lm_text, seed), "models": {name (run order): {"batch", "compile_s",
/// "step_ms": {"median", "p10", "p90", "min"}, "samples_per_s", "tokens_per_s" (lm),
/// "peak_bytes" (device allocator, timed steps), "peak_rss_bytes" (the process's peak resident
/// memory after this model ran: getrusage's ru_maxrss, so it includes the models before it),
/// "flops_per_step", "transcendentals_per_step", "bytes_accessed_per_step" (the train step's
/// ir::cost_analysis, Model::train_step_cost_analysis), "gflops_per_s" (flops over the median
/// step), "fraction_of_peak" (gflops_per_s over the measured FMA peak; CPU), "params",
/// "loss_first", "loss_last",
/// "kernels_per_step" (Model::train_step_kernel_count: on the CPU the loop nests, library calls
/// and copies of the compiled step, codegen::CpuKernelStats; on CUDA its kernel launches plus
/// cuBLAS and convolution calls; under --cpu-devices one device's program, collectives not
/// counted), and with --variants "variants": {variant (run order): {"step_ms": {"median", "p10",
/// "p90", "min"}, "samples_per_s", "tokens_per_s" (lm), "compile_s", "peak_bytes",
/// "kernels_per_step", "overhead_ms", "steps"}}}}, "gemm": [{"n", "path", "ms", "tflops"}],
/// "peak_rss_bytes" (the whole run's), "fma_peak_gflops" (CPU: kernels::measured_fma_peak_gflops
/// on all hardware threads, measured first)};
/// config also lists "variants" ("all" expanded). Times in wall-clock seconds / milliseconds.
///
/// A variant is timed with fit on a fresh model (the same weights): synthetic data of the same
/// generator, batch_size the model's batch, one epoch, shuffle off, verbose 0. A warm-up fit over
/// max(warmup, 1) batches compiles the step ("compile_s": the fit's tracing and compiling time,
/// FitTiming::compile_seconds), then a fit over `steps` batches (rounded up to a multiple of 8
/// with spe8; "steps") is timed: "step_ms" from the wall time of each train call (from the
/// previous call's end, or the first call's begin hook, to its end hook, which includes taking
/// the next batch) over its steps; "overhead_ms" is FitTiming::overhead_per_step (time per step
/// outside the step function); "peak_bytes" the allocator's peak during the timed fit.
/// Throws ingot::Error: kInvalidArgument naming the option for an unknown model, variant or
/// device, "all" among other variants, a variant named twice, a --save-inputs path that is not a
/// directory, sizes
/// < 1, a model or GEMM size named twice, lm_width not divisible by lm_heads, a --json path that
/// is a directory or cannot be created, an lm_text shorter than lm_context + 1 bytes or over
/// 1 GiB, LM attention scores or GEMM operands larger than the device's memory (checked before
/// anything runs); kNotFound for --device cuda without a usable GPU or an lm_text that is not a
/// readable regular file; kInvalidArgument when a model's loss is not finite (a diverged run's
/// timings are not reported); what training throws. The JSON is written to a temporary file and
/// renamed, so a failed run leaves none.
int run_bench(const BenchCommand& command, std::ostream& out);

}  // namespace ingot::cli
