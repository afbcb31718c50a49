// A one-convolution CudaProgram shared by the convolution-thunk tests
// (tests/runtime/cuda_conv_program_test.cpp, tests/runtime/cuda_graph_test.cpp).
#pragma once

#include "ingot/kernels/cuda_conv.h"
#include "ingot/runtime/cuda_program.h"

namespace ingot::testing {

/// x (1, 1, 5) conv w (2, 1, 3) -> (1, 2, 3), NCW / OIW, stride 1, no padding: buffers 0 input x,
/// 1 input w, 2 output; one kConv thunk running `kernel` (named "ingot_conv_implicit_gemm_f32")
/// with block 256 and a zeroed CudaConvParams block.
inline CudaProgram conv1d_program(CudaKernelImage kernel) {
  auto buffer = [](CudaBuffer::Kind kind, int64_t index, const Shape& shape) {
    return CudaBuffer{.kind = kind,
                      .index = index,
                      .shape = shape,
                      .dtype = DType::kF32,
                      .bytes = num_elements(shape) * 4,
                      .data = {}};
  };
  auto view = [](int64_t buffer, int64_t n) {
    return CudaKernelArg{
        .kind = CudaKernelArg::Kind::kMemref, .buffer = buffer, .offset = 0, .sizes = {n}, .strides = {1}, .value = 0};
  };
  CudaProgram p;
  kernel.name = "ingot_conv_implicit_gemm_f32";
  p.kernels = {std::move(kernel)};
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {1, 1, 5}), buffer(CudaBuffer::Kind::kInput, 1, {2, 1, 3}),
               buffer(CudaBuffer::Kind::kOutput, 0, {1, 2, 3})};
  p.input_types = {{{1, 1, 5}, DType::kF32}, {{2, 1, 3}, DType::kF32}};
  p.output_types = {{{1, 2, 3}, DType::kF32}};
  CudaThunk t;
  t.kind = CudaThunk::Kind::kConv;
  t.conv.dtype = DType::kF32;
  t.conv.lhs = view(0, 5);
  t.conv.rhs = view(1, 6);
  t.conv.out = view(2, 6);
  t.conv.spec = {.lhs_shape = {1, 1, 5},
                 .rhs_shape = {2, 1, 3},
                 .out_shape = {1, 2, 3},
                 .in_batch = 0,
                 .in_feature = 1,
                 .in_spatial = {2},
                 .k_in_feature = 1,
                 .k_out_feature = 0,
                 .k_spatial = {2},
                 .out_batch = 0,
                 .out_feature = 1,
                 .out_spatial = {2},
                 .strides = {1},
                 .padding = {0, 0},
                 .lhs_dilation = {1},
                 .rhs_dilation = {1}};
  t.conv.kernel = "ingot_conv_implicit_gemm_f32";
  t.conv.block = {256, 1, 1};
  t.conv.params.assign(sizeof(kernels::CudaConvParams) / 8, 0);
  p.thunks = {t};
  return p;
}

}  // namespace ingot::testing
