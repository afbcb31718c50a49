// Keras's gradient_accumulation_steps: every k-th apply() updates with the mean of the last k
// gradients; the calls between only accumulate. Checked by hand for SGD, against one plain Adam
// step on the mean gradient (the bias correction counts updates, not calls), and in fit: batches
// of 8 accumulated over 2 steps train like batches of 16.
#include <gtest/gtest.h>

#include "compiler/codegen/parity.h"
#include "ingot/interp/interpreter.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/optimizers.h"
#include "test_util.h"

namespace ingot {
namespace {

using optimizers::Optimizer;

/// One apply() of `opt` through the interpreter: returns (new variables, new state).
std::pair<std::vector<Array>, std::vector<Array>> apply_once(const Optimizer& opt, const std::vector<Array>& state,
                                                             const std::vector<Array>& vars,
                                                             const std::vector<Array>& grads) {
  const size_t s = state.size(), n = vars.size();
  const TraceFn fn = [&](const std::vector<Tensor>& a) {
    auto [v, st] =
        opt.apply({a.begin(), a.begin() + static_cast<std::ptrdiff_t>(s)},
                  {a.begin() + static_cast<std::ptrdiff_t>(s), a.begin() + static_cast<std::ptrdiff_t>(s + n)},
                  {a.begin() + static_cast<std::ptrdiff_t>(s + n), a.end()});
    v.insert(v.end(), st.begin(), st.end());
    return v;
  };
  std::vector<Array> args = state;
  args.insert(args.end(), vars.begin(), vars.end());
  args.insert(args.end(), grads.begin(), grads.end());
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  const std::vector<Array> out = interp::interpret(trace(fn, types), args);
  return {{out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n)},
          {out.begin() + static_cast<std::ptrdiff_t>(n), out.end()}};
}

TEST(GradientAccumulation, SgdUpdatesEveryKthCallWithTheMeanGradient) {
  const optimizers::SGD sgd({.learning_rate = 0.1, .gradient_accumulation_steps = 2});
  const Array w0 = Array::from_vector<float>({1, 2}, {2});
  std::vector<Array> state = sgd.build({{{2}, DType::kF32}});
  ASSERT_EQ(state.size(), 3u);  // iterations, learning rate, one accumulator
  auto [w1, s1] = apply_once(sgd, state, {w0}, {Array::from_vector<float>({1, -1}, {2})});
  EXPECT_EQ(w1[0].to_vector<float>(), w0.to_vector<float>());  // accumulating: unchanged
  EXPECT_EQ(s1[2].to_vector<float>(), (std::vector<float>{1, -1}));
  EXPECT_EQ(Optimizer::iterations(s1), 1);
  auto [w2, s2] = apply_once(sgd, s1, w1, {Array::from_vector<float>({3, 1}, {2})});
  // w0 - 0.1 * mean((1, -1), (3, 1)) = (1, 2) - 0.1 * (2, 0)
  testing::expect_values(w2[0], {0.8, 2.0}, 1e-6);
  EXPECT_EQ(s2[2].to_vector<float>(), (std::vector<float>{0, 0}));  // reset
  EXPECT_EQ(Optimizer::iterations(s2), 2);
  testing::expect_error([] { optimizers::SGD({.gradient_accumulation_steps = 1}); }, ErrorCode::kInvalidArgument,
                        {"gradient_accumulation_steps = 1 is invalid"});
}

TEST(GradientAccumulation, AdamAccumulatedOverTwoCallsIsOneStepOnTheMeanGradient) {
  const optimizers::Adam accumulated({.learning_rate = 0.01, .gradient_accumulation_steps = 2});
  const optimizers::Adam plain({.learning_rate = 0.01});
  const Array w = testing::random_array({3, 2}, DType::kF32, 1);
  const Array g1 = testing::random_array({3, 2}, DType::kF32, 2), g2 = testing::random_array({3, 2}, DType::kF32, 3);
  std::vector<double> mean;
  for (size_t i = 0; i < 6; ++i) mean.push_back((g1.to_doubles()[i] + g2.to_doubles()[i]) / 2);
  auto [a1, s1] = apply_once(accumulated, accumulated.build({{{3, 2}, DType::kF32}}), {w}, {g1});
  auto [a2, s2] = apply_once(accumulated, s1, a1, {g2});
  auto [p1, t1] =
      apply_once(plain, plain.build({{{3, 2}, DType::kF32}}), {w}, {Array::from_doubles(mean, {3, 2}, DType::kF32)});
  testing::expect_values(a2[0], p1[0].to_doubles(), 1e-6);
  EXPECT_EQ(Optimizer::iterations(s2), 2);
}

TEST(GradientAccumulation, SchedulesCountUpdatesNotCalls) {
  // 0.1 at update 0, 0.2 after: after one call (update count 0) the rate is still 0.1.
  const optimizers::SGD sgd(
      {.learning_rate = optimizers::schedules::PiecewiseConstantDecay({.boundaries = {0}, .values = {0.1, 0.2}}),
       .gradient_accumulation_steps = 2});
  auto [w1, s1] = apply_once(sgd, sgd.build({{{1}, DType::kF32}}), {Array::from_vector<float>({1}, {1})},
                             {Array::from_vector<float>({1}, {1})});
  EXPECT_NEAR(sgd.current_learning_rate(s1), 0.1, 1e-7);
  auto [w2, s2] = apply_once(sgd, s1, w1, {Array::from_vector<float>({3}, {1})});
  testing::expect_values(w2[0], {1 - 0.1 * 2}, 1e-6);  // the update used update count 0's rate
  EXPECT_NEAR(sgd.current_learning_rate(s2), 0.2, 1e-7);
}

TEST(GradientAccumulation, BatchesOfEightOverTwoStepsTrainLikeBatchesOfSixteen) {
  auto make = [](std::optional<int64_t> steps) {
    auto m = std::make_shared<Sequential>(
        std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"}),
                                            std::make_shared<Dense>(DenseOptions{.units = 3})},
        ModelOptions{.name = "acc", .seed = 3});
    m->build_model({1, 5});
    m->compile({.optimizer = std::make_shared<optimizers::Adam>(
                    optimizers::AdamOptions{.learning_rate = 0.01, .gradient_accumulation_steps = steps}),
                .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                    losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
    return m;
  };
  const Array x = testing::random_array({64, 5}, DType::kF32, 4);
  Array y = Array::empty({64}, DType::kI32);
  for (int64_t i = 0; i < 64; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i % 3);
  auto big = make(std::nullopt), small = make(2);
  big->fit({.x = x, .y = y, .batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
  small->fit({.x = x, .y = y, .batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
  const std::vector<Array> wb = big->get_weights(), ws = small->get_weights();
  for (size_t i = 0; i < wb.size(); ++i) testing::expect_values(ws[i], wb[i].to_doubles(), 1e-5);
}

}  // namespace
}  // namespace ingot
