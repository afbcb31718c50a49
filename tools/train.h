// `ingot train`, `ingot evaluate` and `ingot predict`: Keras-style training of the Fashion-MNIST
// models (examples/fashion_mnist_common.h) from the command line. docs/train.md is the guide.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "ingot/trainer/datasets.h"

namespace ingot::cli {

/// Options of `ingot train` (each field is the CLI option of the same name).
struct TrainCommand {
  std::string dataset = "fashion-mnist";              ///< the only dataset known
  std::string data_dir = datasets::kFashionMnistDir;  ///< directory of the IDX files
  /// A user's .npz (x_train, y_train, x_test, y_test; load_npz_dataset) instead of Fashion-MNIST.
  std::string data;
  std::string model = "mlp";       ///< "mlp" or "cnn"
  int64_t epochs = 10;             ///< > 0
  int64_t batch_size = 128;        ///< > 0
  std::string optimizer = "adam";  ///< "adam", "adamw" (weight_decay 0.004), "sgd", "rmsprop", "adagrad"
  /// > 0 and finite; unset: the optimizer's Keras default (1e-2 for sgd, 1e-3 for the others).
  std::optional<double> learning_rate;
  /// "cosine": CosineDecay from the learning rate to 0 over all the run's steps (epochs *
  /// ceil(training images / batch size)); "constant": the learning rate throughout.
  std::string lr_schedule = "cosine";
  double validation_split = 0.1;    ///< in [0, 1): the last fraction of the training data
  int64_t steps_per_execution = 1;  ///< >= 1
  uint64_t seed = 1337;             ///< seeds the weights (layer i: seed + i) and the shuffle
  std::string device = "cpu";       ///< "cpu" or "cuda" (CUDA device 0; CompileOptions::target = cuda_target)
  bool cuda_graphs = false;         ///< --device cuda: replay each step as a CUDA graph (CudaCompileOptions)
  /// Data parallel over this many CPU devices of this process (distribution::DataParallel), in
  /// [1, 1024] (RuntimeOptions::kMaxCpuDevices); 1: one device. Under `ingot launch` (RANK, WORLD_SIZE, MASTER_ADDR and
  /// MASTER_PORT set) every process contributes this many devices to one mesh over Gloo, --batch-size is the global
  /// batch (each process trains on its share), and process 0 alone prints and writes files.
  int64_t cpu_devices = 1;
  /// With --device cuda: data parallel over CUDA devices 0 .. gpus-1 of this process, collectives
  /// over NCCL (CompileOptions::mesh_backend = cuda_mesh_backend), in [1, 64]; 1: one GPU, no NCCL.
  int64_t gpus = 1;
  std::string save_weights;      ///< safetensors file to write at the end (empty: none)
  std::string csv;               ///< per-epoch logs, Keras CSVLogger format (empty: none)
  std::string metrics_json;      ///< history, test results and timings (empty: none)
  std::optional<int64_t> limit;  ///< train on the first N training images (1..60000)
  bool quiet = false;            ///< print only the test result line
  bool perf_jitdump = false;     ///< CpuCompileOptions::perf_jitdump (profiling with perf)
  /// Compilation cache directory, "default" or "off" (codegen::compile_cache_dir_option).
  std::string compile_cache = "default";
  /// Size cap of the cache directory (codegen::compile_cache_size_option: bytes, or K/M/G/T).
  std::string compile_cache_max_size = "default";
};

/// Options of `ingot evaluate`.
struct EvaluateCommand {
  std::string weights;  ///< safetensors file from `ingot train --save-weights`
  std::string model;    ///< "mlp" or "cnn"; empty: the model the weights file names
  std::string data_dir = datasets::kFashionMnistDir;
  int64_t batch_size = 128;  ///< > 0; the same as training's gives the same loss
  std::string device = "cpu";
  std::string metrics_json;  ///< {"test": {"loss", "accuracy"}, "device"} (empty: none)
};

/// Options of `ingot predict`.
struct PredictCommand {
  std::string weights;
  std::string model;  ///< "mlp" or "cnn"; empty: the model the weights file names
  std::string data_dir = datasets::kFashionMnistDir;
  int64_t index = 0;  ///< test image, in [0, test images)
  std::string device = "cpu";
};

/// Trains the model on Fashion-MNIST: prints the model summary, one progress bar (a terminal)
/// or line (otherwise) per epoch, the test loss and accuracy and the timings; then writes the
/// requested files. Every option and output path is checked before the data is read and
/// training starts (an output path must be creatable: its directory exists and a file can be
/// made in it); the files are written only after training, each to a temporary file renamed
/// over the target, so an error never leaves a partial file. Returns 0; throws ingot::Error:
/// kInvalidArgument naming the option (unknown dataset / model / optimizer / device, epochs,
/// batch size or steps per execution < 1, a learning rate <= 0, a validation split outside
/// [0, 1), a limit outside [1, training images], an unwritable or repeated output path,
/// --cpu-devices outside [1, 1024] (RuntimeOptions::kMaxCpuDevices) or with --device cuda, batches that do not split
/// over the devices), kNotFound for --device cuda without a GPU, kNotFound / kParseError for missing or broken data
/// files; launched by `ingot launch`, what ProcessGroupOptions::from_env and distribution::initialize throw (a bad
/// variable, a process not joining in time).
int run_train(const TrainCommand& command, std::ostream& out);

/// Loads the weights into the model and prints the test loss and accuracy (over all test images,
/// in batches of batch_size: the figures `ingot train` printed for the same weights). Returns 0;
/// throws ingot::Error: kNotFound for a missing weights file, kInvalidArgument for weights saved
/// from another model (or any option error as run_train), what load_weights throws for a file
/// that does not fit the model, and what the data loading throws.
int run_evaluate(const EvaluateCommand& command, std::ostream& out);

/// Loads the weights and prints the predicted class of test image `index` (its name, one of the
/// 10 Fashion-MNIST classes, and the true label) and the 10 class probabilities (softmax of the
/// logits). Returns 0; throws as run_evaluate, and kOutOfRange for an index outside the test set.
int run_predict(const PredictCommand& command, std::ostream& out);

}  // namespace ingot::cli
