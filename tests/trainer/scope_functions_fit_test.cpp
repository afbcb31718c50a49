// Regional compilation in fit (lower::LoweringOptions::share_repeated_scopes): the transformer LM
// of examples/tiny_lm.h (the bench LM) trains to the same weights, bit for bit, with its blocks
// (and its same-shaped variables' updates) compiled once as with every one compiled on its own.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "../../examples/tiny_lm.h"
#include "ingot/trainer/losses.h"
#include "ingot/trainer/optimizers.h"
#include "test_util.h"

namespace ingot {
namespace {

struct Trained {
  std::vector<Array> weights;
  CompileBreakdown compile;
};

/// The 3-block LM (width 32, context 16, vocabulary 256) after 3 Adam steps on fixed random tokens.
Trained train_lm(bool share_repeated_scopes) {
  const examples::TinyLmConfig config{.context = 16, .width = 32, .heads = 2, .blocks = 3, .vocab = 256};
  auto model = std::make_shared<examples::TinyLm>(config, ModelOptions{.name = "lm", .seed = 5});
  CompileOptions compile{.optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{}),
                         .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                             losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
                         .compiler = {.compile_cache_dir = ""}};
  compile.lowering.share_repeated_scopes = share_repeated_scopes;
  model->compile(std::move(compile));
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(12 * 16), next(12 * 16);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(rng() % 256);
    next[i] = static_cast<int32_t>(rng() % 256);
  }
  FitOptions fit{.batch_size = 4, .epochs = 1, .verbose = 0, .shuffle = false};
  fit.x = Array::from_vector<int32_t>(tokens, Shape{12, 16});
  fit.y = Array::from_vector<int32_t>(next, Shape{12, 16});
  model->fit(fit);
  return {model->get_weights(), model->train_step_compile_breakdown()};
}

TEST(ScopeFunctionsFit, TransformerBlocksCompiledOnceTrainToTheSameWeights) {
  const Trained shared = train_lm(true);
  const Trained flat = train_lm(false);
  ASSERT_EQ(shared.weights.size(), flat.weights.size());
  for (size_t i = 0; i < shared.weights.size(); ++i) {
    ASSERT_EQ(shared.weights[i].nbytes(), flat.weights[i].nbytes());
    EXPECT_EQ(0, std::memcmp(shared.weights[i].raw_data(), flat.weights[i].raw_data(), shared.weights[i].nbytes()))
        << "weight " << i;
  }
  // The blocks' forward passes, backward passes and Adam updates (the trainer names each
  // variable's update after the layer owning it): one function each.
  EXPECT_EQ(shared.compile.backend.scope_functions, 3);
  EXPECT_EQ(flat.compile.backend.scope_functions, 0);
  EXPECT_LT(shared.compile.backend.kernel_functions, flat.compile.backend.kernel_functions);
}

TEST(OptimizerScopes, UpdatesAreNamedByTheLayoutOrPerVariable) {
  const optimizers::Adam adam;
  const std::vector<ir::TensorType> types = {{{3}, DType::kF32}, {{2, 2}, DType::kF32}};
  auto scopes_of = [&](const optimizers::GradientLayout& layout) {
    const ir::Graph g = trace(
        [&](const std::vector<Tensor>& a) {
          const std::vector<Tensor> opt(a.begin() + 4, a.end());
          auto [vars, state] = adam.apply(opt, {a[0], a[1]}, {a[2], a[3]}, layout);
          vars.insert(vars.end(), state.begin(), state.end());
          return vars;
        },
        [&] {
          std::vector<ir::TensorType> t = types;
          t.insert(t.end(), types.begin(), types.end());  // the gradients
          for (const Array& o : adam.build(types)) t.push_back({o.shape(), o.dtype()});
          return t;
        }());
    std::set<std::string> s;
    for (const ir::Node& n : g.nodes()) s.insert(n.scope);
    return s;
  };
  const std::set<std::string> per_variable = scopes_of({});
  EXPECT_TRUE(per_variable.count("adam/variable_0") == 1 && per_variable.count("adam/variable_1") == 1);
  optimizers::GradientLayout named;
  named.scopes = {"model/block_0/dense", ""};
  const std::set<std::string> by_layout = scopes_of(named);
  EXPECT_EQ(by_layout.count("adam/model/block_0/dense"), 1);
  EXPECT_EQ(by_layout.count("adam/variable_1"), 1) << "an empty entry falls back to the index";
}

}  // namespace
}  // namespace ingot
