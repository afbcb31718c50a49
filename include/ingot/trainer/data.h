// Data for the trainer (keras.trainers.data_adapters + epoch_iterator): adapters that cut
// in-memory arrays (or a user batch generator) into batches, and the EpochIterator that feeds one
// epoch's batches through the two-slot PrefetchQueue (TRAINER_SEMANTICS.md, "Data and devices").
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/prefetch.h"

namespace ingot {

/// One array or several: a model's inputs, its targets or its per-output sample weights (Keras's
/// `x=[a, b]`, `y=[c, d]`). Made from one Array it holds that array, or nothing when the Array is
/// invalid ("absent", as Keras's None); from a list it holds the list. Every array has the samples
/// first: (samples, ...).
class Arrays {
 public:
  Arrays() = default;
  Arrays(Array a) {  // NOLINT(google-explicit-constructor): one array converts, as Keras's x=a
    if (a.valid()) list_.push_back(std::move(a));
  }
  Arrays(std::vector<Array> list) : list_(std::move(list)) {}  // NOLINT(google-explicit-constructor)
  Arrays(std::initializer_list<Array> list) : list_(list) {}
  /// Present (at least one array).
  bool valid() const { return !list_.empty(); }
  size_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }
  const Array& operator[](size_t i) const { return list_.at(i); }
  Array& operator[](size_t i) { return list_.at(i); }
  std::vector<Array>::const_iterator begin() const { return list_.begin(); }
  std::vector<Array>::const_iterator end() const { return list_.end(); }
  const std::vector<Array>& list() const { return list_; }
  /// The one array of a single-input/single-output use. Errors (kInvalidArgument): none or
  /// several arrays, naming `what` (e.g. "predict_on_batch: x") and the count.
  const Array& single(const std::string& what) const;

 private:
  std::vector<Array> list_;
};

/// A batch: {x, y, sample_weight}, one array per model input in x and per model output in y
/// (sample_weight: none, one for every output, or one per output); y and sample_weight may be
/// absent (empty).
struct Batch {
  Arrays x;              ///< each (batch, features...)
  Arrays y;              ///< each (batch, ...), or empty
  Arrays sample_weight;  ///< each (batch,) f32, or empty
  /// The batch size: x's first array's first dimension (0 without x).
  int64_t size() const { return x.valid() && x[0].valid() && x[0].rank() > 0 ? x[0].shape()[0] : 0; }
};

/// Source of one epoch's batches.
class DataAdapter {
 public:
  virtual ~DataAdapter() = default;
  /// Batches per epoch when known.
  virtual std::optional<int64_t> num_batches() const = 0;
  /// A producer of epoch `epoch`'s batches (nullopt at the end), for a PrefetchQueue.
  virtual std::function<std::optional<Batch>()> epoch(int64_t epoch) = 0;
  /// The first batch's shapes without consuming data (the build pass): each input's type.
  virtual std::vector<ir::TensorType> x_types() const = 0;
};

/// In-memory arrays: inputs x (each (n, ...)), optional targets y (each (n, ...)) and
/// sample_weight (each (n,)), cut into batches of `batch_size` in order (the last may be smaller),
/// or in a per-epoch shuffled order (seeded: permutation of epoch e uses seed + e, so runs
/// repeat; the same rows of every array). Rows are copied into new host arrays.
/// Errors (ingot::Error kInvalidArgument naming the values): batch_size <= 0; no x, an invalid
/// array, a scalar, or x without samples; any array with another number of samples than x[0];
/// a sample_weight not 1-D.
class ArrayDataAdapter final : public DataAdapter {
 public:
  ArrayDataAdapter(Arrays x, Arrays y, Arrays sample_weight, int64_t batch_size, bool shuffle, uint64_t seed = 0);
  std::optional<int64_t> num_batches() const override;
  std::function<std::optional<Batch>()> epoch(int64_t epoch) override;
  std::vector<ir::TensorType> x_types() const override;
  int64_t num_samples() const { return x_[0].shape()[0]; }

 private:
  Arrays x_, y_, sw_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
};

/// A user batch generator: `make_epoch()` is called at the start of every epoch and returns a
/// function yielding that epoch's batches (nullopt at the end); `x_type` (one input) or
/// `x_types` (one per model input) describes x's batches (the model is built from it without
/// consuming a batch). Errors (kInvalidArgument): make_epoch empty, x_types empty.
class GeneratorDataAdapter final : public DataAdapter {
 public:
  GeneratorDataAdapter(std::function<std::function<std::optional<Batch>()>()> make_epoch, ir::TensorType x_type,
                       std::optional<int64_t> num_batches = {});
  GeneratorDataAdapter(std::function<std::function<std::optional<Batch>()>()> make_epoch,
                       std::vector<ir::TensorType> x_types, std::optional<int64_t> num_batches = {});
  std::optional<int64_t> num_batches() const override { return num_batches_; }
  std::function<std::optional<Batch>()> epoch(int64_t) override { return make_epoch_(); }
  std::vector<ir::TensorType> x_types() const override { return x_types_; }

 private:
  std::function<std::function<std::optional<Batch>()>()> make_epoch_;
  std::vector<ir::TensorType> x_types_;
  std::optional<int64_t> num_batches_;
};

/// Splits arrays for fit's validation_split: the last fraction of the samples (before any
/// shuffling) is validation; training keeps floor(n * (1 - split)) samples, the same rows of
/// every array. Errors (kInvalidArgument): split outside [0, 1), or a side left empty (naming n
/// and the split). Returns {train x, y, sw}, {validation x, y, sw}; absent arrays stay absent.
std::pair<Batch, Batch> split_validation(const Batch& data, double validation_split);

/// class_weight -> sample weights: weight of each sample = class_weight[label] (labels: integer
/// (n,) or (n, 1), or one-hot (n, classes) through argmax). Missing classes weigh 1. Errors:
/// labels outside the map's keys are fine (weight 1); invalid y is kInvalidArgument.
Array class_weights_to_sample_weights(const Array& y, const std::vector<std::pair<int64_t, double>>& class_weight);

/// Keras's class_weight on an adapter's data (fit with `data` and `class_weight`): the same
/// batches, each given per-sample weights from its labels (class_weights_to_sample_weights). A
/// batch with several targets, none, or its own sample_weight is ingot::Error(kInvalidArgument)
/// naming class_weight, when that batch is produced (before its step runs).
std::shared_ptr<DataAdapter> class_weighted(std::shared_ptr<DataAdapter> data,
                                            std::vector<std::pair<int64_t, double>> class_weight);

/// One epoch after another: feeds the adapter's batches through a two-slot PrefetchQueue
/// (`distribute` runs on the producer thread), stopping after `steps_per_epoch` batches when given.
/// Without prefetching (`prefetch` false) no producer thread runs: next() produces and
/// distributes each batch on the calling thread, when it is asked for (for measuring what the
/// queue's overlap gains; FitOptions::prefetch). The batches are the same either way.
/// Errors: steps_per_epoch <= 0, or more steps than the adapter's known batches
/// (kInvalidArgument naming both).
class EpochIterator {
 public:
  /// `steps_name` names the limit in errors ("steps_per_epoch", "validation_steps", "steps").
  EpochIterator(std::shared_ptr<DataAdapter> adapter, std::optional<int64_t> steps_per_epoch = {},
                PrefetchQueue<Batch>::Distribute distribute = {}, std::string steps_name = "steps_per_epoch",
                bool prefetch = true);
  /// Steps per epoch when known (steps_per_epoch, else the adapter's batches).
  std::optional<int64_t> num_steps() const;
  /// Starts epoch `epoch` (a new queue, or without prefetching the epoch's producer; a running
  /// queue is stopped first).
  void begin_epoch(int64_t epoch);
  /// The next batch of the current epoch, or nullopt at its end. Rethrows data errors.
  std::optional<Batch> next();
  /// Stops the current epoch's producer (joins its thread).
  void stop();
  const DataAdapter& adapter() const { return *adapter_; }

 private:
  /// Without prefetching: the producer's next batch, distributed on this thread.
  std::optional<Batch> next_unprefetched();

  std::shared_ptr<DataAdapter> adapter_;
  std::optional<int64_t> steps_;
  PrefetchQueue<Batch>::Distribute distribute_;
  std::unique_ptr<PrefetchQueue<Batch>> queue_;
  bool prefetch_ = true;
  /// Without prefetching: the current epoch's producer (empty once it reached its end).
  std::function<std::optional<Batch>()> producer_;
  bool started_ = false;  ///< without prefetching: begin_epoch was called
  int64_t taken_ = 0;
};

}  // namespace ingot
