// Attribute builders for op tests (shape-rule tests in tests/compiler/ops and interpreter tests
// in tests/compiler/interp use the same dimension numbers).
#pragma once

#include <string>
#include <vector>

#include "ingot/ir/attributes.h"

namespace ingot::testing {

/// dot_general dimension numbers.
inline ir::Attributes dot_attrs(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
                                std::vector<int64_t> rc) {
  return {{"lhs_batching_dimensions", lb},
          {"rhs_batching_dimensions", rb},
          {"lhs_contracting_dimensions", lc},
          {"rhs_contracting_dimensions", rc}};
}

/// convolution with NHWC input, HWIO kernel, NHWC output (the tracer's conv2d layout), plus
/// the attributes in `extra` (strides, padding, dilations, group counts).
inline ir::Attributes nhwc(ir::Attributes extra = {}) {
  using Ints = std::vector<int64_t>;
  ir::Attributes a{{"input_batch_dimension", int64_t{0}},           {"input_feature_dimension", int64_t{3}},
                   {"input_spatial_dimensions", Ints{1, 2}},        {"kernel_input_feature_dimension", int64_t{2}},
                   {"kernel_output_feature_dimension", int64_t{3}}, {"kernel_spatial_dimensions", Ints{0, 1}},
                   {"output_batch_dimension", int64_t{0}},          {"output_feature_dimension", int64_t{3}},
                   {"output_spatial_dimensions", Ints{1, 2}}};
  for (const auto& [k, v] : extra.entries()) a.set(k, v);
  return a;
}

/// gather dimension numbers.
inline ir::Attributes gather_attrs(std::vector<int64_t> offset_dims, std::vector<int64_t> collapsed,
                                   std::vector<int64_t> start_index_map, int64_t index_vector_dim,
                                   std::vector<int64_t> slice_sizes) {
  return {{"offset_dims", offset_dims},
          {"collapsed_slice_dims", collapsed},
          {"start_index_map", start_index_map},
          {"index_vector_dim", index_vector_dim},
          {"slice_sizes", slice_sizes}};
}

/// scatter dimension numbers and computation ("add" or "assign").
inline ir::Attributes scatter_attrs(std::vector<int64_t> update_window_dims, std::vector<int64_t> inserted,
                                    std::vector<int64_t> to_operand, int64_t index_vector_dim,
                                    const std::string& computation) {
  return {{"update_window_dims", update_window_dims},
          {"inserted_window_dims", inserted},
          {"scatter_dims_to_operand_dims", to_operand},
          {"index_vector_dim", index_vector_dim},
          {"computation", computation}};
}

}  // namespace ingot::testing
