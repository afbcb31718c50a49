// CudaProgram accessors (include/ingot/runtime/cuda_program.h).
#include "ingot/runtime/cuda_program.h"

#include <fmt/format.h>

#include <algorithm>

#include "ingot/runtime/error.h"

namespace ingot {

std::vector<CudaLaunch> CudaProgram::launches() const {
  std::vector<CudaLaunch> out;
  for (const CudaThunk& t : thunks) {
    if (t.kind == CudaThunk::Kind::kLaunch) out.push_back(t.launch);
  }
  return out;
}

int64_t CudaProgram::gemm_count() const {
  return std::count_if(thunks.begin(), thunks.end(), [](const CudaThunk& t) { return t.kind == CudaThunk::Kind::kGemm; });
}

const CudaKernelImage& CudaProgram::kernel(const std::string& name) const {
  for (const CudaKernelImage& k : kernels) {
    if (k.name == name) return k;
  }
  throw Error(ErrorCode::kNotFound, fmt::format("CudaProgram has no kernel '{}'", name));
}

}  // namespace ingot
