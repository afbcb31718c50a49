// Output files without partial results (include/ingot/trainer/output_file.h).
#include "ingot/trainer/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
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
  const std::string dir = target_.path.parent_path().empty() ? "." : target_.path.parent_path().string();
  const std::string message = fmt::format("{}: writing '{}' failed ({} '{}'): {}", owner_, target_.path.string(), what,
                                          path_, std::strerror(err));
  // What was there before stays: the temporary file is removed by the destructor and nothing was
  // renamed over the target.
  const char* kept = target_.in_place ? "" : "; any previous file of that name is unchanged";
  switch (err) {
    case ENOENT:
      throw Error(ErrorCode::kNotFound, message, "check that the path's directory exists");
    case ENOSPC:
    case EDQUOT:
    case EFBIG:  // past RLIMIT_FSIZE (ulimit -f) or the file system's largest file
      throw Error(ErrorCode::kResourceExhausted, message + kept,
                  fmt::format("free space (or raise the quota / file size limit) on the file system holding '{}', "
                              "or write to another directory",
                              dir));
    case EACCES:
    case EPERM:
    case EROFS:
      throw Error(ErrorCode::kInvalidArgument, message + kept,
                  fmt::format("make '{}' writable for this user (or mount it read-write), or write to another "
                              "directory",
                              dir));
    default:
      throw Error(ErrorCode::kInvalidArgument, message + kept,
                  "check that the path and its directory exist and are writable");
  }
}

namespace {

Error bad_output(const std::string& message, const std::string& hint = {}) {
  return Error(ErrorCode::kInvalidArgument, message, hint);
}

}  // namespace

void check_output_path(const std::string& path, const std::string& what) {
  if (path.empty()) throw bad_output(fmt::format("{} is an empty path", what), "name a file, or leave the option out");
  std::error_code ec;
  const OutputTarget target = resolve_output(path);
  const fs::path& p = target.path;
  if (target.in_place) {
    if (::access(p.c_str(), W_OK) != 0)
      throw bad_output(fmt::format("{} '{}' is not writable: {}", what, path, std::strerror(errno)));
    return;
  }
  if (fs::is_directory(p, ec)) throw bad_output(fmt::format("{} '{}' is a directory", what, path), "name a file");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec)) {
    // A lookup error other than "no such file" (a name too long, a loop of links, no search
    // permission) is said as the system says it.
    const std::string why = ec && ec != std::errc::no_such_file_or_directory ? "cannot be looked up: " + ec.message()
                            : fs::exists(dir, ec)                            ? "is not a directory"
                                                                             : "does not exist";
    throw bad_output(fmt::format("{} '{}': '{}' {}", what, path, dir.string(), why),
                     "create the directory first or choose another path");
  }
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const std::string name = p.filename().string();
  if (name_max > 0 && static_cast<long>(name.size()) > name_max) {
    throw bad_output(fmt::format("{} '{}': the file name has {} bytes, more than the {} the file system in '{}' allows",
                                 what, path, name.size(), name_max, dir.string()),
                     "choose a shorter file name");
  }
  std::string probe = (dir / ".ingot-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    throw bad_output(
        fmt::format("{} '{}': cannot create a file in '{}': {}", what, path, dir.string(), std::strerror(errno)),
        "make the directory writable or choose another path");
  }
  ::close(fd);
  fs::remove(probe, ec);
  if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
    throw bad_output(fmt::format("{} '{}' is not writable: {}", what, path, std::strerror(errno)));
}

void write_output_file(const std::string& path, std::string_view text, const std::string& owner) {
  OutputFile f(path, owner);
  f.write(text);
  f.commit();
}

}  // namespace ingot
