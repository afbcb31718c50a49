# ctest script (cmake -P) for ingot-opt: runs the tool on testdata/dense_relu.ir and on MLIR it
# produced, and checks exit codes, output and dump files.
# Inputs: INGOT_OPT (the binary), INPUT (dense_relu.ir), WORK_DIR (scratch directory).

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# expect_run(NAME RC ARGS a b ... [HAS s ...] [LACKS s ...] [ERR s ...] [GENERICS n] [SAVE file])
# Runs ingot-opt with ARGS and fails unless the exit code is RC, stdout contains every HAS string
# and no LACKS string, stderr contains every ERR string, stdout has GENERICS linalg.generic ops.
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

function(expect_run name rc)
  cmake_parse_arguments(E "" "GENERICS;SAVE" "ARGS;HAS;LACKS;ERR" ${ARGN})
  execute_process(COMMAND "${INGOT_OPT}" ${E_ARGS} RESULT_VARIABLE got OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  set(context "${name}: ingot-opt ${E_ARGS}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  cli_check("${context}" ${rc} "${got}" "${out}" "${err}")
  if(DEFINED E_GENERICS)
    string(REGEX MATCHALL "linalg\\.generic" generics "${out}")
    list(LENGTH generics n)
    if(NOT n EQUAL E_GENERICS)
      message(FATAL_ERROR "${n} linalg.generic, expected ${E_GENERICS}. ${context}")
    endif()
  endif()
  if(DEFINED E_SAVE)
    file(WRITE "${E_SAVE}" "${out}")
  endif()
endfunction()

# Graph passes: cse merges the repeated bias add, dce drops the dead exponential.
expect_run(graph_passes 0 ARGS "${INPUT}" --passes cse,dce
           HAS "func @dense_relu" "select(%8, %7, %5)" "%9 = select" LACKS "exponential" "%10 =")
# Lowering prints the tensor-level MLIR: without cse, both bias adds are there.
expect_run(lower 0 ARGS "${INPUT}" --lower HAS "func.func @main" "tensor<4x2xf32>" "arith.cmpf ole"
           SAVE "${WORK_DIR}/lowered.mlir")
# Through `fuse`: the matmul (a BLAS GEMM call), and one generic with the bias add, compare and
# select.
expect_run(until_fuse 0 ARGS "${INPUT}" --passes cse,dce --until fuse
           HAS "call @ingot_cpu_gemm_f32" "arith.addf" "arith.cmpf" "arith.select" GENERICS 1)
# Named stages with dumps, numbered as the compiler numbers them.
expect_run(pipeline_dumps 0 ARGS "${INPUT}" --pipeline canonicalize,fuse --dump-dir "${WORK_DIR}/dumps"
           GENERICS 1)
foreach(f 00-input.mlir 01-canonicalize.mlir 02-fuse.mlir)
  if(NOT EXISTS "${WORK_DIR}/dumps/${f}")
    message(FATAL_ERROR "pipeline_dumps: no ${WORK_DIR}/dumps/${f}")
  endif()
endforeach()
# An arbitrary MLIR pipeline on an MLIR file (mlir-opt's builtin.module wrapper is accepted).
expect_run(mlir_pipeline 0 ARGS "${WORK_DIR}/lowered.mlir"
           --mlir-pipeline "builtin.module(func.func(linalg-fuse-elementwise-ops),canonicalize)"
           HAS "func.func @main" LACKS "tensor.empty() : tensor<4x2xi8>")
# The whole pipeline ends in the LLVM dialect.
expect_run(until_llvm 0 ARGS "${INPUT}" --until lower-to-llvm HAS "llvm.func @main" LACKS "linalg.")
expect_run(until_openmp_serial 0 ARGS "${INPUT}" --until openmp --threads 1 HAS "scf.for" LACKS "omp.")

# The CUDA code generator: the plan, with the matrix product as a kernel or a cuBLAS call, and
# each kernel's PTX per arch in the dump directory.
expect_run(cuda_plan 0 ARGS "${INPUT}" --target cuda --arch sm_90 --dump-dir "${WORK_DIR}/cuda"
           HAS "buffer 0: input 0 f32 (4, 3)" "launch main_kernel" "block (" "0 cuBLAS calls; PTX for sm_90"
           LACKS "gemm")
file(GLOB ptx_files "${WORK_DIR}/cuda/*.sm_90.ptx")
if(NOT ptx_files)
  message(FATAL_ERROR "cuda_plan: no PTX in ${WORK_DIR}/cuda")
endif()
# With cuBLAS the bias add and relu fold into the GEMM (a cuBLASLt epilogue): no kernel is left.
expect_run(cuda_cublas 0 ARGS "${INPUT}" --target cuda --cublas --dump-dir "${WORK_DIR}/cuda_cublas"
           HAS "gemm f32 m=4 n=2 k=3" "epilogue=bias_relu bias=buffer 2" "0 launches, 1 cuBLAS calls")
if(NOT EXISTS "${WORK_DIR}/cuda_cublas/02-gemm-epilogues.mlir")
  message(FATAL_ERROR "cuda_cublas: no ${WORK_DIR}/cuda_cublas/02-gemm-epilogues.mlir")
endif()
expect_run(cuda_bad_arch 1 ARGS "${INPUT}" --target cuda --arch compute_90 ERR "ingot-opt: error:" "compute_90")

# Errors: one line on stderr starting with `ingot-opt: error:`, exit code 1.
expect_run(missing_file 1 ARGS "${WORK_DIR}/no_such.ir" ERR "ingot-opt: error:" "not a regular file")
expect_run(unknown_stage 1 ARGS "${INPUT}" --until bogus
           ERR "ingot-opt: error:" "unknown pipeline stage 'bogus'" "canonicalize, fuse")
expect_run(bad_mlir_pipeline 1 ARGS "${INPUT}" --mlir-pipeline "no-such-pass"
           ERR "ingot-opt: error:" "bad pass pipeline")
expect_run(passes_on_mlir 1 ARGS "${WORK_DIR}/lowered.mlir" --passes cse
           ERR "ingot-opt: error:" "--passes cse applies to graph IR")
expect_run(llvm_stage_alone 1 ARGS "${INPUT}" --pipeline lower-to-llvm
           ERR "ingot-opt: error:" "left '" "unconverted" "--until lower-to-llvm")
expect_run(bad_dump_dir 1 ARGS "${INPUT}" --until fuse --dump-dir /proc/no_such_dir
           ERR "ingot-opt: error:" "cannot create the --dump-dir directory")
expect_run(bad_threads 1 ARGS "${INPUT}" --threads -1 ERR "ingot-opt: error:" "--threads")
expect_run(exclusive_options 1 ARGS "${INPUT}" --pipeline fuse --until fuse ERR "ingot-opt: error:")
file(WRITE "${WORK_DIR}/broken.ir" "func @f(%0: f32[2]) -> (f32[2]) {\n  return %7\n}\n")
expect_run(parse_error 1 ARGS "${WORK_DIR}/broken.ir" ERR "ingot-opt: error:" "broken.ir" "line 2")
# 10,000 nested modules crashed MLIR's recursive parser (stack); refused before parsing. The
# nesting is built by doubling (13 rounds: 8,192 levels).
set(opens "module {")
set(closes "}")
foreach(i RANGE 1 13)
  string(APPEND opens "${opens}")
  string(APPEND closes "${closes}")
endforeach()
file(WRITE "${WORK_DIR}/nested.mlir" "${opens}${closes}\n")
expect_run(nested_mlir 1 ARGS "${WORK_DIR}/nested.mlir" ERR "ingot-opt: error:" "[ParseError]"
           "more than 256 levels deep")
expect_run(nested_mlir_cuda 1 ARGS "${WORK_DIR}/nested.mlir" --target cuda --mlir-pipeline canonicalize
           ERR "more than 256 levels deep")
file(WRITE "${WORK_DIR}/notes.txt" "hello\n")
expect_run(unknown_extension 1 ARGS "${WORK_DIR}/notes.txt" ERR "unknown extension '.txt'")
