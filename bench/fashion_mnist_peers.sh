#!/usr/bin/env bash
# The main job against its peers, in one invocation on one machine: `ingot train`, Keras 3's `fit`
# (JAX backend; bench/peers/fashion_mnist_keras.py) and PyTorch 2.x (bench/peers/fashion_mnist_torch.py)
# train the same Fashion-MNIST models with the same recipe (Adam 1e-3 with cosine decay, batch
# 128, 10% validation); the report is a Markdown table per model of test accuracy, seconds per
# epoch, first epoch, compile time, ms per train step and peak RSS, with ratios ingot / peer
# (below 1: ingot is faster or smaller) and the accuracy difference in points.
#
#   bench/fashion_mnist_peers.sh [--models "mlp cnn"] [--peers "keras pytorch"] [--rounds N]
#                                [--epochs N] [--cnn-epochs N] [--limit N]
#                                [--lr-schedule constant|cosine] [--threads "T ..."]
#                                [--seed S] [--ingot PATH] [--python PATH] [--out FILE.md]
#
# --rounds (default 1) repeats every run, alternating the frameworks within each round (ingot,
# then each peer), and the report takes medians over the rounds. Round r seeds every framework's
# weights and shuffles with S + r - 1 (--seed, default 1337, ingot train's default), so the rounds
# also show each framework's seed-to-seed accuracy spread (the report's min-max). --epochs (default 10) applies to
# the MLP, --cnn-epochs (default --epochs) to the CNN; --limit trains on the first N images
# (default all 60000); --lr-schedule goes to all (default cosine, as ingot train's); --threads
# lists PyTorch's thread counts (torch.set_num_threads; default: every core, as ingot and XLA use;
# "1" is the main-job issue's original peer). ingot is the release build (cmake --preset release
# && cmake --build build/release --target ingot); the peers run in bench/.venv (`bench/run
# --install` makes it from bench/peers/requirements.txt); --python /usr/bin/python3 runs the
# PyTorch peer under Debian's python3-torch 1.13 instead (no Keras there). Runs are sequential,
# so each has the machine to itself: keep the machine otherwise idle while this runs. Raw JSON
# reports stay in the work directory printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
models="mlp cnn" peers="keras pytorch" rounds=1 seed=1337 epochs=10 cnn_epochs="" limit="" schedule=cosine
threads="$(nproc)" ingot=build/release/tools/ingot python=bench/.venv/bin/python out=""
usage() { echo "fashion_mnist_peers.sh: $1 (see the header of this script)" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || usage "'$1' needs a value"
  case "$1" in
    --models) models="$2" ;;
    --peers) peers="$2" ;;
    --rounds) rounds="$2" ;;
    --seed) seed="$2" ;;
    --epochs) epochs="$2" ;;
    --cnn-epochs) cnn_epochs="$2" ;;
    --limit) limit="$2" ;;
    --lr-schedule) schedule="$2" ;;
    --threads) threads="$2" ;;
    --ingot) ingot="$2" ;;
    --python) python="$2" ;;
    --out) out="$2" ;;
    *) usage "unknown argument '$1'" ;;
  esac
  shift 2
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || usage "--rounds must be a positive integer, not '$rounds'"
[[ "$seed" =~ ^[0-9]+$ ]] || usage "--seed must be a non-negative integer, not '$seed'"
for m in $models; do [[ "$m" == mlp || "$m" == cnn ]] || usage "--models: '$m' is not mlp or cnn"; done
for p in $peers; do [[ "$p" == keras || "$p" == pytorch ]] || usage "--peers: '$p' is not keras or pytorch"; done
[[ -x "$ingot" ]] || { echo "fashion_mnist_peers.sh: no ingot at '$ingot' (build the release preset or pass --ingot)" >&2; exit 1; }
for p in $peers; do
  module=$([[ "$p" == pytorch ]] && echo torch || echo keras)
  KERAS_BACKEND=jax "$python" -c "import $module" 2>/dev/null || {
    echo "fashion_mnist_peers.sh: '$python' cannot import $module (bench/run --install makes bench/.venv, or pass --python)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/ingot-peers.XXXXXX)
limit_args=()
[[ -n "$limit" ]] && limit_args=(--limit "$limit")
reports=()
for ((round = 1; round <= rounds; ++round)); do
  for model in $models; do
    n=$epochs
    [[ "$model" == cnn && -n "$cnn_epochs" ]] && n=$cnn_epochs
    common=(--model "$model" --epochs "$n" "${limit_args[@]}" --lr-schedule "$schedule" --seed $((seed + round - 1)))
    echo "== round $round: ingot $model, $n epochs, seed $((seed + round - 1))" >&2
    "$ingot" train "${common[@]}" --quiet --metrics-json "$work/ingot-$model-r$round.json" >&2
    reports+=("ingot:$model:$work/ingot-$model-r$round.json")
    for p in $peers; do
      if [[ "$p" == keras ]]; then
        echo "== round $round: keras $model, $n epochs" >&2
        "$python" bench/peers/fashion_mnist_keras.py "${common[@]}" --json "$work/keras-$model-r$round.json"
        reports+=("keras:$model:$work/keras-$model-r$round.json")
        continue
      fi
      for t in $threads; do
        echo "== round $round: pytorch $model, $n epochs, $t thread(s)" >&2
        "$python" bench/peers/fashion_mnist_torch.py "${common[@]}" --threads "$t" --json "$work/torch-$model-$t-r$round.json"
        reports+=("pytorch-$t:$model:$work/torch-$model-$t-r$round.json")
      done
    done
  done
done
report=$("$python" bench/peers/peers_report.py "${reports[@]}")
echo "$report"
[[ -n "$out" ]] && echo "$report" > "$out"
echo "raw reports: $work" >&2
