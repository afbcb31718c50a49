# ingot as an installed library (docs/building.md, "Installing and packaging"):
#   - libingot.so: ONE shared library holding every component library (runtime, kernels,
#     compiler, codegen, jit, autodiff, trainer), each linked whole so no registration or symbol
#     is dropped. MLIR/LLVM, oneDNN, OpenBLAS, Gloo, zlib and libzip are linked privately: a
#     program using ingot needs only ingot's headers, fmt's headers (public headers include
#     <fmt/format.h>) and those libraries' runtime packages. Exported target: ingot::ingot.
#   - install rules: headers (include/ingot + the generated ingot/runtime/version.h), the
#     library, the `ingot` and `ingot-opt` tools, docs, lib/cmake/ingot/ingotConfig.cmake +
#     ingotConfigVersion.cmake + ingotTargets.cmake, and lib/pkgconfig/ingot.pc;
#   - CPack: `cpack -G DEB` (or TGZ) from the build folder, one `ingot` package whose Depends come
#     from dpkg-shlibdeps plus libfmt-dev (for building against the headers).
# Included from the top CMakeLists.txt after every component folder is added.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The component libraries that make up libingot.so, in dependency order (each links only those
# before it).
set(INGOT_COMPONENT_LIBRARIES ingot_runtime ingot_kernels ingot_compiler ingot_codegen ingot_codegen_cpu
                              ingot_codegen_cuda ingot_jit ingot_autodiff ingot_trainer)
# A shared library needs position-independent objects; only the component libraries are built so
# (the test and tool sources keep the compiler's default flags and their ccache entries).
set_target_properties(${INGOT_COMPONENT_LIBRARIES} PROPERTIES POSITION_INDEPENDENT_CODE ON)

# Where Debian's llvm-22 packages put libMLIR.so.22.1 (not on the loader's default path): the
# installed library's RUNPATH. libLLVM, libomp and the rest are in the multiarch folder.
set(INGOT_LLVM_RUNTIME_DIR "/usr/lib/llvm-22/lib" CACHE PATH "Folder holding libMLIR.so.22.1 (RUNPATH of libingot.so)")

# libingot.so needs at least one source of its own; version.cpp's ingot::version() is already in
# ingot_runtime, so the library is made of the component archives alone, given an empty unit.
set(_ingot_shared_stub "${PROJECT_BINARY_DIR}/ingot_shared_library.cpp")
if(NOT EXISTS "${_ingot_shared_stub}")
  file(WRITE "${_ingot_shared_stub}" "// libingot.so is the component libraries linked whole (cmake/package.cmake).\n")
endif()
add_library(ingot_shared SHARED "${_ingot_shared_stub}")
add_library(ingot::ingot ALIAS ingot_shared)
set_target_properties(ingot_shared PROPERTIES
  OUTPUT_NAME ingot
  EXPORT_NAME ingot
  # 0.x: a minor release may change the ABI, so the soname carries MAJOR.MINOR (libingot.so.0.1).
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  INSTALL_RPATH "${INGOT_LLVM_RUNTIME_DIR}")
# --no-undefined: every symbol the components use must resolve now, not in a user's program.
target_link_options(ingot_shared PRIVATE "-Wl,--no-undefined")
# Linked whole (--whole-archive; CMake's WHOLE_ARCHIVE feature refuses a library that another
# component also links plainly). Their own dependencies follow on the link line as usual.
target_link_libraries(ingot_shared PRIVATE "-Wl,--whole-archive" ${INGOT_COMPONENT_LIBRARIES} "-Wl,--no-whole-archive"
                      PUBLIC fmt::fmt Threads::Threads)
target_include_directories(ingot_shared PUBLIC "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>"
                                               "$<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>"
                                               "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
target_compile_features(ingot_shared PUBLIC cxx_std_20)

# ---- install rules ------------------------------------------------------------------------------
install(TARGETS ingot_shared EXPORT ingotTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ingot NAMELINK_COMPONENT ingot)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ingot ${PROJECT_BINARY_DIR}/include/ingot
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT ingot FILES_MATCHING PATTERN "*.h")
if(TARGET ingot AND TARGET ingot-opt)
  # The tools find libingot.so beside them ($ORIGIN/../lib...), wherever the prefix is.
  file(RELATIVE_PATH _ingot_bin_to_lib "/${CMAKE_INSTALL_BINDIR}" "/${CMAKE_INSTALL_LIBDIR}")
  set_target_properties(ingot ingot-opt PROPERTIES INSTALL_RPATH "$ORIGIN/${_ingot_bin_to_lib}")
  install(TARGETS ingot ingot-opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ingot)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ingot)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ingot)

# ingotConfig.cmake (relocatable: paths relative to where it is installed), its version file and
# the exported targets.
set(INGOT_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/ingot")
install(EXPORT ingotTargets NAMESPACE ingot:: DESTINATION ${INGOT_CMAKE_DIR} COMPONENT ingot)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ingotConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/ingotConfig.cmake INSTALL_DESTINATION ${INGOT_CMAKE_DIR})
# While the major version is 0, 0.2 may break 0.1 (semantic versioning): a request for 0.1 accepts
# 0.1.z only; from 1.0 on, the same major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_ingot_compatibility SameMinorVersion)
else()
  set(_ingot_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/ingotConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${_ingot_compatibility})
install(FILES ${PROJECT_BINARY_DIR}/package/ingotConfig.cmake ${PROJECT_BINARY_DIR}/package/ingotConfigVersion.cmake
        DESTINATION ${INGOT_CMAKE_DIR} COMPONENT ingot)

# ingot.pc for builds without CMake: `pkg-config --cflags --libs ingot`.
file(RELATIVE_PATH INGOT_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ingot.pc.in ${PROJECT_BINARY_DIR}/package/ingot.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/ingot.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT ingot)

# ---- CPack: the Debian package -------------------------------------------------------------------
set(CPACK_PACKAGE_NAME ingot)
set(CPACK_PACKAGE_VENDOR "ingot")
set(CPACK_PACKAGE_CONTACT "ingot developers <ingot@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Tensor compiler, runtime and Keras-style trainer for C++ (MLIR back ends)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # ingot_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# Depends: the runtime packages of every shared library the binaries need (dpkg-shlibdeps reads
# the ELF files), and libfmt-dev because the public headers include <fmt/format.h>.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libllvm22 is named by hand: dpkg-shlibdeps finds libLLVM.so.22.1 through the RUNPATH as
# /usr/lib/llvm-22/lib/libLLVM.so.22.1, a symbolic link that belongs to llvm-22-dev (which has no
# shlibs entry), and then leaves the dependency out.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libfmt-dev, libllvm22")
# dpkg-shlibdeps must find libMLIR.so.22.1 outside the loader's default path.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${INGOT_LLVM_RUNTIME_DIR}")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
include(CPack)
