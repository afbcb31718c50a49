// Mesh / PartitionSpec / NamedSharding, and sharded arrays: device_put, to_host, reshard.
#include "ingot/runtime/sharding.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "ingot/runtime/array.h"
#include "ingot/runtime/runtime.h"
#include "ingot/runtime/worker.h"
#include "test_util.h"

namespace ingot {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;
using I32s = std::vector<int32_t>;

I32s iota(int32_t n) {
  I32s v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Elements of `box` of a row-major array of `shape` holding `v`, by plain index arithmetic.
I32s slice(const I32s& v, const Shape& shape, const std::vector<IndexRange>& box) {
  I32s out;
  const std::vector<int64_t> strides = row_major_strides(shape);
  std::vector<int64_t> idx(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) idx[d] = box[d].start;
  if (num_elements(shape) == 0) return out;
  for (;;) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat += idx[d] * strides[d];
    out.push_back(v[static_cast<size_t>(flat)]);
    size_t d = shape.size();
    for (; d-- > 0;) {
      if (++idx[d] < box[d].stop) break;
      idx[d] = box[d].start;
    }
    if (d == static_cast<size_t>(-1)) return out;
  }
}

class ShardingTest : public ::testing::Test {
 protected:
  Runtime rt{RuntimeOptions{.num_cpu_devices = 4}};
  Mesh mesh1{{{"batch", 4}}, rt.devices()};
  Mesh mesh2{{{"batch", 2}, {"model", 2}}, rt.devices()};

  I32s shard_values(const Array& a, size_t position) { return a.shards().at(position).to_vector<int32_t>(); }
  // Every shard holds exactly the slice its sharding names, and to_host gives back `v`.
  void expect_consistent(const Array& a, const I32s& v) {
    const NamedSharding s = a.sharding();
    ASSERT_EQ(a.num_shards(), s.num_devices());
    for (int64_t p = 0; p < s.num_devices(); ++p) {
      const Array shard = a.shards()[static_cast<size_t>(p)];
      EXPECT_EQ(&shard.device(), s.mesh().devices()[static_cast<size_t>(p)]);
      EXPECT_EQ(shard.shape(), s.shard_shape(a.shape()));
      EXPECT_EQ(shard.to_vector<int32_t>(), slice(v, a.shape(), s.shard_index(p, a.shape())))
          << "shard " << p << " of " << s.to_string();
    }
    EXPECT_EQ(to_host(a).to_vector<int32_t>(), v);
  }
};

// --- Mesh ---------------------------------------------------------------------------------

TEST_F(ShardingTest, MeshLaysDevicesOutRowMajor) {
  EXPECT_EQ(mesh2.size(), 4);
  EXPECT_EQ(mesh2.axis_index("model"), 1);
  EXPECT_EQ(mesh2.axis_size("batch"), 2);
  EXPECT_EQ(mesh2.coords(0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(mesh2.coords(1), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(mesh2.coords(2), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(mesh2.coords(3), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(mesh2.position_of(rt.device(2)), 2);
  EXPECT_EQ(mesh2.position_of(default_cpu_device()), -1);
  EXPECT_EQ(mesh2.to_string(), "Mesh('batch': 2, 'model': 2; devices: cpu:0, cpu:1, cpu:2, cpu:3)");
  EXPECT_EQ(Mesh::single_device(rt.device(3)).to_string(), "Mesh(device: cpu:3)");
  EXPECT_TRUE(mesh2 == Mesh({{"batch", 2}, {"model", 2}}, rt.devices()));
  EXPECT_FALSE(mesh2 == Mesh({{"batch", 4}}, rt.devices()));
  expect_error([&] { mesh2.axis_size("data"); }, ErrorCode::kNotFound, {"'data'", "'batch': 2, 'model': 2"});
  expect_error([&] { mesh2.coords(4); }, ErrorCode::kOutOfRange, {"position 4"});
}

TEST_F(ShardingTest, BadMeshesAreClearErrors) {
  std::vector<Device*> d = rt.devices();
  expect_error([&] { Mesh({{"batch", 2}, {"batch", 2}}, d); }, ErrorCode::kInvalidArgument, {"'batch' is used twice"});
  expect_error([&] { Mesh({{"batch", 3}}, d); }, ErrorCode::kInvalidArgument,
               {"4 devices given for axes ('batch': 3) whose sizes multiply to 3"});
  expect_error([&] { Mesh({{"batch", 2}, {"model", 4}}, d); }, ErrorCode::kInvalidArgument,
               {"4 devices", "multiply to 8"});
  expect_error([&] { Mesh({{"batch", 0}}, {}); }, ErrorCode::kInvalidArgument, {"'batch' has size 0"});
  expect_error([&] { Mesh({{"", 4}}, d); }, ErrorCode::kInvalidArgument, {"axis 0", "empty name"});
  expect_error([&] { Mesh({{"batch", 2}}, {d[0], nullptr}); }, ErrorCode::kInvalidArgument, {"device 1 is null"});
  expect_error([&] { Mesh({{"batch", 2}}, {d[1], d[1]}); }, ErrorCode::kInvalidArgument, {"cpu:1 appears twice"});
}

// --- PartitionSpec ------------------------------------------------------------------------

TEST(PartitionSpec, ReadsLikeJax) {
  EXPECT_EQ(PartitionSpec().to_string(), "PartitionSpec()");
  EXPECT_EQ(PartitionSpec{"batch"}.to_string(), "PartitionSpec('batch',)");
  EXPECT_EQ((PartitionSpec{"batch", "model"}).to_string(), "PartitionSpec('batch', 'model')");
  EXPECT_EQ((PartitionSpec{{}, {"batch", "model"}}).to_string(), "PartitionSpec(None, ('batch', 'model'))");
  PartitionSpec tuple{{"batch", "model"}};
  ASSERT_EQ(tuple.size(), 1);
  EXPECT_EQ(tuple.dims()[0].axes, (std::vector<std::string>{"batch", "model"}));
  EXPECT_TRUE(tuple.dim(5).replicated());
  EXPECT_EQ((PartitionSpec{"x", {}, {}}).normalized(), PartitionSpec{"x"});
  EXPECT_NE((PartitionSpec{"x", {}}), PartitionSpec{"x"});
}

TEST(PartitionSpec, AnAxisUsedTwiceIsAnError) {
  expect_error([] { PartitionSpec{"batch", "batch"}; }, ErrorCode::kInvalidArgument,
               {"'batch' is used twice (dimension 0 and dimension 1)"});
  expect_error([] { PartitionSpec({"model", {"batch", "model"}}); }, ErrorCode::kInvalidArgument,
               {"'model' is used twice (dimension 0 and dimension 1)"});
  expect_error([] { PartitionSpec{{"x", "x"}}; }, ErrorCode::kInvalidArgument, {"'x' is used twice"});
  expect_error([] { PartitionSpec{{}, ""}; }, ErrorCode::kInvalidArgument, {"dimension 1 names an empty mesh axis"});
}

// --- NamedSharding index arithmetic -------------------------------------------------------

TEST_F(ShardingTest, ShardIndicesOnA2dMesh) {
  NamedSharding s(mesh2, PartitionSpec{"batch", "model"});
  const Shape shape{4, 6};
  EXPECT_EQ(s.shard_shape(shape), (Shape{2, 3}));
  using R = std::vector<IndexRange>;
  EXPECT_EQ(s.devices_indices(shape),
            (std::vector<R>{R{{0, 2}, {0, 3}}, R{{0, 2}, {3, 6}}, R{{2, 4}, {0, 3}}, R{{2, 4}, {3, 6}}}));
  EXPECT_FALSE(s.is_fully_replicated());
  EXPECT_EQ(s.replica_id(3), 0);

  NamedSharding rows(mesh2, PartitionSpec{"batch"});  // model axis unused: replicas
  EXPECT_EQ(rows.shard_index(1, shape), (R{{0, 2}, {0, 6}}));
  EXPECT_EQ(rows.replica_id(0), 0);
  EXPECT_EQ(rows.replica_id(1), 1);
  EXPECT_EQ(rows.replica_id(2), 0);
  EXPECT_EQ(rows.replica_id(3), 1);

  NamedSharding tuple(mesh2, PartitionSpec{{"model", "batch"}});  // block = model * 2 + batch
  EXPECT_EQ(tuple.num_parts(0), 4);
  EXPECT_EQ(tuple.shard_index(1, {8}), (R{{4, 6}}));  // (batch 0, model 1) -> block 2
  EXPECT_EQ(tuple.shard_index(2, {8}), (R{{2, 4}}));  // (batch 1, model 0) -> block 1

  NamedSharding replicated(mesh2, PartitionSpec());
  EXPECT_TRUE(replicated.is_fully_replicated());
  EXPECT_EQ(replicated.replica_id(2), 2);
  EXPECT_EQ(replicated.shard_index(3, shape), (R{{0, 4}, {0, 6}}));
  EXPECT_EQ(replicated.shard_index(0, {}), R{});

  EXPECT_TRUE(NamedSharding(mesh2, PartitionSpec{"batch", {}}) == rows);
  EXPECT_FALSE(rows == NamedSharding(mesh2, PartitionSpec{{}, "batch"}));
  EXPECT_EQ(rows.to_string(),
            "NamedSharding(mesh=Mesh('batch': 2, 'model': 2; devices: cpu:0, cpu:1, cpu:2, "
            "cpu:3), spec=PartitionSpec('batch',))");
}

TEST_F(ShardingTest, UnevenSplitNamesDimensionSizeAndAxisSize) {
  NamedSharding s(mesh1, PartitionSpec{"batch"});
  expect_error([&] { s.shard_shape({6, 4}); }, ErrorCode::kShapeMismatch,
               {"dimension 0 of shape (6, 4) has size 6", "does not split evenly over mesh axis 'batch' of size 4",
                "multiple of 4"});
  Array x = Array::from_vector<int32_t>(iota(24), {6, 4});
  expect_error([&] { device_put(x, s); }, ErrorCode::kShapeMismatch,
               {"device_put", "dimension 0", "size 6", "'batch' of size 4"});
  NamedSharding t(mesh2, PartitionSpec{{}, {"batch", "model"}});
  expect_error([&] { device_put(Array::from_vector<int32_t>(iota(12), {2, 6}), t); }, ErrorCode::kShapeMismatch,
               {"dimension 1 of shape (2, 6) has size 6", "mesh axes ('batch', 'model') of total size 4"});
  // Nothing was allocated on the devices by the failed puts.
  EXPECT_EQ(rt.num_live_buffers(), 0);
}

TEST_F(ShardingTest, BadSpecsForAMeshOrShapeAreClearErrors) {
  expect_error([&] { NamedSharding(mesh1, PartitionSpec{"model"}); }, ErrorCode::kNotFound,
               {"mesh axis 'model'", "'batch': 4"});
  NamedSharding s(mesh2, PartitionSpec{"batch", "model"});
  expect_error([&] { s.shard_shape({4}); }, ErrorCode::kShapeMismatch,
               {"PartitionSpec('batch', 'model') has 2 entries", "shape (4,) has rank 1"});
  expect_error([&] { s.shard_index(4, {4, 4}); }, ErrorCode::kOutOfRange, {"position 4"});
}

// --- device_put / to_host on a 1-D mesh {"batch": 4} --------------------------------------

TEST_F(ShardingTest, PutGet1dMeshSplitDim0) {
  const I32s v = iota(16);
  Array x = Array::from_vector<int32_t>(v, {8, 2});
  Array a = device_put(x, NamedSharding(mesh1, PartitionSpec{"batch"}));
  EXPECT_EQ(a.shape(), (Shape{8, 2}));
  EXPECT_EQ(a.dtype(), DType::kI32);
  EXPECT_EQ(a.num_shards(), 4);
  EXPECT_EQ(a.shards()[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(shard_values(a, 0), (I32s{0, 1, 2, 3}));
  EXPECT_EQ(shard_values(a, 1), (I32s{4, 5, 6, 7}));
  EXPECT_EQ(shard_values(a, 2), (I32s{8, 9, 10, 11}));
  EXPECT_EQ(shard_values(a, 3), (I32s{12, 13, 14, 15}));
  EXPECT_EQ(a.addressable_shard(rt.device(2)).to_vector<int32_t>(), (I32s{8, 9, 10, 11}));
  EXPECT_EQ(to_host(a).to_vector<int32_t>(), v);
  EXPECT_EQ(&to_host(a).device(), &default_cpu_device());
}

TEST_F(ShardingTest, PutGet1dMeshSplitDim1) {
  const I32s v = iota(16);
  Array a = device_put(Array::from_vector<int32_t>(v, {4, 4}), NamedSharding(mesh1, PartitionSpec{{}, "batch"}));
  EXPECT_EQ(a.shards()[0].shape(), (Shape{4, 1}));
  EXPECT_EQ(shard_values(a, 0), (I32s{0, 4, 8, 12}));
  EXPECT_EQ(shard_values(a, 1), (I32s{1, 5, 9, 13}));
  EXPECT_EQ(shard_values(a, 2), (I32s{2, 6, 10, 14}));
  EXPECT_EQ(shard_values(a, 3), (I32s{3, 7, 11, 15}));
  EXPECT_EQ(to_host(a).to_vector<int32_t>(), v);
}

TEST_F(ShardingTest, PutGet1dMeshReplicated) {
  const I32s v = iota(6);
  Array a = device_put(Array::from_vector<int32_t>(v, {2, 3}), NamedSharding(mesh1, PartitionSpec()));
  for (size_t p = 0; p < 4; ++p) {
    EXPECT_EQ(a.shards()[p].shape(), (Shape{2, 3}));
    EXPECT_EQ(shard_values(a, p), v);
  }
  // The replicas are separate copies.
  EXPECT_NE(a.shards()[0].buffer(), a.shards()[1].buffer());
  EXPECT_EQ(to_host(a).to_vector<int32_t>(), v);
}

// --- device_put / to_host on a 2-D mesh {"batch": 2, "model": 2} --------------------------

TEST_F(ShardingTest, PutGet2dMeshSplitBothDims) {
  const I32s v = iota(16);  // x[i][j] = 4 i + j
  Array x = Array::from_vector<int32_t>(v, {4, 4});
  Array a = device_put(x, NamedSharding(mesh2, PartitionSpec{"batch", "model"}));
  EXPECT_EQ(shard_values(a, 0), (I32s{0, 1, 4, 5}));      // rows 0-1, cols 0-1
  EXPECT_EQ(shard_values(a, 1), (I32s{2, 3, 6, 7}));      // rows 0-1, cols 2-3
  EXPECT_EQ(shard_values(a, 2), (I32s{8, 9, 12, 13}));    // rows 2-3, cols 0-1
  EXPECT_EQ(shard_values(a, 3), (I32s{10, 11, 14, 15}));  // rows 2-3, cols 2-3
  EXPECT_EQ(to_host(a).to_vector<int32_t>(), v);

  Array t = device_put(x, NamedSharding(mesh2, PartitionSpec{"model", "batch"}));
  EXPECT_EQ(shard_values(t, 0), (I32s{0, 1, 4, 5}));
  EXPECT_EQ(shard_values(t, 1), (I32s{8, 9, 12, 13}));  // (batch 0, model 1): rows 2-3
  EXPECT_EQ(shard_values(t, 2), (I32s{2, 3, 6, 7}));    // (batch 1, model 0): cols 2-3
  EXPECT_EQ(shard_values(t, 3), (I32s{10, 11, 14, 15}));
  EXPECT_EQ(to_host(t).to_vector<int32_t>(), v);
}

TEST_F(ShardingTest, PutGet2dMeshSplitOneDimReplicatedOverTheOtherAxis) {
  const I32s v = iota(16);
  Array x = Array::from_vector<int32_t>(v, {4, 4});
  Array rows = device_put(x, NamedSharding(mesh2, PartitionSpec{"batch"}));
  EXPECT_EQ(shard_values(rows, 0), (I32s{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(shard_values(rows, 1), (I32s{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(shard_values(rows, 2), (I32s{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(shard_values(rows, 3), (I32s{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(to_host(rows).to_vector<int32_t>(), v);

  Array cols = device_put(x, NamedSharding(mesh2, PartitionSpec{{}, "model"}));
  EXPECT_EQ(shard_values(cols, 0), (I32s{0, 1, 4, 5, 8, 9, 12, 13}));
  EXPECT_EQ(shard_values(cols, 1), (I32s{2, 3, 6, 7, 10, 11, 14, 15}));
  EXPECT_EQ(shard_values(cols, 2), (I32s{0, 1, 4, 5, 8, 9, 12, 13}));
  EXPECT_EQ(shard_values(cols, 3), (I32s{2, 3, 6, 7, 10, 11, 14, 15}));
  EXPECT_EQ(to_host(cols).to_vector<int32_t>(), v);
}

TEST_F(ShardingTest, PutGet2dMeshTupleOfAxes) {
  const I32s v = iota(16);
  Array rows =
      device_put(Array::from_vector<int32_t>(v, {8, 2}), NamedSharding(mesh2, PartitionSpec{{"model", "batch"}}));
  EXPECT_EQ(shard_values(rows, 0), (I32s{0, 1, 2, 3}));    // block 0
  EXPECT_EQ(shard_values(rows, 1), (I32s{8, 9, 10, 11}));  // (b0, m1): block 2
  EXPECT_EQ(shard_values(rows, 2), (I32s{4, 5, 6, 7}));    // (b1, m0): block 1
  EXPECT_EQ(shard_values(rows, 3), (I32s{12, 13, 14, 15}));
  EXPECT_EQ(to_host(rows).to_vector<int32_t>(), v);

  Array cols =
      device_put(Array::from_vector<int32_t>(v, {2, 8}), NamedSharding(mesh2, PartitionSpec{{}, {"batch", "model"}}));
  EXPECT_EQ(shard_values(cols, 0), (I32s{0, 1, 8, 9}));
  EXPECT_EQ(shard_values(cols, 1), (I32s{2, 3, 10, 11}));
  EXPECT_EQ(shard_values(cols, 2), (I32s{4, 5, 12, 13}));
  EXPECT_EQ(shard_values(cols, 3), (I32s{6, 7, 14, 15}));
  EXPECT_EQ(to_host(cols).to_vector<int32_t>(), v);
}

TEST_F(ShardingTest, PutGetRank3EverySpec) {
  const Shape shape{2, 4, 8};  // x[i][j][k] = 32 i + 8 j + k
  const I32s v = iota(64);
  Array x = Array::from_vector<int32_t>(v, shape);
  const std::vector<PartitionSpec> specs = {PartitionSpec(),
                                            PartitionSpec{"batch"},
                                            PartitionSpec{{}, "model"},
                                            PartitionSpec{{}, "batch", "model"},
                                            PartitionSpec{"model", {}, "batch"},
                                            PartitionSpec{{}, {"batch", "model"}},
                                            PartitionSpec{{}, {}, {"model", "batch"}}};
  for (const PartitionSpec& spec : specs) {
    SCOPED_TRACE(spec.to_string());
    expect_consistent(device_put(x, NamedSharding(mesh2, spec)), v);
  }
  // One hand-checked shard: (batch 1, model 0) of P(None, 'batch', 'model') holds
  // x[:, 2:4, 0:4].
  Array a = device_put(x, NamedSharding(mesh2, PartitionSpec{{}, "batch", "model"}));
  EXPECT_EQ(shard_values(a, 2), (I32s{16, 17, 18, 19, 24, 25, 26, 27,     // i = 0
                                      48, 49, 50, 51, 56, 57, 58, 59}));  // i = 1
}

TEST_F(ShardingTest, PerDeviceAllocatorsHoldOnlyTheirShards) {
  Array x = Array::from_vector<int32_t>(iota(16), {4, 4});  // 64 bytes on the host device
  const int64_t host_before = default_cpu_device().allocator().stats().bytes_in_use;
  {
    Array a = device_put(x, NamedSharding(mesh2, PartitionSpec{"batch", "model"}));
    for (Device* d : rt.devices()) {
      EXPECT_EQ(d->allocator().stats().bytes_in_use, 16) << d->name();  // 2x2 i32
      EXPECT_EQ(d->allocator().stats().num_allocations, 1) << d->name();
    }
    Array r = device_put(x, NamedSharding(mesh2, PartitionSpec{"batch"}));
    for (Device* d : rt.devices()) {
      EXPECT_EQ(d->allocator().stats().bytes_in_use, 16 + 32) << d->name();  // + 2x4 i32
    }
    Array full = device_put(x, NamedSharding(mesh1, PartitionSpec()));
    for (Device* d : rt.devices()) {
      EXPECT_EQ(d->allocator().stats().bytes_in_use, 16 + 32 + 64) << d->name();
    }
    // Nothing of it landed on the host device.
    EXPECT_EQ(default_cpu_device().allocator().stats().bytes_in_use, host_before);
  }
  for (Device* d : rt.devices()) EXPECT_EQ(d->allocator().stats().bytes_in_use, 0) << d->name();
  rt.check_no_live_buffers();
}

TEST_F(ShardingTest, ScalarsZeroSizeAndEveryDType) {
  Array s = device_put(Array::scalar(7, DType::kI32), NamedSharding(mesh2, PartitionSpec()));
  for (const Array& shard : s.shards()) EXPECT_EQ(shard.to_vector<int32_t>(), (I32s{7}));
  EXPECT_EQ(to_host(s).to_vector<int32_t>(), (I32s{7}));

  Array z = device_put(Array::zeros({0, 4}, DType::kF32), NamedSharding(mesh1, PartitionSpec{"batch"}));
  EXPECT_EQ(z.shards()[3].shape(), (Shape{0, 4}));
  EXPECT_EQ(to_host(z).shape(), (Shape{0, 4}));

  const std::vector<double> v = {1, 0, 3, 4, 0, 6, 7, 8};
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Array x = Array::from_doubles(v, {2, 4}, dt);
    Array a = device_put(x, NamedSharding(mesh2, PartitionSpec{"batch", "model"}));
    // Row 0 is {1, 0, 3, 4}, row 1 is {0, 6, 7, 8}: (batch 0, model 1) holds x[0, 2:4].
    EXPECT_TRUE(a.shards()[1].bitwise_equal(Array::from_doubles({3, 4}, {1, 2}, dt)));
    EXPECT_TRUE(a.shards()[2].bitwise_equal(Array::from_doubles({0, 6}, {1, 2}, dt)));
    EXPECT_TRUE(to_host(a).bitwise_equal(x));
  }
}

// --- reshard --------------------------------------------------------------------------------

TEST_F(ShardingTest, ReshardBetweenSpecsAndMeshes) {
  const I32s v = iota(16);
  Array x = Array::from_vector<int32_t>(v, {4, 4});
  Array rows = device_put(x, NamedSharding(mesh1, PartitionSpec{"batch"}));

  Array cols = reshard(rows, NamedSharding(mesh1, PartitionSpec{{}, "batch"}));
  EXPECT_EQ(shard_values(cols, 1), (I32s{1, 5, 9, 13}));
  EXPECT_EQ(shard_values(cols, 3), (I32s{3, 7, 11, 15}));
  expect_consistent(cols, v);

  Array blocks = reshard(cols, NamedSharding(mesh2, PartitionSpec{"batch", "model"}));
  EXPECT_EQ(shard_values(blocks, 1), (I32s{2, 3, 6, 7}));
  EXPECT_EQ(shard_values(blocks, 2), (I32s{8, 9, 12, 13}));
  expect_consistent(blocks, v);

  Array swapped = reshard(blocks, NamedSharding(mesh2, PartitionSpec{"model", "batch"}));
  EXPECT_EQ(shard_values(swapped, 1), (I32s{8, 9, 12, 13}));
  expect_consistent(swapped, v);

  Array replicated = reshard(swapped, NamedSharding(mesh2, PartitionSpec()));
  for (size_t p = 0; p < 4; ++p) EXPECT_EQ(shard_values(replicated, p), v);

  Array back = reshard(replicated, NamedSharding(mesh2, PartitionSpec{{"batch", "model"}}));
  EXPECT_EQ(shard_values(back, 3), (I32s{12, 13, 14, 15}));
  expect_consistent(back, v);

  // Onto one device: an ordinary array there whose data can be read directly.
  Array one = reshard(blocks, NamedSharding::single_device(rt.device(2)));
  EXPECT_EQ(one.num_shards(), 1);
  EXPECT_EQ(&one.device(), &rt.device(2));
  EXPECT_EQ(one.to_vector<int32_t>(), v);

  // Same sharding: the array itself, nothing copied.
  Array same = reshard(rows, NamedSharding(mesh1, PartitionSpec{"batch", {}}));
  EXPECT_EQ(same.shards()[2].buffer(), rows.shards()[2].buffer());
}

// --- host accessors, single-device arrays, from_shards, clone -----------------------------

TEST_F(ShardingTest, HostAccessorsOnShardedArraysSayToCallToHost) {
  Array a = device_put(Array::from_vector<int32_t>(iota(8), {4, 2}), NamedSharding(mesh1, PartitionSpec{"batch"}));
  const std::vector<std::string> needles = {"sharded over 4 devices", "NamedSharding(mesh=Mesh('batch': 4",
                                            "PartitionSpec('batch',)", "to_host"};
  expect_error([&] { a.to_vector<int32_t>(); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.data<int32_t>(); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.to_string(); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.to_doubles(); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.element_as_double(0); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.raw_data(); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.buffer(); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.bitwise_equal(a); }, ErrorCode::kFailedPrecondition, needles);
  expect_error([&] { a.reshaped({8}); }, ErrorCode::kFailedPrecondition, needles);
  expect_error(
      [&] {
        std::vector<int32_t> out(8);
        a.copy_to(std::span<int32_t>(out));
      },
      ErrorCode::kFailedPrecondition, {"Array::copy_to", "to_host"});
  expect_error([&] { a.device(); }, ErrorCode::kFailedPrecondition, {"sharded over 4 devices", "addressable_shard"});
  expect_error([&] { a.addressable_shard(default_cpu_device()); }, ErrorCode::kNotFound,
               {"no shard", "cpu:0", "PartitionSpec('batch',)"});
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(a.size(), 8);
  EXPECT_EQ(a.nbytes(), 32);
}

TEST_F(ShardingTest, SingleDeviceArraysAreOneShardOnTheirDevice) {
  Array x = Array::from_vector<float>({1, 2, 3}, {3});
  EXPECT_EQ(x.num_shards(), 1);
  ASSERT_EQ(x.shards().size(), 1u);
  EXPECT_EQ(x.shards()[0].buffer(), x.buffer());
  EXPECT_TRUE(x.sharding() == NamedSharding::single_device(default_cpu_device()));
  EXPECT_EQ(x.sharding().to_string(), "NamedSharding(mesh=Mesh(device: cpu:0), spec=PartitionSpec())");
  EXPECT_EQ(x.addressable_shard(default_cpu_device()).buffer(), x.buffer());
  EXPECT_TRUE(x.is_ready());
  EXPECT_TRUE(x.ready_event()->ready());
  // to_host of a host array is the array itself.
  EXPECT_EQ(to_host(x).buffer(), x.buffer());
  // A single-device array on another device is copied to the host device.
  Array on2 = Array::from_vector<float>({4, 5}, {2}, &rt.device(2));
  Array h = to_host(on2);
  EXPECT_EQ(&h.device(), &default_cpu_device());
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{4, 5}));
  expect_error([] { Array().sharding(); }, ErrorCode::kFailedPrecondition, {"invalid"});
  expect_error([] { to_host(Array()); }, ErrorCode::kFailedPrecondition, {"invalid"});
}

TEST(ShardingOneDevice, AOneDeviceMeshArrayReadsLikeAnOrdinaryArray) {
  Runtime rt(RuntimeOptions{.num_cpu_devices = 1});
  NamedSharding s(Mesh({{"batch", 1}}, rt.devices()), PartitionSpec{"batch"});
  Array a = device_put(Array::from_vector<int32_t>({1, 2, 3, 4}, {2, 2}), s);
  EXPECT_EQ(a.num_shards(), 1);
  EXPECT_TRUE(a.sharding() == s);
  EXPECT_EQ(a.to_vector<int32_t>(), (I32s{1, 2, 3, 4}));
  EXPECT_EQ(a.to_string(), "[[1, 2],\n [3, 4]]");
  EXPECT_EQ(&a.device(), &rt.device(0));
  EXPECT_EQ(a.reshaped({4}).sharding().mesh().axes().size(), 0u);  // a plain view
  Array c = a.clone();
  EXPECT_TRUE(c.sharding() == s);
  EXPECT_NE(c.buffer(), a.buffer());
}

TEST_F(ShardingTest, FromShardsBuildsAndValidates) {
  NamedSharding s(mesh1, PartitionSpec{"batch"});
  std::vector<Array> shards;
  for (int i = 0; i < 4; ++i) {
    shards.push_back(Array::from_vector<int32_t>({i, 10 + i}, {1, 2}, &rt.device(i)));
  }
  Array a = Array::from_shards({4, 2}, DType::kI32, s, shards);
  EXPECT_EQ(to_host(a).to_vector<int32_t>(), (I32s{0, 10, 1, 11, 2, 12, 3, 13}));
  EXPECT_EQ(a.shards()[1].buffer(), shards[1].buffer());  // shared, not copied

  expect_error([&] { Array::from_shards({4, 2}, DType::kI32, s, {shards[0]}); }, ErrorCode::kInvalidArgument,
               {"1 shards given for 4 devices"});
  std::vector<Array> swapped = {shards[1], shards[0], shards[2], shards[3]};
  expect_error([&] { Array::from_shards({4, 2}, DType::kI32, s, swapped); }, ErrorCode::kInvalidArgument,
               {"shard 0 is on cpu:1", "position 0 on cpu:0"});
  expect_error([&] { Array::from_shards({4, 2}, DType::kF32, s, shards); }, ErrorCode::kDTypeMismatch,
               {"shard 0 has dtype i32", "dtype f32"});
  expect_error([&] { Array::from_shards({8, 2}, DType::kI32, s, shards); }, ErrorCode::kShapeMismatch,
               {"shard 0 has shape (1, 2)", "shard shape (2, 2)"});
  std::vector<Array> with_invalid = {shards[0], Array(), shards[2], shards[3]};
  expect_error([&] { Array::from_shards({4, 2}, DType::kI32, s, with_invalid); }, ErrorCode::kInvalidArgument,
               {"shard 1 is invalid"});
  expect_error([&] { Array::from_shards({6, 2}, DType::kI32, s, shards); }, ErrorCode::kShapeMismatch,
               {"dimension 0", "size 6", "size 4"});
}

TEST_F(ShardingTest, CloneKeepsTheShardingWithNewBuffers) {
  const I32s v = iota(8);
  Array a = device_put(Array::from_vector<int32_t>(v, {2, 4}), NamedSharding(mesh2, PartitionSpec{{}, "model"}));
  Array c = a.clone();
  EXPECT_TRUE(c.sharding() == a.sharding());
  for (size_t p = 0; p < 4; ++p) EXPECT_NE(c.shards()[p].buffer(), a.shards()[p].buffer());
  expect_consistent(c, v);
}

// --- donation, readiness and errors of asynchronous copies --------------------------------

TEST_F(ShardingTest, DonatedArraysCannotBePutOrGathered) {
  Array x = Array::from_vector<int32_t>(iota(8), {4, 2});
  Array a = device_put(x, NamedSharding(mesh1, PartitionSpec{"batch"}));
  (void)x.buffer()->donate("jit:step");
  EXPECT_TRUE(x.donated());
  expect_error([&] { device_put(x, NamedSharding(mesh1, PartitionSpec())); }, ErrorCode::kFailedPrecondition,
               {"device_put", "donated"});
  (void)a.shards()[2].buffer()->donate("jit:step");
  EXPECT_TRUE(a.donated());
  expect_error([&] { to_host(a); }, ErrorCode::kFailedPrecondition, {"to_host", "donated"});
  expect_error([&] { a.shards()[2].to_vector<int32_t>(); }, ErrorCode::kFailedPrecondition, {"donated to 'jit:step'"});
  EXPECT_EQ(a.shards()[1].to_vector<int32_t>(), (I32s{2, 3}));
}

TEST_F(ShardingTest, AsyncPutCopiesOnEachDestinationWorker) {
  // Hold cpu:2's worker: its copy waits in the FIFO queue while the others finish.
  std::atomic<bool> gate{false};
  std::shared_ptr<Event> blocker = rt.device(2).enqueue([&] {
    while (!gate.load()) std::this_thread::sleep_for(1ms);
  });
  const I32s v = iota(16);
  Array a = device_put_async(Array::from_vector<int32_t>(v, {4, 4}), NamedSharding(mesh1, PartitionSpec{"batch"}));
  const std::vector<Array> shards = a.shards();
  for (size_t p : {0u, 1u, 3u}) shards[p].block_until_ready();
  EXPECT_TRUE(shards[0].is_ready());
  EXPECT_FALSE(shards[2].is_ready());
  EXPECT_FALSE(a.is_ready());
  EXPECT_FALSE(a.ready_event()->ready());
  gate = true;
  a.ready_event()->wait();
  EXPECT_TRUE(a.is_ready());
  EXPECT_TRUE(blocker->ready());  // FIFO: the blocker ran before the copy behind it
  EXPECT_EQ(shard_values(a, 2), (I32s{8, 9, 10, 11}));
  EXPECT_EQ(to_host(a).to_vector<int32_t>(), v);
}

TEST_F(ShardingTest, ReadingAPendingShardWaitsForItsCopy) {
  std::atomic<bool> gate{false};
  rt.device(1).enqueue([&] {
    while (!gate.load()) std::this_thread::sleep_for(1ms);
  });
  Array a =
      device_put_async(Array::from_vector<int32_t>(iota(8), {4, 2}), NamedSharding(mesh1, PartitionSpec{"batch"}));
  std::thread opener([&] {
    std::this_thread::sleep_for(20ms);
    gate = true;
  });
  EXPECT_EQ(shard_values(a, 1), (I32s{2, 3}));  // blocks until the copy ran
  opener.join();
  // Work enqueued later on a shard's device runs after its copy (FIFO): it sees the data.
  I32s seen;
  rt.device(3).enqueue([&] { seen = a.shards()[3].to_vector<int32_t>(); })->wait();
  EXPECT_EQ(seen, (I32s{6, 7}));
}

TEST_F(ShardingTest, ErrorsOfTheProducerSurfaceFromCopiesAndReads) {
  auto failed = std::make_shared<CompletionEvent>();
  failed->complete(std::make_exception_ptr(Error(ErrorCode::kInternal, "producer failed")));
  Array x = Array::from_vector<int32_t>(iota(8), {4, 2}).with_ready_event(failed);
  EXPECT_TRUE(x.is_ready());
  expect_error([&] { x.block_until_ready(); }, ErrorCode::kInternal, {"producer failed"});
  expect_error([&] { x.to_vector<int32_t>(); }, ErrorCode::kInternal, {"producer failed"});
  NamedSharding s(mesh1, PartitionSpec{"batch"});
  Array a = device_put_async(x, s);  // argument checks pass; the copies fail on the workers
  expect_error([&] { a.block_until_ready(); }, ErrorCode::kInternal, {"producer failed"});
  expect_error([&] { device_put(x, s); }, ErrorCode::kInternal, {"producer failed"});
  expect_error([&] { to_host(a); }, ErrorCode::kInternal, {"producer failed"});
  expect_error([&] { x.with_ready_event(nullptr); }, ErrorCode::kInvalidArgument, {"null"});
  expect_error([&] { a.with_ready_event(failed); }, ErrorCode::kFailedPrecondition, {"from_shards"});
}

TEST_F(ShardingTest, NonCpuDevicesAreRejected) {
  Device gpu(DeviceKind::kCuda, 0, std::make_unique<HostAllocator>());
  NamedSharding s = NamedSharding::single_device(gpu);
  expect_error([&] { device_put(Array::zeros({2}, DType::kF32), s); }, ErrorCode::kUnimplemented,
               {"cuda:0 is neither a CPU device nor one with transfers"});
}

}  // namespace
}  // namespace ingot
