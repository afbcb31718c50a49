# Writes the PTX file IN as a C++ header OUT defining `inline constexpr std::string_view NAME`
# (a raw string literal). Run as: cmake -DIN=... -DOUT=... -DNAME=... -P embed_ptx.cmake
file(READ "${IN}" ptx)
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by kernels/cuda/embed_ptx.cmake; do not edit.\n#pragma once\n#include <string_view>\n"
     "inline constexpr std::string_view ${NAME} = R\"ingot_ptx(${ptx})ingot_ptx\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
