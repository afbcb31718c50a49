// Names of the reduction ops (the collectives themselves live in gloo/ and cuda/).
#include "ingot/runtime/communicator.h"

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

}  // namespace ingot
