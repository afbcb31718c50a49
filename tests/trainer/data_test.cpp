// Data adapters, validation split, class weights and the epoch iterator.
#include "ingot/trainer/data.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

Array rows(int64_t n, int64_t width) {
  std::vector<float> v(static_cast<size_t>(n * width));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i / static_cast<size_t>(width));  // row index
  return Array::from_vector<float>(v, {n, width});
}

std::vector<float> first_column(const Array& a) {
  std::vector<float> out;
  const std::vector<float> v = a.to_vector<float>();
  const int64_t w = a.shape()[1];
  for (int64_t r = 0; r < a.shape()[0]; ++r) out.push_back(v[static_cast<size_t>(r * w)]);
  return out;
}

TEST(ArrayDataAdapter, BatchesInOrderWithARaggedLastBatch) {
  ArrayDataAdapter data(rows(7, 2), testing::f32({0, 1, 2, 3, 4, 5, 6}, {7}), Array(), 3, false);
  EXPECT_EQ(data.num_batches(), 3);
  EXPECT_EQ(data.x_types().at(0).shape, (Shape{3, 2}));
  auto next = data.epoch(0);
  std::vector<std::vector<float>> seen;
  while (std::optional<Batch> b = next()) {
    EXPECT_FALSE(b->sample_weight.valid());
    EXPECT_EQ(first_column(b->x[0]), b->y[0].to_vector<float>());  // x and y rows stay paired
    seen.push_back(b->y[0].to_vector<float>());
  }
  EXPECT_EQ(seen, (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}, {6}}));
}

TEST(ArrayDataAdapter, ShuffleIsASeededPermutationPerEpoch) {
  ArrayDataAdapter data(rows(10, 1), Array(), Array(), 4, true, 42);
  auto collect = [&](int64_t epoch) {
    std::vector<float> all;
    auto next = data.epoch(epoch);
    while (std::optional<Batch> b = next()) {
      for (float v : b->x[0].to_vector<float>()) all.push_back(v);
    }
    return all;
  };
  const std::vector<float> e0 = collect(0), e1 = collect(1);
  EXPECT_EQ(e0, collect(0));  // same seed and epoch: same order
  EXPECT_NE(e0, e1);          // another epoch: another order
  std::vector<float> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));  // nothing lost or repeated
}

TEST(ArrayDataAdapter, BadInputsAreErrors) {
  expect_error([] { ArrayDataAdapter(rows(4, 1), Array(), Array(), 0, false); }, ErrorCode::kInvalidArgument,
               {"batch_size", "0"});
  expect_error([] { ArrayDataAdapter(rows(4, 1), rows(5, 1), Array(), 2, false); }, ErrorCode::kInvalidArgument,
               {"y", "(5, 1)", "4 samples"});
  expect_error([] { ArrayDataAdapter(rows(4, 1), Array(), rows(4, 2), 2, false); }, ErrorCode::kInvalidArgument,
               {"sample_weight", "1-D"});
  expect_error([] { ArrayDataAdapter(Array::scalar(1, DType::kF32), Array(), Array(), 2, false); },
               ErrorCode::kInvalidArgument, {"x must be"});
}

TEST(ValidationSplit, LastFractionBeforeShufflingWithFloorForTraining) {
  const Batch all{rows(10, 1), testing::f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}), Array()};
  const auto [train, val] = split_validation(all, 0.25);  // floor(10 * 0.75) = 7 for training
  EXPECT_EQ(train.y[0].to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(val.y[0].to_vector<float>(), (std::vector<float>{7, 8, 9}));
  expect_error([&] { split_validation(all, 1.0); }, ErrorCode::kInvalidArgument, {"validation_split", "[0, 1)"});
  expect_error([&] { split_validation(all, -0.1); }, ErrorCode::kInvalidArgument, {"validation_split"});
  const Batch one{rows(1, 1), Array(), Array()};
  expect_error([&] { split_validation(one, 0.5); }, ErrorCode::kInvalidArgument,
               {"0.5", "1 samples", "0 for training"});
}

TEST(ClassWeights, BecomeSampleWeightsFromIntegerOrOneHotLabels) {
  const std::vector<std::pair<int64_t, double>> cw = {{0, 1.0}, {1, 3.0}};
  EXPECT_EQ(class_weights_to_sample_weights(testing::i32({1, 0, 2, 1}, {4}), cw).to_vector<float>(),
            (std::vector<float>{3, 1, 1, 3}));
  EXPECT_EQ(class_weights_to_sample_weights(testing::f32({0, 1, 1, 0}, {2, 2}), cw).to_vector<float>(),
            (std::vector<float>{3, 1}));
}

TEST(EpochIterator, StepsPerEpochAndPrefetchedEpochs) {
  auto data = std::make_shared<ArrayDataAdapter>(rows(10, 1), Array(), Array(), 5, false);
  EpochIterator it(data, 1);
  EXPECT_EQ(it.num_steps(), 1);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    it.begin_epoch(epoch);
    std::optional<Batch> b = it.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(first_column(b->x[0]), (std::vector<float>{0, 1, 2, 3, 4}));
    EXPECT_FALSE(it.next().has_value());  // steps_per_epoch = 1
  }
  expect_error([&] { EpochIterator(data, 3); }, ErrorCode::kInvalidArgument, {"steps_per_epoch 3", "2 batches"});
  expect_error([&] { EpochIterator(data, 0); }, ErrorCode::kInvalidArgument, {"steps_per_epoch"});
}

}  // namespace
}  // namespace ingot
