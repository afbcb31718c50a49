// StepLayout: the named parts of the trainer steps' flat argument and result lists.
#include "ingot/trainer/step_state.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

StepSizes sizes() {
  StepSizes s;
  s[StepPart::kTrainable] = 3;
  s[StepPart::kNonTrainable] = 1;
  s[StepPart::kOptimizer] = 8;
  s[StepPart::kMetrics] = 4;
  s[StepPart::kX] = 2;
  s[StepPart::kY] = 1;
  s[StepPart::kSampleWeight] = 1;
  return s;
}

/// A state whose entries name their part and index ("optimizer3").
StepState<std::string> named(const StepSizes& s) {
  StepState<std::string> state;
  for (size_t p = 0; p < kNumStepParts; ++p) {
    const auto part = static_cast<StepPart>(p);
    for (size_t i = 0; i < s[part]; ++i) state.part(part).push_back(step_part_name(part) + std::to_string(i));
  }
  return state;
}

TEST(StepLayout, TheTrainStepsArgumentsAreTheStateThenTheBatch) {
  const StepLayout train = StepLayout::train_arguments(sizes());
  EXPECT_EQ(train.size(), 20u);
  EXPECT_EQ(train.state_size(), 16u);
  EXPECT_EQ(train.offset(StepPart::kOptimizer), 4u);
  EXPECT_EQ(train.offset(StepPart::kX), 16u);
  EXPECT_EQ(train.offset(StepPart::kSampleWeight), 19u);
  const std::vector<std::string> flat = train.flatten(named(sizes()));
  EXPECT_EQ(flat[0], "trainable0");
  EXPECT_EQ(flat[4], "optimizer0");
  EXPECT_EQ(flat[12], "metrics0");
  EXPECT_EQ(flat[19], "sample_weight0");
  const StepState<std::string> back = train.unflatten(flat);
  EXPECT_EQ(back.optimizer, named(sizes()).optimizer);
  EXPECT_EQ(back.y, std::vector<std::string>{"y0"});
}

TEST(StepLayout, TheTestStepTakesNoOptimizerState) {
  const StepLayout test = StepLayout::test_arguments(sizes());
  EXPECT_FALSE(test.has(StepPart::kOptimizer));
  EXPECT_EQ(test.count(StepPart::kOptimizer), 0u);
  EXPECT_EQ(test.offset(StepPart::kMetrics), 4u);
  EXPECT_EQ(test.size(), 12u);
  expect_error([&] { (void)test.offset(StepPart::kOptimizer); }, ErrorCode::kInternal, {"no 'optimizer' part"});
  // Unflattening the results ignores the logged values after the state.
  const StepLayout results = StepLayout::test_results(sizes());
  const StepState<std::string> r = results.unflatten(std::vector<std::string>{"m0", "m1", "m2", "m3", "loss", "acc"});
  EXPECT_EQ(r.metrics, (std::vector<std::string>{"m0", "m1", "m2", "m3"}));
  EXPECT_TRUE(r.trainable.empty());
}

TEST(StepLayout, TheDonatedArgumentsAreTheStateTheStepReturns) {
  const StepSizes s = sizes();
  const std::vector<int64_t> train = StepLayout::train_arguments(s).donatable(StepLayout::train_results(s));
  ASSERT_EQ(train.size(), 16u);
  EXPECT_EQ(train.front(), 0);
  EXPECT_EQ(train.back(), 15);
  // The test step returns only the metric state: T and NT are read, not donated.
  EXPECT_EQ(StepLayout::test_arguments(s).donatable(StepLayout::test_results(s)), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_TRUE(StepLayout::predict_arguments(s).donatable(StepLayout::test_results(s)).empty());
}

TEST(StepLayout, TheLossTakesTheTrainableVariablesFirstAndTheOptimizerLast) {
  const StepLayout loss = StepLayout::loss_arguments(sizes());
  EXPECT_EQ(loss.indices(StepPart::kTrainable), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(loss.offset(StepPart::kX), 4u);
  EXPECT_EQ(loss.offset(StepPart::kOptimizer), 8u);
}

TEST(StepLayout, WrongLengthsAreClearErrors) {
  const StepLayout train = StepLayout::train_arguments(sizes());
  StepState<std::string> state = named(sizes());
  state.optimizer.pop_back();
  expect_error([&] { (void)train.flatten(state); }, ErrorCode::kInvalidArgument,
               {"part 'optimizer' has 7 entries, the step takes 8"});
  expect_error([&] { (void)train.unflatten(std::vector<std::string>(19)); }, ErrorCode::kInvalidArgument,
               {"a flat list of 19 entries for a layout of 20"});
  expect_error([] { StepLayout({StepPart::kX, StepPart::kX}, StepSizes{}); }, ErrorCode::kInternal,
               {"part 'x' listed twice"});
}

}  // namespace
}  // namespace ingot
