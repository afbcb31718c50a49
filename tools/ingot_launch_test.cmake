# ctest script (cmake -P) for `ingot launch` (docs/distributed.md, "Processes"). Inputs: INGOT (the
# binary), WORK_DIR (scratch). Checks the torchrun variables each rank sees, the arguments passed
# verbatim, a failing / signalled / SIGTERM-ignoring rank stopping the others quickly (no rank left
# running), SIGTERM to the launcher forwarded, an exec failure, `ingot` found on PATH, and every
# bad input (exit 2, one `ingot: error:` line naming the option).

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

# launch(NAME RC ARGS a b ... [HAS s ...] [LACKS s ...] [ERR s ...] [OUT var] [ERR_OUT var] [MILLISECONDS var])
# Runs `ingot launch ARGS` in WORK_DIR and fails unless the exit code is RC, stdout contains every
# HAS string and no LACKS string, and stderr every ERR string. OUT / ERR_OUT receive stdout /
# stderr, MILLISECONDS the wall time.
function(launch name rc)
  cmake_parse_arguments(E "" "OUT;ERR_OUT;MILLISECONDS" "ARGS;HAS;LACKS;ERR" ${ARGN})
  string(TIMESTAMP t0 "%s%f" UTC)
  execute_process(COMMAND "${INGOT}" launch ${E_ARGS} RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY "${WORK_DIR}")
  string(TIMESTAMP t1 "%s%f" UTC)
  set(context "${name}: ingot launch ${E_ARGS}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  cli_check("${context}" ${rc} "${got}" "${out}" "${err}")
  if(DEFINED E_OUT)
    set(${E_OUT} "${out}" PARENT_SCOPE)
  endif()
  if(DEFINED E_ERR_OUT)
    set(${E_ERR_OUT} "${err}" PARENT_SCOPE)
  endif()
  if(DEFINED E_MILLISECONDS)
    math(EXPR ms "(${t1} - ${t0}) / 1000")
    set(${E_MILLISECONDS} ${ms} PARENT_SCOPE)
  endif()
endfunction()

# expect_gone(FILE...): each file holds a pid (a rank's `echo $$`); that process no longer exists
# (the launcher reaped it: a zombie would still answer kill -0).
function(expect_gone)
  foreach(f IN LISTS ARGN)
    if(NOT EXISTS "${WORK_DIR}/${f}")
      message(FATAL_ERROR "${f} was not written: the rank did not start")
    endif()
    file(STRINGS "${WORK_DIR}/${f}" pid)
    execute_process(COMMAND kill -0 ${pid} RESULT_VARIABLE alive ERROR_QUIET)
    if(alive EQUAL 0)
      execute_process(COMMAND kill -9 ${pid})
      message(FATAL_ERROR "the rank of ${f} (pid ${pid}) is still there after the launcher returned")
    endif()
    file(REMOVE "${WORK_DIR}/${f}")
  endforeach()
endfunction()

function(expect_below what ms limit)
  if(NOT ms LESS limit)
    message(FATAL_ERROR "${what} took ${ms} ms, expected < ${limit} ms")
  endif()
endfunction()

# --- The variables: both ranks, the same free port; an explicit port; the launcher's
# environment passed on, stale torchrun variables replaced. -----------------------------------------
set(ENV{INGOT_LAUNCH_TEST} inherited)
set(ENV{RANK} 7)
set(ENV{WORLD_SIZE} 9)
set(echo_env [=[echo rank=$RANK of $WORLD_SIZE port=$MASTER_PORT local=$LOCAL_RANK/$LOCAL_WORLD_SIZE addr=$MASTER_ADDR env=$INGOT_LAUNCH_TEST]=])
launch(variables 0 ARGS -n 2 -- sh -c "${echo_env}" OUT out
       HAS "rank=0 of 2 port=" "rank=1 of 2 port=" "local=0/2 addr=127.0.0.1 env=inherited"
           "local=1/2 addr=127.0.0.1 env=inherited"
       LACKS "rank=7" "of 9")
string(REGEX MATCHALL "port=[0-9]+" ports "${out}")
list(REMOVE_DUPLICATES ports)
list(LENGTH ports n)
if(NOT n EQUAL 1 OR ports STREQUAL "port=0")
  message(FATAL_ERROR "the ranks saw different or no ports: ${ports}\n${out}")
endif()
launch(explicit_port 0 ARGS --nproc-per-node 3 --master-port 29876 --master-addr localhost -- sh -c "${echo_env}"
       HAS "rank=0 of 3 port=29876" "rank=1 of 3 port=29876" "rank=2 of 3 port=29876 local=2/3 addr=localhost")
unset(ENV{RANK})
unset(ENV{WORLD_SIZE})

# Arguments after `--` reach the program verbatim: spaces, an empty one, option-like ones.
# (execute_process directly: a CMake list, and so launch()'s ARGS, cannot hold an empty element.)
execute_process(COMMAND "${INGOT}" launch -n 1 -- sh -c [=[printf '<%s>' "$@"]=] sh "a b" "" --help -n 5
                RESULT_VARIABLE got OUTPUT_VARIABLE out)
if(NOT got EQUAL 0 OR NOT out STREQUAL "<a b><><--help><-n><5>")
  message(FATAL_ERROR "exit code ${got}; the arguments arrived as '${out}'")
endif()

# --- A failing rank: the launcher returns its code at once and leaves no rank running. ---------
# Rank 1 fails once every rank has written its pid file and is about to exec `sleep 60`. (The
# scripts use newlines, not ';', which would split a CMake list.)
set(wait_for_all "while [ $(ls | grep -c '^pid') -lt $WORLD_SIZE ]\ndo sleep 0.02\ndone")
launch(failing_rank 3 ARGS -n 3 -- sh -c
       "echo $$ > pid$RANK\nif [ $RANK = 1 ]\nthen ${wait_for_all}\nexit 3\nfi\nexec sleep 60"
       ERR "ingot launch: rank 1 (pid " ") exited with code 3" "stopping the other 2 running rank(s)" MILLISECONDS ms)
expect_below("a launch whose rank 1 exits 3" ${ms} 20000)
expect_gone(pid0 pid1 pid2)

# A rank killed by a signal: 128 + 9.
launch(killed_rank 137 ARGS -n 2 -- sh -c
       "echo $$ > pid$RANK\nif [ $RANK = 1 ]\nthen ${wait_for_all}\nkill -9 $$\nfi\nexec sleep 60"
       ERR "rank 1 (pid " ") was killed by signal 9 (SIGKILL)" MILLISECONDS ms)
expect_below("a launch whose rank 1 is killed" ${ms} 20000)
expect_gone(pid0 pid1)

# A rank that ignores SIGTERM is killed after --grace seconds. The trap is set before the pid file
# is written: rank 1 fails once it sees every pid file, and a SIGTERM reaching rank 0 between its
# pid file and its trap ended it at once (a loaded machine made that window real).
launch(grace 4 ARGS -n 2 --grace 1 -- sh -c
       "trap '' TERM\necho $$ > pid$RANK\nif [ $RANK = 1 ]\nthen ${wait_for_all}\nexit 4\nfi\nexec sleep 60"
       ERR "rank 1 (pid " "exited with code 4" MILLISECONDS ms)
if(ms LESS 1000)
  message(FATAL_ERROR "rank 0 ignores SIGTERM, yet the launcher returned after ${ms} ms, before --grace 1")
endif()
expect_below("a launch with --grace 1" ${ms} 20000)
expect_gone(pid0 pid1)

# Every rank exits 0 at different times: 0, no message.
launch(all_succeed 0 ARGS -n 3 -- sh -c "if [ $RANK = 2 ]\nthen sleep 0.3\nfi\necho done $RANK"
       HAS "done 0" "done 1" "done 2" ERR_OUT err)
if(NOT err STREQUAL "")
  message(FATAL_ERROR "successful launch wrote to stderr: ${err}")
endif()

# --- SIGTERM to the launcher is forwarded to the ranks (a shell runs it in the background). ------
set(wrapper [=[
"$0" launch -n 2 -- sh -c 'echo $$ > pid$RANK; exec sleep 60' & L=$!
while [ ! -f pid0 ] || [ ! -f pid1 ]; do sleep 0.02; done
sleep 0.2
kill -TERM $L
wait $L
echo launcher=$?]=])
execute_process(COMMAND sh -c "${wrapper}" "${INGOT}" RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err
                WORKING_DIRECTORY "${WORK_DIR}" TIMEOUT 30)
set(E_HAS "launcher=143")
set(E_LACKS "")
set(E_ERR "ingot launch: received SIGTERM" "forwarding it to the 2 running rank(s)")
cli_check("SIGTERM to the launcher\n--- stdout:\n${out}\n--- stderr:\n${err}" 0 "${got}" "${out}" "${err}")
expect_gone(pid0 pid1)

# --- A program that passes the up-front check but cannot be executed: the rank reports, exits 127.
string(ASCII 127 del)
file(WRITE "${WORK_DIR}/not_elf" "${del}ELF but not really")
file(CHMOD "${WORK_DIR}/not_elf" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
launch(exec_fails 127 ARGS -n 1 -- ./not_elf
       ERR "ingot launch: rank 0: cannot execute './not_elf': Exec format error" "rank 0 (pid " "exited with code 127")

# --- `ingot` itself, by name on PATH. ------------------------------------------------------------
get_filename_component(ingot_dir "${INGOT}" DIRECTORY)
set(ENV{PATH} "${ingot_dir}:$ENV{PATH}")
launch(ingot_on_path 0 ARGS -n 2 -- ingot ops OUT out)
string(REGEX MATCHALL "\nall_reduce  " lines "\n${out}")
list(LENGTH lines n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "2 ranks of `ingot ops` listed all_reduce ${n} times:\n${out}")
endif()

# --- Bad input: exit 2, one error line naming the option and value; nothing started. -----------
function(bad name)
  cmake_parse_arguments(E "" "" "ARGS;ERR" ${ARGN})
  launch(${name} 2 ARGS ${E_ARGS} ERR "ingot: error:" ${E_ERR} ERR_OUT err)
  string(REGEX MATCHALL "ingot: error:" lines "${err}")
  list(LENGTH lines n)
  if(NOT n EQUAL 1 OR EXISTS "${WORK_DIR}/started")
    message(FATAL_ERROR "${name}: expected one 'ingot: error:' line and no rank started:\n${err}")
  endif()
endfunction()
set(touch -- touch started)
bad(zero_processes ARGS -n 0 ${touch} ERR "-n/--nproc-per-node must be in [1, 1024], got 0")
bad(too_many_processes ARGS -n 1025 ${touch} ERR "-n/--nproc-per-node must be in [1, 1024], got 1025")
bad(huge_processes ARGS -n 99999999999999999999 ${touch} ERR "--nproc-per-node: '99999999999999999999' is out of the 64-bit")
bad(no_program ARGS -n 2 -- ERR "no program to launch" "put it after '--'")
bad(no_dashes ARGS -n 2 ERR "no program to launch")
bad(unknown_program ARGS -n 2 -- no-such-program-xyz ERR "[NotFound] program 'no-such-program-xyz' not found on PATH")
bad(missing_path ARGS -- ./no-such-file-xyz ERR "program './no-such-file-xyz' cannot be run: No such file")
bad(directory ARGS -- "${WORK_DIR}" ERR "program '${WORK_DIR}' cannot be run: it is a directory")
file(WRITE "${WORK_DIR}/not_executable" "true\n")
bad(not_executable ARGS -- ./not_executable ERR "program './not_executable' cannot be run: it is not executable")
bad(port_too_big ARGS --master-port 70000 ${touch} ERR "--master-port must be in [1, 65535], got 70000")
bad(port_zero ARGS --master-port 0 ${touch} ERR "--master-port must be in [1, 65535], got 0")
# An empty address (execute_process directly: a CMake list cannot hold the empty value).
execute_process(COMMAND "${INGOT}" launch --master-addr "" -- touch started RESULT_VARIABLE got ERROR_VARIABLE err
                WORKING_DIRECTORY "${WORK_DIR}")
if(NOT got EQUAL 2 OR NOT err MATCHES "^ingot: error: --master-addr: an empty value" OR EXISTS "${WORK_DIR}/started")
  message(FATAL_ERROR "--master-addr '': exit code ${got}, stderr:\n${err}")
endif()
bad(unknown_addr ARGS --master-addr no-such-host.invalid ${touch} ERR "--master-addr 'no-such-host.invalid' cannot be resolved")
bad(zero_grace ARGS --grace 0 ${touch} ERR "--grace must be a finite number of seconds > 0, got 0")
bad(infinite_grace ARGS --grace inf ${touch} ERR "--grace must be a finite number of seconds > 0, got inf")
bad(text_count ARGS -n two ${touch} ERR "--nproc-per-node")
