// Dtype policies (Keras's mixed_bfloat16 / mixed_float16): f32 variables, low-precision
// computation, f32 outputs; training with them; unknown policy names.
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/jit/jit.h"
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
    for (int64_t i = 0; i < 64; ++i)
      y.data<int32_t>()[i] = x.data<float>()[5 * i] > 0.3f ? 2 : (x.data<float>()[5 * i + 1] > 0 ? 1 : 0);
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
  model->compile(
      {.optimizer = std::make_shared<optimizers::LossScaleOptimizer>(optimizers::LossScaleOptimizerOptions{
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

/// The traced forward pass of `model` for inputs (4, features) f32 (the train step's if `training`).
ir::Graph forward_graph(Model& model, int64_t features, bool training = false) {
  std::vector<ir::TensorType> types;
  for (Variable* v : model.variables()) types.push_back(v->type());
  types.push_back({{4, features}, DType::kF32});
  return trace(model.forward_fn(training), types, "forward");
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
  std::vector<std::shared_ptr<Layer>> layers = {
      std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
      std::make_shared<Dense>(DenseOptions{.units = 8, .activation = "relu"}),
      std::make_shared<Dense>(DenseOptions{.units = 3}), std::make_shared<Activation>("softmax")};
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
  auto model = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 2, .name = "built"})});
  model->build_model({1, 3});
  expect_error([&] { model->layers()[0]->set_dtype_policy("float32"); }, ErrorCode::kFailedPrecondition,
               {"'built'", "built layer", "before"});
  EXPECT_EQ(model->layers()[0]->dtype_policy(), "");
}

TEST(DTypePolicy, NormalizationLayersComputeInFloat32UnderMixedPolicies) {
  const Data d;
  const auto model = [](const std::string& policy) {
    return std::make_shared<Sequential>(
        std::vector<std::shared_ptr<Layer>>{
            std::make_shared<Dense>(DenseOptions{.units = 6}), std::make_shared<BatchNormalization>(),
            std::make_shared<LayerNormalization>(), std::make_shared<Dense>(DenseOptions{.units = 3})},
        ModelOptions{.dtype_policy = policy});
  };
  auto f32 = model("float32");
  f32->build_model({1, 5});
  auto mixed = model("mixed_bfloat16");
  mixed->build_model({1, 5});
  mixed->set_weights(f32->get_weights());
  // In the train step's forward pass the matmuls are bf16; the reductions (each layer's mean,
  // and its variance's mean and mean of squares: 3 + 3) and both rsqrts are f32.
  const ir::Graph g = forward_graph(*mixed, 5, /*training=*/true);
  EXPECT_EQ(op_dtypes(g, "dot_general"), std::vector<DType>(2, DType::kBF16));
  EXPECT_EQ(op_dtypes(g, "rsqrt"), std::vector<DType>(2, DType::kF32));
  EXPECT_EQ(op_dtypes(g, "reduce"), std::vector<DType>(6, DType::kF32));
  expect_close_to(mixed->predict_on_batch(d.x), f32->predict_on_batch(d.x), 4e-2);
}

/// Batches (32, 2) of values exact in f16 with a large mean and a small spread: column 0 holds
/// 300 and 300.25, column 1 308 and 308.25, half each (mean x.125, variance 1/64). f16 holds
/// them exactly, but an f16 mean rounds to a multiple of 0.25 (f16's ulp at 300), which adds
/// 0.125^2 = 1/64 to an f16 variance: twice the true one.
std::vector<Array> large_mean_batches() {
  std::vector<Array> out;
  for (int64_t b = 0; b < 4; ++b) {
    Array x = Array::zeros({32, 2}, DType::kF32);
    for (int64_t i = 0; i < 64; ++i) {
      const int64_t sample = i / 2, column = i % 2;
      x.data<float>()[i] =
          300.0f + 8.0f * static_cast<float>(column) + 0.25f * static_cast<float>((sample + b + column) % 2);
    }
    out.push_back(std::move(x));
  }
  return out;
}

/// The host statistics of column `c` of x (32, 2): {mean, biased variance}, in double.
std::pair<double, double> host_stats(const Array& x, int64_t c) {
  double m = 0, v = 0;
  for (int64_t i = 0; i < 32; ++i) m += x.data<float>()[2 * i + c] / 32.0;
  for (int64_t i = 0; i < 32; ++i) v += std::pow(x.data<float>()[2 * i + c] - m, 2) / 32.0;
  return {m, v};
}

TEST(DTypePolicy, BatchNormMovingStatisticsUnderMixedFloat16MatchFloat32) {
  const std::vector<Array> batches = large_mean_batches();
  const double momentum = 0.5;
  // The expected moving statistics (host, double) and the ones an f16 computation of the batch
  // statistics (mean and variance traced in f16) would give.
  Jitted f16_stats = jit([](const std::vector<Tensor>& a) {
    const Tensor h = convert(a[0], DType::kF16);
    return std::vector<Tensor>{convert(mean(h, {0}), DType::kF32), convert(variance(h, {0}), DType::kF32)};
  });
  std::vector<double> want_mean(2, 0.0), want_var(2, 1.0), f16_mean(2, 0.0), f16_var(2, 1.0);
  for (const Array& x : batches) {
    const std::vector<Array> s = f16_stats({x});
    for (int64_t c = 0; c < 2; ++c) {
      const auto [m, v] = host_stats(x, c);
      want_mean[c] = want_mean[c] * momentum + m * (1 - momentum);
      want_var[c] = want_var[c] * momentum + v * (1 - momentum);
      f16_mean[c] = f16_mean[c] * momentum + s[0].to_doubles()[c] * (1 - momentum);
      f16_var[c] = f16_var[c] * momentum + s[1].to_doubles()[c] * (1 - momentum);
    }
  }
  const double tol = 1e-3;
  // f16 statistics would fail the tolerance (the variance visibly so).
  EXPECT_GT(
      std::max(std::abs(f16_var[0] - want_var[0]) / want_var[0], std::abs(f16_var[1] - want_var[1]) / want_var[1]),
      10 * tol);
  for (const std::string policy : {"float32", "mixed_float16"}) {
    SCOPED_TRACE(policy);
    auto bn = std::make_shared<BatchNormalization>(BatchNormalizationOptions{.momentum = momentum});
    Sequential model({bn, std::make_shared<Dense>(DenseOptions{.units = 1})}, ModelOptions{.dtype_policy = policy});
    model.compile(
        {.optimizer = std::make_shared<optimizers::LossScaleOptimizer>(optimizers::LossScaleOptimizerOptions{
             .inner_optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.01})}),
         .loss = std::make_shared<losses::MeanSquaredError>()});
    for (const Array& x : batches) model.train_on_batch(x, Array::zeros({32, 1}, DType::kF32));
    const std::vector<Variable*> stats = bn->non_trainable_variables();
    ASSERT_EQ(stats.size(), 2u);
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_EQ(stats[0]->value().dtype(), DType::kF32);
      EXPECT_NEAR(stats[0]->value().to_doubles()[c], want_mean[c], tol * want_mean[c]) << c;
      EXPECT_NEAR(stats[1]->value().to_doubles()[c], want_var[c], tol * want_var[c]) << c;
    }
  }
}

TEST(DTypePolicy, LayerNormUnderMixedFloat16MatchesFloat32OnLargeMeanInputs) {
  // (4, 8) rows of 300 + 0.25 k, k in 0..4: exact in f16, standard deviation ~0.35.
  Array x = Array::zeros({4, 8}, DType::kF32);
  for (int64_t i = 0; i < 32; ++i) x.data<float>()[i] = 300.0f + 0.25f * static_cast<float>((3 * i) % 5);
  const auto run = [&](const std::string& policy) {
    Sequential model({std::make_shared<LayerNormalization>()}, ModelOptions{.dtype_policy = policy});
    return model.predict_on_batch(x).to_doubles();
  };
  const std::vector<double> want = run("float32"), got = run("mixed_float16");
  // The same normalization computed in f16 (x - mean) * rsqrt(var + 1e-3).
  Jitted f16_ln = jit([](const std::vector<Tensor>& a) {
    const Tensor h = convert(a[0], DType::kF16);
    const Tensor y = (h - mean(h, {1}, true)) * rsqrt(variance(h, {1}, true) + 1e-3);
    return std::vector<Tensor>{convert(y, DType::kF32)};
  });
  const std::vector<double> f16 = f16_ln({x}).at(0).to_doubles();
  const double tol = 5e-3;  // f16 rounding of outputs of size ~1.5
  double worst_f16 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << i;
    worst_f16 = std::max(worst_f16, std::abs(f16[i] - want[i]));
  }
  EXPECT_GT(worst_f16, 10 * tol);
}

TEST(DTypePolicy, MixedBfloat16BatchNormCnnTrains) {
  // 8x8 images: class 1 has a bright top half, class 0 a bright bottom half, plus a ripple.
  const int64_t n = 64;
  Array x = Array::zeros({n, 8, 8, 1}, DType::kF32), y = Array::zeros({n}, DType::kI32);
  for (int64_t s = 0; s < n; ++s) {
    y.data<int32_t>()[s] = static_cast<int32_t>(s % 2);
    for (int64_t p = 0; p < 64; ++p) {
      const bool top = p < 32;
      x.data<float>()[s * 64 + p] =
          (top == (s % 2 == 1) ? 1.0f : 0.2f) + 0.3f * std::sin(0.7f * static_cast<float>(s * 64 + p));
    }
  }
  auto head = std::make_shared<Dense>(DenseOptions{.units = 2});
  head->set_dtype_policy("float32");
  Sequential model(
      {std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 4}), std::make_shared<BatchNormalization>(),
       std::make_shared<Activation>("relu"), std::make_shared<MaxPooling2D>(), std::make_shared<Flatten>(), head},
      ModelOptions{.dtype_policy = "mixed_bfloat16"});
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.01}),
                 .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                     losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  auto h = model.fit({.x = x, .y = y, .batch_size = 16, .epochs = 8, .verbose = 0});
  const std::vector<double>& loss = h->values("loss");
  for (double l : loss) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(loss.back(), 0.5 * loss.front());
  for (Variable* v : model.variables()) EXPECT_EQ(v->value().dtype(), DType::kF32) << v->name();
}

TEST(DTypePolicy, UnknownPolicyIsAnError) {
  expect_error([] { Sequential({}, ModelOptions{.dtype_policy = "float16"}); }, ErrorCode::kInvalidArgument,
               {"dtype_policy", "float16", "mixed_bfloat16"});
}

}  // namespace
}  // namespace ingot
