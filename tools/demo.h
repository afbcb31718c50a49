// The pieces of the `ingot` CLI that do work (kept apart from argument parsing).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "ingot/ir/graph.h"
#include "ingot/runtime/array.h"

namespace ingot::cli {

/// Options of `ingot demo`.
struct DemoOptions {
  int64_t batch = 4;     ///< rows of the input batch
  int64_t features = 8;  ///< input features
  int64_t hidden = 16;   ///< hidden units
  int64_t classes = 3;   ///< output classes
  uint64_t seed = 0;     ///< seed of the pseudo-random weights and inputs
};

/// Traces an MLP forward pass (x (batch, features) -> dense+relu -> dense -> softmax, weights as
/// parameters), prints its IR, the IR after the cse and dce passes, interprets it on seeded
/// random data and prints the class probabilities (each row sums to 1), then compiles the graph
/// for the CPU and prints compile/run times and the largest difference from the interpreter.
/// Returns 0; throws
/// ingot::Error(kInvalidArgument) naming a non-positive size option.
int run_demo(const DemoOptions& options, std::ostream& out);

/// Seeded pseudo-random arguments for `graph`: floats uniform in [-1, 1), integers in [0, 10),
/// bools alternating, u64 rng states from the seed.
std::vector<Array> random_arguments(const ir::Graph& graph, uint64_t seed);

/// Parses the IR text file `path`, applies `passes` (names from docs/ir.md, in order), prints
/// the resulting IR, interprets it on random_arguments(seed) and prints each output.
/// Throws ingot::Error (kNotFound for a missing file or unknown pass, kParseError, ...).
int run_ir_file(const std::string& path, const std::vector<std::string>& passes, uint64_t seed, bool interpret,
                std::ostream& out);

/// Applies the named passes ("dce", "cse") in order; throws ingot::Error(kNotFound) naming an
/// unknown pass and listing the known ones.
ir::Graph apply_passes(const ir::Graph& graph, const std::vector<std::string>& passes);

}  // namespace ingot::cli
