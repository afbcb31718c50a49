// Shared by the fuzz targets that read from a path: the input as an in-memory file (a memfd
// reached through /proc/self/fd), so every check of a reader, the file size and type included,
// sees a regular file, and nothing is written to disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ingot::fuzz {

/// Writes all `size` bytes of `data` to `fd`; aborts (a harness failure, not a finding) if it cannot.
inline void write_all(int fd, const uint8_t* data, size_t size) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
}

/// A memfd holding `size` bytes of `data`; closed on destruction.
class MemoryFile {
 public:
  MemoryFile(const char* name, const uint8_t* data, size_t size) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    write_all(fd_, data, size);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  /// A path that opens the file.
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace ingot::fuzz
