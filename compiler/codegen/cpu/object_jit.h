// The CPU back end's code generator after MLIR: an LLVM module split into one part per kernel
// function (plus the host entry), each part optimised and compiled to an object file on its own
// thread, the objects linked into one in-process JIT (LLVM ORC LLJIT). Internal to
// compiler/codegen; includes LLVM headers. docs/compiler.md, "Code generation".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llvm/IR/Module.h"

namespace llvm {
class TargetMachine;
namespace orc {
class LLJIT;
}
}  // namespace llvm

namespace ingot::codegen::detail {

/// What the object code is compiled for: part of every compilation cache key.
struct HostTarget {
  std::string triple;    ///< e.g. "x86_64-unknown-linux-gnu"
  std::string cpu;       ///< llvm::sys::getHostCPUName(), e.g. "skylake-avx512"
  std::string features;  ///< the host's feature flags, sorted, e.g. "+avx,+avx2,...,-xop"
  std::string key() const { return triple + ";" + cpu + ";" + features; }
};

/// The host's target (detected once per call; cheap).
HostTarget host_target();

/// One piece of an LLVM module compiled on its own: `bitcode` holds a module with the part's
/// definitions and declarations of everything else it uses.
struct ModulePart {
  std::string name;     ///< the kernel function's name, or the entry's for the host part
  std::string bitcode;  ///< LLVM bitcode of the part
  /// The part holding the entry of a module with kernels (compiled at -O0 with the fast
  /// instruction selector); false for kernels and for a module without any (one part, optimised).
  bool host = false;
};

/// Splits `module` (translated from MLIR) into parts: one per defined external function whose
/// name starts with `kernel_prefix`, and one "host" part with every other definition (the entry
/// and its C wrappers). Local (private/internal) functions and all global variables a part uses
/// are cloned into it (so OpenMP's outlined bodies stay with their kernel); kernels are called
/// across parts by name. Unused declarations are dropped. Deterministic: the same module gives
/// the same parts, byte for byte. Errors: ingot::Error(kInternal) when bitcode cannot be written.
std::vector<ModulePart> split_module(llvm::Module& module, const std::string& kernel_prefix);

/// Options of compile_objects().
struct ObjectCompileOptions {
  int opt_level = 2;  ///< LLVM optimisation level of the parts (0-3; CpuCompileOptions::opt_level)
  int threads = 0;    ///< compile threads; 0: all hardware threads
  /// Called after each part finishes (done, total), serialised; may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

/// Optimises (LLVM's -O<opt_level> pipeline for the host CPU) and compiles each part to an ELF
/// object, `threads` parts at a time, each in its own LLVMContext and TargetMachine: the objects
/// do not depend on the thread count or order (each part is compiled alone). Returns the objects
/// in the order of `parts`. Errors: ingot::Error(kInvalidArgument) with LLVM's message when a part
/// fails to parse, optimise or compile.
std::vector<std::string> compile_objects(const std::vector<ModulePart>& parts, const ObjectCompileOptions& options);

/// Optimises and compiles LLVM modules to ELF objects for the host CPU. Owns its TargetMachines:
/// one per thread (not thread-safe).
class ObjectCompiler {
 public:
  /// `opt_level`: LLVM optimisation level of kernel parts (0-3).
  explicit ObjectCompiler(int opt_level);
  ~ObjectCompiler();
  ObjectCompiler(const ObjectCompiler&) = delete;
  ObjectCompiler& operator=(const ObjectCompiler&) = delete;
  /// Sets `module`'s data layout and triple, optimises it and returns the object. `host`: the
  /// entry part of a module with kernels (instsimplify + dce, -O0 code generation with the fast
  /// instruction selector); otherwise LLVM's -O<opt_level> pipeline and code generator.
  /// `name` appears in errors. Errors: ingot::Error(kInvalidArgument) with LLVM's message.
  std::string compile(llvm::Module& module, bool host, const std::string& name);

 private:
  int opt_level_;
  std::unique_ptr<llvm::TargetMachine> kernel_tm_, host_tm_;
};

/// The threads run_parallel(jobs, threads, ...) uses: min(jobs, threads, or all hardware threads
/// when threads <= 0), at least 1.
size_t parallel_threads(size_t jobs, int threads);

/// Runs job(index, thread) for every index in [0, jobs) on parallel_threads(jobs, threads) threads
/// (the caller's among them; `thread` is in [0, that count), so per-thread state can be indexed by
/// it). `progress(done, jobs)`, when given, runs serialised after each job. The first exception a
/// job throws stops the jobs not yet started and is rethrown once every thread has finished.
/// A thread that cannot be started (EAGAIN/ENOMEM: a thread or address-space limit) is not an
/// error: the threads that did start, the caller's at least, do all the jobs.
void run_parallel(size_t jobs, int threads, const std::function<void(size_t, size_t)>& job,
                  const std::function<void(int64_t, int64_t)>& progress);

/// Objects linked into one JIT: the code stays valid while this lives.
class LinkedObjects {
 public:
  ~LinkedObjects();
  LinkedObjects(const LinkedObjects&) = delete;
  LinkedObjects& operator=(const LinkedObjects&) = delete;
  /// The address of `symbol` (linking what it needs on first lookup). Errors:
  /// ingot::Error(kInvalidArgument) naming the symbol and LLVM's message (e.g. an unresolved
  /// external).
  void* lookup(const std::string& symbol);

  /// Links `objects` in a fresh LLJIT (RuntimeDyld with SectionMemoryManager, like MLIR's
  /// ExecutionEngine). External symbols resolve, in order, to `symbols` (name -> address: ingot's
  /// library kernels), the `runtime_libraries` (loaded permanently, e.g. libomp) and this
  /// process. `perf_jitdump`: register LLVM's perf JIT listener. Errors: ingot::Error
  /// (kInvalidArgument) naming a library that cannot be loaded or an object LLVM refuses.
  static std::unique_ptr<LinkedObjects> link(const std::vector<std::string>& objects,
                                             const std::vector<std::pair<std::string, void*>>& symbols,
                                             const std::vector<std::string>& runtime_libraries, bool perf_jitdump);

 private:
  LinkedObjects() = default;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
};

/// Adds `ingot_packed_<entry>(void** args)` to `module`: calls `_mlir_ciface_<entry>` with
/// `*args[i]` as its i-th argument (MLIR ExecutionEngine's packed calling convention: args[i]
/// points to the storage of argument i). The C interface must return void (results are
/// out-params). `_mlir_ciface_<entry>` and `<entry>` become internal and always-inline: the host
/// part's -O0 compile (ObjectCompiler::compile) inlines them into the packed entry, whose one
/// argument x86's fast instruction selector can lower (it gives the whole entry block to the
/// slower SelectionDAG selector when a function has more than six arguments, and `<entry>` has
/// five per buffer). Errors: ingot::Error(kInvalidArgument) when `_mlir_ciface_<entry>` is
/// missing.
void add_packed_entry(llvm::Module& module, const std::string& entry);

}  // namespace ingot::codegen::detail
