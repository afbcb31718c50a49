// The `ptx` suite (no GPU needed): graphs compiled by the CUDA code generator give PTX that
// ptxas assembles for sm_80 and sm_90, launches within the hardware limits, and the expected
// host plan (buffers, launch order, arguments).
#include <gtest/gtest.h>

#include <limits>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>

#include "compiler/codegen/mlp_step.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/ir/op_registry.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/trace/ops.h"
#include "ptx_util.h"
#include "samples.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::cnn_train_step_graph;
using testing::compile_for_cuda;
using testing::f32_type;
using testing::mlp_train_step_graph;
using testing::ops_of;
using testing::Sample;
using testing::samples;
using testing::expect_valid_program;
using testing::expect_error;

class Ptx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(testing::kPtxas))
      GTEST_SKIP() << "no ptxas at " << testing::kPtxas << " (CUDA toolkit)";
  }
};

TEST_F(Ptx, AnElementwiseGraphIsOneCoalescedKernel) {
  // exp(x) * y + 1 over (64, 100): one fused kernel over 6400 elements in blocks of 256.
  const ir::Graph g = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{exp(a[0]) * a[1] + 1.0}; },
                            {{{64, 100}, DType::kF32}, {{64, 100}, DType::kF32}}, "ew");
  const codegen::CudaProgram p = compile_for_cuda(g);
  expect_valid_program(p, "ew");
  ASSERT_EQ(p.launches().size(), 1u) << p.host_mlir;
  const codegen::CudaLaunch l = p.launches()[0];
  EXPECT_EQ(l.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(l.grid, (std::array<int64_t, 3>{25, 1, 1}));  // ceil(6400 / 256)
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].ptx.size(), 2u);
  EXPECT_NE(p.kernels[0].ptx.at("sm_90").find(".target sm_90"), std::string::npos);
  EXPECT_NE(p.kernels[0].ptx.at("sm_80").find(".target sm_80"), std::string::npos);
  // Buffers: the two inputs and the output; the kernel reads and writes them.
  ASSERT_EQ(p.buffers.size(), 3u);
  EXPECT_EQ(p.buffers[0].kind, codegen::CudaBuffer::Kind::kInput);
  EXPECT_EQ(p.buffers[2].kind, codegen::CudaBuffer::Kind::kOutput);
  EXPECT_EQ(p.buffers[2].bytes, 64 * 100 * 4);
  int memrefs = 0;
  for (const codegen::CudaKernelArg& a : l.args) memrefs += a.kind == codegen::CudaKernelArg::Kind::kMemref ? 1 : 0;
  EXPECT_EQ(memrefs, 3);
}

TEST_F(Ptx, AnEmbeddingGradientIsOneThreadPerUpdateWithAtomicAdds) {
  // scatter-add of 512 rows of 64 into a (1000, 64) table (the embedding's VJP).
  ir::Graph g{"embed_grad"};
  const ir::ValueId table = g.add_parameter({{1000, 64}, DType::kF32});
  const ir::ValueId ids = g.add_parameter({{512, 1}, DType::kI32});
  const ir::ValueId updates = g.add_parameter({{512, 64}, DType::kF32});
  g.set_outputs(g.add_node("scatter", {table, ids, updates},
                           {{"update_window_dims", std::vector<int64_t>{1}},
                            {"inserted_window_dims", std::vector<int64_t>{0}},
                            {"scatter_dims_to_operand_dims", std::vector<int64_t>{0}},
                            {"index_vector_dim", int64_t{1}},
                            {"computation", std::string("add")}}));
  auto threads = [](const codegen::CudaLaunch& l) { return l.grid[0] * l.grid[1] * l.grid[2] * l.block[0]; };
  const codegen::CudaProgram p = compile_for_cuda(g);
  expect_valid_program(p, "embed_grad");
  // The table's copy and the scatter: each as wide as its elements (no one-thread kernel).
  ASSERT_EQ(p.launches().size(), 2u) << p.describe();
  for (const codegen::CudaLaunch& l : p.launches()) EXPECT_GE(threads(l), 512 * 64) << l.kernel;
  bool atomic = false;
  for (const codegen::CudaKernelImage& k : p.kernels) {
    const std::string& ptx = k.ptx.at("sm_90");
    atomic = atomic || ptx.find("atom.global.add.f32") != std::string::npos ||
             ptx.find("red.global.add.f32") != std::string::npos;
  }
  EXPECT_TRUE(atomic) << "no atomic f32 add in the PTX";
  // The serial lowering: the scatter runs on one thread.
  const codegen::CudaProgram serial = compile_for_cuda(g, {}, false, {}, /*atomic_scatter=*/false);
  int64_t fewest = std::numeric_limits<int64_t>::max();
  for (const codegen::CudaLaunch& l : serial.launches()) fewest = std::min(fewest, threads(l));
  EXPECT_LE(fewest, 32);
}

TEST_F(Ptx, LongReductionsGetABlockPerOutputAndShortOnesAThread) {
  // sum over 1000 elements per row: one block of 256 threads per row, combined with warp
  // shuffles and shared memory; max over 10 per row: one thread per row.
  const ir::Graph g =
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0], {1}), max(a[1], {1})}; },
            {{{64, 1000}, DType::kF32}, {{300, 10}, DType::kF32}}, "red");
  const codegen::CudaProgram p = compile_for_cuda(g);
  expect_valid_program(p, "red");
  bool block_per_row = false, thread_per_row = false;
  for (const codegen::CudaLaunch& l : p.launches()) {
    const std::string& ptx = p.kernel(l.kernel).ptx.at("sm_90");
    if (l.grid[0] == 64 && l.block[0] == 256) {
      block_per_row = true;
      EXPECT_NE(ptx.find("shfl.sync.bfly"), std::string::npos) << ptx;
      EXPECT_NE(ptx.find("bar.sync"), std::string::npos);
    }
    if (l.grid[0] * l.block[0] >= 300 && l.block[0] <= 256 && ptx.find("shfl.sync") == std::string::npos) {
      thread_per_row = true;
    }
  }
  EXPECT_TRUE(block_per_row) << p.describe();
  EXPECT_TRUE(thread_per_row) << p.describe();
  // The threshold is an option: with block_reduction_min above 1000 the sum is a loop too.
  const codegen::CudaProgram loops = compile_for_cuda(g, {.block_reduction_min = 1001});
  for (const codegen::CudaLaunch& l : loops.launches()) {
    EXPECT_EQ(loops.kernel(l.kernel).ptx.at("sm_90").find("shfl.sync"), std::string::npos) << loops.describe();
  }
  expect_error([&] { compile_for_cuda(g, {.block_reduction_min = 0}); }, ErrorCode::kInvalidArgument,
               {"block_reduction_min"});
  expect_error([&] { compile_for_cuda(g, {.archs = {"compute_90"}}); }, ErrorCode::kInvalidArgument, {"compute_90"});
  expect_error([&] { compile_for_cuda(g, {.threads_per_block = 100}); }, ErrorCode::kInvalidArgument,
               {"threads_per_block is 100"});
  expect_error([&] { compile_for_cuda(g, {.libdevice = "/nonexistent/libdevice.bc"}); }, ErrorCode::kNotFound,
               {"/nonexistent/libdevice.bc"});
}

TEST_F(Ptx, EverySampleAssemblesForEachArch) {
  for (const Sample& s : samples()) {
    SCOPED_TRACE(s.name);
    const ir::Graph g = trace(s.fn, s.inputs, s.name);
    codegen::CudaProgram p;
    try {
      p = compile_for_cuda(g);
    } catch (const Error& e) {
      ADD_FAILURE() << s.name << ": " << e.what();
      continue;
    }
    expect_valid_program(p, s.name);
    EXPECT_FALSE(p.launches().empty());
    std::set<std::string> launched;
    for (const codegen::CudaLaunch& l : p.launches()) launched.insert(l.kernel);
    EXPECT_EQ(p.kernels.size(), launched.size());  // one image per launched kernel
  }
}

TEST_F(Ptx, TheMlpAndCnnTrainStepsAssembleAndPlanEveryBuffer) {
  for (const auto& [name, g] :
       {std::pair{std::string("mlp"), mlp_train_step_graph()}, std::pair{std::string("cnn"), cnn_train_step_graph()}}) {
    SCOPED_TRACE(name);
    const auto start = std::chrono::steady_clock::now();
    const codegen::CudaProgram p = compile_for_cuda(g);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const codegen::CudaProgram with_cublas = compile_for_cuda(g, {}, /*cublas=*/true);
    // Informational (docs/compiler.md quotes it): kernels per step and compile time.
    std::cout << name << " train step: " << p.launches().size() << " kernel launches (generated GEMMs), "
              << with_cublas.launches().size() << " launches + " << with_cublas.gemm_count() << " cuBLAS calls; "
              << g.num_nodes() << " graph nodes; compiled for 2 archs in " << seconds << " s\n";
    expect_valid_program(p, name);
    expect_valid_program(with_cublas, name + " with cuBLAS");
    // Every input and output buffer appears, with the graph's shapes; every output is written by
    // some launch.
    int64_t inputs = 0, outputs = 0;
    for (const codegen::CudaBuffer& b : p.buffers) {
      inputs += b.kind == codegen::CudaBuffer::Kind::kInput ? 1 : 0;
      outputs += b.kind == codegen::CudaBuffer::Kind::kOutput ? 1 : 0;
    }
    EXPECT_EQ(inputs, static_cast<int64_t>(g.parameters().size()));
    EXPECT_EQ(outputs, static_cast<int64_t>(p.output_types.size()));
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      if (p.buffers[b].kind != codegen::CudaBuffer::Kind::kOutput) continue;
      const bool used = std::any_of(p.thunks.begin(), p.thunks.end(), [&](const codegen::CudaThunk& t) {
        const auto& args = t.launch.args;
        const bool launch_arg =
            std::any_of(args.begin(), args.end(), [&](const auto& a) { return a.buffer == static_cast<int64_t>(b); });
        return launch_arg || (t.kind == codegen::CudaThunk::Kind::kGemm && t.gemm.c.buffer == static_cast<int64_t>(b));
      });
      EXPECT_TRUE(used) << "output buffer " << b << " is never passed to a kernel";
    }
    EXPECT_GE(p.launches().size(), 5u);
  }
}

TEST_F(Ptx, MatrixProductsBecomeCublasThunksInOrder) {
  // The 784-64-10 MLP step: forward x W0 (32x784 . 784x64) and h W1, backward dW1 = h^T g,
  // dh = g W1^T and dW0 = x^T g0: five GEMMs, the rest generated kernels.
  const codegen::CudaProgram p = compile_for_cuda(mlp_train_step_graph(), {}, /*cublas=*/true);
  expect_valid_program(p, "mlp with cuBLAS");
  ASSERT_EQ(p.gemm_count(), 5) << p.host_mlir;
  const codegen::CudaGemm* first = nullptr;
  std::vector<std::array<int64_t, 3>> mnk;
  for (const codegen::CudaThunk& t : p.thunks) {
    if (t.kind != codegen::CudaThunk::Kind::kGemm) continue;
    if (first == nullptr) first = &t.gemm;
    mnk.push_back({t.gemm.m, t.gemm.n, t.gemm.k});
    EXPECT_EQ(t.gemm.dtype, DType::kF32);
    for (const codegen::CudaKernelArg* a : {&t.gemm.a, &t.gemm.b, &t.gemm.c}) {
      ASSERT_EQ(a->kind, codegen::CudaKernelArg::Kind::kMemref);
      ASSERT_GE(a->buffer, 0);
      EXPECT_EQ(p.buffers[static_cast<size_t>(a->buffer)].bytes >= num_elements(a->sizes) * 4, true);
    }
  }
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(mnk[0], (std::array<int64_t, 3>{32, 64, 784}));  // x (32, 784) . W0 (784, 64)
  EXPECT_FALSE(first->trans_a);
  EXPECT_FALSE(first->trans_b);
  EXPECT_EQ(p.buffers[static_cast<size_t>(first->a.buffer)].kind, codegen::CudaBuffer::Kind::kInput);
  EXPECT_EQ(p.buffers[static_cast<size_t>(first->a.buffer)].index, 4);                    // x follows w0, b0, w1, b1
  EXPECT_EQ(std::count(mnk.begin(), mnk.end(), std::array<int64_t, 3>{784, 64, 32}), 1);  // dW0 = x^T g0
  EXPECT_EQ(std::count(mnk.begin(), mnk.end(), std::array<int64_t, 3>{64, 10, 32}), 1);   // dW1 = h^T g
}

/// The GEMM thunks of `p`, in order.
std::vector<codegen::CudaGemm> gemms_of(const codegen::CudaProgram& p) {
  std::vector<codegen::CudaGemm> out;
  for (const codegen::CudaThunk& t : p.thunks) {
    if (t.kind == codegen::CudaThunk::Kind::kGemm) out.push_back(t.gemm);
  }
  return out;
}

/// Dense (x (32, 20) . w (20, 16) + b) on `dtype`, then relu when `relu`.
ir::Graph dense_graph(DType dtype, bool relu_after) {
  return trace(
      [relu_after](const std::vector<Tensor>& a) {
        const Tensor h = matmul(a[0], a[1]) + a[2];
        return std::vector<Tensor>{relu_after ? relu(h) : h};
      },
      {{{32, 20}, dtype}, {{20, 16}, dtype}, {{16}, dtype}}, "dense");
}

TEST_F(Ptx, ADenseReluForwardIsOneGemmWithABiasReluEpilogue) {
  const codegen::CudaProgram p = compile_for_cuda(dense_graph(DType::kF32, true), {}, /*cublas=*/true);
  expect_valid_program(p, "dense relu");
  EXPECT_TRUE(p.launches().empty()) << p.describe();  // no bias, compare or select kernel left
  const std::vector<codegen::CudaGemm> g = gemms_of(p);
  ASSERT_EQ(g.size(), 1u) << p.describe();
  EXPECT_EQ(g[0].epilogue, codegen::CudaGemm::Epilogue::kBiasRelu);
  EXPECT_EQ((std::array<int64_t, 3>{g[0].m, g[0].n, g[0].k}), (std::array<int64_t, 3>{32, 16, 20}));
  const codegen::CudaBuffer& bias = p.buffers[static_cast<size_t>(g[0].bias.buffer)];
  EXPECT_EQ(bias.kind, codegen::CudaBuffer::Kind::kInput);
  EXPECT_EQ(bias.index, 2);
  EXPECT_EQ(g[0].bias.sizes, Shape{16});
  EXPECT_EQ(p.buffers[static_cast<size_t>(g[0].c.buffer)].kind, codegen::CudaBuffer::Kind::kOutput);  // in place
  EXPECT_NE(p.describe().find("epilogue=bias_relu bias=buffer 2"), std::string::npos) << p.describe();
  EXPECT_NE(p.host_mlir.find("ingot_cuda_gemm_bias_relu_f32"), std::string::npos);
  EXPECT_NO_THROW(validate_cuda_program(p));
}

TEST_F(Ptx, WithoutReluOnlyTheBiasFoldsAndF64IsLeftAlone) {
  const codegen::CudaProgram bias_only = compile_for_cuda(dense_graph(DType::kF32, false), {}, /*cublas=*/true);
  ASSERT_EQ(gemms_of(bias_only).size(), 1u);
  EXPECT_EQ(gemms_of(bias_only)[0].epilogue, codegen::CudaGemm::Epilogue::kBias);
  EXPECT_TRUE(bias_only.launches().empty()) << bias_only.describe();
  // f64: cuBLASLt's epilogues are not used; the bias add and relu stay a generated kernel.
  const codegen::CudaProgram f64 = compile_for_cuda(dense_graph(DType::kF64, true), {}, /*cublas=*/true);
  ASSERT_EQ(gemms_of(f64).size(), 1u);
  EXPECT_EQ(gemms_of(f64)[0].epilogue, codegen::CudaGemm::Epilogue::kNone);
  EXPECT_FALSE(f64.launches().empty());
  // Switched off: the stage is not in the pipeline and the bias add and relu are a kernel.
  codegen::CudaCompileOptions off;
  off.gemm_epilogues = false;
  for (const codegen::PipelineStage& stage : codegen::default_cuda_pipeline(off))
    EXPECT_NE(stage.name, "gemm-epilogues");
  const codegen::CudaProgram unfused = compile_for_cuda(dense_graph(DType::kF32, true), off, /*cublas=*/true);
  ASSERT_EQ(gemms_of(unfused).size(), 1u);
  EXPECT_EQ(gemms_of(unfused)[0].epilogue, codegen::CudaGemm::Epilogue::kNone);
  EXPECT_EQ(unfused.launches().size(), 1u) << unfused.describe();
}

TEST_F(Ptx, EverySampleCompilesWithCublasGemmsAndEpilogues) {
  // The epilogue fold only rewrites what it matches: every sample still compiles, and its plan
  // is valid (validate_cuda_program: bias views of n contiguous f32 elements).
  for (const Sample& s : samples()) {
    SCOPED_TRACE(s.name);
    codegen::CudaProgram p;
    try {
      p = compile_for_cuda(trace(s.fn, s.inputs, s.name), {}, /*cublas=*/true);
    } catch (const Error& e) {
      ADD_FAILURE() << s.name << ": " << e.what();
      continue;
    }
    expect_valid_program(p, s.name);
    EXPECT_NO_THROW(validate_cuda_program(p)) << p.describe();
  }
}

TEST_F(Ptx, ADenseOnRank3InputsFoldsAndProductsThatCannotFoldDoNot) {
  // (4, 8, 20) . (20, 16) + b: the GEMM is (32, 20) . (20, 16), its result expanded back to
  // (4, 8, 16) before the bias add; the relu folds too. What is left is at most the copy of the
  // GEMM's buffer into the output (no bias, compare or select).
  const ir::Graph g =
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{relu(matmul(a[0], a[1]) + a[2])}; },
            {f32_type({4, 8, 20}), f32_type({20, 16}), f32_type({16})}, "dense3");
  const codegen::CudaProgram p = compile_for_cuda(g, {}, /*cublas=*/true);
  expect_valid_program(p, "dense3");
  const std::vector<codegen::CudaGemm> gemms = gemms_of(p);
  ASSERT_EQ(gemms.size(), 1u) << p.describe();
  EXPECT_EQ(gemms[0].epilogue, codegen::CudaGemm::Epilogue::kBiasRelu) << p.describe();
  EXPECT_EQ((std::array<int64_t, 3>{gemms[0].m, gemms[0].n, gemms[0].k}), (std::array<int64_t, 3>{32, 16, 20}));
  ASSERT_LE(p.launches().size(), 1u) << p.describe();
  for (const codegen::CudaLaunch& l : p.launches()) {  // a copy: reads the GEMM's buffer, writes the output
    const auto memrefs = std::count_if(l.args.begin(), l.args.end(), [](const codegen::CudaKernelArg& a) {
      return a.kind == codegen::CudaKernelArg::Kind::kMemref;
    });
    EXPECT_EQ(memrefs, 2) << p.describe();
  }
  // The product used twice (returned as well): nothing folds.
  const ir::Graph twice = trace(
      [](const std::vector<Tensor>& a) {
        const Tensor y = matmul(a[0], a[1]);
        return std::vector<Tensor>{y + a[2], y};
      },
      {f32_type({32, 20}), f32_type({20, 16}), f32_type({16})}, "twice");
  const codegen::CudaProgram q = compile_for_cuda(twice, {}, /*cublas=*/true);
  ASSERT_EQ(gemms_of(q).size(), 1u);
  EXPECT_EQ(gemms_of(q)[0].epilogue, codegen::CudaGemm::Epilogue::kNone) << q.describe();
  // A bias that is a slice of a larger tensor may start anywhere in its buffer (cuBLASLt wants
  // 16 bytes): nothing folds. A computed bias (a kernel's whole output) does.
  for (const bool sliced : {true, false}) {
    const ir::Graph g2 = trace(
        [sliced](const std::vector<Tensor>& a) {
          const Tensor bias =
              sliced ? slice(a[2], {1}, {17}, {1}) : exp(slice(a[2], {1}, {17}, {1}));  // before the product
          return std::vector<Tensor>{matmul(a[0], a[1]) + bias};
        },
        {f32_type({32, 20}), f32_type({20, 16}), f32_type({18})}, "bias_slice");
    const codegen::CudaProgram r = compile_for_cuda(g2, {}, /*cublas=*/true);
    ASSERT_EQ(gemms_of(r).size(), 1u);
    EXPECT_EQ(gemms_of(r)[0].epilogue, sliced ? codegen::CudaGemm::Epilogue::kNone : codegen::CudaGemm::Epilogue::kBias)
        << r.describe();
  }
  // A bias computed after the product cannot be an operand of the GEMM call: nothing folds.
  const ir::Graph late = trace(
      [](const std::vector<Tensor>& a) {
        const Tensor y = matmul(a[0], a[1]);
        const Tensor bias = exp(a[2]);
        return std::vector<Tensor>{y + bias};
      },
      {f32_type({32, 20}), f32_type({20, 16}), f32_type({16})}, "late_bias");
  const codegen::CudaProgram l = compile_for_cuda(late, {}, /*cublas=*/true);
  ASSERT_EQ(gemms_of(l).size(), 1u);
  EXPECT_EQ(gemms_of(l)[0].epilogue, codegen::CudaGemm::Epilogue::kNone) << l.describe();
}

TEST_F(Ptx, InTheMlpTrainStepTheHiddenGemmTakesBiasAndReluAndTheOutputGemmItsBias) {
  // The hidden layer's relu mask (x <= 0) is read by the backward pass: it is recomputed from the
  // GEMM's output (relu(x) <= 0, the same for every non-NaN x), so the relu folds too. The
  // backward GEMMs have no epilogue.
  const codegen::CudaProgram p = compile_for_cuda(mlp_train_step_graph(), {}, /*cublas=*/true);
  expect_valid_program(p, "mlp with epilogues");
  const std::vector<codegen::CudaGemm> g = gemms_of(p);
  ASSERT_EQ(g.size(), 5u) << p.describe();
  std::vector<codegen::CudaGemm::Epilogue> epilogues;
  for (const codegen::CudaGemm& x : g) epilogues.push_back(x.epilogue);
  using E = codegen::CudaGemm::Epilogue;
  EXPECT_EQ(epilogues, (std::vector<E>{E::kBiasRelu, E::kBias, E::kNone, E::kNone, E::kNone})) << p.describe();
  EXPECT_EQ(p.buffers[static_cast<size_t>(g[0].bias.buffer)].index, 1);  // b0
  EXPECT_EQ(p.buffers[static_cast<size_t>(g[1].bias.buffer)].index, 3);  // b1
  EXPECT_EQ(p.launches().size(), 27u) << p.describe();                   // 29 before the epilogues were folded
}

TEST_F(Ptx, BatchedProductsBecomeBatchedCublasThunks) {
  // Attention's scores and weighted values: (B, H, T, D) x (B, H, T, D) -> (B, H, T, T) and
  // (B, H, T, T) x (B, H, T, D) -> (B, H, T, D), with B * H = 8 batch elements.
  const ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        const Tensor s = dot_general(
            a[0], a[1],
            {.lhs_batching = {0, 1}, .rhs_batching = {0, 1}, .lhs_contracting = {3}, .rhs_contracting = {3}});
        return std::vector<Tensor>{dot_general(
            softmax(s), a[1],
            {.lhs_batching = {0, 1}, .rhs_batching = {0, 1}, .lhs_contracting = {3}, .rhs_contracting = {2}})};
      },
      {f32_type({2, 4, 16, 8}), f32_type({2, 4, 16, 8})}, "attn");
  const codegen::CudaProgram p = compile_for_cuda(g, {}, /*cublas=*/true);
  expect_valid_program(p, "attn");
  ASSERT_EQ(p.gemm_count(), 2) << p.describe();
  std::vector<codegen::CudaGemm> gemms;
  for (const codegen::CudaThunk& t : p.thunks) {
    if (t.kind == codegen::CudaThunk::Kind::kGemm) gemms.push_back(t.gemm);
  }
  EXPECT_TRUE(gemms[0].batched);
  EXPECT_EQ(gemms[0].batch, 8);
  EXPECT_EQ((std::array<int64_t, 3>{gemms[0].m, gemms[0].n, gemms[0].k}), (std::array<int64_t, 3>{16, 16, 8}));
  EXPECT_TRUE(gemms[0].trans_b);  // K (T, D) used as K^T
  EXPECT_EQ((std::array<int64_t, 3>{gemms[1].m, gemms[1].n, gemms[1].k}), (std::array<int64_t, 3>{16, 8, 16}));
  EXPECT_FALSE(gemms[1].trans_b);
  EXPECT_EQ(gemms[0].batch_elements().size(), 8u);
  EXPECT_EQ(gemms[0].batch_elements()[3].a.offset, 3 * 16 * 8);
}

TEST_F(Ptx, EveryRegistryOpIsInASample) {
  std::set<std::string> covered;
  for (const Sample& s : samples()) {
    for (const std::string& op : ops_of(trace(s.fn, s.inputs, s.name))) covered.insert(op);
  }
  for (const std::string& op : ops_of(mlp_train_step_graph())) covered.insert(op);
  for (const std::string& op : ops_of(cnn_train_step_graph())) covered.insert(op);
  // Collectives are split out of a per-device graph before code generation (compile_graph_spmd),
  // so no kernel ever holds one.
  const std::set<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter"};
  for (const std::string& name : ir::OpRegistry::builtin().names()) {
    if (collectives.count(name)) continue;
    EXPECT_TRUE(covered.count(name) == 1) << "op '" << name << "' is in no PTX sample: add it to samples()";
  }
}

}  // namespace
}  // namespace ingot
