// keras.callbacks.BackupAndRestore: fault tolerance for fit. docs/trainer-callbacks.md.
#pragma once

#include <string>

#include "ingot/trainer/callbacks.h"
#include "ingot/trainer/safetensors.h"

namespace ingot::callbacks {

/// Options of BackupAndRestore (Keras 3's arguments, by name).
struct BackupAndRestoreOptions {
  /// Directory of the backup (created if missing; its parent must exist). Required. Use one
  /// directory per training run: a backup found there is resumed from.
  std::string backup_dir;
  /// Delete the backup when fit ends normally (on_train_end; an exception leaves it for the
  /// next run to resume from).
  bool delete_checkpoint = true;
};

/// keras.callbacks.BackupAndRestore with save_freq "epoch": at each epoch end it writes every
/// model variable (the live weights, by name), the optimizer's variables and the epoch to
/// `<backup_dir>/backup.safetensors` (a temporary file renamed over it: a crash while writing
/// keeps the previous backup). At the next fit's on_train_begin, a backup found there is loaded
/// (weights, optimizer state) and fit resumes at the epoch after the saved one
/// (TrainingControl::initial_epoch). Together with ingot's per-epoch shuffle (seed + epoch), the
/// seeded layers' state variables and the optimizer's iteration count, a run interrupted after
/// epoch k and resumed ends with exactly the weights of an uninterrupted run.
///
/// Differences from Keras: save_freq in batches and double_checkpoint are not provided (a backup
/// is written only at epoch ends); a backup of another model (other variable names or shapes) is
/// an error, not ignored.
///
/// Throws ingot::Error: kInvalidArgument for an empty backup_dir (constructor); at
/// on_train_begin, kFailedPrecondition without a model or trainer weights access, kNotFound /
/// kShapeMismatch / kDTypeMismatch / kParseError for a backup that does not fit the model (naming
/// the file), kInvalidArgument when the backup directory cannot be created; at on_epoch_end,
/// what the safetensors writer throws.
class BackupAndRestore final : public Callback {
 public:
  explicit BackupAndRestore(BackupAndRestoreOptions options);

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int64_t epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

  /// The backup file: `<backup_dir>/backup.safetensors`.
  std::string backup_path() const;

 private:
  BackupAndRestoreOptions options_;
};

namespace detail {

/// The "format" metadata of a backup file.
inline constexpr const char* kBackupFormat = "ingot-backup-1";

/// The 0-based epoch a backup read from `path` was written after: checks that `file`'s metadata
/// has "format" = kBackupFormat and a decimal, non-negative "epoch". Throws ingot::Error
/// (kParseError naming `path`) otherwise. Does not look at the tensors (load_into checks them
/// against the model). Used by BackupAndRestore::on_train_begin and the fuzz target
/// tests/fuzz/fuzz_backup.cpp.
int64_t backup_epoch(const SafetensorsFile& file, const std::string& path);

}  // namespace detail

}  // namespace ingot::callbacks
