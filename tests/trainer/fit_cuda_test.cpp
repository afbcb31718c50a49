// fit on a CUDA device (CompileOptions::target), its plumbing checked on the fake driver
// (tests/runtime/fake_cuda_driver.h): the fake cannot run the generated PTX, so the values are not
// checked here (the `gpu` suite compares a real device with the interpreter); what is checked is
// where things live and what runs -- the steps launch on the device, the live state stays there
// between steps, the variables and get_weights are host arrays of the right shapes, predict's
// result is a host array, and the options that cannot work are refused.
#include <gtest/gtest.h>

#include "ingot/runtime/cuda.h"
#include "ingot/trainer/model.h"
#include "runtime/fake_cuda_driver.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FakeCudaScope;

TEST(FitCuda, StepsLaunchOnTheDeviceAndTheVariablesStayHostArrays) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 3, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 2})});
  // Generated kernels only: cuBLAS would need a real device (no fake for it here).
  model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                 .loss = std::make_shared<losses::MeanSquaredError>(),
                 .lowering = {.blas_gemm = false},
                 .target = cuda_target(*dev)});
  const Array x = testing::f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {8, 2});
  const Array y = testing::f32({1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1}, {8, 2});
  std::vector<DeviceKind> live_kinds;
  Model* m = &model;
  auto probe = std::make_shared<callbacks::LambdaCallback>(
      callbacks::LambdaCallbackOptions{.on_train_batch_end = [&](int64_t, const Logs&) {
        for (const Array& w : m->get_weights()) live_kinds.push_back(w.device().kind());  // host copies
      }});
  model.fit({.x = x, .y = y, .batch_size = 4, .epochs = 2, .verbose = 0, .callbacks = {probe}, .shuffle = false});
  EXPECT_EQ(model.train_step_compile_count(), 1);
  EXPECT_FALSE(fake.state().launches.empty());
  ASSERT_EQ(live_kinds.size(), 4u * 4u);  // 4 steps x 4 variables
  for (DeviceKind k : live_kinds) EXPECT_EQ(k, DeviceKind::kCpu);
  const std::vector<Array> w = model.get_weights();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(w[0].device().kind(), DeviceKind::kCpu);
  EXPECT_NO_THROW(w[0].to_doubles());  // host memory
  const Array p = model.predict({.x = x, .batch_size = 8});
  EXPECT_EQ(p.shape(), (Shape{8, 2}));
  EXPECT_EQ(p.device().kind(), DeviceKind::kCpu);
}

TEST(FitCuda, TheInterpreterCannotRunOnADevice) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 1})});
  testing::expect_error(
      [&] {
        model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                       .loss = std::make_shared<losses::MeanSquaredError>(),
                       .run_eagerly = true,
                       .target = cuda_target(*dev)});
      },
      ErrorCode::kInvalidArgument, {"needs compiled steps"});
}

}  // namespace
}  // namespace ingot
