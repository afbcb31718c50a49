// Names of the reduction ops (the collectives themselves live in gloo/ and cuda/).
#include "ingot/runtime/communicator.h"

#include <fmt/format.h>

#include <cstring>

#include "collective_common.h"
#include "ingot/runtime/device.h"
#include "ingot/runtime/error.h"

namespace ingot {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMean:
      return "mean";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

namespace {

/// `out` = `in` on the host, after the checks of an out-of-place collective named `call`.
void host_copy(const Array& in, Array& out, const char* call) {
  for (const Array* a : {&in, static_cast<const Array*>(&out)}) {
    if (!a->valid()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Communicator::{}: {} is an invalid array", call, a == &in ? "in" : "out"),
                  "pass arrays allocated on this rank's device");
    }
  }
  if (in.dtype() != out.dtype()) {
    throw Error(
        ErrorCode::kDTypeMismatch,
        fmt::format("Communicator::{}: in is {} but out is {}", call, dtype_name(in.dtype()), dtype_name(out.dtype())),
        "allocate out with in's dtype");
  }
  if (in.shape() != out.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("Communicator::{}: in has shape {} but out {}", call, shape_to_string(in.shape()),
                            shape_to_string(out.shape())),
                "allocate out with in's shape");
  }
  for (const Array* a : {&in, static_cast<const Array*>(&out)}) {
    if (a->device().kind() != DeviceKind::kCpu) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("Communicator::{}: {} lives on {}, and this backend copies on the host", call,
                              a == &in ? "in" : "out", a->device().name()),
                  "use the backend of that device (NCCL for CUDA devices)");
    }
  }
  if (in.nbytes() > 0 && in.raw_data() != out.raw_data()) {
    std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(in.nbytes()));
  }
}

}  // namespace

void Communicator::all_reduce_into(const Array& in, Array& out, ReduceOp op) {
  host_copy(in, out, "all_reduce_into");
  all_reduce(out, op);
}

void Communicator::broadcast_into(const Array& in, Array& out, int root) {
  host_copy(in, out, "broadcast_into");
  broadcast(out, root);
}

void Communicator::all_reduce_group(std::span<Array* const> inouts, ReduceOp op) {
  for (Array* a : inouts) all_reduce(*a, op);
}

void Communicator::all_reduce_group_into(std::span<const Array> ins, std::span<Array> outs, ReduceOp op) {
  check_group_lengths(ins.size(), outs.size(), "Communicator::all_reduce_group_into");
  for (size_t i = 0; i < ins.size(); ++i) all_reduce_into(ins[i], outs[i], op);
}

}  // namespace ingot
