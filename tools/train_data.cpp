// `ingot train --data PATH.npz` (tools/train_data.h).
#include "train_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/trainer/npy.h"

namespace ingot::cli {

namespace {

/// The largest class id: the output layer gets one unit per id up to it (as load_csv's limit).
constexpr int64_t kMaxClassId = (int64_t{1} << 24) - 1;

bool integer_dtype(DType d) {
  return d == DType::kI8 || d == DType::kU8 || d == DType::kI32 || d == DType::kU32 || d == DType::kI64 ||
         d == DType::kU64;
}

/// `y` (n,) or (n, 1) of an integer dtype as (n,) int32; `name` names it in errors.
Array labels(const Array& y, const std::string& path, const std::string& name, int64_t& max_label) {
  const Shape& s = y.shape();
  if (!integer_dtype(y.dtype()) || s.empty() || s.size() > 2 || (s.size() == 2 && s[1] != 1)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--data '{}': {} is {} {}; labels must be integer class ids of shape (n,) or (n, 1)", path,
                            name, dtype_name(y.dtype()), shape_to_string(s)),
                "save the labels as integers, e.g. y.astype(np.int32)");
  }
  const std::vector<double> v = y.to_doubles();
  std::vector<int32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] > kMaxClassId) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--data '{}': {}[{}] is {:.0f}; class ids must be in [0, {}] (the output layer gets one "
                              "unit per class up to the largest id)",
                              path, name, i, v[i], kMaxClassId),
                  "number the classes 0, 1, ..., classes - 1");
    }
    out[i] = static_cast<int32_t>(v[i]);
    max_label = std::max<int64_t>(max_label, out[i]);
  }
  return Array::from_vector<int32_t>(out, {s[0]});
}

void check_features(const Array& x, const std::string& path, const std::string& name) {
  int64_t per_sample = 1;
  for (size_t i = 1; i < x.shape().size(); ++i) per_sample *= x.shape()[i];
  if (x.rank() < 2 || per_sample == 0 || x.dtype() == DType::kBF16 || x.dtype() == DType::kBool) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--data '{}': {} is {} {}; it must be numeric samples of shape (n, features...) with at "
                            "least one feature",
                            path, name, dtype_name(x.dtype()), shape_to_string(x.shape())),
                "save one row (or image) per sample, e.g. x of shape (n, 28, 28) uint8 or (n, d) float32");
  }
  if (x.shape()[0] == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--data '{}': {} has no samples (shape {})", path, name, shape_to_string(x.shape())),
                "both splits need at least one sample (the test split is evaluated after training)");
  }
  if (x.dtype() == DType::kF16 || x.dtype() == DType::kF32 || x.dtype() == DType::kF64) {
    // The model trains in float32: a value that is not finite there poisons every step.
    const std::vector<double> v = x.to_doubles();
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i]) || std::fabs(v[i]) > std::numeric_limits<float>::max()) {
        throw Error(
            ErrorCode::kInvalidArgument,
            fmt::format("--data '{}': {} holds {} at sample {} (element {} of it); features must be finite "
                        "float32 values",
                        path, name, v[i], static_cast<int64_t>(i) / per_sample, static_cast<int64_t>(i) % per_sample),
            "clean or rescale the data (e.g. replace NaN with np.nan_to_num, divide by the largest value)");
      }
    }
  }
}

}  // namespace

TrainingSet load_npz_dataset(const std::string& path) {
  const NpzFile z = load_npz(path);
  TrainingSet set;
  set.what = fmt::format("samples of '{}'", path);
  set.x_train = z.at("x_train");
  set.x_test = z.at("x_test");
  check_features(set.x_train, path, "x_train");
  check_features(set.x_test, path, "x_test");
  const Shape train_sample(set.x_train.shape().begin() + 1, set.x_train.shape().end());
  const Shape test_sample(set.x_test.shape().begin() + 1, set.x_test.shape().end());
  if (train_sample != test_sample) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--data '{}': x_train's samples are {} but x_test's are {}", path,
                            shape_to_string(train_sample), shape_to_string(test_sample)),
                "give both splits the same per-sample shape");
  }
  int64_t max_label = -1;
  set.y_train = labels(z.at("y_train"), path, "y_train", max_label);
  set.y_test = labels(z.at("y_test"), path, "y_test", max_label);
  for (const auto& [x, y, name] :
       {std::tuple{&set.x_train, &set.y_train, "train"}, {&set.x_test, &set.y_test, "test"}}) {
    if (x->shape()[0] != y->shape()[0]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--data '{}': x_{} has {} samples but y_{} has {}", path, name, x->shape()[0], name,
                              y->shape()[0]),
                  "give one label per sample");
    }
  }
  set.classes = max_label + 1;
  if (set.classes < 2) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("--data '{}': the labels name {} class(es); a classifier needs at least 2", path, set.classes));
  }
  return set;
}

Shape model_sample_shape(const Array& x, const std::string& model) {
  Shape sample(x.shape().begin() + 1, x.shape().end());
  if (model != "cnn") return sample;
  if (sample.size() == 2) sample.push_back(1);
  if (sample.size() != 3) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--model cnn needs images of shape (n, height, width) or (n, height, width, channels), "
                            "got x of shape {}",
                            shape_to_string(x.shape())),
                "use --model mlp for feature vectors");
  }
  // Two 3x3 "valid" convolutions and two 2x2 poolings: 10x10 is the smallest input they fit.
  if (sample[0] < 10 || sample[1] < 10) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--model cnn needs images of at least 10x10 (two 3x3 convolutions and two 2x2 poolings), "
                            "got {}x{}",
                            sample[0], sample[1]),
                "use --model mlp for smaller images");
  }
  return sample;
}

Array model_inputs(const Array& x, int64_t count, const std::string& model) {
  if (count < 0 || count > x.shape()[0]) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("asked for {} samples of {}", count, x.shape()[0]));
  }
  Shape shape = {count};
  const Shape sample = model_sample_shape(x, model);
  shape.insert(shape.end(), sample.begin(), sample.end());
  int64_t per_sample = 1;
  for (const int64_t d : sample) per_sample *= d;
  std::vector<float> v(static_cast<size_t>(count * per_sample));
  if (x.dtype() == DType::kU8) {
    const uint8_t* src = x.data<uint8_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(src[i]) / 255.0f;
  } else if (x.dtype() == DType::kF32) {
    const float* src = x.data<float>();
    std::copy(src, src + v.size(), v.begin());
  } else {
    const std::vector<double> all = x.to_doubles();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(all[i]);
  }
  return Array::from_vector<float>(v, shape);
}

}  // namespace ingot::cli
