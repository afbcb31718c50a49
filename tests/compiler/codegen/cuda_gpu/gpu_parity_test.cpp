// The `gpu` suite: the CUDA back end on a real device against the reference interpreter -- every
// sample graph (together they use every registry op) and the MLP and CNN train steps, compiled by
// jit for the device (generated kernels and cuBLAS GEMMs) -- and fit on the device against fit on
// the CPU. Without a GPU every test skips with the
// driver's reason (this machine has none; tools/gpu_check.sh runs the suite on a lent GPU).
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/codegen/cuda/samples.h"
#include "compiler/codegen/parity.h"
#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/runtime/cuda.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/model.h"
#include "compiler/codegen/cuda_gpu/gpu_fixture.h"
#include "test_util.h"

namespace ingot {
namespace {

class Gpu : public testing::CudaDeviceTest {
 protected:
  /// Runs `graph` through jit on the device and returns the results on the host.
  std::vector<Array> run_on_gpu(const ir::Graph& graph, const std::vector<Array>& args) {
    JitOptions options;
    options.name = graph.name();
    options.target = cuda_target(*device_);
    const ir::Graph copy = graph;
    Jitted f = jit([copy](const std::vector<Tensor>& a) { return replay(copy, a); }, options);
    std::vector<Array> out;
    for (const Array& d : f(args)) {
      Array h = Array::empty(d.shape(), d.dtype());
      device_->copy_async(d, h)->wait();
      out.push_back(h);
    }
    return out;
  }

  /// The graph's nodes re-emitted on traced tensors (jit takes a function).
  static std::vector<Tensor> replay(const ir::Graph& g, const std::vector<Tensor>& args) {
    std::map<ir::ValueId, Tensor> values;
    for (size_t i = 0; i < g.parameters().size(); ++i) values.emplace(g.parameters()[i], args[i]);
    for (const ir::Node& n : g.nodes()) {
      std::vector<Tensor> in;
      for (ir::ValueId v : n.inputs) in.push_back(values.at(v));
      std::vector<Tensor> out = emit(n.op, in, n.attrs);
      for (size_t i = 0; i < out.size(); ++i) values.emplace(n.outputs[i], out[i]);
    }
    std::vector<Tensor> out;
    for (ir::ValueId v : g.outputs()) out.push_back(values.at(v));
    return out;
  }

  /// Device results equal the interpreter's within the dtype's tolerance (GPU math functions and
  /// summation orders differ from the host's): f32 1e-4 relative, f16/bf16 2e-2, f64 1e-10,
  /// integers and bools exactly.
  void expect_matches_interpreter(const ir::Graph& g, const std::vector<Array>& args) {
    const std::vector<Array> want = interp::interpret(g, args);
    const std::vector<Array> got = run_on_gpu(g, args);
    ASSERT_EQ(want.size(), got.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(want[o].shape(), got[o].shape()) << g.name() << " output " << o;
      const DType dt = want[o].dtype();
      const double rtol = dt == DType::kF32 ? 1e-4 : dt == DType::kF64 ? 1e-10 : is_floating(dt) ? 2e-2 : 0;
      const std::vector<double> w = want[o].to_doubles(), h = got[o].to_doubles();
      int reported = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        const bool ok = (std::isnan(w[i]) && std::isnan(h[i])) ||
                        std::abs(w[i] - h[i]) <= rtol * std::max({std::abs(w[i]), std::abs(h[i]), 1.0});
        if (!ok && reported++ < 5) {
          ADD_FAILURE() << g.name() << " output " << o << " element " << i << ": interpreter " << w[i] << ", GPU "
                        << h[i];
        }
      }
    }
  }

  /// Arguments for a sample: floats in [-2, 2), integers in [0, 9] (valid gather indices),
  /// u64 random states.
  static std::vector<Array> arguments(const std::vector<ir::TensorType>& types) {
    std::vector<Array> args;
    for (size_t i = 0; i < types.size(); ++i) {
      const bool integer = !is_floating(types[i].dtype);
      args.push_back(testing::random_array(types[i].shape, types[i].dtype, 100 + i, integer ? 0 : -2, integer ? 9 : 2));
    }
    return args;
  }
};

/// The harness itself, without a GPU: the replayed samples jitted for the CPU equal the
/// interpreter (so a failure on a GPU is the device's, not the harness's).
class GpuHarness : public Gpu {
 protected:
  void SetUp() override {}
};

TEST_F(GpuHarness, ReplayedSamplesOnTheCpuMatchTheInterpreter) {
  for (const testing::Sample& s : testing::samples()) {
    SCOPED_TRACE(s.name);
    const ir::Graph g = trace(s.fn, s.inputs, s.name);
    const std::vector<Array> args = arguments(s.inputs);
    Jitted f = jit([g](const std::vector<Tensor>& a) { return replay(g, a); }, {.name = s.name});
    const std::vector<Array> got = f(args), want = interp::interpret(g, args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) testing::expect_values(got[o], want[o].to_doubles(), 1e-5);
  }
}

TEST_F(Gpu, EverySampleMatchesTheInterpreter) {
  for (const testing::Sample& s : testing::samples()) {
    SCOPED_TRACE(s.name);
    expect_matches_interpreter(trace(s.fn, s.inputs, s.name), arguments(s.inputs));
  }
}

TEST_F(Gpu, TheMlpTrainStepMatchesTheInterpreter) {
  const ir::Graph g = testing::mlp_train_step_graph();
  std::vector<ir::TensorType> types;
  for (ir::ValueId p : g.parameters()) types.push_back(g.type(p));
  std::vector<Array> args = arguments(types);
  args.back() = testing::random_array(types.back().shape, DType::kI32, 7, 0, 9);  // labels in [0, 10)
  expect_matches_interpreter(g, args);
}

TEST_F(Gpu, TheCnnTrainStepMatchesTheInterpreter) {
  const ir::Graph g = testing::cnn_train_step_graph();
  std::vector<ir::TensorType> types;
  for (ir::ValueId p : g.parameters()) types.push_back(g.type(p));
  std::vector<Array> args = arguments(types);
  args.back() = testing::random_array(types.back().shape, DType::kI32, 7, 0, 9);
  expect_matches_interpreter(g, args);
}

/// Dense layers through cuBLASLt's epilogues: relu(x W + b) (one GEMM with the RELU_BIAS
/// epilogue, no kernel) and x W + b (BIAS), f32, against the interpreter. The inputs make about
/// half the pre-activations negative, so the relu clamps. The plans are checked on the CPU too
/// (tests/compiler/codegen/cuda/ptx_test.cpp, Ptx.ADenseRelu...).
TEST_F(Gpu, DenseLayersThroughCublasLtEpiloguesMatchTheInterpreter) {
  for (const bool with_relu : {true, false}) {
    SCOPED_TRACE(with_relu ? "bias_relu" : "bias");
    const ir::Graph g = trace(
        [with_relu](const std::vector<Tensor>& a) {
          const Tensor h = matmul(a[0], a[1]) + a[2];
          return std::vector<Tensor>{with_relu ? relu(h) : h};
        },
        {{{64, 96}, DType::kF32}, {{96, 48}, DType::kF32}, {{48}, DType::kF32}}, "dense");
    expect_matches_interpreter(g, arguments({{{64, 96}, DType::kF32}, {{96, 48}, DType::kF32}, {{48}, DType::kF32}}));
  }
}

/// fit on the device equals fit on the CPU: a 2-layer MLP, 3 epochs of SGD on fixed data (no
/// shuffle), generated kernels and cuBLAS GEMMs; weights within 1e-4 relative after 18 steps.
TEST_F(Gpu, FitOnTheDeviceMatchesFitOnTheCpu) {
  const auto train = [&](CudaDevice* cuda) {
    Sequential model({std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
                      std::make_shared<Dense>(DenseOptions{.units = 3})},
                     {.seed = 5});
    model.compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.05}),
                   .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                       losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                   .target = cuda != nullptr ? cuda_target(*cuda) : nullptr});
    const Array x = testing::random_array({96, 8}, DType::kF32, 11);
    const Array y = testing::random_array({96}, DType::kI32, 12, 0, 2);
    auto h = model.fit({.x = x, .y = y, .batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false});
    return std::make_pair(model.get_weights(), h->values("loss"));
  };
  const auto [cpu_w, cpu_loss] = train(nullptr);
  const auto [gpu_w, gpu_loss] = train(device_.get());
  ASSERT_EQ(cpu_w.size(), gpu_w.size());
  for (size_t i = 0; i < cpu_w.size(); ++i) testing::expect_values(gpu_w[i], cpu_w[i].to_doubles(), 1e-4);
  ASSERT_EQ(cpu_loss.size(), gpu_loss.size());
  for (size_t i = 0; i < cpu_loss.size(); ++i)
    EXPECT_NEAR(gpu_loss[i], cpu_loss[i], 1e-4 * (1 + std::abs(cpu_loss[i])));
}

}  // namespace
}  // namespace ingot
