// The convolution op's configuration, read and validated from its attributes once, for the op's
// shape rule, interpreter kernel and VJP (linalg.cpp) and its lowering (linalg_lower.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ingot/ir/graph.h"

namespace ingot::ir::ops {

/// Validated convolution configuration (StableHLO attribute names; docs/ir.md "convolution"):
/// window strides, [low, high] padding per spatial dim, dilations, group counts and the dimension
/// numbers of lhs (input), rhs (kernel) and result. Spatial vectors have rank - 2 entries.
struct ConvConfig {
  std::vector<int64_t> strides, padding, lhs_dilation, rhs_dilation;
  int64_t feature_groups = 1, batch_groups = 1;
  int64_t in_batch = 0, in_feature = 0;
  std::vector<int64_t> in_spatial;
  int64_t k_in_feature = 0, k_out_feature = 0;
  std::vector<int64_t> k_spatial;
  int64_t out_batch = 0, out_feature = 0;
  std::vector<int64_t> out_spatial;
};

/// Reads the convolution attributes of a node with operand types `lhs` and `rhs`, filling the
/// optional ones with StableHLO's defaults. Throws ingot::Error (kInvalidArgument /
/// kOutOfRange, naming the attribute and its value) for unknown attributes, wrong lengths,
/// out-of-range or repeated dimension numbers, non-positive strides or dilations.
ConvConfig conv_config(const TensorType& lhs, const TensorType& rhs, const Attributes& attrs);

}  // namespace ingot::ir::ops
