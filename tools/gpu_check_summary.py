#!/usr/bin/env python3
"""The GPU check's report (tools/gpu_check.sh calls it after every step, so that a check killed
part-way still leaves the results of the steps that ended).

  gpu_check_summary.py STATE_DIR OUT_DIR GPU_NAME ELAPSED_MS HOST [--final]

STATE_DIR/runs.tsv: one line per step so far (name, exit status or "skipped", milliseconds,
gtest filter or skip reason). STATE_DIR/bench/*.json: the JSON of each `ingot bench` step
(bench_mlp.json, ... bench_graphs.json) and of each peer (bench_torch.json, bench_jax.json).

Writes OUT_DIR/summary.json (per step: exit status, seconds; per test step: tests run / passed /
failed / skipped, the failed tests, the skipped tests with their reason, from OUT_DIR/<step>.json
and OUT_DIR/runs.log; the training's test accuracy from OUT_DIR/train.json; "complete": false
until --final) and OUT_DIR/bench.json ({"ingot": the bench steps' models merged into one run,
"ingot_graphs": the --cuda-graphs run, "torch", "jax"}), each through a temporary file and a
rename, and STATE_DIR/ingot_merged.json (the merged ingot run, for bench/peers/bench_report.py). Exit status 0 when every step passed (peers never fail the check), 1 otherwise.
"""
import json
import os
import sys

TEST_STEPS = ("gpu_tests", "other_tests")
PEER_STEPS = ("bench_torch", "bench_jax")
ACCURACY_BAR = 0.88  # the Fashion-MNIST MLP's test accuracy on the GPU (issue 23)


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path):
    """The JSON in `path`, or None when it is missing or not (yet) whole."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


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


def test_counts(entry, report, reasons):
    """Adds the gtest JSON's counts to `entry`; returns whether the step passed."""
    failed, skipped, passed = [], [], 0
    if report is None:
        entry["error"] = f"no {entry['name']}.json: the binary did not run to the end (see runs.log)"
        return False
    for suite in report.get("testsuites", []):
        for t in suite.get("testsuite", []):
            full = f"{suite['name']}.{t['name']}"
            if t.get("failures"):
                failed.append(full)
            elif t.get("result") == "SKIPPED":
                skipped.append({"test": full, "reason": reasons.get(full, "")})
            elif t.get("status") == "RUN":
                passed += 1
    entry.update(tests=passed + len(failed) + len(skipped), passed=passed, failed=len(failed),
                 skipped=len(skipped), failed_tests=failed, skipped_tests=skipped)
    return not failed


def merged_bench(bench_dir):
    """{"ingot": ..., "ingot_graphs": ..., "torch": ..., "jax": ...} from the steps' JSONs so far."""
    runs = {}
    for name in ("bench_mlp", "bench_cnn", "bench_lm"):
        run = read_json(os.path.join(bench_dir, name + ".json"))
        if run is None:
            continue
        if "ingot" not in runs:
            runs["ingot"] = dict(run, models={}, gemm=[])
        runs["ingot"]["models"].update(run.get("models", {}))
        runs["ingot"]["gemm"].extend(run.get("gemm", []))
        runs["ingot"]["peak_rss_bytes"] = max(runs["ingot"].get("peak_rss_bytes", 0), run.get("peak_rss_bytes", 0))
    for key, name in (("ingot_graphs", "bench_graphs"), ("torch", "bench_torch"), ("jax", "bench_jax")):
        run = read_json(os.path.join(bench_dir, name + ".json"))
        if run is not None:
            runs[key] = run
    return runs


def main(argv):
    if len(argv) not in (6, 7) or (len(argv) == 7 and argv[6] != "--final"):
        print(__doc__, file=sys.stderr)
        return 2
    state, out, gpu, elapsed_ms, host = argv[1:6]
    final = len(argv) == 7
    reasons = skip_reasons(os.path.join(out, "runs.log"))
    steps, ok = [], True
    tsv = os.path.join(state, "runs.tsv")
    for line in open(tsv) if os.path.exists(tsv) else []:
        name, rc, ms, extra = line.rstrip("\n").split("\t")
        if rc == "skipped":
            steps.append({"name": name, "skipped": extra})
            continue
        entry = {"name": name, "exit_status": int(rc), "seconds": round(int(ms) / 1000, 2)}
        if rc in ("124", "137"):
            entry["error"] = "killed at its time limit"
        if name in PEER_STEPS:
            steps.append(entry)  # peers: reported, never failing the check
            continue
        passed = int(rc) == 0
        if name in TEST_STEPS:
            entry["gtest_filter"] = extra
            passed = test_counts(entry, read_json(os.path.join(out, name + ".json")), reasons) and passed
        if name == "train" and int(rc) == 0:
            report = read_json(os.path.join(out, "train.json"))
            accuracy = report["test"]["accuracy"] if report else None
            entry["test_accuracy"] = accuracy
            entry["accuracy_ok"] = accuracy is not None and accuracy >= ACCURACY_BAR
            passed = passed and entry["accuracy_ok"]
        ok = ok and passed
        steps.append(entry)
    bench = merged_bench(os.path.join(state, "bench"))
    if bench:
        write_json(os.path.join(out, "bench.json"), bench)
    if "ingot" in bench:  # bench_report.py's first argument
        write_json(os.path.join(state, "ingot_merged.json"), bench["ingot"])
    write_json(os.path.join(out, "summary.json"),
               {"host": host, "gpu": gpu or None, "seconds": round(int(elapsed_ms) / 1000, 2), "ok": ok,
                "complete": final, "steps": steps})
    if final:
        for s in steps:
            if "exit_status" not in s:
                print(f"{s['name']:14} skipped: {s['skipped']}")
                continue
            counts = (f"{s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped" if "passed" in s else
                      f"test accuracy {s['test_accuracy']}" if "test_accuracy" in s else "")
            print(f"{s['name']:14} exit {s['exit_status']:3}  {counts}  {s['seconds']} s")
        print(f"GPU: {gpu or 'none'}; total {int(elapsed_ms) / 1000:.1f} s; {'ALL PASSED' if ok else 'FAILURES'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
