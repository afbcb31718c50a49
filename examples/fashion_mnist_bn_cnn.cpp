// A batch-normalised Fashion-MNIST CNN in the Keras style (conv-BN-ReLU-pool x 2, 256, 10;
// fashion_mnist_common.h): fit with validation, evaluate, predict, save and reload the weights
// (the BN moving statistics are saved and restored with them).
// Usage: fashion_mnist_bn_cnn [epochs] [training samples]
#include "fashion_mnist_common.h"

int main(int argc, char** argv) {
  return examples::run("fashion_mnist_bn_cnn", *examples::bn_cnn(), examples::kCnnSample, argc, argv);
}
