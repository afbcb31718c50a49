// Shape rules and verification errors of the reduction ops (reduce, argmax, argmin,
// reduce_window).
#include <gtest/gtest.h>

#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using ir::TensorType;
using testing::expect_error;
using testing::infer;
using Ints = std::vector<int64_t>;

TensorType tt(Shape shape, DType dtype = DType::kF32) { return TensorType{std::move(shape), dtype}; }

TensorType infer1(const std::string& op, const std::vector<TensorType>& operands, const Attributes& attrs) {
  std::vector<TensorType> r = infer(op, operands, attrs);
  EXPECT_EQ(r.size(), 1u);
  return r.at(0);
}

Attributes reduce_attrs(Ints dims, const std::string& computation) {
  return {{"dimensions", dims}, {"computation", computation}};
}

// ---------------------------------------------------------------------------------------------
// reduce

TEST(ReduceShape, RemovesTheReducedDims) {
  EXPECT_EQ(infer1("reduce", {tt({2, 3, 4}), tt({})}, reduce_attrs({0, 2}, "add")), tt({3}));
  EXPECT_EQ(infer1("reduce", {tt({2, 3, 4}), tt({})}, reduce_attrs({2, 1, 0}, "max")), tt({}));
  EXPECT_EQ(infer1("reduce", {tt({2, 3}), tt({})}, reduce_attrs({}, "mul")), tt({2, 3}));
  EXPECT_EQ(infer1("reduce", {tt({0, 3}), tt({})}, reduce_attrs({0}, "min")), tt({3}));
  EXPECT_EQ(infer1("reduce", {tt({4}, DType::kI32), tt({}, DType::kI32)}, reduce_attrs({0}, "and")),
            tt({}, DType::kI32));
  EXPECT_EQ(infer1("reduce", {tt({2, 4}, DType::kBool), tt({}, DType::kBool)}, reduce_attrs({1}, "or")),
            tt({2}, DType::kBool));
}

TEST(ReduceShape, BadDimensionsAreErrors) {
  expect_error([] { infer("reduce", {tt({2, 3}), tt({})}, reduce_attrs({0, 2}, "add")); }, ErrorCode::kOutOfRange,
               {"reduce", "dimensions = [0, 2]", "contains 2", "rank 2"});
  expect_error([] { infer("reduce", {tt({2, 3}), tt({})}, reduce_attrs({-1}, "add")); }, ErrorCode::kOutOfRange,
               {"reduce", "dimensions = [-1]", "rank 2"});
  expect_error([] { infer("reduce", {tt({2, 3}), tt({})}, reduce_attrs({0, 0}, "add")); }, ErrorCode::kInvalidArgument,
               {"reduce", "[0, 0]", "repeats dimension 0"});
}

TEST(ReduceShape, BadComputationIsAnError) {
  expect_error([] { infer("reduce", {tt({2}), tt({})}, reduce_attrs({0}, "sum")); }, ErrorCode::kInvalidArgument,
               {"reduce", "computation = \"sum\"", "add, mul, max, min, and, or"});
  expect_error([] { infer("reduce", {tt({2}), tt({})}, {{"dimensions", Ints{0}}}); }, ErrorCode::kNotFound,
               {"reduce", "computation"});
  expect_error([] { infer("reduce", {tt({2}), tt({})}, reduce_attrs({0}, "and")); }, ErrorCode::kDTypeMismatch,
               {"reduce", "\"and\"", "bool or integer", "f32[2]"});
  expect_error([] { infer("reduce", {tt({2}, DType::kBF16), tt({}, DType::kBF16)}, reduce_attrs({0}, "or")); },
               ErrorCode::kDTypeMismatch, {"reduce", "\"or\"", "bf16[2]"});
}

TEST(ReduceShape, BadInitIsAnError) {
  expect_error([] { infer("reduce", {tt({2, 3}), tt({1})}, reduce_attrs({0}, "add")); }, ErrorCode::kShapeMismatch,
               {"reduce", "init", "scalar", "f32[1]"});
  expect_error([] { infer("reduce", {tt({2, 3}), tt({}, DType::kI32)}, reduce_attrs({0}, "add")); },
               ErrorCode::kDTypeMismatch, {"reduce", "init", "i32[]", "f32[2,3]"});
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin

Attributes arg_attrs(int64_t dim, const std::string& index_dtype) {
  return {{"dimension", dim}, {"index_dtype", index_dtype}};
}

TEST(ArgmaxShape, RemovesTheDimensionAndUsesTheIndexDType) {
  EXPECT_EQ(infer1("argmax", {tt({3, 4})}, arg_attrs(1, "i32")), tt({3}, DType::kI32));
  EXPECT_EQ(infer1("argmin", {tt({3, 4}, DType::kU8)}, arg_attrs(0, "i64")), tt({4}, DType::kI64));
  EXPECT_EQ(infer1("argmax", {tt({5}, DType::kBool)}, arg_attrs(0, "i32")), tt({}, DType::kI32));
  // Another dim may be empty; the result is then empty too.
  EXPECT_EQ(infer1("argmin", {tt({0, 4})}, arg_attrs(1, "i32")), tt({0}, DType::kI32));
}

TEST(ArgmaxShape, BadDimensionIsAnError) {
  expect_error([] { infer("argmax", {tt({3, 4})}, arg_attrs(2, "i32")); }, ErrorCode::kOutOfRange,
               {"argmax", "dimension = 2", "rank 2"});
  expect_error([] { infer("argmin", {tt({3, 4})}, arg_attrs(-1, "i32")); }, ErrorCode::kOutOfRange,
               {"argmin", "dimension = -1", "rank 2"});
  expect_error([] { infer("argmax", {tt({})}, arg_attrs(0, "i32")); }, ErrorCode::kOutOfRange,
               {"argmax", "dimension = 0", "rank 0"});
}

TEST(ArgmaxShape, EmptyDimensionIsAnError) {
  expect_error([] { infer("argmax", {tt({2, 0})}, arg_attrs(1, "i64")); }, ErrorCode::kInvalidArgument,
               {"argmax", "dimension 1", "f32[2,0]", "size 0"});
  expect_error([] { infer("argmin", {tt({0})}, arg_attrs(0, "i32")); }, ErrorCode::kInvalidArgument,
               {"argmin", "dimension 0", "size 0"});
}

TEST(ArgmaxShape, BadIndexDTypeIsAnError) {
  expect_error([] { infer("argmin", {tt({3})}, arg_attrs(0, "f32")); }, ErrorCode::kInvalidArgument,
               {"argmin", "index_dtype = \"f32\"", "i32", "i64"});
  expect_error([] { infer("argmax", {tt({3})}, {{"dimension", int64_t{0}}}); }, ErrorCode::kNotFound,
               {"argmax", "index_dtype"});
}

// ---------------------------------------------------------------------------------------------
// reduce_window

Attributes window_attrs(Ints window, const std::string& computation) {
  return {{"window_dimensions", window}, {"computation", computation}};
}

TEST(ReduceWindowShape, CountsWindows) {
  Attributes pool = window_attrs({2, 2}, "max");
  pool.set("window_strides", Ints{2, 2});
  EXPECT_EQ(infer1("reduce_window", {tt({4, 5}), tt({})}, pool), tt({2, 2}));
  // Defaults: unit strides and dilations, no padding.
  EXPECT_EQ(infer1("reduce_window", {tt({5}), tt({})}, window_attrs({3}, "add")), tt({3}));

  Attributes same = window_attrs({3}, "add");
  same.set("padding", Ints{1, 1});
  EXPECT_EQ(infer1("reduce_window", {tt({5}), tt({})}, same), tt({5}));

  // Base dilation 2 turns 3 elements into 5 cells; a window of 2 fits 4 times.
  Attributes base = window_attrs({2}, "add");
  base.set("base_dilations", Ints{2});
  EXPECT_EQ(infer1("reduce_window", {tt({3}), tt({})}, base), tt({4}));

  // Window dilation 2 makes a window of 2 span 3 cells.
  Attributes wdil = window_attrs({2}, "add");
  wdil.set("window_dilations", Ints{2});
  EXPECT_EQ(infer1("reduce_window", {tt({5}), tt({})}, wdil), tt({3}));
}

TEST(ReduceWindowShape, StableHloSpecExample) {
  Attributes a = window_attrs({2, 1}, "add");
  a.set("window_strides", Ints{4, 1});
  a.set("base_dilations", Ints{2, 1});
  a.set("window_dilations", Ints{3, 1});
  a.set("padding", Ints{2, 1, 0, 0});
  EXPECT_EQ(infer1("reduce_window", {tt({3, 2}, DType::kI32), tt({}, DType::kI32)}, a), tt({2, 2}, DType::kI32));
}

TEST(ReduceWindowShape, EmptyCases) {
  // The window does not fit: no windows.
  EXPECT_EQ(infer1("reduce_window", {tt({2}), tt({})}, window_attrs({3}, "add")), tt({0}));
  EXPECT_EQ(infer1("reduce_window", {tt({0}), tt({})}, window_attrs({1}, "max")), tt({0}));
  // An empty operand padded to 2 cells holds one window of 2.
  Attributes padded = window_attrs({2}, "add");
  padded.set("padding", Ints{1, 1});
  EXPECT_EQ(infer1("reduce_window", {tt({0}), tt({})}, padded), tt({1}));
}

TEST(ReduceWindowShape, WrongLengthListsNameAttributeLengthAndRank) {
  Attributes strides = window_attrs({2, 2}, "add");
  strides.set("window_strides", Ints{1});
  expect_error([&] { infer("reduce_window", {tt({4, 4}), tt({})}, strides); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "window_strides = [1]", "1 entries", "rank 2"});

  Attributes padding = window_attrs({2, 2}, "add");
  padding.set("padding", Ints{0, 0});
  expect_error([&] { infer("reduce_window", {tt({4, 4}), tt({})}, padding); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "padding = [0, 0]", "2 entries", "must have 4", "rank 2"});

  expect_error([] { infer("reduce_window", {tt({4, 4}), tt({})}, window_attrs({2}, "add")); },
               ErrorCode::kInvalidArgument, {"reduce_window", "window_dimensions = [2]", "1 entries", "rank 2"});

  Attributes base = window_attrs({2}, "add");
  base.set("base_dilations", Ints{1, 1});
  expect_error([&] { infer("reduce_window", {tt({4}), tt({})}, base); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "base_dilations = [1, 1]", "2 entries", "rank 1"});

  Attributes wdil = window_attrs({2}, "add");
  wdil.set("window_dilations", Ints{});
  expect_error([&] { infer("reduce_window", {tt({4}), tt({})}, wdil); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "window_dilations = []", "0 entries", "rank 1"});
}

TEST(ReduceWindowShape, NonPositiveValuesAreErrors) {
  expect_error([] { infer("reduce_window", {tt({4}), tt({})}, window_attrs({0}, "add")); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "window_dimensions[0] = 0"});
  Attributes stride = window_attrs({2, 2}, "add");
  stride.set("window_strides", Ints{1, 0});
  expect_error([&] { infer("reduce_window", {tt({4, 4}), tt({})}, stride); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "window_strides[1] = 0"});
  Attributes base = window_attrs({2}, "add");
  base.set("base_dilations", Ints{-1});
  expect_error([&] { infer("reduce_window", {tt({4}), tt({})}, base); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "base_dilations[0] = -1"});
  Attributes wdil = window_attrs({2}, "add");
  wdil.set("window_dilations", Ints{0});
  expect_error([&] { infer("reduce_window", {tt({4}), tt({})}, wdil); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "window_dilations[0] = 0"});
  Attributes crop = window_attrs({1}, "add");
  crop.set("padding", Ints{-3, -2});
  expect_error([&] { infer("reduce_window", {tt({4}), tt({})}, crop); }, ErrorCode::kInvalidArgument,
               {"reduce_window", "dim 0", "negative size -1"});
}

TEST(ReduceWindowShape, BadComputationOrInitIsAnError) {
  expect_error([] { infer("reduce_window", {tt({4}, DType::kI32), tt({}, DType::kI32)}, window_attrs({2}, "and")); },
               ErrorCode::kInvalidArgument, {"reduce_window", "computation = \"and\"", "add, mul, max, min"});
  expect_error([] { infer("reduce_window", {tt({4}), tt({2})}, window_attrs({2}, "add")); }, ErrorCode::kShapeMismatch,
               {"reduce_window", "init", "f32[2]"});
  expect_error([] { infer("reduce_window", {tt({4}), tt({}, DType::kF64)}, window_attrs({2}, "max")); },
               ErrorCode::kDTypeMismatch, {"reduce_window", "init", "f64[]", "f32[4]"});
}

}  // namespace
}  // namespace ingot
