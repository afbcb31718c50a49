// The machine's measured f32 FMA peak (include/ingot/kernels/cpu_peak.h): independent FMA chains
// of the widest vector unit on every thread asked for.
#include "ingot/kernels/cpu_peak.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <system_error>
#include <thread>
#include <vector>

#include "ingot/runtime/error.h"

namespace ingot::kernels {

namespace {

/// Makes `value` observable, so the chains that computed it are kept (what
/// benchmark::DoNotOptimize does).
void keep(float value) { asm volatile("" : : "m"(value) : "memory"); }

/// Independent FMA chains per thread: enough to cover the FMA latency (4 cycles) times the two
/// FMA ports of current x86 cores.
constexpr int kFmaChains = 12;

/// Single-precision FLOPs of `iters` rounds of kFmaChains 16-lane FMAs (AVX-512).
__attribute__((target("avx512f"))) double fma_rounds_avx512(int64_t iters) {
  __m512 acc[kFmaChains];
  for (int j = 0; j < kFmaChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i) {
    for (__m512& x : acc) x = _mm512_fmadd_ps(x, a, b);
  }
  // Stored and summed lane by lane (GCC 12 warns inside _mm512_reduce_add_ps's intrinsic).
  alignas(64) float lanes[16];
  float sink = 0;
  for (const __m512& x : acc) {
    _mm512_store_ps(lanes, x);
    for (float l : lanes) sink += l;
  }
  keep(sink);
  return static_cast<double>(iters) * kFmaChains * 16 * 2;
}

/// The same with 8-lane AVX2 FMAs.
__attribute__((target("avx2,fma"))) double fma_rounds_avx2(int64_t iters) {
  __m256 acc[kFmaChains];
  for (int j = 0; j < kFmaChains; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i) {
    for (__m256& x : acc) x = _mm256_fmadd_ps(x, a, b);
  }
  alignas(32) float lanes[8];
  float sink = 0;
  for (const __m256& x : acc) {
    _mm256_store_ps(lanes, x);
    for (float l : lanes) sink += l;
  }
  keep(sink);
  return static_cast<double>(iters) * kFmaChains * 8 * 2;
}

}  // namespace

double fma_round_gflops(int threads);

double measured_fma_peak_gflops(int threads) {
  if (threads < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("measured_fma_peak_gflops: threads is {}", threads),
                "use 1 or more threads");
  }
  // The best of three: the first round often runs while the cores' clocks ramp up.
  double best = 0;
  for (int round = 0; round < 3; ++round) best = std::max(best, fma_round_gflops(threads));
  return best;
}

/// One round of measured_fma_peak_gflops: the summed rate of `threads` threads running at once.
double fma_round_gflops(int threads) {
  if (threads < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("measured_fma_peak_gflops: threads is {}", threads),
                "use 1 or more threads");
  }
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const int64_t iters = 20'000'000;
  std::vector<double> rate(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  try {
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const auto start = std::chrono::steady_clock::now();
        const double flops = avx512 ? fma_rounds_avx512(iters) : fma_rounds_avx2(iters);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        rate[static_cast<size_t>(t)] = flops / seconds / 1e9;
      });
    }
  } catch (const std::system_error& e) {
    for (std::thread& th : pool) th.join();
    throw Error(
        ErrorCode::kFailedPrecondition,
        fmt::format("measured_fma_peak_gflops: cannot start thread {} of {}: {}", pool.size(), threads, e.what()),
        "ask for fewer threads");
  }
  for (std::thread& th : pool) th.join();
  double sum = 0;
  for (double r : rate) sum += r;
  return sum;
}

}  // namespace ingot::kernels
