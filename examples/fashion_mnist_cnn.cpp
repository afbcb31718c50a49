// A Fashion-MNIST CNN in the Keras style (32c3-pool-64c3-pool-128-10): fit with validation,
// evaluate, predict, save and reload the weights. Usage: fashion_mnist_cnn [epochs] [samples]
#include "fashion_mnist_common.h"

int main(int argc, char** argv) {
  using namespace ingot;
  Sequential model({std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 32, .activation = "relu"}),
                    std::make_shared<MaxPooling2D>(),
                    std::make_shared<Conv2D>(Conv2DLayerOptions{.filters = 64, .activation = "relu"}),
                    std::make_shared<MaxPooling2D>(), std::make_shared<Flatten>(),
                    std::make_shared<Dense>(DenseOptions{.units = 128, .activation = "relu"}),
                    std::make_shared<Dense>(DenseOptions{.units = 10})});
  return examples::run("fashion_mnist_cnn", model, {28, 28, 1}, argc, argv);
}
