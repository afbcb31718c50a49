// An MLP training step (value_and_grad + SGD) shared by the jit and fusion tests.
#pragma once

#include <vector>

#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "parity.h"

namespace ingot::testing {

/// Layer widths of a test MLP: features, hidden layers (each dense + relu), classes (dense).
struct MlpSizes {
  std::vector<int64_t> widths = {12, 16, 5};
  size_t num_layers() const { return widths.size() - 1; }
  /// Parameters: w_l (widths[l], widths[l+1]) and b_l (widths[l+1]) per layer.
  size_t num_params() const { return 2 * num_layers(); }
  int64_t classes() const { return widths.back(); }
};

/// Cross-entropy of the MLP's logits against integer labels. Arguments: w0, b0, w1, b1, ...,
/// x (B, features), labels (B) i32.
inline TraceFn mlp_loss(const MlpSizes& s) {
  return [s](const std::vector<Tensor>& a) {
    const size_t p = s.num_params();
    Tensor h = a[p];
    for (size_t l = 0; l < s.num_layers(); ++l) {
      h = matmul(h, a[2 * l]) + a[2 * l + 1];
      if (l + 1 < s.num_layers()) h = relu(h);
    }
    Tensor onehot = one_hot(a[p + 1], s.classes(), DType::kF32);
    return std::vector<Tensor>{mean(negate(sum(onehot * log_softmax(h), {1})))};
  };
}

/// One SGD step with learning rate `lr`: same arguments as mlp_loss, returns
/// [w0', b0', w1', b1', ..., loss] (the loss before the update).
inline TraceFn mlp_train_step(const MlpSizes& s, double lr) {
  return [s, lr](const std::vector<Tensor>& a) {
    std::vector<int64_t> argnums;
    for (size_t i = 0; i < s.num_params(); ++i) argnums.push_back(static_cast<int64_t>(i));
    std::vector<Tensor> vg = value_and_grad(mlp_loss(s), argnums)(a);
    std::vector<Tensor> out;
    for (size_t i = 0; i < s.num_params(); ++i) out.push_back(a[i] - lr * vg[1 + i]);
    out.push_back(vg[0]);
    return out;
  };
}

/// The signature of the step for a batch of `batch` rows.
inline std::vector<ir::TensorType> mlp_step_types(const MlpSizes& s, int64_t batch) {
  std::vector<ir::TensorType> t;
  for (size_t l = 0; l < s.num_layers(); ++l) {
    t.push_back({{s.widths[l], s.widths[l + 1]}, DType::kF32});
    t.push_back({{s.widths[l + 1]}, DType::kF32});
  }
  t.push_back({{batch, s.widths[0]}, DType::kF32});
  t.push_back({{batch}, DType::kI32});
  return t;
}

/// Seeded parameters [w0, b0, w1, b1, ...] (small, so the initial loss is near log(classes)).
inline std::vector<Array> mlp_weights(const MlpSizes& s, uint64_t seed) {
  std::vector<Array> p;
  for (size_t l = 0; l < s.num_layers(); ++l) {
    p.push_back(random_array({s.widths[l], s.widths[l + 1]}, DType::kF32, seed + 2 * l, -0.3, 0.3));
    p.push_back(random_array({s.widths[l + 1]}, DType::kF32, seed + 2 * l + 1, -0.1, 0.1));
  }
  return p;
}

/// A seeded batch [x, labels] of `batch` rows.
inline std::vector<Array> mlp_batch(const MlpSizes& s, int64_t batch, uint64_t seed) {
  return {random_array({batch, s.widths[0]}, DType::kF32, seed, -1, 1),
          random_array({batch}, DType::kI32, seed + 1, 0, static_cast<double>(s.classes() - 1))};
}

/// `a` followed by `b` (parameters then batch, as the step takes them).
inline std::vector<Array> concat_args(std::vector<Array> a, const std::vector<Array>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace ingot::testing
