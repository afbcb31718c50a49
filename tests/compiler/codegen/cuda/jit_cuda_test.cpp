// jit on a CUDA device, end to end against the fake driver (tests/runtime/fake_cuda_driver.h):
// trace -> lower -> CUDA code generator -> CudaExecutable -> Executable. The fake driver cannot
// run PTX, so the generated kernel's body is replaced by a host function over the launch's
// parameter words (the descriptor ABI): the test checks that the jit copies host arguments to
// the device, passes each buffer's address, and returns the result on the device.
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/jit/jit.h"
#include "ingot/trace/ops.h"
#include "compiler/codegen/parity.h"
#include "ptx_util.h"
#include "runtime/fake_cuda_driver.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FakeCudaScope;

TEST(JitCuda, AnElementwiseFunctionRunsOnTheDeviceThroughTheGeneratedPlan) {
  const TraceFn fn = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{exp(a[0]) * a[1] + 1.0}; };
  const std::vector<ir::TensorType> types = {{{4, 8}, DType::kF32}, {{4, 8}, DType::kF32}};
  // The plan says which launch parameter is which buffer (the same compilation jit makes).
  const codegen::CudaProgram plan = testing::compile_for_cuda(trace(fn, types, "jit"), {}, /*cublas=*/true);
  ASSERT_EQ(plan.launches().size(), 1u) << plan.describe();
  const CudaLaunch launch = plan.launches()[0];
  std::vector<size_t> word_of_buffer(plan.buffers.size(), 0);  // the aligned pointer's word
  size_t word = 0;
  for (const CudaKernelArg& a : launch.args) {
    if (a.kind == CudaKernelArg::Kind::kIndex) {
      word += 1;
      continue;
    }
    word_of_buffer[static_cast<size_t>(a.buffer)] = word + 1;
    word += 3 + 2 * a.sizes.size();
  }
  FakeCudaScope fake;
  const std::string entry = launch.kernel.substr(launch.kernel.rfind('.') + 1);
  fake.state().kernel_bodies[entry] = [&](const std::vector<uint64_t>& w) {
    ASSERT_EQ(w.size(), word);
    const auto* x = reinterpret_cast<const float*>(w[word_of_buffer[0]]);
    const auto* y = reinterpret_cast<const float*>(w[word_of_buffer[1]]);
    auto* out = reinterpret_cast<float*>(w[word_of_buffer[2]]);
    for (int64_t i = 0; i < 32; ++i) out[i] = std::exp(x[i]) * y[i] + 1.0f;
  };
  auto dev = CudaDevice::open(fake.driver(), 0);
  JitOptions options;
  options.name = "ew";
  options.cuda_device = dev.get();
  Jitted f = jit(fn, options);
  const Array x = testing::random_array({4, 8}, DType::kF32, 1), y = testing::random_array({4, 8}, DType::kF32, 2);
  const std::vector<Array> out = f({x, y});  // host arguments: copied to the device
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device().kind(), DeviceKind::kCuda);
  Array host = Array::empty({4, 8}, DType::kF32);
  dev->copy_async(out[0], host)->wait();
  std::vector<double> want;
  for (size_t i = 0; i < 32; ++i) want.push_back(std::exp(x.to_doubles()[i]) * y.to_doubles()[i] + 1.0);
  testing::expect_values(host, want, 1e-6);
  EXPECT_EQ(fake.state().launches.size(), 1u);
  EXPECT_EQ(fake.state().launches[0].grid[0], static_cast<unsigned>(launch.grid[0]));
  EXPECT_EQ(fake.state().launches[0].block[0], static_cast<unsigned>(launch.block[0]));
  // The second call with the same signature reuses the executable: no new compilation.
  f({x, y});
  EXPECT_EQ(f.compile_count(), 1);
  EXPECT_EQ(fake.state().launches.size(), 2u);
}

}  // namespace
}  // namespace ingot
