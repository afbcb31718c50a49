// PLACEHOLDER: replaced by the real reduction op family.
#include "ingot/ir/op_registry.h"
namespace ingot::ir {
void register_reduction_ops(OpRegistry&) {}
}  // namespace ingot::ir
