// PLACEHOLDER: replaced by the real linalg op family.
#include "ingot/ir/op_registry.h"
namespace ingot::ir {
void register_linalg_ops(OpRegistry&) {}
}  // namespace ingot::ir
