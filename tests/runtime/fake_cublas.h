// The log of the fake cuBLAS + cuBLASLt module (tests/runtime/fake_cublas.cpp): what it saw, read
// by runtime_tests through the module's exported ingot_fake_cublas_log().
#pragma once

#include <cstdint>

/// What the fake cuBLAS saw since the last ingot_fake_cublas_reset_log().
struct FakeCublasLog {
  int64_t gemm_calls = 0;           ///< cublas{S,D}gemm_v2
  int64_t strided_calls = 0;        ///< cublas{S,D}gemmStridedBatched
  int64_t lt_matmul_calls = 0;      ///< cublasLtMatmul
  int64_t last_batch = 0;           ///< batchCount of the last strided call
  uint32_t last_epilogue = 0;       ///< cublasLtEpilogue_t of the last cublasLtMatmul
  uint32_t last_alignment[4] = {};  ///< A, B, C, D minimum alignments (bytes) of the last heuristic query
  uint64_t last_workspace = ~0ull;  ///< maximum workspace bytes of the last heuristic query
  int64_t gemm_ex_calls = 0;        ///< cublasGemmEx
  int64_t strided_ex_calls = 0;     ///< cublasGemmStridedBatchedEx
  int32_t last_ex_type = -1;        ///< cudaDataType of the last *Ex call's operands
  int32_t last_ex_compute = -1;     ///< cublasComputeType_t of the last *Ex call
};
