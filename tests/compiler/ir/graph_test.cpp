// Graph basics: building, ids, errors (with the node text), verify() and equality.
#include "ingot/ir/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir_test_ops.h"
#include "test_util.h"

namespace ingot::ir {
namespace {

using ingot::testing::expect_error;
using ingot::testing::make_test_registry;

const TensorType kF23{{2, 3}, DType::kF32};

TEST(GraphTest, BuildsParametersNodesAndOutputs) {
  auto reg = make_test_registry();
  Graph g("f", reg.get());
  EXPECT_EQ(g.name(), "f");
  EXPECT_EQ(&g.registry(), reg.get());
  ValueId a = g.add_parameter(kF23);
  ValueId b = g.add_parameter(kF23);
  std::vector<ValueId> sum = g.add_node("add", {a, b});
  std::vector<ValueId> neg = g.add_node("negate", sum);
  g.set_outputs({neg[0], a});

  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(sum, std::vector<ValueId>{2});
  EXPECT_EQ(neg, std::vector<ValueId>{3});
  EXPECT_EQ(g.parameters(), (std::vector<ValueId>{0, 1}));
  EXPECT_EQ(g.outputs(), (std::vector<ValueId>{3, 0}));
  EXPECT_EQ(g.num_values(), 4);
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(g.node(0).op, "add");
  EXPECT_EQ(g.node(0).inputs, (std::vector<ValueId>{0, 1}));
  EXPECT_EQ(g.node(1).outputs, std::vector<ValueId>{3});
  EXPECT_EQ(g.type(3), kF23);
  EXPECT_EQ(g.value(1).producer, -1);
  EXPECT_EQ(g.value(1).output_index, 1);  // second parameter
  EXPECT_EQ(g.value(3).producer, 1);
  EXPECT_EQ(g.value(3).output_index, 0);
  EXPECT_NO_THROW(g.verify());
}

TEST(GraphTest, MultiResultNodeNumbersEachResult) {
  auto reg = make_test_registry();
  Graph g("rng", reg.get());
  ValueId s = g.add_parameter({{2}, DType::kU64});
  std::vector<ValueId> r =
      g.add_node("rng_bit_generator", {s}, {{"dtype", std::string("u32")}, {"shape", std::vector<int64_t>{4}}});
  ASSERT_EQ(r, (std::vector<ValueId>{1, 2}));
  EXPECT_EQ(g.type(1), (TensorType{{2}, DType::kU64}));
  EXPECT_EQ(g.type(2), (TensorType{{4}, DType::kU32}));
  EXPECT_EQ(g.value(2).producer, 0);
  EXPECT_EQ(g.value(2).output_index, 1);
}

TEST(GraphTest, TensorTypeText) {
  EXPECT_EQ(kF23.to_string(), "f32[2,3]");
  EXPECT_EQ((TensorType{{}, DType::kBF16}).to_string(), "bf16[]");
  EXPECT_EQ((TensorType{{0, 5}, DType::kBool}).to_string(), "bool[0,5]");
  EXPECT_EQ(kF23.rank(), 2);
}

TEST(GraphTest, UnknownOpIsNotFoundAndNamesTheOp) {
  auto reg = make_test_registry();
  Graph g("f", reg.get());
  ValueId a = g.add_parameter(kF23);
  expect_error([&] { g.add_node("frobnicate", {a}); }, ErrorCode::kNotFound,
               {"in %1 = frobnicate(%0: f32[2,3])", "unknown op 'frobnicate'", "ingot ops"});
  EXPECT_EQ(g.num_nodes(), 0);
}

TEST(GraphTest, UnknownValueIdIsNotFound) {
  auto reg = make_test_registry();
  Graph g("f", reg.get());
  ValueId a = g.add_parameter(kF23);
  expect_error([&] { g.add_node("add", {a, 7}); }, ErrorCode::kNotFound,
               {"in %1 = add(%0: f32[2,3], %7)", "value %7 does not exist", "has 1 values"});
  expect_error([&] { g.add_node("negate", {-1}); }, ErrorCode::kNotFound, {"value %-1"});
  expect_error([&] { g.set_outputs({a, 9}); }, ErrorCode::kNotFound, {"set_outputs", "value %9 does not exist"});
  EXPECT_TRUE(g.outputs().empty());
  expect_error([&] { g.value(1); }, ErrorCode::kNotFound, {"value %1 does not exist"});
  expect_error([&] { g.node(0); }, ErrorCode::kNotFound, {"node 0 does not exist", "0 nodes"});
}

TEST(GraphTest, ShapeRuleErrorCarriesTheNodeText) {
  auto reg = make_test_registry();
  Graph g("f", reg.get());
  ValueId a = g.add_parameter(kF23);
  ValueId b = g.add_parameter({{4}, DType::kF32});
  expect_error([&] { g.add_node("add", {a, b}); }, ErrorCode::kShapeMismatch,
               {"in %2 = add(%0: f32[2,3], %1: f32[4]): add: operand shapes differ: (2, 3) vs (4,)",
                "(hint: broadcast explicitly)"});
}

TEST(GraphTest, OperandCountIsChecked) {
  auto reg = make_test_registry();
  Graph g("f", reg.get());
  ValueId a = g.add_parameter(kF23);
  expect_error([&] { g.add_node("add", {a}); }, ErrorCode::kInvalidArgument, {"add takes 2 operands but got 1"});
  expect_error([&] { g.add_node("add_n", {}); }, ErrorCode::kInvalidArgument,
               {"add_n takes at least 1 operands but got 0"});
  expect_error([&] { g.add_node("constant", {a}); }, ErrorCode::kInvalidArgument,
               {"constant takes 0 operands but got 1"});
  EXPECT_EQ(g.add_node("add_n", {a, a, a}), std::vector<ValueId>{1});
}

TEST(GraphTest, FailedAddNodeLeavesTheGraphUnchanged) {
  auto reg = make_test_registry();
  Graph g("f", reg.get());
  ValueId a = g.add_parameter(kF23);
  ValueId i = g.add_parameter({{2, 3}, DType::kI32});
  g.add_node("negate", {a});
  g.set_outputs({1});
  const Graph before = g;
  EXPECT_THROW(g.add_node("add", {a, i}), Error);   // dtype mismatch
  EXPECT_THROW(g.add_node("constant", {}), Error);  // missing attribute
  EXPECT_THROW(g.add_node("nope", {a}), Error);     // unknown op
  EXPECT_THROW(g.add_node_with_types("negate", {a}, {}, {{{3, 2}, DType::kF32}}), Error);
  EXPECT_THROW(g.add_node_with_types("negate", {a}, {}, {kF23, kF23}), Error);
  EXPECT_TRUE(g == before);
  EXPECT_EQ(g.num_values(), 3);
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.add_node("negate", {a}), std::vector<ValueId>{3});  // the next id is unchanged
}

TEST(GraphTest, DeclaredTypesAreChecked) {
  auto reg = make_test_registry();
  Graph g("f", reg.get());
  ValueId a = g.add_parameter(kF23);
  expect_error([&] { g.add_node_with_types("negate", {a}, {}, {{{3, 2}, DType::kF32}}); }, ErrorCode::kShapeMismatch,
               {"negate: declared result 0 type f32[3,2] but the shape rule infers f32[2,3]"});
  expect_error([&] { g.add_node_with_types("negate", {a}, {}, {{{2, 3}, DType::kF64}}); }, ErrorCode::kDTypeMismatch,
               {"declared result 0 type f64[2,3]"});
  expect_error([&] { g.add_node_with_types("negate", {a}, {}, {kF23, kF23}); }, ErrorCode::kShapeMismatch,
               {"declared 2 result types but the op produces 1"});
  EXPECT_EQ(g.add_node_with_types("negate", {a}, {}, {kF23}), std::vector<ValueId>{1});
}

TEST(GraphTest, NegativeParameterSizeIsRejected) {
  Graph g;
  expect_error([&] { g.add_parameter({{2, -1}, DType::kF32}); }, ErrorCode::kInvalidArgument, {"add_parameter"});
  EXPECT_EQ(g.num_values(), 0);
}

TEST(GraphTest, VerifyRerunsTheShapeRules) {
  bool fail = false;
  auto reg = make_test_registry(&fail);
  Graph g("f", reg.get());
  ValueId a = g.add_parameter(kF23);
  g.set_outputs(g.add_node("flaky", {g.add_node("negate", {a})[0]}));
  EXPECT_NO_THROW(g.verify());
  fail = true;
  expect_error([&] { g.verify(); }, ErrorCode::kInvalidArgument, {"in node 1 (flaky)", "flaky: told to fail"});
}

/// x -> negate -> add(x, .) with `attr` on an annotate node, named `name`.
Graph small_graph(const OpRegistry* reg, const std::string& name, Attribute attr) {
  Graph g(name, reg);
  ValueId x = g.add_parameter(kF23);
  ValueId n = g.add_node("negate", {x})[0];
  ValueId s = g.add_node("add", {x, n})[0];
  g.set_outputs(g.add_node("annotate", {s}, {{"k", std::move(attr)}}));
  return g;
}

TEST(GraphTest, EqualityIsStructural) {
  auto reg = make_test_registry();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(small_graph(reg.get(), "f", int64_t{1}) == small_graph(reg.get(), "f", int64_t{1}));
  EXPECT_TRUE(small_graph(reg.get(), "f", nan) == small_graph(reg.get(), "f", nan));
  EXPECT_FALSE(small_graph(reg.get(), "f", 0.0) == small_graph(reg.get(), "f", -0.0));
  EXPECT_FALSE(small_graph(reg.get(), "f", int64_t{1}) == small_graph(reg.get(), "g", int64_t{1}));
  EXPECT_FALSE(small_graph(reg.get(), "f", int64_t{1}) == small_graph(reg.get(), "f", int64_t{2}));
  EXPECT_FALSE(small_graph(reg.get(), "f", int64_t{1}) == small_graph(reg.get(), "f", 1.0));

  Graph a = small_graph(reg.get(), "f", int64_t{1});
  Graph b = a;
  b.set_outputs({0});
  EXPECT_FALSE(a == b);

  Graph c("f", reg.get());  // same nodes, parameter of another dtype
  ValueId x = c.add_parameter({{2, 3}, DType::kF64});
  ValueId n = c.add_node("negate", {x})[0];
  ValueId s = c.add_node("add", {x, n})[0];
  c.set_outputs(c.add_node("annotate", {s}, {{"k", int64_t{1}}}));
  EXPECT_FALSE(a == c);

  Graph d("f", reg.get());  // operands swapped
  x = d.add_parameter(kF23);
  n = d.add_node("negate", {x})[0];
  s = d.add_node("add", {n, x})[0];
  d.set_outputs(d.add_node("annotate", {s}, {{"k", int64_t{1}}}));
  EXPECT_FALSE(a == d);
}

TEST(GraphTest, EqualityComparesConstantsBitwise) {
  auto reg = make_test_registry();
  auto with_constant = [&](float v) {
    Graph g("c", reg.get());
    g.set_outputs(g.add_node("constant", {}, {{"value", Array::scalar(v, DType::kF32)}}));
    return g;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(with_constant(1.5f) == with_constant(1.5f));
  EXPECT_TRUE(with_constant(nan) == with_constant(nan));
  EXPECT_FALSE(with_constant(0.0f) == with_constant(-0.0f));
  EXPECT_FALSE(with_constant(1.5f) == with_constant(2.5f));
}

}  // namespace
}  // namespace ingot::ir

namespace ingot {
namespace {

TEST(GraphAttributes, UnknownAttributeNamesAreRejected) {
  ir::Graph g("attrs");
  ir::ValueId x = g.add_parameter({{2, 3}, DType::kF32});
  testing::expect_error(
      [&] { g.add_node("transpose", {x}, {{"permutation", std::vector<int64_t>{1, 0}}, {"bogus", int64_t{3}}}); },
      ErrorCode::kInvalidArgument, {"transpose: unknown attribute 'bogus'", "permutation"});
  testing::expect_error([&] { g.add_node("negate", {x}, {{"permutation", std::vector<int64_t>{1, 0}}}); },
                        ErrorCode::kInvalidArgument,
                        {"negate: unknown attribute 'permutation'", "takes no attributes"});
  // A misspelt optional attribute is caught instead of silently defaulting.
  ir::ValueId init = g.add_parameter({{}, DType::kF32});
  testing::expect_error(
      [&] {
        g.add_node("reduce_window", {x, init},
                   {{"window_dimensions", std::vector<int64_t>{1, 2}},
                    {"computation", std::string("add")},
                    {"window_stride", std::vector<int64_t>{1, 2}}});
      },
      ErrorCode::kInvalidArgument, {"unknown attribute 'window_stride'", "window_strides"});
  for (const std::string& name : ir::OpRegistry::builtin().names()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(ir::OpRegistry::builtin().get(name).attribute_names.has_value() || name == "optimization_barrier" ||
                name == "dot_general" || name == "convolution" || name == "gather" || name == "scatter" ||
                name == "rng_bit_generator")
        << "declare the attributes of '" << name << "' (or check them in its shape rule)";
  }
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(OpRegistryTraits, TheCheapToRecomputeOpsAreTheElementwiseOnesAndEveryOpNamesItsAttributes) {
  // The traits live in each op's registry entry (OpTraits), not in lists kept by the passes that
  // read them (autodiff's rematerialisation reads cheap_to_recompute).
  const ir::OpRegistry& r = ir::OpRegistry::builtin();
  std::vector<std::string> cheap, checks_own_attributes;
  for (const std::string& op : r.names()) {
    if (r.get(op).traits.cheap_to_recompute) cheap.push_back(op);
    if (!r.get(op).attribute_names) checks_own_attributes.push_back(op);
  }
  // The ops whose shape rules check their attributes themselves (check_known_attrs).
  EXPECT_EQ(checks_own_attributes, (std::vector<std::string>{"convolution", "dot_general", "gather",
                                                             "optimization_barrier", "rng_bit_generator", "scatter"}));
  const std::vector<std::string> want = {"abs",
                                         "add",
                                         "and",
                                         "atan2",
                                         "broadcast_in_dim",
                                         "ceil",
                                         "clamp",
                                         "compare",
                                         "convert",
                                         "cosine",
                                         "divide",
                                         "erf",
                                         "exponential",
                                         "exponential_minus_one",
                                         "floor",
                                         "is_finite",
                                         "log",
                                         "log_plus_one",
                                         "logistic",
                                         "maximum",
                                         "minimum",
                                         "multiply",
                                         "negate",
                                         "not",
                                         "or",
                                         "power",
                                         "remainder",
                                         "round_nearest_even",
                                         "rsqrt",
                                         "select",
                                         "sign",
                                         "sine",
                                         "sqrt",
                                         "subtract",
                                         "tanh",
                                         "xor"};
  EXPECT_EQ(cheap, want);
}

}  // namespace
}  // namespace ingot
