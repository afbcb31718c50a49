// Row copies of host arrays shared by the data adapters (trainer/data.cpp) and the trainer's
// per-process batch blocks (trainer/trainer.cpp); internal to trainer/.
#pragma once

#include <cstdint>
#include <vector>

#include "ingot/runtime/array.h"

namespace ingot::detail {

/// Rows `rows` of the host array `a` (n, ...) as a new host array (rows.size(), ...); an invalid
/// array stays invalid.
Array take_rows(const Array& a, const std::vector<int64_t>& rows);

/// begin, begin + 1, ..., end - 1 (empty when end <= begin).
std::vector<int64_t> iota(int64_t begin, int64_t end);

}  // namespace ingot::detail
