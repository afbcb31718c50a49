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
    auto probe = std::make_shared<callbacks::LambdaCallback>(
        callbacks::LambdaCallbackOptions{.on_train_batch_end = [&](int64_t, const Logs&) {
          bytes = runtime.devices()[1]->allocator().stats().bytes_in_use;
        }});
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

/// y = scale * x with one rank-0 trainable variable "scale" (starts at 1.5): put first in a
/// model, its optimizer slots are the first per-variable entries, where a layout guessed from
/// shapes would take them for global scalars.
class Scale final : public Layer {
 public:
  std::string class_name() const override { return "Scale"; }
  void build(const Shape&) override { scale_ = &add_weight("scale", {}, initializers::constant(1.5)); }
  Tensor call(LayerContext& ctx, const Tensor& x) override { return x * ctx.value(*scale_); }

 private:
  Variable* scale_ = nullptr;
};

/// A user's optimizer with two slots per variable: heavy-ball momentum m and a running mean of
/// squared gradients v; w -= lr * m / (sqrt(v) + 1), m = 0.9 m + g, v = 0.5 v + 0.5 g^2.
class TwoSlotOptimizer final : public optimizers::Optimizer {
 public:
  TwoSlotOptimizer() : Optimizer("TwoSlot", "two_slot", {.learning_rate = 0.05}) {}

 protected:
  std::vector<std::string> slot_names() const override { return {"m", "v"}; }
  std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& g, const Tensor& w, const std::vector<Tensor>& slots,
                                                     const Tensor& lr, const Tensor&) const override {
    const Tensor m = slots[0] * 0.9 + g;
    const Tensor v = slots[1] * 0.5 + g * g * 0.5;
    return {w - lr * m / (sqrt(v) + 1.0), {m, v}};
  }
};

std::shared_ptr<Sequential> scaled_mlp() {
  auto m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Scale>(),
                                          std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
                                          std::make_shared<Dense>(DenseOptions{.units = 4})},
      ModelOptions{.name = "scaled_mlp", .seed = 5});
  m->build_model({1, 8});
  return m;
}

TEST(Fsdp, ARankZeroVariableAndATwoSlotOptimizerTrainLikeOneDevice) {
  // The optimizer's slots are laid out from Optimizer::variable_info (each slot made from its
  // variable), not from shapes: scale's rank-0 slots come first, the kernels' slots are split
  // like their kernels.
  FsdpSetup s;
  auto one = scaled_mlp(), four = scaled_mlp();
  ASSERT_EQ(one->trainable_variables()[0]->shape(), Shape{});
  for (const auto& [m, d] : {std::pair{one, std::shared_ptr<distribution::Distribution>()},
                             std::pair{four, std::shared_ptr<distribution::Distribution>(s.fsdp())}}) {
    m->compile({.optimizer = std::make_shared<TwoSlotOptimizer>(),
                .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                    losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                .distribution = d});
  }
  const FitOptions fit{.x = s.x, .y = s.y, .batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false};
  const auto h1 = one->fit(fit);
  const auto h4 = four->fit(fit);
  for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(h4->values("loss")[e], h1->values("loss")[e], 1e-5) << e;
  testing::expect_arrays_near(four->get_weights(), one->get_weights(), 1e-5);
  EXPECT_NE(to_host(one->get_weights()[0]).to_doubles()[0], 1.5);  // scale trained
  // The slots too: the same optimizer state, whole, on the host.
  testing::expect_arrays_near(four->training_state()->get_optimizer_state(),
                              one->training_state()->get_optimizer_state(), 1e-5);
}

/// An optimizer whose variable_info does not describe what build() makes.
class MisdescribedOptimizer final : public optimizers::Optimizer {
 public:
  explicit MisdescribedOptimizer(bool wrong_reference)
      : Optimizer("Misdescribed", "misdescribed", {.learning_rate = 0.1}), wrong_reference_(wrong_reference) {}
  std::vector<optimizers::OptimizerVariableInfo> variable_info(int64_t n) const override {
    std::vector<optimizers::OptimizerVariableInfo> info = Optimizer::variable_info(n);
    if (!wrong_reference_) {
      info.pop_back();
    } else {
      info.back().reference = 0;  // the last kernel's slot said to be made from the first kernel
    }
    return info;
  }

 protected:
  std::vector<std::string> slot_names() const override { return {"m"}; }
  std::pair<Tensor, std::vector<Tensor>> update_step(const Tensor& g, const Tensor& w, const std::vector<Tensor>& slots,
                                                     const Tensor& lr, const Tensor&) const override {
    return {w - lr * g, {slots[0] + g}};
  }

 private:
  bool wrong_reference_;
};

TEST(Fsdp, AnOptimizerThatMisdescribesItsVariablesIsRefusedBeforeAnyStep) {
  FsdpSetup s;
  for (const bool wrong_reference : {false, true}) {
    SCOPED_TRACE(wrong_reference ? "wrong reference" : "wrong count");
    auto m = testing::spmd_mlp("misdescribed", 5);
    m->compile({.optimizer = std::make_shared<MisdescribedOptimizer>(wrong_reference),
                .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                    losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                .distribution = s.fsdp()});
    const std::vector<Array> before = m->get_weights();
    expect_error(
        [&] { m->fit({.x = s.x, .y = s.y, .batch_size = 16, .epochs = 1, .verbose = 0}); }, ErrorCode::kInvalidArgument,
        {wrong_reference ? "Misdescribed: optimizer variable 5 ('m') is made from 'dense/kernel' of shape (8, 16) "
                           "but has shape (4,)"
                         : "Misdescribed: variable_info describes 5 optimizer variables, build made 6"});
    testing::expect_arrays_near(m->get_weights(), before, 0);
  }
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
               ErrorCode::kInvalidArgument,
               {"pattern 'dense_9/.*' matches none of the model's variables", "dense/kernel"});
}

}  // namespace
}  // namespace ingot
