// The data `ingot train` trains on: Fashion-MNIST's IDX files (--data-dir) or a user's .npz
// archive (--data), as the model's float inputs and int32 labels (tools/train_data.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "ingot/runtime/array.h"

namespace ingot::cli {

/// A classification data set: images or feature arrays with integer labels.
struct TrainingSet {
  Array x_train, y_train;                     ///< (n, features...) any numeric dtype; (n,) int32 labels in [0, classes)
  Array x_test, y_test;                       ///< (m, the same features...); (m,) int32
  int64_t classes = 10;                       ///< 1 + the largest label (at least 2)
  std::string what = "Fashion-MNIST images";  ///< how the samples are named in messages
};

/// Reads `path`, an .npz archive with the arrays x_train, y_train, x_test and y_test (as the
/// files of keras.datasets.mnist.load_data(): x (n, 28, 28) uint8, y (n,) uint8; any numeric x of
/// rank >= 2 and any integer y of shape (n,) or (n, 1) are accepted). Labels become int32.
/// Throws ingot::Error: load_npz's errors (naming the file); kNotFound for a missing array
/// (naming it and what the archive holds); kInvalidArgument naming the array for x of rank < 2,
/// a bf16/bool x, samples without features, a split without samples, a float feature that is not
/// finite in float32 (naming the sample), x_test's sample shape differing from x_train's, an x/y
/// sample count mismatch, y that is not integer or not (n,)/(n, 1), a negative label or one above
/// 2^24 - 1, or fewer than two classes.
TrainingSet load_npz_dataset(const std::string& path);

/// The first `count` samples of `x` as the float32 inputs of `model` ("mlp" or "cnn"): uint8
/// values scaled by 1/255 (the Keras tutorials' x / 255.0), other dtypes converted unchanged;
/// for the cnn, (n, H, W) images get a channel axis (n, H, W, 1) and (n, H, W, C) stay. Throws
/// ingot::Error(kInvalidArgument) for a cnn given samples that are not (H, W) or (H, W, C) of
/// at least 10x10, or a count outside [0, n].
Array model_inputs(const Array& x, int64_t count, const std::string& model);

/// The per-sample shape `model_inputs` gives `x`'s samples.
Shape model_sample_shape(const Array& x, const std::string& model);

}  // namespace ingot::cli
