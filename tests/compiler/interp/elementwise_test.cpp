// Reference interpreter kernels of the elementwise op family: exact values and edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::expect_values;
using testing::f32;
using testing::i32;
using testing::run_op;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();

/// 1-D array of `dtype` holding `values` (converted as `convert` would; exact in these tests).
Array arr(DType dtype, const std::vector<double>& values) {
  return Array::from_doubles(values, {static_cast<int64_t>(values.size())}, dtype);
}

Array unary(const std::string& op, const Array& x) { return run_op(op, {x}); }
Array binary(const std::string& op, const Array& a, const Array& b) { return run_op(op, {a, b}); }
Array compare(const std::string& dir, const Array& a, const Array& b) {
  return run_op("compare", {a, b}, Attributes{{"comparison_direction", dir}});
}
Array convert(const Array& x, const char* dtype) {
  return run_op("convert", {x}, Attributes{{"dtype", std::string(dtype)}});
}

// ---------------------------------------------------------------------------------------------
// Unary float ops.

TEST(ElementwiseInterpTest, ExpLogFamilyF32) {
  expect_values(unary("exponential", f32({0, 1, -kInfF, kInfF, kNaNF, 100})), {1, std::exp(1.0f), 0, kInf, kNaN, kInf});
  expect_values(unary("log", f32({1, 0, -0.0f, -1, kInfF, kNaNF, 2})),
                {0, -kInf, -kInf, kNaN, kInf, kNaN, std::log(2.0f)});
  expect_values(unary("log_plus_one", f32({0, -1, -2, kInfF, 1e-10f})), {0, -kInf, kNaN, kInf, std::log1p(1e-10f)});
  expect_values(unary("exponential_minus_one", f32({0, -kInfF, kInfF, 1e-10f, kNaNF})),
                {0, -1, kInf, std::expm1(1e-10f), kNaN});
}

TEST(ElementwiseInterpTest, ExpLogFamilyF64UsesDoublePrecision) {
  expect_values(unary("exponential", arr(DType::kF64, {1})), {M_E});
  expect_values(unary("log", arr(DType::kF64, {M_E, 0, -1})), {std::log(M_E), -kInf, kNaN});
  // log1p keeps precision that log(1 + x) loses.
  expect_values(unary("log_plus_one", arr(DType::kF64, {1e-20})), {1e-20});
  expect_values(unary("exponential_minus_one", arr(DType::kF64, {1e-20})), {1e-20});
}

TEST(ElementwiseInterpTest, TanhAndLogistic) {
  expect_values(unary("tanh", f32({0, kInfF, -kInfF, 1, kNaNF, 100})), {0, 1, -1, std::tanh(1.0f), kNaN, 1});
  // Stable for large |x|: no NaN from inf / inf, tiny results keep their value.
  expect_values(unary("logistic", f32({0, kInfF, -kInfF, 1000, -1000, -100, kNaNF})),
                {0.5, 1, 0, 1, 0, std::exp(-100.0f), kNaN});
  expect_values(unary("logistic", arr(DType::kF64, {-800, 800, 2})), {0, 1, 1.0 / (1.0 + std::exp(-2.0))});
}

TEST(ElementwiseInterpTest, SqrtAndRsqrt) {
  expect_values(unary("sqrt", f32({4, 0, -1, kInfF, -kInfF, kNaNF, 2})),
                {2, 0, kNaN, kInf, kNaN, kNaN, std::sqrt(2.0f)});
  expect_values(unary("rsqrt", f32({4, 0, -1, kInfF, 0.25f})), {0.5, kInf, kNaN, 0, 2});
  std::vector<float> r = unary("rsqrt", f32({-0.0f})).to_vector<float>();
  EXPECT_EQ(r[0], -kInfF);  // 1 / sqrt(-0) = 1 / -0
  std::vector<float> s = unary("sqrt", f32({-0.0f})).to_vector<float>();
  EXPECT_TRUE(s[0] == 0 && std::signbit(s[0]));
}

TEST(ElementwiseInterpTest, Trigonometry) {
  expect_values(unary("sine", f32({0, 1, kInfF, kNaNF})), {0, std::sin(1.0f), kNaN, kNaN});
  expect_values(unary("cosine", f32({0, 1, -kInfF, kNaNF})), {1, std::cos(1.0f), kNaN, kNaN});
  expect_values(unary("sine", arr(DType::kF64, {M_PI / 2})), {1});
}

TEST(ElementwiseInterpTest, Erf) {
  expect_values(unary("erf", f32({0, kInfF, -kInfF, kNaNF, 0.5f, 10})), {0, 1, -1, kNaN, std::erf(0.5f), 1});
}

TEST(ElementwiseInterpTest, FloorCeil) {
  expect_values(unary("floor", f32({-1.5f, 1.5f, 2, -0.25f, kInfF, -kInfF, kNaNF})), {-2, 1, 2, -1, kInf, -kInf, kNaN});
  expect_values(unary("ceil", f32({-1.5f, 1.5f, 2, 0.25f, kInfF, -kInfF, kNaNF})), {-1, 2, 2, 1, kInf, -kInf, kNaN});
  std::vector<float> c = unary("ceil", f32({-0.5f})).to_vector<float>();
  EXPECT_TRUE(c[0] == 0 && std::signbit(c[0]));
}

TEST(ElementwiseInterpTest, RoundNearestEven) {
  expect_values(unary("round_nearest_even", f32({0.5f, 1.5f, 2.5f, 3.5f, -2.5f, -3.5f, 2.4f, 2.6f, -2.6f, kInfF, -kInfF,
                                                 kNaNF, 1e30f, 8388609.0f})),
                {0, 2, 2, 4, -2, -4, 2, 3, -3, kInf, -kInf, kNaN, double{1e30f}, 8388609});
  std::vector<float> z = unary("round_nearest_even", f32({-0.5f, -0.4f, -1e-30f})).to_vector<float>();
  for (float v : z) EXPECT_TRUE(v == 0 && std::signbit(v)) << v;
  expect_values(unary("round_nearest_even", arr(DType::kF64, {4503599627370497.0, 0.5000000000000001})),
                {4503599627370497.0, 1});
}

TEST(ElementwiseInterpTest, HalfTypesComputeInFloatAndRound) {
  // exp(1) = 2.71828...: the f16 grid near 2 has step 2^-9, bf16 has 2^-6; both round to 2.71875.
  expect_values(unary("exponential", arr(DType::kF16, {1})), {2.71875});
  expect_values(unary("exponential", arr(DType::kBF16, {1})), {2.71875});
  // sqrt(2) = 1.41421...: f16 step 2^-10 gives 1448/1024, bf16 step 2^-7 gives 181/128.
  expect_values(unary("sqrt", arr(DType::kF16, {2})), {1448.0 / 1024});
  expect_values(unary("sqrt", arr(DType::kBF16, {2})), {181.0 / 128});
  expect_values(unary("exponential", arr(DType::kF16, {12})), {kInf});     // 162754 > 65504
  expect_values(unary("exponential", arr(DType::kBF16, {12})), {162816});  // 159 * 2^10
  expect_values(unary("log", arr(DType::kF16, {0, -1})), {-kInf, kNaN});
  expect_values(unary("is_finite", arr(DType::kF16, {65504, kInf, kNaN})), {1, 0, 0});
}

TEST(ElementwiseInterpTest, IsFinite) {
  expect_values(unary("is_finite", f32({0, -1e38f, kInfF, -kInfF, kNaNF})), {1, 1, 0, 0, 0});
  expect_values(unary("is_finite", arr(DType::kF64, {1e308, -kInf})), {1, 0});
}

// ---------------------------------------------------------------------------------------------
// negate, abs, sign, not.

TEST(ElementwiseInterpTest, NegateAbsSignFloat) {
  expect_values(unary("negate", f32({1, -2, kInfF, kNaNF})), {-1, 2, -kInf, kNaN});
  expect_values(unary("abs", f32({-1.5f, 2, -kInfF, kNaNF})), {1.5, 2, kInf, kNaN});
  expect_values(unary("sign", f32({-3, 0.5f, kInfF, -kInfF, kNaNF, 0})), {-1, 1, 1, -1, kNaN, 0});
  std::vector<float> s = unary("sign", f32({-0.0f, 0.0f})).to_vector<float>();
  EXPECT_TRUE(s[0] == 0 && std::signbit(s[0]));
  EXPECT_TRUE(s[1] == 0 && !std::signbit(s[1]));
  std::vector<float> n = unary("negate", f32({0.0f})).to_vector<float>();
  EXPECT_TRUE(std::signbit(n[0]));
  std::vector<float> a = unary("abs", f32({-0.0f})).to_vector<float>();
  EXPECT_FALSE(std::signbit(a[0]));
  expect_values(unary("sign", arr(DType::kBF16, {-2, 0, 3})), {-1, 0, 1});
}

TEST(ElementwiseInterpTest, NegateAbsSignIntegersWrap) {
  EXPECT_EQ(unary("negate", i32({5, -7, 0, kI32Max, kI32Min})).to_vector<int32_t>(),
            (std::vector<int32_t>{-5, 7, 0, -kI32Max, kI32Min}));
  EXPECT_EQ(unary("abs", i32({-5, 7, 0, kI32Min})).to_vector<int32_t>(), (std::vector<int32_t>{5, 7, 0, kI32Min}));
  EXPECT_EQ(unary("sign", i32({-5, 7, 0, kI32Min})).to_vector<int32_t>(), (std::vector<int32_t>{-1, 1, 0, -1}));
  EXPECT_EQ(unary("negate", Array::from_vector<int8_t>({-128, 127}, {2})).to_vector<int8_t>(),
            (std::vector<int8_t>{-128, -127}));
  const int64_t kI64Min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(unary("abs", Array::from_vector<int64_t>({kI64Min, -3}, {2})).to_vector<int64_t>(),
            (std::vector<int64_t>{kI64Min, 3}));
}

TEST(ElementwiseInterpTest, NotIsLogicalForBoolAndBitwiseForIntegers) {
  EXPECT_EQ(unary("not", Array::from_vector<bool>({true, false}, {2})).to_vector<bool>(),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(unary("not", i32({0, -1, 5})).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, -6}));
  EXPECT_EQ(unary("not", Array::from_vector<uint8_t>({0, 0x0f}, {2})).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0xff, 0xf0}));
  EXPECT_EQ(unary("not", Array::from_vector<uint64_t>({0}, {1})).to_vector<uint64_t>(),
            (std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()}));
}

// ---------------------------------------------------------------------------------------------
// Binary arithmetic.

TEST(ElementwiseInterpTest, FloatArithmeticWithSpecials) {
  Array a = f32({1, kInfF, kInfF, -kInfF, kNaNF, 0, -1});
  Array b = f32({2, -kInfF, 1, -kInfF, 1, 0, 0});
  expect_values(binary("add", a, b), {3, kNaN, kInf, -kInf, kNaN, 0, -1});
  expect_values(binary("subtract", a, b), {-1, kInf, kInf, kNaN, kNaN, 0, -1});
  expect_values(binary("multiply", a, b), {2, -kInf, kInf, kInf, kNaN, 0, -0.0});
  expect_values(binary("divide", a, b), {0.5, kNaN, kInf, kNaN, kNaN, kNaN, -kInf});
  expect_values(binary("add", f32({0.1f}), f32({0.2f})), {0.1f + 0.2f});
  expect_values(binary("add", arr(DType::kF64, {0.1}), arr(DType::kF64, {0.2})), {0.1 + 0.2});
}

TEST(ElementwiseInterpTest, FloatRemainderIsFmod) {
  expect_values(binary("remainder", f32({5.5f, -5.5f, 5.5f, 1, kInfF, 1, kNaNF}), f32({2, 2, -2, 0, 1, kInfF, 1})),
                {1.5, -1.5, 1.5, kNaN, kNaN, 1, kNaN});
}

TEST(ElementwiseInterpTest, FloatPower) {
  expect_values(
      binary("power", f32({2, 4, -8, 0, kNaNF, 1, -2, 2}), f32({10, 0.5f, 1.0f / 3, -1, 0, kNaNF, 3, -kInfF})),
      {1024, 2, kNaN, kInf, 1, 1, -8, 0});
}

TEST(ElementwiseInterpTest, MaximumMinimumPropagateNaN) {
  Array a = f32({1, kNaNF, 3, -kInfF, kNaNF});
  Array b = f32({2, 1, kNaNF, 5, kNaNF});
  expect_values(binary("maximum", a, b), {2, kNaN, kNaN, 5, kNaN});
  expect_values(binary("minimum", a, b), {1, kNaN, kNaN, -kInf, kNaN});
  std::vector<float> mx = binary("maximum", f32({-0.0f, 0.0f}), f32({0.0f, -0.0f})).to_vector<float>();
  std::vector<float> mn = binary("minimum", f32({-0.0f, 0.0f}), f32({0.0f, -0.0f})).to_vector<float>();
  for (float v : mx) EXPECT_FALSE(std::signbit(v));
  for (float v : mn) EXPECT_TRUE(std::signbit(v));
  EXPECT_EQ(binary("maximum", i32({-3, 7}), i32({2, -9})).to_vector<int32_t>(), (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(binary("minimum", Array::from_vector<uint8_t>({200, 3}, {2}), Array::from_vector<uint8_t>({100, 4}, {2}))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{100, 3}));
}

TEST(ElementwiseInterpTest, Atan2) {
  expect_values(
      binary("atan2", f32({0, 1, 0, -0.0f, 1, kNaNF}), f32({1, 0, -1, -1, 1, 1})),
      {0, std::atan2(1.0f, 0.0f), std::atan2(0.0f, -1.0f), std::atan2(-0.0f, -1.0f), std::atan2(1.0f, 1.0f), kNaN});
  expect_values(binary("atan2", arr(DType::kF64, {0, 1}), arr(DType::kF64, {-1, 0})), {M_PI, M_PI / 2});
}

TEST(ElementwiseInterpTest, IntegerArithmeticWraps) {
  EXPECT_EQ(binary("add", i32({kI32Max, kI32Min, 2}), i32({1, -1, 3})).to_vector<int32_t>(),
            (std::vector<int32_t>{kI32Min, kI32Max, 5}));
  EXPECT_EQ(binary("subtract", i32({kI32Min, 5}), i32({1, 7})).to_vector<int32_t>(),
            (std::vector<int32_t>{kI32Max, -2}));
  EXPECT_EQ(binary("multiply", i32({65536, -3}), i32({65536, 4})).to_vector<int32_t>(), (std::vector<int32_t>{0, -12}));
  EXPECT_EQ(binary("add", Array::from_vector<uint8_t>({255, 200}, {2}), Array::from_vector<uint8_t>({1, 100}, {2}))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 44}));
  EXPECT_EQ(binary("subtract", Array::from_vector<uint8_t>({0}, {1}), Array::from_vector<uint8_t>({1}, {1}))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{255}));
  // 100 * 3 = 300 = 256 + 44; -128 * -1 = 128 wraps to -128; 16 * 16 = 256 wraps to 0.
  EXPECT_EQ(binary("multiply", Array::from_vector<int8_t>({100, -128, 16, -7}, {4}),
                   Array::from_vector<int8_t>({3, -1, 16, 5}, {4}))
                .to_vector<int8_t>(),
            (std::vector<int8_t>{44, -128, 0, -35}));
  EXPECT_EQ(binary("multiply", Array::from_vector<uint8_t>({255}, {1}), Array::from_vector<uint8_t>({255}, {1}))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{1}));  // 65025 = 254 * 256 + 1
  const int64_t kI64Max = std::numeric_limits<int64_t>::max();
  const int64_t kI64Min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(binary("add", Array::from_vector<int64_t>({kI64Max}, {1}), Array::from_vector<int64_t>({1}, {1}))
                .to_vector<int64_t>(),
            (std::vector<int64_t>{kI64Min}));
  const uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(
      binary("multiply", Array::from_vector<uint64_t>({kU64Max}, {1}), Array::from_vector<uint64_t>({kU64Max}, {1}))
          .to_vector<uint64_t>(),
      (std::vector<uint64_t>{1}));
}

TEST(ElementwiseInterpTest, IntegerDivideAndRemainderEdgeCases) {
  Array a = i32({7, -7, 7, -7, 5, -5, kI32Min, kI32Min, 0});
  Array b = i32({2, 2, -2, -2, 0, 0, -1, 1, 3});
  EXPECT_EQ(binary("divide", a, b).to_vector<int32_t>(),
            (std::vector<int32_t>{3, -3, -3, 3, -1, -1, kI32Min, kI32Min, 0}));
  EXPECT_EQ(binary("remainder", a, b).to_vector<int32_t>(), (std::vector<int32_t>{1, -1, 1, -1, 5, -5, 0, 0, 0}));
  Array ua = Array::from_vector<uint32_t>({7, 9, 0}, {3});
  Array ub = Array::from_vector<uint32_t>({2, 0, 0}, {3});
  EXPECT_EQ(binary("divide", ua, ub).to_vector<uint32_t>(), (std::vector<uint32_t>{3, 4294967295u, 4294967295u}));
  EXPECT_EQ(binary("remainder", ua, ub).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 9, 0}));
  Array sa = Array::from_vector<int8_t>({-128, -128, 9}, {3});
  Array sb = Array::from_vector<int8_t>({-1, 0, 0}, {3});
  EXPECT_EQ(binary("divide", sa, sb).to_vector<int8_t>(), (std::vector<int8_t>{-128, -1, -1}));
  EXPECT_EQ(binary("remainder", sa, sb).to_vector<int8_t>(), (std::vector<int8_t>{0, -128, 9}));
}

TEST(ElementwiseInterpTest, IntegerPower) {
  EXPECT_EQ(binary("power", i32({2, 3, 0, 2, 1, -1, -1, -2, 2, 5, 0}), i32({10, 0, 0, -1, -5, -3, -2, 3, 31, -2, -1}))
                .to_vector<int32_t>(),
            (std::vector<int32_t>{1024, 1, 1, 0, 1, -1, 1, -8, kI32Min, 0, 0}));
  // 3^5 = 243; 2^8 = 256 wraps to 0; 3^6 = 729 = 2 * 256 + 217.
  EXPECT_EQ(binary("power", Array::from_vector<uint8_t>({3, 2, 3}, {3}), Array::from_vector<uint8_t>({5, 8, 6}, {3}))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{243, 0, 217}));
  EXPECT_EQ(binary("power", Array::from_vector<int64_t>({-3}, {1}), Array::from_vector<int64_t>({39}, {1}))
                .to_vector<int64_t>(),
            (std::vector<int64_t>{-4052555153018976267LL}));  // -(3^39) fits in i64
}

TEST(ElementwiseInterpTest, F16AndBF16ArithmeticRoundsOnStore) {
  // f16: max finite 65504, step 32 there; 65520 is the tie with 2^16 and rounds to inf.
  expect_values(binary("add", arr(DType::kF16, {65504, 65504, 65504, 1, 1}),
                       arr(DType::kF16, {8, 15, 16, 1.0 / 2048, 3.0 / 2048})),
                {65504, 65504, kInf, 1, 1 + 1.0 / 512});
  expect_values(binary("multiply", arr(DType::kF16, {300, 0.1}), arr(DType::kF16, {300, 3})),
                {kInf, 0.2998046875});  // f16(0.1) = 0.0999755859375; * 3 = 0.29993 -> 307/1024
  // bf16: step 2^-7 at 1: 1 + 2^-9 rounds down, 1 + 2^-8 ties to even (1), 1 + 3 * 2^-9 up.
  expect_values(binary("add", arr(DType::kBF16, {1, 1, 1}), arr(DType::kBF16, {1.0 / 512, 1.0 / 256, 3.0 / 512})),
                {1, 1, 1 + 1.0 / 128});
  expect_values(binary("divide", arr(DType::kBF16, {1, 1}), arr(DType::kBF16, {3, 0})), {171.0 / 512, kInf});
  expect_values(binary("maximum", arr(DType::kF16, {kNaN, 2}), arr(DType::kF16, {1, -3})), {kNaN, 2});
}

TEST(ElementwiseInterpTest, LogicalAndBitwise) {
  Array p = Array::from_vector<bool>({true, true, false, false}, {4});
  Array q = Array::from_vector<bool>({true, false, true, false}, {4});
  EXPECT_EQ(binary("and", p, q).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(binary("or", p, q).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(binary("xor", p, q).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  Array a = i32({12, -1, 5});
  Array b = i32({10, 6, 0});
  EXPECT_EQ(binary("and", a, b).to_vector<int32_t>(), (std::vector<int32_t>{8, 6, 0}));
  EXPECT_EQ(binary("or", a, b).to_vector<int32_t>(), (std::vector<int32_t>{14, -1, 5}));
  EXPECT_EQ(binary("xor", a, b).to_vector<int32_t>(), (std::vector<int32_t>{6, -7, 5}));
  EXPECT_EQ(binary("xor", Array::from_vector<uint8_t>({0xf0}, {1}), Array::from_vector<uint8_t>({0xff}, {1}))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{0x0f}));
}

// ---------------------------------------------------------------------------------------------
// compare, select, clamp.

TEST(ElementwiseInterpTest, CompareFloatIsIEEE) {
  Array a = f32({1, 2, 3, kNaNF, kNaNF, -0.0f, -kInfF});
  Array b = f32({2, 2, 2, 1, kNaNF, 0.0f, kInfF});
  expect_values(compare("EQ", a, b), {0, 1, 0, 0, 0, 1, 0});
  expect_values(compare("NE", a, b), {1, 0, 1, 1, 1, 0, 1});
  expect_values(compare("LT", a, b), {1, 0, 0, 0, 0, 0, 1});
  expect_values(compare("LE", a, b), {1, 1, 0, 0, 0, 1, 1});
  expect_values(compare("GT", a, b), {0, 0, 1, 0, 0, 0, 0});
  expect_values(compare("GE", a, b), {0, 1, 1, 0, 0, 1, 0});
  EXPECT_EQ(compare("EQ", a, b).dtype(), DType::kBool);
}

TEST(ElementwiseInterpTest, CompareIntegersBoolAndHalf) {
  expect_values(compare("LT", i32({kI32Min, 0, 5}), i32({kI32Max, 0, -5})), {1, 0, 0});
  // Unsigned compares as unsigned: 255 > 1.
  expect_values(compare("GT", Array::from_vector<uint8_t>({255}, {1}), Array::from_vector<uint8_t>({1}, {1})), {1});
  expect_values(compare("LT", Array::from_vector<bool>({false, true, true}, {3}),
                        Array::from_vector<bool>({true, true, false}, {3})),
                {1, 0, 0});
  expect_values(compare("EQ", arr(DType::kF16, {1, kNaN}), arr(DType::kF16, {1, kNaN})), {1, 0});
  expect_values(compare("NE", arr(DType::kBF16, {1, kNaN}), arr(DType::kBF16, {1, kNaN})), {0, 1});
}

TEST(ElementwiseInterpTest, SelectElementwiseAndScalarPred) {
  Array pred = Array::from_vector<bool>({true, false, true, false}, {2, 2});
  expect_values(run_op("select", {pred, f32({1, 2, 3, 4}, {2, 2}), f32({5, 6, kNaNF, 8}, {2, 2})}), {1, 6, 3, 8});
  Array yes = Array::from_vector<bool>({true}, {});
  Array no = Array::from_vector<bool>({false}, {});
  const int64_t kBig = std::numeric_limits<int64_t>::max();
  Array t = Array::from_vector<int64_t>({kBig, -1}, {2});
  Array f = Array::from_vector<int64_t>({3, 4}, {2});
  EXPECT_EQ(run_op("select", {yes, t, f}).to_vector<int64_t>(), (std::vector<int64_t>{kBig, -1}));
  EXPECT_EQ(run_op("select", {no, t, f}).to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  expect_values(run_op("select", {Array::from_vector<bool>({false, true}, {2}), arr(DType::kF16, {0.5, 1.5}),
                                  arr(DType::kF16, {-2, kInf})}),
                {-2, 1.5});
}

TEST(ElementwiseInterpTest, Clamp) {
  expect_values(run_op("clamp", {f32({0}, {}), f32({-1, 0.5f, 2, kNaNF, kInfF}), f32({1}, {})}), {0, 0.5, 1, kNaN, 1});
  expect_values(run_op("clamp", {f32({0, 1, 2}), f32({5, 5, -5}), f32({1, 3, 4})}), {1, 3, 2});
  EXPECT_EQ(run_op("clamp", {i32({-10}, {}), i32({-100, 5, 100}), i32({10}, {})}).to_vector<int32_t>(),
            (std::vector<int32_t>{-10, 5, 10}));
  // min > max: the result is max, as min(max(x, lo), hi) says.
  expect_values(run_op("clamp", {f32({3}, {}), f32({0, 5}), f32({1}, {})}), {1, 1});
  EXPECT_EQ(run_op("clamp", {Array::from_vector<uint8_t>({10}, {}), Array::from_vector<uint8_t>({0, 200}, {2}),
                             Array::from_vector<uint8_t>({100}, {})})
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{10, 100}));
}

// ---------------------------------------------------------------------------------------------
// convert.

TEST(ElementwiseInterpTest, ConvertFloatToIntTruncatesAndSaturates) {
  Array x = f32({2.7f, -2.7f, 1e10f, -1e10f, kNaNF, kInfF, -kInfF, -0.5f});
  EXPECT_EQ(convert(x, "i32").to_vector<int32_t>(),
            (std::vector<int32_t>{2, -2, kI32Max, kI32Min, 0, kI32Max, kI32Min, 0}));
  EXPECT_EQ(convert(f32({-1.5f, 300, 255.9f, kNaNF}), "u8").to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 255, 255, 0}));
  EXPECT_EQ(convert(f32({-200, 127.5f}), "i8").to_vector<int8_t>(), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(convert(arr(DType::kF64, {1e300, -1e300}), "i64").to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(convert(arr(DType::kF16, {-3.5, 65504}), "i32").to_vector<int32_t>(), (std::vector<int32_t>{-3, 65504}));
}

TEST(ElementwiseInterpTest, ConvertBoolAndIntegers) {
  EXPECT_EQ(convert(i32({0, 5, -1}), "bool").to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(convert(f32({0, -0.0f, 0.1f, kNaNF}), "bool").to_vector<bool>(),
            (std::vector<bool>{false, false, true, true}));
  expect_values(convert(Array::from_vector<bool>({true, false}, {2}), "f32"), {1, 0});
  EXPECT_EQ(convert(Array::from_vector<bool>({true, false}, {2}), "i64").to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(convert(i32({300, -1, 255}), "u8").to_vector<uint8_t>(), (std::vector<uint8_t>{44, 255, 255}));
  EXPECT_EQ(convert(i32({-1}), "u32").to_vector<uint32_t>(), (std::vector<uint32_t>{4294967295u}));
  EXPECT_EQ(convert(Array::from_vector<uint32_t>({4294967295u}, {1}), "i32").to_vector<int32_t>(),
            (std::vector<int32_t>{-1}));
  EXPECT_EQ(convert(i32({-5}), "i64").to_vector<int64_t>(), (std::vector<int64_t>{-5}));
  expect_values(convert(i32({16777217}), "f32"), {16777216});  // 2^24 + 1 rounds to even
}

TEST(ElementwiseInterpTest, ConvertToHalfTypesRounds) {
  // f16 step at 1 is 2^-10: 1 + 2^-11 ties to 1 (even), 1 + 3 * 2^-11 ties to 1 + 2^-9.
  expect_values(convert(f32({1 + 1.0f / 2048, 1 + 3.0f / 2048, 65519, 65520, 70000, -70000, kNaNF}), "f16"),
                {1, 1 + 1.0 / 512, 65504, kInf, kInf, -kInf, kNaN});
  expect_values(convert(f32({1e-8f}), "f16"), {0});  // below half the smallest subnormal 2^-24
  expect_values(convert(f32({5.9604644775390625e-08f}), "f16"), {5.9604644775390625e-08});
  // f64 -> bf16 (8 significant bits, f32's exponent range): 1/3 -> 171/512;
  // 3e38 = 1.763... * 2^127 -> 226/128 * 2^127; 1e39 is beyond f32's range -> inf.
  expect_values(convert(arr(DType::kF64, {1.0 / 3, 3.0e38, 1e39, -1e39}), "bf16"),
                {171.0 / 512, 226 * std::ldexp(1.0, 120), kInf, -kInf});
  // f64 -> bf16 goes through f32 (as XLA's CPU backend): 1 + 2^-8 + 2^-30 first rounds to
  // 1 + 2^-8 in f32, which then ties to even (1) in bf16.
  expect_values(convert(arr(DType::kF64, {1 + 1.0 / 256 + 1.0 / (1 << 30)}), "bf16"), {1});
  // f16 -> bf16 and back.
  expect_values(convert(arr(DType::kF16, {1 + 1.0 / 1024}), "bf16"), {1});
  expect_values(convert(arr(DType::kBF16, {65536}), "f16"), {kInf});
  expect_values(convert(arr(DType::kF16, {0.1}), "f64"), {0.0999755859375});
}

// ---------------------------------------------------------------------------------------------
// iota, constant.

Array iota(const Shape& shape, const char* dtype, int64_t dim) {
  return run_op(
      "iota", {},
      Attributes{{"shape", std::vector<int64_t>(shape)}, {"dtype", std::string(dtype)}, {"iota_dimension", dim}});
}

TEST(ElementwiseInterpTest, IotaAlongEachDimension) {
  EXPECT_EQ(iota({2, 3}, "i32", 0).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(iota({2, 3}, "i32", 1).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  expect_values(iota({2, 2, 2}, "f32", 0), {0, 0, 0, 0, 1, 1, 1, 1});
  expect_values(iota({2, 2, 2}, "f64", 1), {0, 0, 1, 1, 0, 0, 1, 1});
  expect_values(iota({2, 2, 2}, "u64", 2), {0, 1, 0, 1, 0, 1, 0, 1});
  expect_values(iota({5}, "bf16", 0), {0, 1, 2, 3, 4});
  EXPECT_EQ(iota({3, 0}, "i64", 0).size(), 0);
  EXPECT_EQ(iota({3, 0}, "i64", 0).shape(), (Shape{3, 0}));
}

TEST(ElementwiseInterpTest, IotaConvertsLikeConvert) {
  // u8 wraps past 255; f16 rounds 2049 to 2048 (step 2 above 2048).
  Array u = iota({258}, "u8", 0);
  std::vector<uint8_t> uv = u.to_vector<uint8_t>();
  EXPECT_EQ(uv[255], 255);
  EXPECT_EQ(uv[256], 0);
  EXPECT_EQ(uv[257], 1);
  std::vector<double> h = iota({2050}, "f16", 0).to_doubles();
  EXPECT_EQ(h[2049], 2048);
  EXPECT_EQ(h[2047], 2047);
}

TEST(ElementwiseInterpTest, ConstantRoundTripsAsACopy) {
  Array v = Array::from_doubles({1.5, -kInf, kNaN, 65504}, {2, 2}, DType::kF16);
  Array r = run_op("constant", {}, Attributes{{"value", v}});
  EXPECT_TRUE(r.bitwise_equal(v));
  EXPECT_NE(r.raw_data(), v.raw_data());  // a clone, not a view of the attribute
  r.data<f16>()[0] = f16(7.0f);
  expect_values(v, {1.5, -kInf, kNaN, 65504});
  Array s = run_op("constant", {}, Attributes{{"value", Array::scalar(-3, DType::kI8)}});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.to_vector<int8_t>(), std::vector<int8_t>{-3});
  Array e = run_op("constant", {}, Attributes{{"value", Array::zeros({0, 2}, DType::kBool)}});
  EXPECT_EQ(e.shape(), (Shape{0, 2}));
  EXPECT_EQ(e.dtype(), DType::kBool);
}

// ---------------------------------------------------------------------------------------------
// Empty arrays.

TEST(ElementwiseInterpTest, EmptyArrays) {
  for (const Shape& shape : {Shape{0}, Shape{2, 0}}) {
    Array x = Array::zeros(shape, DType::kF32);
    Array n = Array::zeros(shape, DType::kI32);
    Array p = Array::zeros(shape, DType::kBool);
    for (const char* op : {"negate", "exponential", "log", "round_nearest_even", "erf"}) {
      Array r = unary(op, x);
      EXPECT_EQ(r.shape(), shape) << op;
      EXPECT_EQ(r.size(), 0) << op;
    }
    EXPECT_EQ(unary("is_finite", x).dtype(), DType::kBool);
    EXPECT_EQ(unary("not", n).shape(), shape);
    for (const char* op : {"add", "divide", "remainder", "power", "maximum"}) {
      EXPECT_EQ(binary(op, n, n).shape(), shape) << op;
      EXPECT_EQ(binary(op, x, x).shape(), shape) << op;
    }
    EXPECT_EQ(compare("LT", x, x).shape(), shape);
    EXPECT_EQ(binary("xor", p, p).shape(), shape);
    EXPECT_EQ(run_op("select", {p, x, x}).shape(), shape);
    EXPECT_EQ(run_op("select", {Array::from_vector<bool>({true}, {}), n, n}).shape(), shape);
    EXPECT_EQ(run_op("clamp", {Array::scalar(0, DType::kF32), x, Array::scalar(1, DType::kF32)}).shape(), shape);
    Array c = convert(x, "bf16");
    EXPECT_EQ(c.shape(), shape);
    EXPECT_EQ(c.dtype(), DType::kBF16);
  }
}

TEST(ElementwiseInterpTest, KernelsCalledDirectlyRejectUnverifiedOperands) {
  const ir::OpRegistry& r = ir::OpRegistry::builtin();
  const std::vector<ir::TensorType> f32x2 = {ir::TensorType{{2}, DType::kF32}};
  const std::vector<Array> mismatched = {f32({1, 2}), f32({1, 2, 3})};
  testing::expect_error([&] { r.get("add").interpret(mismatched, {}, f32x2); }, ErrorCode::kShapeMismatch,
                        {"add", "rhs", "(3,)", "(2,)"});
  const std::vector<Array> ints = {i32({1, 2})};
  testing::expect_error([&] { r.get("exponential").interpret(ints, {}, f32x2); }, ErrorCode::kDTypeMismatch,
                        {"exponential", "i32"});
  const std::vector<Array> bad_pred = {Array::from_vector<bool>({true, false, true}, {3}), f32({1, 2}), f32({3, 4})};
  testing::expect_error([&] { r.get("select").interpret(bad_pred, {}, f32x2); }, ErrorCode::kShapeMismatch,
                        {"select", "pred", "(3,)"});
  const std::vector<Array> bad_bound = {f32({0, 0, 0}), f32({1, 2}), f32({5}, {})};
  testing::expect_error([&] { r.get("clamp").interpret(bad_bound, {}, f32x2); }, ErrorCode::kShapeMismatch,
                        {"clamp", "min", "(3,)"});
}

TEST(ElementwiseInterpTest, ChainedGraph) {
  // exp(log(x)) * 2 - x, with the constant 2 as a node: exercises several kernels together.
  ir::Graph g;
  ir::ValueId x = g.add_parameter({{3}, DType::kF64});
  ir::ValueId two = g.add_node("constant", {}, Attributes{{"value", arr(DType::kF64, {2, 2, 2})}})[0];
  ir::ValueId l = g.add_node("log", {x})[0];
  ir::ValueId e = g.add_node("exponential", {l})[0];
  ir::ValueId m = g.add_node("multiply", {e, two})[0];
  ir::ValueId s = g.add_node("subtract", {m, x})[0];
  g.set_outputs({s});
  std::vector<Array> out = interp::interpret(g, {arr(DType::kF64, {1, 0, -1})});
  expect_values(out[0], {1, 0, kNaN});
}

}  // namespace
}  // namespace ingot
