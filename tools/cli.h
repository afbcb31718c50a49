// The `ingot` command line as a function, so that more than one executable can offer it: the
// `ingot` tool (tools/ingot_main.cpp) and the GPU check bundle's multi-call binary, which runs it
// when invoked as `ingot` (tests/gpu_bundle_main.cpp, docs/building.md).
#pragma once

#include <string>
#include <vector>

#include "ingot/runtime/library_search.h"

namespace ingot::cli {

/// Parses `argv` (argv[0] is the program name) and runs the subcommand: train, evaluate,
/// predict, bench, launch, demo, ops or run. Returns the process exit code: 0 on success, 1 for
/// an ingot::Error or other failure (printed to stderr as one "ingot: error: ..." line), 2 for a
/// command-line usage error (for launch also a bad option value or program, check_launch);
/// launch returns its ranks' result (run_launch). Never throws. Sets the process's malloc thresholds
/// (keep_large_blocks_in_the_heap, an application's choice).
int ingot_main(int argc, char** argv);

/// Where the CLI looks for cuBLAS, cuDNN and NCCL: `dirs` (--cuda-lib-dir), then the folders of
/// INGOT_CUDA_LIB_DIRS (colon-separated), the CUDA toolkit (/usr/local/cuda), the dynamic loader,
/// and the nvidia/*/lib folders of the active Python environments ($VIRTUAL_ENV, $CONDA_PREFIX).
/// The CLI reads these variables; the library never does.
LibrarySearch cuda_library_search(const std::vector<std::string>& dirs);

}  // namespace ingot::cli
