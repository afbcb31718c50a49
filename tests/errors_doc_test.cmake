# ctest script (cmake -P) that walks docs/errors.md: every "C" row is run as `ingot ARGS` in an
# empty directory and must exit with its status, print its [Code] (exit 1) and message excerpt on
# stderr, and write nothing; every "A" row must name a test present in the test binaries.
# Inputs: INGOT (the binary), DOC (docs/errors.md), DATA_DIR (the Fashion-MNIST IDX files),
# SOURCE_DIR (the repository), WORK_DIR (scratch), TEST_BINARIES (paths separated by '|').

cmake_minimum_required(VERSION 3.25)  # IN_LIST and the other policies of the project
file(REMOVE_RECURSE "${WORK_DIR}")
set(fx "${WORK_DIR}/fx")
file(MAKE_DIRECTORY "${fx}")

# ---- fixtures -------------------------------------------------------------------------------------
set(idx t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz)
foreach(dir magic counts overflow fifo copy)
  file(MAKE_DIRECTORY "${fx}/${dir}")
  foreach(f ${idx})
    file(COPY_FILE "${DATA_DIR}/${f}" "${fx}/${dir}/${f}")
  endforeach()
endforeach()
file(COPY_FILE "${DATA_DIR}/train-labels-idx1-ubyte.gz" "${fx}/magic/train-images-idx3-ubyte.gz")
file(COPY_FILE "${DATA_DIR}/t10k-images-idx3-ubyte.gz" "${fx}/counts/train-images-idx3-ubyte.gz")
file(REMOVE "${fx}/overflow/train-images-idx3-ubyte.gz" "${fx}/fifo/train-images-idx3-ubyte.gz")
# printf with octal escapes (POSIX): binary headers without another tool.
execute_process(COMMAND sh -c [[printf '\000\000\010\003\377\377\377\377\377\377\377\377\377\377\377\377' > overflow/train-images-idx3-ubyte
mkfifo fifo/train-images-idx3-ubyte weights.fifo
printf 'this is not a safetensors file' > corrupt.safetensors
: > empty.safetensors
printf '\000\000\000\000\000\000\000\100{}' > huge_header.safetensors
open=$(printf '%0100d' 0 | tr 0 '['); close=$(printf '%0100d' 0 | tr 0 ']')
printf '\316\000\000\000\000\000\000\000{"a":%s%s}' "$open" "$close" > nested.safetensors
printf 'hello\n' > text.txt
ln -s loop loop
printf '\066\000\000\000\000\000\000\000{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}\000\000\300\177' > nan.safetensors
printf 'func @f(%%0: f32[2]) -> (f32[2]) {\n  return %%7\n}\n' > broken.ir
printf 'func @f(%%0: f32[2]) -> (f32[2]) {\n  %%1 = frobnicate(%%0)\n  return %%1\n}\n' > unknown_op.ir]]
                WORKING_DIRECTORY "${fx}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "making the fixtures failed: ${rc}")
endif()
foreach(f f4.npy positional.npz mnist.npz)
  file(COPY_FILE "${SOURCE_DIR}/tests/trainer/testdata/npy/${f}" "${fx}/${f}")
endforeach()
foreach(f empty_test.npz nan_feature.npz huge_label.npz)
  file(COPY_FILE "${SOURCE_DIR}/tools/testdata/npz/${f}" "${fx}/${f}")
endforeach()
file(COPY_FILE "${SOURCE_DIR}/tests/fuzz/regressions/ir_text/huge_splat_constant.ir" "${fx}/huge_constant.ir")

# The document's lines as a list: '[' ']' and ';' hidden first (a CMake list element with an
# unmatched '[' would swallow the separators after it), restored in each row.
file(READ "${DOC}" text)
string(REPLACE ";" "<semicolon>" text "${text}")
string(REPLACE "[" "<lbracket>" text "${text}")
string(REPLACE "]" "<rbracket>" text "${text}")
string(REPLACE "\n" ";" doc_lines "${text}")
macro(restore var)
  string(REPLACE "<semicolon>" ";" ${var} "${${var}}")
  string(REPLACE "<lbracket>" "[" ${var} "${${var}}")
  string(REPLACE "<rbracket>" "]" ${var} "${${var}}")
endmacro()
set(rows "")
set(api_rows "")
foreach(line IN LISTS doc_lines)
  if(line MATCHES "^\\| C[0-9]+ \\|")
    list(APPEND rows "${line}")
  elseif(line MATCHES "^\\| A[0-9]+ \\|")
    list(APPEND api_rows "${line}")
  endif()
endforeach()

# ---- the C rows -----------------------------------------------------------------------------------
list(LENGTH rows n_c)
set(failures "")
foreach(row IN LISTS rows)
  restore(row)
  if(NOT row MATCHES "^\\| (C[0-9]+) \\| `([^`]*)` \\| ([0-9]+) \\| ([A-Za-z]+) \\| `(.*)` \\|$")
    string(APPEND failures "\nmalformed row: ${row}")
    continue()
  endif()
  set(id "${CMAKE_MATCH_1}")
  set(command "${CMAKE_MATCH_2}")
  set(want_rc "${CMAKE_MATCH_3}")
  set(code "${CMAKE_MATCH_4}")
  set(excerpt "${CMAKE_MATCH_5}")
  string(REPLACE "{data}" "${DATA_DIR}" command "${command}")
  string(REPLACE "{fx}" "${fx}" command "${command}")
  separate_arguments(args UNIX_COMMAND "${command}")
  set(dir "${WORK_DIR}/run_${id}")
  file(MAKE_DIRECTORY "${dir}")
  execute_process(COMMAND "${INGOT}" ${args} WORKING_DIRECTORY "${dir}" RESULT_VARIABLE got OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 300)
  set(problem "")
  if(NOT got STREQUAL want_rc)
    string(APPEND problem " exit ${got}, expected ${want_rc};")
  endif()
  if(NOT code STREQUAL "usage")
    string(FIND "${err}" "[${code}]" at)
    if(at LESS 0)
      string(APPEND problem " no [${code}];")
    endif()
  endif()
  string(FIND "${err}" "${excerpt}" at)
  if(at LESS 0)
    string(APPEND problem " no '${excerpt}';")
  endif()
  file(GLOB left RELATIVE "${dir}" "${dir}/*" "${dir}/.*")
  if(left)
    string(APPEND problem " left files: ${left};")
  endif()
  if(problem)
    string(APPEND failures "\n${id} `ingot ${command}`:${problem}\n  stderr: ${err}")
  endif()
endforeach()

# ---- the A rows -----------------------------------------------------------------------------------
string(REPLACE "|" ";" binaries "${TEST_BINARIES}")
set(known "")
foreach(binary IN LISTS binaries)
  execute_process(COMMAND "${binary}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${binary} --gtest_list_tests failed: ${rc}")
  endif()
  string(REPLACE "\n" ";" lines "${listing}")
  set(suite "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([A-Za-z0-9_/]+)\\.")
      set(suite "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^  ([A-Za-z0-9_/]+)")
      list(APPEND known "${suite}.${CMAKE_MATCH_1}")
    endif()
  endforeach()
endforeach()
list(LENGTH api_rows n_a)
foreach(row IN LISTS api_rows)
  restore(row)
  if(NOT row MATCHES "^\\| (A[0-9]+) \\| .* \\| [A-Za-z /]+ \\| `([A-Za-z0-9_]+\\.[A-Za-z0-9_]+)` \\|$")
    string(APPEND failures "\nmalformed row: ${row}")
    continue()
  endif()
  if(NOT "${CMAKE_MATCH_2}" IN_LIST known)
    string(APPEND failures "\n${CMAKE_MATCH_1}: no test ${CMAKE_MATCH_2} in the test binaries")
  endif()
endforeach()

math(EXPR total "${n_c} + ${n_a}")
if(total LESS 80)
  string(APPEND failures "\nonly ${total} catalogued bad inputs (at least 80 expected)")
endif()
if(failures)
  message(FATAL_ERROR "docs/errors.md:${failures}")
endif()
message(STATUS "docs/errors.md: ${n_c} command-line rows ran as documented, ${n_a} API rows have their tests")
