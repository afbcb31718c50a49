#include "ingot/runtime/shape.h"

#include <fmt/format.h>

#include "ingot/runtime/error.h"

namespace ingot {

int64_t num_elements(const Shape& shape) {
  // A zero-size dimension makes the product 0 whatever the others are (they may be huge: a
  // shape (2^40, 2^40, 0) is valid and holds nothing), so look for one before multiplying.
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("shape {} has more than 2^63 elements",
                              shape.size() > 16 ? fmt::format("of rank {}", shape.size()) : shape_to_string(shape)),
                  "use smaller dimensions");
    }
  }
  return n;
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    // Wraps (unsigned arithmetic, defined) only for zero-element shapes with huge dimensions,
    // whose strides address nothing; check_shape bounds every other shape by kMaxElements.
    strides[i] = static_cast<int64_t>(static_cast<uint64_t>(strides[i + 1]) * static_cast<uint64_t>(shape[i + 1]));
  }
  return strides;
}

std::string shape_to_string(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

std::string dims_to_string(const std::vector<int64_t>& dims) { return fmt::format("{}", fmt::join(dims, ",")); }

void check_shape(const Shape& shape, const char* what) {
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: shape {} has negative size {} at dimension {}", what, shape_to_string(shape), shape[i], i),
          "dimension sizes must be >= 0");
    }
    // count * shape[i] > kMaxElements, tested without overflow (and 0-size dims end the product).
    if (shape[i] != 0 && count > kMaxElements / shape[i]) {
      count = kMaxElements + 1;
    } else {
      count *= shape[i];
    }
  }
  if (count > kMaxElements) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: shape {} has more than 2^59 elements", what,
                            shape.size() > 16 ? fmt::format("of rank {}", shape.size()) : shape_to_string(shape)),
                "use smaller dimensions");
  }
}

}  // namespace ingot
