// Keys and manifests of the CPU back end's use of the compilation cache (compile_cache.h):
// what makes two compiles the same, and how a compiled step is written down. Internal to
// compiler/codegen. docs/compiler.md, "Compilation cache".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ingot/codegen/cpu_compiler.h"

namespace ingot::codegen::detail {

/// Everything besides the IR that decides the object code. Two compiles share cache entries
/// only when all of it is equal.
struct CacheContext {
  std::string version;  ///< ingot's version, the build of the code that compiles (build id) and LLVM's version
  std::string target;   ///< HostTarget::key(): triple, CPU name, CPU features
  std::string options;  ///< the compile options that change code (opt level, pipeline stages, entry)
};

/// ingot's version and the GNU build id of the binary this code is linked into (any change to the
/// compiler's code changes it), and LLVM's version.
std::string compiler_version();

/// The CacheContext of a compile with these options and stages, for the host.
CacheContext cache_context(const CpuCompileOptions& options, const std::vector<PipelineStage>& stages,
                           const std::string& entry);

/// Cache key (64 lowercase hex digits, BLAKE3) of a whole step: `kind` "step", the context and the
/// lowered MLIR text.
std::string step_key(const CacheContext& context, const std::string& mlir_text);

/// Cache key of one object: the context (without its stages), whether it is the host part, its
/// code (LLVM bitcode, or MLIR bytecode of a part split after `outline`) and, for MLIR code,
/// `lowering`: the text of the stages still to run on it (empty for bitcode).
std::string object_key(const CacheContext& context, bool host, std::string_view code, std::string_view lowering = {});

/// A compiled step as the cache holds it: its kernel counts, the entry's results that are its
/// arguments and the keys of its objects (host first).
struct StepManifest {
  CpuKernelStats stats;
  /// The entry's results that are its arguments (kResultArgumentsAttr, ingot-drop-argument-results):
  /// per result the argument's index or -1; empty when the pipeline dropped none.
  std::vector<int64_t> result_arguments;
  std::vector<std::string> objects;
  std::string serialize() const;
  /// nullopt for text that is not a manifest of this format (treated as a miss).
  static std::optional<StepManifest> parse(const std::string& text);
};

}  // namespace ingot::codegen::detail
