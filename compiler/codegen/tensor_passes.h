// ingot's target-independent MLIR passes, run by both back ends' tensor and bufferization stages
// (include/ingot/codegen/pipeline.h, default_tensor_stages). Internal to compiler/codegen.
#pragma once

namespace ingot::codegen {

/// Registers ingot-fuse-multi-use-elementwise, ingot-distinct-results,
/// ingot-drop-argument-results and ingot-sink-donated-updates in MLIR's global pass registry.
/// Thread-safe and idempotent (both back ends call it).
void register_tensor_passes();

/// The attribute ingot-drop-argument-results puts on the entry: per original result, the index of
/// the argument it is (its buffer), or -1 for a result the function still returns (an out-param).
inline constexpr const char* kResultArgumentsAttr = "ingot.result_arguments";

}  // namespace ingot::codegen
