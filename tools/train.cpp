// `ingot train` / `evaluate` / `predict` (tools/train.h; guide: docs/train.md).
#include "train.h"

#include "cli.h"
#include "compile_json.h"
#include "process_memory.h"
#include "stop_signal.h"
#include "train_data.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <utility>
#include <vector>

#include "fashion_mnist_common.h"
#include "ingot/runtime/cluster.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/nccl.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trainer/callbacks_logging.h"
#include "ingot/trainer/output_file.h"
#include "ingot/trainer/safetensors.h"

namespace ingot::cli {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

/// The Fashion-MNIST class names, by label (Xiao, Rasul and Vollgraf, 2017).
constexpr std::array<const char*, 10> kClassNames = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                     "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// ---- checking the options ------------------------------------------------------------------------

Error bad_option(const std::string& message, const std::string& hint = {}) {
  return Error(ErrorCode::kInvalidArgument, message, hint);
}

void check_positive(int64_t value, const char* option) {
  if (value < 1) throw bad_option(fmt::format("{} must be > 0, got {}", option, value));
}

void check_model_name(const std::string& model) {
  if (model != "mlp" && model != "cnn") throw bad_option(fmt::format("unknown --model '{}'", model), "use mlp or cnn");
}

/// --device: cpu, or cuda for `train` (device 0; evaluate and predict run on the CPU).
void check_device(const std::string& device, bool cuda_allowed) {
  if (device == "cpu" || (device == "cuda" && cuda_allowed)) return;
  if (device == "cuda") {
    throw Error(ErrorCode::kUnimplemented, "--device cuda: evaluate and predict run on the CPU", "use --device cpu");
  }
  throw bad_option(fmt::format("unknown --device '{}'", device), cuda_allowed ? "use cpu or cuda" : "use cpu");
}

/// `--device cuda`: CUDA devices first .. first + gpus - 1, opened through the driver
/// (libcuda.so.1, dlopen'ed); `first` is 0, or under a launcher LOCAL_RANK * gpus, so that the
/// processes of a host take distinct GPUs. Errors (kNotFound) without a usable driver or GPU,
/// naming the driver's reason; kInvalidArgument when the machine has fewer devices.
std::vector<std::unique_ptr<CudaDevice>> open_cuda_devices(int64_t gpus, int64_t first) {
  std::shared_ptr<CudaDriver> driver = CudaDriver::load();
  if (!driver->available()) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("--device cuda: no usable CUDA device: {}", driver->unavailable_reason()),
                "run on a machine with an NVIDIA GPU and its driver, or use --device cpu");
  }
  if (first + gpus > driver->device_count()) {
    if (first == 0) {
      throw bad_option(fmt::format("--gpus {}: this machine has {} CUDA devices", gpus, driver->device_count()),
                       fmt::format("use --gpus {} or fewer", driver->device_count()));
    }
    throw bad_option(fmt::format("--gpus {} from device {} (LOCAL_RANK {} x --gpus {}): this machine has {} CUDA "
                                 "devices",
                                 gpus, first, first / gpus, gpus, driver->device_count()),
                     "start at most (CUDA devices / --gpus) processes per host (ingot launch -n)");
  }
  std::vector<std::unique_ptr<CudaDevice>> devices;
  for (int64_t i = first; i < first + gpus; ++i) devices.push_back(CudaDevice::open(driver, static_cast<int>(i)));
  return devices;
}

/// The compile target `--device` names: the CPU, or the opened CUDA device `cuda` (not null).
std::shared_ptr<const CompileTarget> device_target(CudaDevice* cuda) {
  return cuda != nullptr ? cuda_target(*cuda) : cpu_target();
}

void check_train_options(const TrainCommand& c) {
  if (c.dataset != "fashion-mnist") {
    throw bad_option(fmt::format("unknown --dataset '{}'", c.dataset), "the dataset known is fashion-mnist");
  }
  check_model_name(c.model);
  codegen::compile_cache_size_option(c.compile_cache_max_size);  // throws naming the option
  const std::vector<std::string> optimizers = {"adam", "adamw", "sgd", "rmsprop", "adagrad"};
  if (std::find(optimizers.begin(), optimizers.end(), c.optimizer) == optimizers.end()) {
    throw bad_option(fmt::format("unknown --optimizer '{}'", c.optimizer), "use adam, adamw, sgd, rmsprop or adagrad");
  }
  if (c.lr_schedule != "constant" && c.lr_schedule != "cosine") {
    throw bad_option(fmt::format("unknown --lr-schedule '{}'", c.lr_schedule), "use constant or cosine");
  }
  check_positive(c.epochs, "--epochs");
  check_positive(c.batch_size, "--batch-size");
  check_positive(c.steps_per_execution, "--steps-per-execution");
  if (c.limit) check_positive(*c.limit, "--limit");
  // Fashion-MNIST has 60000 training images: checked here, before the data are read (a
  // --data-dir with fewer is caught once it is read).
  constexpr int64_t kTrainImages = 60000;
  if (c.data.empty() && c.limit && *c.limit > kTrainImages) {
    throw bad_option(fmt::format("--limit {} is more than the {} training images", *c.limit, kTrainImages));
  }
  if (c.learning_rate && !(std::isfinite(*c.learning_rate) && *c.learning_rate > 0)) {
    throw bad_option(fmt::format("--learning-rate must be a finite number > 0, got {}", *c.learning_rate));
  }
  if (!(c.validation_split >= 0 && c.validation_split < 1)) {
    throw bad_option(fmt::format("--validation-split must be in [0, 1), got {}", c.validation_split));
  }
  check_device(c.device, /*cuda_allowed=*/true);
  if (c.cuda_graphs && c.device != "cuda") {
    throw bad_option("--cuda-graphs needs --device cuda", "drop --cuda-graphs or add --device cuda");
  }
  if (c.cpu_devices < 1 || c.cpu_devices > RuntimeOptions::kMaxCpuDevices) {
    throw bad_option(
        fmt::format("--cpu-devices must be in [1, {}], got {}", RuntimeOptions::kMaxCpuDevices, c.cpu_devices));
  }
  if (c.cpu_devices > 1 && c.device != "cpu") {
    throw bad_option("--cpu-devices needs --device cpu", "drop one of them");
  }
  if (c.gpus < 1 || c.gpus > 64) throw bad_option(fmt::format("--gpus must be in [1, 64], got {}", c.gpus));
  if (c.gpus > 1 && c.device != "cuda") throw bad_option("--gpus needs --device cuda", "add --device cuda");
  if (c.gpus > 1 && c.cuda_graphs) {
    throw bad_option("--cuda-graphs works on one GPU", "drop --cuda-graphs or use --gpus 1");
  }
}

/// The file a path names, for comparisons: links resolved, made absolute and normal.
fs::path identity(const std::string& path) { return fs::absolute(resolve_output(path).path).lexically_normal(); }

/// check_output_path for each (option, path); no two outputs may be one file, and no output may
/// be one of `inputs` (the files the command reads: the data set, the weights).
void check_output_paths(const std::vector<std::pair<const char*, std::string>>& outputs,
                        const std::vector<std::string>& inputs = {}) {
  std::vector<std::pair<fs::path, const char*>> seen;
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    check_output_path(path, option);
    const fs::path id = identity(path);
    if (resolve_output(path).in_place) continue;  // /dev/null may take several outputs
    for (const auto& [other, other_option] : seen) {
      if (other == id) throw bad_option(fmt::format("{} and {} both name '{}'", other_option, option, path));
    }
    for (const std::string& in : inputs) {
      if (identity(in) == id) {
        throw bad_option(fmt::format("{} '{}' is an input of this command ('{}')", option, path, in),
                         "write the output to another file");
      }
    }
    seen.emplace_back(id, option);
  }
}

/// The files of a Fashion-MNIST directory, plain and gzip (outputs must not overwrite them).
std::vector<std::string> data_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const char* stem :
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    files.push_back((fs::path(dir) / stem).string());
    files.push_back((fs::path(dir) / (std::string(stem) + ".gz")).string());
  }
  return files;
}

// ---- data, model, optimizer ----------------------------------------------------------------------

/// The data of `dir` (only the test split with `test_only`: evaluate and predict).
datasets::FashionMnist load_data(const std::string& dir, bool test_only = false) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    const bool exists = fs::exists(dir, ec);
    if (exists || (ec && ec != std::errc::no_such_file_or_directory)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--data-dir '{}' {}", dir,
                              exists ? "is not a directory" : "cannot be looked up: " + ec.message()),
                  "pass the directory that holds the IDX files (train-images-idx3-ubyte, ...)");
    }
    throw Error(ErrorCode::kNotFound, fmt::format("the Fashion-MNIST directory '{}' does not exist", dir),
                "install the Debian package dataset-fashion-mnist (scripts/install-deps.sh) or pass --data-dir DIR");
  }
  datasets::FashionMnist data;
  try {
    data = test_only ? datasets::load_fashion_mnist_test(dir) : datasets::load_fashion_mnist(dir);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kParseError) throw;
    throw e.with_context(fmt::format("--data-dir '{}'", dir));  // the loader names the file only
  }
  for (const Array* images : {&data.x_train, &data.x_test}) {
    if (!images->valid()) continue;
    const Shape& s = images->shape();
    if (s[1] != 28 || s[2] != 28) {
      throw Error(ErrorCode::kParseError,
                  fmt::format("the images in '{}' are {}x{}; Fashion-MNIST's are 28x28", dir, s[1], s[2]));
    }
  }
  return data;
}

const Shape& sample_shape(const std::string& model) {
  return model == "cnn" ? examples::kCnnSample : examples::kMlpSample;
}

/// The named model (checked by check_model_name), named after itself (the name is saved with
/// the weights), weights seeded by `seed`, built for batches of `sample`-shaped inputs with
/// `classes` outputs (Fashion-MNIST: its sample shape and 10).
std::shared_ptr<Sequential> make_model(const std::string& name, uint64_t seed, const Shape& sample,
                                       int64_t classes = 10) {
  check_model_name(name);
  const ModelOptions options{.name = name, .seed = seed};
  std::shared_ptr<Sequential> model = name == "cnn" ? examples::cnn(options, classes) : examples::mlp(options, classes);
  Shape input = {1};
  for (int64_t d : sample) input.push_back(d);
  model->build_model(input);
  return model;
}

/// The optimizer of a run: adam / adamw / sgd / rmsprop / adagrad with Keras's defaults (adamw:
/// keras.optimizers.AdamW, decoupled weight decay 0.004); with --lr-schedule cosine the rate decays from the learning
/// rate to 0 over `total_steps` (keras.optimizers.schedules.CosineDecay).
std::shared_ptr<optimizers::Optimizer> make_optimizer(const TrainCommand& c, int64_t total_steps) {
  using namespace optimizers;
  const double rate = c.learning_rate.value_or(c.optimizer == "sgd" ? 0.01 : 1e-3);
  LearningRate lr = rate;
  if (c.lr_schedule == "cosine") {
    lr = schedules::CosineDecay({.initial_learning_rate = rate, .decay_steps = std::max<int64_t>(total_steps, 1)});
  }
  if (c.optimizer == "sgd") return std::make_shared<SGD>(SGDOptions{.learning_rate = lr});
  if (c.optimizer == "adamw") return std::make_shared<AdamW>(AdamWOptions{.learning_rate = lr});
  if (c.optimizer == "rmsprop") return std::make_shared<RMSprop>(RMSpropOptions{.learning_rate = lr});
  if (c.optimizer == "adagrad") return std::make_shared<Adagrad>(AdagradOptions{.learning_rate = lr});
  return std::make_shared<Adam>(AdamOptions{.learning_rate = lr});
}

/// The model of a weights file: `model` when given, else the one its metadata names (ingot
/// train writes it), else "mlp".
std::string model_of(const std::string& model, const std::string& path) {
  if (!model.empty()) return model;
  if (path.empty()) throw bad_option("--weights is required", "pass the file ingot train --save-weights wrote");
  const SafetensorsFile file = load_safetensors(path);
  const auto saved = file.metadata.find("model");
  return saved != file.metadata.end() && (saved->second == "mlp" || saved->second == "cnn") ? saved->second : "mlp";
}

/// Throws unless every f32 / f64 tensor of `file` (read from `path`, named by --weights) is
/// finite: weights holding NaN or infinity (a run that diverged) would only report `loss nan`.
void check_finite(const SafetensorsFile& file, const std::string& path) {
  for (const auto& [name, array] : file.tensors) {
    int64_t nan = 0, inf = 0, first = -1;
    auto count = [&](auto* v) {
      for (int64_t i = 0; i < array.size(); ++i) {
        if (std::isfinite(v[i])) continue;
        ++(std::isnan(v[i]) ? nan : inf);
        if (first < 0) first = i;
      }
    };
    if (array.dtype() == DType::kF32) count(array.data<float>());
    if (array.dtype() == DType::kF64) count(array.data<double>());
    if (first < 0) continue;
    throw bad_option(fmt::format("--weights '{}': tensor '{}' holds {} NaN and {} infinite values (the first at "
                                 "flat index {}); using it would report loss nan",
                                 path, name, nan, inf, first),
                     "use weights saved before the training diverged (e.g. a ModelCheckpoint of an earlier epoch), "
                     "or retrain with a lower --learning-rate");
  }
}

/// A model of `model` kind with the weights of the safetensors file `path`. A file whose metadata
/// names another model (ingot train writes the model's name) is kInvalidArgument naming both; so
/// are weights that are not finite (check_finite).
std::shared_ptr<Sequential> load_model(const std::string& model, const std::string& path) {
  check_model_name(model);
  if (path.empty()) throw bad_option("--weights is required", "pass the file ingot train --save-weights wrote");
  const SafetensorsFile file = load_safetensors(path);
  check_finite(file, path);
  const auto saved = file.metadata.find("model");
  if (saved != file.metadata.end() && (saved->second == "mlp" || saved->second == "cnn") && saved->second != model) {
    throw bad_option(fmt::format("'{}' holds weights of the {} model, not of --model {}", path, saved->second, model),
                     fmt::format("pass --model {}", saved->second));
  }
  std::shared_ptr<Sequential> m = make_model(model, 0, sample_shape(model));
  m->load_weights(path);
  return m;
}

// ---- several devices and processes ---------------------------------------------------------------

/// Where a run's steps run: one device, or data parallel over this process's --cpu-devices and,
/// under `ingot launch`, every process's. Declared before the model, which must not outlive it.
struct Placement {
  std::unique_ptr<Runtime> runtime;  ///< the CPU devices of a data-parallel run
  std::shared_ptr<distribution::DataParallel> distribution;
  MeshBackend mesh_backend;  ///< --gpus N: CUDA over NCCL
  int64_t gpus = 1;
  int process_id = 0;
  int num_processes = 1;
  /// "cpu", "cuda", "4 CPU devices", "2 processes x 2 CPU devices" or "2 GPUs (NCCL)".
  std::string describe(const std::string& device) const {
    if (!distribution) return device;
    if (mesh_backend.target) {
      if (num_processes == 1) return fmt::format("data parallel over {} GPUs (NCCL)", gpus);
      return fmt::format("data parallel over {} processes x {} GPU{} (NCCL)", num_processes, gpus, gpus > 1 ? "s" : "");
    }
    const int64_t local = static_cast<int64_t>(runtime->devices().size());
    if (num_processes == 1) return fmt::format("data parallel over {} CPU devices", local);
    return fmt::format("data parallel over {} processes x {} CPU devices", num_processes, local);
  }
};

/// Launched by `ingot launch`, torchrun, Slurm's srun or Open MPI's mpirun: a launcher's variables
/// are set (detect_launcher). The command line reads them, as a torchrun script's
/// init_process_group("env://") or jax.distributed.initialize() does; the library never does.
bool launched() {
  return detect_launcher([](const char* name) -> const char* { return std::getenv(name); }).has_value();
}

/// --device cuda with several GPUs or processes: data parallel over NCCL, every process's GPUs
/// one mesh axis (ingot launch: the processes join through Gloo, NCCL's id sent over it).
Placement gpu_placement(const TrainCommand& c, const std::vector<std::unique_ptr<CudaDevice>>& gpus) {
  if (c.cuda_graphs) {
    throw bad_option("--cuda-graphs works on one GPU of one process", "drop --cuda-graphs, --gpus or ingot launch");
  }
  Placement p;
  std::vector<CudaDevice*> devices;
  std::vector<Device*> mesh_devices;
  for (const auto& g : gpus) {
    devices.push_back(g.get());
    mesh_devices.push_back(&g->device());
  }
  p.gpus = static_cast<int64_t>(gpus.size());
  p.mesh_backend = cuda_mesh_backend(devices, NcclLibrary::load(cuda_library_search({})));
  std::shared_ptr<distribution::ProcessGroup> processes;
  if (launched()) {
    processes = distribution::initialize(ProcessGroupOptions::from_env(), p.mesh_backend);
    p.process_id = processes->process_id();
    p.num_processes = processes->num_processes();
  }
  p.distribution =
      std::make_shared<distribution::DataParallel>(distribution::DeviceMesh({.shape = {p.gpus * p.num_processes},
                                                                             .axis_names = {"batch"},
                                                                             .devices = std::move(mesh_devices),
                                                                             .processes = processes}));
  return p;
}

Placement placement(const TrainCommand& c, const std::vector<std::unique_ptr<CudaDevice>>& gpus) {
  if (gpus.size() > 1 || (!gpus.empty() && launched())) return gpu_placement(c, gpus);
  Placement p;
  if (c.cpu_devices == 1 && !launched()) return p;
  p.runtime = std::make_unique<Runtime>(RuntimeOptions{.num_cpu_devices = static_cast<int>(c.cpu_devices)});
  std::shared_ptr<distribution::ProcessGroup> processes;
  if (launched()) {
    processes = distribution::initialize(ProcessGroupOptions::from_env(), p.runtime->devices());
    p.process_id = processes->process_id();
    p.num_processes = processes->num_processes();
  }
  p.distribution =
      std::make_shared<distribution::DataParallel>(distribution::DeviceMesh({.shape = {c.cpu_devices * p.num_processes},
                                                                             .axis_names = {"batch"},
                                                                             .devices = p.runtime->devices(),
                                                                             .processes = processes}));
  return p;
}

/// Throws before training when the test evaluation after it could not run: under data parallelism
/// every batch of the `test_images` test images (batches of `batch_size`, the last one shorter)
/// must split over the `devices` devices of the mesh (evaluate refuses it otherwise), and finding
/// that out after the whole run would waste it.
void check_test_split(int64_t test_images, int64_t batch_size, int64_t devices) {
  const int64_t last = test_images % batch_size;
  if (batch_size % devices != 0 || last % devices == 0) return;  // fit refuses such a batch size itself
  throw bad_option(fmt::format("--batch-size {}: the {} test images give a batch of {}, which does not split over "
                               "the {} CPU devices of the run (the test evaluation after training needs it)",
                               batch_size, test_images, last, devices),
                   fmt::format("use a --batch-size that is a multiple of {} and whose remainder of {} is too", devices,
                               test_images));
}

/// Discards what is written to it (the output of processes other than 0).
struct NullStream final : std::ostream {
  NullStream() : std::ostream(nullptr) {}
};

// ---- logs, timing and output files ---------------------------------------------------------------

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/// Wall-clock seconds of every epoch (epoch begin to epoch end hook, validation included).
class EpochTimer final : public callbacks::Callback {
 public:
  void on_epoch_begin(int64_t, const Logs&) override { epoch_start_ = now_seconds(); }
  void on_epoch_end(int64_t, const Logs&) override { epochs_.push_back(now_seconds() - epoch_start_); }
  const std::vector<double>& epoch_seconds() const { return epochs_; }

 private:
  double epoch_start_ = 0;
  std::vector<double> epochs_;
};

/// `text` becomes the content of `path` (output_file.h: a temporary file renamed into place, so
/// no partial file; links followed; special files such as /dev/null written in place).
void write_file(const std::string& path, const std::string& text) { write_output_file(path, text, "ingot"); }

Json test_json(const Logs& test) {
  return Json{{"loss", test.get("loss").value_or(NAN)}, {"accuracy", test.get("accuracy").value_or(NAN)}};
}

void print_test(std::ostream& out, const Logs& test) {
  out << fmt::format("test loss {:.6f}, accuracy {:.4f}\n", test.get("loss").value_or(NAN),
                     test.get("accuracy").value_or(NAN));
}

/// What run_train measured (seconds; per-step figures in milliseconds).
struct Timings {
  double train_seconds = 0, compile_seconds = 0, samples_per_second = 0;
  std::vector<double> epoch_seconds;
  int64_t train_steps = 0;
  double step_ms = 0;      ///< mean time inside the compiled train step
  double overhead_ms = 0;  ///< mean time per train step outside it (FitTiming::overhead_per_step)
};

/// The training and validation images of a run (--limit, --validation-split applied).
struct TrainData {
  Batch train;
  std::optional<Batch> validation;  ///< none with --validation-split 0
  int64_t validation_size() const { return validation ? validation->size() : 0; }
};

/// The data of a run: a user's .npz (--data) or Fashion-MNIST (--data-dir).
TrainingSet training_set(const TrainCommand& c) {
  if (!c.data.empty()) return load_npz_dataset(c.data);
  datasets::FashionMnist f = load_data(c.data_dir);
  return {.x_train = f.x_train, .y_train = f.y_train, .x_test = f.x_test, .y_test = f.y_test};
}

TrainData training_data(const TrainCommand& c, const TrainingSet& data) {
  const int64_t available = data.x_train.shape()[0];
  if (c.limit && *c.limit > available) {
    throw bad_option(fmt::format("--limit {} is more than the {} training {}", *c.limit, available, data.what));
  }
  const int64_t n = c.limit.value_or(available);
  // The library's rule (keras fit's validation_split): floor(n (1 - split)) images train.
  const auto n_train = static_cast<int64_t>(std::floor(static_cast<double>(n) * (1.0 - c.validation_split)));
  if (c.validation_split > 0 && (n_train == 0 || n_train == n)) {
    throw bad_option(fmt::format("--validation-split {} of {} images leaves {} for training and {} for validation",
                                 c.validation_split, n, n_train, n - n_train),
                     "choose a split that leaves images on both sides, a larger --limit, or --validation-split 0");
  }
  auto [train, validation] =
      split_validation(Batch{model_inputs(data.x_train, n, c.model), examples::first_labels(data.y_train, n), Array()},
                       c.validation_split);
  TrainData d{.train = std::move(train)};
  if (c.validation_split > 0) d.validation = std::move(validation);
  return d;
}

Array test_pixels(const datasets::FashionMnist& data, const std::string& model) {
  return examples::pixels(data.x_test, data.x_test.shape()[0], sample_shape(model));
}

void print_header(std::ostream& out, const TrainCommand& c, Model& model, const TrainData& d, const std::string& what,
                  const std::string& where) {
  out << model.summary();
  out << fmt::format("Training {} on {} {} ({} for validation): {} epoch{} of batch {}, {}, seed {}, {}\n", c.model,
                     d.train.size(), what, d.validation_size(), c.epochs, c.epochs == 1 ? "" : "s", c.batch_size,
                     c.lr_schedule == "cosine" ? c.optimizer + " with cosine decay" : c.optimizer, c.seed, where);
  out.flush();
}

/// The timings of a fit that took `train_seconds` and stepped through `samples` samples.
Timings timings(const EpochTimer& timer, const FitTiming& fit, double train_seconds, int64_t samples) {
  Timings t{.train_seconds = train_seconds,
            .compile_seconds = fit.compile_seconds + fit.validation_compile_seconds,
            .epoch_seconds = timer.epoch_seconds(),
            .train_steps = fit.train_steps,
            .step_ms = fit.train_steps > 0 ? 1e3 * fit.step_seconds / static_cast<double>(fit.train_steps) : 0,
            .overhead_ms = 1e3 * fit.overhead_per_step()};
  const double steady = t.train_seconds - t.compile_seconds;
  t.samples_per_second = steady > 0 ? static_cast<double>(samples) / steady : 0;
  return t;
}

void print_timings(std::ostream& out, const Timings& t) {
  out << fmt::format("train {:.2f} s ({:.2f} s compiling", t.train_seconds, t.compile_seconds);
  if (t.epoch_seconds.size() > 1) {
    out << fmt::format(", {:.3f} s per epoch after the first",
                       median({t.epoch_seconds.begin() + 1, t.epoch_seconds.end()}));
  }
  out << fmt::format("), {:.0f} samples/s; per step {:.3f} ms in the compiled step, {:.3f} ms around it\n",
                     t.samples_per_second, t.step_ms, t.overhead_ms);
}

/// The report of --metrics-json. "peak_rss_bytes": the process's peak resident set size (getrusage);
/// "allocator_peak_bytes": the peak bytes in use of the device allocator the arrays came from
/// (`allocator`; a compiled step's own scratch buffers are not counted there, RSS counts them).
Json metrics_json(const TrainCommand& c, const callbacks::History& history, const Logs& test, const Timings& t,
                  const TrainData& d, const Placement& p, const CompileBreakdown& compile, const Allocator& allocator) {
  Json h = Json::object();
  for (const auto& [name, values] : history.history()) h[name] = values;
  return Json{{"history", h},
              {"test", test_json(test)},
              {"train_seconds", t.train_seconds},
              {"compile_seconds", t.compile_seconds},
              {"compile", compile_breakdown_json(compile)},
              {"samples_per_second", t.samples_per_second},
              {"epoch_seconds", t.epoch_seconds},
              {"timing", {{"train_steps", t.train_steps}, {"step_ms", t.step_ms}, {"overhead_ms", t.overhead_ms}}},
              {"peak_rss_bytes", peak_rss_bytes()},
              {"allocator_peak_bytes", allocator.stats().peak_bytes_in_use},
              {"device", c.device},
              {"config",
               {{"dataset", c.data.empty() ? c.dataset : c.data},
                {"model", c.model},
                {"epochs", c.epochs},
                {"batch_size", c.batch_size},
                {"optimizer", c.optimizer},
                {"learning_rate", c.learning_rate.value_or(c.optimizer == "sgd" ? 0.01 : 1e-3)},
                {"lr_schedule", c.lr_schedule},
                {"validation_split", c.validation_split},
                {"steps_per_execution", c.steps_per_execution},
                {"seed", c.seed},
                {"cpu_devices", c.cpu_devices},
                {"processes", p.num_processes},
                {"train_samples", d.train.size()},
                {"validation_samples", d.validation_size()}}}};
}

}  // namespace

// ---- the commands --------------------------------------------------------------------------------

int run_train(const TrainCommand& c, std::ostream& all_out) {
  check_train_options(c);
  check_output_paths({{"--save-weights", c.save_weights}, {"--csv", c.csv}, {"--metrics-json", c.metrics_json}},
                     c.data.empty() ? data_files(c.data_dir) : std::vector<std::string>{c.data});
  // The device first: a missing GPU is reported before the data are read.
  const std::vector<std::unique_ptr<CudaDevice>> gpus =
      c.device == "cuda" ? open_cuda_devices(c.gpus, launched() ? cluster_from_env().local_rank * c.gpus : 0)
                         : std::vector<std::unique_ptr<CudaDevice>>{};
  const Placement where = placement(c, gpus);
  CudaDevice* const cuda = gpus.size() == 1 && !where.distribution ? gpus[0].get() : nullptr;
  NullStream discard;
  std::ostream& out = where.process_id == 0 ? all_out : discard;  // process 0 speaks for all
  const TrainingSet data = training_set(c);
  const TrainData d = training_data(c, data);
  if (where.distribution) {
    check_test_split(data.y_test.shape()[0], c.batch_size, where.distribution->batch_axis_size());
  }
  std::shared_ptr<Sequential> model =
      make_model(c.model, c.seed, model_sample_shape(data.x_train, c.model), data.classes);
  const int64_t steps_per_epoch = (d.train.size() + c.batch_size - 1) / c.batch_size;
  examples::compile_classifier(*model, make_optimizer(c, c.epochs * steps_per_epoch), c.steps_per_execution,
                               {.compile_cache_dir = codegen::compile_cache_dir_option(c.compile_cache),
                                .compile_cache_max_bytes = codegen::compile_cache_size_option(c.compile_cache_max_size),
                                .perf_jitdump = c.perf_jitdump},
                               device_target(cuda),
                               {.cuda_graphs = c.cuda_graphs, .libraries = cuda_library_search({})}, where.distribution,
                               where.mesh_backend);
  if (!c.quiet) print_header(out, c, *model, d, data.what, where.describe(c.device));
  auto timer = std::make_shared<EpochTimer>();
  // Keras CSVLogger rows kept in memory: the file is written with the other outputs at the end.
  auto csv = std::make_shared<callbacks::CSVLogger>(
      callbacks::CSVLoggerOptions{.write = callbacks::CSVLoggerWrite::kInMemory});
  // From here on SIGINT / SIGTERM stop the run at a step boundary, and nothing is written.
  const StopOnSignal stop;
  const double start = now_seconds();
  std::shared_ptr<callbacks::History> history = model->fit(
      {.x = d.train.x,
       .y = d.train.y,
       .batch_size = c.batch_size,
       .epochs = c.epochs,
       .verbose = c.quiet || where.process_id != 0 ? 0 : 1,
       .callbacks = {timer, csv,
                     std::make_shared<callbacks::TerminateOnNaN>(callbacks::TerminateOnNaNOptions{.stream = &out}),
                     stop.callback()},
       .validation_data = d.validation,
       .seed = c.seed,
       .progbar = {.stream = &out}});
  stop.throw_if_received("no output was written");
  const std::vector<double>& losses = history->values("loss");
  if (std::any_of(losses.begin(), losses.end(), [](double l) { return !std::isfinite(l); })) {
    // TerminateOnNaN stopped the run; nothing is written.
    throw Error(
        ErrorCode::kFailedPrecondition,
        fmt::format("training diverged: the loss became {} in epoch {}", losses.back(), losses.size()),
        fmt::format("lower --learning-rate (now {})", c.learning_rate.value_or(c.optimizer == "sgd" ? 0.01 : 1e-3)));
  }
  const Timings t = timings(*timer, model->last_fit_timing(), now_seconds() - start, d.train.size() * c.epochs);
  const Logs test = model->evaluate({.x = model_inputs(data.x_test, data.x_test.shape()[0], c.model),
                                     .y = data.y_test,
                                     .batch_size = c.batch_size,
                                     .verbose = 0});
  print_test(out, test);
  if (!c.quiet) print_timings(out, t);
  // Written once (by process 0 when there are several; they all have the same results), and
  // together: every output goes to its temporary file and is flushed first, and only then are
  // they renamed into place, so a failing one (a full disk, /dev/full) replaces none of the others.
  const std::string metrics_text =
      c.metrics_json.empty() ? std::string()
                             : metrics_json(c, *history, test, t, d, where, model->train_step_compile_breakdown(),
                                            cuda ? cuda->allocator() : default_cpu_device().allocator())
                                       .dump(2) +
                                   "\n";
  model->write_once(
      [&] {
        std::vector<std::unique_ptr<OutputFile>> files;
        if (!c.save_weights.empty()) {
          files.push_back(std::make_unique<OutputFile>(c.save_weights, "--save-weights"));
          model->save_weights(*files.back());
        }
        for (const auto& [path, text] : {std::pair{c.csv, csv->text()}, std::pair{c.metrics_json, metrics_text}}) {
          if (path.empty()) continue;
          files.push_back(std::make_unique<OutputFile>(path, path == c.csv ? "--csv" : "--metrics-json"));
          files.back()->write(text);
        }
        for (const auto& f : files) f->finish();
        // The last moment to stop: the temporary files are removed (OutputFile's destructor).
        stop.throw_if_received("no output was written");
        for (const auto& f : files) f->commit();
      },
      "the outputs");
  if (!c.quiet) {
    const std::vector<std::pair<std::string, std::string>> written = {
        {"weights", c.save_weights}, {"per-epoch logs", c.csv}, {"metrics", c.metrics_json}};
    for (const auto& [what, path] : written) {
      if (!path.empty()) out << fmt::format("wrote {} to {}\n", what, path);
    }
  }
  return 0;
}

int run_evaluate(const EvaluateCommand& c, std::ostream& out) {
  if (!c.model.empty()) check_model_name(c.model);
  check_positive(c.batch_size, "--batch-size");
  check_device(c.device, false);
  check_output_paths({{"--metrics-json", c.metrics_json}}, {c.weights});
  const std::string kind = model_of(c.model, c.weights);
  std::shared_ptr<Sequential> model = load_model(kind, c.weights);
  const datasets::FashionMnist data = load_data(c.data_dir, /*test_only=*/true);
  examples::compile_classifier(*model);
  const Logs test =
      model->evaluate({.x = test_pixels(data, kind), .y = data.y_test, .batch_size = c.batch_size, .verbose = 0});
  print_test(out, test);
  if (!c.metrics_json.empty())
    write_file(c.metrics_json, Json{{"test", test_json(test)}, {"device", c.device}}.dump(2) + "\n");
  return 0;
}

int run_predict(const PredictCommand& c, std::ostream& out) {
  if (!c.model.empty()) check_model_name(c.model);
  check_device(c.device, false);
  const std::string kind = model_of(c.model, c.weights);
  std::shared_ptr<Sequential> model = load_model(kind, c.weights);
  const datasets::FashionMnist data = load_data(c.data_dir, /*test_only=*/true);
  const int64_t n = data.x_test.shape()[0];
  if (c.index < 0 || c.index >= n) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("--index {} is outside the {} test images [0, {})", c.index, n, n));
  }
  const auto label = static_cast<size_t>(data.y_test.data<int32_t>()[c.index]);
  if (label >= kClassNames.size()) {
    throw Error(ErrorCode::kParseError,
                fmt::format("test label {} of image {} is not a class in [0, 10)", label, c.index));
  }
  // The one image as a batch of one (f32 pixel / 255, as training saw it).
  const uint8_t* image = data.x_test.data<uint8_t>() + c.index * 784;
  std::vector<float> pixels(784);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(image[i]) / 255.0f;
  Shape one = {1};
  for (int64_t d : sample_shape(kind)) one.push_back(d);
  const Array x = Array::from_vector<float>(pixels, one);
  const std::vector<float> logits = model->predict_on_batch(x).to_vector<float>();
  // Softmax in double, shifted by the largest logit.
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  for (double& v : p) v /= sum;
  const auto best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
  out << fmt::format("test image {}: {} (class {}); label: {} (class {})\n", c.index, kClassNames.at(best), best,
                     kClassNames.at(label), label);
  for (size_t i = 0; i < p.size(); ++i) out << fmt::format("  {} {:<12} {:.6f}\n", i, kClassNames.at(i), p[i]);
  return 0;
}

}  // namespace ingot::cli
