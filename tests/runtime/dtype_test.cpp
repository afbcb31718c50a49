#include "ingot/runtime/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ingot/runtime/element.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kBool), 1);
  EXPECT_EQ(dtype_size(DType::kI8), 1);
  EXPECT_EQ(dtype_size(DType::kU8), 1);
  EXPECT_EQ(dtype_size(DType::kF16), 2);
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
  EXPECT_EQ(dtype_size(DType::kI32), 4);
  EXPECT_EQ(dtype_size(DType::kF32), 4);
  EXPECT_EQ(dtype_size(DType::kI64), 8);
  EXPECT_EQ(dtype_size(DType::kF64), 8);
  for (DType d : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(dtype_name(DType::kBool), "bool");
}

TEST(DType, UnknownNameIsAClearError) {
  expect_error([] { parse_dtype("float32"); }, ErrorCode::kInvalidArgument, {"unknown dtype name 'float32'", "f32"});
}

TEST(DType, Categories) {
  EXPECT_TRUE(is_floating(DType::kBF16));
  EXPECT_FALSE(is_floating(DType::kI32));
  EXPECT_TRUE(is_integer(DType::kU8));
  EXPECT_FALSE(is_integer(DType::kBool));
  EXPECT_TRUE(is_signed_integer(DType::kI64));
  EXPECT_TRUE(is_unsigned_integer(DType::kU32));
}

TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // halfway to 65536 rounds to inf
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp -> 2 (even)
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  EXPECT_EQ(half_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_bits_to_float(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = half_bits_to_float(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), bits) << "bits " << b;
  }
}

TEST(BFloat16, KnownBitPatternsAndRounding) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-1.0f), 0xbf80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(bf16_bits_to_float(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
}

TEST(ConvertElement, Semantics) {
  EXPECT_EQ(convert_element<int32_t>(2.9f), 2);
  EXPECT_EQ(convert_element<int32_t>(-2.9f), -2);
  EXPECT_EQ(convert_element<int32_t>(NAN), 0);
  EXPECT_EQ(convert_element<int32_t>(1e20), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(convert_element<int8_t>(-1000.0), -128);
  EXPECT_EQ(convert_element<uint8_t>(-3.0f), 0);
  EXPECT_EQ(convert_element<int8_t>(int32_t{300}), 44);  // wraps
  EXPECT_EQ(convert_element<uint32_t>(int32_t{-1}), 0xffffffffu);
  EXPECT_TRUE(convert_element<bool>(0.5f));
  EXPECT_TRUE(convert_element<bool>(NAN));
  EXPECT_FALSE(convert_element<bool>(-0.0));
  EXPECT_EQ(convert_element<float>(true), 1.0f);
  EXPECT_EQ(convert_element<f16>(1.0f / 3.0f).bits, 0x3555);
  EXPECT_EQ(convert_element<float>(bf16::from_bits(0x4049)), 3.140625f);
  EXPECT_EQ(convert_element<double>(int64_t{-7}), -7.0);
}

}  // namespace
}  // namespace ingot
