// Convolution thunks in a CudaProgram (CudaThunk::Kind::kConv): validate_cuda_program's checks of
// hand-made programs and describe()'s line; the mapping of ConvSpecs onto cuDNN's descriptors by
// hand (expressible and not); CudnnLibrary's loading. Runs on the fake driver are in the `ptx` suite
// (tests/compiler/codegen/cuda/conv_plan_test.cpp), which compiles real programs.
#if INGOT_HAVE_CUDA_TOOLKIT

#include <gtest/gtest.h>

#include "runtime/conv_program.h"

#include "ingot/runtime/cuda_conv_params.h"
#include "ingot/runtime/cuda_dnn.h"
#include "ingot/runtime/cuda_executable.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

CudaKernelArg view(int64_t buffer, int64_t size) {
  return {.kind = CudaKernelArg::Kind::kMemref, .buffer = buffer, .offset = 0, .sizes = {size}, .strides = {1}};
}

/// The shared one-convolution program (tests/runtime/conv_program.h) with a stub PTX entry.
CudaProgram conv_program() {
  return testing::conv1d_program({.name = "", .ptx = {{"sm_80", ".entry ingot_conv_implicit_gemm_f32("}}});
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
    expect_error([&] { validate_cuda_program(p); }, ErrorCode::kInvalidArgument,
                 {"thunk 0", "operand rhs", "(2, 1, 3)"});
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

/// A 2-D spec: lhs/rhs shapes and dims, stride, padding, rhs dilation, feature groups.
kernels::ConvSpec spec_2d(std::vector<int64_t> lhs, std::vector<int64_t> rhs, std::vector<int64_t> out,
                          std::array<int64_t, 4> in_dims, std::array<int64_t, 4> k_dims,
                          std::array<int64_t, 4> out_dims) {
  // *_dims: batch/out-feature, feature/in-feature, spatial 0, spatial 1.
  return {.lhs_shape = std::move(lhs),
          .rhs_shape = std::move(rhs),
          .out_shape = std::move(out),
          .in_batch = in_dims[0],
          .in_feature = in_dims[1],
          .in_spatial = {in_dims[2], in_dims[3]},
          .k_in_feature = k_dims[1],
          .k_out_feature = k_dims[0],
          .k_spatial = {k_dims[2], k_dims[3]},
          .out_batch = out_dims[0],
          .out_feature = out_dims[1],
          .out_spatial = {out_dims[2], out_dims[3]},
          .strides = {2, 1},
          .padding = {1, 1, 2, 2},
          .lhs_dilation = {1, 1},
          .rhs_dilation = {1, 2}};
}

TEST(CudnnConvMapping, NchwWithKcrsByHand) {
  // x (2, 4, 9, 8) NCHW, w (6, 2, 3, 3) KCRS, 2 feature groups, stride (2, 1), padding (1, 2),
  // rhs dilation (1, 2): out (2, 6, 5, 8).
  kernels::ConvSpec s = spec_2d({2, 4, 9, 8}, {6, 2, 3, 3}, {2, 6, 5, 8}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3});
  s.feature_groups = 2;
  const CudnnConvMapping m = cudnn_conv_mapping(s);
  ASSERT_TRUE(m.expressible) << m.reason;
  EXPECT_EQ(m.reason, "");
  EXPECT_EQ(m.x_dims, (std::vector<int>{2, 4, 9, 8}));
  EXPECT_EQ(m.x_strides, (std::vector<int>{288, 72, 8, 1}));
  EXPECT_EQ(m.y_dims, (std::vector<int>{2, 6, 5, 8}));
  EXPECT_EQ(m.y_strides, (std::vector<int>{240, 40, 8, 1}));
  EXPECT_EQ(m.w_dims, (std::vector<int>{6, 2, 3, 3}));
  EXPECT_EQ(m.w_strides, (std::vector<int>{18, 9, 3, 1}));
  EXPECT_FALSE(m.w_nhwc);
  EXPECT_TRUE(m.w_packed);
  EXPECT_EQ(m.pads, (std::vector<int>{1, 2}));
  EXPECT_EQ(m.strides, (std::vector<int>{2, 1}));
  EXPECT_EQ(m.dilations, (std::vector<int>{1, 2}));
  EXPECT_EQ(m.groups, 2);
}

TEST(CudnnConvMapping, NhwcInputAndOutputWithKrscByHand) {
  // x (2, 9, 8, 3) NHWC, w (5, 3, 3, 3) KRSC (out, h, w, in), out (2, 5, 8, 5) NHWC: the
  // strides describe the layouts; the filter is NHWC-format with dims still K, C, R, S.
  const kernels::ConvSpec s =
      spec_2d({2, 9, 8, 3}, {5, 3, 3, 3}, {2, 5, 8, 5}, {0, 3, 1, 2}, {0, 3, 1, 2}, {0, 3, 1, 2});
  const CudnnConvMapping m = cudnn_conv_mapping(s);
  ASSERT_TRUE(m.expressible) << m.reason;
  EXPECT_EQ(m.x_dims, (std::vector<int>{2, 3, 9, 8}));
  EXPECT_EQ(m.x_strides, (std::vector<int>{216, 1, 24, 3}));
  EXPECT_EQ(m.y_dims, (std::vector<int>{2, 5, 5, 8}));
  EXPECT_EQ(m.y_strides, (std::vector<int>{200, 1, 40, 5}));
  EXPECT_EQ(m.w_dims, (std::vector<int>{5, 3, 3, 3}));
  EXPECT_EQ(m.w_strides, (std::vector<int>{27, 1, 9, 3}));
  EXPECT_TRUE(m.w_nhwc);
  EXPECT_TRUE(m.w_packed);
}

TEST(CudnnConvMapping, AKerasHwioKernelIsCopiedIntoPackedKcrs) {
  // x (2, 9, 8, 4) NHWC, w (3, 3, 4, 6) HWIO (Keras's conv2d), out (2, 5, 8, 6) NHWC: the filter
  // is described by its strides in (K, C, R, S) order and packed into KCRS (NCHW format).
  const kernels::ConvSpec s =
      spec_2d({2, 9, 8, 4}, {3, 3, 4, 6}, {2, 5, 8, 6}, {0, 3, 1, 2}, {3, 2, 0, 1}, {0, 3, 1, 2});
  const CudnnConvMapping m = cudnn_conv_mapping(s);
  ASSERT_TRUE(m.expressible) << m.reason;
  EXPECT_EQ(m.w_dims, (std::vector<int>{6, 4, 3, 3}));
  EXPECT_EQ(m.w_strides, (std::vector<int>{1, 6, 72, 24}));
  EXPECT_FALSE(m.w_packed);
  EXPECT_FALSE(m.w_nhwc);
  EXPECT_EQ(m.x_strides, (std::vector<int>{288, 1, 32, 4}));
}

TEST(CudnnConvMapping, OneSpatialDimGetsAUnitDim) {
  // x (2, 3, 10) NCW, w (4, 3, 3) KCS, padding 1: out (2, 4, 10) as 4-D with a unit height.
  const kernels::ConvSpec s = {.lhs_shape = {2, 3, 10},
                               .rhs_shape = {4, 3, 3},
                               .out_shape = {2, 4, 10},
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
                               .padding = {1, 1},
                               .lhs_dilation = {1},
                               .rhs_dilation = {1}};
  const CudnnConvMapping m = cudnn_conv_mapping(s);
  ASSERT_TRUE(m.expressible) << m.reason;
  EXPECT_EQ(m.x_dims, (std::vector<int>{2, 3, 1, 10}));
  EXPECT_EQ(m.x_strides, (std::vector<int>{30, 10, 10, 1}));
  EXPECT_EQ(m.w_dims, (std::vector<int>{4, 3, 1, 3}));
  EXPECT_EQ(m.w_strides, (std::vector<int>{9, 3, 3, 1}));
  EXPECT_EQ(m.y_dims, (std::vector<int>{2, 4, 1, 10}));
  EXPECT_EQ(m.pads, (std::vector<int>{0, 1}));
  EXPECT_EQ(m.strides, (std::vector<int>{1, 1}));
  EXPECT_EQ(m.dilations, (std::vector<int>{1, 1}));
}

TEST(CudnnConvMapping, WhatCudnnCannotExpressSaysWhy) {
  const kernels::ConvSpec base =
      spec_2d({2, 4, 9, 8}, {6, 4, 3, 3}, {2, 6, 5, 8}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3});
  ASSERT_TRUE(cudnn_conv_mapping(base).expressible);
  auto reason = [](const kernels::ConvSpec& s) {
    const CudnnConvMapping m = cudnn_conv_mapping(s);
    EXPECT_FALSE(m.expressible);
    EXPECT_TRUE(m.x_dims.empty());
    return m.reason;
  };
  kernels::ConvSpec s = base;
  s.lhs_dilation = {2, 1};  // an input gradient's dilation
  EXPECT_NE(reason(s).find("lhs_dilation is [2, 1]"), std::string::npos);
  s = base;
  s.batch_groups = 2;
  EXPECT_NE(reason(s).find("batch_group_count is 2"), std::string::npos);
  s = base;
  s.padding = {0, 1, 2, 2};
  EXPECT_NE(reason(s).find("padding [0, 1, 2, 2] is not symmetric"), std::string::npos);
  s = base;
  s.padding = {-1, -1, 2, 2};
  EXPECT_NE(reason(s).find("non-negative"), std::string::npos);
  // Four spatial dims.
  kernels::ConvSpec four = {.lhs_shape = {1, 1, 2, 2, 2, 2},
                            .rhs_shape = {1, 1, 1, 1, 1, 1},
                            .out_shape = {1, 1, 2, 2, 2, 2},
                            .in_batch = 0,
                            .in_feature = 1,
                            .in_spatial = {2, 3, 4, 5},
                            .k_in_feature = 1,
                            .k_out_feature = 0,
                            .k_spatial = {2, 3, 4, 5},
                            .out_batch = 0,
                            .out_feature = 1,
                            .out_spatial = {2, 3, 4, 5},
                            .strides = {1, 1, 1, 1},
                            .padding = std::vector<int64_t>(8, 0),
                            .lhs_dilation = {1, 1, 1, 1},
                            .rhs_dilation = {1, 1, 1, 1}};
  EXPECT_NE(reason(four).find("4 spatial dims"), std::string::npos);
}

TEST(CudnnLibrary, MissingLibraryIsUnavailableWithReason) {
  const auto lib = CudnnLibrary::load("libcudnn_does_not_exist.so.9");
  EXPECT_FALSE(lib->available());
  EXPECT_NE(lib->unavailable_reason().find("libcudnn_does_not_exist.so.9"), std::string::npos);
  // A library without cuDNN's symbols (libc) is not a usable cuDNN, naming what it lacks.
  const auto libc = CudnnLibrary::load("libc.so.6");
  EXPECT_FALSE(libc->available());
  EXPECT_NE(libc->unavailable_reason().find("cudnnConvolutionForward"), std::string::npos)
      << libc->unavailable_reason();
  EXPECT_STREQ(conv_engine_name(CudaConvChoice::Engine::kCudnn), "cuDNN");
  EXPECT_STREQ(conv_engine_name(CudaConvChoice::Engine::kImplicitGemm), "implicit GEMM");
}

}  // namespace
}  // namespace ingot

#endif
