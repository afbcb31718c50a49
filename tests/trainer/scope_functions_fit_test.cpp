// Regional compilation in fit (lower::LoweringOptions::share_repeated_scopes): the transformer LM
// of examples/tiny_lm.h (the bench LM) trains to the same weights, bit for bit, with its blocks
// (and its same-shaped variables' updates) compiled once as with every one compiled on its own.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

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
  // The blocks' forward and backward passes (one function each) and the Adam updates of each
  // variable shape (7: the blocks' and the rest's vectors, matrices and head tensors).
  EXPECT_EQ(shared.compile.backend.scope_functions, 9);
  EXPECT_EQ(flat.compile.backend.scope_functions, 0);
  EXPECT_LT(shared.compile.backend.kernel_functions, flat.compile.backend.kernel_functions);
}

}  // namespace
}  // namespace ingot
