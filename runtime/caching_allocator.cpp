// The caching device allocator (algorithm in include/ingot/runtime/caching_allocator.h, after
// PyTorch's CUDACachingAllocator) and the host-memory backend used by its tests and benchmark.
#include "ingot/runtime/caching_allocator.h"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <vector>

#include "ingot/runtime/error.h"

namespace ingot {

// ---------------------------------------------------------------------------------------------
// HostMemoryBackend

HostMemoryBackend::HostMemoryBackend(int64_t capacity_bytes, std::string name)
    : capacity_(capacity_bytes), name_(std::move(name)) {
  if (capacity_bytes < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("HostMemoryBackend: capacity_bytes = {} is negative", capacity_bytes),
                "pass the number of bytes the fake device may hand out");
  }
}

HostMemoryBackend::~HostMemoryBackend() {
  for (auto& [ptr, bytes] : segments_) std::free(ptr);
}

void* HostMemoryBackend::allocate_raw(int64_t bytes) {
  if (bytes <= 0 || bytes % kSegmentAlignment != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("HostMemoryBackend::allocate_raw: bytes = {} is not a positive "
                            "multiple of {}",
                            bytes, kSegmentAlignment));
  }
  if (bytes > capacity_ - held_) return nullptr;
  void* p = std::aligned_alloc(static_cast<size_t>(kSegmentAlignment), static_cast<size_t>(bytes));
  if (p == nullptr) return nullptr;
  segments_.emplace(p, bytes);
  held_ += bytes;
  ++raw_allocations_;
  return p;
}

void HostMemoryBackend::free_raw(void* ptr, int64_t bytes) {
  auto it = segments_.find(ptr);
  if (it == segments_.end() || it->second != bytes) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("HostMemoryBackend::free_raw: {} ({} bytes) is not a segment of {}", ptr, bytes, name_));
  }
  std::free(ptr);
  held_ -= bytes;
  segments_.erase(it);
  ++raw_frees_;
}

DeviceMemoryInfo HostMemoryBackend::memory_info() const { return DeviceMemoryInfo{capacity_ - held_, capacity_}; }

// ---------------------------------------------------------------------------------------------
// CachingAllocator

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

std::string format_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} bytes", bytes);
  return fmt::format("{} bytes ({:.2f} {})", bytes, v, kUnits[unit]);
}

CachingAllocator::CachingAllocator(std::unique_ptr<RawMemoryBackend> backend) : backend_(std::move(backend)) {
  if (backend_ == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "CachingAllocator: backend is null",
                "pass the raw memory backend of the device");
  }
}

CachingAllocator::~CachingAllocator() {
  for (auto& [start, size] : segments_) {
    try {
      backend_->free_raw(start, size);
    } catch (const Error&) {
      // A destructor cannot report; the device is being torn down anyway.
    }
  }
}

int64_t CachingAllocator::round_size(int64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

int64_t CachingAllocator::segment_size(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocator::Pool& CachingAllocator::pool_of(const Block& b) { return b.small ? small_pool_ : large_pool_; }

// Blocks and pool entries are created and dropped on almost every allocate/deallocate. Their
// container nodes are recycled (node handles, C++17) so that the steady state allocates no host
// memory at all; at most kMaxSpareNodes of each kind are kept.

CachingAllocator::Block* CachingAllocator::add_block(char* ptr, int64_t size, bool small) {
  Block fresh;
  fresh.ptr = ptr;
  fresh.size = size;
  fresh.small = small;
  if (spare_block_nodes_.empty()) return &blocks_.emplace(ptr, fresh).first->second;
  BlockMap::node_type node = std::move(spare_block_nodes_.back());
  spare_block_nodes_.pop_back();
  node.key() = ptr;
  node.mapped() = fresh;
  return &blocks_.insert(std::move(node)).position->second;
}

void CachingAllocator::remove_block(char* ptr) {
  BlockMap::node_type node = blocks_.extract(ptr);
  if (spare_block_nodes_.size() < kMaxSpareNodes) spare_block_nodes_.push_back(std::move(node));
}

void CachingAllocator::pool_insert(Block* b) {
  Pool& pool = pool_of(*b);
  if (spare_pool_nodes_.empty()) {
    pool.insert(b);
    return;
  }
  Pool::node_type node = std::move(spare_pool_nodes_.back());
  spare_pool_nodes_.pop_back();
  node.value() = b;
  pool.insert(std::move(node));
}

void CachingAllocator::pool_erase(Block* b) { keep_pool_node(pool_of(*b).extract(b)); }

void CachingAllocator::keep_pool_node(Pool::node_type node) {
  if (spare_pool_nodes_.size() < kMaxSpareNodes) spare_pool_nodes_.push_back(std::move(node));
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, int64_t rounded) {
  Block key;
  key.size = rounded;
  key.ptr = nullptr;
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block* b = *it;
  keep_pool_node(pool.extract(it));
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(int64_t rounded) {
  const int64_t size = segment_size(rounded);
  void* raw = backend_->allocate_raw(size);
  if (raw == nullptr) {
    ++stats_.num_alloc_retries;
    release_free_segments();
    raw = backend_->allocate_raw(size);
    if (raw == nullptr) return nullptr;
  }
  Block* b = add_block(static_cast<char*>(raw), size, rounded <= kSmallSize);
  segments_.emplace(b->ptr, size);
  stats_.reserved_bytes += size;
  ++stats_.num_segments;
  ++stats_.num_segment_allocations;
  return b;
}

CachingAllocator::Block* CachingAllocator::allocate_segment_or_throw(int64_t rounded, int64_t requested) {
  Block* b = new_segment(rounded);
  if (b == nullptr) throw_out_of_memory(requested, rounded, segment_size(rounded));
  return b;
}

void CachingAllocator::throw_out_of_memory(int64_t requested, int64_t rounded, int64_t segment) {
  ++stats_.num_ooms;
  const DeviceMemoryInfo info = backend_->memory_info();
  throw Error(ErrorCode::kOutOfMemory,
              fmt::format("{} out of memory: tried to allocate {} (rounded to {}, needing a new segment "
                          "of {}); the device has {} free of {} total; this allocator has {} reserved, "
                          "{} allocated in {} live blocks and {} cached",
                          backend_->device_name(), format_bytes(requested), format_bytes(rounded),
                          format_bytes(segment), format_bytes(info.free_bytes), format_bytes(info.total_bytes),
                          format_bytes(stats_.reserved_bytes), format_bytes(stats_.allocated_bytes),
                          stats_.num_live_blocks, format_bytes(stats_.reserved_bytes - stats_.allocated_bytes)),
              "reduce the batch size or the model, free arrays that are no longer needed, or shard the "
              "arrays over more devices");
}

void CachingAllocator::split(Block* block, int64_t rounded) {
  const int64_t remaining = block->size - rounded;
  const bool worth_it = block->small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (!worth_it) return;
  Block* rest = add_block(block->ptr + rounded, remaining, block->small);
  rest->prev = block;
  rest->next = block->next;
  if (block->next != nullptr) block->next->prev = rest;
  block->next = rest;
  block->size = rounded;
  pool_insert(rest);
}

void* CachingAllocator::allocate(int64_t bytes, int64_t alignment) {
  if (bytes < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("CachingAllocator::allocate: bytes = {} is negative", bytes),
                "pass a size >= 0");
  }
  const int64_t max_alignment = std::min(kMinBlockSize, backend_->segment_alignment());
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0 || alignment > max_alignment) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CachingAllocator::allocate: alignment = {} is not a power of two "
                            "<= {} (the alignment blocks on {} have)",
                            alignment, max_alignment, backend_->device_name()),
                "use Buffer::kAlignment");
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Sizes this close to the int64 limit cannot be rounded; no device has that much memory.
  if (bytes > std::numeric_limits<int64_t>::max() - kRoundLarge) {
    throw_out_of_memory(bytes, bytes, bytes);
  }
  const int64_t rounded = round_size(bytes);
  Block* b = find_free_block(pool_for(rounded), rounded);
  if (b == nullptr) b = allocate_segment_or_throw(rounded, bytes);
  split(b, rounded);
  b->live = true;
  b->requested = bytes;
  stats_.requested_bytes += bytes;
  stats_.allocated_bytes += b->size;
  ++stats_.num_live_blocks;
  ++stats_.num_allocations;
  update_peaks();
  return b->ptr;
}

void CachingAllocator::update_peaks() {
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
}

CachingAllocator::Block* CachingAllocator::block_at(void* ptr) {
  auto it = blocks_.find(static_cast<char*>(ptr));
  return it == blocks_.end() ? nullptr : &it->second;
}

void CachingAllocator::check_free_arguments(void* ptr, int64_t bytes, const Block* block) const {
  if (block != nullptr && block->live) {
    if (bytes == block->requested) return;
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CachingAllocator::deallocate: {} was allocated with {} bytes but "
                            "is freed with bytes = {}",
                            ptr, block->requested, bytes),
                "pass the size given to allocate()");
  }
  if (block != nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CachingAllocator::deallocate: {} on {} is already free (double "
                            "free)",
                            ptr, backend_->device_name()),
                "free each allocation exactly once");
  }
  auto* p = static_cast<char*>(ptr);
  auto seg = segments_.upper_bound(p);
  const bool inside = seg != segments_.begin() && p < std::prev(seg)->first + std::prev(seg)->second;
  throw Error(ErrorCode::kInvalidArgument,
              inside ? fmt::format("CachingAllocator::deallocate: {} points into a segment of {} "
                                   "but is not the start of an allocation",
                                   ptr, backend_->device_name())
                     : fmt::format("CachingAllocator::deallocate: {} was not allocated by the "
                                   "allocator of {}",
                                   ptr, backend_->device_name()),
              "free only pointers returned by allocate() on the same device");
}

void CachingAllocator::deallocate(void* ptr, int64_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = block_at(ptr);
  check_free_arguments(ptr, bytes, b);
  b->live = false;
  stats_.requested_bytes -= b->requested;
  stats_.allocated_bytes -= b->size;
  --stats_.num_live_blocks;
  ++stats_.num_frees;
  b->requested = 0;
  b = merge_free_neighbours(b);
  pool_insert(b);
}

void CachingAllocator::absorb(Block* into, Block* from) {
  // `from` directly follows `into` in the segment; both are free and out of the pools.
  into->size += from->size;
  into->next = from->next;
  if (from->next != nullptr) from->next->prev = into;
  remove_block(from->ptr);
}

CachingAllocator::Block* CachingAllocator::merge_free_neighbours(Block* block) {
  if (block->next != nullptr && !block->next->live) {
    pool_erase(block->next);
    absorb(block, block->next);
  }
  if (block->prev != nullptr && !block->prev->live) {
    Block* prev = block->prev;
    pool_erase(prev);
    absorb(prev, block);
    block = prev;
  }
  return block;
}

int64_t CachingAllocator::release_free_segments() {
  int64_t released = 0;
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    std::vector<Block*> whole;
    for (Block* b : *pool) {
      if (b->prev == nullptr && b->next == nullptr) whole.push_back(b);
    }
    for (Block* b : whole) {
      char* const start = b->ptr;
      const int64_t size = b->size;
      backend_->free_raw(start, size);
      pool_erase(b);
      remove_block(start);
      segments_.erase(start);
      stats_.reserved_bytes -= size;
      --stats_.num_segments;
      ++stats_.num_segment_frees;
      released += size;
    }
  }
  return released;
}

int64_t CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  return release_free_segments();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return AllocatorStats{stats_.requested_bytes, stats_.peak_requested_bytes, stats_.num_allocations, stats_.num_frees};
}

CachingAllocatorStats CachingAllocator::caching_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CachingAllocatorStats s = stats_;
  s.cached_bytes = s.reserved_bytes - s.allocated_bytes;
  s.num_free_blocks = static_cast<int64_t>(small_pool_.size() + large_pool_.size());
  return s;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_requested_bytes = stats_.requested_bytes;
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

}  // namespace ingot
