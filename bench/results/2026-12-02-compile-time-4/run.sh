#!/bin/bash
# The fourth 2026-12-02 compile-time report (../2026-12-02-compile-time-4.md): the entry's
# results that are its own arguments (donated state written in place) are no out-params and no
# guarded copies (ingot-drop-argument-results). Run on a quiet machine from the repository root
# after `cmake --build --preset release` and `bench/run --install`:
#   bench/results/2026-12-02-compile-time-4/run.sh
# 3 rounds of: ingot cold (empty cache) / ingot warm (a second process, same cache) / JAX,
# alternated; then 3 alternated rounds of the depth pair (4 blocks width 256, 12 blocks width 768;
# cache off) for ingot and JAX. JSON and logs go to OUT; ../2026-12-02-compile-time-3/aggregate.py OUT makes the
# tables. The fit variants of report 3 are not rerun: the change is in the entry only.
set -u
I=${INGOT:-build/release/tools/ingot}
J="bench/.venv/bin/python bench/peers/bench_peers.py --framework jax"
OUT=${OUT:-/tmp/bench5}
mkdir -p "$OUT"
C=$OUT/cache
for round in 1 2 3; do
  rm -rf "$C"
  $I bench --models mlp,cnn,lm --steps 20 --warmup 3 --compile-cache "$C" --json "$OUT/ingot-cold-r$round.json" > "$OUT/ingot-cold-r$round.log" 2>&1
  $I bench --models mlp,cnn,lm --steps 5 --warmup 1 --compile-cache "$C" --json "$OUT/ingot-warm-r$round.json" > "$OUT/ingot-warm-r$round.log" 2>&1
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
