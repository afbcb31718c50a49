// Trains a small classifier on an .npz file (x_train, y_train, x_test, y_test, as Keras's
// mnist.load_data() files), saves and reloads its weights. Usage: consumer DATA.npz WEIGHTS
#include <iostream>

#include "ingot/runtime/version.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/npy.h"

int main(int argc, char** argv) try {
  using namespace ingot;
  if (argc != 3) throw Error(ErrorCode::kInvalidArgument, "usage: consumer DATA.npz WEIGHTS.safetensors");
  NpzFile data = load_npz(argv[1]);
  auto model = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = 32, .activation = "relu"}),
                                          std::make_shared<Dense>(DenseOptions{.units = 3})});
  auto loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
      losses::SparseCategoricalCrossentropyOptions{.from_logits = true});
  model->compile({.optimizer = std::make_shared<optimizers::Adam>(),
                  .loss = loss,
                  .metrics = {metrics::get_for_compile("accuracy", {.loss = loss.get()})}});
  model->fit({.x = data.at("x_train"), .y = data.at("y_train"), .batch_size = 16, .epochs = 20, .verbose = 0});
  const Logs test = model->evaluate({.x = data.at("x_test"), .y = data.at("y_test"), .verbose = 0});
  model->save_weights(argv[2]);
  const Array before = model->predict({.x = data.at("x_test")});
  model->load_weights(argv[2]);
  const bool same = before.to_vector<float>() == model->predict({.x = data.at("x_test")}).to_vector<float>();
  std::cout << "ingot " << version() << " test accuracy " << *test.get("accuracy")
            << " reloaded weights predict identically: " << (same ? "yes" : "no") << "\n";
  return same ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "consumer: " << e.what() << "\n";
  return 1;
}
