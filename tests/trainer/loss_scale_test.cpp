// LossScaleOptimizer: the dynamic scale's trajectory (grow after a run of finite steps, halve and
// skip on a non-finite gradient), exact equality with the unscaled optimizer in fit, errors.
#include "ingot/trainer/loss_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ingot/interp/interpreter.h"
#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

using optimizers::LossScaleOptimizer;
using testing::expect_error;

/// One apply() of `opt` run by the interpreter: state, variables and gradients in, new ones out.
void step(const optimizers::Optimizer& opt, std::vector<Array>& state, std::vector<Array>& vars,
          const std::vector<Array>& grads) {
  std::vector<Array> args = state;
  args.insert(args.end(), vars.begin(), vars.end());
  args.insert(args.end(), grads.begin(), grads.end());
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  const size_t ns = state.size(), nv = vars.size();
  TraceFn fn = [&](const std::vector<Tensor>& a) {
    auto [v, s] =
        opt.apply({a.begin(), a.begin() + static_cast<std::ptrdiff_t>(ns)},
                  {a.begin() + static_cast<std::ptrdiff_t>(ns), a.begin() + static_cast<std::ptrdiff_t>(ns + nv)},
                  {a.begin() + static_cast<std::ptrdiff_t>(ns + nv), a.end()});
    v.insert(v.end(), s.begin(), s.end());
    return v;
  };
  const std::vector<Array> out = interp::interpret(trace(fn, types, "apply"), args);
  vars.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(nv));
  state.assign(out.begin() + static_cast<std::ptrdiff_t>(nv), out.end());
}

TEST(LossScaleOptimizer, ScaleGrowsAfterFiniteRunsAndHalvesAndSkipsOnOverflow) {
  auto sgd = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1});
  LossScaleOptimizer lso({.inner_optimizer = sgd, .initial_scale = 4, .dynamic_growth_steps = 2});
  std::vector<Array> vars = {testing::f32({1.0f}, {1})};
  std::vector<Array> state = lso.build({{{1}, DType::kF32}});
  ASSERT_EQ(state.size(), 4u);  // SGD's iterations and learning rate, step_counter, dynamic_scale
  EXPECT_EQ(lso.num_optimizer_variables(1), 4);
  EXPECT_EQ(LossScaleOptimizer::dynamic_scale(state), 4.0);
  // Step 1: the scaled gradient 2 is 0.5 unscaled: w = 1 - 0.1 * 0.5; one finite step counted.
  step(lso, state, vars, {testing::f32({2.0f}, {1})});
  EXPECT_FLOAT_EQ(vars[0].to_vector<float>()[0], 0.95f);
  EXPECT_EQ(state[2].to_doubles()[0], 1);
  EXPECT_EQ(LossScaleOptimizer::dynamic_scale(state), 4.0);
  // Step 2: the second finite step in a row doubles the scale and restarts the count.
  step(lso, state, vars, {testing::f32({4.0f}, {1})});
  EXPECT_FLOAT_EQ(vars[0].to_vector<float>()[0], 0.85f);
  EXPECT_EQ(state[2].to_doubles()[0], 0);
  EXPECT_EQ(LossScaleOptimizer::dynamic_scale(state), 8.0);
  EXPECT_EQ(optimizers::Optimizer::iterations(state), 2);
  // Step 3: an infinite gradient is skipped (w and the inner iterations unchanged), the scale halves.
  step(lso, state, vars, {testing::f32({std::numeric_limits<float>::infinity()}, {1})});
  EXPECT_FLOAT_EQ(vars[0].to_vector<float>()[0], 0.85f);
  EXPECT_EQ(optimizers::Optimizer::iterations(state), 2);
  EXPECT_EQ(LossScaleOptimizer::dynamic_scale(state), 4.0);
  // NaN too.
  step(lso, state, vars, {testing::f32({std::nanf("")}, {1})});
  EXPECT_FLOAT_EQ(vars[0].to_vector<float>()[0], 0.85f);
  EXPECT_EQ(LossScaleOptimizer::dynamic_scale(state), 2.0);
  // The learning rate is the inner optimizer's, at the front of the state.
  EXPECT_NEAR(lso.current_learning_rate(state), 0.1, 1e-7);
}

TEST(LossScaleOptimizer, FitMatchesTheUnscaledOptimizerExactly) {
  // Power-of-two scales are exact: the weights equal plain Adam's bit for bit.
  Array x = Array::zeros({32, 3}, DType::kF32), y = Array::zeros({32, 1}, DType::kF32);
  for (int64_t i = 0; i < 96; ++i) x.data<float>()[i] = std::sin(0.7f * static_cast<float>(i));
  for (int64_t i = 0; i < 32; ++i) y.data<float>()[i] = x.data<float>()[3 * i] - 2 * x.data<float>()[3 * i + 1];
  auto run = [&](bool scaled) {
    Sequential m({std::make_shared<Dense>(DenseOptions{.units = 4, .activation = "tanh"}),
                  std::make_shared<Dense>(DenseOptions{.units = 1})});
    auto adam = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.01});
    std::shared_ptr<optimizers::Optimizer> opt = adam;
    if (scaled)
      opt = std::make_shared<LossScaleOptimizer>(
          optimizers::LossScaleOptimizerOptions{.inner_optimizer = adam, .dynamic_growth_steps = 3});
    m.compile({.optimizer = opt, .loss = std::make_shared<losses::MeanSquaredError>()});
    auto h = m.fit({.x = x, .y = y, .batch_size = 8, .epochs = 3, .verbose = 0});
    return std::make_pair(h->values("loss"), m.get_weights());
  };
  const auto [plain_loss, plain_w] = run(false);
  const auto [scaled_loss, scaled_w] = run(true);
  EXPECT_EQ(plain_loss, scaled_loss);  // logs see the unscaled loss
  for (size_t i = 0; i < plain_w.size(); ++i) EXPECT_EQ(plain_w[i].to_doubles(), scaled_w[i].to_doubles()) << i;
}

TEST(LossScaleOptimizer, BadOptionsAreClearErrors) {
  using O = optimizers::LossScaleOptimizerOptions;
  expect_error([] { LossScaleOptimizer(O{}); }, ErrorCode::kInvalidArgument, {"inner_optimizer is null"});
  auto adam = std::make_shared<optimizers::Adam>();
  expect_error([&] { LossScaleOptimizer(O{.inner_optimizer = adam, .initial_scale = 0}); }, ErrorCode::kInvalidArgument,
               {"initial_scale", "0"});
  expect_error([&] { LossScaleOptimizer(O{.inner_optimizer = adam, .dynamic_growth_steps = 0}); },
               ErrorCode::kInvalidArgument, {"dynamic_growth_steps", "0"});
  auto scaled = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.loss_scale_factor = 8.0});
  expect_error([&] { LossScaleOptimizer(O{.inner_optimizer = scaled}); }, ErrorCode::kInvalidArgument,
               {"loss_scale_factor"});
}

}  // namespace
}  // namespace ingot
