#include "ingot/runtime/dtype.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "ingot/runtime/error.h"

namespace ingot {

int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kI8:
    case DType::kU8:
      return 1;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI32:
    case DType::kU32:
    case DType::kF32:
      return 4;
    case DType::kI64:
    case DType::kU64:
    case DType::kF64:
      return 8;
  }
  throw Error(ErrorCode::kInternal, fmt::format("dtype_size: invalid dtype value {}", int(dtype)));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
    case DType::kI32:
      return "i32";
    case DType::kU32:
      return "u32";
    case DType::kI64:
      return "i64";
    case DType::kU64:
      return "u64";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
  }
  return "invalid";
}

DType parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (dtype_name(d) == name) return d;
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("unknown dtype name '{}'", name),
              "use one of bool, i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64");
}

bool is_floating(DType d) { return d == DType::kF16 || d == DType::kBF16 || d == DType::kF32 || d == DType::kF64; }
bool is_signed_integer(DType d) { return d == DType::kI8 || d == DType::kI32 || d == DType::kI64; }
bool is_unsigned_integer(DType d) { return d == DType::kU8 || d == DType::kU32 || d == DType::kU64; }
bool is_integer(DType d) { return is_signed_integer(d) || is_unsigned_integer(d); }

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Round to nearest even.
uint16_t float_to_half_bits(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    if (abs == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // quiet NaN
  }
  int32_t exp = static_cast<int32_t>(abs >> 23) - 127 + 15;
  uint32_t mant = abs & 0x7fffffu;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (exp <= 0) {
    // Subnormal half (or zero): shift the full mantissa (with implicit 1) right.
    if (exp < -10) return static_cast<uint16_t>(sign);  // rounds to zero
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into inf: correct
  return static_cast<uint16_t>(sign | half);
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t f;
  if (exp == 0) {
    if (mant == 0) {
      f = sign;
    } else {  // subnormal: value = mant * 2^-24
      float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
  } else if (exp == 31) {
    f = sign | 0x7f800000u | (mant << 13);
  } else {
    f = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(f);
}

uint16_t float_to_bf16_bits(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // qNaN
  uint32_t lsb = (f >> 16) & 1u;
  f += 0x7fffu + lsb;
  return static_cast<uint16_t>(f >> 16);
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace ingot
