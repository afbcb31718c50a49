// The compile targets behind jit (include/ingot/jit/target.h): one graph on the CPU, the
// interpreter and an SPMD mesh of four CPU devices gives one result; each target's signature
// checks and donation; the trainer's refusal of targets that are no device.
#include "ingot/jit/target.h"

#include <gtest/gtest.h>

#include "ingot/jit/jit.h"
#include "ingot/jit/spmd.h"
#include "ingot/trace/ops.h"
#include "ingot/trainer/layers.h"
#include "ingot/trainer/model.h"
#include "compiler/codegen/parity.h"
#include "runtime/four_devices.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::FourDevices;

/// x @ w + 1 and the column sums of x @ w (mean over the devices' shards under SPMD: each device's
/// sum, averaged, times the device count is the whole batch's).
std::vector<Tensor> affine(const std::vector<Tensor>& a) {
  const Tensor y = matmul(a[0], a[1]);
  return {y + 1.0, sum(y, {0})};
}

TEST(CompileTarget, CpuAndInterpreterGiveOneResultAndTheInterpreterDonatesNothing) {
  const Array x = testing::random_array({8, 3}, DType::kF32, 1), w = testing::random_array({3, 5}, DType::kF32, 2);
  const std::vector<Array> want = jit(affine)({x, w});
  for (const auto& target : {cpu_target(), interpreter_target()}) {
    SCOPED_TRACE(target->name());
    Array x_copy = x.clone();
    Jitted f = jit(affine, {.name = "affine", .donate_argnums = {0}, .target = target});
    const std::vector<Array> got = f({x_copy, w});
    ASSERT_EQ(got.size(), 2u) << target->name();
    testing::expect_values(got[0], want[0].to_doubles(), 1e-5);
    testing::expect_values(got[1], want[1].to_doubles(), 1e-5);
    EXPECT_EQ(f.compile_count(), 1);
    if (target->kind() == TargetKind::kInterpreter) {
      EXPECT_EQ(f.kernel_count(), 0);
      EXPECT_EQ(x_copy.to_doubles(), x.to_doubles());  // not donated: still readable
    } else {
      EXPECT_GT(f.kernel_count(), 0);
      EXPECT_THROW(x_copy.to_doubles(), Error);  // donated to the CPU program
    }
    EXPECT_TRUE(target->host_memory());
    EXPECT_EQ(target->to_host(x).to_doubles(), x.to_doubles());
  }
}

TEST(CompileTarget, TheInterpreterChecksDonationsAsTheCompiledTargetsDo) {
  const Array x = testing::random_array({2, 3}, DType::kF32, 1), w = testing::random_array({3, 5}, DType::kF32, 2);
  testing::expect_error([&] { jit(affine, {.donate_argnums = {2}, .target = interpreter_target()})({x, w}); },
                        ErrorCode::kInvalidArgument, {"donate_argnums: 2 is out of range"});
}

TEST(CompileTarget, ASpmdTargetRunsTheJittedPerDeviceProgramOverTheMesh) {
  FourDevices d;
  const TraceFn local = [](const std::vector<Tensor>& a) {
    const std::vector<Tensor> y = affine(a);
    return std::vector<Tensor>{y[0], all_reduce(y[1], "batch", "mean") * 4.0};
  };
  const std::shared_ptr<const CompileTarget> mesh =
      spmd_target({.communicators = d.comms(),
                   .out_sharding = [&d](size_t i, size_t) { return i == 0 ? d.split() : d.replicated(); }});
  EXPECT_EQ(mesh->kind(), TargetKind::kSpmd);
  const Array x = testing::random_array({8, 3}, DType::kF32, 1), w = testing::random_array({3, 5}, DType::kF32, 2);
  const std::vector<Array> want = jit(affine)({x, w});
  Jitted f = jit(local, {.name = "local", .target = mesh});
  const std::vector<Array> got = f({device_put(x, d.split()), device_put(w, d.replicated())});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].shape(), (Shape{8, 5}));
  testing::expect_values(to_host(got[0]), want[0].to_doubles(), 1e-5);
  for (const Array& replica : got[1].shards()) testing::expect_values(replica, want[1].to_doubles(), 1e-4);
  // Traced once, on the per-device shapes.
  f({device_put(x, d.split()), device_put(w, d.replicated())});
  EXPECT_EQ(f.compile_count(), 1);
}

TEST(CompileTarget, SignaturesRefuseWhatTheTargetCannotRun) {
  FourDevices d;
  const Array x = testing::random_array({8, 3}, DType::kF32, 1), w = testing::random_array({3, 5}, DType::kF32, 2);
  // The CPU runs one device: a sharded argument names the SPMD target.
  testing::expect_error([&] { jit(affine, {.name = "cpu_one"})({device_put(x, d.split()), w}); },
                        ErrorCode::kUnimplemented,
                        {"jit 'cpu_one': argument 0 is sharded over 4 devices", "spmd_target"});
  testing::expect_error([&] { jit(affine, {.target = interpreter_target()})({Array(), w}); },
                        ErrorCode::kInvalidArgument, {"argument 0 is an invalid Array"});
  testing::expect_error([] { spmd_target({}); }, ErrorCode::kInvalidArgument, {"out_sharding is empty"});
}

TEST(CompileTarget, ModelCompileTakesDevicesAndRefusesOtherTargets) {
  FourDevices d;
  const auto mesh =
      spmd_target({.communicators = d.comms(), .out_sharding = [&d](size_t, size_t) { return d.replicated(); }});
  for (const auto& [target, hint] :
       {std::pair{mesh, "use `distribution`"}, std::pair{interpreter_target(), "run_eagerly"}}) {
    Sequential model({std::make_shared<Dense>(DenseOptions{.units = 2})}, {.seed = 1});
    testing::expect_error(
        [&] {
          model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                         .loss = std::make_shared<losses::MeanSquaredError>(),
                         .target = target});
        },
        ErrorCode::kInvalidArgument, {"compile: target", "is not a device", hint});
  }
  // The CPU target as a device: fit trains as with no target.
  const Array x = testing::random_array({16, 3}, DType::kF32, 3), y = testing::random_array({16, 2}, DType::kF32, 4);
  std::vector<std::vector<Array>> weights;
  for (const std::shared_ptr<const CompileTarget>& target : {std::shared_ptr<const CompileTarget>(), cpu_target()}) {
    Sequential model({std::make_shared<Dense>(DenseOptions{.units = 2})}, {.seed = 1});
    model.compile({.optimizer = std::make_shared<optimizers::SGD>(),
                   .loss = std::make_shared<losses::MeanSquaredError>(),
                   .target = target});
    model.fit({.x = x, .y = y, .batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
    weights.push_back(model.get_weights());
  }
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (size_t i = 0; i < weights[0].size(); ++i) EXPECT_EQ(weights[0][i].to_doubles(), weights[1][i].to_doubles());
}

}  // namespace
}  // namespace ingot
