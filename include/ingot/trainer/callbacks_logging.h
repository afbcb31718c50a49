// CSVLogger (keras.callbacks.CSVLogger) and the Python number formatting it and the other
// callbacks' messages share. Guide: docs/trainer-callbacks.md, "CSVLogger".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ingot/trainer/callbacks.h"

namespace ingot::callbacks {

/// `v` as Python's repr(float) / str(float) writes it (what Keras's CSVLogger writes through the
/// csv module, and what Keras's callback messages show): the shortest digits that round-trip,
/// fixed notation for decimal exponents in [-4, 16) with at least one fractional digit ("1.0",
/// "0.0001"), otherwise "d.ddde-05" / "1e+16"; "nan", "inf", "-inf".
std::string python_float(double v);

/// `field` as Python's csv module writes it with the excel dialect and `separator` as the
/// delimiter (QUOTE_MINIMAL): quoted with '"' when it holds the separator, a quote, '\r' or
/// '\n', quotes doubled; otherwise unchanged.
std::string csv_field(const std::string& field, const std::string& separator = ",");

/// When a CSVLogger writes its file.
enum class CSVLoggerWrite {
  kEachEpoch,   ///< Keras: the header and each row are written and flushed at every epoch end
  kAtTrainEnd,  ///< all rows at on_train_end, at once (temporary file renamed over `filename`)
  kInMemory,    ///< never: the caller reads text() (e.g. `ingot train --csv` after evaluation)
};

/// Options of CSVLogger (Keras's arguments, by name, plus `write`).
struct CSVLoggerOptions {
  /// The CSV file. Must be non-empty unless write = kInMemory; its folder must exist.
  std::string filename;
  /// The field separator (Keras's `separator`, the csv delimiter): exactly one character that
  /// is not '"', '\r' or '\n'.
  std::string separator = ",";
  /// Append to an existing file (Keras: mode "a"; the header is written only when the file is
  /// missing or its first line is empty). false: the file is replaced.
  bool append = false;
  /// When the file is written (Keras streams: kEachEpoch).
  CSVLoggerWrite write = CSVLoggerWrite::kEachEpoch;
};

/// Streams the epoch logs to a CSV file (Keras's CSVLogger). At the first epoch end of a fit
/// the columns are fixed: "epoch", then the epoch's log names sorted (byte order), then, when
/// none starts with "val_", "val_" + each of them (Keras adds them so that validation_freq > 1
/// still fits the header). Each epoch end writes a row: the 0-based epoch, then each value as
/// python_float, "NA" for a name the epoch lacks. Lines end in "\r\n" (the excel dialect).
/// Names the first epoch lacked are not written (Keras's DictWriter would raise instead).
///
/// Reusable: every on_train_begin starts a new file (or appends with `append`). Write errors
/// are ingot::Error(kInvalidArgument) naming the file and the system's reason.
class CSVLogger : public Callback {
 public:
  /// Throws ingot::Error(kInvalidArgument) naming the option for an empty filename (unless
  /// kInMemory) or a separator that is not one character, or is '"', '\r' or '\n'.
  explicit CSVLogger(CSVLoggerOptions options);

  /// Starts this fit's text: reads whether an appended file needs a header, then (kEachEpoch)
  /// creates / truncates or opens the file, so an unwritable path fails before training.
  void on_train_begin(const Logs& logs) override;
  /// Adds the header (first epoch) and the row; kEachEpoch writes them to the file.
  void on_epoch_end(int64_t epoch, const Logs& logs) override;
  /// kAtTrainEnd: writes the file (the previous content first with `append`).
  void on_train_end(const Logs& logs) override;

  /// What this fit wrote (or, kInMemory, would write): the header line (unless appending to a
  /// file that has one) and one line per epoch so far.
  const std::string& text() const { return text_; }
  /// The columns after "epoch" (empty until the first epoch end of a fit; may stay empty when
  /// that epoch had no logs).
  const std::vector<std::string>& keys() const { return keys_; }
  const CSVLoggerOptions& options() const { return options_; }

 private:
  /// The columns Keras derives from the first epoch's logs (see the class comment).
  static std::vector<std::string> columns_of(const Logs& logs);

  CSVLoggerOptions options_;
  bool write_header_ = true;
  bool started_ = false;  // the columns are fixed (first epoch end of this fit)
  std::string previous_;  // kAtTrainEnd + append: the file's content at train begin
  std::vector<std::string> keys_;
  std::string text_;
};

}  // namespace ingot::callbacks
