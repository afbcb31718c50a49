#!/usr/bin/env python3
"""The step-time plot of bench/run's report (bench/README.md "The report (bench/run)").

  bench_plot.py REPORT_JSON --out STEP_TIMES.png

Grouped bars: one group per model, one bar per configuration (each ingot variant, or "ingot"
when the JSON has no variants, then each peer framework), the height the aggregated median step
time in ms (the median over the rounds of each round's median). The y axis is logarithmic when
the largest bar is more than 10x the smallest (the LM and the MLP differ by orders of magnitude).
Needs matplotlib (bench/.venv from bench/peers/requirements.txt); series() and use_log_scale()
are plain Python so that the tests run without it. Exit codes: 0 written, 1 bad report or no
matplotlib, 2 bad options.
"""
import argparse
import json
import os
import sys

LOG_SPREAD = 10.0  # largest / smallest bar above which the axis is logarithmic


def series(aggregate):
    """(models, [(label, [step ms or None per model])]) from report.json's `aggregate`
    ({framework: run}): ingot's variants first (or ingot itself), then jax, torch, others."""
    order = ["ingot", "jax", "torch"]
    frameworks = sorted(aggregate, key=lambda f: (order.index(f) if f in order else len(order), f))
    models = list(dict.fromkeys(m for f in frameworks for m in aggregate[f].get("models", {})))
    out = []
    for f in frameworks:
        runs = aggregate[f].get("models", {})
        variants = list(dict.fromkeys(v for m in runs.values() for v in (m.get("variants") or {})))
        if f == "ingot" and variants:
            for v in variants:
                out.append((f"ingot {v}", [((runs.get(m, {}).get("variants") or {}).get(v) or {})
                                           .get("step_ms", {}).get("median") for m in models]))
        else:
            out.append((f, [runs.get(m, {}).get("step_ms", {}).get("median") for m in models]))
    return models, out


def use_log_scale(values, spread=LOG_SPREAD):
    """True when the positive values span more than `spread` (largest / smallest)."""
    pos = [v for v in values if isinstance(v, (int, float)) and v > 0]
    return len(pos) > 1 and max(pos) / min(pos) > spread


def plot(aggregate, out_png, title="Step time per model and configuration"):
    """Writes the grouped bar chart to `out_png`; raises ValueError when there is nothing to plot
    and ImportError when matplotlib is missing."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models, bars = series(aggregate)
    values = [v for _, vs in bars for v in vs if v is not None]
    if not values:
        raise ValueError("no step times to plot (no framework has a model with step_ms.median)")
    width = 0.8 / len(bars)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 + 0.35 * len(bars) * len(models)), 4.5))
    for i, (label, vs) in enumerate(bars):
        xs = [j + (i - (len(bars) - 1) / 2) * width for j, v in enumerate(vs) if v is not None]
        ax.bar(xs, [v for v in vs if v is not None], width, label=label)
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("median step time (ms)" + (", log scale" if use_log_scale(values) else ""))
    if use_log_scale(values):
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="bench/run's report.json")
    ap.add_argument("--out", required=True, help="the PNG to write")
    args = ap.parse_args()
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if os.path.isdir(args.out) or not os.path.isdir(out_dir):
        ap.error(f"--out '{args.out}': a directory, or its directory does not exist")
    try:
        with open(args.report) as f:
            aggregate = json.load(f)["aggregate"]
        if not isinstance(aggregate, dict):
            raise TypeError("'aggregate' is not an object")
        plot(aggregate, args.out)
    except ImportError as e:
        sys.exit(f"bench_plot: error: matplotlib is missing ({e}); run bench/run --install for bench/.venv")
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"bench_plot: error: {args.report}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
