// PLACEHOLDER: replaced by the real window lowering rules.
#include "ingot/ir/op_registry.h"
namespace ingot::ir {
void register_window_lowerings(OpRegistry&) {}
}  // namespace ingot::ir
