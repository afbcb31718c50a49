// Example: the README's quick tour. Trace a softmax-regression loss, differentiate it with
// value_and_grad_graph, and run the gradient graph with the reference interpreter.
#include <iostream>

#include "ingot/ingot.h"

int main() {
  using namespace ingot;
  // Trace a function of tensors into a graph (shapes and dtypes are static).
  TraceFn loss = [](const std::vector<Tensor>& a) {  // a = x (2, 4), w (4, 3)
    Tensor logits = matmul(a[0], a[1]);              // (2, 3)
    Tensor labels = one_hot(constant(Array::from_vector<int32_t>({0, 2}, {2})), 3);
    return std::vector<Tensor>{mean(negate(sum(labels * log_softmax(logits), {1})))};
  };
  std::vector<ir::TensorType> types = {{{2, 4}, DType::kF32}, {{4, 3}, DType::kF32}};
  ir::Graph g = trace(loss, types, "loss");
  std::cout << ir::print_graph(g);  // the IR, see docs/ir.md

  // Differentiate it (JAX names): outputs [loss, d loss / d w].
  ir::Graph vg = value_and_grad_graph(g, /*argnums=*/{1});

  // Run it with the reference interpreter.
  Array x = Array::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  Array w = Array::full({4, 3}, 0.1, DType::kF32);
  std::vector<Array> out = interp::interpret(vg, {x, w});
  std::cout << out[0].to_string() << "\n" << out[1].to_string() << "\n";
  return 0;
}
