# Checks that the C++ sources follow the repository's .clang-format: run as
#   cmake -DSOURCE_DIR=<repo> -DCLANG_FORMAT=<clang-format-22> -P cmake/check_format.cmake
# (ctest's `clang_format` test). Every *.h, *.cpp, *.cu and *.cuh under the source folders is
# passed to `clang-format --dry-run --Werror`; a file that formatting would change fails the check
# with the first differences clang-format reports. Fix: `scripts/format.sh` rewrites the files.
cmake_policy(VERSION 3.20)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_format: pass -DSOURCE_DIR=<repository root>")
endif()
if(NOT CLANG_FORMAT OR NOT EXISTS "${CLANG_FORMAT}")
  message(FATAL_ERROR "check_format: clang-format-22 was not found at configure time; install it "
                      "(scripts/install-deps.sh) and re-run cmake")
endif()
set(files "")
foreach(dir include runtime kernels compiler autodiff trainer tools tests bench examples)
  file(GLOB_RECURSE found "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.cpp" "${SOURCE_DIR}/${dir}/*.cu"
       "${SOURCE_DIR}/${dir}/*.cuh")
  list(FILTER found EXCLUDE REGEX "/\\.venv/|/build/")
  list(APPEND files ${found})
endforeach()
list(LENGTH files n)
if(n LESS 100)
  message(FATAL_ERROR "check_format: found only ${n} sources under ${SOURCE_DIR}; wrong SOURCE_DIR?")
endif()
execute_process(COMMAND "${CLANG_FORMAT}" --dry-run --Werror --style=file ${files}
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  string(REGEX MATCHALL "[^\n]*error: code should be clang-formatted[^\n]*" bad "${err}")
  list(LENGTH bad n_bad)
  list(SUBLIST bad 0 20 first)
  list(JOIN first "\n" shown)
  message(FATAL_ERROR "check_format: ${n_bad} places in the sources differ from .clang-format (first 20):\n"
                      "${shown}\nrun scripts/format.sh to reformat them")
endif()
message(STATUS "check_format: ${n} sources follow .clang-format")
