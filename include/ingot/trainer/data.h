// Data for the trainer (keras.trainers.data_adapters + epoch_iterator): adapters that cut
// in-memory arrays (or a user batch generator) into batches, and the EpochIterator that feeds one
// epoch's batches through the two-slot PrefetchQueue (TRAINER_SEMANTICS.md, "Data and devices").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/prefetch.h"

namespace ingot {

/// A batch: {x, y, sample_weight} with y and sample_weight possibly invalid Arrays (absent).
struct Batch {
  Array x;              ///< (batch, features...)
  Array y;              ///< (batch, ...) or invalid
  Array sample_weight;  ///< (batch,) f32 or invalid
  int64_t size() const { return x.valid() && x.rank() > 0 ? x.shape()[0] : 0; }
};

/// Source of one epoch's batches.
class DataAdapter {
 public:
  virtual ~DataAdapter() = default;
  /// Batches per epoch when known.
  virtual std::optional<int64_t> num_batches() const = 0;
  /// A producer of epoch `epoch`'s batches (nullopt at the end), for a PrefetchQueue.
  virtual std::function<std::optional<Batch>()> epoch(int64_t epoch) = 0;
  /// The first batch's shapes without consuming data (the build pass): x's type.
  virtual ir::TensorType x_type() const = 0;
};

/// In-memory arrays: x (n, ...), optional y (n, ...) and sample_weight (n,), cut into batches of
/// `batch_size` in order (the last may be smaller), or in a per-epoch shuffled order (seeded:
/// permutation of epoch e uses seed + e, so runs repeat). Rows are copied into new host arrays.
/// Errors (ingot::Error kInvalidArgument naming the values): batch_size <= 0; x invalid, a scalar
/// or without samples; y or sample_weight with another number of samples than x; sample_weight not 1-D.
class ArrayDataAdapter final : public DataAdapter {
 public:
  ArrayDataAdapter(Array x, Array y, Array sample_weight, int64_t batch_size, bool shuffle, uint64_t seed = 0);
  std::optional<int64_t> num_batches() const override;
  std::function<std::optional<Batch>()> epoch(int64_t epoch) override;
  ir::TensorType x_type() const override;
  int64_t num_samples() const { return x_.shape()[0]; }

 private:
  Array x_, y_, sw_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
};

/// A user batch generator: `make_epoch()` is called at the start of every epoch and returns a
/// function yielding that epoch's batches (nullopt at the end); `x_type` describes x's batches
/// (the model is built from it without consuming a batch).
class GeneratorDataAdapter final : public DataAdapter {
 public:
  GeneratorDataAdapter(std::function<std::function<std::optional<Batch>()>()> make_epoch, ir::TensorType x_type,
                       std::optional<int64_t> num_batches = {});
  std::optional<int64_t> num_batches() const override { return num_batches_; }
  std::function<std::optional<Batch>()> epoch(int64_t) override { return make_epoch_(); }
  ir::TensorType x_type() const override { return x_type_; }

 private:
  std::function<std::function<std::optional<Batch>()>()> make_epoch_;
  ir::TensorType x_type_;
  std::optional<int64_t> num_batches_;
};

/// Splits arrays for fit's validation_split: the last fraction of the samples (before any
/// shuffling) is validation; training keeps floor(n * (1 - split)) samples. Errors
/// (kInvalidArgument): split outside [0, 1), or a side left empty (naming n and the split).
/// Returns {train x, y, sw}, {validation x, y, sw}; absent arrays stay invalid.
std::pair<Batch, Batch> split_validation(const Batch& data, double validation_split);

/// class_weight -> sample weights: weight of each sample = class_weight[label] (labels: integer
/// (n,) or (n, 1), or one-hot (n, classes) through argmax). Missing classes weigh 1. Errors:
/// labels outside the map's keys are fine (weight 1); invalid y is kInvalidArgument.
Array class_weights_to_sample_weights(const Array& y, const std::vector<std::pair<int64_t, double>>& class_weight);

/// One epoch after another: feeds the adapter's batches through a two-slot PrefetchQueue
/// (`distribute` runs on the producer thread), stopping after `steps_per_epoch` batches when given.
/// Errors: steps_per_epoch <= 0, or more steps than the adapter's known batches
/// (kInvalidArgument naming both).
class EpochIterator {
 public:
  /// `steps_name` names the limit in errors ("steps_per_epoch", "validation_steps", "steps").
  EpochIterator(std::shared_ptr<DataAdapter> adapter, std::optional<int64_t> steps_per_epoch = {},
                PrefetchQueue<Batch>::Distribute distribute = {}, std::string steps_name = "steps_per_epoch");
  /// Steps per epoch when known (steps_per_epoch, else the adapter's batches).
  std::optional<int64_t> num_steps() const;
  /// Starts epoch `epoch` (a new queue; a running one is stopped first).
  void begin_epoch(int64_t epoch);
  /// The next batch of the current epoch, or nullopt at its end. Rethrows data errors.
  std::optional<Batch> next();
  /// Stops the current epoch's producer (joins its thread).
  void stop();
  const DataAdapter& adapter() const { return *adapter_; }

 private:
  std::shared_ptr<DataAdapter> adapter_;
  std::optional<int64_t> steps_;
  PrefetchQueue<Batch>::Distribute distribute_;
  std::unique_ptr<PrefetchQueue<Batch>> queue_;
  int64_t taken_ = 0;
};

}  // namespace ingot
