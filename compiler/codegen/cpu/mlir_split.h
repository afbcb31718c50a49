// The CPU back end's split of an MLIR module after the `outline` stage: one module per kernel
// function and one for the entry, each lowered to LLVM, optimised and compiled on its own thread
// in its own MLIRContext (compile_cpu; docs/compiler.md, "Kernel outlining and dedupe").
// Internal to compiler/codegen; includes MLIR headers.
#pragma once

#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"

namespace ingot::codegen::detail {

/// One piece of an outlined module, as MLIR bytecode (a self-contained module that parses into
/// any MLIRContext with the CPU back end's dialects).
struct MlirPart {
  std::string name;      ///< the kernel function's name, or "host" for the entry's part
  std::string bytecode;  ///< MLIR bytecode of the part's module (deterministic for the same IR)
  /// The entry's part of a module with kernels (compiled at -O0, ObjectCompiler::compile); false
  /// for kernels and for a module without any (its one part is optimised like a kernel).
  bool host = false;
};

/// Splits `module` (after ingot-outline-kernels) into parts, the host part first: one per kernel
/// function (a `func.func` with the `ingot.kernel` attribute and a body), holding that function
/// and what it references: private copies of memref.global constants, declarations of functions
/// (helpers are defined in the host part, library functions outside); and the host part, the
/// module itself with every kernel left
/// as a private declaration (called across objects by name, as split_module's parts are). Kernels
/// and globals keep their names, so the parts link into the module they came from. `module` is
/// modified (kernel bodies erased): lower it no further. Each part has its own copy of a constant
/// global; a module with a global that is not constant (state the entry and its kernels share)
/// is one part, the whole module (host false). Errors: ingot::Error(kInternal) when a
/// part cannot be written as bytecode.
std::vector<MlirPart> split_mlir_module(mlir::ModuleOp module);

}  // namespace ingot::codegen::detail
