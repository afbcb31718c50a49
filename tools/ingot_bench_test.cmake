# ctest script (cmake -P) for `ingot bench` (tools/bench.h): a short CPU run of every model and a
# GEMM whose JSON must hold positive timings and finite losses that fall from the first step to
# the last, then bad inputs (one `ingot: error:` line, exit code 1, no JSON written).
# Inputs: INGOT (the binary), WORK_DIR (scratch).
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

function(expect_run name rc)
  cmake_parse_arguments(E "" "" "ARGS;HAS;LACKS;ERR" ${ARGN})
  execute_process(COMMAND "${INGOT}" ${E_ARGS} RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY "${WORK_DIR}")
  cli_check("${name}: ingot ${E_ARGS}\n--- stdout:\n${out}\n--- stderr:\n${err}" ${rc} "${got}" "${out}" "${err}")
endfunction()

set(small_lm --lm-batch 4 --lm-context 16 --lm-width 32 --lm-heads 4 --lm-blocks 1)
expect_run(run 0 ARGS bench --models mlp,cnn,lm --steps 3 --warmup 1 --batch-size 32 ${small_lm} --gemm 64
           --json "${WORK_DIR}/bench.json"
           HAS "mlp  batch   32" "cnn  batch   32" "lm   batch    4" "gemm n=64" "jit library" "jit generated")
file(READ "${WORK_DIR}/bench.json" report)
string(JSON framework GET "${report}" framework)
if(NOT framework STREQUAL "ingot")
  message(FATAL_ERROR "framework is '${framework}'")
endif()
foreach(model mlp cnn lm)
  foreach(key compile_s samples_per_s params peak_bytes)
    string(JSON v GET "${report}" models ${model} ${key})
    if(NOT v GREATER 0)
      message(FATAL_ERROR "${model}.${key} is ${v}, expected > 0\n${report}")
    endif()
  endforeach()
  string(JSON median GET "${report}" models ${model} step_ms median)
  string(JSON p10 GET "${report}" models ${model} step_ms p10)
  string(JSON p90 GET "${report}" models ${model} step_ms p90)
  if(NOT median GREATER 0 OR p10 GREATER median OR median GREATER p90)
    message(FATAL_ERROR "${model}: step_ms p10 ${p10}, median ${median}, p90 ${p90} are not ordered")
  endif()
  string(JSON first GET "${report}" models ${model} loss_first)
  string(JSON last GET "${report}" models ${model} loss_last)
  # Five Adam steps on one fixed batch lower its loss.
  if(NOT last LESS first)
    message(FATAL_ERROR "${model}: loss ${first} -> ${last} did not fall")
  endif()
endforeach()
string(JSON tokens GET "${report}" models lm tokens_per_s)
string(JSON samples GET "${report}" models lm samples_per_s)
# tokens/s = samples/s * context (16).
if(NOT tokens GREATER samples)
  message(FATAL_ERROR "lm: tokens_per_s ${tokens} is not above samples_per_s ${samples}")
endif()
string(JSON n_gemm LENGTH "${report}" gemm)
if(NOT n_gemm EQUAL 2)
  message(FATAL_ERROR "expected 2 GEMM rows (library, generated), got ${n_gemm}")
endif()

expect_run(bad_model 1 ARGS bench --models mlp,xyz --json "${WORK_DIR}/bad.json" ERR "unknown model 'xyz'")
expect_run(bad_heads 1 ARGS bench --lm-width 30 --lm-heads 4 ERR "--lm-width 30 is not a multiple of --lm-heads 4")
expect_run(bad_steps 1 ARGS bench --steps 0 ERR "--steps is 0")
expect_run(bad_device 1 ARGS bench --device tpu ERR "unknown --device 'tpu'")
expect_run(bad_policy 1 ARGS bench --dtype-policy f8 ERR "unknown --dtype-policy 'f8'")
expect_run(bad_json 1 ARGS bench --json "${WORK_DIR}/no/such/dir/x.json" ERR "does not exist")
if(EXISTS "${WORK_DIR}/bad.json")
  message(FATAL_ERROR "a failed run wrote ${WORK_DIR}/bad.json")
endif()
