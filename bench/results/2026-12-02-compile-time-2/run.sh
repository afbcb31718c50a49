#!/bin/bash
# The second 2026-12-02 compile-time report (../2026-12-02-compile-time-2.md). Run on a quiet machine from
# the repository root after `cmake --build --preset release` and `bench/run --install`:
#   bench/results/2026-12-02-compile-time/run.sh
# 3 rounds of: ingot cold (empty cache) / ingot warm (a second process, same cache) / the
# previous build (OLD_INGOT, commit 7aa88fc: the first report's code, cache off) / JAX, alternated; then one run per LM
# depth for ingot and JAX. JSON and logs go to OUT; aggregate.py makes the tables.
set -u
I=${INGOT:-build/release/tools/ingot}
OLD=${OLD_INGOT:-/tmp/old/build/release/tools/ingot}
J="bench/.venv/bin/python bench/peers/bench_peers.py --framework jax"
OUT=${OUT:-/tmp/bench3}
mkdir -p "$OUT"
C=$OUT/cache
for round in 1 2 3; do
  rm -rf "$C"
  $I bench --models mlp,cnn,lm --steps 20 --warmup 3 --compile-cache "$C" --json "$OUT/ingot-cold-r$round.json" > "$OUT/ingot-cold-r$round.log" 2>&1
  $I bench --models mlp,cnn,lm --steps 5 --warmup 1 --compile-cache "$C" --json "$OUT/ingot-warm-r$round.json" > "$OUT/ingot-warm-r$round.log" 2>&1
  if [ -x "$OLD" ]; then
    $OLD bench --models mlp,cnn,lm --steps 20 --warmup 3 --compile-cache off --json "$OUT/old-r$round.json" > "$OUT/old-r$round.log" 2>&1
  fi
  $J --models mlp,cnn,lm --steps 20 --warmup 3 --json "$OUT/jax-r$round.json" > "$OUT/jax-r$round.log" 2>&1
done
for cfg in "1 256" "4 256" "8 256" "12 768"; do
  set -- $cfg
  $I bench --models lm --lm-blocks "$1" --lm-width "$2" --steps 1 --warmup 0 --compile-cache off --json "$OUT/ingot-lm$1-$2.json" > "$OUT/ingot-lm$1-$2.log" 2>&1
  $J --models lm --lm-blocks "$1" --lm-width "$2" --steps 2 --warmup 0 --json "$OUT/jax-lm$1-$2.json" > "$OUT/jax-lm$1-$2.log" 2>&1
done
echo ALLDONE > "$OUT/done"
