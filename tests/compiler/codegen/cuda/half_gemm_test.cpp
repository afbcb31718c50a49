// f16/bf16 matrix products on CUDA (issue 9, mixed precision): with cuBLAS GEMMs on, the lowering
// turns them into `ingot_cuda_gemm[_batched]_<f16|bf16>` calls that the host plan keeps as GEMM
// thunks of that dtype (cublasGemmEx with f32 compute at run time) instead of generated loops.
// A trainer Dense model's train step under mixed_bfloat16 / mixed_float16 plans its five
// products as half GEMMs. The plans of single products run end to end on the fake driver with the fake cuBLAS module
// (f32 sums, one rounding) and equal the interpreter's results bit for bit: both sum each product's k terms in f32 in
// ascending order and round once.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <iostream>

#include "compiler/codegen/parity.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/interp/interpreter.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/trainer/model.h"
#include "ptx_util.h"
#include "samples.h"
#include "test_util.h"
#if defined(INGOT_FAKE_CUBLAS)
#include "runtime/fake_cuda_driver.h"
#endif

namespace ingot {
namespace {

/// The train step of a trainer Dense model (784 -> Dense 64 relu -> Dense 10, batch 32) under the
/// dtype policy `policy` ("mixed_bfloat16" / "mixed_float16": f32 variables, each Dense computing
/// in the half dtype, logits converted back to f32): value_and_grad of the softmax cross-entropy
/// through the model's own forward_fn (its casts included), then SGD on every variable.
/// Arguments: the variables (kernel, bias per Dense), x (32, 784) f32, labels (32) i32; results
/// the updated variables and the loss.
ir::Graph mixed_dense_train_step(const std::string& policy) {
  auto model = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 64, .activation = "relu"}),
                                          std::make_shared<Dense>(DenseOptions{.units = 10})},
      ModelOptions{.dtype_policy = policy});
  model->build_model({32, 784});
  const TraceFn forward = model->forward_fn(/*training=*/true);
  const size_t n = model->variables().size();
  const auto loss = [forward, n](const std::vector<Tensor>& a) {
    const std::vector<Tensor> logits = forward(std::vector<Tensor>(a.begin(), a.begin() + static_cast<int64_t>(n) + 1));
    const Tensor onehot = one_hot(a[n + 1], 10, DType::kF32);
    return std::vector<Tensor>{mean(negate(sum(onehot * log_softmax(logits[0]), {1})))};
  };
  std::vector<ir::TensorType> types;
  for (Variable* v : model->variables()) types.push_back(v->type());
  types.push_back(testing::f32_type({32, 784}));
  types.push_back({{32}, DType::kI32});
  return trace(
      [loss, n](const std::vector<Tensor>& a) {
        std::vector<int64_t> argnums;
        for (size_t i = 0; i < n; ++i) argnums.push_back(static_cast<int64_t>(i));
        std::vector<Tensor> vg = value_and_grad(loss, argnums)(a);
        std::vector<Tensor> out;
        for (size_t i = 0; i < n; ++i) out.push_back(a[i] - 0.1 * vg[1 + i]);
        out.push_back(vg[0]);
        return out;
      },
      types, policy + "_dense_step");
}

/// The GEMM thunks of `p`, in order.
std::vector<codegen::CudaGemm> gemms_of(const codegen::CudaProgram& p) {
  std::vector<codegen::CudaGemm> out;
  for (const codegen::CudaThunk& t : p.thunks) {
    if (t.kind == codegen::CudaThunk::Kind::kGemm) out.push_back(t.gemm);
  }
  return out;
}

class HalfGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(testing::kPtxas))
      GTEST_SKIP() << "no ptxas at " << testing::kPtxas << " (CUDA toolkit)";
  }
};

TEST_F(HalfGemm, AMixedPrecisionTrainStepHasHalfGemmThunksAndFewerLaunches) {
  for (const auto& [policy, low] :
       {std::pair{std::string("mixed_bfloat16"), DType::kBF16}, std::pair{std::string("mixed_float16"), DType::kF16}}) {
    SCOPED_TRACE(policy);
    const ir::Graph g = mixed_dense_train_step(policy);
    // Before: every product a generated loop kernel (what cuBLAS GEMMs on did for f16/bf16 too).
    const codegen::CudaProgram loops = testing::compile_for_cuda(g);
    const codegen::CudaProgram p = testing::compile_for_cuda(g, {}, /*cublas=*/true);
    std::cout << g.name() << ": " << loops.launches().size() << " launches with generated GEMMs, "
              << p.launches().size() << " launches + " << p.gemm_count() << " cuBLAS GEMMs\n";
    testing::expect_valid_program(p, g.name());
    // Forward x W0 and h W1, backward dW1 = h^T g, dh = g W1^T, dW0 = x^T g0: five, all in `low`.
    const std::vector<codegen::CudaGemm> gemms = gemms_of(p);
    ASSERT_EQ(gemms.size(), 5u) << p.describe();
    std::vector<std::array<int64_t, 3>> mnk;
    for (const codegen::CudaGemm& gemm : gemms) {
      EXPECT_EQ(gemm.dtype, low);
      EXPECT_EQ(gemm.epilogue, codegen::CudaGemm::Epilogue::kNone);  // cuBLASLt epilogues are f32 only
      for (const codegen::CudaKernelArg* a : {&gemm.a, &gemm.b, &gemm.c}) {
        EXPECT_EQ(p.buffers[static_cast<size_t>(a->buffer)].dtype, low);
      }
      mnk.push_back({gemm.m, gemm.n, gemm.k});
    }
    EXPECT_EQ(mnk[0], (std::array<int64_t, 3>{32, 64, 784}));  // x (32, 784) . W0 (784, 64)
    EXPECT_EQ(std::count(mnk.begin(), mnk.end(), std::array<int64_t, 3>{784, 64, 32}), 1);  // dW0 = x^T g0
    EXPECT_EQ(std::count(mnk.begin(), mnk.end(), std::array<int64_t, 3>{64, 10, 32}), 1);   // dW1 = h^T g
    EXPECT_EQ(loops.gemm_count(), 0);
    EXPECT_LT(p.launches().size(), loops.launches().size());
    EXPECT_NO_THROW(validate_cuda_program(p));
  }
}

TEST_F(HalfGemm, TheCpuLoweringKeepsHalfProductsAsLoops) {
  // The CPU's GEMM kernels are f32/f64: its lowering emits no f16/bf16 GEMM call.
  const ir::Graph g = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; },
                            {ir::TensorType{{8, 4}, DType::kBF16}, ir::TensorType{{4, 6}, DType::kBF16}}, "bf16_mm");
  const lower::LoweredModule cpu = lower::lower_graph(g, "main", {}, lower::LoweringOptions{});
  EXPECT_EQ(cpu.text.find("ingot_cpu_gemm"), std::string::npos) << cpu.text;
  const lower::LoweredModule cuda =
      lower::lower_graph(g, "main", {}, lower::LoweringOptions{.gemm_function = "ingot_cuda_gemm"});
  EXPECT_NE(cuda.text.find("@ingot_cuda_gemm_bf16("), std::string::npos) << cuda.text;
}

#if defined(INGOT_FAKE_CUBLAS)
/// (name, graph) pairs of f16/bf16 products: plain, both operands transposed, and batched (one
/// leading batch dim, B transposed as attention's Q K^T; with more batch dims the collapsed result
/// is copied into the output by a generated kernel, which the fake driver cannot run).
std::vector<std::pair<std::string, ir::Graph>> half_product_graphs(DType dt) {
  std::vector<std::pair<std::string, ir::Graph>> out;
  out.emplace_back("plain", trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; },
                                  {ir::TensorType{{7, 12}, dt}, ir::TensorType{{12, 5}, dt}}, "plain"));
  out.emplace_back("transposed", trace(
                                     [](const std::vector<Tensor>& a) {
                                       return std::vector<Tensor>{
                                           dot_general(a[0], a[1], {.lhs_contracting = {0}, .rhs_contracting = {1}})};
                                     },
                                     {ir::TensorType{{12, 7}, dt}, ir::TensorType{{5, 12}, dt}}, "transposed"));
  out.emplace_back(
      "batched", trace(
                     [](const std::vector<Tensor>& a) {
                       return std::vector<Tensor>{dot_general(
                           a[0], a[1],
                           {.lhs_batching = {0}, .rhs_batching = {0}, .lhs_contracting = {2}, .rhs_contracting = {2}})};
                     },
                     {ir::TensorType{{6, 6, 16}, dt}, ir::TensorType{{6, 5, 16}, dt}}, "batched"));
  return out;
}

TEST(HalfGemmFake, HalfProductsRunAsGemmExCallsAndEqualTheInterpreter) {
  testing::FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto cublas = CublasLibrary::load(INGOT_FAKE_CUBLAS, INGOT_FAKE_CUBLAS);
  ASSERT_TRUE(cublas->available()) << cublas->unavailable_reason();
  std::shared_ptr<CudaBlas> blas = cublas->create(*dev);
  uint64_t seed = 1;
  for (const DType dt : {DType::kF16, DType::kBF16}) {
    for (const auto& [name, g] : half_product_graphs(dt)) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dt), name));
      const codegen::CudaProgram plan = testing::compile_for_cuda(g, {}, /*cublas=*/true);
      ASSERT_TRUE(plan.launches().empty()) << plan.describe();
      ASSERT_EQ(plan.gemm_count(), 1) << plan.describe();
      EXPECT_EQ(plan.thunks[0].gemm.dtype, dt);
      EXPECT_EQ(plan.thunks[0].gemm.batched, name == "batched");
      std::vector<Array> args, on_device;
      for (const ir::ValueId v : g.parameters()) {
        const ir::TensorType& t = g.type(v);
        args.push_back(testing::random_array(t.shape, dt, seed++, -2, 2));
        Array d = Array::empty(t.shape, dt, &dev->device());
        dev->copy_async(args.back(), d)->wait();  // the fake cuBLAS runs each call when it is made
        on_device.push_back(d);
      }
      const std::vector<Array> want = interp::interpret(g, args);
      const std::vector<Array> got = CudaExecutable::create(plan, *dev, blas)->run(on_device);
      ASSERT_EQ(got.size(), 1u);
      Array host = Array::empty(got[0].shape(), dt);
      dev->copy_async(got[0], host)->wait();
      EXPECT_EQ(host.to_doubles(), want[0].to_doubles());
      EXPECT_TRUE(fake.state().launches.empty());
    }
  }
}
#endif  // INGOT_FAKE_CUBLAS

}  // namespace
}  // namespace ingot
