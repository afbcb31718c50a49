// CachingAllocator: a PyTorch-style caching allocator for device memory, written against a small
// raw-memory backend so that its logic runs (and is tested) on the CPU with host memory.
//
// Algorithm (after PyTorch's CUDACachingAllocator, c10/cuda/CUDACachingAllocator.cpp):
//   - requests are rounded up to a multiple of 512 bytes (kMinBlockSize; 0 bytes -> 512);
//   - rounded sizes <= 1 MiB (kSmallSize) are served from the small pool, larger ones from the
//     large pool; the pools never share memory;
//   - a request with no fitting free block makes the backend allocate a segment: 2 MiB
//     (kSmallBuffer) for small requests, 20 MiB (kLargeBuffer) for large requests under 10 MiB
//     (kMinLargeAlloc), else the request rounded up to 2 MiB (kRoundLarge);
//   - the free block used is the best fit: the smallest free block of the pool that is large
//     enough (ties: lowest address);
//   - a block larger than the request is split when the remainder is >= 512 bytes (small pool)
//     or > 1 MiB (large pool); the remainder stays cached as a free block;
//   - a freed block is merged with its free neighbours in the same segment;
//   - when the backend is out of memory, every cached segment that is entirely free is returned
//     to the backend and the allocation retried once; if that fails too, ingot::Error
//     (kOutOfMemory) names the requested bytes, the device's free bytes and this allocator's
//     reserved and allocated bytes.
// Memory freed with deallocate() is reusable at once: on a GPU the allocator is stream-ordered
// with respect to the one stream that uses its memory (the device's compute stream), as
// PyTorch's allocator is for the current stream.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ingot/runtime/device.h"

namespace ingot {

/// Free and total memory of a device, in bytes.
struct DeviceMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};

/// Raw device memory handed out in whole segments: cuMemAlloc/cuMemFree on CUDA devices, host
/// memory for tests and benchmarks. Called by one CachingAllocator, under its lock.
class RawMemoryBackend {
 public:
  virtual ~RawMemoryBackend() = default;
  /// Allocates a segment of `bytes` (> 0) aligned to segment_alignment(). Returns nullptr when
  /// the device is out of memory; throws ingot::Error for any other failure.
  virtual void* allocate_raw(int64_t bytes) = 0;
  /// Frees a segment returned by allocate_raw() with its size. Throws ingot::Error on failure.
  virtual void free_raw(void* ptr, int64_t bytes) = 0;
  /// The device's free and total bytes (cuMemGetInfo on CUDA), for out-of-memory messages.
  virtual DeviceMemoryInfo memory_info() const = 0;
  /// Alignment of every segment start, in bytes (a power of two; 256 for cuMemAlloc).
  virtual int64_t segment_alignment() const = 0;
  /// Name of the device for messages: "cuda:0", "host".
  virtual std::string device_name() const = 0;
};

/// Host memory with a capacity: the fake device of the allocator's tests and benchmark.
/// allocate_raw() returns nullptr once the segments held would exceed `capacity_bytes`.
/// Thread-safe only under one CachingAllocator (as every backend).
class HostMemoryBackend final : public RawMemoryBackend {
 public:
  /// `capacity_bytes` >= 0 (else ingot::Error kInvalidArgument); `name` is used in messages.
  explicit HostMemoryBackend(int64_t capacity_bytes, std::string name = "host");
  ~HostMemoryBackend() override;
  HostMemoryBackend(const HostMemoryBackend&) = delete;
  HostMemoryBackend& operator=(const HostMemoryBackend&) = delete;

  void* allocate_raw(int64_t bytes) override;
  void free_raw(void* ptr, int64_t bytes) override;
  /// free = capacity - bytes held in segments, total = capacity.
  DeviceMemoryInfo memory_info() const override;
  int64_t segment_alignment() const override { return kSegmentAlignment; }
  std::string device_name() const override { return name_; }

  /// Segment alignment of host segments (as cuMemAlloc's guarantee).
  static constexpr int64_t kSegmentAlignment = 256;
  /// Bytes currently held in segments.
  int64_t bytes_held() const { return held_; }
  /// Number of successful allocate_raw() and free_raw() calls.
  int64_t raw_allocations() const { return raw_allocations_; }
  int64_t raw_frees() const { return raw_frees_; }

 private:
  int64_t capacity_;
  std::string name_;
  int64_t held_ = 0;
  int64_t raw_allocations_ = 0;
  int64_t raw_frees_ = 0;
  std::unordered_map<void*, int64_t> segments_;
};

/// Counters of a CachingAllocator. All sizes in bytes.
struct CachingAllocatorStats {
  int64_t requested_bytes = 0;          ///< sum of the sizes callers asked for, of live blocks
  int64_t peak_requested_bytes = 0;     ///< maximum of requested_bytes (since reset_peak())
  int64_t allocated_bytes = 0;          ///< sum of the rounded sizes of live blocks
  int64_t peak_allocated_bytes = 0;     ///< maximum of allocated_bytes (since reset_peak())
  int64_t reserved_bytes = 0;           ///< sum of the sizes of segments held from the backend
  int64_t peak_reserved_bytes = 0;      ///< maximum of reserved_bytes (since reset_peak())
  int64_t cached_bytes = 0;             ///< reserved_bytes - allocated_bytes (free blocks)
  int64_t num_segments = 0;             ///< segments held from the backend
  int64_t num_live_blocks = 0;          ///< blocks handed out and not yet freed
  int64_t num_free_blocks = 0;          ///< cached free blocks (both pools)
  int64_t num_allocations = 0;          ///< successful allocate() calls since creation
  int64_t num_frees = 0;                ///< deallocate() calls since creation
  int64_t num_segment_allocations = 0;  ///< successful backend allocate_raw() calls
  int64_t num_segment_frees = 0;        ///< backend free_raw() calls
  int64_t num_alloc_retries = 0;        ///< backend out of memory, cache released and retried
  int64_t num_ooms = 0;                 ///< allocate() calls that threw kOutOfMemory
};

/// The caching allocator (see the file comment for the algorithm). Implements ingot::Allocator:
/// AllocatorStats::bytes_in_use counts requested bytes (as HostAllocator does); the rounded
/// and reserved sizes are in caching_stats(). Thread-safe (one mutex).
class CachingAllocator final : public Allocator {
 public:
  static constexpr int64_t kMinBlockSize = 512;        ///< rounding granule
  static constexpr int64_t kSmallSize = 1 << 20;       ///< largest small-pool block: 1 MiB
  static constexpr int64_t kSmallBuffer = 2 << 20;     ///< small-pool segment: 2 MiB
  static constexpr int64_t kLargeBuffer = 20 << 20;    ///< large-pool segment: 20 MiB
  static constexpr int64_t kMinLargeAlloc = 10 << 20;  ///< requests below use kLargeBuffer
  static constexpr int64_t kRoundLarge = 2 << 20;      ///< large segments round to 2 MiB

  explicit CachingAllocator(std::unique_ptr<RawMemoryBackend> backend);
  /// Returns every segment to the backend (errors of the backend are ignored here).
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// Allocates `bytes` (>= 0; 0 gets a distinct 512-byte block). `alignment` is a power of two
  /// <= min(512, backend segment alignment), else ingot::Error(kInvalidArgument). Out of memory
  /// after releasing the cache: ingot::Error(kOutOfMemory) with requested, free and reserved
  /// bytes.
  void* allocate(int64_t bytes, int64_t alignment) override;
  /// Frees `ptr` returned by allocate() with the same `bytes` (nullptr: no-op). A pointer not
  /// allocated here, one freed already, or a wrong `bytes`: ingot::Error(kInvalidArgument).
  void deallocate(void* ptr, int64_t bytes) override;
  AllocatorStats stats() const override;
  /// Resets the three peaks to the current values.
  void reset_peak() override;

  CachingAllocatorStats caching_stats() const;
  /// Returns every cached segment that is entirely free to the backend; returns the bytes
  /// released. Live allocations are untouched.
  int64_t empty_cache();
  /// The rounded size a request of `bytes` occupies (>= 512, a multiple of 512).
  static int64_t round_size(int64_t bytes);
  /// The size of the segment allocated for a block of rounded size `rounded`.
  static int64_t segment_size(int64_t rounded);
  /// The backend (e.g. for memory_info()); the allocator keeps ownership.
  const RawMemoryBackend& backend() const { return *backend_; }

 private:
  /// One block of a segment: live (handed out) or free (in a pool). Blocks of one segment form
  /// a doubly linked list in address order.
  struct Block {
    char* ptr = nullptr;
    int64_t size = 0;       ///< rounded size (multiple of kMinBlockSize)
    int64_t requested = 0;  ///< bytes the caller asked for (live blocks)
    bool live = false;
    bool small = false;  ///< belongs to the small pool
    Block* prev = nullptr;
    Block* next = nullptr;
  };
  /// Orders free blocks by (size, address): lower_bound is the best fit.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;
  /// Every block (free or live) by its start address; owns the blocks (nodes never move).
  using BlockMap = std::unordered_map<char*, Block>;
  static constexpr size_t kMaxSpareNodes = 4096;

  Block* add_block(char* ptr, int64_t size, bool small);
  void remove_block(char* ptr);
  void pool_insert(Block* b);
  void pool_erase(Block* b);
  void keep_pool_node(Pool::node_type node);

  Pool& pool_for(int64_t rounded) { return rounded <= kSmallSize ? small_pool_ : large_pool_; }
  Pool& pool_of(const Block& b);
  Block* find_free_block(Pool& pool, int64_t rounded);
  Block* new_segment(int64_t rounded);
  Block* allocate_segment_or_throw(int64_t rounded, int64_t requested);
  void split(Block* block, int64_t rounded);
  Block* merge_free_neighbours(Block* block);
  void absorb(Block* into, Block* from);
  int64_t release_free_segments();
  void check_free_arguments(void* ptr, int64_t bytes, const Block* block) const;
  Block* block_at(void* ptr);
  [[noreturn]] void throw_out_of_memory(int64_t requested, int64_t rounded, int64_t segment);
  void update_peaks();

  std::unique_ptr<RawMemoryBackend> backend_;
  mutable std::mutex mu_;
  Pool small_pool_;
  Pool large_pool_;
  BlockMap blocks_;
  std::vector<BlockMap::node_type> spare_block_nodes_;
  std::vector<Pool::node_type> spare_pool_nodes_;
  /// Segment start -> segment size, to tell interior and foreign pointers apart.
  std::map<char*, int64_t> segments_;
  CachingAllocatorStats stats_;
};

/// "1536 bytes (1.50 KiB)": a byte count with a binary-prefixed size, for messages.
std::string format_bytes(int64_t bytes);

}  // namespace ingot
