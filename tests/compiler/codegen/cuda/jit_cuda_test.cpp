// jit on a CUDA device, end to end against the fake driver (tests/runtime/fake_cuda_driver.h):
// trace -> lower -> CUDA code generator -> CudaExecutable -> Executable. The fake driver cannot
// run PTX, so the generated kernel's body is replaced by a host function over the launch's
// parameter words (the descriptor ABI): the test checks that the jit copies host arguments to
// the device, passes each buffer's address, and returns the result on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

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
  options.target = cuda_target(*dev);
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

TEST(JitCuda, ADonatedParameterReceivesItsOutputInPlaceOnTheDevice) {
  // p - 0.5 g with p donated (a parameter update): the plan computes into p's buffer (input 0),
  // then copies it onto the output, which the executable makes p's own buffer.
  const TraceFn fn = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] - a[1] * 0.5}; };
  // The update reads g (buffer 1) and writes p (buffer 0); the copy reads p and writes output 0.
  const testing::DonatedUpdatePlan d = testing::donated_update_plan(fn);
  ASSERT_FALSE(HasFailure());
  const std::map<int64_t, size_t>& update = d.update;
  const std::map<int64_t, size_t>& copy = d.copy;
  // Outlining names every kernel's entry `main_kernel` (one module each), so one host body stands
  // for both: the update and the copy alternate; another plan (no donation: one launch with three
  // buffers) only counts.
  FakeCudaScope fake;
  const size_t donated_words = d.words;
  int64_t calls = 0, other_calls = 0;
  std::vector<uint64_t> copied_from, copied_to;
  fake.state().kernel_bodies["main_kernel"] = [&](const std::vector<uint64_t>& w) {
    if (w.size() != donated_words) {
      ++other_calls;
      return;
    }
    if (calls++ % 2 == 0) {
      auto* p = reinterpret_cast<float*>(w[update.at(0)]);
      const auto* g = reinterpret_cast<const float*>(w[update.at(1)]);
      for (int64_t i = 0; i < 32; ++i) p[i] = p[i] - g[i] * 0.5f;
    } else {
      copied_from.push_back(w[copy.at(0)]);
      copied_to.push_back(w[copy.at(2)]);
      std::memmove(reinterpret_cast<float*>(w[copy.at(2)]), reinterpret_cast<const float*>(w[copy.at(0)]), 128);
    }
  };
  auto dev = CudaDevice::open(fake.driver(), 0);
  JitOptions options;
  options.name = "update";
  options.target = cuda_target(*dev);
  options.donate_argnums = {0};
  Jitted f = jit(fn, options);
  const Array p_host = testing::random_array({4, 8}, DType::kF32, 3),
              g_host = testing::random_array({4, 8}, DType::kF32, 4);
  const Array p = cuda_target(*dev)->to_target(p_host), g = cuda_target(*dev)->to_target(g_host);
  const uint64_t p_address = reinterpret_cast<uintptr_t>(p.buffer()->data());
  const std::vector<Array> out = f({p, g});
  ASSERT_EQ(out.size(), 1u);
  // In place: the result is p's device buffer, and the copy ran from that buffer onto itself.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(out[0].buffer()->data()), p_address);
  ASSERT_EQ(copied_to.size(), 1u);
  EXPECT_EQ(copied_from[0], p_address);
  EXPECT_EQ(copied_to[0], p_address);
  std::vector<double> want;
  for (size_t i = 0; i < 32; ++i) want.push_back(p_host.to_doubles()[i] - 0.5 * g_host.to_doubles()[i]);
  testing::expect_values(cuda_target(*dev)->to_host(out[0]), want, 1e-6);
  // The donated argument is consumed, as on the CPU.
  EXPECT_THROW(cuda_target(*dev)->to_host(p), Error);
  // Without donation the output is a separate buffer.
  JitOptions plain = options;
  plain.donate_argnums = {};
  const Array p2 = cuda_target(*dev)->to_target(p_host);
  const std::vector<Array> out2 = jit(fn, plain)({p2, g});
  EXPECT_NE(out2[0].buffer()->data(), p2.buffer()->data());
  EXPECT_EQ(calls, 2);
  EXPECT_GE(other_calls, 1);
}

}  // namespace
}  // namespace ingot
