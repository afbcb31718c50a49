// keras.callbacks.BackupAndRestore (include/ingot/trainer/backup.h).
#include "ingot/trainer/backup.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "ingot/runtime/error.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/model_io.h"
#include "ingot/trainer/safetensors.h"

namespace ingot::callbacks {

namespace fs = std::filesystem;

BackupAndRestore::BackupAndRestore(BackupAndRestoreOptions options) : options_(std::move(options)) {
  if (options_.backup_dir.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "BackupAndRestore: backup_dir is empty",
                "pass a directory for this training run's backup, e.g. /tmp/run1_backup");
  }
}

std::string BackupAndRestore::backup_path() const {
  return (fs::path(options_.backup_dir) / "backup.safetensors").string();
}

void BackupAndRestore::on_train_begin(const Logs&) {
  if (model() == nullptr || weights_access() == nullptr) {
    throw Error(ErrorCode::kFailedPrecondition, "BackupAndRestore needs the model and the trainer's weights",
                "pass it to Model::fit in FitOptions::callbacks");
  }
  std::error_code ec;
  fs::create_directories(options_.backup_dir, ec);
  if (ec) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("BackupAndRestore: cannot create backup_dir '{}': {}", options_.backup_dir, ec.message()),
                "its parent directory must exist and be writable");
  }
  if (!fs::exists(backup_path())) return;  // a fresh run
  const SafetensorsFile file = load_safetensors(backup_path());
  const int64_t saved_epoch = detail::backup_epoch(file, backup_path());  // before anything changes
  model_io::restore_training_state(file, *model(), *weights_access(), /*with_optimizer=*/true);
  control().initial_epoch = saved_epoch + 1;
}

void BackupAndRestore::on_epoch_end(int64_t epoch, const Logs&) {
  const auto tensors = model_io::training_state_tensors(*model(), *weights_access(), /*with_optimizer=*/true);
  model()->write_once(
      [&] {
        save_safetensors(
            backup_path(), tensors,
            {{"format", detail::kBackupFormat}, {"epoch", std::to_string(epoch)}, {"model", model()->name()}});
      },
      "BackupAndRestore('" + backup_path() + "')");
}

void BackupAndRestore::on_train_end(const Logs&) {
  if (!options_.delete_checkpoint) return;
  model()->write_once(
      [&] {
        std::error_code ec;
        fs::remove(backup_path(), ec);
        fs::remove(options_.backup_dir, ec);  // only if now empty, as Keras removes its backup directory
      },
      "BackupAndRestore: removing '" + backup_path() + "'");
}

}  // namespace ingot::callbacks
