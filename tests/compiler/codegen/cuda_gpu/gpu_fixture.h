// Shared by the `gpu` suite (tests/compiler/codegen/cuda_gpu/): CUDA device 0 opened for each
// test, which skips with the driver's reason where there is no usable driver or GPU; and the
// compilation jit's CUDA path makes (cuBLAS GEMMs, convolution thunks).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "ingot/codegen/cuda_compiler.h"
#include "ingot/ir/graph.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/cuda.h"

namespace ingot::testing {

/// A test on CUDA device 0 (`device_`), skipped without one.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ = CudaDriver::load();
    if (!driver_->available()) GTEST_SKIP() << "no CUDA driver/GPU: " << driver_->unavailable_reason();
    device_ = CudaDevice::open(driver_, 0);
  }
  std::shared_ptr<CudaDriver> driver_;
  std::unique_ptr<CudaDevice> device_;
};

/// `graph` through the CUDA code generator as jit's CUDA path lowers it: f32/f64 products as
/// cuBLAS GEMMs, every f32/f64 convolution as a convolution thunk.
inline CudaProgram compile_like_jit(const ir::Graph& graph) {
  const lower::LoweredModule m = lower::lower_graph(graph, "main", {},
                                                    {.gemm_function = "ingot_cuda_gemm",
                                                     .library_conv = true,
                                                     .library_conv_min_k = 0,
                                                     .conv_function = "ingot_cuda_conv"});
  std::vector<std::pair<Shape, DType>> in, res;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) res.emplace_back(t.shape, t.dtype);
  return codegen::compile_cuda(m.text, "main", in, res);
}

}  // namespace ingot::testing
