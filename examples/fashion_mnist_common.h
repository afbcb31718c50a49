// What the Fashion-MNIST examples share: load and scale the data, compile, fit (with validation
// and progress output), evaluate, predict, save and reload the weights.
#pragma once

#include <cstdlib>
#include <iostream>
#include <string>

#include "ingot/trainer/datasets.h"
#include "ingot/trainer/model.h"

namespace examples {

/// The first `count` images of `u8` (n, 28, 28) as f32 in [0, 1] with shape (count, sample...).
inline ingot::Array pixels(const ingot::Array& u8, int64_t count, const ingot::Shape& sample) {
  std::vector<double> v = u8.to_doubles();
  v.resize(static_cast<size_t>(count * 784));
  for (double& p : v) p /= 255.0;
  ingot::Shape shape = {count};
  shape.insert(shape.end(), sample.begin(), sample.end());
  return ingot::Array::from_doubles(v, shape, ingot::DType::kF32);
}

/// Trains `model` on inputs of per-sample shape `sample` ({784} or {28, 28, 1}).
/// Arguments: [epochs (default 2)] [training samples (default 60000)].
inline int run(const std::string& name, ingot::Model& model, const ingot::Shape& sample, int argc, char** argv) try {
  using namespace ingot;
  const int64_t epochs = argc > 1 ? std::atoll(argv[1]) : 2;
  const int64_t n = std::min<int64_t>(argc > 2 ? std::atoll(argv[2]) : 60000, 60000);
  datasets::FashionMnist data = datasets::load_fashion_mnist();
  const Array x_train = pixels(data.x_train, n, sample), x_test = pixels(data.x_test, 10000, sample);
  const Array y_train = Array::from_vector<int32_t>(
      std::vector<int32_t>(data.y_train.data<int32_t>(), data.y_train.data<int32_t>() + n), {n});
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(),
                 .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                     losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                 .metrics = {std::shared_ptr<metrics::Metric>(metrics::get("sparse_categorical_accuracy"))}});
  model.fit({.x = x_train, .y = y_train, .batch_size = 128, .epochs = epochs, .validation_split = 0.1});
  std::cout << model.summary();
  const Logs test = model.evaluate({.x = x_test, .y = data.y_test, .batch_size = 512});
  std::cout << "test loss " << *test.get("loss") << ", accuracy " << *test.get("sparse_categorical_accuracy") << "\n";
  const std::string path = "/tmp/" + name + ".safetensors";
  model.save_weights(path);
  const Array before = model.predict({.x = x_test});
  model.load_weights(path);
  const bool same = before.to_vector<float>() == model.predict({.x = x_test}).to_vector<float>();
  std::cout << "reloaded weights predict identically: " << (same ? "yes" : "no") << "\n";
  return same ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << name << ": " << e.what() << "\n";
  return 1;
}

}  // namespace examples
