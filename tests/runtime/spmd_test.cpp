// SPMD execution: one Executable per mesh device on its shards, collectives as thunks over a
// Gloo group; results checked against a 1-device run (the interpreter) and exact integers.
#include "ingot/runtime/spmd.h"

#include <gtest/gtest.h>

#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trace/ops.h"
#include "runtime/four_devices.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FourDevices;

Array iota_i32(const Shape& shape) {
  std::vector<int32_t> v(static_cast<size_t>(num_elements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i);
  return Array::from_vector<int32_t>(v, shape);
}

/// An Executable over slots {0: input (rows, cols) i32} whose only thunk is `thunk` writing slot 1
/// of `out_shape`.
Executable one_collective(const Shape& in, const Shape& out, Thunk thunk) {
  return Executable({{in, DType::kI32}, {out, DType::kI32}}, 1, {std::move(thunk)}, {1}, {}, "spmd_test");
}

TEST(Spmd, DataParallelStepMatchesOneDeviceRun) {
  // Per device: y = x_shard @ w (sharded like x), g = column sums of y all-reduced over the
  // devices (replicated): the shape of a data-parallel gradient.
  FourDevices d;
  TraceFn local = [](const std::vector<Tensor>& a) {
    Tensor y = matmul(a[0], a[1]);
    return std::vector<Tensor>{y, sum(y, {0})};
  };
  const ir::Graph graph = trace(local, {{{2, 3}, DType::kF32}, {{3, 5}, DType::kF32}}, "local_step");
  std::shared_ptr<const Executable> compiled = compile_graph(graph);
  std::vector<std::pair<Shape, DType>> slots = compiled->slot_types();
  slots.push_back({{5}, DType::kF32});
  std::vector<Thunk> thunks = compiled->thunks();
  thunks.push_back(all_reduce_thunk(compiled->outputs()[1], slots.size() - 1, ReduceOp::kSum));
  const Executable step(slots, 2, thunks, {compiled->outputs()[0], slots.size() - 1}, {}, "dp_step");

  const Array x = testing::f32({1, 2, 3, 4, 5, 6, -1, 0, 2, 7, 1, 1, 0, 0, 1, 3, 2, 1, 9, 8, 7, -2, -3, -4}, {8, 3});
  Array w = Array::zeros({3, 5}, DType::kF32);
  for (int64_t i = 0; i < 15; ++i) w.data<float>()[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  const std::vector<Array> out =
      run_spmd(step, {device_put(x, d.split()), device_put(w, d.replicated())}, {d.split(), d.replicated()}, d.comms());

  // The 1-device reference: the same function on the whole batch.
  const ir::Graph whole = trace(local, {{{8, 3}, DType::kF32}, {{3, 5}, DType::kF32}}, "whole_step");
  const std::vector<Array> want = interp::interpret(whole, {x, w});
  EXPECT_EQ(out[0].sharding(), d.split());
  EXPECT_EQ(out[1].sharding(), d.replicated());
  const std::vector<float> y = to_host(out[0]).to_vector<float>(), wy = want[0].to_vector<float>();
  ASSERT_EQ(to_host(out[0]).shape(), (Shape{8, 5}));
  for (size_t i = 0; i < wy.size(); ++i) EXPECT_NEAR(y[i], wy[i], 1e-5) << i;
  for (const Array& shard : out[1].shards()) {  // every replica holds the full sum
    const std::vector<float> g = shard.to_vector<float>(), wg = want[1].to_vector<float>();
    for (size_t i = 0; i < wg.size(); ++i) EXPECT_NEAR(g[i], wg[i], 1e-4) << i;
  }
}

TEST(Spmd, AllGatherReduceScatterAndBroadcastThunks) {
  FourDevices d;
  const Array x = iota_i32({8, 3});  // device p holds rows 2p, 2p+1
  const Array sharded = device_put(x, d.split());

  const std::vector<Array> gathered =
      run_spmd(one_collective({2, 3}, {8, 3}, all_gather_thunk(0, 1)), {sharded}, {d.replicated()}, d.comms());
  for (const Array& shard : gathered[0].shards()) EXPECT_EQ(shard.to_vector<int32_t>(), x.to_vector<int32_t>());

  // reduce_scatter of each device's (4, 3) block (device b holds rows 4b..4b+3 of a (16, 3) iota):
  // device p gets row p of the sum of the four blocks.
  const std::vector<Array> scattered =
      run_spmd(one_collective({4, 3}, {1, 3}, reduce_scatter_thunk(0, 1, ReduceOp::kSum)),
               {device_put(iota_i32({16, 3}), d.split())}, {d.split()}, d.comms());
  std::vector<int32_t> want;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) {
      int32_t s = 0;
      for (int b = 0; b < 4; ++b) s += (4 * b + r) * 3 + c;
      want.push_back(s);
    }
  }
  EXPECT_EQ(to_host(scattered[0]).shape(), (Shape{4, 3}));
  EXPECT_EQ(to_host(scattered[0]).to_vector<int32_t>(), want);

  const std::vector<Array> broadcast =
      run_spmd(one_collective({2, 3}, {2, 3}, broadcast_thunk(0, 1, 2)), {sharded}, {d.replicated()}, d.comms());
  for (const Array& shard : broadcast[0].shards()) {
    EXPECT_EQ(shard.to_vector<int32_t>(), (std::vector<int32_t>{12, 13, 14, 15, 16, 17}));  // rows 4, 5
  }
}

TEST(Spmd, TheDeviceThatFailedFirstIsReported) {
  // Device 2 fails before the all_reduce; the other three then time out waiting for it. The
  // caller must see device 2's error, not a timeout.
  Runtime runtime(RuntimeOptions{.num_cpu_devices = 4});
  const Mesh mesh({{"batch", 4}}, runtime.devices());
  const NamedSharding split(mesh, PartitionSpec{"batch"});
  auto group = make_local_gloo_group(4, /*timeout=*/1.0);
  std::vector<Communicator*> comms;
  for (const auto& g : group) comms.push_back(g.get());
  Thunk breaks;
  breaks.name = "breaks_on_device_2";
  breaks.input_slots = {0};
  breaks.output_slots = {1};
  breaks.collective = [](Communicator& c, std::span<const Array>, std::span<Array>) {
    if (c.rank() == 2) throw Error(ErrorCode::kInternal, "device 2 broke");
  };
  const Executable e({{{2, 3}, DType::kI32}, {{2, 3}, DType::kI32}, {{2, 3}, DType::kI32}}, 1,
                     {breaks, all_reduce_thunk(0, 2, ReduceOp::kSum)}, {2}, {}, "breaks");
  testing::expect_error([&] { run_spmd(e, {device_put(iota_i32({8, 3}), split)}, {split}, comms); },
                        ErrorCode::kInternal, {"device 2 broke", "device 2 (cpu:2) failed first", "3 more devices"});
}

TEST(Spmd, ErrorsNameTheProblem) {
  FourDevices d;
  const Array sharded = device_put(iota_i32({8, 3}), d.split());
  const Executable gather = one_collective({2, 3}, {8, 3}, all_gather_thunk(0, 1));
  testing::expect_error([&] { run_spmd(gather, {sharded}, {d.replicated()}); }, ErrorCode::kFailedPrecondition,
                        {"all_gather", "no communicator"});
  std::vector<Communicator*> three = d.comms();
  three.pop_back();
  testing::expect_error([&] { run_spmd(gather, {sharded}, {d.replicated()}, three); }, ErrorCode::kInvalidArgument,
                        {"3 communicators", "4 devices"});
  std::vector<Communicator*> swapped = d.comms();
  std::swap(swapped[0], swapped[1]);
  testing::expect_error([&] { run_spmd(gather, {sharded}, {d.replicated()}, swapped); }, ErrorCode::kInvalidArgument,
                        {"communicator 0 is rank 1 of 4"});
  testing::expect_error([&] { run_spmd(gather, {sharded}, {}, d.comms()); }, ErrorCode::kInvalidArgument,
                        {"0 out_shardings", "1 outputs"});
  testing::expect_error([&] { run_spmd(gather, {}, {d.replicated()}); }, ErrorCode::kInvalidArgument, {"no arguments"});
  Runtime other(RuntimeOptions{.num_cpu_devices = 2});
  const NamedSharding elsewhere(Mesh({{"batch", 2}}, other.devices()), PartitionSpec{"batch"});
  testing::expect_error([&] { run_spmd(gather, {sharded}, {elsewhere}, d.comms()); }, ErrorCode::kInvalidArgument,
                        {"out_shardings[0]"});
  const NamedSharding too_long(d.mesh, PartitionSpec{"batch", {}, {}});
  testing::expect_error([&] { run_spmd(gather, {sharded}, {too_long}, d.comms()); }, ErrorCode::kShapeMismatch,
                        {"out_shardings[0]", "rank 2"});
  Thunk both = all_gather_thunk(0, 1);
  both.run = [](std::span<const Array>, std::span<Array>) {};
  testing::expect_error([&] { one_collective({2, 3}, {8, 3}, both); }, ErrorCode::kInvalidArgument,
                        {"both run and collective"});
}

}  // namespace
}  // namespace ingot
