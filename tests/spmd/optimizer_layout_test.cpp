// Optimizers on split gradients (FSDP): each device holds a block of a variable and of its
// gradient; what needs the whole gradient -- global_clipnorm's and clipnorm's norms,
// LossScaleOptimizer's finiteness check -- sums the blocks' parts over the devices
// (optimizers::GradientLayout), so every device takes the decision one device takes on the whole
// gradient. Compared with Optimizer::apply on the whole arrays on one device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/codegen/parity.h"
#include "ingot/jit/jit.h"
#include "ingot/jit/spmd.h"
#include "ingot/runtime/spmd.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/loss_scale.h"
#include "ingot/trainer/optimizers.h"
#include "runtime/four_devices.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FourDevices;

// w (8, 3) split over 4 devices (rows 2p, 2p + 1), b (3,) replicated, their gradients laid out the
// same way. Returns the new (w, b) and the new optimizer state, all whole on the host.
struct Updated {
  Array w, b;
  std::vector<Array> state;
};

std::vector<Tensor> take(const std::vector<Tensor>& a, size_t at, size_t n) {
  return {a.begin() + at, a.begin() + at + n};
}

Updated apply_split(const optimizers::Optimizer& opt, const Array& w, const Array& b, const Array& gw, const Array& gb,
                    bool with_layout) {
  FourDevices d;
  const std::vector<ir::TensorType> vars = {{{2, 3}, DType::kF32}, {{3}, DType::kF32}};
  const std::vector<Array> state = opt.build(vars);
  const TraceFn step = [&](const std::vector<Tensor>& a) {
    optimizers::GradientLayout layout;
    if (with_layout) {
      layout.split = {true, false};
      layout.sum_over_devices = [](const Tensor& x) { return all_reduce(x, "batch", "sum"); };
    }
    auto [new_vars, new_state] = opt.apply(take(a, 4, state.size()), {a[0], a[1]}, {a[2], a[3]}, layout);
    std::vector<Tensor> out = new_vars;
    out.insert(out.end(), new_state.begin(), new_state.end());
    return out;
  };
  std::vector<ir::TensorType> types = {vars[0], vars[1], vars[0], vars[1]};
  std::vector<Array> args = {device_put(w, d.split()), device_put(b, d.replicated()), device_put(gw, d.split()),
                             device_put(gb, d.replicated())};
  std::vector<NamedSharding> out_shardings = {d.split(), d.replicated()};
  for (const Array& s : state) {
    types.push_back({s.shape(), s.dtype()});
    args.push_back(device_put(s, d.replicated()));
    out_shardings.push_back(d.replicated());
  }
  const auto exe = compile_graph_spmd(trace(step, types, "split_apply"));
  const std::vector<Array> out = run_spmd(*exe, args, out_shardings, d.comms());
  Updated u{to_host(out[0]), to_host(out[1]), {}};
  for (size_t i = 2; i < out.size(); ++i) {
    // Replicated results must agree on every device (else the devices took different decisions).
    const std::vector<Array> replicas = out[i].shards();
    for (const Array& r : replicas) {
      if (!r.bitwise_equal(replicas[0])) ADD_FAILURE() << "state " << i - 2 << " differs between devices";
    }
    u.state.push_back(to_host(replicas[0]));
  }
  return u;
}

Updated apply_whole(const optimizers::Optimizer& opt, const Array& w, const Array& b, const Array& gw,
                    const Array& gb) {
  const std::vector<Array> state = opt.build({{{8, 3}, DType::kF32}, {{3}, DType::kF32}});
  const TraceFn step = [&](const std::vector<Tensor>& a) {
    auto [new_vars, new_state] = opt.apply(take(a, 4, state.size()), {a[0], a[1]}, {a[2], a[3]});
    std::vector<Tensor> out = new_vars;
    out.insert(out.end(), new_state.begin(), new_state.end());
    return out;
  };
  std::vector<Array> args = {w, b, gw, gb};
  args.insert(args.end(), state.begin(), state.end());
  const std::vector<Array> out = jit(step)(args);
  return {out[0], out[1], {out.begin() + 2, out.end()}};
}

struct Gradients {
  Array w = testing::random_array({8, 3}, DType::kF32, 31);
  Array b = testing::random_array({3}, DType::kF32, 32);
  Array gw = testing::random_array({8, 3}, DType::kF32, 33, -20, 20);  // norms well above the clip
  Array gb = testing::random_array({3}, DType::kF32, 34, -20, 20);
};

TEST(SplitGradients, ClippingNormsCoverTheWholeGradient) {
  const Gradients g;
  for (const bool global : {true, false}) {
    SCOPED_TRACE(global ? "global_clipnorm" : "clipnorm");
    const optimizers::SGD sgd(global ? optimizers::SGDOptions{.learning_rate = 0.1, .global_clipnorm = 1.0}
                                     : optimizers::SGDOptions{.learning_rate = 0.1, .clipnorm = 1.0});
    const Updated want = apply_whole(sgd, g.w, g.b, g.gw, g.gb);
    const Updated got = apply_split(sgd, g.w, g.b, g.gw, g.gb, true);
    testing::expect_values(got.w, want.w.to_doubles(), 1e-6);
    testing::expect_values(got.b, want.b.to_doubles(), 1e-6);
    // Without the layout each device clips by its own block's norm: a different update.
    const Updated blockwise = apply_split(sgd, g.w, g.b, g.gw, g.gb, false);
    const std::vector<double> a = blockwise.w.to_doubles(), e = want.w.to_doubles();
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - e[i]));
    EXPECT_GT(diff, 1e-3);
  }
}

TEST(SplitGradients, ANonFiniteBlockOnOneDeviceSkipsTheStepOnEveryDevice) {
  Gradients g;
  g.gw.data<float>()[4 * 3 + 1] = std::numeric_limits<float>::infinity();  // row 4: device 2's block
  const optimizers::LossScaleOptimizer lso(
      {.inner_optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.1}),
       .initial_scale = 8.0});
  const Updated want = apply_whole(lso, g.w, g.b, g.gw, g.gb);
  testing::expect_values(want.w, g.w.to_doubles(), 0);                        // one device skips the step...
  EXPECT_EQ(optimizers::LossScaleOptimizer::dynamic_scale(want.state), 4.0);  // ...and halves the scale
  const Updated got = apply_split(lso, g.w, g.b, g.gw, g.gb, true);
  testing::expect_values(got.w, g.w.to_doubles(), 0);
  testing::expect_values(got.b, g.b.to_doubles(), 0);
  EXPECT_EQ(optimizers::LossScaleOptimizer::dynamic_scale(got.state), 4.0);
  // A split gradient with no way to sum over the devices is refused.
  const optimizers::SGD sgd(optimizers::SGDOptions{});
  testing::expect_error(
      [&] {
        trace(
            [&](const std::vector<Tensor>& a) {
              optimizers::GradientLayout layout{.split = {true}};
              return sgd.apply(take(a, 2, 2), {a[0]}, {a[1]}, layout).first;
            },
            {{{2}, DType::kF32}, {{2}, DType::kF32}, {{}, DType::kI64}, {{}, DType::kF32}});
      },
      ErrorCode::kInvalidArgument,
      {"SGD: a gradient is split over the devices but the GradientLayout has no sum_over_devices"});
}

}  // namespace
}  // namespace ingot
