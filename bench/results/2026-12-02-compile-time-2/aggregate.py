#!/usr/bin/env python3
"""Tables of the second 2026-12-02 compile-time report from run.sh's JSON (argument: its OUT folder).
ingot's compile is `compile.total_s` (trace to linked code); JAX's is `compile_only_s`
(jit(step).lower(state).compile(): tracing, lowering and XLA's compile). Medians over the rounds, each round listed."""
import json, os, statistics, sys

out = sys.argv[1]
load = lambda name: json.load(open(os.path.join(out, name))) if os.path.exists(os.path.join(out, name)) else None

def rounds(prefix):
    return [d for d in (load(f"{prefix}-r{r}.json") for r in (1, 2, 3)) if d]

def fmt(values, digits=2):
    med = statistics.median(values)
    return f"{med:.{digits}f} ({' / '.join(f'{v:.{digits}f}' for v in values)})"

cold, warm, old, jax = rounds("ingot-cold"), rounds("ingot-warm"), rounds("old"), rounds("jax")
print("| model | ingot compile s | previous build (7aa88fc) s | XLA compile s | ingot / XLA |")
print("|---|---|---|---|---|")
for m in ("mlp", "cnn", "lm"):
    ic = [d["models"][m]["compile"]["total_s"] for d in cold]
    oc = [d["models"][m]["compile"]["total_s"] for d in old]
    jc = [d["models"][m]["compile_only_s"] for d in jax]
    ratio = statistics.median(ic) / statistics.median(jc) if jc else float("nan")
    print(f"| {m} | {fmt(ic)} | {fmt(oc) if oc else '-'} | {fmt(jc) if jc else '-'} | {ratio:.2f}x |")
print()
print("| model | ingot first step s | JAX first step s |")
print("|---|---|---|")
for m in ("mlp", "cnn", "lm"):
    print(f"| {m} | {fmt([d['models'][m]['compile_s'] for d in cold])} | {fmt([d['models'][m]['compile_s'] for d in jax])} |")
print()
print("| model | warm compile s | warm first step s |")
print("|---|---|---|")
for m in ("mlp", "cnn", "lm"):
    print(f"| {m} | {fmt([d['models'][m]['compile']['total_s'] for d in warm], 3)} | {fmt([d['models'][m]['compile_s'] for d in warm])} |")
print()
print("| model | ingot step ms (median) | previous build step ms | JAX step ms |")
print("|---|---|---|---|")
for m in ("mlp", "cnn", "lm"):
    s = lambda ds: fmt([d["models"][m]["step_ms"]["median"] for d in ds], 3 if m == "mlp" else 1) if ds else "-"
    print(f"| {m} | {s(cold)} | {s(old)} | {s(jax)} |")
print()
print("| LM | ingot compile s (MLIR / LLVM) | kernels / kernel functions | XLA compile s |")
print("|---|---|---|---|")
for b, w in ((1, 256), (4, 256), (8, 256), (12, 768)):
    i = (load(f"ingot-lm{b}-{w}.json") or {}).get("models", {}).get("lm")
    j = (load(f"jax-lm{b}-{w}.json") or {}).get("models", {}).get("lm")
    if not i:
        continue
    c = i["compile"]
    xla = f"{j['compile_only_s']:.2f}" if j else "-"
    print(f"| {b} blocks, width {w} | {c['total_s']:.2f} ({c['mlir_s']:.2f} / {c['llvm_s']:.2f}) | "
          f"{i['kernels_per_step']} / {c['kernel_functions']} | {xla} |")
