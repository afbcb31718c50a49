// Executable: a compiled program as an ordered list of thunks over a table of buffers.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"

namespace ingot {

/// One step of an Executable: reads some buffer slots and writes others. Slots 0..n_in-1 are the
/// executable's inputs; later slots are outputs and temporaries, allocated by Executable::run.
struct Thunk {
  std::string name;                  ///< for profiles and errors, e.g. "jit:main" or "copy"
  std::vector<size_t> input_slots;   ///< slots read
  std::vector<size_t> output_slots;  ///< slots written (allocated before the thunk runs)
  /// The work: inputs and outputs in the order of the slot lists. Must not keep references.
  std::function<void(std::span<const Array> inputs, std::span<Array> outputs)> run;
};

/// A program over Arrays: input types, the slot table, thunks run in order, and which slots are
/// the outputs. Immutable after construction; run() may be called concurrently.
class Executable {
 public:
  /// `slot_types[i]` is the (shape, dtype) of slot i; the first `num_inputs` slots are inputs.
  /// `outputs` lists the slots returned by run() (a slot may appear more than once).
  Executable(std::vector<std::pair<Shape, DType>> slot_types, size_t num_inputs,
             std::vector<Thunk> thunks, std::vector<size_t> outputs);

  /// Checks `inputs` against the input types (ingot::Error kInvalidArgument / kShapeMismatch /
  /// kDTypeMismatch naming the index), allocates the other slots on `device` (default cpu:0),
  /// runs the thunks and returns the output slots. A slot returned twice is the same Array.
  std::vector<Array> run(const std::vector<Array>& inputs, Device* device = nullptr) const;

  size_t num_inputs() const { return num_inputs_; }
  const std::vector<Thunk>& thunks() const { return thunks_; }
  const std::vector<std::pair<Shape, DType>>& slot_types() const { return slot_types_; }

 private:
  std::vector<std::pair<Shape, DType>> slot_types_;
  size_t num_inputs_;
  std::vector<Thunk> thunks_;
  std::vector<size_t> outputs_;
};

}  // namespace ingot
