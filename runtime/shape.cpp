#include "ingot/runtime/shape.h"

#include <fmt/format.h>

#include "ingot/runtime/error.h"

namespace ingot {

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
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
