// Tracing: the op sequences and attributes the Tensor API records, its argument errors, and
// misuse of tensors across traces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ingot/ir/text.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using Ints = std::vector<int64_t>;

ir::TensorType tt(Shape shape, DType dtype = DType::kF32) { return {std::move(shape), dtype}; }

/// Traces a one-result function.
ir::Graph trace1(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                 const std::vector<ir::TensorType>& inputs) {
  return trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{fn(a)}; }, inputs);
}

std::vector<std::string> op_names(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Node& n : g.nodes()) out.push_back(n.op);
  return out;
}

/// The node that produces the graph's first output.
const ir::Node& result_node(const ir::Graph& g) { return g.node(g.value(g.outputs().at(0)).producer); }

const ir::TensorType& result_type(const ir::Graph& g) { return g.type(g.outputs().at(0)); }

/// Runs `fn` inside a throwaway trace over inputs of `types` (for error tests).
void in_trace(const std::vector<ir::TensorType>& types, const std::function<void(const std::vector<Tensor>&)>& fn) {
  trace(
      [&](const std::vector<Tensor>& a) {
        fn(a);
        return std::vector<Tensor>{};
      },
      types);
}

// ---- broadcasting ----------------------------------------------------------------------

TEST(TraceBroadcast, SameShapesEmitOnlyTheOp) {
  ir::Graph g = trace1([](auto& a) { return a[0] + a[1]; }, {tt({2, 3}), tt({2, 3})});
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"add"}));
  EXPECT_EQ(result_node(g).inputs, (std::vector<ir::ValueId>{0, 1}));
}

TEST(TraceBroadcast, TrailingDimsAlignAndSizeOneStretches) {
  ir::Graph g = trace1([](auto& a) { return subtract(a[0], a[1]); }, {tt({3, 1}), tt({4})});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"broadcast_in_dim", "broadcast_in_dim", "subtract"}));
  EXPECT_EQ(g.nodes()[0].attrs.get_ints("shape"), (Ints{3, 4}));
  EXPECT_EQ(g.nodes()[0].attrs.get_ints("broadcast_dimensions"), (Ints{0, 1}));
  EXPECT_EQ(g.nodes()[1].attrs.get_ints("shape"), (Ints{3, 4}));
  EXPECT_EQ(g.nodes()[1].attrs.get_ints("broadcast_dimensions"), (Ints{1}));
  EXPECT_EQ(result_type(g), tt({3, 4}));
}

TEST(TraceBroadcast, ZeroSizedDimBroadcastsAgainstOne) {
  ir::Graph g = trace1([](auto& a) { return a[0] * a[1]; }, {tt({0, 1}), tt({1, 5})});
  EXPECT_EQ(result_type(g), tt({0, 5}));
}

TEST(TraceBroadcast, DoubleOperandIsAScalarConstantOfTheTensorDType) {
  ir::Graph g = trace1([](auto& a) { return 2.0 * a[0]; }, {tt({2}, DType::kI32)});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "broadcast_in_dim", "multiply"}));
  const Array& c = g.nodes()[0].attrs.get_array("value");
  EXPECT_EQ(c.dtype(), DType::kI32);
  EXPECT_EQ(c.shape(), Shape{});
  EXPECT_EQ(c.to_vector<int32_t>(), std::vector<int32_t>{2});
  EXPECT_EQ(g.nodes()[1].attrs.get_ints("broadcast_dimensions"), Ints{});
  // The constant is the left operand.
  EXPECT_EQ(result_node(g).inputs.at(0), g.nodes()[1].outputs.at(0));
}

TEST(TraceBroadcast, ScalarTensorPlusScalarNeedsNoBroadcast) {
  ir::Graph g = trace1([](auto& a) { return a[0] - 1.5; }, {tt({}, DType::kF64)});
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"constant", "subtract"}));
}

TEST(TraceBroadcast, IncompatibleShapesNameFunctionShapesAndDim) {
  expect_error([] { in_trace({tt({2, 3}), tt({4})}, [](auto& a) { add(a[0], a[1]); }); }, ErrorCode::kShapeMismatch,
               {"add", "(2, 3)", "(4,)", "dimension -1", "3", "4"});
  expect_error([] { in_trace({tt({5, 2, 3}), tt({4, 1, 3})}, [](auto& a) { maximum(a[0], a[1]); }); },
               ErrorCode::kShapeMismatch, {"maximum", "(5, 2, 3)", "(4, 1, 3)", "dimension -3"});
  expect_error([] { in_trace({tt({2}), tt({3})}, [](auto& a) { less(a[0], a[1]); }); }, ErrorCode::kShapeMismatch,
               {"less", "(2,)", "(3,)"});
}

TEST(TraceBroadcast, DTypeMismatchAsksForConvert) {
  expect_error([] { in_trace({tt({2}), tt({2}, DType::kI32)}, [](auto& a) { multiply(a[0], a[1]); }); },
               ErrorCode::kDTypeMismatch, {"multiply", "f32[2]", "i32[2]", "ingot::convert"});
}

TEST(TraceBroadcast, CompareCarriesTheDirection) {
  const std::vector<std::pair<Tensor (*)(const Tensor&, const Tensor&), std::string>> cases = {
      {equal, "EQ"}, {not_equal, "NE"}, {less, "LT"}, {less_equal, "LE"}, {greater, "GT"}, {greater_equal, "GE"}};
  for (const auto& [fn, dir] : cases) {
    ir::Graph g = trace1([&](auto& a) { return fn(a[0], a[1]); }, {tt({2}), tt({2})});
    EXPECT_EQ(result_node(g).op, "compare");
    EXPECT_EQ(result_node(g).attrs.get_string("comparison_direction"), dir);
    EXPECT_EQ(result_type(g), tt({2}, DType::kBool));
  }
}

TEST(TraceBroadcast, WhereBroadcastsAllThreeButKeepsAScalarCondition) {
  ir::Graph g = trace1([](auto& a) { return where(a[0], a[1], a[2]); }, {tt({2, 1}, DType::kBool), tt({3}), tt({})});
  EXPECT_EQ(op_names(g),
            (std::vector<std::string>{"broadcast_in_dim", "broadcast_in_dim", "broadcast_in_dim", "select"}));
  EXPECT_EQ(result_type(g), tt({2, 3}));

  ir::Graph s = trace1([](auto& a) { return where(a[0], a[1], a[2]); }, {tt({}, DType::kBool), tt({3}), tt({3})});
  EXPECT_EQ(op_names(s), (std::vector<std::string>{"select"}));
}

TEST(TraceBroadcast, WhereErrors) {
  expect_error([] { in_trace({tt({2}), tt({2}), tt({2})}, [](auto& a) { where(a[0], a[1], a[2]); }); },
               ErrorCode::kDTypeMismatch, {"where", "cond", "f32", "bool"});
  expect_error([] { in_trace({tt({2}, DType::kBool), tt({2}), tt({3})}, [](auto& a) { where(a[0], a[1], a[2]); }); },
               ErrorCode::kShapeMismatch, {"where", "(2,)", "(3,)"});
}

TEST(TraceBroadcast, ClampOperandOrderAndScalarBounds) {
  ir::Graph g = trace1([](auto& a) { return clamp(a[0], -1.0, 1.0); }, {tt({4})});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "constant", "clamp"}));
  EXPECT_EQ(g.nodes()[0].attrs.get_array("value").to_vector<float>(), std::vector<float>{-1});
  // clamp(min, x, max)
  EXPECT_EQ(result_node(g).inputs, (std::vector<ir::ValueId>{g.nodes()[0].outputs[0], 0, g.nodes()[1].outputs[0]}));

  ir::Graph b = trace1([](auto& a) { return clamp(a[0], a[1], a[2]); }, {tt({3}), tt({2, 1}), tt({})});
  EXPECT_EQ(result_type(b), tt({2, 3}));
  EXPECT_EQ(op_names(b), (std::vector<std::string>{"broadcast_in_dim", "broadcast_in_dim", "clamp"}));
}

TEST(TraceElementwise, UnaryOpNames) {
  const std::vector<std::pair<Tensor (*)(const Tensor&), std::string>> cases = {{negate, "negate"},
                                                                                {abs, "abs"},
                                                                                {sign, "sign"},
                                                                                {exp, "exponential"},
                                                                                {log, "log"},
                                                                                {log1p, "log_plus_one"},
                                                                                {expm1, "exponential_minus_one"},
                                                                                {tanh, "tanh"},
                                                                                {sigmoid, "logistic"},
                                                                                {sqrt, "sqrt"},
                                                                                {rsqrt, "rsqrt"},
                                                                                {sin, "sine"},
                                                                                {cos, "cosine"},
                                                                                {floor, "floor"},
                                                                                {ceil, "ceil"},
                                                                                {round, "round_nearest_even"},
                                                                                {erf, "erf"},
                                                                                {isfinite, "is_finite"}};
  for (const auto& [fn, name] : cases) {
    ir::Graph g = trace1([&](auto& a) { return fn(a[0]); }, {tt({2})});
    EXPECT_EQ(op_names(g), std::vector<std::string>{name});
  }
  EXPECT_EQ(op_names(trace1([](auto& a) { return logical_not(a[0]); }, {tt({2}, DType::kBool)})),
            std::vector<std::string>{"not"});
  EXPECT_EQ(op_names(trace1([](auto& a) { return square(a[0]); }, {tt({2})})), std::vector<std::string>{"multiply"});
  EXPECT_EQ(op_names(trace1([](auto& a) { return -a[0]; }, {tt({2})})), std::vector<std::string>{"negate"});
}

TEST(TraceElementwise, BinaryOpNames) {
  const std::vector<std::pair<Tensor (*)(const Tensor&, const Tensor&), std::string>> cases = {
      {remainder, "remainder"}, {pow, "power"},     {minimum, "minimum"},
      {atan2, "atan2"},         {divide, "divide"}, {maximum, "maximum"}};
  for (const auto& [fn, name] : cases) {
    ir::Graph g = trace1([&](auto& a) { return fn(a[0], a[1]); }, {tt({2}), tt({2})});
    EXPECT_EQ(op_names(g), std::vector<std::string>{name});
  }
  const std::vector<std::pair<Tensor (*)(const Tensor&, const Tensor&), std::string>> logic = {
      {logical_and, "and"}, {logical_or, "or"}, {logical_xor, "xor"}};
  for (const auto& [fn, name] : logic) {
    ir::Graph g = trace1([&](auto& a) { return fn(a[0], a[1]); }, {tt({2}, DType::kBool), tt({2}, DType::kBool)});
    EXPECT_EQ(op_names(g), std::vector<std::string>{name});
  }
}

TEST(TraceElementwise, ConvertToTheSameDTypeIsFree) {
  EXPECT_TRUE(op_names(trace1([](auto& a) { return convert(a[0], DType::kF32); }, {tt({2})})).empty());
  ir::Graph g = trace1([](auto& a) { return convert(a[0], DType::kBF16); }, {tt({2})});
  EXPECT_EQ(result_node(g).attrs.get_string("dtype"), "bf16");
  EXPECT_EQ(result_type(g), tt({2}, DType::kBF16));
}

// ---- creation ----------------------------------------------------------------------------

TEST(TraceCreation, CapturedArrayIsAConstantWithTheSameBits) {
  std::vector<float> v = {1.5f, -0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  uint32_t payload = 0x7fc01234u;  // a NaN with a payload must survive bit for bit
  std::memcpy(&v[3], &payload, 4);
  Array a = Array::from_vector<float>(v, {2, 2});
  ir::Graph g = trace1([&](auto&) { return constant(a); }, {});
  ASSERT_EQ(op_names(g), std::vector<std::string>{"constant"});
  const Array& c = result_node(g).attrs.get_array("value");
  EXPECT_TRUE(c.bitwise_equal(a));
  // Copied into the graph: later writes to the captured array do not change it.
  a.data<float>()[0] = 7.0f;
  EXPECT_EQ(c.to_vector<float>()[0], 1.5f);
}

TEST(TraceCreation, InvalidArrayIsAnError) {
  expect_error([] { in_trace({}, [](auto&) { constant(Array()); }); }, ErrorCode::kInvalidArgument,
               {"constant", "invalid"});
}

TEST(TraceCreation, FullIsAScalarBroadcast) {
  ir::Graph g = trace1([](auto&) { return full({2, 3}, 2.5, DType::kF16); }, {});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "broadcast_in_dim"}));
  EXPECT_EQ(g.nodes()[0].attrs.get_array("value").dtype(), DType::kF16);
  EXPECT_EQ(result_type(g), tt({2, 3}, DType::kF16));
  EXPECT_EQ(op_names(trace1([](auto&) { return zeros({}, DType::kI64); }, {})), std::vector<std::string>{"constant"});
  expect_error([] { in_trace({}, [](auto&) { ones({2, -1}, DType::kF32); }); }, ErrorCode::kInvalidArgument,
               {"full", "-1"});
}

TEST(TraceCreation, FullLikeAndIota) {
  ir::Graph g = trace1([](auto& a) { return ones_like(a[0]); }, {tt({3}, DType::kU8)});
  EXPECT_EQ(result_type(g), tt({3}, DType::kU8));
  ir::Graph i = trace1([](auto&) { return iota({2, 3}, -1, DType::kI32); }, {});
  EXPECT_EQ(result_node(i).op, "iota");
  EXPECT_EQ(result_node(i).attrs.get_int("iota_dimension"), 1);
  EXPECT_EQ(result_node(i).attrs.get_string("dtype"), "i32");
  EXPECT_EQ(result_node(i).attrs.get_ints("shape"), (Ints{2, 3}));
  expect_error([] { in_trace({}, [](auto&) { iota({2}, 1, DType::kI32); }); }, ErrorCode::kOutOfRange,
               {"iota", "axis 1", "rank 1"});
}

TEST(TraceCreation, ShapesOfTensorsCanBePassedBack) {
  // Tensor::shape() refers into the graph, which grows as nodes are added; functions that add
  // nodes before their last use of a shape argument must not be hurt by that.
  ir::Graph g = trace1(
      [](auto& a) {
        Tensor z = zeros(a[0].shape(), DType::kF32);
        for (int i = 0; i < 20; ++i) z = z + full(a[0].shape(), 1.0, DType::kF32);
        return z + full_like(a[0], 2.0) + scatter_add_rows(a[0].shape(), a[1], a[2]);
      },
      {tt({5, 3, 2}), tt({4}, DType::kI32), tt({4, 3, 2})});
  EXPECT_EQ(result_type(g), tt({5, 3, 2}));
}

// ---- shapes ------------------------------------------------------------------------------

TEST(TraceShapes, ReshapeInfersMinusOne) {
  ir::Graph g = trace1([](auto& a) { return reshape(a[0], {3, -1}); }, {tt({2, 6})});
  EXPECT_EQ(result_node(g).attrs.get_ints("shape"), (Ints{3, 4}));
  ir::Graph e = trace1([](auto& a) { return reshape(a[0], {-1}); }, {tt({0, 3})});
  EXPECT_EQ(result_type(e), tt({0}));
  // Reshaping to the same shape records nothing.
  EXPECT_TRUE(op_names(trace1([](auto& a) { return reshape(a[0], {2, -1}); }, {tt({2, 6})})).empty());
}

TEST(TraceShapes, ReshapeErrorsNameBothShapes) {
  expect_error([] { in_trace({tt({2, 6})}, [](auto& a) { reshape(a[0], {5, -1}); }); }, ErrorCode::kShapeMismatch,
               {"reshape", "(2, 6)", "(5, -1)", "divisible"});
  expect_error([] { in_trace({tt({2, 6})}, [](auto& a) { reshape(a[0], {-1, -1}); }); }, ErrorCode::kInvalidArgument,
               {"reshape", "(2, 6)", "(-1, -1)", "more than one"});
  expect_error([] { in_trace({tt({2, 6})}, [](auto& a) { reshape(a[0], {5, 2}); }); }, ErrorCode::kShapeMismatch,
               {"reshape", "(2, 6)", "(5, 2)", "12", "10"});
  expect_error([] { in_trace({tt({0, 6})}, [](auto& a) { reshape(a[0], {0, -1}); }); }, ErrorCode::kInvalidArgument,
               {"reshape", "(0, 6)", "(0, -1)", "ambiguous"});
  expect_error([] { in_trace({tt({4})}, [](auto& a) { reshape(a[0], {-2, -2}); }); }, ErrorCode::kInvalidArgument,
               {"reshape", "-2"});
}

TEST(TraceShapes, BroadcastTo) {
  ir::Graph g = trace1([](auto& a) { return broadcast_to(a[0], {4, 2, 3}); }, {tt({2, 1})});
  EXPECT_EQ(result_node(g).attrs.get_ints("broadcast_dimensions"), (Ints{1, 2}));
  EXPECT_EQ(result_type(g), tt({4, 2, 3}));
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { broadcast_to(a[0], {2, 4}); }); }, ErrorCode::kShapeMismatch,
               {"broadcast_to", "(2, 3)", "(2, 4)"});
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { broadcast_to(a[0], {3}); }); }, ErrorCode::kShapeMismatch,
               {"broadcast_to", "(2, 3)", "(3,)"});
}

TEST(TraceShapes, TransposeDefaultsToReversedDims) {
  ir::Graph g = trace1([](auto& a) { return transpose(a[0]); }, {tt({2, 3, 4})});
  EXPECT_EQ(result_node(g).attrs.get_ints("permutation"), (Ints{2, 1, 0}));
  EXPECT_EQ(result_type(g), tt({4, 3, 2}));
}

TEST(TraceShapes, SliceAxisAndPad) {
  ir::Graph g = trace1([](auto& a) { return slice_axis(a[0], -1, 1, 3); }, {tt({2, 4})});
  const ir::Node& n = result_node(g);
  EXPECT_EQ(n.attrs.get_ints("start_indices"), (Ints{0, 1}));
  EXPECT_EQ(n.attrs.get_ints("limit_indices"), (Ints{2, 3}));
  EXPECT_EQ(n.attrs.get_ints("strides"), (Ints{1, 1}));
  ir::Graph p = trace1([](auto& a) { return pad(a[0], -1.0, {1, 0}, {0, 2}); }, {tt({2, 4})});
  EXPECT_EQ(op_names(p), (std::vector<std::string>{"constant", "pad"}));
  EXPECT_EQ(result_node(p).attrs.get_ints("interior_padding"), (Ints{0, 0}));
  EXPECT_EQ(result_type(p), tt({3, 6}));
}

TEST(TraceShapes, ConcatenateNormalisesAxisAndRejectsEmpty) {
  ir::Graph g = trace1([](auto& a) { return concatenate({a[0], a[1]}, -1); }, {tt({2, 1}), tt({2, 3})});
  EXPECT_EQ(result_node(g).attrs.get_int("dimension"), 1);
  EXPECT_EQ(result_type(g), tt({2, 4}));
  expect_error([] { in_trace({}, [](auto&) { concatenate({}, 0); }); }, ErrorCode::kInvalidArgument,
               {"concatenate", "empty"});
  expect_error([] { in_trace({tt({2})}, [](auto& a) { concatenate({a[0], a[0]}, 1); }); }, ErrorCode::kOutOfRange,
               {"concatenate", "axis 1", "rank 1"});
}

TEST(TraceShapes, ExpandSqueezeFlattenReverse) {
  EXPECT_EQ(result_type(trace1([](auto& a) { return expand_dims(a[0], -1); }, {tt({2, 3})})), tt({2, 3, 1}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return expand_dims(a[0], 0); }, {tt({2, 3})})), tt({1, 2, 3}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return squeeze(a[0]); }, {tt({1, 2, 1, 3})})), tt({2, 3}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return squeeze(a[0], {-2}); }, {tt({1, 2, 1, 3})})), tt({1, 2, 3}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return flatten(a[0]); }, {tt({2, 3, 4})})), tt({24}));
  ir::Graph r = trace1([](auto& a) { return reverse(a[0], {-1, 0}); }, {tt({2, 3})});
  EXPECT_EQ(result_node(r).attrs.get_ints("dimensions"), (Ints{0, 1}));
  expect_error([] { in_trace({tt({1, 2})}, [](auto& a) { squeeze(a[0], {1}); }); }, ErrorCode::kInvalidArgument,
               {"squeeze", "axis 1", "(1, 2)", "size 2"});
  expect_error([] { in_trace({tt({1, 2})}, [](auto& a) { expand_dims(a[0], 3); }); }, ErrorCode::kOutOfRange,
               {"expand_dims", "axis 3", "rank 3"});
}

// ---- reductions ----------------------------------------------------------------------------

TEST(TraceReduce, SumIsReduceAddWithZeroInit) {
  ir::Graph g = trace1([](auto& a) { return sum(a[0]); }, {tt({2, 3})});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "reduce"}));
  EXPECT_EQ(g.nodes()[0].attrs.get_array("value").to_vector<float>(), std::vector<float>{0});
  EXPECT_EQ(result_node(g).attrs.get_ints("dimensions"), (Ints{0, 1}));
  EXPECT_EQ(result_node(g).attrs.get_string("computation"), "add");
  EXPECT_EQ(result_type(g), tt({}));
}

TEST(TraceReduce, KeepdimsReshapesAndAxesAreSorted) {
  ir::Graph g = trace1([](auto& a) { return sum(a[0], {-1, 0}, true); }, {tt({2, 3, 4})});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "reduce", "reshape"}));
  EXPECT_EQ(g.nodes()[1].attrs.get_ints("dimensions"), (Ints{0, 2}));
  EXPECT_EQ(result_type(g), tt({1, 3, 1}));
}

TEST(TraceReduce, InitValues) {
  const auto init_of = [](Tensor (*fn)(const Tensor&, const Ints&, bool), DType d) {
    ir::Graph g = trace1([&](auto& a) { return fn(a[0], {0}, false); }, {tt({3}, d)});
    EXPECT_EQ(result_node(g).op, "reduce");
    return std::make_pair(g.nodes()[0].attrs.get_array("value").to_doubles().at(0),
                          result_node(g).attrs.get_string("computation"));
  };
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(init_of(max, DType::kF32), std::make_pair(-inf, std::string("max")));
  EXPECT_EQ(init_of(min, DType::kBF16), std::make_pair(inf, std::string("min")));
  EXPECT_EQ(init_of(max, DType::kI32), std::make_pair(-2147483648.0, std::string("max")));
  EXPECT_EQ(init_of(min, DType::kI8), std::make_pair(127.0, std::string("min")));
  EXPECT_EQ(init_of(max, DType::kU8), std::make_pair(0.0, std::string("max")));
  EXPECT_EQ(init_of(prod, DType::kF64), std::make_pair(1.0, std::string("mul")));
  EXPECT_EQ(init_of(all, DType::kBool), std::make_pair(1.0, std::string("and")));
  EXPECT_EQ(init_of(any, DType::kBool), std::make_pair(0.0, std::string("or")));
  // u64/i64 extremes are exact (not rounded through double).
  ir::Graph g = trace1([](auto& a) { return min(a[0]); }, {tt({3}, DType::kU64)});
  EXPECT_EQ(g.nodes()[0].attrs.get_array("value").to_vector<uint64_t>(),
            std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()});
  ir::Graph h = trace1([](auto& a) { return min(a[0]); }, {tt({3}, DType::kI64)});
  EXPECT_EQ(h.nodes()[0].attrs.get_array("value").to_vector<int64_t>(),
            std::vector<int64_t>{std::numeric_limits<int64_t>::max()});
}

TEST(TraceReduce, ScalarReductionIsTheOperand) {
  ir::Graph g = trace1([](auto& a) { return sum(a[0]); }, {tt({})});
  EXPECT_TRUE(op_names(g).empty());
  EXPECT_EQ(g.outputs().at(0), g.parameters().at(0));
}

TEST(TraceReduce, Errors) {
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { sum(a[0], {2}); }); }, ErrorCode::kOutOfRange,
               {"sum", "axis 2", "rank 2"});
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { max(a[0], {-3}); }); }, ErrorCode::kOutOfRange,
               {"max", "axis -3", "rank 2"});
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { sum(a[0], {1, -1}); }); }, ErrorCode::kInvalidArgument,
               {"sum", "twice"});
  expect_error([] { in_trace({tt({2})}, [](auto& a) { all(a[0]); }); }, ErrorCode::kDTypeMismatch,
               {"all", "f32", "bool"});
  expect_error([] { in_trace({tt({2}, DType::kI32)}, [](auto& a) { any(a[0]); }); }, ErrorCode::kDTypeMismatch,
               {"any", "i32", "bool"});
  expect_error([] { in_trace({tt({2}, DType::kI32)}, [](auto& a) { mean(a[0]); }); }, ErrorCode::kDTypeMismatch,
               {"mean", "i32", "floating", "convert"});
  expect_error([] { in_trace({tt({2}, DType::kI32)}, [](auto& a) { variance(a[0]); }); }, ErrorCode::kDTypeMismatch,
               {"variance", "i32"});
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { softmax(a[0], 2); }); }, ErrorCode::kOutOfRange,
               {"softmax", "axis 2", "rank 2"});
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { argmax(a[0], -3); }); }, ErrorCode::kOutOfRange,
               {"argmax", "axis -3", "rank 2"});
  expect_error([] { in_trace({tt({2, 3})}, [](auto& a) { argmin(a[0], 0, DType::kU8); }); },
               ErrorCode::kInvalidArgument, {"argmin", "u8"});
}

TEST(TraceReduce, MeanDividesByTheCount) {
  ir::Graph g = trace1([](auto& a) { return mean(a[0], {0, 2}); }, {tt({2, 3, 5})});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "reduce", "constant", "broadcast_in_dim", "divide"}));
  EXPECT_EQ(g.nodes()[2].attrs.get_array("value").to_vector<float>(), std::vector<float>{10});
}

TEST(TraceReduce, ArgmaxAttributes) {
  ir::Graph g = trace1([](auto& a) { return argmax(a[0], -1, DType::kI64); }, {tt({2, 3})});
  EXPECT_EQ(result_node(g).op, "argmax");
  EXPECT_EQ(result_node(g).attrs.get_int("dimension"), 1);
  EXPECT_EQ(result_node(g).attrs.get_string("index_dtype"), "i64");
  EXPECT_EQ(result_type(g), tt({2}, DType::kI64));
}

// ---- linear algebra ----------------------------------------------------------------------

/// The dot_general node of `g` (there is exactly one).
const ir::Node& dot_node(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes()) {
    if (n.op == "dot_general") return n;
  }
  throw std::runtime_error("no dot_general");
}

ir::Graph trace_matmul(Shape a, Shape b) {
  return trace1([](auto& x) { return matmul(x[0], x[1]); }, {tt(std::move(a)), tt(std::move(b))});
}

TEST(TraceMatmul, TwoDimensional) {
  ir::Graph g = trace_matmul({2, 3}, {3, 4});
  EXPECT_EQ(op_names(g), std::vector<std::string>{"dot_general"});
  EXPECT_EQ(dot_node(g).attrs.get_ints("lhs_contracting_dimensions"), Ints{1});
  EXPECT_EQ(dot_node(g).attrs.get_ints("rhs_contracting_dimensions"), Ints{0});
  EXPECT_EQ(dot_node(g).attrs.get_ints("lhs_batching_dimensions"), Ints{});
  EXPECT_EQ(result_type(g), tt({2, 4}));
}

TEST(TraceMatmul, OneDimensionalPromotion) {
  EXPECT_EQ(result_type(trace_matmul({3}, {3})), tt({}));
  EXPECT_EQ(result_type(trace_matmul({3}, {3, 4})), tt({4}));
  EXPECT_EQ(result_type(trace_matmul({2, 3}, {3})), tt({2}));
  EXPECT_EQ(result_type(trace_matmul({5, 2, 3}, {3})), tt({5, 2}));
  EXPECT_EQ(result_type(trace_matmul({3}, {5, 3, 4})), tt({5, 4}));
  EXPECT_EQ(op_names(trace_matmul({3}, {3, 4})), (std::vector<std::string>{"reshape", "dot_general", "reshape"}));
}

TEST(TraceMatmul, RightMatrixContractsWithoutBroadcasting) {
  ir::Graph g = trace_matmul({5, 2, 3}, {3, 4});
  EXPECT_EQ(op_names(g), std::vector<std::string>{"dot_general"});
  EXPECT_EQ(dot_node(g).attrs.get_ints("lhs_contracting_dimensions"), Ints{2});
  EXPECT_EQ(result_type(g), tt({5, 2, 4}));
}

TEST(TraceMatmul, BatchDimsBroadcast) {
  ir::Graph g = trace_matmul({2, 1, 2, 3}, {4, 3, 5});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"broadcast_in_dim", "broadcast_in_dim", "dot_general"}));
  EXPECT_EQ(g.nodes()[0].attrs.get_ints("shape"), (Ints{2, 4, 2, 3}));
  EXPECT_EQ(g.nodes()[1].attrs.get_ints("shape"), (Ints{2, 4, 3, 5}));
  EXPECT_EQ(dot_node(g).attrs.get_ints("lhs_batching_dimensions"), (Ints{0, 1}));
  EXPECT_EQ(dot_node(g).attrs.get_ints("rhs_batching_dimensions"), (Ints{0, 1}));
  EXPECT_EQ(dot_node(g).attrs.get_ints("lhs_contracting_dimensions"), Ints{3});
  EXPECT_EQ(dot_node(g).attrs.get_ints("rhs_contracting_dimensions"), Ints{2});
  EXPECT_EQ(result_type(g), tt({2, 4, 2, 5}));
  // Equal batch shapes need no broadcast.
  EXPECT_EQ(op_names(trace_matmul({4, 2, 3}, {4, 3, 5})), std::vector<std::string>{"dot_general"});
}

TEST(TraceMatmul, Errors) {
  expect_error([] { trace_matmul({2, 3}, {4, 5}); }, ErrorCode::kShapeMismatch,
               {"matmul", "(2, 3)", "(4, 5)", "3 vs 4"});
  expect_error([] { trace_matmul({3}, {2}); }, ErrorCode::kShapeMismatch, {"matmul", "(3,)", "(2,)"});
  expect_error([] { trace_matmul({2, 2, 3}, {3, 3, 4}); }, ErrorCode::kShapeMismatch,
               {"matmul", "(2, 2, 3)", "(3, 3, 4)", "dimension -1"});
  expect_error([] { trace_matmul({}, {3}); }, ErrorCode::kInvalidArgument, {"matmul", "rank"});
  expect_error([] { trace1([](auto& a) { return matmul(a[0], a[1]); }, {tt({2, 3}), tt({3, 2}, DType::kF64)}); },
               ErrorCode::kDTypeMismatch, {"matmul", "f32", "f64"});
}

TEST(TraceMatmul, DotGeneralPassesDimensions) {
  ir::Graph g =
      trace1([](auto& a) { return dot_general(a[0], a[1], {{0}, {0}, {2}, {1}}); }, {tt({4, 2, 3}), tt({4, 3, 5})});
  EXPECT_EQ(result_type(g), tt({4, 2, 5}));
}

// ---- conv2d and pooling ------------------------------------------------------------------

ir::Graph trace_conv(Shape x, Shape k, const Conv2DOptions& o) {
  return trace1([&](auto& a) { return conv2d(a[0], a[1], o); }, {tt(std::move(x)), tt(std::move(k))});
}

TEST(TraceConv, DimensionNumbersAreNhwcHwioNhwc) {
  ir::Graph g = trace_conv({2, 5, 5, 3}, {3, 3, 3, 8}, {});
  const ir::Attributes& at = result_node(g).attrs;
  EXPECT_EQ(result_node(g).op, "convolution");
  EXPECT_EQ(at.get_int("input_batch_dimension"), 0);
  EXPECT_EQ(at.get_int("input_feature_dimension"), 3);
  EXPECT_EQ(at.get_ints("input_spatial_dimensions"), (Ints{1, 2}));
  EXPECT_EQ(at.get_int("kernel_input_feature_dimension"), 2);
  EXPECT_EQ(at.get_int("kernel_output_feature_dimension"), 3);
  EXPECT_EQ(at.get_ints("kernel_spatial_dimensions"), (Ints{0, 1}));
  EXPECT_EQ(at.get_int("output_batch_dimension"), 0);
  EXPECT_EQ(at.get_int("output_feature_dimension"), 3);
  EXPECT_EQ(at.get_ints("output_spatial_dimensions"), (Ints{1, 2}));
  EXPECT_EQ(at.get_ints("padding"), (Ints{0, 0, 0, 0}));
  EXPECT_EQ(at.get_ints("lhs_dilation"), (Ints{1, 1}));
  EXPECT_EQ(at.get_int("feature_group_count"), 1);
  EXPECT_EQ(at.get_int("batch_group_count"), 1);
  EXPECT_EQ(result_type(g), tt({2, 3, 3, 8}));
}

TEST(TraceConv, SamePaddingAsTensorFlow) {
  // h: in 5, k 3, stride 2 -> out 3, total (3-1)*2+3-5 = 2 -> (1, 1);
  // w: in 6, k 3, stride 2 -> out 3, total (3-1)*2+3-6 = 1 -> (0, 1).
  Conv2DOptions o;
  o.strides = {2, 2};
  o.padding = "same";
  ir::Graph g = trace_conv({1, 5, 6, 1}, {3, 3, 1, 2}, o);
  EXPECT_EQ(result_node(g).attrs.get_ints("padding"), (Ints{1, 1, 0, 1}));
  EXPECT_EQ(result_type(g), tt({1, 3, 3, 2}));
  // Dilation 2 makes a 3-tap kernel 5 wide: stride 1 -> total 4 -> (2, 2).
  Conv2DOptions d;
  d.padding = "same";
  d.dilation = {2, 1};
  ir::Graph h = trace_conv({1, 5, 5, 1}, {3, 2, 1, 1}, d);
  EXPECT_EQ(result_node(h).attrs.get_ints("padding"), (Ints{2, 2, 0, 1}));
  EXPECT_EQ(result_node(h).attrs.get_ints("rhs_dilation"), (Ints{2, 1}));
  EXPECT_EQ(result_type(h), tt({1, 5, 5, 1}));
  // Stride larger than the kernel needs no padding: in 4, k 1, stride 2 -> total 0.
  Conv2DOptions s;
  s.padding = "same";
  s.strides = {2, 2};
  EXPECT_EQ(result_node(trace_conv({1, 4, 4, 1}, {1, 1, 1, 1}, s)).attrs.get_ints("padding"), (Ints{0, 0, 0, 0}));
}

TEST(TraceConv, ExplicitPaddingAndGroups) {
  Conv2DOptions o;
  o.explicit_padding = {1, 0, 2, 3};
  o.feature_group_count = 2;
  ir::Graph g = trace_conv({1, 4, 4, 4}, {3, 3, 2, 6}, o);
  EXPECT_EQ(result_node(g).attrs.get_ints("padding"), (Ints{1, 0, 2, 3}));
  EXPECT_EQ(result_node(g).attrs.get_int("feature_group_count"), 2);
  EXPECT_EQ(result_type(g), tt({1, 3, 7, 6}));
}

TEST(TraceConv, Errors) {
  Conv2DOptions bad;
  bad.padding = "full";
  expect_error([&] { trace_conv({1, 4, 4, 1}, {3, 3, 1, 1}, bad); }, ErrorCode::kInvalidArgument,
               {"conv2d", "unknown padding", "full"});
  Conv2DOptions both;
  both.padding = "same";
  both.explicit_padding = {1, 1, 1, 1};
  expect_error([&] { trace_conv({1, 4, 4, 1}, {3, 3, 1, 1}, both); }, ErrorCode::kInvalidArgument,
               {"conv2d", "explicit_padding", "same"});
  Conv2DOptions three;
  three.explicit_padding = {1, 1, 1};
  expect_error([&] { trace_conv({1, 4, 4, 1}, {3, 3, 1, 1}, three); }, ErrorCode::kInvalidArgument,
               {"conv2d", "[1, 1, 1]"});
  Conv2DOptions stride0;
  stride0.strides = {0, 1};
  expect_error([&] { trace_conv({1, 4, 4, 1}, {3, 3, 1, 1}, stride0); }, ErrorCode::kInvalidArgument,
               {"conv2d", "strides", "[0, 1]"});
  expect_error([&] { trace_conv({4, 4, 1}, {3, 3, 1, 1}, {}); }, ErrorCode::kShapeMismatch,
               {"conv2d", "x", "rank 4", "(4, 4, 1)"});
  expect_error([&] { trace_conv({1, 4, 4, 3}, {3, 3, 2, 1}, {}); }, ErrorCode::kShapeMismatch,
               {"conv2d", "(1, 4, 4, 3)", "(3, 3, 2, 1)", "feature_group_count 1"});
}

TEST(TracePool, MaxPoolIsReduceWindowMaxWithLowestInit) {
  ir::Graph g = trace1([](auto& a) { return max_pool2d(a[0], {2, 2}, {2, 2}); }, {tt({1, 4, 5, 3})});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "reduce_window"}));
  EXPECT_EQ(g.nodes()[0].attrs.get_array("value").to_doubles().at(0), -std::numeric_limits<double>::infinity());
  const ir::Attributes& at = result_node(g).attrs;
  EXPECT_EQ(at.get_ints("window_dimensions"), (Ints{1, 2, 2, 1}));
  EXPECT_EQ(at.get_ints("window_strides"), (Ints{1, 2, 2, 1}));
  EXPECT_EQ(at.get_ints("padding"), (Ints{0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(at.get_string("computation"), "max");
  EXPECT_EQ(result_type(g), tt({1, 2, 2, 3}));
  // "same": w 5, window 2, stride 2 -> out 3, total 1 -> (0, 1); empty strides = pool size.
  ir::Graph s = trace1([](auto& a) { return max_pool2d(a[0], {2, 2}, {}, "same"); }, {tt({1, 4, 5, 3})});
  EXPECT_EQ(result_node(s).attrs.get_ints("padding"), (Ints{0, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(result_type(s), tt({1, 2, 3, 3}));
}

TEST(TracePool, AvgPoolDividesByRealCells) {
  ir::Graph v = trace1([](auto& a) { return avg_pool2d(a[0], {2, 2}, {2, 2}); }, {tt({1, 4, 4, 1})});
  EXPECT_EQ(op_names(v),
            (std::vector<std::string>{"constant", "reduce_window", "constant", "broadcast_in_dim", "divide"}));
  EXPECT_EQ(v.nodes()[2].attrs.get_array("value").to_vector<float>(), std::vector<float>{4});
  ir::Graph s = trace1([](auto& a) { return avg_pool2d(a[0], {3, 3}, {1, 1}, "same"); }, {tt({2, 4, 4, 3})});
  // sums, then counts from a window over ones (1, h, w, 1), then a broadcasting divide.
  EXPECT_EQ(op_names(s), (std::vector<std::string>{"constant", "reduce_window", "constant", "broadcast_in_dim",
                                                   "constant", "reduce_window", "broadcast_in_dim", "divide"}));
  EXPECT_EQ(s.type(s.nodes()[5].outputs[0]), tt({1, 4, 4, 1}));
  EXPECT_EQ(result_type(s), tt({2, 4, 4, 3}));
}

TEST(TracePool, Errors) {
  expect_error([] { in_trace({tt({1, 4, 4, 1})}, [](auto& a) { max_pool2d(a[0], {2, 0}, {1, 1}); }); },
               ErrorCode::kInvalidArgument, {"max_pool2d", "pool_size", "[2, 0]"});
  expect_error([] { in_trace({tt({1, 4, 4, 1})}, [](auto& a) { avg_pool2d(a[0], {2, 2}, {1, 1, 1}); }); },
               ErrorCode::kInvalidArgument, {"avg_pool2d", "strides", "[1, 1, 1]"});
  expect_error([] { in_trace({tt({1, 4, 4, 1})}, [](auto& a) { max_pool2d(a[0], {2, 2}, {1, 1}, "SAME"); }); },
               ErrorCode::kInvalidArgument, {"max_pool2d", "unknown padding", "SAME"});
  expect_error([] { in_trace({tt({1, 2, 4, 1})}, [](auto& a) { max_pool2d(a[0], {3, 3}, {1, 1}); }); },
               ErrorCode::kInvalidArgument, {"max_pool2d", "[3, 3]", "(2, 4)"});
  expect_error([] { in_trace({tt({4, 4, 1})}, [](auto& a) { max_pool2d(a[0], {2, 2}, {}); }); },
               ErrorCode::kShapeMismatch, {"max_pool2d", "rank 4", "(4, 4, 1)"});
  expect_error([] { in_trace({tt({1, 4, 4, 1}, DType::kI32)}, [](auto& a) { avg_pool2d(a[0], {2, 2}, {}); }); },
               ErrorCode::kDTypeMismatch, {"avg_pool2d", "i32"});
}

// ---- indexing and random ------------------------------------------------------------------

TEST(TraceIndexing, TakeIsAGatherOfRows) {
  ir::Graph g = trace1([](auto& a) { return take(a[0], a[1]); }, {tt({10, 4, 2}), tt({3, 5}, DType::kI32)});
  const ir::Attributes& at = result_node(g).attrs;
  EXPECT_EQ(result_node(g).op, "gather");
  EXPECT_EQ(at.get_ints("offset_dims"), (Ints{2, 3}));
  EXPECT_EQ(at.get_ints("collapsed_slice_dims"), Ints{0});
  EXPECT_EQ(at.get_ints("start_index_map"), Ints{0});
  EXPECT_EQ(at.get_int("index_vector_dim"), 2);
  EXPECT_EQ(at.get_ints("slice_sizes"), (Ints{1, 4, 2}));
  EXPECT_EQ(result_type(g), tt({3, 5, 4, 2}));
  expect_error([] { in_trace({tt({4, 2}), tt({3})}, [](auto& a) { take(a[0], a[1]); }); }, ErrorCode::kDTypeMismatch,
               {"take", "indices", "f32", "integer"});
  expect_error([] { in_trace({tt({}), tt({3}, DType::kI32)}, [](auto& a) { take(a[0], a[1]); }); },
               ErrorCode::kShapeMismatch, {"take", "rank"});
}

TEST(TraceIndexing, ScatterAddRowsIntoZeros) {
  ir::Graph g =
      trace1([](auto& a) { return scatter_add_rows({6, 2}, a[0], a[1]); }, {tt({3}, DType::kI64), tt({3, 2})});
  ASSERT_EQ(op_names(g), (std::vector<std::string>{"constant", "broadcast_in_dim", "scatter"}));
  const ir::Attributes& at = result_node(g).attrs;
  EXPECT_EQ(at.get_ints("update_window_dims"), Ints{1});
  EXPECT_EQ(at.get_ints("inserted_window_dims"), Ints{0});
  EXPECT_EQ(at.get_ints("scatter_dims_to_operand_dims"), Ints{0});
  EXPECT_EQ(at.get_int("index_vector_dim"), 1);
  EXPECT_EQ(at.get_string("computation"), "add");
  EXPECT_EQ(result_type(g), tt({6, 2}));
  expect_error(
      [] { in_trace({tt({3}, DType::kI32), tt({3, 4})}, [](auto& a) { scatter_add_rows({6, 2}, a[0], a[1]); }); },
      ErrorCode::kShapeMismatch, {"scatter_add_rows", "(3, 4)", "(6, 2)", "(3, 2)"});
}

TEST(TraceIndexing, OneHotComparesIotaWithIndices) {
  ir::Graph g = trace1([](auto& a) { return one_hot(a[0], 4); }, {tt({2, 3}, DType::kI32)});
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"broadcast_in_dim", "iota", "compare", "convert"}));
  EXPECT_EQ(result_type(g), tt({2, 3, 4}));
  // Depth beyond the index dtype's range compares in i64.
  ir::Graph w = trace1([](auto& a) { return one_hot(a[0], 300, DType::kBool); }, {tt({2}, DType::kU8)});
  EXPECT_EQ(op_names(w), (std::vector<std::string>{"convert", "broadcast_in_dim", "iota", "compare"}));
  expect_error([] { in_trace({tt({2}, DType::kI32)}, [](auto& a) { one_hot(a[0], -1); }); },
               ErrorCode::kInvalidArgument, {"one_hot", "-1"});
}

TEST(TraceRandom, BitGeneratorAndUniform) {
  ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        auto [s, bits] = rng_bit_generator(a[0], {3}, DType::kU64);
        return std::vector<Tensor>{s, bits};
      },
      {tt({2}, DType::kU64)});
  ASSERT_EQ(op_names(g), std::vector<std::string>{"rng_bit_generator"});
  EXPECT_EQ(g.nodes()[0].attrs.get_string("algorithm"), "THREE_FRY");
  EXPECT_EQ(g.nodes()[0].attrs.get_string("dtype"), "u64");
  EXPECT_EQ(g.type(g.outputs()[1]), tt({3}, DType::kU64));

  ir::Graph u = trace(
      [](const std::vector<Tensor>& a) {
        auto [s, v] = random_uniform(a[0], {2, 2}, DType::kBF16);
        return std::vector<Tensor>{s, v};
      },
      {tt({2}, DType::kU64)});
  EXPECT_EQ(u.type(u.outputs()[1]), tt({2, 2}, DType::kBF16));
  EXPECT_EQ(u.nodes()[0].attrs.get_string("dtype"), "u32");
  // bf16 keeps the top 7 bits: the word is divided by 2^25.
  EXPECT_EQ(u.nodes()[1].attrs.get_array("value").to_vector<uint32_t>(), std::vector<uint32_t>{1u << 25});
  expect_error([] { in_trace({tt({2}, DType::kU64)}, [](auto& a) { random_uniform(a[0], {2}, DType::kI32); }); },
               ErrorCode::kDTypeMismatch, {"random_uniform", "i32"});
}

// ---- trace misuse --------------------------------------------------------------------------

TEST(TraceMisuse, LeakedTensorUsedAfterItsTraceFinished) {
  Tensor leaked;
  trace(
      [&](const std::vector<Tensor>& a) {
        leaked = a[0];
        return std::vector<Tensor>{a[0]};
      },
      {tt({2})}, "first");
  expect_error([&] { exp(leaked); }, ErrorCode::kTraceError, {"exponential", "first", "finished"});
  expect_error([&] { in_trace({tt({2})}, [&](auto& a) { add(a[0], leaked); }); }, ErrorCode::kTraceError, {"add"});
  expect_error([&] { in_trace({}, [&](auto&) { leaked + 1.0; }); }, ErrorCode::kTraceError,
               {"operator+", "first", "finished"});
  expect_error([&] { in_trace({}, [&](auto&) { sum(leaked); }); }, ErrorCode::kTraceError, {"sum", "finished"});
}

TEST(TraceMisuse, OuterTensorInNestedTrace) {
  expect_error(
      [] {
        in_trace({tt({2})}, [](auto& outer) {
          trace([&](const std::vector<Tensor>& inner) { return std::vector<Tensor>{inner[0] * outer[0]}; }, {tt({2})},
                "inner");
        });
      },
      ErrorCode::kTraceError, {"multiply", "inner"});
  expect_error(
      [] {
        in_trace({tt({2})}, [](auto& outer) {
          trace([&](const std::vector<Tensor>&) { return std::vector<Tensor>{outer[0] * 2.0}; }, {}, "inner");
        });
      },
      ErrorCode::kTraceError, {"operator*", "inner", "nested"});
  expect_error(
      [] {
        in_trace({tt({2})}, [](auto& outer) {
          trace([&](const std::vector<Tensor>&) { return std::vector<Tensor>{outer[0]}; }, {}, "inner");
        });
      },
      ErrorCode::kTraceError, {"inner", "result 0"});
}

TEST(TraceMisuse, OpsOutsideAnyTrace) {
  expect_error([] { scalar(1.0, DType::kF32); }, ErrorCode::kTraceError, {"constant", "outside of any trace"});
  expect_error([] { iota({3}, 0, DType::kI32); }, ErrorCode::kTraceError, {"iota", "outside"});
}

TEST(TraceMisuse, InvalidTensors) {
  expect_error([] { trace([](auto&) { return std::vector<Tensor>{Tensor()}; }, {}, "f"); }, ErrorCode::kTraceError,
               {"'f'", "result 0", "invalid"});
  expect_error([] { in_trace({tt({2})}, [](auto& a) { add(a[0], Tensor()); }); }, ErrorCode::kTraceError, {"invalid"});
  expect_error([] { in_trace({}, [](auto&) { relu(Tensor()); }); }, ErrorCode::kTraceError, {"invalid"});
}

TEST(TraceNesting, NestedTraceInsideATracedFunctionWorks) {
  ir::Graph inner_graph;
  ir::Graph outer = trace1(
      [&](auto& a) {
        Tensor before = a[0] + 1.0;
        inner_graph = trace1([](auto& b) { return exp(b[0]); }, {tt({3})});
        return before * a[0];  // the outer trace keeps recording after the nested one
      },
      {tt({2})});
  EXPECT_EQ(op_names(inner_graph), std::vector<std::string>{"exponential"});
  EXPECT_EQ(op_names(outer), (std::vector<std::string>{"constant", "broadcast_in_dim", "add", "multiply"}));
}

TEST(TraceComposites, RecordedOps) {
  EXPECT_EQ(op_names(trace1([](auto& a) { return relu(a[0]); }, {tt({2})})),
            (std::vector<std::string>{"constant", "broadcast_in_dim", "compare", "select"}));
  EXPECT_EQ(op_names(trace1([](auto& a) { return silu(a[0]); }, {tt({2})})),
            (std::vector<std::string>{"logistic", "multiply"}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return logsumexp(a[0], {1}); }, {tt({2, 3})})), tt({2}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return logsumexp(a[0], {1}, true); }, {tt({2, 3})})), tt({2, 1}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return variance(a[0], {0}); }, {tt({2, 3})})), tt({3}));
  EXPECT_EQ(result_type(trace1([](auto& a) { return softmax(a[0], 0); }, {tt({2, 3})})), tt({2, 3}));
}

TEST(TraceText, TracedGraphRoundTripsThroughText) {
  ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        Conv2DOptions o;
        o.padding = "same";
        Tensor h = relu(conv2d(a[0], a[1], o));
        h = avg_pool2d(max_pool2d(h, {2, 2}, {}, "same"), {2, 2}, {1, 1}, "same");
        Tensor logits = matmul(flatten(h), transpose(reshape(take(a[2], a[3]), {-1, 8})));
        auto [state, u] = random_uniform(a[4], {2}, DType::kF32);
        return std::vector<Tensor>{log_softmax(logits) + u, variance(logits, {0}), state,
                                   one_hot(a[3], 5),        gelu(logits, false),   logsumexp(logits)};
      },
      {tt({1, 4, 4, 1}), tt({3, 3, 1, 2}), tt({6, 2, 4}), tt({2}, DType::kI32), tt({2}, DType::kU64)});
  EXPECT_TRUE(ir::parse_graph(ir::print_graph(g)) == g) << ir::print_graph(g);
}

}  // namespace
}  // namespace ingot
