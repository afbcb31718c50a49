// NameScope (ir::Node::scope): the names a trace records each node under, through nesting, calls,
// autodiff's backward pass and the graph passes.
#include <gtest/gtest.h>

#include "ingot/autodiff/autodiff.h"
#include "ingot/ir/passes.h"
#include "ingot/trace/call.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

std::vector<std::string> scopes(const ir::Graph& g) {
  std::vector<std::string> s;
  for (const ir::Node& n : g.nodes()) s.push_back(n.scope);
  return s;
}

TEST(NameScope, NamesTheNodesRecordedWhileAlive) {
  const ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        Tensor y = a[0] * a[0];  // outside any scope
        {
          const NameScope outer("block");
          y = y + a[0];
          {
            const NameScope inner("mlp");
            y = tanh(y);
          }
          y = negate(y);
        }
        return std::vector<Tensor>{exp(y)};
      },
      {{{3}, DType::kF32}});
  EXPECT_EQ(scopes(g), (std::vector<std::string>{"", "block", "block/mlp", "block", ""}));
}

TEST(NameScope, DoesNothingOutsideATraceAndRejectsAnEmptyName) {
  {
    const NameScope s("unused");
  }  // no trace: nothing to name, no error
  expect_error([] { const NameScope s(""); }, ErrorCode::kInvalidArgument, {"NameScope", "empty"});
}

TEST(NameScope, CalledGraphsKeepTheirScopesInsideTheCallers) {
  const ir::Graph inner = trace(
      [](const std::vector<Tensor>& a) {
        const NameScope s("f");
        return std::vector<Tensor>{a[0] + 1.0};
      },
      {{{2}, DType::kF32}}, "inner");
  const ir::Graph outer = trace(
      [&](const std::vector<Tensor>& a) {
        const NameScope s("caller");
        return call(inner, a);
      },
      {{{2}, DType::kF32}}, "outer");
  // The scalar constant and the add of `inner`, both under "f", now under "caller/f".
  ASSERT_GE(outer.num_nodes(), 1);
  for (const ir::Node& n : outer.nodes()) EXPECT_EQ(n.scope, "caller/f") << n.op;
}

TEST(NameScope, TheBackwardPassOfANodeIsNamedAfterIt) {
  const ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        auto loss = [](const std::vector<Tensor>& p) {
          const NameScope s("layer");
          return std::vector<Tensor>{sum(tanh(p[0]))};
        };
        return value_and_grad(loss, {0})(a);
      },
      {{{4}, DType::kF32}});
  int64_t forward = 0, backward = 0;
  for (const ir::Node& n : g.nodes()) {
    forward += n.scope == "layer" ? 1 : 0;
    backward += n.scope.rfind("transpose/layer", 0) == 0 ? 1 : 0;
  }
  EXPECT_GT(forward, 0);
  EXPECT_GT(backward, 0) << "the tanh and reduce nodes' VJPs are under transpose/layer";
}

TEST(NameScope, PassesKeepTheScopes) {
  const ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        const NameScope s("kept");
        [[maybe_unused]] const Tensor dead = exp(a[0]);
        return std::vector<Tensor>{tanh(a[0]) + tanh(a[0])};
      },
      {{{2}, DType::kF32}});
  const ir::Graph cse = ir::eliminate_common_subexpressions(g);
  ASSERT_LT(cse.num_nodes(), g.num_nodes());
  for (const ir::Node& n : cse.nodes()) EXPECT_EQ(n.scope, "kept") << n.op;
  // Scopes are metadata: the graphs compare equal whatever they are.
  ir::Graph unnamed = cse;
  for (ir::NodeId n = 0; n < unnamed.num_nodes(); ++n) unnamed.set_scope(n, "");
  EXPECT_TRUE(unnamed == cse);
  expect_error([&] { unnamed.set_scope(unnamed.num_nodes(), "x"); }, ErrorCode::kNotFound, {"does not exist"});
}

}  // namespace
}  // namespace ingot
