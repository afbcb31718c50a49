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

/// The order of `n` samples in epoch `epoch`: 0..n-1, or with `shuffle` their permutation by
/// std::shuffle with std::mt19937_64(seed + epoch), so runs repeat. Every adapter uses it, so the
/// same data gives the same batches whichever adapter holds it.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace ingot::detail
