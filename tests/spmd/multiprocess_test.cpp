// Data parallelism across processes (issue 10): two copies of this binary, each with two CPU
// devices, join one mesh of four devices over Gloo (distribution::initialize, torchrun-style
// RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT) and train the MLP the 1-device run trains on the
// same global batches. The bar: the same losses, metrics, weights and predictions to 1e-5; files
// written once (process 0) and readable by every process right after.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "child_process.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trainer/callbacks_logging.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/safetensors.h"
#include "spmd_models.h"
#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kWorkerFlag = "INGOT_SPMD_TEST_WORKER";
constexpr const char* kDirVariable = "INGOT_SPMD_TEST_DIR";
constexpr const char* kLayoutVariable = "INGOT_SPMD_TEST_LAYOUT";  // "dp" or "fsdp"

// DataParallel over the 4 devices of both processes, or FSDP: the Dense kernels split on
// dimension 0 over all 4 (ModelParallel with a LayoutMap).
std::shared_ptr<distribution::Distribution> make_distribution(const std::string& layout,
                                                              std::shared_ptr<distribution::ProcessGroup> processes) {
  distribution::DeviceMesh mesh({.shape = {4}, .axis_names = {"batch"}, .processes = std::move(processes)});
  if (layout == "dp") return std::make_shared<distribution::DataParallel>(mesh);
  distribution::LayoutMap layouts(mesh);
  layouts.set(".*/kernel", PartitionSpec{"batch"});
  return std::make_shared<distribution::ModelParallel>(layouts, "batch");
}

// The run both sides make: 64 samples in shuffled batches of 16 for 5 epochs (20 steps).
FitOptions fit_options(const testing::SpmdData& d, std::vector<std::shared_ptr<callbacks::Callback>> cbs = {}) {
  return {.x = d.x, .y = d.y, .batch_size = 16, .epochs = 5, .verbose = 0, .callbacks = std::move(cbs), .seed = 3};
}

// What a run produced, as named arrays (a worker saves them; the test compares them).
std::vector<std::pair<std::string, Array>> results(Model& m, const callbacks::History& h, const testing::SpmdData& d) {
  const Logs e = m.evaluate({.x = d.x, .y = d.y, .batch_size = 16, .verbose = 0});
  std::vector<std::pair<std::string, Array>> out;
  out.emplace_back("loss", Array::from_vector(h.values("loss"), {5}));
  out.emplace_back("accuracy", Array::from_vector(h.values("accuracy"), {5}));
  out.emplace_back("evaluate", Array::from_vector(std::vector<double>{*e.get("loss"), *e.get("accuracy")}, {2}));
  out.emplace_back("predict", m.predict({.x = d.x, .batch_size = 16, .verbose = 0}));
  const std::vector<Array> w = m.get_weights();
  for (size_t i = 0; i < w.size(); ++i) out.emplace_back("weight" + std::to_string(i), w[i]);
  return out;
}

TEST(MultiProcessWorker, TrainsDataParallel) {
  if (std::getenv(kWorkerFlag) == nullptr || std::getenv(kDirVariable) == nullptr ||
      std::getenv(kLayoutVariable) == nullptr) {
    GTEST_SKIP() << "worker of the MultiProcess tests: runs only in the processes they start (" << kWorkerFlag
                 << " unset)";
  }
  const std::string dir = std::getenv(kDirVariable);
  ProcessGroupOptions group = ProcessGroupOptions::from_env();
  group.timeout = 60;
  Runtime runtime(RuntimeOptions{.num_cpu_devices = 2});
  auto processes = distribution::initialize(group, runtime.devices());
  const auto dp = make_distribution(std::getenv(kLayoutVariable), processes);
  ASSERT_EQ(dp->batch_axis_size(), 4);
  // Process 1 starts from other weights: fit trains process 0's (broadcast first, as DDP does).
  auto m = testing::spmd_mlp("mp_mlp", group.rank == 0 ? 7 : 99);
  testing::spmd_compile(*m, dp);
  EXPECT_EQ(m->process_id(), group.rank);
  const testing::SpmdData data(11, 7);
  auto csv = std::make_shared<callbacks::CSVLogger>(callbacks::CSVLoggerOptions{.filename = dir + "/log.csv"});
  const auto h = m->fit(fit_options(data, {csv}));
  save_safetensors(dir + "/rank" + std::to_string(group.rank) + ".safetensors", results(*m, *h, data));
  // Written once, by process 0; every process reads it as soon as the call returns.
  m->save_weights(dir + "/weights.safetensors");
  auto loaded = testing::spmd_mlp("mp_mlp", 1);
  loaded->load_weights(dir + "/weights.safetensors");
  const std::vector<Array> mine = m->get_weights(), read = loaded->get_weights();
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_TRUE(mine[i].bitwise_equal(read[i])) << i;
}

// Runs the worker in 2 processes with `layout` and compares their results with one device's.
void expect_two_processes_equal_one_device(const std::string& layout) {
  const fs::path dir = fs::temp_directory_path() / ("ingot_multiprocess_" + layout + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int port = testing::free_port();
  const std::string filter = "MultiProcessWorker.TrainsDataParallel";
  const std::vector<std::string> extra = {std::string(kDirVariable) + "=" + dir.string(),
                                          std::string(kLayoutVariable) + "=" + layout};
  pid_t workers[2] = {testing::spawn_self(filter, testing::rank_env(0, 2, port, kWorkerFlag, extra)),
                      testing::spawn_self(filter, testing::rank_env(1, 2, port, kWorkerFlag, extra))};
  // Meanwhile, the reference: one device, the same global batches.
  const testing::SpmdData data(11, 7);
  auto one = testing::spmd_mlp("mp_mlp", 7);
  testing::spmd_compile(*one, nullptr);
  const auto h = one->fit(fit_options(data));
  const auto want = results(*one, *h, data);
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  for (int r = 0; r < 2; ++r) {
    if (workers[r] > 0) {
      EXPECT_EQ(testing::wait_child(workers[r], deadline), 0) << "process " << r << " failed";
    }
  }
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("process " + std::to_string(r));
    const SafetensorsFile got = load_safetensors((dir / ("rank" + std::to_string(r) + ".safetensors")).string());
    for (const auto& [name, value] : want) {
      SCOPED_TRACE(name);
      const auto it =
          std::find_if(got.tensors.begin(), got.tensors.end(), [&](const auto& t) { return t.first == name; });
      ASSERT_NE(it, got.tensors.end());
      testing::expect_arrays_near(std::vector<Array>{it->second}, std::vector<Array>{value}, 1e-5);
    }
  }
  // The CSV log was written by process 0 alone: a header and one row per epoch.
  std::ifstream csv(dir / "log.csv");
  int64_t lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 6);
  fs::remove_all(dir);
}

TEST(MultiProcess, TwoProcessesOfTwoDevicesEqualOneDevice) { expect_two_processes_equal_one_device("dp"); }

// FSDP across processes: each process holds its two devices' blocks of the kernels (rows 2p..2p+1
// of 4 blocks); get_weights, save_weights and the variables after fit all-gather them.
TEST(MultiProcess, FsdpOverTwoProcessesOfTwoDevicesEqualsOneDevice) { expect_two_processes_equal_one_device("fsdp"); }

TEST(MultiProcess, BadMeshesAreClearErrors) {
  Runtime runtime(RuntimeOptions{.num_cpu_devices = 2});
  // One process joining alone (world size 1) is a valid group of one.
  ProcessGroupOptions alone;
  alone.master_port = testing::free_port();
  auto processes = distribution::initialize(alone, runtime.devices());
  EXPECT_EQ(processes->num_processes(), 1);
  testing::expect_error(
      [&] { distribution::DeviceMesh({.shape = {3}, .axis_names = {"batch"}, .processes = processes}); },
      ErrorCode::kInvalidArgument, {});
  testing::expect_error(
      [&] {
        distribution::DeviceMesh({.shape = {2},
                                  .axis_names = {"batch"},
                                  .devices = {runtime.devices()[1], runtime.devices()[0]},
                                  .processes = processes});
      },
      ErrorCode::kInvalidArgument, {"not the process group's devices"});
  testing::expect_error([&] { distribution::initialize(alone, std::vector<Device*>{}); }, ErrorCode::kInvalidArgument,
                        {"no local devices"});
  testing::expect_error([&] { distribution::initialize(alone, std::vector<Device*>{nullptr}); },
                        ErrorCode::kInvalidArgument, {"local device 0 is null"});
}

}  // namespace
}  // namespace ingot
