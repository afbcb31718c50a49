// Variable: a named, mutable model state array (Keras's keras.Variable): kernels, biases,
// moving statistics. The trainer purges a variable's own copy while a compiled step holds the
// live value (donated state) and syncs it back (TRAINER_SEMANTICS.md, "State is explicit").
#pragma once

#include <optional>
#include <string>

#include "ingot/runtime/array.h"
#include "ingot/ir/graph.h"
#include "ingot/runtime/sharding.h"

namespace ingot {

/// How a distributed step combines the devices' new values of a non-trainable variable (Keras 3's
/// Variable `aggregation`, after tf.VariableAggregation). Each device computes the update on its
/// batch shard:
/// - kMean: the devices' updates (new value - old) are averaged (all_reduce "mean"); the default
///   for floating-point variables (a custom layer's running average of its shard's data becomes
///   the average over the shards).
/// - kSum: the updates are summed (a count of examples seen); f32, f64, i32 and i64 only.
/// - kOnlyFirstReplica: every device computes the same update, which is kept as is (RNG states,
///   step counters, and the built-in layers' statistics, which are taken over the global batch);
///   the default for every other dtype, which is never averaged.
enum class VariableAggregation { kMean, kSum, kOnlyFirstReplica };

/// Keras's spelling: "mean", "sum", "only_first_replica".
const char* aggregation_name(VariableAggregation aggregation);

/// A model variable: name (e.g. "dense/kernel"), shape, dtype, whether gradients update it, and
/// its value. Not thread-safe (one trainer uses it at a time).
class Variable {
 public:
  /// A variable holding `value` (its shape and dtype are the variable's for its lifetime).
  /// Throws ingot::Error(kInvalidArgument) for an empty name or an invalid Array.
  Variable(std::string name, Array value, bool trainable = true);

  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  ir::TensorType type() const { return {shape_, dtype_}; }
  bool trainable() const { return trainable_; }

  /// The current value. Throws ingot::Error(kFailedPrecondition) while purged (a fit holds the
  /// live value; callbacks get synced values through the trainer).
  const Array& value() const;
  /// Replaces the value (copied into a new buffer, so the caller's array stays independent).
  /// Throws ingot::Error(kShapeMismatch / kDTypeMismatch) naming the variable and both types;
  /// nothing changes then.
  void assign(const Array& value);

  /// Trainer internals: drop the own copy (the compiled step's donated state is the live value)
  /// and take a value back without copying. `sync` checks shape and dtype like assign.
  void purge();
  bool purged() const { return !value_.valid(); }
  void sync(Array value);

  /// How a distributed step combines the devices' updates (non-trainable variables; trainable ones
  /// are updated from the averaged gradient). Default: kMean for floating-point dtypes, else
  /// kOnlyFirstReplica. The trainer refuses, at compile, kMean for a non-float variable and kSum
  /// for a dtype the collectives cannot reduce (ingot::Error kInvalidArgument naming both).
  VariableAggregation aggregation() const { return aggregation_; }
  void set_aggregation(VariableAggregation aggregation) { aggregation_ = aggregation; }

  /// The sharding recorded for the variable's state (single device when unset).
  const std::optional<NamedSharding>& sharding() const { return sharding_; }
  void set_sharding(std::optional<NamedSharding> sharding) { sharding_ = std::move(sharding); }

 private:
  void check(const Array& value, const char* what) const;

  std::string name_;
  Shape shape_;
  DType dtype_;
  bool trainable_;
  VariableAggregation aggregation_ = VariableAggregation::kMean;
  Array value_;
  std::optional<NamedSharding> sharding_;
};

}  // namespace ingot
