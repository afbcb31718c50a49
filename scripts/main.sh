#!/usr/bin/env bash
# Installs what is missing, builds (dev preset) and runs the main job.
# Until the trainer exists, the main job is `ingot demo`: trace an MLP forward pass, print its IR
# before and after the cse/dce passes, and run it with the reference interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset dev
cmake --build --preset dev
./build/dev/tools/ingot demo "$@"
