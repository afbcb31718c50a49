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
      if (is_floating(v->dtype())) {
        EXPECT_EQ(v->dtype(), DType::kF32) << v->name();
      }
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
    if (is_floating(v->dtype())) {
      EXPECT_EQ(v->value().dtype(), DType::kF32) << v->name();
    }
  }
}

/// The traced forward pass of `model` for inputs (4, features) f32.
ir::Graph forward_graph(Model& model, int64_t features) {
  std::vector<ir::TensorType> types;
  for (Variable* v : model.variables()) types.push_back(v->type());
  types.push_back({{4, features}, DType::kF32});
  return trace(model.forward_fn(false), types, "forward");
}

/// The output dtypes of `op`'s nodes in g, in graph order.
std::vector<DType> op_dtypes(const ir::Graph& g, const std::string& op) {
  std::vector<DType> out;
  for (ir::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.node(n).op == op) out.push_back(g.type(g.node(n).outputs.at(0)).dtype);
  }
  return out;
}

/// Dense(16, relu) -> Dense(8, relu) -> Dense(3) -> Activation(softmax) under `policy`, with the
/// given layers' own policies ("" : the model's).
std::shared_ptr<Sequential> classifier(const std::string& policy, const std::vector<std::string>& own) {
  std::vector<std::shared_ptr<Layer>> layers = {std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
                                                std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"}),
                                                std::make_shared<Dense>(DenseOptions{.units = 3}),
                                                std::make_shared<Activation>("softmax")};
  for (size_t i = 0; i < own.size(); ++i) {
    if (!own[i].empty()) layers[i]->set_dtype_policy(own[i]);
  }
  return std::make_shared<Sequential>(layers, ModelOptions{.dtype_policy = policy});
}

void expect_close_to(const Array& got, const Array& want, double tol) {
  ASSERT_EQ(got.dtype(), DType::kF32);
  const std::vector<double> w = want.to_doubles(), o = got.to_doubles();
  ASSERT_EQ(o.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(o[i], w[i], tol * std::max(1.0, std::abs(w[i]))) << i;
}

TEST(DTypePolicy, Float32OutputLayersInAMixedBfloat16Model) {
  const Data d;
  auto f32 = classifier("float32", {});
  f32->build_model({1, 5});
  auto mixed = classifier("mixed_bfloat16", {"", "", "float32", "float32"});
  mixed->build_model({1, 5});
  mixed->set_weights(f32->get_weights());
  EXPECT_EQ(mixed->layers()[2]->dtype_policy(), "float32");
  EXPECT_EQ(mixed->layers()[0]->dtype_policy(), "");
  // The first two matmuls are bf16, the output Dense's is f32 (f32 input converted from the bf16
  // relu, f32 kernel), and the softmax (its exp) computes in f32.
  const ir::Graph g = forward_graph(*mixed, 5);
  EXPECT_EQ(op_dtypes(g, "dot_general"), (std::vector<DType>{DType::kBF16, DType::kBF16, DType::kF32}));
  EXPECT_EQ(op_dtypes(g, "exponential"), std::vector<DType>{DType::kF32});
  // All in bf16, the softmax is bf16 too.
  auto low = classifier("mixed_bfloat16", {});
  low->build_model({1, 5});
  const ir::Graph all_low = forward_graph(*low, 5);
  EXPECT_EQ(op_dtypes(all_low, "dot_general"), std::vector<DType>(3, DType::kBF16));
  EXPECT_EQ(op_dtypes(all_low, "exponential"), std::vector<DType>{DType::kBF16});
  expect_close_to(mixed->predict_on_batch(d.x), f32->predict_on_batch(d.x), 2e-2);
}

TEST(DTypePolicy, AMixedLayerInAFloat32ModelIsFollowedByF32Layers) {
  const Data d;
  auto f32 = classifier("float32", {});
  f32->build_model({1, 5});
  auto mixed = classifier("float32", {"mixed_float16"});
  mixed->build_model({1, 5});
  mixed->set_weights(f32->get_weights());
  // The first Dense computes in f16; the next layer converts its f16 input back to f32.
  const ir::Graph g = forward_graph(*mixed, 5);
  EXPECT_EQ(op_dtypes(g, "dot_general"), (std::vector<DType>{DType::kF16, DType::kF32, DType::kF32}));
  expect_close_to(mixed->predict_on_batch(d.x), f32->predict_on_batch(d.x), 5e-3);
}

TEST(DTypePolicy, FunctionalLayersKeepTheirPolicysDtype) {
  auto first = std::make_shared<Dense>(DenseOptions{.units = 4});
  first->set_dtype_policy("mixed_bfloat16");
  const KerasTensor in = Input({5});
  const KerasTensor h = (*first)(in);
  const KerasTensor out = (*std::make_shared<Dense>(DenseOptions{.units = 2}))(h);
  EXPECT_EQ(h.dtype(), DType::kBF16);
  EXPECT_EQ(out.dtype(), DType::kF32);
  Functional model(in, out);
  model.build_model({1, 5});
  EXPECT_EQ(op_dtypes(forward_graph(model, 5), "dot_general"), (std::vector<DType>{DType::kBF16, DType::kF32}));
}

/// Records the compute dtype and input dtype call() saw; throws when asked to.
class Probe final : public Layer {
 public:
  std::string class_name() const override { return "Probe"; }
  Tensor call(LayerContext& ctx, const Tensor& x) override {
    seen_compute = ctx.compute_dtype();
    seen_input = x.dtype();
    if (fail) throw Error(ErrorCode::kInvalidArgument, "probe failed");
    return x;
  }
  std::optional<DType> seen_compute;
  DType seen_input = DType::kI32;
  bool fail = false;
};

TEST(DTypePolicy, ALayersPolicySwitchesTheContextOnlyDuringItsCall) {
  Probe probe;
  probe.set_dtype_policy("float32");
  const auto run = [&](bool fail) {
    trace(
        [&](const std::vector<Tensor>& a) {
          LayerContext ctx(/*training=*/false);
          ctx.set_compute_dtype(DType::kBF16);
          probe.fail = fail;
          Tensor y = a[0];
          if (fail) {
            EXPECT_THROW(probe(ctx, a[0]), Error);
          } else {
            y = probe(ctx, a[0]);
          }
          EXPECT_EQ(ctx.compute_dtype(), std::optional<DType>(DType::kBF16));  // restored
          return std::vector<Tensor>{y};
        },
        {{{2, 3}, DType::kBF16}}, "probe");
  };
  run(false);
  EXPECT_EQ(probe.seen_compute, std::optional<DType>(DType::kF32));
  EXPECT_EQ(probe.seen_input, DType::kF32);  // the bf16 input converted to the layer's f32
  probe.seen_compute.reset();
  run(true);
  EXPECT_EQ(probe.seen_compute, std::optional<DType>(DType::kF32));
}

TEST(DTypePolicy, BadLayerPoliciesAreErrorsThatChangeNothing) {
  Dense dense(DenseOptions{.units = 2, .name = "head"});
  expect_error([&] { dense.set_dtype_policy("float16"); }, ErrorCode::kInvalidArgument,
               {"'head'", "dtype_policy", "'float16'", "mixed_bfloat16"});
  EXPECT_EQ(dense.dtype_policy(), "");
  dense.set_dtype_policy("mixed_float16");
  expect_error([&] { dense.set_dtype_policy("bfloat16"); }, ErrorCode::kInvalidArgument, {"'head'", "'bfloat16'"});
  EXPECT_EQ(dense.dtype_policy(), "mixed_float16");
  auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<Layer>>{
      std::make_shared<Dense>(DenseOptions{.units = 2, .name = "built"})});
  model->build_model({1, 3});
  expect_error([&] { model->layers()[0]->set_dtype_policy("float32"); }, ErrorCode::kFailedPrecondition,
               {"'built'", "built layer", "before"});
  EXPECT_EQ(model->layers()[0]->dtype_policy(), "");
}

TEST(DTypePolicy, UnknownPolicyIsAnError) {
  expect_error([] { Sequential({}, ModelOptions{.dtype_policy = "float16"}); }, ErrorCode::kInvalidArgument,
               {"dtype_policy", "float16", "mixed_bfloat16"});
}

}  // namespace
}  // namespace ingot
