#!/usr/bin/env bash
# The GPU check: runs the bundled binaries on the GPU machine (docs/building.md, "The GPU check
# bundle"; docs/runtime-cuda.md, "First run on a new GPU machine"; /work/shared/GPU_CHECKS.md).
#
#   tools/gpu_check.sh OUT_DIR
#
# Run from the repository root with gpu_bundle.tar.xz (tools/make_gpu_bundle.sh) carried along;
# it also runs on a machine without a GPU, where the GPU steps skip with their reason.
# The steps, most important first, each under its own time limit (`timeout -k`) and all of them
# under one budget of CHECK_BUDGET_S (a step that would start with less than MIN_STEP_S of it
# left is skipped with that reason), so the worst case stays under 6 minutes and a rerun fits
# in the machine's 15; after every step OUT_DIR/summary.json (and bench.json) is rewritten, so a
# check killed from outside still returns what had ended:
#   0. unpacks gpu_bundle.tar.xz (tar with xz, else Python's tarfile) unless gpu_bundle/ holds an
#      unpacking of this very archive (its sha256 in gpu_bundle/.archive-sha256);
#   1. machine.txt: nvidia-smi, ptxas --version, the bundle's MANIFEST.txt, `ingot cuda-info`
#      (driver, devices, which file each NVIDIA library was loaded from), `ldd` of the binary;
#   2. gpu_tests: the tests that need a GPU (GPU_FILTER: the driver, NCCL, the code generator's
#      kernels against the interpreter, CUDA graphs) -> gpu_tests.json;
#   3. train: the Fashion-MNIST MLP, 10 epochs on the GPU (`ingot train --device cuda`) ->
#      train.json; test accuracy >= 0.88 required;
#   4. bench_mlp (with the GEMMs against cuBLAS), bench_cnn, bench_lm: `ingot bench --device cuda`,
#      one model per step; then bench_torch, bench_jax (bench/peers/bench_peers.py, when python3
#      imports them; reported, never failing the check); then bench_graphs (MLP and CNN replayed
#      as CUDA graphs) -> bench.json (all runs) and bench_report.md (the ratios) after each;
#   5. other_tests: the rest of the bundle's suites (the ptx suite assembling with the machine's
#      ptxas, the fake-driver and host-side tests CI runs anyway) -> other_tests.json.
# Without a GPU (nvidia-smi lists none) steps 3-4 are skipped with that reason.
# Every step's output goes to runs.log (lines flushed as they come).
# OUT_DIR receives 8 files (what the GPU machine sends back at most): machine.txt, summary.json,
# gpu_tests.json, other_tests.json, train.json, bench.json, bench_report.md, runs.log.
# Exit status: 0 all passed, 1 a step failed, 2 bad usage or no bundle.
set -uo pipefail

if [[ $# != 1 || -z $1 ]]; then
  echo "usage: tools/gpu_check.sh OUT_DIR   (run from the repository root, gpu_bundle.tar.xz present)" >&2
  exit 2
fi
mkdir -p "$1" || { echo "gpu_check.sh: cannot create OUT_DIR '$1'" >&2; exit 2; }
OUT=$(realpath "$1")
cd "$(dirname "$0")/.."
readonly OUT BUNDLE=gpu_bundle ARCHIVE=gpu_bundle.tar.xz
# Seconds: the whole check, the least a step may start with, and each step's own limit.
readonly CHECK_BUDGET_S=330 MIN_STEP_S=10 KILL_AFTER_S=5
readonly GPU_TESTS_S=80 TRAIN_S=40 BENCH_MODEL_S=30 BENCH_LM_S=40 PEER_S=35 GRAPHS_S=25 OTHER_TESTS_S=90
# The tests that need a GPU (they skip with their reason without one).
readonly GPU_FILTER='CudaGpu.*:NcclGpu.*:NcclFitGpu.*:Gpu.*:GpuGraphs.*:ConvGpu.*:HalfGemmGpu.*'
check_start=$(date +%s)
STATE=$(mktemp -d)
readonly STATE
trap 'rm -rf "$STATE"' EXIT
mkdir -p "$STATE/bench"

# --- the bundle ----------------------------------------------------------------------------
unpack() {
  if command -v xz > /dev/null; then
    tar -xJf "$ARCHIVE"
  else
    echo "   (no xz on this machine: unpacking with Python's tarfile)"
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall()' "$ARCHIVE"
  fi
}
if [[ -f $ARCHIVE ]]; then
  sha=$(sha256sum "$ARCHIVE" | cut -d' ' -f1)
  if [[ ! -x $BUNDLE/bin/gpu_tests || $(cat "$BUNDLE/.archive-sha256" 2> /dev/null) != "$sha" ]]; then
    echo "== unpacking $ARCHIVE (sha256 $sha)"
    rm -rf "$BUNDLE"
    unpack || { echo "gpu_check.sh: could not unpack $ARCHIVE" >&2; exit 2; }
    echo "$sha" > "$BUNDLE/.archive-sha256"
  fi
elif [[ -x $BUNDLE/bin/gpu_tests ]]; then
  echo "gpu_check.sh: no $ARCHIVE here; using the unpacked $BUNDLE/ as it is" >&2
else
  echo "gpu_check.sh: neither $BUNDLE/ nor $ARCHIVE here ($(pwd)); build it with tools/make_gpu_bundle.sh" >&2
  exit 2
fi

# --- the machine ---------------------------------------------------------------------------
{
  echo "== date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(uname -n)  cores: $(nproc)"
  echo "== $(ldd --version 2>&1 | head -1)"
  echo "== nvidia-smi"
  if command -v nvidia-smi > /dev/null; then timeout -k 2 10 nvidia-smi 2>&1; else echo "(no nvidia-smi on this machine)"; fi
  echo "== ptxas"
  /usr/local/cuda/bin/ptxas --version 2>&1 || echo "(no /usr/local/cuda/bin/ptxas: the ptx tests skip)"
  echo "== bundle"
  cat "$BUNDLE/MANIFEST.txt"
  echo "== ingot cuda-info"
  timeout -k 2 20 "$BUNDLE/bin/ingot" cuda-info 2>&1
  for bin in "$BUNDLE"/bin/*; do
    [[ -L $bin ]] && continue
    echo "== ldd $(basename "$bin")"
    ldd "$bin" 2>&1
  done
} 2>&1 | tee "$OUT/machine.txt"
if grep -q "not found" "$OUT/machine.txt"; then
  echo "gpu_check.sh: a bundled binary misses a shared library (see 'not found' above); the steps will fail to start" >&2
fi

gpu_name=""
if command -v nvidia-smi > /dev/null; then
  gpu_name=$(timeout -k 2 10 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
fi

# --- the steps -----------------------------------------------------------------------------
: > "$STATE/runs.tsv"
: > "$OUT/runs.log"

elapsed_s() { echo $(($(date +%s) - check_start)); }

# summarize [--final]: rewrites summary.json, bench.json and bench_report.md from what has ended.
summarize() {
  python3 tools/gpu_check_summary.py "$STATE" "$OUT" "$gpu_name" "$((($(date +%s) - check_start) * 1000))" \
      "$(uname -n)" "$@"
}

report_bench() {
  [[ -f $STATE/ingot_merged.json ]] || return 0
  python3 bench/peers/bench_report.py "$STATE/ingot_merged.json" "$STATE/bench/bench_torch.json" \
      "$STATE/bench/bench_jax.json" --title "ingot bench on $gpu_name" --out "$OUT/bench_report.md" \
      >> "$OUT/runs.log" 2>&1
}

# skip_step NAME REASON: recorded in the summary as skipped, with the reason.
skip_step() {
  echo "== $1: skipped ($2)" | tee -a "$OUT/runs.log"
  printf '%s\t%s\t%s\t%s\n' "$1" skipped 0 "$2" >> "$STATE/runs.tsv"
  summarize
}

# run_step NAME LIMIT_S LOG EXTRA COMMAND...: COMMAND under min(LIMIT_S, what the budget has
# left), its output appended to LOG; EXTRA (the gtest filter) goes into the summary.
run_step() {
  local name=$1 limit=$2 log=$3 extra=$4 left start rc
  shift 4
  left=$((CHECK_BUDGET_S - $(elapsed_s)))
  if ((left < MIN_STEP_S)); then
    skip_step "$name" "the check's ${CHECK_BUDGET_S} s budget is spent ($((CHECK_BUDGET_S - left)) s used)"
    return
  fi
  ((limit > left)) && limit=$left
  echo "== $name (limit $limit s): $*" | tee -a "$log"
  start=$(date +%s%N)
  # stdbuf: the lines reach the log as they are printed, so a kill loses none.
  timeout -k "$KILL_AFTER_S" "$limit" stdbuf -oL -eL "$@" >> "$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((($(date +%s%N) - start) / 1000000))" "$extra" >> "$STATE/runs.tsv"
  ((rc == 124 || rc == 137)) && echo "   $name: killed after $limit s" | tee -a "$log"
  echo "   $name: exit $rc ($(elapsed_s) s into the check)"
  summarize
}

run_tests() {
  local name=$1 limit=$2 filter=$3
  run_step "$name" "$limit" "$OUT/runs.log" "$filter" "$BUNDLE/bin/gpu_tests" --gtest_filter="$filter" \
      --gtest_output="json:$OUT/$name.json"
  tail -3 "$OUT/runs.log"
}

run_tests gpu_tests "$GPU_TESTS_S" "$GPU_FILTER"

readonly DATA=$BUNDLE/data/fashion-mnist
if [[ -z $gpu_name ]]; then
  for step in train bench_mlp bench_cnn bench_lm bench_torch bench_jax bench_graphs; do
    skip_step "$step" "no GPU (nvidia-smi lists none)"
  done
else
  if [[ -f $DATA/train-images-idx3-ubyte ]]; then
    run_step train "$TRAIN_S" "$OUT/runs.log" "" "$BUNDLE/bin/ingot" train --device cuda --data-dir "$DATA" \
        --epochs 10 --metrics-json "$OUT/train.json"
  else
    skip_step train "the bundle has no Fashion-MNIST data (tools/make_gpu_bundle.sh found none)"
  fi
  # The LM trains on the bundle's copy of the GPL 3 (random tokens without it), ingot and peers alike.
  lm_text=none
  [[ -f $BUNDLE/data/GPL-3 ]] && lm_text=$BUNDLE/data/GPL-3
  for model in mlp cnn lm; do
    limit=$BENCH_MODEL_S extra=()
    [[ $model == lm ]] && limit=$BENCH_LM_S
    [[ $model == mlp ]] && extra=(--gemm 1024,4096)
    run_step "bench_$model" "$limit" "$OUT/runs.log" "" "$BUNDLE/bin/ingot" bench --device cuda --models "$model" \
        "${extra[@]}" --lm-text "$lm_text" --json "$STATE/bench/bench_$model.json"
    report_bench
  done
  for fw in torch jax; do
    if python3 -c "import $fw" 2> /dev/null; then
      run_step "bench_$fw" "$PEER_S" "$OUT/runs.log" "" python3 bench/peers/bench_peers.py --framework "$fw" \
          --device cuda --lm-text "$lm_text" --json "$STATE/bench/bench_$fw.json"
      report_bench
    else
      skip_step "bench_$fw" "python3 cannot import $fw"
    fi
  done
  # The same MLP and CNN steps replayed as CUDA graphs (launch overhead dominates small models).
  run_step bench_graphs "$GRAPHS_S" "$OUT/runs.log" "" "$BUNDLE/bin/ingot" bench --device cuda --models mlp,cnn \
      --cuda-graphs --json "$STATE/bench/bench_graphs.json"
fi

run_tests other_tests "$OTHER_TESTS_S" "-$GPU_FILTER"

[[ -f $OUT/bench_report.md ]] && cat "$OUT/bench_report.md"
summarize --final
