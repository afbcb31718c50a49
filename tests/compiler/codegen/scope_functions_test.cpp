// Regional compilation (lower::LoweringOptions::share_repeated_scopes; docs/compiler.md, "Repeated
// blocks compiled once"): repeated, identical name scopes become one function called per
// instance, with the results of the flat lowering bit for bit.
#include <gtest/gtest.h>

#include <cstring>

#include "ingot/autodiff/autodiff.h"
#include "ingot/ir/passes.h"
#include "ingot/jit/jit.h"
#include "ingot/lower/lowering.h"
#include "ingot/trace/ops.h"
#include "parity.h"
#include "test_util.h"

namespace ingot {
namespace {

codegen::CpuCompileOptions uncached(bool outline = true) {
  codegen::CpuCompileOptions o;
  o.outline_kernels = outline;
  o.compile_cache_dir = "";
  return o;
}

lower::LoweringOptions scopes(bool share) {
  lower::LoweringOptions o;
  o.share_repeated_scopes = share;
  return o;
}

void expect_bitwise(const std::vector<Array>& a, const std::vector<Array>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << what << " output " << i;
    ASSERT_EQ(a[i].nbytes(), b[i].nbytes());
    EXPECT_EQ(0, std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].nbytes())) << what << " output " << i;
  }
}

/// x (8, 16) through `widths.size()` residual blocks h + tanh(h @ w_i + b_i) * 0.5, each under the
/// name scope "block_<i>" (w_i: widths[i] == 16, or a (16, widths[i]) projection back with w_i^T
/// when not), and a squared-norm loss; returns the loss and its gradients (weights and x).
TraceFn blocks_step(std::vector<int64_t> widths) {
  return [widths](const std::vector<Tensor>& a) {
    const auto n = widths.size();
    auto loss = [n](const std::vector<Tensor>& p) {
      Tensor h = p[2 * n];
      for (size_t i = 0; i < n; ++i) {
        const NameScope s("block_" + std::to_string(i));
        Tensor z = tanh(matmul(h, p[2 * i]) + p[2 * i + 1]);
        if (z.dim(1) != h.dim(1)) z = matmul(z, transpose(p[2 * i], {1, 0}));
        h = h + z * 0.5;
      }
      return std::vector<Tensor>{sum(h * h)};
    };
    std::vector<int64_t> argnums;  // every weight and the input x
    for (size_t i = 0; i <= 2 * n; ++i) argnums.push_back(static_cast<int64_t>(i));
    return value_and_grad(loss, argnums)(a);
  };
}

std::vector<ir::TensorType> blocks_types(const std::vector<int64_t>& widths) {
  std::vector<ir::TensorType> types;
  for (int64_t w : widths) {
    types.push_back({{16, w}, DType::kF32});
    types.push_back({{w}, DType::kF32});
  }
  types.push_back({{8, 16}, DType::kF32});
  return types;
}

std::vector<Array> blocks_args(const std::vector<int64_t>& widths) {
  std::vector<Array> a;
  for (size_t i = 0; i < widths.size(); ++i) {
    a.push_back(testing::random_array(Shape{16, widths[i]}, DType::kF32, 100 + i, -0.3, 0.3));
    a.push_back(testing::random_array(Shape{widths[i]}, DType::kF32, 200 + i, -0.1, 0.1));
  }
  a.push_back(testing::random_array(Shape{8, 16}, DType::kF32, 7));
  return a;
}

ir::Graph blocks_graph(const std::vector<int64_t>& widths) {
  return trace(blocks_step(widths), blocks_types(widths), "blocks");
}

TEST(ScopeFunctions, RepeatedBlocksLowerToOneFunctionEach) {
  const lower::LoweredModule m = lower::lower_graph(blocks_graph({16, 16, 16, 16}), "main", {}, scopes(true));
  // One function for the blocks' forward passes and one for their backward passes, each called
  // four times.
  EXPECT_EQ(m.scope_functions, 2);
  EXPECT_EQ(m.scope_calls, 8);
  // Without x's gradient the first block's backward pass computes less: it differs, and is flat.
  const ir::Graph no_dx = trace(
      [](const std::vector<Tensor>& a) {
        std::vector<Tensor> outs = blocks_step({16, 16, 16, 16})(a);
        outs.pop_back();  // x's gradient
        return outs;
      },
      blocks_types({16, 16, 16, 16}));
  EXPECT_EQ(lower::lower_graph(no_dx, "main", {}, scopes(true)).scope_calls, 7);
  EXPECT_NE(m.text.find("func.func private @ingot_scope_0("), std::string::npos);
  EXPECT_NE(m.text.find("func.func private @ingot_scope_1("), std::string::npos);
  EXPECT_EQ(m.text.find("@ingot_scope_2"), std::string::npos);
  const lower::LoweredModule flat = lower::lower_graph(blocks_graph({16, 16, 16, 16}), "main", {}, scopes(false));
  EXPECT_EQ(flat.scope_functions, 0);
  EXPECT_EQ(flat.text.find("ingot_scope"), std::string::npos);
}

TEST(ScopeFunctions, BlocksThatDifferStayFlat) {
  // Block 1 has another width: blocks 0 and 2 are still alike.
  const lower::LoweredModule m = lower::lower_graph(blocks_graph({16, 24, 16}), "main", {}, scopes(true));
  EXPECT_EQ(m.scope_functions, 2);
  EXPECT_EQ(m.scope_calls, 4);
  const lower::LoweredModule none = lower::lower_graph(blocks_graph({16, 24}), "main", {}, scopes(true));
  EXPECT_EQ(none.scope_functions, 0);
  EXPECT_EQ(none.text, lower::lower_graph(blocks_graph({16, 24}), "main", {}, scopes(false)).text)
      << "nothing repeated: the flat lowering, unchanged";
}

TEST(ScopeFunctions, ResultsAreBitwiseThoseOfTheFlatLowering) {
  for (const std::vector<int64_t>& widths : {std::vector<int64_t>{16, 16, 16}, std::vector<int64_t>{16, 24, 16, 24}}) {
    const ir::Graph graph = blocks_graph(widths);
    const std::vector<Array> args = blocks_args(widths);
    const auto shared = compile_graph(graph, uncached(), {}, scopes(true));
    const auto flat = compile_graph(graph, uncached(), {}, scopes(false));
    EXPECT_GT(shared->compile_info().scope_functions, 0);
    EXPECT_EQ(flat->compile_info().scope_functions, 0);
    const std::vector<Array> got = shared->run(args);
    expect_bitwise(got, flat->run(args), "scope functions vs flat");
    expect_bitwise(got, compile_graph(graph, uncached(false), {}, scopes(true))->run(args),
                   "scope functions, not outlined");
    const std::vector<Array> want = interp::interpret(graph, args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) testing::expect_values(got[i], want[i].to_doubles(), 1e-4);
  }
}

TEST(ScopeFunctions, KernelCountIsPerStepAndKernelsCompileOnce) {
  auto compiled = [](int blocks) {
    return compile_graph(blocks_graph(std::vector<int64_t>(static_cast<size_t>(blocks), 16)), uncached(), {},
                         scopes(true));
  };
  const auto three = compiled(3), six = compiled(6), nine = compiled(9);
  // Each call counts its function's kernels again: three more blocks, the same kernels more.
  EXPECT_GT(six->kernel_count(), three->kernel_count());
  EXPECT_EQ(nine->kernel_count() - six->kernel_count(), six->kernel_count() - three->kernel_count());
  // ... and the same functions: the blocks' kernels compile once whatever the depth.
  EXPECT_EQ(three->compile_info().scope_functions, 2);
  EXPECT_EQ(nine->compile_info().scope_functions, 2);
  EXPECT_EQ(nine->compile_info().kernel_functions, three->compile_info().kernel_functions);
}

TEST(ScopeFunctions, ConstantsMergedAcrossBlocksAreRecomputedInEach) {
  // After CSE the blocks' constants (the 0.5, the gradient seeds) are one node, in the first block
  // that made it; the blocks are still alike, each function computing its constants itself.
  const ir::Graph graph = ir::eliminate_common_subexpressions(blocks_graph({16, 16, 16}));
  const lower::LoweredModule m = lower::lower_graph(graph, "main", {}, scopes(true));
  EXPECT_EQ(m.scope_functions, 2);
  const std::vector<Array> args = blocks_args({16, 16, 16});
  expect_bitwise(compile_graph(graph, uncached(), {}, scopes(true))->run(args),
                 compile_graph(graph, uncached(), {}, scopes(false))->run(args), "after CSE");
}

TEST(ScopeFunctions, AnInstanceThatCannotBeOneCallIsLoweredFlat) {
  // Each "blk_i" computes a = x_i * 2 and later c = (a + 1) * 3, with the a + 1 outside it: one
  // call cannot compute both a and c.
  const ir::Graph graph = trace(
      [](const std::vector<Tensor>& x) {
        std::vector<Tensor> out;
        for (size_t i = 0; i < 2; ++i) {
          const std::string name = "blk_" + std::to_string(i);
          Tensor a;
          {
            const NameScope s(name);
            a = x[i] * 2.0;
          }
          const Tensor b = a + 1.0;
          const NameScope s(name);
          out.push_back(b * 3.0);
        }
        return out;
      },
      {{{4}, DType::kF32}, {{4}, DType::kF32}});
  const lower::LoweredModule m = lower::lower_graph(graph, "main", {}, scopes(true));
  EXPECT_EQ(m.scope_functions, 0);
  const std::vector<Array> args = {testing::f32({1, 2, 3, 4}), testing::f32({-1, 0, 5, 6})};
  const std::vector<Array> got = compile_graph(graph, uncached(), {}, scopes(true))->run(args);
  testing::expect_values(got.at(0), {9, 15, 21, 27});
  testing::expect_values(got.at(1), {-3, 3, 33, 39});
}

TEST(ScopeFunctions, ADonatedParameterReadLaterIsNotOverwrittenEarly) {
  // "a" updates x in place (x2 = x * y, donated into x) and "b" (y2 = y * x, donated into y) reads
  // x after it: b must see the old x (found by a fresh reviewer: the in-place write came first).
  const ir::Graph graph = trace(
      [](const std::vector<Tensor>& p) {
        Tensor x2, y2;
        {
          const NameScope s("a");
          x2 = p[0] * p[1];
        }
        {
          const NameScope s("b");
          y2 = p[1] * p[0];
        }
        return std::vector<Tensor>{x2, y2};
      },
      {{{4}, DType::kF32}, {{4}, DType::kF32}});
  EXPECT_EQ(lower::lower_graph(graph, "main", {{0, 0}, {1, 1}}, scopes(true)).scope_functions, 1);
  const auto exe = compile_graph(graph, uncached(), {0, 1}, scopes(true));
  const std::vector<Array> got = exe->run({testing::f32({1, 2, 3, 4}), testing::f32({2, 3, 4, 5})});
  testing::expect_values(got.at(0), {2, 6, 12, 20});
  testing::expect_values(got.at(1), {2, 6, 12, 20});
}

TEST(ScopeFunctions, AnOutputOfConstantsAloneIsLowered) {
  const ir::Graph graph = trace(
      [](const std::vector<Tensor>& p) {
        std::vector<Tensor> out;
        for (size_t i = 0; i < 2; ++i) {
          const NameScope s("blk_" + std::to_string(i));
          out.push_back(p[i] * 2.0);
        }
        out.push_back(full({3}, 1.5, DType::kF32));
        return out;
      },
      {{{2}, DType::kF32}, {{2}, DType::kF32}});
  EXPECT_EQ(lower::lower_graph(graph, "main", {}, scopes(true)).scope_functions, 1);
  const std::vector<Array> got =
      compile_graph(graph, uncached(), {}, scopes(true))->run({testing::f32({1, 2}), testing::f32({3, 4})});
  testing::expect_values(got.at(0), {2, 4});
  testing::expect_values(got.at(1), {6, 8});
  testing::expect_values(got.at(2), {1.5, 1.5, 1.5});
}

}  // namespace
}  // namespace ingot
