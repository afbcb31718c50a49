// Convolution thunks in a CudaProgram (CudaThunk::Kind::kConv): validate_cuda_program's checks of
// hand-made programs and describe()'s line. Runs on the fake driver are in the `ptx` suite
// (tests/compiler/codegen/cuda/conv_plan_test.cpp), which compiles real programs.
#if INGOT_HAVE_CUDA_TOOLKIT

#include <gtest/gtest.h>

#include "ingot/kernels/cuda_conv_params.h"
#include "ingot/runtime/cuda_executable.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

CudaBuffer buffer(CudaBuffer::Kind kind, int64_t index, Shape shape, DType dtype = DType::kF32) {
  return {.kind = kind, .index = index, .shape = shape, .dtype = dtype, .bytes = num_elements(shape) * dtype_size(dtype)};
}

CudaKernelArg view(int64_t buffer, int64_t size) {
  return {.kind = CudaKernelArg::Kind::kMemref, .buffer = buffer, .offset = 0, .sizes = {size}, .strides = {1}};
}

/// x (1, 1, 5) conv w (2, 1, 3) -> (1, 2, 3), NCW / OIW: buffers 0 input x, 1 input w, 2 output.
CudaProgram conv_program() {
  CudaProgram p;
  p.kernels = {{.name = "ingot_conv_implicit_gemm_f32", .ptx = {{"sm_80", ".entry ingot_conv_implicit_gemm_f32("}}}};
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
  t.conv.spec = {.lhs_shape = {1, 1, 5}, .rhs_shape = {2, 1, 3}, .out_shape = {1, 2, 3}, .in_batch = 0,
                 .in_feature = 1, .in_spatial = {2}, .k_in_feature = 1, .k_out_feature = 0, .k_spatial = {2},
                 .out_batch = 0, .out_feature = 1, .out_spatial = {2}, .strides = {1}, .padding = {0, 0},
                 .lhs_dilation = {1}, .rhs_dilation = {1}};
  t.conv.kernel = "ingot_conv_implicit_gemm_f32";
  t.conv.block = {256, 1, 1};
  t.conv.params.assign(sizeof(kernels::CudaConvParams) / 8, 0);
  p.thunks = {t};
  return p;
}

TEST(CudaConvProgram, AValidConvolutionThunkPassesAndIsDescribed) {
  const CudaProgram p = conv_program();
  EXPECT_NO_THROW(validate_cuda_program(p));
  EXPECT_EQ(p.convs().size(), 1u);
  EXPECT_NE(p.describe().find("conv f32 lhs (1, 1, 5) rhs (2, 1, 3) out (1, 2, 3) groups 1x1 lhs=buffer 0 rhs=buffer 1 "
                              "out=buffer 2\n"),
            std::string::npos)
      << p.describe();
}

TEST(CudaConvProgram, MalformedConvolutionThunksNameTheProblem) {
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.rhs = view(1, 5);  // the kernel has 6 elements
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"thunk 0", "operand rhs", "(2, 1, 3)"});
  }
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.out.strides = {2};
    p.thunks[0].conv.out.sizes = {3};
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"operand out", "contiguous"});
  }
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.dtype = DType::kF64;
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kDTypeMismatch, {"operand lhs", "f32", "f64"});
  }
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.dtype = DType::kF16;
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"f16"});
  }
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.kernel = "missing";
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kNotFound, {"missing"});
  }
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.grid = {1, 0, 1};
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"grid"});
  }
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.params.pop_back();
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument, {"parameter words"});
  }
  {
    CudaProgram p = conv_program();
    p.thunks[0].conv.lhs.buffer = 7;
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kOutOfRange, {"buffer index 7"});
  }
}

}  // namespace
}  // namespace ingot

#endif
