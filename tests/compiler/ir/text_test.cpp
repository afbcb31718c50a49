// The IR text form: exact printing, parsing of hand-written text, round trips and errors.
#include "ingot/ir/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ingot/interp/interpreter.h"
#include "ir_test_ops.h"
#include "test_util.h"

namespace ingot::ir {
namespace {

using ingot::testing::expect_error;
using ingot::testing::make_test_registry;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Expects parse(print(g)) == g and print(parse(print(g))) == print(g); returns the text.
std::string expect_round_trip(const Graph& g) {
  const std::string text = print_graph(g);
  Graph back = parse_graph(text, &g.registry());
  EXPECT_TRUE(back == g) << "round trip changed the graph:\n" << text << "\nparsed back as\n" << print_graph(back);
  EXPECT_EQ(print_graph(back), text);
  return text;
}

/// The text of one `annotate` node carrying `attrs` over an f32[] parameter, round-tripped.
std::string annotate_line(const Attributes& attrs) {
  auto reg = make_test_registry();
  Graph g("a", reg.get());
  g.set_outputs(g.add_node("annotate", {g.add_parameter({{}, DType::kF32})}, attrs));
  const std::string text = expect_round_trip(g);
  const size_t start = text.find("  %1 = ");
  return text.substr(start + 2, text.find('\n', start) - start - 2);
}

/// The printed form of a constant holding `value`, round-tripped.
std::string dense_text(const Array& value) {
  auto reg = make_test_registry();
  Graph g("c", reg.get());
  g.set_outputs(g.add_node("constant", {}, {{"value", value}}));
  const std::string text = expect_round_trip(g);
  const size_t start = text.find("value = ") + 8;
  return text.substr(start, text.find("} :", start) - start);
}

TEST(TextTest, PrintsTheCanonicalForm) {
  auto reg = make_test_registry();
  Graph g("main", reg.get());
  ValueId x = g.add_parameter({{2, 3}, DType::kF32});
  ValueId y = g.add_parameter({{2, 3}, DType::kF32});
  ValueId state = g.add_parameter({{2}, DType::kU64});
  ValueId s = g.add_node("add", {x, y})[0];
  ValueId c = g.add_node("constant", {}, {{"value", Array::from_vector<float>({1.5f, -INFINITY, NAN}, {3})}})[0];
  std::vector<ValueId> r = g.add_node(
      "rng_bit_generator", {state},
      {{"shape", std::vector<int64_t>{4}}, {"dtype", std::string("u32")}, {"algorithm", std::string("THREE_FRY")}});
  g.set_outputs({s, c, r[1]});
  EXPECT_EQ(expect_round_trip(g),
            "func @main(%0: f32[2,3], %1: f32[2,3], %2: u64[2]) -> (f32[2,3], f32[3], u32[4]) {\n"
            "  %3 = add(%0, %1) : f32[2,3]\n"
            "  %4 = constant() {value = dense<[1.5, -inf, nan]> : f32[3]} : f32[3]\n"
            "  %5, %6 = rng_bit_generator(%2) {algorithm = \"THREE_FRY\", dtype = \"u32\", "
            "shape = [4]} : u64[2], u32[4]\n"
            "  return %3, %4, %6\n"
            "}\n");
}

TEST(TextTest, PrintsEmptySignaturesAndBareReturn) {
  auto reg = make_test_registry();
  Graph g("empty", reg.get());
  EXPECT_EQ(expect_round_trip(g), "func @empty() -> () {\n  return\n}\n");
  g.add_node("constant", {}, {{"value", Array::scalar(2.5, DType::kF32)}});
  EXPECT_EQ(expect_round_trip(g),
            "func @empty() -> () {\n"
            "  %0 = constant() {value = dense<2.5> : f32[]} : f32[]\n"
            "  return\n"
            "}\n");
}

TEST(TextTest, RenumbersParametersFirst) {
  auto reg = make_test_registry();
  Graph g("late", reg.get());
  ValueId a = g.add_parameter({{2}, DType::kF32});
  ValueId n = g.add_node("negate", {a})[0];
  ValueId b = g.add_parameter({{2}, DType::kF32});  // value id 2, printed as %1
  g.set_outputs(g.add_node("add", {n, b}));
  const std::string text = print_graph(g);
  EXPECT_EQ(text,
            "func @late(%0: f32[2], %1: f32[2]) -> (f32[2]) {\n"
            "  %2 = negate(%0) : f32[2]\n"
            "  %3 = add(%2, %1) : f32[2]\n"
            "  return %3\n"
            "}\n");
  // The parsed graph numbers values in text order, so it is canonical and prints identically.
  Graph back = parse_graph(text, reg.get());
  EXPECT_FALSE(back == g);
  EXPECT_EQ(back.parameters(), (std::vector<ValueId>{0, 1}));
  EXPECT_EQ(print_graph(back), text);
  EXPECT_TRUE(parse_graph(print_graph(back), reg.get()) == back);
}

TEST(TextTest, QuotesFunctionNamesThatAreNotWords) {
  auto reg = make_test_registry();
  Graph g("my graph \"1\"", reg.get());
  EXPECT_EQ(expect_round_trip(g), "func @\"my graph \\\"1\\\"\"() -> () {\n  return\n}\n");
  g.set_name("");
  EXPECT_EQ(expect_round_trip(g), "func @\"\"() -> () {\n  return\n}\n");
  g.set_name("train_step.v2");
  EXPECT_EQ(expect_round_trip(g), "func @train_step.v2() -> () {\n  return\n}\n");
}

TEST(TextTest, IntegerAttributes) {
  EXPECT_EQ(annotate_line({{"a", int64_t{0}},
                           {"b", int64_t{-3}},
                           {"c", std::numeric_limits<int64_t>::max()},
                           {"d", std::numeric_limits<int64_t>::min()}}),
            "%1 = annotate(%0) {a = 0, b = -3, c = 9223372036854775807, "
            "d = -9223372036854775808} : f32[]");
}

TEST(TextTest, FloatAttributesAlwaysLookLikeFloats) {
  EXPECT_EQ(annotate_line({{"a", 1.0},
                           {"b", 0.1},
                           {"c", -0.0},
                           {"d", 1e300},
                           {"e", 5e-324},
                           {"f", kInf},
                           {"g", -kInf},
                           {"h", kNaN},
                           {"i", -2.5e-7},
                           {"j", 123456789012.0},
                           {"k", 1e16}}),
            "%1 = annotate(%0) {a = 1.0, b = 0.1, c = -0.0, d = 1e+300, e = 5e-324, f = inf, "
            "g = -inf, h = nan, i = -2.5e-07, j = 123456789012.0, k = 1e+16} : f32[]");
}

TEST(TextTest, NegativeNaNKeepsItsSign) {
  const double neg_nan = -kNaN;
  ASSERT_TRUE(std::signbit(neg_nan));
  EXPECT_EQ(annotate_line({{"a", neg_nan}}), "%1 = annotate(%0) {a = -nan} : f32[]");
  EXPECT_EQ(dense_text(Array::from_vector<float>({-NAN, NAN}, {2})), "dense<[-nan, nan]> : f32[2]");
}

TEST(TextTest, BoolStringAndListAttributes) {
  EXPECT_EQ(annotate_line({{"t", true},
                           {"f", false},
                           {"s", std::string("a \"q\" \\ b\nc\td\x01")},
                           {"e", std::string()},
                           {"l", std::vector<int64_t>{1, -2, 3}},
                           {"n", std::vector<int64_t>{}}}),
            "%1 = annotate(%0) {e = \"\", f = false, l = [1, -2, 3], n = [], "
            "s = \"a \\\"q\\\" \\\\ b\\nc\\td\\x01\", t = true} : f32[]");
}

TEST(TextTest, DenseLiteralsMatchTheShape) {
  EXPECT_EQ(dense_text(Array::scalar(2.5, DType::kF32)), "dense<2.5> : f32[]");
  EXPECT_EQ(dense_text(Array::zeros({0}, DType::kF32)), "dense<[]> : f32[0]");
  EXPECT_EQ(dense_text(Array::zeros({2, 0}, DType::kF32)), "dense<[[], []]> : f32[2,0]");
  EXPECT_EQ(dense_text(Array::zeros({0, 3}, DType::kI32)), "dense<[]> : i32[0,3]");
  EXPECT_EQ(dense_text(Array::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 1, 3})),
            "dense<[[[1, 2, 3]], [[4, 5, 6]]]> : i32[2,1,3]");
  EXPECT_EQ(dense_text(Array::from_vector<float>({1.0f, 0.1f, -0.0f, 3e38f, 1e-45f}, {5})),
            "dense<[1.0, 0.1, -0.0, 3e+38, 1e-45]> : f32[5]");
  EXPECT_EQ(dense_text(Array::from_vector<double>({0.1, 1.0 / 3.0}, {2})), "dense<[0.1, 0.3333333333333333]> : f64[2]");
}

TEST(TextTest, DenseLiteralsOfEveryDType) {
  EXPECT_EQ(dense_text(Array::from_vector<bool>({true, false}, {2})), "dense<[true, false]> : bool[2]");
  EXPECT_EQ(dense_text(Array::from_vector<int8_t>({-128, 127}, {2})), "dense<[-128, 127]> : i8[2]");
  EXPECT_EQ(dense_text(Array::from_vector<uint8_t>({0, 255}, {2})), "dense<[0, 255]> : u8[2]");
  EXPECT_EQ(dense_text(Array::from_vector<int32_t>({INT32_MIN, INT32_MAX}, {2})),
            "dense<[-2147483648, 2147483647]> : i32[2]");
  EXPECT_EQ(dense_text(Array::from_vector<uint32_t>({0u, UINT32_MAX}, {2})), "dense<[0, 4294967295]> : u32[2]");
  EXPECT_EQ(dense_text(Array::from_vector<int64_t>({INT64_MIN, INT64_MAX}, {2})),
            "dense<[-9223372036854775808, 9223372036854775807]> : i64[2]");
  EXPECT_EQ(dense_text(Array::from_vector<uint64_t>({UINT64_MAX, (uint64_t{1} << 53) + 1}, {2})),
            "dense<[18446744073709551615, 9007199254740993]> : u64[2]");
  // f16/bf16 print the float value of their bits, which parses back to the same bits.
  EXPECT_EQ(
      dense_text(Array::from_vector<f16>({f16(0.1f), f16(65504.0f), f16(-INFINITY), f16::from_bits(0x0001)}, {4})),
      "dense<[0.099975586, 65504.0, -inf, 5.9604645e-08]> : f16[4]");
  EXPECT_EQ(dense_text(Array::from_vector<bf16>({bf16(0.1f), bf16(3.0e38f), bf16(1.0f)}, {3})),
            "dense<[0.100097656, 3.0040553e+38, 1.0]> : bf16[3]");
}

TEST(TextTest, RoundTripsEveryAttributeKindTogether) {
  auto reg = make_test_registry();
  Graph g("kinds", reg.get());
  ValueId x = g.add_parameter({{2}, DType::kF64});
  Attributes attrs{{"int", int64_t{-7}},
                   {"float", 0.30000000000000004},
                   {"bool", true},
                   {"string", std::string("x\\y")},
                   {"ints", std::vector<int64_t>{0, INT64_MAX}},
                   {"array", Array::from_vector<bf16>({bf16(-1.5f), bf16(NAN)}, {1, 2})}};
  ValueId a = g.add_node("annotate", {x}, attrs)[0];
  Array literal = Array::from_vector<double>({kNaN, -kInf}, {2});
  ValueId c = g.add_node("constant", {}, {{"value", literal}})[0];
  g.set_outputs({g.add_node("add", {a, c})[0], a});
  EXPECT_EQ(expect_round_trip(g),
            "func @kinds(%0: f64[2]) -> (f64[2], f64[2]) {\n"
            "  %1 = annotate(%0) {array = dense<[[-1.5, nan]]> : bf16[1,2], bool = true, "
            "float = 0.30000000000000004, int = -7, ints = [0, 9223372036854775807], "
            "string = \"x\\\\y\"} : f64[2]\n"
            "  %2 = constant() {value = dense<[nan, -inf]> : f64[2]} : f64[2]\n"
            "  %3 = add(%1, %2) : f64[2]\n"
            "  return %3, %1\n"
            "}\n");
}

TEST(TextTest, ParsesHandWrittenTextWithCommentsAndNames) {
  auto reg = make_test_registry();
  const char* text = R"(// a hand-written function
  func   @scale ( %x : f32[2, 2] ,%key:u64[2] )->(f32[2,2],u32[3])  {
    // constants accept integers and splats for floats
    %c = constant ( ) { value = dense< [ [1, 2.5] , [-3, 4e1] ] > : f32[2,2] } : f32[2,2]
    %7 = add(%x,%c):f32[2,2]   // trailing comment
    %half = constant() {value = dense<0.5> : f32[2,2]} : f32[2,2]
    %3 = add(%7, %half) : f32[2,2]
    %new_key, %bits = rng_bit_generator(%key) {shape = [3], dtype = "u32"} : u64[2], u32[3]
    return %3 , %bits
  })";
  Graph g = parse_graph(text, reg.get());
  EXPECT_EQ(g.name(), "scale");
  ASSERT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(g.node(1).inputs, (std::vector<ValueId>{0, 2}));
  EXPECT_EQ(g.node(3).inputs, (std::vector<ValueId>{3, 4}));
  EXPECT_EQ(g.outputs(), (std::vector<ValueId>{5, 7}));
  ingot::testing::expect_values(g.node(0).attrs.get_array("value"), {1.0, 2.5, -3.0, 40.0});
  ingot::testing::expect_values(g.node(2).attrs.get_array("value"), {0.5, 0.5, 0.5, 0.5});
  EXPECT_EQ(expect_round_trip(g),
            "func @scale(%0: f32[2,2], %1: u64[2]) -> (f32[2,2], u32[3]) {\n"
            "  %2 = constant() {value = dense<[[1.0, 2.5], [-3.0, 40.0]]> : f32[2,2]} : f32[2,2]\n"
            "  %3 = add(%0, %2) : f32[2,2]\n"
            "  %4 = constant() {value = dense<[[0.5, 0.5], [0.5, 0.5]]> : f32[2,2]} : f32[2,2]\n"
            "  %5 = add(%3, %4) : f32[2,2]\n"
            "  %6, %7 = rng_bit_generator(%1) {dtype = \"u32\", shape = [3]} : u64[2], u32[3]\n"
            "  return %5, %7\n"
            "}\n");
}

TEST(TextTest, ParsesSingleResultTypeWithoutParenthesesAndOtherSpellings) {
  auto reg = make_test_registry();
  Graph g = parse_graph(
      "func @f(%a: i8[]) -> i8[] { %b = annotate(%a) {x = +5, y = 1e3, z = 2., s = \"a // b\"} "
      ": i8[] return %b }",
      reg.get());
  EXPECT_EQ(g.node(0).attrs.get_string("s"), "a // b");
  EXPECT_EQ(g.node(0).attrs.get_int("x"), 5);
  EXPECT_EQ(g.node(0).attrs.get_float("y"), 1000.0);
  EXPECT_EQ(g.node(0).attrs.get_float("z"), 2.0);
  EXPECT_EQ(print_graph(g),
            "func @f(%0: i8[]) -> (i8[]) {\n"
            "  %1 = annotate(%0) {s = \"a // b\", x = 5, y = 1000.0, z = 2.0} : i8[]\n"
            "  return %1\n"
            "}\n");
}

TEST(TextTest, EmptyAttributeBracesAreAccepted) {
  auto reg = make_test_registry();
  Graph g = parse_graph("func @f(%a: f32[]) -> () { %b = negate(%a) {} : f32[]\n return }", reg.get());
  EXPECT_TRUE(g.node(0).attrs.empty());
}

/// Expects parse_graph(text) to throw kParseError with `needles` in the message.
void expect_parse_error(const std::string& text, const std::vector<std::string>& needles,
                        ErrorCode code = ErrorCode::kParseError) {
  auto reg = make_test_registry();
  expect_error([&] { parse_graph(text, reg.get()); }, code, needles);
}

TEST(TextTest, ReportsUnknownValuesWithLineAndColumn) {
  expect_parse_error("func @f(%0: f32[2]) -> (f32[2]) {\n  %1 = negate(%9) : f32[2]\n  return %1\n}",
                     {"line 2, column 15: unknown value %9"});
  expect_parse_error("func @f(%0: f32[2]) -> (f32[2]) {\n  return %1\n}", {"line 2, column 10: unknown value %1"});
  // A node cannot use its own result.
  expect_parse_error("func @f() -> () {\n  %1 = negate(%1) : f32[2]\n  return\n}",
                     {"line 2, column 15: unknown value %1"});
}

TEST(TextTest, ReportsBadTypes) {
  expect_parse_error("func @f(%0: f33[2]) -> () { return }", {"line 1, column 13: unknown dtype 'f33'"});
  expect_parse_error("func @f(%0: f32(2)) -> () { return }",
                     {"line 1, column 16: expected '[' after dtype 'f32'", "found '('"});
  expect_parse_error("func @f(%0: f32[2,-1]) -> () { return }",
                     {"line 1, column 19: a dimension size must be an integer >= 0"});
  expect_parse_error("func @f(%0: f32[2.5]) -> () { return }",
                     {"line 1, column 17: a dimension size must be an integer >= 0"});
  expect_parse_error("func @f(%0: f32[2 3]) -> () { return }",
                     {"line 1, column 19: expected ']' to close the dimension list", "found '3'"});
  expect_parse_error("func @f(%0: [2]) -> () { return }",
                     {"line 1, column 13: expected a type such as f32[2,3] but found '['"});
}

TEST(TextTest, ReportsUnterminatedLists) {
  expect_parse_error(
      "func @f(%0: f32[]) -> (f32[]) {\n  %1 = annotate(%0) {l = [1, 2 : f32[]\n  return %1\n}",
      {"line 2, column 32: expected ',' or ']' (unterminated list opened at line 2, column 26)", "found ':'"});
  expect_parse_error("func @f() -> () {\n  %1 = constant() {value = dense<[[1.0, 2.0]",
                     {"unterminated list opened at line 2, column 34", "end of input"});
  expect_parse_error("func @f(%0: f32[]) -> () {\n  %1 = annotate(%0) {s = \"abc} : f32[]\n}",
                     {"line 2, column 26: unterminated string"});
  expect_parse_error("func @f(%0: f32[]) -> () {\n  %1 = annotate(%0) {s = \"a\\qb\"} : f32[]\n}",
                     {"line 2, column 28: bad escape in string"});
}

TEST(TextTest, ReportsDuplicateDefinitions) {
  expect_parse_error("func @f(%x: f32[], %x: f32[]) -> () { return }",
                     {"line 1, column 20: duplicate definition of %x (first defined at line 1, "
                      "column 9)"});
  expect_parse_error(
      "func @f(%0: f32[]) -> () {\n  %1 = negate(%0) : f32[]\n  %1 = negate(%0) : f32[]\n  "
      "return\n}",
      {"line 3, column 3: duplicate definition of %1 (first defined at line 2, column 3)"});
  expect_parse_error(
      "func @f(%0: u64[2]) -> () {\n  %a, %a = rng_bit_generator(%0) {dtype = \"u32\", "
      "shape = [1]} : u64[2], u32[1]\n  return\n}",
      {"line 2, column 7: %a is defined twice here"});
  expect_parse_error("func @f(%0: f32[]) -> () { %1 = annotate(%0) {a = 1, a = 2} : f32[] return }",
                     {"line 1, column 54: duplicate attribute 'a'"});
}

TEST(TextTest, ReportsResultCountMismatches) {
  expect_parse_error(
      "func @f(%0: u64[2]) -> () {\n  %1 = rng_bit_generator(%0) {dtype = \"u32\", shape = [4]} "
      ": u64[2], u32[4]\n  return\n}",
      {"line 2, column 61: rng_bit_generator declares 2 result types for 1 results"});
  // The op itself produces a different count than the text names (a shape-rule error, with its
  // code kept and the line prepended).
  expect_parse_error("func @f(%0: f32[]) -> () {\n  %1, %2 = negate(%0) : f32[], f32[]\n  return\n}",
                     {"line 2, column 3: ", "declared 2 result types but the op produces 1"},
                     ErrorCode::kShapeMismatch);
  expect_parse_error("func @f(%0: f32[]) -> (f32[], f32[]) {\n  return %0\n}",
                     {"line 2, column 10: return has 1 values but the signature declares 2 "
                      "result types"});
  expect_parse_error("func @f(%0: f32[]) -> () {\n  return %0\n}",
                     {"return has 1 values but the signature declares 0 result types"});
  expect_parse_error("func @f(%0: f32[]) -> (f64[]) {\n  return %0\n}",
                     {"line 2, column 10: returned value 0 has type f32[] but the signature "
                      "declares f64[]"});
}

TEST(TextTest, ShapeRuleErrorsKeepTheirCodeAndGainTheLine) {
  expect_parse_error("func @f(%a: f32[2,3], %b: f32[4]) -> () {\n\n  %c = add(%a, %b) : f32[2,3]\n  return\n}",
                     {"line 3, column 3: in %2 = add(%0: f32[2,3], %1: f32[4]): add: operand shapes differ: "
                      "(2, 3) vs (4,)"},
                     ErrorCode::kShapeMismatch);
  expect_parse_error("func @f(%a: f32[2]) -> () {\n  %c = negate(%a) : f32[3]\n  return\n}",
                     {"line 2, column 3: negate: declared result 0 type f32[3] but the shape "
                      "rule infers f32[2]"},
                     ErrorCode::kShapeMismatch);
  expect_parse_error("func @f(%a: f32[2]) -> () {\n  %c = frobnicate(%a) : f32[2]\n  return\n}",
                     {"line 2, column 3: in %1 = frobnicate(%0: f32[2]): unknown op 'frobnicate'"},
                     ErrorCode::kNotFound);
  expect_parse_error("func @f() -> () {\n  %c = constant() : f32[2]\n  return\n}",
                     {"line 2, column 3: ", "missing attribute 'value'"}, ErrorCode::kNotFound);
}

TEST(TextTest, ReportsBadDenseLiterals) {
  auto constant = [](const std::string& literal) {
    return "func @f() -> () {\n  %0 = constant() {value = " + literal + "} : f32[]\n  return\n}";
  };
  expect_parse_error(constant("dense<[1.0, 2.0, 3.0]> : f32[2]"),
                     {"line 2, column 34: list has 3 elements but dimension 0 of f32[2] has "
                      "size 2"});
  expect_parse_error(constant("dense<[1.0, [2.0]]> : f32[2]"),
                     {"line 2, column 40: expected an element of f32[2] but found a list"});
  expect_parse_error(constant("dense<[1.0, 2.0]> : f32[2,1]"),
                     {"line 2, column 35: expected a list of 1 elements for dimension 1 of "
                      "f32[2,1]"});
  expect_parse_error(constant("dense<[256]> : u8[1]"), {"line 2, column 35: 256 is out of range for u8"});
  expect_parse_error(constant("dense<[-1]> : u32[1]"), {"-1 is out of range for u32"});
  expect_parse_error(constant("dense<[-129]> : i8[1]"), {"-129 is out of range for i8"});
  expect_parse_error(constant("dense<[18446744073709551616]> : u64[1]"),
                     {"18446744073709551616 is out of range for u64"});
  expect_parse_error(constant("dense<[1.5]> : i32[1]"), {"line 2, column 35: expected an integer for i32"});
  expect_parse_error(constant("dense<[1]> : bool[1]"),
                     {"line 2, column 35: expected true or false for a bool element"});
  expect_parse_error(constant("dense<[true]> : f32[1]"), {"expected a number for f32"});
  expect_parse_error(constant("dense<[1e39]> : f32[1]"), {"1e39 is out of range for f32"});
  expect_parse_error(constant("dense<[70000.0]> : f16[1]"), {"70000.0 is out of range for f16"});
  expect_parse_error(constant("dense<[1.0]> : f31[1]"), {"unknown dtype 'f31'"});
  expect_parse_error(constant("dense<[1.0x]> : f32[1]"), {"line 2, column 35: malformed number"});
  expect_parse_error(constant("dense<[1e]> : f32[1]"), {"expected digits in the exponent"});
  expect_parse_error(constant("dense<true> : f32[0]"), {"expected a number for f32"});
  expect_parse_error(constant("dense<" + std::string(300, '[') + "1.0" + std::string(300, ']') + "> : f32[1]"),
                     {"line 2, column 291: dense literal nested deeper than 256 levels"});
  expect_parse_error(constant("dense<1.0> : f32[4294967296,4294967296]"),
                     {"line 2, column 41: type f32[4294967296,4294967296] is too large"});
  expect_parse_error(constant("dense[1.0] : f32[1]"), {"line 2, column 33: expected '<' after 'dense' but found '['"});
  // A splat declares its size without spelling it out: capped at kMaxTextConstantBytes, so a
  // 60-byte text cannot ask for 2.6e17 bytes (found by fuzz_ir_text).
  expect_parse_error(constant("dense<0.0> : f64[3,11111111111111112]"),
                     {"line 2, column 41: the dense literal of type f64[3,11111111111111112] holds "
                      "266666666666666688 bytes, over the limit of 1073741824 bytes"});
  expect_parse_error(constant("dense<0.0> : f32[268435457]"), {"over the limit of 1073741824 bytes"});
}

TEST(TextTest, ReportsBadAttributes) {
  auto annotate = [](const std::string& attrs) {
    return "func @f(%0: f32[]) -> () {\n  %1 = annotate(%0) {" + attrs + "} : f32[]\n  return\n}";
  };
  expect_parse_error(annotate("a = [1, 2.5]"), {"line 2, column 30: integer lists hold integers only"});
  expect_parse_error(annotate("a = 9223372036854775808"), {"integer 9223372036854775808 does not fit in 64 bits"});
  expect_parse_error(annotate("a = -9223372036854775809"), {"integer -9223372036854775809 does not fit in 64 bits"});
  expect_parse_error(annotate("a = 1e999"), {"float 1e999 is out of range for f64"});
  expect_parse_error(annotate("a = @"), {"line 2, column 26: expected an attribute value", "found '@'"});
  expect_parse_error(annotate("a 1"), {"line 2, column 24: expected '=' after attribute name 'a'"});
  expect_parse_error(annotate("a = 1 b = 2"), {"line 2, column 28: expected '}' or ','"});
}

TEST(TextTest, ReportsStructuralErrors) {
  expect_parse_error("", {"line 1, column 1: expected 'func' but found end of input"});
  expect_parse_error("  fun @f() -> () { return }", {"line 1, column 3: expected 'func'"});
  expect_parse_error("func f() -> () { return }", {"expected '@' before the function name"});
  expect_parse_error("func @f() { return }", {"line 1, column 11: expected '->'"});
  expect_parse_error("func @f() -> () {\n  %1 = negate(%0) : f32[]", {"line 2, column 15: unknown value %0"});
  expect_parse_error("func @f() -> () {\n  neg\n}",
                     {"line 2, column 3: expected a statement (%name = op(...)) or 'return' but "
                      "found 'neg'"});
  expect_parse_error("func @f() -> () {\n  return\n", {"expected '}' to close the function body", "end of input"});
  expect_parse_error("func @f() -> () { return } extra",
                     {"line 1, column 28: expected end of input after the function but found "
                      "'extra'"});
  expect_parse_error("func @f(%: f32[]) -> () { return }", {"line 1, column 9: expected a value name after '%'"});
  expect_parse_error("func @f(%0: f32[]) -> () {\n  %1 negate(%0) : f32[]\n  return\n}",
                     {"line 2, column 6: expected '=' after the result names but found 'negate'"});
  expect_parse_error("func @f(%0: f32[]) -> () {\n  %1 = negate(%0)\n  return\n}",
                     {"line 3, column 3: expected ':' and the result types of negate but found "
                      "'return'"});
}

TEST(TextTest, ParsesWithTheBuiltinRegistryByDefault) {
  // Without a registry argument the parser uses OpRegistry::builtin(); an empty function needs
  // no ops at all.
  Graph g = parse_graph("func @nothing(%0: f32[3]) -> (f32[3]) { return %0 }");
  EXPECT_EQ(&g.registry(), &OpRegistry::builtin());
  EXPECT_EQ(g.outputs(), std::vector<ValueId>{0});
}

// ---- Real ops (OpRegistry::builtin()) ---------------------------------------------------------

TEST(TextBuiltinTest, RoundTripsElementwiseOps) {
  Graph g("elementwise");
  ValueId x = g.add_parameter({{2, 3}, DType::kF32});
  ValueId y = g.add_parameter({{2, 3}, DType::kF32});
  ValueId i = g.add_node(
      "iota", {},
      {{"shape", std::vector<int64_t>{2, 3}}, {"dtype", std::string("i32")}, {"iota_dimension", int64_t{1}}})[0];
  ValueId f = g.add_node("convert", {i}, {{"dtype", std::string("f32")}})[0];
  ValueId lt = g.add_node("compare", {x, f}, {{"comparison_direction", std::string("LT")}})[0];
  ValueId sel = g.add_node("select", {lt, x, y})[0];
  ValueId lo = g.add_node("constant", {}, {{"value", Array::scalar(-1.5, DType::kF32)}})[0];
  ValueId hi = g.add_node("constant", {}, {{"value", Array::scalar(INFINITY, DType::kF32)}})[0];
  ValueId c = g.add_node("clamp", {lo, sel, hi})[0];
  ValueId e = g.add_node("exponential", {g.add_node("negate", {c})[0]})[0];
  g.set_outputs({g.add_node("multiply", {e, f})[0], lt});
  EXPECT_EQ(expect_round_trip(g),
            "func @elementwise(%0: f32[2,3], %1: f32[2,3]) -> (f32[2,3], bool[2,3]) {\n"
            "  %2 = iota() {dtype = \"i32\", iota_dimension = 1, shape = [2, 3]} : i32[2,3]\n"
            "  %3 = convert(%2) {dtype = \"f32\"} : f32[2,3]\n"
            "  %4 = compare(%0, %3) {comparison_direction = \"LT\"} : bool[2,3]\n"
            "  %5 = select(%4, %0, %1) : f32[2,3]\n"
            "  %6 = constant() {value = dense<-1.5> : f32[]} : f32[]\n"
            "  %7 = constant() {value = dense<inf> : f32[]} : f32[]\n"
            "  %8 = clamp(%6, %5, %7) : f32[2,3]\n"
            "  %9 = negate(%8) : f32[2,3]\n"
            "  %10 = exponential(%9) : f32[2,3]\n"
            "  %11 = multiply(%10, %3) : f32[2,3]\n"
            "  return %11, %4\n"
            "}\n");
}

TEST(TextBuiltinTest, RoundTripsConstantsOfEveryDType) {
  Graph g("constants");
  std::vector<ValueId> outs;
  for (DType dt : kAllDTypes) {
    Array a = Array::from_doubles({0, 1, -0.0, 2.5, 100, -7}, {2, 3}, dt);
    outs.push_back(g.add_node("constant", {}, {{"value", a}})[0]);
  }
  g.set_outputs(outs);
  const std::string text = expect_round_trip(g);
  EXPECT_NE(text.find("dense<[[false, true, false], [true, true, true]]> : bool[2,3]"), std::string::npos);
  EXPECT_NE(text.find("dense<[[0, 1, 0], [2, 100, -7]]> : i8[2,3]"), std::string::npos);
  EXPECT_NE(text.find("dense<[[0, 1, 0], [2, 100, 0]]> : u64[2,3]"), std::string::npos);
  EXPECT_NE(text.find("dense<[[0.0, 1.0, -0.0], [2.5, 100.0, -7.0]]> : bf16[2,3]"), std::string::npos);
}

TEST(TextBuiltinTest, ParsedTextRunsInTheInterpreter) {
  Graph g = parse_graph(R"(
    func @relu_scale(%x: f32[4]) -> (f32[4]) {
      %zero = constant() {value = dense<[0, 0, 0, 0]> : f32[4]} : f32[4]
      %r = maximum(%x, %zero) : f32[4]
      %two = constant() {value = dense<2> : f32[4]} : f32[4]   // splat
      %y = multiply(%r, %two) : f32[4]
      return %y
    })");
  std::vector<Array> out = interp::interpret(g, {Array::from_vector<float>({-1.0f, 0.5f, NAN, 3.0f}, {4})});
  ASSERT_EQ(out.size(), 1u);
  ingot::testing::expect_values(out[0], {0.0, 1.0, kNaN, 6.0});
}

TEST(TextBuiltinTest, RoundTripsShapeAndReductionOps) {
  const std::string text =
      "func @shapes(%0: f32[2,3], %1: f32[]) -> (f32[3,2], f32[6], f32[3,6], f32[1,2], f32[2,6], "
      "f32[2,3], f32[2], i64[3], f32[1,2]) {\n"
      "  %2 = transpose(%0) {permutation = [1, 0]} : f32[3,2]\n"
      "  %3 = reshape(%0) {shape = [6]} : f32[6]\n"
      "  %4 = pad(%2, %1) {edge_padding_high = [0, 2], edge_padding_low = [0, -1], "
      "interior_padding = [0, 3]} : f32[3,6]\n"
      "  %5 = slice(%0) {limit_indices = [2, 3], start_indices = [1, 0], strides = [1, 2]} "
      ": f32[1,2]\n"
      "  %6 = concatenate(%0, %0) {dimension = 1} : f32[2,6]\n"
      "  %7 = reverse(%0) {dimensions = [0, 1]} : f32[2,3]\n"
      "  %8 = reduce(%0, %1) {computation = \"mul\", dimensions = [1]} : f32[2]\n"
      "  %9 = argmax(%0) {dimension = 0, index_dtype = \"i64\"} : i64[3]\n"
      "  %10 = reduce_window(%0, %1) {base_dilations = [1, 1], computation = \"max\", "
      "padding = [0, 0, 1, 1], window_dilations = [1, 1], window_dimensions = [2, 2], "
      "window_strides = [1, 2]} : f32[1,2]\n"
      "  return %2, %3, %4, %5, %6, %7, %8, %9, %10\n"
      "}\n";
  const Graph g = parse_graph(text);
  EXPECT_EQ(g.num_nodes(), 9);
  EXPECT_EQ(expect_round_trip(g), text);
}

TEST(TextBuiltinTest, RoundTripsConvolutionIndexingAndRandomOps) {
  const std::string text =
      "func @rest(%0: f32[1,4,4,2], %1: f32[3,3,2,5], %2: f32[5,3], %3: i32[2,1], %4: u64[2]) "
      "-> (f32[1,2,2,5], f32[2,3], f32[5,3], u64[2], u32[4]) {\n"
      "  %5 = convolution(%0, %1) {batch_group_count = 1, feature_group_count = 1, "
      "input_batch_dimension = 0, input_feature_dimension = 3, input_spatial_dimensions = [1, 2], "
      "kernel_input_feature_dimension = 2, kernel_output_feature_dimension = 3, "
      "kernel_spatial_dimensions = [0, 1], lhs_dilation = [1, 1], output_batch_dimension = 0, "
      "output_feature_dimension = 3, output_spatial_dimensions = [1, 2], "
      "padding = [1, 1, 1, 1], rhs_dilation = [1, 1], window_strides = [2, 2]} : f32[1,2,2,5]\n"
      "  %6 = gather(%2, %3) {collapsed_slice_dims = [0], index_vector_dim = 1, "
      "indices_are_sorted = false, offset_dims = [1], slice_sizes = [1, 3], "
      "start_index_map = [0]} : f32[2,3]\n"
      "  %7 = scatter(%2, %3, %6) {computation = \"add\", index_vector_dim = 1, "
      "indices_are_sorted = false, inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], unique_indices = true, update_window_dims = [1]} "
      ": f32[5,3]\n"
      "  %8, %9 = rng_bit_generator(%4) {algorithm = \"THREE_FRY\", dtype = \"u32\", "
      "shape = [4]} : u64[2], u32[4]\n"
      "  return %5, %6, %7, %8, %9\n"
      "}\n";
  const Graph g = parse_graph(text);
  EXPECT_EQ(g.num_nodes(), 4);
  EXPECT_EQ(expect_round_trip(g), text);
}

/// The issue's acceptance graph: a 2-layer MLP forward pass with log_softmax, built directly.
Graph mlp_graph() {
  Graph g("mlp");
  ValueId x = g.add_parameter({{4, 8}, DType::kF32});
  ValueId w1 = g.add_parameter({{8, 16}, DType::kF32});
  ValueId b1 = g.add_parameter({{16}, DType::kF32});
  ValueId w2 = g.add_parameter({{16, 3}, DType::kF32});
  const Attributes matmul{{"lhs_batching_dimensions", std::vector<int64_t>{}},
                          {"rhs_batching_dimensions", std::vector<int64_t>{}},
                          {"lhs_contracting_dimensions", std::vector<int64_t>{1}},
                          {"rhs_contracting_dimensions", std::vector<int64_t>{0}}};
  auto broadcast = [&](ValueId v, std::vector<int64_t> dims, std::vector<int64_t> shape) {
    return g.add_node("broadcast_in_dim", {v},
                      {{"broadcast_dimensions", std::move(dims)}, {"shape", std::move(shape)}})[0];
  };
  auto scalar = [&](double v) { return g.add_node("constant", {}, {{"value", Array::scalar(v, DType::kF32)}})[0]; };
  auto reduce = [&](ValueId v, ValueId init, const char* computation) {
    return g.add_node("reduce", {v, init},
                      {{"dimensions", std::vector<int64_t>{1}}, {"computation", std::string(computation)}})[0];
  };
  ValueId h = g.add_node("dot_general", {x, w1}, matmul)[0];
  h = g.add_node("add", {h, broadcast(b1, {1}, {4, 16})})[0];
  ValueId zero = scalar(0.0);
  h = g.add_node("maximum", {h, broadcast(zero, {}, {4, 16})})[0];
  ValueId logits = g.add_node("dot_general", {h, w2}, matmul)[0];
  ValueId max = reduce(logits, scalar(-INFINITY), "max");
  ValueId shifted = g.add_node("subtract", {logits, broadcast(max, {0}, {4, 3})})[0];
  ValueId sum = reduce(g.add_node("exponential", {shifted})[0], zero, "add");
  ValueId log_sum = g.add_node("log", {sum})[0];
  g.set_outputs({g.add_node("subtract", {shifted, broadcast(log_sum, {0}, {4, 3})})[0]});
  return g;
}

TEST(TextBuiltinTest, MlpForwardPassParsesBackToAnIdenticalGraph) {
  const Graph g = mlp_graph();
  const std::string text = print_graph(g);
  const std::string mm =
      "{lhs_batching_dimensions = [], lhs_contracting_dimensions = [1], "
      "rhs_batching_dimensions = [], rhs_contracting_dimensions = [0]}";
  EXPECT_EQ(text,
            "func @mlp(%0: f32[4,8], %1: f32[8,16], %2: f32[16], %3: f32[16,3]) -> (f32[4,3]) {\n"
            "  %4 = dot_general(%0, %1) " +
                mm +
                " : f32[4,16]\n"
                "  %5 = broadcast_in_dim(%2) {broadcast_dimensions = [1], shape = [4, 16]}"
                " : f32[4,16]\n"
                "  %6 = add(%4, %5) : f32[4,16]\n"
                "  %7 = constant() {value = dense<0.0> : f32[]} : f32[]\n"
                "  %8 = broadcast_in_dim(%7) {broadcast_dimensions = [], shape = [4, 16]} : f32[4,16]\n"
                "  %9 = maximum(%6, %8) : f32[4,16]\n"
                "  %10 = dot_general(%9, %3) " +
                mm +
                " : f32[4,3]\n"
                "  %11 = constant() {value = dense<-inf> : f32[]} : f32[]\n"
                "  %12 = reduce(%10, %11) {computation = \"max\", dimensions = [1]} : f32[4]\n"
                "  %13 = broadcast_in_dim(%12) {broadcast_dimensions = [0], shape = [4, 3]}"
                " : f32[4,3]\n"
                "  %14 = subtract(%10, %13) : f32[4,3]\n"
                "  %15 = exponential(%14) : f32[4,3]\n"
                "  %16 = reduce(%15, %7) {computation = \"add\", dimensions = [1]} : f32[4]\n"
                "  %17 = log(%16) : f32[4]\n"
                "  %18 = broadcast_in_dim(%17) {broadcast_dimensions = [0], shape = [4, 3]}"
                " : f32[4,3]\n"
                "  %19 = subtract(%14, %18) : f32[4,3]\n"
                "  return %19\n"
                "}\n");
  const Graph back = parse_graph(text);
  EXPECT_TRUE(back == g);
  EXPECT_EQ(print_graph(back), text);
  EXPECT_NO_THROW(back.verify());

  // Both graphs compute the same log_softmax: bitwise equal results, rows of exp summing to 1.
  std::vector<Array> args;
  for (ValueId p : g.parameters()) {
    std::vector<double> v(static_cast<size_t>(num_elements(g.type(p).shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 7) * 0.25 - 0.75;
    args.push_back(Array::from_doubles(v, g.type(p).shape, DType::kF32));
  }
  const Array a = interp::interpret(g, args).at(0);
  const Array b = interp::interpret(back, args).at(0);
  EXPECT_TRUE(a.bitwise_equal(b));
  const std::vector<float> out = a.to_vector<float>();
  for (size_t row = 0; row < 4; ++row) {
    double sum = 0;
    for (size_t j = 0; j < 3; ++j) sum += std::exp(static_cast<double>(out[row * 3 + j]));
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << row;
  }
}

}  // namespace
}  // namespace ingot::ir
