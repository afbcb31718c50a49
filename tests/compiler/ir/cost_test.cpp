// ir::cost_analysis (include/ingot/ir/cost.h) against analytic counts: a GEMM, a convolution, the
// MLP train step's products, elementwise and reduction rules, and a rule for every builtin op.
#include "ingot/ir/cost.h"

#include <gtest/gtest.h>

#include "compiler/codegen/mlp_step.h"
#include "ingot/ir/op_registry.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

TEST(CostAnalysis, AGemmIsTwoMnkFlops) {
  const ir::Graph g = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; },
                            {{{6, 5}, DType::kF32}, {{5, 7}, DType::kF32}}, "gemm");
  const ir::CostAnalysis c = ir::cost_analysis(g);
  EXPECT_EQ(c.flops, 2.0 * 6 * 5 * 7);
  EXPECT_EQ(c.flops_by_op.at("dot_general"), 2.0 * 6 * 5 * 7);
  EXPECT_EQ(c.transcendentals, 0);
  EXPECT_EQ(c.bytes_accessed, 4.0 * (6 * 5 + 5 * 7 + 6 * 7));
  // Integer products are not floating-point operations.
  const ir::Graph gi = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; },
                             {{{6, 5}, DType::kI32}, {{5, 7}, DType::kI32}}, "igemm");
  EXPECT_EQ(ir::cost_analysis(gi).flops, 0);
}

TEST(CostAnalysis, AConvolutionIsTwoFlopsPerOutputAndKernelWindowElement) {
  // NHWC (2, 9, 8, 3) with an HWIO (3, 2, 3, 4) kernel, "valid": output (2, 7, 7, 4).
  const ir::Graph g = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{conv2d(a[0], a[1])}; },
                            {{{2, 9, 8, 3}, DType::kF32}, {{3, 2, 3, 4}, DType::kF32}}, "conv");
  const ir::CostAnalysis c = ir::cost_analysis(g);
  EXPECT_EQ(c.flops_by_op.at("convolution"), 2.0 * (2 * 7 * 7 * 4) * (3 * 2 * 3));
}

TEST(CostAnalysis, TheMlpTrainStepsProductsAreForwardPlusBothGradients) {
  // (B, 12) -> 16 -> 5 with SGD: forward 2B(12*16 + 16*5); weight gradients the same again;
  // the input gradient of the second layer 2B * 16 * 5 (the batch x is not differentiated).
  const testing::MlpSizes sizes{{12, 16, 5}};
  const int64_t b = 8;
  const ir::Graph g = trace(testing::mlp_train_step(sizes, 0.1), testing::mlp_step_types(sizes, b), "mlp_step");
  const ir::CostAnalysis c = ir::cost_analysis(g);
  const double forward = 2.0 * b * (12 * 16 + 16 * 5);
  EXPECT_EQ(c.flops_by_op.at("dot_general"), 2 * forward + 2.0 * b * 16 * 5);
  EXPECT_GT(c.flops, c.flops_by_op.at("dot_general"));  // bias adds, relu, softmax, SGD
  EXPECT_GT(c.transcendentals, 0);                      // log_softmax's exp and log
  double sum = 0;
  for (const auto& [op, f] : c.flops_by_op) sum += f;
  EXPECT_EQ(sum, c.flops);
}

TEST(CostAnalysis, ElementwiseReductionAndTranscendentalRules) {
  const ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{sum(a[0] * a[0], {1}), exp(a[0]), clamp(a[0], -1.0, 1.0)};
      },
      {{{3, 4}, DType::kF32}}, "elementwise");
  const ir::CostAnalysis c = ir::cost_analysis(g);
  EXPECT_EQ(c.flops_by_op.at("multiply"), 12);
  EXPECT_EQ(c.flops_by_op.at("reduce"), 12);
  EXPECT_EQ(c.transcendentals, 12);
  EXPECT_EQ(c.flops_by_op.count("exponential"), 0u);
  EXPECT_EQ(c.flops_by_op.at("clamp"), 24);
}

TEST(CostAnalysis, EveryBuiltinOpHasACostRule) {
  for (const std::string& op : ir::OpRegistry::builtin().names()) EXPECT_TRUE(ir::has_cost_rule(op)) << op;
  EXPECT_FALSE(ir::has_cost_rule("no_such_op"));
  // A graph whose ops all have rules: cost_analysis_if_known is cost_analysis.
  const ir::Graph g = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1])}; },
                            {{{2, 3}, DType::kF32}, {{3, 4}, DType::kF32}}, "gemm");
  EXPECT_EQ(ir::cost_analysis_if_known(g).flops, 2.0 * 2 * 3 * 4);
}

}  // namespace
}  // namespace ingot
