// The persistent on-disk compilation cache (include/ingot/codegen/compile_cache.h): plain POSIX
// file I/O, zlib's crc32 and std::filesystem (error_code overloads only) for creating the
// directory.
#include "ingot/codegen/compile_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ingot/runtime/error.h"

namespace ingot::codegen {
namespace {

namespace fs = std::filesystem;

// strerror() is not thread-safe; strerror_r comes in a GNU (char*) and an XSI (int) flavour.
[[maybe_unused]] std::string strerror_result(char* result, const char* /*buf*/) { return result; }
[[maybe_unused]] std::string strerror_result(int result, const char* buf) {
  return result == 0 ? std::string(buf) : std::string("unknown error");
}
std::string errno_text(int err) {
  char buf[256] = {0};
  return strerror_result(strerror_r(err, buf, sizeof buf), buf);
}

/// The one process-wide state: which (directory, warning kind) pairs have been warned about.
/// Never destroyed, so threads still running at exit can use it.
struct WarnedSet {
  std::mutex mu;
  std::set<std::string> seen;
};
WarnedSet& warned_set() {
  static WarnedSet* set = new WarnedSet;
  return *set;
}

/// Closes a file descriptor at scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

/// Closes a DIR* at scope exit.
struct DirCloser {
  DIR* dir;
  ~DirCloser() {
    if (dir != nullptr) ::closedir(dir);
  }
};

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

/// zlib's crc32 over any length (its length argument is a uInt).
uint32_t crc32_of(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  size_t left = data.size();
  while (left > 0) {
    const uInt n = static_cast<uInt>(std::min<size_t>(left, size_t{1} << 30));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

/// Writes all of `data`; false with errno set on failure.
bool write_full(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {  // not expected for regular files; report it as the disk being full
      errno = ENOSPC;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

/// Reads exactly `size` bytes. Returns 1 on success, 0 on end of file first, -1 with errno set.
int read_full(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) return 0;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 1;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool is_entry_name(std::string_view name) {
  return !name.empty() && name[0] != '.' && ends_with(name, kCompileCacheEntrySuffix);
}
bool is_temp_name(std::string_view name) {
  return name.substr(0, kCompileCacheTempPrefix.size()) == kCompileCacheTempPrefix;
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

/// One file of the cache directory as listed.
struct Listed {
  std::string name;
  int64_t size = 0;
  int64_t mtime = 0;   // ns since the epoch
  bool entry = false;  // else a temporary
};

/// Lists the regular files of `path` that are entries or temporaries (vanished files skipped).
/// Calls `fn(dirfd, listed)` for each. Returns false if the directory cannot be opened.
bool list_dir(const std::string& path, const std::function<void(int, const Listed&)>& fn) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return false;
  DirCloser closer{d};
  const int dfd = ::dirfd(d);
  while (true) {
    errno = 0;
    struct dirent* e = ::readdir(d);
    if (e == nullptr) break;  // end, or a read error: treat what was listed as all
    const std::string_view name = e->d_name;
    const bool entry = is_entry_name(name);
    if (!entry && !is_temp_name(name)) continue;
    struct stat st;
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
    if (!S_ISREG(st.st_mode)) continue;
    fn(dfd, Listed{std::string(name), static_cast<int64_t>(st.st_size), mtime_ns(st), entry});
  }
  return true;
}

std::string thread_tag() {
  return fmt::format("{:x}", std::hash<std::thread::id>{}(std::this_thread::get_id()) & 0xffffffffffffULL);
}

std::string printable_key(const std::string& key) {
  std::string out;
  for (char c : key.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  if (key.size() > 200) out += "...";
  return out;
}

void check_key(const std::string& key) {
  if (!is_valid_compile_cache_key(key)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("compile cache key '{}' ({} characters) is not {}..{} lowercase hex digits",
                            printable_key(key), key.size(), kCompileCacheMinKeyLength, kCompileCacheMaxKeyLength),
                "pass a hash of the cached thing as lowercase hex, e.g. 64 digits of BLAKE3 or SHA-256");
  }
}

}  // namespace

std::string password_database_home() {
  // As Python's os.path.expanduser and glib's g_get_home_dir without HOME: the user's entry in
  // the password database (getpwuid_r, thread-safe).
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return "";
  if (found->pw_dir == nullptr || found->pw_dir[0] != '/') return "";
  return found->pw_dir;
}

std::string default_compile_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/ingot";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache/ingot";
  return password_database_home().empty() ? "" : password_database_home() + "/.cache/ingot";
}

bool is_valid_compile_cache_key(std::string_view key) {
  if (key.size() < kCompileCacheMinKeyLength || key.size() > kCompileCacheMaxKeyLength) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

CompileCache::CompileCache(std::string dir, int64_t max_bytes, std::ostream* warnings)
    : dir_(std::move(dir)), max_bytes_(max_bytes), warnings_(warnings != nullptr ? warnings : &std::cerr) {
  if (max_bytes < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("compile cache max_bytes is {}, must be >= 0", max_bytes),
                "pass the size cap of the cache directory in bytes");
  }
  if (dir_.empty()) return;

  std::error_code ec;
  fs::path p = fs::absolute(fs::path(dir_), ec);
  if (ec) p = fs::path(dir_);
  p = p.lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "/a/b/" -> "/a/b"
  path_ = p.string();

  const auto unusable = [&](const std::string& what) {
    warn_once("open", fmt::format("ingot: warning: compile cache '{}' {}; compiling without caching", dir_, what));
  };

  struct stat st;
  if (::stat(path_.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      unusable("is not a directory");
      return;
    }
  } else {
    fs::create_directories(p, ec);
    if (ec || ::stat(path_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      const int err = ec ? ec.value() : errno;
      unusable(fmt::format("cannot be created ({})", errno_text(err != 0 ? err : ENOTDIR)));
      return;
    }
  }

  DIR* d = ::opendir(path_.c_str());
  if (d == nullptr) {
    unusable(fmt::format("is not readable ({})", errno_text(errno)));
    return;
  }
  ::closedir(d);
  enabled_ = true;

  // A probe write decides writability: access(W_OK) says yes to root on a read-only mount or in
  // /proc, and yes to anyone on a full disk's directory.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::string probe = fmt::format("{}/{}probe-{}-{}-{}", path_, kCompileCacheTempPrefix, ::getpid(),
                                          thread_tag(), temp_counter_.fetch_add(1));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      writable_ = true;
      return;
    }
    if (errno != EEXIST) {
      warn_once("open", fmt::format("ingot: warning: compile cache '{}' is not writable ({}); using its "
                                    "entries, storing no new ones",
                                    dir_, errno_text(errno)));
      return;
    }
  }
  warn_once("open", fmt::format("ingot: warning: compile cache '{}' is not writable (cannot create a unique "
                                "temporary file); using its entries, storing no new ones",
                                dir_));
}

CompileCache::~CompileCache() = default;

void CompileCache::warn(const std::string& line) const {
  std::lock_guard<std::mutex> lock(warn_mu_);
  *warnings_ << line << '\n';
  warnings_->flush();
}

void CompileCache::warn_once(const std::string& kind, const std::string& line) const {
  {
    WarnedSet& set = warned_set();
    std::lock_guard<std::mutex> lock(set.mu);
    if (!set.seen.insert(path_ + '\0' + kind).second) return;
  }
  warn(line);
}

std::string CompileCache::entry_path(const std::string& key) const {
  check_key(key);
  return fmt::format("{}/{}{}", path_, key, kCompileCacheEntrySuffix);
}

std::optional<std::string> CompileCache::load(const std::string& key) {
  const std::string path = entry_path(key);
  if (!enabled_) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  // O_NONBLOCK: a FIFO put where an entry belongs must not block the open (it is then refused
  // as not a regular file below); reads of a regular file ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }

  std::string reason;
  std::optional<uint32_t> other_format;  // the entry's format version when it is not ours
  std::string payload;
  const int64_t file_size = static_cast<int64_t>(st.st_size);
  unsigned char header[kCompileCacheHeaderBytes];
  if (file_size < kCompileCacheHeaderBytes) {
    reason = fmt::format("{} bytes, shorter than the {}-byte header", file_size, kCompileCacheHeaderBytes);
  } else if (const int r = read_full(fd, reinterpret_cast<char*>(header), sizeof header); r <= 0) {
    reason = r < 0 ? fmt::format("read failed: {}", errno_text(errno)) : std::string("file shrank while reading");
  } else if (std::memcmp(header, kCompileCacheMagic, sizeof kCompileCacheMagic) != 0) {
    reason = "bad magic";
  } else if (const uint32_t version = get_u32(header + 8); version != kCompileCacheFormatVersion) {
    reason = fmt::format("format version {}, expected {}", version, kCompileCacheFormatVersion);
    other_format = version;
  } else if (const uint64_t size = get_u64(header + 16);
             size != static_cast<uint64_t>(file_size - kCompileCacheHeaderBytes)) {
    reason = fmt::format("header says {} payload bytes, the file holds {}", size, file_size - kCompileCacheHeaderBytes);
  } else {
    payload.resize(static_cast<size_t>(size));
    if (const int r2 = read_full(fd, payload.data(), payload.size()); r2 <= 0) {
      reason = r2 < 0 ? fmt::format("read failed: {}", errno_text(errno)) : std::string("file shrank while reading");
    } else if (const uint32_t crc = crc32_of(payload), want = get_u32(header + 12); crc != want) {
      reason = fmt::format("CRC32 of the payload is {:08x}, the header says {:08x}", crc, want);
    }
  }

  if (!reason.empty()) {
    // Delete it unless a writer has meanwhile renamed a fresh entry over it. One that stays (a
    // read-only directory, another user's file in a sticky one) is warned about once per process,
    // not at every load of its key.
    struct stat now;
    bool gone = ::lstat(path.c_str(), &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino;
    if (!gone && writable_) gone = ::unlink(path.c_str()) == 0;
    misses_.fetch_add(1, std::memory_order_relaxed);
    std::string line;
    if (other_format) {
      line = fmt::format(
          "ingot: warning: compile cache entry '{}' is in cache format {}, this build reads {}; "
          "recompiling",
          path, *other_format, kCompileCacheFormatVersion);
    } else {
      corrupt_.fetch_add(1, std::memory_order_relaxed);
      line = fmt::format("ingot: warning: compile cache entry '{}' is corrupt ({}); recompiling", path, reason);
    }
    if (gone) {
      warn(line);
    } else {
      warn_once("bad entry " + path, line);
    }
    return std::nullopt;
  }
  ::futimens(fd, nullptr);  // the LRU clock; a read-only cache keeps the old time
  hits_.fetch_add(1, std::memory_order_relaxed);
  return payload;
}

bool CompileCache::fail_store(const std::string& key, const char* what, int err) {
  warn_once(fmt::format("store-{}", err),
            fmt::format("ingot: warning: compile cache '{}': cannot {} for entry {} ({}); compiling without caching it",
                        dir_, what, key, errno_text(err)));
  return false;
}

bool CompileCache::store(const std::string& key, std::string_view payload) {
  const std::string path = entry_path(key);
  if (!writable_) return false;
  // A file size limit (ulimit -f) below the entry's size would make the write raise SIGXFSZ,
  // which kills the process by default: such an entry is not written.
  struct rlimit limit;
  const auto entry_bytes = static_cast<rlim_t>(kCompileCacheHeaderBytes) + static_cast<rlim_t>(payload.size());
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && entry_bytes > limit.rlim_cur) {
    return fail_store(key, "write an entry larger than the file size limit (ulimit -f)", EFBIG);
  }

  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 16; ++attempt) {
    temp = fmt::format("{}/{}{}-{}-{}-{}", path_, kCompileCacheTempPrefix, ::getpid(), thread_tag(),
                       temp_counter_.fetch_add(1), key.substr(0, 16));
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) return fail_store(key, "create a temporary file", errno);

  unsigned char header[kCompileCacheHeaderBytes];
  std::memcpy(header, kCompileCacheMagic, sizeof kCompileCacheMagic);
  put_u32(header + 8, kCompileCacheFormatVersion);
  put_u32(header + 12, crc32_of(payload));
  put_u64(header + 16, payload.size());
  bool ok = write_full(fd, reinterpret_cast<const char*>(header), sizeof header) &&
            write_full(fd, payload.data(), payload.size());
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {  // delayed write errors (NFS, quotas) show here
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    return fail_store(key, "write", err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(temp.c_str());
    return fail_store(key, "rename the temporary file", err);
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t CompileCache::evict() {
  if (!writable_) return 0;
  std::lock_guard<std::mutex> lock(evict_mu_);
  const int64_t now = static_cast<int64_t>(std::time(nullptr)) * 1000000000;
  const int64_t stale_before = now - kCompileCacheStaleTempSeconds * 1000000000;
  std::vector<Listed> entries;
  int64_t total = 0;
  list_dir(path_, [&](int dfd, const Listed& f) {
    if (f.entry) {
      entries.push_back(f);
      total += f.size;
    } else if (f.mtime < stale_before) {
      ::unlinkat(dfd, f.name.c_str(), 0);
    }
  });
  if (total <= max_bytes_) return 0;

  const int64_t target = max_bytes_ / 10 * 9 + max_bytes_ % 10 * 9 / 10;  // floor(0.9 * max), no overflow
  std::sort(entries.begin(), entries.end(),
            [](const Listed& a, const Listed& b) { return a.mtime != b.mtime ? a.mtime < b.mtime : a.name < b.name; });
  int64_t freed = 0;
  for (const Listed& e : entries) {
    if (total <= target) break;
    const std::string file = fmt::format("{}/{}", path_, e.name);
    struct stat st;
    if (::lstat(file.c_str(), &st) != 0) {  // evicted by someone else
      total -= e.size;
      continue;
    }
    if (mtime_ns(st) != e.mtime) continue;  // used or replaced since listed: keep it
    if (::unlink(file.c_str()) == 0) {
      freed += e.size;
      total -= e.size;
      evicted_.fetch_add(1, std::memory_order_relaxed);
    } else if (errno == ENOENT) {
      total -= e.size;
    }
  }
  return freed;
}

void CompileCache::clear() {
  if (!writable_) return;
  std::vector<std::string> names;
  list_dir(path_, [&](int, const Listed& f) {
    if (f.entry) names.push_back(f.name);
  });
  for (const std::string& name : names) ::unlink(fmt::format("{}/{}", path_, name).c_str());
}

int64_t CompileCache::size_bytes() const {
  if (!enabled_) return 0;
  int64_t total = 0;
  list_dir(path_, [&](int, const Listed& f) {
    if (f.entry) total += f.size;
  });
  return total;
}

CompileCacheStats CompileCache::stats() const {
  return CompileCacheStats{hits_.load(std::memory_order_relaxed), misses_.load(std::memory_order_relaxed),
                           writes_.load(std::memory_order_relaxed), corrupt_.load(std::memory_order_relaxed),
                           evicted_.load(std::memory_order_relaxed)};
}

int64_t compile_cache_size_option(const std::string& value) {
  if (value == "default") return kDefaultCompileCacheMaxBytes;
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("--compile-cache-max-size '{}': {}", value, why),
                 "give a number of bytes, optionally with K, M, G or T (binary units), e.g. 500M or 2G");
  };
  size_t digits = 0;
  while (digits < value.size() && value[digits] >= '0' && value[digits] <= '9') ++digits;
  if (digits == 0) throw bad("not a size");
  int shift = 0;
  if (digits < value.size()) {
    if (digits + 1 != value.size()) throw bad("unknown unit");
    switch (value[digits]) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      default:
        throw bad("unknown unit");
    }
  }
  uint64_t n = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(value[i] - '0');
    if (n > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10) throw bad("too large");
    n = n * 10 + d;
  }
  if (n > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) >> shift)) throw bad("too large");
  return static_cast<int64_t>(n << shift);
}

std::string compile_cache_dir_option(const std::string& value) {
  if (value == "off") return "";
  if (value == "default") return default_compile_cache_dir();
  return value;
}

}  // namespace ingot::codegen
