// Fashion-MNIST IDX loading (include/ingot/trainer/datasets.h). IDX format: big-endian magic
// (0x00000803 images, 0x00000801 labels), counts and sizes, then u8 data (LeCun et al., MNIST).
#include "ingot/trainer/datasets.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace ingot::datasets {

namespace {

/// The whole (decompressed) contents of `path` or `path` without ".gz".
std::vector<uint8_t> read_idx_file(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name + ".gz";
  if (!std::filesystem::exists(path)) path = dir + "/" + name;
  if (!std::filesystem::exists(path)) {
    throw Error(ErrorCode::kNotFound, fmt::format("Fashion-MNIST file '{}/{}(.gz)' not found", dir, name),
                "install the Debian package dataset-fashion-mnist (scripts/install-deps.sh) or pass its directory");
  }
  gzFile f = gzopen(path.c_str(), "rb");  // reads uncompressed files too
  if (f == nullptr) throw Error(ErrorCode::kNotFound, fmt::format("cannot open '{}'", path));
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) data.insert(data.end(), buf, buf + n);
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw Error(ErrorCode::kParseError, fmt::format("'{}' is not a readable gzip/IDX file", path));
  return data;
}

uint32_t be32(const std::vector<uint8_t>& d, size_t at) {
  return (uint32_t{d[at]} << 24) | (uint32_t{d[at + 1]} << 16) | (uint32_t{d[at + 2]} << 8) | uint32_t{d[at + 3]};
}

Array images(const std::string& dir, const std::string& name) {
  const std::vector<uint8_t> d = read_idx_file(dir, name);
  if (d.size() < 16 || be32(d, 0) != 0x803) {
    throw Error(ErrorCode::kParseError, fmt::format("'{}': not an IDX image file (magic 0x803)", name));
  }
  const int64_t n = be32(d, 4), rows = be32(d, 8), cols = be32(d, 12);
  if (static_cast<int64_t>(d.size()) != 16 + n * rows * cols) {
    throw Error(ErrorCode::kParseError, fmt::format("'{}': {} bytes for {} images of {}x{}", name, d.size(), n, rows, cols));
  }
  Array a = Array::empty({n, rows, cols}, DType::kU8);
  std::memcpy(a.raw_data(), d.data() + 16, static_cast<size_t>(n * rows * cols));
  return a;
}

Array labels(const std::string& dir, const std::string& name) {
  const std::vector<uint8_t> d = read_idx_file(dir, name);
  if (d.size() < 8 || be32(d, 0) != 0x801) {
    throw Error(ErrorCode::kParseError, fmt::format("'{}': not an IDX label file (magic 0x801)", name));
  }
  const int64_t n = be32(d, 4);
  if (static_cast<int64_t>(d.size()) != 8 + n) {
    throw Error(ErrorCode::kParseError, fmt::format("'{}': {} bytes for {} labels", name, d.size(), n));
  }
  std::vector<int32_t> v(d.begin() + 8, d.end());
  return Array::from_vector<int32_t>(v, {n});
}

}  // namespace

FashionMnist load_fashion_mnist(const std::string& dir) {
  FashionMnist f{images(dir, "train-images-idx3-ubyte"), labels(dir, "train-labels-idx1-ubyte"),
                 images(dir, "t10k-images-idx3-ubyte"), labels(dir, "t10k-labels-idx1-ubyte")};
  if (f.x_train.shape()[0] != f.y_train.shape()[0] || f.x_test.shape()[0] != f.y_test.shape()[0]) {
    throw Error(ErrorCode::kParseError, fmt::format("Fashion-MNIST in '{}': image and label counts differ", dir));
  }
  return f;
}

}  // namespace ingot::datasets
