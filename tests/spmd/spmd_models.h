// The small model and data the multi-device tests train: an MLP (8 -> 16 relu -> 4 logits) with
// Adam and sparse categorical cross-entropy, on 64 random samples with labels in [0, 4), so that a
// run on several devices can be compared with the 1-device run on the same global batches.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ingot/trainer/distribution.h"
#include "ingot/trainer/model.h"
#include "compiler/codegen/parity.h"
#include "test_util.h"

namespace ingot::testing {

/// Dense(16, relu) -> Dense(4), built for (batch, 8) inputs; weights seeded by `seed`.
inline std::shared_ptr<Sequential> spmd_mlp(const std::string& name, uint64_t seed) {
  auto m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
                                          std::make_shared<Dense>(DenseOptions{.units = 4})},
      ModelOptions{.name = name, .seed = seed});
  m->build_model({1, 8});
  return m;
}

/// Adam(0.01), sparse categorical cross-entropy from logits, accuracy when `with_accuracy`, on
/// distribution `d` (null: one device).
inline void spmd_compile(Model& m, std::shared_ptr<distribution::Distribution> d, bool with_accuracy = true) {
  auto loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
      losses::SparseCategoricalCrossentropyOptions{.from_logits = true});
  std::vector<std::shared_ptr<metrics::Metric>> ms;
  if (with_accuracy) ms.push_back(metrics::get_for_compile("accuracy", {.loss = loss.get()}));
  m.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.01}),
             .loss = loss,
             .metrics = ms,
             .distribution = std::move(d)});
}

/// 64 samples: x (64, 8) f32 random from `seed`, y (64,) i32 = (i * label_step) % 4.
struct SpmdData {
  Array x;
  Array y = Array::empty({64}, DType::kI32);
  SpmdData(uint64_t seed, int32_t label_step) : x(random_array({64, 8}, DType::kF32, seed)) {
    for (int64_t i = 0; i < 64; ++i) y.data<int32_t>()[i] = static_cast<int32_t>((i * label_step) % 4);
  }
};

/// Every array of `got` has `want`'s shape and values within `tolerance`.
inline void expect_arrays_near(const std::vector<Array>& got, const std::vector<Array>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("array " + std::to_string(i));
    EXPECT_EQ(got[i].shape(), want[i].shape());
    expect_values(to_host(got[i]), want[i].to_doubles(), tolerance);
  }
}

}  // namespace ingot::testing
