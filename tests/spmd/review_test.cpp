// Data parallelism as a model author uses it (docs/distributed.md, "Processes"): checkpoints,
// backups, validation, ragged last batches and weight files with two processes of two CPU devices
// each; steps_per_execution, gradient accumulation and gradient buckets on four devices of one
// process; and a process that dies mid-training. The bar: the 1-device run's values to 1e-5, files
// written once, and a peer's death reported as the collective's failure within the timeout.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "child_process.h"
#include "ingot/runtime/runtime.h"
#include "ingot/trainer/backup.h"
#include "ingot/trainer/callbacks.h"
#include "ingot/trainer/callbacks_checkpoint.h"
#include "ingot/trainer/distribution.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/safetensors.h"
#include "spmd_models.h"
#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kWorkerFlag = "INGOT_REVIEW_TEST_WORKER";
constexpr const char* kDirVariable = "INGOT_REVIEW_TEST_DIR";

/// 60 validation samples: batches of 16 end in one of 12, which still splits over 4 devices.
struct Ragged {
  Array x = testing::random_array({60, 8}, DType::kF32, 23);
  Array y = Array::empty({60}, DType::kI32);
  Ragged() {
    for (int64_t i = 0; i < 60; ++i) y.data<int32_t>()[i] = static_cast<int32_t>((i * 3) % 4);
  }
};

/// A run of `epochs` epochs (batches of 16, shuffled with seed 3) validated on the ragged set.
FitOptions fit_options(const testing::SpmdData& d, const Ragged& v, int64_t epochs,
                       std::vector<std::shared_ptr<callbacks::Callback>> cbs) {
  return {.x = d.x,
          .y = d.y,
          .batch_size = 16,
          .epochs = epochs,
          .verbose = 0,
          .callbacks = std::move(cbs),
          .validation_data = Batch{.x = {v.x}, .y = {v.y}},
          .seed = 3};
}

/// Saves the weights after every epoch to <dir>/ckpt_<epoch>.safetensors and, when val_loss
/// improves, to <dir>/best.safetensors.
std::vector<std::shared_ptr<callbacks::Callback>> checkpoints(const std::string& dir) {
  return {std::make_shared<callbacks::ModelCheckpoint>(callbacks::ModelCheckpointOptions{
              .filepath = dir + "/ckpt_{epoch}.safetensors", .save_weights_only = true}),
          std::make_shared<callbacks::ModelCheckpoint>(callbacks::ModelCheckpointOptions{
              .filepath = dir + "/best.safetensors", .save_best_only = true, .save_weights_only = true})};
}

std::shared_ptr<callbacks::BackupAndRestore> backup(const std::string& dir, bool keep) {
  return std::make_shared<callbacks::BackupAndRestore>(
      callbacks::BackupAndRestoreOptions{.backup_dir = dir + "/backup", .delete_checkpoint = !keep});
}

/// The values compared with the 1-device run: losses and val_losses of the epochs run, evaluate
/// and predict on the ragged set, the weights.
std::vector<std::pair<std::string, Array>> results(Model& m, const std::vector<double>& loss,
                                                   const std::vector<double>& val_loss, const Ragged& v) {
  const Logs e = m.evaluate({.x = v.x, .y = v.y, .batch_size = 16, .verbose = 0});
  std::vector<std::pair<std::string, Array>> out;
  out.emplace_back("loss", Array::from_vector(loss, {static_cast<int64_t>(loss.size())}));
  out.emplace_back("val_loss", Array::from_vector(val_loss, {static_cast<int64_t>(val_loss.size())}));
  out.emplace_back("evaluate", Array::from_vector(std::vector<double>{*e.get("loss"), *e.get("accuracy")}, {2}));
  out.emplace_back("predict", m.predict({.x = v.x, .batch_size = 16, .verbose = 0}));
  const std::vector<Array> w = m.get_weights();
  for (size_t i = 0; i < w.size(); ++i) out.emplace_back("weight" + std::to_string(i), w[i]);
  return out;
}

/// The 2 x 2 data-parallel setup of a worker process (skips unless started by the test).
struct Worker {
  std::string dir;
  ProcessGroupOptions group;
  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<distribution::DataParallel> dp;
  explicit Worker(double timeout) {
    dir = std::getenv(kDirVariable);
    group = ProcessGroupOptions::from_env();
    group.timeout = timeout;
    runtime = std::make_unique<Runtime>(RuntimeOptions{.num_cpu_devices = 2});
    auto processes = distribution::initialize(group, runtime->devices());
    dp = std::make_shared<distribution::DataParallel>(
        distribution::DeviceMesh({.shape = {4}, .axis_names = {"batch"}, .processes = processes}));
  }
};

bool is_worker() { return std::getenv(kWorkerFlag) != nullptr && std::getenv(kDirVariable) != nullptr; }

/// Runs worker test `filter` as 2 processes with the working directory `dir`; returns their exit
/// codes (-1: did not exit normally).
std::vector<int> run_workers(const std::string& filter, const fs::path& dir, std::chrono::seconds limit) {
  const int port = testing::free_port();
  const std::vector<std::string> extra = {std::string(kDirVariable) + "=" + dir.string()};
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(testing::spawn_self(filter, testing::rank_env(r, 2, port, kWorkerFlag, extra)));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> codes;
  for (pid_t p : pids) codes.push_back(p > 0 ? testing::wait_child(p, deadline) : -1);
  return codes;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const Array& tensor(const SafetensorsFile& f, const std::string& name) {
  for (const auto& [n, a] : f.tensors) {
    if (n == name) return a;
  }
  throw Error(ErrorCode::kNotFound, "no tensor " + name);
}

TEST(ReviewWorker, CheckpointsBackupAndRaggedBatches) {
  if (!is_worker()) GTEST_SKIP() << "worker of ReviewMultiProcess.CheckpointsBackupAndRaggedBatchesEqualOneDevice";
  Worker w(60);
  const testing::SpmdData data(11, 7);
  const Ragged v;
  // An "interrupted" run: 2 epochs, its backup kept. Process 1 starts from other weights.
  auto first = testing::spmd_mlp("rv_mlp", w.group.rank == 0 ? 7 : 99);
  testing::spmd_compile(*first, w.dp);
  auto cbs = checkpoints(w.dir);
  cbs.push_back(backup(w.dir, /*keep=*/true));
  const auto h1 = first->fit(fit_options(data, v, 2, cbs));
  ASSERT_EQ(h1->values("loss").size(), 2u);
  // The resumed run: a fresh model (other initial weights) continues at epoch 3 from the backup.
  auto resumed = testing::spmd_mlp("rv_mlp", 1234);
  testing::spmd_compile(*resumed, w.dp);
  cbs = checkpoints(w.dir);
  cbs.push_back(backup(w.dir, /*keep=*/false));
  const auto h2 = resumed->fit(fit_options(data, v, 5, cbs));
  ASSERT_EQ(h2->values("loss").size(), 3u);
  std::vector<double> loss = h1->values("loss"), val_loss = h1->values("val_loss");
  for (double x : h2->values("loss")) loss.push_back(x);
  for (double x : h2->values("val_loss")) val_loss.push_back(x);
  // Every process's results go to its own file; the shared files were written by process 0.
  save_safetensors(w.dir + "/results" + std::to_string(w.group.rank) + ".safetensors",
                   results(*resumed, loss, val_loss, v));
  EXPECT_FALSE(fs::exists(w.dir + "/backup"));  // deleted (once) at the end of the completed run
  // save_weights / load_weights called from every process.
  resumed->save_weights(w.dir + "/final.safetensors");
  auto loaded = testing::spmd_mlp("rv_mlp", 5);
  testing::spmd_compile(*loaded, w.dp);
  loaded->load_weights(w.dir + "/final.safetensors");
  const std::vector<Array> mine = resumed->get_weights(), read = loaded->get_weights();
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_TRUE(mine[i].bitwise_equal(read[i])) << i;
  const Logs a = resumed->evaluate({.x = v.x, .y = v.y, .batch_size = 16, .verbose = 0});
  const Logs b = loaded->evaluate({.x = v.x, .y = v.y, .batch_size = 16, .verbose = 0});
  EXPECT_EQ(*a.get("loss"), *b.get("loss"));
}

TEST(ReviewMultiProcess, CheckpointsBackupAndRaggedBatchesEqualOneDevice) {
  const fs::path dir = fresh_dir("ingot_review_ckpt");
  const fs::path ref = dir / "one_device";
  fs::create_directories(ref);
  const std::vector<int> codes = run_workers("ReviewWorker.CheckpointsBackupAndRaggedBatches", dir, 240s);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "process " << r << " failed";
  // The reference: one device, 5 uninterrupted epochs with the same checkpoints.
  const testing::SpmdData data(11, 7);
  const Ragged v;
  auto one = testing::spmd_mlp("rv_mlp", 7);
  testing::spmd_compile(*one, nullptr);
  const auto h = one->fit(fit_options(data, v, 5, checkpoints(ref.string())));
  const auto want = results(*one, h->values("loss"), h->values("val_loss"), v);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("process " + std::to_string(r));
    const SafetensorsFile got = load_safetensors((dir / ("results" + std::to_string(r) + ".safetensors")).string());
    for (const auto& [name, value] : want) {
      SCOPED_TRACE(name);
      testing::expect_arrays_near({tensor(got, name)}, {value}, 1e-5);
    }
  }
  // Each checkpoint holds the weights the 1-device run had at that epoch; best.safetensors those
  // of its best val_loss epoch.
  for (const std::string name : {"ckpt_1", "ckpt_2", "ckpt_3", "ckpt_4", "ckpt_5", "best"}) {
    SCOPED_TRACE(name);
    const SafetensorsFile got = load_safetensors((dir / (name + ".safetensors")).string());
    const SafetensorsFile expected = load_safetensors((ref / (name + ".safetensors")).string());
    ASSERT_EQ(got.tensors.size(), expected.tensors.size());
    for (size_t i = 0; i < got.tensors.size(); ++i) {
      EXPECT_EQ(got.tensors[i].first, expected.tensors[i].first);
      testing::expect_arrays_near({got.tensors[i].second}, {expected.tensors[i].second}, 1e-5);
    }
  }
  // Nothing else was written: no temporary files left by concurrent writers, no per-process copies.
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.insert(e.path().filename().string());
  EXPECT_EQ(files,
            (std::set<std::string>{"best.safetensors", "ckpt_1.safetensors", "ckpt_2.safetensors", "ckpt_3.safetensors",
                                   "ckpt_4.safetensors", "ckpt_5.safetensors", "final.safetensors", "one_device",
                                   "results0.safetensors", "results1.safetensors"}));
  fs::remove_all(dir);
}

TEST(ReviewWorker, PeerDiesMidTraining) {
  if (!is_worker()) GTEST_SKIP() << "worker of ReviewMultiProcess.APeerDyingMidTrainingIsAClearErrorInTheOthers";
  Worker w(3);
  const testing::SpmdData data(11, 7);
  auto m = testing::spmd_mlp("rv_mlp", 7);
  testing::spmd_compile(*m, w.dp);
  // Process 1 dies after its third step, as a killed process would (no goodbye to its peers).
  auto die = std::make_shared<callbacks::LambdaCallback>(
      callbacks::LambdaCallbackOptions{.on_train_batch_end = [&](int64_t batch, const Logs&) {
        if (w.group.rank == 1 && batch == 2) std::_Exit(0);
      }});
  const auto start = std::chrono::steady_clock::now();
  // The survivor's error names the collective that failed, not a consequence of it.
  testing::expect_error(
      [&] { m->fit({.x = data.x, .y = data.y, .batch_size = 16, .epochs = 5, .verbose = 0, .callbacks = {die}}); },
      ErrorCode::kFailedPrecondition, {"run_spmd", "rank"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  // The model is usable again: weights can be loaded into it and it evaluates on one process.
  auto fresh = testing::spmd_mlp("rv_mlp", 7);
  fresh->save_weights(w.dir + "/fresh.safetensors");
  m->load_weights(w.dir + "/fresh.safetensors");
  const std::vector<Array> a = m->get_weights(), b = fresh->get_weights();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].bitwise_equal(b[i])) << i;
}

TEST(ReviewMultiProcess, APeerDyingMidTrainingIsAClearErrorInTheOthers) {
  const fs::path dir = fresh_dir("ingot_review_death");
  const std::vector<int> codes = run_workers("ReviewWorker.PeerDiesMidTraining", dir, 120s);
  EXPECT_EQ(codes[0], 0) << "the surviving process 0 did not see the expected error (its output says why)";
  EXPECT_EQ(codes[1], 0);
  fs::remove_all(dir);
}

// ---- one process, four devices -------------------------------------------------------------------

struct FourDevices {
  Runtime runtime{RuntimeOptions{.num_cpu_devices = 4}};
  std::shared_ptr<distribution::DataParallel> dp = std::make_shared<distribution::DataParallel>(
      distribution::DeviceMesh({.shape = {4}, .axis_names = {"batch"}, .devices = runtime.devices()}));
};

/// Compiles `m` as spmd_compile does, with `steps` steps per execution and Adam accumulating
/// gradients over `accumulate` steps (unset: none).
void compile_with(Model& m, std::shared_ptr<distribution::Distribution> d, int64_t steps,
                  std::optional<int64_t> accumulate) {
  auto loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
      losses::SparseCategoricalCrossentropyOptions{.from_logits = true});
  m.compile({.optimizer = std::make_shared<optimizers::Adam>(
                 optimizers::AdamOptions{.learning_rate = 0.01, .gradient_accumulation_steps = accumulate}),
             .loss = loss,
             .metrics = {metrics::get_for_compile("accuracy", {.loss = loss.get()})},
             .steps_per_execution = steps,
             .distribution = std::move(d)});
}

/// Fits a 1-device and a 4-device model compiled alike (5 epochs of 4 steps, validation on the
/// ragged set) and expects the same history, weights and predictions.
void expect_four_devices_equal_one(int64_t steps, std::optional<int64_t> accumulate,
                                   const std::function<void(distribution::DataParallel&)>& configure = {}) {
  const testing::SpmdData data(11, 7);
  const Ragged v;
  auto one = testing::spmd_mlp("rv_mlp", 7);
  compile_with(*one, nullptr, steps, accumulate);
  FourDevices d;
  if (configure) configure(*d.dp);
  auto four = testing::spmd_mlp("rv_mlp", 7);
  compile_with(*four, d.dp, steps, accumulate);
  const auto h1 = one->fit(fit_options(data, v, 5, {}));
  const auto h4 = four->fit(fit_options(data, v, 5, {}));
  for (const char* log : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    ASSERT_EQ(h4->values(log).size(), 5u) << log;
    for (size_t e = 0; e < 5; ++e) EXPECT_NEAR(h4->values(log)[e], h1->values(log)[e], 1e-5) << log << " epoch " << e;
  }
  EXPECT_LT(h1->values("loss").back(), h1->values("loss").front());  // it trained
  testing::expect_arrays_near(four->get_weights(), one->get_weights(), 1e-5);
  testing::expect_arrays_near({four->predict({.x = v.x, .batch_size = 16, .verbose = 0})},
                              {one->predict({.x = v.x, .batch_size = 16, .verbose = 0})}, 1e-5);
}

TEST(ReviewDataParallel, ThreeStepsPerExecutionEqualOneDevice) {
  // 4 steps an epoch in calls of 3: every epoch ends with a shorter call.
  expect_four_devices_equal_one(3, std::nullopt);
}

TEST(ReviewDataParallel, GradientAccumulationEqualsOneDevice) { expect_four_devices_equal_one(1, 2); }

TEST(ReviewDataParallel, GradientAccumulationWithTwoStepsPerExecutionEqualsOneDevice) {
  expect_four_devices_equal_one(2, 3);
}

TEST(ReviewDataParallel, BucketsHoldingSeveralGradientsInGraphOrderEqualOneDevice) {
  // 600 bytes: the 8x16 kernel (512 bytes) is a bucket with the 16-wide bias, the 16x4 kernel
  // (256) one with the 4-wide bias; collectives waited for where they stand.
  expect_four_devices_equal_one(1, std::nullopt, [](distribution::DataParallel& dp) {
    dp.set_gradient_bucket_bytes(600);
    dp.set_overlap_collectives(false);
  });
}

TEST(ReviewDataParallel, BadBucketSizeIsAClearError) {
  FourDevices d;
  testing::expect_error([&] { d.dp->set_gradient_bucket_bytes(0); }, ErrorCode::kInvalidArgument, {"0"});
  EXPECT_EQ(d.dp->gradient_bucket_bytes(), int64_t{25} << 20);  // a failed call changes nothing
}

}  // namespace
}  // namespace ingot
