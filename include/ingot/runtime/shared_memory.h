// Collectives between the ranks of ONE process through shared memory: every rank (one thread
// each) reads its peers' buffers directly between barriers, at memcpy speed and microsecond
// latency, instead of sending them through a transport (what NCCL's and PyTorch's intra-node
// shared-memory paths do). For data parallelism on several CPU virtual devices of one process
// (docs/distributed.md); make_local_gloo_group does the same over Gloo's TCP loopback.
#pragma once

#include <memory>
#include <vector>

#include "ingot/runtime/communicator.h"

namespace ingot {

/// `size` (>= 1) ranks in this process sharing one group state. Element r is rank r; use each
/// from its own thread (every rank must take part in every collective). backend() is
/// "shared_memory".
///
/// Semantics: exactly GlooCommunicator's (include/ingot/runtime/gloo.h, with verify_calls on):
/// all_reduce / reduce_scatter take f32, f64, i32, i64 (others: kInvalidArgument naming the
/// dtype); integer sums wrap around (two's complement); kMean is the sum divided by size
/// (integers: truncation toward zero); kMax / kMin of floats propagate NaN. all_gather /
/// broadcast take any dtype (bytes are copied unchanged). Arrays must live on a CPU device
/// (kInvalidArgument naming the device); `in` and `out` must not share a buffer
/// (kInvalidArgument); size-0 arrays are valid and move nothing.
///
/// Agreement: before moving data every rank publishes a description of its call (collective,
/// op, dtype, shape, root, whether its local argument checks passed) and passes a barrier; a
/// rank whose checks failed throws its own error, every other rank kFailedPrecondition "rank r
/// rejected its arguments"; calls that differ make every rank throw the same error naming rank
/// 0's and the differing rank's calls (kFailedPrecondition: other collective or op;
/// kDTypeMismatch; kShapeMismatch; kInvalidArgument: other root). No data moves and the group
/// stays usable.
///
/// Algorithms (barriers: mutex + condition variable + generation counter):
/// - all_reduce of n elements: rank r reduces elements [r*n/size, (r+1)*n/size) over all ranks'
///   buffers in rank order 0, 1, ..., size-1 into its scratch buffer (so the result is
///   deterministic and bitwise identical on every rank), barrier, every rank copies all chunks
///   into its buffer, barrier. Scratch: one chunk per rank, kept for later calls.
/// - all_gather: every rank copies every rank's input into its output, barrier.
/// - reduce_scatter: rank r reduces block r of all ranks' inputs (in rank order) into its
///   output, barrier.
/// - broadcast: every other rank copies root's buffer, barrier. barrier(): the barrier.
///
/// Failures: a rank that waits longer than `timeout` seconds at a barrier (a peer never came,
/// threw, or its thread died) throws kFailedPrecondition naming the collective, the rank, the
/// timeout and the ranks that did not arrive; destroying a rank's communicator wakes the ranks
/// waiting for it with kFailedPrecondition at once. Either breaks the group: every later call
/// on any rank throws kFailedPrecondition (create a new group).
///
/// Errors of this function: kInvalidArgument for size < 1, or timeout (seconds) <= 0, not
/// finite or above 1e7.
std::vector<std::unique_ptr<Communicator>> make_shared_memory_group(int size, double timeout = 30.0);

}  // namespace ingot
