// Kernel outlining, dedupe and parallel code generation (docs/compiler.md, "Kernel outlining and
// dedupe"): the same results, bit for bit, as one function compiled serially; identical blocks
// compile their kernels once.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "mlp_step.h"
#include "parity.h"
#include "test_util.h"

namespace ingot {
namespace {

/// Options with the compilation cache off (these tests measure compiles, not the cache).
codegen::CpuCompileOptions uncached(bool outline, int codegen_threads) {
  codegen::CpuCompileOptions o;
  o.outline_kernels = outline;
  o.codegen_threads = codegen_threads;
  o.compile_cache_dir = "";
  return o;
}

void expect_bitwise(const std::vector<Array>& a, const std::vector<Array>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << what << " output " << i;
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << what << " output " << i;
    ASSERT_EQ(a[i].nbytes(), b[i].nbytes());
    EXPECT_EQ(0, std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].nbytes())) << what << " output " << i;
  }
}

/// The MLP train step (value_and_grad + SGD) on a batch of 64.
struct MlpCase {
  testing::MlpSizes sizes{{20, 32, 32, 7}};
  ir::Graph graph = trace(testing::mlp_train_step(sizes, 0.1), testing::mlp_step_types(sizes, 64), "mlp_step");
  std::vector<Array> args() const {
    std::vector<Array> a = testing::mlp_weights(sizes, 3);
    a.push_back(testing::random_array(Shape{64, 20}, DType::kF32, 11));
    std::vector<int32_t> labels(64);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 5) % 7);
    a.push_back(Array::from_vector<int32_t>(labels, Shape{64}));
    return a;
  }
};

TEST(OutlineKernels, TrainStepIsBitwiseTheSameAsOneFunctionCompiledSerially) {
  const MlpCase mlp;
  const std::vector<Array> args = mlp.args();
  const std::vector<Array> whole = compile_graph(mlp.graph, uncached(false, 1))->run(args);
  const std::vector<Array> outlined_serial = compile_graph(mlp.graph, uncached(true, 1))->run(args);
  const std::vector<Array> outlined_parallel = compile_graph(mlp.graph, uncached(true, 2))->run(args);
  expect_bitwise(whole, outlined_serial, "outlined, 1 codegen thread");
  expect_bitwise(whole, outlined_parallel, "outlined, 2 codegen threads");
}

TEST(OutlineKernels, ReportsDistinctKernelsAndKeepsTheKernelCount) {
  const MlpCase mlp;
  const codegen::CpuCompileOptions w = uncached(false, 1), o = uncached(true, 0);
  const auto whole = compile_graph(mlp.graph, w);
  const auto outlined = compile_graph(mlp.graph, o);
  // Outlining moves loop nests into functions; the work per step is the same.
  EXPECT_EQ(outlined->kernel_count(), whole->kernel_count());
  EXPECT_GT(outlined->kernel_count(), 0);
}

/// x (batch, width) through `blocks` identical blocks tanh(h @ w_i + b_i) and a squared-norm
/// loss; returns the loss and its gradients with respect to every w_i, b_i.
TraceFn blocks_step(int blocks) {
  return [blocks](const std::vector<Tensor>& a) {
    auto loss = [blocks](const std::vector<Tensor>& p) {
      Tensor h = p[static_cast<size_t>(2 * blocks)];
      for (int i = 0; i < blocks; ++i)
        h = tanh(matmul(h, p[static_cast<size_t>(2 * i)]) + p[static_cast<size_t>(2 * i + 1)]);
      return std::vector<Tensor>{sum(h * h)};
    };
    std::vector<int64_t> argnums;
    for (int i = 0; i < 2 * blocks; ++i) argnums.push_back(i);
    return value_and_grad(loss, argnums)(a);
  };
}

ir::Graph blocks_graph(int blocks) {
  std::vector<ir::TensorType> types;
  for (int i = 0; i < blocks; ++i) {
    types.push_back({{16, 16}, DType::kF32});
    types.push_back({{16}, DType::kF32});
  }
  types.push_back({{8, 16}, DType::kF32});
  return trace(blocks_step(blocks), types, "blocks");
}

std::vector<Array> blocks_args(int blocks) {
  std::vector<Array> a;
  for (int i = 0; i < blocks; ++i) {
    a.push_back(testing::random_array(Shape{16, 16}, DType::kF32, static_cast<uint64_t>(100 + i), -0.3, 0.3));
    a.push_back(testing::random_array(Shape{16}, DType::kF32, static_cast<uint64_t>(200 + i), -0.1, 0.1));
  }
  a.push_back(testing::random_array(Shape{8, 16}, DType::kF32, 7));
  return a;
}

TEST(OutlineKernels, IdenticalBlocksCompileTheirKernelsOnce) {
  const auto two = compile_graph(blocks_graph(2), uncached(true, 0));
  const auto six = compile_graph(blocks_graph(6), uncached(true, 0));
  // Three times the blocks: more kernels per step, the same distinct kernel functions.
  EXPECT_GT(six->kernel_count(), two->kernel_count());
  EXPECT_EQ(six->compile_info().kernel_functions, two->compile_info().kernel_functions);
  EXPECT_LT(six->compile_info().kernel_functions, six->kernel_count());
}

TEST(OutlineKernels, DeduplicatedBlocksComputeWhatTheInterpreterComputes) {
  const ir::Graph graph = blocks_graph(4);
  const std::vector<Array> args = blocks_args(4);
  const std::vector<Array> got = compile_graph(graph, uncached(true, 2))->run(args);
  const std::vector<Array> whole = compile_graph(graph, uncached(false, 1))->run(args);
  expect_bitwise(got, whole, "deduplicated vs one function");
  const std::vector<Array> want = interp::interpret(graph, args);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) testing::expect_values(got[i], want[i].to_doubles(), 1e-4);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(OutlineKernels, ProgressCountsEveryObjectCompiled) {
  const MlpCase mlp;
  codegen::CpuCompileOptions o = uncached(true, 2);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> calls;
  o.progress = [&](int64_t done, int64_t total) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.emplace_back(done, total);
  };
  const auto exe = compile_graph(mlp.graph, o);
  const CompileInfo info = exe->compile_info();
  ASSERT_EQ(static_cast<int64_t>(calls.size()), info.cache_misses);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].first, static_cast<int64_t>(i + 1));
    EXPECT_EQ(calls[i].second, info.cache_misses);
  }
  EXPECT_EQ(info.objects, info.kernel_functions + 1) << "one object per kernel function and the host's";
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(OutlineKernels, PerKernelLoweringGivesWhatTheWholeModuleLoweringGives) {
  // Without dumps the stages after `outline` run on each kernel's own module in parallel
  // (split_mlir_module); with dumps on the whole module serially. Same code, same bits.
  const MlpCase mlp;
  const std::vector<Array> args = mlp.args();
  codegen::CpuCompileOptions whole = uncached(true, 1);
  const auto dir = std::filesystem::temp_directory_path() / "ingot_outline_test_whole_module";
  std::filesystem::remove_all(dir);
  whole.dump_dir = dir.string();
  const auto serial = compile_graph(mlp.graph, whole);
  const auto split = compile_graph(mlp.graph, uncached(true, 2));
  std::filesystem::remove_all(dir);
  expect_bitwise(serial->run(args), split->run(args), "per-kernel modules vs the whole module");
  EXPECT_EQ(split->kernel_count(), serial->kernel_count());
  EXPECT_EQ(split->compile_info().kernel_functions, serial->compile_info().kernel_functions);
  EXPECT_EQ(split->compile_info().objects, serial->compile_info().objects);
}

/// A function with a static loop nest and one over a dynamically sized buffer.
constexpr const char* kTwoNests = R"mlir(
func.func @f(%a: memref<8xf32>, %b: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %one, %a[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %n step %c1 {
    memref.store %one, %b[%i] : memref<?xf32>
  }
  return
}
)mlir";

TEST(OutlineKernels, KernelsOfStaticBuffersTakeBarePointers) {
  const std::string out = codegen::run_pipeline(kTwoNests, {{"outline", "ingot-outline-kernels"}});
  // Two kernels; only the static one is called with bare pointers (llvm.bareptr).
  size_t kernels = 0, bare = 0;
  for (size_t at = out.find("func.func @ingot_k_"); at != std::string::npos;
       at = out.find("func.func @ingot_k_", at + 1)) {
    const std::string line = out.substr(at, out.find('\n', at) - at);
    ++kernels;
    if (line.find("llvm.bareptr") != std::string::npos) {
      ++bare;
      EXPECT_NE(line.find("memref<8xf32>"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(kernels, 2u) << out;
  EXPECT_EQ(bare, 1u) << out;
  // Lowered to LLVM, the static kernel's buffer is one pointer: @f's call passes it alone.
  const std::string llvm = codegen::run_pipeline(
      kTwoNests, {{"outline", "ingot-outline-kernels"},
                  {"lower", "convert-scf-to-cf,expand-strided-metadata,convert-to-llvm,reconcile-unrealized-casts"}});
  EXPECT_NE(llvm.find("(!llvm.ptr) -> ()"), std::string::npos) << llvm;
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

/// Compiles buffer-level `text` (entry `main`, one f32 input and output of shape {4}) with the
/// default stages from `outline` on, on the split path and on the whole-module path (dumps), runs
/// both on `input` and returns their outputs with the split compile's report and kernel counts.
struct BothPaths {
  std::vector<float> split, whole;
  codegen::CpuCompileReport split_report;
  codegen::CpuKernelStats split_stats;
};
BothPaths compile_both_paths(const char* text, const std::vector<float>& input, const std::string& tag) {
  std::vector<codegen::PipelineStage> stages;
  for (const codegen::PipelineStage& stage : codegen::default_cpu_pipeline(1)) {
    if (stage.name == "outline" || !stages.empty()) stages.push_back(stage);
  }
  const auto dir = std::filesystem::temp_directory_path() / ("ingot_outline_test_" + tag);
  std::filesystem::remove_all(dir);
  BothPaths r;
  for (const std::string& dump : {std::string(), dir.string()}) {
    codegen::CpuCompileOptions o = uncached(true, 2);
    o.pipeline = stages;
    o.dump_dir = dump;
    auto kernel = codegen::compile_cpu(text, "main", {{{4}, DType::kF32}}, {{{4}, DType::kF32}}, o);
    std::vector<Array> in = {Array::from_vector<float>(input, {4})};
    std::vector<Array> out = {Array::full({4}, -1, DType::kF32)};
    kernel->run(in, out);
    (dump.empty() ? r.split : r.whole) = out[0].to_vector<float>();
    if (dump.empty()) {
      r.split_report = kernel->report();
      r.split_stats = kernel->stats();
    }
  }
  std::filesystem::remove_all(dir);
  return r;
}

/// An entry whose loop nest reads a public constant and calls a public helper: the kernel's part
/// gets private copies of both, the host part keeps the public definitions.
constexpr const char* kPublicSymbols = R"mlir(
module {
  memref.global constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  func.func @helper(%x: f32) -> f32 {
    %two = arith.constant 2.0 : f32
    %y = arith.mulf %x, %two : f32
    return %y : f32
  }
  func.func @main(%in: memref<4xf32>, %out: memref<4xf32>) attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {
      %t = memref.get_global @table : memref<4xf32>
      %a = memref.load %t[%i] : memref<4xf32>
      %b = memref.load %in[%i] : memref<4xf32>
      %s = arith.addf %a, %b : f32
      %h = func.call @helper(%s) : (f32) -> f32
      memref.store %h, %out[%i] : memref<4xf32>
    }
    return
  }
}
)mlir";

TEST(OutlineKernels, KernelsUsingPublicSymbolsLinkOnBothPaths) {
  const BothPaths r = compile_both_paths(kPublicSymbols, {10, 20, 30, 40}, "public_symbols");
  EXPECT_EQ(r.split, (std::vector<float>{22, 44, 66, 88}));
  EXPECT_EQ(r.whole, (std::vector<float>{22, 44, 66, 88}));
  EXPECT_EQ(r.split_stats.kernel_functions, 1);
  EXPECT_EQ(r.split_report.objects, 2) << "the host part and the kernel's";
}

/// State in a global that is not constant: the entry writes it, a kernel reads it.
constexpr const char* kSharedState = R"mlir(
module {
  memref.global "private" @state : memref<4xf32> = uninitialized
  func.func @main(%in: memref<4xf32>, %out: memref<4xf32>) attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %g = memref.get_global @state : memref<4xf32>
    memref.copy %in, %g : memref<4xf32> to memref<4xf32>
    scf.for %i = %c0 to %c4 step %c1 {
      %s = memref.get_global @state : memref<4xf32>
      %v = memref.load %s[%i] : memref<4xf32>
      memref.store %v, %out[%i] : memref<4xf32>
    }
    return
  }
}
)mlir";

TEST(OutlineKernels, AGlobalThatIsNotConstantIsSharedByTheEntryAndItsKernels) {
  const BothPaths r = compile_both_paths(kSharedState, {1, 2, 3, 4}, "shared_state");
  EXPECT_EQ(r.split, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(r.whole, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(r.split_report.objects, 1) << "kept whole";
}

TEST(OutlineKernels, AStageFailingAfterOutlineNamesThePart) {
  // lower-to-llvm without scf-to-cf leaves the kernel's scf.for: the error names the part.
  codegen::CpuCompileOptions o = uncached(true, 1);
  o.pipeline = {{"outline", "ingot-outline-kernels"}, {"lower-to-llvm", "convert-to-llvm,reconcile-unrealized-casts"}};
  testing::expect_error(
      [&] { codegen::compile_cpu(kPublicSymbols, "main", {{{4}, DType::kF32}}, {{{4}, DType::kF32}}, o); },
      ErrorCode::kInvalidArgument, {"in the part 'ingot_k_", "split after 'outline'", "unconverted"});
}

}  // namespace
}  // namespace ingot
