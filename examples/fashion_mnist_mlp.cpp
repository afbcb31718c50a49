// A Fashion-MNIST MLP in the Keras style (784-256-128-10): fit with validation, evaluate,
// predict, save and reload the weights. Usage: fashion_mnist_mlp [epochs] [training samples]
#include "fashion_mnist_common.h"

int main(int argc, char** argv) {
  using namespace ingot;
  Sequential model({std::make_shared<Dense>(DenseOptions{.units = 256, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 128, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 10})});
  return examples::run("fashion_mnist_mlp", model, {784}, argc, argv);
}
