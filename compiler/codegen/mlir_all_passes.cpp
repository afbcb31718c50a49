// codegen::register_all_mlir_passes (ingot/codegen/pipeline.h). In its own translation unit so
// that only executables calling it link MLIR's whole pass library (the back ends register what
// they use: mlir_registration.cpp).
#include <mutex>

#include "ingot/codegen/pipeline.h"
#include "mlir/InitAllPasses.h"

namespace ingot::codegen {

void register_all_mlir_passes() {
  static std::once_flag once;
  std::call_once(once, [] { mlir::registerAllPasses(); });
}

}  // namespace ingot::codegen
