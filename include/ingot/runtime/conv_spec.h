// ConvSpec: one StableHLO convolution as the programs describe it (a CPU kernel's i64 config, a
// CUDA program's CudaConv step), and its i64 encoding. At the runtime level because the CUDA
// program format (cuda_program.h) carries it; the kernels that run it (include/ingot/kernels/
// cpu_conv.h, cuda_conv.h) are above the runtime and include this header. Header-only, C++17
// (nvcc compiles the kernels that include it). In namespace ingot::kernels, where it was made.
#pragma once

#include <cstdint>
#include <vector>

namespace ingot::kernels {

/// One convolution: the row-major shapes of lhs, rhs (kernel) and result (all of rank n >= 2),
/// StableHLO's dimension numbers (the spatial vectors have n - 2 entries, `padding` has
/// [low, high] per spatial dim) and group counts. Field names follow the op's attributes.
struct ConvSpec {
  std::vector<int64_t> lhs_shape, rhs_shape, out_shape;
  int64_t in_batch = 0, in_feature = 0;
  std::vector<int64_t> in_spatial;
  int64_t k_in_feature = 0, k_out_feature = 0;
  std::vector<int64_t> k_spatial;
  int64_t out_batch = 0, out_feature = 0;
  std::vector<int64_t> out_spatial;
  std::vector<int64_t> strides, padding, lhs_dilation, rhs_dilation;
  int64_t feature_groups = 1, batch_groups = 1;
};

/// The i64 encoding of `s` that the lowering passes to the kernel (as a dense constant):
/// [n, feature_groups, batch_groups, in_batch, in_feature, k_in_feature, k_out_feature,
///  out_batch, out_feature, lhs_shape (n), rhs_shape (n), out_shape (n),
///  then per spatial dim i: in_spatial, k_spatial, out_spatial, stride, padding low,
///  padding high, lhs_dilation, rhs_dilation]; 9 + 3n + 8(n - 2) entries. Does not validate
/// (decode_conv_spec does). Header-only so that the lowering needs no link to this library.
inline std::vector<int64_t> encode_conv_spec(const ConvSpec& s) {
  const auto n = static_cast<int64_t>(s.lhs_shape.size());
  std::vector<int64_t> c = {
      n,           s.feature_groups, s.batch_groups, s.in_batch, s.in_feature, s.k_in_feature, s.k_out_feature,
      s.out_batch, s.out_feature};
  for (const std::vector<int64_t>* shape : {&s.lhs_shape, &s.rhs_shape, &s.out_shape}) {
    c.insert(c.end(), shape->begin(), shape->end());
  }
  for (size_t i = 0; i < s.in_spatial.size(); ++i) {
    c.insert(c.end(), {s.in_spatial[i], s.k_spatial[i], s.out_spatial[i], s.strides[i], s.padding[2 * i],
                       s.padding[2 * i + 1], s.lhs_dilation[i], s.rhs_dilation[i]});
  }
  return c;
}

}  // namespace ingot::kernels
