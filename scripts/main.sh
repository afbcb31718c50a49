#!/usr/bin/env bash
# Installs what is missing, builds the `ingot` tool (release preset: the main job's measured speed
# needs an optimised host side) and runs the main job: `ingot train`, the Keras-style training of
# the Fashion-MNIST MLP on the CPU (10 epochs, Adam 1e-3 with cosine decay, batch 128, 10%
# validation), then its test loss and accuracy. Extra arguments go to `ingot train`, e.g.
# `scripts/main.sh --model cnn --metrics-json run.json` (docs/train.md).
# The earlier main job is still there: ./build/release/tools/ingot demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --target ingot
./build/release/tools/ingot train "$@"  # defaults: --model mlp --epochs 10
