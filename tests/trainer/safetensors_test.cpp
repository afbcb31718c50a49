// Weights I/O in the safetensors format: round trips of every dtype, byte-exact files in the
// reference implementation's layout, validation of corrupt files, and load_into's all-or-nothing
// semantics.
#include "ingot/trainer/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ingot/runtime/runtime.h"
#include "ingot/runtime/sharding.h"
#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using ::ingot::testing::expect_error;

// --- helpers -------------------------------------------------------------------------------

/// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("ingot_safetensors_test_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  /// Names of the entries in the test directory.
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// `n` as 8 little-endian bytes.
std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

/// The bytes of `values` in host (little-endian) order.
template <class T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// A safetensors file from a header and a data section (no padding added).
std::string file_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

/// An array of `shape` and `dtype` holding exactly `bytes`.
Array from_bytes(const std::string& bytes, const Shape& shape, DType dtype) {
  Array a = Array::empty(shape, dtype);
  EXPECT_EQ(static_cast<size_t>(a.nbytes()), bytes.size());
  if (!bytes.empty()) std::memcpy(a.raw_data(), bytes.data(), bytes.size());
  return a;
}

/// Raw bytes of an array.
std::string raw(const Array& a) {
  return std::string(static_cast<const char*>(a.raw_data()), static_cast<size_t>(a.nbytes()));
}

/// Six elements of `dtype` (shape {2, 3}) chosen to catch conversions: extremes, signed zeros,
/// denormals, infinities and NaNs with payloads, as raw bit patterns.
Array bit_patterns(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return Array::from_vector<bool>({true, false, false, true, true, false}, {2, 3});
    case DType::kI8:
      return Array::from_vector<int8_t>({-128, 127, -1, 0, 1, 42}, {2, 3});
    case DType::kU8:
      return Array::from_vector<uint8_t>({0, 255, 128, 1, 7, 200}, {2, 3});
    case DType::kI32:
      return Array::from_vector<int32_t>({INT32_MIN, INT32_MAX, -1, 0, 1, 123456789}, {2, 3});
    case DType::kU32:
      return Array::from_vector<uint32_t>({0, UINT32_MAX, 0x80000000u, 1, 0xdeadbeefu, 77}, {2, 3});
    case DType::kI64:
      return Array::from_vector<int64_t>({INT64_MIN, INT64_MAX, -1, 0, 1, 1LL << 40}, {2, 3});
    case DType::kU64:
      return Array::from_vector<uint64_t>({0, UINT64_MAX, 1ULL << 63, 1, 0x0123456789abcdefULL, 9}, {2, 3});
    case DType::kF16:  // +0, -0, smallest denormal, +inf, NaN with payload, -max
      return from_bytes(bytes_of<uint16_t>({0x0000, 0x8000, 0x0001, 0x7c00, 0x7e01, 0xfbff}), {2, 3}, dtype);
    case DType::kBF16:  // 1, -inf, NaN with payload, smallest denormal, -0, 3.140625
      return from_bytes(bytes_of<uint16_t>({0x3f80, 0xff80, 0x7fc1, 0x0001, 0x8000, 0x4049}), {2, 3}, dtype);
    case DType::kF32:  // 1.5, -0, signalling NaN, -inf, smallest denormal, max
      return from_bytes(
          bytes_of<uint32_t>({0x3fc00000u, 0x80000000u, 0x7fa00001u, 0xff800000u, 0x00000001u, 0x7f7fffffu}), {2, 3},
          dtype);
    case DType::kF64:
      return from_bytes(bytes_of<uint64_t>({0x3ff8000000000000ULL, 0x8000000000000000ULL, 0x7ff4000000000001ULL,
                                            0xfff0000000000000ULL, 0x0000000000000001ULL, 0x7fefffffffffffffULL}),
                        {2, 3}, dtype);
  }
  return {};
}

// --- dtype names ---------------------------------------------------------------------------

TEST(SafetensorsDTypes, NamesMapBothWays) {
  const std::vector<std::pair<DType, std::string>> expected = {
      {DType::kBool, "BOOL"}, {DType::kI8, "I8"},   {DType::kU8, "U8"},   {DType::kI32, "I32"},
      {DType::kU32, "U32"},   {DType::kI64, "I64"}, {DType::kU64, "U64"}, {DType::kF16, "F16"},
      {DType::kBF16, "BF16"}, {DType::kF32, "F32"}, {DType::kF64, "F64"}};
  ASSERT_EQ(expected.size(), std::size(kAllDTypes));
  for (const auto& [dtype, name] : expected) {
    EXPECT_EQ(safetensors_dtype_name(dtype), name);
    EXPECT_EQ(parse_safetensors_dtype(name), dtype);
  }
  expect_error([] { parse_safetensors_dtype("I16"); }, ErrorCode::kInvalidArgument,
               {"'I16'", "BOOL, U8, I8, F16, BF16, I32, U32, F32, F64, I64, U64"});
  expect_error([] { parse_safetensors_dtype("f32"); }, ErrorCode::kInvalidArgument, {"'f32'"});
}

// --- round trips ---------------------------------------------------------------------------

TEST_F(SafetensorsTest, EveryDTypeRoundTripsBitExactly) {
  std::vector<std::pair<std::string, Array>> tensors;
  for (DType d : kAllDTypes) tensors.emplace_back("t_" + std::string(dtype_name(d)), bit_patterns(d));
  save_safetensors(path("all.safetensors"), tensors);
  const SafetensorsFile f = load_safetensors(path("all.safetensors"));

  EXPECT_EQ(f.path, path("all.safetensors"));
  EXPECT_TRUE(f.metadata.empty());
  // The reference's order: descending dtype alignment, then name.
  EXPECT_EQ(f.names(), (std::vector<std::string>{"t_u64", "t_i64", "t_f64", "t_f32", "t_u32", "t_i32", "t_bf16",
                                                 "t_f16", "t_i8", "t_u8", "t_bool"}));
  for (const auto& [name, original] : tensors) {
    const Array& loaded = f.at(name);
    EXPECT_EQ(loaded.dtype(), original.dtype()) << name;
    EXPECT_EQ(loaded.shape(), (Shape{2, 3})) << name;
    EXPECT_EQ(raw(loaded), raw(original)) << name;
    EXPECT_TRUE(loaded.bitwise_equal(original)) << name;
  }
  // Values, not just bytes, for the half types.
  EXPECT_TRUE(std::isnan(f.at("t_f16").to_doubles()[4]));
  EXPECT_EQ(f.at("t_f16").to_doubles()[5], -65504.0);
  EXPECT_EQ(f.at("t_bf16").to_doubles()[5], 3.140625);
  EXPECT_EQ(f.at("t_bf16").to_doubles()[1], -INFINITY);
  // The file's size: 8 + padded header + 6 elements of every dtype.
  int64_t data = 0;
  for (DType d : kAllDTypes) data += 6 * dtype_size(d);
  const std::string bytes = read_file(path("all.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + static_cast<uint64_t>(data));
}

TEST_F(SafetensorsTest, ScalarsAndEmptyTensorsRoundTrip) {
  const std::vector<std::pair<std::string, Array>> tensors = {
      {"scalar", Array::scalar(2.5, DType::kF32)},       {"empty", Array::zeros({0}, DType::kF32)},
      {"empty3d", Array::zeros({3, 0, 2}, DType::kI64)}, {"iscalar", Array::scalar(-7, DType::kI32)},
      {"bscalar", Array::scalar(1, DType::kBool)},
  };
  save_safetensors(path("s.safetensors"), tensors);
  const std::string bytes = read_file(path("s.safetensors"));
  // Header (hand-written for the reference's layout) and data: f32 scalar, i32 scalar, bool.
  std::string header = R"({"empty3d":{"dtype":"I64","shape":[3,0,2],"data_offsets":[0,0]},)"
                       R"("empty":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                       R"("scalar":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                       R"("iscalar":{"dtype":"I32","shape":[],"data_offsets":[4,8]},)"
                       R"("bscalar":{"dtype":"BOOL","shape":[],"data_offsets":[8,9]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(bytes, file_bytes(header, bytes_of<float>({2.5f}) + bytes_of<int32_t>({-7}) + "\x01"));

  const SafetensorsFile f = load_safetensors(path("s.safetensors"));
  ASSERT_EQ(f.tensors.size(), 5u);
  EXPECT_EQ(f.at("scalar").shape(), Shape{});
  EXPECT_EQ(f.at("scalar").to_vector<float>(), std::vector<float>{2.5f});
  EXPECT_EQ(f.at("iscalar").to_vector<int32_t>(), std::vector<int32_t>{-7});
  EXPECT_EQ(f.at("bscalar").to_vector<bool>(), std::vector<bool>{true});
  EXPECT_EQ(f.at("empty").shape(), Shape{0});
  EXPECT_EQ(f.at("empty").dtype(), DType::kF32);
  EXPECT_EQ(f.at("empty3d").shape(), (Shape{3, 0, 2}));
  EXPECT_EQ(f.at("empty3d").dtype(), DType::kI64);
  EXPECT_EQ(f.at("empty3d").size(), 0);
}

TEST_F(SafetensorsTest, MetadataRoundTripsWithEscapesAndUnicode) {
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"quote \"and\" backslash \\", "line\nbreak\ttab"},
                                                       {"unicode", "gr\xc3\xbc\xc3\x9f \xe2\x82\xac"},
                                                       {"empty", ""}};
  save_safetensors(path("m.safetensors"), {{"w", Array::scalar(1, DType::kF32)}}, metadata);
  const SafetensorsFile f = load_safetensors(path("m.safetensors"));
  EXPECT_EQ(f.metadata, metadata);
  const std::string bytes = read_file(path("m.safetensors"));
  // "__metadata__" comes first, keys sorted, escapes as serde_json writes them, UTF-8 kept.
  EXPECT_NE(bytes.find(R"({"__metadata__":{"empty":"","format":"pt","quote \"and\" backslash \\":)"
                       R"("line\nbreak\ttab","unicode":"gr)"),
            std::string::npos)
      << bytes.substr(8, 200);
  EXPECT_NE(bytes.find("\xe2\x82\xac"), std::string::npos);

  // No metadata: no "__metadata__" entry at all.
  save_safetensors(path("n.safetensors"), {{"w", Array::scalar(1, DType::kF32)}});
  EXPECT_EQ(read_file(path("n.safetensors")).find("__metadata__"), std::string::npos);
  EXPECT_TRUE(load_safetensors(path("n.safetensors")).metadata.empty());
}

TEST_F(SafetensorsTest, SavingOverwritesAnExistingFileAndLeavesNoTemporaryFile) {
  save_safetensors(path("w.safetensors"), {{"a", Array::scalar(1, DType::kF32)}});
  save_safetensors(path("w.safetensors"), {{"b", Array::scalar(2, DType::kF64)}});
  const SafetensorsFile f = load_safetensors(path("w.safetensors"));
  EXPECT_EQ(f.names(), std::vector<std::string>{"b"});
  EXPECT_EQ(f.at("b").to_vector<double>(), std::vector<double>{2.0});
  EXPECT_EQ(listing(), std::vector<std::string>{"w.safetensors"});
}

TEST_F(SafetensorsTest, ShardedArraysAreGatheredOnSave) {
  Runtime rt{RuntimeOptions{.num_cpu_devices = 2}};
  const Mesh mesh({{"batch", 2}}, rt.devices());
  const std::vector<int32_t> v = {1, 2, 3, 4, 5, 6, 7, 8};
  const Array sharded = device_put(Array::from_vector<int32_t>(v, {4, 2}), NamedSharding(mesh, PartitionSpec{"batch"}));
  ASSERT_EQ(sharded.num_shards(), 2);
  save_safetensors(path("sh.safetensors"), {{"x", sharded}});
  const SafetensorsFile f = load_safetensors(path("sh.safetensors"));
  EXPECT_EQ(f.at("x").shape(), (Shape{4, 2}));
  EXPECT_EQ(f.at("x").to_vector<int32_t>(), v);
}

// --- byte-exact layout ---------------------------------------------------------------------

TEST_F(SafetensorsTest, OneTensorFileIsByteExact) {
  save_safetensors(path("one.safetensors"), {{"attn.0", Array::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3})}});
  // 64 bytes of header (already a multiple of 8: no padding), then 6 f32 little-endian.
  const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  std::string expected = std::string("\x40\0\0\0\0\0\0\0", 8) + header;
  const unsigned char data[] = {0, 0, 0,    0,    0, 0, 0x80, 0x3f, 0, 0, 0,    0x40,
                                0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40, 0, 0, 0xa0, 0x40};
  expected.append(reinterpret_cast<const char*>(data), sizeof(data));
  EXPECT_EQ(read_file(path("one.safetensors")), expected);
}

TEST_F(SafetensorsTest, MixedFileIsByteExactWithOrderPaddingAndMetadata) {
  save_safetensors(path("mix.safetensors"),
                   {{"b", Array::from_vector<int8_t>({1, -2, 3}, {3})},
                    {"c", Array::from_vector<bool>({true, false}, {2})},
                    {"z", Array::from_vector<float>({-1.0f}, {1})},
                    {"a", Array::scalar(1.5, DType::kF64)}},
                   {{"step", "7"}, {"framework", "ingot"}});
  // Tensors by descending dtype alignment (F64, F32, I8, BOOL), then name; 265 header bytes
  // padded with 7 spaces to 272.
  const std::string header = R"({"__metadata__":{"framework":"ingot","step":"7"},)"
                             R"("a":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                             R"("z":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                             R"("b":{"dtype":"I8","shape":[3],"data_offsets":[12,15]},)"
                             R"("c":{"dtype":"BOOL","shape":[2],"data_offsets":[15,17]}})";
  ASSERT_EQ(header.size(), 265u);
  const std::string expected = std::string("\x10\x01\0\0\0\0\0\0", 8) + header + "       " +
                               std::string("\0\0\0\0\0\0\xf8\x3f", 8) +  // 1.5
                               std::string("\0\0\x80\xbf", 4) +          // -1.0f
                               std::string("\x01\xfe\x03", 3) +          // 1, -2, 3
                               std::string("\x01\x00", 2);               // true, false
  EXPECT_EQ(read_file(path("mix.safetensors")), expected);
}

TEST_F(SafetensorsTest, EmptyFileIsByteExact) {
  save_safetensors(path("e.safetensors"), {});
  EXPECT_EQ(read_file(path("e.safetensors")), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  const SafetensorsFile f = load_safetensors(path("e.safetensors"));
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST_F(SafetensorsTest, ReadsFilesFromOtherWritersInOffsetOrder) {
  // Keys out of data order, whitespace, no padding, an unknown extra field (ignored, as by the
  // reference), metadata last.
  const std::string header = R"({ "second": {"shape": [2], "dtype": "I32", "data_offsets": [4, 12],
      "extra": [1]},
    "first" : {"data_offsets": [0, 4], "dtype": "F32", "shape": []},
    "__metadata__": {"k": "v"} })";
  write_file(path("o.safetensors"), file_bytes(header, bytes_of<float>({0.25f}) + bytes_of<int32_t>({-3, 9})));
  const SafetensorsFile f = load_safetensors(path("o.safetensors"));
  EXPECT_EQ(f.names(), (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(f.at("first").to_vector<float>(), std::vector<float>{0.25f});
  EXPECT_EQ(f.at("second").to_vector<int32_t>(), (std::vector<int32_t>{-3, 9}));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_EQ(f.find("third"), nullptr);
  expect_error([&] { f.at("third"); }, ErrorCode::kNotFound, {"'third'", path("o.safetensors"), "'first', 'second'"});
}

// --- save errors ---------------------------------------------------------------------------

TEST_F(SafetensorsTest, BadNamesAndArraysAreClearErrorsAndWriteNothing) {
  const Array x = Array::scalar(1, DType::kF32);
  const std::string p = path("bad.safetensors");
  expect_error([&] { save_safetensors(p, {{"w", x}, {"b", x}, {"w", x}}); }, ErrorCode::kInvalidArgument,
               {"'w' is used twice"});
  expect_error([&] { save_safetensors(p, {{"", x}}); }, ErrorCode::kInvalidArgument, {"name is empty"});
  expect_error([&] { save_safetensors(p, {{"__metadata__", x}}); }, ErrorCode::kInvalidArgument,
               {"'__metadata__' is reserved"});
  expect_error([&] { save_safetensors(p, {{"w", Array()}}); }, ErrorCode::kFailedPrecondition,
               {"tensor 'w'", "invalid array"});
  expect_error([&] { save_safetensors(p, {{"bad\xff", x}}); }, ErrorCode::kInvalidArgument,
               {"tensor name 'bad\\xff'", "not valid UTF-8"});
  expect_error([&] { save_safetensors(p, {{"w", x}}, {{"k", "\xc3"}}); }, ErrorCode::kInvalidArgument,
               {"metadata key 'k'", "not valid UTF-8"});
  expect_error([&] { save_safetensors(path("no/such/dir/w.safetensors"), {{"w", x}}); }, ErrorCode::kNotFound,
               {"no/such/dir"});
  EXPECT_TRUE(listing().empty());
}

TEST_F(SafetensorsTest, FailedSaveKeepsTheOldFileAndRemovesTheTemporaryFile) {
  // The destination is a directory: the data is written to the temporary file, then the rename
  // fails; nothing may be left behind.
  fs::create_directories(path("target"));
  expect_error([&] { save_safetensors(path("target"), {{"w", Array::scalar(3, DType::kF32)}}); },
               ErrorCode::kInvalidArgument, {"renaming", path("target")});
  EXPECT_EQ(listing(), std::vector<std::string>{"target"});
  EXPECT_TRUE(fs::is_empty(path("target")));
}

// --- load errors ---------------------------------------------------------------------------

/// Writes `bytes` to a file and expects load_safetensors to fail with kParseError naming the file
/// and every needle.
void expect_corrupt(const std::string& p, const std::string& bytes, std::vector<std::string> needles) {
  write_file(p, bytes);
  needles.push_back(p);
  expect_error([&] { load_safetensors(p); }, ErrorCode::kParseError, needles);
}

TEST_F(SafetensorsTest, MissingFilesAndDirectoriesAreClearErrors) {
  expect_error([&] { load_safetensors(path("none.safetensors")); }, ErrorCode::kNotFound,
               {"opening", path("none.safetensors"), "No such file"});
  expect_error([&] { load_safetensors(dir_.string()); }, ErrorCode::kInvalidArgument, {"not a regular file"});
  // A FIFO is refused at once: opening it for reading would wait for a writer forever.
  ASSERT_EQ(::mkfifo(path("fifo.safetensors").c_str(), 0600), 0);
  expect_error([&] { load_safetensors(path("fifo.safetensors")); }, ErrorCode::kInvalidArgument,
               {path("fifo.safetensors"), "not a regular file"});
}

TEST_F(SafetensorsTest, BadHeaderLengthsAreClearErrors) {
  const std::string p = path("c.safetensors");
  expect_corrupt(p, "", {"has 0 bytes, fewer than the 8-byte header length"});
  expect_corrupt(p, std::string("\x08\0\0", 3), {"has 3 bytes"});
  expect_corrupt(p, le64(100'000'001) + "{}", {"header length 100000001 exceeds the limit"});
  expect_corrupt(p, le64(UINT64_MAX) + "{}", {"header length 18446744073709551615"});
  expect_corrupt(p, le64(40) + "{}      ", {"header length 40 exceeds the 8 bytes after"});
}

TEST_F(SafetensorsTest, DeeplyNestedHeadersAreRefusedBeforeParsing) {
  const std::string p = path("deep.safetensors");
  // 100,000 levels used to crash the process (stack); refused in one linear scan instead.
  const std::string deep = "{\"a\":" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  expect_corrupt(p, file_bytes(deep, ""), {"nests JSON arrays and objects more than 64 levels deep"});
  // 64 levels are allowed (then the entry is refused for what it is, not for its depth); brackets
  // inside strings do not count.
  const std::string at_limit = "{\"a\":" + std::string(63, '[') + std::string(63, ']') + "}";
  expect_corrupt(p, file_bytes(at_limit, ""), {"tensor 'a'"});
  const std::string quoted = R"({"__metadata__": {"note": "[[[[\"[[[["}})";
  write_file(p, file_bytes(quoted, ""));
  EXPECT_NO_THROW(load_safetensors(p));
}

TEST_F(SafetensorsTest, BadJsonIsAClearError) {
  const std::string p = path("c.safetensors");
  expect_corrupt(p, file_bytes("{\"a\": ", ""), {"not valid JSON"});
  expect_corrupt(p, file_bytes("{\"a\xff\": 1}", ""), {"not valid JSON", "ill-formed UTF-8", "\\xff"});
  expect_corrupt(p, file_bytes(std::string("{}\0\0\0\0\0\0", 8), ""), {"not valid JSON"});
  expect_corrupt(p, file_bytes("[1, 2]  ", ""), {"JSON array, not an object"});
  expect_corrupt(p,
                 file_bytes(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                            R"( "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                            "\x01\x02"),
                 {"names 'a' twice"});
}

TEST_F(SafetensorsTest, BadEntriesAreClearErrors) {
  const std::string p = path("c.safetensors");
  auto one = [](const std::string& entry, const std::string& data = "") {
    return file_bytes(R"({"w": )" + entry + "}", data);
  };
  expect_corrupt(p, one(R"({"dtype": "I16", "shape": [1], "data_offsets": [0, 2]})", "ab"),
                 {"tensor 'w'", "dtype \"I16\"", "not support"});
  expect_corrupt(p, one(R"({"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]})", "a"),
                 {"tensor 'w'", "\"F8_E4M3\""});
  expect_corrupt(p, one(R"({"dtype": 5, "shape": [1], "data_offsets": [0, 1]})", "a"),
                 {"tensor 'w'", "\"dtype\" is 5"});
  expect_corrupt(p, one(R"({"dtype": "U8", "data_offsets": [0, 1]})", "a"), {"tensor 'w' has no \"shape\""});
  expect_corrupt(p, one("[1]"), {"tensor 'w' is [1], not an object"});
  expect_corrupt(p, one(R"({"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]})"), {"tensor 'w'", "size -1"});
  expect_corrupt(p, one(R"({"dtype": "U8", "shape": [1.5], "data_offsets": [0, 0]})"), {"tensor 'w'", "size 1.5"});
  expect_corrupt(p, one(R"({"dtype": "U8", "shape": 3, "data_offsets": [0, 3]})", "abc"),
                 {"tensor 'w'", "\"shape\" is 3"});
  expect_corrupt(p, one(R"({"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]})"),
                 {"tensor 'w'", "more than 576460752303423488 elements"});
  expect_corrupt(p, one(R"({"dtype": "U8", "shape": [1], "data_offsets": [0]})", "a"),
                 {"tensor 'w'", "\"data_offsets\" is [0]"});
  expect_corrupt(p, one(R"({"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]})", "a"), {"tensor 'w'", "[-1,0]"});
  expect_corrupt(p, file_bytes(R"({"__metadata__": {"k": 1}})", ""), {"\"__metadata__\" entry 'k' is 1, not a string"});
  expect_corrupt(p, file_bytes(R"({"__metadata__": "x"})", ""), {"\"__metadata__\" is \"x\""});
}

TEST_F(SafetensorsTest, BadOffsetsAreClearErrors) {
  const std::string p = path("c.safetensors");
  auto f32x2 = [](const std::string& offsets) {
    return R"({"dtype": "F32", "shape": [2], "data_offsets": )" + offsets + "}";
  };
  // Size not matching shape * dtype size.
  expect_corrupt(p, file_bytes(R"({"w": )" + f32x2("[0, 4]") + "}", "abcd"),
                 {"tensor 'w'", "shape (2,)", "span 4 bytes", "need 8"});
  // End before begin.
  expect_corrupt(p, file_bytes(R"({"w": )" + f32x2("[8, 0]") + "}", "abcdefgh"),
                 {"tensor 'w'", "[8, 0]", "end offset is before the begin"});
  // Out of range: a truncated data section.
  expect_corrupt(p, file_bytes(R"({"w": )" + f32x2("[0, 8]") + "}", "abcde"),
                 {"tensor 'w'", "past the end of the file", "has 5 bytes"});
  // Overlap.
  expect_corrupt(p, file_bytes(R"({"v": )" + f32x2("[0, 8]") + R"(, "w": )" + f32x2("[4, 12]") + "}", "abcdefghijkl"),
                 {"tensor 'w'", "overlaps tensor 'v', which ends at 8"});
  // Gap between tensors, and before the first one.
  expect_corrupt(
      p, file_bytes(R"({"v": )" + f32x2("[0, 8]") + R"(, "w": )" + f32x2("[12, 20]") + "}", std::string(20, 'x')),
      {"tensor 'w'", "gap of 4 bytes after tensor 'v'"});
  expect_corrupt(p, file_bytes(R"({"w": )" + f32x2("[4, 12]") + "}", std::string(12, 'x')),
                 {"tensor 'w'", "gap of 4 bytes after the start of the data section"});
  // Trailing bytes after the last tensor.
  expect_corrupt(p, file_bytes(R"({"w": )" + f32x2("[0, 8]") + "}", std::string(11, 'x')),
                 {"11 bytes", "cover only 8", "3 trailing bytes"});
  // A BOOL element other than 0/1.
  expect_corrupt(
      p,
      file_bytes(R"({"m": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}})", std::string("\x01\x00\x02", 3)),
      {"tensor 'm' (BOOL) holds the byte 2 at element 2"});
}

TEST_F(SafetensorsTest, EveryTruncationIsAClearError) {
  save_safetensors(path("full.safetensors"), {{"w", bit_patterns(DType::kF32)}, {"b", bit_patterns(DType::kI8)}},
                   {{"epoch", "3"}});
  const std::string bytes = read_file(path("full.safetensors"));
  ASSERT_GT(bytes.size(), 100u);
  const std::string p = path("cut.safetensors");
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_file(p, bytes.substr(0, n));
    try {
      load_safetensors(p);
      ADD_FAILURE() << "a file cut to " << n << " of " << bytes.size() << " bytes loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kParseError) << n << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
}

TEST_F(SafetensorsTest, CorruptedBytesNeverCrash) {
  // Every single-byte change of a small file either loads or throws ingot::Error.
  save_safetensors(path("full.safetensors"), {{"w", bit_patterns(DType::kBF16)}, {"m", bit_patterns(DType::kBool)}});
  const std::string bytes = read_file(path("full.safetensors"));
  const std::string p = path("flip.safetensors");
  int loaded = 0;
  int rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char value : {0x00, 0x22, 0x7b, 0x39, 0xff}) {
      std::string changed = bytes;
      changed[i] = static_cast<char>(value);
      write_file(p, changed);
      try {
        load_safetensors(p);
        ++loaded;
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(loaded, 0);    // e.g. changed data bytes of the bf16 tensor
  EXPECT_GT(rejected, 0);  // e.g. a broken header
}

// --- load_into -----------------------------------------------------------------------------

TEST_F(SafetensorsTest, LoadIntoCopiesEveryTarget) {
  save_safetensors(path("w.safetensors"), {{"dense/kernel", Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                                           {"dense/bias", Array::from_vector<float>({7, 8, 9}, {3})},
                                           {"optimizer/iteration", Array::scalar(5, DType::kI64)}});
  const SafetensorsFile f = load_safetensors(path("w.safetensors"));
  Array kernel = Array::zeros({2, 3}, DType::kF32);
  Array bias = Array::zeros({3}, DType::kF32);
  const Array old_kernel = kernel;  // shares the old buffer
  load_into(f, {{"dense/kernel", &kernel}, {"dense/bias", &bias}});
  EXPECT_EQ(kernel.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(bias.to_vector<float>(), (std::vector<float>{7, 8, 9}));
  // The target got a new buffer: neither the old value nor the file's array is aliased.
  EXPECT_EQ(old_kernel.to_vector<float>(), std::vector<float>(6, 0.0f));
  kernel.data<float>()[0] = 100;
  EXPECT_EQ(f.at("dense/kernel").to_vector<float>()[0], 1.0f);
}

TEST_F(SafetensorsTest, LoadIntoKeepsTheTargetsSharding) {
  Runtime rt{RuntimeOptions{.num_cpu_devices = 2}};
  const NamedSharding sharding(Mesh({{"batch", 2}}, rt.devices()), PartitionSpec{"batch"});
  save_safetensors(path("w.safetensors"), {{"x", Array::from_vector<int32_t>({1, 2, 3, 4}, {4})}});
  const SafetensorsFile f = load_safetensors(path("w.safetensors"));
  Array x = device_put(Array::zeros({4}, DType::kI32), sharding);
  load_into(f, {{"x", &x}});
  EXPECT_TRUE(x.sharding() == sharding);
  EXPECT_EQ(x.shards().at(1).to_vector<int32_t>(), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(to_host(x).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST_F(SafetensorsTest, LoadIntoMismatchChangesNothing) {
  save_safetensors(path("w.safetensors"), {{"a", Array::from_vector<float>({1, 2}, {2})},
                                           {"b", Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})},
                                           {"c", Array::from_vector<int32_t>({1, 2}, {2})}});
  const SafetensorsFile f = load_safetensors(path("w.safetensors"));
  const std::string file = path("w.safetensors");
  Array a = Array::full({2}, -1, DType::kF32);
  Array b = Array::full({2, 3}, -1, DType::kF32);
  Array c = Array::full({2}, -1, DType::kF32);
  Array d = Array::full({1}, -1, DType::kF32);
  auto unchanged = [&] {
    EXPECT_EQ(a.to_vector<float>(), std::vector<float>(2, -1.0f));
    EXPECT_EQ(b.to_vector<float>(), std::vector<float>(6, -1.0f));
    EXPECT_EQ(c.to_vector<float>(), std::vector<float>(2, -1.0f));
  };
  // "a" is fine and comes first: it must still not change when "b" mismatches.
  expect_error([&] { load_into(f, {{"a", &a}, {"b", &b}}); }, ErrorCode::kShapeMismatch,
               {"variable 'b'", "shape (2, 3)", "shape (3, 2)", file});
  unchanged();
  expect_error([&] { load_into(f, {{"a", &a}, {"c", &c}}); }, ErrorCode::kDTypeMismatch,
               {"variable 'c'", "dtype f32", "dtype i32", file});
  unchanged();
  expect_error([&] { load_into(f, {{"a", &a}, {"d", &d}}); }, ErrorCode::kNotFound,
               {"variable 'd'", file, "'a', 'b', 'c'"});
  unchanged();
  expect_error([&] { load_into(f, {{"a", &a}, {"a", &a}}); }, ErrorCode::kInvalidArgument, {"'a' is given twice"});
  unchanged();
  expect_error([&] { load_into(f, {{"a", &a}, {"b", nullptr}}); }, ErrorCode::kInvalidArgument, {"'b'", "null"});
  unchanged();
  Array invalid;
  expect_error([&] { load_into(f, {{"a", &a}, {"b", &invalid}}); }, ErrorCode::kFailedPrecondition,
               {"variable 'b'", "invalid"});
  unchanged();
  EXPECT_FALSE(invalid.valid());
}

}  // namespace
}  // namespace ingot
