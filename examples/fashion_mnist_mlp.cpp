// A Fashion-MNIST MLP in the Keras style: load, build, compile, fit (with a progress bar),
// evaluate, predict, save and reload weights. Usage: fashion_mnist_mlp [epochs] [train samples]
#include <cstdlib>
#include <iostream>

#include "ingot/ingot.h"
#include "ingot/trainer/datasets.h"
#include "ingot/trainer/model.h"

int main(int argc, char** argv) try {
  using namespace ingot;
  const int64_t epochs = argc > 1 ? std::atoll(argv[1]) : 2, n = argc > 2 ? std::atoll(argv[2]) : 60000;
  datasets::FashionMnist data = datasets::load_fashion_mnist();
  auto pixels = [](const Array& u8, int64_t count) {  // (count, 784) f32 in [0, 1]
    std::vector<double> v = u8.to_doubles();
    v.resize(static_cast<size_t>(count * 784));
    for (double& p : v) p /= 255.0;
    return Array::from_doubles(v, {count, 784}, DType::kF32);
  };
  const Array x_train = pixels(data.x_train, n), x_test = pixels(data.x_test, 10000);
  const Array y_train = Array::from_vector<int32_t>(
      std::vector<int32_t>(data.y_train.data<int32_t>(), data.y_train.data<int32_t>() + n), {n});

  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 256, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 128, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 10})});
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(),
                 .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                     losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                 .metrics = {std::shared_ptr<metrics::Metric>(metrics::get("sparse_categorical_accuracy"))}});
  model.fit({.x = x_train, .y = y_train, .batch_size = 128, .epochs = epochs, .validation_split = 0.1});
  std::cout << model.summary();
  const Logs test = model.evaluate({.x = x_test, .y = data.y_test, .batch_size = 512});
  std::cout << "test loss " << *test.get("loss") << ", accuracy " << *test.get("sparse_categorical_accuracy") << "\n";
  model.save_weights("/tmp/fashion_mnist_mlp.safetensors");
  const Array before = model.predict({.x = x_test});
  model.load_weights("/tmp/fashion_mnist_mlp.safetensors");
  std::cout << "reloaded weights predict identically: " << (before.to_vector<float>() ==
      model.predict({.x = x_test}).to_vector<float>() ? "yes" : "no") << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist_mlp: " << e.what() << "\n";
  return 1;
}
