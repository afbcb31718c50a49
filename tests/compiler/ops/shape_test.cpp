// Shape rules and verification errors of the shape ops (reshape, broadcast_in_dim, transpose,
// slice, pad, concatenate, reverse).
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

/// The single result type of `op`.
TensorType infer1(const std::string& op, const std::vector<TensorType>& operands, const Attributes& attrs) {
  std::vector<TensorType> r = infer(op, operands, attrs);
  EXPECT_EQ(r.size(), 1u);
  return r.at(0);
}

// ---------------------------------------------------------------------------------------------
// reshape

TEST(ReshapeShape, InfersTheAttributeShapeAndKeepsTheDType) {
  EXPECT_EQ(infer1("reshape", {tt({2, 3})}, {{"shape", Ints{3, 2}}}), tt({3, 2}));
  EXPECT_EQ(infer1("reshape", {tt({6}, DType::kI8)}, {{"shape", Ints{1, 6, 1}}}), tt({1, 6, 1}, DType::kI8));
  EXPECT_EQ(infer1("reshape", {tt({})}, {{"shape", Ints{1, 1}}}), tt({1, 1}));
  EXPECT_EQ(infer1("reshape", {tt({1}, DType::kBool)}, {{"shape", Ints{}}}), tt({}, DType::kBool));
  EXPECT_EQ(infer1("reshape", {tt({0, 3})}, {{"shape", Ints{3, 0, 7}}}), tt({3, 0, 7}));
}

TEST(ReshapeShape, ElementCountMismatchNamesBothShapesAndCounts) {
  expect_error([] { infer("reshape", {tt({6})}, {{"shape", Ints{4, 2}}}); }, ErrorCode::kShapeMismatch,
               {"reshape", "(6,)", "6 elements", "(4, 2)", "8 elements"});
  expect_error([] { infer("reshape", {tt({0, 2})}, {{"shape", Ints{1}}}); }, ErrorCode::kShapeMismatch,
               {"reshape", "(0, 2)", "0 elements", "1 elements"});
}

TEST(ReshapeShape, NegativeOrMissingShapeIsAnError) {
  expect_error([] { infer("reshape", {tt({6})}, {{"shape", Ints{-1, 3}}}); }, ErrorCode::kInvalidArgument,
               {"reshape", "shape = [-1, 3]", "negative size -1"});
  expect_error([] { infer("reshape", {tt({6})}, {}); }, ErrorCode::kNotFound, {"reshape", "shape"});
  expect_error([] { infer("reshape", {tt({6})}, {{"shape", int64_t{6}}}); }, ErrorCode::kInvalidArgument,
               {"reshape", "shape", "int"});
}

// ---------------------------------------------------------------------------------------------
// broadcast_in_dim

TEST(BroadcastInDimShape, InfersTheAttributeShape) {
  EXPECT_EQ(infer1("broadcast_in_dim", {tt({3})}, {{"shape", Ints{2, 3}}, {"broadcast_dimensions", Ints{1}}}),
            tt({2, 3}));
  EXPECT_EQ(infer1("broadcast_in_dim", {tt({1, 3}, DType::kU64)},
                   {{"shape", Ints{4, 2, 3}}, {"broadcast_dimensions", Ints{1, 2}}}),
            tt({4, 2, 3}, DType::kU64));
  EXPECT_EQ(infer1("broadcast_in_dim", {tt({})}, {{"shape", Ints{2, 2}}, {"broadcast_dimensions", Ints{}}}),
            tt({2, 2}));
  // Size-1 operand dims broadcast to any size, including 0.
  EXPECT_EQ(infer1("broadcast_in_dim", {tt({1})}, {{"shape", Ints{0}}, {"broadcast_dimensions", Ints{0}}}), tt({0}));
  EXPECT_EQ(infer1("broadcast_in_dim", {tt({0})}, {{"shape", Ints{2, 0}}, {"broadcast_dimensions", Ints{1}}}),
            tt({2, 0}));
}

TEST(BroadcastInDimShape, MismatchedDimNamesOperandAndResultSizes) {
  expect_error([] { infer("broadcast_in_dim", {tt({3})}, {{"shape", Ints{2, 4}}, {"broadcast_dimensions", Ints{1}}}); },
               ErrorCode::kShapeMismatch, {"broadcast_in_dim", "operand dim 0 has size 3", "result dim 1 has size 4"});
  expect_error(
      [] { infer("broadcast_in_dim", {tt({2, 0})}, {{"shape", Ints{2, 3}}, {"broadcast_dimensions", Ints{0, 1}}}); },
      ErrorCode::kShapeMismatch, {"broadcast_in_dim", "operand dim 1 has size 0", "result dim 1 has size 3"});
}

TEST(BroadcastInDimShape, BadBroadcastDimensionsAreErrors) {
  expect_error(
      [] { infer("broadcast_in_dim", {tt({3})}, {{"shape", Ints{3, 3}}, {"broadcast_dimensions", Ints{0, 1}}}); },
      ErrorCode::kInvalidArgument, {"broadcast_in_dim", "broadcast_dimensions = [0, 1]", "2 entries", "rank 1"});
  expect_error([] { infer("broadcast_in_dim", {tt({3})}, {{"shape", Ints{3, 3}}, {"broadcast_dimensions", Ints{2}}}); },
               ErrorCode::kOutOfRange, {"broadcast_in_dim", "contains 2", "result rank 2"});
  expect_error(
      [] { infer("broadcast_in_dim", {tt({2, 3})}, {{"shape", Ints{3, 2}}, {"broadcast_dimensions", Ints{1, 0}}}); },
      ErrorCode::kInvalidArgument, {"broadcast_in_dim", "[1, 0]", "strictly increasing"});
  expect_error([] { infer("broadcast_in_dim", {tt({})}, {{"shape", Ints{2, -2}}, {"broadcast_dimensions", Ints{}}}); },
               ErrorCode::kInvalidArgument, {"broadcast_in_dim", "shape = [2, -2]", "negative size -2"});
}

// ---------------------------------------------------------------------------------------------
// transpose

TEST(TransposeShape, PermutesTheDims) {
  EXPECT_EQ(infer1("transpose", {tt({2, 3, 4}, DType::kBF16)}, {{"permutation", Ints{2, 0, 1}}}),
            tt({4, 2, 3}, DType::kBF16));
  EXPECT_EQ(infer1("transpose", {tt({0, 5})}, {{"permutation", Ints{1, 0}}}), tt({5, 0}));
  EXPECT_EQ(infer1("transpose", {tt({})}, {{"permutation", Ints{}}}), tt({}));
}

TEST(TransposeShape, NonPermutationIsAnError) {
  expect_error([] { infer("transpose", {tt({2, 3, 4})}, {{"permutation", Ints{0, 0, 1}}}); },
               ErrorCode::kInvalidArgument,
               {"transpose", "permutation = [0, 0, 1]", "repeats dimension 0", "not a permutation of [0, 3)"});
  expect_error([] { infer("transpose", {tt({2, 3, 4})}, {{"permutation", Ints{0, 3, 1}}}); }, ErrorCode::kOutOfRange,
               {"transpose", "permutation = [0, 3, 1]", "3", "rank 3"});
  expect_error([] { infer("transpose", {tt({2, 3, 4})}, {{"permutation", Ints{1, 0}}}); }, ErrorCode::kInvalidArgument,
               {"transpose", "permutation = [1, 0]", "2 entries", "rank 3"});
}

// ---------------------------------------------------------------------------------------------
// slice

Attributes slice_attrs(Ints start, Ints limit, Ints strides) {
  return {{"start_indices", start}, {"limit_indices", limit}, {"strides", strides}};
}

TEST(SliceShape, SizeIsCeilOfExtentOverStride) {
  EXPECT_EQ(infer1("slice", {tt({5, 6})}, slice_attrs({1, 0}, {5, 6}, {2, 4})), tt({2, 2}));
  EXPECT_EQ(infer1("slice", {tt({5, 6}, DType::kI64)}, slice_attrs({0, 1}, {5, 6}, {3, 1})), tt({2, 5}, DType::kI64));
  EXPECT_EQ(infer1("slice", {tt({3})}, slice_attrs({1}, {1}, {1})), tt({0}));
  EXPECT_EQ(infer1("slice", {tt({0})}, slice_attrs({0}, {0}, {5})), tt({0}));
  EXPECT_EQ(infer1("slice", {tt({})}, slice_attrs({}, {}, {})), tt({}));
}

TEST(SliceShape, BadStridesAreErrors) {
  expect_error([] { infer("slice", {tt({5, 6})}, slice_attrs({0, 0}, {5, 6}, {1, 0})); }, ErrorCode::kInvalidArgument,
               {"slice", "strides[1] = 0", ">= 1"});
  expect_error([] { infer("slice", {tt({5, 6})}, slice_attrs({0, 0}, {5, 6}, {-2, 1})); }, ErrorCode::kInvalidArgument,
               {"slice", "strides[0] = -2"});
}

TEST(SliceShape, BadBoundsAreErrors) {
  expect_error([] { infer("slice", {tt({5, 6})}, slice_attrs({0, 0}, {6, 6}, {1, 1})); }, ErrorCode::kOutOfRange,
               {"slice", "limit_indices[0] = 6", "size 5"});
  expect_error([] { infer("slice", {tt({5, 6})}, slice_attrs({0, 4}, {5, 3}, {1, 1})); }, ErrorCode::kInvalidArgument,
               {"slice", "start_indices[1] = 4", "limit_indices[1] = 3"});
  expect_error([] { infer("slice", {tt({5, 6})}, slice_attrs({-1, 0}, {5, 6}, {1, 1})); }, ErrorCode::kOutOfRange,
               {"slice", "start_indices[0] = -1", "negative"});
  expect_error([] { infer("slice", {tt({5, 6})}, slice_attrs({0, 0}, {5, 6}, {1})); }, ErrorCode::kInvalidArgument,
               {"slice", "strides = [1]", "1 entries", "rank 2"});
  expect_error([] { infer("slice", {tt({5, 6})}, {{"start_indices", Ints{0, 0}}}); }, ErrorCode::kNotFound,
               {"slice", "limit_indices"});
}

// ---------------------------------------------------------------------------------------------
// pad

Attributes pad_attrs(Ints low, Ints high, Ints interior) {
  return {{"edge_padding_low", low}, {"edge_padding_high", high}, {"interior_padding", interior}};
}

TEST(PadShape, SizeIsLowPlusHighPlusInterior) {
  EXPECT_EQ(infer1("pad", {tt({3}), tt({})}, pad_attrs({1}, {2}, {1})), tt({8}));
  EXPECT_EQ(infer1("pad", {tt({3}), tt({})}, pad_attrs({-1}, {-1}, {0})), tt({1}));
  EXPECT_EQ(infer1("pad", {tt({2, 3}, DType::kU8), tt({}, DType::kU8)}, pad_attrs({0, -1}, {1, 0}, {0, 2})),
            tt({3, 6}, DType::kU8));
  // An empty dim has no interior: only the edges remain.
  EXPECT_EQ(infer1("pad", {tt({0}), tt({})}, pad_attrs({2}, {1}, {5})), tt({3}));
  EXPECT_EQ(infer1("pad", {tt({4}), tt({})}, pad_attrs({-2}, {-2}, {0})), tt({0}));
}

TEST(PadShape, NegativeInteriorOrNegativeSizeIsAnError) {
  expect_error([] { infer("pad", {tt({3}), tt({})}, pad_attrs({0}, {0}, {-1})); }, ErrorCode::kInvalidArgument,
               {"pad", "interior_padding[0] = -1", "negative"});
  expect_error([] { infer("pad", {tt({2}), tt({})}, pad_attrs({-2}, {-1}, {0})); }, ErrorCode::kInvalidArgument,
               {"pad", "dim 0", "negative size -1", "operand size 2", "edge_padding_low -2", "edge_padding_high -1"});
}

TEST(PadShape, BadPaddingValueOrAttributesAreErrors) {
  expect_error([] { infer("pad", {tt({3}), tt({1})}, pad_attrs({0}, {0}, {0})); }, ErrorCode::kShapeMismatch,
               {"pad", "padding_value", "scalar", "f32[1]"});
  expect_error([] { infer("pad", {tt({3}), tt({}, DType::kI32)}, pad_attrs({0}, {0}, {0})); },
               ErrorCode::kDTypeMismatch, {"pad", "padding_value", "i32[]", "f32[3]"});
  expect_error([] { infer("pad", {tt({3, 2}), tt({})}, pad_attrs({0}, {0, 0}, {0, 0})); }, ErrorCode::kInvalidArgument,
               {"pad", "edge_padding_low = [0]", "1 entries", "rank 2"});
}

// ---------------------------------------------------------------------------------------------
// concatenate

TEST(ConcatenateShape, SizesAddAlongTheDimension) {
  EXPECT_EQ(infer1("concatenate", {tt({2, 3}), tt({2, 1}), tt({2, 0})}, {{"dimension", int64_t{1}}}), tt({2, 4}));
  EXPECT_EQ(infer1("concatenate", {tt({1, 2}, DType::kBool), tt({3, 2}, DType::kBool)}, {{"dimension", int64_t{0}}}),
            tt({4, 2}, DType::kBool));
  EXPECT_EQ(infer1("concatenate", {tt({5})}, {{"dimension", int64_t{0}}}), tt({5}));
}

TEST(ConcatenateShape, MismatchedNonConcatDimsNameOperandAndShapes) {
  expect_error([] { infer("concatenate", {tt({2, 3}), tt({2, 3}), tt({3, 3})}, {{"dimension", int64_t{1}}}); },
               ErrorCode::kShapeMismatch, {"concatenate", "operand 2", "(3, 3)", "operand 0", "(2, 3)", "dimension 1"});
  expect_error([] { infer("concatenate", {tt({2, 3}), tt({6})}, {{"dimension", int64_t{0}}}); },
               ErrorCode::kShapeMismatch, {"concatenate", "operand 1", "(6,)", "(2, 3)"});
}

TEST(ConcatenateShape, DifferingDTypesAreAnError) {
  expect_error([] { infer("concatenate", {tt({2}), tt({2}, DType::kI32)}, {{"dimension", int64_t{0}}}); },
               ErrorCode::kDTypeMismatch, {"concatenate", "operand 1", "i32[2]", "f32[2]"});
}

TEST(ConcatenateShape, BadDimensionIsAnError) {
  expect_error([] { infer("concatenate", {tt({2, 3}), tt({2, 3})}, {{"dimension", int64_t{2}}}); },
               ErrorCode::kOutOfRange, {"concatenate", "dimension = 2", "rank 2"});
  expect_error([] { infer("concatenate", {tt({2, 3})}, {{"dimension", int64_t{-1}}}); }, ErrorCode::kOutOfRange,
               {"concatenate", "dimension = -1", "rank 2"});
  expect_error([] { infer("concatenate", {tt({}), tt({})}, {{"dimension", int64_t{0}}}); }, ErrorCode::kOutOfRange,
               {"concatenate", "dimension = 0", "rank 0"});
  expect_error([] { infer("concatenate", {}, {{"dimension", int64_t{0}}}); }, ErrorCode::kInvalidArgument,
               {"concatenate", "at least 1"});
}

// ---------------------------------------------------------------------------------------------
// reverse

TEST(ReverseShape, KeepsTheType) {
  EXPECT_EQ(infer1("reverse", {tt({2, 3}, DType::kF16)}, {{"dimensions", Ints{0, 1}}}), tt({2, 3}, DType::kF16));
  EXPECT_EQ(infer1("reverse", {tt({0, 4})}, {{"dimensions", Ints{}}}), tt({0, 4}));
}

TEST(ReverseShape, BadDimensionsAreErrors) {
  expect_error([] { infer("reverse", {tt({2, 3})}, {{"dimensions", Ints{2}}}); }, ErrorCode::kOutOfRange,
               {"reverse", "dimensions = [2]", "2", "rank 2"});
  expect_error([] { infer("reverse", {tt({2, 3})}, {{"dimensions", Ints{-1}}}); }, ErrorCode::kOutOfRange,
               {"reverse", "dimensions = [-1]", "rank 2"});
  expect_error([] { infer("reverse", {tt({2, 3})}, {{"dimensions", Ints{1, 1}}}); }, ErrorCode::kInvalidArgument,
               {"reverse", "[1, 1]", "repeats dimension 1"});
}

}  // namespace
}  // namespace ingot
