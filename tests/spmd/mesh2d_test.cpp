// Meshes of two axes: every device gets a MeshCommunicator (the whole mesh's group and one group
// per axis), and a collective over one named axis runs among the devices along that axis only.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "compiler/codegen/parity.h"
#include "ingot/interp/interpreter.h"
#include "ingot/jit/spmd.h"
#include "ingot/runtime/gloo.h"
#include "ingot/runtime/mesh_communicator.h"
#include "ingot/runtime/runtime.h"
#include "ingot/runtime/spmd.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

/// 2 x 2 devices on axes ("batch", "model"): position p = 2 * batch + model.
struct TwoByTwo {
  Runtime runtime{RuntimeOptions{.num_cpu_devices = 4}};
  Mesh mesh{{{"batch", 2}, {"model", 2}}, runtime.devices()};
  std::vector<std::unique_ptr<Communicator>> group =
      make_mesh_communicators(mesh, [](int size) { return make_local_gloo_group(size); });
  std::vector<Communicator*> comms() const {
    std::vector<Communicator*> c;
    for (const auto& g : group) c.push_back(g.get());
    return c;
  }
};

TEST(Mesh2d, CollectivesOverOneAxisStayOnItsLines) {
  TwoByTwo d;
  ASSERT_EQ(d.group.size(), 4u);
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(d.group[p]->rank(), p);
    EXPECT_EQ(d.group[p]->size(), 4);
    EXPECT_EQ(d.group[p]->along("batch").rank(), p / 2);
    EXPECT_EQ(d.group[p]->along("model").rank(), p % 2);
    EXPECT_EQ(d.group[p]->along("model").size(), 2);
  }
  testing::expect_error([&] { d.group[0]->along("data"); }, ErrorCode::kNotFound, {"no mesh axis 'data'", "batch, model"});
  // Device p contributes 10^p: along "model" rows {0,1} and {2,3} sum; along "batch" columns
  // {0,2} and {1,3}; the whole mesh everything.
  std::vector<Array> model(4), batch(4), whole(4);
  std::vector<std::thread> threads;
  for (int p = 0; p < 4; ++p) {
    threads.emplace_back([&, p] {
      const double v = std::pow(10.0, p);
      model[p] = Array::full({1}, v, DType::kF64);
      batch[p] = Array::full({1}, v, DType::kF64);
      whole[p] = Array::full({1}, v, DType::kF64);
      d.group[p]->along("model").all_reduce(model[p], ReduceOp::kSum);
      d.group[p]->along("batch").all_reduce(batch[p], ReduceOp::kSum);
      d.group[p]->all_reduce(whole[p], ReduceOp::kSum);
    });
  }
  for (std::thread& t : threads) t.join();
  const double want_model[] = {11, 11, 1100, 1100}, want_batch[] = {101, 1010, 101, 1010};
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(model[p].to_vector<double>()[0], want_model[p]) << p;
    EXPECT_EQ(batch[p].to_vector<double>()[0], want_batch[p]) << p;
    EXPECT_EQ(whole[p].to_vector<double>()[0], 1111) << p;
  }
}

TEST(Mesh2d, CompiledCollectivesUseTheirAxisGroup) {
  // x (4, 3) split over "batch" (rows), replicated over "model"; w (3, 4) split over "model"
  // (columns of each device's block: w[:, 2m : 2m + 2]). Each device computes x_b @ w_m; the
  // gathered product over "model" (all_gather on the transposed block, then transposed back) is
  // x_b @ w, and its sum over "batch" is the column sums of x @ w.
  TwoByTwo d;
  const TraceFn step = [](const std::vector<Tensor>& a) {
    const Tensor part = matmul(a[0], a[1]);                                          // (2, 2)
    const Tensor full = transpose(all_gather(transpose(part, {1, 0}), "model", 2), {1, 0});  // (2, 4)
    return std::vector<Tensor>{all_reduce(sum(full, {0}), "batch", "sum"), full};
  };
  const auto exe = compile_graph_spmd(trace(step, {{{2, 3}, DType::kF32}, {{3, 2}, DType::kF32}}, "step"));
  const Array x = testing::random_array({4, 3}, DType::kF32, 5), w = testing::random_array({3, 4}, DType::kF32, 6);
  const NamedSharding rows(d.mesh, PartitionSpec{"batch"}), cols(d.mesh, PartitionSpec{{}, "model"}),
      replicated(d.mesh, PartitionSpec{});
  const std::vector<Array> out = run_spmd(*exe, {device_put(x, rows), device_put(w, cols)}, {replicated, rows}, d.comms());
  const std::vector<Array> want = interp::interpret(
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(matmul(a[0], a[1]), {0}), matmul(a[0], a[1])}; },
            {{{4, 3}, DType::kF32}, {{3, 4}, DType::kF32}}),
      {x, w});
  for (const Array& replica : out[0].shards()) testing::expect_values(replica, want[0].to_doubles(), 1e-5);
  testing::expect_values(to_host(out[1]), want[1].to_doubles(), 1e-5);
}

}  // namespace
}  // namespace ingot
