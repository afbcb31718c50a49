// The `ptx` suite (no GPU needed): graphs compiled by the CUDA code generator give PTX that
// ptxas assembles for sm_80 and sm_90, launches within the hardware limits, and the expected
// host plan (buffers, launch order, arguments).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>

#include "compiler/codegen/mlp_step.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/ir/op_registry.h"
#include "ingot/trace/ops.h"
#include "ptx_util.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::compile_for_cuda;
using testing::expect_valid_program;
using testing::expect_error;

class Ptx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(testing::kPtxas)) GTEST_SKIP() << "no ptxas at " << testing::kPtxas << " (CUDA toolkit)";
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

TEST_F(Ptx, LongReductionsGetABlockPerOutputAndShortOnesAThread) {
  // sum over 1000 elements per row: one block of 256 threads per row, combined with warp
  // shuffles and shared memory; max over 10 per row: one thread per row.
  const ir::Graph g = trace(
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0], {1}), max(a[1], {1})}; },
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

/// One compiled sample: a traced function over inputs of the given types.
struct Sample {
  std::string name;
  TraceFn fn;
  std::vector<ir::TensorType> inputs;
};

ir::TensorType f32(Shape s) { return {std::move(s), DType::kF32}; }

/// Graphs that together use every op in the registry (checked by EverySampleOpIsCovered).
std::vector<Sample> samples() {
  using V = std::vector<Tensor>;
  return {
      {"unary_float",
       [](const V& a) {
         const Tensor& x = a[0];
         return V{negate(abs(x)) + sign(x) + exp(x) + log(abs(x) + 1.0) + log1p(abs(x)) + expm1(x) + tanh(x) +
                      sigmoid(x) + sqrt(abs(x)) + rsqrt(abs(x) + 1.0) + sin(x) + cos(x) + floor(x) + ceil(x) +
                      round(x) + erf(x),
                  convert(isfinite(x), DType::kF32)};
       },
       {f32({7, 33})}},
      {"binary",
       [](const V& a) {
         const Tensor &x = a[0], &y = a[1];
         return V{x + y, x - y, x * y, x / (abs(y) + 1.0), remainder(x, y), pow(abs(x), y), maximum(x, y), minimum(x, y),
                  atan2(x, y)};
       },
       {f32({5, 40}), f32({5, 40})}},
      {"integer_and_bool",
       [](const V& a) {
         const Tensor &i = a[0], &j = a[1];
         const Tensor b = less(i, j), c = greater_equal(i, j);
         return V{i + j * i - j, maximum(i, j), remainder(i, j + 10), logical_and(b, c), logical_or(b, c), logical_xor(b, c),
                  logical_not(b), where(b, i, j), clamp(i, 0.0, 5.0), convert(i, DType::kF32)};
       },
       {{{6, 9}, DType::kI32}, {{6, 9}, DType::kI32}}},
      {"half",
       [](const V& a) { return V{convert(exp(a[0]) * a[0] + 1.0, DType::kF32), convert(sum(a[1], {1}), DType::kF32)}; },
       {{{4, 64}, DType::kF16}, {{4, 64}, DType::kBF16}}},
      {"structural",
       [](const V& a) {
         const Tensor& x = a[0];
         return V{transpose(x, {1, 0}), reshape(x, {3, 24}), slice(x, {1, 2}, {7, 9}, {2, 3}), pad(x, 0.5, {1, 0}, {2, 3}, {0, 1}),
                  concatenate({x, x}, 0), reverse(x, {0, 1}), broadcast_to(expand_dims(sum(x, {0}), 0), {4, 8, 9}),
                  iota({4, 5}, 1, DType::kF32)};
       },
       {f32({8, 9})}},
      {"reductions",
       [](const V& a) {
         const Tensor& x = a[0];
         return V{sum(x), mean(x, {1}), max(x, {0}), min(x, {2}), prod(x, {1}), convert(all(greater(x, full_like(x, -1.0)), {2}), DType::kF32),
                  convert(argmax(x, 2), DType::kF32), convert(argmin(x, 1), DType::kF32), logsumexp(x, {2}), variance(x, {0})};
       },
       {f32({3, 5, 70})}},
      {"dot_general",
       [](const V& a) {
         return V{dot_general(a[0], a[1], {.lhs_batching = {0}, .rhs_batching = {0}, .lhs_contracting = {2}, .rhs_contracting = {1}}),
                  matmul(a[2], a[3])};
       },
       {f32({2, 6, 7}), f32({2, 7, 3}), f32({33, 17}), f32({17, 9})}},
      {"gather_scatter",
       [](const V& a) { return V{take(a[0], a[1]), scatter_add_rows({10, 4}, a[1], a[2])}; },
       {f32({10, 4}), {{6}, DType::kI32}, f32({6, 4})}},
      {"random_and_barrier",
       [](const V& a) {
         auto [state, bits] = rng_bit_generator(a[0], {16, 8});
         const Tensor kept = emit("optimization_barrier", {convert(bits, DType::kF32)})[0];
         return V{state, kept};
       },
       {{{2}, DType::kU64}}},
  };
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

/// The op names of the samples, the MLP and the CNN steps (their gradients included).
std::set<std::string> ops_of(const ir::Graph& g) {
  std::set<std::string> out;
  for (const ir::Node& n : g.nodes()) out.insert(n.op);
  return out;
}

ir::Graph mlp_train_step_graph() {
  const testing::MlpSizes sizes{.widths = {784, 64, 10}};
  std::vector<ir::TensorType> types;
  for (size_t l = 0; l < sizes.num_layers(); ++l) {
    types.push_back(f32({sizes.widths[l], sizes.widths[l + 1]}));
    types.push_back(f32({sizes.widths[l + 1]}));
  }
  types.push_back(f32({32, 784}));
  types.push_back({{32}, DType::kI32});
  return trace(testing::mlp_train_step(sizes, 0.1), types, "mlp_step");
}

/// conv 3x3 (1 -> 8) + relu + 2x2 max pool + dense (8*13*13 -> 10) + softmax cross-entropy, its
/// gradients and an SGD update: (kernel, bias, w, b, x (4, 28, 28, 1), labels (4,)) -> (new
/// parameters..., loss).
ir::Graph cnn_train_step_graph() {
  TraceFn loss = [](const std::vector<Tensor>& a) {
    Tensor h = relu(conv2d(a[4], a[0]) + a[1]);
    h = max_pool2d(h, {2, 2}, {2, 2});
    h = reshape(h, {4, 8 * 13 * 13});
    const Tensor logits = matmul(h, a[2]) + a[3];
    return std::vector<Tensor>{mean(negate(sum(one_hot(a[5], 10) * log_softmax(logits), {1})))};
  };
  TraceFn step = [loss](const std::vector<Tensor>& a) {
    std::vector<Tensor> vg = value_and_grad(loss, {0, 1, 2, 3})(a);
    std::vector<Tensor> out;
    for (size_t i = 0; i < 4; ++i) out.push_back(a[i] - vg[1 + i] * 0.01);
    out.push_back(vg[0]);
    return out;
  };
  return trace(step, {f32({3, 3, 1, 8}), f32({8}), f32({8 * 13 * 13, 10}), f32({10}), f32({4, 28, 28, 1}), {{4}, DType::kI32}},
               "cnn_step");
}

TEST_F(Ptx, TheMlpAndCnnTrainStepsAssembleAndPlanEveryBuffer) {
  for (const auto& [name, g] : {std::pair{std::string("mlp"), mlp_train_step_graph()},
                                std::pair{std::string("cnn"), cnn_train_step_graph()}}) {
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
  EXPECT_EQ(p.buffers[static_cast<size_t>(first->a.buffer)].index, 4);  // x follows w0, b0, w1, b1
  EXPECT_EQ(std::count(mnk.begin(), mnk.end(), std::array<int64_t, 3>{784, 64, 32}), 1);  // dW0 = x^T g0
  EXPECT_EQ(std::count(mnk.begin(), mnk.end(), std::array<int64_t, 3>{64, 10, 32}), 1);   // dW1 = h^T g
}

TEST_F(Ptx, BatchedProductsBecomeBatchedCublasThunks) {
  // Attention's scores and weighted values: (B, H, T, D) x (B, H, T, D) -> (B, H, T, T) and
  // (B, H, T, T) x (B, H, T, D) -> (B, H, T, D), with B * H = 8 batch elements.
  const ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        const Tensor s = dot_general(a[0], a[1], {.lhs_batching = {0, 1}, .rhs_batching = {0, 1}, .lhs_contracting = {3}, .rhs_contracting = {3}});
        return std::vector<Tensor>{dot_general(softmax(s), a[1], {.lhs_batching = {0, 1}, .rhs_batching = {0, 1},
                                                                  .lhs_contracting = {3}, .rhs_contracting = {2}})};
      },
      {f32({2, 4, 16, 8}), f32({2, 4, 16, 8})}, "attn");
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
  for (const std::string& name : ir::OpRegistry::builtin().names()) {
    EXPECT_TRUE(covered.count(name) == 1) << "op '" << name << "' is in no PTX sample: add it to samples()";
  }
}

}  // namespace
}  // namespace ingot
