// Example: trace a two-layer MLP with log-softmax into ingot's IR, print it, and run it with
// the reference interpreter. Build: part of the project (build/dev/examples/trace_mlp).
#include <iostream>

#include "ingot/ingot.h"

int main() {
  using namespace ingot;
  // Weights: W1 (4, 8), W2 (8, 3), as captured constants.
  Array w1 = Array::full({4, 8}, DType::kF32, 0.25);
  Array w2 = Array::from_doubles(std::vector<double>(24, -0.5), {8, 3}, DType::kF32);

  ir::Graph graph = trace(
      [&](const std::vector<Tensor>& args) {
        Tensor h = relu(matmul(args[0], constant(w1)));          // (batch, 8)
        return std::vector<Tensor>{log_softmax(matmul(h, constant(w2)))};  // (batch, 3)
      },
      {ir::TensorType{{2, 4}, DType::kF32}}, "mlp");

  std::cout << ir::print_graph(graph) << "\n";
  Array x = Array::from_vector<float>({1, 2, 3, 4, -1, -2, -3, -4}, {2, 4});
  std::cout << interp::interpret(graph, {x}).at(0).to_string() << "\n";
  return 0;
}
