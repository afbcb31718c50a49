// The machine's measured floating-point peak, the denominator of "fraction of peak" figures
// (ingot bench, bench/compiler_bench). kernels/cpu/fma_peak.cpp.
#pragma once

namespace ingot::kernels {

/// The host's measured f32 peak in GFLOP/s (10^9 floating-point operations per second, a fused
/// multiply-add counting 2): `threads` threads each run 12 independent chains of the widest
/// FMA unit present (AVX-512, else AVX2+FMA) for 20 million rounds at once, the sum of their
/// rates; the best of three such rounds (~0.3-1 s in all: the first often runs while the clocks
/// ramp up). Busy cores elsewhere lower it. Throws ingot::Error(kInvalidArgument) for
/// threads < 1.
double measured_fma_peak_gflops(int threads);

}  // namespace ingot::kernels
