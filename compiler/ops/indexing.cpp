// PLACEHOLDER: replaced by the real indexing op family.
#include "ingot/ir/op_registry.h"
namespace ingot::ir {
void register_indexing_ops(OpRegistry&) {}
}  // namespace ingot::ir
