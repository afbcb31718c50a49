// The GPU check bundle's one executable (cmake/gpu_bundle.cmake) is a multi-call binary, like
// busybox: invoked as `ingot` (a symbolic link bin/ingot -> gpu_tests) it is the `ingot` command
// line (tools/cli.h: train, bench, ...); under any other name it runs the bundled GoogleTest
// suites. One binary holds the statically linked MLIR/LLVM code once, which keeps the bundle
// under the GPU machine's 64 MiB (docs/building.md, "The GPU check bundle").
#include <gtest/gtest.h>

#include <string_view>

#include "cli.h"

int main(int argc, char** argv) {
  std::string_view name = argc > 0 ? argv[0] : "";
  if (const size_t slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name == "ingot") return ingot::cli::ingot_main(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
