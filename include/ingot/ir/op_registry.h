// The op registry: one entry per op holding its shape rule (which also verifies attributes and
// operand types), its interpreter kernel and its lowering. VJP rules are autodiff's, in a table of
// their own keyed by op name (include/ingot/autodiff/vjp_rules.h), so the IR never needs Tensor.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ingot/ir/attributes.h"
#include "ingot/ir/graph.h"
#include "ingot/runtime/array.h"

namespace ingot::lower {
class LoweringContext;
}

namespace ingot::ir {

/// Lowering rule: appends the MLIR for `node` to the context and binds its results' SSA names
/// (compiler/lower; see include/ingot/lower/lowering.h).
using LowerRule = std::function<void(lower::LoweringContext& ctx, const Node& node)>;

/// Shape/dtype rule and verifier: given operand types and attributes, returns the result types,
/// or throws ingot::Error naming the op, the offending attribute or operand, and the values
/// (e.g. "dot_general: contracting dimension sizes differ: lhs dim 1 has 5, rhs dim 0 has 6").
using ShapeRule = std::function<std::vector<TensorType>(std::span<const TensorType> operands, const Attributes& attrs)>;

/// Reference interpreter kernel: computes the results on host Arrays. `result_types` are the
/// types the shape rule inferred. Written for clarity, not speed.
using InterpretRule = std::function<std::vector<Array>(std::span<const Array> operands, const Attributes& attrs,
                                                       std::span<const TensorType> result_types)>;

/// Properties of an op that transformations read instead of keeping their own op lists.
struct OpTraits {
  /// Cheap enough to recompute in the backward pass rather than keep alive between the passes
  /// (VjpOptions::rematerialize_elementwise; jax.checkpoint's elementwise policy): the
  /// elementwise map ops, compare, select, clamp, convert and broadcast_in_dim.
  bool cheap_to_recompute = false;
};

/// Everything ingot knows about one op.
struct OpDef {
  std::string name;      ///< StableHLO spelling, e.g. "dot_general"
  int min_operands = 0;  ///< fewest operands
  int max_operands = 0;  ///< most operands, or -1 for variadic
  ShapeRule shape_rule;
  InterpretRule interpret;  ///< empty means "no interpreter kernel" (a named error)
  std::string summary;      ///< one line for docs and `ingot ops`
  /// MLIR lowering (compiler/lower). Empty means "no lowering": compiling a graph with this op is
  /// ingot::Error(kUnimplemented) "no lowering for op 'op'".
  LowerRule lower;
  /// The attribute names the op accepts, when declared: Graph::add_node then rejects any other
  /// name (a typo in an optional attribute would otherwise silently select its default).
  /// Empty optional: the shape rule checks attributes itself.
  std::optional<std::vector<std::string>> attribute_names;
  OpTraits traits;
};

/// A set of op definitions keyed by name.
class OpRegistry {
 public:
  /// The registry of every built-in op. Built once on first use and immutable afterwards.
  static const OpRegistry& builtin();

  /// Adds `def`; throws ingot::Error(kInvalidArgument) if the name is taken.
  void add(OpDef def);
  /// Throws ingot::Error(kNotFound) naming `name` and suggesting `ingot ops` if unknown.
  const OpDef& get(const std::string& name) const;
  const OpDef* find(const std::string& name) const;
  /// Names of all ops, sorted.
  std::vector<std::string> names() const;
  /// Sets the lowering rule of op `name` (the lowering files of compiler/ops attach their rules
  /// while the registry is being built). Throws ingot::Error(kNotFound) for an unknown op.
  void set_lowering(const std::string& name, LowerRule rule);

 private:
  std::map<std::string, OpDef> ops_;
};

/// Registration functions, one per op family (compiler/ops/<family>.cpp). builtin() calls each.
void register_elementwise_ops(OpRegistry& registry);  // constant, iota, convert, unary, binary,
                                                      // compare, select, clamp
void register_shape_ops(OpRegistry& registry);        // reshape, broadcast_in_dim, transpose,
                                                      // slice, pad, concatenate, reverse
void register_reduction_ops(OpRegistry& registry);    // reduce, argmax, argmin, reduce_window
void register_linalg_ops(OpRegistry& registry);       // dot_general, convolution
void register_indexing_ops(OpRegistry& registry);     // gather, scatter
void register_random_ops(OpRegistry& registry);       // rng_bit_generator
void register_control_ops(OpRegistry& registry);      // optimization_barrier
void register_collective_ops(OpRegistry& registry);   // all_reduce (with its lowering: an error)
/// Lowering rules to MLIR, one file per family (compiler/ops/<family>_lower.cpp; all_reduce's is
/// in collective.cpp).
void register_elementwise_lowerings(OpRegistry& registry);  // constant, iota, convert, unary,
                                                            // binary, compare, select, clamp
void register_shape_lowerings(OpRegistry& registry);        // reshape, broadcast_in_dim, transpose,
                                                            // reverse, slice, concatenate, pad
void register_reduction_lowerings(OpRegistry& registry);    // reduce, argmax, argmin,
                                                            // reduce_window, select_and_scatter
void register_linalg_lowerings(OpRegistry& registry);       // dot_general, convolution
void register_indexing_lowerings(OpRegistry& registry);     // gather, scatter
void register_random_lowerings(OpRegistry& registry);       // rng_bit_generator
void register_control_lowerings(OpRegistry& registry);      // optimization_barrier

}  // namespace ingot::ir
