// compile_graph_spmd: per-device graphs with all_reduce split into compiled segments and
// collective thunks, run by run_spmd on 4 CPU devices over a local Gloo group; checked against
// the same computation on the whole batch on one device (the data-parallel identity: the mean of
// the shards' mean-loss gradients is the whole batch's gradient).
#include "ingot/jit/spmd.h"

#include <gtest/gtest.h>

#include <map>

#include "ingot/autodiff/autodiff.h"
#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/runtime.h"
#include "ingot/runtime/spmd.h"
#include "ingot/trace/ops.h"
#include "compiler/codegen/parity.h"
#include "runtime/four_devices.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FourDevices;

void expect_near(const Array& got, const Array& want, double tol) {
  const std::vector<double> g = to_host(got).to_doubles(), w = to_host(want).to_doubles();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol) << i;
}

TEST(SpmdCompile, SegmentsAroundAnAllReduceMatchTheWholeBatch) {
  // Per device: column sums of x_p @ w, their mean over the devices, then 2 * mean + 1: one
  // segment before the collective and one after it.
  FourDevices d;
  const TraceFn local = [](const std::vector<Tensor>& a) {
    const Tensor s = sum(matmul(a[0], a[1]), {0});
    return std::vector<Tensor>{all_reduce(s, "batch", "mean") * 2.0 + 1.0, matmul(a[0], a[1])};
  };
  const ir::Graph graph = trace(local, {{{2, 3}, DType::kF32}, {{3, 5}, DType::kF32}}, "local");
  // In the graph's order: two JIT segments around a synchronous collective.
  const std::shared_ptr<const Executable> in_order = compile_graph_spmd(graph, {}, {}, {.overlap_collectives = false});
  ASSERT_EQ(in_order->thunks().size(), 3u);
  EXPECT_TRUE(static_cast<bool>(in_order->thunks()[1].collective));
  EXPECT_FALSE(in_order->thunks()[1].async);
  // Overlapped (the default): the collective starts once the sums are computed, the second
  // product (which does not need it) runs meanwhile, and the wait comes before 2 * mean + 1.
  const std::shared_ptr<const Executable> overlapped = compile_graph_spmd(graph);
  ASSERT_EQ(overlapped->thunks().size(), 5u);
  EXPECT_TRUE(overlapped->thunks()[1].async);
  EXPECT_TRUE(static_cast<bool>(overlapped->thunks()[2].run));
  EXPECT_EQ(overlapped->thunks()[3].wait_for, std::optional<size_t>(1));
  const Array x = testing::random_array({8, 3}, DType::kF32, 1), w = testing::random_array({3, 5}, DType::kF32, 2);
  // The whole batch: column sums over 8 rows are 4x the mean of the four 2-row shards' sums.
  const TraceFn whole = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(matmul(a[0], a[1]), {0}) * 0.5 + 1.0, matmul(a[0], a[1])};
  };
  const std::vector<Array> want =
      interp::interpret(trace(whole, {{{8, 3}, DType::kF32}, {{3, 5}, DType::kF32}}), {x, w});
  for (const auto& step : {in_order, overlapped}) {
    const std::vector<Array> out = run_spmd(*step, {device_put(x, d.split()), device_put(w, d.replicated())},
                                            {d.replicated(), d.split()}, d.comms());
    for (const Array& replica : out[0].shards()) expect_near(replica, want[0], 1e-5);
    expect_near(out[1], want[1], 1e-5);
  }
}

TEST(SpmdCompile, AllReducesStartedTogetherAreOneGroupedThunk) {
  // Both all_reduces can start at once (their inputs are parameters; gradient buckets ready
  // together): one all_reduce_group thunk, waited for once, while the product runs.
  FourDevices d;
  const TraceFn local = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{all_reduce(a[0], "batch", "sum") + 1.0, all_reduce(a[1], "batch", "sum") * 2.0,
                               matmul(a[0], a[1])};
  };
  const ir::Graph graph = trace(local, {{{2, 3}, DType::kF32}, {{3, 5}, DType::kF32}}, "two_buckets");
  const std::shared_ptr<const Executable> step = compile_graph_spmd(graph);
  int groups = 0, waits = 0, single = 0;
  for (const Thunk& t : step->thunks()) {
    groups += t.name == "all_reduce_group(sum) x 2" && t.async && t.input_slots.size() == 2 ? 1 : 0;
    waits += t.wait_for ? 1 : 0;
    single += t.name == "all_reduce(sum)" ? 1 : 0;
  }
  EXPECT_EQ(groups, 1);
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(single, 0);
  // Without overlap each collective is synchronous, in the graph's order: no group.
  const std::shared_ptr<const Executable> in_order = compile_graph_spmd(graph, {}, {}, {.overlap_collectives = false});
  for (const Thunk& t : in_order->thunks()) EXPECT_EQ(t.name.find("all_reduce_group"), std::string::npos);
  const Array x = testing::random_array({8, 3}, DType::kF32, 1), w = testing::random_array({3, 5}, DType::kF32, 2);
  for (const auto& exe : {step, in_order}) {
    const std::vector<Array> out = run_spmd(*exe, {device_put(x, d.split()), device_put(w, d.replicated())},
                                            {d.split(), d.replicated(), d.split()}, d.comms());
    // Sum over the devices of x's 2-row blocks: every device gets the same block sum.
    const std::vector<double> xs = x.to_doubles();
    std::vector<double> block(6, 0.0);
    for (size_t i = 0; i < xs.size(); ++i) block[i % 6] += xs[i];
    const std::vector<double> got = to_host(out[0]).to_doubles();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], block[i % 6] + 1.0, 1e-5) << i;
    for (const Array& replica : out[1].shards()) {
      const std::vector<double> r = to_host(replica).to_doubles(), ws = w.to_doubles();
      for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(r[i], 8.0 * ws[i], 1e-5) << i;
    }
    expect_near(out[2],
                jit([](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; })({x, w})[0],
                1e-5);
  }
}

TEST(SpmdCompile, AxisIndexIsEachDevicesPositionAlongTheAxis) {
  // lax.axis_index: device p of the 4 gets p (the output's blocks, split over the devices, are
  // [0, 1, 2, 3]); offset by the per-device batch size it is the shard's first global row.
  FourDevices d;
  const TraceFn local = [](const std::vector<Tensor>& a) {
    const Tensor index = axis_index("batch", 4);
    return std::vector<Tensor>{reshape(index, {1}), reshape(index * a[0].dim(0), {1})};
  };
  const ir::Graph graph = trace(local, {{{2, 3}, DType::kF32}}, "index");
  const Array x = testing::random_array({8, 3}, DType::kF32, 1);
  const std::vector<Array> out =
      run_spmd(*compile_graph_spmd(graph), {device_put(x, d.split())}, {d.split(), d.split()}, d.comms());
  EXPECT_EQ(to_host(out[0]).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(to_host(out[1]).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4, 6}));
  testing::expect_error([] { axis_index("batch", 0); }, ErrorCode::kInvalidArgument, {"axis_size", "'batch'"});
}

TEST(SpmdCompile, DataParallelGradientsEqualTheWholeBatchGradient) {
  // loss_p = mean((x_p w - y_p)^2) on each device's shard; grad = all_reduce(dloss_p/dw, mean).
  // With equal shards that is d(mean over the whole batch)/dw, what one device computes.
  FourDevices d;
  const TraceFn loss = [](const std::vector<Tensor>& a) {
    const Tensor e = matmul(a[0], a[1]) - a[2];
    return std::vector<Tensor>{mean(e * e)};
  };
  const TraceFn dp_step = [&](const std::vector<Tensor>& a) {
    const std::vector<Tensor> vg = value_and_grad(loss, {1})(a);
    return std::vector<Tensor>{all_reduce(vg[0], "batch", "mean"), all_reduce(vg[1], "batch", "mean")};
  };
  const std::vector<ir::TensorType> shard = {{{4, 6}, DType::kF32}, {{6, 3}, DType::kF32}, {{4, 3}, DType::kF32}};
  const std::shared_ptr<const Executable> step = compile_graph_spmd(trace(dp_step, shard, "dp_step"));
  const Array x = testing::random_array({16, 6}, DType::kF32, 3), w = testing::random_array({6, 3}, DType::kF32, 4),
              y = testing::random_array({16, 3}, DType::kF32, 5);
  const std::vector<Array> out =
      run_spmd(*step, {device_put(x, d.split()), device_put(w, d.replicated()), device_put(y, d.split())},
               {d.replicated(), d.replicated()}, d.comms());
  const std::vector<ir::TensorType> whole = {{{16, 6}, DType::kF32}, {{6, 3}, DType::kF32}, {{16, 3}, DType::kF32}};
  const std::vector<Array> want = jit(value_and_grad(loss, {1}))({x, w, y});
  for (size_t i = 0; i < 2; ++i) {
    for (const Array& replica : out[i].shards()) expect_near(replica, want[i], 1e-5);
  }
}

TEST(SpmdCompile, ADonatedParameterIsUpdatedInPlaceOnEveryDevice) {
  // w' = w - 0.1 * mean over the devices of x_p^T x_p w: the update segment comes after the
  // all_reduce and is the last to read w, so w's shards receive w' in place.
  FourDevices d;
  const TraceFn step = [](const std::vector<Tensor>& a) {
    const Tensor g = matmul(transpose(a[0], {1, 0}), matmul(a[0], a[1]));
    return std::vector<Tensor>{a[1] - all_reduce(g, "batch", "mean") * 0.1};
  };
  const std::vector<ir::TensorType> shard = {{{2, 3}, DType::kF32}, {{3, 2}, DType::kF32}};
  const std::shared_ptr<const Executable> exe =
      compile_graph_spmd(trace(step, shard, "update"), {}, {}, {.donate_argnums = {1}});
  EXPECT_EQ(exe->outputs(), (std::vector<size_t>{1})) << "the output is the donated parameter's slot";
  EXPECT_EQ(exe->donated_inputs(), (std::vector<size_t>{1}));
  const Array x = testing::random_array({8, 3}, DType::kF32, 7), w = testing::random_array({3, 2}, DType::kF32, 8);
  const Array w_on_mesh = device_put(w, d.replicated());
  std::vector<const void*> before;
  for (const Array& s : w_on_mesh.shards()) before.push_back(s.buffer()->data());
  const std::vector<Array> out = run_spmd(*exe, {device_put(x, d.split()), w_on_mesh}, {d.replicated()}, d.comms());
  const std::vector<Array> shards = out[0].shards();
  for (size_t p = 0; p < shards.size(); ++p) EXPECT_EQ(shards[p].buffer()->data(), before[p]) << "device " << p;
  // The whole batch on one device: w - 0.1 * (x^T x w) / 4 (the mean of the four shards' sums).
  const TraceFn whole = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{a[1] - matmul(transpose(a[0], {1, 0}), matmul(a[0], a[1])) * 0.025};
  };
  const std::vector<Array> want =
      interp::interpret(trace(whole, {{{8, 3}, DType::kF32}, {{3, 2}, DType::kF32}}), {x, w});
  for (const Array& replica : shards) expect_near(replica, want[0], 1e-5);
}

TEST(SpmdCompile, FsdpGradientsThroughAllGatherAreTheBlocksOfTheWholeBatchGradient) {
  // Each device holds rows 2p, 2p + 1 of w (8, 3): w = all_gather(block); loss_p = mean((x_p w -
  // y_p)^2); the block's gradient (all_gather's VJP: reduce_scatter sum) / 4 is block p of the
  // whole batch's gradient.
  FourDevices d;
  const TraceFn loss = [](const std::vector<Tensor>& a) {
    const Tensor e = matmul(a[0], a[1]) - a[2];
    return std::vector<Tensor>{mean(e * e)};
  };
  const TraceFn fsdp_step = [&](const std::vector<Tensor>& a) {
    const TraceFn gathered = [&](const std::vector<Tensor>& b) {
      return loss({b[0], all_gather(b[1], "batch", 4), b[2]});
    };
    const std::vector<Tensor> vg = value_and_grad(gathered, {1})(a);
    return std::vector<Tensor>{all_reduce(vg[0], "batch", "mean"), vg[1] / 4.0};
  };
  const std::vector<ir::TensorType> shard = {{{4, 8}, DType::kF32}, {{2, 3}, DType::kF32}, {{4, 3}, DType::kF32}};
  const std::shared_ptr<const Executable> step = compile_graph_spmd(trace(fsdp_step, shard, "fsdp_step"));
  const Array x = testing::random_array({16, 8}, DType::kF32, 13), w = testing::random_array({8, 3}, DType::kF32, 14),
              y = testing::random_array({16, 3}, DType::kF32, 15);
  const std::vector<Array> out =
      run_spmd(*step, {device_put(x, d.split()), device_put(w, d.split()), device_put(y, d.split())},
               {d.replicated(), d.split()}, d.comms());
  const std::vector<Array> want = jit(value_and_grad(loss, {1}))({x, w, y});
  for (const Array& replica : out[0].shards()) expect_near(replica, want[0], 1e-5);
  expect_near(out[1], want[1], 1e-5);  // the blocks assemble into the whole gradient
  // Shape rules: a block whose rows do not split; a bad axis size.
  testing::expect_error(
      [] {
        trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{reduce_scatter(a[0], "batch", 4)}; },
              {{{6}, DType::kF32}});
      },
      ErrorCode::kShapeMismatch, {"does not split into 4 parts"});
  testing::expect_error(
      [] {
        trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{all_gather(a[0], "batch", 0)}; },
              {{{6}, DType::kF32}});
      },
      ErrorCode::kInvalidArgument, {"axis_size is 0"});
}

TEST(SpmdCompile, CollectivesNeedTheSpmdPath) {
  const TraceFn f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{all_reduce(a[0], "batch")}; };
  const ir::Graph g = trace(f, {{{3}, DType::kF32}});
  testing::expect_error([&] { compile_graph(g); }, ErrorCode::kUnimplemented, {"all_reduce", "compile_graph_spmd"});
  testing::expect_error([&] { interp::interpret(g, {Array::zeros({3}, DType::kF32)}); }, ErrorCode::kFailedPrecondition,
                        {"cannot run on one device", "run_spmd"});
  // A graph without collectives is one segment and runs on one device like compile_graph.
  const TraceFn plain = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 3.0, a[0]}; };
  const std::shared_ptr<const Executable> one = compile_graph_spmd(trace(plain, {{{2}, DType::kF32}}));
  const Array x = Array::from_vector<float>({1, -2}, {2});
  const std::vector<Array> out = one->run({x});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{3, -6}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_NE(out[1].buffer(), x.buffer());  // a returned parameter is a copy
  // Bad attributes are traced errors.
  testing::expect_error(
      [&] {
        trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{all_reduce(a[0], "")}; },
              {{{3}, DType::kF32}});
      },
      ErrorCode::kInvalidArgument, {"axis_name is empty"});
  testing::expect_error(
      [&] {
        trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{all_reduce(a[0], "b", "prod")}; },
              {{{3}, DType::kF32}});
      },
      ErrorCode::kInvalidArgument, {"reduction is 'prod'"});
}

TEST(SpmdCompile, ASegmentThatFailsToCompileIsNamed) {
  // The segments compile concurrently; the failing one (after the all_reduce: an `add` whose
  // lowering this registry lacks) is named in the error.
  ir::OpRegistry registry;
  for (const std::string& name : ir::OpRegistry::builtin().names()) {
    ir::OpDef def = ir::OpRegistry::builtin().get(name);
    if (name == "add") def.lower = nullptr;
    registry.add(def);
  }
  const TraceFn f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{all_reduce(a[0] * 2.0, "batch", "sum") + a[0]};
  };
  const ir::Graph traced = trace(f, {{{4}, DType::kF32}}, "broken");
  ir::Graph g("broken", &registry);
  std::map<ir::ValueId, ir::ValueId> map;
  for (ir::ValueId p : traced.parameters()) map[p] = g.add_parameter(traced.type(p));
  for (const ir::Node& n : traced.nodes()) {
    std::vector<ir::ValueId> in;
    for (ir::ValueId v : n.inputs) in.push_back(map.at(v));
    std::vector<ir::TensorType> types;
    for (ir::ValueId v : n.outputs) types.push_back(traced.type(v));
    const std::vector<ir::ValueId> out = g.add_node_with_types(n.op, in, n.attrs, types);
    for (size_t i = 0; i < out.size(); ++i) map[n.outputs[i]] = out[i];
  }
  std::vector<ir::ValueId> outputs;
  for (ir::ValueId v : traced.outputs()) outputs.push_back(map.at(v));
  g.set_outputs(outputs);
  testing::expect_error([&] { compile_graph_spmd(g); }, ErrorCode::kUnimplemented,
                        {"compile_graph_spmd: segment 1 of 'broken'", "no lowering for op 'add'"});
}

TEST(SpmdCompile, CollectivesWithoutAVjpRuleAreNamedErrors) {
  // max / min reductions have no VJP rule: differentiating through them names the op.
  for (const char* op : {"all_reduce", "reduce_scatter"}) {
    const TraceFn f = [op](const std::vector<Tensor>& a) {
      const Tensor r =
          std::string(op) == "all_reduce" ? all_reduce(a[0], "batch", "max") : reduce_scatter(a[0], "batch", 2, "max");
      return std::vector<Tensor>{sum(r)};
    };
    testing::expect_error([&] { trace(value_and_grad(f, {0}), {{{4}, DType::kF32}}); }, ErrorCode::kUnimplemented,
                          {std::string("no VJP rule for ") + op + " with reduction 'max'", "sum or mean only"});
  }
}

}  // namespace
}  // namespace ingot
