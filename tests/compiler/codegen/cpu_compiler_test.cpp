// The CPU back end on hand-written MLIR: pipeline, JIT, calling convention, dumps, errors.
#include "ingot/codegen/cpu_compiler.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "test_util.h"

namespace ingot::codegen {
namespace {

const char* kAddBias = R"(
#map = affine_map<(d0, d1) -> (d0, d1)>
#bmap = affine_map<(d0, d1) -> (d1)>
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    attributes {llvm.emit_c_interface} {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #bmap, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r, %b : tensor<4x8xf32>, tensor<8xf32>
}
)";

TEST(CpuCompiler, JitsAndRunsAFunctionWithOutParams) {
  auto kernel = compile_cpu(kAddBias, "main", {{{4, 8}, DType::kF32}, {{8}, DType::kF32}},
                            {{{4, 8}, DType::kF32}, {{8}, DType::kF32}});
  std::vector<float> a(32), b(8);
  for (int i = 0; i < 32; ++i) a[i] = static_cast<float>(i);
  for (int i = 0; i < 8; ++i) b[i] = 100.0f * static_cast<float>(i);
  std::vector<Array> in = {Array::from_vector<float>(a, {4, 8}), Array::from_vector<float>(b, {8})};
  std::vector<Array> out = {Array::full({4, 8}, -1, DType::kF32), Array::full({8}, -1, DType::kF32)};
  kernel->run(in, out);
  std::vector<float> r = out[0].to_vector<float>();
  for (int i = 0; i < 32; ++i) EXPECT_EQ(r[i], a[i] + b[i % 8]);
  EXPECT_EQ(out[1].to_vector<float>(), b);
}

TEST(CpuCompiler, TheSharedTensorStagesWithResultsInArgumentBuffersKeepThoseResultsInPlace) {
  // default_tensor_stages (pipeline.h): the CUDA form returns every result as a distinct
  // out-param; the CPU form (CpuKernel::run may write results into argument buffers) drops the
  // result that is argument %b and records it in ingot.result_arguments.
  const std::vector<PipelineStage> shared = default_tensor_stages();
  const std::vector<PipelineStage> in_place = default_tensor_stages({.results_in_argument_buffers = true});
  ASSERT_EQ(shared.size(), in_place.size());
  for (size_t i = 0; i < shared.size(); ++i) EXPECT_EQ(shared[i].name, in_place[i].name);
  const std::string distinct = run_pipeline(kAddBias, shared);
  EXPECT_EQ(distinct.find("ingot.result_arguments"), std::string::npos) << distinct;
  EXPECT_NE(distinct.find("%arg2: memref<4x8xf32>, %arg3: memref<8xf32>"), std::string::npos) << distinct;
  const std::string kept = run_pipeline(kAddBias, in_place);
  EXPECT_NE(kept.find("ingot.result_arguments = array<i64: -1, 1>"), std::string::npos) << kept;
  // The CPU pipeline starts with exactly the in-place form.
  const std::vector<PipelineStage> cpu = default_cpu_pipeline();
  for (size_t i = 0; i < in_place.size(); ++i) EXPECT_EQ(cpu[i].pipeline, in_place[i].pipeline) << cpu[i].name;
}

TEST(CpuCompiler, AResultThatIsAnArgumentIsItsBufferNotAnOutParam) {
  // ingot-drop-argument-results: kAddBias returns its argument %b, which becomes no out-param
  // (and no guarded copy); the pairing is the entry's ingot.result_arguments.
  std::vector<PipelineStage> stages = default_cpu_pipeline();
  while (!stages.empty() && stages.back().name != "bufferize") stages.pop_back();
  const std::string ir = run_pipeline(kAddBias, stages);
  EXPECT_NE(ir.find("ingot.result_arguments = array<i64: -1, 1>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("func.func @main(%arg0: memref<4x8xf32>, %arg1: memref<8xf32>, %arg2: memref<4x8xf32>)"),
            std::string::npos)
      << ir;
  EXPECT_EQ(ir.find("scf.if"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("memref.copy"), std::string::npos) << ir;
  // Run with the argument's own array as that output (as Executable passes a donated parameter):
  // nothing moves; with another array (JitsAndRunsAFunctionWithOutParams) it receives a copy.
  auto kernel = compile_cpu(kAddBias, "main", {{{4, 8}, DType::kF32}, {{8}, DType::kF32}},
                            {{{4, 8}, DType::kF32}, {{8}, DType::kF32}}, {.compile_cache_dir = ""});
  std::vector<Array> in = {Array::full({4, 8}, 1, DType::kF32), Array::full({8}, 2, DType::kF32)};
  std::vector<Array> out = {Array::full({4, 8}, -1, DType::kF32), in[1]};
  kernel->run(in, out);
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(32, 3.0f));
  EXPECT_EQ(out[1].raw_data(), in[1].raw_data());
  EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(8, 2.0f));
  // The pairing must fit the kernel's types: one output fewer than the entry returns is refused.
  testing::expect_error(
      [] {
        compile_cpu(kAddBias, "main", {{{4, 8}, DType::kF32}, {{8}, DType::kF32}}, {{{4, 8}, DType::kF32}},
                    {.compile_cache_dir = ""});
      },
      ErrorCode::kInvalidArgument, {"ingot.result_arguments lists 2 results", "1 outputs"});
}

TEST(CpuCompiler, EarlyDeallocFreesEachBufferAfterItsLastUseThroughItsViews) {
  // %t is read through a view by the second copy and %u inside a loop: each is freed right after
  // that last use (ingot-early-dealloc), before the unrelated copy into %out; the deallocation
  // pipeline had put both frees at the end of the block.
  const char* ir = R"(
func.func @f(%a: memref<4xf32>, %out: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %a, %t : memref<4xf32> to memref<4xf32>
  %v = memref.subview %t[0] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1]>>
  %u = memref.alloc() : memref<2xf32>
  memref.copy %v, %u : memref<2xf32, strided<[1]>> to memref<2xf32>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c2 step %c1 {
    %x = memref.load %u[%i] : memref<2xf32>
    memref.store %x, %out[%i] : memref<4xf32>
  }
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %u : memref<2xf32>
  memref.dealloc %t : memref<4xf32>
  return
}
)";
  const std::string out = run_pipeline(ir, {{"early", "func.func(ingot-early-dealloc)"}});
  const size_t view_copy = out.find("memref.copy %subview");
  const size_t free_t = out.find("memref.dealloc %alloc :");
  const size_t loop = out.find("scf.for");
  const size_t free_u = out.find("memref.dealloc %alloc_0");
  const size_t last_copy = out.find("memref.copy %arg0, %arg1");
  ASSERT_NE(view_copy, std::string::npos) << out;
  ASSERT_NE(free_t, std::string::npos) << out;
  ASSERT_NE(free_u, std::string::npos) << out;
  EXPECT_LT(view_copy, free_t) << out;
  EXPECT_LT(free_t, loop) << out;
  EXPECT_LT(loop, free_u) << out;
  EXPECT_LT(free_u, last_copy) << out;
  // A buffer the function returns is never freed early (no dealloc to move; nothing changes).
  const char* returned = R"(
func.func @g(%a: memref<4xf32>) -> memref<4xf32> {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %a, %t : memref<4xf32> to memref<4xf32>
  return %t : memref<4xf32>
}
)";
  const std::string kept = run_pipeline(returned, {{"early", "func.func(ingot-early-dealloc)"}});
  EXPECT_NE(kept.find("return %alloc"), std::string::npos) << kept;
  EXPECT_EQ(kept.find("dealloc"), std::string::npos) << kept;
}

TEST(CpuCompiler, VerifyingAfterEveryPassCompilesTheSame) {
  const std::vector<std::pair<Shape, DType>> in_types = {{{4, 8}, DType::kF32}, {{8}, DType::kF32}};
  std::vector<float> a(32), b(8);
  for (int i = 0; i < 32; ++i) a[i] = static_cast<float>(i);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<float>(i);
  std::vector<Array> in = {Array::from_vector<float>(a, {4, 8}), Array::from_vector<float>(b, {8})};
  std::vector<std::vector<float>> results;
  for (bool each : {false, true}) {
    auto kernel =
        compile_cpu(kAddBias, "main", in_types, in_types, {.verify_each_pass = each, .compile_cache_dir = ""});
    std::vector<Array> out = {Array::full({4, 8}, -1, DType::kF32), Array::full({8}, -1, DType::kF32)};
    kernel->run(in, out);
    results.push_back(out[0].to_vector<float>());
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0][9], 9.0f + 1.0f);
}

TEST(CpuCompiler, DumpsEveryStage) {
  const auto dir = std::filesystem::temp_directory_path() / "ingot_cpu_compiler_dump_test";
  std::filesystem::remove_all(dir);
  compile_cpu(kAddBias, "main", {{{4, 8}, DType::kF32}, {{8}, DType::kF32}},
              {{{4, 8}, DType::kF32}, {{8}, DType::kF32}}, {.dump_dir = dir.string()});
  EXPECT_TRUE(std::filesystem::exists(dir / "00-input.mlir"));
  EXPECT_TRUE(std::filesystem::exists(dir / "02-fuse.mlir"));
  const size_t n = default_cpu_pipeline().size();
  EXPECT_TRUE(std::filesystem::exists(dir / fmt::format("{:02}-llvm.ll", n + 1)));
  std::filesystem::remove_all(dir);
}

/// Files under `dir` (recursively).
int64_t files_under(const std::filesystem::path& dir) {
  int64_t n = 0;
  if (!std::filesystem::exists(dir)) return 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

TEST(CpuCompiler, PerfJitdumpOnlyWhenAskedFor) {
  // LLVM's perf listener writes $JITDUMPDIR/.debug/jit/<run>/jit-<pid>.dump; MLIR enables it by
  // default, so every process used to leave a file behind. ctest runs each test in its own
  // process, so the listener (a process-wide static) is created here, under this JITDUMPDIR.
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ingot_jitdump_test_{}", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(setenv("JITDUMPDIR", dir.c_str(), 1), 0);
  const std::vector<std::pair<Shape, DType>> types = {{{4, 8}, DType::kF32}, {{8}, DType::kF32}};
  compile_cpu(kAddBias, "main", types, types);
  EXPECT_EQ(files_under(dir), 0);
  compile_cpu(kAddBias, "main", types, types, {.perf_jitdump = true});
  EXPECT_EQ(files_under(dir), 1);  // jit-<pid>.dump
  unsetenv("JITDUMPDIR");
  std::filesystem::remove_all(dir);
}

TEST(CpuCompiler, ErrorsCarryMlirDiagnostics) {
  testing::expect_error([] { compile_cpu("func.func @main( {", "main", {}, {}); }, ErrorCode::kInvalidArgument,
                        {"MLIR parsing failed"});
  testing::expect_error([] { run_pipeline(kAddBias, {{"bogus", "no-such-pass"}}); }, ErrorCode::kInvalidArgument,
                        {"bad pass pipeline for stage 'bogus'"});
  auto kernel = compile_cpu(kAddBias, "main", {{{4, 8}, DType::kF32}, {{8}, DType::kF32}},
                            {{{4, 8}, DType::kF32}, {{8}, DType::kF32}});
  std::vector<Array> in = {Array::zeros({4, 8}, DType::kF32), Array::zeros({9}, DType::kF32)};
  std::vector<Array> out = {Array::zeros({4, 8}, DType::kF32), Array::zeros({8}, DType::kF32)};
  testing::expect_error([&] { kernel->run(in, out); }, ErrorCode::kShapeMismatch, {"input 1", "(9,)", "(8,)"});
}

}  // namespace
}  // namespace ingot::codegen
