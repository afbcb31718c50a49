// PLACEHOLDER: replaced by the real shape op family.
#include "ingot/ir/op_registry.h"
namespace ingot::ir {
void register_shape_ops(OpRegistry&) {}
}  // namespace ingot::ir
