// Helpers the MLIR back ends share (compiler/codegen/mlir_common.h).
#include "codegen/mlir_common.h"

#include <fmt/format.h>

#include <fstream>

#include "ingot/runtime/error.h"
#include "ingot/runtime/text_scan.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace ingot::codegen::detail {

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext& ctx)
    : handler_(&ctx, [this](mlir::Diagnostic& d) {
        // "file:line:col: message" (MLIR's location, e.g. loc("-":3:5) for parsed text).
        std::string loc;
        llvm::raw_string_ostream os(loc);
        os << d.getLocation();
        text_ += loc + ": " + d.str() + "\n";
        return mlir::success();
      }) {}

std::string module_text(mlir::ModuleOp module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os);
  return s;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("cannot write dump file '{}'", path.string()),
                "check that the dump directory is writable");
  }
  out << text;
}

void fail(const std::string& what, const std::string& diagnostics, const std::string& dump_dir,
          const std::string& dump_hint) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("MLIR {} failed:\n{}{}", what, diagnostics,
                          dump_dir.empty() ? "" : fmt::format("(dumps in {})", dump_dir)),
              dump_dir.empty() ? dump_hint : "look at the last dump file before the failing stage");
}

mlir::OwningOpRef<mlir::ModuleOp> parse_and_run(
    mlir::MLIRContext& ctx, const std::string& text, const std::vector<PipelineStage>& stages,
    const std::string& dump_dir, const std::string& dump_hint, bool verify_each_pass,
    const std::function<void(const std::string&, mlir::ModuleOp)>& after_stage) {
  DiagnosticCollector diags(ctx);
  if (!dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dump_dir, ec);
    if (ec || !std::filesystem::is_directory(dump_dir)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("cannot create the dump directory '{}': {}", dump_dir,
                              ec ? ec.message() : "a file of that name exists"),
                  "choose a writable directory for the IR dumps");
    }
    write_file(std::filesystem::path(dump_dir) / "00-input.mlir", text);
  }
  // MLIR's parser, verifier and printer recurse per nested region, attribute and type: refuse
  // text nested deeper than any pipeline needs before they see it (~3,000 nested modules
  // overflowed an 8 MiB stack).
  // MLIR bytecode (magic "ML\xefR", the step cache's modules) is binary and not scanned.
  const bool bytecode = text.rfind("ML\xefR", 0) == 0;
  if (!bytecode && ingot::detail::bracket_depth(text, kMaxMlirNesting + 1, true) > kMaxMlirNesting) {
    throw Error(ErrorCode::kParseError,
                fmt::format("MLIR parsing refused: the text nests brackets ({{, (, [) more than {} levels deep",
                            kMaxMlirNesting),
                "ingot's pipelines nest a few dozen levels at most; the input is corrupt or hostile");
  }
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  if (!module) fail("parsing", diags.text(), dump_dir, dump_hint);
  int index = 1;
  for (const PipelineStage& stage : stages) {
    mlir::PassManager pm(&ctx);
    std::string err;
    llvm::raw_string_ostream err_stream(err);
    if (mlir::failed(mlir::parsePassPipeline(stage.pipeline, pm, err_stream))) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("bad pass pipeline for stage '{}': {}", stage.name, err),
                  "use pass names as mlir-opt-22 --help lists them");
    }
    pm.enableVerifier(verify_each_pass);
    if (mlir::failed(pm.run(*module))) fail(fmt::format("stage '{}'", stage.name), diags.text(), dump_dir, dump_hint);
    if (!verify_each_pass && mlir::failed(mlir::verify(*module))) {
      fail(fmt::format("verification after stage '{}' (set verify_each_pass to find the pass)", stage.name),
           diags.text(), dump_dir, dump_hint);
    }
    if (after_stage) after_stage(stage.name, *module);
    if (!dump_dir.empty()) {
      write_file(std::filesystem::path(dump_dir) / fmt::format("{:02}-{}.mlir", index, stage.name),
                 module_text(*module));
    }
    ++index;
  }
  return module;
}

}  // namespace ingot::codegen::detail
