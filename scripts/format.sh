#!/usr/bin/env bash
# Reformats the C++ sources in place with the repository's .clang-format (clang-format-22, the
# version of the LLVM toolchain ingot builds with; scripts/install-deps.sh installs it). ctest's
# `clang_format` test (cmake/check_format.cmake) fails when a source differs from it.
set -euo pipefail
cd "$(dirname "$0")/.."
find include runtime kernels compiler autodiff trainer tools tests bench examples \
  \( -name .venv -o -name build \) -prune -o \
  \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print0 |
  xargs -0 clang-format-22 -i --style=file
