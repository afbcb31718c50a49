#!/bin/bash
# The third 2026-12-02 compile-time report (../2026-12-02-compile-time-3.md): regional compilation.
# Run on a quiet machine from the repository root after `cmake --build --preset release` and
# `bench/run --install`:
#   bench/results/2026-12-02-compile-time-3/run.sh
# 3 rounds of: ingot cold (empty cache) with the LM also fitted flat (--variants
# baseline,no-scope-functions) / ingot warm (a second process, same cache) / JAX, alternated; then
# 3 alternated rounds of the depth pair (4 blocks width 256, 12 blocks width 768; cache off) for
# ingot, flat ingot (no-scope-functions is a fit variant: its compile_s) and JAX. JSON and logs go
# to OUT; aggregate.py makes the tables.
set -u
I=${INGOT:-build/release/tools/ingot}
J="bench/.venv/bin/python bench/peers/bench_peers.py --framework jax"
OUT=${OUT:-/tmp/bench4}  # run-1 and run-2 are two runs of this script
mkdir -p "$OUT"
C=$OUT/cache
for round in 1 2 3; do
  rm -rf "$C"
  $I bench --models mlp,cnn,lm --steps 20 --warmup 3 --compile-cache "$C" --json "$OUT/ingot-cold-r$round.json" > "$OUT/ingot-cold-r$round.log" 2>&1
  $I bench --models mlp,cnn,lm --steps 5 --warmup 1 --compile-cache "$C" --json "$OUT/ingot-warm-r$round.json" > "$OUT/ingot-warm-r$round.log" 2>&1
  $I bench --models lm --steps 20 --warmup 3 --compile-cache off --variants baseline,no-scope-functions --json "$OUT/ingot-variants-r$round.json" > "$OUT/ingot-variants-r$round.log" 2>&1
  $J --models mlp,cnn,lm --steps 20 --warmup 3 --json "$OUT/jax-r$round.json" > "$OUT/jax-r$round.log" 2>&1
done
for round in 1 2 3; do
  for cfg in "4 256" "12 768"; do
    set -- $cfg
    $I bench --models lm --lm-blocks "$1" --lm-width "$2" --steps 1 --warmup 0 --compile-cache off --json "$OUT/ingot-lm$1-$2-r$round.json" > "$OUT/ingot-lm$1-$2-r$round.log" 2>&1
    $J --models lm --lm-blocks "$1" --lm-width "$2" --steps 2 --warmup 0 --json "$OUT/jax-lm$1-$2-r$round.json" > "$OUT/jax-lm$1-$2-r$round.log" 2>&1
  done
done
echo ALLDONE > "$OUT/done"
