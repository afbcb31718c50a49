// Fashion-MNIST IDX loading (include/ingot/trainer/datasets.h). IDX format: big-endian magic
// (0x00000803 images, 0x00000801 labels), counts and sizes, then u8 data (LeCun et al., MNIST).
#include "ingot/trainer/datasets.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <filesystem>
#include <vector>

namespace ingot::datasets {

namespace {

constexpr const char* kDataHint =
    "reinstall the Debian package dataset-fashion-mnist, or pass a --data-dir holding the four original IDX files";

/// The whole (decompressed) contents of `<dir>/<name>.gz` or `<dir>/<name>`, and that path.
std::pair<std::string, std::vector<uint8_t>> read_idx_file(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name + ".gz";
  if (!std::filesystem::exists(path)) path = dir + "/" + name;
  if (!std::filesystem::exists(path)) {
    throw Error(ErrorCode::kNotFound, fmt::format("Fashion-MNIST file '{}/{}(.gz)' not found", dir, name),
                "install the Debian package dataset-fashion-mnist (scripts/install-deps.sh) or pass its directory");
  }
  // O_NONBLOCK: a FIFO (or another special file) is refused at once instead of waiting for a
  // writer; regular files ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw Error(ErrorCode::kNotFound, fmt::format("cannot open '{}': {}", path, std::strerror(errno)), kDataHint);
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kInvalidArgument, fmt::format("'{}' is not a regular file", path),
                "pass a --data-dir whose IDX files are regular files (not FIFOs, devices or directories)");
  }
  gzFile f = gzdopen(fd, "rb");  // reads uncompressed files too; closes fd
  if (f == nullptr) {
    ::close(fd);
    throw Error(ErrorCode::kOutOfMemory, fmt::format("cannot read '{}': zlib could not allocate its state", path),
                kDataHint);
  }
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  int n = 0;
  try {
    data.reserve(static_cast<size_t>(st.st_size));  // exact for an uncompressed file, a start for .gz
    while ((n = gzread(f, buf, sizeof buf)) > 0) data.insert(data.end(), buf, buf + n);
  } catch (const std::bad_alloc&) {
    gzclose(f);
    throw Error(ErrorCode::kOutOfMemory,
                fmt::format("reading '{}' ran out of host memory after {} bytes (the file has {} bytes{})", path,
                            data.size(), st.st_size, path.ends_with(".gz") ? ", compressed" : ""),
                "free host memory or raise the process's address-space limit (ulimit -v); Fashion-MNIST needs "
                "about 250 MB while it loads");
  }
  int err = Z_OK;
  const std::string reason = gzerror(f, &err);
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    throw Error(ErrorCode::kParseError, fmt::format("'{}' is a truncated or corrupt gzip file ({})", path, reason),
                kDataHint);
  }
  if (data.empty()) throw Error(ErrorCode::kParseError, fmt::format("'{}' is empty", path), kDataHint);
  return {path, std::move(data)};
}

uint32_t be32(const std::vector<uint8_t>& d, size_t at) {
  return (uint32_t{d[at]} << 24) | (uint32_t{d[at + 1]} << 16) | (uint32_t{d[at + 2]} << 8) | uint32_t{d[at + 3]};
}

/// Throws unless `d` starts with the IDX magic number `magic` and holds a full header.
void check_magic(const std::string& path, const std::vector<uint8_t>& d, uint32_t magic, size_t header,
                 const char* what) {
  if (d.size() < header) {
    throw Error(ErrorCode::kParseError,
                fmt::format("'{}' is not an IDX {} file: {} bytes, shorter than its header", path, what, d.size()),
                kDataHint);
  }
  if (be32(d, 0) != magic) {
    throw Error(ErrorCode::kParseError,
                fmt::format("'{}' is not an IDX {} file: magic number 0x{:08x}, expected 0x{:08x}", path, what,
                            be32(d, 0), magic),
                kDataHint);
  }
}

Array images(const std::string& dir, const std::string& name) {
  const auto [path, d] = read_idx_file(dir, name);
  check_magic(path, d, 0x803, 16, "image");
  const int64_t n = be32(d, 4), rows = be32(d, 8), cols = be32(d, 12);
  // Each count is below 2^32, so n * rows * cols can pass 2^63: compare against the file's bytes
  // in 128-bit arithmetic before anything is allocated.
  const unsigned __int128 expected =
      static_cast<unsigned __int128>(n) * static_cast<unsigned __int128>(rows) * static_cast<unsigned __int128>(cols) +
      16;
  if (expected != d.size()) {
    const std::string expected_text = expected > static_cast<unsigned __int128>(INT64_MAX)
                                          ? fmt::format("{} x {} x {} + 16, more than 2^63", n, rows, cols)
                                          : std::to_string(static_cast<int64_t>(expected));
    throw Error(
        ErrorCode::kParseError,
        fmt::format("'{}': {} bytes for {} images of {}x{} (expected {}: a truncated file or a corrupt header?)", path,
                    d.size(), n, rows, cols, expected_text),
        kDataHint);
  }
  Array a = Array::empty({n, rows, cols}, DType::kU8);
  std::memcpy(a.raw_data(), d.data() + 16, d.size() - 16);
  return a;
}

Array labels(const std::string& dir, const std::string& name) {
  const auto [path, d] = read_idx_file(dir, name);
  check_magic(path, d, 0x801, 8, "label");
  const int64_t n = be32(d, 4);
  if (static_cast<int64_t>(d.size()) != 8 + n) {
    throw Error(ErrorCode::kParseError,
                fmt::format("'{}': {} bytes for {} labels (expected {}: a truncated file?)", path, d.size(), n, 8 + n),
                kDataHint);
  }
  std::vector<int32_t> v(d.begin() + 8, d.end());
  return Array::from_vector<int32_t>(v, {n});
}

void check_counts(const std::string& dir, const Array& x, const Array& y, const char* split) {
  if (x.shape()[0] != y.shape()[0]) {
    throw Error(
        ErrorCode::kParseError,
        fmt::format("Fashion-MNIST in '{}': {} images but {} labels in the {} files (image and label counts differ)",
                    dir, x.shape()[0], y.shape()[0], split),
        kDataHint);
  }
}

}  // namespace

FashionMnist load_fashion_mnist(const std::string& dir) {
  FashionMnist f{images(dir, "train-images-idx3-ubyte"), labels(dir, "train-labels-idx1-ubyte"),
                 images(dir, "t10k-images-idx3-ubyte"), labels(dir, "t10k-labels-idx1-ubyte")};
  check_counts(dir, f.x_train, f.y_train, "train-*");
  check_counts(dir, f.x_test, f.y_test, "t10k-*");
  return f;
}

FashionMnist load_fashion_mnist_test(const std::string& dir) {
  FashionMnist f{Array(), Array(), images(dir, "t10k-images-idx3-ubyte"), labels(dir, "t10k-labels-idx1-ubyte")};
  check_counts(dir, f.x_test, f.y_test, "t10k-*");
  return f;
}

}  // namespace ingot::datasets
