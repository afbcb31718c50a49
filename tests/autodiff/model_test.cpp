// Whole-model gradient checks: an MLP cross-entropy loss, a conv + pooling net, an attention
// block, composites at their edges, rematerialisation, the backward graph's size, and
// second-order (Hessian-vector product) checks.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "gradcheck.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/ir/passes.h"
#include "ingot/ir/text.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::check_grads;
using testing::expect_values;
using testing::random_f64;

ir::TensorType f64t(const Shape& s) { return {s, DType::kF64}; }

/// Mean softmax cross-entropy of logits (batch, classes) against integer labels (batch,).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  Tensor onehot = one_hot(labels, logits.dim(-1), logits.dtype());
  return mean(negate(sum(onehot * log_softmax(logits, -1), {-1})));
}

/// MLP loss: args = x (4, 5), W1 (5, 6), b1 (6,), W2 (6, 3), b2 (3,), labels (4,) i32.
std::vector<Tensor> mlp_loss(const std::vector<Tensor>& a) {
  Tensor h = relu(matmul(a[0], a[1]) + a[2]);
  Tensor logits = matmul(h, a[3]) + a[4];
  return {cross_entropy(logits, a[5])};
}

std::vector<Array> mlp_args(uint64_t seed) {
  return {random_f64({4, 5}, seed),     random_f64({5, 6}, seed + 1), random_f64({6}, seed + 2),
          random_f64({6, 3}, seed + 3), random_f64({3}, seed + 4),    Array::from_vector<int32_t>({0, 2, 1, 2}, {4})};
}

TEST(ModelGradients, MlpCrossEntropyMatchesFiniteDifferences) {
  for (uint64_t seed : {1, 7}) check_grads(mlp_loss, mlp_args(seed), {.argnums = {0, 1, 2, 3, 4}});
}

TEST(ModelGradients, MlpBackwardGraphIsAtMostThreeTimesTheForward) {
  std::vector<ir::TensorType> types = {f64t({4, 5}), f64t({5, 6}), f64t({6}),
                                       f64t({6, 3}), f64t({3}),    {{4}, DType::kI32}};
  ir::Graph forward = ir::eliminate_common_subexpressions(trace(mlp_loss, types, "mlp_loss"));
  ir::Graph vg = value_and_grad_graph(forward, {1, 2, 3, 4});
  std::cout << "[ node count ] MLP loss forward: " << forward.num_nodes() << ", value_and_grad: " << vg.num_nodes()
            << " (" << static_cast<double>(vg.num_nodes()) / forward.num_nodes() << "x)\n";
  EXPECT_LE(vg.num_nodes(), 3 * forward.num_nodes()) << ir::print_graph(vg);
  // The cleaned graph computes the same loss and gradients as the raw transformation.
  std::vector<Array> args = mlp_args(3);
  std::vector<Array> a = interp::interpret(vg, args);
  std::vector<Array> b = interp::interpret(trace(value_and_grad(mlp_loss, {1, 2, 3, 4}), types), args);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].bitwise_equal(b[i])) << "output " << i;
}

TEST(ModelGradients, ConvPoolNet) {
  // x (2, 6, 6, 1) -> conv 3x3 SAME (2 filters) -> relu -> max pool 2x2 -> dense -> loss.
  auto net = [](const std::vector<Tensor>& a) {
    Conv2DOptions same;
    same.padding = "same";
    Tensor h = relu(conv2d(a[0], a[1], same) + a[2]);
    h = max_pool2d(h, {2, 2}, {2, 2});
    Tensor logits = matmul(reshape(h, {2, 18}), a[3]);
    return std::vector<Tensor>{cross_entropy(logits, a[4])};
  };
  std::vector<Array> args = {random_f64({2, 6, 6, 1}, 11), random_f64({3, 3, 1, 2}, 12), random_f64({2}, 13),
                             random_f64({18, 3}, 14), Array::from_vector<int32_t>({1, 0}, {2})};
  check_grads(net, args, {.argnums = {0, 1, 2, 3}});
}

TEST(ModelGradients, CausalAttentionBlock) {
  // x (5, 4); q, k, v = x Wq, x Wk, x Wv; causal softmax(q k^T / 2) v; output projection.
  auto block = [](const std::vector<Tensor>& a) {
    Tensor q = matmul(a[0], a[1]), k = matmul(a[0], a[2]), v = matmul(a[0], a[3]);
    Tensor scores = matmul(q, transpose(k)) / 2.0;
    Tensor rows = iota({5, 5}, 0, DType::kI32), cols = iota({5, 5}, 1, DType::kI32);
    scores = where(less_equal(cols, rows), scores, full({5, 5}, -1e9, DType::kF64));
    return std::vector<Tensor>{matmul(matmul(softmax(scores, -1), v), a[4])};
  };
  std::vector<Array> args = {random_f64({5, 4}, 21), random_f64({4, 4}, 22), random_f64({4, 4}, 23),
                             random_f64({4, 4}, 24), random_f64({4, 4}, 25)};
  check_grads(block, args);
}

/// Gradient of sum(w * f(x)) at x (f64), w fixed, for composite edge tests.
std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& f, const std::vector<double>& x) {
  Array in = Array::from_vector<double>(x, {static_cast<int64_t>(x.size())});
  TraceFn loss = [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(f(a[0]))}; };
  return testing::grads_at(loss, {in}).at(0).to_doubles();
}

TEST(CompositeGradients, FiniteAndCorrectAtTheEdges) {
  const double inf = INFINITY;
  auto sigmoid_d = [](double x) { return 1 / (1 + std::exp(-x)); };
  // softplus' = sigmoid, exactly 0.5 at 0, finite at +-1000 and +-inf.
  EXPECT_EQ(grad_of([](const Tensor& x) { return softplus(x); }, {-1000, 0, 1000, inf, -inf}),
            (std::vector<double>{0, 0.5, 1, 1, 0}));
  // log_sigmoid' = sigmoid(-x).
  std::vector<double> ls = grad_of([](const Tensor& x) { return log_sigmoid(x); }, {-1000, 0, 3});
  EXPECT_EQ(ls[0], 1);
  EXPECT_EQ(ls[1], 0.5);
  EXPECT_NEAR(ls[2], sigmoid_d(-3), 1e-15);
  // relu'(0) = 0 as jax.nn.relu.
  EXPECT_EQ(grad_of([](const Tensor& x) { return relu(x); }, {-1, 0, 2}), (std::vector<double>{0, 0, 1}));
  // sum(log_softmax) has gradient 1 - n softmax; finite for huge logits and -inf entries.
  std::vector<double> g = grad_of([](const Tensor& x) { return log_softmax(x); }, {1000, 1000, -inf});
  expect_values(Array::from_vector<double>(g, {3}), {-0.5, -0.5, 1}, 1e-12);
  // logsumexp' = softmax, also with -inf entries and huge values.
  g = grad_of([](const Tensor& x) { return logsumexp(x); }, {1000, -1000, -inf, 1000});
  expect_values(Array::from_vector<double>(g, {4}), {0.5, 0, 0, 0.5}, 1e-12);
  g = grad_of([](const Tensor& x) { return softmax(x) * x; }, {0, 0});  // zeros
  for (double v : g) EXPECT_TRUE(std::isfinite(v));
}

TEST(CompositeGradients, SigmoidBinaryCrossEntropyAtLargeLogits) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(sigmoid_binary_cross_entropy(a[0], a[1]))};
  };
  Array logits = Array::from_vector<double>({-1000, 1000, 0, 2}, {4});
  Array labels = Array::from_vector<double>({1, 1, 0, 0.25}, {4});
  std::vector<Array> g = testing::grads_at(f, {logits, labels}, {0});
  // d/dlogit = sigmoid(logit) - label.
  expect_values(g[0], {-1, 0, 0.5, 1 / (1 + std::exp(-2.0)) - 0.25}, 1e-15);
  check_grads(f, {Array::from_vector<double>({-3, 0.5, 2}, {3}), Array::from_vector<double>({1, 0.3, 0}, {3})});
}

TEST(Rematerialisation, SameGradientsWithRecomputedForwardValues) {
  std::vector<ir::TensorType> types = {f64t({4, 5}), f64t({5, 6}), f64t({6}),
                                       f64t({6, 3}), f64t({3}),    {{4}, DType::kI32}};
  TraceFn tanh_mlp = [](const std::vector<Tensor>& a) {
    Tensor h = tanh(matmul(a[0], a[1]) + a[2]);
    return std::vector<Tensor>{cross_entropy(matmul(h, a[3]) + a[4], a[5])};
  };
  ir::Graph fwd = trace(tanh_mlp, types, "tanh_mlp");
  ir::Graph plain = value_and_grad_graph(fwd, {1, 3});
  ir::Graph remat = value_and_grad_graph(fwd, {1, 3}, false, {.rematerialize_elementwise = true});
  auto count = [](const ir::Graph& g, const std::string& op) {
    int n = 0;
    for (const ir::Node& node : g.nodes()) n += node.op == op;
    return n;
  };
  EXPECT_EQ(count(plain, "tanh"), 1);
  EXPECT_EQ(count(remat, "tanh"), 2) << ir::print_graph(remat);  // forward + recomputed
  EXPECT_GE(count(remat, "optimization_barrier"), 1);
  std::vector<Array> args = mlp_args(5);
  std::vector<Array> a = interp::interpret(plain, args);
  std::vector<Array> b = interp::interpret(remat, args);
  for (size_t i = 0; i < a.size(); ++i) expect_values(b[i], a[i].to_doubles(), 0.0);
}

/// Hessian-vector product of f at x along v by reverse-over-reverse: grad of <grad f(x), v>.
TEST(SecondOrder, HessianVectorProductMatchesFiniteDifferencesOfTheGradient) {
  TraceFn f = [](const std::vector<Tensor>& a) {
    Tensor h = tanh(matmul(a[0], a[1]));  // x (3,), viewed (1,3) x W (3,2)
    return std::vector<Tensor>{sum(h * h) + sum(exp(a[0] * 0.5))};
  };
  TraceFn g = grad(f, {0});
  TraceFn gv = [g](const std::vector<Tensor>& a) {  // a = x, W, v
    Tensor gx = g({a[0], a[1]}).at(0);
    return std::vector<Tensor>{sum(gx * a[2])};
  };
  Array x = random_f64({1, 3}, 31), w = random_f64({3, 2}, 32), v = random_f64({1, 3}, 33);
  std::vector<ir::TensorType> t3 = {f64t({1, 3}), f64t({3, 2}), f64t({1, 3})};
  Array hvp = interp::interpret(trace(grad(gv, {0}), t3), {x, w, v}).at(0);
  // (grad f(x + eps v) - grad f(x - eps v)) / (2 eps)
  ir::Graph gg = trace(g, {f64t({1, 3}), f64t({3, 2})});
  const double eps = 1e-6;
  auto shifted = [&](double s) {
    std::vector<double> xs = x.to_doubles(), vs = v.to_doubles();
    for (size_t i = 0; i < xs.size(); ++i) xs[i] += s * vs[i];
    return interp::interpret(gg, {Array::from_vector<double>(xs, {1, 3}), w}).at(0).to_doubles();
  };
  std::vector<double> plus = shifted(eps), minus = shifted(-eps), fd(plus.size());
  for (size_t i = 0; i < fd.size(); ++i) fd[i] = (plus[i] - minus[i]) / (2 * eps);
  expect_values(hvp, fd, 1e-7);
}

}  // namespace
}  // namespace ingot
