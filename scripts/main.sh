#!/usr/bin/env bash
# Installs what is missing, builds (dev preset) and runs the main job: `ingot train`, the Keras-style
# training of the Fashion-MNIST MLP on the CPU (10 epochs, Adam 1e-3, batch 128, 10% validation),
# then its test loss and accuracy. Extra arguments go to `ingot train`, e.g.
# `scripts/main.sh --model cnn --epochs 3 --metrics-json run.json` (docs/train.md).
# The earlier main job is still there: ./build/dev/tools/ingot demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset dev
cmake --build --preset dev
./build/dev/tools/ingot train "$@"  # defaults: --model mlp --epochs 10
