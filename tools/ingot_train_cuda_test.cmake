# ctest script (cmake -P), label `gpu`: `ingot train --device cuda` trains the Fashion-MNIST MLP on
# CUDA device 0 to >= 0.88 test accuracy (issue 9's bar; 10 epochs, the defaults) and writes its
# metrics JSON. Without a usable CUDA driver or GPU, `ingot` fails before reading any data with
# "no usable CUDA device"; the test then prints "SKIPPED (no GPU): <the reason>", which the test's
# SKIP_REGULAR_EXPRESSION turns into a skip. Inputs: INGOT, DATA_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(COMMAND "${INGOT}" train --device cuda --data-dir "${DATA_DIR}" --quiet
                        --metrics-json "${WORK_DIR}/train.json"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  string(FIND "${err}" "no usable CUDA device" no_gpu)
  if(NOT no_gpu EQUAL -1)
    message("SKIPPED (no GPU): ${err}")
    return()
  endif()
  message(FATAL_ERROR "ingot train --device cuda failed (exit ${rc})\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
file(READ "${WORK_DIR}/train.json" report)
string(JSON accuracy GET "${report}" test accuracy)
string(JSON device GET "${report}" device)
message("ingot train --device cuda: test accuracy ${accuracy} (device ${device})")
if(NOT device STREQUAL "cuda")
  message(FATAL_ERROR "train.json names device '${device}', expected cuda")
endif()
if(accuracy LESS 0.88)
  message(FATAL_ERROR "test accuracy ${accuracy} on the GPU is under 0.88\n${out}")
endif()
