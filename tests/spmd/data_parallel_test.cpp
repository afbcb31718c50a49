// Data parallelism (keras.distribution.DataParallel) on 4 CPU virtual devices: the train step is
// traced per device with the gradients averaged over the batch axis (all_reduce mean), compiled
// with compile_graph_spmd and run by run_spmd. The bar (issue 10): the loss history and final
// weights equal the 1-device run on the same global batches to 1e-5.
#include <gtest/gtest.h>

#include "ingot/runtime/runtime.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trainer/model.h"
#include "compiler/codegen/parity.h"
#include "spmd_models.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

std::shared_ptr<Sequential> mlp() { return testing::spmd_mlp("dp_mlp", 7); }

void compile(Model& m, std::shared_ptr<distribution::Distribution> d) { testing::spmd_compile(m, std::move(d)); }

/// The data of these tests.
struct Data : testing::SpmdData {
  Data() : SpmdData(11, 7) {}
};

struct FourDeviceDataParallel {
  Runtime runtime{RuntimeOptions{.num_cpu_devices = 4}};
  std::shared_ptr<distribution::DataParallel> dp = std::make_shared<distribution::DataParallel>(
      distribution::DeviceMesh({.shape = {4}, .axis_names = {"batch"}, .devices = runtime.devices()}));
};

TEST(DataParallel, TwentyStepsEqualTheOneDeviceRun) {
  const Data data;
  auto one = mlp();
  compile(*one, nullptr);
  FourDeviceDataParallel d;
  auto four = mlp();
  compile(*four, d.dp);
  // 64 samples in batches of 16: 4 steps an epoch, 5 epochs = 20 steps, no shuffling.
  const FitOptions fit{.x = data.x, .y = data.y, .batch_size = 16, .epochs = 5, .verbose = 0, .shuffle = false};
  const auto h1 = one->fit(fit);
  const auto h4 = four->fit(fit);
  for (const char* log : {"loss", "accuracy"}) {
    ASSERT_EQ(h1->values(log).size(), 5u);
    for (size_t e = 0; e < 5; ++e) EXPECT_NEAR(h4->values(log)[e], h1->values(log)[e], 1e-5) << log << " epoch " << e;
  }
  EXPECT_LT(h4->values("loss").back(), h4->values("loss").front());  // it trained
  // The collectives' share of the step time is measured (it is part of the step time).
  EXPECT_GT(four->last_fit_timing().collective_seconds, 0);
  EXPECT_LT(four->last_fit_timing().collective_seconds, four->last_fit_timing().step_seconds);
  EXPECT_EQ(one->last_fit_timing().collective_seconds, 0);
  testing::expect_arrays_near(four->get_weights(), one->get_weights(), 1e-5);
  // evaluate and predict on the mesh agree with one device too.
  const Logs e1 = one->evaluate({.x = data.x, .y = data.y, .batch_size = 16, .verbose = 0});
  const Logs e4 = four->evaluate({.x = data.x, .y = data.y, .batch_size = 16, .verbose = 0});
  EXPECT_NEAR(*e4.get("loss"), *e1.get("loss"), 1e-5);
  EXPECT_NEAR(*e4.get("accuracy"), *e1.get("accuracy"), 1e-6);
  const Array p1 = one->predict({.x = data.x, .batch_size = 16, .verbose = 0});
  const Array p4 = four->predict({.x = data.x, .batch_size = 16, .verbose = 0});
  ASSERT_EQ(p4.shape(), (Shape{64, 4}));
  const std::vector<double> a = p1.to_doubles(), b = p4.to_doubles();
  for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(b[j], a[j], 1e-5) << j;
}

TEST(DataParallel, GradientBucketsAndOverlapKeepTheOneDeviceResults) {
  // 64-byte buckets: every gradient its own all-reduce, started as soon as it is computed and
  // overlapped with the rest of the backward pass; then the same in graph order, synchronously.
  const Data data;
  auto one = mlp();
  compile(*one, nullptr);
  const FitOptions fit{.x = data.x, .y = data.y, .batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false};
  const auto h1 = one->fit(fit);
  for (const bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlapped" : "in order");
    FourDeviceDataParallel d;
    d.dp->set_gradient_bucket_bytes(64);
    d.dp->set_overlap_collectives(overlap);
    auto four = mlp();
    compile(*four, d.dp);
    const auto h4 = four->fit(fit);
    for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(h4->values("loss")[e], h1->values("loss")[e], 1e-5) << e;
    testing::expect_arrays_near(four->get_weights(), one->get_weights(), 1e-5);
  }
  FourDeviceDataParallel d;
  expect_error([&] { d.dp->set_gradient_bucket_bytes(0); }, ErrorCode::kInvalidArgument, {"gradient_bucket_bytes 0"});
}

TEST(DataParallel, TheStepCompilesOnceAcrossEpochsWithValidation) {
  const Data data;
  FourDeviceDataParallel d;
  auto m = mlp();
  compile(*m, d.dp);
  m->fit({.x = data.x,
          .y = data.y,
          .batch_size = 8,
          .epochs = 3,
          .verbose = 0,
          .validation_data = Batch{.x = {data.x}, .y = {data.y}, .sample_weight = {}}});
  EXPECT_EQ(m->train_step_compile_count(), 1);
}

TEST(DataParallel, BadLayoutsAreClearErrors) {
  const Data data;
  FourDeviceDataParallel d;
  auto m = mlp();
  compile(*m, d.dp);
  const std::vector<Array> before = m->get_weights();
  // A batch of 10 does not split over 4 devices: refused before the step runs; nothing changes.
  expect_error([&] { m->fit({.x = data.x, .y = data.y, .batch_size = 10, .epochs = 1, .verbose = 0}); },
               ErrorCode::kInvalidArgument,
               {"fit: 64 samples in batches of 10 give a batch of 10", "4 devices", "'batch'"});
  // Batches of 8 are fine but 60 samples end with a batch of 4... and 62 with one of 6: refused
  // before the first step, not when the last batch comes.
  const Array x62 = testing::random_array({62, 8}, DType::kF32, 12);
  Array y62 = Array::zeros({62}, DType::kI32);
  expect_error([&] { m->fit({.x = x62, .y = y62, .batch_size = 8, .epochs = 1, .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"62 samples in batches of 8 give a batch of 6"});
  expect_error([&] { m->evaluate({.x = x62, .y = y62, .batch_size = 8, .verbose = 0}); }, ErrorCode::kInvalidArgument,
               {"evaluate: 62 samples"});
  expect_error([&] { m->predict({.x = x62, .batch_size = 8, .verbose = 0}); }, ErrorCode::kInvalidArgument,
               {"predict: 62 samples"});
  // A generator's batches are checked as they come, each before its step.
  expect_error(
      [&] {
        m->fit({.data = std::make_shared<ArrayDataAdapter>(x62, y62, Arrays(), 10, false), .epochs = 1, .verbose = 0});
      },
      ErrorCode::kInvalidArgument, {"a batch of 10 samples does not split over the 4 devices"});
  const std::vector<Array> after = m->get_weights();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(before[i].bitwise_equal(after[i])) << i;
  // A two-axis mesh is not data parallel; a distribution needs compiled CPU steps.
  expect_error(
      [&] {
        distribution::DataParallel(distribution::DeviceMesh(
            {.shape = {2, 2}, .axis_names = {"batch", "model"}, .devices = d.runtime.devices()}));
      },
      ErrorCode::kInvalidArgument, {"DataParallel: the mesh has 2 axes"});
  expect_error([&] { distribution::DeviceMesh({.shape = {4}, .axis_names = {}, .devices = d.runtime.devices()}); },
               ErrorCode::kInvalidArgument, {"shape has 1 entries but axis_names 0"});
  expect_error(
      [&] { distribution::DeviceMesh({.shape = {3}, .axis_names = {"batch"}, .devices = d.runtime.devices()}); },
      ErrorCode::kInvalidArgument, {});
  auto eager = mlp();
  expect_error(
      [&] {
        eager->compile({.optimizer = std::make_shared<optimizers::SGD>(),
                        .loss = std::make_shared<losses::MeanSquaredError>(),
                        .run_eagerly = true,
                        .distribution = d.dp});
      },
      ErrorCode::kInvalidArgument, {"a distribution needs compiled steps"});
}

}  // namespace
}  // namespace ingot
