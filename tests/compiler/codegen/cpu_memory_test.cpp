// The CPU back end's working memory: CpuKernelStats::peak_alloc_bytes from the entry's
// allocations, and CpuKernel::run refusing (kOutOfMemory, nothing changed) a step whose working
// memory cannot be had, checked in a child process under an address-space limit (RLIMIT_AS).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "child_process.h"
#include "ingot/codegen/cpu_compiler.h"
#include "ingot/runtime/error.h"

namespace ingot::codegen {
namespace {

/// main(x: f32[1], w: f32[K,1], s: f32[4]) -> (f32[N,1], f32[4]): the matmul of x broadcast to an
/// [N, K] intermediate (a buffer of N*K*4 bytes: a named matmul is not fused with its producer)
/// with w, and s + 1 (returned in s's own buffer when the caller passes it, as a donated
/// parameter's update is).
std::string broadcast_matmul(int64_t n, int64_t k) {
  return fmt::format(R"(
#x = affine_map<(d0, d1) -> (0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#v = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<1xf32>, %w: tensor<{1}x1xf32>, %s: tensor<4xf32>) -> (tensor<{0}x1xf32>, tensor<4xf32>)
    attributes {{llvm.emit_c_interface}} {{
  %e = tensor.empty() : tensor<{0}x{1}xf32>
  %big = linalg.generic {{indexing_maps = [#x, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x : tensor<1xf32>) outs(%e : tensor<{0}x{1}xf32>) {{
    ^bb0(%a: f32, %o: f32):
      linalg.yield %a : f32
  }} -> tensor<{0}x{1}xf32>
  %zero = arith.constant 0.0 : f32
  %r0 = tensor.empty() : tensor<{0}x1xf32>
  %r1 = linalg.fill ins(%zero : f32) outs(%r0 : tensor<{0}x1xf32>) -> tensor<{0}x1xf32>
  %r = linalg.matmul ins(%big, %w : tensor<{0}x{1}xf32>, tensor<{1}x1xf32>) outs(%r1 : tensor<{0}x1xf32>)
      -> tensor<{0}x1xf32>
  %one = arith.constant 1.0 : f32
  %t = linalg.generic {{indexing_maps = [#v, #v], iterator_types = ["parallel"]}}
      ins(%s : tensor<4xf32>) outs(%s : tensor<4xf32>) {{
    ^bb0(%a: f32, %o: f32):
      %p = arith.addf %a, %one : f32
      linalg.yield %p : f32
  }} -> tensor<4xf32>
  return %r, %t : tensor<{0}x1xf32>, tensor<4xf32>
}}
)",
                     n, k);
}

std::unique_ptr<CpuKernel> compile_broadcast_matmul(int64_t n, int64_t k) {
  return compile_cpu(broadcast_matmul(n, k), "main", {{{1}, DType::kF32}, {{k, 1}, DType::kF32}, {{4}, DType::kF32}},
                     {{{n, 1}, DType::kF32}, {{4}, DType::kF32}});
}

TEST(CpuMemory, ThePeakCountsTheEntrysIntermediateBuffers) {
  auto kernel = compile_broadcast_matmul(64, 32);
  // The [64, 32] broadcast (8 KiB) is the only buffer the entry allocates.
  EXPECT_EQ(kernel->stats().peak_alloc_bytes, 64 * 32 * 4);
  std::vector<Array> in = {Array::full({1}, 2.0, DType::kF32), Array::full({32, 1}, 0.5, DType::kF32),
                           Array::full({4}, 3.0, DType::kF32)};
  std::vector<Array> out = {Array::full({64, 1}, -1, DType::kF32), in[2]};  // s updated in place
  kernel->run(in, out);
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(64, 32.0f));
  EXPECT_EQ(in[2].to_vector<float>(), std::vector<float>(4, 4.0f));
}

/// Bytes of address space this process has mapped now (VmSize of /proc/self/status).
int64_t mapped_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

constexpr const char* kWorkerFlag = "INGOT_CPU_MEMORY_WORKER";

// Runs in a child (CpuMemory.AStepWithoutItsWorkingMemoryFailsBeforeChangingAnything): compiles a
// step with a 2 GiB intermediate, caps the address space at what is mapped now plus 512 MiB, and
// expects kOutOfMemory naming the bytes, with the in-place updated buffer unchanged.
TEST(CpuMemoryWorker, UnderAnAddressSpaceLimit) {
  if (std::getenv(kWorkerFlag) == nullptr) GTEST_SKIP() << "run by CpuMemory.AStepWithout... in a child process";
  constexpr int64_t n = 32768, k = 16384;  // the broadcast is 2 GiB
  auto kernel = compile_broadcast_matmul(n, k);
  ASSERT_EQ(kernel->stats().peak_alloc_bytes, n * k * 4);
  std::vector<Array> in = {Array::full({1}, 2.0, DType::kF32), Array::full({k, 1}, 0.5, DType::kF32),
                           Array::full({4}, 3.0, DType::kF32)};
  std::vector<Array> out = {Array::full({n, 1}, -1, DType::kF32), in[2]};
  const int64_t mapped = mapped_bytes();
  ASSERT_GT(mapped, 0);
  const rlimit limit{static_cast<rlim_t>(mapped + (int64_t{512} << 20)),
                     static_cast<rlim_t>(mapped + (int64_t{512} << 20))};
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &limit), 0);
  try {
    kernel->run(in, out);
    ADD_FAILURE() << "a step needing 2 GiB ran under a 512 MiB margin";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(e.message().find("'main' needs 2147483648 bytes (2048.0 MiB)"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("nothing ran"), std::string::npos) << e.what();
  }
  EXPECT_EQ(in[2].to_vector<float>(), std::vector<float>(4, 3.0f));    // not updated
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(n, -1.0f));  // not written
}

TEST(CpuMemory, AStepWithoutItsWorkingMemoryFailsBeforeChangingAnything) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: an address-space limit cannot be set";
#endif
  // A child process: the limit must not constrain this one (nor its other tests' threads).
  std::vector<std::string> env = testing::rank_env(0, 1, 0, kWorkerFlag);
  const pid_t pid = testing::spawn_self("CpuMemoryWorker.UnderAnAddressSpaceLimit", env);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(testing::wait_child(pid, std::chrono::steady_clock::now() + std::chrono::seconds(240)), 0);
}

}  // namespace
}  // namespace ingot::codegen
