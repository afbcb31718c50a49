// A Dense(relu) -> Dense forward pass compiled for CUDA with cuBLAS GEMMs is two GEMMs with
// cuBLASLt epilogues and no kernel at all, so the whole plan runs without a GPU: on the fake
// driver (tests/runtime/fake_cuda_driver.h) with the fake cuBLAS + cuBLASLt module
// (tests/runtime/fake_cublas.cpp) behind cuBLAS's own CudaBlas. Its results equal the
// interpreter's: the compiler's fold (which buffer is the bias, which GEMM gets which epilogue)
// and the runtime's calls (operand order, layouts, bias pointer) together keep the graph's values.
#if defined(INGOT_FAKE_CUBLAS)

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ingot/interp/interpreter.h"
#include "ingot/runtime/cuda_executable.h"
#include "compiler/codegen/parity.h"
#include "ptx_util.h"
#include "samples.h"
#include "runtime/fake_cublas.h"
#include "runtime/fake_cuda_driver.h"
#include "test_util.h"

namespace ingot {
namespace {

/// x (8, 12) -> Dense 16 (relu when `with_relu`) -> Dense 5.
ir::Graph mlp_forward(bool with_relu) {
  return trace(
      [with_relu](const std::vector<Tensor>& a) {
        const Tensor pre = matmul(a[0], a[1]) + a[2];
        return std::vector<Tensor>{matmul(with_relu ? relu(pre) : pre, a[3]) + a[4]};
      },
      {testing::f32_type({8, 12}), testing::f32_type({12, 16}), testing::f32_type({16}), testing::f32_type({16, 5}),
       testing::f32_type({5})},
      "mlp_forward");
}

TEST(EpilogueFake, ADenseReluDenseForwardPassMatchesTheInterpreter) {
  const ir::Graph g = mlp_forward(true);
  const codegen::CudaProgram plan = testing::compile_for_cuda(g, {}, /*cublas=*/true);
  ASSERT_TRUE(plan.launches().empty()) << plan.describe();
  ASSERT_EQ(plan.gemm_count(), 2) << plan.describe();
  EXPECT_EQ(plan.thunks[0].gemm.epilogue, CudaGemm::Epilogue::kBiasRelu);
  EXPECT_EQ(plan.thunks[1].gemm.epilogue, CudaGemm::Epilogue::kBias);

  const std::vector<Array> args = {
      testing::random_array({8, 12}, DType::kF32, 1, -1, 1), testing::random_array({12, 16}, DType::kF32, 2, -0.5, 0.5),
      testing::random_array({16}, DType::kF32, 3, -0.5, 0.5), testing::random_array({16, 5}, DType::kF32, 4, -0.5, 0.5),
      testing::random_array({5}, DType::kF32, 5, -0.5, 0.5)};
  const std::vector<Array> want = interp::interpret(g, args);
  // The data makes the relu matter (some pre-activations are negative).
  EXPECT_NE(want[0].to_doubles(), interp::interpret(mlp_forward(false), args)[0].to_doubles());

  testing::FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto cublas = CublasLibrary::load(INGOT_FAKE_CUBLAS, INGOT_FAKE_CUBLAS);
  ASSERT_TRUE(cublas->available()) << cublas->unavailable_reason();
  auto exe = CudaExecutable::create(plan, *dev, cublas->create(*dev));
  std::vector<Array> on_device;
  for (const Array& a : args) {
    Array d = Array::empty(a.shape(), a.dtype(), &dev->device());
    dev->copy_async(a, d)->wait();  // the fake cuBLAS runs each call when it is made
    on_device.push_back(d);
  }
  const std::vector<Array> got = exe->run(on_device);
  ASSERT_EQ(got.size(), 1u);
  Array host = Array::empty(got[0].shape(), got[0].dtype());
  dev->copy_async(got[0], host)->wait();
  testing::expect_values(host, want[0].to_doubles(), 1e-5);
  EXPECT_TRUE(fake.state().launches.empty());
}

TEST(EpilogueFake, WithoutACublasLtKernelTheEpilogueRunsAsAPlainGemmAndTheBiasKernel) {
  // One Dense(relu): the fake cuBLAS computes each call when it is made, the fake driver runs
  // kernels in stream order at the next synchronisation, so a second GEMM reading the first's
  // result would see it before its bias kernel ran (on a GPU both are in stream order).
  const ir::Graph g =
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{relu(matmul(a[0], a[1]) + a[2])}; },
            {testing::f32_type({8, 12}), testing::f32_type({12, 16}), testing::f32_type({16})}, "dense_relu");
  const codegen::CudaProgram plan = testing::compile_for_cuda(g, {}, /*cublas=*/true);
  // compile_cuda carries the bias kernel for the fallback (only the device's arch is loaded).
  ASSERT_EQ(plan.kernels.size(), 1u) << plan.describe();
  EXPECT_EQ(plan.kernels[0].name, kCudaBiasKernel);
  const std::vector<Array> args = {testing::random_array({8, 12}, DType::kF32, 1, -1, 1),
                                   testing::random_array({12, 16}, DType::kF32, 2, -0.5, 0.5),
                                   testing::random_array({16}, DType::kF32, 3, -0.5, 0.5)};
  const std::vector<Array> want = interp::interpret(g, args);
  int64_t clamped = 0;
  for (double v : want[0].to_doubles()) clamped += v == 0 ? 1 : 0;
  EXPECT_GT(clamped, 0);  // the relu matters

  testing::FakeCudaScope fake;
  // The kernel's body on the host: c, bias, m, n, ldc, relu (kCudaBiasKernel's parameters).
  fake.state().kernel_bodies[kCudaBiasKernel] = [](const std::vector<uint64_t>& w) {
    auto* c = reinterpret_cast<float*>(w[0]);
    const auto* bias = reinterpret_cast<const float*>(w[1]);
    const auto m = static_cast<int64_t>(w[2]), n = static_cast<int64_t>(w[3]), ldc = static_cast<int64_t>(w[4]);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        const float v = c[i + j * ldc] + bias[i];
        c[i + j * ldc] = static_cast<uint32_t>(w[5]) != 0 ? std::max(v, 0.0f) : v;
      }
    }
  };
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto cublas = CublasLibrary::load(INGOT_FAKE_CUBLAS, INGOT_FAKE_CUBLAS);
  ASSERT_TRUE(cublas->available()) << cublas->unavailable_reason();
  void* module = dlopen(INGOT_FAKE_CUBLAS, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(module, nullptr);
  const auto* log = reinterpret_cast<const FakeCublasLog* (*)()>(dlsym(module, "ingot_fake_cublas_log"))();
  reinterpret_cast<void (*)()>(dlsym(module, "ingot_fake_cublas_reset_log"))();
  const auto no_algorithm = reinterpret_cast<void (*)(bool)>(dlsym(module, "ingot_fake_cublas_set_no_algorithm"));
  no_algorithm(true);
  auto exe = CudaExecutable::create(plan, *dev, cublas->create(*dev));
  EXPECT_GT(log->last_workspace, 0u);  // (the heuristic was asked with the handle's workspace)
  std::vector<Array> on_device;
  for (const Array& a : args) {
    Array d = Array::empty(a.shape(), a.dtype(), &dev->device());
    dev->copy_async(a, d)->wait();
    on_device.push_back(d);
  }
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    const std::vector<Array> got = exe->run(on_device);
    Array host = Array::empty(got[0].shape(), got[0].dtype());
    dev->copy_async(got[0], host)->wait();
    testing::expect_values(host, want[0].to_doubles(), 1e-5);
  }
  // The epilogue asked cuBLASLt once, then ran as a plain GEMM and one bias launch per run.
  EXPECT_EQ(log->lt_matmul_calls, 0);
  EXPECT_EQ(log->gemm_calls, 2);
  ASSERT_EQ(fake.state().launches.size(), 2u);
  EXPECT_EQ(fake.state().launches[0].kernel, kCudaBiasKernel);
  const std::vector<std::string> reasons = exe->epilogue_fallbacks();
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("found no algorithm"), std::string::npos) << reasons[0];
  no_algorithm(false);
  dlclose(module);  // the reference taken by RTLD_NOLOAD
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_FAKE_CUBLAS
