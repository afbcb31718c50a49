// FSDP through keras.distribution's ModelParallel and LayoutMap on 4 CPU devices: the Dense kernels
// are split on dimension 0 over the batch axis, all-gathered before use, their gradients
// reduce-scattered, and the optimizer updates each device's block. The bar (issue 10): the same
// results as one device, and a device holds a quarter of those variables' bytes.
#include <gtest/gtest.h>

#include "compiler/codegen/parity.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trainer/callbacks.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trainer/model.h"
#include "spmd_models.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

std::shared_ptr<Sequential> mlp() { return testing::spmd_mlp("fsdp_mlp", 5); }

void compile(Model& m, std::shared_ptr<distribution::Distribution> d) { testing::spmd_compile(m, std::move(d), false); }

struct FsdpSetup {
  Runtime runtime{RuntimeOptions{.num_cpu_devices = 4}};
  distribution::DeviceMesh mesh{{.shape = {4}, .axis_names = {"batch"}, .devices = runtime.devices()}};
  testing::SpmdData data{21, 5};
  Array x = data.x, y = data.y;
  std::shared_ptr<distribution::ModelParallel> fsdp() const {
    distribution::LayoutMap layouts(mesh);
    layouts.set(".*/kernel", PartitionSpec{"batch"});
    return std::make_shared<distribution::ModelParallel>(layouts, "batch");
  }
  /// Bytes in use on device 1 at the end of the last train batch of a 1-epoch fit.
  int64_t bytes_during_fit(Model& m) const {
    int64_t bytes = 0;
    auto probe = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
        .on_train_batch_end = [&](int64_t, const Logs&) { bytes = runtime.devices()[1]->allocator().stats().bytes_in_use; }});
    m.fit({.x = x, .y = y, .batch_size = 16, .epochs = 1, .verbose = 0, .callbacks = {probe}, .shuffle = false});
    return bytes;
  }
};

TEST(Fsdp, SplitKernelsTrainLikeOneDevice) {
  FsdpSetup s;
  auto one = mlp(), four = mlp();
  compile(*one, nullptr);
  compile(*four, s.fsdp());
  const FitOptions fit{.x = s.x, .y = s.y, .batch_size = 16, .epochs = 5, .verbose = 0, .shuffle = false};
  const auto h1 = one->fit(fit);
  const auto h4 = four->fit(fit);
  for (size_t e = 0; e < 5; ++e) EXPECT_NEAR(h4->values("loss")[e], h1->values("loss")[e], 1e-5) << e;
  testing::expect_arrays_near(four->get_weights(), one->get_weights(), 1e-5);  // whole values on the host
  const Array p1 = one->predict({.x = s.x, .batch_size = 16}), p4 = four->predict({.x = s.x, .batch_size = 16});
  testing::expect_values(p4, p1.to_doubles(), 1e-5);
}

TEST(Fsdp, GlobalNormClippingSeesTheWholeSplitGradients) {
  // global_clipnorm 0.05 clips every SGD step; under FSDP the norm sums the split kernels' blocks
  // over the devices (GradientLayout), so the run still equals one device.
  FsdpSetup s;
  auto one = mlp(), four = mlp();
  using Run = std::pair<std::shared_ptr<Sequential>, std::shared_ptr<distribution::Distribution>>;
  for (const auto& [m, d] : {Run{one, nullptr}, Run{four, s.fsdp()}}) {
    m->compile({.optimizer = std::make_shared<optimizers::SGD>(
                    optimizers::SGDOptions{.learning_rate = 0.5, .global_clipnorm = 0.05}),
                .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                    losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                .distribution = d});
  }
  const FitOptions fit{.x = s.x, .y = s.y, .batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false};
  const auto h1 = one->fit(fit);
  const auto h4 = four->fit(fit);
  for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(h4->values("loss")[e], h1->values("loss")[e], 1e-5) << e;
  testing::expect_arrays_near(four->get_weights(), one->get_weights(), 1e-5);
}

TEST(Fsdp, ADeviceHoldsAQuarterOfTheSplitVariablesAndTheirSlots) {
  // Each run on its own devices: a model keeps its optimizer state on them after fit.
  FsdpSetup a, b;
  auto dp_model = mlp(), fsdp_model = mlp();
  compile(*dp_model, std::make_shared<distribution::DataParallel>(a.mesh));
  compile(*fsdp_model, b.fsdp());
  const int64_t dp = a.bytes_during_fit(*dp_model), fsdp = b.bytes_during_fit(*fsdp_model);
  // Kernels (8, 16) and (16, 4) in f32, with Adam's two slots each: 3 * 768 bytes replicated under
  // data parallelism, a quarter of that per device under FSDP.
  const int64_t kernel_state = 3 * (8 * 16 + 16 * 4) * 4;
  EXPECT_GT(dp, 0);
  EXPECT_LE(fsdp, dp - kernel_state * 3 / 4) << "data parallel " << dp << " bytes, FSDP " << fsdp;
}

TEST(Fsdp, BadLayoutsAreClearErrorsBeforeAnyStep) {
  FsdpSetup s;
  distribution::LayoutMap layouts(s.mesh);
  expect_error([&] { layouts.set(".*/kernel", PartitionSpec{"model"}); }, ErrorCode::kNotFound, {"model"});
  expect_error([&] { layouts.set("(", PartitionSpec{"batch"}); }, ErrorCode::kInvalidArgument,
               {"'(' is not a regular expression"});
  expect_error([&] { distribution::ModelParallel(layouts, "model"); }, ErrorCode::kNotFound, {"model"});
  // A kernel dimension 0 of 6 does not split over 4 devices: refused when the steps are prepared.
  auto m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 4})}, ModelOptions{.seed = 1});
  m->build_model({1, 6});
  layouts.set(".*/kernel", PartitionSpec{"batch"});
  compile(*m, std::make_shared<distribution::ModelParallel>(layouts, "batch"));
  const std::vector<Array> before = m->get_weights();
  const Array x = testing::random_array({16, 6}, DType::kF32, 2);
  const Array y = Array::zeros({16}, DType::kI32);
  expect_error([&] { m->fit({.x = x, .y = y, .batch_size = 16, .epochs = 1, .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"of shape (6, 4) cannot split dimension 0 over the 4 devices"});
  EXPECT_TRUE(before[0].bitwise_equal(m->get_weights()[0]));
  // A layout with more entries than the variable has dimensions.
  distribution::LayoutMap too_long(s.mesh);
  too_long.set(".*/kernel", PartitionSpec{{}, {}, "batch"});
  auto m2 = mlp();
  compile(*m2, std::make_shared<distribution::ModelParallel>(too_long, "batch"));
  expect_error([&] { m2->fit({.x = s.x, .y = s.y, .batch_size = 16, .epochs = 1, .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"more entries than dimensions"});
  // A pattern that lays out none of the model's variables is a typo: refused, naming it.
  distribution::LayoutMap typo(s.mesh);
  typo.set(".*/kernel", PartitionSpec{"batch"});
  typo.set("dense_9/.*", PartitionSpec{"batch"});
  auto m3 = mlp();
  compile(*m3, std::make_shared<distribution::ModelParallel>(typo, "batch"));
  expect_error([&] { m3->fit({.x = s.x, .y = s.y, .batch_size = 16, .epochs = 1, .verbose = 0}); },
               ErrorCode::kInvalidArgument, {"pattern 'dense_9/.*' matches none of the model's variables", "dense/kernel"});
}

}  // namespace
}  // namespace ingot
