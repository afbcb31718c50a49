// ingot's own MLIR passes of the CPU pipeline (see docs/compiler.md, "Passes"):
//   ingot-fuse-multi-use-elementwise   fusion of cheap producers with several uses
//   ingot-distinct-results             distinct result buffers for out-param hoisting
//   ingot-sink-donated-updates         donated parameters' new values after their other readers
//   ingot-parallelize-outer-loops      which scf.parallel loops run on several cores
#pragma once

namespace ingot::codegen {

/// Registers ingot's passes in MLIR's global pass registry (so pipelines given as text, and
/// ingot-opt, can name them). Call once, with the rest of MLIR's pass registration.
void register_ingot_passes();

}  // namespace ingot::codegen
