#!/usr/bin/env bash
# The GPU check: runs the bundled test binaries on the GPU machine (docs/building.md, "The GPU
# check bundle"; /work/shared/GPU_CHECKS.md).
#
#   tools/gpu_check.sh OUT_DIR
#
# Run from the repository root with gpu_bundle.tar.xz (tools/make_gpu_bundle.sh) carried along;
# it also runs on a machine without a GPU, where the GPU tests skip with their reason.
#   1. unpacks gpu_bundle.tar.xz unless gpu_bundle/ is already there;
#   2. records the machine: nvidia-smi, ptxas --version, the bundle's MANIFEST.txt, `ldd` of each
#      binary (a library "not found" is reported before anything runs);
#   3. runs the bundle's test binary gpu_tests (the `runtime`, `ptx` and `gpu` suites in one
#      executable, see cmake/gpu_bundle.cmake) with --gtest_output=json:OUT_DIR/gpu_tests.json, its
#      output in OUT_DIR/gpu_tests.log, under a time limit: every test, the GPU ones (CudaGpu.*,
#      NcclGpu.*, the gpu suite) and the ptx suite (PTX assembled by /usr/local/cuda/bin/ptxas for
#      sm_80/sm_90) included. The CPU-JIT tests also pass without LLVM on the machine;
#   4. with a GPU (nvidia-smi lists one): trains the Fashion-MNIST MLP on it (`ingot train
#      --device cuda`, 10 epochs, the bundle's data; OUT_DIR/train.json, test accuracy >= 0.88
#      required), then `ingot bench --device cuda` (MLP, CNN, small transformer LM, GEMMs against
#      cuBLAS directly; MLP and CNN again with --cuda-graphs) and the same models in PyTorch and
#      JAX when python3 imports them
#      (bench/peers/bench_peers.py): OUT_DIR/bench.json (all results) and bench_report.md (the
#      ratios, bench/peers/bench_report.py). Without a GPU these steps are skipped with that reason.
#      Their output goes to OUT_DIR/runs.log;
#   5. writes OUT_DIR/summary.json (per step: exit status, seconds; per test binary: tests
#      run/passed/failed/skipped, the failed tests, the skipped tests with their reason; the
#      training's test accuracy) and exits 1 when anything failed, 2 on bad usage or a missing
#      bundle. The peers are reported but never fail the check.
# OUT_DIR receives at most 8 files (what the GPU machine sends back): machine.txt, gpu_tests.json,
# gpu_tests.log, train.json, bench.json, bench_report.md, runs.log, summary.json.
# The whole check takes ~30 s here (2 cores, GPU steps skipped) and is sized to stay under
# 10 minutes there (each step has a time limit; typically 3-4 minutes).
set -uo pipefail

if [[ $# != 1 || -z $1 ]]; then
  echo "usage: tools/gpu_check.sh OUT_DIR   (run from the repository root, gpu_bundle.tar.xz present)" >&2
  exit 2
fi
mkdir -p "$1" || { echo "gpu_check.sh: cannot create OUT_DIR '$1'" >&2; exit 2; }
OUT=$(realpath "$1")
cd "$(dirname "$0")/.."
readonly OUT BUNDLE=gpu_bundle ARCHIVE=gpu_bundle.tar.xz
readonly SUITE_LIMIT_S=150 TRAIN_LIMIT_S=110 BENCH_LIMIT_S=110 GRAPHS_LIMIT_S=50 PEER_LIMIT_S=70
check_start=$(date +%s%N)

if [[ ! -x $BUNDLE/bin/gpu_tests ]]; then
  if [[ ! -f $ARCHIVE ]]; then
    echo "gpu_check.sh: neither $BUNDLE/ nor $ARCHIVE here ($(pwd)); build it with tools/make_gpu_bundle.sh" >&2
    exit 2
  fi
  echo "== unpacking $ARCHIVE"
  tar -xJf "$ARCHIVE" || { echo "gpu_check.sh: could not unpack $ARCHIVE" >&2; exit 2; }
fi

# --- the machine ---------------------------------------------------------------------------
{
  echo "== date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(uname -n)  cores: $(nproc)"
  echo "== $(ldd --version 2>&1 | head -1)"
  echo "== nvidia-smi"
  if command -v nvidia-smi > /dev/null; then nvidia-smi 2>&1; else echo "(no nvidia-smi on this machine)"; fi
  echo "== ptxas"
  /usr/local/cuda/bin/ptxas --version 2>&1 || echo "(no /usr/local/cuda/bin/ptxas: the ptx tests skip)"
  echo "== bundle"
  cat "$BUNDLE/MANIFEST.txt"
  for bin in "$BUNDLE"/bin/*; do
    echo "== ldd $(basename "$bin")"
    ldd "$bin" 2>&1
  done
} 2>&1 | tee "$OUT/machine.txt"
if grep -q "not found" "$OUT/machine.txt"; then
  echo "gpu_check.sh: a bundled binary misses a shared library (see 'not found' above); the suites will fail to start" >&2
fi

gpu_name=""
if command -v nvidia-smi > /dev/null; then
  gpu_name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
fi

# --- the suites ----------------------------------------------------------------------------
# Milliseconds since $1 (a `date +%s%N` value).
elapsed_ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

# One line per run in $OUT/runs.tsv: name, exit status, milliseconds, gtest filter ("" = not gtest).
: > "$OUT/runs.tsv"

# run_suite NAME FILTER: a gtest binary of the bundle, with its JSON report and log.
run_suite() {
  local name=$1 filter=$2 start rc
  echo "== $name --gtest_filter=$filter"
  start=$(date +%s%N)
  timeout "$SUITE_LIMIT_S" "$BUNDLE/bin/$name" --gtest_filter="$filter" \
      --gtest_output="json:$OUT/$name.json" > "$OUT/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(elapsed_ms "$start")" "$filter" >> "$OUT/runs.tsv"
  tail -3 "$OUT/$name.log"
  ((rc == 124)) && echo "   $name: killed after $SUITE_LIMIT_S s"
}

run_suite gpu_tests '*'

# run_step NAME LIMIT_S COMMAND...: one of the GPU steps, its output appended to runs.log.
run_step() {
  local name=$1 limit=$2 start rc
  shift 2
  echo "== $name: $*" | tee -a "$OUT/runs.log"
  start=$(date +%s%N)
  timeout "$limit" "$@" >> "$OUT/runs.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(elapsed_ms "$start")" "" >> "$OUT/runs.tsv"
  ((rc == 124)) && echo "   $name: killed after $limit s" | tee -a "$OUT/runs.log"
  echo "   exit $rc"
}

# skip_step NAME REASON: recorded in the summary as skipped, with the reason.
skip_step() {
  echo "== $1: skipped ($2)" | tee -a "$OUT/runs.log"
  printf '%s\t%s\t%s\t%s\n' "$1" skipped 0 "$2" >> "$OUT/runs.tsv"
}

: > "$OUT/runs.log"
readonly DATA=$BUNDLE/data/fashion-mnist
TMP_DIR=$(mktemp -d)
readonly TMP_DIR
if [[ -z $gpu_name ]]; then
  for step in train bench_ingot bench_graphs bench_torch bench_jax; do skip_step "$step" "no GPU (nvidia-smi lists none)"; done
else
  if [[ -f $DATA/train-images-idx3-ubyte ]]; then
    run_step train "$TRAIN_LIMIT_S" "$BUNDLE/bin/ingot" train --device cuda --data-dir "$DATA" --epochs 10 \
        --metrics-json "$OUT/train.json"
  else
    skip_step train "the bundle has no Fashion-MNIST data (tools/make_gpu_bundle.sh found none)"
  fi
  # The LM trains on the bundle's copy of the GPL 3 (random tokens without it), ingot and peers alike.
  lm_text=none
  [[ -f $BUNDLE/data/GPL-3 ]] && lm_text=$BUNDLE/data/GPL-3
  run_step bench_ingot "$BENCH_LIMIT_S" "$BUNDLE/bin/ingot" bench --device cuda --gemm 1024,4096 \
      --lm-text "$lm_text" --json "$TMP_DIR/ingot.json"
  # The same MLP and CNN steps replayed as CUDA graphs (launch overhead dominates small models).
  run_step bench_graphs "$GRAPHS_LIMIT_S" "$BUNDLE/bin/ingot" bench --device cuda --models mlp,cnn --cuda-graphs \
      --json "$TMP_DIR/ingot_graphs.json"
  for fw in torch jax; do
    if python3 -c "import $fw" 2> /dev/null; then
      run_step "bench_$fw" "$PEER_LIMIT_S" python3 bench/peers/bench_peers.py --framework "$fw" --device cuda \
          --lm-text "$lm_text" --json "$TMP_DIR/$fw.json"
    else
      skip_step "bench_$fw" "python3 cannot import $fw"
    fi
  done
  if [[ -f $TMP_DIR/ingot.json ]]; then
    python3 bench/peers/bench_report.py "$TMP_DIR/ingot.json" "$TMP_DIR/torch.json" "$TMP_DIR/jax.json" \
        --title "ingot bench on $gpu_name" --out "$OUT/bench_report.md" >> "$OUT/runs.log" 2>&1
    python3 -c '
import json, os, sys
runs = {fw: json.load(open(os.path.join(sys.argv[1], fw + ".json")))
        for fw in ("ingot", "ingot_graphs", "torch", "jax") if os.path.exists(os.path.join(sys.argv[1], fw + ".json"))}
json.dump(runs, open(sys.argv[2], "w"), indent=2)' "$TMP_DIR" "$OUT/bench.json"
    cat "$OUT/bench_report.md" 2> /dev/null
  fi
fi
rm -rf "$TMP_DIR"

# --- the summary ---------------------------------------------------------------------------
python3 - "$OUT" "$gpu_name" "$(elapsed_ms "$check_start")" "$(uname -n)" << 'EOF'
import json, os, sys

out, gpu, total_s, host = sys.argv[1], sys.argv[2], int(sys.argv[3]) / 1000, sys.argv[4]


def skip_reasons(log_path):
    """Test name -> GTEST_SKIP message, from the log (gtest 1.12's JSON does not carry it):
    a skip prints "file:line: Skipped", the message lines, then "[  SKIPPED ] Suite.Test"."""
    reasons, current, lines = {}, None, []
    if not os.path.exists(log_path):
        return reasons
    for line in open(log_path, errors="replace"):
        line = line.rstrip("\n")
        if line.endswith(": Skipped"):
            current, lines = True, []
        elif line.startswith("[  SKIPPED ] ") and current:
            reasons[line[13:].split(" (")[0]] = " ".join(l.strip() for l in lines if l.strip())
            current = None
        elif current:
            lines.append(line)
    return reasons

binaries, ok = [], True
for line in open(os.path.join(out, "runs.tsv")):
    name, rc, ms, flt = line.rstrip("\n").split("\t")
    if rc == "skipped":
        binaries.append({"name": name, "skipped": flt})
        continue
    entry = {"name": name, "exit_status": int(rc), "seconds": round(int(ms) / 1000, 2)}
    report = os.path.join(out, name + ".json")
    if name == "train" and int(rc) == 0:
        # The issue's bar: the Fashion-MNIST MLP reaches >= 0.88 test accuracy on the GPU.
        accuracy = json.load(open(report))["test"]["accuracy"] if os.path.exists(report) else None
        entry["test_accuracy"] = accuracy
        entry["accuracy_ok"] = accuracy is not None and accuracy >= 0.88
        ok = ok and entry["accuracy_ok"]
    if name in ("bench_torch", "bench_jax"):
        binaries.append(entry)  # peers: reported, never failing the check
        continue
    if name == "gpu_tests":
        entry["gtest_filter"] = flt
        failed, skipped, passed = [], [], 0
        reasons = skip_reasons(os.path.join(out, name + ".log"))
        if os.path.exists(report):
            for suite in json.load(open(report)).get("testsuites", []):
                for t in suite.get("testsuite", []):
                    full = f"{suite['name']}.{t['name']}"
                    if t.get("failures"):
                        failed.append(full)
                    elif t.get("result") == "SKIPPED":
                        skipped.append({"test": full, "reason": reasons.get(full, "")})
                    elif t.get("status") == "RUN":
                        passed += 1
        else:
            entry["error"] = f"no {name}.json: the binary did not run to the end (see {name}.log)"
        entry.update(tests=passed + len(failed) + len(skipped), passed=passed, failed=len(failed),
                     skipped=len(skipped), failed_tests=failed, skipped_tests=skipped)
        ok = ok and not failed and os.path.exists(report)
    ok = ok and int(rc) == 0
    binaries.append(entry)
summary = {"host": host, "gpu": gpu or None, "seconds": round(total_s, 2), "ok": ok,
           "binaries": binaries}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
for b in binaries:
    if "exit_status" not in b:
        print(f"{b['name']:14} skipped: {b['skipped']}")
        continue
    counts = (f"{b['passed']} passed, {b['failed']} failed, {b['skipped']} skipped" if "passed" in b else
              f"test accuracy {b['test_accuracy']}" if "test_accuracy" in b else "")
    print(f"{b['name']:14} exit {b['exit_status']:3}  {counts}  {b['seconds']} s")
print(f"GPU: {gpu or 'none'}; total {total_s:.1f} s; {'ALL PASSED' if ok else 'FAILURES'}")
EOF
status=$?
rm -f "$OUT/runs.tsv"
if ((status != 0)); then
  echo "gpu_check.sh: could not write $OUT/summary.json (python3 failed)" >&2
  exit 1
fi
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$OUT/summary.json"
