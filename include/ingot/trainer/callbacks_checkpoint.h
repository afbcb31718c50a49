// ModelCheckpoint (keras.callbacks.ModelCheckpoint: whole-model files written by save_model, or
// weights-only files written by Model::save_weights, from the live state) and its filepath
// formatter. Guide: docs/trainer-callbacks.md, "ModelCheckpoint".
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ingot/trainer/callbacks.h"

namespace ingot::callbacks {

/// A checkpoint path template: text with Python str.format fields (what Keras's ModelCheckpoint
/// fills in with filepath.format(epoch=..., batch=..., **logs)).
///
/// Supported: "{name}" and "{name:spec}" with spec = [0][width][.precision][type], type one of
/// d (integers only), f, e, E, g, G, or none; "{{" and "}}" for literal braces. "epoch" and
/// "batch" are integers (1-based, as Keras passes epoch + 1 and batch + 1); every other name is
/// a log value (a double): "{val_loss:.4f}" -> "0.1235", "{loss}" -> Python's str(float)
/// ("0.5"). A float with no type but a precision is refused (Python's '.3' general format is not
/// supported).
class PathTemplate {
 public:
  /// Parses `pattern`. Throws ingot::Error(kInvalidArgument) naming the pattern and the position
  /// for an unmatched brace, an empty field name, a conversion ("!r"), a bad spec, or a spec
  /// type that does not fit the field (d for a log value).
  explicit PathTemplate(std::string pattern);

  /// The path for `epoch` (1-based), `batch` (1-based; nullopt for an epoch-end save) and
  /// `logs`. Throws ingot::Error(kInvalidArgument) naming the field and the available names
  /// when a field is neither epoch, batch (when given) nor a log name.
  std::string format(int64_t epoch, std::optional<int64_t> batch, const Logs& logs) const;

  /// Whether the template has a "{batch...}" field.
  bool uses_batch() const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Piece {
    std::string text;  // literal text, or the field name when is_field
    std::string spec;  // the format spec of a field ("" = default)
    bool is_field = false;
  };

  std::string pattern_;
  std::vector<Piece> pieces_;
};

/// Options of ModelCheckpoint (Keras's arguments, by name).
struct ModelCheckpointOptions {
  /// Where to save: a PathTemplate, e.g. "ckpt/weights-{epoch:02d}-{val_loss:.4f}.safetensors".
  /// Missing folders are created. Required.
  std::string filepath;
  /// The log to compare with save_best_only.
  std::string monitor = "val_loss";
  /// 1: print Keras's messages ("\nEpoch 3: saving model to PATH").
  int verbose = 0;
  /// Save only when `monitor` improves on the best value seen (strictly: no min_delta).
  bool save_best_only = false;
  /// false (Keras's default): whole-model files through save_model (model_io.h: weights,
  /// optimizer state, architecture; read back with load_model to resume training, or with
  /// Model::load_weights for the weights alone). true: weights only, through Model::save_weights.
  bool save_weights_only = false;
  /// The direction of `monitor` (as EarlyStoppingOptions::mode). Only used with save_best_only.
  MonitorMode mode = MonitorMode::kAuto;
  /// nullopt: save at every epoch end (Keras's "epoch"); n >= 1: every n train batches (then
  /// the logs are the running batch logs, and "{batch}" may be used in filepath).
  std::optional<int64_t> save_freq;
  /// With save_best_only: the value to beat before anything is saved (Keras's
  /// initial_value_threshold); finite when set.
  std::optional<double> initial_value_threshold;
  /// Where verbose messages go; nullptr means std::cout.
  std::ostream* stream = nullptr;
  /// Where the "monitor not available" warning goes; nullptr means std::cerr.
  std::ostream* warnings = nullptr;
};

/// Saves the model during training (Keras's ModelCheckpoint): by default the whole model through
/// save_model (weights, optimizer state, architecture; load_model resumes from it), with
/// save_weights_only the weights through Model::save_weights. Both read the live training state:
/// the file holds the state after the last finished step. Model::load_weights reads the weights
/// of either kind of file.
///
/// At each epoch end (or every save_freq batches) the path is formatted first (an unknown field
/// is an error even when nothing would be saved, as in Keras); then, with save_best_only, the
/// monitored value must exist (else a warning "Can save best model only with val_loss
/// available, skipping.") and improve on `best`, which it then becomes; otherwise every call
/// saves. `best` starts at initial_value_threshold (or +-inf) and is kept across fits, as
/// Keras keeps it, so a reused checkpoint only overwrites its best file with a better one.
class ModelCheckpoint : public Callback {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option for an empty or malformed
  /// filepath (see PathTemplate), "{batch}" in filepath without an integer save_freq, an empty
  /// monitor, save_freq < 1, verbose < 0, a non-finite initial_value_threshold, or (with
  /// save_best_only) a kAuto mode whose direction the monitor's name does not tell.
  explicit ModelCheckpoint(ModelCheckpointOptions options);

  /// Restarts the batch count. No model (model() null): ingot::Error(kFailedPrecondition).
  void on_train_begin(const Logs& logs) override;
  void on_epoch_begin(int64_t epoch, const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_epoch_end(int64_t epoch, const Logs& logs) override;

  /// The best monitored value saved so far (initial_value_threshold or +-inf before any).
  double best() const { return best_; }
  /// The paths written, in order (over the callback's life).
  const std::vector<std::string>& saved() const { return saved_; }
  const ModelCheckpointOptions& options() const { return options_; }

 private:
  bool should_save_on_batch(int64_t batch);
  bool should_save(int64_t epoch, const Logs& logs, const std::string& path);
  void save(int64_t epoch, std::optional<int64_t> batch, const Logs& logs);

  ModelCheckpointOptions options_;
  PathTemplate template_;
  MonitorComparison monitor_;
  double best_;
  int64_t current_epoch_ = 0;
  int64_t batches_since_save_ = 0;
  int64_t last_batch_seen_ = 0;
  std::vector<std::string> saved_;
};

}  // namespace ingot::callbacks
