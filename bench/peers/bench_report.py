#!/usr/bin/env python3
"""Combines the JSON of `ingot bench` and of bench_peers.py (same run, same machine) into one
Markdown table with ratios (bench/README.md). bench/run imports this module for the whole
report (aggregate_rounds, full_report): one implementation of the tables.

  bench_report.py INGOT_JSON [PEER_JSON ...] [--out REPORT.md] [--title TITLE]

Per model: the median step time (ms) and samples/s (tokens/s for the LM) of each framework, and
ingot's step time divided by each peer's (< 1: ingot is faster) and, with two or more peers, by
the fastest peer's; compile time (first step, s); peak device memory (MiB) where reported; the
process's peak resident memory (MiB, `peak_rss_bytes`); first and last losses (5 digits: with
the same inputs they show whether the frameworks ran the same computation). Then ingot's variants (`ingot bench --variants`: step
time, ratio to the baseline variant, kernels per step, peak memory) when its JSON has them, and
the GEMM rows of ingot's JSON (TFLOP/s, and each path against the fastest measured path of the
same size). Missing files or models are listed as such, never invented.
"""
import argparse
import json
import os
import statistics
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
        variants = m.get("variants", {})
        if not isinstance(variants, dict):
            raise BadReport(f"{path}: model '{name}': 'variants' is not an object")
        for vname, v in variants.items():
            try:
                float(v["step_ms"]["median"])
            except (KeyError, TypeError, ValueError):
                raise BadReport(f"{path}: model '{name}' variant '{vname}' lacks step_ms.median") from None
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
            # ingot-only settings (cuda_graphs, cpu_devices, ...) are not in the peers' config
            if key in (r.get("config") or {}) and r["config"][key] != value:
                out.append(f"{r['framework']} ran with {key} = {(r.get('config') or {}).get(key)}, ingot with {value}")
        for name, m in r["models"].items():
            if name in base["models"] and m["batch"] != base["models"][name]["batch"]:
                out.append(f"{name}: {r['framework']} used batch {m['batch']}, ingot {base['models'][name]['batch']}")
    return out


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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
    if len(frameworks) > 2:
        head.append("ingot / best peer")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in names:
        rows = {
            "step ms (median)": lambda r: r["step_ms"]["median"],
            "step ms (p10-p90)": lambda r: f"{r['step_ms']['p10']:.3f}-{r['step_ms']['p90']:.3f}",
            "step ms (rounds' medians)": lambda r: (", ".join(f"{v:.3f}" for v in r["round_medians"])
                                                    if len(r.get("round_medians", [])) > 1 else None),
            "samples/s": lambda r: r["samples_per_s"],
            "tokens/s": lambda r: r.get("tokens_per_s"),
            "compile s": lambda r: r["compile_s"],
            "kernels per step": lambda r: r.get("kernels_per_step"),
            "peak MiB": lambda r: r["peak_bytes"] / 2**20 if "peak_bytes" in r else None,
            "peak RSS MiB": lambda r: r["peak_rss_bytes"] / 2**20 if "peak_rss_bytes" in r else None,
            "loss first -> last": lambda r: f"{fmt(r.get('loss_first'), '.5f')} -> {fmt(r.get('loss_last'), '.5f')}",
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
            cells = [v if isinstance(v, str) else fmt(v, ".0f" if metric in ("samples/s", "tokens/s", "kernels per step") else ".3f")
                     for v in vals]
            ratios = []
            base = vals[0]
            timed = metric == "step ms (median)" and is_number(base)
            for v in vals[1:]:
                ratios.append(f"**{base / v:.2f}**" if timed and is_number(v) and v > 0 else "")
            if len(frameworks) > 2:
                peers = [v for v in vals[1:] if is_number(v) and v > 0]
                ratios.append(f"**{base / min(peers):.2f}**" if timed and peers else "")
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
        lines.append(f"| {int(r['n'])} | {r['path']} | {r['ms']:.3f} | {r['tflops']:.2f} | {r['tflops'] / best[r['n']]:.2f} |")
    return lines


# ---- rounds (bench/run) ------------------------------------------------------------------------

def combine(entries):
    """One entry from the same entry of several rounds (dicts of the JSON's shape): numbers become
    the median over the rounds (a `min` field the minimum), objects are combined key by key,
    anything else is the first round's. Keys only some rounds have are combined over those."""
    out = {}
    for key in dict.fromkeys(k for e in entries for k in e):
        vals = [e[key] for e in entries if key in e]
        if all(is_number(v) for v in vals):
            out[key] = min(vals) if key == "min" else statistics.median(vals)
        elif all(isinstance(v, dict) for v in vals):
            out[key] = combine(vals)
        else:
            out[key] = vals[0]
    return out


def aggregate(runs):
    """The runs of one framework in several rounds (same settings) as one run of the same shape:
    per model (and per variant) the median over the rounds of each round's median step time,
    p10, p90, samples/s, compile time, peak bytes...; `round_medians` lists each round's median
    step time; GEMM rows are combined per (n, path); `rounds` counts the runs."""
    if not runs:
        raise BadReport("aggregate: no runs")
    out = {k: v for k, v in runs[0].items() if k not in ("models", "gemm")}
    out["rounds"] = len(runs)
    out["models"] = {}
    for name in dict.fromkeys(m for r in runs for m in r["models"]):
        entries = [r["models"][name] for r in runs if name in r["models"]]
        out["models"][name] = combine(entries)
        out["models"][name]["round_medians"] = [e["step_ms"]["median"] for e in entries]
    rows = {}
    for r in runs:
        for row in r.get("gemm", []):
            rows.setdefault((row["n"], row["path"]), []).append(row)
    out["gemm"] = [combine(v) for v in rows.values()]
    return out


def aggregate_rounds(rounds):
    """{framework: aggregated run} from a list of rounds, each {framework: run}; a framework
    missing from some rounds is aggregated over the rounds that have it."""
    names = dict.fromkeys(f for r in rounds for f in r)
    return {f: aggregate([r[f] for r in rounds if f in r]) for f in names}


def ordered_runs(agg):
    """The aggregated runs in table order: ingot first (the ratios' numerator), then jax, torch,
    torch-compile and any other framework."""
    order = ["ingot", "jax", "torch", "torch-compile"]
    return [agg[f] for f in sorted(agg, key=lambda f: (order.index(f) if f in order else len(order), f))]


def variant_table(run):
    """Per model and variant of ingot: the step time, its ratio to the `baseline` variant
    (< 1: faster than the baseline), kernels per step, peak memory, compile time and host
    overhead per step. Empty when the JSON has no variants (an ingot bench without --variants)."""
    lines = []
    for name, m in run.get("models", {}).items():
        variants = m.get("variants") or {}
        base = (variants.get("baseline") or {}).get("step_ms", {}).get("median")
        for vname, v in variants.items():
            st = v.get("step_ms", {})
            med = st.get("median")
            ratio = f"**{med / base:.2f}**" if is_number(med) and is_number(base) and base > 0 else "-"
            peak = v.get("peak_bytes")
            lines.append("| " + " | ".join([
                name, vname, fmt(med, ".3f"),
                f"{fmt(st.get('p10'), '.3f')}-{fmt(st.get('p90'), '.3f')}", ratio,
                fmt(v.get("kernels_per_step"), ".0f"), fmt(peak / 2**20 if is_number(peak) else None, ".2f"),
                fmt(v.get("compile_s"), ".2f"), fmt(v.get("overhead_ms"), ".3f")]) + " |")
    if not lines:
        return []
    return ["| model | variant | step ms (median) | p10-p90 | / baseline | kernels per step | peak MiB | compile s | "
            "overhead ms |", "|---|---|---|---|---|---|---|---|---|"] + lines


def frameworks_table(frameworks):
    """One row per framework: its version and interpreter or binary, or why it did not run."""
    lines = ["| framework | version | ran with | status |", "|---|---|---|---|"]
    for name, f in frameworks.items():
        status = "ran" if f.get("status") == "ok" else f"**missing**: {f.get('reason', 'unknown reason')}"
        lines.append(f"| {name} | {f.get('version') or '-'} | `{f.get('command') or '-'}` | {status} |")
    return lines


def machine_lines(machine):
    keys = [("cpu", "CPU"), ("cores", "cores"), ("memory_gib", "memory GiB"), ("os", "OS"), ("kernel", "kernel"),
            ("compiler", "compiler"), ("build_type", "ingot build type"), ("libraries", "libraries"),
            ("git_commit", "git commit"), ("date", "date")]
    out = []
    for key, label in keys:
        v = machine.get(key)
        if isinstance(v, dict):
            v = ", ".join(f"{k} {x}" for k, x in v.items()) or None
        out.append(f"- {label}: {v if v not in (None, '') else 'unknown'}")
    return out


def full_report(report):
    """The Markdown of bench/run's report.json (keys machine, settings, frameworks, rounds,
    aggregate, plot; see bench/README.md): machine, frameworks, the models table over the
    aggregate (medians of the rounds' medians), ingot's variants, the GEMM rows, the plot."""
    settings = report.get("settings", {})
    agg = report.get("aggregate", {})
    runs = ordered_runs(agg)
    lines = [f"# ingot bench against its peers ({report.get('machine', {}).get('date', '?')}, "
             f"{report.get('machine', {}).get('slug', '?')})", "",
             "Made by `bench/run` (bench/README.md). Each round ran ingot bench and the peers one after the other "
             "with the same options; each number is the median over the rounds of that round's median "
             "(ratios: ingot's median step time over the peer's, < 1: ingot is faster).", "",
             f"Settings: {settings.get('rounds', '?')} round{'' if settings.get('rounds') == 1 else 's'}, models {settings.get('models', '?')}, "
             f"{settings.get('steps', '?')} timed steps after {settings.get('warmup', '?')} warm-up steps"
             + (", **--quick** (tiny sizes: a smoke run, not a measurement)" if settings.get("quick") else "")
             + f"; ingot: `{settings.get('ingot', '?')}`.", ""]
    large = settings.get("lm_large")
    if large:
        lines += [f"lm-large: the LM with {large['lm_blocks']} blocks, width {large['lm_width']}, {large['lm_heads']} heads, "
                  f"context {large['lm_context']}, batch {large['lm_batch']} (a second invocation of each framework per "
                  "round; no ingot variants).", ""]
    for w in report.get("warnings", []):
        lines += [f"**Warning:** {w}", ""]
    lines += ["## Machine", ""] + machine_lines(report.get("machine", {}))
    lines += ["", "## Frameworks", ""] + frameworks_table(report.get("frameworks", {}))
    lines += ["", "## Models", ""]
    if runs and runs[0].get("framework") == "ingot":
        warnings = mismatches(runs)
        if warnings:
            lines += ["**Not comparable as run:** " + "; ".join(warnings) + ".", ""]
        lines += model_table(runs)
        variants = variant_table(runs[0])
        lines += ["", "## ingot's variants", ""]
        lines += variants or ["This ingot bench wrote no variants (an ingot without `--variants`, or `--variants none`)."]
        gemm = gemm_table(runs[0])
        if gemm:
            lines += ["", "## GEMM (ingot bench --gemm)"] + gemm
    else:
        lines += ["No ingot results."]
    plot = report.get("plot", {})
    lines += ["", "## Step times", ""]
    lines += [f"![step time per model and configuration]({plot['file']})"] if plot.get("file") else \
        [f"No plot: {plot.get('reason', 'not made')}."]
    return "\n".join(lines) + "\n"


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
    lines += model_table(runs)
    variants = variant_table(ours)
    if variants:
        lines += [""] + variants
    lines += gemm_table(ours)
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
