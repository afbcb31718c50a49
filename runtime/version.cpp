// ingot::version() (include/ingot/runtime/version.h, generated from cmake/version.h.in).
#include "ingot/runtime/version.h"

namespace ingot {

const char* version() noexcept { return INGOT_VERSION_STRING; }

}  // namespace ingot
