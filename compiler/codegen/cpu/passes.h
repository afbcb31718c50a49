// ingot's own MLIR passes of the CPU pipeline (see docs/compiler.md, "Passes"):
//   ingot-fuse-multi-use-elementwise   fusion of cheap producers with several uses
//   ingot-distinct-results             distinct result buffers for out-param hoisting
//   ingot-drop-argument-results        the entry's results that are its arguments, as an attribute
//   ingot-sink-donated-updates         donated parameters' new values after their other readers
//   ingot-early-dealloc                each buffer freed right after its last use
//   ingot-parallelize-outer-loops      which scf.parallel loops run on several cores
//   ingot-outline-kernels              one function per loop nest, identical nests shared
//   ingot-noalias-scopes               noalias arguments as alias scopes (survive OpenMP outlining)
//   ingot-approximate-math             f32 exp/erf/tanh/log... as vectorisable polynomials, not libm calls
#pragma once

#include "llvm/ADT/StringRef.h"

namespace ingot::codegen {

/// Registers the CPU pipeline's passes, and the shared ones (register_tensor_passes), in MLIR's
/// global pass registry (so pipelines given as text, and ingot-opt, can name them). Call once,
/// with the rest of MLIR's pass registration.
void register_cpu_passes();

/// The unit attribute ingot-outline-kernels puts on the kernel functions it creates (outline.cpp).
inline constexpr const char* kKernelAttr = "ingot.kernel";
/// Prefix of those functions' names ("ingot_k_<16 hex digits>").
inline constexpr const char* kKernelPrefix = "ingot_k_";

/// Registers ingot-outline-kernels (outline.cpp); part of register_cpu_passes().
void register_outline_kernels_pass();

/// Registers ingot-noalias-scopes (alias_scopes.cpp); part of register_cpu_passes().
void register_noalias_scopes_pass();

/// Registers ingot-early-dealloc (early_dealloc.cpp); part of register_cpu_passes().
void register_early_dealloc_pass();

/// Registers ingot-approximate-math (math_approximation.cpp); part of register_cpu_passes().
void register_approximate_math_pass();

/// True for the math ops ingot-approximate-math rewrites (f32 only): exp, expm1, erf, tanh, log,
/// log1p, named with or without the "math." prefix.
bool approximated_math_op(llvm::StringRef name);

}  // namespace ingot::codegen
