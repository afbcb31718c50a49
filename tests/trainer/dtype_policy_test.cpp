// Dtype policies (Keras's mixed_bfloat16 / mixed_float16): f32 variables, low-precision
// computation, f32 outputs; training with them; unknown policy names.
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/trainer/loss_scale.h"
#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

std::shared_ptr<Sequential> mlp(const std::string& policy) {
  return std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
                                          std::make_shared<BatchNormalization>(BatchNormalizationOptions{}),
                                          std::make_shared<Dropout>(DropoutOptions{.rate = 0.1}),
                                          std::make_shared<Dense>(DenseOptions{.units = 3})},
      ModelOptions{.dtype_policy = policy});
}

struct Data {
  Array x = Array::zeros({64, 5}, DType::kF32), y = Array::zeros({64}, DType::kI32);
  Data() {
    for (int64_t i = 0; i < 320; ++i) x.data<float>()[i] = std::sin(0.31f * static_cast<float>(i));
    for (int64_t i = 0; i < 64; ++i) y.data<int32_t>()[i] = x.data<float>()[5 * i] > 0.3f ? 2 : (x.data<float>()[5 * i + 1] > 0 ? 1 : 0);
  }
};

TEST(DTypePolicy, MixedModelsComputeInLowPrecisionWithF32VariablesAndOutputs) {
  const Data d;
  auto f32 = mlp("float32");
  f32->build_model({1, 5});
  for (const std::string policy : {"mixed_bfloat16", "mixed_float16"}) {
    SCOPED_TRACE(policy);
    auto mixed = mlp(policy);
    mixed->build_model({1, 5});
    mixed->set_weights(f32->get_weights());
    EXPECT_EQ(mixed->compute_dtype(), policy == "mixed_float16" ? DType::kF16 : DType::kBF16);
    for (Variable* v : mixed->variables()) {
      if (is_floating(v->dtype())) EXPECT_EQ(v->dtype(), DType::kF32) << v->name();
    }
    // The traced forward pass computes in the low dtype (its matmuls are bf16 / f16).
    std::vector<ir::TensorType> types;
    for (Variable* v : mixed->variables()) types.push_back(v->type());
    types.push_back({{4, 5}, DType::kF32});
    const ir::Graph g = trace(mixed->forward_fn(false), types, "forward");
    int64_t low = 0;
    for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
      if (g.node(n).op == "dot_general" && g.type(g.node(n).outputs.at(0)).dtype == mixed->compute_dtype()) ++low;
    }
    EXPECT_EQ(low, 2);
    // Outputs are f32 and within the low precision's rounding of the f32 model's.
    const Array want = f32->predict_on_batch(d.x), got = mixed->predict_on_batch(d.x);
    ASSERT_EQ(got.dtype(), DType::kF32);
    const double tol = policy == "mixed_float16" ? 5e-3 : 4e-2;
    const std::vector<double> w = want.to_doubles(), o = got.to_doubles();
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(o[i], w[i], tol * std::max(1.0, std::abs(w[i]))) << i;
  }
}

TEST(DTypePolicy, MixedFloat16TrainsWithALossScaleOptimizer) {
  const Data d;
  auto model = mlp("mixed_float16");
  model->compile({.optimizer = std::make_shared<optimizers::LossScaleOptimizer>(optimizers::LossScaleOptimizerOptions{
                      .inner_optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.01})}),
                  .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                      losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  auto h = model->fit({.x = d.x, .y = d.y, .batch_size = 16, .epochs = 15, .verbose = 0});
  const std::vector<double>& loss = h->values("loss");
  EXPECT_LT(loss.back(), 0.6 * loss.front());
  for (double l : loss) EXPECT_TRUE(std::isfinite(l));
  for (Variable* v : model->variables()) {
    if (is_floating(v->dtype())) EXPECT_EQ(v->value().dtype(), DType::kF32) << v->name();
  }
}

TEST(DTypePolicy, UnknownPolicyIsAnError) {
  expect_error([] { Sequential({}, ModelOptions{.dtype_policy = "float16"}); }, ErrorCode::kInvalidArgument,
               {"dtype_policy", "float16", "mixed_bfloat16"});
}

}  // namespace
}  // namespace ingot
