// The host CPU and the reference interpreter as compile targets (include/ingot/jit/target.h).
#include <fmt/format.h>

#include <cstring>

#include "ingot/interp/interpreter.h"
#include "ingot/jit/jit.h"
#include "ingot/jit/target.h"
#include "jit/jit_internal.h"

namespace ingot {

namespace detail {

std::vector<ir::TensorType> host_signature(const std::vector<Array>& args, const std::string& what) {
  std::vector<ir::TensorType> types;
  types.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: argument {} is an invalid Array", what, i));
    }
    if (args[i].num_shards() > 1) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("{}: argument {} is sharded over {} devices ({})", what, i, args[i].num_shards(),
                              args[i].sharding().to_string()),
                  "a CPU target runs on one device: to_host() the argument, or compile for the mesh with "
                  "spmd_target (include/ingot/jit/spmd.h)");
    }
    if (&args[i].device() != &args[0].device()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: argument {} is on {} but argument 0 on {} (different device objects)", what, i,
                              args[i].device().name(), args[0].device().name()),
                  "device_put the arguments onto one device first (as jax.jit requires for committed arrays)");
    }
    types.push_back({args[i].shape(), args[i].dtype()});
  }
  return types;
}

}  // namespace detail

namespace {

class CpuTarget final : public CompileTarget {
 public:
  TargetKind kind() const override { return TargetKind::kCpu; }
  std::string name() const override { return "cpu"; }
  bool host_memory() const override { return true; }
  std::vector<ir::TensorType> signature(const std::vector<Array>& args, const std::string& what) const override {
    return detail::host_signature(args, what);
  }
  std::shared_ptr<const Executable> compile(const ir::Graph& graph, const std::vector<int64_t>& donate_argnums,
                                            const TargetCompileOptions& options) const override {
    return compile_graph(graph, options.cpu, donate_argnums, options.lowering);
  }
  std::vector<Array> run(const Executable& exe, const std::vector<Array>& args) const override {
    // Outputs live where the arguments do (cpu:0 of the process when there are none).
    return exe.run(args, args.empty() ? nullptr : &args[0].device());
  }
  Array to_target(const Array& host) const override { return host; }
  Array to_host(const Array& array) const override { return ingot::to_host(array); }
};

/// The interpreter: the "Executable" is one thunk that interprets the graph (outputs: slots
/// after the inputs, one per graph output).
class InterpreterTarget final : public CompileTarget {
 public:
  TargetKind kind() const override { return TargetKind::kInterpreter; }
  std::string name() const override { return "interpreter"; }
  bool host_memory() const override { return true; }
  std::vector<ir::TensorType> signature(const std::vector<Array>& args, const std::string& what) const override {
    return detail::host_signature(args, what);
  }
  std::shared_ptr<const Executable> compile(const ir::Graph& graph, const std::vector<int64_t>& donate_argnums,
                                            const TargetCompileOptions&) const override {
    detail::donation_pairs(graph, donate_argnums);  // the same checks as compiled targets; nothing donated
    std::vector<std::pair<Shape, DType>> slots;
    for (ir::ValueId p : graph.parameters()) slots.emplace_back(graph.type(p).shape, graph.type(p).dtype);
    const size_t n_in = slots.size();
    Thunk thunk;
    thunk.name = "interpret:" + graph.name();
    for (size_t i = 0; i < n_in; ++i) thunk.input_slots.push_back(i);
    std::vector<size_t> outputs;
    for (ir::ValueId o : graph.outputs()) {
      thunk.output_slots.push_back(slots.size());
      outputs.push_back(slots.size());
      slots.emplace_back(graph.type(o).shape, graph.type(o).dtype);
    }
    auto shared = std::make_shared<const ir::Graph>(graph);
    thunk.run = [shared](std::span<const Array> in, std::span<Array> out) {
      std::vector<Array> results = interp::interpret(*shared, std::vector<Array>(in.begin(), in.end()));
      // The slots were allocated by Executable::run: the results are copied into them.
      for (size_t j = 0; j < out.size(); ++j) {
        const Array host = ingot::to_host(results[j]);
        std::memcpy(out[j].raw_data(), host.raw_data(), static_cast<size_t>(host.nbytes()));
      }
    };
    return std::make_shared<const Executable>(std::move(slots), n_in, std::vector<Thunk>{std::move(thunk)},
                                              std::move(outputs), std::vector<size_t>{}, "interpret:" + graph.name());
  }
  std::vector<Array> run(const Executable& exe, const std::vector<Array>& args) const override {
    return exe.run(args, args.empty() ? nullptr : &args[0].device());
  }
  Array to_target(const Array& host) const override { return host; }
  Array to_host(const Array& array) const override { return ingot::to_host(array); }
};

}  // namespace

std::shared_ptr<const CompileTarget> cpu_target() { return std::make_shared<CpuTarget>(); }

std::shared_ptr<const CompileTarget> interpreter_target() { return std::make_shared<InterpreterTarget>(); }

}  // namespace ingot
