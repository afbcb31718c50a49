// Optimizers: exact trajectories against hand-computed Keras 3 update formulas (written out in
// double precision here and compared at f32 tolerance), through the reference interpreter and
// through jit; optimizer state layout; schedules; clipping, weight decay, EMA, loss scaling; and
// the errors for bad options and bad arguments.
#include "ingot/trainer/optimizers.h"
#include "ingot/trainer/loss_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ingot/autodiff/autodiff.h"
#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using optimizers::Adagrad;
using optimizers::Adam;
using optimizers::AdamW;
using optimizers::Optimizer;
using optimizers::RMSprop;
using optimizers::SGD;
using optimizers::SGDOptions;
using optimizers::AdamOptions;
using optimizers::RMSpropOptions;
using optimizers::OptimizerVariableInfo;
using optimizers::LossScaleOptimizer;
using optimizers::LossScaleOptimizerOptions;
using optimizers::schedules::CosineDecay;
using optimizers::schedules::ExponentialDecay;
using optimizers::schedules::PiecewiseConstantDecay;
using testing::expect_error;

enum class Engine { kInterpreter, kJit };

void PrintTo(Engine engine, std::ostream* os) { *os << (engine == Engine::kJit ? "jit" : "interpreter"); }

std::string engine_name(const ::testing::TestParamInfo<Engine>& info) {
  return info.param == Engine::kJit ? "Jit" : "Interpreter";
}

std::vector<ir::TensorType> types_of(const std::vector<Array>& arrays) {
  std::vector<ir::TensorType> types;
  for (const Array& a : arrays) types.push_back({a.shape(), a.dtype()});
  return types;
}

/// Runs a TraceFn on Arrays with the interpreter (trace + interpret) or with jit (compiled once
/// per signature and reused across steps; `donate` = JAX's donate_argnums).
class Runner {
 public:
  Runner(TraceFn fn, Engine engine, std::vector<int64_t> donate = {})
      : fn_(fn), engine_(engine), jitted_(jit(fn, {.name = "step", .donate_argnums = donate})) {}
  std::vector<Array> operator()(const std::vector<Array>& args) const {
    if (engine_ == Engine::kJit) return jitted_(args);
    return interp::interpret(trace(fn_, types_of(args)), args);
  }
  const Jitted& jitted() const { return jitted_; }

 private:
  TraceFn fn_;
  Engine engine_;
  Jitted jitted_;
};

/// The traced update: arguments [optimizer variables (s), variables (n), gradients (n)], results
/// [new variables (n), new optimizer variables (s)].
TraceFn apply_fn(const Optimizer& opt, size_t num_state, size_t n) {
  return [&opt, num_state, n](const std::vector<Tensor>& a) {
    const auto s = static_cast<std::ptrdiff_t>(num_state), vn = static_cast<std::ptrdiff_t>(n);
    std::vector<Tensor> state(a.begin(), a.begin() + s);
    std::vector<Tensor> vars(a.begin() + s, a.begin() + s + vn);
    std::vector<Tensor> grads(a.begin() + s + vn, a.end());
    auto [new_vars, new_state] = opt.apply(state, vars, grads);
    new_vars.insert(new_vars.end(), new_state.begin(), new_state.end());
    return new_vars;
  };
}

/// An optimizer applied step after step to variables with given gradients.
struct Trajectory {
  Trajectory(const Optimizer& opt, std::vector<Array> initial, Engine engine)
      : state(opt.build(types_of(initial))),
        vars(std::move(initial)),
        runner(apply_fn(opt, state.size(), vars.size()), engine) {}

  void step(const std::vector<Array>& grads) {
    std::vector<Array> args = state;
    args.insert(args.end(), vars.begin(), vars.end());
    args.insert(args.end(), grads.begin(), grads.end());
    std::vector<Array> out = runner(args);
    ASSERT_EQ(out.size(), vars.size() + state.size());
    const auto n = static_cast<std::ptrdiff_t>(vars.size());
    vars.assign(out.begin(), out.begin() + n);
    state.assign(out.begin() + n, out.end());
  }

  std::vector<Array> state;
  std::vector<Array> vars;
  Runner runner;
};

Array f32(const std::vector<double>& v) {
  return Array::from_doubles(v, {static_cast<int64_t>(v.size())}, DType::kF32);
}
Array f32_scalar(double v) { return Array::scalar(v, DType::kF32); }

/// Expects every element of `a` within `rel` * max(1, |expected|) of `expected`.
void expect_close(const Array& a, const std::vector<double>& expected, double rel, const std::string& what) {
  std::vector<double> got = a.to_doubles();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], rel * std::max(1.0, std::abs(expected[i]))) << what << " element " << i;
  }
}

constexpr double kF32Tol = 2e-6;  // a few f32 ulps of values around 1, after several steps

class OptimizerTrajectory : public ::testing::TestWithParam<Engine> {};

// ---- (1) linear regression with SGD: loss and weights per step, computed by hand -------------

TEST_P(OptimizerTrajectory, LinearRegressionSgdMatchesClosedFormGradients) {
  const std::vector<double> x = {1, 2, 3, 4}, y = {3, 5, 7, 9};  // y = 2x + 1
  const double lr = 0.05;
  SGD sgd({.learning_rate = lr});
  // Step: [iterations, learning_rate, w, b, x, y] -> [loss, w', b', iterations', learning_rate'].
  TraceFn step = [&sgd](const std::vector<Tensor>& a) {
    TraceFn mse = [](const std::vector<Tensor>& p) {
      return std::vector<Tensor>{mean(square(p[0] * p[2] + p[1] - p[3]))};
    };
    std::vector<Tensor> vg = value_and_grad(mse, {0, 1})({a[2], a[3], a[4], a[5]});
    auto [vars, state] = sgd.apply({a[0], a[1]}, {a[2], a[3]}, {vg[1], vg[2]});
    return std::vector<Tensor>{vg[0], vars[0], vars[1], state[0], state[1]};
  };
  // Donated state, as the trainer compiles its step.
  Runner run(step, GetParam(), GetParam() == Engine::kJit ? std::vector<int64_t>{0, 1, 2, 3} : std::vector<int64_t>{});
  std::vector<Array> state = sgd.build({{{}, DType::kF32}, {{}, DType::kF32}});
  Array w = f32_scalar(0.5), b = f32_scalar(-0.25);
  double hw = 0.5, hb = -0.25;
  for (int k = 0; k < 5; ++k) {
    // By hand: r_i = w x_i + b - y_i, loss = mean(r^2), dL/dw = 2 mean(r x), dL/db = 2 mean(r).
    double loss = 0, gw = 0, gb = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double r = hw * x[i] + hb - y[i];
      loss += r * r / 4;
      gw += 2 * r * x[i] / 4;
      gb += 2 * r / 4;
    }
    hw -= lr * gw;
    hb -= lr * gb;
    std::vector<Array> out = run({state[0], state[1], w, b, f32(x), f32(y)});
    ASSERT_EQ(out.size(), 5u);
    // Residuals at the start: -2.75, -4.25, -5.75, -7.25.
    if (k == 0) expect_close(out[0], {27.8125}, kF32Tol, "initial loss");
    expect_close(out[0], {loss}, kF32Tol, "loss at step " + std::to_string(k));
    expect_close(out[1], {hw}, kF32Tol, "w after step " + std::to_string(k));
    expect_close(out[2], {hb}, kF32Tol, "b after step " + std::to_string(k));
    EXPECT_EQ(out[3].to_vector<int64_t>(), std::vector<int64_t>{k + 1});
    expect_close(out[4], {lr}, 1e-7, "learning rate");
    state = {out[3], out[4]};
    w = out[1];
    b = out[2];
  }
  if (GetParam() == Engine::kJit) {
    EXPECT_EQ(run.jitted().compile_count(), 1);
  }
}

// ---- (2) Adam: the first 3 steps by the formula ------------------------------------------------

/// Keras's Adam by hand in double: returns (w, m, v, v_hat) after `grads.size()` steps.
struct AdamByHand {
  double lr, beta_1, beta_2, epsilon;
  bool amsgrad = false;
  std::vector<double> w, m, v, v_hat;

  void step(int64_t iterations, const std::vector<double>& g) {
    const double t = static_cast<double>(iterations + 1);
    const double alpha = lr * std::sqrt(1 - std::pow(beta_2, t)) / (1 - std::pow(beta_1, t));
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] += (g[i] - m[i]) * (1 - beta_1);
      v[i] += (g[i] * g[i] - v[i]) * (1 - beta_2);
      v_hat[i] = std::max(v_hat[i], v[i]);
      const double vv = amsgrad ? v_hat[i] : v[i];
      w[i] -= m[i] * alpha / (std::sqrt(vv) + epsilon);
    }
  }
};

TEST_P(OptimizerTrajectory, AdamFirstThreeStepsMatchTheFormula) {
  Adam adam;  // Keras defaults: 0.001, 0.9, 0.999, 1e-7
  const std::vector<std::vector<double>> grads = {{0.1, -0.2, 0.3}, {0.5, 0.1, -0.4}, {-0.2, 0.3, 0.05}};
  AdamByHand hand{.lr = 0.001, .beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7};
  hand.w = {1.0, -2.0, 0.5};
  hand.m = hand.v = hand.v_hat = {0, 0, 0};
  Trajectory traj(adam, {f32(hand.w)}, GetParam());
  for (int64_t k = 0; k < 3; ++k) {
    hand.step(k, grads[k]);
    traj.step({f32(grads[k])});
    const std::string at = " after step " + std::to_string(k + 1);
    expect_close(traj.vars[0], hand.w, kF32Tol, "w" + at);
    // The first step moves every weight by lr against its gradient's sign (bias-corrected
    // m / sqrt(v) = sign(g), up to epsilon).
    if (k == 0) expect_close(traj.vars[0], {0.999, -1.999, 0.499}, 1e-6, "first step");
    // Layout: [iterations, learning_rate, m, v].
    ASSERT_EQ(traj.state.size(), 4u);
    expect_close(traj.state[2], hand.m, kF32Tol, "m" + at);
    expect_close(traj.state[3], hand.v, kF32Tol, "v" + at);
  }
}

TEST_P(OptimizerTrajectory, AdamWithLargeEpsilonAndAmsgradMatchesTheFormula) {
  // Hyperparameters where every term matters at f32 precision; the gradients shrink so that
  // AMSGrad's running maximum differs from v.
  for (bool amsgrad : {false, true}) {
    SCOPED_TRACE(amsgrad ? "amsgrad" : "adam");
    Adam adam({.learning_rate = 0.1, .beta_1 = 0.5, .beta_2 = 0.75, .epsilon = 0.01, .amsgrad = amsgrad});
    AdamByHand hand{.lr = 0.1, .beta_1 = 0.5, .beta_2 = 0.75, .epsilon = 0.01, .amsgrad = amsgrad};
    hand.w = {0.25, -1.5};
    hand.m = hand.v = hand.v_hat = {0, 0};
    const std::vector<std::vector<double>> grads = {{1.0, -2.0}, {0.1, 0.5}, {0.05, -0.1}};
    Trajectory traj(adam, {f32(hand.w)}, GetParam());
    for (int64_t k = 0; k < 3; ++k) {
      hand.step(k, grads[k]);
      traj.step({f32(grads[k])});
      expect_close(traj.vars[0], hand.w, kF32Tol, "w after step " + std::to_string(k + 1));
    }
    ASSERT_EQ(traj.state.size(), amsgrad ? 5u : 4u);
    if (amsgrad) expect_close(traj.state[4], hand.v_hat, kF32Tol, "v_hat");
  }
}

TEST_P(OptimizerTrajectory, AdamOnF64VariablesComputesInF64WithTheF32LearningRate) {
  // Keras casts the (float32) learning-rate variable to the variable's dtype, so the rate is
  // 0.001 rounded to f32; everything else is f64.
  Adam adam;
  AdamByHand hand{.lr = static_cast<double>(0.001f), .beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7};
  hand.w = {1.0, -2.0};
  hand.m = hand.v = hand.v_hat = {0, 0};
  Trajectory traj(adam, {Array::from_doubles(hand.w, {2}, DType::kF64)}, GetParam());
  const std::vector<std::vector<double>> grads = {{0.1, -0.2}, {0.5, 0.1}, {-0.2, 0.3}};
  for (int64_t k = 0; k < 3; ++k) {
    hand.step(k, grads[k]);
    traj.step({Array::from_doubles(grads[k], {2}, DType::kF64)});
  }
  EXPECT_EQ(traj.vars[0].dtype(), DType::kF64);
  expect_close(traj.vars[0], hand.w, 1e-13, "w");
}

TEST_P(OptimizerTrajectory, AdamWDecaysThenTakesTheAdamStep) {
  // Keras's AdamW: Adam with weight_decay (default 0.004) applied first: w -= w * wd * lr.
  const double lr = 0.05, wd = 0.5;
  AdamW adamw({.learning_rate = lr, .weight_decay = wd});
  AdamByHand hand{.lr = lr, .beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7};
  hand.w = {2.0, -1.0};
  hand.m = hand.v = hand.v_hat = {0, 0};
  Trajectory traj(adamw, {f32(hand.w)}, GetParam());
  const std::vector<std::vector<double>> grads = {{0.4, 0.2}, {-0.1, 0.3}, {0.2, -0.5}};
  for (int64_t k = 0; k < 3; ++k) {
    for (double& w : hand.w) w -= w * wd * lr;
    hand.step(k, grads[k]);
    traj.step({f32(grads[k])});
    expect_close(traj.vars[0], hand.w, kF32Tol, "w after step " + std::to_string(k + 1));
  }
  // First step by hand: 2 - 2 * 0.025 - 0.05 (Adam's first step is lr * sign(g)) = 1.9.
  ASSERT_EQ(traj.state.size(), 4u);  // [iterations, learning_rate, m, v], as Adam
  AdamW defaults;
  EXPECT_EQ(defaults.options().weight_decay, 0.004);
  EXPECT_EQ(defaults.config().weight_decay, std::optional<double>(0.004));
  EXPECT_EQ(defaults.name(), "adamw");
  Trajectory first(defaults, {f32({2.0})}, GetParam());
  first.step({f32({1.0})});
  expect_close(first.vars[0], {2.0 - 2.0 * 0.004 * 0.001 - 0.001}, 1e-6, "default first step");
}

/// Keras 3's RMSprop by hand in double (see RMSprop's doc comment).
struct RmspropByHand {
  double lr, rho, momentum, epsilon;
  bool centered;
  std::vector<double> w, v, m, a;

  void step(const std::vector<double>& g) {
    for (size_t i = 0; i < w.size(); ++i) {
      v[i] = rho * v[i] + (1 - rho) * g[i] * g[i];
      double denominator = v[i] + epsilon;
      if (centered) {
        a[i] = rho * a[i] + (1 - rho) * g[i];
        denominator = v[i] - a[i] * a[i] + epsilon;
      }
      const double increment = lr * g[i] / std::sqrt(denominator);
      m[i] = momentum * m[i] + increment;
      w[i] -= momentum > 0 ? m[i] : increment;
    }
  }
};

TEST_P(OptimizerTrajectory, RmspropMatchesKerasDocExample) {
  // Keras's docstring: RMSprop(learning_rate=0.1), var 10, loss var^2 / 2 (gradient = var):
  // after one minimize step var = 9.683772 (v = 0.1 * 100 = 10, w -= 0.1 * 10 / sqrt(10)).
  RMSprop rmsprop({.learning_rate = 0.1});
  Trajectory traj(rmsprop, {f32_scalar(10.0)}, GetParam());
  traj.step({f32_scalar(10.0)});
  expect_close(traj.vars[0], {9.683772}, 1e-6, "w");
  ASSERT_EQ(traj.state.size(), 3u);  // [iterations, learning_rate, velocity]
  expect_close(traj.state[2], {10.0}, kF32Tol, "velocity");
  EXPECT_EQ(rmsprop.name(), "rmsprop");
}

TEST_P(OptimizerTrajectory, RmspropWithMomentumAndCenteredMatchesTheFormula) {
  const std::vector<std::vector<double>> grads = {{1.0, -0.5}, {0.25, 0.75}, {-0.5, 0.1}};
  for (double momentum : {0.0, 0.5}) {
    for (bool centered : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "momentum " << momentum << " centered " << centered);
      // A large epsilon so that every term shows at f32 precision.
      RMSprop rmsprop({.learning_rate = 0.1, .rho = 0.8, .momentum = momentum, .epsilon = 0.01, .centered = centered});
      RmspropByHand hand{.lr = 0.1, .rho = 0.8, .momentum = momentum, .epsilon = 0.01, .centered = centered};
      hand.w = {0.5, -2.0};
      hand.v = hand.m = hand.a = {0, 0};
      Trajectory traj(rmsprop, {f32(hand.w)}, GetParam());
      // Layout: [iterations, learning_rate, velocity, momentum?, average_gradient?].
      const size_t expected_size = 3 + (momentum > 0 ? 1 : 0) + (centered ? 1 : 0);
      ASSERT_EQ(traj.state.size(), expected_size);
      for (size_t k = 0; k < grads.size(); ++k) {
        hand.step(grads[k]);
        traj.step({f32(grads[k])});
        const std::string at = " after step " + std::to_string(k + 1);
        expect_close(traj.vars[0], hand.w, kF32Tol, "w" + at);
        expect_close(traj.state[2], hand.v, kF32Tol, "velocity" + at);
        if (momentum > 0) expect_close(traj.state[3], hand.m, kF32Tol, "momentum" + at);
        if (centered) expect_close(traj.state.back(), hand.a, kF32Tol, "average_gradient" + at);
      }
    }
  }
}

TEST_P(OptimizerTrajectory, AdagradStartsTheAccumulatorAtItsInitialValue) {
  const double lr = 0.5, initial = 0.1, epsilon = 1e-7;
  Adagrad adagrad({.learning_rate = lr});
  std::vector<double> w = {1.0, -3.0}, acc = {initial, initial};
  Trajectory traj(adagrad, {f32(w)}, GetParam());
  ASSERT_EQ(traj.state.size(), 3u);  // [iterations, learning_rate, accumulator]
  expect_close(traj.state[2], acc, 1e-8, "initial accumulator (0.1 in f32)");
  const std::vector<std::vector<double>> grads = {{0.3, -1.0}, {0.3, 2.0}, {-0.6, 0.0}};
  for (size_t k = 0; k < grads.size(); ++k) {
    for (size_t i = 0; i < w.size(); ++i) {
      acc[i] += grads[k][i] * grads[k][i];
      w[i] -= lr * grads[k][i] / std::sqrt(acc[i] + epsilon);
    }
    traj.step({f32(grads[k])});
    const std::string at = " after step " + std::to_string(k + 1);
    expect_close(traj.vars[0], w, kF32Tol, "w" + at);
    expect_close(traj.state[2], acc, kF32Tol, "accumulator" + at);
    // First step of element 0: acc = 0.1 + 0.09 = 0.19, w = 1 - 0.15 / sqrt(0.19) = 0.655876.
    if (k == 0) {
      EXPECT_NEAR(traj.vars[0].to_doubles()[0], 0.655876, 1e-6);
    }
  }
}

TEST(Optimizer, AdagradBuildFillsEveryAccumulatorWithTheInitialValue) {
  // With EMA the averages (zeros) come first, then the accumulators.
  Adagrad adagrad({.initial_accumulator_value = 0.25, .use_ema = true});
  std::vector<Array> s = adagrad.build({{{2, 2}, DType::kF32}, {{3}, DType::kF64}});
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[2].to_doubles(), std::vector<double>(4, 0.0));  // average 0
  EXPECT_EQ(s[4].to_doubles(), std::vector<double>(4, 0.25));
  EXPECT_EQ(s[4].shape(), (Shape{2, 2}));
  EXPECT_EQ(s[5].to_doubles(), std::vector<double>(3, 0.25));
  EXPECT_EQ(s[5].dtype(), DType::kF64);
  EXPECT_EQ(Adagrad({.initial_accumulator_value = 0.0}).build({{{1}, DType::kF32}})[2].to_doubles(),
            std::vector<double>{0.0});
}

// ---- (3) SGD with momentum and Nesterov momentum by hand ---------------------------------------

TEST_P(OptimizerTrajectory, SgdMomentumAndNesterovMatchTheFormula) {
  const double lr = 0.1, mu = 0.9;
  const std::vector<std::vector<double>> g_w = {{1.0, -2.0}, {0.5, 0.5}, {-1.0, 0.25}};
  const std::vector<double> g_b = {0.3, -0.6, 0.9};
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "momentum");
    SGD sgd({.learning_rate = lr, .momentum = mu, .nesterov = nesterov});
    std::vector<double> w = {0.5, -0.5}, m_w = {0, 0};
    double b = 2.0, m_b = 0;
    Trajectory traj(sgd, {f32(w), f32_scalar(b)}, GetParam());
    for (size_t k = 0; k < 3; ++k) {
      // m = m * mu - g * lr; w += m (or, Nesterov, w += m * mu - g * lr).
      for (size_t i = 0; i < 2; ++i) {
        m_w[i] = m_w[i] * mu - g_w[k][i] * lr;
        w[i] += nesterov ? m_w[i] * mu - g_w[k][i] * lr : m_w[i];
      }
      m_b = m_b * mu - g_b[k] * lr;
      b += nesterov ? m_b * mu - g_b[k] * lr : m_b;
      traj.step({f32(g_w[k]), f32_scalar(g_b[k])});
      const std::string at = " after step " + std::to_string(k + 1);
      expect_close(traj.vars[0], w, kF32Tol, "w" + at);
      expect_close(traj.vars[1], {b}, kF32Tol, "b" + at);
      // Layout: [iterations, learning_rate, momentum(w), momentum(b)].
      ASSERT_EQ(traj.state.size(), 4u);
      expect_close(traj.state[2], m_w, kF32Tol, "momentum of w" + at);
      expect_close(traj.state[3], {m_b}, kF32Tol, "momentum of b" + at);
    }
  }
}

// ---- (4) iterations ---------------------------------------------------------------------------

TEST_P(OptimizerTrajectory, IterationsIncrementByOnePerApply) {
  Adam adam({.learning_rate = ExponentialDecay({.initial_learning_rate = 0.01, .decay_steps = 10, .decay_rate = 0.5})});
  SGD sgd;
  for (const Optimizer* opt : std::vector<const Optimizer*>{&adam, &sgd}) {
    SCOPED_TRACE(opt->name());
    Trajectory traj(*opt, {f32({1.0, 2.0})}, GetParam());
    for (int64_t k = 1; k <= 4; ++k) {
      traj.step({f32({0.5, 0.5})});
      ASSERT_EQ(traj.state[0].dtype(), DType::kI64);
      EXPECT_EQ(Optimizer::iterations(traj.state), k);
    }
  }
}

TEST(Optimizer, ApplyWithNoVariablesChangesNothingNotEvenIterations) {
  // Keras's apply returns early for an empty gradient list.
  SGD sgd({.momentum = 0.5});
  std::vector<Array> state = sgd.build({});
  state[0] = Array::scalar(7, DType::kI64);
  std::vector<Array> out = interp::interpret(trace(apply_fn(sgd, 2, 0), types_of(state)), state);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].to_vector<int64_t>(), std::vector<int64_t>{7});
}

// ---- (5) optimizer variables from build() -----------------------------------------------------

void expect_type(const Array& a, const Shape& shape, DType dtype, const std::string& what) {
  EXPECT_EQ(a.shape(), shape) << what;
  EXPECT_EQ(a.dtype(), dtype) << what << ": " << dtype_name(a.dtype());
}

TEST(Optimizer, BuildMakesIterationsLearningRateAndZeroSlots) {
  const std::vector<ir::TensorType> vars = {{{3, 2}, DType::kF32}, {{2}, DType::kF64}};
  {
    std::vector<Array> s = SGD().build(vars);  // no momentum: no slots
    ASSERT_EQ(s.size(), 2u);
    expect_type(s[0], {}, DType::kI64, "iterations");
    EXPECT_EQ(s[0].to_vector<int64_t>(), std::vector<int64_t>{0});
    expect_type(s[1], {}, DType::kF32, "learning_rate");
    EXPECT_EQ(s[1].to_vector<float>(), std::vector<float>{0.01f});
  }
  {
    std::vector<Array> s = SGD({.learning_rate = 0.5, .momentum = 0.9}).build(vars);
    ASSERT_EQ(s.size(), 4u);
    EXPECT_EQ(s[1].to_vector<float>(), std::vector<float>{0.5f});
    expect_type(s[2], {3, 2}, DType::kF32, "momentum 0");
    expect_type(s[3], {2}, DType::kF64, "momentum 1");
    EXPECT_EQ(s[2].to_doubles(), std::vector<double>(6, 0.0));
    EXPECT_EQ(s[3].to_doubles(), std::vector<double>(2, 0.0));
  }
  {
    // Adam: m for every variable, then v for every variable, then v_hat (amsgrad).
    std::vector<Array> s = Adam({.amsgrad = true}).build(vars);
    ASSERT_EQ(s.size(), 8u);
    EXPECT_EQ(s[1].to_vector<float>(), std::vector<float>{0.001f});
    for (size_t k = 0; k < 3; ++k) {
      expect_type(s[2 + 2 * k], {3, 2}, DType::kF32, "slot kind " + std::to_string(k));
      expect_type(s[3 + 2 * k], {2}, DType::kF64, "slot kind " + std::to_string(k));
      EXPECT_EQ(s[2 + 2 * k].to_doubles(), std::vector<double>(6, 0.0));
    }
    EXPECT_EQ(Adam().num_optimizer_variables(2), 6);
    EXPECT_EQ(Adam({.amsgrad = true}).num_optimizer_variables(2), 8);
  }
  {
    // A schedule has no learning-rate variable; EMA averages come before the slots.
    Adam adam({.learning_rate = ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 1, .decay_rate = 0.9}),
               .use_ema = true});
    std::vector<Array> s = adam.build(vars);
    ASSERT_EQ(s.size(), 7u);
    expect_type(s[0], {}, DType::kI64, "iterations");
    expect_type(s[1], {3, 2}, DType::kF32, "average 0");
    expect_type(s[2], {2}, DType::kF64, "average 1");
    expect_type(s[3], {3, 2}, DType::kF32, "m 0");
    EXPECT_EQ(adam.learning_rate_index(), std::nullopt);
    EXPECT_EQ(Adam().learning_rate_index(), std::optional<int64_t>(1));
  }
}

TEST(Optimizer, VariableInfoDescribesEveryVariableBuildMakes) {
  // Each optimizer variable is global or made from one trainable variable, whose type it has.
  const std::vector<ir::TensorType> vars = {{{3, 2}, DType::kF32}, {{}, DType::kF32}, {{2}, DType::kF64}};
  const auto schedule = ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 1, .decay_rate = 0.9});
  const std::vector<std::shared_ptr<Optimizer>> all = {
      std::make_shared<SGD>(),
      std::make_shared<SGD>(SGDOptions{.momentum = 0.9}),
      std::make_shared<Adam>(AdamOptions{.amsgrad = true}),
      std::make_shared<Adam>(AdamOptions{.learning_rate = schedule, .use_ema = true, .gradient_accumulation_steps = 2}),
      std::make_shared<RMSprop>(RMSpropOptions{.momentum = 0.5, .centered = true}),
      std::make_shared<Adagrad>(),
      std::make_shared<LossScaleOptimizer>(LossScaleOptimizerOptions{.inner_optimizer = std::make_shared<Adam>()}),
  };
  for (const auto& opt : all) {
    SCOPED_TRACE(opt->class_name());
    const std::vector<Array> built = opt->build(vars);
    const std::vector<OptimizerVariableInfo> info = opt->variable_info(3);
    ASSERT_EQ(info.size(), built.size());
    EXPECT_EQ(info[0].name, "iterations");
    EXPECT_FALSE(info[0].reference.has_value());
    for (size_t j = 0; j < info.size(); ++j) {
      if (!info[j].reference) {
        EXPECT_EQ(built[j].rank(), 0) << info[j].name;
        continue;
      }
      const ir::TensorType& ref = vars.at(static_cast<size_t>(*info[j].reference));
      EXPECT_EQ(built[j].shape(), ref.shape) << j << " " << info[j].name;
      EXPECT_EQ(built[j].dtype(), ref.dtype) << j << " " << info[j].name;
    }
  }
  // Adam with a schedule, EMA and accumulation: averages, m, v, then the accumulators.
  const std::vector<OptimizerVariableInfo> info = all[3]->variable_info(3);
  ASSERT_EQ(info.size(), 13u);
  EXPECT_EQ(info[1].name, "average");
  EXPECT_EQ(info[4].name, "momentum");
  EXPECT_EQ(info[5].reference, std::optional<int64_t>(1));
  EXPECT_EQ(info[12].name, "accumulator");
  EXPECT_EQ(all[6]->variable_info(3).back().name, "dynamic_scale");
}

// ---- schedules ----------------------------------------------------------------------------------

double eval_schedule(const optimizers::ScheduleFn& schedule, int64_t step) {
  ir::Graph g =
      trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{schedule(a[0])}; }, {{{}, DType::kI64}});
  return interp::interpret(g, {Array::scalar(static_cast<double>(step), DType::kI64)})[0].element_as_double(0);
}

TEST(Schedules, ExponentialDecayFollowsKerasFormula) {
  ExponentialDecay smooth({.initial_learning_rate = 0.1, .decay_steps = 4, .decay_rate = 0.5});
  ExponentialDecay stairs({.initial_learning_rate = 0.1, .decay_steps = 4, .decay_rate = 0.5, .staircase = true});
  for (int64_t step : {0, 1, 2, 4, 7, 8, 100}) {
    EXPECT_NEAR(eval_schedule(smooth, step), 0.1 * std::pow(0.5, step / 4.0), 1e-7 * 0.1) << "step " << step;
    EXPECT_NEAR(eval_schedule(stairs, step), 0.1 * std::pow(0.5, std::floor(step / 4.0)), 1e-7 * 0.1)
        << "step " << step;
  }
}

TEST(Schedules, CosineDecayFollowsKerasFormula) {
  // Keras: 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)), scaled into [alpha, 1].
  const auto cosine = [](double step, double steps, double alpha) {
    return (1 - alpha) * 0.5 * (1 + std::cos(M_PI * std::min(step, steps) / steps)) + alpha;
  };
  CosineDecay plain({.initial_learning_rate = 0.1, .decay_steps = 10});
  CosineDecay floored({.initial_learning_rate = 0.1, .decay_steps = 10, .alpha = 0.2});
  for (int64_t step : {0, 1, 5, 9, 10, 11, 1000}) {
    const double s = static_cast<double>(step);
    EXPECT_NEAR(eval_schedule(plain, step), 0.1 * cosine(s, 10, 0), 1e-7) << "step " << step;
    EXPECT_NEAR(eval_schedule(floored, step), 0.1 * cosine(s, 10, 0.2), 1e-7) << "step " << step;
  }
  EXPECT_NEAR(eval_schedule(plain, 5), 0.05, 1e-7);  // half way: half the rate
  EXPECT_NEAR(eval_schedule(plain, 10), 0.0, 1e-7);
  // Warmup: linear from 0 to 0.4 over 4 steps, then the cosine from 0.4 over 10 more.
  CosineDecay warm({.initial_learning_rate = 0, .decay_steps = 10, .warmup_target = 0.4, .warmup_steps = 4});
  EXPECT_NEAR(eval_schedule(warm, 0), 0.0, 1e-7);
  EXPECT_NEAR(eval_schedule(warm, 1), 0.1, 1e-7);
  EXPECT_NEAR(eval_schedule(warm, 3), 0.3, 1e-7);
  EXPECT_NEAR(eval_schedule(warm, 4), 0.4, 1e-7);
  EXPECT_NEAR(eval_schedule(warm, 9), 0.4 * cosine(5, 10, 0), 1e-7);
  EXPECT_NEAR(eval_schedule(warm, 14), 0.0, 1e-7);
  EXPECT_NEAR(eval_schedule(warm, 50), 0.0, 1e-7);
  // A warmup target with no warmup steps decays from the target at once (no 0/0).
  CosineDecay no_warmup({.initial_learning_rate = 0.1, .decay_steps = 10, .warmup_target = 0.3});
  EXPECT_NEAR(eval_schedule(no_warmup, 0), 0.3, 1e-7);
  EXPECT_NEAR(eval_schedule(no_warmup, 5), 0.15, 1e-7);
}

TEST(Schedules, PiecewiseConstantDecayChangesAfterEachBoundary) {
  // Keras: values[0] for step <= boundaries[0], values[i] for boundaries[i-1] < step <=
  // boundaries[i], values[-1] for step > boundaries[-1].
  PiecewiseConstantDecay schedule({.boundaries = {3, 5, 10}, .values = {1.0, 0.5, 0.25, 0.1}});
  const std::vector<std::pair<int64_t, double>> expected = {{0, 1.0},  {3, 1.0},   {4, 0.5},  {5, 0.5},
                                                            {6, 0.25}, {10, 0.25}, {11, 0.1}, {1000, 0.1}};
  for (const auto& [step, rate] : expected) {
    EXPECT_NEAR(eval_schedule(schedule, step), rate, 1e-7) << "step " << step;
  }
  // One boundary; the values are f32 as Keras converts them.
  PiecewiseConstantDecay two({.boundaries = {0}, .values = {0.3, 0.2}});
  EXPECT_EQ(eval_schedule(two, 0), static_cast<double>(0.3f));
  EXPECT_EQ(eval_schedule(two, 1), static_cast<double>(0.2f));
  // A floating-point step is compared with the boundaries in its own dtype.
  const Array at = interp::interpret(
      trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{schedule(a[0])}; }, {{{}, DType::kF32}}),
      {f32_scalar(4.5)})[0];
  EXPECT_EQ(at.dtype(), DType::kF32);
  expect_close(at, {0.5}, 1e-7, "rate at step 4.5");
}

TEST_P(OptimizerTrajectory, SgdWithPiecewiseConstantDecayStepsWithEachIntervalsRate) {
  SGD sgd({.learning_rate = PiecewiseConstantDecay({.boundaries = {1}, .values = {0.5, 0.125}})});
  Trajectory traj(sgd, {f32({0.0})}, GetParam());
  double w = 0.0;
  for (int64_t k = 0; k < 4; ++k) {
    const double lr = k <= 1 ? 0.5 : 0.125;  // iterations 0 and 1 are <= the boundary 1
    EXPECT_NEAR(sgd.current_learning_rate(traj.state), lr, 0.0) << "iteration " << k;
    w -= lr * 1.0;
    traj.step({f32({1.0})});
    expect_close(traj.vars[0], {w}, kF32Tol, "w after step " + std::to_string(k + 1));
  }
  expect_close(traj.vars[0], {-1.25}, kF32Tol, "w after 4 steps");
}

TEST_P(OptimizerTrajectory, SgdWithScheduleUsesTheRateAtTheIterationBeforeTheStep) {
  const double lr0 = 0.2, rate = 0.5;
  const int64_t decay_steps = 2;
  SGD sgd({.learning_rate =
               ExponentialDecay({.initial_learning_rate = lr0, .decay_steps = decay_steps, .decay_rate = rate})});
  Trajectory traj(sgd, {f32({1.0})}, GetParam());
  ASSERT_EQ(traj.state.size(), 1u);  // iterations only
  double w = 1.0;
  for (int64_t k = 0; k < 5; ++k) {
    const double lr = lr0 * std::pow(rate, static_cast<double>(k) / decay_steps);
    EXPECT_NEAR(sgd.current_learning_rate(traj.state), lr, 1e-7);
    const double g = 0.5 + static_cast<double>(k);
    w -= lr * g;
    traj.step({f32({g})});
    expect_close(traj.vars[0], {w}, kF32Tol, "w after step " + std::to_string(k + 1));
  }
}

TEST_P(OptimizerTrajectory, SettingTheLearningRateChangesTheNextStep) {
  // Keras's `optimizer.learning_rate = value`, as LearningRateScheduler does between epochs: a
  // new state, same compiled step.
  SGD sgd({.learning_rate = 0.1});
  Trajectory traj(sgd, {f32({1.0})}, GetParam());
  traj.step({f32({1.0})});  // w = 1 - 0.1
  traj.state = sgd.with_learning_rate(traj.state, 0.25);
  EXPECT_NEAR(sgd.current_learning_rate(traj.state), 0.25, 0.0);
  traj.step({f32({2.0})});  // w = 0.9 - 0.5
  expect_close(traj.vars[0], {0.4}, kF32Tol, "w");
  if (GetParam() == Engine::kJit) {
    EXPECT_EQ(traj.runner.jitted().compile_count(), 1);
  }
}

// ---- base-optimizer options: clipping, weight decay, EMA, loss scaling ---------------------------

/// One SGD step with learning rate 1 from zero variables: returns -(processed gradients).
std::vector<Array> one_step_from_zero(const SGDOptions& options, const std::vector<Array>& grads, Engine engine) {
  SGD sgd(options);
  std::vector<Array> zeros;
  for (const Array& g : grads) zeros.push_back(Array::zeros(g.shape(), g.dtype()));
  Trajectory traj(sgd, zeros, engine);
  traj.step(grads);
  return traj.vars;
}

TEST_P(OptimizerTrajectory, ClipnormClipsEachGradientToTheNorm) {
  auto out = one_step_from_zero({.learning_rate = 1.0, .clipnorm = 1.0}, {f32({3, 4}), f32({0.3, 0.4}), f32({0, 0})},
                                GetParam());
  expect_close(out[0], {-0.6, -0.8}, kF32Tol, "norm 5 -> 1");
  expect_close(out[1], {-0.3, -0.4}, kF32Tol, "norm 0.5 stays");
  testing::expect_values(out[2], {0, 0});  // a zero gradient stays exactly zero (no NaN)
}

TEST_P(OptimizerTrajectory, GlobalClipnormScalesAllGradientsTogether) {
  auto out = one_step_from_zero({.learning_rate = 1.0, .global_clipnorm = 2.5}, {f32({3}), f32({4})}, GetParam());
  // Global norm 5 -> scale 0.5.
  expect_close(out[0], {-1.5}, kF32Tol, "g0");
  expect_close(out[1], {-2.0}, kF32Tol, "g1");
  auto small = one_step_from_zero({.learning_rate = 1.0, .global_clipnorm = 10.0}, {f32({3}), f32({4})}, GetParam());
  expect_close(small[0], {-3.0}, kF32Tol, "unclipped g0");
  expect_close(small[1], {-4.0}, kF32Tol, "unclipped g1");
}

TEST_P(OptimizerTrajectory, ClipvalueClipsElementwise) {
  auto out = one_step_from_zero({.learning_rate = 1.0, .clipvalue = 0.5}, {f32({-2, 0.25, 1})}, GetParam());
  expect_close(out[0], {0.5, -0.25, -0.5}, kF32Tol, "clipped");
}

TEST_P(OptimizerTrajectory, WeightDecayIsDecoupledAndUsesTheLearningRate) {
  // Keras: w -= w * weight_decay * lr before the update step.
  SGD sgd({.learning_rate = 0.1, .weight_decay = 0.5});
  Trajectory traj(sgd, {f32({2.0, -4.0})}, GetParam());
  traj.step({f32({1.0, 1.0})});
  expect_close(traj.vars[0], {2.0 - 2.0 * 0.05 - 0.1, -4.0 + 4.0 * 0.05 - 0.1}, kF32Tol, "w");
}

TEST_P(OptimizerTrajectory, LossScaleFactorDividesTheGradients) {
  SGD sgd({.learning_rate = 1.0, .loss_scale_factor = 4.0});
  Trajectory traj(sgd, {f32({0.0})}, GetParam());
  traj.step({f32({8.0})});
  expect_close(traj.vars[0], {-2.0}, kF32Tol, "w");
  const Array scaled =
      interp::interpret(trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{sgd.scale_loss(a[0])}; },
                              {{{}, DType::kF32}}),
                        {f32_scalar(1.5)})[0];
  expect_close(scaled, {6.0}, 0.0, "scaled loss");
}

TEST_P(OptimizerTrajectory, EmaAveragesTheVariablesAndOverwritesThemPeriodically) {
  // Keras (JAX back end): after the update, average = m * average + (1 - m) * w with m = 0 on the
  // first step; with overwrite frequency 3, w := average when (iterations + 1) % 3 == 0.
  const double lr = 0.1, mu = 0.9;
  SGD sgd({.learning_rate = lr, .use_ema = true, .ema_momentum = mu, .ema_overwrite_frequency = 3});
  Trajectory traj(sgd, {f32({1.0})}, GetParam());
  double w = 1.0, average = 0.0;
  const std::vector<double> grads = {1.0, -2.0, 0.5, 3.0};
  for (size_t k = 0; k < grads.size(); ++k) {
    w -= lr * grads[k];
    const double m = k == 0 ? 0.0 : mu;
    average = m * average + (1 - m) * w;
    if ((k + 1) % 3 == 0) w = average;
    traj.step({f32({grads[k]})});
    const std::string at = " after step " + std::to_string(k + 1);
    expect_close(traj.vars[0], {w}, kF32Tol, "w" + at);
    expect_close(traj.state[2], {average}, kF32Tol, "average" + at);  // [iterations, lr, avg]
  }
  std::vector<Array> final_vars = sgd.finalize_variable_values(traj.state, traj.vars);
  expect_close(final_vars[0], {average}, kF32Tol, "finalized");
  // Without EMA finalize returns the variables themselves.
  std::vector<Array> plain = SGD().finalize_variable_values(SGD().build({{{1}, DType::kF32}}), traj.vars);
  EXPECT_TRUE(plain[0].bitwise_equal(traj.vars[0]));
}

TEST(Optimizer, MissingGradientLeavesTheVariableAndItsSlotsUnchanged) {
  // Keras filters None gradients: that variable is not decayed, clipped or updated.
  SGD sgd({.learning_rate = 0.5, .momentum = 0.5, .weight_decay = 0.1, .global_clipnorm = 1.0});
  std::vector<Array> state = sgd.build({{{1}, DType::kF32}, {{1}, DType::kF32}});
  state[3] = f32({0.25});  // momentum of variable 1
  TraceFn fn = [&sgd](const std::vector<Tensor>& a) {
    auto [vars, st] = sgd.apply({a[0], a[1], a[2], a[3]}, {a[4], a[5]}, {a[6], Tensor()});
    vars.insert(vars.end(), st.begin(), st.end());
    return vars;
  };
  std::vector<Array> args = {state[0], state[1], state[2], state[3], f32({1.0}), f32({3.0}), f32({4.0})};
  std::vector<Array> out = interp::interpret(trace(fn, types_of(args)), args);
  // Variable 0: decayed (1 - 1 * 0.1 * 0.5), gradient 4 clipped to 1 on its own, m = -0.5.
  expect_close(out[0], {1.0 - 0.05 - 0.5}, kF32Tol, "w0");
  expect_close(out[1], {3.0}, 0.0, "w1 unchanged");
  expect_close(out[4], {-0.5}, kF32Tol, "momentum 0");
  expect_close(out[5], {0.25}, 0.0, "momentum 1 unchanged");
  EXPECT_EQ(out[2].to_vector<int64_t>(), std::vector<int64_t>{1});
}

INSTANTIATE_TEST_SUITE_P(Engines, OptimizerTrajectory, ::testing::Values(Engine::kInterpreter, Engine::kJit),
                         engine_name);

// ---- get() ---------------------------------------------------------------------------------------

TEST(Optimizers, GetByKerasName) {
  for (const char* name : {"adam", "Adam"}) {
    std::unique_ptr<Optimizer> opt = optimizers::get(name);
    ASSERT_NE(dynamic_cast<Adam*>(opt.get()), nullptr) << name;
    EXPECT_EQ(opt->name(), "adam");
    EXPECT_EQ(opt->learning_rate().value(), 0.001);
    EXPECT_EQ(dynamic_cast<Adam*>(opt.get())->options().epsilon, 1e-7);
  }
  for (const char* name : {"sgd", "SGD"}) {
    std::unique_ptr<Optimizer> opt = optimizers::get(name);
    ASSERT_NE(dynamic_cast<SGD*>(opt.get()), nullptr) << name;
    EXPECT_EQ(opt->name(), "SGD");
    EXPECT_EQ(opt->learning_rate().value(), 0.01);
  }
  EXPECT_EQ(Adam({.name = "my_adam"}).name(), "my_adam");
  for (const char* name : {"adamw", "AdamW"}) {
    std::unique_ptr<Optimizer> opt = optimizers::get(name);
    ASSERT_NE(dynamic_cast<AdamW*>(opt.get()), nullptr) << name;
    EXPECT_EQ(opt->name(), "adamw");
    EXPECT_EQ(opt->config().weight_decay, std::optional<double>(0.004));
  }
  for (const char* name : {"rmsprop", "RMSprop"}) {
    std::unique_ptr<Optimizer> opt = optimizers::get(name);
    ASSERT_NE(dynamic_cast<RMSprop*>(opt.get()), nullptr) << name;
    EXPECT_EQ(opt->name(), "rmsprop");
    EXPECT_EQ(opt->learning_rate().value(), 0.001);
    EXPECT_EQ(dynamic_cast<RMSprop*>(opt.get())->options().rho, 0.9);
  }
  for (const char* name : {"adagrad", "Adagrad"}) {
    std::unique_ptr<Optimizer> opt = optimizers::get(name);
    ASSERT_NE(dynamic_cast<Adagrad*>(opt.get()), nullptr) << name;
    EXPECT_EQ(opt->name(), "adagrad");
    EXPECT_EQ(dynamic_cast<Adagrad*>(opt.get())->options().initial_accumulator_value, 0.1);
  }
  expect_error([] { optimizers::get("nadam"); }, ErrorCode::kInvalidArgument,
               {"nadam", "adagrad, adam, adamw, rmsprop, sgd"});
  expect_error([] { optimizers::get("ADAM"); }, ErrorCode::kInvalidArgument, {"ADAM"});
}

// ---- (6) errors ----------------------------------------------------------------------------------

TEST(OptimizerErrors, InvalidOptionsNameTheOptionAndValue) {
  using E = ErrorCode;
  expect_error([] { SGD({.learning_rate = -0.1}); }, E::kInvalidArgument, {"SGD", "learning_rate", "-0.1"});
  expect_error([] { Adam({.learning_rate = std::nan("")}); }, E::kInvalidArgument, {"Adam", "learning_rate", "nan"});
  expect_error([] { SGD({.momentum = 1.5}); }, E::kInvalidArgument, {"momentum", "1.5", "[0, 1]"});
  expect_error([] { SGD({.momentum = -0.1}); }, E::kInvalidArgument, {"momentum", "-0.1"});
  expect_error([] { Adam({.beta_1 = 1.0}); }, E::kInvalidArgument, {"beta_1", "1", "[0, 1)"});
  expect_error([] { Adam({.beta_2 = -0.5}); }, E::kInvalidArgument, {"beta_2", "-0.5"});
  expect_error([] { Adam({.epsilon = 0.0}); }, E::kInvalidArgument, {"epsilon", "0", "> 0"});
  expect_error([] { Adam({.epsilon = -1e-7}); }, E::kInvalidArgument, {"epsilon", "-1e-07"});
  expect_error([] { SGD({.weight_decay = -0.01}); }, E::kInvalidArgument, {"weight_decay", "-0.01"});
  expect_error([] { SGD({.clipnorm = 0.0}); }, E::kInvalidArgument, {"clipnorm", "0", "> 0"});
  expect_error([] { Adam({.clipvalue = -1.0}); }, E::kInvalidArgument, {"clipvalue", "-1"});
  expect_error([] { SGD({.clipnorm = 1.0, .global_clipnorm = 2.0}); }, E::kInvalidArgument,
               {"only one of", "clipnorm = 1", "global_clipnorm = 2"});
  expect_error([] { SGD({.use_ema = true, .ema_momentum = 1.5}); }, E::kInvalidArgument, {"ema_momentum", "1.5"});
  expect_error([] { SGD({.use_ema = true, .ema_overwrite_frequency = 0}); }, E::kInvalidArgument,
               {"ema_overwrite_frequency", "0"});
  expect_error([] { Adam({.loss_scale_factor = 0.0}); }, E::kInvalidArgument, {"loss_scale_factor", "0"});
  expect_error([] { SGD({.learning_rate = optimizers::ScheduleFn()}); }, E::kInvalidArgument,
               {"learning_rate", "empty schedule"});
  expect_error([] { ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 0, .decay_rate = 0.9}); },
               E::kInvalidArgument, {"decay_steps", "0", "> 0"});
  expect_error([] { ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 5, .decay_rate = -2}); },
               E::kInvalidArgument, {"decay_rate", "-2"});
  expect_error([] { RMSprop({.rho = 1.5}); }, E::kInvalidArgument, {"RMSprop", "rho", "1.5"});
  expect_error([] { RMSprop({.momentum = -0.5}); }, E::kInvalidArgument, {"momentum", "-0.5"});
  expect_error([] { RMSprop({.epsilon = 0.0}); }, E::kInvalidArgument, {"RMSprop", "epsilon"});
  expect_error([] { RMSprop({.clipnorm = -1.0}); }, E::kInvalidArgument, {"RMSprop", "clipnorm"});
  expect_error([] { Adagrad({.initial_accumulator_value = -0.1}); }, E::kInvalidArgument,
               {"Adagrad", "initial_accumulator_value", "-0.1"});
  expect_error([] { Adagrad({.epsilon = std::nan("")}); }, E::kInvalidArgument, {"Adagrad", "epsilon", "nan"});
  expect_error([] { AdamW({.weight_decay = -0.004}); }, E::kInvalidArgument, {"AdamW", "weight_decay", "-0.004"});
  expect_error([] { AdamW({.beta_1 = 1.0}); }, E::kInvalidArgument, {"AdamW", "beta_1"});
  expect_error([] { PiecewiseConstantDecay({.boundaries = {5, 10}, .values = {1.0, 0.5}}); }, E::kInvalidArgument,
               {"PiecewiseConstantDecay", "2 boundaries", "2 values"});
  expect_error([] { PiecewiseConstantDecay({.boundaries = {}, .values = {1.0}}); }, E::kInvalidArgument,
               {"0 boundaries", "at least one boundary"});
  expect_error([] { PiecewiseConstantDecay({.boundaries = {5, 5}, .values = {1, 0.5, 0.1}}); }, E::kInvalidArgument,
               {"increase strictly", "boundaries[1] = 5"});
  expect_error([] { PiecewiseConstantDecay({.boundaries = {5}, .values = {1, -0.5}}); }, E::kInvalidArgument,
               {"values[1]", "-0.5"});
  expect_error([] { CosineDecay({.initial_learning_rate = 0.1, .decay_steps = 0}); }, E::kInvalidArgument,
               {"CosineDecay", "decay_steps", "0", "> 0"});
  expect_error([] { CosineDecay({.initial_learning_rate = 0.1, .decay_steps = 5, .alpha = 1.5}); }, E::kInvalidArgument,
               {"alpha", "1.5", "[0, 1]"});
  expect_error([] { CosineDecay({.initial_learning_rate = -1, .decay_steps = 5}); }, E::kInvalidArgument,
               {"initial_learning_rate", "-1"});
  expect_error([] { CosineDecay({.initial_learning_rate = 0.1, .decay_steps = 5, .warmup_steps = -3}); },
               E::kInvalidArgument, {"warmup_steps", "-3"});
}

TEST(OptimizerErrors, BadApplyArguments) {
  Adam adam;
  const ir::TensorType v = {{2}, DType::kF32};
  const std::vector<ir::TensorType> state_types = {{{}, DType::kI64}, {{}, DType::kF32}, v, v};
  auto apply_traced = [&](std::vector<ir::TensorType> types, size_t num_state, size_t n) {
    trace(apply_fn(adam, num_state, n), types);
  };
  // Gradient shape differs from its variable's.
  std::vector<ir::TensorType> t = state_types;
  t.push_back(v);
  t.push_back({{3}, DType::kF32});
  expect_error([&] { apply_traced(t, 4, 1); }, ErrorCode::kShapeMismatch, {"gradient 0", "f32[3]", "f32[2]"});
  // Optimizer state for other variables.
  t = {{{}, DType::kI64}, {{}, DType::kF32}, {{5}, DType::kF32}, {{5}, DType::kF32}, v, v};
  expect_error([&] { apply_traced(t, 4, 1); }, ErrorCode::kShapeMismatch,
               {"optimizer variable 2", "f32[5]", "expected f32[2]"});
  // Iterations of the wrong dtype.
  t = {{{}, DType::kI32}, {{}, DType::kF32}, v, v, v, v};
  expect_error([&] { apply_traced(t, 4, 1); }, ErrorCode::kDTypeMismatch,
               {"optimizer variable 0", "i32[]", "expected i64[]"});
  // Wrong number of optimizer variables.
  t = {{{}, DType::kI64}, {{}, DType::kF32}, v, v, v};
  expect_error([&] { apply_traced(t, 3, 1); }, ErrorCode::kInvalidArgument, {"got 3 optimizer variables, expected 4"});
  // An integer variable.
  t = {{{}, DType::kI64},  {{}, DType::kF32},  {{2}, DType::kI32},
       {{2}, DType::kI32}, {{2}, DType::kI32}, {{2}, DType::kI32}};
  expect_error([&] { apply_traced(t, 4, 1); }, ErrorCode::kDTypeMismatch, {"variable 0", "i32[2]", "floating-point"});
  // Gradient count.
  expect_error(
      [&] {
        trace(
            [&](const std::vector<Tensor>& a) {
              return adam.apply({a[0], a[1], a[2], a[3]}, {a[4]}, {a[4], a[4]}).first;
            },
            {{{}, DType::kI64}, {{}, DType::kF32}, v, v, v});
      },
      ErrorCode::kInvalidArgument, {"2 gradients for 1 variables"});
  // Only missing gradients.
  expect_error(
      [&] {
        trace(
            [&](const std::vector<Tensor>& a) {
              return adam.apply({a[0], a[1], a[2], a[3]}, {a[4]}, {Tensor()}).first;
            },
            {{{}, DType::kI64}, {{}, DType::kF32}, v, v, v});
      },
      ErrorCode::kInvalidArgument, {"no gradients"});
  expect_error([&] { adam.build({{{2}, DType::kI32}}); }, ErrorCode::kDTypeMismatch, {"variable 0", "i32[2]"});
}

TEST(OptimizerErrors, ScheduleMisuse) {
  SGD scheduled(
      {.learning_rate = ExponentialDecay({.initial_learning_rate = 0.1, .decay_steps = 2, .decay_rate = 0.5})});
  std::vector<Array> state = scheduled.build({{{1}, DType::kF32}});
  expect_error([&] { scheduled.with_learning_rate(state, 0.5); }, ErrorCode::kFailedPrecondition,
               {"schedule", "not settable"});
  SGD plain;
  std::vector<Array> plain_state = plain.build({{{1}, DType::kF32}});
  expect_error([&] { plain.with_learning_rate(plain_state, -1.0); }, ErrorCode::kInvalidArgument,
               {"learning_rate", "-1"});
  expect_error([&] { Optimizer::iterations({}); }, ErrorCode::kInvalidArgument, {"iteration count"});
  // A schedule that returns a vector (or an integer) is rejected when the step is traced.
  SGD vector_rate({.learning_rate = [](const Tensor& it) { return broadcast_to(convert(it, DType::kF32), {2}); }});
  SGD int_rate({.learning_rate = [](const Tensor& it) { return it; }});
  for (const SGD* opt : {&vector_rate, &int_rate}) {
    expect_error([&] { trace(apply_fn(*opt, 1, 1), {{{}, DType::kI64}, {{1}, DType::kF32}, {{1}, DType::kF32}}); },
                 opt == &vector_rate ? ErrorCode::kShapeMismatch : ErrorCode::kDTypeMismatch,
                 {"learning-rate schedule returned"});
  }
}

}  // namespace
}  // namespace ingot
