// Helpers the MLIR back ends share (CPU: codegen/cpu, CUDA: codegen/cuda): diagnostics collected
// into ingot::Error messages, IR dumps after each named stage, and the staged pass-pipeline run.
// Internal to compiler/codegen; includes MLIR headers.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ingot/codegen/pipeline.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace ingot::codegen::detail {

/// Collects MLIR diagnostics ("location: message" lines) while it lives, for error messages.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext& ctx);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// The module printed as MLIR text.
std::string module_text(mlir::ModuleOp module);

/// Writes `text` to `path`; ingot::Error(kInvalidArgument) when it cannot.
void write_file(const std::filesystem::path& path, const std::string& text);

/// Throws ingot::Error(kInvalidArgument) "MLIR <what> failed:" with the diagnostics and a hint to
/// the dumps (`dump_hint` names how to enable them for this back end).
[[noreturn]] void fail(const std::string& what, const std::string& diagnostics, const std::string& dump_dir,
                       const std::string& dump_hint);

/// Deepest bracket nesting ({, (, [ outside strings and comments) parse_and_run accepts in MLIR
/// text (bytecode is not scanned): 256.
inline constexpr int64_t kMaxMlirNesting = 256;

/// Parses `text` and runs `stages` in order, writing `<dump_dir>/00-input.mlir` and
/// `<NN>-<stage>.mlir` after each stage when `dump_dir` is set (created if missing).
/// `after_stage(stage name, module)` runs after each stage (checks). The module is verified after
/// every pass with `verify_each_pass` (mlir-opt's default, --verify-each), else once after each
/// stage: verification after each pass was a third of the CPU stages' time on the bench LM
/// (0.24 of 0.73 s, docs/compiler.md "Compile time"). Errors: ingot::Error kParseError for text
/// nested deeper than kMaxMlirNesting (checked before MLIR parses it); kInvalidArgument for
/// parse failures, bad pipeline text, a failing stage, a stage leaving invalid IR, or the dump
/// directory.
mlir::OwningOpRef<mlir::ModuleOp> parse_and_run(
    mlir::MLIRContext& ctx, const std::string& text, const std::vector<PipelineStage>& stages,
    const std::string& dump_dir, const std::string& dump_hint, bool verify_each_pass,
    const std::function<void(const std::string&, mlir::ModuleOp)>& after_stage = {});

}  // namespace ingot::codegen::detail
