// fit with a DataParallel distribution over CUDA devices (CompileOptions::mesh_backend =
// cuda_mesh_backend), its plumbing checked on the fake driver and the fake NCCL
// (tests/runtime/fake_cuda_driver.h, tests/runtime/fake_nccl.cpp): the fake driver cannot run the
// generated PTX, so values are not checked here (NcclFitGpu in the `gpu` suite compares real GPUs
// with one GPU); what is checked is what runs where -- the steps launch kernels, gradients are
// all-reduced over NCCL once per step and bucket, the variables and predictions come back as host
// arrays of the right shapes -- and which options are refused.
#if defined(INGOT_FAKE_NCCL)

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "ingot/jit/spmd.h"
#include "ingot/runtime/cuda.h"
#include "ingot/trainer/model.h"
#include "child_process.h"
#include "runtime/fake_nccl_scope.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FakeCudaScope;
using testing::FakeNcclScope;

std::shared_ptr<distribution::DataParallel> data_parallel(const std::vector<CudaDevice*>& devices) {
  std::vector<Device*> mesh_devices;
  for (CudaDevice* d : devices) mesh_devices.push_back(&d->device());
  return std::make_shared<distribution::DataParallel>(distribution::DeviceMesh(
      {.shape = {static_cast<int64_t>(devices.size())}, .axis_names = {"batch"}, .devices = mesh_devices}));
}

TEST(FitCudaMesh, StepsRunOnEveryDeviceWithNcclAllReduces) {
  FakeCudaScope fake;
  FakeNcclScope nccl(INGOT_FAKE_NCCL);
  ASSERT_TRUE(nccl.ok()) << nccl.library()->unavailable_reason();
  auto d0 = CudaDevice::open(fake.driver(), 0), d1 = CudaDevice::open(fake.driver(), 1);
  const std::vector<CudaDevice*> devices = {d0.get(), d1.get()};
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 3, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 2})});
  // Generated kernels only: no cuBLAS (the fake driver runs none of them; see above).
  model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                 .loss = std::make_shared<losses::MeanSquaredError>(),
                 .lowering = {.blas_gemm = false},
                 .distribution = data_parallel(devices),
                 .mesh_backend = cuda_mesh_backend(devices, nccl.library())});
  const Array x = testing::f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {8, 2});
  const Array y = testing::f32({1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1}, {8, 2});
  model.fit({.x = x, .y = y, .batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
  EXPECT_EQ(model.train_step_compile_count(), 1);
  EXPECT_FALSE(fake.state().launches.empty());
  // 4 steps on 2 devices, at least one all-reduce (gradients, metrics) per step and device.
  EXPECT_GE(nccl.log().all_reduce, 4 * 2);
  EXPECT_EQ(nccl.log().all_reduce % 2, 0);  // every device issues the same collectives
  const std::vector<Array> w = model.get_weights();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(w[0].device().kind(), DeviceKind::kCpu);
  EXPECT_NO_THROW(w[0].to_doubles());  // host memory
  const Array p = model.predict({.x = x, .batch_size = 8});
  EXPECT_EQ(p.shape(), (Shape{8, 2}));
  EXPECT_EQ(to_host(p).device().kind(), DeviceKind::kCpu);
}

TEST(FitCudaMesh, AMeshBackendNeedsADistributionInThisProcess) {
  FakeCudaScope fake;
  FakeNcclScope nccl(INGOT_FAKE_NCCL);
  ASSERT_TRUE(nccl.ok()) << nccl.library()->unavailable_reason();
  auto d0 = CudaDevice::open(fake.driver(), 0);
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 1})});
  testing::expect_error(
      [&] {
        model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                       .loss = std::make_shared<losses::MeanSquaredError>(),
                       .mesh_backend = cuda_mesh_backend({d0.get()}, nccl.library())});
      },
      ErrorCode::kInvalidArgument, {"compile: mesh_backend CUDA over NCCL needs a distribution", "none was given"});
  testing::expect_error([&] { cuda_mesh_backend({d0.get()}, nullptr); }, ErrorCode::kInvalidArgument,
                        {"cuda_mesh_backend: nccl is null"});
}

// Two processes (ingot launch's model) with one fake GPU each: distribution::initialize joins them
// through Gloo and NCCL (the unique id sent over Gloo), and fit runs data parallel over both.
constexpr const char* kWorkerFlag = "INGOT_FIT_CUDA_MESH_TEST_WORKER";

TEST(FitCudaMeshProcesses, TwoProcessesTrainDataParallelOverNccl) {
  testing::run_worker_ranks("FitCudaMeshProcessWorker.Trains", kWorkerFlag, 2, 120);
}

TEST(FitCudaMeshProcessWorker, Trains) {
  if (std::getenv(kWorkerFlag) == nullptr || std::getenv("RANK") == nullptr) {
    GTEST_SKIP() << "worker of FitCudaMeshProcesses.TwoProcessesTrainDataParallelOverNccl: runs only in the "
                    "processes that test starts (RANK and "
                 << kWorkerFlag << " unset)";
  }
  FakeCudaScope fake;
  FakeNcclScope nccl(INGOT_FAKE_NCCL, 20.0);
  ASSERT_TRUE(nccl.ok()) << nccl.library()->unavailable_reason();
  auto d0 = CudaDevice::open(fake.driver(), 0);
  const MeshBackend backend = cuda_mesh_backend({d0.get()}, nccl.library());
  ProcessGroupOptions group = ProcessGroupOptions::from_env();
  group.timeout = 20;
  std::shared_ptr<distribution::ProcessGroup> processes = distribution::initialize(group, backend);
  ASSERT_EQ(processes->num_processes(), 2);
  ASSERT_EQ(processes->device_communicators().size(), 1u);
  EXPECT_EQ(processes->device_communicators()[0]->backend(), "nccl");
  EXPECT_EQ(processes->device_communicators()[0]->size(), 2);
  EXPECT_EQ(processes->device_communicators()[0]->rank(), group.rank);
  auto dist = std::make_shared<distribution::DataParallel>(
      distribution::DeviceMesh({.shape = {2}, .axis_names = {"batch"}, .processes = processes}));
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 3, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 2})});
  model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                 .loss = std::make_shared<losses::MeanSquaredError>(),
                 .lowering = {.blas_gemm = false},
                 .distribution = dist,
                 .mesh_backend = backend});
  const Array x = testing::f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {8, 2});
  const Array y = testing::f32({1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1}, {8, 2});
  model.fit({.x = x, .y = y, .batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
  EXPECT_FALSE(fake.state().launches.empty());
  // 4 steps (each process's half of every batch), at least one all-reduce per step, over NCCL.
  EXPECT_GE(nccl.log().all_reduce, 4);
  const std::vector<Array> w = model.get_weights();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[1].shape(), (Shape{3}));
  EXPECT_EQ(w[1].device().kind(), DeviceKind::kCpu);
  // Predictions of the whole batch on every process (gathered over the processes).
  const Array p = model.predict({.x = x, .batch_size = 8});
  EXPECT_EQ(p.shape(), (Shape{8, 2}));
}

TEST(FitCudaMesh, AMeshOfCudaDevicesNeedsAMeshBackend) {
  FakeCudaScope fake;
  auto d0 = CudaDevice::open(fake.driver(), 0);
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 1})});
  testing::expect_error(
      [&] {
        model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                       .loss = std::make_shared<losses::MeanSquaredError>(),
                       .distribution = data_parallel({d0.get()})});
      },
      ErrorCode::kInvalidArgument, {"compile: the distribution's mesh holds", "no mesh_backend was given"});
  testing::expect_error([&] { distribution::initialize(ProcessGroupOptions{}, MeshBackend{}); },
                        ErrorCode::kInvalidArgument, {"MeshBackend CPU has no connect_processes"});
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_FAKE_NCCL
