// jit on a real workload (an MLP SGD step): one compilation per signature, training progress,
// agreement with the interpreter, dumps, concurrency and errors; compile_graph's Executable.
#include "ingot/jit/jit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "ingot/runtime/runtime.h"
#include "ingot/runtime/sharding.h"
#include "mlp_step.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::MlpSizes;

constexpr double kLr = 0.5;

/// |want - got| <= rtol * max(|want|, |got|, 1) elementwise, same shape and dtype.
void expect_close(const std::vector<Array>& want, const std::vector<Array>& got, double rtol) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape()) << "output " << o;
    ASSERT_EQ(want[o].dtype(), got[o].dtype()) << "output " << o;
    std::vector<double> w = want[o].to_doubles(), g = got[o].to_doubles();
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_LE(std::abs(w[i] - g[i]), rtol * std::max({std::abs(w[i]), std::abs(g[i]), 1.0}))
          << "output " << o << " element " << i << ": interpreter " << w[i] << " vs jit " << g[i];
    }
  }
}

/// The first four outputs of a step (the new parameters of the two-layer test MLP).
std::vector<Array> weights_of(const std::vector<Array>& step_out) { return {step_out.begin(), step_out.begin() + 4}; }

/// Sets an environment variable for the lifetime of the object and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(JitMlpTrainStep, HundredStepsCompileOnceAndTheLossDecreases) {
  const MlpSizes s;
  Jitted step = jit(testing::mlp_train_step(s, kLr), {.name = "mlp_step"});
  EXPECT_EQ(step.compile_count(), 0);
  const std::vector<Array> batch = testing::mlp_batch(s, 8, 100);
  std::vector<Array> weights = testing::mlp_weights(s, 1);
  std::vector<float> losses;
  for (int i = 0; i < 100; ++i) {
    std::vector<Array> out = step(testing::concat_args(weights, batch));
    ASSERT_EQ(out.size(), 5u);
    ASSERT_EQ(out[4].shape(), Shape{});
    losses.push_back(out[4].to_vector<float>()[0]);
    weights = weights_of(out);
  }
  EXPECT_EQ(step.compile_count(), 1);
  EXPECT_GT(step.compile_seconds(), 0.0);
  // Initial loss of near-zero weights is about log(5) = 1.61. On one fixed batch of 8 rows full-
  // batch SGD memorises the batch (measured: 1.63, 0.85 after 10 steps, 0.040 after 50, 0.012
  // after 100).
  EXPECT_NEAR(losses.front(), std::log(5.0), 0.3);
  EXPECT_LT(losses[10], losses[0]);
  EXPECT_LT(losses[50], losses[10]);
  EXPECT_LT(losses.back(), losses[50]);
  EXPECT_LT(losses.back(), 0.05) << "first " << losses.front() << " last " << losses.back();
}

TEST(JitMlpTrainStep, ARaggedLastBatchCompilesOneMoreExecutable) {
  const MlpSizes s;
  Jitted step = jit(testing::mlp_train_step(s, kLr), {.name = "mlp_step"});
  std::vector<Array> weights = testing::mlp_weights(s, 2);
  // An epoch of 20 rows in batches of 8: 8, 8, then a ragged 4, three epochs.
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int64_t rows : {8, 8, 4}) {
      weights = weights_of(step(testing::concat_args(weights, testing::mlp_batch(s, rows, 10 + rows))));
    }
    EXPECT_EQ(step.compile_count(), 2) << "epoch " << epoch;
  }
  // The ragged executable computes what the interpreter computes.
  const std::vector<Array> args = testing::concat_args(weights, testing::mlp_batch(s, 4, 77));
  const ir::Graph graph = trace(testing::mlp_train_step(s, kLr), testing::mlp_step_types(s, 4));
  expect_close(interp::interpret(graph, args), step(args), 1e-5);
  EXPECT_EQ(step.compile_count(), 2);
}

TEST(JitMlpTrainStep, StepsMatchTheInterpreter) {
  const MlpSizes s;
  Jitted step = jit(testing::mlp_train_step(s, kLr));
  const ir::Graph graph = trace(testing::mlp_train_step(s, kLr), testing::mlp_step_types(s, 8));
  const std::vector<Array> batch = testing::mlp_batch(s, 8, 5);
  // Three steps, each path fed its own weights: the difference stays within float rounding.
  std::vector<Array> w_jit = testing::mlp_weights(s, 3), w_interp = w_jit;
  for (int i = 0; i < 3; ++i) {
    std::vector<Array> got = step(testing::concat_args(w_jit, batch));
    std::vector<Array> want = interp::interpret(graph, testing::concat_args(w_interp, batch));
    expect_close(want, got, 1e-5);
    w_jit = weights_of(got);
    w_interp = weights_of(want);
  }
  // Inputs are not modified by the call (no donation).
  const std::vector<Array> before = testing::mlp_weights(s, 3);
  std::vector<Array> fresh = testing::mlp_weights(s, 3);
  step(testing::concat_args(fresh, batch));
  for (size_t i = 0; i < fresh.size(); ++i) EXPECT_TRUE(fresh[i].bitwise_equal(before[i])) << i;
}

TEST(JitMlpTrainStep, ConcurrentCallsShareOneCompilation) {
  const MlpSizes s;
  Jitted step = jit(testing::mlp_train_step(s, kLr));
  const std::vector<Array> args = testing::concat_args(testing::mlp_weights(s, 4), testing::mlp_batch(s, 8, 6));
  std::vector<std::vector<Array>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) results[t] = step(args);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(step.compile_count(), 1);
  for (size_t t = 1; t < results.size(); ++t) {
    for (size_t o = 0; o < 5; ++o) EXPECT_TRUE(results[t][o].bitwise_equal(results[0][o])) << t << " " << o;
  }
}

TEST(Jit, DumpsGoToTheOptionsDirectoryOrToIngotDumpDir) {
  const auto root = std::filesystem::temp_directory_path() / "ingot_jit_test_dumps";
  std::filesystem::remove_all(root);
  TraceFn twice = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 2.0}; };
  JitOptions options{.name = "twice"};
  options.compile.dump_dir = (root / "explicit").string();
  jit(twice, options)({testing::f32({1, 2})});
  EXPECT_TRUE(std::filesystem::exists(root / "explicit" / "00-input.mlir"));
  {
    // INGOT_DUMP_DIR: one folder per jitted function and compiled signature,
    // <name>-<function id>-<n>, so two functions of the same name do not overwrite each other.
    ScopedEnv env("INGOT_DUMP_DIR", (root / "env").string());
    Jitted f = jit(twice, {.name = "twice"});
    Jitted g = jit(twice, {.name = "twice"});
    EXPECT_EQ(f({testing::f32({1, 2})})[0].to_vector<float>(), (std::vector<float>{2, 4}));
    EXPECT_EQ(f({testing::f32({1, 2, 3})})[0].to_vector<float>(), (std::vector<float>{2, 4, 6}));
    g({testing::f32({1, 2})});
    int dumps = 0;
    for (const auto& entry : std::filesystem::directory_iterator(root / "env")) {
      const std::string name = entry.path().filename().string();
      EXPECT_EQ(name.rfind("twice-", 0), 0u) << name;
      EXPECT_TRUE(std::filesystem::exists(entry.path() / "02-fuse.mlir")) << name;
      ++dumps;
    }
    EXPECT_EQ(dumps, 3);  // f: two signatures; g: one
  }
  std::filesystem::remove_all(root);
}

TEST(CompileGraph, OneJitThunkAndRepeatedOutputsShareABuffer) {
  ir::Graph g("repeat");
  ir::ValueId x = g.add_parameter({{3}, DType::kF32});
  ir::ValueId y = g.add_node("exponential", {x})[0];
  g.set_outputs({y, x, y});
  auto exe = compile_graph(g);
  ASSERT_EQ(exe->thunks().size(), 1u);
  EXPECT_EQ(exe->thunks()[0].name, "jit:repeat");
  EXPECT_EQ(exe->num_inputs(), 1u);
  const Array in = testing::f32({0, 1, -1});
  std::vector<Array> out = exe->run({in});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].raw_data(), out[2].raw_data());
  EXPECT_EQ(out[0].to_vector<float>()[0], 1.0f);
  EXPECT_TRUE(out[1].bitwise_equal(in));
  expect_close(interp::interpret(g, {in}), out, 1e-6);
}

TEST(CompileGraph, WrongArgumentsToACompiledExecutableAreNamedErrors) {
  const MlpSizes s;
  auto exe = compile_graph(trace(testing::mlp_train_step(s, kLr), testing::mlp_step_types(s, 8), "mlp_step"));
  const std::vector<Array> good = testing::concat_args(testing::mlp_weights(s, 1), testing::mlp_batch(s, 8, 2));
  std::vector<Array> bad = good;
  bad[5] = Array::zeros({8}, DType::kF32);
  expect_error([&] { exe->run(bad); }, ErrorCode::kDTypeMismatch, {"argument 5", "f32", "expected i32"});
  bad = good;
  bad[4] = Array::zeros({8, s.widths[0] + 1}, DType::kF32);
  expect_error([&] { exe->run(bad); }, ErrorCode::kShapeMismatch, {"argument 4", "(8, 13)", "expected (8, 12)"});
  bad = good;
  bad[0] = Array();
  expect_error([&] { exe->run(bad); }, ErrorCode::kInvalidArgument, {"argument 0", "invalid Array"});
  expect_error([&] { exe->run({good[0]}); }, ErrorCode::kInvalidArgument, {"1 arguments given", "takes 6"});
  EXPECT_EQ(exe->run(good).size(), 5u);
}

TEST(Jit, BadArgumentsAreErrorsAndCompileNothing) {
  const MlpSizes s;
  Jitted step = jit(testing::mlp_train_step(s, kLr), {.name = "mlp_step"});
  const std::vector<Array> good = testing::concat_args(testing::mlp_weights(s, 1), testing::mlp_batch(s, 8, 2));
  std::vector<Array> bad = good;
  bad[2] = Array();
  expect_error([&] { step(bad); }, ErrorCode::kInvalidArgument, {"jit", "argument 2", "invalid Array"});
  // Arguments that do not trace (x with the wrong feature count) fail in the trace, naming the op.
  bad = good;
  bad[4] = Array::zeros({8, s.widths[0] + 1}, DType::kF32);
  expect_error([&] { step(bad); }, ErrorCode::kShapeMismatch, {"matmul", "(8, 13)", "(12, 16)"});
  EXPECT_EQ(step.compile_count(), 0);
  // The callable still works afterwards.
  EXPECT_EQ(step(good).size(), 5u);
  EXPECT_EQ(step.compile_count(), 1);
}

TEST(Jit, RunsOnTheArgumentsDeviceAndRejectsShardedOrMixedArguments) {
  Runtime runtime(RuntimeOptions{.num_cpu_devices = 2});
  Device& d1 = *runtime.devices()[1];
  Jitted add = jit([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + a[1]}; }, {.name = "add"});
  const Array x = Array::full({4, 2}, 1.5, DType::kF32), y = Array::full({4, 2}, 2.0, DType::kF32);
  const NamedSharding on_d1 = NamedSharding::single_device(d1);
  const std::vector<Array> out = add({device_put(x, on_d1), device_put(y, on_d1)});
  EXPECT_EQ(&out[0].device(), &d1);  // outputs live where the arguments do
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(8, 3.5f));
  const NamedSharding split(Mesh({{"batch", 2}}, runtime.devices()), PartitionSpec{"batch"});
  expect_error([&] { add({device_put(x, split), device_put(y, split)}); }, ErrorCode::kUnimplemented,
               {"jit 'add'", "argument 0", "sharded over 2 devices", "spmd_target"});
  expect_error([&] { add({device_put(x, on_d1), y}); }, ErrorCode::kInvalidArgument,
               {"argument 1", "different device"});
  EXPECT_EQ(add.compile_count(), 1);
}

}  // namespace
}  // namespace ingot
