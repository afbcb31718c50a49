// The `gpu` suite's f16/bf16 matrix products (issue 9, mixed precision): products compiled to
// GEMM thunks of that dtype run through cuBLAS's cublasGemmEx / cublasGemmStridedBatchedEx
// (CUBLAS_COMPUTE_32F, tensor cores) on device 0 and match the interpreter (f32 sums rounded once)
// within the suite's f16/bf16 tolerance, 2e-2 relative to max(|want|, |got|, 1). Also a
// mixed-precision MLP train step (bf16 / f16 GEMMs among generated kernels) against the
// interpreter at the same tolerance, its intermediates being half precision. Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/codegen/parity.h"
#include "ingot/autodiff/autodiff.h"
#include "ingot/codegen/cuda_compiler.h"
#include "ingot/interp/interpreter.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/cuda.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/trace/ops.h"
#include "compiler/codegen/cuda_gpu/gpu_fixture.h"
#include "test_util.h"

namespace ingot {
namespace {

struct Case {
  std::string name;
  ir::Graph graph;
  int64_t gemms = 0;  ///< the GEMM thunks its plan has
};

/// Products of `dt` operands: plain (shapes tensor cores tile: multiples of 8), odd shapes, both
/// operands transposed, batched (attention's Q K^T, two batch dims), and a Keras mixed-precision
/// Dense step (f32 variables cast to `dt`, value_and_grad, SGD).
std::vector<Case> cases(DType dt) {
  const std::string d(dtype_name(dt));
  std::vector<Case> out;
  const auto mm = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; };
  out.push_back({d + " 128x256 . 256x64", trace(mm, {{{128, 256}, dt}, {{256, 64}, dt}}, "mm"), 1});
  out.push_back({d + " 33x71 . 71x17", trace(mm, {{{33, 71}, dt}, {{71, 17}, dt}}, "mm_odd"), 1});
  out.push_back({d + " transposed",
                 trace(
                     [](const std::vector<Tensor>& a) {
                       return std::vector<Tensor>{
                           dot_general(a[0], a[1], {.lhs_contracting = {0}, .rhs_contracting = {1}})};
                     },
                     {{{96, 40}, dt}, {{24, 96}, dt}}, "mm_t"),
                 1});
  out.push_back(
      {d + " batched",
       trace(
           [](const std::vector<Tensor>& a) {
             return std::vector<Tensor>{dot_general(
                 a[0], a[1],
                 {.lhs_batching = {0, 1}, .rhs_batching = {0, 1}, .lhs_contracting = {3}, .rhs_contracting = {3}})};
           },
           {{{2, 4, 64, 32}, dt}, {{2, 4, 48, 32}, dt}}, "attn_scores"),
       1});
  out.push_back({d + " mixed dense step",
                 trace(
                     [dt](const std::vector<Tensor>& a) {
                       TraceFn loss = [dt](const std::vector<Tensor>& v) {
                         const Tensor h = relu(matmul(convert(v[2], dt), convert(v[0], dt)) + convert(v[1], dt));
                         return std::vector<Tensor>{mean(square(convert(h, DType::kF32)))};
                       };
                       std::vector<Tensor> vg = value_and_grad(loss, {0, 1})(a);
                       return std::vector<Tensor>{a[0] - 0.1 * vg[1], a[1] - 0.1 * vg[2], vg[0]};
                     },
                     {{{64, 32}, DType::kF32}, {{32}, DType::kF32}, {{16, 64}, DType::kF32}}, "mixed_dense_step"),
                 2});
  return out;
}

/// `graph` through the CUDA code generator with cuBLAS GEMMs (as jit's CUDA path lowers it).
CudaProgram compile(const ir::Graph& graph) {
  const lower::LoweredModule m =
      lower::lower_graph(graph, "main", {}, {.gemm_function = "ingot_cuda_gemm", .library_conv = false});
  std::vector<std::pair<Shape, DType>> in, res;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) res.emplace_back(t.shape, t.dtype);
  return codegen::compile_cuda(m.text, "main", in, res);
}

/// Without a GPU: every case's products are GEMM thunks of the case's half dtype.
TEST(HalfGemmGpuHarness, CasesHaveHalfGemmThunks) {
  for (const DType dt : {DType::kBF16, DType::kF16}) {
    for (const Case& c : cases(dt)) {
      const CudaProgram p = compile(c.graph);
      EXPECT_EQ(p.gemm_count(), c.gemms) << c.name << "\n" << p.describe();
      for (const CudaThunk& t : p.thunks) {
        if (t.kind == CudaThunk::Kind::kGemm) {
          EXPECT_EQ(t.gemm.dtype, dt) << c.name;
        }
      }
    }
  }
}

class HalfGemmGpu : public testing::CudaDeviceTest {};

TEST_F(HalfGemmGpu, HalfProductsThroughCublasGemmExMatchTheInterpreter) {
  for (const DType dt : {DType::kBF16, DType::kF16}) {
    for (const Case& c : cases(dt)) {
      SCOPED_TRACE(c.name);
      const CudaProgram p = compile(c.graph);
      auto exe = CudaExecutable::create(p, *device_);
      std::vector<Array> host, args;
      for (size_t i = 0; i < p.input_types.size(); ++i) {
        const auto& [shape, dtype] = p.input_types[i];
        host.push_back(testing::random_array(shape, dtype, 70 + i, -1, 1));
        args.push_back(Array::empty(shape, dtype, &device_->device()));
        device_->copy_async(host.back(), args.back())->wait();
      }
      const std::vector<Array> want = interp::interpret(c.graph, host);
      const std::vector<Array> got_dev = exe->run(args);
      ASSERT_EQ(got_dev.size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) {
        Array got = Array::empty(got_dev[o].shape(), got_dev[o].dtype());
        device_->copy_async(got_dev[o], got)->wait();
        const std::vector<double> w = want[o].to_doubles(), h = got.to_doubles();
        ASSERT_EQ(w.size(), h.size());
        int reported = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          const bool ok = std::abs(w[i] - h[i]) <= 2e-2 * std::max({std::abs(w[i]), std::abs(h[i]), 1.0});
          if (!ok && reported++ < 5) {
            ADD_FAILURE() << "output " << o << " element " << i << ": interpreter " << w[i] << ", GPU " << h[i];
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ingot
