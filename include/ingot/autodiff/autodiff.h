// Reverse-mode automatic differentiation over the graph IR, with JAX's transformation names.
//
// Every transformation works on TraceFn functions inside a trace and emits ordinary IR nodes, so
// transformations compose: grad(grad(f)) differentiates the backward graph of grad(f).
// Gradients flow only through floating-point values; integer and bool values (indices, masks,
// compare results, random bits) carry no cotangent, as JAX's float0. Reverse mode follows
// Griewank & Walther, "Evaluating Derivatives" (2008), ch. 3; the per-op rules sit in each op's
// registry entry (compiler/ops/) and their edge conventions are tabled in docs/autodiff.md.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/trace/tensor.h"

namespace ingot {

/// Options of the reverse-mode transformations.
struct VjpOptions {
  /// Recompute cheap elementwise forward values (unary math, arithmetic, compare, select,
  /// convert, broadcasts) in the backward pass instead of keeping the forward results alive
  /// until the pullback uses them: less memory held between the passes, a little more compute.
  /// Off by default. Recomputed nodes carry the attribute `remat = true` so that CSE does not
  /// merge them back into the forward pass.
  bool rematerialize_elementwise = false;
};

/// Maps output cotangents to input cotangents. An invalid (default-constructed) Tensor stands for
/// a zero cotangent. Returns one cotangent per primal, of the primal's type (zeros where no
/// gradient flows; for integer/bool primals, zeros of their type).
using Pullback = std::function<std::vector<Tensor>(const std::vector<Tensor>& cotangents)>;

/// JAX's vjp: evaluates `fn` at `primals` (Tensors of the current trace) and returns its outputs
/// and the pullback. `fn` must use only its arguments (tensors of an outer trace cannot be
/// captured: ingot::Error(kTraceError)); Arrays it captures become constants.
/// The pullback may be called any number of times, in the same trace. Throws
/// ingot::Error(kUnimplemented) "no VJP rule for 'op'" when a cotangent must flow through an op
/// without a rule, and kShapeMismatch/kDTypeMismatch when a cotangent's type differs from its
/// output's type.
std::pair<std::vector<Tensor>, Pullback> vjp(const TraceFn& fn, const std::vector<Tensor>& primals,
                                             const VjpOptions& options = {});

/// JAX's value_and_grad as a TraceFn. `fn`'s first output must be a floating-point scalar (the
/// loss); with `has_aux` its other outputs are auxiliary values returned unchanged, without it
/// `fn` must return exactly one output. The returned function outputs
///   [loss, aux..., d loss / d args[argnums[0]], d loss / d args[argnums[1]], ...]
/// (JAX's ((loss, aux), grads), flattened). argnums default to {0}; a negative or repeated
/// argnum, or one past the arguments, is ingot::Error(kOutOfRange / kInvalidArgument).
/// A non-scalar or non-float loss is ingot::Error(kShapeMismatch / kDTypeMismatch).
TraceFn value_and_grad(TraceFn fn, std::vector<int64_t> argnums = {0}, bool has_aux = false, VjpOptions options = {});

/// JAX's grad: like value_and_grad but outputs only the gradients (and, with `has_aux`, the aux
/// values after them: [grads..., aux...], JAX's (grads, aux)).
TraceFn grad(TraceFn fn, std::vector<int64_t> argnums = {0}, bool has_aux = false, VjpOptions options = {});

/// Graph form of value_and_grad: a new graph named `<name>_value_and_grad` with the same
/// parameters whose outputs are [loss, aux..., grads...], cleaned by the `cse` and `dce` passes so
/// no wasted node remains.
ir::Graph value_and_grad_graph(const ir::Graph& graph, std::vector<int64_t> argnums = {0}, bool has_aux = false,
                               VjpOptions options = {});

}  // namespace ingot
