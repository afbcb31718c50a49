// Array: a dense, row-major, typed n-d array in one device Buffer.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ingot/runtime/device.h"
#include "ingot/runtime/dtype.h"
#include "ingot/runtime/error.h"
#include "ingot/runtime/shape.h"

namespace ingot {

/// A dense row-major array of `shape` and `dtype` whose data lives in a Buffer on a Device.
///
/// Arrays share their buffer on copy (like a NumPy view of the whole array); use clone() for a
/// deep copy. A default-constructed Array is invalid (valid() == false); accessing its data
/// throws ingot::Error(kFailedPrecondition).
class Array {
 public:
  Array() = default;

  /// Uninitialised array of `shape` (sizes >= 0) and `dtype` on `device` (default: cpu:0).
  static Array empty(const Shape& shape, DType dtype, Device* device = nullptr);
  /// Array filled with zeros (false for bool).
  static Array zeros(const Shape& shape, DType dtype, Device* device = nullptr);
  /// Array filled with `value` converted to `dtype` (as convert would); argument order as
  /// jnp.full(shape, fill_value, dtype).
  static Array full(const Shape& shape, double value, DType dtype, Device* device = nullptr);
  /// Scalar (shape {}) of `dtype` holding `value` converted to `dtype`.
  static Array scalar(double value, DType dtype, Device* device = nullptr);

  /// Copies `data` (row-major, num_elements(shape) elements) into a new array whose dtype is
  /// dtype_of_v<T>. Throws ingot::Error(kShapeMismatch) naming both counts if sizes differ.
  template <class T>
  static Array from_span(std::span<const T> data, const Shape& shape, Device* device = nullptr) {
    Array a = empty(shape, dtype_of_v<T>, device);
    a.check_count(static_cast<int64_t>(data.size()), "from_span");
    if (!data.empty()) std::memcpy(a.raw_data(), data.data(), data.size() * sizeof(T));
    return a;
  }
  template <class T>
  static Array from_vector(const std::vector<T>& data, const Shape& shape, Device* device = nullptr) {
    if constexpr (std::is_same_v<T, bool>) {
      Array a = empty(shape, DType::kBool, device);
      a.check_count(static_cast<int64_t>(data.size()), "from_vector");
      auto* p = static_cast<uint8_t*>(a.raw_data());
      for (size_t i = 0; i < data.size(); ++i) p[i] = data[i] ? 1 : 0;
      return a;
    } else {
      return from_span<T>(std::span<const T>(data.data(), data.size()), shape, device);
    }
  }
  /// Converts each double to `dtype` (as the `convert` op does: round-to-nearest-even for
  /// floats, truncation toward zero for integers, nonzero -> true for bool).
  static Array from_doubles(const std::vector<double>& data, const Shape& shape, DType dtype,
                            Device* device = nullptr);

  /// Copies the elements out. T must match dtype() exactly (bool <-> DType::kBool), else
  /// ingot::Error(kDTypeMismatch) names both dtypes.
  template <class T>
  std::vector<T> to_vector() const {
    check_dtype(dtype_of_v<T>, "to_vector");
    std::vector<T> out(static_cast<size_t>(size()));
    if constexpr (std::is_same_v<T, bool>) {
      auto* p = static_cast<const uint8_t*>(raw_data());
      for (size_t i = 0; i < out.size(); ++i) out[i] = p[i] != 0;
    } else {
      if (!out.empty()) std::memcpy(out.data(), raw_data(), out.size() * sizeof(T));
    }
    return out;
  }
  /// Copies the elements out into `out` (size must equal size()).
  template <class T>
  void copy_to(std::span<T> out) const {
    check_dtype(dtype_of_v<T>, "copy_to");
    check_count(static_cast<int64_t>(out.size()), "copy_to");
    if (!out.empty()) std::memcpy(out.data(), raw_data(), out.size() * sizeof(T));
  }
  /// Every element converted to double (bool -> 0/1, u64 may lose precision above 2^53).
  std::vector<double> to_doubles() const;
  /// Element `flat_index` (row-major) converted to double.
  double element_as_double(int64_t flat_index) const;

  bool valid() const { return buffer_ != nullptr; }
  /// True if the array's buffer was donated (its data may no longer be used).
  bool donated() const { return buffer_ != nullptr && !buffer_->donated_to().empty(); }
  /// The buffer holding the data (shared by copies of this Array).
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  /// An Array of `shape` and `dtype` viewing `buffer` (which must hold at least
  /// num_elements(shape) * dtype_size(dtype) bytes; ingot::Error(kInvalidArgument) otherwise).
  static Array from_buffer(const Shape& shape, DType dtype, std::shared_ptr<Buffer> buffer);
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  /// Number of elements.
  int64_t size() const { return num_elements(shape_); }
  /// Size of the data in bytes.
  int64_t nbytes() const { return size() * dtype_size(dtype_); }
  Device& device() const;

  /// Pointer to the first element. Throws ingot::Error(kFailedPrecondition) if invalid.
  void* raw_data();
  const void* raw_data() const;
  /// Typed pointer; T must match dtype() (bool data is stored as one byte per element).
  template <class T>
  T* data() {
    check_dtype(dtype_of_v<T>, "data");
    return static_cast<T*>(raw_data());
  }
  template <class T>
  const T* data() const {
    check_dtype(dtype_of_v<T>, "data");
    return static_cast<const T*>(raw_data());
  }

  /// Deep copy into a new buffer on the same device.
  Array clone() const;
  /// Same data viewed with another shape of equal element count (shares the buffer).
  /// Throws ingot::Error(kShapeMismatch) naming both shapes.
  Array reshaped(const Shape& shape) const;
  /// True if shapes, dtypes and bytes are identical (NaNs with equal bits compare equal).
  bool bitwise_equal(const Array& other) const;

  /// NumPy-like text, e.g. "[[1., 2.],\n [3., 4.]]" for f32 and "[1, 2]" for i32;
  /// arrays over 1000 elements are summarised with "..." like NumPy.
  std::string to_string() const;

 private:
  void check_dtype(DType expected, const char* what) const;
  void check_count(int64_t count, const char* what) const;

  Shape shape_;
  DType dtype_ = DType::kF32;
  std::shared_ptr<Buffer> buffer_;
};

}  // namespace ingot
