// jit with CUDA graphs (JitOptions::cuda.cuda_graphs -> CudaExecutableOptions::cuda_graphs), end
// to end against the fake driver (tests/runtime/fake_cuda_driver.h): a parameter update with the
// parameter donated keeps its buffer from step to step, so the first call captures the run and
// every later call replays it; the updates still accumulate step by step. The fake cannot run
// PTX, so the generated kernels' bodies are host functions over the launch words.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "compiler/codegen/parity.h"
#include "ingot/jit/jit.h"
#include "ingot/trace/ops.h"
#include "ptx_util.h"
#include "runtime/fake_cuda_driver.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FakeCudaScope;

TEST(JitCudaGraphs, ADonatedUpdateIsCapturedOnceAndReplayedEveryLaterStep) {
  // p - 0.5 g with p donated: the plan updates p's buffer (input 0) in place, then copies it onto
  // output 0 (p's own buffer again), as jit_cuda_test.cpp's donation test checks.
  const TraceFn fn = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] - a[1] * 0.5}; };
  const testing::DonatedUpdatePlan d = testing::donated_update_plan(fn);
  ASSERT_FALSE(HasFailure());
  const std::map<int64_t, size_t>& update = d.update;
  const std::map<int64_t, size_t>& copy = d.copy;
  FakeCudaScope fake;
  // Both kernels' entries are `main_kernel`: the update and the copy alternate, in stream order.
  int64_t calls = 0;
  fake.state().kernel_bodies["main_kernel"] = [&](const std::vector<uint64_t>& w) {
    ASSERT_EQ(w.size(), d.words);
    if (calls++ % 2 == 0) {
      auto* p = reinterpret_cast<float*>(w[update.at(0)]);
      const auto* g = reinterpret_cast<const float*>(w[update.at(1)]);
      for (int64_t i = 0; i < 32; ++i) p[i] = p[i] - g[i] * 0.5f;
    } else {
      std::memmove(reinterpret_cast<float*>(w[copy.at(2)]), reinterpret_cast<const float*>(w[copy.at(0)]), 128);
    }
  };
  auto dev = CudaDevice::open(fake.driver(), 0);
  JitOptions options;
  options.name = "update";
  options.target = cuda_target(*dev);
  options.donate_argnums = {0};
  options.cuda.cuda_graphs = true;
  Jitted f = jit(fn, options);
  const Array p_host = testing::random_array({4, 8}, DType::kF32, 3),
              g_host = testing::random_array({4, 8}, DType::kF32, 4);
  Array p = cuda_target(*dev)->to_target(p_host);
  const Array g = cuda_target(*dev)->to_target(g_host);
  const uintptr_t p_address = reinterpret_cast<uintptr_t>(p.buffer()->data());
  constexpr int kSteps = 4;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<Array> out = f({p, g});
    ASSERT_EQ(out.size(), 1u);
    p = out[0];
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p.buffer()->data()), p_address);  // in place: same key every step
  }
  std::vector<double> want;
  for (size_t i = 0; i < 32; ++i) want.push_back(p_host.to_doubles()[i] - kSteps * 0.5 * g_host.to_doubles()[i]);
  testing::expect_values(cuda_target(*dev)->to_host(p), want, 1e-5);
  EXPECT_EQ(calls, 2 * kSteps);                 // both kernels ran every step
  EXPECT_EQ(fake.state().launches.size(), 2u);  // enqueued once, into the capture
  EXPECT_EQ(fake.state().captures, 1);
  EXPECT_EQ(fake.state().graph_launches, kSteps);
  EXPECT_EQ(fake.state().live_graph_execs, 1);
}

}  // namespace
}  // namespace ingot
