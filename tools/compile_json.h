// The compile breakdown of a step as JSON, shared by `ingot bench --json` and `ingot train
// --metrics-json` (docs/compiler.md, "Compile time").
#pragma once

#include <nlohmann/json.hpp>

#include "ingot/jit/jit.h"

namespace ingot::cli {

/// `c` as a JSON object: seconds per phase (total_s, trace_s, autodiff_s, lower_s, mlir_s, llvm_s,
/// link_s), objects linked, cache hits and misses, steps loaded whole from the cache, distinct
/// kernel functions, compiles.
inline nlohmann::ordered_json compile_breakdown_json(const CompileBreakdown& c) {
  return {{"compiles", c.compiles},
          {"total_s", c.total_seconds},
          {"trace_s", c.trace_seconds},
          {"autodiff_s", c.autodiff_seconds},
          {"lower_s", c.backend.lower_seconds},
          {"mlir_s", c.backend.mlir_seconds},
          {"llvm_s", c.backend.llvm_seconds},
          {"link_s", c.backend.link_seconds},
          {"objects", c.backend.objects},
          {"cache_hits", c.backend.cache_hits},
          {"cache_misses", c.backend.cache_misses},
          {"step_cache_hits", c.backend.step_cache_hits},
          {"kernel_functions", c.backend.kernel_functions},
          {"scope_functions", c.backend.scope_functions}};
}

}  // namespace ingot::cli
