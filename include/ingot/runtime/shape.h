// Shapes: dimension sizes as 64-bit integers, row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ingot {

/// Dimension sizes, outermost first (row-major). A scalar has shape {}. Sizes are >= 0.
using Shape = std::vector<int64_t>;

/// Product of the dimension sizes (1 for a scalar, 0 if any dimension is 0).
int64_t num_elements(const Shape& shape);
/// Row-major element strides (in elements, not bytes): strides[last] = 1.
std::vector<int64_t> row_major_strides(const Shape& shape);
/// NumPy-style text: "(2, 3)", "(4,)", "()".
std::string shape_to_string(const Shape& shape);
/// Comma-separated list for IR text: "2,3" ("" for a scalar).
std::string dims_to_string(const std::vector<int64_t>& dims);
/// Throws ingot::Error(kInvalidArgument) naming `what` if any size is negative.
void check_shape_nonnegative(const Shape& shape, const char* what);

}  // namespace ingot
