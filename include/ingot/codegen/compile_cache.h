// The persistent on-disk compilation cache: opaque payloads (object code, manifests) stored under
// hex keys in one directory, shared safely by the threads of a process and by concurrent processes.
//
// Layout. Each entry is one file `<dir>/<key>.ingotc`:
//
//   offset  size  field
//        0     8  magic "INGOTCC\x01"
//        8     4  format version, uint32 little endian (kCompileCacheFormatVersion = 1)
//       12     4  CRC32 of the payload (zlib's crc32), uint32 little endian
//       16     8  payload size in bytes, uint64 little endian
//       24     n  the payload
//
// An entry is written to a temporary `<dir>/.tmp-<pid>-<thread>-<counter>-<key prefix>` and
// rename()d over `<key>.ingotc`, so a reader sees either the old entry, the new one or none, never
// a partial one. Nothing is fsync()ed: after a power loss an entry may be truncated or hold
// garbage, which its size and CRC32 catch (a miss that deletes it). Files starting with ".tmp-"
// are not entries (size and eviction ignore them); evict() deletes those older than an hour (left
// by a killed writer). Other files in the directory are left alone.
//
// LRU. An entry's modification time is its last use: store() creates it, a hit of load() sets it
// to now (futimens), evict() deletes the oldest first. The cache does not evict by itself; the
// owner calls evict() (the CPU back end does after each store of a step).
//
// Process-wide state. Warnings about a directory (unusable at construction; a kind of store
// failure) are printed once per directory per process: a mutex-protected set of (absolute
// directory path, warning kind) strings that lives until the process exits. It is the only state
// shared between CompileCache objects; everything else is per object or on disk.
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace ingot::codegen {

/// The first 8 bytes of every entry file.
inline constexpr char kCompileCacheMagic[8] = {'I', 'N', 'G', 'O', 'T', 'C', 'C', '\x01'};
/// The entry format this code writes and the only one it reads.
inline constexpr uint32_t kCompileCacheFormatVersion = 1;
/// Size of an entry's header in bytes (magic, version, CRC32, payload size).
inline constexpr int64_t kCompileCacheHeaderBytes = 24;
/// File name suffix of entries.
inline constexpr std::string_view kCompileCacheEntrySuffix = ".ingotc";
/// File name prefix of temporaries (never entries).
inline constexpr std::string_view kCompileCacheTempPrefix = ".tmp-";
/// Age in seconds past which evict() deletes a temporary as left behind by a killed writer.
inline constexpr int64_t kCompileCacheStaleTempSeconds = 3600;
/// Shortest and longest key accepted, in hex digits.
inline constexpr size_t kCompileCacheMinKeyLength = 16;
inline constexpr size_t kCompileCacheMaxKeyLength = 128;

/// The default cache directory: `$XDG_CACHE_HOME/ingot` if XDG_CACHE_HOME is set, non-empty and
/// absolute (the XDG base directory spec says to ignore a relative one), else `$HOME/.cache/ingot`
/// if HOME is set and non-empty, else `<home>/.cache/ingot` with the user's home directory from the
/// password database (password_database_home(); as Python's os.path.expanduser does without
/// HOME), else "" (no cache). Does not create the directory. Never throws (but std::bad_alloc).
/// Reads the environment: not safe concurrently with setenv()/putenv().
std::string default_compile_cache_dir();

/// The current user's home directory in the password database (getpwuid_r(getuid())), or "" when
/// there is no entry or it is not an absolute path. Never throws (but std::bad_alloc).
std::string password_database_home();

/// The cache directory a `--compile-cache VALUE` command-line option names (ingot train/bench):
/// "off" -> "" (no cache), "default" -> default_compile_cache_dir(), anything else is the
/// directory itself. Never throws (but std::bad_alloc).
std::string compile_cache_dir_option(const std::string& value);

/// Default size cap of a cache directory, in bytes (2 GiB).
inline constexpr int64_t kDefaultCompileCacheMaxBytes = int64_t{2} << 30;

/// The size cap a `--compile-cache-max-size SIZE` command-line option names (ingot train/bench),
/// in bytes: a whole number of bytes, or with a binary suffix K, M, G or T (KiB ... TiB, as
/// ccache's --max-size; upper or lower case, e.g. "500M", "2G"); "default" is
/// kDefaultCompileCacheMaxBytes; 0 keeps nothing. Errors: ingot::Error(kInvalidArgument) naming
/// the option and the value for anything else (a sign, a fraction, another suffix, over 2^63-1
/// bytes).
int64_t compile_cache_size_option(const std::string& value);

/// Whether `key` is a valid cache key: kCompileCacheMinKeyLength..kCompileCacheMaxKeyLength
/// characters, each one of [0-9a-f]. Never throws; thread-safe.
bool is_valid_compile_cache_key(std::string_view key);

/// What one CompileCache object did since it was constructed (counts, not bytes).
struct CompileCacheStats {
  int64_t hits = 0;    ///< load() calls that returned a payload
  int64_t misses = 0;  ///< load() calls that returned nullopt (including corrupt entries and a disabled cache)
  int64_t writes = 0;  ///< store() calls that wrote an entry
  int64_t corrupt =
      0;  ///< load() calls that found a corrupt entry (bad magic, size or CRC32; not another format version)
  int64_t evicted = 0;  ///< entries evict() deleted
};

/// A persistent compilation cache in one directory (file layout, LRU and process-wide state: see
/// the top of this header).
///
/// Thread-safety: every member function may be called concurrently from any number of threads,
/// and any number of processes (and CompileCache objects) may use the same directory at once.
/// Errors: ingot::Error is the only exception thrown (an invalid key or max_bytes, see each
/// function), besides std::bad_alloc; I/O failures never throw: they are misses, false returns
/// and warning lines. Not copyable or movable (hold it by value or in a unique_ptr).
class CompileCache {
 public:
  /// Opens the cache directory `dir`, creating it and its parents (mode 0777 less the umask) if
  /// missing. `dir` may be relative (resolved against the working directory now; later chdir()s
  /// do not move the cache). `max_bytes`: the size cap evict() enforces, in bytes, >= 0.
  ///
  /// An unusable directory never throws: a path that is a regular file or cannot be created, or
  /// a directory that cannot be listed, gives a disabled cache (enabled() and writable() false);
  /// a listable directory in which no file can be created (tested by creating and deleting a
  /// probe temporary, so it is right for root too) gives a read-only cache (enabled() true,
  /// writable() false). Either prints ONE warning line to `warnings` naming the path and the
  /// reason, e.g. "ingot: warning: compile cache '/x' is not writable (Permission denied);
  /// compiling without caching", at most once per directory per process (further objects for the
  /// same directory print nothing). `dir` empty: a disabled cache and no warning.
  ///
  /// `warnings`: where warning lines go (std::cerr when null); not owned, must outlive this
  /// object; lines are written whole, one at a time per object, and flushed.
  /// Throws ingot::Error(kInvalidArgument) if `max_bytes` < 0.
  explicit CompileCache(std::string dir, int64_t max_bytes = kDefaultCompileCacheMaxBytes,
                        std::ostream* warnings = nullptr);
  ~CompileCache();
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  /// Whether the directory is usable for reading (entries can be loaded). Fixed at construction.
  bool enabled() const { return enabled_; }
  /// Whether entries can be stored, evicted and cleared (implies enabled()). Fixed at
  /// construction; a store can still fail later (full disk, directory removed), returning false.
  bool writable() const { return writable_; }
  /// The directory as given to the constructor (may be empty or relative).
  const std::string& dir() const { return dir_; }
  /// The size cap in bytes, as given to the constructor.
  int64_t max_bytes() const { return max_bytes_; }

  /// The path of `key`'s entry file (`<dir>/<key>.ingotc`, dir made absolute), whether or not it
  /// exists. Throws ingot::Error(kInvalidArgument) naming the key for an invalid key (see load()).
  std::string entry_path(const std::string& key) const;

  /// Returns the payload stored under `key`, or nullopt on a miss (no entry, a disabled cache, an
  /// unreadable file). `key`: lowercase hex, kCompileCacheMinKeyLength..kCompileCacheMaxKeyLength
  /// digits (the caller hashes); anything else throws ingot::Error(kInvalidArgument) naming the
  /// key, even when the cache is disabled.
  ///
  /// An entry whose header, size or CRC32 does not match (truncated, corrupt) is a miss: it is
  /// deleted (if writable(), and only if the file is still the one that was read), counted in
  /// stats().corrupt and stats().misses, and one warning line is printed: "ingot: warning: compile
  /// cache entry '<path>' is corrupt (<reason>); recompiling". An entry of another format
  /// version (written by another ingot) is deleted the same way and counted in stats().misses
  /// only, with the warning "... '<path>' is in cache format <N>, this build reads <M>;
  /// recompiling". An entry that cannot be deleted (a read-only directory) is warned about once
  /// per process. A hit sets
  /// the entry's modification time to now (the LRU clock; ignored if that fails) and counts in
  /// stats().hits. The returned string is the caller's; nothing refers to it afterwards.
  std::optional<std::string> load(const std::string& key);

  /// Stores `payload` (any bytes, any size) under `key` atomically, replacing an existing entry:
  /// written to a unique temporary in the directory (name with pid, thread id and a counter,
  /// created with O_EXCL) and rename()d over the entry, so concurrent processes and threads never
  /// see a partial entry; when two store the same key at once, one of the two complete payloads
  /// wins. Returns true if the entry was written (counted in stats().writes). `key`: as for
  /// load(), else ingot::Error(kInvalidArgument). A read-only or disabled cache returns false
  /// (its warning came from the constructor). An I/O failure (full disk ENOSPC, file size limit,
  /// permissions, directory removed) deletes the temporary, prints one warning line naming the
  /// directory, the key and the reason (once per directory and errno value per process), and
  /// returns false; it never throws. An entry larger than the process's file size limit
  /// (RLIMIT_FSIZE, `ulimit -f`) is refused before writing, the same way (writing past the limit
  /// would raise SIGXFSZ, which kills the process by default). `payload` is only read during the call.
  bool store(const std::string& key, std::string_view payload);

  /// If the entries' total size exceeds max_bytes(), deletes least recently used entries (oldest
  /// modification time first, ties by name) until the total is at most 90% of max_bytes()
  /// (rounded down). Returns the bytes of entry files this call deleted (file sizes, not disk
  /// blocks); each deleted entry counts in stats().evicted. Entries that vanish meanwhile
  /// (another process evicting) are ignored; an entry whose modification time changed since the
  /// directory was listed (used meanwhile) is kept. Also deletes temporaries older than
  /// kCompileCacheStaleTempSeconds (not counted). Returns 0 on a cache that is not writable().
  /// Never throws (but std::bad_alloc). Calls on one object are serialised; calls from other
  /// objects and processes may run concurrently (each entry is deleted at most once; a total can
  /// then end below the 90% mark).
  int64_t evict();

  /// Deletes every entry file in the directory (not temporaries of writers in flight, not other
  /// files, not the directory). Does nothing on a cache that is not writable(). Never throws (but
  /// std::bad_alloc). Entries stored concurrently may survive.
  void clear();

  /// Total size in bytes of the entry files in the directory now (file sizes; temporaries and
  /// other files excluded); 0 for a disabled cache. Never throws (but std::bad_alloc).
  int64_t size_bytes() const;

  /// This object's counters (each read atomically; the five together are not one snapshot).
  CompileCacheStats stats() const;

 private:
  void warn(const std::string& line) const;
  void warn_once(const std::string& kind, const std::string& line) const;
  bool fail_store(const std::string& key, const char* what, int err);

  std::string dir_;   // as given
  std::string path_;  // absolute, lexically normal, no trailing separator; "" when dir_ is empty
  int64_t max_bytes_ = 0;
  std::ostream* warnings_ = nullptr;
  bool enabled_ = false;
  bool writable_ = false;
  mutable std::mutex warn_mu_;  // serialises writes to *warnings_
  std::mutex evict_mu_;         // serialises evict() calls on this object
  std::atomic<uint64_t> temp_counter_{0};
  std::atomic<int64_t> hits_{0}, misses_{0}, writes_{0}, corrupt_{0}, evicted_{0};
};

}  // namespace ingot::codegen
