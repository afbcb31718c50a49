// PLACEHOLDER: replaced by the real indexing lowering rules.
#include "ingot/ir/op_registry.h"
namespace ingot::ir {
void register_indexing_lowerings(OpRegistry&) {}
}  // namespace ingot::ir
