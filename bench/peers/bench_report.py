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


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"bench_report: skipping {path}: {e}", file=sys.stderr)
        return None


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
            "loss first -> last": lambda r: f"{r['loss_first']:.3f} -> {r['loss_last']:.3f}",
        }
        for metric, get in rows.items():
            vals = [get(r["models"][m]) if m in r.get("models", {}) else None for r in runs]
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
    ap.add_argument("ingot")
    ap.add_argument("peers", nargs="*")
    ap.add_argument("--out")
    ap.add_argument("--title", default="ingot bench against its peers")
    args = ap.parse_args()
    ours = load(args.ingot)
    if ours is None:
        sys.exit("bench_report: the ingot JSON is required")
    runs = [ours] + [r for r in (load(p) for p in args.peers) if r is not None]
    lines = [f"# {args.title}", "",
             f"Device: {ours.get('device')} ({ours.get('device_name')}); dtype policy {ours.get('dtype_policy')}; "
             f"{ours.get('steps')} timed steps after {ours.get('warmup')} warm-up steps; peers: "
             + (", ".join(f"{r['framework']} {r.get('framework_version', '')}".strip() for r in runs[1:]) or "none"),
             "", "Ratios are ingot's median step time over the peer's (< 1: ingot is faster).", ""]
    lines += model_table(runs) + gemm_table(ours)
    missing = [p for p in args.peers if not os.path.exists(p)]
    if missing:
        lines += ["", "Peers without results: " + ", ".join(missing)]
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
