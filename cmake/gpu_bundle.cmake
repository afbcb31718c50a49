# The self-contained GPU check bundle (docs/building.md, "The GPU check bundle").
#
# Included from the top CMakeLists.txt when INGOT_GPU_BUNDLE=ON (preset `gpu-bundle`), BEFORE the
# component folders are added. It changes how executables link, never how sources compile (so the
# object files are the same as the `release` preset's and ccache serves them):
#   - MLIR and LLVM come from Debian's static archives (libMLIR*.a, libLLVM*.a) instead of the
#     shared libMLIR.so/libLLVM.so: the GPU machine has no LLVM/MLIR at all;
#   - libstdc++ and libgcc are linked statically (-static-libstdc++ -static-libgcc);
#   - zlib and OpenBLAS are linked statically (Debian ships libz.a and libopenblas.a);
#   - every other shared library (fmt, gloo, oneDNN, libomp and what they need) is found through
#     RPATH $ORIGIN/../lib, where tools/make_gpu_bundle.sh copies it. DT_RPATH (not DT_RUNPATH,
#     --disable-new-dtags) so that the copied libraries' own dependencies are found there too;
#   - libcuda, libcublas and libnccl are never linked: the runtime dlopen's them on the GPU
#     machine from its own CUDA install.
# The linker is lld (-fuse-ld=lld): it resolves the ~660 archives in any order (GNU ld would need
# them in dependency order or in one --start-group) and links far faster.

find_program(INGOT_LLD ld.lld)
if(NOT INGOT_LLD)
  message(FATAL_ERROR "ingot: INGOT_GPU_BUNDLE needs lld (ld.lld; Debian package lld) for the static MLIR/LLVM link")
endif()

set(INGOT_LLVM_LIB_DIR "/usr/lib/llvm-22/lib" CACHE PATH "LLVM/MLIR 22 library folder holding libMLIR*.a and libLLVM*.a")
file(GLOB INGOT_MLIR_ARCHIVES "${INGOT_LLVM_LIB_DIR}/libMLIR*.a")
file(GLOB INGOT_LLVM_ARCHIVES "${INGOT_LLVM_LIB_DIR}/libLLVM*.a")
if(NOT INGOT_MLIR_ARCHIVES OR NOT INGOT_LLVM_ARCHIVES)
  message(FATAL_ERROR "ingot: INGOT_GPU_BUNDLE needs the static MLIR/LLVM archives in ${INGOT_LLVM_LIB_DIR} "
                      "(libMLIR*.a from libmlir-22-dev, libLLVM*.a from llvm-22-dev); none found")
endif()
list(LENGTH INGOT_MLIR_ARCHIVES _ingot_n_mlir)
list(LENGTH INGOT_LLVM_ARCHIVES _ingot_n_llvm)
message(STATUS "ingot: GPU bundle: static MLIR/LLVM from ${_ingot_n_mlir} + ${_ingot_n_llvm} archives in ${INGOT_LLVM_LIB_DIR}")

# zlib as libz.a: FindZLIB honours this (CMake >= 3.24) in LLVM's config and in trainer/.
set(ZLIB_USE_STATIC_LIBS ON)
# OpenBLAS as libopenblas.a (kernels/ only calls cblas_sgemm/dgemm; no Fortran runtime needed).
set(INGOT_OPENBLAS "/usr/lib/x86_64-linux-gnu/libopenblas.a" CACHE FILEPATH "OpenBLAS (static in the GPU bundle)")

# Define MLIR's and LLVM's imported targets here, at the top, so that compiler/codegen's own
# find_package(MLIR) reuses them (an export file returns early when its targets exist), and
# re-point the two shared-library targets it links (`MLIR`, `LLVM`) at the static archives. A
# SHARED IMPORTED target cannot change type, so its file becomes an empty archive and the archives
# ride on its link interface.
find_package(MLIR CONFIG REQUIRED PATHS "${INGOT_LLVM_LIB_DIR}/cmake/mlir" NO_DEFAULT_PATH)
set(_ingot_empty_archive "${CMAKE_BINARY_DIR}/gpu_bundle_link/libingot_empty.a")
# Written once: rewriting it on every configure would relink every executable.
if(NOT EXISTS "${_ingot_empty_archive}")
  file(WRITE "${_ingot_empty_archive}" "!<arch>\n")
endif()
# LLVMSupport's own link interface (LLVMExports.cmake): rt, dl, m, z3, zlib, zstd. Debian ships no
# libzstd.a and libz3 only shared; with --as-needed (below) they are recorded only if referenced.
find_library(INGOT_ZSTD NAMES libzstd.so.1 zstd REQUIRED)
set(_ingot_llvm_system_libs rt dl m Threads::Threads ZLIB::ZLIB "${INGOT_ZSTD}")
foreach(_ingot_target MLIR LLVM)
  foreach(_ingot_config "" _RELWITHDEBINFO _RELEASE)
    set_target_properties(${_ingot_target} PROPERTIES IMPORTED_LOCATION${_ingot_config} "${_ingot_empty_archive}"
                                                      IMPORTED_SONAME${_ingot_config} ""
                                                      IMPORTED_LINK_DEPENDENT_LIBRARIES${_ingot_config} "")
  endforeach()
  set_target_properties(${_ingot_target} PROPERTIES IMPORTED_NO_SONAME ON INTERFACE_LINK_LIBRARIES "")
endforeach()
set_target_properties(MLIR PROPERTIES INTERFACE_LINK_LIBRARIES
                      "${INGOT_MLIR_ARCHIVES};${INGOT_LLVM_ARCHIVES};${_ingot_llvm_system_libs}")

# Link options of every executable and shared object defined after this point.
add_link_options(-fuse-ld=lld -static-libstdc++ -static-libgcc
                 # Drop sections nothing references (the Debian archives are built with
                 # -ffunction-sections -fdata-sections) and shared libraries nothing calls.
                 LINKER:--gc-sections LINKER:--as-needed
                 LINKER:--disable-new-dtags)
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON)
set(CMAKE_INSTALL_RPATH "\$ORIGIN/../lib")

# The one executable the bundle ships, a multi-call binary (tests/gpu_bundle_main.cpp): as
# `gpu_tests` the `runtime` suite (CUDA driver, GPU and NCCL tests among them), the `ptx` suites
# (tests/compiler/codegen/cuda, tests/kernels) and the `gpu` suite (tests/compiler/codegen/cuda_gpu:
# the code generator's kernels on the device against the interpreter); as `ingot` (a symbolic
# link) the `ingot` command line (training and `ingot bench` on the GPU). Separate executables
# would each carry the statically linked MLIR/LLVM code (~100 MB stripped even with the minimal
# MLIR registration, compiler/codegen/mlir_registration.cpp) and xz cannot share it across a
# 64 MiB window, so two binaries compress to ~2x one. Same sources, flags and links as
# tests/CMakeLists.txt's ptx_tests and runtime_tests and tools/'s ingot (which the preset also
# builds).
find_package(GTest REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json REQUIRED)
file(GLOB _ingot_gpu_test_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/runtime/*_test.cpp
     ${PROJECT_SOURCE_DIR}/tests/compiler/codegen/cuda/*_test.cpp
     ${PROJECT_SOURCE_DIR}/tests/compiler/codegen/cuda_gpu/*_test.cpp ${PROJECT_SOURCE_DIR}/tests/kernels/*_test.cpp)
set(_ingot_cli_sources ${PROJECT_SOURCE_DIR}/tools/cli.cpp ${PROJECT_SOURCE_DIR}/tools/bench.cpp
    ${PROJECT_SOURCE_DIR}/tools/demo.cpp ${PROJECT_SOURCE_DIR}/tools/launch.cpp ${PROJECT_SOURCE_DIR}/tools/train.cpp
    ${PROJECT_SOURCE_DIR}/tools/train_data.cpp)
add_executable(gpu_tests ${PROJECT_SOURCE_DIR}/tests/gpu_bundle_main.cpp ${_ingot_gpu_test_sources} ${_ingot_cli_sources})
target_link_libraries(gpu_tests PRIVATE ingot_trainer ingot_jit ingot_codegen_cpu ingot_codegen_cuda ingot_autodiff
                                        ingot_compiler GTest::gtest GTest::gmock CLI11::CLI11
                                        nlohmann_json::nlohmann_json ingot_warnings)
target_include_directories(gpu_tests PRIVATE ${PROJECT_SOURCE_DIR}/compiler ${PROJECT_SOURCE_DIR}/tests
                                             ${PROJECT_SOURCE_DIR}/tools ${PROJECT_SOURCE_DIR}/examples)
target_compile_definitions(gpu_tests PRIVATE INGOT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
