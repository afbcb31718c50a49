// `ingot`'s command line (ingot::cli::ingot_main): subcommands train, evaluate, predict
// (docs/train.md), bench (bench/README.md), launch (docs/distributed.md), demo, ops, run. tools/ingot_main.cpp calls
// it; so does the GPU check bundle's multi-call binary (tests/gpu_bundle_main.cpp).
#include <CLI/CLI.hpp>
#include <malloc.h>
#include <sys/resource.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string_view>
#include <iostream>
#include <new>
#include <set>

#include "bench.h"
#include "cli.h"
#include "demo.h"
#include "ingot/ir/op_registry.h"
#include "ingot/runtime/cuda_info.h"
#include "ingot/runtime/version.h"
#include "launch.h"
#include "stop_signal.h"
#include "train.h"

namespace {

/// Checks every value-taking option of `cmd`: no empty values (an empty path or number is a
/// mistake, not "unset"), integers decimal ("010" is 10, "0x10" is refused: CLI11 alone reads
/// them as octal and hex) and within int64 (CLI11 would otherwise saturate
/// 99999999999999999999 to 2^63 - 1) and `--seed` not negative (it is unsigned). Violations are
/// command-line errors (exit 2) naming the option. Positional arguments are left alone (`ingot
/// launch` passes them to the program verbatim, empty ones included).
void validate_values(CLI::App* cmd) {
  const CLI::Validator non_empty(
      [](std::string& v) {
        return v.empty() ? std::string("an empty value (leave the option out instead)") : std::string();
      },
      "", "non-empty");
  // Decimal only: CLI11 reads integers with base 0, so "010" would be 8 and "0x10" 16. Leading
  // zeros are dropped before CLI11 converts the value.
  const CLI::Validator decimal_int64(
      [](std::string& v) {
        const size_t digits = !v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0;
        if (v.size() == digits || v.find_first_not_of("0123456789", digits) != std::string::npos) {
          return "'" + v + "' is not a decimal integer";
        }
        const size_t first = std::min(v.find_first_not_of('0', digits), v.size() - 1);
        v = v.substr(0, digits) + v.substr(first);
        int64_t x = 0;
        const auto [end, ec] = std::from_chars(v.data() + (v[0] == '+' ? 1 : 0), v.data() + v.size(), x);
        return ec == std::errc::result_out_of_range ? "'" + v + "' is out of the 64-bit integer range" : std::string();
      },
      "", "decimal int64");
  const CLI::Validator not_negative(
      [](std::string& v) { return !v.empty() && v[0] == '-' ? "'" + v + "' is negative" : std::string(); }, "",
      "not-negative");
  for (CLI::Option* o : cmd->get_options()) {
    if (o->get_type_size() == 0 || !o->nonpositional()) continue;  // flags, positionals
    o->check(non_empty);
    const std::string name = o->get_name();
    static const std::set<std::string> integers = {"--epochs",         "--batch-size",  "--steps-per-execution",
                                                   "--seed",           "--limit",       "--index",
                                                   "--steps",          "--warmup",      "--lm-batch",
                                                   "--lm-context",     "--lm-width",    "--lm-heads",
                                                   "--lm-blocks",      "--gemm",        "--cpu-devices",
                                                   "--nproc-per-node", "--master-port", "--gpus"};
    if (integers.count(name)) o->transform(decimal_int64);
    if (name == "--seed" || name == "--index") o->check(not_negative);
  }
}

/// The options of `ingot train` (fields of `c`).
CLI::App* add_train(CLI::App& app, ingot::cli::TrainCommand& c) {
  CLI::App* cmd = app.add_subcommand("train", "train a model on Fashion-MNIST (Keras-style fit), then test it");
  cmd->add_option("--dataset", c.dataset, "dataset: fashion-mnist")->capture_default_str();
  CLI::Option* data_dir =
      cmd->add_option("--data-dir", c.data_dir, "directory of the IDX files (package dataset-fashion-mnist)")
          ->capture_default_str();
  cmd->add_option("--data", c.data,
                  "train on an .npz archive with x_train, y_train, x_test, y_test (keras.datasets' mnist.npz layout) "
                  "instead of Fashion-MNIST")
      ->excludes(data_dir);
  cmd->add_option("--model", c.model, "mlp or cnn")->capture_default_str();
  cmd->add_option("--epochs", c.epochs, "epochs")->capture_default_str();
  cmd->add_option("--batch-size", c.batch_size, "samples per step")->capture_default_str();
  cmd->add_option("--optimizer", c.optimizer, "adam, adamw (weight decay 0.004), sgd, rmsprop or adagrad")
      ->capture_default_str();
  cmd->add_option("--learning-rate", c.learning_rate, "learning rate (default: 1e-2 for sgd, 1e-3 for the others)");
  cmd->add_option("--lr-schedule", c.lr_schedule, "cosine (decay to 0 over the run, Keras CosineDecay) or constant")
      ->capture_default_str();
  cmd->add_option("--validation-split", c.validation_split, "last fraction of the training images held out")
      ->capture_default_str();
  cmd->add_option("--steps-per-execution", c.steps_per_execution, "train steps per call")->capture_default_str();
  cmd->add_option("--seed", c.seed, "seed of the weights and of the shuffle")->capture_default_str();
  cmd->add_option("--device", c.device, "cpu, or cuda (CUDA device 0: the compiled steps run there)")
      ->capture_default_str();
  cmd->add_flag("--cuda-graphs", c.cuda_graphs, "with --device cuda: replay each step as a CUDA graph");
  cmd->add_option("--cpu-devices", c.cpu_devices,
                  "data parallel over this many CPU devices (under ingot launch: per process, every process's "
                  "devices forming one mesh)")
      ->capture_default_str();
  cmd->add_option("--gpus", c.gpus,
                  "with --device cuda: data parallel over this many GPUs of this process (CUDA devices 0..N-1), "
                  "collectives over NCCL")
      ->capture_default_str();
  cmd->add_option("--save-weights", c.save_weights, "write the trained weights (safetensors)");
  cmd->add_option("--csv", c.csv, "write the per-epoch logs as CSV (Keras CSVLogger format)");
  cmd->add_option("--metrics-json", c.metrics_json, "write history, test results and timings as JSON");
  cmd->add_option("--limit", c.limit, "train on the first N training images (before the validation split)");
  cmd->add_flag("--quiet", c.quiet, "print only the test result");
  cmd->add_option("--compile-cache", c.compile_cache,
                  "compilation cache directory, default ($XDG_CACHE_HOME/ingot, else ~/.cache/ingot) or off")
      ->capture_default_str();
  cmd->add_option("--compile-cache-max-size", c.compile_cache_max_size,
                  "size cap of the cache directory, least recently used entries evicted past it: bytes, or with "
                  "K, M, G or T (binary), e.g. 500M; default 2G")
      ->capture_default_str();
  cmd->add_flag("--perf-jitdump", c.perf_jitdump,
                "write a jitdump of the compiled steps for perf inject --jit (docs/compiler.md, Profiling)");
  return cmd;
}

CLI::App* add_evaluate(CLI::App& app, ingot::cli::EvaluateCommand& c) {
  CLI::App* cmd =
      app.add_subcommand("evaluate", "test loss and accuracy of saved weights on the Fashion-MNIST test set");
  cmd->add_option("--weights", c.weights, "safetensors file from ingot train --save-weights")->required();
  cmd->add_option("--model", c.model, "mlp or cnn (default: the model the weights file names)");
  cmd->add_option("--data-dir", c.data_dir, "directory of the IDX files")->capture_default_str();
  cmd->add_option("--batch-size", c.batch_size, "samples per step (training's gives its exact figures)")
      ->capture_default_str();
  cmd->add_option("--device", c.device, "cpu")->capture_default_str();
  cmd->add_option("--metrics-json", c.metrics_json, "write the test loss and accuracy as JSON");
  return cmd;
}

CLI::App* add_predict(CLI::App& app, ingot::cli::PredictCommand& c) {
  CLI::App* cmd = app.add_subcommand("predict", "class and class probabilities of one Fashion-MNIST test image");
  cmd->add_option("--weights", c.weights, "safetensors file from ingot train --save-weights")->required();
  cmd->add_option("--model", c.model, "mlp or cnn (default: the model the weights file names)");
  cmd->add_option("--data-dir", c.data_dir, "directory of the IDX files")->capture_default_str();
  cmd->add_option("--index", c.index, "test image index")->required();
  cmd->add_option("--device", c.device, "cpu")->capture_default_str();
  return cmd;
}

CLI::App* add_bench(CLI::App& app, ingot::cli::BenchCommand& c) {
  CLI::App* cmd =
      app.add_subcommand("bench", "time the benchmark models' train steps and GEMMs (JSON for bench/peers)");
  cmd->add_option("--models", c.models, "mlp, cnn, lm (comma-separated)")->delimiter(',')->capture_default_str();
  cmd->add_option("--device", c.device, "cpu, or cuda (CUDA device 0)")->capture_default_str();
  cmd->add_option("--batch-size", c.batch_size, "samples per step of mlp and cnn")->capture_default_str();
  cmd->add_option("--warmup", c.warmup, "untimed steps after the compiling one")->capture_default_str();
  cmd->add_option("--steps", c.steps, "timed steps")->capture_default_str();
  cmd->add_option("--lm-batch", c.lm_batch, "sequences per LM step")->capture_default_str();
  cmd->add_option("--lm-context", c.lm_context, "tokens per LM sequence")->capture_default_str();
  cmd->add_option("--lm-width", c.lm_width, "LM width")->capture_default_str();
  cmd->add_option("--lm-heads", c.lm_heads, "LM attention heads")->capture_default_str();
  cmd->add_option("--lm-blocks", c.lm_blocks, "LM transformer blocks")->capture_default_str();
  cmd->add_option("--lm-text", c.lm_text, "text whose byte windows the LM trains on (none: random tokens)")
      ->capture_default_str();
  cmd->add_option("--gemm", c.gemm_sizes, "square f32 GEMM sizes to time (comma-separated; default none)")
      ->delimiter(',');
  cmd->add_option("--dtype-policy", c.dtype_policy, "float32, mixed_float16 or mixed_bfloat16")->capture_default_str();
  cmd->add_flag("--cuda-graphs", c.cuda_graphs, "with --device cuda: replay each step as a CUDA graph");
  cmd->add_flag("--sync-collectives", c.sync_collectives,
                "with --cpu-devices: collectives in graph order, not overlapped with compute");
  cmd->add_option("--cpu-devices", c.cpu_devices, "data parallel over this many CPU virtual devices")
      ->capture_default_str();
  cmd->add_option("--variants", c.variants,
                  "also time each model with fit under: baseline, no-fusion, no-donation, no-prefetch, spe8, "
                  "codegen-gemm, no-outline, no-scope-functions, or all (comma-separated; default none)")
      ->delimiter(',');
  cmd->add_option("--seed", c.seed, "seed of the weights and the synthetic data")->capture_default_str();
  cmd->add_option("--save-inputs", c.save_inputs,
                  "write each model's initial weights and batch to DIR/<model>.safetensors and "
                  "DIR/<model>.batch.safetensors (bench/peers --inputs DIR)");
  cmd->add_option("--compile-cache", c.compile_cache,
                  "compilation cache directory, default ($XDG_CACHE_HOME/ingot, else ~/.cache/ingot) or off")
      ->capture_default_str();
  cmd->add_option("--compile-cache-max-size", c.compile_cache_max_size,
                  "size cap of the cache directory, least recently used entries evicted past it: bytes, or with "
                  "K, M, G or T (binary), e.g. 500M; default 2G")
      ->capture_default_str();
  cmd->add_flag("--perf-jitdump", c.perf_jitdump,
                "write a jitdump of the compiled steps for perf inject --jit, so perf report times each kernel "
                "(docs/compiler.md, Profiling)");
  cmd->add_option("--json", c.json, "write the results as JSON");
  return cmd;
}

/// The options of `ingot launch`; everything after `--` is the program and its arguments.
CLI::App* add_launch(CLI::App& app, ingot::cli::LaunchCommand& c) {
  CLI::App* cmd = app.add_subcommand(
      "launch", "start N processes of a program with the torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR, ...)");
  cmd->add_option("-n,--nproc-per-node", c.nproc_per_node, "processes to start, 1..1024")->capture_default_str();
  cmd->add_option("--master-addr", c.master_addr, "MASTER_ADDR: where rank 0 serves the rendezvous store")
      ->capture_default_str();
  cmd->add_option("--master-port", c.master_port, "MASTER_PORT (default: a free port on --master-addr)");
  cmd->add_option("--grace", c.grace, "seconds the ranks get after SIGTERM before SIGKILL")->capture_default_str();
  cmd->add_option("command", c.command, "-- PROGRAM [ARGS...]: looked up on PATH, arguments passed verbatim");
  return cmd;
}

/// What the process could have had when a std::bad_alloc (an allocation with no ingot::Error
/// naming it) reached the command: its address-space limit (RLIMIT_AS, `ulimit -v`) and the
/// machine's available memory (MemAvailable of /proc/meminfo), each only when known.
std::string memory_limits_text() {
  std::string text;
  struct rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    text += fmt::format("; the process's address-space limit (ulimit -v) is {} MiB", as.rlim_cur >> 20);
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1)
      text += fmt::format("; {} MiB of the machine's memory are available", kib >> 10);
  }
  return text;
}

/// The error for a std::bad_alloc that reached `command` (no shapes named: the allocation could
/// be the data, the compiler or a step).
ingot::Error out_of_host_memory(const std::string& command) {
  return ingot::Error(
      ingot::ErrorCode::kOutOfMemory,
      fmt::format("'ingot {}' ran out of host memory (an allocation failed){}", command, memory_limits_text()),
      "free memory or raise the limit; a smaller --batch-size, --limit or model needs less");
}

}  // namespace

/// Keeps large freed blocks in the process heap instead of returning them to the OS. A training
/// step allocates and frees the same large temporaries (activations, im2col blocks) every step;
/// with glibc's defaults they are mmap'ed and trimmed each time, so every step page-faults them
/// in again. Measured on the CNN (ingot train --model cnn, 2 cores): 68 -> 54 ms per step. An
/// application's choice (the library leaves the process's malloc settings alone).
static void keep_large_blocks_in_the_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: blocks up to 32 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // give memory back to the OS only beyond 1 GiB free at the top
}

ingot::LibrarySearch ingot::cli::cuda_library_search(const std::vector<std::string>& dirs) {
  ingot::LibrarySearch search;
  search.dirs = dirs;
  if (const char* env = std::getenv("INGOT_CUDA_LIB_DIRS")) {
    std::string_view rest = env;
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) search.dirs.emplace_back(dir);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (const char* prefix = std::getenv(var); prefix != nullptr && *prefix != '\0')
      search.python_prefixes.emplace_back(prefix);
  }
  return search;
}

int ingot::cli::ingot_main(int argc, char** argv) {
  keep_large_blocks_in_the_heap();
  CLI::App app{"ingot: tensor compiler, runtime and trainer"};
  // `ingot --version`: the library's version (ingot::version()), exit code 0.
  app.set_version_flag("--version", std::string("ingot ") + ingot::version(), "print ingot's version and exit");
  app.require_subcommand(1);

  ingot::cli::TrainCommand train;
  ingot::cli::EvaluateCommand evaluate;
  ingot::cli::PredictCommand predict;
  CLI::App* train_cmd = add_train(app, train);
  CLI::App* evaluate_cmd = add_evaluate(app, evaluate);
  CLI::App* predict_cmd = add_predict(app, predict);
  ingot::cli::BenchCommand bench;
  CLI::App* bench_cmd = add_bench(app, bench);
  ingot::cli::LaunchCommand launch;
  CLI::App* launch_cmd = add_launch(app, launch);
  for (CLI::App* cmd : {train_cmd, evaluate_cmd, predict_cmd, bench_cmd, launch_cmd}) validate_values(cmd);

  ingot::cli::DemoOptions demo;
  CLI::App* demo_cmd =
      app.add_subcommand("demo", "trace an MLP forward pass, print its IR, interpret it on random data");
  demo_cmd->add_option("--batch", demo.batch, "rows of the input batch")->capture_default_str();
  demo_cmd->add_option("--features", demo.features, "input features")->capture_default_str();
  demo_cmd->add_option("--hidden", demo.hidden, "hidden units")->capture_default_str();
  demo_cmd->add_option("--classes", demo.classes, "output classes")->capture_default_str();
  demo_cmd->add_option("--seed", demo.seed, "seed of weights and inputs")->capture_default_str();

  CLI::App* ops_cmd = app.add_subcommand("ops", "list the IR ops the registry knows");

  std::vector<std::string> cuda_lib_dirs;
  CLI::App* cuda_info_cmd = app.add_subcommand(
      "cuda-info", "print the CUDA driver, its devices and where each NVIDIA library was found (docs/runtime-cuda.md)");
  cuda_info_cmd->add_option("--cuda-lib-dir", cuda_lib_dirs,
                            "folder searched first for cuBLAS/cuDNN/NCCL (repeatable; also INGOT_CUDA_LIB_DIRS=a:b)");

  std::string ir_path;
  std::vector<std::string> passes;
  uint64_t seed = 0;
  bool print_only = false;
  CLI::App* run_cmd =
      app.add_subcommand("run", "parse an IR text file, apply passes, print it and interpret it on random inputs");
  run_cmd->add_option("file", ir_path, "IR text file (format: docs/ir.md)")->required();
  run_cmd->add_option("--passes", passes, "passes to apply in order: dce, cse")->delimiter(',');
  run_cmd->add_option("--seed", seed, "seed of the random arguments")->capture_default_str();
  run_cmd->add_flag("--print-only", print_only, "print the IR without interpreting it");

  // A first argument that is no option and no command: name it (CLI11 says only "A subcommand is
  // required").
  std::string known;
  bool is_command = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    is_command |= argc > 1 && sub->get_name() == argv[1];
  }
  if (argc > 1 && argv[1][0] != '-' && !is_command) {
    fmt::print(stderr, "ingot: error: unknown command '{}' (the commands: {}; run 'ingot --help' for usage)\n", argv[1],
               known);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // Usage errors: one line in the same form as the other errors, exit code 2.
    fmt::print(stderr, "ingot: error: {} (run 'ingot --help' or 'ingot <command> --help' for usage)\n", e.what());
    return 2;
  }
  if (*launch_cmd) {
    try {
      ingot::cli::check_launch(launch);
    } catch (const ingot::Error& e) {  // launch's option errors are usage errors, as CLI11's
      fmt::print(stderr, "ingot: error: {}\n", e.what());
      return 2;
    }
  }
  try {
    if (*launch_cmd) return ingot::cli::run_launch(launch, std::cerr);
    if (*train_cmd) return ingot::cli::run_train(train, std::cout);
    if (*evaluate_cmd) return ingot::cli::run_evaluate(evaluate, std::cout);
    if (*predict_cmd) return ingot::cli::run_predict(predict, std::cout);
    if (*bench_cmd) return ingot::cli::run_bench(bench, std::cout);
    if (*demo_cmd) return ingot::cli::run_demo(demo, std::cout);
    if (*ops_cmd) {
      const auto& reg = ingot::ir::OpRegistry::builtin();
      for (const std::string& name : reg.names()) {
        fmt::print("{:<24} {}\n", name, reg.get(name).summary);
      }
      return 0;
    }
    if (*run_cmd) return ingot::cli::run_ir_file(ir_path, passes, seed, !print_only, std::cout);
    if (*cuda_info_cmd) {
      std::cout << ingot::format_cuda_info(
          ingot::cuda_info(ingot::CudaDriver::load(), ingot::cli::cuda_library_search(cuda_lib_dirs)));
      return 0;
    }
  } catch (const ingot::Error& e) {
    std::cout.flush();
    fmt::print(stderr, "ingot: error: {}\n", e.what());
    return ingot::cli::exit_status_for(e);  // 128 + the signal for a run stopped by SIGINT / SIGTERM
  } catch (const std::bad_alloc&) {
    std::cout.flush();
    fmt::print(stderr, "ingot: error: {}\n", out_of_host_memory(argc > 1 ? argv[1] : "").what());
    return 1;
  } catch (const std::exception& e) {
    std::cout.flush();
    fmt::print(stderr, "ingot: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
