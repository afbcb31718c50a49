// Crash safety of training (issue 24): a child process runs fit with BackupAndRestore and
// ModelCheckpoint and is killed with SIGKILL at random moments (while compiling, mid-step, while
// a backup or checkpoint is written, between epochs), then restarted, until one run finishes.
// After every kill the files on disk must load (never truncated: temporary file, fsync, rename);
// the finished run's weights, optimizer state and History must equal an uninterrupted run's
// bitwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "ingot/trainer/backup.h"
#include "ingot/trainer/callbacks_checkpoint.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/model_io.h"
#include "ingot/trainer/safetensors.h"
#include "resume_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWorkerFlag = "INGOT_CRASH_RESUME_WORKER";
constexpr const char* kDirVariable = "INGOT_CRASH_RESUME_DIR";
constexpr int64_t kEpochs = 30;

FitOptions fit_options(const testing::ResumeData& d, std::vector<std::shared_ptr<callbacks::Callback>> cbs) {
  return {.x = d.x, .y = d.y, .batch_size = 8, .epochs = kEpochs, .verbose = 0, .callbacks = std::move(cbs), .seed = 5};
}

/// "epoch loss" lines, the losses with every digit (%.17g), for a bitwise comparison.
std::string history_text(const callbacks::History& h) {
  std::string text;
  const std::vector<double>& loss = h.values("loss");
  for (size_t i = 0; i < loss.size(); ++i) {
    char line[64];
    std::snprintf(line, sizeof line, "%lld %.17g\n", static_cast<long long>(h.epochs()[i]), loss[i]);
    text += line;
  }
  return text;
}

// The child: fit for kEpochs with a backup and a per-epoch checkpoint in $INGOT_CRASH_RESUME_DIR,
// resuming from the backup if there is one; "started" is created once training runs (the parent
// times its kill from then); each batch sleeps 20 ms so that kills land inside training. A finished
// run saves the model to final.safetensors and its History to history.txt.
TEST(CrashResumeWorker, TrainsWithABackupUntilKilled) {
  if (std::getenv(kWorkerFlag) == nullptr) GTEST_SKIP() << "run by CrashResume.* in a child process";
  const fs::path dir = std::getenv(kDirVariable);
  const testing::ResumeData d;
  auto model = testing::make_model();
  auto backup = std::make_shared<callbacks::BackupAndRestore>(
      callbacks::BackupAndRestoreOptions{.backup_dir = (dir / "backup").string(), .delete_checkpoint = false});
  auto checkpoint = std::make_shared<callbacks::ModelCheckpoint>(
      callbacks::ModelCheckpointOptions{.filepath = (dir / "ckpt.safetensors").string()});
  auto pace = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_train_begin = [&](const Logs&) { std::ofstream(dir / "started") << "1"; },
      .on_train_batch_end = [](int64_t, const Logs&) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }});
  auto history = model->fit(fit_options(d, {backup, checkpoint, pace}));
  save_model(*model, (dir / "final.safetensors").string());
  std::ofstream(dir / "history.txt") << history_text(*history);
}

TEST(CrashResume, RunsKilledAtRandomMomentsEndLikeAnUninterruptedOne) {
  const fs::path dir = fs::temp_directory_path() / ("ingot_crash_resume_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The uninterrupted run (callbacks change no number: the pacing only sleeps).
  const testing::ResumeData d;
  auto reference = testing::make_model();
  auto reference_history = reference->fit(fit_options(d, {}));
  save_model(*reference, (dir / "reference.safetensors").string());

  std::mt19937 random(24);
  std::uniform_int_distribution<int> delay_ms(
      0, 300);  // at most ~3 of the 30 epochs (5 batches of 20 ms each) per killed run
  int kills = 0, runs = 0;
  std::string resumed_after = "none";  // the backup's epoch when the finishing run started
  std::vector<std::string> env =
      testing::rank_env(0, 1, 0, kWorkerFlag, {std::string(kDirVariable) + "=" + dir.string()});
  for (; runs < 30 && !fs::exists(dir / "final.safetensors"); ++runs) {
    fs::remove(dir / "started");
    const fs::path backup = dir / "backup" / "backup.safetensors";
    resumed_after = fs::exists(backup) ? load_safetensors(backup.string()).metadata.at("epoch") : "none";
    const pid_t pid = testing::spawn_self("CrashResumeWorker.TrainsWithABackupUntilKilled", env);
    ASSERT_GT(pid, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    int status = 0;
    bool exited = false;
    while (!fs::exists(dir / "started") && std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(exited || fs::exists(dir / "started")) << "run " << runs << " did not start training in 120 s";
    // The first 8 runs are killed at a random moment of their training; later ones run to the end.
    if (!exited && kills < 8) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(random)));
      if (::waitpid(pid, &status, WNOHANG) != pid) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ++kills;
      }
      exited = true;
    }
    if (!exited) ASSERT_EQ(testing::wait_child(pid, deadline), 0) << "run " << runs;
    // Whatever the moment of the kill, each file on disk is whole: the reader checks the header,
    // every offset and the file size, so a truncated file would be a ParseError here.
    if (fs::exists(backup)) {
      const SafetensorsFile file = load_safetensors(backup.string());
      EXPECT_GE(callbacks::detail::backup_epoch(file, backup.string()), 0);
    }
    if (fs::exists(dir / "ckpt.safetensors")) EXPECT_NO_THROW(load_safetensors((dir / "ckpt.safetensors").string()));
  }
  ASSERT_TRUE(fs::exists(dir / "final.safetensors")) << runs << " runs, " << kills << " kills";
  EXPECT_GE(kills, 4) << "most runs should have been killed part way";
  std::cout << "crash-resume: " << runs << " runs, " << kills << " killed; the finishing run resumed after epoch "
            << resumed_after << "\n";

  testing::expect_same_tensors(dir / "final.safetensors", dir / "reference.safetensors");
  testing::expect_same_tensors(dir / "ckpt.safetensors", dir / "reference.safetensors");  // the last epoch's checkpoint
  // The finished run's History holds the epochs it trained (after its backup's), each loss the
  // uninterrupted run's, bit for bit.
  const std::string tail = testing::read_file(dir / "history.txt");
  if (tail.empty())
    EXPECT_EQ(resumed_after, std::to_string(kEpochs - 1)) << "only a run resumed after the last epoch trains nothing";
  const std::string full = history_text(*reference_history);
  ASSERT_GE(full.size(), tail.size());
  EXPECT_EQ(full.substr(full.size() - tail.size()), tail);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ingot
