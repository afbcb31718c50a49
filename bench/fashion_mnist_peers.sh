#!/usr/bin/env bash
# The main job against its peer, in one invocation on one machine: `ingot train` and PyTorch
# (Debian's python3-torch 1.13, CPU; bench/peers/fashion_mnist_torch.py) train the same
# Fashion-MNIST models with the same recipe (Adam 1e-3, batch 128, 10% validation); the report is
# a Markdown table of accuracy, epoch time, compile time and the per-step time inside and around
# the step, each with its ratio ingot / PyTorch (below 1: ingot is faster).
#
#   bench/fashion_mnist_peers.sh [--models "mlp cnn"] [--epochs N] [--cnn-epochs N] [--limit N]
#                                [--lr-schedule constant|cosine] [--threads "1 2"] [--ingot PATH]
#                                [--out FILE.md]
#
# --epochs (default 10) applies to the MLP, --cnn-epochs (default --epochs) to the CNN; --limit
# trains on the first N images (default all 60000); --lr-schedule goes to both (default
# cosine, as ingot train's); --threads lists PyTorch's thread counts
# (torch.set_num_threads; default "1", the issue's peer; ingot uses every core). ingot is the
# release build (cmake --preset release && cmake --build build/release --target ingot), and
# python3-torch must be installed (bench/install-peers.sh). Runs are sequential, so each
# has the machine to itself. Raw JSON reports stay in the work directory printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
models="mlp cnn" epochs=10 cnn_epochs="" limit="" schedule=cosine threads="1" ingot=build/release/tools/ingot out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --cnn-epochs) cnn_epochs="$2"; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    --lr-schedule) schedule="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --ingot) ingot="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "fashion_mnist_peers.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2 ;;
  esac
done
[[ -x "$ingot" ]] || { echo "fashion_mnist_peers.sh: no ingot at '$ingot' (build the release preset or pass --ingot)" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "fashion_mnist_peers.sh: python3-torch is missing (bench/install-peers.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/ingot-peers.XXXXXX)
limit_args=()
[[ -n "$limit" ]] && limit_args=(--limit "$limit")
reports=()
for model in $models; do
  n=$epochs
  [[ "$model" == cnn && -n "$cnn_epochs" ]] && n=$cnn_epochs
  echo "== ingot $model, $n epochs" >&2
  "$ingot" train --model "$model" --epochs "$n" "${limit_args[@]}" --lr-schedule "$schedule" --quiet --metrics-json "$work/ingot-$model.json" >&2
  reports+=("ingot:$model:$work/ingot-$model.json")
  for t in $threads; do
    echo "== pytorch $model, $n epochs, $t thread(s)" >&2
    /usr/bin/python3 bench/peers/fashion_mnist_torch.py --model "$model" --epochs "$n" "${limit_args[@]}" \
        --lr-schedule "$schedule" \
        --threads "$t" --json "$work/torch-$model-$t.json"
    reports+=("pytorch-$t:$model:$work/torch-$model-$t.json")
  done
done
report=$(/usr/bin/python3 bench/peers/peers_report.py "${reports[@]}")
echo "$report"
[[ -n "$out" ]] && echo "$report" > "$out"
echo "raw reports: $work" >&2
