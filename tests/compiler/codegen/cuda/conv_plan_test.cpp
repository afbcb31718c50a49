// Convolutions in the CUDA host plan (`ptx` suite, no GPU needed): f32/f64 convolutions lowered
// as `ingot_cuda_conv_<dtype>` calls become convolution thunks (CudaThunk::Kind::kConv) running
// the implicit-GEMM kernel of kernels/cuda/conv.cu, with the spec decoded from the call's
// constant configuration; the CNN train step's forward and weight-gradient convolutions.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "ingot/autodiff/autodiff.h"
#include "ingot/interp/interpreter.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/kernels/cpu_conv.h"
#include "ingot/kernels/cuda_conv.h"
#include "ingot/trace/ops.h"
#include "ptx_util.h"
#include "runtime/fake_cuda_driver.h"
#include "samples.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::cnn_train_step_graph;
using testing::f32_type;

/// Compiles `graph` as jit's CUDA path does: cuBLAS GEMMs and convolution thunks.
codegen::CudaProgram compile_with_convs(const ir::Graph& graph, const codegen::CudaCompileOptions& options = {}) {
  const lower::LoweredModule m = lower::lower_graph(graph, "main", {},
                                                    lower::LoweringOptions{.gemm_function = "ingot_cuda_gemm",
                                                                           .library_conv = true,
                                                                           .library_conv_min_k = 0,
                                                                           .conv_function = "ingot_cuda_conv"});
  std::vector<std::pair<Shape, DType>> in, out;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) out.emplace_back(t.shape, t.dtype);
  return codegen::compile_cuda(m.text, "main", in, out, options);
}

/// conv2d of x (2, 7, 6, 3) with a (3, 2, 3 / groups, 4) kernel, stride 2 and "same" padding.
ir::Graph single_conv_graph(DType dtype, int64_t groups = 1) {
  return trace(
      [groups](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{
            conv2d(a[0], a[1], Conv2DOptions{.strides = {2, 1}, .padding = "same", .feature_group_count = groups})};
      },
      {{{2, 7, 6, 3 * groups}, dtype}, {{3, 2, 3, 4 * groups}, dtype}}, "conv");
}

class ConvPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(testing::kPtxas))
      GTEST_SKIP() << "no ptxas at " << testing::kPtxas << " (CUDA toolkit)";
  }
};

TEST_F(ConvPlan, ASingleConvolutionIsOneThunkWithTheKernelImage) {
  const codegen::CudaProgram p = compile_with_convs(single_conv_graph(DType::kF32));
  testing::expect_valid_program(p, "conv");
  const std::vector<codegen::CudaConv> convs = p.convs();
  ASSERT_EQ(convs.size(), 1u) << p.describe();
  const codegen::CudaConv& c = convs[0];
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_EQ(c.spec.lhs_shape, (std::vector<int64_t>{2, 7, 6, 3}));
  EXPECT_EQ(c.spec.rhs_shape, (std::vector<int64_t>{3, 2, 3, 4}));
  EXPECT_EQ(c.spec.out_shape, (std::vector<int64_t>{2, 4, 6, 4}));
  EXPECT_EQ(c.spec.in_feature, 3);
  EXPECT_EQ(c.spec.k_out_feature, 3);
  EXPECT_EQ(c.spec.strides, (std::vector<int64_t>{2, 1}));
  // "same": total padding (out - 1) * stride + k - in = 2 (rows: 1 + 1) and 1 (cols: 0 + 1).
  EXPECT_EQ(c.spec.padding, (std::vector<int64_t>{1, 1, 0, 1}));
  EXPECT_EQ(c.kernel, "ingot_conv_implicit_gemm_f32");
  EXPECT_EQ(c.params, kernels::cuda_conv_param_words(kernels::cuda_conv_params(c.spec)));
  EXPECT_EQ(c.grid, (std::array<int64_t, 3>{1, 1, 1}));  // M = 48, N = 4
  EXPECT_EQ(c.block, (std::array<int64_t, 3>{256, 1, 1}));
  // The operands: input 0, input 1 and the output (or a temporary copied to it).
  EXPECT_EQ(p.buffers[static_cast<size_t>(c.lhs.buffer)].kind, codegen::CudaBuffer::Kind::kInput);
  EXPECT_EQ(p.buffers[static_cast<size_t>(c.lhs.buffer)].index, 0);
  EXPECT_EQ(p.buffers[static_cast<size_t>(c.rhs.buffer)].index, 1);
  EXPECT_EQ(c.out.sizes, (Shape{2 * 4 * 6 * 4}));
  // The kernel image: the embedded PTX for each target arch.
  const codegen::CudaKernelImage& k = p.kernel("ingot_conv_implicit_gemm_f32");
  ASSERT_EQ(k.ptx.size(), 2u);
  EXPECT_EQ(k.ptx.at("sm_90"), std::string(kernels::cuda_kernel_ptx("conv", "sm_90")));
  EXPECT_NE(p.describe().find("conv f32 lhs (2, 7, 6, 3) rhs (3, 2, 3, 4) out (2, 4, 6, 4) groups 1x1"),
            std::string::npos)
      << p.describe();
}

TEST_F(ConvPlan, TheCnnTrainStepHasItsForwardAndWeightGradientConvolutions) {
  const ir::Graph g = cnn_train_step_graph();
  const codegen::CudaProgram p = compile_with_convs(g);
  testing::expect_valid_program(p, "cnn with convolution thunks");
  const std::vector<codegen::CudaConv> convs = p.convs();
  ASSERT_EQ(convs.size(), 2u) << p.describe();
  // No input gradient: x is not differentiated.
  const kernels::ConvSpec& fwd = convs[0].spec;
  EXPECT_EQ(fwd.lhs_shape, (std::vector<int64_t>{4, 28, 28, 1}));
  EXPECT_EQ(fwd.rhs_shape, (std::vector<int64_t>{3, 3, 1, 8}));
  EXPECT_EQ(fwd.out_shape, (std::vector<int64_t>{4, 26, 26, 8}));
  EXPECT_EQ(p.buffers[static_cast<size_t>(convs[0].lhs.buffer)].index, 4);  // x
  const kernels::ConvSpec& wgrad = convs[1].spec;
  // The weight gradient: x (4, 28, 28, 1) with its channel as the batch and its batch as the
  // features, dy (4, 26, 26, 8) as the kernel (batch as its input features), giving dW (3, 3, 1, 8).
  EXPECT_EQ(wgrad.lhs_shape, (std::vector<int64_t>{4, 28, 28, 1}));
  EXPECT_EQ(wgrad.rhs_shape, (std::vector<int64_t>{4, 26, 26, 8}));
  EXPECT_EQ(wgrad.out_shape, (std::vector<int64_t>{3, 3, 1, 8}));
  EXPECT_EQ(std::vector<int64_t>({wgrad.in_batch, wgrad.in_feature, wgrad.k_in_feature, wgrad.k_out_feature,
                                  wgrad.out_batch, wgrad.out_feature}),
            (std::vector<int64_t>{3, 0, 0, 3, 2, 3}));
  EXPECT_EQ(convs[1].grid, (std::array<int64_t, 3>{1, 1, 1}));  // M = 1 * 3 * 3, N = 8
  // cuDNN can run both (the HWIO kernel and dy as a kernel packed into KCRS first).
  for (const codegen::CudaConv& c : convs) {
    const CudnnConvMapping m = cudnn_conv_mapping(c.spec);
    EXPECT_TRUE(m.expressible) << m.reason;
    EXPECT_FALSE(m.w_packed);
  }
  // Every spec the step uses: the kernel's CPU model equals the CPU reference on random data.
  unsigned seed = 11;
  for (const codegen::CudaConv& c : convs) {
    auto n = [](const std::vector<int64_t>& shape) { return static_cast<size_t>(num_elements(shape)); };
    std::mt19937 gen(seed++);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> lhs(n(c.spec.lhs_shape)), rhs(n(c.spec.rhs_shape)), model(n(c.spec.out_shape)),
        reference(model.size());
    for (float& v : lhs) v = dist(gen);
    for (float& v : rhs) v = dist(gen);
    kernels::cuda_conv_emulate(c.spec, lhs, rhs, model);
    kernels::convolution_reference(c.spec, lhs, rhs, reference);
    for (size_t i = 0; i < model.size(); ++i) EXPECT_NEAR(model[i], reference[i], 1e-4) << i;
  }
}

TEST_F(ConvPlan, ArchitecturesOlderThanTheKernelsAreAnError) {
  testing::expect_error([] { compile_with_convs(single_conv_graph(DType::kF32), {.archs = {"sm_75"}}); },
                        ErrorCode::kInvalidArgument, {"sm_75", "convolution"});
  // An arch without its own PTX gets the newest older one (sm_80's for sm_89).
  const codegen::CudaProgram p = compile_with_convs(single_conv_graph(DType::kF64), {.archs = {"sm_89"}});
  EXPECT_EQ(p.kernel("ingot_conv_implicit_gemm_f64").ptx.at("sm_89"),
            std::string(kernels::cuda_kernel_ptx("conv", "sm_80")));
}

/// Uniform values in [-1, 1) of `shape` and `dtype` from `seed`.
Array random_array(const Shape& shape, DType dtype, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  for (double& x : v) x = dist(gen);
  return Array::from_doubles(v, shape, dtype);
}

template <class T>
T* pointer(uint64_t address) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
}

/// Registers host bodies on the fake driver for every kernel of `p`: the convolution kernel runs
/// its CPU model (cuda_conv_emulate) on the addresses the launch passes, with the spec of the
/// program's thunk (the fake reads the by-value parameter block's first word only: num_spatial,
/// checked); the generated kernels of a single-convolution program are plain copies between
/// contiguous views of equal size (checked here), run as memcpy.
void register_bodies(testing::FakeCuda& fake, const codegen::CudaProgram& p) {
  for (const codegen::CudaConv& c : p.convs()) {
    fake.kernel_bodies[c.kernel] = [c](const std::vector<uint64_t>& w) {
      ASSERT_EQ(w.size(), 4u);
      EXPECT_EQ(static_cast<int64_t>(w[3]), static_cast<int64_t>(c.spec.in_spatial.size()));
      auto n = [](const std::vector<int64_t>& shape) { return static_cast<size_t>(num_elements(shape)); };
      if (c.dtype == DType::kF32) {
        kernels::cuda_conv_emulate(c.spec, {pointer<const float>(w[0]), n(c.spec.lhs_shape)},
                                   {pointer<const float>(w[1]), n(c.spec.rhs_shape)},
                                   {pointer<float>(w[2]), n(c.spec.out_shape)});
      } else {
        kernels::cuda_conv_emulate(c.spec, {pointer<const double>(w[0]), n(c.spec.lhs_shape)},
                                   {pointer<const double>(w[1]), n(c.spec.rhs_shape)},
                                   {pointer<double>(w[2]), n(c.spec.out_shape)});
      }
    };
  }
  for (const codegen::CudaLaunch& l : p.launches()) {
    std::vector<size_t> memrefs;  // the first launch word of each memref argument
    size_t word = 0;
    for (size_t i = 0; i < l.args.size(); ++i) {
      const codegen::CudaKernelArg& a = l.args[i];
      if (a.kind == codegen::CudaKernelArg::Kind::kMemref) {
        int64_t expected = 1;
        for (size_t d = a.sizes.size(); d-- > 0;) {
          ASSERT_EQ(a.strides[d], expected) << l.kernel << ": not a contiguous view";
          expected *= a.sizes[d];
        }
        memrefs.push_back(word);
      }
      word += a.kind == codegen::CudaKernelArg::Kind::kMemref ? 3 + 2 * a.sizes.size() : 1;
    }
    ASSERT_EQ(memrefs.size(), 2u) << l.kernel << ": not a copy";
    const codegen::CudaKernelArg& to = l.args[l.args.size() - 1];
    ASSERT_EQ(to.kind, codegen::CudaKernelArg::Kind::kMemref) << l.kernel << ": not a copy";
    const auto from_arg = std::find_if(l.args.begin(), l.args.end(),
                                       [](const auto& a) { return a.kind == codegen::CudaKernelArg::Kind::kMemref; });
    ASSERT_EQ(num_elements(from_arg->sizes), num_elements(to.sizes)) << l.kernel << ": not a copy";
    const auto element = static_cast<size_t>(dtype_size(p.buffers[static_cast<size_t>(to.buffer)].dtype));
    const size_t bytes = static_cast<size_t>(num_elements(to.sizes)) * element;
    fake.kernel_bodies[l.kernel.substr(l.kernel.rfind('.') + 1)] = [=](const std::vector<uint64_t>& w) {
      const size_t from = memrefs[0], into = memrefs[1];
      std::memcpy(pointer<char>(w[into + 1]) + w[into + 2] * element,
                  pointer<char>(w[from + 1]) + w[from + 2] * element, bytes);
    };
  }
}

TEST_F(ConvPlan, ConvolutionProgramsRunOnTheFakeDriverLikeTheInterpreter) {
  unsigned seed = 3;
  for (const DType dtype : {DType::kF32, DType::kF64}) {
    for (const int64_t groups : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} groups {}", dtype_name(dtype), groups));
      const ir::Graph g = single_conv_graph(dtype, groups);
      const codegen::CudaProgram p = compile_with_convs(g);
      ASSERT_EQ(p.convs().size(), 1u);
      EXPECT_EQ(p.convs()[0].spec.feature_groups, groups);
      testing::FakeCudaScope fake;
      register_bodies(fake.state(), p);
      auto dev = CudaDevice::open(fake.driver(), 0);
      auto exe = CudaExecutable::create(p, *dev, nullptr, nullptr);  // the kernel only
      const std::vector<Array> host = {random_array(p.input_types[0].first, dtype, seed++),
                                       random_array(p.input_types[1].first, dtype, seed++)};
      std::vector<Array> inputs;
      for (const Array& h : host) {
        inputs.push_back(Array::empty(h.shape(), h.dtype(), &dev->device()));
        dev->copy_async(h, inputs.back())->wait();
      }
      const std::vector<Array> outputs = exe->run(inputs);
      Array got = Array::empty(outputs[0].shape(), dtype);
      dev->copy_async(outputs[0], got)->wait();
      const Array want = interp::interpret(g, host)[0];
      const std::vector<double> got_v = got.to_doubles(), want_v = want.to_doubles();
      ASSERT_EQ(got_v.size(), want_v.size());
      for (size_t i = 0; i < got_v.size(); ++i) {
        EXPECT_NEAR(got_v[i], want_v[i], dtype == DType::kF32 ? 1e-5 : 1e-12) << "element " << i;
      }
      // The convolution launch: its grid and block and the operands' addresses.
      const auto& launches = fake.state().launches;
      const auto conv = std::find_if(launches.begin(), launches.end(),
                                     [&](const auto& l) { return l.kernel == p.convs()[0].kernel; });
      ASSERT_NE(conv, launches.end());
      EXPECT_EQ(conv->grid[2], static_cast<unsigned>(groups));
      EXPECT_EQ(conv->block[0], 256u);
      EXPECT_EQ(conv->params[0], reinterpret_cast<uintptr_t>(inputs[0].buffer()->data()));
      EXPECT_EQ(conv->params[1], reinterpret_cast<uintptr_t>(inputs[1].buffer()->data()));
    }
  }
}

/// conv of x (2, 3, 9, 8) NCHW with w (4, 3, 3, 3) OIHW, padding 1, stride (1, 2): cuDNN can
/// express it.
ir::Graph nchw_conv_graph() {
  return trace(
      [](const std::vector<Tensor>& a) {
        return emit("convolution", {a[0], a[1]},
                    {{"window_strides", std::vector<int64_t>{1, 2}},
                     {"padding", std::vector<int64_t>{1, 1, 1, 1}},
                     {"lhs_dilation", std::vector<int64_t>{1, 1}},
                     {"rhs_dilation", std::vector<int64_t>{1, 1}},
                     {"feature_group_count", int64_t{1}},
                     {"batch_group_count", int64_t{1}},
                     {"input_batch_dimension", int64_t{0}},
                     {"input_feature_dimension", int64_t{1}},
                     {"input_spatial_dimensions", std::vector<int64_t>{2, 3}},
                     {"kernel_input_feature_dimension", int64_t{1}},
                     {"kernel_output_feature_dimension", int64_t{0}},
                     {"kernel_spatial_dimensions", std::vector<int64_t>{2, 3}},
                     {"output_batch_dimension", int64_t{0}},
                     {"output_feature_dimension", int64_t{1}},
                     {"output_spatial_dimensions", std::vector<int64_t>{2, 3}}});
      },
      {f32_type({2, 3, 9, 8}), f32_type({4, 3, 3, 3})}, "nchw_conv");
}

/// A CudaDnn on the fake driver: its "algorithm" is the CPU reference, enqueued on the stream,
/// taking `delay` per call; plan_conv fails when `fail_plan`.
class HostDnn final : public CudaDnn {
 public:
  std::chrono::milliseconds delay{0};
  bool fail_plan = false;
  int plans = 0, forwards = 0;
  std::vector<uint64_t> workspaces;
  kernels::ConvSpec spec;  // what the forward computes (the test's convolution)

  CudaDnnConvPlan plan_conv(const CudnnConvMapping& mapping, DType dtype) override {
    if (fail_plan) throw Error(ErrorCode::kFailedPrecondition, "no algorithm (host stand-in)");
    EXPECT_TRUE(mapping.expressible);
    EXPECT_EQ(dtype, DType::kF32);
    ++plans;
    return {.id = 7, .algorithm = 1, .workspace_bytes = 1024};
  }
  void conv_forward(const CudaDnnConvPlan& plan, uint64_t x, uint64_t w, uint64_t y, uint64_t workspace,
                    const CudaStream& stream) override {
    EXPECT_EQ(plan.id, 7);
    ++forwards;
    workspaces.push_back(workspace);
    const kernels::ConvSpec s = spec;
    const auto d = delay;
    testing::fake_cuda::enqueue(stream.handle(), [s, d, x, w, y] {
      auto n = [](const std::vector<int64_t>& shape) { return static_cast<size_t>(num_elements(shape)); };
      std::this_thread::sleep_for(d);
      kernels::convolution_reference(s, {pointer<const float>(x), n(s.lhs_shape)},
                                     {pointer<const float>(w), n(s.rhs_shape)}, {pointer<float>(y), n(s.out_shape)});
    });
  }
};

/// Runs `p` (one f32 convolution of `g`) twice on the fake driver with `dnn` and the kernel's
/// body delayed by `kernel_delay`; checks both runs against the interpreter; returns the choice
/// and the number of convolution kernel launches.
std::pair<CudaConvChoice, size_t> run_twice(const ir::Graph& g, const codegen::CudaProgram& p,
                                            std::shared_ptr<CudaDnn> dnn, std::chrono::milliseconds kernel_delay) {
  testing::FakeCudaScope fake;
  register_bodies(fake.state(), p);
  const std::string kernel = p.convs()[0].kernel;
  auto body = fake.state().kernel_bodies[kernel];
  fake.state().kernel_bodies[kernel] = [body, kernel_delay](const std::vector<uint64_t>& w) {
    std::this_thread::sleep_for(kernel_delay);
    body(w);
  };
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto exe = CudaExecutable::create(p, *dev, nullptr, dnn);
  EXPECT_EQ(exe->conv_choices()[0].engine, CudaConvChoice::Engine::kUndecided);
  const std::vector<Array> host = {random_array(p.input_types[0].first, DType::kF32, 21),
                                   random_array(p.input_types[1].first, DType::kF32, 22)};
  std::vector<Array> inputs;
  for (const Array& h : host) {
    inputs.push_back(Array::empty(h.shape(), h.dtype(), &dev->device()));
    dev->copy_async(h, inputs.back())->wait();
  }
  const std::vector<double> want = interp::interpret(g, host)[0].to_doubles();
  for (int run = 0; run < 2; ++run) {
    const std::vector<Array> outputs = exe->run(inputs);
    Array got = Array::empty(outputs[0].shape(), DType::kF32);
    dev->copy_async(outputs[0], got)->wait();
    const std::vector<double> got_v = got.to_doubles();
    EXPECT_EQ(got_v.size(), want.size());
    for (size_t i = 0; i < std::min(got_v.size(), want.size()); ++i) {
      EXPECT_NEAR(got_v[i], want[i], 1e-5) << "run " << run << " element " << i;
    }
  }
  const auto& l = fake.state().launches;
  const auto launches =
      static_cast<size_t>(std::count_if(l.begin(), l.end(), [&](const auto& x) { return x.kernel == kernel; }));
  return {exe->conv_choices()[0], launches};
}

TEST_F(ConvPlan, TheFasterOfTheKernelAndTheDnnIsChosenAtTheFirstRun) {
  const ir::Graph g = nchw_conv_graph();
  const codegen::CudaProgram p = compile_with_convs(g);
  ASSERT_EQ(p.convs().size(), 1u);
  ASSERT_TRUE(cudnn_conv_mapping(p.convs()[0].spec).expressible) << cudnn_conv_mapping(p.convs()[0].spec).reason;
  const int runs = CudaExecutable::kConvTimingRuns;
  {  // a slow DNN: the kernel is kept; timing ran each engine 1 + runs times, then two real runs
    auto dnn = std::make_shared<HostDnn>();
    dnn->spec = p.convs()[0].spec;
    dnn->delay = std::chrono::milliseconds(20);
    const auto [choice, launches] = run_twice(g, p, dnn, std::chrono::milliseconds(0));
    EXPECT_EQ(choice.engine, CudaConvChoice::Engine::kImplicitGemm);
    EXPECT_EQ(choice.reason, "timed");
    EXPECT_GE(choice.cudnn_ms, 19.0);
    EXPECT_LT(choice.implicit_gemm_ms, choice.cudnn_ms);
    EXPECT_EQ(choice.cudnn_algorithm, 1);
    EXPECT_EQ(dnn->plans, 1);
    EXPECT_EQ(dnn->forwards, 1 + runs);
    EXPECT_EQ(launches, static_cast<size_t>(1 + runs + 2));
  }
  {  // a slow kernel: cuDNN is kept, with its workspace from the device allocator
    auto dnn = std::make_shared<HostDnn>();
    dnn->spec = p.convs()[0].spec;
    const auto [choice, launches] = run_twice(g, p, dnn, std::chrono::milliseconds(20));
    EXPECT_EQ(choice.engine, CudaConvChoice::Engine::kCudnn);
    EXPECT_GE(choice.implicit_gemm_ms, 19.0);
    EXPECT_LT(choice.cudnn_ms, choice.implicit_gemm_ms);
    EXPECT_EQ(choice.workspace_bytes, 1024);
    EXPECT_EQ(dnn->forwards, 1 + runs + 2);
    EXPECT_EQ(launches, static_cast<size_t>(1 + runs));
    ASSERT_FALSE(dnn->workspaces.empty());
    EXPECT_NE(dnn->workspaces.back(), 0u);
    EXPECT_EQ(dnn->workspaces.front(), dnn->workspaces.back());  // one workspace, kept
  }
  {  // a DNN that cannot plan it: the kernel, with the reason
    auto dnn = std::make_shared<HostDnn>();
    dnn->spec = p.convs()[0].spec;
    dnn->fail_plan = true;
    const auto [choice, launches] = run_twice(g, p, dnn, std::chrono::milliseconds(0));
    EXPECT_EQ(choice.engine, CudaConvChoice::Engine::kImplicitGemm);
    EXPECT_NE(choice.reason.find("cuDNN failed: no algorithm (host stand-in)"), std::string::npos) << choice.reason;
    EXPECT_EQ(choice.cudnn_ms, -1.0);
    EXPECT_EQ(launches, 2u);
  }
  {  // no DNN
    const auto [choice, launches] = run_twice(g, p, nullptr, std::chrono::milliseconds(0));
    EXPECT_EQ(choice.engine, CudaConvChoice::Engine::kImplicitGemm);
    EXPECT_NE(choice.reason.find("no CudaDnn"), std::string::npos) << choice.reason;
    EXPECT_EQ(launches, 2u);
  }
}

TEST_F(ConvPlan, KerasConvolutionsReachTheDnnUnlessTheirPaddingIsAsymmetric) {
  // conv2d "valid" (HWIO kernel, packed by the DNN) is timed against the kernel; "same" with a
  // 3x2 kernel pads (1, 1) and (0, 1): not expressible, so the DNN is not asked.
  const ir::Graph valid = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{conv2d(a[0], a[1])}; },
                                {f32_type({2, 7, 6, 3}), f32_type({3, 2, 3, 4})}, "valid_conv");
  const codegen::CudaProgram pv = compile_with_convs(valid);
  auto dnn = std::make_shared<HostDnn>();
  dnn->spec = pv.convs()[0].spec;
  dnn->delay = std::chrono::milliseconds(20);
  const auto [timed, timed_launches] = run_twice(valid, pv, dnn, std::chrono::milliseconds(0));
  EXPECT_EQ(timed.reason, "timed");
  EXPECT_EQ(timed.engine, CudaConvChoice::Engine::kImplicitGemm);
  EXPECT_EQ(dnn->plans, 1);

  const ir::Graph same = single_conv_graph(DType::kF32);
  const codegen::CudaProgram ps = compile_with_convs(same);
  auto dnn2 = std::make_shared<HostDnn>();
  dnn2->spec = ps.convs()[0].spec;
  const auto [choice, launches] = run_twice(same, ps, dnn2, std::chrono::milliseconds(0));
  EXPECT_EQ(choice.engine, CudaConvChoice::Engine::kImplicitGemm);
  EXPECT_NE(choice.reason.find("cuDNN cannot express it: padding [1, 1, 0, 1] is not symmetric"), std::string::npos)
      << choice.reason;
  EXPECT_EQ(dnn2->plans, 0);
  EXPECT_EQ(launches, 2u);
}

}  // namespace
}  // namespace ingot
