// BackupAndRestore's file format checks (include/ingot/trainer/backup.h, detail::backup_epoch),
// apart from the callback so the fuzz build can link them without the trainer.
#include <fmt/format.h>

#include <charconv>
#include <system_error>

#include "ingot/runtime/error.h"
#include "ingot/trainer/backup.h"

namespace ingot::callbacks::detail {

int64_t backup_epoch(const SafetensorsFile& file, const std::string& path) {
  const auto format = file.metadata.find("format");
  const auto epoch = file.metadata.find("epoch");
  if (format == file.metadata.end() || format->second != kBackupFormat || epoch == file.metadata.end()) {
    throw Error(ErrorCode::kParseError, fmt::format("BackupAndRestore: '{}' is not an ingot backup", path),
                "remove it, or use another backup_dir");
  }
  const std::string& text = epoch->second;
  int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw Error(ErrorCode::kParseError,
                fmt::format("BackupAndRestore: '{}' has epoch '{}{}', not an epoch index", path, text.substr(0, 64),
                            text.size() > 64 ? "..." : ""),
                "the backup is damaged; remove it, or use another backup_dir");
  }
  return value;
}

}  // namespace ingot::callbacks::detail
