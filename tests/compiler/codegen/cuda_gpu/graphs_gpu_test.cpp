// The `gpu` suite's CUDA graphs (CudaExecutableOptions::cuda_graphs): the MLP and CNN train
// steps run with graphs on give the results they give with graphs off, a run's graph is captured
// once per set of buffer addresses and replayed after, and jit's CudaCompileOptions::cuda_graphs
// trains the same as without (donated state, two alternating batches). Prints the mean step time
// with and without graphs. Skips without a GPU (tools/gpu_check.sh runs the suite on a lent one).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include "compiler/codegen/cuda/samples.h"
#include "compiler/codegen/mlp_step.h"
#include "compiler/codegen/parity.h"
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/jit/jit.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/cuda_executable.h"
#include "compiler/codegen/cuda_gpu/gpu_fixture.h"
#include "test_util.h"

namespace ingot {
namespace {

class GpuGraphs : public testing::CudaDeviceTest {
 protected:
  Array to_device(const Array& host) {
    Array d = Array::empty(host.shape(), host.dtype(), &device_->device());
    device_->copy_async(host, d)->wait();
    return d;
  }
  std::vector<double> to_host(const Array& d) {
    Array h = Array::empty(d.shape(), d.dtype());
    device_->copy_async(d, h)->wait();
    return h.to_doubles();
  }

  /// Runs `graph` `runs` times on the same inputs with graphs on and off, alternating between two
  /// sets of output arrays (so two graphs are captured), and checks every run's outputs agree and
  /// the graph counters (`expected_uncaptured`: runs before the convolutions chose their engines).
  void expect_same_with_and_without_graphs(const ir::Graph& graph, int runs, int expected_uncaptured) {
    const CudaProgram program = testing::compile_like_jit(graph);
    auto plain = CudaExecutable::create(program, *device_);
    auto graphed = CudaExecutable::create(program, *device_, nullptr, std::nullopt, {.cuda_graphs = true});
    std::vector<Array> inputs;
    for (size_t i = 0; i < program.input_types.size(); ++i) {
      const auto& [shape, dtype] = program.input_types[i];
      const bool integer = !is_floating(dtype);
      inputs.push_back(to_device(testing::random_array(shape, dtype, 300 + i, integer ? 0 : -1, integer ? 9 : 1)));
    }
    auto outputs = [&] {
      std::vector<Array> o;
      for (const auto& [shape, dtype] : program.output_types)
        o.push_back(Array::empty(shape, dtype, &device_->device()));
      return o;
    };
    const std::vector<Array> want = outputs();
    const std::vector<std::vector<Array>> sets = {outputs(), outputs()};
    plain->run(inputs, want)->wait();
    for (int r = 0; r < runs; ++r) {
      const std::vector<Array>& got = sets[static_cast<size_t>(r % 2)];
      graphed->run(inputs, got)->wait();
      for (size_t o = 0; o < want.size(); ++o) {
        const std::vector<double> w = to_host(want[o]), g = to_host(got[o]);
        ASSERT_EQ(w.size(), g.size());
        for (size_t i = 0; i < w.size(); ++i) {
          // Same kernels and order; the convolution engines each executable timed may differ.
          ASSERT_NEAR(g[i], w[i], 1e-5 * std::max(1.0, std::abs(w[i])))
              << graph.name() << " run " << r << " output " << o << " element " << i;
        }
      }
    }
    const CudaGraphStats s = graphed->graph_stats();
    EXPECT_EQ(s.disabled_reason, "");
    EXPECT_EQ(s.uncaptured_runs, expected_uncaptured);
    EXPECT_EQ(s.captures, 2);
    EXPECT_EQ(s.replays, runs - expected_uncaptured - 2);
    std::cout << fmt::format("{}: {} thunks, arena {} bytes, {} captures, {} replays\n", graph.name(),
                             program.thunks.size(), s.arena_bytes, s.captures, s.replays);
  }
};

TEST_F(GpuGraphs, TheMlpTrainStepGivesTheSameResultsReplayed) {
  expect_same_with_and_without_graphs(testing::mlp_train_step_graph(), 6, 0);
}

TEST_F(GpuGraphs, TheCnnTrainStepCapturesAfterItsConvolutionsChoseTheirEngines) {
  // The first run times the convolution engines uncaptured; the later ones are graphs.
  expect_same_with_and_without_graphs(testing::cnn_train_step_graph(), 6, 1);
}

/// `steps` SGD steps of a small MLP through jit on the device (donated parameters, two batches
/// alternating), graphs as `graphs`; returns the losses and the final parameters, and the mean
/// seconds per step after the first two (captures) in `seconds`.
std::vector<std::vector<double>> train(CudaDevice& device, bool graphs, int steps, double& seconds) {
  const testing::MlpSizes sizes{.widths = {64, 128, 128, 10}};
  JitOptions options;
  options.name = graphs ? "mlp_graphs" : "mlp_plain";
  options.target = cuda_target(device);
  options.cuda.cuda_graphs = graphs;
  for (size_t i = 0; i < sizes.num_params(); ++i) options.donate_argnums.push_back(static_cast<int64_t>(i));
  Jitted step = jit(testing::mlp_train_step(sizes, 0.05), options);
  std::vector<Array> params;
  for (const Array& p : testing::mlp_weights(sizes, 11)) params.push_back(cuda_target(device)->to_target(p));
  std::vector<std::vector<Array>> batches;
  for (uint64_t seed : {uint64_t{21}, uint64_t{22}}) {
    std::vector<Array> b;
    for (const Array& a : testing::mlp_batch(sizes, 32, seed)) b.push_back(cuda_target(device)->to_target(a));
    batches.push_back(b);
  }
  std::vector<double> losses;
  std::chrono::steady_clock::time_point start;
  for (int s = 0; s < steps; ++s) {
    if (s == 2) start = std::chrono::steady_clock::now();
    std::vector<Array> out = step(testing::concat_args(params, batches[static_cast<size_t>(s % 2)]));
    losses.push_back(cuda_target(device)->to_host(out.back()).to_doubles()[0]);
    out.pop_back();
    params = std::move(out);
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / (steps - 2);
  std::vector<std::vector<double>> result = {losses};
  for (const Array& p : params) result.push_back(cuda_target(device)->to_host(p).to_doubles());
  return result;
}

TEST_F(GpuGraphs, JitTrainingWithGraphsMatchesTrainingWithout) {
  double plain_s = 0, graphs_s = 0;
  const auto plain = train(*device_, false, 20, plain_s);
  const auto graphed = train(*device_, true, 20, graphs_s);
  ASSERT_EQ(plain.size(), graphed.size());
  for (size_t v = 0; v < plain.size(); ++v) {
    ASSERT_EQ(plain[v].size(), graphed[v].size());
    for (size_t i = 0; i < plain[v].size(); ++i) {
      ASSERT_NEAR(graphed[v][i], plain[v][i], 1e-6 * std::max(1.0, std::abs(plain[v][i])))
          << "value " << v << " element " << i;
    }
  }
  EXPECT_LT(plain[0][18], plain[0][0]);  // it trained (steps 0 and 18 see the same batch)
  std::cout << fmt::format("jit MLP step (incl. the loss copy to the host): {:.1f} us without graphs, {:.1f} us with\n",
                           plain_s * 1e6, graphs_s * 1e6);
}

}  // namespace
}  // namespace ingot
