// The control surface of the fake NCCL module (tests/runtime/fake_nccl.cpp): what tests install
// and read through its exported C functions (dlsym on the module they load by path).
#pragma once

#include <cstdint>

/// What the fake NCCL saw in this process since the last ingot_fake_nccl_reset_log().
struct FakeNcclLog {
  int64_t all_reduce = 0;      ///< ncclAllReduce calls that ran
  int64_t all_gather = 0;      ///< ncclAllGather
  int64_t reduce_scatter = 0;  ///< ncclReduceScatter
  int64_t broadcast = 0;       ///< ncclBroadcast
  int64_t groups = 0;          ///< ncclGroupEnd calls that ran queued collectives
  int64_t largest_group = 0;   ///< most collectives one ncclGroupEnd ran
  int32_t last_type = -1;      ///< ncclDataType_t of the last collective
  int64_t comms_created = 0;   ///< communicators made by ncclCommInitRank / ncclCommInitAll
  int64_t comms_destroyed = 0;
};

extern "C" {
/// The function a collective calls with its stream before it reads any buffer (the fake driver's
/// cuStreamSynchronize): work enqueued on the stream before the collective runs first. Required.
using IngotFakeNcclStreamSync = int (*)(void* stream);
void ingot_fake_nccl_set_stream_sync(IngotFakeNcclStreamSync sync);
/// Seconds a rank waits for its peers at a rendezvous before the call fails with ncclRemoteError
/// (default 60).
void ingot_fake_nccl_set_timeout(double seconds);
const FakeNcclLog* ingot_fake_nccl_log();
void ingot_fake_nccl_reset_log();
}
