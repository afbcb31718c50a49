// A Fashion-MNIST CNN in the Keras style (32c3-pool-64c3-pool-256-10, fashion_mnist_common.h):
// fit with validation, evaluate, predict, save and reload the weights.
// Usage: fashion_mnist_cnn [epochs] [training samples]
#include "fashion_mnist_common.h"

int main(int argc, char** argv) {
  return examples::run("fashion_mnist_cnn", *examples::cnn(), examples::kCnnSample, argc, argv);
}
