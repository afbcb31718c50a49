#!/usr/bin/env python3
"""The Markdown report of bench/fashion_mnist_peers.sh from its JSON reports.

Usage: peers_report.py WHO:MODEL:FILE.json ...

WHO names the run: "ingot", "keras" or "pytorch-<threads>"; a WHO:MODEL pair given several times
is several rounds of that run (the script alternates the frameworks round by round). Every model
needs an ingot run, the baseline of the ratios. Each FILE is an `ingot train --metrics-json`
report, a bench/peers/fashion_mnist_keras.py report or a bench/peers/fashion_mnist_torch.py report
(the same field names; Keras's has no boundary between the step and the loop around it, so only
the per-step total compares across all three).

Per run, over its rounds: test accuracy (median, and the min-max over rounds when they differ:
fashion_mnist_peers.sh seeds each round differently) and loss (median), seconds per epoch (the median over rounds
of each round's median epoch after the first: training + validation), the first epoch (compilation
included), ms per train step (inside + around the step: the training part of an epoch over its
steps), peak RSS (the largest of the rounds), and ingot's allocator peak. Ratios are ingot / peer
(below 1: ingot is faster or smaller); the accuracy column is ingot's minus the peer's, in points.
"""
import datetime
import json
import os
import statistics
import sys


def fail(message):
    print(f"peers_report: {message}", file=sys.stderr)
    sys.exit(2)


def load_runs(args):
    """{model: {who: [report, ...]}} from WHO:MODEL:FILE arguments, in the order first given."""
    runs = {}
    for arg in args:
        parts = arg.split(":", 2)
        if len(parts) != 3 or not all(parts):
            fail(f"'{arg}' is not WHO:MODEL:FILE.json")
        who, model, path = parts
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"cannot read the report '{path}': {e}")
        runs.setdefault(model, {}).setdefault(who, []).append(report)
    for model, by_who in runs.items():
        if "ingot" not in by_who:
            fail(f"model '{model}' has no ingot run (the baseline of its ratios)")
    return runs


def epoch_after_first(report):
    """The median epoch time after the first (seconds): the first one compiles."""
    e = report["epoch_seconds"]
    return statistics.median(e[1:]) if len(e) > 1 else e[0]


def step_total_ms(report):
    """ms per train step, inside and around the step together."""
    t = report["timing"]
    if "train_step_total_ms" in t:
        return t["train_step_total_ms"]
    return t["step_ms"] + t["overhead_ms"]


def summarise(reports):
    """One run's figures over its rounds (see the module's doc)."""
    med = lambda f: statistics.median(f(r) for r in reports)
    rss = [r["peak_rss_bytes"] for r in reports if "peak_rss_bytes" in r]
    alloc = [r["allocator_peak_bytes"] for r in reports if "allocator_peak_bytes" in r]
    first = reports[0]
    return {
        "label": first.get("peer", "ingot"),
        "rounds": len(reports),
        "accuracy": med(lambda r: r["test"]["accuracy"]),
        "accuracy_range": (min(r["test"]["accuracy"] for r in reports), max(r["test"]["accuracy"] for r in reports)),
        "seeds": sorted({r["config"]["seed"] for r in reports if "seed" in r.get("config", {})}),
        "loss": med(lambda r: r["test"]["loss"]),
        "epoch_s": med(epoch_after_first),
        "first_epoch_s": med(lambda r: r["epoch_seconds"][0]),
        "compile_s": med(lambda r: r["compile_seconds"]) if all("compile_seconds" in r for r in reports) else None,
        "step_total_ms": med(step_total_ms),
        "rss_mib": max(rss) / 2**20 if rss else None,
        "allocator_mib": max(alloc) / 2**20 if alloc else None,
        "epochs": first["config"]["epochs"],
        "train_samples": first["config"]["train_samples"],
        "lr_schedule": first["config"].get("lr_schedule", "constant"),
    }


def fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def model_table(model, by_who):
    """The Markdown section of one model: one row per run, ingot first."""
    s = {who: summarise(rs) for who, rs in by_who.items()}
    base = s["ingot"]
    lines = [f"## {model} ({base['epochs']} epochs, {base['train_samples']} training images)\n",
             "| run | rounds | test accuracy | test loss | s / epoch | first epoch s | compile s | ms / step | peak RSS MiB "
             "| ingot − peer accuracy (points) | epoch ratio | step ratio | RSS ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for who in ["ingot"] + [w for w in s if w != "ingot"]:
        r = s[who]
        rss = fmt(r["rss_mib"], 0)
        if r["allocator_mib"] is not None:
            rss += f" (allocator {r['allocator_mib']:.0f})"
        if who == "ingot":
            diff = epoch = step = rss_ratio = ""
        else:
            diff = f"{100 * (base['accuracy'] - r['accuracy']):+.2f}"
            epoch = f"{base['epoch_s'] / r['epoch_s']:.2f}"
            step = f"{base['step_total_ms'] / r['step_total_ms']:.2f}"
            rss_ratio = fmt(base["rss_mib"] / r["rss_mib"] if base["rss_mib"] and r["rss_mib"] else None, 2)
        lo, hi = r["accuracy_range"]
        accuracy = f"{r['accuracy']:.4f}" + (f" ({lo:.4f}-{hi:.4f})" if hi > lo else "")
        lines.append(f"| {who}: {r['label']} | {r['rounds']} | {accuracy} | {r['loss']:.4f} | {r['epoch_s']:.2f} "
                     f"| {r['first_epoch_s']:.2f} | {fmt(r['compile_s'], 2)} | {r['step_total_ms']:.3f} | {rss} "
                     f"| {diff} | {epoch} | {step} | {rss_ratio} |")
    seeds = "; ".join(f"{who} {', '.join(map(str, r['seeds']))}" for who, r in s.items() if r["seeds"])
    if seeds:
        lines.append(f"\nSeeds (weights and shuffles): {seeds}.")
    return "\n".join(lines) + "\n"


def report(runs, today=None, machine=None):
    """The whole Markdown report."""
    today = today or datetime.date.today()
    if machine is None:
        cpu = "?"
        if os.path.exists("/proc/cpuinfo"):
            cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        machine = f"{os.cpu_count()} cores, {cpu}"
    sched = summarise(next(iter(runs.values()))["ingot"])["lr_schedule"]
    out = [f"# Fashion-MNIST: `ingot train` against Keras 3 `fit` and PyTorch ({today}, {machine})\n",
           f"Same recipe: Adam 1e-3 (epsilon 1e-7, {sched} learning rate), batch 128, glorot_uniform weights and",
           "zero biases, the last 10% of the training images for validation, reshuffled every epoch. s / epoch:",
           "the median over rounds of each round's median epoch after the first (training + validation);",
           "ms / step: inside and around the train step. Ratios: ingot / peer (below 1: ingot is faster or",
           "smaller). Peak RSS: the process's (getrusage), the largest over the rounds. Test accuracy: the",
           "median over rounds, with the min-max when the rounds were seeded differently.\n"]
    for model, by_who in runs.items():
        out.append(model_table(model, by_who))
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        fail("usage: peers_report.py WHO:MODEL:FILE.json ...")
    print(report(load_runs(sys.argv[1:])))
