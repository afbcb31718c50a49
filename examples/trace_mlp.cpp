// Example: trace a two-layer MLP with log-softmax into ingot's IR, print it, and run it with
// the reference interpreter. Build: part of the project (build/dev/examples/trace_mlp).
#include <cmath>
#include <iostream>

#include "ingot/ingot.h"

int main() {
  using namespace ingot;
  // Weights W1 (4, 8) and W2 (8, 3), captured as constants: w[i] = sin(i) / 2.
  auto weights = [](const Shape& shape) {
    std::vector<double> v(static_cast<size_t>(num_elements(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(i)) / 2;
    return Array::from_doubles(v, shape, DType::kF32);
  };
  Array w1 = weights({4, 8});
  Array w2 = weights({8, 3});

  ir::Graph graph = trace(
      [&](const std::vector<Tensor>& args) {
        Tensor h = relu(matmul(args[0], constant(w1)));                    // (batch, 8)
        return std::vector<Tensor>{log_softmax(matmul(h, constant(w2)))};  // (batch, 3)
      },
      {ir::TensorType{{2, 4}, DType::kF32}}, "mlp");

  std::cout << ir::print_graph(graph) << "\n";
  Array x = Array::from_vector<float>({1, 2, 3, 4, -1, -2, -3, -4}, {2, 4});
  std::cout << interp::interpret(graph, {x}).at(0).to_string() << "\n";
  return 0;
}
