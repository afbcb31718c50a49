// Traced graphs run with the reference interpreter, against values computed by hand or in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

#include "ingot/interp/interpreter.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_values;
using testing::f32;
using testing::i32;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

ir::Graph trace_for(const Fn& fn, const std::vector<Array>& args) {
  std::vector<ir::TensorType> types;
  for (const Array& a : args) types.push_back({a.shape(), a.dtype()});
  return trace([&](const std::vector<Tensor>& t) { return std::vector<Tensor>{fn(t)}; }, types);
}

/// Traces `fn` over arguments of `args`' types and interprets it on `args`.
Array run(const Fn& fn, const std::vector<Array>& args) { return interp::interpret(trace_for(fn, args), args).at(0); }

Array f64(const std::vector<double>& v, const Shape& shape) { return Array::from_vector<double>(v, shape); }

// ---- elementwise and broadcasting -----------------------------------------------------------

TEST(TraceNumeric, BroadcastingArithmetic) {
  Array a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = f32({10, 20, 30});
  expect_values(run([](auto& t) { return t[0] + t[1]; }, {a, b}), {11, 22, 33, 14, 25, 36});
  Array col = f32({1, 2, 3}, {3, 1});
  Array row = f32({10, 100}, {1, 2});
  Array outer = run([](auto& t) { return t[0] * t[1]; }, {col, row});
  EXPECT_EQ(outer.shape(), (Shape{3, 2}));
  expect_values(outer, {10, 100, 20, 200, 30, 300});
  expect_values(run([](auto& t) { return 2.0 / (t[0] - 1.5); }, {f32({2.5f, 1.5f, 0.5f})}), {2, kInf, -2});
  expect_values(run([](auto& t) { return 1.0 - t[0] * 0.5; }, {f32({4, -2})}), {-1, 2});
  // A scalar tensor broadcasts against everything.
  expect_values(run([](auto& t) { return maximum(t[0], t[1]); }, {f32({1, 5, -3}), f32({2}, {})}), {2, 5, 2});
}

TEST(TraceNumeric, ScalarOperandsTakeTheTensorDType) {
  // Integer arithmetic wraps; the scalar became an i32 constant.
  Array x = i32({std::numeric_limits<int32_t>::max(), -7});
  Array r = run([](auto& t) { return t[0] + 1.0; }, {x});
  EXPECT_EQ(r.dtype(), DType::kI32);
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -6}));
  // bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and rounds to even (1).
  Array h = Array::from_doubles({1.0, 2.0}, {2}, DType::kBF16);
  Array s = run([](auto& t) { return t[0] + 0.00390625; }, {h});
  EXPECT_EQ(s.dtype(), DType::kBF16);
  expect_values(s, {1.0, 2.0});
}

TEST(TraceNumeric, WhereClampAndComparisons) {
  Array x = f32({-2, -0.5f, 0.5f, 3});
  expect_values(run([](auto& t) { return clamp(t[0], -1.0, 1.0); }, {x}), {-1, -0.5, 0.5, 1});
  expect_values(run([](auto& t) { return where(greater(t[0], zeros_like(t[0])), t[0], -t[0]); }, {x}),
                {2, 0.5, 0.5, 3});
  // Row-wise bounds broadcast against x (2, 2).
  Array m = f32({-5, 5, -5, 5}, {2, 2});
  expect_values(run([](auto& t) { return clamp(t[0], t[1], t[2]); }, {m, f32({-1, 0}, {2, 1}), f32({1, 2}, {2, 1})}),
                {-1, 1, 0, 2});
  Array eq = run([](auto& t) { return equal(t[0], t[1]); }, {f32({1, kInfF, std::nanf("")}), f32({1}, {})});
  EXPECT_EQ(eq.to_vector<bool>(), (std::vector<bool>{true, false, false}));
}

TEST(TraceNumeric, ReciprocalSquareAndRelu) {
  expect_values(run([](auto& t) { return reciprocal(t[0]); }, {f32({2, -4, 0})}), {0.5, -0.25, kInf});
  expect_values(run([](auto& t) { return square(t[0]); }, {f32({-3, 0.5f})}), {9, 0.25});
  expect_values(run([](auto& t) { return relu(t[0]); }, {f32({-1, 0, 2, std::nanf("")})}), {0, 0, 2, kNaN});
}

// ---- composites --------------------------------------------------------------------------

TEST(TraceNumeric, GeluBothForms) {
  const std::vector<double> xs = {-3, -1, 0, 0.5, 2};
  std::vector<double> tanh_form, erf_form;
  for (double x : xs) {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    tanh_form.push_back(0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))));
    erf_form.push_back(0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
  }
  Array in = f64(xs, {5});
  expect_values(run([](auto& t) { return gelu(t[0]); }, {in}), tanh_form, 1e-15);
  expect_values(run([](auto& t) { return gelu(t[0], false); }, {in}), erf_form, 1e-15);
  // Published values (jax.nn.gelu): gelu(1) = 0.8411919906082768 (tanh), 0.8413447460685429
  // (erf, = Phi(1)); gelu(-3) = -0.0036373920817729943 (tanh), -0.00404969409489031 (erf).
  Array pts = f64({1, -3}, {2});
  expect_values(run([](auto& t) { return gelu(t[0], true); }, {pts}), {0.8411919906082768, -0.0036373920817729943},
                1e-15);
  expect_values(run([](auto& t) { return gelu(t[0], false); }, {pts}), {0.8413447460685429, -0.00404969409489031},
                1e-15);
  // f32 at the same points.
  expect_values(run([](auto& t) { return gelu(t[0], false); }, {f32({1, -3})}),
                {0.8413447460685429, -0.00404969409489031}, 1e-6);
}

TEST(TraceNumeric, SiluAndSoftplusStableAtLargeMagnitudes) {
  expect_values(run([](auto& t) { return silu(t[0]); }, {f64({0, 1, -1}, {3})}),
                {0, 1 / (1 + std::exp(-1.0)), -1 / (1 + std::exp(1.0))}, 1e-15);
  Array r = run([](auto& t) { return softplus(t[0]); }, {f64({1000, -1000, 0, -30, 30}, {5})});
  std::vector<double> got = r.to_doubles();
  EXPECT_EQ(got[0], 1000.0);  // log(1 + exp(1000)) would overflow
  EXPECT_EQ(got[1], 0.0);
  EXPECT_NEAR(got[2], std::log(2.0), 1e-16);
  EXPECT_NEAR(got[3] / 9.357622968839737e-14, 1.0, 1e-14);  // log1p(exp(-30)), no cancellation
  EXPECT_NEAR(got[4], 30.000000000000092, 1e-13);
  // f32: exp(89) overflows, softplus(89) does not.
  expect_values(run([](auto& t) { return softplus(t[0]); }, {f32({89, -89})}), {89, 0}, 1e-30);
}

TEST(TraceNumeric, SoftmaxRowsSumToOneAndMatchTheFormula) {
  const std::vector<float> v = {1, 2, 3, 0.5f, -1, 4, 1000, 1001, 1002};
  Array r = run([](auto& t) { return softmax(t[0]); }, {f32(v, {3, 3})});
  std::vector<double> got = r.to_doubles();
  for (int row = 0; row < 3; ++row) {
    double m = -kInf, total = 0, sum_got = 0;
    for (int j = 0; j < 3; ++j) m = std::max(m, double(v[row * 3 + j]));
    for (int j = 0; j < 3; ++j) total += std::exp(v[row * 3 + j] - m);
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(got[row * 3 + j], std::exp(v[row * 3 + j] - m) / total, 1e-6);
      sum_got += got[row * 3 + j];
    }
    EXPECT_NEAR(sum_got, 1.0, 1e-6);
  }
  // Along axis 0 the columns sum to one.
  Array c = run([](auto& t) { return sum(softmax(t[0], 0), {0}); }, {f32(v, {3, 3})});
  expect_values(c, {1, 1, 1}, 1e-6);
}

TEST(TraceNumeric, LogSoftmaxIsStable) {
  const double ln2 = std::log(2.0);
  expect_values(run([](auto& t) { return log_softmax(t[0]); }, {f32({1000, 1000})}), {-ln2, -ln2}, 1e-6);
  expect_values(run([](auto& t) { return log_softmax(t[0]); }, {f32({-kInfF, 0})}), {-kInf, 0});
  // All -inf: undefined, NaN as in JAX.
  expect_values(run([](auto& t) { return log_softmax(t[0]); }, {f32({-kInfF, -kInfF})}), {kNaN, kNaN});
  // Equals log(softmax) where that is representable.
  Array x = f64({0.5, -2, 3, 1}, {2, 2});
  Array a = run([](auto& t) { return log_softmax(t[0], 0); }, {x});
  Array b = run([](auto& t) { return log(softmax(t[0], 0)); }, {x});
  expect_values(a, b.to_doubles(), 1e-14);
}

TEST(TraceNumeric, LogSumExpHandlesInfinitiesAndNaN) {
  expect_values(run([](auto& t) { return logsumexp(t[0]); }, {f32({1000, 1000})}), {1000 + std::log(2.0)}, 1e-4);
  expect_values(run([](auto& t) { return logsumexp(t[0]); }, {f32({-kInfF, -kInfF})}), {-kInf});
  expect_values(run([](auto& t) { return logsumexp(t[0]); }, {f32({kInfF, 1})}), {kInf});
  expect_values(run([](auto& t) { return logsumexp(t[0]); }, {f32({std::nanf(""), 1})}), {kNaN});
  Array x = f64({1, 2, 3, -1, -kInf, 0}, {2, 3});
  Array rows = run([](auto& t) { return logsumexp(t[0], {-1}, true); }, {x});
  EXPECT_EQ(rows.shape(), (Shape{2, 1}));
  expect_values(rows, {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), std::log(std::exp(-1.0) + 1.0)}, 1e-14);
  // Empty reduction: log(0) = -inf.
  expect_values(run([](auto& t) { return logsumexp(t[0], {0}); }, {f32({}, {0, 2})}), {-kInf, -kInf});
}

TEST(TraceNumeric, MeanAndVariance) {
  Array x = f64({1, 2, 3, 4, 6, 8}, {2, 3});
  expect_values(run([](auto& t) { return mean(t[0]); }, {x}), {4});
  expect_values(run([](auto& t) { return mean(t[0], {1}); }, {x}), {2, 6});
  Array k = run([](auto& t) { return mean(t[0], {0}, true); }, {x});
  EXPECT_EQ(k.shape(), (Shape{1, 3}));
  expect_values(k, {2.5, 4, 5.5});
  // population variance: rows (1,2,3) -> 2/3, (4,6,8) -> 8/3; all -> mean 4, var 40/6.
  expect_values(run([](auto& t) { return variance(t[0], {1}); }, {x}), {2.0 / 3, 8.0 / 3}, 1e-15);
  expect_values(run([](auto& t) { return variance(t[0]); }, {x}), {34.0 / 6}, 1e-14);
  // Mean over an empty axis is 0 / 0.
  expect_values(run([](auto& t) { return mean(t[0], {0}); }, {f32({}, {0, 2})}), {kNaN, kNaN});
}

// ---- reductions --------------------------------------------------------------------------

TEST(TraceNumeric, Reductions) {
  Array x = f32({1, -2, 3, 4, 5, -6}, {2, 3});
  expect_values(run([](auto& t) { return sum(t[0], {0}); }, {x}), {5, 3, -3});
  expect_values(run([](auto& t) { return max(t[0], {1}); }, {x}), {3, 5});
  expect_values(run([](auto& t) { return min(t[0]); }, {x}), {-6});
  expect_values(run([](auto& t) { return prod(t[0], {-1}); }, {x}), {-6, -120});
  // Empty reductions give the init: -inf / +inf / 0 / 1.
  Array e = f32({}, {0, 2});
  expect_values(run([](auto& t) { return max(t[0], {0}); }, {e}), {-kInf, -kInf});
  expect_values(run([](auto& t) { return min(t[0], {0}); }, {e}), {kInf, kInf});
  expect_values(run([](auto& t) { return sum(t[0], {0}); }, {e}), {0, 0});
  expect_values(run([](auto& t) { return prod(t[0], {0}); }, {e}), {1, 1});
  // Integer max starts from the lowest value.
  Array ints = i32({std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::min()});
  EXPECT_EQ(run([](auto& t) { return max(t[0]); }, {ints}).to_vector<int32_t>(),
            std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  Array b = Array::from_vector<bool>({true, false, true, true}, {2, 2});
  EXPECT_EQ(run([](auto& t) { return all(t[0], {1}); }, {b}).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(run([](auto& t) { return any(t[0], {1}, true); }, {b}).to_vector<bool>(), (std::vector<bool>{true, true}));
}

TEST(TraceNumeric, ArgmaxAndArgmin) {
  Array x = f32({1, 3, 3, 2, 1, std::nanf(""), 5, 0}, {2, 4});
  EXPECT_EQ(run([](auto& t) { return argmax(t[0], 1); }, {x}).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 1}));  // first of the tied 3s; NaN is the maximum
  EXPECT_EQ(run([](auto& t) { return argmin(t[0], -1, DType::kI64); }, {x}).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1}));  // NaN is also the minimum
  EXPECT_EQ(run([](auto& t) { return argmax(t[0], 0); }, {x}).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 0}));
}

// ---- shapes ------------------------------------------------------------------------------

TEST(TraceNumeric, ShapeFunctions) {
  Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(run([](auto& t) { return transpose(t[0]); }, {x}), {1, 4, 2, 5, 3, 6});
  expect_values(run([](auto& t) { return slice_axis(t[0], 1, 1, 3); }, {x}), {2, 3, 5, 6});
  expect_values(run([](auto& t) { return reverse(t[0], {0, 1}); }, {x}), {6, 5, 4, 3, 2, 1});
  expect_values(run([](auto& t) { return concatenate({t[0], t[0] * 10.0}, 0); }, {x}),
                {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
  Array p = run([](auto& t) { return pad(t[0], -1.0, {0, 1}, {1, 0}); }, {x});
  EXPECT_EQ(p.shape(), (Shape{3, 4}));
  expect_values(p, {-1, 1, 2, 3, -1, 4, 5, 6, -1, -1, -1, -1});
  Array r = run([](auto& t) { return reshape(t[0], {-1, 2}); }, {x});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  expect_values(r, {1, 2, 3, 4, 5, 6});
  expect_values(run([](auto& t) { return iota({2, 3}, 0, DType::kF32); }, {}), {0, 0, 0, 1, 1, 1});
}

// ---- linear algebra ----------------------------------------------------------------------

/// Reference batched matmul in double over already broadcast operands (b, m, k) x (b, k, n).
std::vector<double> ref_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t batch, int64_t m,
                               int64_t k, int64_t n) {
  std::vector<double> out(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t q = 0; q < k; ++q) out[(p * m + i) * n + j] += a[(p * m + i) * k + q] * b[(p * k + q) * n + j];
  return out;
}

TEST(TraceNumeric, MatmulTwoAndOneDimensional) {
  Array a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = f32({1, 0, 0, 1, 2, -1}, {3, 2});
  expect_values(run([](auto& t) { return matmul(t[0], t[1]); }, {a, b}), {7, -1, 16, -1});
  Array v = f32({1, -1, 2});
  Array dot = run([](auto& t) { return matmul(t[0], t[1]); }, {v, v});
  EXPECT_EQ(dot.shape(), Shape{});
  expect_values(dot, {6});
  expect_values(run([](auto& t) { return matmul(t[0], t[1]); }, {v, b}), {5, -3});
  expect_values(run([](auto& t) { return matmul(t[0], t[1]); }, {a, v}), {5, 11});
}

TEST(TraceNumeric, MatmulBatchBroadcasting) {
  // (2, 1, 2, 3) x (3, 3, 2) -> (2, 3, 2, 2)
  std::vector<double> av(12), bv(18);
  for (size_t i = 0; i < av.size(); ++i) av[i] = double(i) - 5;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = double(i % 7) * 0.5 - 1;
  Array r = run([](auto& t) { return matmul(t[0], t[1]); }, {f64(av, {2, 1, 2, 3}), f64(bv, {3, 3, 2})});
  ASSERT_EQ(r.shape(), (Shape{2, 3, 2, 2}));
  std::vector<double> a_full, b_full;  // broadcast by hand: batch (2, 3)
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      a_full.insert(a_full.end(), av.begin() + i * 6, av.begin() + i * 6 + 6);
      b_full.insert(b_full.end(), bv.begin() + j * 6, bv.begin() + j * 6 + 6);
    }
  expect_values(r, ref_matmul(a_full, b_full, 6, 2, 3, 2));
  // A batched left operand times a matrix.
  Array s = run([](auto& t) { return matmul(t[0], t[1]); }, {f64(av, {2, 2, 3}), f64({1, 2, 3, 4, 5, 6}, {3, 2})});
  std::vector<double> bm = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6};
  expect_values(s, ref_matmul(av, bm, 2, 2, 3, 2));
}

// ---- conv2d and pooling ------------------------------------------------------------------

Array grid3x3() { return f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1}); }

TEST(TraceNumeric, Conv2dValidAndSame) {
  Array k = f32({1, 2, 3, 4}, {2, 2, 1, 1});
  Array valid = run([](auto& t) { return conv2d(t[0], t[1]); }, {grid3x3(), k});
  EXPECT_EQ(valid.shape(), (Shape{1, 2, 2, 1}));
  expect_values(valid, {37, 47, 67, 77});  // correlation, no kernel flip
  Conv2DOptions same;
  same.padding = "same";  // in 3, k 2: total 1 -> pad bottom/right only
  Array s = run([&](auto& t) { return conv2d(t[0], t[1], same); }, {grid3x3(), f32({1, 1, 1, 1}, {2, 2, 1, 1})});
  EXPECT_EQ(s.shape(), (Shape{1, 3, 3, 1}));
  expect_values(s, {12, 16, 9, 24, 28, 15, 15, 17, 9});
  Conv2DOptions strided;
  strided.padding = "same";
  strided.strides = {2, 2};
  Array ones_x = f32(std::vector<float>(50, 1.0f), {2, 5, 5, 1});
  Array ones_k = f32(std::vector<float>(9 * 4, 1.0f), {3, 3, 1, 4});
  Array st = run([&](auto& t) { return conv2d(t[0], t[1], strided); }, {ones_x, ones_k});
  EXPECT_EQ(st.shape(), (Shape{2, 3, 3, 4}));  // in 5, stride 2 -> 3; pads (1, 1)
  // Output (0, 0) sees the 2x2 real corner, (1, 1) a full 3x3 window.
  EXPECT_EQ(st.element_as_double(0), 4.0);
  EXPECT_EQ(st.element_as_double((1 * 3 + 1) * 4), 9.0);
}

TEST(TraceNumeric, Conv2dChannelsAreHwio) {
  // 1x1 kernel: out[p][o] = sum_i x[p][i] * w[i][o].
  Array x = f32({1, 2, 3, 4}, {1, 1, 2, 2});  // two pixels, two channels
  Array w = f32({1, 10, 100, 2, 20, 200}, {1, 1, 2, 3});
  expect_values(run([](auto& t) { return conv2d(t[0], t[1]); }, {x, w}),
                {1 + 4, 10 + 40, 100 + 400, 3 + 8, 30 + 80, 300 + 800});
}

TEST(TraceNumeric, MaxPool) {
  Array x = f32({1, 5, 2, 0, -1, 3, 8, 7, 4, 4, -6, -5, 9, 0, -7, -8}, {1, 4, 4, 1});
  expect_values(run([](auto& t) { return max_pool2d(t[0], {2, 2}, {2, 2}); }, {x}), {5, 8, 9, -5});
  // "same" pads with -inf, so an all-negative border window keeps its own maximum.
  Array neg = f32({-1, -2, -3, -4, -5, -6, -7, -8, -9}, {1, 3, 3, 1});
  expect_values(run([](auto& t) { return max_pool2d(t[0], {2, 2}, {2, 2}, "same"); }, {neg}), {-1, -3, -7, -9});
}

TEST(TraceNumeric, AvgPoolCountsOnlyRealCells) {
  Array x = f32({1, 2, 5, 0, 3, 4, -1, 1, 0, 0, 2, 2, 8, 8, 2, 2}, {1, 4, 4, 1});
  expect_values(run([](auto& t) { return avg_pool2d(t[0], {2, 2}, {2, 2}); }, {x}), {2.5, 1.25, 4, 2});
  // 3x3 window, stride 1, "same" on 3x3: corners average 4 cells, edges 6, the centre 9.
  Array s = run([](auto& t) { return avg_pool2d(t[0], {3, 3}, {1, 1}, "same"); }, {grid3x3()});
  expect_values(s, {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}, 1e-6);
}

// ---- indexing and random -------------------------------------------------------------------

TEST(TraceNumeric, TakeGathersRowsAndClamps) {
  Array table = f32({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  Array idx = i32({3, 0, 1, 1, 7, -2}, {3, 2});
  Array r = run([](auto& t) { return take(t[0], t[1]); }, {table, idx});
  EXPECT_EQ(r.shape(), (Shape{3, 2, 2}));
  expect_values(r, {30, 31, 0, 1, 10, 11, 10, 11, 30, 31, 0, 1});
}

TEST(TraceNumeric, ScatterAddRowsAccumulatesDuplicates) {
  Array idx = Array::from_vector<int64_t>({1, 3, 1}, {3});
  Array upd = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  Array r = run([](auto& t) { return scatter_add_rows({4, 2}, t[0], t[1]); }, {idx, upd});
  expect_values(r, {0, 0, 6, 8, 0, 0, 3, 4});
}

TEST(TraceNumeric, OneHot) {
  Array r = run([](auto& t) { return one_hot(t[0], 3); }, {i32({0, 2, 5, -1})});
  EXPECT_EQ(r.shape(), (Shape{4, 3}));
  expect_values(r, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  // u8 indices with a depth beyond 255 compare in i64 (no wrap-around match at 256).
  Array u = Array::from_vector<uint8_t>({0, 255}, {2});
  Array w = run([](auto& t) { return one_hot(t[0], 300, DType::kI32); }, {u});
  std::vector<int32_t> got = w.to_vector<int32_t>();
  std::vector<int32_t> want(600, 0);
  want[0] = 1;
  want[300 + 255] = 1;
  EXPECT_EQ(got, want);
}

Array seed(uint64_t key, uint64_t counter) { return Array::from_vector<uint64_t>({key, counter}, {2}); }

TEST(TraceNumeric, RandomUniformInUnitIntervalAndDeterministic) {
  const auto uniform = [](DType dtype, int64_t n) {
    return [=](auto& t) { return random_uniform(t[0], {n}, dtype).second; };
  };
  Array a = run(uniform(DType::kF32, 4000), {seed(42, 0)});
  Array b = run(uniform(DType::kF32, 4000), {seed(42, 0)});
  Array c = run(uniform(DType::kF32, 4000), {seed(43, 0)});
  EXPECT_TRUE(a.bitwise_equal(b));
  EXPECT_FALSE(a.bitwise_equal(c));
  double total = 0;
  for (double v : a.to_doubles()) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    total += v;
  }
  EXPECT_NEAR(total / 4000, 0.5, 0.03);
  for (DType d : {DType::kF64, DType::kF16, DType::kBF16}) {
    Array r = run(uniform(d, 2000), {seed(7, 3)});
    EXPECT_EQ(r.dtype(), d);
    double lo = 1, hi = 0;
    for (double v : r.to_doubles()) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_GE(lo, 0.0) << dtype_name(d);
    EXPECT_LT(hi, 1.0) << dtype_name(d);
    EXPECT_GT(hi, 0.9) << dtype_name(d);
  }
}

TEST(TraceNumeric, RandomUniformUsesTheTopMantissaBits) {
  ir::Graph g = trace(
      [](const std::vector<Tensor>& t) {
        auto [state1, bits] = rng_bit_generator(t[0], {8}, DType::kU32);
        auto [state2, u] = random_uniform(t[0], {8}, DType::kF32);
        return std::vector<Tensor>{state1, bits, state2, u};
      },
      {{{2}, DType::kU64}});
  std::vector<Array> out = interp::interpret(g, {seed(5, 9)});
  EXPECT_TRUE(out[0].bitwise_equal(out[2]));  // the same new state
  std::vector<uint32_t> bits = out[1].to_vector<uint32_t>();
  std::vector<float> u = out[3].to_vector<float>();
  for (size_t i = 0; i < bits.size(); ++i) {
    EXPECT_EQ(u[i], std::ldexp(float(bits[i] >> 9), -23)) << i;  // float in [1, 2) minus 1
  }
}

}  // namespace
}  // namespace ingot
