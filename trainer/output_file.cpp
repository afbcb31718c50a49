// Output files without partial results (include/ingot/trainer/output_file.h).
#include "ingot/trainer/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include "ingot/runtime/error.h"

namespace ingot {

namespace fs = std::filesystem;

OutputTarget resolve_output(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) break;
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  const fs::file_status st = fs::status(p, ec);
  const bool special = fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
  return {p, special};
}

OutputFile::OutputFile(const std::string& path, std::string owner)
    : owner_(std::move(owner)), target_(resolve_output(path)) {
  if (target_.in_place) {
    path_ = target_.path.string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("opening", errno);
    return;
  }
  std::random_device rd;
  // A random name, created exclusively; EEXIST (a name in use) tries another one.
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    const uint64_t tag = (uint64_t{rd()} << 32) ^ rd();
    // ".<name>.tmp-<16 hex>", the name cut to 200 bytes so the temporary name stays within
    // NAME_MAX (255) for any target name that fits.
    path_ = (target_.path.parent_path() /
             fmt::format(".{}.tmp-{:016x}", target_.path.filename().string().substr(0, 200), tag))
                .string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) fail("creating", errno);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !target_.in_place) ::unlink(path_.c_str());
}

void OutputFile::write(const void* data, int64_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, static_cast<size_t>(std::min<int64_t>(size, int64_t{1} << 30)));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("writing", errno);
    }
    p += n;
    size -= n;
  }
}

void OutputFile::finish() {
  if (fd_ < 0) return;
  if (!target_.in_place && ::fsync(fd_) != 0) fail("flushing", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("closing", errno);
}

void OutputFile::commit() {
  finish();
  if (!target_.in_place && ::rename(path_.c_str(), target_.path.c_str()) != 0) fail("renaming into place", errno);
  committed_ = true;
}

void OutputFile::fail(const char* what, int err) const {
  throw Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
              fmt::format("{}: writing '{}' failed ({} '{}'): {}", owner_, target_.path.string(), what, path_,
                          std::strerror(err)),
              "check that the path and its directory exist and are writable");
}

void write_output_file(const std::string& path, std::string_view text, const std::string& owner) {
  OutputFile f(path, owner);
  f.write(text);
  f.commit();
}

}  // namespace ingot
