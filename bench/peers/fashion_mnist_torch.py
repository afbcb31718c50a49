#!/usr/bin/python3
"""PyTorch peer of `ingot train`: the same Fashion-MNIST models, data split and recipe.

Used by bench/fashion_mnist_peers.sh to put ingot's numbers next to PyTorch's, measured in the
same invocation on the same machine. The script runs it with bench/.venv/bin/python (PyTorch 2.x
from the Python package index, pinned in bench/peers/requirements.txt; CPU); it also runs under
Debian's python3-torch 1.13 (/usr/bin/python3), the main-job issue's original peer.

The recipe mirrors `ingot train` (tools/train.cpp) and Keras 3's defaults, which ingot follows:
- models: mlp = Flatten, Dense 256 relu, Dense 128 relu, Dense 10; cnn = Conv2D 32 3x3 valid
  relu, MaxPool 2, Conv2D 64 3x3 valid relu, MaxPool 2, Flatten, Dense 256 relu, Dense 10
  (--cnn-dense 128 for the issue's original width).
  Weights glorot_uniform (Glorot & Bengio 2010), biases zero (keras.layers.Dense/Conv2D).
  The CNN runs channels-first (PyTorch's layout); the flatten order differs from ingot's NHWC,
  which does not change the function class.
- pixels / 255 as float32, labels int64; validation = the last fraction of the training images
  before shuffling (keras fit(validation_split=)); the rest reshuffled every epoch.
- loss: sparse categorical crossentropy from logits (mean over the batch); metric accuracy.
- Adam(lr, beta1 0.9, beta2 0.999, eps 1e-7): Keras's epsilon (PyTorch's default is 1e-8);
  --lr-schedule cosine (the default, as `ingot train`'s) decays the rate to 0 over all steps,
  updated every step (keras.optimizers.schedules.CosineDecay); constant keeps it.

Timing: per epoch the wall time of the epoch (training + validation, as ingot's epoch_seconds),
and over the training batches the time inside the step (forward, backward, optimizer step) versus
the loop around it (batch slicing, metric bookkeeping): the per-step overhead reported next to
ingot's (`ingot train --metrics-json`'s "timing").

Memory: "peak_rss_bytes", the process's peak resident set size (getrusage ru_maxrss).

Output: one JSON object (stdout, or --json FILE) with the same field names as ingot's
--metrics-json: history, test, epoch_seconds, train_seconds, timing, config, peak_rss_bytes.
"""
import argparse
import gzip
import json
import math
import os
import resource
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_idx(path):
    """An IDX file (gzip or plain) as a numpy uint8 array of its declared shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return read_idx(path)
    sys.exit(f"fashion_mnist_torch: {stem}(.gz) not found in {data_dir}")


def glorot_(w, fan_in, fan_out):
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    with torch.no_grad():
        w.uniform_(-limit, limit)


def make_model(name, dense_units=256):
    if name == "mlp":
        layers = [torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                  torch.nn.ReLU(), torch.nn.Linear(128, 10)]
    else:
        layers = [torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                  torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                  torch.nn.Linear(64 * 5 * 5, dense_units), torch.nn.ReLU(), torch.nn.Linear(dense_units, 10)]
    model = torch.nn.Sequential(*layers)
    for m in model:
        if isinstance(m, torch.nn.Linear):
            glorot_(m.weight, m.in_features, m.out_features)
            torch.nn.init.zeros_(m.bias)
        elif isinstance(m, torch.nn.Conv2d):
            k = m.kernel_size[0] * m.kernel_size[1]
            glorot_(m.weight, m.in_channels * k, m.out_channels * k)  # Keras's conv fans
            torch.nn.init.zeros_(m.bias)
    return model


def evaluate(model, x, y, batch_size):
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch_size):
            logits = model(x[i:i + batch_size])
            loss_sum += F.cross_entropy(logits, y[i:i + batch_size], reduction="sum").item()
            correct += (logits.argmax(1) == y[i:i + batch_size]).sum().item()
    model.train()
    return loss_sum / len(x), correct / len(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine")
    p.add_argument("--validation-split", type=float, default=0.1)
    p.add_argument("--limit", type=int, default=60000)
    p.add_argument("--cnn-dense", type=int, default=256, help="units of the CNN's hidden Dense layer")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (the issue's peer: 1)")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--json", help="write the report here instead of stdout")
    a = p.parse_args()
    if a.epochs < 1 or a.batch_size < 1 or not 0 <= a.validation_split < 1 or a.threads < 1:
        sys.exit("fashion_mnist_torch: --epochs, --batch-size, --threads must be > 0, --validation-split in [0, 1)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)

    def tensors(images, labels):
        x = torch.from_numpy(images.astype(np.float32) / 255.0)
        x = x.reshape(-1, 1, 28, 28) if a.model == "cnn" else x.reshape(-1, 784)
        return x, torch.from_numpy(labels.astype(np.int64))

    xs, ys = tensors(load(a.data_dir, "train-images-idx3-ubyte")[:a.limit], load(a.data_dir, "train-labels-idx1-ubyte")[:a.limit])
    x_test, y_test = tensors(load(a.data_dir, "t10k-images-idx3-ubyte"), load(a.data_dir, "t10k-labels-idx1-ubyte"))
    n_val = int(len(xs) * a.validation_split)
    n_train = len(xs) - n_val
    x_train, y_train, x_val, y_val = xs[:n_train], ys[:n_train], xs[n_train:], ys[n_train:]

    model = make_model(a.model, a.cnn_dense)
    opt = torch.optim.Adam(model.parameters(), lr=a.learning_rate, eps=1e-7)
    total_steps = a.epochs * ((n_train + a.batch_size - 1) // a.batch_size)
    # LambdaLR scales the rate by the factor of the number of steps taken so far (Keras's
    # CosineDecay at `iterations`); constant: factor 1.
    cosine = lambda k: 0.5 * (1 + math.cos(math.pi * min(k, total_steps) / total_steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine if a.lr_schedule == "cosine" else lambda k: 1.0)
    history = {"loss": [], "accuracy": []}
    if n_val:
        history.update({"val_loss": [], "val_accuracy": []})
    epoch_seconds, steps, step_seconds, loop_seconds = [], 0, 0.0, 0.0
    start = time.perf_counter()
    for _ in range(a.epochs):
        t_epoch = time.perf_counter()
        order = torch.from_numpy(rng.permutation(n_train))
        loss_sum, correct = 0.0, 0
        for i in range(0, n_train, a.batch_size):
            idx = order[i:i + a.batch_size]
            xb, yb = x_train[idx], y_train[idx]
            t_step = time.perf_counter()
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step_seconds += time.perf_counter() - t_step
            steps += 1
            loss_sum += loss.item() * len(idx)  # Keras's running mean over samples
            correct += (logits.argmax(1) == yb).sum().item()
        loop_seconds += time.perf_counter() - t_epoch
        history["loss"].append(loss_sum / n_train)
        history["accuracy"].append(correct / n_train)
        if n_val:
            vl, va = evaluate(model, x_val, y_val, a.batch_size)
            history["val_loss"].append(vl)
            history["val_accuracy"].append(va)
        epoch_seconds.append(time.perf_counter() - t_epoch)
        print(f"epoch {len(epoch_seconds)}/{a.epochs} {epoch_seconds[-1]:.2f}s "
              + " ".join(f"{k} {v[-1]:.4f}" for k, v in history.items()), file=sys.stderr)
    train_seconds = time.perf_counter() - start
    test_loss, test_acc = evaluate(model, x_test, y_test, a.batch_size)
    report = {
        "peer": f"pytorch {torch.__version__}",
        "history": history,
        "test": {"loss": test_loss, "accuracy": test_acc},
        "train_seconds": train_seconds,
        "epoch_seconds": epoch_seconds,
        "median_epoch_seconds": statistics.median(epoch_seconds),
        "timing": {"train_steps": steps, "step_ms": 1e3 * step_seconds / steps,
                   "overhead_ms": 1e3 * (loop_seconds - step_seconds) / steps},
        "config": {"model": a.model, "epochs": a.epochs, "batch_size": a.batch_size, "optimizer": "adam",
                   "learning_rate": a.learning_rate, "lr_schedule": a.lr_schedule, "validation_split": a.validation_split, "seed": a.seed,
                   "threads": a.threads, "train_samples": n_train, "validation_samples": n_val},
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "device": "cpu",
    }
    text = json.dumps(report, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
