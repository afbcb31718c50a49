// The smallest trainable model of the trainer tests: y = w x + b, one Dense unit on one feature
// with weights set by hand, so that losses, gradients and updates can be computed by hand.
#pragma once

#include <memory>
#include <vector>

#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot::testing {

/// Dense(1) built for (batch, 1) inputs with kernel [[w]] and bias [b].
inline std::shared_ptr<Sequential> linear(float w, float b) {
  auto model = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 1})});
  model->build_model({1, 1});
  model->set_weights({f32({w}, {1, 1}), f32({b}, {1})});
  return model;
}

}  // namespace ingot::testing
