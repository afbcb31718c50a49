// Compiled-vs-interpreter parity for the core ops and for whole graphs (MLP forward and its
// value_and_grad).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "parity.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_parity;
using testing::random_array;

ir::Graph unary_graph(const std::string& op, ir::TensorType t) {
  ir::Graph g(op);
  ir::ValueId x = g.add_parameter(t);
  g.set_outputs(g.add_node(op, {x}));
  return g;
}

TEST(ParityElementwise, FloatUnaryOps) {
  for (DType d : {DType::kF32, DType::kF64}) {
    for (const char* op : {"negate", "abs", "sign", "exponential", "tanh", "logistic", "sine", "cosine", "floor",
                           "ceil", "round_nearest_even", "erf"}) {
      SCOPED_TRACE(op);
      ir::Graph g = unary_graph(op, {{3, 5}, d});
      expect_parity(g, {random_array({3, 5}, d, 1)}, 4e-7);
    }
    for (const char* op : {"log", "sqrt", "rsqrt", "log_plus_one", "exponential_minus_one"}) {
      SCOPED_TRACE(op);
      ir::Graph g = unary_graph(op, {{17}, d});
      expect_parity(g, {random_array({17}, d, 2, 0.0, 3.0)}, 4e-7);
    }
  }
}

TEST(ParityElementwise, EdgeValues) {
  Array x = Array::from_vector<float>({0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 2.5f, -2.5f}, {9});
  for (const char* op :
       {"negate", "abs", "sign", "exponential", "log", "sqrt", "tanh", "logistic", "round_nearest_even", "is_finite"}) {
    SCOPED_TRACE(op);
    expect_parity(unary_graph(op, {{9}, DType::kF32}), {x}, 4e-7);
  }
}

TEST(ParityElementwise, BinaryOpsAllDtypes) {
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kI8, DType::kU32}) {
    for (const char* op : {"add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum"}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)));
      ir::Graph g(op);
      ir::ValueId a = g.add_parameter({{4, 9}, d}), b = g.add_parameter({{4, 9}, d});
      g.set_outputs(g.add_node(op, {a, b}));
      Array y = random_array({4, 9}, d, 4, -5, 5);
      if (!is_floating(d)) {  // include division by zero and INT_MIN / -1 style edge cases
        y = Array::from_doubles(std::vector<double>(36, 0.0), {4, 9}, d);
        std::vector<double> v = random_array({4, 9}, d, 4, -5, 5).to_doubles();
        v[0] = 0;
        y = Array::from_doubles(v, {4, 9}, d);
      }
      expect_parity(g, {random_array({4, 9}, d, 3, -100, 100), y}, is_floating(d) ? 1e-15 : 0);
    }
  }
}

TEST(ParityElementwise, CompareSelectClampConvert) {
  ir::Graph g("mix");
  ir::ValueId a = g.add_parameter({{2, 7}, DType::kF32}), b = g.add_parameter({{2, 7}, DType::kF32});
  std::vector<ir::ValueId> outs;
  for (const char* dir : {"EQ", "NE", "LT", "LE", "GT", "GE"}) {
    outs.push_back(g.add_node("compare", {a, b}, {{"comparison_direction", std::string(dir)}})[0]);
  }
  ir::ValueId p = outs[2];
  outs.push_back(g.add_node("select", {p, a, b})[0]);
  outs.push_back(g.add_node("clamp", {b, a, b})[0]);
  for (DType to : {DType::kI32, DType::kU8, DType::kI64, DType::kF16, DType::kBF16, DType::kF64, DType::kBool}) {
    outs.push_back(g.add_node("convert", {a}, {{"dtype", std::string(dtype_name(to))}})[0]);
  }
  g.set_outputs(outs);
  Array x = Array::from_vector<float>(
      {0, 1.5f, -1.5f, NAN, 3e9f, -3e9f, 255.9f, 256.5f, -0.7f, 1e-3f, INFINITY, -2, 2, 7}, {2, 7});
  expect_parity(g, {x, random_array({2, 7}, DType::kF32, 9)});
}

TEST(ParityStructural, BroadcastReshapeTransposeSliceConcatReverse) {
  ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        Tensor x = a[0];                           // (2, 3, 4)
        Tensor b = broadcast_to(a[1], {2, 3, 4});  // (4,) -> (2, 3, 4)
        Tensor t = transpose(x + b, {2, 0, 1});    // (4, 2, 3)
        Tensor r = reshape(t, {8, 3});
        Tensor s = slice(r, {1, 0}, {8, 3}, {2, 2});                  // (4, 2)
        Tensor c = concatenate({s, s * 2.0, reverse(s, {0, 1})}, 1);  // (4, 6)
        return std::vector<Tensor>{c, reshape(sum(x), {1, 1})};
      },
      {{{2, 3, 4}, DType::kF32}, {{4}, DType::kF32}});
  expect_parity(g, {random_array({2, 3, 4}, DType::kF32, 5), random_array({4}, DType::kF32, 6)}, 1e-6);
}

TEST(ParityStructural, ReductionsAndDotAcrossDtypes) {
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(d));
    ir::Graph g = trace(
        [](const std::vector<Tensor>& a) {
          DotDimensions batched{{0}, {0}, {2}, {1}};
          return std::vector<Tensor>{sum(a[0], {1}), max(a[0], {0, 2}), min(a[0]), dot_general(a[0], a[1], batched),
                                     matmul(a[0], a[1])};
        },
        {{{2, 3, 5}, d}, {{2, 5, 4}, d}});
    expect_parity(g, {random_array({2, 3, 5}, d, 7, -3, 3), random_array({2, 5, 4}, d, 8, -3, 3)},
                  is_floating(d) ? 1e-5 : 0);
  }
}

TEST(ParityGraphs, MlpForwardAndValueAndGrad) {
  TraceFn loss = [](const std::vector<Tensor>& a) {
    Tensor h = relu(matmul(a[0], a[1]) + a[2]);
    Tensor logits = matmul(h, a[3]) + a[4];
    Tensor onehot = one_hot(a[5], 10, DType::kF32);
    return std::vector<Tensor>{mean(negate(sum(onehot * log_softmax(logits), {1})))};
  };
  std::vector<ir::TensorType> types = {{{16, 32}, DType::kF32}, {{32, 24}, DType::kF32}, {{24}, DType::kF32},
                                       {{24, 10}, DType::kF32}, {{10}, DType::kF32},     {{16}, DType::kI32}};
  std::vector<Array> args = {random_array({16, 32}, DType::kF32, 1), random_array({32, 24}, DType::kF32, 2, -0.3, 0.3),
                             random_array({24}, DType::kF32, 3),     random_array({24, 10}, DType::kF32, 4, -0.3, 0.3),
                             random_array({10}, DType::kF32, 5),     random_array({16}, DType::kI32, 6, 0, 9)};
  ir::Graph forward = trace(loss, types, "mlp_loss");
  expect_parity(forward, args, 1e-5);
  expect_parity(value_and_grad_graph(forward, {1, 2, 3, 4}), args, 1e-5);
}

TEST(Lowering, MissingLoweringIsANamedError) {
  // Every built-in op has a lowering, so the error path is exercised through a registry holding a
  // copy of `add` without one.
  ir::OpRegistry registry;
  ir::OpDef def = ir::OpRegistry::builtin().get("add");
  ASSERT_TRUE(static_cast<bool>(def.lower));
  def.lower = nullptr;
  registry.add(def);
  ir::Graph g("unlowered", &registry);
  ir::ValueId a = g.add_parameter({{3}, DType::kF32}), b = g.add_parameter({{3}, DType::kF32});
  g.set_outputs(g.add_node("add", {a, b}));
  testing::expect_error([&] { lower::lower_to_mlir(g); }, ErrorCode::kUnimplemented, {"no lowering for op 'add'"});
  testing::expect_error([&] { compile_graph(g); }, ErrorCode::kUnimplemented, {"no lowering for op 'add'"});
}

TEST(Lowering, EveryBuiltinOpHasALowering) {
  for (const std::string& name : ir::OpRegistry::builtin().names()) {
    EXPECT_TRUE(static_cast<bool>(ir::OpRegistry::builtin().get(name).lower)) << name;
  }
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// Regressions of the removed affine vectoriser: a reversed innermost dim, a reduction over a
// size-1 dim, and bool constants.
TEST(ParityStructural, ReverseLastDimReduceSizeOneDimBoolConstants) {
  ir::Graph g = trace(
      [](const std::vector<Tensor>& a) {
        Tensor flags = constant(Array::from_vector<bool>({true, false, true}, {3}));
        return std::vector<Tensor>{reverse(a[0], {1}), sum(a[1], {1}),
                                   where(broadcast_to(reshape(flags, {3, 1}), {3, 20}), a[0], a[0] * 2.0),
                                   logical_not(flags)};
      },
      {{{3, 20}, DType::kF32}, {{3, 1}, DType::kF32}});
  testing::expect_parity(
      g, {testing::random_array({3, 20}, DType::kF32, 1), testing::random_array({3, 1}, DType::kF32, 2)});
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// Matrix products through BLAS (the default) and through generated loops, every transpose
// combination, against the interpreter (BLAS sums in another order: rtol 1e-5 for f32).
TEST(ParityGemm, BlasAndGeneratedLoopsMatchTheInterpreter) {
  for (DType d : {DType::kF32, DType::kF64}) {
    for (int64_t lc : {0, 1}) {
      for (int64_t rc : {0, 1}) {
        SCOPED_TRACE(fmt::format("{} lc={} rc={}", dtype_name(d), lc, rc));
        const Shape ls = lc == 1 ? Shape{7, 13} : Shape{13, 7};
        const Shape rs = rc == 0 ? Shape{13, 9} : Shape{9, 13};
        ir::Graph g("gemm");
        ir::ValueId a = g.add_parameter({ls, d}), b = g.add_parameter({rs, d});
        g.set_outputs(g.add_node("dot_general", {a, b},
                                 {{"lhs_contracting_dimensions", std::vector<int64_t>{lc}},
                                  {"rhs_contracting_dimensions", std::vector<int64_t>{rc}}}));
        std::vector<Array> args = {testing::random_array(ls, d, 1), testing::random_array(rs, d, 2)};
        std::vector<Array> want = interp::interpret(g, args);
        for (bool blas : {true, false}) {
          std::vector<Array> got = compile_graph(g, {}, {}, {.blas_gemm = blas})->run(args);
          testing::expect_values(got[0], want[0].to_doubles(), d == DType::kF32 ? 1e-5 : 1e-12);
        }
        EXPECT_NE(lower::lower_to_mlir(g).find("ingot_cpu_gemm"), std::string::npos);
      }
    }
  }
  // Higher-rank operands whose contracting dims are a leading or trailing group go through GEMM
  // on 2-D views: Dense on (batch, T, features), its weight and input gradients, vector products;
  // contracting dims in the middle keep the loops.
  struct Case {
    Shape ls, rs;
    std::vector<int64_t> lc, rc;
    bool gemm;
  };
  const std::vector<Case> cases = {{{2, 3, 5}, {5, 4}, {2}, {0}, true}, {{2, 3, 5}, {2, 3, 4}, {0, 1}, {0, 1}, true},
                                   {{2, 3, 4}, {5, 4}, {2}, {1}, true}, {{5}, {5, 4}, {0}, {0}, true},
                                   {{4, 5}, {5}, {1}, {0}, true},       {{3, 2, 5}, {4, 3, 2}, {0, 1}, {1, 2}, true},
                                   {{2, 5, 3}, {5, 4}, {1}, {0}, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} x {}", shape_to_string(c.ls), shape_to_string(c.rs)));
    ir::Graph g("gemm_nd");
    ir::ValueId a = g.add_parameter({c.ls, DType::kF32}), b = g.add_parameter({c.rs, DType::kF32});
    g.set_outputs(g.add_node("dot_general", {a, b},
                             {{"lhs_contracting_dimensions", c.lc}, {"rhs_contracting_dimensions", c.rc}}));
    std::vector<Array> args = {testing::random_array(c.ls, DType::kF32, 3),
                               testing::random_array(c.rs, DType::kF32, 4)};
    const std::vector<Array> want = interp::interpret(g, args);
    for (bool blas : {true, false}) {
      testing::expect_values(compile_graph(g, {}, {}, {.blas_gemm = blas})->run(args)[0], want[0].to_doubles(), 1e-5);
    }
    EXPECT_EQ(lower::lower_to_mlir(g).find("ingot_cpu_gemm") != std::string::npos, c.gemm);
  }
  // k = 0: zeros.
  ir::Graph g("gemm0");
  ir::ValueId a = g.add_parameter({{3, 0}, DType::kF32}), b = g.add_parameter({{0, 4}, DType::kF32});
  g.set_outputs(g.add_node("dot_general", {a, b},
                           {{"lhs_contracting_dimensions", std::vector<int64_t>{1}},
                            {"rhs_contracting_dimensions", std::vector<int64_t>{0}}}));
  testing::expect_parity(g, {Array::zeros({3, 0}, DType::kF32), Array::zeros({0, 4}, DType::kF32)});
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// f16/bf16 math ops are computed in f32 and rounded once, bitwise as the interpreter (found by a
// review: emulate-floats widens arith ops only, so math ops and composite formulas rounded
// every intermediate).
TEST(ParityGemm, ConvertedOperandsAndTheirGradients) {
  // A float32 model fed f64 data: the step converts x first; the weight gradient reads the
  // converted x again (x^T g). CSE used to merge the two GEMMs' reads of x, so bufferization
  // reused x's buffer for the loss gradient before the second GEMM read it (the weight gradient
  // came out as the loss). LoweringContext::library_read tags each read.
  TraceFn loss = [](const std::vector<Tensor>& a) {
    const Tensor x = convert(a[2], DType::kF32);
    const Tensor pred = matmul(x, a[0]) + a[1];
    return std::vector<Tensor>{mean(square(pred - a[3]))};
  };
  const ir::Graph g =
      trace(value_and_grad(loss, {0, 1}),
            {{{1, 1}, DType::kF32}, {{1}, DType::kF32}, {{4, 1}, DType::kF64}, {{4, 1}, DType::kF32}}, "cvt");
  const std::vector<Array> args = {
      Array::from_doubles({0.5}, {1, 1}, DType::kF32), Array::from_doubles({0}, {1}, DType::kF32),
      Array::from_doubles({1, 2, 3, 4}, {4, 1}, DType::kF64), Array::from_doubles({3, 5, 7, 9}, {4, 1}, DType::kF32)};
  expect_parity(g, args, 1e-6);
  expect_parity(g, args, 1e-6, lower::LoweringOptions{.blas_gemm = false});
}

TEST(ParityGemm, BatchedProductsCallTheBatchedLibraryGemm) {
  // Batch dims leading both operands (attention's (batch, heads) products), with either operand
  // transposed, f32 and f64: the library path (one GEMM per batch element) equals the
  // interpreter; the lowering emits the batched call.
  struct Case {
    Shape lhs, rhs;
    std::vector<int64_t> lc, rc;
  };
  const std::vector<Case> cases = {{{2, 3, 5, 4}, {2, 3, 4, 6}, {3}, {2}},   // (5x4)(4x6)
                                   {{2, 3, 5, 4}, {2, 3, 6, 4}, {3}, {3}},   // Q K^T
                                   {{2, 3, 4, 5}, {2, 3, 4, 6}, {2}, {2}}};  // A^T B
  for (DType dt : {DType::kF32, DType::kF64}) {
    for (const Case& c : cases) {
      const ir::Graph g = trace(
          [&](const std::vector<Tensor>& a) {
            return std::vector<Tensor>{dot_general(
                a[0], a[1],
                {.lhs_batching = {0, 1}, .rhs_batching = {0, 1}, .lhs_contracting = c.lc, .rhs_contracting = c.rc})};
          },
          {{c.lhs, dt}, {c.rhs, dt}}, "bmm");
      EXPECT_NE(lower::lower_to_mlir(g).find("ingot_cpu_gemm_batched_"), std::string::npos);
      testing::expect_parity(g, {testing::random_array(c.lhs, dt, 1), testing::random_array(c.rhs, dt, 2)},
                             dt == DType::kF32 ? 1e-5 : 1e-12);
    }
  }
}

TEST(ParityElementwise, HalfTypesComputeInF32AndRoundOnce) {
  for (DType d : {DType::kF16, DType::kBF16}) {
    for (const char* op : {"logistic", "rsqrt", "log_plus_one", "exponential_minus_one", "exponential", "tanh", "sine",
                           "erf", "sign", "is_finite"}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)));
      const bool positive = std::string(op) == "rsqrt";
      expect_parity(unary_graph(op, {{64}, d}), {random_array({64}, d, 3, positive ? 0.1 : -3, 3)});
    }
    for (const char* op : {"power", "atan2", "remainder", "divide"}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)));
      ir::Graph g(op);
      ir::ValueId a = g.add_parameter({{33}, d}), b = g.add_parameter({{33}, d});
      g.set_outputs(g.add_node(op, {a, b}));
      expect_parity(g, {random_array({33}, d, 4, 0.5, 3), random_array({33}, d, 5, 0.5, 3)});
    }
  }
}

TEST(Donation, RepeatedOutputIsNotPairedWithADonatedArgument) {
  Jitted f = jit(
      [](const std::vector<Tensor>& a) {
        Tensor y = a[0] * a[0];
        return std::vector<Tensor>{y, y};
      },
      {.name = "repeat", .donate_argnums = {0}});
  Array x = Array::from_vector<float>({1, 2, 3}, {3});
  std::vector<Array> out = f({x});
  EXPECT_TRUE(x.donated());
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{1, 4, 9}));
}

TEST(CpuCompilerErrors, UnwritableDumpDirectoryIsAClearError) {
  ir::Graph g = unary_graph("negate", {{2}, DType::kF32});
  testing::expect_error([&] { compile_graph(g, {.dump_dir = "/proc/ingot-no-such-dir"}); }, ErrorCode::kInvalidArgument,
                        {"cannot create the dump directory", "/proc/ingot-no-such-dir"});
}

}  // namespace
}  // namespace ingot
