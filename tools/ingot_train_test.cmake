# ctest script (cmake -P) for `ingot train` / `evaluate` / `predict` on Fashion-MNIST
# (docs/train.md). Inputs: INGOT (the binary), DATA_DIR (the IDX files), WORK_DIR (scratch),
# PART: "npz" (--data PATH.npz: a user's arrays, and its bad input), "train" (short runs: accuracy floor, JSON and CSV outputs, same seed => same history,
# weights round trip through evaluate and predict in fresh processes) or "errors" (every bad input
# gives `ingot: error: ...`, a non-zero exit code and writes nothing; uses the weights PART=train
# saved in TRAIN_DIR).

if(PART STREQUAL "train")
  file(REMOVE_RECURSE "${WORK_DIR}")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}")

# expect_run(NAME RC ARGS a b ... [HAS s ...] [LACKS s ...] [ERR s ...] [OUT var] [TIMEOUT s])
# Runs ingot with ARGS and fails unless the exit code is RC, stdout contains every HAS string and
# no LACKS string, and stderr contains every ERR string. OUT receives stdout. A run past TIMEOUT
# seconds (default 1200) is killed and fails (its exit code is then a message).
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

function(expect_run name rc)
  cmake_parse_arguments(E "" "OUT;TIMEOUT" "ARGS;HAS;LACKS;ERR" ${ARGN})
  if(NOT DEFINED E_TIMEOUT)
    set(E_TIMEOUT 1200)
  endif()
  execute_process(COMMAND "${INGOT}" ${E_ARGS} RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY "${WORK_DIR}" TIMEOUT ${E_TIMEOUT})
  set(context "${name}: ingot ${E_ARGS}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  cli_check("${context}" ${rc} "${got}" "${out}" "${err}")
  if(NOT rc EQUAL 0)
    string(REGEX MATCHALL "ingot: error:" lines "${err}")
    list(LENGTH lines n)
    if(NOT n EQUAL 1)
      message(FATAL_ERROR "expected one 'ingot: error:' line. ${context}")
    endif()
  endif()
  if(DEFINED E_OUT)
    set(${E_OUT} "${out}" PARENT_SCOPE)
  endif()
endfunction()

# json_get(VAR FILE key...): the value at the key path of the JSON file (fails on invalid JSON).
function(json_get var file)
  file(READ "${file}" text)
  string(JSON value ERROR_VARIABLE error GET "${text}" ${ARGN})
  if(error)
    message(FATAL_ERROR "${file}: ${error}\n${text}")
  endif()
  set(${var} "${value}" PARENT_SCOPE)
endfunction()

function(expect_at_least what value floor)
  if(NOT value GREATER_EQUAL floor)
    message(FATAL_ERROR "${what} is ${value}, expected >= ${floor}")
  endif()
endfunction()

# expect_crlf_lines(FILE N): FILE has N line breaks, each "\r\n".
function(expect_crlf_lines file n)
  file(READ "${file}" hex HEX)
  string(REGEX MATCHALL "0d0a" crlf "${hex}")
  string(REGEX MATCHALL "0a" lf "${hex}")
  list(LENGTH crlf n_crlf)
  list(LENGTH lf n_lf)
  if(NOT n_crlf EQUAL n OR NOT n_lf EQUAL n)
    message(FATAL_ERROR "${file}: ${n_crlf} CRLF and ${n_lf} LF line ends, expected ${n} CRLF")
  endif()
endfunction()

function(expect_missing)
  foreach(f IN LISTS ARGN)
    if(EXISTS "${f}")
      message(FATAL_ERROR "${f} was written although the command failed")
    endif()
  endforeach()
endfunction()

if(PART STREQUAL "npz")
  # --- `ingot train --data PATH.npz`: a user's own arrays (keras.datasets' mnist.npz layout). ----
  # blobs.npz: three Gaussian blobs in 4-D, 150 train / 60 test float32 samples, int32 labels
  # (tests/package/make_blobs.py); mnist.npz: 4x4 uint8 "images" with uint8 labels, as NumPy
  # wrote them (tests/trainer/testdata/make_npy_fixtures.py).
  set(blobs "${CMAKE_CURRENT_LIST_DIR}/../tests/package/blobs.npz")
  set(mnist "${CMAKE_CURRENT_LIST_DIR}/../tests/trainer/testdata/npy/mnist.npz")
  expect_run(npz_train 0 ARGS train --data "${blobs}" --epochs 20 --batch-size 16 --validation-split 0.2
             --lr-schedule constant --metrics-json blobs.json --save-weights blobs.safetensors
             HAS "120 samples of '${blobs}' (30 for validation)" "dense_2 (Dense)" "test loss ")
  json_get(accuracy "${WORK_DIR}/blobs.json" test accuracy)
  expect_at_least("test accuracy on three separated blobs" "${accuracy}" 0.9)
  json_get(dataset "${WORK_DIR}/blobs.json" config dataset)
  if(NOT dataset STREQUAL "${blobs}")
    message(FATAL_ERROR "config.dataset is '${dataset}'")
  endif()
  expect_run(npz_uint8_images 0 ARGS train --data "${mnist}" --epochs 1 --batch-size 2 --validation-split 0 --quiet
             HAS "test loss ")
  expect_run(npz_limit 1 ARGS train --data "${mnist}" --limit 7 ERR "--limit 7 is more than the 6 training samples")
  expect_run(npz_missing 1 ARGS train --data no_such.npz ERR "[NotFound]" "no_such.npz")
  expect_run(npz_not_zip 1 ARGS train --data "${CMAKE_CURRENT_LIST_DIR}/../tests/trainer/testdata/npy/f4.npy"
             ERR "[ParseError]" "not a valid zip archive")
  expect_run(npz_missing_array 1 ARGS train --data "${CMAKE_CURRENT_LIST_DIR}/../tests/trainer/testdata/npy/positional.npz"
             ERR "[NotFound]" "holds no array 'x_train'" "'arr_0', 'arr_1'")
  expect_run(npz_cnn_on_vectors 1 ARGS train --data "${blobs}" --model cnn
             ERR "--model cnn needs images" "use --model mlp")
  expect_run(npz_cnn_on_small_images 1 ARGS train --data "${mnist}" --model cnn
             ERR "--model cnn needs images of at least 10x10" "got 4x4")
  # Defects caught before training (tools/testdata/npz/make_bad_npz.py wrote the archives).
  set(bad "${CMAKE_CURRENT_LIST_DIR}/testdata/npz")
  expect_run(npz_empty_test 1 ARGS train --data "${bad}/empty_test.npz" --metrics-json e.json
             ERR "empty_test.npz': x_test has no samples" LACKS "Epoch")
  expect_run(npz_nan_feature 1 ARGS train --data "${bad}/nan_feature.npz"
             ERR "x_train holds nan at sample 7 (element 2 of it)" "nan_to_num")
  expect_run(npz_huge_label 1 ARGS train --data "${bad}/huge_label.npz" ERR "y_train[3] is 100000000" "[0, 16777215]")
  expect_missing("${WORK_DIR}/e.json")
  expect_run(npz_with_data_dir 2 ARGS train --data "${blobs}" --data-dir "${DATA_DIR}" ERR "excludes")
  expect_run(npz_output_is_input 1 ARGS train --data "${blobs}" --metrics-json "${blobs}" ERR "is an input of this command")
  return()
endif()

if(PART STREQUAL "train")
  # --- MLP, 1 epoch on 6000 images (5400 train, 600 validation): files, accuracy floor. --------
  set(common train --data-dir "${DATA_DIR}" --model mlp --epochs 1 --limit 6000)
  expect_run(mlp_train 0 ARGS ${common} --seed 7 --save-weights mlp.safetensors --csv a.csv
             --metrics-json a.json
             HAS "Model: \"mlp\"" "dense_2 (Dense)" "5400 Fashion-MNIST images (600 for validation)"
                 "43/43 - " "val_accuracy:" "test loss " "wrote weights to mlp.safetensors"
             OUT train_out)
  json_get(accuracy "${WORK_DIR}/a.json" test accuracy)
  expect_at_least("test accuracy after 1 epoch on 6000 images" "${accuracy}" 0.7)
  json_get(val_accuracy "${WORK_DIR}/a.json" history val_accuracy 0)
  expect_at_least("val_accuracy" "${val_accuracy}" 0.7)
  json_get(device "${WORK_DIR}/a.json" device)
  if(NOT device STREQUAL "cpu")
    message(FATAL_ERROR "device is '${device}'")
  endif()
  foreach(key loss accuracy val_loss val_accuracy)
    json_get(series "${WORK_DIR}/a.json" history ${key})
    string(JSON n LENGTH "${series}")
    if(NOT n EQUAL 1)
      message(FATAL_ERROR "history.${key} has ${n} values, expected 1: ${series}")
    endif()
  endforeach()
  foreach(key train_seconds samples_per_second)
    json_get(v "${WORK_DIR}/a.json" ${key})
    if(NOT v GREATER 0)
      message(FATAL_ERROR "${key} is ${v}")
    endif()
  endforeach()
  json_get(compile "${WORK_DIR}/a.json" compile_seconds)
  json_get(train "${WORK_DIR}/a.json" train_seconds)
  if(NOT compile GREATER 0 OR compile GREATER train)
    message(FATAL_ERROR "compile_seconds ${compile} outside (0, train_seconds ${train}]")
  endif()
  # timing: every train step counted (ceil(5400 / 128) = 43), time in and around the step.
  json_get(steps "${WORK_DIR}/a.json" timing train_steps)
  json_get(step_ms "${WORK_DIR}/a.json" timing step_ms)
  json_get(overhead_ms "${WORK_DIR}/a.json" timing overhead_ms)
  if(NOT steps EQUAL 43 OR NOT step_ms GREATER 0 OR overhead_ms LESS 0)
    message(FATAL_ERROR "timing: ${steps} steps, ${step_ms} ms in the step, ${overhead_ms} ms around it")
  endif()
  # memory: the process's peak RSS holds at least the allocator's peak (the 5400 images as f32
  # alone are 16 MiB, so both exceed it).
  json_get(rss "${WORK_DIR}/a.json" peak_rss_bytes)
  json_get(allocator_peak "${WORK_DIR}/a.json" allocator_peak_bytes)
  if(NOT allocator_peak GREATER 16934400 OR rss LESS allocator_peak)
    message(FATAL_ERROR "memory: peak RSS ${rss} bytes, allocator peak ${allocator_peak} bytes")
  endif()
  # CSV: Keras CSVLogger's header (sorted names) and one row for epoch 0, lines ending in \r\n
  # (file(READ) drops the \r, so they are counted in hex).
  expect_crlf_lines("${WORK_DIR}/a.csv" 2)
  file(READ "${WORK_DIR}/a.csv" csv)
  if(NOT csv MATCHES "^epoch,accuracy,loss,val_accuracy,val_loss\n0,0\\.[0-9]+,[0-9.]+,0\\.[0-9]+,[0-9.]+\n$")
    message(FATAL_ERROR "a.csv is not a CSVLogger file with one epoch:\n${csv}")
  endif()
  # The CSV row holds the history's values.
  json_get(loss0 "${WORK_DIR}/a.json" history loss 0)
  string(REGEX MATCH "\n0,[^,]+,([^,]+)," row "${csv}")
  if(NOT CMAKE_MATCH_1 EQUAL loss0)
    message(FATAL_ERROR "CSV loss ${CMAKE_MATCH_1} differs from the JSON history's ${loss0}")
  endif()

  # --- The same seed gives the same history and test results; another seed does not. --------
  expect_run(mlp_same_seed 0 ARGS ${common} --seed 7 --metrics-json b.json --quiet
             HAS "test loss " LACKS "Model:" "43/43" "wrote")
  json_get(history_a "${WORK_DIR}/a.json" history)
  json_get(history_b "${WORK_DIR}/b.json" history)
  json_get(test_a "${WORK_DIR}/a.json" test)
  json_get(test_b "${WORK_DIR}/b.json" test)
  if(NOT history_a STREQUAL history_b OR NOT test_a STREQUAL test_b)
    message(FATAL_ERROR "seed 7 twice: different results\n${history_a}\n${history_b}\n${test_a}\n${test_b}")
  endif()
  expect_run(mlp_other_seed 0 ARGS ${common} --seed 8 --metrics-json c.json --quiet)
  json_get(history_c "${WORK_DIR}/c.json" history)
  if(history_a STREQUAL history_c)
    message(FATAL_ERROR "seeds 7 and 8 gave the same history ${history_a}")
  endif()

  # --- The saved weights in fresh processes: the same test loss and accuracy, to every digit. --
  string(REGEX MATCH "test loss [0-9.]+, accuracy [0-9.]+" train_line "${train_out}")
  expect_run(evaluate 0 ARGS evaluate --weights mlp.safetensors --data-dir "${DATA_DIR}" --metrics-json e.json
             HAS "${train_line}")
  json_get(test_e "${WORK_DIR}/e.json" test)
  if(NOT test_a STREQUAL test_e)
    message(FATAL_ERROR "evaluate of the saved weights: ${test_e}, training printed ${test_a}")
  endif()
  # Test image 2 is a trouser (the easiest class); the probabilities sum to 1 and the printed
  # class is the most probable one.
  expect_run(predict 0 ARGS predict --weights mlp.safetensors --data-dir "${DATA_DIR}" --index 2
             HAS "test image 2: Trouser (class 1); label: Trouser (class 1)" "  9 Ankle boot   0." OUT p1)
  string(REGEX MATCHALL "  [0-9] [^\n]* [01]\\.[0-9]+\n" rows "${p1}")
  list(LENGTH rows n)
  if(NOT n EQUAL 10)
    message(FATAL_ERROR "predict printed ${n} probabilities:\n${p1}")
  endif()
  set(sum 0)
  set(best -1)
  set(best_row "")
  foreach(row IN LISTS rows)
    string(REGEX MATCH " ([01])\\.([0-9][0-9][0-9][0-9][0-9][0-9])\n" _ "${row}")
    math(EXPR micro "1${CMAKE_MATCH_1}${CMAKE_MATCH_2} - 10000000")  # the 1 keeps leading zeros decimal
    math(EXPR sum "${sum} + ${micro}")
    if(micro GREATER best)
      set(best ${micro})
      set(best_row "${row}")
    endif()
  endforeach()
  if(sum LESS 999990 OR sum GREATER 1000010)
    message(FATAL_ERROR "the probabilities sum to ${sum} millionths:\n${p1}")
  endif()
  if(NOT best_row MATCHES "  1 Trouser ")
    message(FATAL_ERROR "the most probable class is '${best_row}', predict said Trouser:\n${p1}")
  endif()
  expect_run(predict_again 0 ARGS predict --weights mlp.safetensors --data-dir "${DATA_DIR}" --index 2 OUT p2)
  if(NOT p1 STREQUAL p2)
    message(FATAL_ERROR "two predict runs differ:\n${p1}\n${p2}")
  endif()

  # --- CNN, AdamW, 2 steps per execution, no validation: Keras adds NA val_ columns. ---------
  expect_run(cnn_train 0 ARGS train --data-dir "${DATA_DIR}" --model cnn --epochs 1 --limit 512
             --validation-split 0 --optimizer adamw --steps-per-execution 2 --csv cnn.csv
             --save-weights cnn.safetensors
             HAS "Model: \"cnn\"" "conv2d_1 (Conv2D)" "(None, 11, 11, 64)" "adamw" "test loss " OUT cnn_out)
  expect_crlf_lines("${WORK_DIR}/cnn.csv" 2)
  file(READ "${WORK_DIR}/cnn.csv" csv)
  if(NOT csv MATCHES "^epoch,accuracy,loss,val_accuracy,val_loss\n0,[0-9.]+,[0-9.]+,NA,NA\n$")
    message(FATAL_ERROR "cnn.csv:\n${csv}")
  endif()
  string(REGEX MATCH "test loss [0-9.]+, accuracy [0-9.]+" cnn_line "${cnn_out}")
  expect_run(cnn_evaluate 0 ARGS evaluate --model cnn --weights cnn.safetensors --data-dir "${DATA_DIR}"
             HAS "${cnn_line}")
  # Without --model, evaluate takes the model the weights file names.
  expect_run(cnn_evaluate_inferred 0 ARGS evaluate --weights cnn.safetensors --data-dir "${DATA_DIR}"
             HAS "${cnn_line}")
  # SGD runs and is recorded with its default learning rate.
  expect_run(sgd_train 0 ARGS train --data-dir "${DATA_DIR}" --optimizer sgd --epochs 2 --limit 1000
             --metrics-json sgd.json --quiet)
  json_get(lr "${WORK_DIR}/sgd.json" config learning_rate)
  json_get(epochs "${WORK_DIR}/sgd.json" epoch_seconds)
  string(JSON n LENGTH "${epochs}")
  if(NOT lr EQUAL 0.01 OR NOT n EQUAL 2)
    message(FATAL_ERROR "sgd.json: learning_rate ${lr}, ${n} epoch times")
  endif()
  # RMSprop and Adagrad train and are recorded.
  foreach(opt rmsprop adagrad)
    expect_run(${opt}_train 0 ARGS train --data-dir "${DATA_DIR}" --optimizer ${opt} --epochs 1 --limit 1000
               --metrics-json ${opt}.json --quiet HAS "test loss ")
    json_get(recorded "${WORK_DIR}/${opt}.json" config optimizer)
    if(NOT recorded STREQUAL opt)
      message(FATAL_ERROR "${opt}.json records optimizer '${recorded}'")
    endif()
  endforeach()
  # A constant rate (the default is cosine decay) changes the trajectory of the same seed and is
  # recorded.
  expect_run(sgd_constant 0 ARGS train --data-dir "${DATA_DIR}" --optimizer sgd --epochs 2 --limit 1000
             --lr-schedule constant --metrics-json sgd_constant.json --quiet)
  json_get(schedule_default "${WORK_DIR}/sgd.json" config lr_schedule)
  json_get(schedule "${WORK_DIR}/sgd_constant.json" config lr_schedule)
  json_get(loss_cosine "${WORK_DIR}/sgd.json" history loss 1)
  json_get(loss_constant "${WORK_DIR}/sgd_constant.json" history loss 1)
  if(NOT schedule_default STREQUAL "cosine" OR NOT schedule STREQUAL "constant" OR loss_cosine EQUAL loss_constant)
    message(FATAL_ERROR "schedules '${schedule_default}' / '${schedule}', epoch-2 losses ${loss_cosine} / ${loss_constant}")
  endif()

  # --- Data parallel: 2 CPU devices, then 2 processes x 2 devices under `ingot launch`, train the
  # one-device run's model (the same test loss to 4 decimals and accuracy); the launched run
  # prints once and writes its files once (process 0).
  set(dp_common train --data-dir "${DATA_DIR}" --epochs 1 --limit 4000 --batch-size 64 --quiet)
  expect_run(dp_one 0 ARGS ${dp_common} OUT dp_one_out)
  string(REGEX MATCH "test loss ([0-9]+\\.[0-9][0-9][0-9][0-9])[0-9]*, accuracy ([0-9.]+)" dp_line "${dp_one_out}")
  set(dp_want "test loss ${CMAKE_MATCH_1}[0-9]*, accuracy ${CMAKE_MATCH_2}")
  if(NOT dp_line)
    message(FATAL_ERROR "no test line in:\n${dp_one_out}")
  endif()
  expect_run(dp_two_devices 0 ARGS ${dp_common} --cpu-devices 2 --metrics-json dp2.json OUT dp2_out)
  if(NOT dp2_out MATCHES "${dp_want}")
    message(FATAL_ERROR "2 devices: '${dp2_out}', 1 device: '${dp_line}'")
  endif()
  json_get(dp2_devices "${WORK_DIR}/dp2.json" config cpu_devices)
  json_get(dp2_processes "${WORK_DIR}/dp2.json" config processes)
  if(NOT dp2_devices EQUAL 2 OR NOT dp2_processes EQUAL 1)
    message(FATAL_ERROR "dp2.json: cpu_devices ${dp2_devices}, processes ${dp2_processes}")
  endif()
  expect_run(dp_launch 0 ARGS launch -n 2 -- "${INGOT}" ${dp_common} --cpu-devices 2 --csv dp.csv
             --save-weights dp.safetensors OUT dp_launch_out)
  string(REGEX MATCHALL "test loss" dp_lines "${dp_launch_out}")
  list(LENGTH dp_lines dp_n)
  if(NOT dp_n EQUAL 1 OR NOT dp_launch_out MATCHES "${dp_want}")
    message(FATAL_ERROR "2 processes x 2 devices printed '${dp_launch_out}', 1 device: '${dp_line}'")
  endif()
  expect_crlf_lines("${WORK_DIR}/dp.csv" 2)  # header + 1 epoch: written once
  expect_run(dp_evaluate 0 ARGS evaluate --weights dp.safetensors --data-dir "${DATA_DIR}" --batch-size 64 OUT dp_eval)
  if(NOT dp_eval MATCHES "${dp_want}")
    message(FATAL_ERROR "evaluate of the launched run's weights: '${dp_eval}', expected '${dp_want}'")
  endif()
  return()
endif()

# ---- PART errors ------------------------------------------------------------------------------
set(out_files "${WORK_DIR}/w.safetensors" "${WORK_DIR}/h.csv" "${WORK_DIR}/m.json")
set(outputs --save-weights w.safetensors --csv h.csv --metrics-json m.json)
set(train train --data-dir "${DATA_DIR}" --epochs 1 --limit 256)

# Data: a missing directory, a wrong magic number, truncated files, an image/label count mismatch.
set(fm "${DATA_DIR}")
foreach(case magic truncated truncated_gz counts)
  file(MAKE_DIRECTORY "${WORK_DIR}/${case}")
  file(COPY "${fm}/t10k-images-idx3-ubyte.gz" "${fm}/t10k-labels-idx1-ubyte.gz" "${fm}/train-labels-idx1-ubyte.gz"
       DESTINATION "${WORK_DIR}/${case}")
endforeach()
file(COPY_FILE "${fm}/train-labels-idx1-ubyte.gz" "${WORK_DIR}/magic/train-images-idx3-ubyte.gz")
execute_process(COMMAND gzip -dc "${fm}/train-images-idx3-ubyte.gz" COMMAND head -c 100000
                OUTPUT_FILE "${WORK_DIR}/truncated/train-images-idx3-ubyte")
execute_process(COMMAND head -c 100000 "${fm}/train-images-idx3-ubyte.gz"
                OUTPUT_FILE "${WORK_DIR}/truncated_gz/train-images-idx3-ubyte.gz")
file(COPY_FILE "${fm}/t10k-images-idx3-ubyte.gz" "${WORK_DIR}/counts/train-images-idx3-ubyte.gz")

# Data parallel: the device count, the device, and batches that do not split over the devices.
expect_run(cpu_devices_zero 1 ARGS ${train} --cpu-devices 0 ${outputs} ERR "--cpu-devices must be in [1, 1024], got 0")
expect_run(cpu_devices_cuda 1 ARGS ${train} --cpu-devices 2 --device cuda ${outputs}
           ERR "--cpu-devices needs --device cpu")
expect_run(gpus_zero 1 ARGS ${train} --gpus 0 --device cuda ${outputs} ERR "--gpus must be in [1, 64], got 0")
expect_run(gpus_cpu 1 ARGS ${train} --gpus 2 ${outputs} ERR "--gpus needs --device cuda")
expect_run(gpus_graphs 1 ARGS ${train} --gpus 2 --device cuda --cuda-graphs ${outputs}
           ERR "--cuda-graphs works on one GPU")
expect_run(cpu_devices_split 1 ARGS ${train} --cpu-devices 3 ${outputs}
           ERR "does not split over the 3 devices of mesh axis 'batch'")
# Training batches that split but a ragged test batch (10000 % 63 = 46) that does not: refused
# before training, not after it.
expect_run(cpu_devices_test_split 1 ARGS train --data-dir "${DATA_DIR}" --epochs 1 --limit 252 --validation-split 0
           --batch-size 63 --cpu-devices 3 ${outputs}
           ERR "--batch-size 63: the 10000 test images give a batch of 46, which does not split over the 3 CPU devices")
expect_missing(${out_files})

expect_run(missing_data_dir 1 ARGS train --data-dir "${WORK_DIR}/no_such_dir" ${outputs}
           ERR "ingot: error:" "no_such_dir' does not exist" "install the Debian package dataset-fashion-mnist"
               "--data-dir DIR")
expect_run(missing_files 1 ARGS train --data-dir "${WORK_DIR}" ${outputs}
           ERR "train-images-idx3-ubyte(.gz)' not found" "dataset-fashion-mnist")
expect_run(wrong_magic 1 ARGS train --data-dir "${WORK_DIR}/magic" ${outputs}
           ERR "[ParseError]" "train-images-idx3-ubyte.gz' is not an IDX image file"
               "magic number 0x00000801, expected 0x00000803" "dataset-fashion-mnist")
expect_run(truncated 1 ARGS train --data-dir "${WORK_DIR}/truncated" ${outputs}
           ERR "[ParseError]" "100000 bytes for 60000 images of 28x28")
expect_run(truncated_gz 1 ARGS train --data-dir "${WORK_DIR}/truncated_gz" ${outputs}
           ERR "[ParseError]" "truncated or corrupt gzip file")
expect_run(count_mismatch 1 ARGS train --data-dir "${WORK_DIR}/counts" ${outputs}
           ERR "[ParseError]" "10000 images but 60000 labels in the train-* files")
# Outputs that are inputs, empty or out-of-range values, a diverging run.
file(MAKE_DIRECTORY "${WORK_DIR}/data_copy")
file(COPY "${fm}/" DESTINATION "${WORK_DIR}/data_copy")
expect_run(output_is_data 1 ARGS train --data-dir "${WORK_DIR}/data_copy" --epochs 1 --limit 256
           --csv data_copy/train-labels-idx1-ubyte.gz ERR "--csv 'data_copy/train-labels-idx1-ubyte.gz' is an input")
expect_run(empty_path 2 ARGS ${train} --csv= ERR "--csv")
expect_run(huge_epochs 2 ARGS ${train} --epochs 99999999999999999999 ERR "out of the 64-bit integer range")
expect_run(negative_seed 2 ARGS ${train} --seed -1 ERR "--seed: '-1' is negative")
# Integers are decimal: "065" is 65 (not octal 53, which --gpus would accept), "0x10" is refused.
expect_run(octal_gpus 1 ARGS ${train} --gpus 065 --device cuda ${outputs} ERR "--gpus must be in [1, 64], got 65")
expect_run(hex_epochs 2 ARGS ${train} --epochs 0x10 ERR "--epochs: '0x10' is not a decimal integer")
expect_run(spaced_limit 2 ARGS ${train} --limit "1 2" ERR "--limit: '1 2' is not a decimal integer")
# A FIFO among the inputs is refused at once (opening one for reading used to wait forever).
file(REMOVE "${WORK_DIR}/weights.fifo")
execute_process(COMMAND mkfifo "${WORK_DIR}/weights.fifo" RESULT_VARIABLE fifo_rc)
if(NOT fifo_rc EQUAL 0)
  message(FATAL_ERROR "mkfifo failed: ${fifo_rc}")
endif()
expect_run(weights_fifo 1 ARGS evaluate --weights weights.fifo TIMEOUT 60 ERR "weights.fifo' is not a regular file")
file(REMOVE_RECURSE "${WORK_DIR}/fifo_data")
file(MAKE_DIRECTORY "${WORK_DIR}/fifo_data")
file(COPY "${fm}/t10k-images-idx3-ubyte.gz" "${fm}/t10k-labels-idx1-ubyte.gz" "${fm}/train-labels-idx1-ubyte.gz"
     DESTINATION "${WORK_DIR}/fifo_data")
execute_process(COMMAND mkfifo "${WORK_DIR}/fifo_data/train-images-idx3-ubyte")
expect_run(idx_fifo 1 ARGS train --data-dir "${WORK_DIR}/fifo_data" ${outputs} TIMEOUT 60
           ERR "train-images-idx3-ubyte' is not a regular file")
expect_run(diverges 1 ARGS ${train} --learning-rate 1e30 ${outputs} ERR "training diverged" "lower --learning-rate")
expect_missing(${out_files})

# Options.
expect_run(unknown_model 1 ARGS ${train} --model resnet ${outputs} ERR "unknown --model 'resnet'" "mlp or cnn")
expect_run(bad_cache_size 1 ARGS ${train} --compile-cache-max-size -5 ${outputs}
           ERR "--compile-cache-max-size '-5': not a size" "e.g. 500M or 2G")
expect_run(unknown_optimizer 1 ARGS ${train} --optimizer nadam ${outputs}
           ERR "unknown --optimizer 'nadam'" "adam, adamw, sgd, rmsprop or adagrad")
expect_run(unknown_schedule 1 ARGS ${train} --lr-schedule step ${outputs}
           ERR "unknown --lr-schedule 'step'" "constant or cosine")
expect_run(unknown_dataset 1 ARGS ${train} --dataset mnist ERR "unknown --dataset 'mnist'")
expect_run(zero_epochs 1 ARGS train --data-dir "${DATA_DIR}" --epochs 0 ${outputs} ERR "--epochs must be > 0, got 0")
expect_run(negative_batch 1 ARGS ${train} --batch-size -4 ${outputs} ERR "--batch-size must be > 0, got -4")
expect_run(zero_batch 1 ARGS ${train} --batch-size 0 ERR "--batch-size must be > 0, got 0")
expect_run(zero_steps 1 ARGS ${train} --steps-per-execution 0 ERR "--steps-per-execution must be > 0")
expect_run(zero_limit 1 ARGS train --data-dir "${DATA_DIR}" --limit 0 ERR "--limit must be > 0, got 0")
expect_run(big_limit 1 ARGS train --data-dir "${DATA_DIR}" --limit 60001 ${outputs}
           ERR "--limit 60001 is more than the 60000 training images")
expect_run(bad_split 1 ARGS ${train} --validation-split 1.5 ERR "--validation-split must be in [0, 1), got 1.5")
expect_run(empty_split 1 ARGS train --data-dir "${DATA_DIR}" --limit 1 --validation-split 0.5 ${outputs}
           ERR "leaves 0 for training")
expect_run(bad_learning_rate 1 ARGS ${train} --learning-rate -0.1 ERR "--learning-rate must be a finite number > 0")
# No GPU here: --device cuda names the driver's reason before reading data; evaluate/predict are
# CPU only.
expect_run(cuda 1 ARGS ${train} --device cuda ${outputs} ERR "[NotFound]" "--device cuda: no usable CUDA device" "--device cpu")
expect_run(unknown_device 1 ARGS ${train} --device tpu ERR "unknown --device 'tpu'")
expect_run(not_a_number 2 ARGS ${train} --epochs two ERR "ingot: error:" "--epochs")
expect_run(unknown_option 2 ARGS ${train} --epoch 3 ERR "ingot: error:" "--epoch")
expect_missing(${out_files})

# Output paths are checked before anything is read or trained; none of the files appears.
file(WRITE "${WORK_DIR}/a_file" "x")
expect_run(weights_dir_missing 1 ARGS ${train} --save-weights no_dir/w.safetensors --csv h.csv
           ERR "--save-weights 'no_dir/w.safetensors': 'no_dir' does not exist")
expect_run(csv_parent_is_file 1 ARGS ${train} --csv a_file/h.csv --metrics-json m.json
           ERR "--csv 'a_file/h.csv': 'a_file' is not a directory")
expect_run(csv_unwritable 1 ARGS ${train} --csv /proc/ingot_h.csv --save-weights w.safetensors
           ERR "--csv '/proc/ingot_h.csv': cannot create a file in '/proc'")
expect_run(json_is_dir 1 ARGS ${train} --metrics-json "${WORK_DIR}" --csv h.csv ERR "--metrics-json '${WORK_DIR}' is a directory")
expect_run(same_file_twice 1 ARGS ${train} --csv out.txt --metrics-json ./out.txt
           ERR "--csv and --metrics-json both name './out.txt'")
expect_missing(${out_files} "${WORK_DIR}/out.txt")
file(GLOB probes "${WORK_DIR}/.ingot-write-probe-*")
if(probes)
  message(FATAL_ERROR "probe files left behind: ${probes}")
endif()

# evaluate / predict: weights missing, corrupt, of the other model; index out of range.
set(weights "${TRAIN_DIR}/mlp.safetensors")

# The outputs are committed together: --csv on /dev/full fails after training, and the existing
# --save-weights and --metrics-json files stay as they were (no temporary file left either).
if(EXISTS /dev/full)
  file(COPY_FILE "${weights}" "${WORK_DIR}/keep.safetensors")
  file(WRITE "${WORK_DIR}/keep.json" "{\"old\": true}\n")
  file(SHA256 "${WORK_DIR}/keep.safetensors" keep_before)
  expect_run(full_csv 1 ARGS ${train} --save-weights keep.safetensors --metrics-json keep.json --csv /dev/full
             ERR "--csv: writing '/dev/full' failed" "No space left on device")
  file(SHA256 "${WORK_DIR}/keep.safetensors" keep_after)
  file(READ "${WORK_DIR}/keep.json" keep_json)
  if(NOT keep_before STREQUAL keep_after OR NOT keep_json STREQUAL "{\"old\": true}\n")
    message(FATAL_ERROR "a failed --csv replaced the other outputs")
  endif()
  file(GLOB left "${WORK_DIR}/.keep.*tmp-*")
  if(left)
    message(FATAL_ERROR "temporary files left behind: ${left}")
  endif()
endif()
# A name at NAME_MAX (255 bytes) is written (its temporary name is cut to fit).
string(REPEAT "w" 240 long_name)
expect_run(long_name 0 ARGS ${train} --metrics-json "${long_name}.json")
if(NOT EXISTS "${WORK_DIR}/${long_name}.json")
  message(FATAL_ERROR "--metrics-json with a 245-byte name was not written")
endif()
# SIGTERM and SIGINT stop a run at a step boundary: exit 128 + signal, a message naming the
# signal and the epoch, and nothing written (no output, no temporary file). The signal is sent
# once the second epoch has started (its progress line is out), so it lands inside training.
foreach(sig TERM INT)
  file(REMOVE_RECURSE "${WORK_DIR}/sig_${sig}")
  file(MAKE_DIRECTORY "${WORK_DIR}/sig_${sig}")
  execute_process(
    COMMAND sh -c "\"$0\" train --data-dir \"$1\" --limit 2048 --batch-size 32 --epochs 100000 \
--save-weights w.safetensors --csv h.csv --metrics-json m.json > out.txt 2> err.txt & pid=$!
i=0; until grep -q 'Epoch 2/' out.txt 2>/dev/null; do sleep 0.1; i=$((i+1)); [ $i -lt 3000 ] || break; done
kill -$2 $pid; wait $pid; echo $?" "${INGOT}" "${DATA_DIR}" ${sig}
    WORKING_DIRECTORY "${WORK_DIR}/sig_${sig}" OUTPUT_VARIABLE sig_rc OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 600)
  file(READ "${WORK_DIR}/sig_${sig}/err.txt" sig_err)
  if(sig STREQUAL "TERM")
    set(want_rc 143)
  else()
    set(want_rc 130)
  endif()
  if(NOT sig_rc STREQUAL want_rc OR NOT sig_err MATCHES "ingot: error: \\[Cancelled\\] interrupted by SIG${sig} \\(signal [0-9]+\\) during epoch [0-9]+ after [0-9]+ steps?; no output was written")
    message(FATAL_ERROR "SIG${sig}: exit ${sig_rc} (expected ${want_rc}), stderr:\n${sig_err}")
  endif()
  file(GLOB left RELATIVE "${WORK_DIR}/sig_${sig}" "${WORK_DIR}/sig_${sig}/*" "${WORK_DIR}/sig_${sig}/.*")
  list(REMOVE_ITEM left out.txt err.txt)
  if(left)
    message(FATAL_ERROR "SIG${sig} left files behind: ${left}")
  endif()
endforeach()
file(WRITE "${WORK_DIR}/corrupt.safetensors" "this is not a safetensors file")
expect_run(evaluate_no_weights_option 2 ARGS evaluate --data-dir "${DATA_DIR}" ERR "--weights is required")
expect_run(evaluate_missing_weights 1 ARGS evaluate --weights nope.safetensors --data-dir "${DATA_DIR}"
           ERR "[NotFound]" "nope.safetensors")
expect_run(evaluate_corrupt_weights 1 ARGS evaluate --weights corrupt.safetensors --data-dir "${DATA_DIR}"
           ERR "[ParseError]" "corrupt.safetensors")
expect_run(evaluate_other_model 1 ARGS evaluate --weights "${weights}" --model cnn --data-dir "${DATA_DIR}"
           ERR "holds weights of the mlp model, not of --model cnn" "pass --model mlp")
expect_run(evaluate_unwritable_json 1 ARGS evaluate --weights "${weights}" --data-dir "${DATA_DIR}"
           --metrics-json no_dir/e.json ERR "--metrics-json 'no_dir/e.json'")
# evaluate and predict read only the test files.
file(MAKE_DIRECTORY "${WORK_DIR}/test_only")
file(COPY "${fm}/t10k-images-idx3-ubyte.gz" "${fm}/t10k-labels-idx1-ubyte.gz" DESTINATION "${WORK_DIR}/test_only")
expect_run(evaluate_test_files_only 0 ARGS evaluate --weights "${weights}" --data-dir "${WORK_DIR}/test_only"
           HAS "test loss ")
expect_run(evaluate_missing_data 1 ARGS evaluate --weights "${weights}" --data-dir no_such_dir
           ERR "does not exist" "dataset-fashion-mnist")
expect_run(predict_index_too_big 1 ARGS predict --weights "${weights}" --data-dir "${DATA_DIR}" --index 10000
           ERR "[OutOfRange]" "--index 10000 is outside the 10000 test images")
expect_run(predict_negative_index 2 ARGS predict --weights "${weights}" --data-dir "${DATA_DIR}" --index -1
           ERR "--index: '-1' is negative")
expect_run(predict_no_index 2 ARGS predict --weights "${weights}" --data-dir "${DATA_DIR}" ERR "--index is required")
expect_run(evaluate_json_is_weights 1 ARGS evaluate --weights "${weights}" --data-dir "${DATA_DIR}"
           --metrics-json "${weights}" ERR "is an input of this command")
expect_run(predict_unknown_model 1 ARGS predict --weights "${weights}" --model vgg --data-dir "${DATA_DIR}" --index 0
           ERR "unknown --model 'vgg'")
