// The model and data the resume tests share (backup_test.cpp, model_io_test.cpp): a run that is
// interrupted and resumed must end bitwise like an uninterrupted one.
#pragma once

#include <cmath>
#include <memory>

#include "ingot/trainer/model.h"

namespace ingot::testing {

/// Dense - Dropout - Dense trained by Adam with a schedule (or `optimizer`): a resume must
/// restore the weights, the dropout's seed state, Adam's moments and its iteration count.
inline std::shared_ptr<Sequential> make_model(std::shared_ptr<optimizers::Optimizer> optimizer = nullptr,
                                              std::shared_ptr<Layer> middle = nullptr, int64_t units = 8) {
  auto m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = units, .activation = "relu"}),
                                          middle ? middle : std::make_shared<Dropout>(DropoutOptions{.rate = 0.25}),
                                          std::make_shared<Dense>(DenseOptions{.units = 3})});
  if (!optimizer) {
    optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{
        .learning_rate = optimizers::schedules::CosineDecay({.initial_learning_rate = 0.01, .decay_steps = 40})});
  }
  m->compile({.optimizer = std::move(optimizer),
              .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                  losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  return m;
}

/// 40 samples of 4 features (a sine pattern) and 3 classes derived from them.
struct ResumeData {
  Array x = Array::zeros({40, 4}, DType::kF32), y = Array::zeros({40}, DType::kI32);
  ResumeData() {
    for (int64_t i = 0; i < 160; ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
    for (int64_t i = 0; i < 40; ++i) y.data<int32_t>()[i] = x.data<float>()[4 * i] > 0 ? 1 : (i % 3 == 0 ? 2 : 0);
  }
};

}  // namespace ingot::testing
