// BackupAndRestore: a run interrupted after an epoch and resumed in a new model ends with exactly
// the weights (and history) of an uninterrupted run; bad backups are clear errors.
#include "ingot/trainer/backup.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <unistd.h>

#include "ingot/trainer/model.h"
#include "ingot/trainer/safetensors.h"
#include "resume_util.h"
#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using callbacks::BackupAndRestore;
using testing::expect_error;

using Data = testing::ResumeData;
using testing::make_model;  // Dense - Dropout - Dense by Adam with a schedule (resume_util.h)

FitOptions fit_options(const Data& d, std::vector<std::shared_ptr<callbacks::Callback>> cbs) {
  return {.x = d.x, .y = d.y, .batch_size = 8, .epochs = 4, .verbose = 0, .callbacks = std::move(cbs), .seed = 5};
}

/// Throws at the end of `epoch` (after the callbacks before it in the list ran): a crash.
class CrashAt final : public callbacks::Callback {
 public:
  explicit CrashAt(int64_t epoch) : epoch_(epoch) {}
  void on_epoch_end(int64_t epoch, const Logs&) override {
    if (epoch == epoch_) throw std::runtime_error("simulated crash");
  }

 private:
  int64_t epoch_;
};

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(BackupAndRestore, AResumedRunEndsWithTheWeightsOfAnUninterruptedOne) {
  const Data d;
  auto straight = make_model();
  auto full = straight->fit(fit_options(d, {}));
  const std::vector<Array> want = straight->get_weights();

  const fs::path dir = fresh_dir("ingot_backup_test");
  auto backup = std::make_shared<BackupAndRestore>(callbacks::BackupAndRestoreOptions{.backup_dir = dir.string()});
  auto first = make_model();
  EXPECT_THROW(first->fit(fit_options(d, {backup, std::make_shared<CrashAt>(1)})), std::runtime_error);
  ASSERT_TRUE(fs::exists(backup->backup_path()));  // epoch 1's backup survives the crash
  EXPECT_EQ(load_safetensors(backup->backup_path()).metadata.at("epoch"), "1");

  // A new process would build a new model: it resumes at epoch 2 and trains epochs 2 and 3.
  auto second = make_model();
  auto resumed = second->fit(fit_options(d, {backup}));
  EXPECT_EQ(resumed->epochs(), (std::vector<int64_t>{2, 3}));
  const std::vector<double>& loss = full->values("loss");
  EXPECT_EQ(resumed->values("loss"), (std::vector<double>{loss[2], loss[3]}));
  const std::vector<Array> got = second->get_weights();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].to_doubles(), want[i].to_doubles()) << "variable " << i;
  }
  // A normal end deletes the backup (delete_checkpoint) and its directory.
  EXPECT_FALSE(fs::exists(dir));
}

TEST(BackupAndRestore, KeepsTheBackupWhenAskedAndRejectsForeignFiles) {
  const Data d;
  const fs::path dir = fresh_dir("ingot_backup_keep_test");
  auto keep = std::make_shared<BackupAndRestore>(
      callbacks::BackupAndRestoreOptions{.backup_dir = dir.string(), .delete_checkpoint = false});
  auto model = make_model();
  model->fit(fit_options(d, {keep}));
  EXPECT_EQ(load_safetensors(keep->backup_path()).metadata.at("epoch"), "3");
  // The run is complete: a new fit resumes after epoch 3 of 4 and trains nothing.
  auto again = make_model();
  EXPECT_TRUE(again->fit(fit_options(d, {keep}))->epochs().empty());

  // Weights of another model, and a plain weights file, are errors that change nothing.
  auto other = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 3})});
  other->compile({.optimizer = std::make_shared<optimizers::Adam>(),
                  .loss = std::make_shared<losses::SparseCategoricalCrossentropy>()});
  expect_error([&] { other->fit(fit_options(d, {keep})); }, ErrorCode::kShapeMismatch, {"dense/kernel"});
  auto fresh = make_model();
  fresh->build_model({1, 4});
  fresh->save_weights(keep->backup_path());
  const std::vector<Array> before = fresh->get_weights();
  expect_error([&] { fresh->fit(fit_options(d, {keep})); }, ErrorCode::kParseError, {"not an ingot backup"});
  EXPECT_EQ(fresh->get_weights()[0].to_doubles(), before[0].to_doubles());
  // A damaged epoch entry: a clear error, nothing changed.
  save_safetensors(keep->backup_path(), {}, {{"format", "ingot-backup-1"}, {"epoch", "2x"}});
  expect_error([&] { fresh->fit(fit_options(d, {keep})); }, ErrorCode::kParseError, {"has epoch '2x'"});
  EXPECT_EQ(fresh->get_weights()[0].to_doubles(), before[0].to_doubles());
  fs::remove_all(dir);
  expect_error([] { BackupAndRestore({}); }, ErrorCode::kInvalidArgument, {"backup_dir"});
}

}  // namespace
}  // namespace ingot
