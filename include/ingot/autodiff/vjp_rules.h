// The reverse-mode rule table: one VJP rule per differentiable op, keyed by op name (JAX's
// `ad.primitive_transposes`). Autodiff owns the table; each op family registers its rules from
// its own file in compiler/ops/, next to the op's definition, so the graph IR (compiler/ir)
// never needs Tensor or autodiff. The op registry holds shape rules, kernels and lowerings only.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ingot/ir/attributes.h"
#include "ingot/runtime/error.h"
#include "ingot/trace/tensor.h"

namespace ingot {

/// What a VJP rule receives: the node's attributes and, as Tensors of the trace that is recording
/// the backward pass, its primal operands, its primal results and the cotangent of each result
/// (std::nullopt = a symbolic zero; at least one is present, and only floating-point results
/// carry cotangents).
struct VjpArgs {
  const ir::Attributes& attrs;
  const std::vector<Tensor>& operands;
  const std::vector<Tensor>& results;
  const std::vector<std::optional<Tensor>>& cotangents;
};

/// Reverse-mode rule: returns one cotangent per operand, each of the operand's type, or
/// std::nullopt for a (symbolic) zero. Emits its computation with the Tensor API, so backward
/// graphs are ordinary traced graphs and can themselves be differentiated (higher order).
using VjpRule = std::function<std::vector<std::optional<Tensor>>(const VjpArgs& args)>;

/// VJP rules keyed by op name. An op without a rule is not differentiable: a cotangent flowing
/// into it is ingot::Error(kUnimplemented) "no VJP rule for 'op'" (autodiff/autodiff.cpp). Ops
/// whose gradient is zero (floor, sign, ...) register a rule returning nullopts.
class VjpRules {
 public:
  /// The rules of every built-in op (compiler/ops/<family>.cpp). Built once on first use and
  /// immutable afterwards.
  static const VjpRules& builtin();

  /// Adds the rule of op `op`; throws ingot::Error(kInvalidArgument) if `op` already has one or
  /// `rule` is empty.
  void add(const std::string& op, VjpRule rule) {
    if (!rule) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("VjpRules::add: the rule given for op '{}' is empty", op));
    }
    if (!rules_.emplace(op, std::move(rule)).second) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("VjpRules::add: op '{}' already has a VJP rule", op));
    }
  }
  /// The rule of op `op`, or nullptr when it has none.
  const VjpRule* find(const std::string& op) const {
    auto it = rules_.find(op);
    return it == rules_.end() ? nullptr : &it->second;
  }
  /// Names of the ops that have a rule, sorted.
  std::vector<std::string> ops() const {
    std::vector<std::string> out;
    for (const auto& [name, rule] : rules_) out.push_back(name);
    return out;
  }

 private:
  std::map<std::string, VjpRule> rules_;
};

/// Registration functions, one per op family (compiler/ops/<family>.cpp, beside the family's
/// register_*_ops). VjpRules::builtin() calls each.
void register_elementwise_vjps(VjpRules& rules);
void register_shape_vjps(VjpRules& rules);
void register_reduction_vjps(VjpRules& rules);
void register_linalg_vjps(VjpRules& rules);
void register_indexing_vjps(VjpRules& rules);
void register_control_vjps(VjpRules& rules);
void register_collective_vjps(VjpRules& rules);

}  // namespace ingot
