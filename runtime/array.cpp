#include "ingot/runtime/array.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ingot/runtime/element.h"
#include "ingot/runtime/worker.h"

namespace ingot {

struct Array::Sharded {
  NamedSharding sharding;
  std::vector<Array> shards;  // single-device arrays, one per mesh device, in mesh order
};

Array Array::empty(const Shape& shape, DType dtype, Device* device) {
  check_shape(shape, "Array::empty");
  Device& dev = device ? *device : default_cpu_device();
  Array a;
  a.shape_ = shape;
  a.dtype_ = dtype;
  a.buffer_ = Buffer::allocate(dev, num_elements(shape) * dtype_size(dtype));
  return a;
}

Array Array::zeros(const Shape& shape, DType dtype, Device* device) {
  Array a = empty(shape, dtype, device);
  if (a.nbytes() > 0) std::memset(a.raw_data(), 0, static_cast<size_t>(a.nbytes()));
  return a;
}

Array Array::full(const Shape& shape, double value, DType dtype, Device* device) {
  Array a = empty(shape, dtype, device);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = convert_element<T>(value);
    T* p = static_cast<T*>(a.raw_data());
    std::fill(p, p + a.size(), v);
  });
  return a;
}

Array Array::scalar(double value, DType dtype, Device* device) { return full({}, value, dtype, device); }

Array Array::from_doubles(const std::vector<double>& data, const Shape& shape, DType dtype, Device* device) {
  Array a = empty(shape, dtype, device);
  a.check_count(static_cast<int64_t>(data.size()), "from_doubles");
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw_data());
    for (size_t i = 0; i < data.size(); ++i) p[i] = convert_element<T>(data[i]);
  });
  return a;
}

std::vector<double> Array::to_doubles() const {
  check_host_data("to_doubles");
  std::vector<double> out(static_cast<size_t>(size()));
  if (out.empty()) return out;
  const void* p = raw_data();
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < size(); ++i) {
      out[static_cast<size_t>(i)] = element_to_double(static_cast<const T*>(p), i);
    }
  });
  return out;
}

double Array::element_as_double(int64_t flat_index) const {
  check_host_data("element_as_double");
  if (flat_index < 0 || flat_index >= size()) {
    throw Error(ErrorCode::kOutOfRange,
                fmt::format("Array::element_as_double: index {} out of range for {} elements", flat_index, size()));
  }
  return dispatch_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return element_to_double(static_cast<const T*>(raw_data()), flat_index);
  });
}

Device& Array::device() const {
  if (!valid()) throw Error(ErrorCode::kFailedPrecondition, "Array::device: the array is invalid");
  if (multi_shard()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("Array::device: the array of shape {} is sharded over {} devices ({})",
                            shape_to_string(shape_), num_shards(), sharded_->sharding.to_string()),
                "use shards() or addressable_shard(device)");
  }
  return buffer_->device();
}

bool Array::donated() const {
  if (multi_shard()) {
    return std::any_of(sharded_->shards.begin(), sharded_->shards.end(), [](const Array& s) { return s.donated(); });
  }
  return buffer_ != nullptr && !buffer_->donated_to().empty();
}

const std::shared_ptr<Buffer>& Array::buffer() const {
  check_host_data("buffer");
  wait_ready();
  return buffer_;
}

void* Array::raw_data() {
  if (!valid()) {
    throw Error(ErrorCode::kFailedPrecondition, "Array: the array is invalid (default-constructed)",
                "create arrays with Array::empty/zeros/from_vector");
  }
  check_host_data("raw_data");
  wait_ready();
  if (!buffer_->donated_to().empty()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("array of shape {} was donated to '{}' and cannot be used", shape_to_string(shape_),
                            buffer_->donated_to()),
                "use the outputs of that call instead (donation reuses the buffer for them)");
  }
  return buffer_->data();
}

Array Array::from_buffer(const Shape& shape, DType dtype, std::shared_ptr<Buffer> buffer) {
  check_shape(shape, "Array::from_buffer");
  if (!buffer || buffer->size_bytes() < num_elements(shape) * dtype_size(dtype)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Array::from_buffer: a buffer of {} bytes cannot hold {}[{}]",
                            buffer ? buffer->size_bytes() : 0, dtype_name(dtype), dims_to_string(shape)));
  }
  Array a;
  a.shape_ = shape;
  a.dtype_ = dtype;
  a.buffer_ = std::move(buffer);
  return a;
}

const void* Array::raw_data() const { return const_cast<Array*>(this)->raw_data(); }

Array Array::clone() const {
  if (sharded_) {
    std::vector<Array> copies;
    for (const Array& s : sharded_->shards) copies.push_back(s.clone());
    return from_shards(shape_, dtype_, sharded_->sharding, std::move(copies));
  }
  Array a = empty(shape_, dtype_, &device());
  if (nbytes() > 0) std::memcpy(a.raw_data(), raw_data(), static_cast<size_t>(nbytes()));
  return a;
}

Array Array::reshaped(const Shape& shape) const {
  check_shape(shape, "Array::reshaped");
  check_host_data("reshaped");
  if (num_elements(shape) != size()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Array::reshaped: cannot view {} elements of shape {} as shape {} "
                            "({} elements)",
                            size(), shape_to_string(shape_), shape_to_string(shape), num_elements(shape)));
  }
  Array a = *this;
  a.shape_ = shape;
  a.sharded_ = nullptr;  // the sharding may not fit the new shape; the view is single-device
  return a;
}

bool Array::bitwise_equal(const Array& other) const {
  check_host_data("bitwise_equal");
  other.check_host_data("bitwise_equal");
  if (valid() != other.valid()) return false;
  if (!valid()) return true;
  if (shape_ != other.shape_ || dtype_ != other.dtype_) return false;
  return nbytes() == 0 || std::memcmp(raw_data(), other.raw_data(), static_cast<size_t>(nbytes())) == 0;
}

void Array::check_dtype(DType expected, const char* what) const {
  if (dtype_ != expected) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("Array::{}: requested element type {} but the array has dtype {}", what,
                            dtype_name(expected), dtype_name(dtype_)),
                "use the C++ type matching the dtype, or to_doubles()");
  }
}

void Array::check_count(int64_t count, const char* what) const {
  if (count != size()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Array::{}: {} elements given for shape {} which has {} elements", what, count,
                            shape_to_string(shape_), size()));
  }
}

bool Array::multi_shard() const { return sharded_ != nullptr && sharded_->shards.size() > 1; }

void Array::check_valid(const char* what) const {
  if (!valid()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("Array::{}: the array is invalid (default-constructed)", what),
                "create arrays with Array::empty/zeros/from_vector or device_put");
  }
}

void Array::check_host_data(const char* what) const {
  if (!multi_shard()) return;
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("Array::{}: the {} array of shape {} is sharded over {} devices by {}; "
                          "its data is not in one host buffer",
                          what, dtype_name(dtype_), shape_to_string(shape_), sharded_->shards.size(),
                          sharded_->sharding.to_string()),
              "call to_host(array) to gather it into one host array, or read array.shards()");
}

void Array::wait_ready() const {
  if (multi_shard()) {
    ready_event()->wait();
  } else if (ready_) {
    ready_->wait();
  }
}

NamedSharding Array::sharding() const {
  check_valid("sharding");
  if (sharded_) return sharded_->sharding;
  return NamedSharding::single_device(buffer_->device());
}

int64_t Array::num_shards() const {
  check_valid("num_shards");
  return sharded_ ? static_cast<int64_t>(sharded_->shards.size()) : 1;
}

std::vector<Array> Array::shards() const {
  check_valid("shards");
  if (sharded_) return sharded_->shards;
  return {*this};
}

Array Array::addressable_shard(const Device& device) const {
  check_valid("addressable_shard");
  for (const Array& s : shards()) {
    if (&s.device() == &device) return s;
  }
  throw Error(ErrorCode::kNotFound,
              fmt::format("Array::addressable_shard: no shard of the array of shape {} lives on {} "
                          "({})",
                          shape_to_string(shape_), device.name(), sharding().to_string()),
              "ask for one of the devices of the array's mesh");
}

namespace {

void check_shard(const Array& shard, size_t p, DType dtype, const Shape& shard_shape, const NamedSharding& sharding) {
  if (!shard.valid() || shard.num_shards() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Array::from_shards: shard {} is {}", p,
                            shard.valid() ? "itself sharded over several devices" : "invalid"),
                "pass one valid single-device array per mesh device");
  }
  const Device& expected = *sharding.mesh().devices()[p];
  if (&shard.device() != &expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Array::from_shards: shard {} is on {} but {} puts position {} on {}", p,
                            shard.device().name(), sharding.mesh().to_string(), p, expected.name()),
                "order the shards as sharding.mesh().devices()");
  }
  if (shard.dtype() != dtype) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("Array::from_shards: shard {} has dtype {}, the array has dtype {}", p,
                            dtype_name(shard.dtype()), dtype_name(dtype)));
  }
  if (shard.shape() != shard_shape) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Array::from_shards: shard {} has shape {}, expected the shard shape {}", p,
                            shape_to_string(shard.shape()), shape_to_string(shard_shape)));
  }
}

}  // namespace

Array Array::from_shards(const Shape& shape, DType dtype, const NamedSharding& sharding, std::vector<Array> shards) {
  check_shape(shape, "Array::from_shards");
  const Shape shard_shape = sharding.shard_shape(shape);
  if (static_cast<int64_t>(shards.size()) != sharding.num_devices()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Array::from_shards: {} shards given for {} devices of {}", shards.size(),
                            sharding.num_devices(), sharding.to_string()),
                "pass one shard per mesh device, in mesh order");
  }
  for (size_t p = 0; p < shards.size(); ++p) {
    check_shard(shards[p], p, dtype, shard_shape, sharding);
    shards[p].sharded_ = nullptr;  // a shard is a plain single-device array
  }
  Array a;
  a.shape_ = shape;
  a.dtype_ = dtype;
  if (shards.size() == 1) {
    a.buffer_ = shards[0].buffer_;
    a.ready_ = shards[0].ready_;
  }
  a.sharded_ = std::make_shared<const Sharded>(Sharded{sharding, std::move(shards)});
  return a;
}

bool Array::is_ready() const {
  if (multi_shard()) {
    return std::all_of(sharded_->shards.begin(), sharded_->shards.end(), [](const Array& s) { return s.is_ready(); });
  }
  return ready_ == nullptr || ready_->ready();
}

void Array::block_until_ready() const { wait_ready(); }

std::shared_ptr<Event> Array::ready_event() const {
  if (multi_shard()) {
    std::vector<std::shared_ptr<Event>> events;
    for (const Array& s : sharded_->shards) events.push_back(s.ready_);
    return when_all(std::move(events));
  }
  return ready_ ? ready_ : when_all({});
}

Array Array::with_ready_event(std::shared_ptr<Event> event) const {
  check_valid("with_ready_event");
  if (!event) {
    throw Error(ErrorCode::kInvalidArgument, "Array::with_ready_event: the event is null");
  }
  if (multi_shard()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("Array::with_ready_event: the array is sharded over {} devices ({})", num_shards(),
                            sharded_->sharding.to_string()),
                "attach events to the shards and combine them with Array::from_shards");
  }
  Array a = *this;
  a.ready_ = ready_ ? when_all({ready_, std::move(event)}) : std::move(event);
  if (sharded_) {
    Array shard = a;
    shard.sharded_ = nullptr;
    a.sharded_ = std::make_shared<const Sharded>(Sharded{sharded_->sharding, {shard}});
  }
  return a;
}

namespace {

// Formats one element like NumPy: floats with up to 8 significant digits and a trailing "." for
// integral values ("1.", "0.5", "inf", "nan"), integers plainly, bools as True/False.
std::string format_element(const Array& a, int64_t i) {
  if (a.dtype() == DType::kBool) return a.element_as_double(i) != 0 ? "True" : "False";
  if (a.dtype() == DType::kU64) return fmt::format("{}", a.data<uint64_t>()[i]);
  if (a.dtype() == DType::kI64) return fmt::format("{}", a.data<int64_t>()[i]);
  double v = a.element_as_double(i);
  if (!is_floating(a.dtype())) return fmt::format("{}", static_cast<int64_t>(v));
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{:.8g}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".";
  return s;
}

void format_rec(const Array& a, const std::vector<std::string>& elems, size_t width, int64_t dim, int64_t offset,
                const std::vector<int64_t>& strides, std::string& out, bool summarise) {
  const int64_t n = a.shape()[static_cast<size_t>(dim)];
  const bool last = dim + 1 == a.rank();
  out += "[";
  auto emit_item = [&](int64_t k) {
    if (last) {
      const std::string& e = elems[static_cast<size_t>(offset + k)];
      out += std::string(width - std::min(width, e.size()), ' ') + e;
    } else {
      format_rec(a, elems, width, dim + 1, offset + k * strides[static_cast<size_t>(dim)], strides, out, summarise);
    }
  };
  // NumPy separates sub-arrays with a newline plus one blank line per extra nesting level.
  const std::string sep = last ? ", "
                               : ",\n" + std::string(static_cast<size_t>(a.rank() - dim - 2), '\n') +
                                     std::string(static_cast<size_t>(dim + 1), ' ');
  for (int64_t k = 0; k < n; ++k) {
    if (summarise && n > 6 && k == 3) {
      out += "...";
      out += sep;
      k = n - 3;
    }
    emit_item(k);
    if (k + 1 < n) out += sep;
  }
  out += "]";
}

}  // namespace

std::string Array::to_string() const {
  if (!valid()) return "Array(invalid)";
  check_host_data("to_string");
  const bool summarise = size() > 1000;
  std::vector<std::string> elems(static_cast<size_t>(size()));
  size_t width = 0;
  for (int64_t i = 0; i < size(); ++i) {
    elems[static_cast<size_t>(i)] = format_element(*this, i);
    width = std::max(width, elems[static_cast<size_t>(i)].size());
  }
  if (rank() == 0) return elems[0];
  std::string out;
  // With summarisation, elems is still computed for all (clarity over speed).
  format_rec(*this, elems, width, 0, 0, row_major_strides(shape_), out, summarise);
  return out;
}

}  // namespace ingot
