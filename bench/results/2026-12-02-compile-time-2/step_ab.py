#!/usr/bin/env python3
"""Step-time A/B of this report (argument: the step-ab folder): runs of this build ("new") and the
previous one ("old", 7aa88fc) alternated, `ingot bench --compile-cache off`; ab2: LM, 5 rounds of
20 steps; ab3: MLP and CNN, 7 rounds of 50 steps; ab4: MLP, 10 rounds of 200 steps. Prints each
run's median step and the median over the runs."""
import glob, json, os, statistics, sys
from collections import defaultdict

runs = defaultdict(list)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")), key=lambda p: (p, int(p.rsplit("-", 1)[1][:-5]))):
    ab, build, _ = os.path.basename(path).split("-")
    for model, r in json.load(open(path))["models"].items():
        runs[(ab, model, build)].append(r["step_ms"]["median"])
for (ab, model, build), v in sorted(runs.items()):
    print(f"{ab} {model:<3} {build}: median {statistics.median(v):8.3f} ms  runs {' / '.join(f'{x:.2f}' for x in v)}")
