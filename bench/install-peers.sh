#!/usr/bin/env bash
# Installs the peers bench/ compares ingot with, from Debian packages (not product dependencies):
# python3-torch (PyTorch 1.13 for the CPU, used through /usr/bin/python3 by
# bench/peers/fashion_mnist_torch.py). Idempotent; run as root (or with sudo).
set -euo pipefail
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "install-peers: python3-torch present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends python3-torch
