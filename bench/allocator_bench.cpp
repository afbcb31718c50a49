// allocator_bench: throughput of the caching device allocator (CachingAllocator over the
// host-memory fake backend, i.e. the allocator's own bookkeeping: rounding, best-fit search,
// split and merge) against plain aligned_alloc/free and ingot's HostAllocator, on the same
// allocation traces. Prints a Markdown report with ratios measured in the same run
// (bench/README.md: ratios, never absolute thresholds). On a GPU the baseline would be
// cuMemAlloc/cuMemFree (tens to hundreds of microseconds each, and synchronising), which the
// cache avoids entirely after warm-up; the segment counts below show how rarely it is reached.
//
//   allocator_bench [--quick]    (--quick: fewer repetitions, for a smoke run)
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ingot/runtime/caching_allocator.h"
#include "ingot/runtime/device.h"

namespace ingot::bench {
namespace {

constexpr int64_t kAlign = 64;

/// One step of a trace: allocate `bytes` into slot `slot`, or free slot `slot`.
struct Op {
  bool alloc;
  int slot;
  int64_t bytes;
};

/// An allocation trace that ends with everything freed.
struct Trace {
  std::string name;
  std::vector<Op> ops;
  int slots = 0;
};

/// Alternating allocate/free of one size (a tensor created and dropped in a loop).
Trace steady(int64_t bytes, int pairs) {
  Trace t{fmt::format("alloc+free {}", format_bytes(bytes)), {}, 1};
  for (int i = 0; i < pairs; ++i) {
    t.ops.push_back({true, 0, bytes});
    t.ops.push_back({false, 0, bytes});
  }
  return t;
}

/// A training-step-like mix: up to `live` arrays alive, random sizes (90% under 64 KiB, 10% up
/// to 8 MiB), freed in random order; fixed seed.
Trace mixed(int live, int steps, unsigned seed) {
  Trace t{fmt::format("random mix, {} live, 90% < 64 KiB, 10% < 8 MiB", live), {}, live};
  std::mt19937_64 rng(seed);
  std::vector<int64_t> size(static_cast<size_t>(live), -1);
  for (int s = 0; s < steps; ++s) {
    const int slot = static_cast<int>(rng() % static_cast<uint64_t>(live));
    int64_t& b = size[static_cast<size_t>(slot)];
    if (b >= 0) {
      t.ops.push_back({false, slot, b});
      b = -1;
    } else {
      b = rng() % 10 == 0 ? static_cast<int64_t>(rng() % (8 << 20)) : static_cast<int64_t>(rng() % (64 << 10));
      t.ops.push_back({true, slot, b});
    }
  }
  for (int slot = 0; slot < live; ++slot) {
    if (size[static_cast<size_t>(slot)] >= 0) {
      t.ops.push_back({false, slot, size[static_cast<size_t>(slot)]});
    }
  }
  return t;
}

/// Replays `trace` with `alloc`/`release`; returns seconds.
double replay(const Trace& trace, const std::function<void*(int64_t)>& alloc,
              const std::function<void(void*, int64_t)>& release) {
  std::vector<void*> slots(static_cast<size_t>(trace.slots), nullptr);
  const auto start = std::chrono::steady_clock::now();
  for (const Op& op : trace.ops) {
    void*& p = slots[static_cast<size_t>(op.slot)];
    if (op.alloc) {
      p = alloc(op.bytes);
      benchmark::DoNotOptimize(p);
    } else {
      release(p, op.bytes);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Median of `runs` replays after one untimed warm-up replay.
double median_replay(int runs, const Trace& trace, const std::function<void*(int64_t)>& alloc,
                     const std::function<void(void*, int64_t)>& release) {
  replay(trace, alloc, release);
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(replay(trace, alloc, release));
  std::nth_element(t.begin(), t.begin() + runs / 2, t.end());
  return t[static_cast<size_t>(runs / 2)];
}

void report(const std::vector<Trace>& traces, int runs) {
  fmt::print(
      "| trace | ops | caching | aligned_alloc/free | HostAllocator | caching / "
      "aligned_alloc | segments (backend calls) |\n|---|---|---|---|---|---|---|\n");
  for (const Trace& trace : traces) {
    auto backend = std::make_unique<HostMemoryBackend>(int64_t{64} << 30);
    CachingAllocator caching(std::move(backend));
    const double t_cache = median_replay(
        runs, trace, [&](int64_t n) { return caching.allocate(n, kAlign); },
        [&](void* p, int64_t n) { caching.deallocate(p, n); });
    const double t_malloc = median_replay(
        runs, trace,
        [](int64_t n) {
          return std::aligned_alloc(kAlign,
                                    static_cast<size_t>((std::max<int64_t>(n, 1) + kAlign - 1) / kAlign * kAlign));
        },
        [](void* p, int64_t) { std::free(p); });
    HostAllocator host;
    const double t_host = median_replay(
        runs, trace, [&](int64_t n) { return host.allocate(n, kAlign); },
        [&](void* p, int64_t n) { host.deallocate(p, n); });
    const double n_ops = static_cast<double>(trace.ops.size());
    const CachingAllocatorStats s = caching.caching_stats();
    fmt::print(
        "| {} | {} | {:.1f} Mops/s | {:.1f} Mops/s | {:.1f} Mops/s | {:.2f}x | {} for {} "
        "allocations |\n",
        trace.name, trace.ops.size(), n_ops / t_cache / 1e6, n_ops / t_malloc / 1e6, n_ops / t_host / 1e6,
        t_malloc / t_cache, s.num_segment_allocations, s.num_allocations);
  }
}

}  // namespace
}  // namespace ingot::bench

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int runs = quick ? 3 : 15;
  const int pairs = quick ? 10000 : 200000;
  const int steps = quick ? 20000 : 400000;
  try {
    using namespace ingot::bench;
    fmt::print("# ingot caching allocator benchmark\n\n");
    fmt::print(
        "Median of {} replays of each trace (after one warm-up replay); ops = allocations "
        "+ frees. The caching allocator runs on the host-memory fake backend, so this is "
        "its bookkeeping cost; memory is never touched.\n\n",
        runs);
    report({steady(4 << 10, pairs), steady(256 << 10, pairs), steady(4 << 20, pairs), mixed(64, steps, 1),
            mixed(1024, steps, 2)},
           runs);
  } catch (const std::exception& e) {
    fmt::print(stderr, "allocator_bench: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
