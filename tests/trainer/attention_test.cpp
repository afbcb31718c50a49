// MultiHeadAttention against a host reference of the formula (Vaswani et al. 2017 with Keras's
// layout and masking), gradients against finite differences, and in a model trained with fit.
#include "ingot/trainer/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autodiff/gradcheck.h"
#include "compiler/codegen/parity.h"
#include "ingot/interp/interpreter.h"
#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

constexpr int64_t B = 2, T = 4, F = 5, H = 2, K = 3, V = 2, O = 4;

std::shared_ptr<MultiHeadAttention> make_mha(bool causal = false) {
  auto mha = std::make_shared<MultiHeadAttention>(MultiHeadAttentionOptions{
      .num_heads = H, .key_dim = K, .value_dim = V, .output_shape = O, .use_causal_mask = causal});
  mha->build_for({B, T, F}, {B, T, F}, {B, T, F});
  return mha;
}

/// Self-attention of x (B, T, F) over itself with the layer's variables bound to args[1...]:
/// [output, scores]; `pad` (B, 1, T) bool masks key positions when valid.
TraceFn attention_fn(const std::shared_ptr<MultiHeadAttention>& mha, Array pad, bool causal) {
  return [mha, pad, causal](const std::vector<Tensor>& a) {
    LayerContext ctx(false);
    const std::vector<Variable*> vars = mha->variables();
    for (size_t i = 0; i < vars.size(); ++i) ctx.bind(*vars[i], a[i + 1]);
    AttentionInputs in{.use_causal_mask = causal};
    if (pad.valid()) in.attention_mask = constant(pad);
    AttentionOutput r = mha->attend_with_scores(ctx, a[0], a[0], in);
    return std::vector<Tensor>{r.output, r.scores};
  };
}

/// The formula on the host in f64. Variables in creation order: q, k, v, output kernels, then
/// q, k, v, output biases.
std::vector<double> reference(const std::vector<std::vector<double>>& w, const std::vector<double>& x,
                              const std::vector<bool>& pad, bool causal, std::vector<double>* scores) {
  const auto &wq = w[0], &wk = w[1], &wv = w[2], &wo = w[3], &bq = w[4], &bk = w[5], &bv = w[6], &bo = w[7];
  auto proj = [&](const std::vector<double>& kern, const std::vector<double>& bias, int64_t d, int64_t b, int64_t t,
                  int64_t h, int64_t j) {
    double acc = bias[h * d + j];
    for (int64_t f = 0; f < F; ++f) acc += x[(b * T + t) * F + f] * kern[(f * H + h) * d + j];
    return acc;
  };
  std::vector<double> out(B * T * O, 0.0);
  scores->assign(B * H * T * T, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> logit(T);
        for (int64_t s = 0; s < T; ++s) {
          double dot = 0;
          for (int64_t j = 0; j < K; ++j)
            dot += proj(wq, bq, K, b, t, h, j) / std::sqrt(double(K)) * proj(wk, bk, K, b, s, h, j);
          const bool keep = (pad.empty() || pad[b * T + s]) && (!causal || s <= t);
          logit[s] = dot + (keep ? 0.0 : -1e9);
        }
        double mx = logit[0], sum = 0;
        for (double l : logit) mx = std::max(mx, l);
        for (double& l : logit) sum += (l = std::exp(l - mx));
        for (int64_t s = 0; s < T; ++s) (*scores)[((b * H + h) * T + t) * T + s] = logit[s] / sum;
        for (int64_t j = 0; j < V; ++j) {
          double head = 0;
          for (int64_t s = 0; s < T; ++s) head += logit[s] / sum * proj(wv, bv, V, b, s, h, j);
          for (int64_t o = 0; o < O; ++o) out[(b * T + t) * O + o] += head * wo[(h * V + j) * O + o];
        }
      }
    }
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t o = 0; o < O; ++o) out[(b * T + t) * O + o] += bo[o];
    }
  }
  return out;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " " << i;
}

TEST(MultiHeadAttention, MatchesTheFormulaWithCausalAndPaddingMasks) {
  auto mha = make_mha();
  std::vector<Array> args = {testing::random_array({B, T, F}, DType::kF32, 1)};
  std::vector<std::vector<double>> w;
  uint64_t seed = 2;
  for (Variable* v : mha->variables()) {
    args.push_back(testing::random_array(v->shape(), DType::kF32, seed++, -1, 1));  // non-zero biases too
    w.push_back(args.back().to_doubles());
  }
  ASSERT_EQ(w.size(), 8u);
  EXPECT_EQ(mha->variables()[0]->shape(), (Shape{F, H, K}));
  EXPECT_EQ(mha->variables()[3]->shape(), (Shape{H, V, O}));
  // Batch 0 attends to every key; batch 1 not to its last key; with and without causality.
  Array pad = Array::from_vector<bool>({true, true, true, true, true, true, true, false}, {B, 1, T});
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    ir::Graph g = trace(
        attention_fn(mha, pad, causal),
        [&] {
          std::vector<ir::TensorType> t;
          for (const Array& a : args) t.push_back({a.shape(), a.dtype()});
          return t;
        }(),
        "mha");
    const std::vector<Array> out = interp::interpret(g, args);
    std::vector<double> want_scores;
    std::vector<bool> keep;
    for (double v : pad.to_doubles()) keep.push_back(v != 0);
    const std::vector<double> want = reference(w, args[0].to_doubles(), keep, causal, &want_scores);
    expect_near_all(out[0].to_doubles(), want, 1e-5, "output");
    expect_near_all(out[1].to_doubles(), want_scores, 1e-6, "scores");
    // The compiled step agrees with the interpreter.
    const std::vector<Array> compiled = jit(attention_fn(mha, pad, causal), {.name = "mha"})(args);
    expect_near_all(compiled[0].to_doubles(), out[0].to_doubles(), 1e-5, "compiled output");
  }
}

TEST(MultiHeadAttention, MasksStayFiniteInFloat16) {
  // mixed_float16 computes attention in f16: the mask's large negative must not round to -inf
  // ((1 - mask) * -inf is NaN where the mask is 1). Keras uses -3e4 there.
  auto mha = make_mha();
  std::vector<Array> args32 = {testing::random_array({B, T, F}, DType::kF32, 4)};
  for (Variable* v : mha->variables())
    args32.push_back(testing::random_array(v->shape(), DType::kF32, 10 + args32.size(), -1, 1));
  std::vector<Array> args16;
  std::vector<ir::TensorType> t32, t16;
  for (const Array& a : args32) {
    args16.push_back(Array::from_doubles(a.to_doubles(), a.shape(), DType::kF16));
    t32.push_back({a.shape(), DType::kF32});
    t16.push_back({a.shape(), DType::kF16});
  }
  Array pad = Array::from_vector<bool>({true, true, true, true, true, true, true, false}, {B, 1, T});
  const std::vector<Array> want = interp::interpret(trace(attention_fn(mha, pad, true), t32, "mha32"), args32);
  const std::vector<Array> got = interp::interpret(trace(attention_fn(mha, pad, true), t16, "mha16"), args16);
  for (size_t o = 0; o < 2; ++o) {
    const std::vector<double> g = got[o].to_doubles(), w = want[o].to_doubles();
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_TRUE(std::isfinite(g[i])) << "output " << o << " element " << i;
      EXPECT_NEAR(g[i], w[i], 0.05 * std::max(1.0, std::abs(w[i]))) << "output " << o << " element " << i;
    }
  }
}

TEST(MultiHeadAttention, AFullyMaskedRowAttendsUniformly) {
  auto mha = make_mha();
  std::vector<Array> args = {testing::random_array({B, T, F}, DType::kF32, 3)};
  for (Variable* v : mha->variables()) args.push_back(v->value());
  Array none = Array::from_vector<bool>(std::vector<bool>(B * T, false), {B, 1, T});
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  const std::vector<Array> out = interp::interpret(trace(attention_fn(mha, none, false), types, "mha"), args);
  for (double p : out[1].to_doubles()) EXPECT_NEAR(p, 1.0 / T, 1e-6);  // Keras: softmax of equal logits
}

TEST(MultiHeadAttention, GradientsMatchFiniteDifferences) {
  auto mha = make_mha();
  std::vector<Array> args = {testing::random_array({B, T, F}, DType::kF64, 4)};
  uint64_t seed = 5;
  for (Variable* v : mha->variables()) args.push_back(testing::random_array(v->shape(), DType::kF64, seed++, -1, 1));
  Array pad = Array::from_vector<bool>({true, true, true, true, true, false, true, true}, {B, 1, T});
  const TraceFn fn = attention_fn(mha, pad, true);
  testing::check_grads([fn](const std::vector<Tensor>& a) { return std::vector<Tensor>{fn(a)[0]}; }, args);
}

/// A causal self-attention block on (batch, T, F) with a residual connection (x + attention(x)):
/// what a transformer layer does, trained with fit.
class AttentionBlock final : public Model {
 public:
  AttentionBlock() : mha_(track(make_shared_mha())), head_(track(std::make_shared<Dense>(DenseOptions{.units = 1}))) {}
  Tensor call(LayerContext& ctx, const Tensor& x) override {
    return (*head_)(ctx, x + mha_->attend(ctx, x, x, {.use_causal_mask = true}));
  }

 private:
  static std::shared_ptr<MultiHeadAttention> make_shared_mha() {
    return std::make_shared<MultiHeadAttention>(MultiHeadAttentionOptions{.num_heads = 2, .key_dim = 4});
  }
  std::shared_ptr<MultiHeadAttention> mha_;
  std::shared_ptr<Dense> head_;
};

TEST(MultiHeadAttention, TrainsInAModelWithFit) {
  // Target: at each position, the running mean of the first feature so far (needs causal
  // attention over the past).
  const int64_t n = 32, t = 6, f = 3;
  Array x = testing::random_array({n, t, f}, DType::kF32, 9, -1, 1), y = Array::zeros({n, t, 1}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < t; ++j) {
      sum += x.data<float>()[(i * t + j) * f];
      y.data<float>()[i * t + j] = static_cast<float>(sum / static_cast<double>(j + 1));
    }
  }
  AttentionBlock model;
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{.learning_rate = 0.01}),
                 .loss = std::make_shared<losses::MeanSquaredError>()});
  auto h = model.fit({.x = x, .y = y, .batch_size = 8, .epochs = 30, .verbose = 0});
  const std::vector<double>& loss = h->values("loss");
  EXPECT_LT(loss.back(), 0.5 * loss.front());
  EXPECT_EQ(model.variables().size(), 10u);  // 8 attention variables + the head's 2
  // A subclassed model's tracked layers get Keras names when it is built.
  EXPECT_EQ(model.variables().front()->name(), "multi_head_attention/query/kernel");
  EXPECT_EQ(model.variables()[8]->name(), "dense/kernel");
}

TEST(MultiHeadAttention, BadOptionsAndInputsAreClearErrors) {
  expect_error([] { MultiHeadAttention({.num_heads = 0, .key_dim = 4}); }, ErrorCode::kInvalidArgument,
               {"num_heads", "0"});
  expect_error([] { MultiHeadAttention({.num_heads = 2, .key_dim = 4, .value_dim = -1}); }, ErrorCode::kInvalidArgument,
               {"value_dim", "-1"});
  auto mha = make_mha();
  std::vector<ir::TensorType> types = {{{B, T, F}, DType::kF32}};
  for (Variable* v : mha->variables()) types.push_back(v->type());
  expect_error([&] { trace(attention_fn(mha, Array::from_vector<bool>({true, false}, {2, 1}), false), types); },
               ErrorCode::kShapeMismatch, {"attention_mask", "(batch, T, S)"});
  expect_error(
      [&] {
        trace(attention_fn(mha, Array::from_vector<int32_t>(std::vector<int32_t>(B * T, 1), {B, 1, T}), false), types);
      },
      ErrorCode::kDTypeMismatch, {"bool"});
  types[0] = {{B, T, F + 1}, DType::kF32};
  expect_error([&] { trace(attention_fn(mha, Array(), false), types); }, ErrorCode::kShapeMismatch,
               {"built for 5 features"});
  types[0] = {{B, F}, DType::kF32};
  expect_error([&] { trace(attention_fn(mha, Array(), false), types); }, ErrorCode::kShapeMismatch,
               {"(batch, length, features)"});
}

}  // namespace
}  // namespace ingot
