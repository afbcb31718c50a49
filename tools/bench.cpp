#include "bench.h"
#include "cli.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <tuple>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <string_view>

#include "compile_json.h"
#include "process_memory.h"
#include "fashion_mnist_common.h"
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/jit/jit.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/loss_scale.h"
#include "ingot/trainer/output_file.h"
#include "ingot/trainer/safetensors.h"
#include "ingot/kernels/cpu_peak.h"
#include "tiny_lm.h"

namespace ingot::cli {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;  // keys in run order

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

Error bad_bench_option(const std::string& what, const std::string& hint) {
  return Error(ErrorCode::kInvalidArgument, "ingot bench: " + what, hint);
}

void check_positive(const char* option, int64_t value) {
  if (value < 1) throw bad_bench_option(fmt::format("{} is {}", option, value), "use a value >= 1");
}

std::string read_text(const std::string& path);
void check_json_path(const std::string& path, const std::vector<std::string>& inputs);

/// The variants of --variants, in run order (bench.h, BenchCommand::variants).
constexpr std::array<std::string_view, 8> kVariants = {"baseline", "no-fusion",    "no-donation", "no-prefetch",
                                                       "spe8",     "codegen-gemm", "no-outline",  "no-scope-functions"};
/// steps_per_execution of the spe8 variant.
constexpr int64_t kVariantSpe = 8;

/// --variants with "all" expanded (names checked by check_variants).
std::vector<std::string> variant_names(const std::vector<std::string>& given) {
  if (given.size() == 1 && given[0] == "all") return {kVariants.begin(), kVariants.end()};
  return given;
}

void check_variants(const std::vector<std::string>& given) {
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string& v = given[i];
    if (v == "all") {
      if (given.size() > 1) throw bad_bench_option("--variants names 'all' with others", "use all alone, or a list");
      continue;
    }
    if (std::find(kVariants.begin(), kVariants.end(), v) == kVariants.end()) {
      throw bad_bench_option(fmt::format("unknown variant '{}' in --variants", v),
                             "use all, or some of baseline, no-fusion, no-donation, no-prefetch, spe8, codegen-gemm");
    }
    if (std::count(given.begin(), given.end(), v) > 1) {
      throw bad_bench_option(fmt::format("--variants names '{}' twice", v), "name each variant once");
    }
  }
}

/// Whether the LM trains on lm_text ("" or "none": random tokens).
bool uses_text(const BenchCommand& c) { return !c.lm_text.empty() && c.lm_text != "none"; }

void check_options(const BenchCommand& c) {
  if (c.models.empty()) throw bad_bench_option("--models is empty", "name one or more of mlp, cnn, lm");
  for (size_t i = 0; i < c.models.size(); ++i) {
    const std::string& m = c.models[i];
    if (m != "mlp" && m != "cnn" && m != "lm") {
      throw bad_bench_option(fmt::format("unknown model '{}' in --models", m), "use mlp, cnn or lm");
    }
    if (std::find(c.models.begin(), c.models.begin() + static_cast<std::ptrdiff_t>(i), m) !=
        c.models.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw bad_bench_option(fmt::format("--models names '{}' twice", m), "name each model once");
    }
  }
  if (c.device != "cpu" && c.device != "cuda") {
    throw bad_bench_option(fmt::format("unknown --device '{}'", c.device), "use cpu or cuda");
  }
  if (c.cpu_devices < 1 || c.cpu_devices > RuntimeOptions::kMaxCpuDevices) {
    throw bad_bench_option(fmt::format("--cpu-devices is {}", c.cpu_devices),
                           fmt::format("use 1 to {} CPU devices", RuntimeOptions::kMaxCpuDevices));
  }
  if (c.cpu_devices > 1) {
    if (c.device != "cpu") throw bad_bench_option("--cpu-devices needs --device cpu", "drop one of them");
    for (const auto& [option, size] :
         {std::pair<const char*, int64_t>{"--batch-size", c.batch_size}, {"--lm-batch", c.lm_batch}}) {
      if (size % c.cpu_devices != 0) {
        throw bad_bench_option(fmt::format("{} {} does not split over --cpu-devices {}", option, size, c.cpu_devices),
                               "use a multiple of the device count");
      }
    }
  }
  if (c.cuda_graphs && c.device != "cuda") {
    throw bad_bench_option("--cuda-graphs needs --device cuda", "drop --cuda-graphs or add --device cuda");
  }
  if (c.sync_collectives && c.cpu_devices == 1) {
    throw bad_bench_option("--sync-collectives needs --cpu-devices 2 or more", "add --cpu-devices N");
  }
  if (c.dtype_policy != "float32" && c.dtype_policy != "mixed_float16" && c.dtype_policy != "mixed_bfloat16") {
    throw bad_bench_option(fmt::format("unknown --dtype-policy '{}'", c.dtype_policy),
                           "use float32, mixed_float16 or mixed_bfloat16");
  }
  check_positive("--batch-size", c.batch_size);
  check_positive("--steps", c.steps);
  check_positive("--lm-batch", c.lm_batch);
  check_positive("--lm-context", c.lm_context);
  check_positive("--lm-width", c.lm_width);
  check_positive("--lm-heads", c.lm_heads);
  check_positive("--lm-blocks", c.lm_blocks);
  if (c.warmup < 0) throw bad_bench_option(fmt::format("--warmup is {}", c.warmup), "use a value >= 0");
  codegen::compile_cache_size_option(c.compile_cache_max_size);  // throws naming the option
  if (c.lm_width % c.lm_heads != 0) {
    throw bad_bench_option(fmt::format("--lm-width {} is not a multiple of --lm-heads {}", c.lm_width, c.lm_heads),
                           "choose a width divisible by the head count");
  }
  for (size_t i = 0; i < c.gemm_sizes.size(); ++i) {
    check_positive("--gemm", c.gemm_sizes[i]);
    if (std::count(c.gemm_sizes.begin(), c.gemm_sizes.end(), c.gemm_sizes[i]) > 1) {
      throw bad_bench_option(fmt::format("--gemm names {} twice", c.gemm_sizes[i]), "name each size once");
    }
  }
  if (uses_text(c) && std::find(c.models.begin(), c.models.end(), "lm") != c.models.end()) {
    const std::string text = read_text(c.lm_text);
    if (static_cast<int64_t>(text.size()) < c.lm_context + 1) {
      throw bad_bench_option(fmt::format("--lm-text '{}' holds {} bytes, fewer than --lm-context + 1 = {}", c.lm_text,
                                         text.size(), c.lm_context + 1),
                             "use a longer text or a shorter context");
    }
  }
  check_variants(c.variants);
  if (!c.json.empty()) {
    check_json_path(c.json, uses_text(c) ? std::vector<std::string>{c.lm_text} : std::vector<std::string>{});
  }
  if (!c.save_inputs.empty() && !std::filesystem::is_directory(c.save_inputs)) {
    throw bad_bench_option(fmt::format("--save-inputs '{}' is not a directory", c.save_inputs),
                           "create the directory first (each model's weights and batch go to <dir>/<model>.safetensors "
                           "and <dir>/<model>.batch.safetensors)");
  }
}

/// --json must name a file that can be created or replaced (check_output_path: its directory
/// exists and takes a new file, it is not a directory, its name fits), and it is not one of
/// `inputs` (the --lm-text file: writing the report would replace the text).
void check_json_path(const std::string& path, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  check_output_path(path, "ingot bench: --json");
  const fs::path target = resolve_output(path).path;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::equivalent(target, in, ec) && !ec) {
      throw bad_bench_option(fmt::format("--json '{}' is the --lm-text file ('{}')", path, in),
                             "write the report to another file");
    }
  }
}

/// Writes the report through write_output_file (include/ingot/trainer/output_file.h): a uniquely
/// named temporary file renamed over `path`, so a failed write never leaves a partial report and
/// keeps the old one; special files such as /dev/null are written in place.
void write_report(const std::string& path, const std::string& text) { write_output_file(path, text, "ingot bench"); }

/// Bytes of host memory (the CPU device's) or of the CUDA device's memory.
int64_t memory_bytes(CudaDevice* cuda) {
  if (cuda != nullptr) return cuda->memory_info().total_bytes;
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
}

/// Refuses sizes whose largest arrays alone exceed the device's memory, naming the option (the
/// compiled code would fail its allocations): the LM's attention scores and their gradients,
/// 4 arrays of (lm_batch, lm_heads, lm_context, lm_context) f32; a GEMM's 3 (n, n) f32 operands.
void check_memory(const BenchCommand& c, CudaDevice* cuda) {
  const double total = static_cast<double>(memory_bytes(cuda));
  const bool lm = std::find(c.models.begin(), c.models.end(), "lm") != c.models.end();
  const double ctx = static_cast<double>(c.lm_context);
  const double scores = 16.0 * static_cast<double>(c.lm_batch) * static_cast<double>(c.lm_heads) * ctx * ctx;
  if (lm && scores > total) {
    throw bad_bench_option(
        fmt::format("--lm-context {} with --lm-batch {} and --lm-heads {} needs {:.3g} GB of attention "
                    "scores; the device has {:.3g} GB",
                    c.lm_context, c.lm_batch, c.lm_heads, scores / 1e9, total / 1e9),
        "use a shorter context or a smaller batch");
  }
  for (int64_t n : c.gemm_sizes) {
    const double bytes = 12.0 * static_cast<double>(n) * static_cast<double>(n);
    if (bytes > total) {
      throw bad_bench_option(fmt::format("--gemm {} needs {:.3g} GB for its three matrices; the device has {:.3g} GB",
                                         n, bytes / 1e9, total / 1e9),
                             "use a smaller size");
    }
  }
}

/// `--device cuda`: CUDA device 0 (kNotFound without a usable driver or GPU).
std::unique_ptr<CudaDevice> open_cuda(const std::string& device) {
  if (device != "cuda") return nullptr;
  std::shared_ptr<CudaDriver> driver = CudaDriver::load();
  if (!driver->available()) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("ingot bench --device cuda: no usable CUDA device: {}", driver->unavailable_reason()),
                "run on a machine with an NVIDIA GPU and its driver, or use --device cpu");
  }
  return CudaDevice::open(driver, 0);
}

/// A model of the benchmark, built, and one batch of synthetic data for it.
struct BenchModel {
  std::shared_ptr<Model> model;
  Array x, y;
  int64_t batch = 0, tokens_per_sample = 0;  ///< tokens_per_sample: lm only
};

Array uniform_pixels(const Shape& shape, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Array a = Array::empty(shape, DType::kF32);
  for (float& v : std::span<float>(a.data<float>(), static_cast<size_t>(a.size()))) v = u(rng);
  return a;
}

Array uniform_labels(const Shape& shape, int32_t classes, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> u(0, classes - 1);
  Array a = Array::empty(shape, DType::kI32);
  for (int32_t& v : std::span<int32_t>(a.data<int32_t>(), static_cast<size_t>(a.size()))) v = u(rng);
  return a;
}

/// The bytes of `path` (kNotFound naming --lm-text when unreadable).
std::string read_text(const std::string& path) {
  constexpr int64_t kMaxTextBytes = int64_t{1} << 30;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kNotFound, fmt::format("ingot bench: --lm-text '{}' is not a regular file", path),
                "name a text file, or pass --lm-text none for random tokens");
  }
  if (static_cast<int64_t>(std::filesystem::file_size(path, ec)) > kMaxTextBytes) {
    throw bad_bench_option(fmt::format("--lm-text '{}' is over 1 GiB", path),
                           "use a smaller text (the LM reads it whole)");
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw Error(ErrorCode::kNotFound, fmt::format("ingot bench: --lm-text '{}' cannot be read", path),
                "name a text file, or pass --lm-text none for random tokens");
  }
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// (x, y): `batch` windows of `context` bytes of `text` at seeded random offsets, y the next bytes.
std::pair<Array, Array> text_windows(const std::string& text, int64_t batch, int64_t context, std::mt19937_64& rng) {
  const auto size = static_cast<int64_t>(text.size());
  if (size < context + 1) {
    throw bad_bench_option(fmt::format("--lm-text holds {} bytes, fewer than --lm-context + 1 = {}", size, context + 1),
                           "use a longer text or a shorter context");
  }
  std::uniform_int_distribution<int64_t> start(0, size - context - 1);
  Array x = Array::empty({batch, context}, DType::kI32), y = Array::empty({batch, context}, DType::kI32);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = start(rng);
    for (int64_t t = 0; t < context; ++t) {
      x.data<int32_t>()[b * context + t] = static_cast<unsigned char>(text[static_cast<size_t>(s + t)]);
      y.data<int32_t>()[b * context + t] = static_cast<unsigned char>(text[static_cast<size_t>(s + t + 1)]);
    }
  }
  return {std::move(x), std::move(y)};
}

/// (x, y) of `rows` samples of model `name`: uniform [0, 1) pixels of the model's sample shape with
/// uniform labels of 10 classes, or for the LM `rows` byte windows of lm_text (or random tokens).
std::pair<Array, Array> bench_data(const std::string& name, const BenchCommand& c, int64_t rows, std::mt19937_64& rng) {
  if (name == "lm") {
    if (!uses_text(c)) {
      Array x = uniform_labels({rows, c.lm_context}, 256, rng);
      Array y = uniform_labels({rows, c.lm_context}, 256, rng);
      return {std::move(x), std::move(y)};
    }
    return text_windows(read_text(c.lm_text), rows, c.lm_context, rng);
  }
  const Shape& sample = name == "cnn" ? examples::kCnnSample : examples::kMlpSample;
  Shape shape = {rows};
  shape.insert(shape.end(), sample.begin(), sample.end());
  Array x = uniform_pixels(shape, rng);
  Array y = uniform_labels({rows}, 10, rng);
  return {std::move(x), std::move(y)};
}

/// Model `name` built (weights drawn from c.seed), with its batch size, and one batch of data.
BenchModel make_bench_model(const std::string& name, const BenchCommand& c, std::mt19937_64& rng) {
  const ModelOptions options{.name = name, .seed = c.seed, .dtype_policy = c.dtype_policy};
  BenchModel b;
  if (name == "lm") {
    const examples::TinyLmConfig config{
        .context = c.lm_context, .width = c.lm_width, .heads = c.lm_heads, .blocks = c.lm_blocks, .vocab = 256};
    b.model = std::make_shared<examples::TinyLm>(config, options);
    b.batch = c.lm_batch;
    b.tokens_per_sample = c.lm_context;
    std::tie(b.x, b.y) = bench_data(name, c, b.batch, rng);
    b.model->build_model(Shape{1, c.lm_context}, DType::kI32);
    return b;
  }
  const Shape& sample = name == "cnn" ? examples::kCnnSample : examples::kMlpSample;
  std::shared_ptr<Sequential> seq = name == "cnn" ? examples::cnn(options) : examples::mlp(options);
  b.batch = c.batch_size;
  std::tie(b.x, b.y) = bench_data(name, c, b.batch, rng);
  Shape one = {1};
  one.insert(one.end(), sample.begin(), sample.end());
  seq->build_model(one);
  b.model = std::move(seq);
  return b;
}

std::shared_ptr<optimizers::Optimizer> bench_optimizer(const std::string& policy) {
  std::shared_ptr<optimizers::Optimizer> adam = std::make_shared<optimizers::Adam>();
  if (policy != "mixed_float16") return adam;
  return std::make_shared<optimizers::LossScaleOptimizer>(
      optimizers::LossScaleOptimizerOptions{.inner_optimizer = std::move(adam)});
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

/// The compile line's note on whole compiled functions loaded from the cache: the step, or (data
/// parallel, several segments) how many of its compiled functions.
std::string whole_from_cache(int64_t hits) {
  if (hits <= 0) return "";
  if (hits == 1) return " (whole step from the cache)";
  return fmt::format(" ({} compiled functions loaded whole from the cache)", hits);
}

/// The step's cost figures (ir::CostAnalysis) and its achieved GFLOP/s at `median_ms` per step.
void add_cost_fields(json& r, const ir::CostAnalysis& cost, double median_ms) {
  r["flops_per_step"] = cost.flops;
  r["transcendentals_per_step"] = cost.transcendentals;
  r["bytes_accessed_per_step"] = cost.bytes_accessed;
  r["gflops_per_s"] = cost.flops / (median_ms * 1e6);
}

json time_model(const std::string& name, const BenchCommand& c, CudaDevice* cuda,
                std::shared_ptr<distribution::Distribution> dp, std::ostream& out) {
  const int64_t dp_devices = dp ? dp->batch_axis_size() : 1;
  std::mt19937_64 rng(c.seed);
  BenchModel b = make_bench_model(name, c, rng);
  if (!c.save_inputs.empty()) {
    const std::filesystem::path dir(c.save_inputs);
    b.model->save_weights((dir / (name + ".safetensors")).string());
    save_safetensors((dir / (name + ".batch.safetensors")).string(), {{"x", b.x}, {"y", b.y}});
  }
  auto loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
      losses::SparseCategoricalCrossentropyOptions{.from_logits = true});
  b.model->compile(
      {.optimizer = bench_optimizer(c.dtype_policy),
       .loss = std::move(loss),
       .compiler = {.compile_cache_dir = codegen::compile_cache_dir_option(c.compile_cache),
                    .compile_cache_max_bytes = codegen::compile_cache_size_option(c.compile_cache_max_size),
                    .perf_jitdump = c.perf_jitdump},
       .target = cuda != nullptr ? cuda_target(*cuda) : nullptr,
       .distribution = std::move(dp),
       .cuda = {.cuda_graphs = c.cuda_graphs, .libraries = cuda_library_search({})}});
  Allocator& allocator = cuda != nullptr ? cuda->allocator() : default_cpu_device().allocator();
  const Clock::time_point first = Clock::now();
  const double loss_first = *b.model->train_on_batch(b.x, b.y).get("loss");
  const double compile_s = seconds_since(first);
  for (int64_t i = 0; i < c.warmup; ++i) b.model->train_on_batch(b.x, b.y);
  allocator.reset_peak();
  const double collective0 = b.model->train_step_collective_seconds();
  std::vector<double> ms;
  double loss_last = loss_first;
  for (int64_t i = 0; i < c.steps; ++i) {
    const Clock::time_point start = Clock::now();
    loss_last = *b.model->train_on_batch(b.x, b.y).get("loss");
    ms.push_back(1e3 * seconds_since(start));
  }
  const double median = percentile(ms, 0.5);
  json r = {{"batch", b.batch},
            {"compile_s", compile_s},
            {"step_ms",
             {{"median", median},
              {"p10", percentile(ms, 0.1)},
              {"p90", percentile(ms, 0.9)},
              {"min", *std::min_element(ms.begin(), ms.end())}}},
            {"samples_per_s", 1e3 * static_cast<double>(b.batch) / median},
            {"peak_bytes", allocator.stats().peak_bytes_in_use},
            {"peak_rss_bytes", peak_rss_bytes()},
            {"params", b.model->count_params()},
            {"loss_first", loss_first},
            {"loss_last", loss_last},
            {"kernels_per_step", b.model->train_step_kernel_count()},
            {"compile", compile_breakdown_json(b.model->train_step_compile_breakdown())}};
  if (b.tokens_per_sample > 0) r["tokens_per_s"] = 1e3 * static_cast<double>(b.batch * b.tokens_per_sample) / median;
  add_cost_fields(r, b.model->train_step_cost_analysis(), median);
  if (dp_devices > 1) {  // the share of the timed steps a device spent in collectives
    double total_ms = 0;
    for (double m : ms) total_ms += m;
    r["collective_share"] = 1e3 * (b.model->train_step_collective_seconds() - collective0) / total_ms;
  }
  out << fmt::format(
      "{:<4} batch {:>4}: compile {:6.2f} s, step {:8.3f} ms median (p10 {:.3f}, p90 {:.3f}), "
      "{:10.0f} samples/s{}, {:.1f} GFLOP/s, loss {:.4f} -> {:.4f}, {} kernels/step\n",
      name, b.batch, compile_s, median, percentile(ms, 0.1), percentile(ms, 0.9), r["samples_per_s"].get<double>(),
      b.tokens_per_sample > 0 ? fmt::format(" ({:.0f} tokens/s)", r["tokens_per_s"].get<double>()) : "",
      r["gflops_per_s"].get<double>(), loss_first, loss_last, r["kernels_per_step"].get<int64_t>());
  const json& cb = r["compile"];
  out << fmt::format(
      "     compile: trace {:.2f} s, autodiff {:.2f} s, lower {:.2f} s, MLIR {:.2f} s, LLVM {:.2f} s, "
      "link {:.2f} s; {} kernel functions for {} kernels{}, objects {} cached / {} compiled{}\n",
      cb["trace_s"].get<double>(), cb["autodiff_s"].get<double>(), cb["lower_s"].get<double>(),
      cb["mlir_s"].get<double>(), cb["llvm_s"].get<double>(), cb["link_s"].get<double>(),
      cb["kernel_functions"].get<int64_t>(), r["kernels_per_step"].get<int64_t>(),
      cb["scope_functions"].get<int64_t>() > 0
          ? fmt::format(" ({} scope functions)", cb["scope_functions"].get<int64_t>())
          : "",
      cb["cache_hits"].get<int64_t>(), cb["cache_misses"].get<int64_t>(),
      whole_from_cache(cb["step_cache_hits"].get<int64_t>()));
  if (r.contains("collective_share")) {
    out << fmt::format("     {:.1f}% of the step time in collectives\n", 100 * r["collective_share"].get<double>());
  }
  if (!std::isfinite(loss_first) || !std::isfinite(loss_last)) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("ingot bench: model '{}' trained to a non-finite loss ({} -> {})", name, loss_first, loss_last),
        "the timings of a diverged run mean nothing: check the dtype policy and sizes");
  }
  return r;
}

/// Records the wall-clock time at the first train batch's begin and at every batch's end, with
/// the index of each call's first step, so that fit's per-call times can be recovered.
class StepClock final : public callbacks::Callback {
 public:
  void on_train_batch_begin(int64_t batch, const Logs&) override {
    if (batch == 0) start_ = Clock::now();
  }
  void on_train_batch_end(int64_t batch, const Logs&) override { ends_.emplace_back(batch, Clock::now()); }
  /// Milliseconds per step of every call: the time from the previous call's end (the first
  /// call: from its begin) to its end, over the call's steps (`total_steps`: the fit's steps).
  std::vector<double> step_ms(int64_t total_steps) const {
    std::vector<double> ms;
    Clock::time_point previous = start_;
    for (size_t i = 0; i < ends_.size(); ++i) {
      const int64_t next = i + 1 < ends_.size() ? ends_[i + 1].first : total_steps;
      const int64_t steps = std::max<int64_t>(1, next - ends_[i].first);
      const double call_ms = 1e3 * std::chrono::duration<double>(ends_[i].second - previous).count();
      for (int64_t k = 0; k < steps; ++k) ms.push_back(call_ms / static_cast<double>(steps));
      previous = ends_[i].second;
    }
    return ms;
  }

 private:
  Clock::time_point start_;
  std::vector<std::pair<int64_t, Clock::time_point>> ends_;
};

/// The pipeline `stages` without the stage named "fuse" (elementwise fusion).
std::vector<codegen::PipelineStage> without_fusion(std::vector<codegen::PipelineStage> stages) {
  std::erase_if(stages, [](const codegen::PipelineStage& s) { return s.name == "fuse"; });
  return stages;
}

/// Applies variant `v` (one of kVariants) to the baseline's compile and fit options.
void apply_variant(const std::string& v, CompileOptions& compile, FitOptions& fit) {
  if (v == "no-fusion") {
    if (compile.target && compile.target->kind() == TargetKind::kCuda) {
      compile.cuda.pipeline = without_fusion(codegen::default_cuda_pipeline(compile.cuda));
    } else {
      compile.compiler.pipeline = without_fusion(codegen::default_cpu_pipeline(compile.compiler.num_threads));
    }
  } else if (v == "no-donation") {
    compile.donate_state = false;
  } else if (v == "no-prefetch") {
    fit.prefetch = false;
  } else if (v == "spe8") {
    compile.steps_per_execution = kVariantSpe;
  } else if (v == "codegen-gemm") {
    compile.lowering.blas_gemm = false;
  } else if (v == "no-outline") {
    compile.compiler.outline_kernels = false;
  } else if (v == "no-scope-functions") {
    compile.lowering.share_repeated_scopes = false;
  }
}

/// Model `name` under variant `v`, trained with fit (module comment of bench.h): a warm-up fit over
/// max(warmup, 1) batches compiles the step (its tracing and compiling time is compile_s), then a
/// timed fit over `steps` batches (a multiple of 8 with spe8) gives the per-step times.
json time_variant(const std::string& name, const std::string& v, const BenchCommand& c, CudaDevice* cuda,
                  const std::shared_ptr<distribution::Distribution>& dp, std::ostream& out) {
  std::mt19937_64 rng(c.seed);
  BenchModel b = make_bench_model(name, c, rng);  // the same weights and first batch as the baseline
  const int64_t warm_batches = std::max<int64_t>(c.warmup, 1);
  const int64_t steps = v == "spe8" ? (c.steps + kVariantSpe - 1) / kVariantSpe * kVariantSpe : c.steps;
  const auto [warm_x, warm_y] = bench_data(name, c, warm_batches * b.batch, rng);
  const auto [x, y] = bench_data(name, c, steps * b.batch, rng);
  CompileOptions compile{
      .optimizer = bench_optimizer(c.dtype_policy),
      .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
          losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
      .compiler = {.compile_cache_dir = codegen::compile_cache_dir_option(c.compile_cache),
                   .compile_cache_max_bytes = codegen::compile_cache_size_option(c.compile_cache_max_size),
                   .perf_jitdump = c.perf_jitdump},
      .target = cuda != nullptr ? cuda_target(*cuda) : nullptr,
      .distribution = dp,
      .cuda = {.cuda_graphs = c.cuda_graphs, .libraries = cuda_library_search({})}};
  FitOptions fit{.batch_size = b.batch, .epochs = 1, .verbose = 0, .shuffle = false};
  apply_variant(v, compile, fit);
  b.model->compile(std::move(compile));
  fit.x = warm_x;
  fit.y = warm_y;
  b.model->fit(fit);
  const double compile_s = b.model->last_fit_timing().compile_seconds;
  Allocator& allocator = cuda != nullptr ? cuda->allocator() : default_cpu_device().allocator();
  allocator.reset_peak();
  auto clock = std::make_shared<StepClock>();
  fit.x = x;
  fit.y = y;
  fit.callbacks = {clock};
  const std::vector<double> losses = b.model->fit(fit)->values("loss");
  const FitTiming& timing = b.model->last_fit_timing();
  const std::vector<double> ms = clock->step_ms(timing.train_steps);
  if (ms.empty() || losses.empty() || !std::isfinite(losses.back())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("ingot bench: model '{}' variant '{}' trained to a non-finite loss", name, v),
                "the timings of a diverged run mean nothing: check the dtype policy and sizes");
  }
  const double median = percentile(ms, 0.5);
  json r = {{"step_ms",
             {{"median", median},
              {"p10", percentile(ms, 0.1)},
              {"p90", percentile(ms, 0.9)},
              {"min", *std::min_element(ms.begin(), ms.end())}}},
            {"samples_per_s", 1e3 * static_cast<double>(b.batch) / median},
            {"compile_s", compile_s},
            {"peak_bytes", allocator.stats().peak_bytes_in_use},
            {"kernels_per_step", b.model->train_step_kernel_count()},
            {"overhead_ms", 1e3 * timing.overhead_per_step()},
            {"loss", losses.back()},
            {"steps", timing.train_steps}};
  if (b.tokens_per_sample > 0) r["tokens_per_s"] = 1e3 * static_cast<double>(b.batch * b.tokens_per_sample) / median;
  out << fmt::format(
      "     {:<13} compile {:6.2f} s, step {:8.3f} ms median (p10 {:.3f}, p90 {:.3f}), {:10.0f} samples/s, "
      "{} kernels/step, {:.3f} ms overhead/step, loss {:.6f}\n",
      v, compile_s, median, percentile(ms, 0.1), percentile(ms, 0.9), r["samples_per_s"].get<double>(),
      r["kernels_per_step"].get<int64_t>(), r["overhead_ms"].get<double>(), losses.back());
  return r;
}

/// Median seconds of `steps` calls of `fn` (after one untimed call).
template <class Fn>
double median_seconds(int64_t steps, const Fn& fn) {
  fn();
  std::vector<double> s;
  for (int64_t i = 0; i < steps; ++i) {
    const Clock::time_point start = Clock::now();
    fn();
    s.push_back(seconds_since(start));
  }
  return percentile(s, 0.5);
}

json gemm_row(int64_t n, const std::string& path, double seconds, std::ostream& out) {
  const double tflops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / seconds / 1e12;
  out << fmt::format("gemm n={:<5} {:<22} {:9.3f} ms {:8.2f} TFLOP/s\n", n, path, 1e3 * seconds, tflops);
  return {{"n", n}, {"path", path}, {"ms", 1e3 * seconds}, {"tflops", tflops}};
}

/// cuBLAS sgemm on device buffers, timed with the stream synchronised after each call: the peak
/// the jitted products are compared with.
double cublas_direct_seconds(CudaDevice& cuda, const Array& a, const Array& b, int64_t steps) {
  std::shared_ptr<CublasLibrary> lib = CublasLibrary::load(cuda_library_search({}));
  if (!lib->available()) {
    throw Error(ErrorCode::kFailedPrecondition, "ingot bench: cuBLAS unavailable: " + lib->unavailable_reason(),
                "install the CUDA toolkit's cuBLAS");
  }
  std::unique_ptr<CudaBlas> blas = lib->create(cuda);
  const int64_t n = a.shape()[0];
  const Array c = Array::empty({n, n}, DType::kF32, &cuda.device());
  auto address = [](const Array& x) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(x.buffer()->data())); };
  const CudaBlasGemm call{.dtype = DType::kF32,
                          .m = n,
                          .n = n,
                          .k = n,
                          .a = address(a),
                          .b = address(b),
                          .c = address(c),
                          .lda = n,
                          .ldb = n,
                          .ldc = n};
  return median_seconds(steps, [&] {
    blas->gemm(call, cuda.compute_stream());
    cuda.synchronize();
  });
}

json time_gemms(const BenchCommand& c, CudaDevice* cuda, std::ostream& out) {
  json rows = json::array();
  for (int64_t n : c.gemm_sizes) {
    std::mt19937_64 rng(c.seed);
    Array a = uniform_pixels({n, n}, rng), b = uniform_pixels({n, n}, rng);
    const std::shared_ptr<const CompileTarget> target = cuda != nullptr ? cuda_target(*cuda) : cpu_target();
    a = target->to_target(a);
    b = target->to_target(b);
    for (const bool library : {true, false}) {
      JitOptions options;
      options.name = "gemm";
      options.target = target;
      options.lowering.blas_gemm = library;
      const Jitted f =
          jit([](const std::vector<Tensor>& x) { return std::vector<Tensor>{matmul(x[0], x[1])}; }, options);
      const double s = median_seconds(c.steps, [&] { f({a, b}).front().block_until_ready(); });
      rows.push_back(gemm_row(n, fmt::format("jit {}", library ? (cuda ? "cuBLAS" : "library") : "generated"), s, out));
    }
    if (cuda != nullptr) rows.push_back(gemm_row(n, "cuBLAS direct", cublas_direct_seconds(*cuda, a, b, c.steps), out));
  }
  return rows;
}

}  // namespace

namespace {

/// `report` as written before the last model ends: its peak memory so far and "complete": false.
std::string partial_report(json report) {
  report["peak_rss_bytes"] = peak_rss_bytes();
  report["complete"] = false;
  return report.dump(2) + "\n";
}

}  // namespace

int run_bench(const BenchCommand& c, std::ostream& out) {
  check_options(c);
  const std::unique_ptr<CudaDevice> cuda = open_cuda(c.device);
  check_memory(c, cuda.get());
  const std::string device_name = cuda ? cuda->product_name() : "cpu";
  out << fmt::format("ingot bench on {}, {} timed steps after {} warm-up steps, dtype policy {}\n",
                     cuda ? fmt::format("cuda ({})", device_name) : std::string("cpu"), c.steps, c.warmup,
                     c.dtype_policy);
  // The host's measured FMA peak on all its cores, the denominator of each model's fraction_of_peak
  // (measured before anything else runs; CPU runs only).
  const double peak_gflops =
      cuda ? 0.0
           : kernels::measured_fma_peak_gflops(std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  if (!cuda) out << fmt::format("measured f32 FMA peak: {:.1f} GFLOP/s\n", peak_gflops);
  json report = {{"framework", "ingot"},
                 {"device", c.device},
                 {"device_name", device_name},
                 {"dtype_policy", c.dtype_policy},
                 {"steps", c.steps},
                 {"warmup", c.warmup},
                 {"config",
                  {{"batch_size", c.batch_size},
                   {"lm_batch", c.lm_batch},
                   {"lm_context", c.lm_context},
                   {"lm_width", c.lm_width},
                   {"lm_heads", c.lm_heads},
                   {"lm_blocks", c.lm_blocks},
                   {"compile_cache", c.compile_cache},
                   {"compile_cache_max_size", c.compile_cache_max_size},
                   {"lm_text", uses_text(c) ? c.lm_text : "none"},
                   {"seed", c.seed},
                   {"cuda_graphs", c.cuda_graphs},
                   {"cpu_devices", c.cpu_devices},
                   {"sync_collectives", c.sync_collectives},
                   {"variants", variant_names(c.variants)}}}};
  if (!cuda) report["fma_peak_gflops"] = peak_gflops;
  report["models"] = json::object();
  // --cpu-devices N: data parallel over N CPU virtual devices (their own Runtime).
  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<distribution::Distribution> dp;
  if (c.cpu_devices > 1) {
    runtime = std::make_unique<Runtime>(RuntimeOptions{.num_cpu_devices = static_cast<int>(c.cpu_devices)});
    auto parallel = std::make_shared<distribution::DataParallel>(
        distribution::DeviceMesh({.shape = {c.cpu_devices}, .axis_names = {"batch"}, .devices = runtime->devices()}));
    parallel->set_overlap_collectives(!c.sync_collectives);
    dp = parallel;
    out << fmt::format("data parallel over {} CPU devices{}\n", c.cpu_devices,
                       c.sync_collectives ? ", collectives in graph order" : ", collectives overlapped with compute");
  }
  const std::vector<std::string> variants = variant_names(c.variants);
  for (const std::string& m : c.models) {
    report["models"][m] = time_model(m, c, cuda.get(), dp, out);
    if (peak_gflops > 0) {
      const double fraction = report["models"][m]["gflops_per_s"].get<double>() / peak_gflops;
      report["models"][m]["fraction_of_peak"] = fraction;
      out << fmt::format("     {:.1f}% of the measured FMA peak\n", 100 * fraction);
    }
    out.flush();  // each model's lines as soon as it is timed (a run killed later keeps them)
    // The report so far, "complete": false, so that a run killed during a later model keeps
    // this one's result (tools/gpu_check.sh).
    if (!c.json.empty() && &m != &c.models.back()) write_report(c.json, partial_report(report));
    if (variants.empty()) continue;
    out << fmt::format("{:<4} variants (fit, {} steps after {} warm-up):\n", m, c.steps,
                       std::max<int64_t>(c.warmup, 1));
    report["models"][m]["variants"] = json::object();
    for (const std::string& v : variants)
      report["models"][m]["variants"][v] = time_variant(m, v, c, cuda.get(), dp, out);
  }
  report["gemm"] = time_gemms(c, cuda.get(), out);
  report["peak_rss_bytes"] = peak_rss_bytes();
  report["complete"] = true;
  if (!c.json.empty()) write_report(c.json, report.dump(2) + "\n");
  return 0;
}

}  // namespace ingot::cli
