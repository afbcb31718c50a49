// A Dense(relu) -> Dense forward pass compiled for CUDA with cuBLAS GEMMs is two GEMMs with
// cuBLASLt epilogues and no kernel at all, so the whole plan runs without a GPU: on the fake
// driver (tests/runtime/fake_cuda_driver.h) with the fake cuBLAS + cuBLASLt module
// (tests/runtime/fake_cublas.cpp) behind cuBLAS's own CudaBlas. Its results equal the
// interpreter's: the compiler's fold (which buffer is the bias, which GEMM gets which epilogue)
// and the runtime's calls (operand order, layouts, bias pointer) together keep the graph's values.
#if defined(INGOT_FAKE_CUBLAS)

#include <gtest/gtest.h>

#include "ingot/interp/interpreter.h"
#include "ingot/runtime/cuda_executable.h"
#include "compiler/codegen/parity.h"
#include "ptx_util.h"
#include "samples.h"
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

}  // namespace
}  // namespace ingot

#endif  // INGOT_FAKE_CUBLAS
