// NcclCommunicator and connect_nccl without a GPU: fake CUDA devices (tests/runtime/fake_cuda_driver.h)
// and the fake NCCL module (tests/runtime/fake_nccl.cpp), in one process (one thread per rank, or
// one thread in a group) and across processes through the TcpStore. The same calls run on real
// GPUs in cuda_test.cpp's NcclGpu tests when a GPU is lent.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "child_process.h"
#include "fake_nccl_scope.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/nccl.h"
#include "test_util.h"

#if defined(INGOT_FAKE_NCCL)

namespace ingot {
namespace {

using testing::FakeCudaScope;
using testing::FakeNcclScope;

/// `n` fake CUDA devices, the fake NCCL and one communicator per device (ncclCommInitAll).
struct FakeGroup {
  explicit FakeGroup(int n) : nccl(INGOT_FAKE_NCCL) {
    cuda.state().device_count = n;
    driver = cuda.driver();
    for (int i = 0; i < n; ++i) devices.push_back(CudaDevice::open(driver, i));
    std::vector<CudaDevice*> raw;
    for (auto& d : devices) raw.push_back(d.get());
    if (nccl.ok()) comms = NcclCommunicator::create_all(nccl.library(), raw);
  }
  int size() const { return static_cast<int>(devices.size()); }
  /// fn(rank) on one thread per rank; returns each rank's error text ("" when none).
  std::vector<std::string> run(const std::function<void(int)>& fn) {
    std::vector<std::string> errors(static_cast<size_t>(size()));
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        try {
          fn(r);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    return errors;
  }
  Array upload(int r, const Array& host) {
    CudaDevice& dev = *devices[static_cast<size_t>(r)];
    Array a = Array::empty(host.shape(), host.dtype(), &dev.device());
    dev.copy_async(host, a)->wait();
    return a;
  }
  Array download(int r, const Array& a) {
    Array host = Array::empty(a.shape(), a.dtype());
    devices[static_cast<size_t>(r)]->copy_async(a, host)->wait();
    return host;
  }
  // Members in destruction order: communicators before devices before the fakes.
  FakeCudaScope cuda;
  FakeNcclScope nccl;
  std::shared_ptr<CudaDriver> driver;
  std::vector<std::unique_ptr<CudaDevice>> devices;
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
};

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(NcclFake, EveryCollectiveOnFourDevices) {
  FakeGroup g(4);
  ASSERT_TRUE(g.nccl.ok()) << g.nccl.library()->unavailable_reason();
  expect_no_errors(g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.size(), 4);
    // sum / mean / max / min of floats: 1 + r, -r ...
    Array a = g.upload(r, Array::from_vector<float>({1.0f + r, -1.0f * r, 0.5f * r}, {3}));
    c.all_reduce(a, ReduceOp::kSum);
    EXPECT_EQ(g.download(r, a).to_vector<float>(), (std::vector<float>{10, -6, 3}));
    Array m = g.upload(r, Array::from_vector<double>({2.0 * r}, {1}));
    c.all_reduce(m, ReduceOp::kMean);
    EXPECT_EQ(g.download(r, m).to_vector<double>(), (std::vector<double>{3.0}));
    Array mx = g.upload(r, Array::from_vector<int32_t>({r, -r}, {2}));
    c.all_reduce(mx, ReduceOp::kMax);
    EXPECT_EQ(g.download(r, mx).to_vector<int32_t>(), (std::vector<int32_t>{3, 0}));
    // an integer mean truncates (the sum 0+1+2+3 = 6 over 4 ranks is 1)
    Array im = g.upload(r, Array::from_vector<int64_t>({r, -r}, {2}));
    c.all_reduce(im, ReduceOp::kMean);
    EXPECT_EQ(g.download(r, im).to_vector<int64_t>(), (std::vector<int64_t>{1, -1}));
    // all_gather: rank order along dim 0
    Array in = g.upload(r, Array::from_vector<float>({1.0f * r, 10.0f * r}, {1, 2}));
    Array out = g.upload(r, Array::zeros({4, 2}, DType::kF32));
    c.all_gather(in, out);
    EXPECT_EQ(g.download(r, out).to_vector<float>(), (std::vector<float>{0, 0, 1, 10, 2, 20, 3, 30}));
    // reduce_scatter: rank r gets block r of the sum
    Array rs_in = g.upload(r, Array::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8}));
    Array rs_out = g.upload(r, Array::zeros({2}, DType::kF32));
    c.reduce_scatter(rs_in, rs_out, ReduceOp::kSum);
    EXPECT_EQ(g.download(r, rs_out).to_vector<float>(), (std::vector<float>{8.0f * r + 4, 8.0f * r + 8}));
    // broadcast from rank 2, in place and into another array
    Array b = g.upload(r, Array::full({3}, 1.0 + r, DType::kF32));
    c.broadcast(b, 2);
    EXPECT_EQ(g.download(r, b).to_vector<float>(), (std::vector<float>{3, 3, 3}));
    Array src = g.upload(r, Array::full({2}, 5.0 * r, DType::kF64));
    Array dst = g.upload(r, Array::zeros({2}, DType::kF64));
    c.broadcast_into(src, dst, 1);
    EXPECT_EQ(g.download(r, dst).to_vector<double>(), (std::vector<double>{5, 5}));
    EXPECT_EQ(g.download(r, src).to_vector<double>(), (std::vector<double>{5.0 * r, 5.0 * r}));
    // out of place: `in` is left as it was
    Array x = g.upload(r, Array::from_vector<float>({1.0f * r}, {1}));
    Array y = g.upload(r, Array::zeros({1}, DType::kF32));
    c.all_reduce_into(x, y, ReduceOp::kSum);
    EXPECT_EQ(g.download(r, y).to_vector<float>(), (std::vector<float>{6}));
    EXPECT_EQ(g.download(r, x).to_vector<float>(), (std::vector<float>{1.0f * r}));
    c.barrier();
  }));
  EXPECT_EQ(g.nccl.log().reduce_scatter, 4);
  EXPECT_EQ(g.nccl.log().all_gather, 4);
}

TEST(NcclFake, HalfPrecisionSumsAndMeans) {
  FakeGroup g(2);
  ASSERT_TRUE(g.nccl.ok()) << g.nccl.library()->unavailable_reason();
  expect_no_errors(g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      Array a = g.upload(r, Array::from_doubles({0.5 + r, -2.0 * r, 1024.0}, {3}, dtype));
      c.all_reduce(a, ReduceOp::kSum);
      const Array h = g.download(r, a);
      EXPECT_EQ(h.dtype(), dtype);
      EXPECT_EQ(h.to_doubles(), (std::vector<double>{2.0, -2.0, 2048.0})) << dtype_name(dtype);
      Array m = g.upload(r, Array::from_doubles({1.0 + 2.0 * r}, {1}, dtype));
      c.all_reduce(m, ReduceOp::kMean);
      EXPECT_EQ(g.download(r, m).to_doubles(), (std::vector<double>{2.0})) << dtype_name(dtype);
    }
  }));
  EXPECT_EQ(g.nccl.log().last_type, 9);  // ncclBfloat16
}

TEST(NcclFake, LargeArraysMoveInChunks) {
  // 3 MiB of f32 per rank: more than the fake's 1 MiB staging, so several rounds.
  FakeGroup g(2);
  ASSERT_TRUE(g.nccl.ok()) << g.nccl.library()->unavailable_reason();
  const int64_t n = 3 * 256 * 1024 + 7;
  expect_no_errors(g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * (r + 1);
    Array a = g.upload(r, Array::from_vector<float>(v, {n}));
    c.all_reduce(a, ReduceOp::kSum);
    const std::vector<float> got = g.download(r, a).to_vector<float>();
    for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(got[static_cast<size_t>(i)], 3.0f * (i % 1000)) << i;
    ASSERT_EQ(got.back(), 3.0f * ((n - 1) % 1000));
    // reduce_scatter of 2 n elements: the blocks straddle the chunks
    std::vector<float> w(static_cast<size_t>(2 * n), 1.0f + r);
    Array rs_out = g.upload(r, Array::zeros({n}, DType::kF32));
    c.reduce_scatter(g.upload(r, Array::from_vector<float>(w, {2 * n})), rs_out, ReduceOp::kSum);
    const std::vector<float> rs = g.download(r, rs_out).to_vector<float>();
    EXPECT_EQ(std::count(rs.begin(), rs.end(), 3.0f), n);
  }));
}

TEST(NcclFake, GroupedAllReducesRunAsOneGroup) {
  FakeGroup g(2);
  ASSERT_TRUE(g.nccl.ok()) << g.nccl.library()->unavailable_reason();
  expect_no_errors(g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    Array a = g.upload(r, Array::from_vector<float>({1.0f + r}, {1}));
    Array b = g.upload(r, Array::from_vector<int32_t>({r, 3}, {2}));
    Array d = g.upload(r, Array::from_vector<double>({0.25 * r}, {1}));
    Array* arrays[] = {&a, &b, &d};
    c.all_reduce_group(arrays, ReduceOp::kMean);
    EXPECT_EQ(g.download(r, a).to_vector<float>(), (std::vector<float>{1.5f}));
    EXPECT_EQ(g.download(r, b).to_vector<int32_t>(), (std::vector<int32_t>{0, 3}));  // (0 + 1) / 2 truncates
    EXPECT_EQ(g.download(r, d).to_vector<double>(), (std::vector<double>{0.125}));
  }));
  EXPECT_EQ(g.nccl.log().groups, 2);  // one ncclGroupEnd per rank
  EXPECT_EQ(g.nccl.log().largest_group, 3);
}

TEST(NcclFake, GroupedOutOfPlaceAllReducesLeaveTheInputs) {
  FakeGroup g(2);
  ASSERT_TRUE(g.nccl.ok()) << g.nccl.library()->unavailable_reason();
  expect_no_errors(g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    const std::vector<Array> ins = {g.upload(r, Array::from_vector<float>({1.0f + r, 2}, {2})),
                                    g.upload(r, Array::from_vector<int64_t>({10 * r}, {1}))};
    std::vector<Array> outs = {g.upload(r, Array::zeros({2}, DType::kF32)),
                               g.upload(r, Array::zeros({1}, DType::kI64))};
    c.all_reduce_group_into(ins, outs, ReduceOp::kSum);
    EXPECT_EQ(g.download(r, outs[0]).to_vector<float>(), (std::vector<float>{3, 4}));
    EXPECT_EQ(g.download(r, outs[1]).to_vector<int64_t>(), (std::vector<int64_t>{10}));
    EXPECT_EQ(g.download(r, ins[0]).to_vector<float>(), (std::vector<float>{1.0f + r, 2}));
  }));
  EXPECT_EQ(g.nccl.log().groups, 2);
  EXPECT_EQ(g.nccl.log().largest_group, 2);
  NcclCommunicator& c = *g.comms[0];
  const std::vector<Array> one = {g.upload(0, Array::zeros({2}, DType::kF32))};
  std::vector<Array> none;
  testing::expect_error([&] { c.all_reduce_group_into(one, none, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
                        {"NcclCommunicator::all_reduce_group_into: 1 inputs but 0 outputs"});
  std::vector<Array> wrong = {g.upload(0, Array::zeros({3}, DType::kF32))};
  testing::expect_error([&] { c.all_reduce_group_into(one, wrong, ReduceOp::kSum); }, ErrorCode::kShapeMismatch,
                        {"all_reduce_group_into"});
}

TEST(NcclFake, MismatchedCallsAreAnErrorOnEveryRankNotAHang) {
  FakeGroup g(2);
  ASSERT_TRUE(g.nccl.ok()) << g.nccl.library()->unavailable_reason();
  const std::vector<std::string> errors = g.run([&](int r) {
    NcclCommunicator& c = *g.comms[static_cast<size_t>(r)];
    Array a = g.upload(r, Array::zeros({3 + r}, DType::kF32));
    c.all_reduce(a, ReduceOp::kSum);
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("ncclAllReduce failed while reducing (sum)"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 0 called ncclAllReduce(count 3"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1 ncclAllReduce(count 4"), std::string::npos) << e;
  }
  // The group stays usable after an agreed rejection.
  expect_no_errors(g.run([&](int r) { g.comms[static_cast<size_t>(r)]->barrier(); }));
}

TEST(NcclFake, ArgumentErrorsNameTheArgument) {
  FakeGroup g(2);
  ASSERT_TRUE(g.nccl.ok()) << g.nccl.library()->unavailable_reason();
  NcclCommunicator& c = *g.comms[0];
  Array other = g.upload(1, Array::zeros({2}, DType::kF32));
  testing::expect_error([&] { c.all_reduce(other, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
                        {"NcclCommunicator::all_reduce: inout lives on cuda:1, not on cuda:0 (rank 0's device)"});
  Array bytes = g.upload(0, Array::zeros({2}, DType::kU8));
  testing::expect_error([&] { c.all_reduce(bytes, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
                        {"dtype u8 is not supported (f32, f64, i32, i64, f16, bf16 are)"});
  Array f = g.upload(0, Array::zeros({2}, DType::kF32));
  Array f3 = g.upload(0, Array::zeros({3}, DType::kF32));
  Array d = g.upload(0, Array::zeros({2}, DType::kF64));
  testing::expect_error([&] { c.all_reduce_into(f, f3, ReduceOp::kSum); }, ErrorCode::kShapeMismatch,
                        {"all_reduce_into: in has shape (2,) but out (3,)"});
  testing::expect_error([&] { c.all_reduce_into(f, d, ReduceOp::kSum); }, ErrorCode::kDTypeMismatch,
                        {"all_reduce_into: in is f32 but out is f64"});
  testing::expect_error([&] { c.broadcast_into(f, f, 2); }, ErrorCode::kInvalidArgument,
                        {"broadcast_into: root = 2 is not in [0, 2)"});
  Array* with_null[] = {&f, nullptr};
  testing::expect_error([&] { c.all_reduce_group(with_null, ReduceOp::kSum); }, ErrorCode::kInvalidArgument,
                        {"all_reduce_group: inouts[1] is null"});
  EXPECT_EQ(g.nccl.log().all_reduce, 0);  // nothing reached NCCL
}

TEST(NcclFake, UniqueIdHexRoundTrips) {
  NcclUniqueId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 37);
  const std::string hex = nccl_unique_id_to_hex(id);
  EXPECT_EQ(hex.size(), 256u);
  EXPECT_EQ(hex.substr(0, 6), "00254a");
  EXPECT_EQ(nccl_unique_id_from_hex(hex), id);
  testing::expect_error([] { nccl_unique_id_from_hex("abc"); }, ErrorCode::kInvalidArgument,
                        {"3 characters, expected 256"});
  testing::expect_error([&] { nccl_unique_id_from_hex("G" + hex.substr(1)); }, ErrorCode::kInvalidArgument,
                        {"character 0 ('G') is not a lowercase hex digit"});
}

TEST(NcclFake, ConnectNcclWithOneProcessDrivingTwoDevices) {
  FakeCudaScope cuda;
  FakeNcclScope nccl(INGOT_FAKE_NCCL);
  ASSERT_TRUE(nccl.ok()) << nccl.library()->unavailable_reason();
  auto driver = cuda.driver();
  auto d0 = CudaDevice::open(driver, 0), d1 = CudaDevice::open(driver, 1);
  ProcessGroupOptions group{.rank = 0, .world_size = 1, .master_port = testing::free_port(), .timeout = 20};
  auto comms = connect_nccl(group, nccl.library(), {d0.get(), d1.get()});
  ASSERT_EQ(comms.size(), 2u);
  EXPECT_EQ(comms[1]->rank(), 1);
  EXPECT_EQ(comms[1]->size(), 2);
  EXPECT_EQ(&comms[1]->device(), d1.get());
  testing::expect_error([&] { connect_nccl(group, nccl.library(), {d0.get(), d0.get()}); }, ErrorCode::kInvalidArgument,
                        {"connect_nccl: devices[1] is repeated"});
  testing::expect_error([&] { connect_nccl(group, nullptr, {d0.get()}); }, ErrorCode::kInvalidArgument,
                        {"connect_nccl: nccl is null"});
  ProcessGroupOptions bad = group;
  bad.rank = 3;
  testing::expect_error([&] { connect_nccl(bad, nccl.library(), {d0.get()}); }, ErrorCode::kInvalidArgument,
                        {"connect_nccl: rank 3 is outside [0, world_size=1)"});
}

// Two processes (ingot launch's model: RANK / WORLD_SIZE / MASTER_*), two fake GPUs each: four
// ranks joined through the TcpStore, NCCL's unique id exchanged there.
constexpr const char* kWorkerFlag = "INGOT_NCCL_FAKE_TEST_WORKER";

TEST(NcclFakeProcesses, TwoProcessesWithTwoDevicesEach) {
  testing::run_worker_ranks("NcclFakeProcessWorker.JoinsAndReduces", kWorkerFlag, 2, 60);
}

TEST(NcclFakeProcessWorker, JoinsAndReduces) {
  if (std::getenv(kWorkerFlag) == nullptr || std::getenv("RANK") == nullptr) {
    GTEST_SKIP() << "worker of NcclFakeProcesses.TwoProcessesWithTwoDevicesEach: runs only in the processes that "
                    "test starts (RANK and "
                 << kWorkerFlag << " unset)";
  }
  FakeCudaScope cuda;
  FakeNcclScope nccl(INGOT_FAKE_NCCL, 20.0);
  ASSERT_TRUE(nccl.ok()) << nccl.library()->unavailable_reason();
  auto driver = cuda.driver();
  std::vector<std::unique_ptr<CudaDevice>> devices;
  devices.push_back(CudaDevice::open(driver, 0));
  devices.push_back(CudaDevice::open(driver, 1));
  ProcessGroupOptions group = ProcessGroupOptions::from_env();
  group.timeout = 20;
  auto comms = connect_nccl(group, nccl.library(), {devices[0].get(), devices[1].get()});
  ASSERT_EQ(comms.size(), 2u);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      try {
        NcclCommunicator& c = *comms[static_cast<size_t>(i)];
        CudaDevice& dev = *devices[static_cast<size_t>(i)];
        const int rank = c.rank();
        EXPECT_EQ(rank, group.rank * 2 + i);
        EXPECT_EQ(c.size(), 4);
        Array host = Array::from_vector<float>({1.0f * rank, 1.0f}, {2});
        Array a = Array::empty({2}, DType::kF32, &dev.device());
        dev.copy_async(host, a)->wait();
        c.all_reduce(a, ReduceOp::kSum);
        Array back = Array::empty({2}, DType::kF32);
        dev.copy_async(a, back)->wait();
        EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{6, 4}));
        Array mine = Array::empty({1}, DType::kI32, &dev.device());
        Array all = Array::empty({4}, DType::kI32, &dev.device());
        dev.copy_async(Array::from_vector<int32_t>({10 * rank}, {1}), mine)->wait();
        c.all_gather(mine, all);
        Array all_host = Array::empty({4}, DType::kI32);
        dev.copy_async(all, all_host)->wait();
        EXPECT_EQ(all_host.to_vector<int32_t>(), (std::vector<int32_t>{0, 10, 20, 30}));
        c.barrier();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// connect_nccl over an existing process communicator: NCCL's unique id sent over Gloo; processes
// passing different device counts all get the same error instead of hanging in ncclCommInitRank.
constexpr const char* kCountsWorkerFlag = "INGOT_NCCL_FAKE_COUNTS_WORKER";

TEST(NcclFakeProcesses, OverAProcessCommunicatorDeviceCountsMustAgree) {
  testing::run_worker_ranks("NcclFakeProcessWorker.OverGlooWithDifferentCounts", kCountsWorkerFlag, 2, 60);
}

TEST(NcclFakeProcessWorker, OverGlooWithDifferentCounts) {
  if (std::getenv(kCountsWorkerFlag) == nullptr || std::getenv("RANK") == nullptr) {
    GTEST_SKIP() << "worker of NcclFakeProcesses.OverAProcessCommunicatorDeviceCountsMustAgree: runs only in the "
                    "processes that test starts (RANK and "
                 << kCountsWorkerFlag << " unset)";
  }
  FakeCudaScope cuda;
  FakeNcclScope nccl(INGOT_FAKE_NCCL, 20.0);
  ASSERT_TRUE(nccl.ok()) << nccl.library()->unavailable_reason();
  ProcessGroupOptions group = ProcessGroupOptions::from_env();
  group.timeout = 20;
  std::unique_ptr<Communicator> processes = connect_gloo(group);
  // First the same count everywhere: the group joins, an all-reduce spans both processes.
  auto d0 = CudaDevice::open(cuda.driver(), 0), d1 = CudaDevice::open(cuda.driver(), 1);
  auto comms = connect_nccl(*processes, nccl.library(), {d0.get()});
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0]->rank(), group.rank);
  EXPECT_EQ(comms[0]->size(), 2);
  Array a = Array::empty({1}, DType::kF32, &d0->device());
  d0->copy_async(Array::from_vector<float>({1.0f + static_cast<float>(group.rank)}, {1}), a)->wait();
  comms[0]->all_reduce(a, ReduceOp::kSum);
  Array back = Array::empty({1}, DType::kF32);
  d0->copy_async(a, back)->wait();
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{3}));
  // Then process 1 passes two devices: the same error on both.
  std::vector<CudaDevice*> devices = {d0.get()};
  if (group.rank == 1) devices.push_back(d1.get());
  testing::expect_error([&] { connect_nccl(*processes, nccl.library(), devices); }, ErrorCode::kInvalidArgument,
                        {"connect_nccl: process 1 passes 2 devices but process 0 passes 1"});
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_FAKE_NCCL
