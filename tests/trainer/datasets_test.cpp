// The Fashion-MNIST IDX reader (include/ingot/trainer/datasets.h) on small hand-made IDX files:
// valid files (plain and gzip), and corrupt headers whose declared sizes overflow 64 bits.
#include "ingot/trainer/datasets.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ingot/runtime/error.h"

namespace ingot::datasets {
namespace {

namespace fs = std::filesystem;

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

/// IDX image file: magic 0x803, n, rows, cols (big-endian), then n*rows*cols bytes (pixel i is
/// i mod 251) — unless `header_only`.
std::vector<uint8_t> image_file(uint32_t n, uint32_t rows, uint32_t cols, bool header_only = false) {
  std::vector<uint8_t> d;
  for (uint32_t v : {0x803u, n, rows, cols}) put_be32(d, v);
  if (!header_only) {
    for (uint64_t i = 0; i < uint64_t{n} * rows * cols; ++i) d.push_back(static_cast<uint8_t>(i % 251));
  }
  return d;
}

std::vector<uint8_t> label_file(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> d;
  put_be32(d, 0x801);
  put_be32(d, static_cast<uint32_t>(labels.size()));
  d.insert(d.end(), labels.begin(), labels.end());
  return d;
}

class IdxDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ingot_datasets_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::vector<uint8_t>& d) {
    std::ofstream(dir_ / name, std::ios::binary).write(reinterpret_cast<const char*>(d.data()), d.size());
  }
  void write_gz(const std::string& name, const std::vector<uint8_t>& d) {
    gzFile f = gzopen((dir_ / (name + ".gz")).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, d.data(), static_cast<unsigned>(d.size())), static_cast<int>(d.size()));
    gzclose(f);
  }
  /// The ingot::Error load_fashion_mnist_test throws (fails the test if it returns).
  Error test_split_error() {
    try {
      (void)load_fashion_mnist_test(dir_.string());
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "load_fashion_mnist_test accepted the files";
    return Error(ErrorCode::kInternal, "");
  }

  fs::path dir_;
};

TEST_F(IdxDir, ReadsPlainAndGzipFiles) {
  write("t10k-images-idx3-ubyte", image_file(3, 2, 5));
  write_gz("t10k-labels-idx1-ubyte", label_file({7, 0, 9}));
  const FashionMnist f = load_fashion_mnist_test(dir_.string());
  EXPECT_FALSE(f.x_train.valid());
  ASSERT_EQ(f.x_test.shape(), (std::vector<int64_t>{3, 2, 5}));
  EXPECT_EQ(f.x_test.dtype(), DType::kU8);
  EXPECT_EQ(f.x_test.data<uint8_t>()[29], 29);
  EXPECT_EQ(f.y_test.to_vector<int32_t>(), (std::vector<int32_t>{7, 0, 9}));
}

TEST_F(IdxDir, HeadersWhoseSizesOverflowAreParseErrorsNamingTheFile) {
  // 2^32-1 images of (2^32-1)x(2^32-1): the byte count passes 2^63 (it wrapped around before).
  write("t10k-images-idx3-ubyte", image_file(0xffffffffu, 0xffffffffu, 0xffffffffu, /*header_only=*/true));
  write("t10k-labels-idx1-ubyte", label_file({1}));
  Error e = test_split_error();
  EXPECT_EQ(e.code(), ErrorCode::kParseError);
  EXPECT_NE(std::string(e.what()).find("t10k-images-idx3-ubyte'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("more than 2^63"), std::string::npos) << e.what();

  // A product that wraps to exactly the file's size in 64 bits: 2^32 * 2^32 would be 0 mod 2^64.
  write("t10k-images-idx3-ubyte", image_file(0x10000u, 0x10000u, 0x10000u, /*header_only=*/true));
  e = test_split_error();
  EXPECT_EQ(e.code(), ErrorCode::kParseError);
  EXPECT_NE(std::string(e.what()).find("65536 images of 65536x65536"), std::string::npos) << e.what();
}

TEST_F(IdxDir, TruncatedDataAndCountMismatchesAreParseErrors) {
  std::vector<uint8_t> cut = image_file(3, 2, 5);
  cut.pop_back();
  write("t10k-images-idx3-ubyte", cut);
  write("t10k-labels-idx1-ubyte", label_file({1, 2, 3}));
  Error e = test_split_error();
  EXPECT_EQ(e.code(), ErrorCode::kParseError);
  EXPECT_NE(std::string(e.what()).find("45 bytes for 3 images of 2x5 (expected 46"), std::string::npos) << e.what();

  write("t10k-images-idx3-ubyte", image_file(3, 2, 5));
  write("t10k-labels-idx1-ubyte", label_file({1, 2}));
  e = test_split_error();
  EXPECT_EQ(e.code(), ErrorCode::kParseError);
  EXPECT_NE(std::string(e.what()).find("3 images but 2 labels"), std::string::npos) << e.what();

  std::vector<uint8_t> labels = label_file({1, 2, 3});
  labels.push_back(4);  // one label more than declared
  write("t10k-labels-idx1-ubyte", labels);
  e = test_split_error();
  EXPECT_EQ(e.code(), ErrorCode::kParseError);
  EXPECT_NE(std::string(e.what()).find("12 bytes for 3 labels"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace ingot::datasets
