// Element types of ingot arrays and IR values, with f16/bf16 storage types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace ingot {

/// Element type. Names follow StableHLO/NumPy short forms: f32, bf16, i32, u8, bool, ...
/// u32 and u64 exist for random bits (rng_bit_generator) and its state.
enum class DType : uint8_t {
  kBool,
  kI8,
  kU8,
  kI32,
  kU32,
  kI64,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
};

/// All dtypes, in enum order (for tests that sweep them).
inline constexpr DType kAllDTypes[] = {DType::kBool, DType::kI8,  DType::kU8,   DType::kI32, DType::kU32, DType::kI64,
                                       DType::kU64,  DType::kF16, DType::kBF16, DType::kF32, DType::kF64};

/// Size of one element in bytes (bool is 1 byte).
int64_t dtype_size(DType dtype);
/// Short name: "f32", "bf16", "i64", "u8", "bool", ...
std::string_view dtype_name(DType dtype);
/// Inverse of dtype_name. Throws ingot::Error(kInvalidArgument) naming `name` for unknown names.
DType parse_dtype(std::string_view name);

bool is_floating(DType dtype);  ///< f16, bf16, f32, f64
bool is_integer(DType dtype);   ///< i8, u8, i32, u32, i64, u64 (not bool)
bool is_signed_integer(DType dtype);
bool is_unsigned_integer(DType dtype);
inline bool is_bool(DType dtype) { return dtype == DType::kBool; }

/// IEEE 754 binary16 conversions, round-to-nearest-even (overflow to +-inf, NaN kept quiet).
uint16_t float_to_half_bits(float value);
float half_bits_to_float(uint16_t bits);
/// bfloat16 (upper 16 bits of binary32) conversions, round-to-nearest-even, NaN kept quiet.
uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(uint16_t bits);

/// IEEE binary16 storage type; arithmetic goes through float.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float v) : bits(float_to_half_bits(v)) {}
  static f16 from_bits(uint16_t b) {
    f16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return half_bits_to_float(bits); }
};

/// bfloat16 storage type; arithmetic goes through float.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float v) : bits(float_to_bf16_bits(v)) {}
  static bf16 from_bits(uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return bf16_bits_to_float(bits); }
};

/// Maps a C++ element type to its DType (for templated Array constructors).
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct dtype_of<int8_t> {
  static constexpr DType value = DType::kI8;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::kU8;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct dtype_of<uint32_t> {
  static constexpr DType value = DType::kU32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct dtype_of<uint64_t> {
  static constexpr DType value = DType::kU64;
};
template <>
struct dtype_of<f16> {
  static constexpr DType value = DType::kF16;
};
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::kF64;
};
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

/// Tag carrying a C++ element type, passed to visitors by dispatch_dtype.
template <class T>
struct TypeTag {
  using type = T;
};

/// Calls `f(TypeTag<T>{})` with T the storage type of `dtype` (f16/bf16 for the half types).
template <class F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBool:
      return f(TypeTag<bool>{});
    case DType::kI8:
      return f(TypeTag<int8_t>{});
    case DType::kU8:
      return f(TypeTag<uint8_t>{});
    case DType::kI32:
      return f(TypeTag<int32_t>{});
    case DType::kU32:
      return f(TypeTag<uint32_t>{});
    case DType::kI64:
      return f(TypeTag<int64_t>{});
    case DType::kU64:
      return f(TypeTag<uint64_t>{});
    case DType::kF16:
      return f(TypeTag<f16>{});
    case DType::kBF16:
      return f(TypeTag<bf16>{});
    case DType::kF32:
      return f(TypeTag<float>{});
    case DType::kF64:
      return f(TypeTag<double>{});
  }
  return f(TypeTag<float>{});  // unreachable for valid enum values
}

/// The arithmetic type used for a storage type: float for f16/bf16, else the type itself.
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<f16> {
  using type = float;
};
template <>
struct compute_type<bf16> {
  using type = float;
};
template <class T>
using compute_type_t = typename compute_type<T>::type;

}  // namespace ingot
