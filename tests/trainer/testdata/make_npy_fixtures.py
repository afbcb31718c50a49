#!/usr/bin/env python3
"""Writes the .npy/.npz fixtures of tests/trainer/npy_test.cpp with NumPy itself.

Run once (the outputs are committed): bench/.venv/bin/python (a venv with numpy)
tests/trainer/testdata/make_npy_fixtures.py. The values are the ones npy_test.cpp hard-codes;
change both together. Files go to tests/trainer/testdata/npy/.
"""
import os
import zipfile

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npy")

# Six values per dtype, shape (2, 3), chosen to catch byte order and sign mistakes.
VALUES = {
    "bool": [True, False, True, True, False, False],
    "i1": [0, 1, -2, 127, -128, 5],
    "u1": [0, 1, 2, 255, 128, 7],
    "i4": [0, 1, -2, 2147483647, -2147483648, 305419896],
    "u4": [0, 1, 2, 4294967295, 2147483648, 305419896],
    "i8": [0, 1, -2, 9223372036854775807, -9223372036854775808, 81985529216486895],
    "u8": [0, 1, 2, 18446744073709551615, 9223372036854775808, 81985529216486895],
    "f2": [0.0, 1.0, -2.5, 65504.0, 0.000061035156, -0.0],
    "f4": [0.0, 1.0, -2.5, 3.4028234663852886e38, 1.401298464324817e-45, 0.1],
    "f8": [0.0, 1.0, -2.5, 1.7976931348623157e308, 5e-324, 0.1],
}


def path(name):
    return os.path.join(OUT, name)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(path(f))
    for code, values in VALUES.items():
        dt = np.dtype("?" if code == "bool" else code)
        a = np.array(values, dtype=dt).reshape(2, 3)
        np.save(path(f"{code}.npy"), a)  # little-endian ('<', or '|' for one byte), C order, 1.0
        if dt.itemsize > 1:
            np.save(path(f"{code}_be.npy"), a.astype(dt.newbyteorder(">")))
    # Fortran order: values 0..23 as (2, 3, 4) f4; and a big-endian Fortran (3, 2) i8.
    np.save(path("fortran_f4.npy"), np.asfortranarray(np.arange(24, dtype="<f4").reshape(2, 3, 4)))
    np.save(path("fortran_be_i8.npy"), np.asfortranarray((np.arange(6).reshape(3, 2) - 3).astype(">i8")))
    # 0-d and empty arrays.
    np.save(path("scalar_f8.npy"), np.array(3.5, dtype="<f8"))
    np.save(path("empty_f4.npy"), np.zeros((0,), dtype="<f4"))
    np.save(path("empty_i4.npy"), np.zeros((2, 0, 3), dtype="<i4"))
    # A long 1-D array (5 values) for the "(5,)" shape form.
    np.save(path("vector_i4.npy"), np.array([10, 20, 30, 40, 50], dtype="<i4"))
    # Format versions 2.0 and 3.0 (same array as f4.npy).
    f4 = np.array(VALUES["f4"], dtype="<f4").reshape(2, 3)
    for version in [(2, 0), (3, 0)]:
        with open(path(f"f4_v{version[0]}.npy"), "wb") as f:
            np.lib.format.write_array(f, f4, version=version)
    # Rows for the memory-mapped reader: (10, 3) f4 (value 10 * row + column), big-endian i8 labels.
    np.save(path("rows_f4.npy"), (np.arange(10)[:, None] * 10 + np.arange(3)[None, :]).astype("<f4"))
    np.save(path("rows_be_i8.npy"), (np.arange(10) * 7).astype(">i8"))
    # Refused: object (pickle), complex, unicode, structured, int16 (no ingot dtype).
    np.save(path("object.npy"), np.array([1, "a", None], dtype=object), allow_pickle=True)
    np.save(path("complex_c8.npy"), np.array([1 + 2j], dtype="<c8"))
    np.save(path("unicode_U3.npy"), np.array(["abc", "d"], dtype="<U3"))
    np.save(path("structured.npy"), np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
    np.save(path("int16.npy"), np.array([1, 2], dtype="<i2"))
    # A tiny MNIST-like archive: x (n, 4, 4) u1 with value (17 * i) % 256, y (n,) u1 = i % 10.
    mnist = {
        "x_train": (np.arange(6 * 16) * 17 % 256).astype("u1").reshape(6, 4, 4),
        "y_train": (np.arange(6) % 10).astype("u1"),
        "x_test": (np.arange(2 * 16) * 17 % 256).astype("u1").reshape(2, 4, 4),
        "y_test": np.array([3, 9], dtype="u1"),
    }
    np.savez(path("mnist.npz"), **mnist)
    np.savez_compressed(path("mnist_compressed.npz"), **mnist)
    # Positional names (arr_0, arr_1) and several dtypes, compressed.
    np.savez_compressed(path("positional.npz"), f4, np.array(VALUES["i8"], dtype=">i8"))
    # An archive with a member that is not an array (refused).
    with zipfile.ZipFile(path("not_npy_member.npz"), "w") as z:
        with z.open("a.npy", "w") as f:
            np.lib.format.write_array(f, np.array([1, 2], dtype="<i4"))
        z.writestr("readme.txt", "not an array")


if __name__ == "__main__":
    main()
