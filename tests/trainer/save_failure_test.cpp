// Saves that fail while training (issue 24): BackupAndRestore or ModelCheckpoint meets a full disk
// (a size-limited tmpfs), a file size limit (RLIMIT_FSIZE, the kernel failing the write part way)
// or a directory it may not write. Each must be a clear ingot::Error out of fit naming the file
// and the system's reason; the previous backup and checkpoint stay byte for byte, no temporary
// file is left, the model's weights and optimizer state are those of the last finished epoch, and
// once the fault is gone a new run resumes from the old backup and ends bitwise like an
// uninterrupted run. Each case runs in a child process (its own mount namespace, limits and
// effective user).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "child_process.h"
#include "ingot/runtime/error.h"
#include "ingot/trainer/backup.h"
#include "ingot/trainer/callbacks_checkpoint.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/model_io.h"
#include "ingot/trainer/safetensors.h"
#include "resume_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWorkerFlag = "INGOT_SAVE_FAILURE_WORKER";
constexpr const char* kDirVariable = "INGOT_SAVE_FAILURE_DIR";
constexpr const char* kFaultVariable = "INGOT_SAVE_FAILURE_FAULT";  // full | fsize | readonly
constexpr const char* kFirstVariable = "INGOT_SAVE_FAILURE_FIRST";  // backup | checkpoint

/// 64 hidden units: the backup (weights + Adam's moments) is ~6 KB, past the 1 KiB file size
/// limit of the fsize case.
std::shared_ptr<Sequential> make_model() { return testing::make_model(nullptr, nullptr, 64); }

FitOptions fit_options(const testing::ResumeData& d, int64_t epochs,
                       std::vector<std::shared_ptr<callbacks::Callback>> cbs = {}) {
  return {.x = d.x, .y = d.y, .batch_size = 8, .epochs = epochs, .verbose = 0, .callbacks = std::move(cbs), .seed = 5};
}

/// The fault a worker injects into `disk` (the directory holding the backup and checkpoint) and
/// removes again. set_up() returns a reason when this machine cannot have it (then the case skips).
class Fault {
 public:
  Fault(std::string kind, fs::path disk) : kind_(std::move(kind)), disk_(std::move(disk)) {}

  /// Before anything is written: the full case mounts a 256 KiB tmpfs on `disk` in a private
  /// mount namespace (needs CAP_SYS_ADMIN; gone when the process exits).
  std::string set_up() {
    fs::create_directories(disk_);
    if (kind_ != "full") return "";
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", disk_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0755") != 0) {
      return "cannot mount a size-limited tmpfs in a private mount namespace (needs CAP_SYS_ADMIN); the "
             "fsize case covers a write failing part way";
    }
    return "";
  }

  /// Makes the next save fail: fills the tmpfs to ENOSPC, sets RLIMIT_FSIZE to 1 KiB (EFBIG; SIGXFSZ
  /// ignored, as a shell's `ulimit -f` user sees the error), or takes write permission away
  /// (root: seteuid to nobody; another user: chmod 0555).
  void inject() {
    if (kind_ == "full") {
      const int fd = ::open((disk_ / "filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ASSERT_GE(fd, 0);
      const std::string block(4096, 'f');
      while (::write(fd, block.data(), block.size()) > 0) {
      }
      EXPECT_EQ(errno, ENOSPC);
      ::close(fd);
    } else if (kind_ == "fsize") {
      ::signal(SIGXFSZ, SIG_IGN);
      ::getrlimit(RLIMIT_FSIZE, &saved_limit_);
      const struct rlimit limit = {1024, saved_limit_.rlim_max};
      ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
    } else if (::geteuid() == 0) {
      ASSERT_EQ(::seteuid(65534), 0);
      was_root_ = true;
    } else {
      ASSERT_EQ(::chmod(disk_.c_str(), 0555), 0);
    }
  }

  void remove() {
    if (kind_ == "full") {
      fs::remove(disk_ / "filler");
    } else if (kind_ == "fsize") {
      ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved_limit_), 0);
    } else if (was_root_) {
      ASSERT_EQ(::seteuid(0), 0);
    } else {
      ASSERT_EQ(::chmod(disk_.c_str(), 0755), 0);
    }
  }

  /// The error fit must throw, and the system's words in its message.
  ErrorCode code() const { return kind_ == "readonly" ? ErrorCode::kInvalidArgument : ErrorCode::kResourceExhausted; }
  std::string reason() const {
    return kind_ == "full" ? "No space left on device" : kind_ == "fsize" ? "File too large" : "Permission denied";
  }

 private:
  std::string kind_;
  fs::path disk_;
  struct rlimit saved_limit_ = {};
  bool was_root_ = false;
};

// The child: the references (3 and 4 uninterrupted epochs), then a run of 2 epochs that leaves a
// backup and a checkpoint, then the fault and a resumed run of 4 epochs whose first save (of epoch
// 2) fails, then the fault removed and a third run that resumes and finishes.
TEST(SaveFailureWorker, FailsOneSaveAndResumes) {
  if (std::getenv(kWorkerFlag) == nullptr) GTEST_SKIP() << "run by SaveFailure.* in a child process";
  const fs::path dir = std::getenv(kDirVariable), disk = dir / "disk";
  const std::string first = std::getenv(kFirstVariable);
  Fault fault(std::getenv(kFaultVariable), disk);
  if (const std::string why = fault.set_up(); !why.empty()) {
    std::ofstream(dir / "skip") << why;
    return;
  }
  const testing::ResumeData d;
  for (int64_t epochs : {3, 4}) {
    auto reference = make_model();
    reference->fit(fit_options(d, epochs));
    save_model(*reference, (dir / ("ref" + std::to_string(epochs) + ".safetensors")).string());
  }
  const fs::path backup_file = disk / "backup" / "backup.safetensors", checkpoint_file = disk / "ckpt.safetensors";
  auto callbacks = [&] {
    std::shared_ptr<callbacks::Callback> backup = std::make_shared<callbacks::BackupAndRestore>(
        callbacks::BackupAndRestoreOptions{.backup_dir = (disk / "backup").string(), .delete_checkpoint = false});
    std::shared_ptr<callbacks::Callback> checkpoint = std::make_shared<callbacks::ModelCheckpoint>(
        callbacks::ModelCheckpointOptions{.filepath = checkpoint_file.string()});
    return first == "backup" ? std::vector{backup, checkpoint} : std::vector{checkpoint, backup};
  };
  make_model()->fit(fit_options(d, 2, callbacks()));
  const std::string old_backup = testing::read_file(backup_file), old_checkpoint = testing::read_file(checkpoint_file);
  ASSERT_FALSE(old_backup.empty());
  ASSERT_FALSE(old_checkpoint.empty());

  fault.inject();
  auto failed = make_model();
  try {
    failed->fit(fit_options(d, 4, callbacks()));
    fault.remove();
    FAIL() << "fit saved through the fault";
  } catch (const Error& e) {
    fault.remove();
    EXPECT_EQ(e.code(), fault.code()) << e.what();
    const std::string failed_file = (first == "backup" ? backup_file : checkpoint_file).string();
    EXPECT_NE(std::string(e.what()).find("writing '" + failed_file + "' failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fault.reason()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("previous file of that name is unchanged"), std::string::npos) << e.what();
  }
  // The old files byte for byte, and no temporary file beside them.
  EXPECT_EQ(testing::read_file(backup_file), old_backup);
  EXPECT_EQ(testing::read_file(checkpoint_file), old_checkpoint);
  for (const fs::path& sub : {disk, disk / "backup"}) {
    for (const auto& entry : fs::directory_iterator(sub)) {
      const std::string name = entry.path().filename().string();
      EXPECT_TRUE(name == "backup" || name == "backup.safetensors" || name == "ckpt.safetensors") << entry.path();
    }
  }
  // The model holds the state of its last finished epoch (2: resumed after 1), as an
  // uninterrupted 3-epoch run: weights, Adam's moments and iterations.
  save_model(*failed, (dir / "after_failure.safetensors").string());
  testing::expect_same_tensors(dir / "after_failure.safetensors", dir / "ref3.safetensors");

  // With the fault gone, a new run resumes from the old backup and ends as an uninterrupted one.
  auto resumed = make_model();
  resumed->fit(fit_options(d, 4, callbacks()));
  save_model(*resumed, (dir / "final.safetensors").string());
  testing::expect_same_tensors(dir / "final.safetensors", dir / "ref4.safetensors");
  testing::expect_same_tensors(checkpoint_file, dir / "ref4.safetensors");
  EXPECT_EQ(load_safetensors(backup_file.string()).metadata.at("epoch"), "3");
}

/// Runs the worker with `fault` and `first` (the callback that saves first) and expects its checks
/// to pass; skips with the worker's reason when the fault cannot be had here.
void run_case(const std::string& fault, const std::string& first) {
  const fs::path dir =
      fs::temp_directory_path() / ("ingot_save_failure_" + std::to_string(::getpid()) + "_" + fault + "_" + first);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> env =
      testing::rank_env(0, 1, 0, kWorkerFlag,
                        {std::string(kDirVariable) + "=" + dir.string(), std::string(kFaultVariable) + "=" + fault,
                         std::string(kFirstVariable) + "=" + first});
  const pid_t pid = testing::spawn_self("SaveFailureWorker.FailsOneSaveAndResumes", env);
  ASSERT_GT(pid, 0);
  const int rc = testing::wait_child(pid, std::chrono::steady_clock::now() + std::chrono::seconds(300));
  const std::string skip = testing::read_file(dir / "skip");
  ::chmod((dir / "disk").c_str(), 0755);
  fs::remove_all(dir);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(rc, 0) << "the worker's checks failed (its output above)";
}

TEST(SaveFailure, ADiskFullDuringABackupIsAnErrorThatKeepsTheOldFilesAndTheState) { run_case("full", "backup"); }
TEST(SaveFailure, ADiskFullDuringACheckpointIsAnErrorThatKeepsTheOldFilesAndTheState) {
  run_case("full", "checkpoint");
}
TEST(SaveFailure, AFileSizeLimitDuringABackupIsAnErrorThatKeepsTheOldFilesAndTheState) { run_case("fsize", "backup"); }
TEST(SaveFailure, AFileSizeLimitDuringACheckpointIsAnErrorThatKeepsTheOldFilesAndTheState) {
  run_case("fsize", "checkpoint");
}
TEST(SaveFailure, NoWritePermissionForABackupIsAnErrorThatKeepsTheOldFilesAndTheState) {
  run_case("readonly", "backup");
}
TEST(SaveFailure, NoWritePermissionForACheckpointIsAnErrorThatKeepsTheOldFilesAndTheState) {
  run_case("readonly", "checkpoint");
}

}  // namespace
}  // namespace ingot
