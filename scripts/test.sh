#!/usr/bin/env bash
# Installs what is missing, builds (dev preset) and runs every test with ctest.
# Extra arguments go to ctest, e.g. `scripts/test.sh -L interp`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset dev
cmake --build --preset dev
ctest --preset dev -j "$(nproc)" "$@"
