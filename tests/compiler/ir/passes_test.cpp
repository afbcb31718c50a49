// The dce and cse passes.
#include "ingot/ir/passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ingot/ir/text.h"
#include "ir_test_ops.h"
#include "test_util.h"

namespace ingot::ir {
namespace {

using ingot::testing::make_test_registry;

/// Parses `text` with `reg`, so tests can state graphs compactly.
Graph parse(const char* text, const OpRegistry& reg) { return parse_graph(text, &reg); }

TEST(DeadCodeTest, DropsNodesThatReachNoOutputAndRenumbers) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%0: f32[2], %1: f32[2], %2: f32[2]) -> (f32[2]) {
    %3 = negate(%0) : f32[2]
    %4 = add(%0, %1) : f32[2]
    %5 = negate(%3) : f32[2]
    %6 = negate(%4) : f32[2]
    %7 = add(%6, %0) : f32[2]
    return %7
  })",
                  *reg);
  Graph out = eliminate_dead_code(g);
  EXPECT_EQ(print_graph(out),
            "func @f(%0: f32[2], %1: f32[2], %2: f32[2]) -> (f32[2]) {\n"
            "  %3 = add(%0, %1) : f32[2]\n"
            "  %4 = negate(%3) : f32[2]\n"
            "  %5 = add(%4, %0) : f32[2]\n"
            "  return %5\n"
            "}\n");
  EXPECT_EQ(out.num_values(), 6);  // dense ids, unused parameter %2 kept
  EXPECT_EQ(out.name(), "f");
  EXPECT_EQ(&out.registry(), reg.get());
  EXPECT_NO_THROW(out.verify());
  EXPECT_EQ(g.num_nodes(), 5);  // the input is untouched
}

TEST(DeadCodeTest, KeepsAMultiResultNodeIfAnyResultIsUsed) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%s: u64[2]) -> (u32[2]) {
    %a, %b = rng_bit_generator(%s) {dtype = "u32", shape = [2]} : u64[2], u32[2]
    %c, %d = rng_bit_generator(%a) {dtype = "u32", shape = [2]} : u64[2], u32[2]
    %e, %f = rng_bit_generator(%c) {dtype = "u32", shape = [2]} : u64[2], u32[2]
    return %d
  })",
                  *reg);
  EXPECT_EQ(print_graph(eliminate_dead_code(g)),
            "func @f(%0: u64[2]) -> (u32[2]) {\n"
            "  %1, %2 = rng_bit_generator(%0) {dtype = \"u32\", shape = [2]} : u64[2], u32[2]\n"
            "  %3, %4 = rng_bit_generator(%1) {dtype = \"u32\", shape = [2]} : u64[2], u32[2]\n"
            "  return %4\n"
            "}\n");
}

TEST(DeadCodeTest, LeavesALiveGraphEqual) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%0: f32[], %1: f32[]) -> (f32[], f32[], f32[]) {
    %2 = add(%0, %1) : f32[]
    %3 = negate(%2) : f32[]
    return %3, %2, %0
  })",
                  *reg);
  EXPECT_TRUE(eliminate_dead_code(g) == g);
}

TEST(DeadCodeTest, NoOutputsMeansNoNodes) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%0: f32[]) -> () {
    %1 = negate(%0) : f32[]
    %2 = constant() {value = dense<1.0> : f32[]} : f32[]
    return
  })",
                  *reg);
  Graph out = eliminate_dead_code(g);
  EXPECT_EQ(out.num_nodes(), 0);
  EXPECT_EQ(out.parameters(), std::vector<ValueId>{0});
  EXPECT_EQ(print_graph(out), "func @f(%0: f32[]) -> () {\n  return\n}\n");
}

TEST(DeadCodeTest, PutsLateParametersFirst) {
  auto reg = make_test_registry();
  Graph g("late", reg.get());
  ValueId a = g.add_parameter({{}, DType::kF32});
  ValueId n = g.add_node("negate", {a})[0];
  ValueId b = g.add_parameter({{}, DType::kF32});
  g.set_outputs({g.add_node("add", {n, b})[0]});
  Graph out = eliminate_dead_code(g);
  EXPECT_EQ(out.parameters(), (std::vector<ValueId>{0, 1}));
  EXPECT_EQ(out.node(1).inputs, (std::vector<ValueId>{2, 1}));
  EXPECT_TRUE(out == parse_graph(print_graph(g), reg.get()));
}

TEST(CommonSubexpressionTest, MergesIdenticalNodesIntoTheFirst) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%0: f32[2], %1: f32[2]) -> (f32[2], f32[2]) {
    %2 = add(%0, %1) : f32[2]
    %3 = negate(%0) : f32[2]
    %4 = add(%0, %1) : f32[2]
    %5 = negate(%2) : f32[2]
    %6 = negate(%4) : f32[2]     // identical to %5 once %4 is %2
    %7 = add(%5, %6) : f32[2]
    return %7, %4
  })",
                  *reg);
  Graph out = eliminate_common_subexpressions(g);
  EXPECT_EQ(print_graph(out),
            "func @f(%0: f32[2], %1: f32[2]) -> (f32[2], f32[2]) {\n"
            "  %2 = add(%0, %1) : f32[2]\n"
            "  %3 = negate(%2) : f32[2]\n"
            "  %4 = add(%3, %3) : f32[2]\n"
            "  return %4, %2\n"
            "}\n");
  EXPECT_EQ(out.name(), "f");
  EXPECT_EQ(&out.registry(), reg.get());
  EXPECT_NO_THROW(out.verify());
}

TEST(CommonSubexpressionTest, KeepsNodesThatDifferInOperandsOrAttributes) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%0: f32[], %1: f32[]) -> (f32[], f32[], f32[], f32[], f32[], f32[]) {
    %2 = add(%0, %1) : f32[]
    %3 = add(%1, %0) : f32[]                       // operand order matters
    %4 = annotate(%0) {k = 1} : f32[]
    %5 = annotate(%0) {k = 1.0} : f32[]            // int vs float
    %6 = annotate(%0) {k = 1, j = 1} : f32[]       // extra attribute
    %7 = annotate(%0) {k = 2} : f32[]
    return %2, %3, %4, %5, %6, %7
  })",
                  *reg);
  EXPECT_TRUE(eliminate_common_subexpressions(g) == g);
}

TEST(CommonSubexpressionTest, ComparesConstantsBitwise) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f() -> (f32[2], f32[2], f32[2], f32[2], f32[2], f64[2], f32[2]) {
    %0 = constant() {value = dense<[0.0, nan]> : f32[2]} : f32[2]
    %1 = constant() {value = dense<[0.0, nan]> : f32[2]} : f32[2]    // same bits: merged
    %2 = constant() {value = dense<[-0.0, nan]> : f32[2]} : f32[2]   // -0.0 == 0.0 but not bitwise
    %3 = constant() {value = dense<[0.0, -nan]> : f32[2]} : f32[2]   // other NaN bits
    %4 = constant() {value = dense<[0.0, nan]> : f64[2]} : f64[2]    // other dtype
    %5 = constant() {value = dense<0.0> : f32[2]} : f32[2]
    return %0, %1, %2, %3, %0, %4, %5
  })",
                  *reg);
  EXPECT_EQ(print_graph(eliminate_common_subexpressions(g)),
            "func @f() -> (f32[2], f32[2], f32[2], f32[2], f32[2], f64[2], f32[2]) {\n"
            "  %0 = constant() {value = dense<[0.0, nan]> : f32[2]} : f32[2]\n"
            "  %1 = constant() {value = dense<[-0.0, nan]> : f32[2]} : f32[2]\n"
            "  %2 = constant() {value = dense<[0.0, -nan]> : f32[2]} : f32[2]\n"
            "  %3 = constant() {value = dense<[0.0, nan]> : f64[2]} : f64[2]\n"
            "  %4 = constant() {value = dense<[0.0, 0.0]> : f32[2]} : f32[2]\n"
            "  return %0, %0, %1, %2, %0, %3, %4\n"
            "}\n");
}

TEST(CommonSubexpressionTest, MergesMultiResultNodesResultByResult) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%s: u64[2]) -> (u64[2], u32[3], u32[3], u32[4]) {
    %a, %b = rng_bit_generator(%s) {dtype = "u32", shape = [3]} : u64[2], u32[3]
    %c, %d = rng_bit_generator(%s) {dtype = "u32", shape = [3]} : u64[2], u32[3]
    %e, %f = rng_bit_generator(%s) {dtype = "u32", shape = [4]} : u64[2], u32[4]
    return %c, %d, %b, %f
  })",
                  *reg);
  EXPECT_EQ(print_graph(eliminate_common_subexpressions(g)),
            "func @f(%0: u64[2]) -> (u64[2], u32[3], u32[3], u32[4]) {\n"
            "  %1, %2 = rng_bit_generator(%0) {dtype = \"u32\", shape = [3]} : u64[2], u32[3]\n"
            "  %3, %4 = rng_bit_generator(%0) {dtype = \"u32\", shape = [4]} : u64[2], u32[4]\n"
            "  return %1, %2, %2, %4\n"
            "}\n");
}

TEST(CommonSubexpressionTest, AlsoRemovesDeadCode) {
  auto reg = make_test_registry();
  Graph g = parse(R"(func @f(%0: f32[], %1: f32[]) -> (f32[]) {
    %2 = negate(%1) : f32[]
    %3 = negate(%0) : f32[]
    %4 = negate(%0) : f32[]
    %5 = add_n(%3, %4, %3) : f32[]
    return %5
  })",
                  *reg);
  EXPECT_EQ(print_graph(eliminate_common_subexpressions(g)),
            "func @f(%0: f32[], %1: f32[]) -> (f32[]) {\n"
            "  %2 = negate(%0) : f32[]\n"
            "  %3 = add_n(%2, %2, %2) : f32[]\n"
            "  return %3\n"
            "}\n");
}

TEST(CommonSubexpressionTest, WorksOnBuiltinOps) {
  Graph g = parse_graph(R"(func @f(%x: f32[2,3]) -> (f32[2,3], f32[2,3]) {
    %a = constant() {value = dense<1.0> : f32[]} : f32[]
    %b = constant() {value = dense<1.0> : f32[]} : f32[]
    %ba = broadcast_in_dim(%a) {broadcast_dimensions = [], shape = [2, 3]} : f32[2,3]
    %bb = broadcast_in_dim(%b) {broadcast_dimensions = [], shape = [2, 3]} : f32[2,3]
    %unused = exponential(%x) : f32[2,3]
    %p = add(%x, %ba) : f32[2,3]
    %q = add(%x, %bb) : f32[2,3]
    %r = add(%bb, %x) : f32[2,3]
    return %p, %q
  })");
  const Graph out = eliminate_common_subexpressions(g);
  EXPECT_EQ(print_graph(out),
            "func @f(%0: f32[2,3]) -> (f32[2,3], f32[2,3]) {\n"
            "  %1 = constant() {value = dense<1.0> : f32[]} : f32[]\n"
            "  %2 = broadcast_in_dim(%1) {broadcast_dimensions = [], shape = [2, 3]} : f32[2,3]\n"
            "  %3 = add(%0, %2) : f32[2,3]\n"
            "  return %3, %3\n"
            "}\n");
  EXPECT_EQ(&out.registry(), &OpRegistry::builtin());
  EXPECT_EQ(print_graph(eliminate_dead_code(g)),
            "func @f(%0: f32[2,3]) -> (f32[2,3], f32[2,3]) {\n"
            "  %1 = constant() {value = dense<1.0> : f32[]} : f32[]\n"
            "  %2 = constant() {value = dense<1.0> : f32[]} : f32[]\n"
            "  %3 = broadcast_in_dim(%1) {broadcast_dimensions = [], shape = [2, 3]} : f32[2,3]\n"
            "  %4 = broadcast_in_dim(%2) {broadcast_dimensions = [], shape = [2, 3]} : f32[2,3]\n"
            "  %5 = add(%0, %3) : f32[2,3]\n"
            "  %6 = add(%0, %4) : f32[2,3]\n"
            "  return %5, %6\n"
            "}\n");
}

}  // namespace
}  // namespace ingot::ir
