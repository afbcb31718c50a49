// Data-parallel fit over NCCL on real GPUs (CompileOptions::mesh_backend = cuda_mesh_backend):
// a one-rank NCCL data-parallel fit equals the plain GPU fit, and on a machine with two or more
// GPUs a fit over all of them equals the one-GPU fit. Skipped without a GPU or NCCL. The same
// plumbing runs against the fake driver and the fake NCCL in tests/trainer/fit_cuda_mesh_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/codegen/cuda_gpu/gpu_fixture.h"
#include "compiler/codegen/parity.h"
#include "ingot/jit/spmd.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/nccl.h"
#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

class NcclFitGpu : public testing::CudaDeviceTest {
 protected:
  void SetUp() override {
    testing::CudaDeviceTest::SetUp();
    if (IsSkipped()) return;
    nccl_ = NcclLibrary::load(LibrarySearch{});
    if (!nccl_->available()) GTEST_SKIP() << "no NCCL: " << nccl_->unavailable_reason();
  }

  /// A 2-layer MLP, 3 epochs of SGD on fixed data: on `devices` with NCCL data parallelism, or on
  /// `plain` with cuda_target when `devices` is empty.
  std::pair<std::vector<Array>, std::vector<double>> train(const std::vector<CudaDevice*>& devices, CudaDevice* plain) {
    Sequential model({std::make_shared<Dense>(DenseOptions{.units = 16, .activation = "relu"}),
                      std::make_shared<Dense>(DenseOptions{.units = 3})},
                     {.seed = 5});
    CompileOptions options{
        .optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 0.05}),
        .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
            losses::SparseCategoricalCrossentropyOptions{.from_logits = true})};
    if (devices.empty()) {
      options.target = cuda_target(*plain);
    } else {
      std::vector<Device*> mesh_devices;
      for (CudaDevice* d : devices) mesh_devices.push_back(&d->device());
      options.distribution = std::make_shared<distribution::DataParallel>(distribution::DeviceMesh(
          {.shape = {static_cast<int64_t>(devices.size())}, .axis_names = {"batch"}, .devices = mesh_devices}));
      options.mesh_backend = cuda_mesh_backend(devices, nccl_);
    }
    model.compile(options);
    const Array x = testing::random_array({96, 8}, DType::kF32, 11);
    const Array y = testing::random_array({96}, DType::kI32, 12, 0, 2);
    auto h = model.fit({.x = x, .y = y, .batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false});
    return {model.get_weights(), h->values("loss")};
  }

  void expect_same(const std::pair<std::vector<Array>, std::vector<double>>& got,
                   const std::pair<std::vector<Array>, std::vector<double>>& want, double tol) {
    ASSERT_EQ(got.first.size(), want.first.size());
    for (size_t i = 0; i < want.first.size(); ++i)
      testing::expect_values(got.first[i], want.first[i].to_doubles(), tol);
    ASSERT_EQ(got.second.size(), want.second.size());
    for (size_t i = 0; i < want.second.size(); ++i) {
      EXPECT_NEAR(got.second[i], want.second[i], tol * (1 + std::abs(want.second[i])));
    }
  }

  std::shared_ptr<NcclLibrary> nccl_;
};

TEST_F(NcclFitGpu, OneRankDataParallelFitEqualsThePlainGpuFit) {
  expect_same(train({device_.get()}, nullptr), train({}, device_.get()), 1e-5);
}

TEST_F(NcclFitGpu, DataParallelFitOnEveryGpuEqualsOneGpu) {
  const int n = driver_->device_count();
  if (n < 2) GTEST_SKIP() << "one GPU here: the multi-GPU fit needs two or more";
  std::vector<std::unique_ptr<CudaDevice>> others;
  std::vector<CudaDevice*> devices = {device_.get()};
  const int use = n >= 4 ? 4 : 2;  // the batch of 16 splits evenly over them
  for (int i = 1; i < use; ++i) {
    others.push_back(CudaDevice::open(driver_, i));
    devices.push_back(others.back().get());
  }
  expect_same(train(devices, nullptr), train({}, device_.get()), 1e-5);
}

}  // namespace
}  // namespace ingot
