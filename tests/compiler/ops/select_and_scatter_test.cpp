// Shape rule and verification errors of select_and_scatter (reduction family).
#include <gtest/gtest.h>

#include "ingot/ir/text.h"
#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using ir::TensorType;
using testing::expect_error;
using testing::infer;
using Ints = std::vector<int64_t>;

TensorType tt(Shape shape, DType dtype = DType::kF32) { return TensorType{std::move(shape), dtype}; }

Attributes sas_attrs(Ints window, Ints strides, Ints padding, const std::string& select = "GE") {
  return {{"window_dimensions", window}, {"window_strides", strides}, {"padding", padding}, {"select", select}};
}

TEST(SelectAndScatterShape, ResultHasTheOperandsType) {
  // 2x2 windows with stride 2 over (4, 6): source (2, 3).
  EXPECT_EQ(infer("select_and_scatter", {tt({4, 6}), tt({2, 3}), tt({})}, sas_attrs({2, 2}, {2, 2}, {0, 0, 0, 0})),
            std::vector<TensorType>{tt({4, 6})});
  // "same"-style padding of a 3-window with stride 1 keeps the size.
  EXPECT_EQ(infer("select_and_scatter", {tt({5}, DType::kI32), tt({5}, DType::kI32), tt({}, DType::kI32)},
                  sas_attrs({3}, {1}, {1, 1}, "LE")),
            std::vector<TensorType>{tt({5}, DType::kI32)});
  // Defaults: unit strides, no padding.
  Attributes defaults = {{"window_dimensions", Ints{2}}, {"select", std::string("GE")}};
  EXPECT_EQ(infer("select_and_scatter", {tt({4}, DType::kF16), tt({3}, DType::kF16), tt({}, DType::kF16)}, defaults),
            std::vector<TensorType>{tt({4}, DType::kF16)});
  // Windows that do not fit: an empty source.
  EXPECT_EQ(infer("select_and_scatter", {tt({2}), tt({0}), tt({})}, sas_attrs({3}, {1}, {0, 0})),
            std::vector<TensorType>{tt({2})});
  // Negative padding crops.
  EXPECT_EQ(infer("select_and_scatter", {tt({5}), tt({2}), tt({})}, sas_attrs({2}, {2}, {-1, 0})),
            std::vector<TensorType>{tt({5})});
}

TEST(SelectAndScatterShape, SourceMustHaveTheWindowsShape) {
  expect_error(
      [] { infer("select_and_scatter", {tt({4, 6}), tt({2, 2}), tt({})}, sas_attrs({2, 2}, {2, 2}, {0, 0, 0, 0})); },
      ErrorCode::kShapeMismatch,
      {"select_and_scatter", "source has shape (2, 2)", "f32[4,6]", "window_dimensions = [2, 2]",
       "window_strides = [2, 2]", "padding = [0, 0, 0, 0]", "give (2, 3)"});
}

TEST(SelectAndScatterShape, DTypeErrors) {
  expect_error(
      [] { infer("select_and_scatter", {tt({4}), tt({2}, DType::kF64), tt({})}, sas_attrs({2}, {2}, {0, 0})); },
      ErrorCode::kDTypeMismatch, {"select_and_scatter", "source has type f64[2]", "f32[4]"});
  expect_error(
      [] { infer("select_and_scatter", {tt({4}), tt({2}), tt({}, DType::kI32)}, sas_attrs({2}, {2}, {0, 0})); },
      ErrorCode::kDTypeMismatch, {"select_and_scatter", "init has type i32[]", "f32[4]"});
  expect_error(
      [] {
        infer("select_and_scatter", {tt({4}, DType::kBool), tt({2}, DType::kBool), tt({}, DType::kBool)},
              sas_attrs({2}, {2}, {0, 0}));
      },
      ErrorCode::kDTypeMismatch, {"select_and_scatter", "integer or floating", "bool[4]"});
}

TEST(SelectAndScatterShape, InitMustBeAScalar) {
  expect_error([] { infer("select_and_scatter", {tt({4}), tt({2}), tt({1})}, sas_attrs({2}, {2}, {0, 0})); },
               ErrorCode::kShapeMismatch, {"select_and_scatter", "init must be a scalar", "f32[1]"});
}

TEST(SelectAndScatterShape, SelectMustBeGeOrLe) {
  expect_error([] { infer("select_and_scatter", {tt({4}), tt({2}), tt({})}, sas_attrs({2}, {2}, {0, 0}, "GT")); },
               ErrorCode::kInvalidArgument, {"select_and_scatter", "select = \"GT\"", "GE, LE"});
  expect_error(
      [] {
        infer("select_and_scatter", {tt({4}), tt({2}), tt({})},
              {{"window_dimensions", Ints{2}}, {"window_strides", Ints{2}}});
      },
      ErrorCode::kNotFound, {"select_and_scatter", "select"});
}

TEST(SelectAndScatterShape, WindowAttributeErrors) {
  expect_error(
      [] { infer("select_and_scatter", {tt({4, 4}), tt({2, 2}), tt({})}, sas_attrs({2}, {2, 2}, {0, 0, 0, 0})); },
      ErrorCode::kInvalidArgument, {"select_and_scatter", "window_dimensions = [2]", "1 entries", "rank 2"});
  expect_error([] { infer("select_and_scatter", {tt({4}), tt({2}), tt({})}, sas_attrs({2}, {2}, {0, 0, 0})); },
               ErrorCode::kInvalidArgument, {"select_and_scatter", "padding = [0, 0, 0]", "must have 2"});
  expect_error([] { infer("select_and_scatter", {tt({4}), tt({2}), tt({})}, sas_attrs({2}, {0}, {0, 0})); },
               ErrorCode::kInvalidArgument, {"select_and_scatter", "window_strides[0] = 0", ">= 1"});
  expect_error([] { infer("select_and_scatter", {tt({4}), tt({2}), tt({})}, sas_attrs({0}, {1}, {0, 0})); },
               ErrorCode::kInvalidArgument, {"select_and_scatter", "window_dimensions[0] = 0", ">= 1"});
  expect_error([] { infer("select_and_scatter", {tt({4}), tt({2}), tt({})}, sas_attrs({1}, {1}, {-3, -2})); },
               ErrorCode::kInvalidArgument, {"select_and_scatter", "negative size -1", "padding lo -3"});
  expect_error(
      [] {
        infer("select_and_scatter", {tt({4}), tt({2}), tt({})},
              {{"window_strides", Ints{2}}, {"select", std::string("GE")}});
      },
      ErrorCode::kNotFound, {"select_and_scatter", "window_dimensions"});
}

TEST(SelectAndScatterShape, TextRoundTrip) {
  ir::Graph g = testing::one_op_graph("select_and_scatter",
                                      {Array::from_vector<float>({1, 2, 3, 4}, {4}),
                                       Array::from_vector<float>({1, 2}, {2}), Array::scalar(0.0, DType::kF32)},
                                      sas_attrs({2}, {2}, {0, 0}, "LE"));
  const std::string text = ir::print_graph(g);
  EXPECT_NE(text.find("select = \"LE\""), std::string::npos) << text;
  EXPECT_TRUE(ir::parse_graph(text) == g) << text;
}

}  // namespace
}  // namespace ingot
