// Shape rule and verification errors of rng_bit_generator.
#include <gtest/gtest.h>

#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using ir::TensorType;
using testing::expect_error;
using testing::infer;
using Ints = std::vector<int64_t>;

const TensorType kState{{2}, DType::kU64};

Attributes rng_attrs(Ints shape, const std::string& dtype = "u32", const std::string& algorithm = "THREE_FRY") {
  return {{"algorithm", algorithm}, {"shape", shape}, {"dtype", dtype}};
}

TEST(RngBitGeneratorShape, ReturnsNewStateAndBits) {
  EXPECT_EQ(infer("rng_bit_generator", {kState}, rng_attrs({4})),
            (std::vector<TensorType>{kState, {{4}, DType::kU32}}));
  EXPECT_EQ(infer("rng_bit_generator", {kState}, rng_attrs({2, 3}, "u64")),
            (std::vector<TensorType>{kState, {{2, 3}, DType::kU64}}));
}

TEST(RngBitGeneratorShape, ScalarAndEmptyShapes) {
  EXPECT_EQ(infer("rng_bit_generator", {kState}, rng_attrs({})), (std::vector<TensorType>{kState, {{}, DType::kU32}}));
  EXPECT_EQ(infer("rng_bit_generator", {kState}, rng_attrs({3, 0}, "u64")),
            (std::vector<TensorType>{kState, {{3, 0}, DType::kU64}}));
}

TEST(RngBitGeneratorErrors, BadStateType) {
  expect_error([] { infer("rng_bit_generator", {{{2}, DType::kF32}}, rng_attrs({4})); }, ErrorCode::kDTypeMismatch,
               {"rng_bit_generator", "state", "f32[2]", "u64[2]"});
  expect_error([] { infer("rng_bit_generator", {{{2}, DType::kU32}}, rng_attrs({4})); }, ErrorCode::kDTypeMismatch,
               {"rng_bit_generator", "u32[2]", "u64[2]"});
  expect_error([] { infer("rng_bit_generator", {{{3}, DType::kU64}}, rng_attrs({4})); }, ErrorCode::kShapeMismatch,
               {"rng_bit_generator", "state", "u64[3]", "(3,)"});
  expect_error([] { infer("rng_bit_generator", {{{}, DType::kU64}}, rng_attrs({4})); }, ErrorCode::kShapeMismatch,
               {"rng_bit_generator", "u64[]", "u64[2]"});
}

TEST(RngBitGeneratorErrors, UnknownAlgorithm) {
  expect_error([] { infer("rng_bit_generator", {kState}, rng_attrs({4}, "u32", "PHILOX")); },
               ErrorCode::kInvalidArgument, {"rng_bit_generator", "algorithm = \"PHILOX\"", "THREE_FRY"});
  Attributes a = rng_attrs({4});
  a.erase("algorithm");
  expect_error([&] { infer("rng_bit_generator", {kState}, a); }, ErrorCode::kNotFound,
               {"rng_bit_generator", "algorithm"});
}

TEST(RngBitGeneratorErrors, BadOutputDTypeOrShape) {
  expect_error([] { infer("rng_bit_generator", {kState}, rng_attrs({4}, "f32")); }, ErrorCode::kInvalidArgument,
               {"rng_bit_generator", "dtype = \"f32\"", "u64"});
  expect_error([] { infer("rng_bit_generator", {kState}, rng_attrs({2, -1})); }, ErrorCode::kInvalidArgument,
               {"rng_bit_generator", "shape = [2, -1]", "-1"});
  Attributes a = rng_attrs({4});
  a.set("shape", int64_t{4});
  expect_error([&] { infer("rng_bit_generator", {kState}, a); }, ErrorCode::kInvalidArgument,
               {"rng_bit_generator", "shape", "int"});
  Attributes b = rng_attrs({4});
  b.set("seed", int64_t{4});
  expect_error([&] { infer("rng_bit_generator", {kState}, b); }, ErrorCode::kInvalidArgument,
               {"rng_bit_generator", "unknown attribute 'seed'"});
}

TEST(RngBitGeneratorErrors, OperandCount) {
  expect_error([] { infer("rng_bit_generator", {kState, kState}, rng_attrs({4})); }, ErrorCode::kInvalidArgument,
               {"rng_bit_generator", "takes 1 operands"});
}

}  // namespace
}  // namespace ingot
