#!/usr/bin/env python3
"""Writes the bad --data archives of tools/ingot_train_test.cmake (PART=npz) with NumPy itself.

Run once (the outputs are committed, < 2 KB each): bench/.venv/bin/python
tools/testdata/npz/make_bad_npz.py. Each is a small valid data set with one defect.
"""
import os

import numpy as np

OUT = os.path.dirname(os.path.abspath(__file__))


def good():
    rng = np.random.default_rng(0)
    return {
        "x_train": rng.normal(size=(20, 3)).astype(np.float32),
        "y_train": (np.arange(20) % 2).astype(np.int32),
        "x_test": rng.normal(size=(6, 3)).astype(np.float32),
        "y_test": (np.arange(6) % 2).astype(np.int32),
    }


def main():
    d = good()
    d["x_test"] = d["x_test"][:0]
    d["y_test"] = d["y_test"][:0]
    np.savez(os.path.join(OUT, "empty_test.npz"), **d)
    d = good()
    d["x_train"][7, 2] = np.nan
    np.savez(os.path.join(OUT, "nan_feature.npz"), **d)
    d = good()
    d["y_train"][3] = 100_000_000
    np.savez(os.path.join(OUT, "huge_label.npz"), **d)


if __name__ == "__main__":
    main()
