// Multi-core loops: ingot-parallelize-outer-loops decides which loop nests run on OpenMP threads
// (CpuCompileOptions::num_threads); parallel code computes bitwise what serial code and the
// interpreter compute (reductions stay serial inside a thread).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/codegen/parity.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The dump of the default pipeline's stage `name` in `dir`.
std::string stage_text(const std::filesystem::path& dir, const std::string& name) {
  const std::vector<codegen::PipelineStage> stages = codegen::default_cpu_pipeline();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].name == name) return read_text(dir / fmt::format("{:02}-{}.mlir", i + 1, name));
  }
  ADD_FAILURE() << "no stage " << name;
  return {};
}

/// x * |x| * 2 + x (elementwise) and its row sums, over x (rows, cols) f32. No transcendental
/// function: the compiled exp is a polynomial within a few ulp of the interpreter's libm
/// (ingot-approximate-math), and these tests compare bitwise.
ir::Graph elementwise_and_row_sum(int64_t rows, int64_t cols) {
  TraceFn fn = [](const std::vector<Tensor>& a) {
    Tensor y = a[0] * abs(a[0]) * 2.0 + a[0];
    return std::vector<Tensor>{y, sum(y, {1})};
  };
  return trace(fn, {{{rows, cols}, DType::kF32}}, "ew");
}

/// Compiles `graph` with `threads` and the dumps in a fresh directory; returns the outputs and
/// the text of the `openmp` stage.
std::pair<std::vector<Array>, std::string> compile_and_run(const ir::Graph& graph, const std::vector<Array>& args,
                                                           int threads, const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ingot_parallel_test_{}", tag);
  std::filesystem::remove_all(dir);
  std::vector<Array> out = testing::run_compiled(graph, args, {.dump_dir = dir.string(), .num_threads = threads});
  std::string openmp = stage_text(dir, "openmp");
  std::filesystem::remove_all(dir);
  return {out, openmp};
}

void expect_bitwise_equal(const std::vector<Array>& a, const std::vector<Array>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].shape(), b[i].shape());
    EXPECT_EQ(a[i].to_vector<float>(), b[i].to_vector<float>()) << "output " << i;
  }
}

TEST(ParallelLoops, BigNestsRunOnOpenMpThreadsAndMatchSerialCodeBitwise) {
  const ir::Graph graph = elementwise_and_row_sum(301, 257);  // odd sizes: uneven thread chunks
  const std::vector<Array> args = {testing::random_array({301, 257}, DType::kF32, 7)};
  const auto [parallel, parallel_ir] = compile_and_run(graph, args, 2, "two");
  const auto [serial, serial_ir] = compile_and_run(graph, args, 1, "one");
  EXPECT_NE(parallel_ir.find("omp.parallel"), std::string::npos) << parallel_ir;
  EXPECT_NE(parallel_ir.find("omp.wsloop"), std::string::npos) << parallel_ir;
  EXPECT_EQ(serial_ir.find("omp."), std::string::npos) << serial_ir;
  expect_bitwise_equal(parallel, serial);
  expect_bitwise_equal(parallel, interp::interpret(graph, args));
}

TEST(ParallelLoops, SmallNestsStaySerial) {
  // 4 x 8 elements is far below kMinParallelWork: a fork/join would cost more than the loop.
  const ir::Graph graph = elementwise_and_row_sum(4, 8);
  const std::vector<Array> args = {testing::random_array({4, 8}, DType::kF32, 8)};
  const auto [out, ir_text] = compile_and_run(graph, args, 2, "small");
  EXPECT_EQ(ir_text.find("omp."), std::string::npos) << ir_text;
  expect_bitwise_equal(out, interp::interpret(graph, args));
}

const char* kNestedParallel = R"(
func.func @f(%m: memref<1000x64xf32>, %n: memref<1x3x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  %c1000 = arith.constant 1000 : index
  %z = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c1000, %c64) step (%c1, %c1) {
    memref.store %z, %m[%i, %j] : memref<1000x64xf32>
    scf.reduce
  }
  scf.parallel (%a, %b, %c) = (%c0, %c0, %c0) to (%c1, %c3, %c64) step (%c1, %c1, %c1) {
    scf.parallel (%d) = (%c0) to (%c64) step (%c1) {
      memref.store %z, %n[%a, %b, %d] : memref<1x3x64xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}
)";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ParallelLoops, PassKeepsLeadingDimsParallelAndSerialisesNestedLoops) {
  const std::string out = codegen::run_pipeline(
      kNestedParallel, {{"p", "func.func(ingot-parallelize-outer-loops{threads=2 min-work=100})"}});
  // 1000 rows give every thread >= 4 chunks: only the row dim stays parallel, the contiguous
  // column dim becomes an scf.for. (1, 3, 64): all three dims are needed for 8 chunks; the nested
  // scf.parallel becomes an scf.for.
  EXPECT_NE(out.find("scf.parallel (%arg2) = (%c0) to (%c1000) step (%c1)"), std::string::npos) << out;
  EXPECT_EQ(count(out, "scf.parallel"), 2u) << out;
  EXPECT_EQ(count(out, "scf.for"), 2u) << out;

  const std::string serial =
      codegen::run_pipeline(kNestedParallel, {{"p", "func.func(ingot-parallelize-outer-loops{threads=1})"}});
  EXPECT_EQ(count(serial, "scf.parallel"), 0u) << serial;
  EXPECT_EQ(count(serial, "scf.for"), 6u) << serial;
}

TEST(ParallelLoops, NegativeThreadCountIsAnError) {
  testing::expect_error([] { codegen::default_cpu_pipeline(-2); }, ErrorCode::kInvalidArgument, {"num_threads", "-2"});
  const ir::Graph graph = elementwise_and_row_sum(2, 2);
  testing::expect_error([&] { testing::run_compiled(graph, {Array::zeros({2, 2}, DType::kF32)}, {.num_threads = -1}); },
                        ErrorCode::kInvalidArgument, {"num_threads", "-1"});
}

}  // namespace
}  // namespace ingot
