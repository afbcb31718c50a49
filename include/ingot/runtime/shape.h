// Shapes: dimension sizes as 64-bit integers, row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ingot {

/// Dimension sizes, outermost first (row-major). A scalar has shape {}. Sizes are >= 0.
using Shape = std::vector<int64_t>;

/// Product of the dimension sizes (1 for a scalar, 0 if any dimension is 0, whatever the other
/// sizes). Throws ingot::Error(kInvalidArgument) naming the shape when the product of nonzero
/// sizes does not fit in int64 (shapes that passed check_shape never do).
int64_t num_elements(const Shape& shape);
/// Row-major element strides (in elements, not bytes): strides[last] = 1. For a zero-element
/// shape with huge sizes the strides may wrap (they address nothing).
std::vector<int64_t> row_major_strides(const Shape& shape);
/// NumPy-style text: "(2, 3)", "(4,)", "()".
std::string shape_to_string(const Shape& shape);
/// Comma-separated list for IR text: "2,3" ("" for a scalar).
std::string dims_to_string(const std::vector<int64_t>& dims);
/// Largest element count a shape may have: 2^59, so that its size in bytes (at most 8 bytes per
/// element) and 64-bit index arithmetic never overflow.
inline constexpr int64_t kMaxElements = int64_t{1} << 59;
/// Throws ingot::Error(kInvalidArgument) naming `what` and the shape if any size is negative or
/// the element count exceeds kMaxElements (checked without overflow).
void check_shape(const Shape& shape, const char* what);

}  // namespace ingot
