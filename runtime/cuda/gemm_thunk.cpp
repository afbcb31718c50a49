// CudaExecutable's GEMM thunks (include/ingot/runtime/cuda_executable.h): the BLAS calls of one
// thunk, and the fallback of a cuBLASLt epilogue without a kernel -- the plain GEMM, then the
// bias + activation kernel (kCudaBiasKernel, kernels/cuda/bias.cu) on its result.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "cuda/driver_api.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/error.h"

namespace ingot {

void CudaExecutable::run_gemm(size_t index, const CudaGemm& g, std::span<const uint64_t> addresses,
                              const CudaStream& stream) const {
  // A batched GEMM is one strided-batched call (per element only when C matrices overlap).
  const std::vector<CudaBlasGemm> calls = cuda_blas_calls(g, addresses);
  if (g.epilogue == CudaGemm::Epilogue::kNone) {
    for (const CudaBlasGemm& c : calls) blas_->gemm(c, stream);
    return;
  }
  const CudaBlasGemm& fused = calls.front();  // epilogues are on GEMMs of batch 1 (validate_cuda_program)
  std::string& fallback = epilogue_fallbacks_[index];
  if (fallback.empty()) {
    try {
      blas_->gemm(fused, stream);
      return;
    } catch (const Error& e) {
      const bool have_kernel = std::any_of(program_.kernels.begin(), program_.kernels.end(),
                                           [](const CudaKernelImage& k) { return k.name == kCudaBiasKernel; });
      // Only "no kernel for this epilogue" has a fallback; nothing was enqueued then.
      if (e.code() != ErrorCode::kUnimplemented || !have_kernel) throw;
      fallback = e.message();
    }
  }
  CudaBlasGemm plain = fused;
  plain.epilogue = CudaGemm::Epilogue::kNone;
  plain.bias = 0;
  blas_->gemm(plain, stream);
  launch_bias_kernel(fused, stream);
}

void CudaExecutable::launch_bias_kernel(const CudaBlasGemm& call, const CudaStream& stream) const {
  // The launch of kernels::bias_act_launch (include/ingot/kernels/cuda_bias.h: 256 threads, at
  // most 4096 blocks; the kernel strides over the rest). Every parameter is passed from 8 bytes:
  // the driver reads the i32 `relu` from the first 4 (little-endian).
  constexpr int64_t kThreads = 256, kMaxBlocks = 4096;
  const int64_t total = call.m * call.n;
  uint64_t c = call.c, bias = call.bias;
  int64_t m = call.m, n = call.n, ldc = call.ldc;
  int64_t relu = call.epilogue == CudaGemm::Epilogue::kBiasRelu ? 1 : 0;
  void* args[] = {&c, &bias, &m, &n, &ldc, &relu};
  const auto blocks = static_cast<unsigned>(std::min((total + kThreads - 1) / kThreads, kMaxBlocks));
  const cuda_detail::DriverApi& api = device_.driver()->api();
  cuda_detail::check(
      api,
      api.cuLaunchKernel(function_of(kCudaBiasKernel), blocks, 1, 1, kThreads, 1, 1, 0, stream.handle(), args, nullptr),
      "cuLaunchKernel",
      fmt::format("launching the {} epilogue's bias kernel (m = {}, n = {}) on {}", epilogue_name(call.epilogue),
                  call.m, call.n, device_.name()));
}

std::vector<std::string> CudaExecutable::epilogue_fallbacks() const {
  std::lock_guard<std::mutex> lock(run_mu_);
  return epilogue_fallbacks_;
}

}  // namespace ingot
