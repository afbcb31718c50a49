#include "bench.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>

#include "fashion_mnist_common.h"
#include "ingot/jit/jit.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/loss_scale.h"
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
void check_json_path(const std::string& path);

/// Whether the LM trains on lm_text ("" or "none": random tokens).
bool uses_text(const BenchCommand& c) { return !c.lm_text.empty() && c.lm_text != "none"; }

void check_options(const BenchCommand& c) {
  if (c.models.empty()) throw bad_bench_option("--models is empty", "name one or more of mlp, cnn, lm");
  for (size_t i = 0; i < c.models.size(); ++i) {
    const std::string& m = c.models[i];
    if (m != "mlp" && m != "cnn" && m != "lm") {
      throw bad_bench_option(fmt::format("unknown model '{}' in --models", m), "use mlp, cnn or lm");
    }
    if (std::find(c.models.begin(), c.models.begin() + static_cast<std::ptrdiff_t>(i), m) != c.models.begin() + static_cast<std::ptrdiff_t>(i)) {
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
    for (const auto& [option, size] : {std::pair<const char*, int64_t>{"--batch-size", c.batch_size}, {"--lm-batch", c.lm_batch}}) {
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
  if (!c.json.empty()) check_json_path(c.json);

}

/// --json must name a file that can be created or replaced: its directory exists and takes a new
/// file (probed with a temporary file next to it, removed again), and it is not a directory.
void check_json_path(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target = fs::absolute(path);
  if (fs::is_directory(target)) {
    throw bad_bench_option(fmt::format("--json '{}' is a directory", path), "name a file, e.g. bench.json");
  }
  if (!fs::is_directory(target.parent_path())) {
    throw bad_bench_option(fmt::format("--json '{}': directory '{}' does not exist", path, target.parent_path().string()),
                           "create it first or choose another path");
  }
  const fs::path probe = target.string() + ".probe";
  const bool ok = static_cast<bool>(std::ofstream(probe));
  std::error_code ec;
  fs::remove(probe, ec);
  if (!ok) {
    throw bad_bench_option(fmt::format("--json '{}': cannot create a file in '{}'", path, target.parent_path().string()),
                           "choose a writable directory");
  }
}

/// Writes `text` to a temporary file next to `path`, checks that it was written and closed, then
/// renames it over `path`: a failed write never leaves a partial report.
void write_report(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream f(tmp, std::ios::binary);
  f << text;
  f.close();
  std::error_code ec;
  bool ok = static_cast<bool>(f);
  if (ok) {
    std::filesystem::rename(tmp, path, ec);
    ok = !ec;
  }
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorCode::kInvalidArgument, fmt::format("ingot bench: cannot write '{}'", path),
                "choose a writable --json path with free space");
  }
}

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
    throw bad_bench_option(fmt::format("--lm-context {} with --lm-batch {} and --lm-heads {} needs {:.3g} GB of attention "
                                       "scores; the device has {:.3g} GB",
                                       c.lm_context, c.lm_batch, c.lm_heads, scores / 1e9, total / 1e9),
                           "use a shorter context or a smaller batch");
  }
  for (int64_t n : c.gemm_sizes) {
    const double bytes = 12.0 * static_cast<double>(n) * static_cast<double>(n);
    if (bytes > total) {
      throw bad_bench_option(fmt::format("--gemm {} needs {:.3g} GB for its three matrices; the device has {:.3g} GB", n,
                                         bytes / 1e9, total / 1e9),
                             "use a smaller size");
    }
  }
}

/// `--device cuda`: CUDA device 0 (kNotFound without a usable driver or GPU).
std::unique_ptr<CudaDevice> open_cuda(const std::string& device) {
  if (device != "cuda") return nullptr;
  std::shared_ptr<CudaDriver> driver = CudaDriver::load();
  if (!driver->available()) {
    throw Error(ErrorCode::kNotFound, fmt::format("ingot bench --device cuda: no usable CUDA device: {}",
                                                  driver->unavailable_reason()),
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
    throw bad_bench_option(fmt::format("--lm-text '{}' is over 1 GiB", path), "use a smaller text (the LM reads it whole)");
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

BenchModel make_bench_model(const std::string& name, const BenchCommand& c, std::mt19937_64& rng) {
  const ModelOptions options{.name = name, .seed = c.seed, .dtype_policy = c.dtype_policy};
  BenchModel b;
  if (name == "lm") {
    const examples::TinyLmConfig config{
        .context = c.lm_context, .width = c.lm_width, .heads = c.lm_heads, .blocks = c.lm_blocks, .vocab = 256};
    b.model = std::make_shared<examples::TinyLm>(config, options);
    b.batch = c.lm_batch;
    b.tokens_per_sample = c.lm_context;
    if (!uses_text(c)) {
      b.x = uniform_labels({c.lm_batch, c.lm_context}, 256, rng);
      b.y = uniform_labels({c.lm_batch, c.lm_context}, 256, rng);
    } else {
      std::tie(b.x, b.y) = text_windows(read_text(c.lm_text), c.lm_batch, c.lm_context, rng);
    }
    b.model->build_model(Shape{1, c.lm_context}, DType::kI32);
    return b;
  }
  const Shape& sample = name == "cnn" ? examples::kCnnSample : examples::kMlpSample;
  std::shared_ptr<Sequential> seq = name == "cnn" ? examples::cnn(options) : examples::mlp(options);
  Shape shape = {c.batch_size};
  shape.insert(shape.end(), sample.begin(), sample.end());
  b.batch = c.batch_size;
  b.x = uniform_pixels(shape, rng);
  b.y = uniform_labels({c.batch_size}, 10, rng);
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

json time_model(const std::string& name, const BenchCommand& c, CudaDevice* cuda,
                std::shared_ptr<distribution::Distribution> dp, std::ostream& out) {
  const int64_t dp_devices = dp ? dp->batch_axis_size() : 1;
  std::mt19937_64 rng(c.seed);
  BenchModel b = make_bench_model(name, c, rng);
  auto loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
      losses::SparseCategoricalCrossentropyOptions{.from_logits = true});
  b.model->compile({.optimizer = bench_optimizer(c.dtype_policy),
                    .loss = std::move(loss),
                    .cuda_device = cuda,
                    .distribution = std::move(dp),
                    .cuda = {.cuda_graphs = c.cuda_graphs}});
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
             {{"median", median}, {"p10", percentile(ms, 0.1)}, {"p90", percentile(ms, 0.9)},
              {"min", *std::min_element(ms.begin(), ms.end())}}},
            {"samples_per_s", 1e3 * static_cast<double>(b.batch) / median},
            {"peak_bytes", allocator.stats().peak_bytes_in_use},
            {"params", b.model->count_params()},
            {"loss_first", loss_first},
            {"loss_last", loss_last}};
  if (b.tokens_per_sample > 0) r["tokens_per_s"] = 1e3 * static_cast<double>(b.batch * b.tokens_per_sample) / median;
  if (dp_devices > 1) {  // the share of the timed steps a device spent in collectives
    double total_ms = 0;
    for (double m : ms) total_ms += m;
    r["collective_share"] = 1e3 * (b.model->train_step_collective_seconds() - collective0) / total_ms;
  }
  out << fmt::format("{:<4} batch {:>4}: compile {:6.2f} s, step {:8.3f} ms median (p10 {:.3f}, p90 {:.3f}), "
                     "{:10.0f} samples/s{}, loss {:.4f} -> {:.4f}\n",
                     name, b.batch, compile_s, median, percentile(ms, 0.1), percentile(ms, 0.9),
                     r["samples_per_s"].get<double>(),
                     b.tokens_per_sample > 0 ? fmt::format(" ({:.0f} tokens/s)", r["tokens_per_s"].get<double>()) : "",
                     loss_first, loss_last);
  if (r.contains("collective_share")) {
    out << fmt::format("     {:.1f}% of the step time in collectives\n", 100 * r["collective_share"].get<double>());
  }
  if (!std::isfinite(loss_first) || !std::isfinite(loss_last)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("ingot bench: model '{}' trained to a non-finite loss ({} -> {})", name, loss_first, loss_last),
                "the timings of a diverged run mean nothing: check the dtype policy and sizes");
  }
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
  std::shared_ptr<CublasLibrary> lib = CublasLibrary::load();
  if (!lib->available()) {
    throw Error(ErrorCode::kFailedPrecondition, "ingot bench: cuBLAS unavailable: " + lib->unavailable_reason(),
                "install the CUDA toolkit's cuBLAS");
  }
  std::unique_ptr<CudaBlas> blas = lib->create(cuda);
  const int64_t n = a.shape()[0];
  const Array c = Array::empty({n, n}, DType::kF32, &cuda.device());
  auto address = [](const Array& x) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(x.buffer()->data())); };
  const CudaBlasGemm call{.dtype = DType::kF32, .m = n, .n = n, .k = n, .a = address(a), .b = address(b),
                          .c = address(c), .lda = n, .ldb = n, .ldc = n};
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
    if (cuda != nullptr) {
      a = copy_to_cuda_device(*cuda, a);
      b = copy_to_cuda_device(*cuda, b);
    }
    for (const bool library : {true, false}) {
      JitOptions options;
      options.name = "gemm";
      options.cuda_device = cuda;
      options.lowering.blas_gemm = library;
      const Jitted f = jit([](const std::vector<Tensor>& x) { return std::vector<Tensor>{matmul(x[0], x[1])}; },
                           options);
      const double s = median_seconds(c.steps, [&] { f({a, b}).front().block_until_ready(); });
      rows.push_back(gemm_row(n, fmt::format("jit {}", library ? (cuda ? "cuBLAS" : "library") : "generated"), s, out));
    }
    if (cuda != nullptr) rows.push_back(gemm_row(n, "cuBLAS direct", cublas_direct_seconds(*cuda, a, b, c.steps), out));
  }
  return rows;
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
  json report = {{"framework", "ingot"}, {"device", c.device}, {"device_name", device_name},
                 {"dtype_policy", c.dtype_policy}, {"steps", c.steps}, {"warmup", c.warmup},
                 {"config", {{"batch_size", c.batch_size}, {"lm_batch", c.lm_batch}, {"lm_context", c.lm_context},
                             {"lm_width", c.lm_width}, {"lm_heads", c.lm_heads}, {"lm_blocks", c.lm_blocks},
                             {"lm_text", uses_text(c) ? c.lm_text : "none"}, {"seed", c.seed},
                             {"cuda_graphs", c.cuda_graphs}, {"cpu_devices", c.cpu_devices},
                             {"sync_collectives", c.sync_collectives}}}};
  report["models"] = json::object();
  // --cpu-devices N: data parallel over N CPU virtual devices (their own Runtime).
  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<distribution::Distribution> dp;
  if (c.cpu_devices > 1) {
    runtime = std::make_unique<Runtime>(RuntimeOptions{.num_cpu_devices = static_cast<int>(c.cpu_devices)});
    auto parallel = std::make_shared<distribution::DataParallel>(distribution::DeviceMesh(
        {.shape = {c.cpu_devices}, .axis_names = {"batch"}, .devices = runtime->devices()}));
    parallel->set_overlap_collectives(!c.sync_collectives);
    dp = parallel;
    out << fmt::format("data parallel over {} CPU devices{}\n", c.cpu_devices,
                       c.sync_collectives ? ", collectives in graph order" : ", collectives overlapped with compute");
  }
  for (const std::string& m : c.models) report["models"][m] = time_model(m, c, cuda.get(), dp, out);
  report["gemm"] = time_gemms(c, cuda.get(), out);
  if (!c.json.empty()) write_report(c.json, report.dump(2) + "\n");
  return 0;
}

}  // namespace ingot::cli
