"""Writes blobs.npz, the package test's data (tests/package/package_test.cmake): three Gaussian
blobs in 4 dimensions, 150 training and 60 test samples, float32 features and int32 labels, with
the array names of Keras's mnist.load_data() files. Run once with NumPy; the output is committed:
    bench/.venv/bin/python tests/package/make_blobs.py
"""
import pathlib

import numpy as np

rng = np.random.default_rng(22)
centers = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]], dtype=np.float32)


def blobs(n):
    y = rng.integers(0, 3, size=n).astype(np.int32)
    x = (centers[y] + 0.5 * rng.standard_normal((n, 4))).astype(np.float32)
    return x, y


x_train, y_train = blobs(150)
x_test, y_test = blobs(60)
np.savez_compressed(pathlib.Path(__file__).with_name("blobs.npz"), x_train=x_train, y_train=y_train,
                    x_test=x_test, y_test=y_test)
