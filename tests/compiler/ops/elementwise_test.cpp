// Shape rules and verification of the elementwise op family (docs/ir.md).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using ir::TensorType;
using testing::expect_error;
using testing::infer;

TensorType t(DType dtype, Shape shape) { return TensorType{std::move(shape), dtype}; }

const char* const kFloatOnlyUnary[] = {
    "exponential", "log",   "log_plus_one", "exponential_minus_one", "tanh", "logistic", "sqrt", "rsqrt", "sine",
    "cosine",      "floor", "ceil",         "round_nearest_even",    "erf"};

TEST(ElementwiseShapeTest, FloatUnaryOpsKeepTypeForEveryFloatDtype) {
  for (const char* op : kFloatOnlyUnary) {
    for (DType d : {DType::kF16, DType::kBF16, DType::kF32, DType::kF64}) {
      EXPECT_EQ(infer(op, {t(d, {2, 3})}), std::vector<TensorType>{t(d, {2, 3})}) << op;
    }
    EXPECT_EQ(infer(op, {t(DType::kF32, {})}), std::vector<TensorType>{t(DType::kF32, {})}) << op;
    EXPECT_EQ(infer(op, {t(DType::kF32, {0, 4})}), std::vector<TensorType>{t(DType::kF32, {0, 4})}) << op;
  }
}

TEST(ElementwiseShapeTest, FloatOnlyUnaryOpsRejectIntegersAndBool) {
  for (const char* op : kFloatOnlyUnary) {
    expect_error([&] { infer(op, {t(DType::kI32, {3})}); }, ErrorCode::kDTypeMismatch, {op, "i32", "f32"});
    expect_error([&] { infer(op, {t(DType::kBool, {3})}); }, ErrorCode::kDTypeMismatch, {op, "bool"});
  }
  expect_error([&] { infer("is_finite", {t(DType::kI64, {})}); }, ErrorCode::kDTypeMismatch, {"is_finite", "i64"});
}

TEST(ElementwiseShapeTest, NegateAbsSignAcceptSignedIntsAndFloatsOnly) {
  for (const char* op : {"negate", "abs", "sign"}) {
    for (DType d : {DType::kI8, DType::kI32, DType::kI64, DType::kF16, DType::kBF16, DType::kF32, DType::kF64}) {
      EXPECT_EQ(infer(op, {t(d, {4})}), std::vector<TensorType>{t(d, {4})}) << op;
    }
    for (DType d : {DType::kU8, DType::kU32, DType::kU64}) {
      expect_error([&] { infer(op, {t(d, {4})}); }, ErrorCode::kDTypeMismatch, {op, std::string(dtype_name(d)), "i32"});
    }
    expect_error([&] { infer(op, {t(DType::kBool, {4})}); }, ErrorCode::kDTypeMismatch, {op, "bool"});
  }
}

TEST(ElementwiseShapeTest, NotAcceptsBoolAndIntegersOnly) {
  for (DType d : {DType::kBool, DType::kI8, DType::kU8, DType::kI32, DType::kU32, DType::kI64, DType::kU64}) {
    EXPECT_EQ(infer("not", {t(d, {2})}), std::vector<TensorType>{t(d, {2})});
  }
  expect_error([] { infer("not", {t(DType::kF32, {2})}); }, ErrorCode::kDTypeMismatch, {"not", "f32", "bool"});
}

TEST(ElementwiseShapeTest, IsFiniteReturnsBool) {
  EXPECT_EQ(infer("is_finite", {t(DType::kBF16, {3, 1})}), std::vector<TensorType>{t(DType::kBool, {3, 1})});
}

TEST(ElementwiseShapeTest, BinaryOpsKeepTheOperandType) {
  for (const char* op : {"add", "subtract", "multiply", "divide", "remainder", "power", "maximum", "minimum"}) {
    for (DType d : {DType::kI8, DType::kU8, DType::kI32, DType::kU64, DType::kF16, DType::kF64}) {
      EXPECT_EQ(infer(op, {t(d, {2, 3}), t(d, {2, 3})}), std::vector<TensorType>{t(d, {2, 3})}) << op;
    }
    expect_error([&] { infer(op, {t(DType::kBool, {2}), t(DType::kBool, {2})}); }, ErrorCode::kDTypeMismatch,
                 {op, "bool"});
  }
  EXPECT_EQ(infer("atan2", {t(DType::kF32, {}), t(DType::kF32, {})}), std::vector<TensorType>{t(DType::kF32, {})});
  expect_error([] { infer("atan2", {t(DType::kI32, {2}), t(DType::kI32, {2})}); }, ErrorCode::kDTypeMismatch,
               {"atan2", "i32"});
  for (const char* op : {"and", "or", "xor"}) {
    EXPECT_EQ(infer(op, {t(DType::kBool, {5}), t(DType::kBool, {5})}), std::vector<TensorType>{t(DType::kBool, {5})});
    EXPECT_EQ(infer(op, {t(DType::kU32, {5}), t(DType::kU32, {5})}), std::vector<TensorType>{t(DType::kU32, {5})});
    expect_error([&] { infer(op, {t(DType::kF32, {5}), t(DType::kF32, {5})}); }, ErrorCode::kDTypeMismatch,
                 {op, "f32"});
  }
}

TEST(ElementwiseShapeTest, BinaryShapeMismatchNamesOpAndBothShapes) {
  expect_error([] { infer("add", {t(DType::kF32, {2, 3}), t(DType::kF32, {4})}); }, ErrorCode::kShapeMismatch,
               {"add", "(2, 3)", "(4,)", "broadcast", "ingot::add"});
  // Size-1 dimensions are not broadcast implicitly either.
  expect_error([] { infer("multiply", {t(DType::kF32, {2, 3}), t(DType::kF32, {1, 3})}); }, ErrorCode::kShapeMismatch,
               {"multiply", "(2, 3)", "(1, 3)"});
  expect_error([] { infer("maximum", {t(DType::kF32, {}), t(DType::kF32, {3})}); }, ErrorCode::kShapeMismatch,
               {"maximum", "()", "(3,)"});
}

TEST(ElementwiseShapeTest, BinaryDTypeMismatchNamesBothDTypes) {
  expect_error([] { infer("add", {t(DType::kF32, {2}), t(DType::kI32, {2})}); }, ErrorCode::kDTypeMismatch,
               {"add", "f32", "i32", "convert"});
  expect_error([] { infer("and", {t(DType::kBool, {2}), t(DType::kU8, {2})}); }, ErrorCode::kDTypeMismatch,
               {"and", "bool", "u8"});
}

TEST(ElementwiseShapeTest, CompareReturnsBoolForEveryDirection) {
  for (const char* dir : {"EQ", "NE", "LT", "LE", "GT", "GE"}) {
    EXPECT_EQ(infer("compare", {t(DType::kF16, {2, 2}), t(DType::kF16, {2, 2})},
                    Attributes{{"comparison_direction", std::string(dir)}}),
              std::vector<TensorType>{t(DType::kBool, {2, 2})});
  }
  EXPECT_EQ(infer("compare", {t(DType::kBool, {}), t(DType::kBool, {})},
                  Attributes{{"comparison_direction", std::string("EQ")}}),
            std::vector<TensorType>{t(DType::kBool, {})});
}

TEST(ElementwiseShapeTest, CompareErrors) {
  expect_error(
      [] {
        infer("compare", {t(DType::kF32, {2}), t(DType::kF32, {2})},
              Attributes{{"comparison_direction", std::string("LESS")}});
      },
      ErrorCode::kInvalidArgument, {"compare", "comparison_direction", "LESS", "EQ, NE"});
  expect_error([] { infer("compare", {t(DType::kF32, {2}), t(DType::kF32, {2})}); }, ErrorCode::kNotFound,
               {"compare", "comparison_direction"});
  expect_error(
      [] {
        infer("compare", {t(DType::kF32, {2}), t(DType::kF32, {2})}, Attributes{{"comparison_direction", int64_t{1}}});
      },
      ErrorCode::kInvalidArgument, {"compare", "comparison_direction", "string"});
  expect_error(
      [] {
        infer("compare", {t(DType::kF32, {2}), t(DType::kF32, {3})},
              Attributes{{"comparison_direction", std::string("EQ")}});
      },
      ErrorCode::kShapeMismatch, {"compare", "(2,)", "(3,)"});
  expect_error(
      [] {
        infer("compare", {t(DType::kF32, {2}), t(DType::kF64, {2})},
              Attributes{{"comparison_direction", std::string("EQ")}});
      },
      ErrorCode::kDTypeMismatch, {"compare", "f32", "f64"});
}

TEST(ElementwiseShapeTest, SelectTypes) {
  EXPECT_EQ(infer("select", {t(DType::kBool, {2, 3}), t(DType::kI64, {2, 3}), t(DType::kI64, {2, 3})}),
            std::vector<TensorType>{t(DType::kI64, {2, 3})});
  EXPECT_EQ(infer("select", {t(DType::kBool, {}), t(DType::kF16, {2, 3}), t(DType::kF16, {2, 3})}),
            std::vector<TensorType>{t(DType::kF16, {2, 3})});
}

TEST(ElementwiseShapeTest, SelectErrors) {
  expect_error([] { infer("select", {t(DType::kI32, {2}), t(DType::kF32, {2}), t(DType::kF32, {2})}); },
               ErrorCode::kDTypeMismatch, {"select", "pred", "i32[2]", "bool"});
  expect_error([] { infer("select", {t(DType::kBool, {3}), t(DType::kF32, {2}), t(DType::kF32, {2})}); },
               ErrorCode::kShapeMismatch, {"select", "pred", "(3,)", "(2,)"});
  expect_error([] { infer("select", {t(DType::kBool, {2}), t(DType::kF32, {2}), t(DType::kI32, {2})}); },
               ErrorCode::kDTypeMismatch, {"select", "f32[2]", "i32[2]"});
  expect_error([] { infer("select", {t(DType::kBool, {}), t(DType::kF32, {2}), t(DType::kF32, {1})}); },
               ErrorCode::kShapeMismatch, {"select", "f32[2]", "f32[1]"});
}

TEST(ElementwiseShapeTest, ClampTypes) {
  EXPECT_EQ(infer("clamp", {t(DType::kF32, {}), t(DType::kF32, {2, 2}), t(DType::kF32, {2, 2})}),
            std::vector<TensorType>{t(DType::kF32, {2, 2})});
  EXPECT_EQ(infer("clamp", {t(DType::kU8, {3}), t(DType::kU8, {3}), t(DType::kU8, {})}),
            std::vector<TensorType>{t(DType::kU8, {3})});
}

TEST(ElementwiseShapeTest, ClampErrors) {
  expect_error([] { infer("clamp", {t(DType::kF32, {2}), t(DType::kF32, {2, 2}), t(DType::kF32, {})}); },
               ErrorCode::kShapeMismatch, {"clamp", "min", "(2,)", "(2, 2)"});
  expect_error([] { infer("clamp", {t(DType::kF32, {}), t(DType::kF32, {2, 2}), t(DType::kF32, {2, 1})}); },
               ErrorCode::kShapeMismatch, {"clamp", "max", "(2, 1)", "(2, 2)"});
  expect_error([] { infer("clamp", {t(DType::kI32, {}), t(DType::kF32, {2}), t(DType::kF32, {})}); },
               ErrorCode::kDTypeMismatch, {"clamp", "min", "i32", "f32"});
  expect_error([] { infer("clamp", {t(DType::kBool, {}), t(DType::kBool, {2}), t(DType::kBool, {})}); },
               ErrorCode::kDTypeMismatch, {"clamp", "bool"});
}

TEST(ElementwiseShapeTest, ConvertTypes) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(infer("convert", {t(DType::kF32, {2, 0})}, Attributes{{"dtype", std::string(dtype_name(d))}}),
              std::vector<TensorType>{t(d, {2, 0})});
  }
}

TEST(ElementwiseShapeTest, ConvertErrors) {
  expect_error([] { infer("convert", {t(DType::kF32, {2})}, Attributes{{"dtype", std::string("float32")}}); },
               ErrorCode::kInvalidArgument, {"convert", "dtype", "float32", "f32"});
  expect_error([] { infer("convert", {t(DType::kF32, {2})}); }, ErrorCode::kNotFound, {"convert", "dtype"});
}

TEST(ElementwiseShapeTest, ConstantTypeIsTheLiteral) {
  Array v = Array::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(infer("constant", {}, Attributes{{"value", v}}), std::vector<TensorType>{t(DType::kI32, {2, 3})});
  EXPECT_EQ(infer("constant", {}, Attributes{{"value", Array::scalar(2.5, DType::kBF16)}}),
            std::vector<TensorType>{t(DType::kBF16, {})});
  EXPECT_EQ(infer("constant", {}, Attributes{{"value", Array::zeros({0, 3}, DType::kF32)}}),
            std::vector<TensorType>{t(DType::kF32, {0, 3})});
}

TEST(ElementwiseShapeTest, ConstantErrors) {
  expect_error([] { infer("constant", {}); }, ErrorCode::kNotFound, {"constant", "value"});
  expect_error([] { infer("constant", {}, Attributes{{"value", 1.5}}); }, ErrorCode::kInvalidArgument,
               {"constant", "value", "float", "array"});
  expect_error([] { infer("constant", {}, Attributes{{"value", Array()}}); }, ErrorCode::kInvalidArgument,
               {"constant", "value", "invalid"});
}

Attributes iota_attrs(std::vector<int64_t> shape, const char* dtype, int64_t dim) {
  return Attributes{{"shape", std::move(shape)}, {"dtype", std::string(dtype)}, {"iota_dimension", dim}};
}

TEST(ElementwiseShapeTest, IotaTypes) {
  EXPECT_EQ(infer("iota", {}, iota_attrs({2, 3}, "f32", 1)), std::vector<TensorType>{t(DType::kF32, {2, 3})});
  EXPECT_EQ(infer("iota", {}, iota_attrs({0, 5}, "u8", 0)), std::vector<TensorType>{t(DType::kU8, {0, 5})});
}

TEST(ElementwiseShapeTest, IotaErrors) {
  expect_error([] { infer("iota", {}, iota_attrs({2, 3}, "i32", 2)); }, ErrorCode::kOutOfRange,
               {"iota", "iota_dimension", "2", "rank 2"});
  expect_error([] { infer("iota", {}, iota_attrs({2, 3}, "i32", -1)); }, ErrorCode::kOutOfRange,
               {"iota", "iota_dimension", "-1"});
  expect_error([] { infer("iota", {}, iota_attrs({}, "i32", 0)); }, ErrorCode::kOutOfRange,
               {"iota", "iota_dimension", "rank 0"});
  expect_error([] { infer("iota", {}, iota_attrs({2, -3}, "i32", 0)); }, ErrorCode::kInvalidArgument,
               {"iota", "shape", "-3"});
  expect_error([] { infer("iota", {}, iota_attrs({4}, "int", 0)); }, ErrorCode::kInvalidArgument,
               {"iota", "dtype", "int"});
  expect_error([] { infer("iota", {}, iota_attrs({4}, "bool", 0)); }, ErrorCode::kInvalidArgument, {"iota", "bool"});
  expect_error([] { infer("iota", {}, Attributes{{"shape", std::vector<int64_t>{4}}, {"dtype", std::string("f32")}}); },
               ErrorCode::kNotFound, {"iota", "iota_dimension"});
  expect_error([] { infer("iota", {}, Attributes{{"dtype", std::string("f32")}, {"iota_dimension", int64_t{0}}}); },
               ErrorCode::kNotFound, {"iota", "shape"});
}

TEST(ElementwiseShapeTest, WrongOperandCounts) {
  expect_error([] { infer("add", {t(DType::kF32, {2})}); }, ErrorCode::kInvalidArgument,
               {"add", "takes 2 operands but got 1"});
  expect_error([] { infer("negate", {t(DType::kF32, {2}), t(DType::kF32, {2})}); }, ErrorCode::kInvalidArgument,
               {"negate", "takes 1 operands but got 2"});
  expect_error([] { infer("select", {t(DType::kBool, {}), t(DType::kF32, {})}); }, ErrorCode::kInvalidArgument,
               {"select", "takes 3 operands but got 2"});
  expect_error([] { infer("constant", {t(DType::kF32, {})}, Attributes{{"value", Array::scalar(1, DType::kF32)}}); },
               ErrorCode::kInvalidArgument, {"constant", "takes 0 operands but got 1"});
}

TEST(ElementwiseShapeTest, EveryOpHasAKernelAndSummary) {
  const ir::OpRegistry& r = ir::OpRegistry::builtin();
  for (const char* op : {"constant",
                         "iota",
                         "convert",
                         "negate",
                         "abs",
                         "sign",
                         "exponential",
                         "log",
                         "log_plus_one",
                         "exponential_minus_one",
                         "tanh",
                         "logistic",
                         "sqrt",
                         "rsqrt",
                         "sine",
                         "cosine",
                         "floor",
                         "ceil",
                         "round_nearest_even",
                         "erf",
                         "not",
                         "is_finite",
                         "add",
                         "subtract",
                         "multiply",
                         "divide",
                         "remainder",
                         "power",
                         "maximum",
                         "minimum",
                         "atan2",
                         "and",
                         "or",
                         "xor",
                         "compare",
                         "select",
                         "clamp"}) {
    const ir::OpDef& def = r.get(op);
    EXPECT_TRUE(static_cast<bool>(def.shape_rule)) << op;
    EXPECT_TRUE(static_cast<bool>(def.interpret)) << op;
    EXPECT_FALSE(def.summary.empty()) << op;
  }
}

TEST(ElementwiseShapeTest, VerifyRerunsTheRules) {
  ir::Graph g;
  ir::ValueId a = g.add_parameter(t(DType::kF32, {2}));
  ir::ValueId b = g.add_parameter(t(DType::kF32, {2}));
  std::vector<ir::ValueId> sum = g.add_node("add", {a, b});
  ir::ValueId c = g.add_node("compare", {sum[0], b}, Attributes{{"comparison_direction", std::string("GT")}})[0];
  ir::ValueId s = g.add_node("select", {c, sum[0], a})[0];
  g.set_outputs({s});
  EXPECT_NO_THROW(g.verify());
  EXPECT_EQ(g.type(c), t(DType::kBool, {2}));
  EXPECT_EQ(g.type(s), t(DType::kF32, {2}));
}

}  // namespace
}  // namespace ingot
