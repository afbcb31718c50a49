// Per-device (SPMD) programs on a mesh of CUDA devices without a GPU: cuda_spmd_target compiles
// every segment once with the CUDA code generator and loads it on each fake device
// (tests/runtime/fake_cuda_driver.h), GEMMs run through the fake cuBLAS and the collectives through
// NcclCommunicators over the fake NCCL (tests/runtime/fake_nccl.cpp). The fake driver runs no
// generated kernel, so the programs here are GEMMs and collectives only: a data-parallel
// gradient X^T (X W) of a least-squares loss, summed over the devices, must equal the one-device
// run of the whole batch.
#if defined(INGOT_FAKE_CUBLAS) && defined(INGOT_FAKE_NCCL)

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ingot/jit/spmd.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/nccl.h"
#include "ingot/trace/ops.h"
#include "ingot/trace/tensor.h"
#include "compiler/codegen/parity.h"
#include "runtime/fake_nccl_scope.h"
#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using testing::FakeCudaScope;
using testing::FakeNcclScope;

constexpr int64_t kBatch = 8, kIn = 6, kHidden = 3, kOut = 2;

/// The per-device program: h = x w, the gradient x^T h summed over 'data', then g w2; w2 is also
/// returned unchanged (a parameter output: the target's copy).
ir::Graph step(int64_t rows) {
  return trace(
      [](const std::vector<Tensor>& a) {
        const Tensor h = matmul(a[0], a[1]);
        const Tensor grad = dot_general(a[0], h, {.lhs_contracting = {0}, .rhs_contracting = {0}});
        const Tensor g = all_reduce(grad, "data", "sum");
        return std::vector<Tensor>{h, g, matmul(g, a[2]), a[2]};
      },
      {ir::TensorType{{rows, kIn}, DType::kF32}, ir::TensorType{{kIn, kHidden}, DType::kF32},
       ir::TensorType{{kHidden, kOut}, DType::kF32}},
      "dp_step");
}

/// A folder holding the fake cuBLAS under cuBLAS's and cuBLASLt's names, for LibrarySearch.
fs::path fake_cublas_dir() {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ingot_spmd_cuda_{}", ::getpid());
  fs::create_directories(dir);
  for (const char* name : {"libcublas.so.13", "libcublasLt.so.13"}) {
    fs::copy_file(INGOT_FAKE_CUBLAS, dir / name, fs::copy_options::overwrite_existing);
  }
  return dir;
}

struct StepRun {
  std::vector<Array> outputs;  // on the host
  int64_t nccl_all_reduces = 0;
  size_t launches = 0;
};

/// The step on `n` fake devices, x sharded along dim 0, the weights replicated.
StepRun run_on(int n, const std::vector<Array>& host_args, const fs::path& libs) {
  FakeCudaScope cuda;
  cuda.state().device_count = 4;
  FakeNcclScope nccl(INGOT_FAKE_NCCL);
  EXPECT_TRUE(nccl.ok()) << nccl.library()->unavailable_reason();
  auto driver = cuda.driver();
  std::vector<std::unique_ptr<CudaDevice>> owned;
  std::vector<CudaDevice*> devices;
  for (int i = 0; i < n; ++i) {
    owned.push_back(CudaDevice::open(driver, i));
    devices.push_back(owned.back().get());
  }
  auto comms = NcclCommunicator::create_all(nccl.library(), devices);
  std::vector<Communicator*> raw;
  for (auto& c : comms) raw.push_back(c.get());
  const Mesh mesh = cuda_mesh(devices);
  auto target =
      cuda_spmd_target(devices, {.communicators = raw, .out_sharding = [&](size_t i, size_t) {
                                   return NamedSharding(mesh, i == 0 ? PartitionSpec{"data"} : PartitionSpec{});
                                 }});
  EXPECT_EQ(target->name(), fmt::format("spmd over {} CUDA devices", n));
  EXPECT_FALSE(target->host_memory());
  TargetCompileOptions options;
  // The fake cuBLAS is found first; libdevice comes from the toolkit.
  options.cuda.libraries = LibrarySearch{.dirs = {libs.string()}, .loader_path = false, .beside_executable = false};
  const std::vector<Array> args = {device_put(host_args[0], NamedSharding(mesh, PartitionSpec{"data"})),
                                   target->to_target(host_args[1]), host_args[2]};  // a host array is replicated
  const std::vector<ir::TensorType> sig = target->signature(args, "test");
  EXPECT_EQ(sig[0].shape, (Shape{kBatch / n, kIn}));
  const auto exe = target->compile(step(kBatch / n), {}, options);
  StepRun run;
  for (const Array& out : target->run(*exe, args)) run.outputs.push_back(target->to_host(out));
  run.nccl_all_reduces = nccl.log().all_reduce;
  run.launches = cuda.state().launches.size();
  return run;
}

TEST(SpmdCudaFake, ADataParallelGemmStepOnTwoAndFourDevicesEqualsOneDevice) {
  const std::vector<Array> args = {testing::random_array({kBatch, kIn}, DType::kF32, 1, -1, 1),
                                   testing::random_array({kIn, kHidden}, DType::kF32, 2, -1, 1),
                                   testing::random_array({kHidden, kOut}, DType::kF32, 3, -1, 1)};
  // The reference on the host: h = X W, g = X^T h, z = g W2.
  const std::vector<double> x = args[0].to_doubles(), w = args[1].to_doubles(), w2 = args[2].to_doubles();
  std::vector<double> h(kBatch * kHidden, 0), g(kIn * kHidden, 0), z(kIn * kOut, 0);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t j = 0; j < kHidden; ++j)
      for (int64_t i = 0; i < kIn; ++i) h[b * kHidden + j] += x[b * kIn + i] * w[i * kHidden + j];
  for (int64_t i = 0; i < kIn; ++i)
    for (int64_t j = 0; j < kHidden; ++j)
      for (int64_t b = 0; b < kBatch; ++b) g[i * kHidden + j] += x[b * kIn + i] * h[b * kHidden + j];
  for (int64_t i = 0; i < kIn; ++i)
    for (int64_t k = 0; k < kOut; ++k)
      for (int64_t j = 0; j < kHidden; ++j) z[i * kOut + k] += g[i * kHidden + j] * w2[j * kOut + k];

  const fs::path libs = fake_cublas_dir();
  const StepRun one = run_on(1, args, libs);
  ASSERT_EQ(one.outputs.size(), 4u);
  testing::expect_values(one.outputs[0], h, 1e-5);
  testing::expect_values(one.outputs[1], g, 1e-5);
  testing::expect_values(one.outputs[2], z, 1e-5);
  EXPECT_EQ(one.outputs[3].to_doubles(), w2);
  EXPECT_EQ(one.nccl_all_reduces, 1);
  for (int n : {2, 4}) {
    SCOPED_TRACE(fmt::format("{} devices", n));
    const StepRun many = run_on(n, args, libs);
    ASSERT_EQ(many.outputs.size(), 4u);
    EXPECT_EQ(many.outputs[0].shape(), (Shape{kBatch, kHidden}));  // assembled from the devices' rows
    for (size_t i = 0; i < 3; ++i) testing::expect_values(many.outputs[i], one.outputs[i].to_doubles(), 1e-5);
    EXPECT_EQ(many.outputs[3].to_doubles(), w2);
    EXPECT_EQ(many.nccl_all_reduces, n);  // one per device
    EXPECT_EQ(many.launches, 0u);         // GEMMs and collectives only: nothing the fake cannot run
  }
  fs::remove_all(libs);
}

TEST(SpmdCudaFake, BadDevicesAndPlacementsAreNamedErrors) {
  FakeCudaScope cuda;
  auto driver = cuda.driver();
  auto d0 = CudaDevice::open(driver, 0), d1 = CudaDevice::open(driver, 1);
  testing::expect_error([&] { cuda_spmd_target({}, {}); }, ErrorCode::kInvalidArgument,
                        {"cuda_spmd_target: no CUDA devices"});
  testing::expect_error([&] { cuda_spmd_target({d0.get(), d0.get()}, {}); }, ErrorCode::kInvalidArgument,
                        {"cuda_spmd_target: devices[1] is repeated"});
  testing::expect_error([&] { cuda_spmd_target({d0.get()}, {}); }, ErrorCode::kInvalidArgument,
                        {"SpmdTargetOptions::out_sharding is empty"});
  testing::expect_error([&] { cuda_mesh({d0.get(), nullptr}); }, ErrorCode::kInvalidArgument,
                        {"cuda_mesh: devices[1] is null"});
  const Mesh mesh = cuda_mesh({d0.get(), d1.get()});
  testing::expect_error(
      [&] { device_put(Array::zeros({3, 2}, DType::kF32), NamedSharding(mesh, PartitionSpec{"data"})); },
      ErrorCode::kShapeMismatch, {"device_put: dimension 0 of shape (3, 2) has size 3"});
  // Round trips through the devices: split along dim 0, resharded to replicated (downloaded and
  // uploaded through the devices' transfers), a single device's array, and back to the host.
  const Array host = testing::random_array({4, 3}, DType::kF32, 7);
  const Array placed = device_put(host, NamedSharding(mesh, PartitionSpec{"data"}));
  EXPECT_EQ(placed.shards()[1].device().name(), "cuda:1");
  EXPECT_EQ(placed.shards()[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(to_host(placed).to_doubles(), host.to_doubles());
  const Array replicated = reshard(placed, NamedSharding(mesh, PartitionSpec{}));
  EXPECT_EQ(replicated.shards()[0].shape(), (Shape{4, 3}));
  EXPECT_EQ(to_host(replicated.shards()[1]).to_doubles(), host.to_doubles());
  const Array wide = testing::random_array({2, 4}, DType::kF32, 8);
  const Array columns = device_put(wide, NamedSharding(mesh, PartitionSpec{PartitionDim(), "data"}));
  EXPECT_EQ(
      to_host(columns.shards()[1]).to_doubles(),
      (std::vector<double>{wide.to_doubles()[2], wide.to_doubles()[3], wide.to_doubles()[6], wide.to_doubles()[7]}));
  EXPECT_EQ(to_host(reshard(columns, NamedSharding(mesh, PartitionSpec{"data"}))).to_doubles(), wide.to_doubles());
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_FAKE_CUBLAS && INGOT_FAKE_NCCL
