#include "demo.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <type_traits>
#include <ostream>
#include <random>
#include <sstream>

#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/ir/passes.h"
#include "ingot/ir/text.h"
#include "ingot/runtime/element.h"
#include "ingot/trace/ops.h"

namespace ingot::cli {

std::vector<Array> random_arguments(const ir::Graph& graph, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<Array> args;
  for (ir::ValueId p : graph.parameters()) {
    const ir::TensorType& t = graph.type(p);
    // Allocate first (a clear OutOfMemory error for huge shapes), then fill in place.
    Array a = Array::empty(t.shape, t.dtype);
    const int64_t n = a.size();
    dispatch_dtype(t.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* data = a.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, uint64_t>) {
          data[i] = rng();  // e.g. rng_bit_generator states
        } else if constexpr (std::is_same_v<T, bool>) {
          data[i] = i % 2 == 1;
        } else if constexpr (std::is_integral_v<T>) {
          data[i] = static_cast<T>(rng() % 10);
        } else {
          data[i] = convert_element<T>(uniform(rng));
        }
      }
    });
    args.push_back(a);
  }
  return args;
}

ir::Graph apply_passes(const ir::Graph& graph, const std::vector<std::string>& passes) {
  ir::Graph g = graph;
  for (const std::string& p : passes) {
    if (p == "dce") {
      g = ir::eliminate_dead_code(g);
    } else if (p == "cse") {
      g = ir::eliminate_common_subexpressions(g);
    } else {
      throw Error(ErrorCode::kNotFound, fmt::format("unknown pass '{}'", p), "known passes: dce, cse (see docs/ir.md)");
    }
  }
  return g;
}

namespace {

void check_demo_options(const DemoOptions& o) {
  auto positive = [](const char* name, int64_t v) {
    if (v <= 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("--{} = {} must be positive", name, v),
                  fmt::format("pass --{} 1 or more", name));
    }
  };
  positive("batch", o.batch);
  positive("features", o.features);
  positive("hidden", o.hidden);
  positive("classes", o.classes);
}

}  // namespace

int run_demo(const DemoOptions& o, std::ostream& out) {
  check_demo_options(o);
  // Parameters: x (batch, features), w1 (features, hidden), b1 (hidden,), w2 (hidden, classes),
  // b2 (classes,); the traced function is the forward pass of a two-layer MLP.
  ir::Graph graph = trace(
      [](const std::vector<Tensor>& in) {
        Tensor h = relu(matmul(in[0], in[1]) + in[2]);  // (batch, hidden)
        Tensor logits = matmul(h, in[3]) + in[4];       // (batch, classes)
        return std::vector<Tensor>{softmax(logits, -1)};
      },
      {ir::TensorType{{o.batch, o.features}, DType::kF32}, ir::TensorType{{o.features, o.hidden}, DType::kF32},
       ir::TensorType{{o.hidden}, DType::kF32}, ir::TensorType{{o.hidden, o.classes}, DType::kF32},
       ir::TensorType{{o.classes}, DType::kF32}},
      "mlp_forward");

  fmt::print(out, "== traced IR ({} nodes)\n{}\n", graph.num_nodes(), ir::print_graph(graph));
  ir::Graph optimised = apply_passes(graph, {"cse", "dce"});
  fmt::print(out, "== after cse, dce ({} nodes)\n{}\n", optimised.num_nodes(), ir::print_graph(optimised));

  std::vector<Array> args = random_arguments(optimised, o.seed);
  // Scale the weights to Glorot-uniform limits sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio,
  // 2010) so the probabilities stay informative at realistic widths.
  auto glorot = [](Array& w) {
    const double limit = std::sqrt(6.0 / static_cast<double>(w.shape()[0] + w.shape()[1]));
    float* p = w.data<float>();
    for (int64_t i = 0; i < w.size(); ++i) p[i] = static_cast<float>(p[i] * limit);
  };
  glorot(args[1]);
  glorot(args[3]);
  fmt::print(out, "== input x {} (weights: seeded Glorot-uniform)\n{}\n\n", shape_to_string(args[0].shape()),
             args[0].to_string());
  const auto t0 = std::chrono::steady_clock::now();
  Array probs = interp::interpret(optimised, args).at(0);
  const auto t1 = std::chrono::steady_clock::now();
  fmt::print(out, "== softmax probabilities {} (reference interpreter)\n{}\n\n", shape_to_string(probs.shape()),
             probs.to_string());

  // The same graph compiled: lowered to MLIR, fused, turned into loops (LLVM vectorises them) and
  // JIT-compiled for this CPU.
  codegen::CpuCompileOptions compile_options;
  if (const char* dir = std::getenv("INGOT_DUMP_DIR"); dir != nullptr) {
    compile_options.dump_dir = std::string(dir) + "/demo";  // the documented debug switch
  }
  std::shared_ptr<const Executable> exe = compile_graph(optimised, compile_options);
  const auto t2 = std::chrono::steady_clock::now();
  Array compiled = exe->run(args).at(0);
  const auto t3 = std::chrono::steady_clock::now();
  exe->run(args);  // the first run includes one-time library set-up (oneDNN's JIT kernels)
  const auto t4 = std::chrono::steady_clock::now();
  std::vector<float> a = probs.to_vector<float>(), b = compiled.to_vector<float>();
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(double(a[i]) - b[i]));
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  fmt::print(out,
             "== compiled for the CPU (MLIR -> LLVM JIT): compile {:.1f} ms, first run {:.3f} ms "
             "(one-time library set-up included), second run {:.3f} ms (interpreter {:.3f} ms); "
             "max |compiled - interpreter| = {:.2e}\n\n",
             ms(t2 - t1), ms(t3 - t2), ms(t4 - t3), ms(t1 - t0), max_diff);
  std::vector<float> p = probs.to_vector<float>();
  std::vector<double> sums(static_cast<size_t>(o.batch), 0.0);
  for (int64_t r = 0; r < o.batch; ++r) {
    for (int64_t c = 0; c < o.classes; ++c) sums[r] += p[static_cast<size_t>(r * o.classes + c)];
  }
  if (sums.size() > 8) sums.resize(8);
  fmt::print(out, "row sums{}: [{:.6f}]\n", o.batch > 8 ? " (first 8 rows)" : "", fmt::join(sums, ", "));
  return 0;
}

int run_ir_file(const std::string& path, const std::vector<std::string>& passes, uint64_t seed, bool interpret,
                std::ostream& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("'{}' is not a regular file{}", path,
                            std::filesystem::is_directory(path, ec) ? " (it is a directory)" : ""),
                "pass the path of an IR text file (format: docs/ir.md)");
  }
  std::ifstream file(path);
  if (!file) {
    throw Error(ErrorCode::kNotFound, fmt::format("cannot open IR file '{}'", path),
                "check the path and its permissions");
  }
  std::stringstream text;
  text << file.rdbuf();
  ir::Graph parsed;
  try {
    parsed = ir::parse_graph(text.str());
  } catch (const Error& e) {
    throw e.with_context(path);
  }
  ir::Graph graph = apply_passes(parsed, passes);
  fmt::print(out, "{}\n", ir::print_graph(graph));
  if (!interpret) return 0;
  std::vector<Array> args = random_arguments(graph, seed);
  for (size_t i = 0; i < args.size(); ++i) {
    fmt::print(out, "argument {} {} {}:\n{}\n", i, dtype_name(args[i].dtype()), shape_to_string(args[i].shape()),
               args[i].to_string());
  }
  std::vector<Array> results = interp::interpret(graph, args);
  for (size_t i = 0; i < results.size(); ++i) {
    fmt::print(out, "result {} {} {}:\n{}\n", i, dtype_name(results[i].dtype()), shape_to_string(results[i].shape()),
               results[i].to_string());
  }
  return 0;
}

}  // namespace ingot::cli
