// Initializers random_normal, random_uniform, orthogonal: moments and ranges of many draws,
// orthonormality of the orthogonal matrices (Q^T Q = gain^2 I), seeding, names and bad arguments.
#include <gtest/gtest.h>

#include <cmath>

#include "ingot/trainer/model.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

TEST(Initializers, RandomNormalHasTheRequestedMoments) {
  const std::vector<double> v = initializers::random_normal()({200, 200}, DType::kF32, 1).to_doubles();
  double sum = 0, sum2 = 0;
  for (double x : v) {
    sum += x;
    sum2 += x * x;
  }
  // 40000 draws: the mean's standard error is 0.05 / 200 = 2.5e-4, the stddev's ~1.8e-4.
  EXPECT_NEAR(sum / 40000, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sum2 / 40000), 0.05, 1e-3);
  const std::vector<double> w = initializers::random_normal(3.0, 0.5)({10000}, DType::kF64, 2).to_doubles();
  double m = 0;
  for (double x : w) m += x / 10000;
  EXPECT_NEAR(m, 3.0, 0.02);
  EXPECT_EQ(initializers::random_normal()({7}, DType::kF32, 5).to_doubles(),
            initializers::random_normal()({7}, DType::kF32, 5).to_doubles());
  EXPECT_NE(initializers::random_normal()({7}, DType::kF32, 5).to_doubles(),
            initializers::random_normal()({7}, DType::kF32, 6).to_doubles());
  // Keras's names "normal" and "random_normal" give the same RandomNormal(0, 0.05).
  EXPECT_EQ(initializers::get("normal")({9}, DType::kF32, 4).to_doubles(),
            initializers::random_normal()({9}, DType::kF32, 4).to_doubles());
  EXPECT_EQ(initializers::get("random_normal")({9}, DType::kF32, 4).to_doubles(),
            initializers::random_normal()({9}, DType::kF32, 4).to_doubles());
}

TEST(Initializers, RandomUniformStaysInItsRange) {
  const std::vector<double> v = initializers::get("uniform")({5000}, DType::kF32, 3).to_doubles();
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_GE(*lo, -0.05);
  EXPECT_LT(*hi, 0.05);
  EXPECT_LT(*lo, -0.049);  // 5000 draws reach near both ends
  EXPECT_GT(*hi, 0.049);
  const std::vector<double> w = initializers::random_uniform(2, 3)({100}, DType::kF64, 4).to_doubles();
  EXPECT_GE(*std::min_element(w.begin(), w.end()), 2.0);
  EXPECT_LT(*std::max_element(w.begin(), w.end()), 3.0);
}

/// (rows, cols) of the shape flattened as Keras's Orthogonal does; returns M^T M for tall M and
/// M M^T for wide M, which must be gain^2 I.
std::vector<double> gram(const Array& a) {
  const int64_t cols = a.shape().back(), rows = a.size() / cols;
  const std::vector<double> v = a.to_doubles();
  const bool tall = rows >= cols;
  const int64_t k = tall ? cols : rows, len = tall ? rows : cols;
  auto el = [&](int64_t vec, int64_t i) { return v[static_cast<size_t>(tall ? i * cols + vec : vec * cols + i)]; };
  std::vector<double> g(static_cast<size_t>(k * k));
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t q = 0; q < k; ++q) {
      double s = 0;
      for (int64_t i = 0; i < len; ++i) s += el(p, i) * el(q, i);
      g[static_cast<size_t>(p * k + q)] = s;
    }
  }
  return g;
}

void expect_scaled_identity(const std::vector<double>& g, double scale, double tolerance = 1e-10) {
  const auto k = static_cast<size_t>(std::llround(std::sqrt(static_cast<double>(g.size()))));
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) EXPECT_NEAR(g[p * k + q], p == q ? scale : 0.0, tolerance) << p << ", " << q;
  }
}

TEST(Initializers, OrthogonalMatricesAreOrthonormal) {
  expect_scaled_identity(gram(initializers::orthogonal()({6, 4}, DType::kF64, 1)), 1.0);        // tall: columns
  expect_scaled_identity(gram(initializers::orthogonal()({3, 5}, DType::kF64, 2)), 1.0);        // wide: rows
  expect_scaled_identity(gram(initializers::orthogonal()({3, 3, 2, 4}, DType::kF64, 3)), 1.0);  // conv (18, 4)
  expect_scaled_identity(gram(initializers::get("orthogonal")({4, 4}, DType::kF64, 4)), 1.0);   // square
  expect_scaled_identity(gram(initializers::orthogonal(2.0)({5, 3}, DType::kF64, 5)), 4.0);
  const std::vector<double> f = gram(initializers::orthogonal()({64, 32}, DType::kF32, 6));
  for (size_t i = 0; i < 32; ++i) EXPECT_NEAR(f[i * 32 + i], 1.0, 1e-5);
  EXPECT_EQ(initializers::orthogonal()({4, 3}, DType::kF32, 7).to_doubles(),
            initializers::orthogonal()({4, 3}, DType::kF32, 7).to_doubles());
  EXPECT_NE(initializers::orthogonal()({4, 3}, DType::kF32, 7).to_doubles(),
            initializers::orthogonal()({4, 3}, DType::kF32, 8).to_doubles());
}

TEST(Initializers, OrthogonalKernelInADenseLayer) {
  Sequential model(
      {std::make_shared<Dense>(DenseOptions{.units = 3, .kernel_initializer = initializers::orthogonal()})});
  model.build_model({1, 8});
  expect_scaled_identity(gram(model.get_weights()[0]), 1.0, 1e-6);  // f32
}

TEST(Initializers, BadArgumentsNameThemselves) {
  expect_error([] { initializers::random_normal(0, -1); }, ErrorCode::kInvalidArgument, {"random_normal", "stddev -1"});
  expect_error([] { initializers::random_normal(INFINITY, 1); }, ErrorCode::kInvalidArgument,
               {"random_normal", "mean inf"});
  expect_error([] { initializers::random_uniform(1, 0); }, ErrorCode::kInvalidArgument,
               {"random_uniform", "minval 1", "maxval 0"});
  expect_error([] { initializers::orthogonal(NAN); }, ErrorCode::kInvalidArgument, {"orthogonal", "gain", "nan"});
  expect_error([] { initializers::orthogonal()({5}, DType::kF32, 0); }, ErrorCode::kInvalidArgument,
               {"orthogonal", "(5,)", "rank 1"});
  expect_error([] { initializers::random_uniform()({2}, DType::kI32, 0); }, ErrorCode::kInvalidArgument,
               {"random_uniform", "i32"});
  expect_error([] { initializers::get("lecun_normal"); }, ErrorCode::kNotFound,
               {"'lecun_normal'", "orthogonal", "random_normal"});
}

}  // namespace
}  // namespace ingot
