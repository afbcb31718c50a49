// Helpers of the `ptx` suite: graphs compiled by the CUDA code generator, and ptxas (the CUDA
// toolkit's PTX assembler, run as a subprocess) assembling their PTX for a target architecture.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "ingot/codegen/cuda_compiler.h"
#include "ingot/ir/graph.h"
#include "ingot/lower/lowering.h"
#include "ingot/trace/ops.h"
#include "ingot/trace/tensor.h"
#include "ptxas.h"

namespace ingot::testing {

/// Compiles `graph` with the CUDA code generator: generated loops only, or with `cublas` the
/// f32/f64 matrix products as cuBLAS thunks; scatter-adds with atomics (`atomic_scatter`, as
/// compile_graph_cuda lowers them).
inline codegen::CudaProgram compile_for_cuda(const ir::Graph& graph, const codegen::CudaCompileOptions& options = {},
                                             bool cublas = false,
                                             const std::vector<std::pair<size_t, size_t>>& donated = {},
                                             bool atomic_scatter = true) {
  const lower::LoweredModule m = lower::lower_graph(graph, "main", donated,
                                                    lower::LoweringOptions{.blas_gemm = cublas,
                                                                           .gemm_function = "ingot_cuda_gemm",
                                                                           .library_conv = false,
                                                                           .atomic_scatter = atomic_scatter});
  std::vector<std::pair<Shape, DType>> in, out;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) out.emplace_back(t.shape, t.dtype);
  return codegen::compile_cuda(m.text, "main", in, out, options);
}

/// The word index of each memref argument's aligned pointer in `launch`'s parameter words, by
/// buffer index (MLIR's descriptor ABI: allocated, aligned, offset, sizes, strides; an index
/// argument is one word); `count`, when given, receives the launch's word count.
inline std::map<int64_t, size_t> aligned_words(const codegen::CudaLaunch& launch, size_t* count = nullptr) {
  std::map<int64_t, size_t> words;
  size_t word = 0;
  for (const codegen::CudaKernelArg& a : launch.args) {
    if (a.kind == codegen::CudaKernelArg::Kind::kIndex) {
      word += 1;
      continue;
    }
    words[a.buffer] = word + 1;
    word += 3 + 2 * a.sizes.size();
  }
  if (count != nullptr) *count = word;
  return words;
}

/// The plan of the donated parameter update p - 0.5 g (p, g (4, 8) f32; p donated to output 0),
/// as jit compiles it: launch 0 updates p's buffer (buffer 0) from g's (buffer 1), launch 1 copies
/// it onto output 0 (buffer 2; the executable passes p's own array there). `update` / `copy` map
/// those launches' buffers to their aligned-pointer words; both launches take `words` words.
/// Plan shapes other than that fail the calling test (EXPECT), with the plan printed.
struct DonatedUpdatePlan {
  codegen::CudaProgram plan;
  std::map<int64_t, size_t> update, copy;
  size_t words = 0;
};

inline DonatedUpdatePlan donated_update_plan(const TraceFn& fn) {
  const std::vector<ir::TensorType> types = {{{4, 8}, DType::kF32}, {{4, 8}, DType::kF32}};
  DonatedUpdatePlan d;
  d.plan = compile_for_cuda(trace(fn, types, "jit"), {}, /*cublas=*/true, /*donated=*/{{0, 0}});
  const std::vector<codegen::CudaLaunch> launches = d.plan.launches();
  EXPECT_EQ(launches.size(), 2u) << d.plan.describe();
  if (launches.size() != 2) return d;
  size_t copy_words = 0;
  d.update = aligned_words(launches[0], &d.words);
  d.copy = aligned_words(launches[1], &copy_words);
  EXPECT_EQ(d.update.size(), 2u) << d.plan.describe();
  EXPECT_TRUE(d.update.count(0) && d.update.count(1) && d.copy.count(0) && d.copy.count(2)) << d.plan.describe();
  EXPECT_EQ(d.words, copy_words) << d.plan.describe();
  return d;
}

/// Assembles `ptx` for `arch` with ptxas; returns "" on success, else ptxas's output.
inline std::string ptxas_errors(const std::string& ptx, const std::string& arch, const std::string& name) {
  const PtxasResult r = run_ptxas(ptx, arch, name);
  return r.ok ? "" : (r.output.empty() ? "ptxas failed" : r.output);
}

/// Every kernel of `p` assembles for every arch it was compiled for, and every launch is within
/// the hardware's limits (block <= 1024 threads, grid x < 2^31, grid y/z <= 65535).
inline void expect_valid_program(const codegen::CudaProgram& p, const std::string& what) {
  for (const codegen::CudaKernelImage& k : p.kernels) {
    for (const auto& [arch, ptx] : k.ptx) {
      EXPECT_EQ(ptxas_errors(ptx, arch, k.name), "") << what << ": kernel " << k.name << " for " << arch;
    }
  }
  for (const codegen::CudaLaunch& l : p.launches()) {
    EXPECT_LE(l.block[0] * l.block[1] * l.block[2], 1024) << what << " " << l.kernel;
    EXPECT_GE(l.block[0] * l.block[1] * l.block[2], 1) << what << " " << l.kernel;
    EXPECT_LT(l.grid[0], int64_t{1} << 31) << what << " " << l.kernel;
    EXPECT_LE(l.grid[1], 65535) << what << " " << l.kernel;
    EXPECT_LE(l.grid[2], 65535) << what << " " << l.kernel;
    for (const codegen::CudaKernelArg& a : l.args) {
      if (a.kind != codegen::CudaKernelArg::Kind::kMemref) continue;
      ASSERT_GE(a.buffer, 0);
      ASSERT_LT(a.buffer, static_cast<int64_t>(p.buffers.size()));
    }
  }
}

}  // namespace ingot::testing
