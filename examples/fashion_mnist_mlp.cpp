// A Fashion-MNIST MLP in the Keras style (Flatten-256-128-10, fashion_mnist_common.h): fit with
// validation, evaluate, predict, save and reload the weights.
// Usage: fashion_mnist_mlp [epochs] [training samples]
#include "fashion_mnist_common.h"

int main(int argc, char** argv) {
  return examples::run("fashion_mnist_mlp", *examples::mlp(), examples::kMlpSample, argc, argv);
}
