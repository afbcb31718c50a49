// device_put / reshard / to_host: moving arrays between shardings with block copies that run on
// the device workers.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <utility>

#include "ingot/runtime/array.h"
#include "ingot/runtime/worker.h"

namespace ingot {

namespace {

// One rectangular block copy between two row-major arrays of the same dtype: `block` elements per
// dimension, read at `src_start` of an array of `src_shape`, written at `dst_start` of an array of
// `dst_shape`.
struct BlockCopy {
  Array src;  // a single-device array (a source shard, or the whole source array)
  std::vector<int64_t> src_start;
  std::vector<int64_t> dst_start;
  Shape block;
};

// Copies `c` into `dst` (shape `dst_shape`). Collapses the innermost dimensions that the block
// spans completely in both arrays into one contiguous run and iterates the outer dimensions with
// an odometer, so a split along dimension 0 is a single memcpy.
void copy_block(const BlockCopy& c, std::byte* dst, const Shape& dst_shape) {
  const int64_t elem = dtype_size(c.src.dtype());
  const auto* src = static_cast<const std::byte*>(c.src.raw_data());  // waits for the source
  const Shape& src_shape = c.src.shape();
  const int64_t rank = static_cast<int64_t>(c.block.size());
  if (rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(elem));
    return;
  }
  if (num_elements(c.block) == 0) return;
  auto at = [](const std::vector<int64_t>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  int64_t k = rank - 1;  // dims > k are spanned completely by the block in both arrays
  while (k > 0 && at(c.block, k) == at(src_shape, k) && at(c.block, k) == at(dst_shape, k)) --k;
  int64_t run = 1;
  for (int64_t d = k; d < rank; ++d) run *= at(c.block, d);
  const std::vector<int64_t> ss = row_major_strides(src_shape);
  const std::vector<int64_t> ds = row_major_strides(dst_shape);
  std::vector<int64_t> idx(static_cast<size_t>(k), 0);
  int64_t outer = 1;
  for (int64_t d = 0; d < k; ++d) outer *= at(c.block, d);
  for (int64_t n = 0; n < outer; ++n) {
    int64_t so = at(c.src_start, k) * at(ss, k);
    int64_t dof = at(c.dst_start, k) * at(ds, k);
    for (int64_t d = 0; d < k; ++d) {
      so += (at(c.src_start, d) + at(idx, d)) * at(ss, d);
      dof += (at(c.dst_start, d) + at(idx, d)) * at(ds, d);
    }
    std::memcpy(dst + dof * elem, src + so * elem, static_cast<size_t>(run * elem));
    for (int64_t d = k - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < at(c.block, d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

// The intersection of two index boxes; false if it is empty.
bool intersect(const std::vector<IndexRange>& a, const std::vector<IndexRange>& b, std::vector<IndexRange>& out) {
  out.resize(a.size());
  for (size_t d = 0; d < a.size(); ++d) {
    out[d] = IndexRange{std::max(a[d].start, b[d].start), std::min(a[d].stop, b[d].stop)};
    if (out[d].stop <= out[d].start) return false;
  }
  return true;
}

/// Throws unless the runtime can move arrays to and from `device`: host memory (a CPU device) or
/// a device with a DeviceTransfer (CUDA).
void check_movable(const Device& device, const char* what) {
  if (device.kind() != DeviceKind::kCpu && device.transfer() == nullptr) {
    throw Error(
        ErrorCode::kUnimplemented,
        fmt::format("{}: {} is neither a CPU device nor one with transfers (DeviceTransfer)", what, device.name()),
        "use CPU devices, or devices opened by their driver (CudaDevice::open installs its transfers)");
  }
}

/// `shard` as an array in host memory: itself on a CPU device, else a copy downloaded through its
/// device's transfers (after the work that fills it).
Array host_copy(const Array& shard, const char* what) {
  const Device& device = shard.device();
  if (device.kind() == DeviceKind::kCpu) return shard;
  check_movable(device, what);
  shard.block_until_ready();
  Array host = Array::empty(shard.shape(), shard.dtype());
  if (host.nbytes() > 0) device.transfer()->to_host(shard.raw_data(), host.raw_data(), host.nbytes());
  return host;
}

void check_source(const Array& array, const char* what) {
  if (!array.valid()) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("{}: the array is invalid", what),
                "create arrays with Array::empty/zeros/from_vector");
  }
  if (array.donated()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("{}: the array of shape {} (or one of its shards) was donated and "
                            "cannot be used",
                            what, shape_to_string(array.shape())),
                "use the outputs of the call it was donated to");
  }
}

// The distinct blocks of a sharded array: each block's index box and the mesh positions holding
// it (replicas), in mesh order.
struct SourceBlock {
  std::vector<IndexRange> box;
  std::vector<int64_t> positions;
};

std::vector<SourceBlock> source_blocks(const NamedSharding& sharding, const Shape& shape) {
  std::vector<SourceBlock> blocks;
  std::map<std::vector<std::pair<int64_t, int64_t>>, size_t> index;
  for (int64_t p = 0; p < sharding.num_devices(); ++p) {
    std::vector<IndexRange> box = sharding.shard_index(p, shape);
    std::vector<std::pair<int64_t, int64_t>> key;
    for (const IndexRange& r : box) key.emplace_back(r.start, r.stop);
    auto [it, inserted] = index.emplace(std::move(key), blocks.size());
    if (inserted) blocks.push_back(SourceBlock{std::move(box), {}});
    blocks[it->second].positions.push_back(p);
  }
  return blocks;
}

// The copies that fill the shard at index box `dst_box` on `device` from the source shards:
// one per source block it overlaps, read from the replica on `device` if there is one.
std::vector<BlockCopy> plan_shard(const std::vector<SourceBlock>& blocks, const std::vector<Array>& src_shards,
                                  const std::vector<IndexRange>& dst_box, const Device& device) {
  std::vector<BlockCopy> copies;
  std::vector<IndexRange> common;
  for (const SourceBlock& b : blocks) {
    if (!intersect(b.box, dst_box, common)) continue;
    int64_t pick = b.positions[0];
    for (int64_t p : b.positions) {
      if (&src_shards[static_cast<size_t>(p)].device() == &device) pick = p;
    }
    BlockCopy c{src_shards[static_cast<size_t>(pick)], {}, {}, {}};
    for (size_t d = 0; d < common.size(); ++d) {
      c.src_start.push_back(common[d].start - b.box[d].start);
      c.dst_start.push_back(common[d].start - dst_box[d].start);
      c.block.push_back(common[d].size());
    }
    copies.push_back(std::move(c));
  }
  return copies;
}

// Allocates the shards of `sharding` for `array` and queues their copies on the shards' devices.
Array assemble_async(const Array& array, const NamedSharding& sharding, const char* what) {
  check_source(array, what);
  const Shape& shape = array.shape();
  sharding.check_shape(shape, what);
  const NamedSharding src_sharding = array.sharding();
  for (const Device* d : sharding.mesh().devices()) check_movable(*d, what);
  const std::vector<SourceBlock> blocks = source_blocks(src_sharding, shape);
  // Shards on devices the host cannot address are read from one host copy per block (replica 0).
  std::vector<Array> src_shards = array.shards();
  for (const SourceBlock& b : blocks) {
    const Array host = host_copy(src_shards[static_cast<size_t>(b.positions[0])], what);
    for (int64_t p : b.positions) {
      Array& s = src_shards[static_cast<size_t>(p)];
      if (s.device().kind() != DeviceKind::kCpu) s = host;
    }
  }
  const Shape shard_shape = sharding.shard_shape(shape);

  std::vector<Array> shards;
  for (int64_t p = 0; p < sharding.num_devices(); ++p) {
    Device& device = *sharding.mesh().devices()[static_cast<size_t>(p)];
    Array shard = Array::empty(shard_shape, array.dtype(), &device);
    std::vector<BlockCopy> copies = plan_shard(blocks, src_shards, sharding.shard_index(p, shape), device);
    if (copies.empty()) {  // nothing to copy (a zero-size array)
      shards.push_back(shard);
      continue;
    }
    std::shared_ptr<Event> done;
    if (device.kind() == DeviceKind::kCpu) {
      auto* dst = static_cast<std::byte*>(shard.raw_data());
      done = device.enqueue([shard, dst, copies = std::move(copies)] {
        for (const BlockCopy& c : copies) copy_block(c, dst, shard.shape());
      });
    } else {  // assembled in host memory, then uploaded
      void* dst = shard.raw_data();
      done = device.enqueue([shard, dst, &device, copies = std::move(copies)] {
        Array staging = Array::empty(shard.shape(), shard.dtype());
        for (const BlockCopy& c : copies) copy_block(c, static_cast<std::byte*>(staging.raw_data()), shard.shape());
        device.transfer()->to_device(staging.raw_data(), dst, staging.nbytes());
      });
    }
    shards.push_back(shard.with_ready_event(std::move(done)));
  }
  return Array::from_shards(shape, array.dtype(), sharding, std::move(shards));
}

}  // namespace

Array reshard_async(const Array& array, const NamedSharding& sharding) {
  check_source(array, "reshard");
  if (array.sharding() == sharding) return array;
  return assemble_async(array, sharding, "reshard");
}

Array reshard(const Array& array, const NamedSharding& sharding) {
  Array out = reshard_async(array, sharding);
  out.block_until_ready();
  return out;
}

Array device_put_async(const Array& array, const NamedSharding& sharding) {
  check_source(array, "device_put");
  if (array.sharding() == sharding) return array;
  return assemble_async(array, sharding, "device_put");
}

Array device_put(const Array& array, const NamedSharding& sharding) {
  Array out = device_put_async(array, sharding);
  out.block_until_ready();
  return out;
}

Array to_host(const Array& array) {
  check_source(array, "to_host");
  Device& host = default_cpu_device();
  if (array.num_shards() == 1 && &array.shards()[0].device() == &host) {
    Array whole = array.shards()[0];
    whole.block_until_ready();
    return whole;
  }
  const NamedSharding sharding = array.sharding();
  std::vector<Array> shards = array.shards();
  for (const SourceBlock& b : source_blocks(sharding, array.shape())) {  // replica 0 of each block on the host
    Array& s = shards[static_cast<size_t>(b.positions[0])];
    s = host_copy(s, "to_host");
  }
  Array out = Array::empty(array.shape(), array.dtype(), &host);
  auto* dst = out.nbytes() > 0 ? static_cast<std::byte*>(out.raw_data()) : nullptr;
  std::vector<std::shared_ptr<Event>> events;
  for (const SourceBlock& b : source_blocks(sharding, array.shape())) {
    const Array& src = shards[static_cast<size_t>(b.positions[0])];  // replica 0
    BlockCopy c{src, std::vector<int64_t>(b.box.size(), 0), {}, {}};
    for (const IndexRange& r : b.box) {
      c.dst_start.push_back(r.start);
      c.block.push_back(r.size());
    }
    if (num_elements(c.block) == 0) continue;
    events.push_back(src.device().enqueue([out, dst, c = std::move(c)] { copy_block(c, dst, out.shape()); }));
  }
  when_all(std::move(events))->wait();
  return out;
}

}  // namespace ingot
