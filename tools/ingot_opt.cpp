// `ingot-opt`: runs graph passes, the lowering to MLIR and stages of the CPU pipeline on one file
// and prints the result (mlir-opt's role for ingot; see docs/compiler.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>

#include "demo.h"
#include "ingot/codegen/cpu_compiler.h"
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/ir/text.h"
#include "ingot/lower/lowering.h"

namespace ingot::cli {
namespace {

/// The command line of ingot-opt.
struct OptOptions {
  std::string file;
  std::vector<std::string> passes;                      ///< graph passes (dce, cse), .ir input only
  bool lower = false;                                   ///< print the MLIR of a graph
  std::vector<std::string> pipeline;                    ///< stage names of default_cpu_pipeline()
  std::string mlir_pipeline;                            ///< an arbitrary MLIR pass pipeline
  std::string until;                                    ///< run the default pipeline up to this stage
  std::string dump_dir;                                 ///< dump the MLIR after every stage here
  int threads = 0;                                      ///< num_threads of default_cpu_pipeline() (0: all)
  std::string target = "cpu";                           ///< "cuda": compile a graph for NVIDIA GPUs and print the plan
  std::vector<std::string> archs = {"sm_80", "sm_90"};  ///< --target cuda: PTX architectures
  bool cublas = false;                                  ///< --target cuda: f32/f64 matrix products as cuBLAS calls
};

enum class InputKind { kGraph, kMlir };

InputKind kind_of(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".ir") return InputKind::kGraph;
  if (ext == ".mlir") return InputKind::kMlir;
  throw Error(ErrorCode::kInvalidArgument, fmt::format("'{}': unknown extension '{}'", path, ext),
              "pass a graph IR file (.ir, docs/ir.md) or an MLIR file (.mlir)");
}

std::string read_input(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("'{}' is not a regular file{}", path,
                            std::filesystem::is_directory(path, ec) ? " (it is a directory)" : ""),
                "pass the path of a .ir or .mlir file");
  }
  std::ifstream in(path);
  if (!in) {
    throw Error(ErrorCode::kNotFound, fmt::format("cannot open '{}'", path), "check the path and its permissions");
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string stage_names() {
  std::vector<std::string> names;
  for (const codegen::PipelineStage& s : codegen::default_cpu_pipeline(1)) names.push_back(s.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

codegen::PipelineStage default_stage(const std::string& name, int threads) {
  for (const codegen::PipelineStage& s : codegen::default_cpu_pipeline(threads)) {
    if (s.name == name) return s;
  }
  throw Error(ErrorCode::kNotFound, fmt::format("unknown pipeline stage '{}'", name),
              fmt::format("stages of the default CPU pipeline: {}", stage_names()));
}

/// Strips a `builtin.module(...)` wrapper (what mlir-opt's --pass-pipeline takes): stages are
/// anchored on the module already, and a nested builtin.module would silently match nothing.
std::string unwrap_module(std::string text) {
  const std::string prefix = "builtin.module(";
  if (text.rfind(prefix, 0) == 0 && !text.empty() && text.back() == ')') {
    return text.substr(prefix.size(), text.size() - prefix.size() - 1);
  }
  return text;
}

/// The stages the options ask for (at most one of --pipeline, --mlir-pipeline, --until).
std::vector<codegen::PipelineStage> selected_stages(const OptOptions& o) {
  std::vector<codegen::PipelineStage> stages;
  for (const std::string& name : o.pipeline) stages.push_back(default_stage(name, o.threads));
  if (!o.mlir_pipeline.empty()) stages.push_back({"mlir-pipeline", unwrap_module(o.mlir_pipeline)});
  if (!o.until.empty()) {
    default_stage(o.until, o.threads);  // a clear error for an unknown name
    for (const codegen::PipelineStage& s : codegen::default_cpu_pipeline(o.threads)) {
      stages.push_back(s);
      if (s.name == o.until) break;
    }
  }
  return stages;
}

void write_dump(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  if (!out || !(out << text)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("cannot write '{}'", path.string()),
                "check that the --dump-dir directory is writable");
  }
}

/// Runs `stages` on `mlir`, one at a time when dumping (00-input.mlir, then <NN>-<stage>.mlir,
/// numbered as the CPU compiler numbers its dumps).
std::string run_stages(const std::string& mlir, const std::vector<codegen::PipelineStage>& stages,
                       const std::string& dump_dir) {
  if (dump_dir.empty()) return codegen::run_pipeline(mlir, stages);
  std::error_code ec;
  std::filesystem::create_directories(dump_dir, ec);
  if (ec || !std::filesystem::is_directory(dump_dir)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot create the --dump-dir directory '{}': {}", dump_dir,
                            ec ? ec.message() : "a file of that name exists"),
                "choose a writable directory for the dumps");
  }
  write_dump(std::filesystem::path(dump_dir) / "00-input.mlir", mlir);
  std::string text = mlir;
  for (size_t i = 0; i < stages.size(); ++i) {
    text = codegen::run_pipeline(text, {stages[i]});
    write_dump(std::filesystem::path(dump_dir) / fmt::format("{:02}-{}.mlir", i + 1, stages[i].name), text);
  }
  return text;
}

void check_combination(const OptOptions& o, InputKind kind) {
  if (kind == InputKind::kMlir && !o.passes.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--passes {} applies to graph IR, but '{}' is MLIR", fmt::join(o.passes, ","), o.file),
                "use --mlir-pipeline for MLIR passes");
  }
  if (kind == InputKind::kMlir && o.lower) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--lower needs graph IR, but '{}' is MLIR", o.file),
                "pass a .ir file, or drop --lower");
  }
}

/// --target cuda: the graph through the CUDA code generator; prints the plan (buffers, thunks);
/// the dumps directory receives every stage's MLIR and each kernel's PTX per arch.
int run_cuda(const OptOptions& o, InputKind kind, std::ostream& out) {
  if (kind == InputKind::kMlir && !o.mlir_pipeline.empty() && o.pipeline.empty() && o.until.empty() && !o.lower &&
      o.dump_dir.empty()) {
    // One MLIR pipeline in the CUDA back end's context (its passes and the GPU dialects).
    out << codegen::run_cuda_pipeline(read_input(o.file), {{"mlir-pipeline", unwrap_module(o.mlir_pipeline)}});
    return 0;
  }
  if (kind != InputKind::kGraph) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--target cuda needs graph IR, or MLIR with --mlir-pipeline, but '{}' is MLIR", o.file),
                "pass a .ir file, or an MLIR pass pipeline to run on the .mlir file");
  }
  if (!o.pipeline.empty() || !o.mlir_pipeline.empty() || !o.until.empty() || o.lower) {
    throw Error(ErrorCode::kInvalidArgument, "--target cuda runs the whole CUDA pipeline",
                "drop --pipeline, --mlir-pipeline, --until and --lower (use --dump-dir to see every stage)");
  }
  ir::Graph graph;
  try {
    graph = apply_passes(ir::parse_graph(read_input(o.file)), o.passes);
  } catch (const Error& e) {
    throw e.with_context(o.file);
  }
  const lower::LoweredModule m = lower::lower_graph(graph, "main", {},
                                                    lower::LoweringOptions{.blas_gemm = o.cublas,
                                                                           .gemm_function = "ingot_cuda_gemm",
                                                                           .library_conv = true,
                                                                           .library_conv_min_k = 0,
                                                                           .conv_function = "ingot_cuda_conv",
                                                                           .share_repeated_scopes = false});
  std::vector<std::pair<Shape, DType>> in, res;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) res.emplace_back(t.shape, t.dtype);
  const CudaProgram p = codegen::compile_cuda(m.text, "main", in, res, {.archs = o.archs, .dump_dir = o.dump_dir});
  out << p.describe();
  out << fmt::format("{} kernels, {} launches, {} cuBLAS calls; PTX for {}\n", p.kernels.size(), p.launches().size(),
                     p.gemm_count(), fmt::join(o.archs, ", "));
  return 0;
}

int run_opt(const OptOptions& o, std::ostream& out) {
  const InputKind kind = kind_of(o.file);
  if (o.target == "cuda") return run_cuda(o, kind, out);
  check_combination(o, kind);
  const std::string text = read_input(o.file);
  const std::vector<codegen::PipelineStage> stages = selected_stages(o);
  std::string mlir;
  if (kind == InputKind::kGraph) {
    ir::Graph graph;
    try {
      graph = apply_passes(ir::parse_graph(text), o.passes);
    } catch (const Error& e) {
      throw e.with_context(o.file);
    }
    if (!o.lower && stages.empty() && o.dump_dir.empty()) {
      out << ir::print_graph(graph);
      return 0;
    }
    mlir = lower::lower_to_mlir(graph, "main");
  } else {
    mlir = text;
  }
  out << run_stages(mlir, stages, o.dump_dir);
  return 0;
}

}  // namespace
}  // namespace ingot::cli

int main(int argc, char** argv) {
  CLI::App app{
      "ingot-opt: graph passes, lowering to MLIR and CPU pipeline stages on one file; prints the "
      "result (see docs/compiler.md)"};
  ingot::cli::OptOptions o;
  app.add_option("file", o.file, "graph IR (.ir, docs/ir.md) or MLIR (.mlir) file")->required();
  app.add_option("--passes", o.passes, "graph passes in order: dce, cse (.ir only)")->delimiter(',');
  app.add_flag("--lower", o.lower, "print the graph lowered to MLIR (tensor level)");
  CLI::Option* pipeline =
      app.add_option("--pipeline", o.pipeline, "run these stages of the default CPU pipeline, in order")
          ->delimiter(',');
  CLI::Option* mlir_pipeline =
      app.add_option("--mlir-pipeline", o.mlir_pipeline, "run an MLIR pass pipeline, e.g. 'func.func(canonicalize)'");
  CLI::Option* until = app.add_option("--until", o.until, "run the default CPU pipeline up to and including STAGE");
  pipeline->excludes(mlir_pipeline)->excludes(until);
  mlir_pipeline->excludes(until);
  app.add_option("--dump-dir", o.dump_dir, "write the MLIR before and after every stage to DIR");
  app.add_option("--threads", o.threads,
                 "threads of the default pipeline's parallel loops (0: all hardware threads, 1: serial)")
      ->check(CLI::Range(0, ingot::codegen::kMaxThreads));
  app.add_option(
         "--target", o.target,
         "cpu (default): the options above; cuda: compile a .ir graph for NVIDIA GPUs and print the plan, or run "
         "--mlir-pipeline on a .mlir file with the CUDA back end's passes "
         "(buffers, kernel launches, cuBLAS calls; PTX per arch in --dump-dir)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--arch", o.archs, "--target cuda: PTX architectures (default sm_80,sm_90)")->delimiter(',');
  app.add_flag("--cublas", o.cublas,
               "--target cuda: f32/f64 matrix products as cuBLAS calls (default: generated kernels)");
  // --mlir-pipeline may name any upstream pass, not only those of ingot's pipelines.
  ingot::codegen::register_all_mlir_passes();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "ingot-opt: error: {} (see --help)\n", e.what());
    return 1;
  }
  try {
    return ingot::cli::run_opt(o, std::cout);
  } catch (const ingot::Error& e) {
    fmt::print(stderr, "ingot-opt: error: {}\n", e.what());
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "ingot-opt: error: out of host memory\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "ingot-opt: error: {}\n", e.what());
  }
  return 1;
}
