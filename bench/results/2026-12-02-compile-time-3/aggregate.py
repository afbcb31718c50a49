#!/usr/bin/env python3
"""Tables of the third 2026-12-02 compile-time report from run.sh's JSON (argument: its OUT folder).
ingot's compile is `compile.total_s` (trace to linked code); JAX's is `compile_only_s`
(jit(step).lower(state).compile(): tracing, lowering and XLA's compile); the fit variants' is
`compile_s` (fit's compile seconds). Medians over the rounds, each round listed."""
import json, os, statistics, sys

out = sys.argv[1]
load = lambda name: json.load(open(os.path.join(out, name))) if os.path.exists(os.path.join(out, name)) else None

def rounds(prefix):
    return [d for d in (load(f"{prefix}-r{r}.json") for r in (1, 2, 3)) if d]

def fmt(values, digits=2):
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.{digits}f} ({' / '.join(f'{v:.{digits}f}' for v in values)})"

cold, warm, var, jax = rounds("ingot-cold"), rounds("ingot-warm"), rounds("ingot-variants"), rounds("jax")
print("| model | ingot compile s | XLA compile s | ingot / XLA |")
print("|---|---|---|---|")
for m in ("mlp", "cnn", "lm"):
    ic = [d["models"][m]["compile"]["total_s"] for d in cold]
    jc = [d["models"][m]["compile_only_s"] for d in jax]
    ratio = statistics.median(ic) / statistics.median(jc) if jc else float("nan")
    print(f"| {m} | {fmt(ic)} | {fmt(jc)} | {ratio:.2f}x |")
print()
print("| model | warm compile s | warm first step s |")
print("|---|---|---|")
for m in ("mlp", "cnn", "lm"):
    print(f"| {m} | {fmt([d['models'][m]['compile']['total_s'] for d in warm], 3)} | {fmt([d['models'][m]['compile_s'] for d in warm])} |")
print()
print("| model | ingot step ms (median) | JAX step ms | kernels per step / kernel functions / scope functions |")
print("|---|---|---|---|")
for m in ("mlp", "cnn", "lm"):
    s = lambda ds: fmt([d["models"][m]["step_ms"]["median"] for d in ds], 3 if m == "mlp" else 1) if ds else "-"
    c = cold[0]["models"][m]
    print(f"| {m} | {s(cold)} | {s(jax)} | {c['kernels_per_step']} / {c['compile']['kernel_functions']} / {c['compile'].get('scope_functions', 0)} |")
print()
print("| LM 4 blocks, fit | compile s | step ms | final loss |")
print("|---|---|---|---|")
for v in ("baseline", "no-scope-functions"):
    rs = [d["models"]["lm"]["variants"][v] for d in var]
    losses = " / ".join("%.6f" % r["loss"] for r in rs)
    print(f"| {v} | {fmt([r['compile_s'] for r in rs])} | {fmt([r['step_ms']['median'] for r in rs], 1)} | {losses} |")
print()
print("| LM (cache off) | ingot compile s | MLIR / LLVM s | kernels / kernel functions / scope functions | XLA compile s |")
print("|---|---|---|---|---|")
med = {}
for b, w in ((4, 256), (12, 768)):
    i = [d["models"]["lm"] for d in rounds(f"ingot-lm{b}-{w}")]
    j = [d["models"]["lm"] for d in rounds(f"jax-lm{b}-{w}")]
    if not i:
        continue
    tot = [x["compile"]["total_s"] for x in i]
    xla = [x["compile_only_s"] for x in j]
    med[(b, w)] = (statistics.median(tot), statistics.median(xla) if xla else float("nan"))
    c = i[0]["compile"]
    print(f"| {b} blocks, width {w} | {fmt(tot)} | {statistics.median([x['compile']['mlir_s'] for x in i]):.2f} / "
          f"{statistics.median([x['compile']['llvm_s'] for x in i]):.2f} | {i[0]['kernels_per_step']} / {c['kernel_functions']} / "
          f"{c.get('scope_functions', 0)} | {fmt(xla)} |")
if len(med) == 2:
    a, b = med[(4, 256)], med[(12, 768)]
    print(f"\n12-block width-768 / 4-block width-256: ingot {b[0] / a[0]:.2f}x, XLA {b[1] / a[1]:.2f}x")
