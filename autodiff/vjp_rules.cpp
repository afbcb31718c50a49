#include "ingot/autodiff/vjp_rules.h"

namespace ingot {

const VjpRules& VjpRules::builtin() {
  // Built once (thread-safe static initialisation) and never modified afterwards.
  static const VjpRules rules = [] {
    VjpRules r;
    register_elementwise_vjps(r);
    register_shape_vjps(r);
    register_reduction_vjps(r);
    register_linalg_vjps(r);
    register_indexing_vjps(r);
    register_control_vjps(r);
    register_collective_vjps(r);
    return r;
  }();
  return rules;
}

}  // namespace ingot
