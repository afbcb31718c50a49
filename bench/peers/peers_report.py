#!/usr/bin/python3
"""The Markdown report of bench/fashion_mnist_peers.sh from its JSON reports.

Usage: peers_report.py WHO:MODEL:FILE.json ...  (WHO is "ingot" or "pytorch-<threads>"; the
first run of each model must be ingot's, the baseline of the ratios). Each FILE is an
`ingot train --metrics-json` report or a bench/peers/fashion_mnist_torch.py report (same fields).
"""
import datetime
import json
import os
import statistics
import sys

runs = {}
for arg in sys.argv[1:]:
    who, model, path = arg.split(":", 2)
    runs.setdefault(model, []).append((who, json.load(open(path))))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"# Fashion-MNIST: ingot against PyTorch ({datetime.date.today()}, {os.cpu_count()} cores, {cpu})\n")
sched = next(iter(runs.values()))[0][1]["config"].get("lr_schedule", "constant")
print(f"Same recipe: Adam 1e-3 (epsilon 1e-7, {sched} learning rate), batch 128, glorot_uniform weights, last 10% of the")
print("training images for validation. Epoch time: median after the first (training + validation).")
print("Per step: mean ms inside the train step (forward, backward, update) and around it (data,")
print("logs, hooks). Ratio = ingot / PyTorch with the thread count named (below 1: ingot is faster).\n")
def med_after_first(r):
    e = r["epoch_seconds"]
    return statistics.median(e[1:]) if len(e) > 1 else e[0]
for model, rs in runs.items():
    base = dict(rs)["ingot"]
    print(f"## {model} ({base['config']['epochs']} epochs, {base['config']['train_samples']} training images)\n")
    print("| run | test accuracy | test loss | s / epoch | compile s | step ms | overhead ms | epoch ratio | step ratio | overhead ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for who, r in rs:
        ratio = lambda f: "" if who == "ingot" else f"{f(base) / f(r):.2f}"
        epoch = med_after_first
        step = lambda x: x["timing"]["step_ms"]
        over = lambda x: x["timing"]["overhead_ms"]
        compile_s = f"{r['compile_seconds']:.2f}" if "compile_seconds" in r else "-"
        print(f"| {who} | {r['test']['accuracy']:.4f} | {r['test']['loss']:.4f} | {epoch(r):.2f} | {compile_s} "
              f"| {step(r):.3f} | {over(r):.3f} | {ratio(epoch)} | {ratio(step)} | {ratio(over)} |")
    print()
