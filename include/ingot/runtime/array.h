// Array: a dense, row-major, typed n-d array: either in one device Buffer, or a global logical
// array sharded over several devices (one shard Array per device, JAX's jax.Array model).
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ingot/runtime/device.h"
#include "ingot/runtime/dtype.h"
#include "ingot/runtime/error.h"
#include "ingot/runtime/event.h"
#include "ingot/runtime/shape.h"
#include "ingot/runtime/sharding.h"

namespace ingot {

/// A dense row-major array of global `shape` and `dtype`.
///
/// Single-device arrays (everything made by empty/zeros/from_vector/...) keep their data in one
/// Buffer on one Device; their sharding() is "whole array on that device". Sharded arrays (made by
/// device_put, reshard or from_shards) have a NamedSharding and one shard per mesh device: an
/// ordinary single-device Array holding that device's block (replicated dimensions give identical
/// copies). Host data accessors (data<T>(), raw_data(), to_vector, copy_to, to_doubles,
/// element_as_double, bitwise_equal, to_string) on an array with more than one shard throw
/// ingot::Error(kFailedPrecondition) naming the sharding; call to_host() first. A sharded array
/// with a single shard behaves like that shard.
///
/// Readiness: an array may be filled asynchronously by work on a device worker (device_put_async,
/// reshard_async, or an executor via with_ready_event). Data accessors and buffer() wait until it
/// is ready and rethrow the error of the work that should have filled it. Do not write to an
/// array, or donate it, while work that reads it is in flight.
///
/// Arrays share their buffers on copy (like a NumPy view of the whole array); use clone() for a
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
  static Array from_doubles(const std::vector<double>& data, const Shape& shape, DType dtype, Device* device = nullptr);

  /// Copies the elements out. T must match dtype() exactly (bool <-> DType::kBool), else
  /// ingot::Error(kDTypeMismatch) names both dtypes.
  template <class T>
  std::vector<T> to_vector() const {
    check_host_data("to_vector");
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
    check_host_data("copy_to");
    check_dtype(dtype_of_v<T>, "copy_to");
    check_count(static_cast<int64_t>(out.size()), "copy_to");
    if (!out.empty()) std::memcpy(out.data(), raw_data(), out.size() * sizeof(T));
  }
  /// Every element converted to double (bool -> 0/1, u64 may lose precision above 2^53).
  std::vector<double> to_doubles() const;
  /// Element `flat_index` (row-major) converted to double.
  double element_as_double(int64_t flat_index) const;

  bool valid() const { return buffer_ != nullptr || sharded_ != nullptr; }
  /// True if the array's buffer (any shard's buffer, for a sharded array) was donated (its data
  /// may no longer be used).
  bool donated() const;
  /// The buffer holding the data (shared by copies of this Array). Waits until the array is ready
  /// (see the class comment). Throws ingot::Error(kFailedPrecondition) for an array with more
  /// than one shard (use shards()); null for an invalid array.
  const std::shared_ptr<Buffer>& buffer() const;
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
  /// The device holding the data. Throws ingot::Error(kFailedPrecondition) if the array is
  /// invalid or has more than one shard (naming its sharding).
  Device& device() const;

  // --- Sharding ----------------------------------------------------------------------------

  /// The array's sharding: NamedSharding::single_device(device()) for a single-device array.
  /// Throws ingot::Error(kFailedPrecondition) for an invalid array.
  NamedSharding sharding() const;
  /// Number of shards (= sharding().num_devices(); 1 for a single-device array).
  int64_t num_shards() const;
  /// One single-device Array per mesh device, in mesh order (`{*this}` for a single-device
  /// array). Shard p holds sharding().shard_index(p, shape()) of the global array.
  std::vector<Array> shards() const;
  /// The shard on `device`. Throws ingot::Error(kNotFound) naming the device and the sharding if
  /// no shard lives there.
  Array addressable_shard(const Device& device) const;
  /// Builds a sharded array of global `shape` and `dtype` from existing shards (e.g. the per-device
  /// outputs of an SPMD program): `shards[p]` must be a valid single-device array on
  /// sharding.mesh().devices()[p] with dtype `dtype` and shape sharding.shard_shape(shape).
  /// The shards' buffers are shared, not copied; replicas are not compared. Throws
  /// ingot::Error(kInvalidArgument / kShapeMismatch / kDTypeMismatch) naming the shard.
  static Array from_shards(const Shape& shape, DType dtype, const NamedSharding& sharding, std::vector<Array> shards);

  // --- Readiness ---------------------------------------------------------------------------

  /// True once every work that fills the array has finished (successfully or not); never blocks.
  bool is_ready() const;
  /// Blocks until the array is ready; rethrows the error of the work that fills it.
  void block_until_ready() const;
  /// An Event for the array's readiness (for all shards of a sharded array); ready at once if
  /// nothing is pending.
  std::shared_ptr<Event> ready_event() const;
  /// A copy of this single-device array that is ready only once `event` (and whatever this array
  /// already waits for) is: for arrays filled by work enqueued on a device. Throws
  /// ingot::Error(kFailedPrecondition) for a sharded array (attach events to its shards and use
  /// from_shards), kInvalidArgument for a null event.
  Array with_ready_event(std::shared_ptr<Event> event) const;

  /// Pointer to the first element; waits until the array is ready. Throws
  /// ingot::Error(kFailedPrecondition) if invalid, donated or sharded over several devices.
  void* raw_data();
  const void* raw_data() const;
  /// Typed pointer; T must match dtype() (bool data is stored as one byte per element).
  template <class T>
  T* data() {
    check_host_data("data");
    check_dtype(dtype_of_v<T>, "data");
    return static_cast<T*>(raw_data());
  }
  template <class T>
  const T* data() const {
    check_host_data("data");
    check_dtype(dtype_of_v<T>, "data");
    return static_cast<const T*>(raw_data());
  }

  /// Deep copy into new buffers on the same device(s), with the same sharding.
  Array clone() const;
  /// Same data viewed with another shape of equal element count (shares the buffer).
  /// Throws ingot::Error(kShapeMismatch) naming both shapes, kFailedPrecondition for an array
  /// with more than one shard. The result is a single-device array.
  Array reshaped(const Shape& shape) const;
  /// True if shapes, dtypes and bytes are identical (NaNs with equal bits compare equal).
  bool bitwise_equal(const Array& other) const;

  /// NumPy-like text, e.g. "[[1., 2.],\n [3., 4.]]" for f32 and "[1, 2]" for i32;
  /// arrays over 1000 elements are summarised with "..." like NumPy.
  std::string to_string() const;

 private:
  struct Sharded;  // sharding + shards of an array built by from_shards (array.cpp)

  void check_dtype(DType expected, const char* what) const;
  void check_count(int64_t count, const char* what) const;
  /// Throws kFailedPrecondition (naming `what` and the sharding) if there is more than one shard.
  void check_host_data(const char* what) const;
  void check_valid(const char* what) const;
  bool multi_shard() const;
  void wait_ready() const;

  Shape shape_;
  DType dtype_ = DType::kF32;
  std::shared_ptr<Buffer> buffer_;          // null for an array with more than one shard
  std::shared_ptr<Event> ready_;            // null: ready; for single-device arrays and single shards
  std::shared_ptr<const Sharded> sharded_;  // null for single-device arrays
};

// --- Moving arrays between devices and shardings (runtime/sharded_array.cpp) -----------------
//
// Copies run on device workers (Device::enqueue): the copy into a shard runs on the shard's
// device, the copy out of a shard (to_host) on the shard's device, so copies to different devices
// overlap and later work enqueued on the same device runs after them (FIFO). CPU devices copy in
// host memory; a device whose memory the host cannot address (CUDA) moves through its
// DeviceTransfer (device.h): a shard on it is downloaded once per block before the copies, and a
// shard for it is assembled in host memory on its worker, then uploaded. Other devices: ingot::Error
// kUnimplemented.

/// Splits `array` (any valid array; a sharded one is resharded) into the shards of `sharding` and
/// returns once every shard is ready. Throws ingot::Error(kShapeMismatch) for an uneven split or a
/// spec longer than the rank (naming the dimension, its size and the axis size), the error of a
/// failed copy, or kFailedPrecondition for an invalid or donated array.
Array device_put(const Array& array, const NamedSharding& sharding);
/// As device_put, but returns at once: the result's shards become ready as their copies finish
/// (Array::is_ready / block_until_ready / ready_event; reading a shard's data waits for it).
/// Argument errors are thrown here; copy errors surface when the result is waited for. `array`
/// must not be written or donated until the result is ready.
Array device_put_async(const Array& array, const NamedSharding& sharding);
/// The global array gathered into one new single-device array on default_cpu_device() (from
/// replica 0 of every block; each copy runs on the source shard's device worker). A single-device
/// array already on default_cpu_device() is returned as is (after waiting for it). Rethrows the
/// error of the work that filled `array`.
Array to_host(const Array& array);
/// `array` moved to another sharding (each destination shard is assembled on its device's worker
/// from the source shards it overlaps). Returns `array` itself if its sharding is already
/// `sharding`. Errors as device_put.
Array reshard(const Array& array, const NamedSharding& sharding);
/// As reshard, but returns at once (readiness as device_put_async).
Array reshard_async(const Array& array, const NamedSharding& sharding);

}  // namespace ingot
