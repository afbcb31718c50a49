// .npy/.npz loading and saving against files NumPy wrote (testdata/npy, made by
// testdata/make_npy_fixtures.py), and every kind of bad input.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ingot/trainer/model.h"
#include "ingot/trainer/npy.h"
#include "test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return std::string(INGOT_SOURCE_DIR) + "/tests/trainer/testdata/npy/" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "ingot_npy_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

Array parse(const std::string& bytes) {
  return parse_npy(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), "'test.npy'");
}

template <class T>
void expect_fixture(const std::string& code, DType dtype, const std::vector<T>& values) {
  for (const std::string& suffix : {std::string(), std::string("_be")}) {
    if (!suffix.empty() && dtype_size(dtype) == 1) continue;
    SCOPED_TRACE(code + suffix);
    const Array a = load_npy(fixture(code + suffix + ".npy"));
    EXPECT_EQ(a.dtype(), dtype);
    EXPECT_EQ(a.shape(), (Shape{2, 3}));
    if constexpr (std::is_same_v<T, bool>) {
      testing::expect_values(a, std::vector<double>(values.begin(), values.end()));
    } else {
      EXPECT_EQ(a.to_vector<T>(), values);
    }
  }
}

TEST(Npy, LoadsEveryDTypeInBothByteOrders) {
  expect_fixture<bool>("bool", DType::kBool, {true, false, true, true, false, false});
  expect_fixture<int8_t>("i1", DType::kI8, {0, 1, -2, 127, -128, 5});
  expect_fixture<uint8_t>("u1", DType::kU8, {0, 1, 2, 255, 128, 7});
  expect_fixture<int32_t>("i4", DType::kI32, {0, 1, -2, 2147483647, -2147483647 - 1, 305419896});
  expect_fixture<uint32_t>("u4", DType::kU32, {0, 1, 2, 4294967295u, 2147483648u, 305419896});
  expect_fixture<int64_t>(
      "i8", DType::kI64,
      {0, 1, -2, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 81985529216486895});
  expect_fixture<uint64_t>("u8", DType::kU64,
                           {0, 1, 2, std::numeric_limits<uint64_t>::max(), uint64_t{1} << 63, 81985529216486895});
  expect_fixture<float>(
      "f4", DType::kF32,
      {0.0f, 1.0f, -2.5f, std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), 0.1f});
  expect_fixture<double>(
      "f8", DType::kF64,
      {0.0, 1.0, -2.5, std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(), 0.1});
  for (const char* name : {"f2.npy", "f2_be.npy"}) {
    SCOPED_TRACE(name);
    const Array a = load_npy(fixture(name));
    EXPECT_EQ(a.dtype(), DType::kF16);
    testing::expect_values(a, {0.0, 1.0, -2.5, 65504.0, 0.00006103515625, -0.0});
  }
}

TEST(Npy, LoadsFortranOrderScalarsEmptyArraysAndFormatVersions2And3) {
  const Array f = load_npy(fixture("fortran_f4.npy"));
  EXPECT_EQ(f.shape(), (Shape{2, 3, 4}));
  std::vector<float> iota(24);
  for (int i = 0; i < 24; ++i) iota[i] = static_cast<float>(i);
  EXPECT_EQ(f.to_vector<float>(), iota);
  const Array fb = load_npy(fixture("fortran_be_i8.npy"));
  EXPECT_EQ(fb.shape(), (Shape{3, 2}));
  EXPECT_EQ(fb.to_vector<int64_t>(), (std::vector<int64_t>{-3, -2, -1, 0, 1, 2}));
  const Array s = load_npy(fixture("scalar_f8.npy"));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.to_vector<double>(), std::vector<double>{3.5});
  EXPECT_EQ(load_npy(fixture("empty_f4.npy")).shape(), Shape{0});
  EXPECT_EQ(load_npy(fixture("empty_i4.npy")).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(load_npy(fixture("vector_i4.npy")).to_vector<int32_t>(), (std::vector<int32_t>{10, 20, 30, 40, 50}));
  const std::vector<float> f4 = load_npy(fixture("f4.npy")).to_vector<float>();
  EXPECT_EQ(load_npy(fixture("f4_v2.npy")).to_vector<float>(), f4);
  EXPECT_EQ(load_npy(fixture("f4_v3.npy")).to_vector<float>(), f4);
}

TEST(Npy, SavesTheBytesNumPyWrites) {
  for (const char* name : {"bool.npy", "i1.npy", "u1.npy", "i4.npy", "u4.npy", "i8.npy", "u8.npy", "f2.npy", "f4.npy",
                           "f8.npy", "scalar_f8.npy", "empty_f4.npy", "empty_i4.npy", "vector_i4.npy", "rows_f4.npy"}) {
    SCOPED_TRACE(name);
    const std::string out = temp_path(std::string("saved_") + name);
    save_npy(out, load_npy(fixture(name)));
    EXPECT_EQ(read_bytes(out), read_bytes(fixture(name)));
  }
  // Big-endian and Fortran-order input is written little-endian in C order.
  const std::string out = temp_path("fortran_resaved.npy");
  save_npy(out, load_npy(fixture("fortran_be_i8.npy")));
  const Array back = load_npy(out);
  EXPECT_EQ(back.to_vector<int64_t>(), (std::vector<int64_t>{-3, -2, -1, 0, 1, 2}));
  EXPECT_NE(read_bytes(out).find("'<i8', 'fortran_order': False"), std::string::npos);
}

TEST(Npy, SaveRefusesBf16AndInvalidArraysAndKeepsTheOldFile) {
  const std::string out = write_temp("keep.npy", "old contents");
  testing::expect_error([&] { save_npy(out, Array::zeros({2}, DType::kBF16)); }, ErrorCode::kInvalidArgument,
                        {"save_npy", out, "bfloat16", "float32"});
  testing::expect_error([&] { save_npy(out, Array()); }, ErrorCode::kFailedPrecondition, {"save_npy", "invalid"});
  EXPECT_EQ(read_bytes(out), "old contents");
  testing::expect_error([&] { save_npy(temp_path("no/such/dir/a.npy"), testing::f32({1})); }, ErrorCode::kNotFound,
                        {"no/such/dir"});
}

TEST(Npz, LoadsStoredAndCompressedArchivesNumPyWrote) {
  for (const char* name : {"mnist.npz", "mnist_compressed.npz"}) {
    SCOPED_TRACE(name);
    const NpzFile z = load_npz(fixture(name));
    EXPECT_EQ(z.names(), (std::vector<std::string>{"x_train", "y_train", "x_test", "y_test"}));
    const Array& x = z.at("x_train");
    EXPECT_EQ(x.shape(), (Shape{6, 4, 4}));
    EXPECT_EQ(x.dtype(), DType::kU8);
    const std::vector<uint8_t> xv = x.to_vector<uint8_t>();
    for (int i = 0; i < 96; ++i) EXPECT_EQ(xv[i], (17 * i) % 256);
    EXPECT_EQ(z.at("y_test").to_vector<uint8_t>(), (std::vector<uint8_t>{3, 9}));
    EXPECT_TRUE(z.contains("y_train"));
    EXPECT_FALSE(z.contains("labels"));
    testing::expect_error([&] { (void)z.at("labels"); }, ErrorCode::kNotFound, {"labels", "'x_train'", "'y_test'"});
  }
  const NpzFile p = load_npz(fixture("positional.npz"));
  EXPECT_EQ(p.names(), (std::vector<std::string>{"arr_0", "arr_1"}));
  EXPECT_EQ(p.at("arr_1").to_vector<int64_t>()[3], std::numeric_limits<int64_t>::max());
}

TEST(Npz, SaveThenLoadRoundTripsStoredAndCompressed) {
  const std::vector<std::pair<std::string, Array>> arrays = {{"x", testing::f32({1, 2, 3, 4, 5, 6}, {2, 3})},
                                                             {"labels", testing::i32({0, 1})},
                                                             {"mask", Array::from_vector<bool>({true, false}, {2})}};
  for (const bool compress : {false, true}) {
    SCOPED_TRACE(compress);
    const std::string path = temp_path(compress ? "c.npz" : "s.npz");
    save_npz(path, arrays, compress);
    const NpzFile z = load_npz(path);
    EXPECT_EQ(z.names(), (std::vector<std::string>{"x", "labels", "mask"}));
    EXPECT_EQ(z.at("x").to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(z.at("labels").to_vector<int32_t>(), (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(z.at("mask").dtype(), DType::kBool);
  }
  const std::string path = write_temp("dup.npz", "old");
  testing::expect_error([&] { save_npz(path, {{"a", testing::f32({1})}, {"a", testing::f32({2})}}); },
                        ErrorCode::kInvalidArgument, {"'a'", "twice"});
  testing::expect_error([&] { save_npz(path, {{"", testing::f32({1})}}); }, ErrorCode::kInvalidArgument,
                        {"empty name"});
  testing::expect_error([&] { save_npz(path, {{"w", Array::zeros({1}, DType::kBF16)}}); }, ErrorCode::kInvalidArgument,
                        {"'w'", "bfloat16"});
  EXPECT_EQ(read_bytes(path), "old");
}

TEST(NpyErrors, TruncatedWrongMagicVersionAndHeaderSyntax) {
  const std::string good = read_bytes(fixture("f4.npy"));
  testing::expect_error([&] { parse(good.substr(0, 4)); }, ErrorCode::kParseError, {"'test.npy'", "4 bytes"});
  testing::expect_error([&] { parse("PK\x03\x04" + good.substr(4)); }, ErrorCode::kParseError,
                        {"bytes 0-5", "PK\\x03\\x04", "magic"});
  std::string v4 = good;
  v4[6] = 4;
  testing::expect_error([&] { parse(v4); }, ErrorCode::kParseError, {"version 4.0", "byte 6"});
  testing::expect_error([&] { parse(good.substr(0, 9)); }, ErrorCode::kParseError, {"header length"});
  testing::expect_error([&] { parse(good.substr(0, 60)); }, ErrorCode::kParseError, {"runs past the end"});
  testing::expect_error([&] { parse(good.substr(0, good.size() - 3)); }, ErrorCode::kParseError,
                        {"needs 24 data bytes", "has 21", "truncated"});
  testing::expect_error([&] { parse(good + "xx"); }, ErrorCode::kParseError, {"needs 24 data bytes", "has 26"});
  auto with_header = [&](std::string dict) {
    dict.resize(117, ' ');
    dict += '\n';
    std::string out = good.substr(0, 8);
    out += static_cast<char>(118);
    out += '\0';
    return out + dict + good.substr(128);
  };
  EXPECT_EQ(parse(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }")).to_vector<float>(),
            load_npy(fixture("f4.npy")).to_vector<float>());
  EXPECT_EQ(parse(with_header("{\"shape\": (2L, 3L), 'descr': '<f4', 'fortran_order': False}")).shape(), (Shape{2, 3}));
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3) ", {"byte 128", "the end of the header"}},
      {"['descr', '<f4']", {"'{'"}},
      {"{'descr': '<f4', 'fortran_order': False}", {"no 'shape'"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", {"unknown key 'extra'"}},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", {"'descr' twice"}},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", {"fortran_order"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", {"-3"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", {"'shape' is not a tuple"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999)}", {"more than"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", {"below 2^63"}},
      {"{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3)}", {"no byte order"}},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}", {"byte"}},
  };
  for (const auto& [dict, needles] : bad) {
    SCOPED_TRACE(dict);
    testing::expect_error([&] { parse(with_header(dict)); }, ErrorCode::kParseError, needles);
  }
}

TEST(NpyErrors, UnsupportedDTypesObjectArraysAndBadBools) {
  testing::expect_error([&] { load_npy(fixture("object.npy")); }, ErrorCode::kUnimplemented,
                        {"object.npy", "'|O'", "pickles"});
  testing::expect_error([&] { load_npy(fixture("complex_c8.npy")); }, ErrorCode::kUnimplemented, {"'<c8'", "<f4"});
  testing::expect_error([&] { load_npy(fixture("unicode_U3.npy")); }, ErrorCode::kUnimplemented, {"'<U3'"});
  testing::expect_error([&] { load_npy(fixture("int16.npy")); }, ErrorCode::kUnimplemented, {"'<i2'"});
  testing::expect_error([&] { load_npy(fixture("structured.npy")); }, ErrorCode::kUnimplemented, {"structured"});
  std::string b = read_bytes(fixture("bool.npy"));
  b[b.size() - 2] = 2;
  testing::expect_error([&] { parse(b); }, ErrorCode::kParseError,
                        {"bool element at byte " + std::to_string(b.size() - 2), "not 0 or 1"});
}

TEST(NpyErrors, MissingFilesDirectoriesAndFifos) {
  testing::expect_error([&] { load_npy(temp_path("absent.npy")); }, ErrorCode::kNotFound, {"load_npy", "absent.npy"});
  testing::expect_error([&] { load_npy(::testing::TempDir()); }, ErrorCode::kInvalidArgument, {"not a regular file"});
  testing::expect_error([&] { load_npz(temp_path("absent.npz")); }, ErrorCode::kNotFound, {"load_npz", "absent.npz"});
  const std::string fifo = temp_path("fifo.npy");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  testing::expect_error([&] { load_npy(fifo); }, ErrorCode::kInvalidArgument, {"fifo.npy", "not a regular file"});
}

TEST(NpzErrors, NotAZipCorruptMembersAndMembersThatAreNotArrays) {
  testing::expect_error([&] { load_npz(write_temp("empty.npz", "")); }, ErrorCode::kParseError, {"empty.npz", "empty"});
  testing::expect_error([&] { load_npz(fixture("f4.npy")); }, ErrorCode::kParseError, {"f4.npy", "not a valid zip"});
  const std::string stored = read_bytes(fixture("mnist.npz"));
  testing::expect_error([&] { load_npz(write_temp("cut.npz", stored.substr(0, stored.size() / 2))); },
                        ErrorCode::kParseError, {"cut.npz"});
  std::string flipped = stored;
  const size_t data = flipped.find("\x93NUMPY") + 128 + 5;  // inside x_train's elements
  flipped[data] = static_cast<char>(flipped[data] ^ 0x55);
  testing::expect_error([&] { load_npz(write_temp("crc.npz", flipped)); }, ErrorCode::kParseError,
                        {"crc.npz", "x_train.npy", "CRC"});
  std::string bad_member = stored;
  bad_member[bad_member.find("\x93NUMPY") + 1] = 'X';
  testing::expect_error([&] { load_npz(write_temp("magic.npz", bad_member)); }, ErrorCode::kParseError,
                        {"magic.npz", "x_train.npy"});
  testing::expect_error([&] { load_npz(fixture("not_npy_member.npz")); }, ErrorCode::kParseError,
                        {"readme.txt", "not an array"});
}

TEST(MappedNpy, ReadsRowsInAnyOrderInBothByteOrders) {
  const MappedNpy f = MappedNpy::open(fixture("rows_f4.npy"));
  EXPECT_EQ(f.rows(), 10);
  EXPECT_EQ(f.shape(), (Shape{10, 3}));
  const std::vector<int64_t> rows = {3, 0, 9, 3};
  EXPECT_EQ(f.read_rows(rows).to_vector<float>(), (std::vector<float>{30, 31, 32, 0, 1, 2, 90, 91, 92, 30, 31, 32}));
  const MappedNpy be = MappedNpy::open(fixture("rows_be_i8.npy"));
  EXPECT_EQ(be.read_rows(rows).to_vector<int64_t>(), (std::vector<int64_t>{21, 0, 63, 21}));
  const std::vector<int64_t> outside = {2, 10};
  testing::expect_error([&] { (void)f.read_rows(outside); }, ErrorCode::kOutOfRange,
                        {"index 10", "position 1", "[0, 10)"});
  testing::expect_error([&] { MappedNpy::open(fixture("fortran_f4.npy")); }, ErrorCode::kInvalidArgument,
                        {"Fortran order", "ascontiguousarray"});
  testing::expect_error([&] { MappedNpy::open(fixture("scalar_f8.npy")); }, ErrorCode::kInvalidArgument, {"0-d"});
  MappedNpy moved = MappedNpy::open(fixture("vector_i4.npy"));
  MappedNpy target = std::move(moved);
  const std::vector<int64_t> last = {4};
  EXPECT_EQ(target.read_rows(last).to_vector<int32_t>(), std::vector<int32_t>{50});
}

TEST(MappedNpy, AFileTruncatedAfterOpeningIsAnErrorNotACrash) {
  const std::string path = temp_path("shrinks.npy");
  fs::copy_file(fixture("rows_f4.npy"), path, fs::copy_options::overwrite_existing);
  const MappedNpy f = MappedNpy::open(path);
  const std::vector<int64_t> last = {9};
  EXPECT_EQ(f.read_rows(last).to_vector<float>(), (std::vector<float>{90, 91, 92}));
  fs::resize_file(path, 64);  // as np.save rewriting the file in place with fewer rows
  testing::expect_error([&] { (void)f.read_rows(last); }, ErrorCode::kFailedPrecondition,
                        {"shrinks.npy", "now has 64 bytes", "rewritten in place"});
}

TEST(NpyDataAdapter, GivesTheBatchesOfArrayDataAdapterWithoutLoadingTheFiles) {
  const Array x = load_npy(fixture("rows_f4.npy")), y = load_npy(fixture("rows_be_i8.npy"));
  for (const bool shuffle : {false, true}) {
    SCOPED_TRACE(shuffle);
    NpyDataAdapter mapped({.x = {fixture("rows_f4.npy")},
                           .y = {fixture("rows_be_i8.npy")},
                           .batch_size = 4,
                           .shuffle = shuffle,
                           .seed = 7});
    ArrayDataAdapter arrays(x, y, Arrays(), 4, shuffle, 7);
    EXPECT_EQ(mapped.num_batches(), 3);
    EXPECT_EQ(mapped.x_types()[0].shape, (Shape{4, 3}));
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      auto a = mapped.epoch(epoch), b = arrays.epoch(epoch);
      for (int batch = 0; batch < 3; ++batch) {
        const std::optional<Batch> ma = a(), mb = b();
        ASSERT_TRUE(ma && mb);
        EXPECT_EQ(ma->x[0].to_vector<float>(), mb->x[0].to_vector<float>());
        EXPECT_EQ(ma->y[0].to_vector<int64_t>(), mb->y[0].to_vector<int64_t>());
      }
      EXPECT_FALSE(a());
    }
  }
}

TEST(NpyDataAdapter, RefusesMismatchedFilesAndBadOptions) {
  testing::expect_error([&] { npy_data_adapter({}); }, ErrorCode::kInvalidArgument, {"names no file"});
  testing::expect_error([&] { npy_data_adapter({.x = {fixture("rows_f4.npy")}, .batch_size = 0}); },
                        ErrorCode::kInvalidArgument, {"batch_size", "0"});
  testing::expect_error([&] { npy_data_adapter({.x = {fixture("rows_f4.npy")}, .y = {fixture("vector_i4.npy")}}); },
                        ErrorCode::kInvalidArgument, {"vector_i4.npy", "5 rows", "rows_f4.npy", "10"});
  testing::expect_error([&] { npy_data_adapter({.x = {fixture("empty_f4.npy")}}); }, ErrorCode::kInvalidArgument,
                        {"empty_f4.npy", "no rows"});
  testing::expect_error(
      [&] { npy_data_adapter({.x = {fixture("rows_f4.npy")}, .sample_weight = {fixture("rows_f4.npy")}}); },
      ErrorCode::kInvalidArgument, {"sample_weight", "1-D"});
  testing::expect_error([&] { npy_data_adapter({.x = {fixture("object.npy")}}); }, ErrorCode::kUnimplemented,
                        {"object.npy"});
}

TEST(NpyDataAdapter, FitOnMappedFilesEqualsFitOnTheLoadedArrays) {
  const Array x = load_npy(fixture("rows_f4.npy"));
  const Array y = Array::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 1});
  const std::string y_path = temp_path("y_rows.npy");
  save_npy(y_path, y);
  auto make = [] {
    auto m = std::make_shared<Sequential>(
        std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 1})});
    m->compile({.optimizer = std::make_shared<optimizers::SGD>(optimizers::SGDOptions{.learning_rate = 1e-4}),
                .loss = std::make_shared<losses::MeanSquaredError>()});
    return m;
  };
  auto a = make(), b = make();
  a->fit({.x = x, .y = y, .batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = true, .seed = 3});
  b->fit({.data = npy_data_adapter({.x = {fixture("rows_f4.npy")}, .y = {y_path}, .batch_size = 4, .seed = 3}),
          .epochs = 2,
          .verbose = 0});
  const std::vector<Array> wa = a->get_weights(), wb = b->get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_EQ(wa[i].to_vector<float>(), wb[i].to_vector<float>());
}

}  // namespace
}  // namespace ingot
