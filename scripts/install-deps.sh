#!/usr/bin/env bash
# Installs the Debian packages ingot needs, skipping those already present (idempotent).
# Debian 12 (bookworm) with its security/updates suites; run as root (or with sudo).
# CUDA is not installed here: it is detected at /usr/local/cuda by CMake when present.
set -euo pipefail

PACKAGES=(
  # build tools
  cmake ninja-build g++ ccache pkg-config
  # the source format check (ctest's clang_format; .clang-format)
  clang-format-22
  # the fuzz targets (tests/fuzz: clang with libFuzzer and the sanitizers' runtimes)
  clang-14 libclang-rt-14-dev
  # compiler infrastructure (LLVM/MLIR 22)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # libraries
  libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  zlib1g-dev libzip-dev libopenblas-dev libdnnl-dev libgloo-dev
  # OpenMP runtime the JIT-compiled parallel loops call (libomp.so of LLVM 22)
  libomp-22-dev
  # data: Fashion-MNIST IDX files under /usr/share/datasets/fashion-mnist/
  dataset-fashion-mnist
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
