// Cost analysis of a graph: floating-point operations, transcendentals and bytes accessed, as
// XLA's HloCostAnalysis reports them (`jax.jit(f).lower(...).compile().cost_analysis()`: "flops",
// "transcendentals", "bytes accessed"). docs/ir.md, "Cost analysis".
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ingot/ir/graph.h"

namespace ingot::ir {

/// The work of one evaluation of a graph, counted per node of the unfused graph; nodes none of
/// whose outputs reach a graph output are not run and not counted.
struct CostAnalysis {
  /// Floating-point operations (f16, bf16, f32, f64 results or operands): a multiply-add is 2,
  /// as in XLA. dot_general 2 * result elements * contracted size; convolution 2 * result
  /// elements * kernel elements / output features (padding counted as work, as XLA does);
  /// elementwise arithmetic, compare and argmax/argmin one per element (clamp two); reduce one
  /// per input element and operand; reduce_window one per result element and window element;
  /// select_and_scatter one compare per source element and window element plus one add per
  /// source element; scatter with `add` one per update element. Data movement, integer and
  /// boolean ops, constants, random bits and collectives count 0.
  double flops = 0;
  /// Transcendental elementwise ops (exponential, exponential_minus_one, log, log_plus_one,
  /// logistic, tanh, erf, sine, cosine, sqrt, rsqrt, power, atan2): one per element, not in flops.
  double transcendentals = 0;
  /// Bytes of every node's operands and results (an upper bound: fusion keeps most in registers).
  double bytes_accessed = 0;
  /// `flops` per op name (ops with none are absent): where the work is.
  std::map<std::string, double> flops_by_op;
  CostAnalysis& operator+=(const CostAnalysis& other);
};

/// The cost of one evaluation of `graph` (CostAnalysis). Throws ingot::Error(kUnimplemented)
/// naming the op for a node whose op has no cost rule (every builtin op has one).
CostAnalysis cost_analysis(const Graph& graph);

/// cost_analysis(graph), or all zeros when an op has no cost rule (for figures that are reported,
/// never required: Jitted::cost_analysis, Model::train_step_cost_analysis). Does not throw for that.
CostAnalysis cost_analysis_if_known(const Graph& graph);

/// Whether `op` has a cost rule (for tests and for registries with ops of their own).
bool has_cost_rule(const std::string& op);

}  // namespace ingot::ir
