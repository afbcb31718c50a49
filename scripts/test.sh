#!/usr/bin/env bash
# Installs what is missing, builds (dev preset) and runs every test with ctest, then (without
# arguments) the fuzz targets.
# Extra arguments go to ctest, e.g. `scripts/test.sh -L interp`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset dev
cmake --build --preset dev
# Every test (also the CLI and example ones) uses a compilation cache under the build tree, never
# the user's ~/.cache/ingot (docs/compiler.md, "Compilation cache").
export XDG_CACHE_HOME="$PWD/build/dev/test-compile-cache"
ctest --preset dev -j "$(nproc)" "$@"
# A plain run (no ctest arguments, as CI's) also builds the libFuzzer targets with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer and fuzzes each parser for 30 s
# (tests/fuzz/README.md).
if [ "$#" -eq 0 ]; then
  cmake --preset fuzz
  cmake --build --preset fuzz
  ctest --preset fuzz
fi
