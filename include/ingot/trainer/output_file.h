// Writing an output file without ever leaving a partial one, and without replacing what the
// path names: the trainer's files (safetensors weights, CSV logs) and the `ingot` tool's outputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ingot {

/// Where writing `path` lands: symbolic links are followed (the link's final target is replaced,
/// the link stays a link), and an existing special file (a device such as /dev/null, a FIFO) is
/// written in place. `path` may not exist yet (then its parent directory must, at write time).
struct OutputTarget {
  std::filesystem::path path;  ///< the file actually written (links resolved)
  bool in_place = false;       ///< a special file: opened and written, no temporary file
};
/// Resolves `path` as described for OutputTarget (never throws for a missing file).
OutputTarget resolve_output(const std::string& path);

/// An output file in the making: regular targets get a uniquely named temporary file beside the
/// (resolved) target, flushed and renamed over it by commit(), and removed on destruction if
/// never committed, so a failure never leaves a partial file and an existing file stays as it was;
/// special files are written in place. Errors are ingot::Error naming `owner` (the API writing,
/// e.g. "save_safetensors"), the step, the path and the system's reason (strerror): kNotFound for
/// a missing directory (ENOENT); kResourceExhausted for a full disk, an exhausted quota or a file
/// past the size limit (ENOSPC, EDQUOT, EFBIG); kInvalidArgument otherwise (EACCES, EPERM,
/// EROFS: the hint says to make the directory writable).
class OutputFile {
 public:
  OutputFile(const std::string& path, std::string owner);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  /// Appends `size` bytes.
  void write(const void* data, int64_t size);
  void write(std::string_view text) { write(text.data(), static_cast<int64_t>(text.size())); }
  /// Flushes to disk and closes: the steps that fail for want of space or on a device such as
  /// /dev/full. Several outputs that belong together are finished first and committed after, so
  /// that a failing one leaves every target as it was. Idempotent.
  void finish();
  /// finish(), then renames into place (in place: nothing more).
  void commit();

 private:
  [[noreturn]] void fail(const char* what, int err) const;

  std::string owner_;
  OutputTarget target_;
  std::string path_;  // what is being written: the temporary file, or the target in place
  int fd_ = -1;
  bool committed_ = false;
};

/// Throws unless an output file can be written at `path` later, so that a run can refuse its
/// outputs before it starts rather than fail after its work. `what` names the path in messages
/// (an option such as "--save-weights"). Symbolic links are followed (their target is what gets
/// written); a writable special file (/dev/null) is fine; otherwise the target is not a
/// directory, its name fits the file system's name limit (NAME_MAX, usually 255 bytes), its
/// directory exists, a file can be made there (a probe file is created and removed) and an
/// existing file at the target is writable. Nothing is left behind. Errors:
/// ingot::Error(kInvalidArgument) naming `what`, the path and the reason (strerror where the
/// system gave one).
void check_output_path(const std::string& path, const std::string& what);

/// OutputFile in one call: `text` becomes the content of `path`.
void write_output_file(const std::string& path, std::string_view text, const std::string& owner);

}  // namespace ingot
