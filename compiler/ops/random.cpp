// PLACEHOLDER: replaced by the real random op family.
#include "ingot/ir/op_registry.h"
namespace ingot::ir {
void register_random_ops(OpRegistry&) {}
}  // namespace ingot::ir
