// Shape rules and verification errors of dot_general and convolution.
#include <gtest/gtest.h>

#include "op_attrs.h"
#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::dot_attrs;
using testing::nhwc;
using ir::TensorType;
using testing::expect_error;
using testing::infer;
using Ints = std::vector<int64_t>;

TensorType f32t(Shape s) { return {std::move(s), DType::kF32}; }

TensorType dot1(TensorType a, TensorType b, const Attributes& attrs) {
  auto out = infer("dot_general", {std::move(a), std::move(b)}, attrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

// ----- dot_general -----

TEST(DotGeneralShape, Matmul) {
  EXPECT_EQ(dot1(f32t({2, 3}), f32t({3, 4}), dot_attrs({}, {}, {1}, {0})), f32t({2, 4}));
}

TEST(DotGeneralShape, BatchedMatmul) {
  EXPECT_EQ(dot1(f32t({5, 2, 3}), f32t({5, 3, 4}), dot_attrs({0}, {0}, {2}, {1})), f32t({5, 2, 4}));
}

TEST(DotGeneralShape, ResultIsBatchThenLhsFreeThenRhsFree) {
  // lhs (2, 7, 3, 6): batch dim 3, contracting dim 1, free dims 0 and 2 (in order).
  // rhs (4, 6, 7, 9): batch dim 1, contracting dim 2, free dims 0 and 3.
  EXPECT_EQ(dot1(f32t({2, 7, 3, 6}), f32t({4, 6, 7, 9}), dot_attrs({3}, {1}, {1}, {2})), f32t({6, 2, 3, 4, 9}));
}

TEST(DotGeneralShape, MultipleContractingDimsPairInOrder) {
  EXPECT_EQ(dot1(f32t({2, 3, 4}), f32t({4, 5, 3}), dot_attrs({}, {}, {1, 2}, {2, 0})), f32t({2, 5}));
}

TEST(DotGeneralShape, AbsentListsAreEmptyGivingOuterProduct) {
  EXPECT_EQ(dot1(f32t({2}), f32t({3}), {}), f32t({2, 3}));
  EXPECT_EQ(dot1(f32t({}), f32t({}), {}), f32t({}));
}

TEST(DotGeneralShape, VectorDotIsScalar) {
  EXPECT_EQ(dot1(f32t({3}), f32t({3}), dot_attrs({}, {}, {0}, {0})), f32t({}));
}

TEST(DotGeneralShape, EmptyDimensionsAreAllowed) {
  EXPECT_EQ(dot1(f32t({2, 0}), f32t({0, 3}), dot_attrs({}, {}, {1}, {0})), f32t({2, 3}));
  EXPECT_EQ(dot1(f32t({0, 3}), f32t({3, 2}), dot_attrs({}, {}, {1}, {0})), f32t({0, 2}));
}

TEST(DotGeneralShape, KeepsDType) {
  for (DType dt : {DType::kI8, DType::kU8, DType::kI32, DType::kU32, DType::kI64, DType::kU64, DType::kF16,
                   DType::kBF16, DType::kF64}) {
    EXPECT_EQ(dot1({{2, 3}, dt}, {{3}, dt}, dot_attrs({}, {}, {1}, {0})), (TensorType{{2}, dt}));
  }
}

TEST(DotGeneralErrors, ContractingSizeMismatchNamesBothSizesAndDims) {
  expect_error([] { dot1(f32t({2, 5}), f32t({6, 3}), dot_attrs({}, {}, {1}, {0})); }, ErrorCode::kShapeMismatch,
               {"dot_general", "contracting", "lhs dim 1 has 5", "rhs dim 0 has 6"});
}

TEST(DotGeneralErrors, BatchSizeMismatch) {
  expect_error([] { dot1(f32t({2, 3, 4}), f32t({3, 4, 5}), dot_attrs({0}, {0}, {2}, {1})); }, ErrorCode::kShapeMismatch,
               {"dot_general", "batch dimension sizes differ", "lhs dim 0 has 2", "rhs dim 0 has 3"});
}

TEST(DotGeneralErrors, RepeatedDimension) {
  expect_error([] { dot1(f32t({3, 3}), f32t({3, 3}), dot_attrs({}, {}, {1, 1}, {0, 1})); }, ErrorCode::kInvalidArgument,
               {"dot_general", "lhs_contracting_dimensions = [1, 1]", "repeats dimension 1"});
}

TEST(DotGeneralErrors, DimensionBothBatchAndContracting) {
  expect_error([] { dot1(f32t({3, 3}), f32t({3, 3}), dot_attrs({0}, {0}, {0}, {1})); }, ErrorCode::kInvalidArgument,
               {"dot_general", "lhs dimension 0", "lhs_batching_dimensions = [0]", "lhs_contracting_dimensions = [0]"});
}

TEST(DotGeneralErrors, OutOfRangeDimension) {
  expect_error([] { dot1(f32t({2, 3}), f32t({3, 4}), dot_attrs({}, {}, {2}, {0})); }, ErrorCode::kOutOfRange,
               {"dot_general", "lhs_contracting_dimensions = [2]", "rank 2"});
  expect_error([] { dot1(f32t({2, 3}), f32t({3, 4}), dot_attrs({}, {}, {1}, {-1})); }, ErrorCode::kOutOfRange,
               {"dot_general", "rhs_contracting_dimensions = [-1]"});
}

TEST(DotGeneralErrors, ListLengthsDiffer) {
  expect_error([] { dot1(f32t({2, 3}), f32t({3, 2}), dot_attrs({}, {}, {1}, {0, 1})); }, ErrorCode::kInvalidArgument,
               {"dot_general", "lhs_contracting_dimensions = [1]", "rhs_contracting_dimensions = [0, 1]", "1 vs 2"});
  expect_error([] { dot1(f32t({2, 3}), f32t({2, 3}), dot_attrs({0}, {}, {1}, {1})); }, ErrorCode::kInvalidArgument,
               {"dot_general", "lhs_batching_dimensions = [0]"});
}

TEST(DotGeneralErrors, DTypeMismatch) {
  expect_error([] { dot1(f32t({2, 3}), {{3, 2}, DType::kF16}, dot_attrs({}, {}, {1}, {0})); },
               ErrorCode::kDTypeMismatch, {"dot_general", "f32[2,3]", "f16[3,2]"});
}

TEST(DotGeneralErrors, BoolIsRejected) {
  expect_error([] { dot1({{2, 3}, DType::kBool}, {{3}, DType::kBool}, dot_attrs({}, {}, {1}, {0})); },
               ErrorCode::kDTypeMismatch, {"dot_general", "bool", "numeric"});
}

TEST(DotGeneralErrors, BadAttributes) {
  expect_error([] { dot1(f32t({2, 3}), f32t({3}), {{"lhs_contracting_dims", Ints{1}}}); }, ErrorCode::kInvalidArgument,
               {"dot_general", "unknown attribute", "lhs_contracting_dims"});
  expect_error([] { dot1(f32t({2, 3}), f32t({3}), {{"lhs_contracting_dimensions", int64_t{1}}}); },
               ErrorCode::kInvalidArgument, {"dot_general", "lhs_contracting_dimensions", "int"});
}

TEST(DotGeneralErrors, OperandCount) {
  expect_error([] { infer("dot_general", {f32t({2})}); }, ErrorCode::kInvalidArgument,
               {"dot_general", "takes 2 operands"});
}

// ----- convolution -----

TensorType conv1(TensorType lhs, TensorType rhs, const Attributes& attrs) {
  auto out = infer("convolution", {std::move(lhs), std::move(rhs)}, attrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

TEST(ConvolutionShape, ValidNoPadding) {
  EXPECT_EQ(conv1(f32t({2, 5, 6, 3}), f32t({3, 2, 3, 4}), nhwc()), f32t({2, 3, 5, 4}));
}

TEST(ConvolutionShape, StrideAndSamePadding) {
  Attributes a = nhwc({{"window_strides", Ints{2, 2}}, {"padding", Ints{1, 1, 1, 1}}});
  EXPECT_EQ(conv1(f32t({1, 5, 6, 2}), f32t({3, 3, 2, 4}), a), f32t({1, 3, 3, 4}));
}

TEST(ConvolutionShape, Dilations) {
  // lhs_dilation 2: 5 -> 9 positions, window 3 -> 7 outputs.
  EXPECT_EQ(conv1(f32t({1, 5, 5, 1}), f32t({3, 3, 1, 1}), nhwc({{"lhs_dilation", Ints{2, 1}}})), f32t({1, 7, 3, 1}));
  // rhs_dilation 2: window 3 spans 5 -> 1 output of 5.
  EXPECT_EQ(conv1(f32t({1, 5, 5, 1}), f32t({3, 3, 1, 1}), nhwc({{"rhs_dilation", Ints{2, 1}}})), f32t({1, 1, 3, 1}));
}

TEST(ConvolutionShape, NegativePaddingCrops) {
  EXPECT_EQ(conv1(f32t({1, 6, 6, 1}), f32t({1, 1, 1, 1}), nhwc({{"padding", Ints{-1, -2, 0, 0}}})), f32t({1, 3, 6, 1}));
}

TEST(ConvolutionShape, WindowLargerThanInputGivesZeroSize) {
  EXPECT_EQ(conv1(f32t({1, 2, 2, 1}), f32t({3, 3, 1, 1}), nhwc()), f32t({1, 0, 0, 1}));
}

TEST(ConvolutionShape, OtherLayouts) {
  // NCHW input, OIHW kernel, NCHW output.
  Attributes nchw{{"input_batch_dimension", int64_t{0}},           {"input_feature_dimension", int64_t{1}},
                  {"input_spatial_dimensions", Ints{2, 3}},        {"kernel_input_feature_dimension", int64_t{1}},
                  {"kernel_output_feature_dimension", int64_t{0}}, {"kernel_spatial_dimensions", Ints{2, 3}},
                  {"output_batch_dimension", int64_t{0}},          {"output_feature_dimension", int64_t{1}},
                  {"output_spatial_dimensions", Ints{2, 3}}};
  EXPECT_EQ(conv1(f32t({2, 3, 7, 9}), f32t({8, 3, 3, 5}), nchw), f32t({2, 8, 5, 5}));
  // 1-D: NWC input, WIO kernel, output as (W, N, C).
  Attributes one_d{{"input_batch_dimension", int64_t{0}},           {"input_feature_dimension", int64_t{2}},
                   {"input_spatial_dimensions", Ints{1}},           {"kernel_input_feature_dimension", int64_t{1}},
                   {"kernel_output_feature_dimension", int64_t{2}}, {"kernel_spatial_dimensions", Ints{0}},
                   {"output_batch_dimension", int64_t{1}},          {"output_feature_dimension", int64_t{2}},
                   {"output_spatial_dimensions", Ints{0}}};
  EXPECT_EQ(conv1(f32t({4, 10, 3}), f32t({3, 3, 5}), one_d), f32t({8, 4, 5}));
}

TEST(ConvolutionShape, FeatureAndBatchGroups) {
  EXPECT_EQ(conv1(f32t({1, 5, 5, 4}), f32t({3, 3, 2, 6}), nhwc({{"feature_group_count", int64_t{2}}})),
            f32t({1, 3, 3, 6}));
  // Depthwise: one input feature per group.
  EXPECT_EQ(conv1(f32t({1, 5, 5, 4}), f32t({3, 3, 1, 4}), nhwc({{"feature_group_count", int64_t{4}}})),
            f32t({1, 3, 3, 4}));
  EXPECT_EQ(conv1(f32t({4, 5, 5, 2}), f32t({3, 3, 2, 6}), nhwc({{"batch_group_count", int64_t{2}}})),
            f32t({2, 3, 3, 6}));
}

TEST(ConvolutionErrors, RepeatedDimensionNumbers) {
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({3, 3, 1, 1}), nhwc({{"input_spatial_dimensions", Ints{1, 3}}})); },
               ErrorCode::kInvalidArgument,
               {"convolution", "lhs dimension 3", "input_feature_dimension", "input_spatial_dimensions"});
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({3, 3, 1, 1}), nhwc({{"output_batch_dimension", int64_t{3}}})); },
               ErrorCode::kInvalidArgument,
               {"convolution", "result dimension 3", "output_batch_dimension", "output_feature_dimension"});
}

TEST(ConvolutionErrors, OutOfRangeDimensionNumber) {
  expect_error(
      [] { conv1(f32t({1, 5, 5, 1}), f32t({3, 3, 1, 1}), nhwc({{"kernel_output_feature_dimension", int64_t{4}}})); },
      ErrorCode::kOutOfRange, {"convolution", "kernel_output_feature_dimension", "dimension 4", "rank 4"});
}

TEST(ConvolutionErrors, WrongNumberOfSpatialDimensions) {
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({3, 3, 1, 1}), nhwc({{"kernel_spatial_dimensions", Ints{0}}})); },
               ErrorCode::kInvalidArgument, {"convolution", "kernel_spatial_dimensions = [0]", "1 entries", "needs 2"});
}

TEST(ConvolutionErrors, MissingDimensionNumber) {
  Attributes a = nhwc();
  a.erase("output_spatial_dimensions");
  expect_error([&] { conv1(f32t({1, 5, 5, 1}), f32t({3, 3, 1, 1}), a); }, ErrorCode::kNotFound,
               {"convolution", "output_spatial_dimensions"});
}

TEST(ConvolutionErrors, InputFeaturesMustBeKernelInputTimesGroups) {
  expect_error([] { conv1(f32t({1, 5, 5, 6}), f32t({3, 3, 4, 8}), nhwc()); }, ErrorCode::kShapeMismatch,
               {"convolution", "6 input features", "has size 4", "feature_group_count = 1", "4 * 1 = 4"});
  expect_error([] { conv1(f32t({1, 5, 5, 6}), f32t({3, 3, 2, 8}), nhwc({{"feature_group_count", int64_t{2}}})); },
               ErrorCode::kShapeMismatch, {"convolution", "6 input features", "2 * 2 = 4"});
}

TEST(ConvolutionErrors, OutputFeaturesNotDivisibleByGroups) {
  expect_error([] { conv1(f32t({1, 5, 5, 4}), f32t({3, 3, 2, 5}), nhwc({{"feature_group_count", int64_t{2}}})); },
               ErrorCode::kShapeMismatch, {"convolution", "kernel output features 5", "feature_group_count = 2"});
  expect_error([] { conv1(f32t({4, 5, 5, 2}), f32t({3, 3, 2, 3}), nhwc({{"batch_group_count", int64_t{2}}})); },
               ErrorCode::kShapeMismatch, {"convolution", "kernel output features 3", "batch_group_count = 2"});
}

TEST(ConvolutionErrors, BatchNotDivisibleByBatchGroups) {
  expect_error([] { conv1(f32t({3, 5, 5, 2}), f32t({3, 3, 2, 4}), nhwc({{"batch_group_count", int64_t{2}}})); },
               ErrorCode::kShapeMismatch, {"convolution", "batch size 3", "batch_group_count = 2"});
}

TEST(ConvolutionErrors, BadGroupCounts) {
  expect_error([] { conv1(f32t({1, 5, 5, 2}), f32t({3, 3, 2, 4}), nhwc({{"feature_group_count", int64_t{0}}})); },
               ErrorCode::kInvalidArgument, {"convolution", "feature_group_count", ">= 1"});
  expect_error(
      [] {
        conv1(f32t({2, 5, 5, 2}), f32t({3, 3, 1, 4}),
              nhwc({{"feature_group_count", int64_t{2}}, {"batch_group_count", int64_t{2}}}));
      },
      ErrorCode::kInvalidArgument, {"convolution", "feature_group_count = 2", "batch_group_count = 2"});
}

TEST(ConvolutionErrors, NegativeSpatialSize) {
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({1, 1, 1, 1}), nhwc({{"padding", Ints{-3, -3, 0, 0}}})); },
               ErrorCode::kShapeMismatch,
               {"convolution", "spatial dimension 0", "padding [-3, -3]", "negative size -1"});
}

TEST(ConvolutionErrors, WindowAttributes) {
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({1, 1, 1, 1}), nhwc({{"window_strides", Ints{1, 0}}})); },
               ErrorCode::kInvalidArgument, {"convolution", "window_strides = [1, 0]", "contains 0"});
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({1, 1, 1, 1}), nhwc({{"padding", Ints{1, 1}}})); },
               ErrorCode::kInvalidArgument, {"convolution", "padding = [1, 1]", "needs 4"});
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({1, 1, 1, 1}), nhwc({{"rhs_dilation", Ints{1, 1, 1}}})); },
               ErrorCode::kInvalidArgument, {"convolution", "rhs_dilation = [1, 1, 1]", "needs 2"});
}

TEST(ConvolutionErrors, RankAndDTypeMismatch) {
  expect_error([] { conv1(f32t({1, 5, 5, 1}), f32t({3, 1, 1}), nhwc()); }, ErrorCode::kShapeMismatch,
               {"convolution", "different ranks", "4 vs 3"});
  expect_error([] { conv1(f32t({1, 5, 5, 1}), {{3, 3, 1, 1}, DType::kF64}, nhwc()); }, ErrorCode::kDTypeMismatch,
               {"convolution", "f32[1,5,5,1]", "f64[3,3,1,1]"});
  expect_error([] { conv1({{1, 5, 5, 1}, DType::kBool}, {{3, 3, 1, 1}, DType::kBool}, nhwc()); },
               ErrorCode::kDTypeMismatch, {"convolution", "bool"});
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(ConvolutionShape, HugeDilationOrPaddingIsAnOverflowErrorNotAWrongShape) {
  const int64_t big = int64_t{6148914691236517206};
  testing::expect_error([&] { conv1(f32t({1, 4, 4, 1}), f32t({1, 1, 1, 1}), nhwc({{"lhs_dilation", Ints{big, 1}}})); },
                        ErrorCode::kInvalidArgument, {"convolution", "overflows int64"});
  const int64_t max = std::numeric_limits<int64_t>::max();
  testing::expect_error(
      [&] { conv1(f32t({1, 4, 4, 1}), f32t({1, 1, 1, 1}), nhwc({{"padding", Ints{max, max, 0, 0}}})); },
      ErrorCode::kInvalidArgument, {"overflows int64"});
}

}  // namespace
}  // namespace ingot
