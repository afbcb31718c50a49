#include "ingot/ir/op_registry.h"

#include <fmt/format.h>

namespace ingot::ir {

const OpRegistry& OpRegistry::builtin() {
  // Built once (thread-safe static initialisation) and never modified afterwards.
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_shape_ops(r);
    register_reduction_ops(r);
    register_linalg_ops(r);
    register_indexing_ops(r);
    register_random_ops(r);
    register_control_ops(r);
    register_collective_ops(r);
    register_elementwise_lowerings(r);
    register_shape_lowerings(r);
    register_reduction_lowerings(r);
    register_linalg_lowerings(r);
    register_indexing_lowerings(r);
    register_random_lowerings(r);
    register_control_lowerings(r);
    return r;
  }();
  return registry;
}

void OpRegistry::add(OpDef def) {
  if (ops_.count(def.name)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("OpRegistry::add: op '{}' is already registered", def.name));
  }
  std::string name = def.name;
  ops_.emplace(std::move(name), std::move(def));
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef& OpRegistry::get(const std::string& name) const {
  if (const OpDef* def = find(name)) return *def;
  throw Error(ErrorCode::kNotFound, fmt::format("unknown op '{}'", name),
              "run `ingot ops` for the list of ops, or see docs/ir.md");
}

void OpRegistry::set_lowering(const std::string& name, LowerRule rule) {
  auto it = ops_.find(name);
  if (it == ops_.end()) {
    throw Error(ErrorCode::kNotFound, fmt::format("set_lowering: unknown op '{}'", name));
  }
  it->second.lower = std::move(rule);
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, def] : ops_) out.push_back(name);
  return out;
}

}  // namespace ingot::ir
