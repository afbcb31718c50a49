// Fashion-MNIST with ingot's C++ API, as Keras would write it: `ingot train`'s default MLP, raw
// u8 pixels rescaled inside the model, 10 epochs of Adam (1e-3, cosine decay to 0) at batch 128
// with 10% validation.
// Usage: fashion_mnist [epochs] (the data: Debian's dataset-fashion-mnist, docs/train.md).
#include <cstdlib>
#include <iostream>

#include "ingot/trainer/datasets.h"
#include "ingot/trainer/model.h"

int main(int argc, char** argv) try {
  using namespace ingot;
  const datasets::FashionMnist data = datasets::load_fashion_mnist();  // x (n, 28, 28) u8, y (n,) i32
  Sequential model({std::make_shared<Rescaling>(1.0 / 255), std::make_shared<Flatten>(),
                    std::make_shared<Dense>(DenseOptions{.units = 256, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 128, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 10})});
  const int64_t epochs = argc > 1 ? std::atoll(argv[1]) : 10;
  const int64_t steps = epochs * ((54000 + 127) / 128);  // batches of 128 of the 54000 training images
  model.compile(
      {.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{
           .learning_rate = optimizers::schedules::CosineDecay({.initial_learning_rate = 1e-3, .decay_steps = steps})}),
       .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
           losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
       .metrics = {std::make_shared<metrics::SparseCategoricalAccuracy>(
           metrics::SparseCategoricalAccuracyOptions{.name = "accuracy"})}});
  model.fit({.x = data.x_train, .y = data.y_train, .batch_size = 128, .epochs = epochs, .validation_split = 0.1});
  const Logs test = model.evaluate({.x = data.x_test, .y = data.y_test, .batch_size = 128, .verbose = 0});
  std::cout << "test loss " << *test.get("loss") << ", accuracy " << *test.get("accuracy") << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist: " << e.what() << "\n";
  return 1;
}
