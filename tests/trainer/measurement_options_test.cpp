// The options that exist for measuring the trainer (`ingot bench --variants`, bench/README.md):
// CompileOptions::donate_state, FitOptions::prefetch, and the kernel count of the compiled train
// step (Model::train_step_kernel_count, codegen::CpuKernelStats).
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "ingot/jit/jit.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/model.h"
#include "linear_model.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::linear;

CompileOptions sgd_mse(double lr) {
  return {.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = lr}),
          .loss = std::make_shared<losses::MeanSquaredError>()};
}

/// The host addresses of every variable's value.
std::vector<const void*> addresses(Model& model) {
  std::vector<const void*> out;
  for (Variable* v : model.variables()) out.push_back(v->value().raw_data());
  return out;
}

TEST(DonateState, TheTrainStepReusesTheStateBuffersOnlyWhenDonating) {
  const Array x = testing::f32({1, 2}, {2, 1}), y = testing::f32({3, 5}, {2, 1});
  for (const bool donate : {true, false}) {
    SCOPED_TRACE(donate ? "donate_state true" : "donate_state false");
    auto model = linear(0, 0);
    CompileOptions c = sgd_mse(0.1);
    c.donate_state = donate;
    model->compile(c);
    model->train_on_batch(x, y);  // compiles; the state now lives in the step's buffers
    const std::vector<const void*> before = addresses(*model);
    model->train_on_batch(x, y);
    const std::vector<const void*> after = addresses(*model);
    ASSERT_EQ(before.size(), 2u);
    for (size_t i = 0; i < before.size(); ++i) {
      // Donated: the new values are written into the old buffers. Not donated: the old values
      // are alive while the step runs, so the new ones get other buffers.
      EXPECT_EQ(before[i] == after[i], donate) << "variable " << i;
    }
    // Both follow the hand-computed trajectory of two SGD steps (fit_test's first test):
    // w = 0 -> 1.3 -> 1.71, b = 0 -> 0.8 -> 1.05.
    const std::vector<Array> w = model->get_weights();
    EXPECT_NEAR(w[0].to_vector<float>()[0], 1.71, 1e-5);
    EXPECT_NEAR(w[1].to_vector<float>()[0], 1.05, 1e-5);
  }
}

TEST(DonateState, ATestStepWithoutDonationKeepsTheWeightsAndGivesTheSameLoss) {
  const Array x = testing::f32({1, 2}, {2, 1}), y = testing::f32({3, 5}, {2, 1});
  auto model = linear(1, 0);
  CompileOptions c = sgd_mse(0.1);
  c.donate_state = false;
  model->compile(c);
  // pred [1, 2]: MSE = (4 + 9) / 2 = 6.5.
  EXPECT_NEAR(*model->test_on_batch(x, y).get("loss"), 6.5, 1e-6);
  EXPECT_NEAR(*model->test_on_batch(x, y).get("loss"), 6.5, 1e-6);
}

/// A generator of `batches` batches of 2 samples (x = 1..2*batches, y = 2x + 1) counting its calls
/// and recording whether any ran on another thread than `caller`.
struct CountingData {
  int64_t batches = 4;
  int64_t calls = 0;
  bool other_thread = false;
  std::thread::id caller = std::this_thread::get_id();

  std::shared_ptr<DataAdapter> adapter() {
    return std::make_shared<GeneratorDataAdapter>(
        [this]() {
          auto next = std::make_shared<int64_t>(0);
          return [this, next]() -> std::optional<Batch> {
            ++calls;
            if (std::this_thread::get_id() != caller) other_thread = true;
            if (*next >= batches) return std::nullopt;
            const auto a = static_cast<float>(2 * *next + 1), b = a + 1;
            ++*next;
            return Batch{testing::f32({a, b}, {2, 1}), testing::f32({2 * a + 1, 2 * b + 1}, {2, 1}), Array()};
          };
        },
        ir::TensorType{{2, 1}, DType::kF32}, batches);
  }
};

/// Records the generator's call count at every on_train_batch_begin.
struct CallsAtBatchBegin : callbacks::Callback {
  const CountingData* data;
  std::vector<int64_t> calls;
  explicit CallsAtBatchBegin(const CountingData* d) : data(d) {}
  void on_train_batch_begin(int64_t, const Logs&) override { calls.push_back(data->calls); }
};

TEST(Prefetch, FitWithoutPrefetchingGivesTheSameHistoryBitwise) {
  const Array x = testing::f32({1, 2, 3, 4, 5, 6, 7}, {7, 1}), y = testing::f32({3, 5, 7, 9, 11, 13, 15}, {7, 1});
  const Array vx = testing::f32({8, 9}, {2, 1}), vy = testing::f32({17, 19}, {2, 1});
  std::vector<std::shared_ptr<callbacks::History>> histories;
  std::vector<std::vector<Array>> weights;
  for (const bool prefetch : {true, false}) {
    auto model = linear(0.5f, 0);
    model->compile(sgd_mse(0.01));
    // Shuffled batches of 3 (a ragged last one) over 3 epochs, with validation data.
    histories.push_back(model->fit({.x = x,
                                    .y = y,
                                    .batch_size = 3,
                                    .epochs = 3,
                                    .verbose = 0,
                                    .validation_data = Batch{vx, vy, Array()},
                                    .shuffle = true,
                                    .seed = 5,
                                    .prefetch = prefetch}));
    weights.push_back(model->get_weights());
  }
  for (const std::string key : {"loss", "val_loss"}) {
    ASSERT_EQ(histories[0]->values(key).size(), 3u) << key;
    EXPECT_EQ(histories[0]->values(key), histories[1]->values(key)) << key;
  }
  EXPECT_NE(histories[0]->values("loss")[0], histories[0]->values("loss")[2]);  // it trained
  for (size_t i = 0; i < weights[0].size(); ++i) {
    EXPECT_EQ(weights[0][i].to_vector<float>(), weights[1][i].to_vector<float>()) << "variable " << i;
  }
}

TEST(Prefetch, WithoutPrefetchingEachBatchIsMadeOnTheCallingThreadRightBeforeItsStep) {
  CountingData data;
  auto model = linear(0.5f, 0);
  model->compile(sgd_mse(0.01));
  auto hook = std::make_shared<CallsAtBatchBegin>(&data);
  model->fit({.data = data.adapter(), .verbose = 0, .callbacks = {hook}, .prefetch = false});
  // Step k starts after exactly k + 1 generator calls: nothing was prepared ahead of it.
  EXPECT_EQ(hook->calls, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(data.calls, 5);  // 4 batches and the end of the data
  EXPECT_FALSE(data.other_thread);
}

TEST(Prefetch, WithPrefetchingTheGeneratorRunsOnTheProducerThread) {
  CountingData data;
  auto model = linear(0.5f, 0);
  model->compile(sgd_mse(0.01));
  model->fit({.data = data.adapter(), .verbose = 0});
  EXPECT_EQ(data.calls, 5);
  EXPECT_TRUE(data.other_thread);  // the control: the queue's producer thread made the batches
}

/// The Fashion-MNIST MLP of `ingot bench` (Flatten, Dense 256/128 relu, Dense 10), built and
/// compiled with `compiler`.
std::shared_ptr<Sequential> mlp(const codegen::CpuCompileOptions& compiler) {
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<Layer>>{
      std::make_shared<Flatten>(), std::make_shared<Dense>(DenseOptions{.units = 256, .activation = "relu"}),
      std::make_shared<Dense>(DenseOptions{.units = 128, .activation = "relu"}),
      std::make_shared<Dense>(DenseOptions{.units = 10})});
  model->build_model({1, 28, 28});
  model->compile({.optimizer = std::make_shared<optimizers::Adam>(),
                  .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                      losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                  .compiler = compiler});
  return model;
}

TEST(KernelCount, TheMlpTrainStepRunsFewerKernelsWithElementwiseFusion) {
  codegen::CpuCompileOptions unfused;
  for (const codegen::PipelineStage& s : codegen::default_cpu_pipeline()) {
    if (s.name != "fuse") unfused.pipeline.push_back(s);
  }
  ASSERT_EQ(unfused.pipeline.size() + 1, codegen::default_cpu_pipeline().size());
  const Array x = Array::full({8, 28, 28}, 0.5, DType::kF32);
  const Array y = Array::from_vector<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  int64_t counts[2] = {};
  for (const bool fused : {true, false}) {
    auto model = mlp(fused ? codegen::CpuCompileOptions{} : unfused);
    EXPECT_EQ(model->train_step_kernel_count(), 0);  // nothing compiled yet
    model->train_on_batch(x, y);
    counts[fused ? 0 : 1] = model->train_step_kernel_count();
  }
  // The step has at least its 8 library GEMMs (3 forward, 5 backward: the first layer's input
  // gradient is not needed) and Adam's elementwise updates of 6 variables.
  EXPECT_GT(counts[0], 8 + 6);
  EXPECT_LT(counts[0], counts[1]);
}

TEST(KernelCount, TheStatsOfSmallFunctionsAreTheHandCountedKernels) {
  // exp(x) * 2 + 1 fuses into one elementwise loop nest: no calls, no copies.
  const Jitted ew = jit([](const std::vector<Tensor>& a) { return std::vector<Tensor>{exp(a[0]) * 2.0 + 1.0}; });
  EXPECT_EQ(ew.kernel_count(), 0);
  ew({testing::f32({1, 2, 3, 4}, {4})});
  EXPECT_EQ(ew.kernel_count(), 1);
  // A library GEMM is one call, and the relu after it one loop nest (the GEMM writes the
  // result buffer itself).
  JitOptions library;
  library.lowering.blas_gemm = true;
  const Jitted mm =
      jit([](const std::vector<Tensor>& a) { return std::vector<Tensor>{relu(matmul(a[0], a[1]))}; }, library);
  mm({Array::full({4, 8}, 1.0, DType::kF32), Array::full({8, 3}, 1.0, DType::kF32)});
  EXPECT_EQ(mm.kernel_count(), 2);
}

TEST(KernelCount, ADonatedUpdateIsOneLoopNestAndNoCopyOntoItself) {
  // w - 0.1 g with w donated: the loop writes w's buffer; the returned w is that argument, so it
  // has no out-param and no copy (ingot-drop-argument-results; it used to copy every byte onto
  // itself).
  JitOptions options;
  options.donate_argnums = {0};
  const Jitted update =
      jit([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] - a[1] * 0.1}; }, options);
  Array w = testing::f32({1, 2, 3, 4}, {4});
  const void* buffer = w.raw_data();
  const std::vector<Array> out = update({w, testing::f32({10, 20, 30, 40}, {4})});
  EXPECT_EQ(out[0].raw_data(), buffer);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(update.kernel_count(), 1);
  // Adam's shape: m' = 0.9 m + 0.1 g and w' = w - 0.1 m', both donated. Fusion makes w' read the
  // old m; m' is computed after that read (ingot-sink-donated-updates), so both are written in
  // place: two loop nests, no temporary copied over m.
  JitOptions two_donated;
  two_donated.donate_argnums = {0, 1};
  const Jitted adam_like = jit(
      [](const std::vector<Tensor>& a) {
        const Tensor m = a[1] * 0.9 + a[2] * 0.1;
        return std::vector<Tensor>{a[0] - m * 0.1, m};
      },
      two_donated);
  Array w2 = testing::f32({1, 2}, {2}), m2 = testing::f32({10, 20}, {2});
  const void* wb = w2.raw_data();
  const void* mb = m2.raw_data();
  const std::vector<Array> r = adam_like({w2, m2, testing::f32({100, 200}, {2})});
  EXPECT_EQ(r[0].raw_data(), wb);
  EXPECT_EQ(r[1].raw_data(), mb);
  testing::expect_values(r[1], {19, 38}, 1e-5);
  testing::expect_values(r[0], {1 - 1.9, 2 - 3.8}, 1e-5);
  EXPECT_EQ(adam_like.kernel_count(), 2);
  // A parameter returned unchanged (not donated) is still copied into its own output.
  const Jitted identity = jit([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0], a[0] * 2.0}; });
  const Array x = testing::f32({1, 2}, {2});
  const std::vector<Array> both = identity({x});
  EXPECT_NE(both[0].raw_data(), x.raw_data());
  EXPECT_EQ(both[0].to_vector<float>(), (std::vector<float>{1, 2}));
}

}  // namespace
}  // namespace ingot
