#!/usr/bin/env python3
"""Combines the JSON of `ingot bench` and of bench_peers.py (same run, same machine) into one
Markdown table with ratios (bench/README.md).

  bench_report.py INGOT_JSON [PEER_JSON ...] [--out REPORT.md] [--title TITLE]

Per model: the median step time (ms) and samples/s (tokens/s for the LM) of each framework, and
ingot's step time divided by each peer's (< 1: ingot is faster); compile time (first step, s);
peak device memory (MiB) where reported. Then the GEMM rows of ingot's JSON (TFLOP/s, and each
path against the fastest measured path of the same size). Missing files or models are listed as
such, never invented.
"""
import argparse
import json
import os
import sys


class BadReport(Exception):
    pass


def check_run(run, path):
    """Raises BadReport naming `path` and the problem unless `run` has the JSON's shape."""
    if not isinstance(run, dict) or not isinstance(run.get("framework"), str):
        raise BadReport(f"{path}: not the JSON of ingot bench / bench_peers.py (no 'framework')")
    models = run.get("models")
    if not isinstance(models, dict):
        raise BadReport(f"{path}: 'models' is missing or not an object")
    for name, m in models.items():
        try:
            for key in ("batch", "compile_s", "samples_per_s"):
                float(m[key])
            for key in ("median", "p10", "p90"):
                float(m["step_ms"][key])
        except (KeyError, TypeError, ValueError) as e:
            raise BadReport(f"{path}: model '{name}' lacks a number at {e}") from None
    for row in run.get("gemm", []):
        if not all(isinstance(row.get(k), (int, float)) for k in ("n", "ms", "tflops")) or not isinstance(row.get("path"), str):
            raise BadReport(f"{path}: a 'gemm' row lacks n, path, ms or tflops")


def load(path, required):
    """The run in `path`; a missing or unreadable peer file is skipped with a note (None), the ingot
    file must be there. A file of the wrong shape is an error either way."""
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        if required:
            raise BadReport(f"{path}: {e}") from None
        print(f"bench_report: skipping {path}: {e}", file=sys.stderr)
        return None
    check_run(run, path)
    return run


def mismatches(runs):
    """Lines naming every setting that differs between the ingot run and a peer's."""
    out = []
    base = runs[0]
    for r in runs[1:]:
        for key in ("steps", "warmup", "dtype_policy", "device"):
            if r.get(key) != base.get(key):
                out.append(f"{r['framework']} ran with {key} = {r.get(key)}, ingot with {base.get(key)}")
        for key, value in (base.get("config") or {}).items():
            if (r.get("config") or {}).get(key) != value:
                out.append(f"{r['framework']} ran with {key} = {(r.get('config') or {}).get(key)}, ingot with {value}")
        for name, m in r["models"].items():
            if name in base["models"] and m["batch"] != base["models"][name]["batch"]:
                out.append(f"{name}: {r['framework']} used batch {m['batch']}, ingot {base['models'][name]['batch']}")
    return out


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def model_table(runs):
    names = []
    for r in runs:
        for m in r.get("models", {}):
            if m not in names:
                names.append(m)
    frameworks = [r["framework"] for r in runs]
    head = ["model", "metric"] + frameworks + [f"ingot / {f}" for f in frameworks[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in names:
        rows = {
            "step ms (median)": lambda r: r["step_ms"]["median"],
            "step ms (p10-p90)": lambda r: f"{r['step_ms']['p10']:.3f}-{r['step_ms']['p90']:.3f}",
            "samples/s": lambda r: r["samples_per_s"],
            "tokens/s": lambda r: r.get("tokens_per_s"),
            "compile s": lambda r: r["compile_s"],
            "peak MiB": lambda r: r["peak_bytes"] / 2**20 if "peak_bytes" in r else None,
            "loss first -> last": lambda r: f"{fmt(r.get('loss_first'), '.3f')} -> {fmt(r.get('loss_last'), '.3f')}",
        }
        for metric, get in rows.items():
            vals = []
            for r in runs:
                try:
                    vals.append(get(r["models"][m]) if m in r["models"] else None)
                except (KeyError, TypeError, ValueError):
                    vals.append(None)
            if all(v is None for v in vals):
                continue
            cells = [v if isinstance(v, str) else fmt(v, ".3f" if metric != "samples/s" and metric != "tokens/s" else ".0f")
                     for v in vals]
            ratios = []
            for v in vals[1:]:
                base = vals[0]
                if metric == "step ms (median)" and isinstance(base, float) and isinstance(v, float) and v > 0:
                    ratios.append(f"**{base / v:.2f}**")
                else:
                    ratios.append("")
            lines.append("| " + " | ".join([m, metric] + cells + ratios) + " |")
    return lines


def gemm_table(run):
    rows = run.get("gemm", [])
    if not rows:
        return []
    best = {}
    for r in rows:
        best[r["n"]] = max(best.get(r["n"], 0), r["tflops"])
    lines = ["", "| n | path | ms | TFLOP/s | of the best path |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['path']} | {r['ms']:.3f} | {r['tflops']:.2f} | {r['tflops'] / best[r['n']]:.2f} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ingot", help="ingot bench --json output")
    ap.add_argument("peers", nargs="*", default=[], help="bench_peers.py --json outputs (optional)")
    ap.add_argument("--out")
    ap.add_argument("--title", default="ingot bench against its peers")
    args = ap.parse_args()
    if args.out and (os.path.isdir(args.out) or not os.path.isdir(os.path.dirname(os.path.abspath(args.out)))):
        ap.error(f"--out '{args.out}': a directory, or its directory does not exist")
    try:
        ours = load(args.ingot, required=True)
        if ours["framework"] != "ingot":
            raise BadReport(f"{args.ingot}: the first file must be ingot's (it is {ours['framework']}'s)")
        runs = [ours] + [r for r in (load(p, required=False) for p in args.peers) if r is not None]
    except BadReport as e:
        sys.exit(f"bench_report: error: {e}")
    lines = [f"# {args.title}", "",
             f"Device: {ours.get('device')} ({ours.get('device_name')}); dtype policy {ours.get('dtype_policy')}; "
             f"{ours.get('steps')} timed steps after {ours.get('warmup')} warm-up steps; peers: "
             + (", ".join(f"{r['framework']} {r.get('framework_version', '')}".strip() for r in runs[1:]) or "none"),
             "", "Ratios are ingot's median step time over the peer's (< 1: ingot is faster).", ""]
    warnings = mismatches(runs)
    if warnings:
        lines += ["**Not comparable as run:** " + "; ".join(warnings) + ".", ""]
    lines += model_table(runs) + gemm_table(ours)
    missing = [p for p in args.peers if not os.path.exists(p)]
    if missing:
        lines += ["", "Peers without results: " + ", ".join(missing)]
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
