// The `gpu` suite's convolutions: convolution thunks on device 0 against the interpreter -- an
// NCHW/OIHW convolution cuDNN can express (f32 and f64), its input and weight gradients (which
// cannot express the input gradient's lhs dilation), and Keras-layout convolutions (HWIO
// kernels, packed for cuDNN; asymmetric "same" padding it cannot express) -- with the
// engine each thunk chose at its first run recorded (CudaExecutable::conv_choices: cuDNN timed
// against the implicit-GEMM kernel when cuDNN is there and can express it). Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "ingot/autodiff/autodiff.h"
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/interp/interpreter.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/cuda_dnn.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/trace/ops.h"
#include "compiler/codegen/parity.h"
#include "compiler/codegen/cuda_gpu/gpu_fixture.h"
#include "test_util.h"

namespace ingot {
namespace {

/// conv of x (N, C, H, W) with w (O, C / groups, kh, kw), StableHLO dims NCHW / OIHW / NCHW.
Tensor conv_nchw(const Tensor& x, const Tensor& w, std::vector<int64_t> strides, std::vector<int64_t> padding,
                 int64_t groups = 1) {
  return emit("convolution", {x, w},
              {{"window_strides", strides},
               {"padding", padding},
               {"lhs_dilation", std::vector<int64_t>{1, 1}},
               {"rhs_dilation", std::vector<int64_t>{1, 1}},
               {"feature_group_count", groups},
               {"batch_group_count", int64_t{1}},
               {"input_batch_dimension", int64_t{0}},
               {"input_feature_dimension", int64_t{1}},
               {"input_spatial_dimensions", std::vector<int64_t>{2, 3}},
               {"kernel_input_feature_dimension", int64_t{1}},
               {"kernel_output_feature_dimension", int64_t{0}},
               {"kernel_spatial_dimensions", std::vector<int64_t>{2, 3}},
               {"output_batch_dimension", int64_t{0}},
               {"output_feature_dimension", int64_t{1}},
               {"output_spatial_dimensions", std::vector<int64_t>{2, 3}}})[0];
}

struct Case {
  std::string name;
  ir::Graph graph;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const DType dt : {DType::kF32, DType::kF64}) {
    out.push_back({fmt::format("nchw {}", dtype_name(dt)), trace(
                                                               [](const std::vector<Tensor>& a) {
                                                                 return std::vector<Tensor>{
                                                                     conv_nchw(a[0], a[1], {1, 1}, {1, 1, 1, 1})};
                                                               },
                                                               {{{8, 16, 32, 32}, dt}, {{32, 16, 3, 3}, dt}}, "nchw")});
  }
  out.push_back(
      {"nchw grouped, strided", trace(
                                    [](const std::vector<Tensor>& a) {
                                      return std::vector<Tensor>{conv_nchw(a[0], a[1], {2, 2}, {1, 1, 1, 1}, 4)};
                                    },
                                    {{{4, 32, 17, 17}, DType::kF32}, {{64, 8, 3, 3}, DType::kF32}}, "nchw_grouped")});
  // Gradients of sum(conv(x, w) * t) for a stride-2 convolution: input (lhs dilation) and weight
  // (batch as features) gradient convolutions.
  out.push_back(
      {"nchw gradients",
       trace(
           [](const std::vector<Tensor>& a) {
             TraceFn loss = [](const std::vector<Tensor>& v) {
               return std::vector<Tensor>{sum(conv_nchw(v[0], v[1], {2, 2}, {1, 1, 1, 1}) * v[2])};
             };
             std::vector<Tensor> vg = value_and_grad(loss, {0, 1})(a);
             return std::vector<Tensor>{vg[1], vg[2]};
           },
           {{{4, 8, 15, 15}, DType::kF32}, {{16, 8, 3, 3}, DType::kF32}, {{4, 16, 8, 8}, DType::kF32}}, "nchw_grads")});
  // Keras layouts (HWIO kernels, packed for cuDNN): "same" with a 5x5 kernel pads symmetrically,
  // with a 2x2 kernel it does not.
  out.push_back({"keras grouped same",
                 trace(
                     [](const std::vector<Tensor>& a) {
                       return std::vector<Tensor>{conv2d(a[0], a[1], {.padding = "same", .feature_group_count = 2})};
                     },
                     {{{4, 20, 20, 8}, DType::kF32}, {{5, 5, 4, 16}, DType::kF32}}, "keras_grouped")});
  out.push_back(
      {"keras same even kernel",
       trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{conv2d(a[0], a[1], {.padding = "same"})}; },
             {{{4, 12, 12, 3}, DType::kF32}, {{2, 2, 3, 8}, DType::kF32}}, "keras_even")});
  return out;
}

/// Without a GPU: the cases compile to convolution thunks, some cuDNN can express and some it
/// cannot, so the GPU test exercises both engines' paths.
TEST(ConvGpuHarness, CasesHaveConvolutionThunksBothExpressibleInCudnnAndNot) {
  int expressible = 0, not_expressible = 0;
  for (const Case& c : cases()) {
    const CudaProgram p = testing::compile_like_jit(c.graph);
    EXPECT_FALSE(p.convs().empty()) << c.name;
    for (const CudaConv& conv : p.convs())
      ++(cudnn_conv_mapping(conv.spec).expressible ? expressible : not_expressible);
  }
  EXPECT_GE(expressible, 4);      // the NCHW convolutions, the weight gradient, the 5x5 Keras one
  EXPECT_GE(not_expressible, 2);  // the input gradient (lhs dilation), the 2x2 "same" padding
}

class ConvGpu : public testing::CudaDeviceTest {};

TEST_F(ConvGpu, ConvolutionThunksMatchTheInterpreterAndRecordTheirEngine) {
  const bool have_cudnn = CudnnLibrary::load()->available();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const CudaProgram p = testing::compile_like_jit(c.graph);
    const std::vector<std::pair<Shape, DType>>& in = p.input_types;
    ASSERT_FALSE(p.convs().empty());
    auto exe = CudaExecutable::create(p, *device_);
    std::vector<Array> host, args;
    for (size_t i = 0; i < in.size(); ++i) {
      host.push_back(testing::random_array(in[i].first, in[i].second, 40 + i, -1, 1));
      args.push_back(Array::empty(in[i].first, in[i].second, &device_->device()));
      device_->copy_async(host.back(), args.back())->wait();
    }
    const std::vector<Array> want = interp::interpret(c.graph, host);
    for (int run = 0; run < 2; ++run) {  // the first run chooses, the second uses the choice
      const std::vector<Array> got_dev = exe->run(args);
      ASSERT_EQ(got_dev.size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) {
        Array got = Array::empty(got_dev[o].shape(), got_dev[o].dtype());
        device_->copy_async(got_dev[o], got)->wait();
        const double rtol = want[o].dtype() == DType::kF64 ? 1e-10 : 1e-4;
        const std::vector<double> w = want[o].to_doubles(), h = got.to_doubles();
        int reported = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          if (std::abs(w[i] - h[i]) > rtol * std::max({std::abs(w[i]), std::abs(h[i]), 1.0}) && reported++ < 5) {
            ADD_FAILURE() << "run " << run << " output " << o << " element " << i << ": interpreter " << w[i]
                          << ", GPU " << h[i];
          }
        }
      }
    }
    const std::vector<CudaConvChoice> choices = exe->conv_choices();
    const std::vector<CudaConv> convs = exe->program().convs();
    ASSERT_EQ(choices.size(), convs.size());
    for (size_t i = 0; i < choices.size(); ++i) {
      const CudaConvChoice& ch = choices[i];
      EXPECT_NE(ch.engine, CudaConvChoice::Engine::kUndecided);
      EXPECT_FALSE(ch.reason.empty());
      const bool expressible = cudnn_conv_mapping(convs[i].spec).expressible;
      if (have_cudnn && expressible) {
        EXPECT_EQ(ch.reason, "timed");
        EXPECT_GT(ch.implicit_gemm_ms, 0.0);
        EXPECT_GT(ch.cudnn_ms, 0.0);
      }
      std::cout << c.name << " conv " << i << ": " << conv_engine_name(ch.engine) << " (" << ch.reason
                << "); implicit GEMM " << ch.implicit_gemm_ms << " ms, cuDNN " << ch.cudnn_ms << " ms (algorithm "
                << ch.cudnn_algorithm << ", workspace " << ch.workspace_bytes << " bytes)\n";
    }
  }
}

}  // namespace
}  // namespace ingot
