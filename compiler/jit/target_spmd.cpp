// A mesh of CPU devices as a compile target (spmd_target, include/ingot/jit/spmd.h): per-device
// programs compiled by compile_graph_spmd and run by run_spmd.
#include <fmt/format.h>

#include "ingot/jit/spmd.h"
#include "ingot/runtime/spmd.h"
#include "jit/jit_internal.h"

namespace ingot {

namespace {

class SpmdTarget final : public CompileTarget {
 public:
  explicit SpmdTarget(SpmdTargetOptions options) : options_(std::move(options)) {}
  TargetKind kind() const override { return TargetKind::kSpmd; }
  std::string name() const override {
    return options_.communicators.empty() ? "spmd" : fmt::format("spmd over {} devices", options_.communicators.size());
  }
  bool host_memory() const override { return true; }
  std::vector<ir::TensorType> signature(const std::vector<Array>& args, const std::string& what) const override {
    return detail::shard_signature(args, what);
  }
  std::shared_ptr<const Executable> compile(const ir::Graph& graph, const std::vector<int64_t>& donate_argnums,
                                            const TargetCompileOptions& options) const override {
    return compile_graph_spmd(graph, options.cpu, options.lowering,
                              {.donate_argnums = donate_argnums,
                               .collective_nanoseconds = options_.collective_nanoseconds,
                               .overlap_collectives = options_.overlap_collectives});
  }
  std::vector<Array> run(const Executable& exe, const std::vector<Array>& args) const override {
    const size_t n = exe.outputs().size();
    std::vector<NamedSharding> out_shardings;
    out_shardings.reserve(n);
    for (size_t i = 0; i < n; ++i) out_shardings.push_back(options_.out_sharding(i, n));
    return run_spmd(exe, args, out_shardings, options_.communicators);
  }
  Array to_target(const Array& host) const override { return host; }
  Array to_host(const Array& array) const override { return ingot::to_host(array); }

 private:
  SpmdTargetOptions options_;
};

}  // namespace

namespace detail {

std::vector<ir::TensorType> shard_signature(const std::vector<Array>& args, const std::string& what) {
  std::vector<ir::TensorType> types;
  types.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: argument {} is an invalid Array", what, i));
    }
    const Array shard = args[i].shards().front();  // the per-device shapes (an unsharded array: itself)
    types.push_back({shard.shape(), shard.dtype()});
  }
  return types;
}

}  // namespace detail

std::shared_ptr<const CompileTarget> spmd_target(SpmdTargetOptions options) {
  if (!options.out_sharding) {
    throw Error(ErrorCode::kInvalidArgument, "spmd_target: SpmdTargetOptions::out_sharding is empty",
                "give the sharding of every output (e.g. replicated over the arguments' mesh)");
  }
  return std::make_shared<SpmdTarget>(std::move(options));
}

}  // namespace ingot
