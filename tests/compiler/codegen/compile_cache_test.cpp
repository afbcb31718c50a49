// The persistent compilation cache (compile_cache.h): round trips, the entry format, corrupt
// entries, LRU eviction, unusable directories (also as root), I/O failures mid-write, and
// concurrent use by threads and by processes.
#include "ingot/codegen/compile_cache.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ingot/runtime/error.h"

namespace ingot::codegen {
namespace {

namespace fs = std::filesystem;

/// A 32-hex-digit key; `salt` separates families of keys.
std::string key_of(uint64_t salt, uint64_t i) { return fmt::format("{:016x}{:016x}", salt, i); }

/// `size` deterministic pseudo-random bytes (zeros included) from `seed`.
std::string bytes_of(uint64_t seed, size_t size) {
  std::mt19937_64 rng(seed);
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>(rng() >> 56);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

int count_lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

/// Names of the files in `dir`, sorted.
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Sets a file's modification (and access) time to `seconds` since the epoch.
void set_mtime(const std::string& path, time_t seconds) {
  struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path << ": " << std::strerror(errno);
}

time_t mtime_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return st.st_mtim.tv_sec;
}

/// Runs `body` in a forked child and returns its exit status (-signal if it was killed). The child
/// reports failures on stderr and through its exit code; it never returns into gtest.
int run_in_child(const std::function<int()>& body) {
  fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body();
    } catch (const std::exception& e) {
      fprintf(stderr, "child threw: %s\n", e.what());
      rc = 99;
    }
    fflush(nullptr);
    ::_exit(rc);
  }
  if (pid < 0) return -1000;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/// Each test gets a fresh directory (mkdtemp under ::testing::TempDir()), removed afterwards.
class CompileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir();
    if (!tmpl.empty() && tmpl.back() != '/') tmpl += '/';
    tmpl += "ingot_compile_cache_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0755);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(CompileCacheTest, StoreThenLoadRoundTripsBytes) {
  std::ostringstream warnings;
  CompileCache cache(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  ASSERT_TRUE(cache.enabled());
  ASSERT_TRUE(cache.writable());
  EXPECT_EQ(cache.dir(), dir_);

  const std::string zeros("\0\0abc\0\xff\0", 8);
  const std::string big = bytes_of(7, size_t{5} << 20);  // 5 MiB
  ASSERT_TRUE(cache.store(key_of(1, 1), zeros));
  ASSERT_TRUE(cache.store(key_of(1, 2), big));
  ASSERT_TRUE(cache.store(key_of(1, 3), ""));

  EXPECT_EQ(cache.load(key_of(1, 1)), zeros);
  EXPECT_EQ(cache.load(key_of(1, 2)), big);
  EXPECT_EQ(cache.load(key_of(1, 3)), std::string());
  const CompileCacheStats s = cache.stats();
  EXPECT_EQ(s.writes, 3);
  EXPECT_EQ(s.hits, 3);
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(s.corrupt, 0);
  EXPECT_EQ(cache.size_bytes(), 3 * kCompileCacheHeaderBytes + 8 + static_cast<int64_t>(big.size()));
  // No temporaries are left behind.
  EXPECT_EQ(files_in(dir_),
            (std::vector<std::string>{key_of(1, 1) + ".ingotc", key_of(1, 2) + ".ingotc", key_of(1, 3) + ".ingotc"}));
  EXPECT_EQ(warnings.str(), "");

  // Another object (another process, later) sees the same entries.
  CompileCache again(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  EXPECT_EQ(again.load(key_of(1, 2)), big);
}

TEST_F(CompileCacheTest, EntryFileHasTheDocumentedLayout) {
  CompileCache cache(dir_);
  const std::string payload = bytes_of(3, 1000);
  ASSERT_TRUE(cache.store(key_of(2, 1), payload));
  const std::string path = dir_ + "/" + key_of(2, 1) + ".ingotc";
  EXPECT_EQ(cache.entry_path(key_of(2, 1)), path);
  const std::string file = read_file(path);
  ASSERT_EQ(file.size(), 24u + payload.size());
  EXPECT_EQ(file.substr(0, 8), std::string("INGOTCC\x01", 8));
  const auto u8 = [&](size_t i) { return uint64_t{static_cast<unsigned char>(file[i])}; };
  const auto le = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= u8(at + i) << (8 * i);
    return v;
  };
  EXPECT_EQ(le(8, 4), 1u);  // format version
  EXPECT_EQ(le(12, 4), crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())));
  EXPECT_EQ(le(16, 8), payload.size());
  EXPECT_EQ(file.substr(24), payload);
}

TEST_F(CompileCacheTest, UnknownKeyIsAMiss) {
  std::ostringstream warnings;
  CompileCache cache(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  EXPECT_EQ(cache.load(key_of(3, 1)), std::nullopt);
  // A directory where an entry would be is a miss too, and is left alone.
  ASSERT_TRUE(fs::create_directory(dir_ + "/" + key_of(3, 2) + ".ingotc"));
  EXPECT_EQ(cache.load(key_of(3, 2)), std::nullopt);
  const CompileCacheStats s = cache.stats();
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.corrupt, 0);
  EXPECT_EQ(warnings.str(), "");
}

TEST_F(CompileCacheTest, StoreReplacesAnExistingEntry) {
  CompileCache cache(dir_);
  ASSERT_TRUE(cache.store(key_of(4, 1), "first version, longer"));
  ASSERT_TRUE(cache.store(key_of(4, 1), "second"));
  EXPECT_EQ(cache.load(key_of(4, 1)), "second");
  EXPECT_EQ(files_in(dir_).size(), 1u);
}

/// Stores an entry, damages its file with `damage(bytes)`, and checks that load() is a miss that
/// deletes the file, counts as corrupt and prints one warning containing `reason`.
void expect_corrupt_miss(const std::string& dir, const std::function<void(std::string&)>& damage,
                         const std::string& reason) {
  std::ostringstream warnings;
  CompileCache cache(dir, kDefaultCompileCacheMaxBytes, &warnings);
  const std::string key = key_of(5, 1);
  ASSERT_TRUE(cache.store(key, bytes_of(5, 4000)));
  const std::string path = cache.entry_path(key);
  std::string file = read_file(path);
  damage(file);
  write_file(path, file);

  EXPECT_EQ(cache.load(key), std::nullopt);
  EXPECT_FALSE(fs::exists(path)) << "a corrupt entry must be deleted";
  const CompileCacheStats s = cache.stats();
  EXPECT_EQ(s.corrupt, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(count_lines(warnings.str()), 1) << warnings.str();
  EXPECT_NE(warnings.str().find("ingot: warning: compile cache entry '" + path + "' is corrupt ("), std::string::npos)
      << warnings.str();
  EXPECT_NE(warnings.str().find("); recompiling"), std::string::npos) << warnings.str();
  EXPECT_NE(warnings.str().find(reason), std::string::npos) << warnings.str();
  // Gone now: a plain miss, no second warning; and the key can be stored again.
  EXPECT_EQ(cache.load(key), std::nullopt);
  EXPECT_EQ(cache.stats().corrupt, 1);
  EXPECT_EQ(count_lines(warnings.str()), 1);
  EXPECT_TRUE(cache.store(key, "fresh"));
  EXPECT_EQ(cache.load(key), "fresh");
}

TEST_F(CompileCacheTest, TruncatedEntryIsACorruptMiss) {
  expect_corrupt_miss(
      dir_, [](std::string& f) { f.resize(24 + 1000); }, "header says 4000 payload bytes, the file holds 1000");
}

TEST_F(CompileCacheTest, EntryShorterThanItsHeaderIsACorruptMiss) {
  // Truncated with truncate(2), as a crash or a full disk would leave it.
  std::ostringstream warnings;
  CompileCache cache(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  ASSERT_TRUE(cache.store(key_of(5, 2), "payload"));
  ASSERT_EQ(::truncate(cache.entry_path(key_of(5, 2)).c_str(), 5), 0);
  EXPECT_EQ(cache.load(key_of(5, 2)), std::nullopt);
  EXPECT_FALSE(fs::exists(cache.entry_path(key_of(5, 2))));
  EXPECT_EQ(cache.stats().corrupt, 1);
  EXPECT_EQ(count_lines(warnings.str()), 1);
  EXPECT_NE(warnings.str().find("5 bytes, shorter than the 24-byte header"), std::string::npos) << warnings.str();
}

TEST_F(CompileCacheTest, ByteFlippedPayloadIsACorruptMiss) {
  expect_corrupt_miss(dir_, [](std::string& f) { f[24 + 1234] = static_cast<char>(f[24 + 1234] ^ 0x10); }, "CRC32");
}

TEST_F(CompileCacheTest, ByteFlippedMagicIsACorruptMiss) {
  expect_corrupt_miss(dir_, [](std::string& f) { f[2] = 'x'; }, "bad magic");
}

TEST_F(CompileCacheTest, TrailingBytesAreACorruptMiss) {
  expect_corrupt_miss(dir_, [](std::string& f) { f += "junk"; }, "header says 4000 payload bytes, the file holds 4004");
}

TEST_F(CompileCacheTest, OtherFormatVersionIsAMissThatSaysSoNotCorruption) {
  // Version 2 with a correct size and CRC32: only the version differs.
  std::ostringstream warnings;
  CompileCache cache(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  const std::string key = key_of(5, 1);
  ASSERT_TRUE(cache.store(key, bytes_of(5, 4000)));
  const std::string path = cache.entry_path(key);
  std::string file = read_file(path);
  file[8] = 2;
  write_file(path, file);
  EXPECT_EQ(cache.load(key), std::nullopt);
  EXPECT_FALSE(fs::exists(path)) << "an entry of another format must be deleted";
  EXPECT_EQ(cache.stats().corrupt, 0);
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(count_lines(warnings.str()), 1) << warnings.str();
  EXPECT_NE(warnings.str().find("ingot: warning: compile cache entry '" + path +
                                "' is in cache format 2, this build reads 1; recompiling"),
            std::string::npos)
      << warnings.str();
  EXPECT_EQ(warnings.str().find("corrupt"), std::string::npos) << warnings.str();
  EXPECT_TRUE(cache.store(key, "fresh"));
  EXPECT_EQ(cache.load(key), "fresh");
}

TEST_F(CompileCacheTest, HitRefreshesTheModificationTime) {
  CompileCache cache(dir_);
  ASSERT_TRUE(cache.store(key_of(6, 1), "x"));
  const std::string path = cache.entry_path(key_of(6, 1));
  const time_t old = std::time(nullptr) - 5000;
  set_mtime(path, old);
  ASSERT_EQ(mtime_of(path), old);
  EXPECT_EQ(cache.load(key_of(6, 1)), "x");
  EXPECT_GE(mtime_of(path), std::time(nullptr) - 60);
  // A miss on another key touches nothing.
  set_mtime(path, old);
  EXPECT_EQ(cache.load(key_of(6, 2)), std::nullopt);
  EXPECT_EQ(mtime_of(path), old);
}

TEST_F(CompileCacheTest, EvictKeepsTheMostRecentlyUsedAndFreesTo90Percent) {
  // Ten entries of 1024 bytes (24-byte header + 1000), cap 8192: eviction must go to <= 7372.
  const int64_t cap = 8192;
  CompileCache cache(dir_, cap);
  const time_t base = std::time(nullptr) - 1000;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(cache.store(key_of(7, i), bytes_of(i, 1000)));
    set_mtime(cache.entry_path(key_of(7, i)), base + i);  // entry 0 oldest ... entry 9 newest
  }
  ASSERT_EQ(cache.size_bytes(), 10240);
  // Using entry 0 makes it the most recent, so entries 1, 2, 3 are the least recently used.
  ASSERT_EQ(cache.load(key_of(7, 0)), bytes_of(0, 1000));

  EXPECT_EQ(cache.evict(), 3 * 1024);
  EXPECT_EQ(cache.size_bytes(), 7 * 1024);
  EXPECT_LE(cache.size_bytes(), cap * 9 / 10);
  EXPECT_EQ(cache.stats().evicted, 3);
  for (int i = 0; i < 10; ++i) {
    const bool kept = i == 0 || i >= 4;
    EXPECT_EQ(fs::exists(cache.entry_path(key_of(7, i))), kept) << "entry " << i;
  }
  EXPECT_EQ(cache.load(key_of(7, 9)), bytes_of(9, 1000));
  // Under the cap now: nothing more goes.
  EXPECT_EQ(cache.evict(), 0);
  EXPECT_EQ(cache.stats().evicted, 3);
}

TEST_F(CompileCacheTest, EvictWithACapOfZeroDeletesEveryEntry) {
  CompileCache cache(dir_, 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.store(key_of(8, i), "abc"));
  EXPECT_EQ(cache.evict(), 3 * 27);
  EXPECT_EQ(cache.size_bytes(), 0);
}

TEST_F(CompileCacheTest, EvictDeletesStaleTemporariesOnly) {
  CompileCache cache(dir_, 1 << 20);
  ASSERT_TRUE(cache.store(key_of(9, 1), "entry"));
  write_file(dir_ + "/.tmp-stale", std::string(5000, 'a'));
  write_file(dir_ + "/.tmp-fresh", std::string(5000, 'b'));
  write_file(dir_ + "/notes.txt", "not an entry");
  set_mtime(dir_ + "/.tmp-stale", std::time(nullptr) - 2 * 3600);
  set_mtime(dir_ + "/.tmp-fresh", std::time(nullptr) - 60);
  EXPECT_EQ(cache.size_bytes(), 24 + 5);  // temporaries and other files are not entries
  EXPECT_EQ(cache.evict(), 0);            // under the cap
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{".tmp-fresh", key_of(9, 1) + ".ingotc", "notes.txt"}));
}

TEST_F(CompileCacheTest, ClearDeletesEveryEntryAndNothingElse) {
  CompileCache cache(dir_);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache.store(key_of(10, i), bytes_of(i, 100)));
  write_file(dir_ + "/notes.txt", "keep me");
  cache.clear();
  EXPECT_EQ(cache.size_bytes(), 0);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(cache.load(key_of(10, 0)), std::nullopt);
}

TEST_F(CompileCacheTest, CreatesMissingParents) {
  std::ostringstream warnings;
  const std::string dir = dir_ + "/a/b/c/";
  CompileCache cache(dir, kDefaultCompileCacheMaxBytes, &warnings);
  EXPECT_TRUE(cache.writable());
  EXPECT_TRUE(fs::is_directory(dir_ + "/a/b/c"));
  EXPECT_EQ(cache.entry_path(key_of(11, 1)), dir_ + "/a/b/c/" + key_of(11, 1) + ".ingotc");
  EXPECT_TRUE(cache.store(key_of(11, 1), "x"));
  EXPECT_EQ(warnings.str(), "");
}

TEST(CompileCache, EmptyDirIsADisabledCacheWithoutWarning) {
  std::ostringstream warnings;
  CompileCache cache("", kDefaultCompileCacheMaxBytes, &warnings);
  EXPECT_FALSE(cache.enabled());
  EXPECT_FALSE(cache.writable());
  EXPECT_EQ(cache.dir(), "");
  EXPECT_EQ(cache.load(key_of(12, 1)), std::nullopt);
  EXPECT_FALSE(cache.store(key_of(12, 1), "x"));
  EXPECT_EQ(cache.evict(), 0);
  EXPECT_EQ(cache.size_bytes(), 0);
  cache.clear();
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(cache.stats().writes, 0);
  EXPECT_EQ(warnings.str(), "");
}

TEST_F(CompileCacheTest, RegularFileIsADisabledCacheWithOneWarningEvenTwice) {
  const std::string file = dir_ + "/afile";
  write_file(file, "not a directory");
  std::ostringstream first, second;
  CompileCache a(file, kDefaultCompileCacheMaxBytes, &first);
  CompileCache b(file, kDefaultCompileCacheMaxBytes, &second);
  for (CompileCache* c : {&a, &b}) {
    EXPECT_FALSE(c->enabled());
    EXPECT_FALSE(c->writable());
    EXPECT_EQ(c->load(key_of(13, 1)), std::nullopt);
    EXPECT_FALSE(c->store(key_of(13, 1), "x"));
    EXPECT_EQ(c->evict(), 0);
  }
  EXPECT_EQ(first.str(),
            "ingot: warning: compile cache '" + file + "' is not a directory; compiling without caching\n");
  EXPECT_EQ(second.str(), "") << "the warning is printed once per directory per process";
  EXPECT_EQ(read_file(file), "not a directory");
}

TEST_F(CompileCacheTest, DirectoryUnderARegularFileCannotBeCreatedEvenByRoot) {
  write_file(dir_ + "/afile", "x");
  const std::string dir = dir_ + "/afile/sub";
  std::ostringstream first, second;
  CompileCache a(dir, kDefaultCompileCacheMaxBytes, &first);
  CompileCache b(dir, kDefaultCompileCacheMaxBytes, &second);
  EXPECT_FALSE(a.enabled());
  EXPECT_FALSE(a.writable());
  EXPECT_FALSE(a.store(key_of(14, 1), "x"));
  EXPECT_EQ(a.load(key_of(14, 1)), std::nullopt);
  EXPECT_EQ(first.str(), "ingot: warning: compile cache '" + dir +
                             "' cannot be created (Not a directory); compiling without caching\n");
  EXPECT_EQ(second.str(), "");
}

TEST(CompileCache, ProcIsReadableButNotWritableEvenByRoot) {
  // /proc is a directory every process can list and no one, root included, can create files in:
  // the read-only case that works as root (where chmod does not stop writes). The warning is
  // printed once per process, so only the first run (of --gtest_repeat) sees it.
  static int runs = 0;
  const bool first_run = runs++ == 0;
  std::ostringstream warnings;
  CompileCache cache("/proc", kDefaultCompileCacheMaxBytes, &warnings);
  EXPECT_TRUE(cache.enabled());
  EXPECT_FALSE(cache.writable());
  EXPECT_FALSE(cache.store(key_of(15, 1), "x"));
  EXPECT_EQ(cache.load(key_of(15, 1)), std::nullopt);
  EXPECT_EQ(cache.evict(), 0);
  EXPECT_EQ(cache.size_bytes(), 0);
  if (first_run) {
    EXPECT_EQ(count_lines(warnings.str()), 1) << warnings.str();
    EXPECT_EQ(warnings.str().rfind("ingot: warning: compile cache '/proc' is not writable (", 0), 0u) << warnings.str();
    EXPECT_NE(warnings.str().find("); using its entries, storing no new ones\n"), std::string::npos) << warnings.str();
  } else {
    EXPECT_EQ(warnings.str(), "");
  }
}

TEST_F(CompileCacheTest, ReadOnlyDirectoryServesHitsButStoresNothing) {
  {
    CompileCache writer(dir_);
    ASSERT_TRUE(writer.store(key_of(16, 1), "cached before"));
  }
  ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);
  const std::string probe = dir_ + "/probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
    GTEST_SKIP() << "running as root (CAP_DAC_OVERRIDE): chmod 0555 does not stop writes here; "
                    "ProcIsReadableButNotWritableEvenByRoot and DirectoryUnderARegularFileCannotBeCreatedEvenByRoot "
                    "cover unwritable directories as root";
  }
  std::ostringstream warnings;
  CompileCache cache(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  EXPECT_TRUE(cache.enabled());
  EXPECT_FALSE(cache.writable());
  EXPECT_EQ(warnings.str(), "ingot: warning: compile cache '" + dir_ +
                                "' is not writable (Permission denied); using its entries, storing no new ones\n");
  EXPECT_EQ(cache.load(key_of(16, 1)), "cached before");
  EXPECT_FALSE(cache.store(key_of(16, 2), "new"));
  EXPECT_EQ(cache.evict(), 0);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{key_of(16, 1) + ".ingotc"});
}

TEST_F(CompileCacheTest, VanishedDirectoryFailsStoresWithOneWarning) {
  const std::string dir = dir_ + "/sub";
  std::ostringstream warnings;
  CompileCache cache(dir, kDefaultCompileCacheMaxBytes, &warnings);
  ASSERT_TRUE(cache.writable());
  ASSERT_TRUE(cache.store(key_of(17, 1), "x"));
  fs::remove_all(dir);
  EXPECT_FALSE(cache.store(key_of(17, 2), "y"));
  EXPECT_FALSE(cache.store(key_of(17, 3), "z"));
  EXPECT_EQ(cache.load(key_of(17, 1)), std::nullopt);
  EXPECT_EQ(cache.evict(), 0);
  EXPECT_EQ(cache.size_bytes(), 0);
  EXPECT_EQ(count_lines(warnings.str()), 1) << warnings.str();
  EXPECT_NE(
      warnings.str().find("ingot: warning: compile cache '" + dir + "': cannot create a temporary file for entry " +
                          key_of(17, 2) + " (No such file or directory)"),
      std::string::npos)
      << warnings.str();
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(CompileCacheTest, FileSizeLimitRefusesLargeEntriesWithoutKillingTheProcess) {
  // A 4 KiB file size limit (RLIMIT_FSIZE, `ulimit -f 4`), in a child process so the limit does
  // not outlive the test, with SIGXFSZ at its default action (which kills a process writing past
  // the limit): entries larger than the limit are refused before anything is written (false, one
  // warning, no temporary left), smaller ones still work.
  const std::string dir = dir_;
  const int rc = run_in_child([&] {
    const struct rlimit limit = {4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
    std::ostringstream warnings;
    CompileCache cache(dir, kDefaultCompileCacheMaxBytes, &warnings);
    if (!cache.writable()) return 3;
    if (!cache.store(key_of(18, 1), std::string(1000, 's'))) return 4;
    if (cache.store(key_of(18, 2), bytes_of(1, 1 << 20))) return 5;
    if (cache.store(key_of(18, 3), bytes_of(2, 1 << 20))) return 6;
    if (files_in(dir) != std::vector<std::string>{key_of(18, 1) + ".ingotc"}) return 7;
    if (count_lines(warnings.str()) != 1 ||
        warnings.str().find("cannot write an entry larger than the file size limit (ulimit -f) for entry " +
                            key_of(18, 2) + " (File too large)") == std::string::npos) {
      fprintf(stderr, "warnings: %s\n", warnings.str().c_str());
      return 8;
    }
    if (cache.load(key_of(18, 1)) != std::string(1000, 's')) return 9;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "child check " << rc << " failed";
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{key_of(18, 1) + ".ingotc"});
}

TEST_F(CompileCacheTest, FullDiskRemovesTheTemporary) {
  // A real ENOSPC needs a small file system. The only honest way found is a 64 KiB tmpfs mounted
  // over the test directory in a private mount namespace of a child process (unshare(CLONE_NEWNS),
  // gone when the child exits). That needs CAP_SYS_ADMIN; without it the test is skipped:
  // there is no unprivileged way to fill a file system without filling a real shared one, and
  // WriteFailingPartwayRemovesTheTemporary covers the same code path with EFBIG.
  const std::string dir = dir_;
  const int rc = run_in_child([&] {
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755") != 0) return 77;
    std::ostringstream warnings;
    CompileCache cache(dir, kDefaultCompileCacheMaxBytes, &warnings);
    if (!cache.writable()) return 3;
    if (!cache.store(key_of(19, 1), std::string(1000, 's'))) return 4;
    if (cache.store(key_of(19, 2), bytes_of(1, 1 << 20))) return 5;
    if (cache.store(key_of(19, 3), bytes_of(2, 1 << 20))) return 6;
    if (files_in(dir) != std::vector<std::string>{key_of(19, 1) + ".ingotc"}) return 7;
    if (count_lines(warnings.str()) != 1 || warnings.str().find("cannot write for entry " + key_of(19, 2) +
                                                                " (No space left on device)") == std::string::npos) {
      fprintf(stderr, "warnings: %s\n", warnings.str().c_str());
      return 8;
    }
    if (cache.load(key_of(19, 1)) != std::string(1000, 's')) return 9;
    // Space freed: storing works again.
    cache.clear();
    if (!cache.store(key_of(19, 4), bytes_of(3, 20000))) return 10;
    return 0;
  });
  if (rc == 77) GTEST_SKIP() << "cannot mount a size-limited tmpfs in a private mount namespace (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(rc, 0) << "child check " << rc << " failed";
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{}) << "the tmpfs must have stayed in the child's namespace";
}

TEST_F(CompileCacheTest, ACorruptEntryThatCannotBeDeletedIsWarnedAboutOnce) {
  // A read-only bind mount of the directory in a private mount namespace of a child process (the
  // way root gets a directory it cannot write; skipped without CAP_SYS_ADMIN, and as another user
  // chmod 0555 gives the same): the corrupt entry stays, every load misses, one warning.
  {
    CompileCache writer(dir_);
    ASSERT_TRUE(writer.store(key_of(30, 1), bytes_of(30, 4000)));
    std::string file = read_file(writer.entry_path(key_of(30, 1)));
    file[kCompileCacheHeaderBytes + 7] ^= 1;
    write_file(writer.entry_path(key_of(30, 1)), file);
  }
  const std::string dir = dir_;
  const int rc = run_in_child([&] {
    if (::geteuid() == 0) {
      if (::unshare(CLONE_NEWNS) != 0) return 77;
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
      if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0) return 77;
      if (::mount(nullptr, dir.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) return 77;
    } else if (::chmod(dir.c_str(), 0555) != 0) {
      return 2;
    }
    std::ostringstream warnings;
    CompileCache cache(dir, kDefaultCompileCacheMaxBytes, &warnings);
    if (cache.writable()) return 3;
    for (int i = 0; i < 3; ++i) {
      if (cache.load(key_of(30, 1)) != std::nullopt) return 4;
    }
    if (cache.stats().corrupt != 3 || cache.stats().misses != 3) return 5;
    const std::string w = warnings.str();
    if (count_lines(w) != 2 || w.find("is not writable") == std::string::npos ||
        w.find("' is corrupt (CRC32 of the payload is ") == std::string::npos) {
      fprintf(stderr, "warnings: %s\n", w.c_str());
      return 6;
    }
    return 0;
  });
  ::chmod(dir_.c_str(), 0755);
  if (rc == 77)
    GTEST_SKIP() << "cannot bind-mount the directory read-only in a private mount namespace (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(rc, 0) << "child check " << rc << " failed";
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{key_of(30, 1) + ".ingotc"}) << "the entry could not be deleted";
}

/// Payload child `c` stores under key `i` of family `salt` (different sizes per child and key).
std::string child_payload(int c, uint64_t salt, int i) {
  const size_t size = salt == 21 ? (c == 0 ? 100 + 37 * i : 20000 + 53 * i) : 1 + (i * 2654435761u + c * 977u) % 40000;
  return bytes_of((uint64_t{salt} << 40) ^ (uint64_t(c) << 32) ^ uint64_t(i), size);
}

TEST_F(CompileCacheTest, TwoProcessesStoreConcurrently) {
  // Each child stores 200 keys of its own (family 20 + c * 100) and 200 keys both store (family
  // 21, different sizes per child), interleaved, started together through a pipe.
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  fflush(nullptr);
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      CompileCache cache(dir_, kDefaultCompileCacheMaxBytes);
      char byte;
      while (::read(go[0], &byte, 1) < 0 && errno == EINTR) {
      }
      int failures = 0;
      for (int i = 0; i < 200; ++i) {
        failures += !cache.store(key_of(20 + c * 100, i), child_payload(c, 20 + c * 100, i));
        failures += !cache.store(key_of(21, i), child_payload(c, 21, i));
      }
      ::_exit(failures == 0 && cache.stats().writes == 400 ? 0 : 1);
    }
    ASSERT_GT(pid, 0);
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);  // both children start
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child's stores failed, status " << status;
  }

  std::ostringstream warnings;
  CompileCache cache(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < 200; ++i) {
      EXPECT_EQ(cache.load(key_of(20 + c * 100, i)), child_payload(c, 20 + c * 100, i))
          << "child " << c << " key " << i;
    }
  }
  for (int i = 0; i < 200; ++i) {
    const std::optional<std::string> got = cache.load(key_of(21, i));
    ASSERT_TRUE(got.has_value()) << "shared key " << i;
    EXPECT_TRUE(*got == child_payload(0, 21, i) || *got == child_payload(1, 21, i)) << "shared key " << i;
  }
  const CompileCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 600);
  EXPECT_EQ(s.corrupt, 0);
  EXPECT_EQ(warnings.str(), "");
  EXPECT_EQ(files_in(dir_).size(), 600u) << "no temporaries left";
}

TEST_F(CompileCacheTest, EightThreadsStoreAndLoadTheSameKeys) {
  // Every payload starts with its writer and round, so any complete payload can be checked.
  const auto payload = [](int thread, int round, int k) {
    std::string p = fmt::format("{:02d}{:02d}", thread, round);
    return p + bytes_of(uint64_t(thread * 1000 + round * 100 + k), size_t(17 * k + 300 * thread + 11 * round));
  };
  std::ostringstream warnings;
  CompileCache cache(dir_, kDefaultCompileCacheMaxBytes, &warnings);
  std::atomic<int> store_failures{0}, bad_loads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        for (int k = 0; k < 32; ++k) {
          if (!cache.store(key_of(22, k), payload(t, round, k))) ++store_failures;
          const std::optional<std::string> got = cache.load(key_of(22, (k + t) % 32));
          if (!got.has_value()) continue;  // (k + t) % 32 may not be stored yet
          const int writer = std::stoi(got->substr(0, 2)), r = std::stoi(got->substr(2, 2));
          if (*got != payload(writer, r, (k + t) % 32)) ++bad_loads;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(store_failures.load(), 0);
  EXPECT_EQ(bad_loads.load(), 0);
  const CompileCacheStats s = cache.stats();
  EXPECT_EQ(s.writes, 8 * 4 * 32);
  EXPECT_EQ(s.corrupt, 0);
  EXPECT_GT(s.hits, 0);
  EXPECT_EQ(s.hits + s.misses, 8 * 4 * 32);
  EXPECT_EQ(warnings.str(), "");
  EXPECT_EQ(files_in(dir_).size(), 32u) << "no temporaries left";
  for (int k = 0; k < 32; ++k) EXPECT_TRUE(cache.load(key_of(22, k)).has_value());
}

void expect_invalid_key(CompileCache& cache, const std::string& key, const std::string& shown) {
  for (int op = 0; op < 3; ++op) {
    try {
      if (op == 0) cache.load(key);
      if (op == 1) cache.store(key, "x");
      if (op == 2) cache.entry_path(key);
      ADD_FAILURE() << "no error for key '" << shown << "', op " << op;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("compile cache key '" + shown + "'"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-ingot exception: " << e.what();
    }
  }
}

TEST_F(CompileCacheTest, BadKeyThrowsInvalidArgument) {
  CompileCache cache(dir_);
  CompileCache disabled("");
  for (CompileCache* c : {&cache, &disabled}) {
    expect_invalid_key(*c, "", "");
    expect_invalid_key(*c, "0123456789abcde", "0123456789abcde");                // 15 digits
    expect_invalid_key(*c, std::string(129, 'a'), std::string(129, 'a'));        // 129 digits
    expect_invalid_key(*c, "0123456789ABCDEF", "0123456789ABCDEF");              // uppercase
    expect_invalid_key(*c, "0123456789abcdeg", "0123456789abcdeg");              // not hex
    expect_invalid_key(*c, "../../0123456789abcdef", "../../0123456789abcdef");  // a path
    expect_invalid_key(*c, std::string("0123456789abcdef\0", 17), "0123456789abcdef\\x00");
  }
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{});
  // The bounds themselves are fine.
  EXPECT_TRUE(cache.store(std::string(16, 'f'), "a"));
  EXPECT_TRUE(cache.store(std::string(128, '0'), "b"));
  EXPECT_EQ(cache.load(std::string(128, '0')), "b");
  EXPECT_TRUE(is_valid_compile_cache_key(std::string(64, 'e')));
  EXPECT_FALSE(is_valid_compile_cache_key("xyz"));
}

TEST(CompileCache, NegativeMaxBytesThrowsInvalidArgument) {
  try {
    CompileCache cache("", -1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("max_bytes is -1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ingot::codegen
