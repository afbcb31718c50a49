// Fusion check: the MLP train step's MLIR after the `fuse` and `loops` stages of the default CPU
// pipeline, read back from the dumps. Each dense layer's bias add and relu (compare + select)
// must end up in one linalg.generic, and the number of kernels stays bounded.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "ingot/jit/jit.h"
#include "mlp_step.h"

namespace ingot {
namespace {

/// What the test needs to know about one linalg.generic of a printed module.
struct Generic {
  std::vector<std::string> ins;       ///< SSA names of the `ins(...)` operands
  int64_t loops = 0;                  ///< number of iterators
  std::vector<std::string> body_ops;  ///< op names in the region, e.g. "arith.addf"
  bool has(const std::string& op) const { return std::find(body_ops.begin(), body_ops.end(), op) != body_ops.end(); }
};

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The linalg.generic ops of printed MLIR (region found by brace depth; maps are printed as
/// #map aliases, so the only braces are the attribute dictionary and the region).
std::vector<Generic> parse_generics(const std::string& mlir) {
  std::vector<Generic> out;
  std::istringstream lines(mlir);
  std::string line;
  const std::regex op_name(R"(^\s*(?:%[\w:#, ]+=\s*)?([a-z_]+\.[a-z_.]+))");
  Generic* current = nullptr;
  int depth = 0;
  while (std::getline(lines, line)) {
    if (current == nullptr && line.find("linalg.generic") != std::string::npos) {
      out.emplace_back();
      current = &out.back();
      const std::string iterators = line.substr(line.find("iterator_types"));
      for (size_t p = iterators.find('"'); p != std::string::npos && p < iterators.find(']');
           p = iterators.find('"', p + 1)) {
        ++current->loops;
        p = iterators.find('"', p + 1);  // closing quote
      }
      const size_t ins = line.find(" ins(");
      if (ins != std::string::npos) {
        const std::string list = line.substr(ins + 5, line.find(" : ", ins) - ins - 5);
        std::istringstream names(list);
        for (std::string n; std::getline(names, n, ',');) current->ins.push_back(n.substr(n.find('%')));
      }
    } else if (current != nullptr) {
      std::smatch m;
      if (std::regex_search(line, m, op_name)) current->body_ops.push_back(m[1]);
    }
    if (current != nullptr) {
      for (char c : line) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
      if (depth == 0) current = nullptr;
    }
  }
  return out;
}

/// Loop nests (scf.for or scf.parallel) at the top level of the function body (printed at an
/// indentation of 4).
int64_t count_top_level_loops(const std::string& mlir) {
  std::istringstream lines(mlir);
  int64_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    n += line.rfind("    scf.for ", 0) == 0 || line.rfind("    scf.parallel ", 0) == 0 ? 1 : 0;
  }
  return n;
}

/// Path of the dump written after the default pipeline's stage `name`.
std::filesystem::path stage_dump(const std::filesystem::path& dir, const std::string& name) {
  const std::vector<codegen::PipelineStage> stages = codegen::default_cpu_pipeline();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].name == name) return dir / fmt::format("{:02}-{}.mlir", i + 1, name);
  }
  ADD_FAILURE() << "no stage '" << name << "' in the default pipeline";
  return {};
}

TEST(Fusion, MlpTrainStepFusesBiasAddAndReluIntoOneGenericPerLayer) {
  // Three dense layers (two with relu), the shape of the Fashion-MNIST benchmark at toy sizes.
  const testing::MlpSizes s{{12, 16, 8, 5}};
  const char* env = std::getenv("INGOT_DUMP_DIR");
  const std::filesystem::path dir = env != nullptr ? std::filesystem::path(env) / "fusion_check"
                                                   : std::filesystem::temp_directory_path() / "ingot_fusion_test";
  std::filesystem::remove_all(dir);
  JitOptions options{.name = "mlp_step"};
  options.compile.dump_dir = dir.string();
  Jitted step = jit(testing::mlp_train_step(s, 0.1), options);
  step(testing::concat_args(testing::mlp_weights(s, 1), testing::mlp_batch(s, 8, 2)));

  const std::vector<Generic> before = parse_generics(read_text(stage_dump(dir, "canonicalize")));
  const std::vector<Generic> fused = parse_generics(read_text(stage_dump(dir, "fuse")));
  const int64_t nests = count_top_level_loops(read_text(stage_dump(dir, "loops")));
  std::cout << fmt::format(
      "[ fusion ] MLP {} train step: {} linalg.generic before `fuse`, {} after; {} top-level "
      "loop nests after `loops`\n",
      fmt::join(s.widths, "-"), before.size(), fused.size(), nests);

  // Each hidden layer's bias b_l is argument 2l+1. Every 2-D generic that reads it (the forward
  // activation, and the backward pass's mask recomputed from it) must also hold the relu's
  // compare and select: no generic does the bias add alone.
  for (size_t l = 0; l + 1 < s.num_layers(); ++l) {
    const std::string bias = fmt::format("%arg{}", 2 * l + 1);
    int readers = 0;
    for (const Generic& g : fused) {
      if (g.loops != 2 || std::find(g.ins.begin(), g.ins.end(), bias) == g.ins.end()) continue;
      ++readers;
      EXPECT_TRUE(g.has("arith.addf") && g.has("arith.cmpf") && g.has("arith.select"))
          << "layer " << l << ": a generic reads " << bias
          << " without the relu: " << fmt::format("{}", fmt::join(g.body_ops, ", "));
    }
    EXPECT_GE(readers, 1) << "layer " << l << ": no generic adds the bias " << bias;
  }
  // Bounds from measurement (12-16-8-5, batch 8): 38 generics after `fuse` (90 before it, 47
  // with upstream's single-use fusion alone) and 42 loop nests after `loops` (the generics minus
  // the 0-d one, plus the linalg.fill of each matmul's accumulator). About 10% slack absorbs
  // small lowering changes; more means a fusion regressed.
  EXPECT_LE(static_cast<int64_t>(fused.size()), 42);
  EXPECT_GE(nests, 1);
  EXPECT_LE(nests, 46);
  // No stack allocation survives into LLVM except the three memref descriptors passed by pointer
  // to each BLAS GEMM call (outside any loop): vector-to-scf's temporary buffers used to land as
  // allocas inside loops (stack growth per iteration; a full-size MLP overflowed the stack).
  const std::string llvm_dialect = read_text(stage_dump(dir, "lower-to-llvm"));
  auto count = [&](const std::string& needle) {
    int64_t n = 0;
    for (size_t p = llvm_dialect.find(needle); p != std::string::npos; p = llvm_dialect.find(needle, p + 1)) ++n;
    return n;
  };
  EXPECT_LE(count("llvm.alloca"), 3 * count("llvm.call @_mlir_ciface_ingot_cpu_gemm"));
  if (env == nullptr) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ingot
