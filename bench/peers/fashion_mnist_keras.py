#!/usr/bin/env python3
"""Keras 3 (JAX backend) peer of `ingot train`: `model.fit` on the same Fashion-MNIST recipe.

Used by bench/fashion_mnist_peers.sh to put Keras's whole `fit` next to `ingot train`, measured in
the same invocation on the same machine; run it with bench/.venv/bin/python (keras and jax pinned
in bench/peers/requirements.txt). KERAS_BACKEND is set to "jax" here, before keras is imported.

The recipe is `ingot train`'s (tools/train.cpp), which follows Keras's own defaults:
- models: mlp = Input (28, 28), Flatten, Dense 256 relu, Dense 128 relu, Dense 10; cnn = Input
  (28, 28, 1), Conv2D 32 3x3 valid relu, MaxPooling2D 2, Conv2D 64 3x3 valid relu, MaxPooling2D 2,
  Flatten, Dense 256 relu (--cnn-dense), Dense 10. Keras's default initialisers
  (glorot_uniform kernels, zero biases), as ingot's.
- pixels / 255 as float32 (NHWC, as ingot's), labels int32; fit(validation_split=0.1): the last
  10% of the training images before shuffling validate; shuffle=True reshuffles the rest each epoch.
- loss SparseCategoricalCrossentropy(from_logits=True); metric accuracy.
- Adam(learning rate 1e-3, beta1 0.9, beta2 0.999, epsilon 1e-7 -- Keras's defaults); --lr-schedule
  cosine (the default, as `ingot train`'s) is keras.optimizers.schedules.CosineDecay from the rate
  to 0 over all training steps; constant keeps the rate.

Timing (a callback; fit's own loop untouched): each epoch's wall time from on_epoch_begin to
on_epoch_end (training + validation, as ingot's epoch_seconds), and the validation's share
(on_test_begin .. on_test_end inside the epoch), so the training part per step is
(epoch - validation) / steps: "timing.train_step_total_ms", the time per step inside and around
the step together (Keras's fit has no boundary between them to time without adding a device sync
per step). The first epoch includes XLA's compilation of the train and test functions.
Memory: "peak_rss_bytes", the process's peak resident set size (getrusage ru_maxrss).

Output: one JSON object (stdout, or --json FILE) with the field names of `ingot train
--metrics-json`: history, test, epoch_seconds, train_seconds, timing, config, peak_rss_bytes.
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

os.environ["KERAS_BACKEND"] = "jax"

import numpy as np  # noqa: E402


def fail(message):
    """One line on stderr and exit status 2 (bad arguments or inputs), no traceback."""
    print(f"fashion_mnist_keras: {message}", file=sys.stderr)
    sys.exit(2)


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
    fail(f"{stem}(.gz) not found in --data-dir {data_dir} (install the package dataset-fashion-mnist)")


def make_model(keras, name, dense_units):
    """The Sequential model of `ingot train --model name` (Keras's default initialisers)."""
    L = keras.layers
    if name == "mlp":
        layers = [keras.Input((28, 28)), L.Flatten(), L.Dense(256, activation="relu"),
                  L.Dense(128, activation="relu"), L.Dense(10)]
    else:
        layers = [keras.Input((28, 28, 1)), L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
                  L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2), L.Flatten(),
                  L.Dense(dense_units, activation="relu"), L.Dense(10)]
    return keras.Sequential(layers)


def epoch_timer(keras):
    """A callback recording each epoch's wall time and the validation's share of it (seconds)."""

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epoch_seconds, self.validation_seconds = [], []
            self._epoch_start = self._test_start = 0.0
            self._in_epoch = False

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch_start, self._in_epoch = time.perf_counter(), True
            self.validation_seconds.append(0.0)

        def on_test_begin(self, logs=None):
            self._test_start = time.perf_counter()

        def on_test_end(self, logs=None):
            if self._in_epoch:
                self.validation_seconds[-1] += time.perf_counter() - self._test_start

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_seconds.append(time.perf_counter() - self._epoch_start)
            self._in_epoch = False
            print(f"epoch {len(self.epoch_seconds)} {self.epoch_seconds[-1]:.2f}s "
                  + " ".join(f"{k} {v:.4f}" for k, v in (logs or {}).items()), file=sys.stderr)

    return EpochTimer()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine")
    p.add_argument("--validation-split", type=float, default=0.1)
    p.add_argument("--limit", type=int, default=60000, help="train on the first N training images")
    p.add_argument("--cnn-dense", type=int, default=256, help="units of the CNN's hidden Dense layer")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--json", help="write the report here instead of stdout")
    a = p.parse_args()
    if a.epochs < 1 or a.batch_size < 1 or a.limit < 1 or a.cnn_dense < 1:
        fail("--epochs, --batch-size, --limit and --cnn-dense must be > 0")
    if not 0 <= a.validation_split < 1 or not a.learning_rate > 0:
        fail(f"--validation-split must be in [0, 1) (got {a.validation_split}) and --learning-rate > 0 "
             f"(got {a.learning_rate})")
    return a


def main():
    a = parse_args()
    import keras
    import jax
    keras.utils.set_random_seed(a.seed)
    shape = (-1, 28, 28) if a.model == "mlp" else (-1, 28, 28, 1)
    x = (load(a.data_dir, "train-images-idx3-ubyte")[:a.limit].astype(np.float32) / 255.0).reshape(shape)
    y = load(a.data_dir, "train-labels-idx1-ubyte")[:a.limit].astype(np.int32)
    x_test = (load(a.data_dir, "t10k-images-idx3-ubyte").astype(np.float32) / 255.0).reshape(shape)
    y_test = load(a.data_dir, "t10k-labels-idx1-ubyte").astype(np.int32)
    n_train = int(math.floor(len(x) * (1 - a.validation_split)))  # keras's split rule, as ingot's
    if a.validation_split > 0 and (n_train == 0 or n_train == len(x)):
        fail(f"--validation-split {a.validation_split} of {len(x)} images leaves none on one side")
    n_val = len(x) - n_train
    steps_per_epoch = (n_train + a.batch_size - 1) // a.batch_size
    rate = a.learning_rate
    if a.lr_schedule == "cosine":
        rate = keras.optimizers.schedules.CosineDecay(a.learning_rate, decay_steps=a.epochs * steps_per_epoch)
    model = make_model(keras, a.model, a.cnn_dense)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    timer = epoch_timer(keras)
    start = time.perf_counter()
    hist = model.fit(x, y, batch_size=a.batch_size, epochs=a.epochs, validation_split=a.validation_split,
                     shuffle=True, verbose=0, callbacks=[timer])
    train_seconds = time.perf_counter() - start
    test_loss, test_acc = model.evaluate(x_test, y_test, batch_size=a.batch_size, verbose=0)
    train_part = [e - v for e, v in zip(timer.epoch_seconds, timer.validation_seconds)]
    later = train_part[1:] or train_part
    report = {
        "peer": f"keras {keras.__version__} (jax {jax.__version__})",
        "history": {k: [float(v) for v in vs] for k, vs in hist.history.items()},
        "test": {"loss": float(test_loss), "accuracy": float(test_acc)},
        "train_seconds": train_seconds,
        "epoch_seconds": timer.epoch_seconds,
        "validation_seconds": timer.validation_seconds,
        "median_epoch_seconds": statistics.median(timer.epoch_seconds),
        "timing": {"train_steps": a.epochs * steps_per_epoch,
                   "train_step_total_ms": 1e3 * statistics.median(later) / steps_per_epoch},
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "config": {"model": a.model, "epochs": a.epochs, "batch_size": a.batch_size, "optimizer": "adam",
                   "learning_rate": a.learning_rate, "lr_schedule": a.lr_schedule,
                   "validation_split": a.validation_split, "seed": a.seed, "train_samples": n_train,
                   "validation_samples": n_val, "backend": keras.backend.backend()},
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
