// default_tensor_stages (include/ingot/codegen/pipeline.h): the stages both back ends start with.
#include "ingot/codegen/pipeline.h"

#include <fmt/format.h>

#include "ingot/codegen/pass_names.h"

namespace ingot::codegen {

std::vector<PipelineStage> default_tensor_stages(const TensorStageOptions& options) {
  const bool in_place = options.results_in_argument_buffers;
  std::string bufferize;
  // A donated parameter's new value is computed after its other readers, so in place.
  if (in_place) bufferize += fmt::format("func.func({}),", pass_names::kSinkDonatedUpdates);
  bufferize +=
      "eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries "
      "function-boundary-type-conversion=identity-layout-map},";
  // A scope function's result computed into its argument (a donated parameter's update,
  // lower::LoweringOptions::share_repeated_scopes) is dropped: the call's operand is the result.
  // The entry's results that are its arguments are dropped too; the runtime reads the pairing
  // (ingot-drop-argument-results, CpuKernel::run).
  if (in_place) bufferize += fmt::format("drop-equivalent-buffer-results,{},", pass_names::kDropArgumentResults);
  bufferize +=
      fmt::format("func.func({}{}),", pass_names::kDistinctResults, in_place ? "{guard-argument-copies=true}" : "");
  bufferize += "buffer-results-to-out-params{modify-public-functions hoist-static-allocs},canonicalize";
  return {
      {"canonicalize", "canonicalize,cse"},
      // Upstream elementwise fusion (single-use producers), then ingot's pass that also fuses cheap
      // producers with several uses into each same-shaped elementwise consumer (bias-add +
      // relu's compare + select become one generic), then upstream fusion again for the chains
      // that opened up.
      {"fuse", fmt::format("func.func(linalg-fuse-elementwise-ops),func.func({}),"
                           "canonicalize,cse,func.func(linalg-fuse-elementwise-ops),canonicalize,cse",
                           pass_names::kFuseMultiUseElementwise)},
      // f16/bf16 arithmetic computed in f32 and rounded on store, as the interpreter does.
      {"emulate-floats", "func.func(arith-emulate-unsupported-floats{source-types=bf16,f16 target-type=f32})"},
      {"bufferize", bufferize},
  };
}

}  // namespace ingot::codegen
