#include "ingot/runtime/executable.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>

namespace ingot {

CompileInfo& CompileInfo::operator+=(const CompileInfo& o) {
  kernel_functions += o.kernel_functions;
  scope_functions += o.scope_functions;
  lower_seconds += o.lower_seconds;
  mlir_seconds += o.mlir_seconds;
  llvm_seconds += o.llvm_seconds;
  link_seconds += o.link_seconds;
  objects += o.objects;
  cache_hits += o.cache_hits;
  cache_misses += o.cache_misses;
  step_cache_hits += o.step_cache_hits;
  return *this;
}

Executable::Executable(std::vector<std::pair<Shape, DType>> slot_types, size_t num_inputs, std::vector<Thunk> thunks,
                       std::vector<size_t> outputs, std::vector<size_t> donated_inputs, std::string name)
    : slot_types_(std::move(slot_types)),
      num_inputs_(num_inputs),
      thunks_(std::move(thunks)),
      outputs_(std::move(outputs)),
      donated_(std::move(donated_inputs)),
      name_(std::move(name)) {
  for (size_t d : donated_) {
    if (d >= num_inputs_) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Executable: donated input {} is not an input (there are {})", d, num_inputs_));
    }
  }
  auto check_slot = [&](size_t s, const std::string& what) {
    if (s >= slot_types_.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Executable: {} uses slot {} but there are {} slots", what, s, slot_types_.size()));
    }
  };
  if (num_inputs_ > slot_types_.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Executable: {} inputs but only {} slots", num_inputs_, slot_types_.size()),
                "the first num_inputs slots are the inputs; list their types in slot_types");
  }
  // Static dataflow check: a slot is defined once it is an input or a thunk has written it, so
  // run() never hands a thunk (or the caller) an unallocated Array, and thunks write no input
  // slot the caller still owns (only donated ones).
  std::vector<bool> defined(slot_types_.size(), false);
  for (size_t i = 0; i < num_inputs_; ++i) defined[i] = true;
  std::vector<bool> waited(thunks_.size(), false);
  for (size_t k = 0; k < thunks_.size(); ++k) {
    const Thunk& t = thunks_[k];
    if (t.wait_for) {  // the asynchronous collective's outputs are written from here on
      check_wait(k, waited);
      for (size_t s : thunks_[*t.wait_for].output_slots) defined[s] = true;
      continue;
    }
    if (static_cast<bool>(t.run) == static_cast<bool>(t.collective)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Executable: thunk '{}' has {}", t.name, t.run ? "both run and collective" : "no work"),
                  "set exactly one of Thunk::run and Thunk::collective");
    }
    if (t.async && !t.collective) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Executable: thunk '{}' is async but not a collective", t.name),
                  "only collectives run asynchronously");
    }
    for (size_t s : t.input_slots) {
      check_slot(s, "thunk '" + t.name + "'");
      if (!defined[s]) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("Executable: thunk '{}' reads slot {} before any thunk writes it", t.name, s),
                    "order the thunks so that each slot is written before it is read");
      }
    }
    for (size_t s : t.output_slots) {
      check_slot(s, "thunk '" + t.name + "'");
      if (s < num_inputs_ && std::find(donated_.begin(), donated_.end(), s) == donated_.end()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("Executable: thunk '{}' writes input slot {}, which is not donated", t.name, s),
                    "inputs are the caller's buffers and read-only unless donated; write a new slot "
                    "or list the input in donated_inputs");
      }
    }
    if (!t.async) {
      for (size_t s : t.output_slots) defined[s] = true;
    }
  }
  for (size_t k = 0; k < thunks_.size(); ++k) {
    if (thunks_[k].async && !waited[k]) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("Executable: asynchronous collective '{}' (thunk {}) is never waited for", thunks_[k].name, k),
          "add a thunk with wait_for = its index before its outputs are used");
    }
  }
  for (size_t s : outputs_) {
    check_slot(s, "the output list");
    if (!defined[s]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Executable: output slot {} is neither an input nor written by a thunk", s),
                  "return only slots that a thunk writes or that are inputs");
    }
  }
}

std::vector<Array> Executable::run(const std::vector<Array>& inputs, Device* device, Communicator* communicator) const {
  if (inputs.size() != num_inputs_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("Executable::run: {} arguments given, the executable takes {}",
                                                         inputs.size(), num_inputs_));
  }
  std::vector<Array> slots(slot_types_.size());
  for (size_t i = 0; i < num_inputs_; ++i) {
    const auto& [shape, dtype] = slot_types_[i];
    if (!inputs[i].valid()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("Executable::run: argument {} is an invalid Array", i));
    }
    if (inputs[i].dtype() != dtype) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("Executable::run: argument {} has dtype {}, expected {}", i,
                              dtype_name(inputs[i].dtype()), dtype_name(dtype)),
                  "convert the argument, or call with arguments of the compiled signature");
    }
    if (inputs[i].shape() != shape) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("Executable::run: argument {} has shape {}, expected {}", i,
                              shape_to_string(inputs[i].shape()), shape_to_string(shape)),
                  "call with arguments of the compiled signature (jit recompiles per signature)");
    }
    slots[i] = inputs[i];
  }
  check_donation(inputs);
  for (size_t d : donated_) {
    slots[d] = Array::from_buffer(inputs[d].shape(), inputs[d].dtype(), inputs[d].buffer()->donate(name_));
  }
  // Asynchronous collectives in flight, by thunk index; `last` is the latest started (each waits
  // for the one before it). A run that throws destroys them here, which waits for them (futures
  // of std::async), so no helper thread outlives the slots it uses.
  std::vector<std::shared_future<void>> pending(thunks_.size());
  std::shared_future<void> last;
  for (size_t k = 0; k < thunks_.size(); ++k) {
    const Thunk& t = thunks_[k];
    if (t.wait_for) {
      pending[*t.wait_for].get();  // rethrows the collective's error
      continue;
    }
    std::vector<Array> in, out;
    for (size_t s : t.input_slots) in.push_back(slots[s]);
    for (size_t s : t.output_slots) {
      if (!slots[s].valid()) slots[s] = Array::empty(slot_types_[s].first, slot_types_[s].second, device);
      out.push_back(slots[s]);
    }
    if (!t.collective) {
      t.run(in, out);
      continue;
    }
    if (communicator == nullptr) {
      throw Error(ErrorCode::kFailedPrecondition,
                  fmt::format("{}: thunk '{}' is a collective and no communicator was given", name_, t.name),
                  "run the executable on every device of a mesh with run_spmd and one communicator per device");
    }
    if (!t.async) {
      t.collective(*communicator, in, out);
      continue;
    }
    pending[k] = std::async(std::launch::async, [&t, communicator, before = last, in = std::move(in),
                                                 out = std::move(out)]() mutable {
                   if (before.valid()) before.wait();
                   t.collective(*communicator, in, out);
                 }).share();
    last = pending[k];
  }
  std::vector<Array> result;
  for (size_t s : outputs_) result.push_back(slots[s]);
  return result;
}

void Executable::check_wait(size_t k, std::vector<bool>& waited) const {
  const Thunk& t = thunks_[k];
  const size_t w = *t.wait_for;
  if (t.run || t.collective || t.async || !t.input_slots.empty() || !t.output_slots.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Executable: wait thunk '{}' (thunk {}) also has work or slots", t.name, k),
                "a wait thunk only names the asynchronous collective it waits for");
  }
  if (w >= k || !thunks_[w].async || waited[w]) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Executable: thunk {} waits for thunk {}, which is {}", k, w,
                            w >= k              ? "not before it"
                            : !thunks_[w].async ? "not an asynchronous collective"
                                                : "waited for already"),
                "wait once for each asynchronous collective, after it");
  }
  waited[w] = true;
}

void Executable::check_donation(const std::vector<Array>& inputs) const {
  for (size_t d : donated_) {
    if (inputs[d].donated()) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: argument {} was already donated to '{}'", name_, d, inputs[d].buffer()->donated_to()),
          "pass the outputs of that call instead");
    }
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (j != d && inputs[j].buffer() == inputs[d].buffer()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: argument {} is donated but its buffer is also passed as argument {}", name_, d, j),
                    "donate distinct arrays (clone() one of them), or do not donate this argument");
      }
    }
  }
}

}  // namespace ingot
