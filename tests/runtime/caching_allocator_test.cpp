// The caching device allocator on the host-memory fake backend: rounding, size classes, best
// fit, splitting, merging, exact stats, empty_cache, out of memory and misuse errors.
#include "ingot/runtime/caching_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kAlign = 64;

/// An allocator over a fake device of `capacity` bytes; backend() stays valid while it lives.
struct Fixture {
  explicit Fixture(int64_t capacity = 1024 * kMiB) {
    auto b = std::make_unique<HostMemoryBackend>(capacity, "fake:0");
    backend = b.get();
    alloc = std::make_unique<CachingAllocator>(std::move(b));
  }
  HostMemoryBackend* backend;
  std::unique_ptr<CachingAllocator> alloc;
};

char* as_chars(void* p) { return static_cast<char*>(p); }

TEST(CachingAllocator, RoundsToGranulesAndPicksSegmentSizes) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512);
  EXPECT_EQ(CachingAllocator::round_size(1), 512);
  EXPECT_EQ(CachingAllocator::round_size(512), 512);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024);
  EXPECT_EQ(CachingAllocator::round_size(kMiB - 1), kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB + 512), 12 * kMiB);
}

TEST(CachingAllocator, SmallRequestReservesOneSmallSegmentWithExactStats) {
  Fixture f;
  void* p = f.alloc->allocate(100, kAlign);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.requested_bytes, 100);
  EXPECT_EQ(s.allocated_bytes, 512);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB - 512);
  EXPECT_EQ(s.num_segments, 1);
  EXPECT_EQ(s.num_live_blocks, 1);
  EXPECT_EQ(s.num_free_blocks, 1);  // the split-off remainder
  EXPECT_EQ(s.num_allocations, 1);
  EXPECT_EQ(s.num_segment_allocations, 1);
  EXPECT_EQ(f.backend->bytes_held(), 2 * kMiB);
  AllocatorStats base = f.alloc->stats();
  EXPECT_EQ(base.bytes_in_use, 100);
  EXPECT_EQ(base.peak_bytes_in_use, 100);
  EXPECT_EQ(base.num_allocations, 1);
  f.alloc->deallocate(p, 100);
  s = f.alloc->caching_stats();
  EXPECT_EQ(s.requested_bytes, 0);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);  // cached, not returned
  EXPECT_EQ(s.num_free_blocks, 1);        // merged back into one block
  EXPECT_EQ(s.num_frees, 1);
  EXPECT_EQ(f.alloc->stats().peak_bytes_in_use, 100);
}

TEST(CachingAllocator, FreedBlockIsReusedWithoutNewSegment) {
  Fixture f;
  void* a = f.alloc->allocate(1000, kAlign);
  f.alloc->deallocate(a, 1000);
  void* b = f.alloc->allocate(900, kAlign);  // same rounded size 1024
  EXPECT_EQ(a, b);
  EXPECT_EQ(f.backend->raw_allocations(), 1);
  EXPECT_EQ(f.alloc->caching_stats().num_segment_allocations, 1);
  f.alloc->deallocate(b, 900);
}

TEST(CachingAllocator, ConsecutiveRequestsSplitOneSegment) {
  Fixture f;
  void* a = f.alloc->allocate(512, kAlign);
  void* b = f.alloc->allocate(512, kAlign);
  void* c = f.alloc->allocate(2000, kAlign);
  EXPECT_EQ(as_chars(b), as_chars(a) + 512);
  EXPECT_EQ(as_chars(c), as_chars(a) + 1024);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.num_segments, 1);
  EXPECT_EQ(s.allocated_bytes, 512 + 512 + 2048);
  EXPECT_EQ(s.requested_bytes, 512 + 512 + 2000);
  EXPECT_EQ(s.num_free_blocks, 1);
  f.alloc->deallocate(a, 512);
  f.alloc->deallocate(b, 512);
  f.alloc->deallocate(c, 2000);
}

TEST(CachingAllocator, FreedNeighboursMergeIntoOneBlock) {
  Fixture f;
  void* a = f.alloc->allocate(512, kAlign);
  void* b = f.alloc->allocate(512, kAlign);
  void* c = f.alloc->allocate(512, kAlign);
  f.alloc->deallocate(a, 512);
  f.alloc->deallocate(c, 512);  // merges with the tail remainder
  EXPECT_EQ(f.alloc->caching_stats().num_free_blocks, 2);
  f.alloc->deallocate(b, 512);  // merges with both: the whole segment
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.num_free_blocks, 1);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB);
  // The merged block serves a request of the whole segment's size without a new segment.
  void* whole = f.alloc->allocate(kMiB, kAlign);
  EXPECT_EQ(whole, a);
  EXPECT_EQ(f.backend->raw_allocations(), 1);
  f.alloc->deallocate(whole, kMiB);
}

TEST(CachingAllocator, BestFitPicksTheSmallestLargeEnoughBlock) {
  Fixture f;
  void* big = f.alloc->allocate(4096, kAlign);
  void* sep1 = f.alloc->allocate(512, kAlign);
  void* small = f.alloc->allocate(1024, kAlign);
  void* sep2 = f.alloc->allocate(512, kAlign);
  f.alloc->deallocate(big, 4096);
  f.alloc->deallocate(small, 1024);
  // Free blocks: 4096 at `big`, 1024 at `small`, and the segment's tail.
  EXPECT_EQ(f.alloc->allocate(1000, kAlign), small);
  void* p = f.alloc->allocate(3000, kAlign);  // rounded 3072: only `big` fits among the holes
  EXPECT_EQ(p, big);
  // The 1024-byte rest of `big` was split off and is the best fit for the next 1 KiB.
  EXPECT_EQ(as_chars(f.alloc->allocate(1024, kAlign)), as_chars(big) + 3072);
  EXPECT_EQ(f.alloc->caching_stats().num_segments, 1);
  (void)sep1;
  (void)sep2;
}

TEST(CachingAllocator, LargeRequestsUseTheLargePoolAndTwentyMiBSegments) {
  Fixture f;
  void* s = f.alloc->allocate(1000, kAlign);
  void* l1 = f.alloc->allocate(kMiB + 1, kAlign);  // rounded 1 MiB + 512: large pool
  CachingAllocatorStats st = f.alloc->caching_stats();
  EXPECT_EQ(st.num_segments, 2);  // the small segment's free tail does not serve it
  EXPECT_EQ(st.reserved_bytes, 2 * kMiB + 20 * kMiB);
  void* l2 = f.alloc->allocate(5 * kMiB, kAlign);  // from the rest of the 20 MiB segment
  EXPECT_EQ(as_chars(l2), as_chars(l1) + kMiB + 512);
  EXPECT_EQ(f.alloc->caching_stats().num_segments, 2);
  f.alloc->deallocate(l1, kMiB + 1);
  f.alloc->deallocate(l2, 5 * kMiB);
  f.alloc->deallocate(s, 1000);
}

TEST(CachingAllocator, LargeBlockIsNotSplitForOneMiBOrLessAndCountsWhole) {
  Fixture f;
  // 15 MiB -> a 16 MiB segment; the 1 MiB rest is not split off (large pool splits > 1 MiB).
  void* p = f.alloc->allocate(15 * kMiB, kAlign);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.reserved_bytes, 16 * kMiB);
  EXPECT_EQ(s.allocated_bytes, 16 * kMiB);
  EXPECT_EQ(s.requested_bytes, 15 * kMiB);
  EXPECT_EQ(s.num_free_blocks, 0);
  f.alloc->deallocate(p, 15 * kMiB);
  // 14 MiB: the cached 16 MiB block serves it and splits the 2 MiB rest off.
  void* q = f.alloc->allocate(14 * kMiB, kAlign);
  EXPECT_EQ(q, p);
  s = f.alloc->caching_stats();
  EXPECT_EQ(s.allocated_bytes, 14 * kMiB);
  EXPECT_EQ(s.num_free_blocks, 1);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB);
  f.alloc->deallocate(q, 14 * kMiB);
}

TEST(CachingAllocator, EmptyCacheReturnsOnlyEntirelyFreeSegments) {
  Fixture f;
  void* a = f.alloc->allocate(100, kAlign);          // small segment A (stays live)
  void* big = f.alloc->allocate(12 * kMiB, kAlign);  // 12 MiB segment B
  f.alloc->deallocate(big, 12 * kMiB);
  EXPECT_EQ(f.alloc->empty_cache(), 12 * kMiB);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.num_segments, 1);
  EXPECT_EQ(s.num_segment_frees, 1);
  EXPECT_EQ(f.backend->bytes_held(), 2 * kMiB);
  f.alloc->deallocate(a, 100);
  EXPECT_EQ(f.alloc->empty_cache(), 2 * kMiB);
  EXPECT_EQ(f.backend->bytes_held(), 0);
  EXPECT_EQ(f.alloc->caching_stats().reserved_bytes, 0);
  EXPECT_EQ(f.alloc->empty_cache(), 0);
}

TEST(CachingAllocator, PeaksTrackAndReset) {
  Fixture f;
  void* a = f.alloc->allocate(3000, kAlign);
  void* b = f.alloc->allocate(5000, kAlign);
  f.alloc->deallocate(a, 3000);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.peak_requested_bytes, 8000);
  EXPECT_EQ(s.peak_allocated_bytes, 3072 + 5120);
  EXPECT_EQ(s.peak_reserved_bytes, 2 * kMiB);
  f.alloc->reset_peak();
  s = f.alloc->caching_stats();
  EXPECT_EQ(s.peak_requested_bytes, 5000);
  EXPECT_EQ(s.peak_allocated_bytes, 5120);
  EXPECT_EQ(f.alloc->stats().peak_bytes_in_use, 5000);
  f.alloc->deallocate(b, 5000);
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheAndRetries) {
  Fixture f(21 * kMiB);
  void* a = f.alloc->allocate(100, kAlign);
  f.alloc->deallocate(a, 100);  // a 2 MiB segment stays cached
  // 5 MiB needs a 20 MiB segment; 19 MiB are free until the cached segment is released.
  void* p = f.alloc->allocate(5 * kMiB, kAlign);
  ASSERT_NE(p, nullptr);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_segment_frees, 1);
  EXPECT_EQ(s.reserved_bytes, 20 * kMiB);
  EXPECT_EQ(s.num_ooms, 0);
  f.alloc->deallocate(p, 5 * kMiB);
}

TEST(CachingAllocator, OutOfMemoryErrorNamesRequestedFreeAndReservedBytes) {
  Fixture f(21 * kMiB);
  void* p = f.alloc->allocate(5 * kMiB, kAlign);  // 20 MiB segment, 1 MiB left on the device
  expect_error([&] { f.alloc->allocate(16 * kMiB, kAlign); }, ErrorCode::kOutOfMemory,
               {"fake:0 out of memory", "tried to allocate 16777216 bytes (16.00 MiB)",
                "needing a new segment of 16777216 bytes", "1048576 bytes (1.00 MiB) free",
                "of 22020096 bytes (21.00 MiB) total", "20971520 bytes (20.00 MiB) reserved",
                "5242880 bytes (5.00 MiB) allocated in 1 live blocks", "hint: reduce the batch"});
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.reserved_bytes, 20 * kMiB);  // the live segment was not released
  // The failed request left the allocator usable.
  void* q = f.alloc->allocate(kMiB + 512, kAlign);
  EXPECT_EQ(as_chars(q), as_chars(p) + 5 * kMiB);
  f.alloc->deallocate(q, kMiB + 512);
  f.alloc->deallocate(p, 5 * kMiB);
}

TEST(CachingAllocator, SmallRequestsNeedTheirTwentyMiBSegmentEvenOnASmallDevice) {
  // As in PyTorch, a 3 MiB request reserves a 20 MiB segment: a 4 MiB device cannot hold it.
  Fixture f(4 * kMiB);
  expect_error(
      [&] { f.alloc->allocate(3 * kMiB, kAlign); }, ErrorCode::kOutOfMemory,
      {"tried to allocate 3145728 bytes (3.00 MiB)", "segment of 20971520 bytes", "4194304 bytes (4.00 MiB) free"});
  expect_error([&] { f.alloc->allocate(std::numeric_limits<int64_t>::max(), kAlign); }, ErrorCode::kOutOfMemory,
               {"tried to allocate 9223372036854775807 bytes"});
}

TEST(CachingAllocator, MisuseIsAClearError) {
  Fixture f;
  void* a = f.alloc->allocate(1024, kAlign);
  void* b = f.alloc->allocate(1024, kAlign);
  int on_stack = 0;
  expect_error([&] { f.alloc->deallocate(&on_stack, 4); }, ErrorCode::kInvalidArgument,
               {"was not allocated by the allocator of fake:0"});
  expect_error([&] { f.alloc->deallocate(as_chars(a) + 512, 512); }, ErrorCode::kInvalidArgument,
               {"points into a segment of fake:0", "not the start of an allocation"});
  expect_error([&] { f.alloc->deallocate(a, 1000); }, ErrorCode::kInvalidArgument,
               {"allocated with 1024 bytes", "bytes = 1000"});
  f.alloc->deallocate(a, 1024);
  expect_error([&] { f.alloc->deallocate(a, 1024); }, ErrorCode::kInvalidArgument, {"already free (double free)"});
  expect_error([&] { f.alloc->allocate(-1, kAlign); }, ErrorCode::kInvalidArgument, {"bytes = -1"});
  expect_error([&] { f.alloc->allocate(8, 3); }, ErrorCode::kInvalidArgument, {"alignment = 3", "<= 256"});
  expect_error([&] { f.alloc->allocate(8, 512); }, ErrorCode::kInvalidArgument, {"alignment = 512"});
  f.alloc->deallocate(nullptr, 0);  // no-op, as HostAllocator
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.num_live_blocks, 1);
  EXPECT_EQ(s.requested_bytes, 1024);
  EXPECT_EQ(s.num_frees, 1);
  f.alloc->deallocate(b, 1024);
  expect_error([] { HostMemoryBackend bad(-5); }, ErrorCode::kInvalidArgument, {"capacity_bytes = -5"});
}

TEST(CachingAllocator, ZeroByteAllocationsAreDistinctAndAligned) {
  Fixture f;
  void* a = f.alloc->allocate(0, 256);
  void* b = f.alloc->allocate(0, 256);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
  EXPECT_EQ(f.alloc->caching_stats().allocated_bytes, 1024);
  f.alloc->deallocate(a, 0);
  f.alloc->deallocate(b, 0);
}

TEST(CachingAllocator, DestructorReturnsEverySegment) {
  auto backend = std::make_unique<HostMemoryBackend>(100 * kMiB);
  HostMemoryBackend* raw = backend.get();
  // The backend dies with the allocator, so count through a wrapper that outlives it.
  struct Counting final : RawMemoryBackend {
    explicit Counting(std::unique_ptr<HostMemoryBackend> b, int64_t* frees) : inner(std::move(b)), frees(frees) {}
    void* allocate_raw(int64_t bytes) override { return inner->allocate_raw(bytes); }
    void free_raw(void* p, int64_t bytes) override {
      inner->free_raw(p, bytes);
      *frees += bytes;
    }
    DeviceMemoryInfo memory_info() const override { return inner->memory_info(); }
    int64_t segment_alignment() const override { return inner->segment_alignment(); }
    std::string device_name() const override { return "counting"; }
    std::unique_ptr<HostMemoryBackend> inner;
    int64_t* frees;
  };
  int64_t freed = 0;
  {
    CachingAllocator alloc(std::make_unique<Counting>(std::move(backend), &freed));
    void* a = alloc.allocate(100, kAlign);
    void* b = alloc.allocate(30 * kMiB, kAlign);
    alloc.deallocate(a, 100);
    (void)b;
    EXPECT_EQ(raw->bytes_held(), 32 * kMiB);
  }
  EXPECT_EQ(freed, 32 * kMiB);
}

TEST(CachingAllocator, WorksAsTheAllocatorOfADevice) {
  auto backend = std::make_unique<HostMemoryBackend>(64 * kMiB, "cuda:7");
  auto alloc = std::make_unique<CachingAllocator>(std::move(backend));
  CachingAllocator* ca = alloc.get();
  Device dev(DeviceKind::kCuda, 7, std::move(alloc));
  {
    std::shared_ptr<Buffer> buf = Buffer::allocate(dev, 3000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % Buffer::kAlignment, 0u);
    EXPECT_EQ(dev.allocator().stats().bytes_in_use, 3000);
    EXPECT_EQ(ca->caching_stats().allocated_bytes, 3072);
  }
  EXPECT_EQ(dev.allocator().stats().bytes_in_use, 0);
  EXPECT_EQ(dev.allocator().stats().num_frees, 1);
  EXPECT_EQ(dev.name(), "cuda:7");
}

/// Random allocations and frees against a model: blocks never overlap (each block is filled
/// with its id and checked before it is freed), stats match the live set exactly, and freeing
/// everything merges every segment back into one free block.
TEST(CachingAllocator, RandomSequenceKeepsBlocksDisjointAndStatsExact) {
  Fixture f(2048 * kMiB);
  std::mt19937_64 rng(42);
  struct Live {
    void* ptr;
    int64_t bytes;
    unsigned char tag;
  };
  std::vector<Live> live;
  int64_t requested = 0, allocated = 0, large_live = 0;
  auto check_and_free = [&](size_t i) {
    const Live& l = live[i];
    const auto* p = static_cast<const unsigned char*>(l.ptr);
    for (int64_t k = 0; k < l.bytes; k += 97) ASSERT_EQ(p[k], l.tag) << "block overwritten";
    f.alloc->deallocate(l.ptr, l.bytes);
    requested -= l.bytes;
    allocated -= CachingAllocator::round_size(l.bytes);
    if (CachingAllocator::round_size(l.bytes) > CachingAllocator::kSmallSize) --large_live;
    live[i] = live.back();
    live.pop_back();
  };
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && rng() % 2 == 0) {
      check_and_free(static_cast<size_t>(rng() % live.size()));
      continue;
    }
    // Mostly small, some large (up to 24 MiB) requests.
    const int64_t bytes =
        rng() % 100 < 3 ? static_cast<int64_t>(rng() % (24 * kMiB)) : static_cast<int64_t>(rng() % (64 * kKiB));
    void* p = f.alloc->allocate(bytes, kAlign);
    const auto tag = static_cast<unsigned char>(step % 251 + 1);
    std::memset(p, tag, static_cast<size_t>(bytes));
    live.push_back({p, bytes, tag});
    requested += bytes;
    CachingAllocatorStats s = f.alloc->caching_stats();
    // A large block may keep an unsplit remainder of <= 1 MiB, so allocated can exceed the sum
    // of rounded sizes by that much per live large block; small blocks are exact.
    allocated += CachingAllocator::round_size(bytes);
    if (CachingAllocator::round_size(bytes) > CachingAllocator::kSmallSize) ++large_live;
    ASSERT_EQ(s.requested_bytes, requested);
    ASSERT_GE(s.allocated_bytes, allocated);
    ASSERT_LE(s.allocated_bytes, allocated + large_live * kMiB);
    ASSERT_LE(s.allocated_bytes, s.reserved_bytes);
    ASSERT_EQ(s.num_live_blocks, static_cast<int64_t>(live.size()));
    ASSERT_EQ(s.reserved_bytes, f.backend->bytes_held());
  }
  while (!live.empty()) check_and_free(live.size() - 1);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.requested_bytes, 0);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.num_free_blocks, s.num_segments);  // every segment merged back to one block
  EXPECT_EQ(f.alloc->empty_cache(), s.reserved_bytes);
  EXPECT_EQ(f.backend->bytes_held(), 0);
}

TEST(CachingAllocator, ConcurrentThreadsGetDisjointBlocks) {
  Fixture f(512 * kMiB);
  constexpr int kThreads = 4;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<void*, int64_t>> mine;
      for (int i = 0; i < 2000; ++i) {
        if (!mine.empty() && rng() % 2 == 0) {
          auto [p, n] = mine.back();
          mine.pop_back();
          const auto* c = static_cast<const unsigned char*>(p);
          for (int64_t k = 0; k < n; k += 61) {
            if (c[k] != t + 1) ++failures[static_cast<size_t>(t)];
          }
          f.alloc->deallocate(p, n);
        } else {
          const int64_t n = static_cast<int64_t>(rng() % 20000);
          void* p = f.alloc->allocate(n, kAlign);
          std::memset(p, t + 1, static_cast<size_t>(n));
          mine.emplace_back(p, n);
        }
      }
      for (auto [p, n] : mine) f.alloc->deallocate(p, n);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0);
  CachingAllocatorStats s = f.alloc->caching_stats();
  EXPECT_EQ(s.num_live_blocks, 0);
  EXPECT_EQ(s.requested_bytes, 0);
  EXPECT_EQ(s.num_allocations, s.num_frees);
}

TEST(FormatBytes, UsesBinaryPrefixes) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(1536), "1536 bytes (1.50 KiB)");
  EXPECT_EQ(format_bytes(3 * kMiB), "3145728 bytes (3.00 MiB)");
  EXPECT_EQ(format_bytes(int64_t{5} << 30), "5368709120 bytes (5.00 GiB)");
}

}  // namespace
}  // namespace ingot
