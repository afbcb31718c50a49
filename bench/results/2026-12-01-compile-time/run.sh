#!/bin/bash
cd /work/main
I=build/release/tools/ingot
J="bench/.venv/bin/python bench/peers/bench_peers.py --framework jax"
C=/tmp/bench/cache
for round in 1 2; do
  rm -rf $C
  $I bench --models mlp,cnn,lm --steps 10 --warmup 2 --compile-cache $C --json /tmp/bench/ingot-cold-r$round.json > /tmp/bench/ingot-cold-r$round.log 2>&1
  $I bench --models mlp,cnn,lm --steps 10 --warmup 2 --compile-cache $C --json /tmp/bench/ingot-warm-r$round.json > /tmp/bench/ingot-warm-r$round.log 2>&1
  $J --models mlp,cnn,lm --steps 10 --warmup 2 --json /tmp/bench/jax-r$round.json > /tmp/bench/jax-r$round.log 2>&1
done
for cfg in "1 256" "8 256" "12 768"; do set -- $cfg
  $I bench --models lm --lm-blocks $1 --lm-width $2 --steps 2 --warmup 0 --compile-cache off --json /tmp/bench/ingot-lm$1-$2.json > /tmp/bench/ingot-lm$1-$2.log 2>&1
  $J --models lm --lm-blocks $1 --lm-width $2 --steps 2 --warmup 0 --json /tmp/bench/jax-lm$1-$2.json > /tmp/bench/jax-lm$1-$2.log 2>&1
done
echo ALLDONE > /tmp/bench/done
