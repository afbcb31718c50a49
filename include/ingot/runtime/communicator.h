// Collectives between the ranks of a process group (one rank per device): the interface the
// SPMD executor and the trainer call, implemented over Gloo (CPU devices, in one process or across
// processes over TCP) and NCCL (CUDA devices). Semantics follow torch.distributed / NCCL.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ingot/runtime/array.h"

namespace ingot {

/// Element-wise reduction of all_reduce / reduce_scatter. kMean is the sum divided by the group
/// size (integers: truncating division, as torch's integer division of the sum).
enum class ReduceOp { kSum, kMean, kMax, kMin };

/// "sum", "mean", "max", "min".
const char* reduce_op_name(ReduceOp op);

/// One rank's end of a process group: every rank of the group calls the same collectives in the
/// same order with arrays of the same shapes and dtypes (a mismatch is an ingot::Error where the
/// implementation can detect it, never a hang it could detect). Calls block until this rank's
/// part is done. A Communicator is used by one thread at a time (its rank's worker).
class Communicator {
 public:
  virtual ~Communicator() = default;
  /// This rank, in [0, size()).
  virtual int rank() const = 0;
  /// Number of ranks in the group.
  virtual int size() const = 0;
  /// "gloo", "nccl".
  virtual std::string backend() const = 0;

  /// In place: every rank's `inout` becomes the element-wise reduction over all ranks' `inout`.
  /// Any shape; dtypes f32, f64, i32, i64 (others: ingot::Error kInvalidArgument naming the
  /// dtype).
  virtual void all_reduce(Array& inout, ReduceOp op) = 0;
  /// `out` (size() * in.shape[0], in.shape[1:]...) receives every rank's `in` concatenated
  /// along dim 0 in rank order. `in` has rank >= 1. Shape mismatch: ingot::Error
  /// kShapeMismatch naming both shapes.
  virtual void all_gather(const Array& in, Array& out) = 0;
  /// The reduction over all ranks' `in` (size() * out.shape[0], out.shape[1:]...), split
  /// along dim 0 into size() blocks: rank r receives block r in `out`.
  virtual void reduce_scatter(const Array& in, Array& out, ReduceOp op) = 0;
  /// Every rank's `inout` becomes rank `root`'s. root outside [0, size()): kInvalidArgument.
  virtual void broadcast(Array& inout, int root) = 0;
  /// Returns once every rank has called barrier().
  virtual void barrier() = 0;

  /// Out of place: `out` (in's shape and dtype, another buffer) becomes the all_reduce of every
  /// rank's `in`; `in` is left as it was (NCCL's sendbuff != recvbuff). The default copies `in`
  /// into `out` on the host and reduces `out` in place, so it takes host arrays only
  /// (kUnimplemented naming the device otherwise); NcclCommunicator reduces on the device.
  /// Shape or dtype mismatch: kShapeMismatch / kDTypeMismatch naming both.
  virtual void all_reduce_into(const Array& in, Array& out, ReduceOp op);
  /// Out of place: `out` becomes rank `root`'s `in` (every rank passes an `in`; only root's is
  /// read). Default and errors as all_reduce_into.
  virtual void broadcast_into(const Array& in, Array& out, int root);
  /// Several in-place all_reduces issued together (NCCL's ncclGroupStart/ncclGroupEnd: one
  /// launch for the lot, as torch.distributed's coalesced all_reduce), same op for all; every
  /// rank passes the same list of shapes and dtypes in the same order. The default runs them one
  /// after the other. Errors as all_reduce for each array.
  virtual void all_reduce_group(std::span<Array* const> inouts, ReduceOp op);
  /// Out of place and grouped: outs[i] becomes the all_reduce of every rank's ins[i], pairwise as
  /// all_reduce_into, issued together like all_reduce_group (what compile_graph_spmd's grouped
  /// thunk calls when several gradient buckets are ready at once). The default calls
  /// all_reduce_into for each pair. Errors: kInvalidArgument for lists of different lengths, and
  /// all_reduce_into's for each pair.
  virtual void all_reduce_group_into(std::span<const Array> ins, std::span<Array> outs, ReduceOp op);
  /// The group of this rank's devices along mesh axis `axis` (JAX's named-axis collectives:
  /// psum(x, 'model') reduces over the devices along 'model' only). A plain group is one axis:
  /// it returns itself, whatever the name. MeshCommunicator (mesh_communicator.h) returns the
  /// axis's sub-group, and throws ingot::Error(kNotFound) naming an axis it lacks.
  virtual Communicator& along(const std::string& axis) {
    (void)axis;
    return *this;
  }
};

}  // namespace ingot
