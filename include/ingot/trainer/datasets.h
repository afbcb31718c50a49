// Datasets (keras.datasets): Fashion-MNIST from the IDX files Debian's dataset-fashion-mnist
// package installs.
#pragma once

#include <string>

#include "ingot/runtime/array.h"

namespace ingot::datasets {

/// The Fashion-MNIST splits (Xiao, Rasul and Vollgraf, 2017): 60000 training and 10000 test
/// images of 28x28 pixels (u8, 0..255) and labels 0..9 (i32), as keras.datasets.fashion_mnist
/// returns them: x (n, 28, 28) u8, y (n,) i32.
struct FashionMnist {
  Array x_train, y_train, x_test, y_test;
};

/// Default location of the IDX files (dataset-fashion-mnist).
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Reads train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-... from `dir` (gzip or
/// uncompressed files without the .gz suffix). Throws ingot::Error: kNotFound naming the missing
/// file (hint: install dataset-fashion-mnist), kParseError naming the file for a bad magic
/// number, truncated data or mismatched image/label counts.
FashionMnist load_fashion_mnist(const std::string& dir = kFashionMnistDir);

/// The test split only (t10k-images/labels; x_train and y_train stay invalid Arrays), for
/// evaluation and prediction, which need not read (nor depend on) the 26 MB training files.
/// Errors as load_fashion_mnist.
FashionMnist load_fashion_mnist_test(const std::string& dir = kFashionMnistDir);

}  // namespace ingot::datasets
