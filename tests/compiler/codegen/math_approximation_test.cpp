// ingot-approximate-math (compiler/codegen/cpu/math_approximation.cpp): which ops it rewrites, and
// the error of the compiled f32 exp, expm1, erf, tanh, log and log1p against the correctly
// rounded value (the function in double, rounded to float) over dense sweeps of their domains,
// with the special values (0, -0, inf, -inf, nan, the overflow and underflow ranges) as libm's.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>

#include "ingot/codegen/cpu_compiler.h"
#include "parity.h"

namespace ingot {
namespace {

TEST(ApproximateMath, RewritesF32CallsAndKeepsF64) {
  const char* ir = R"(
func.func @f(%a: f32, %b: f64) -> (f32, f32, f32, f64) {
  %0 = math.erf %a : f32
  %1 = math.exp %a : f32
  %2 = math.tanh %a : f32
  %3 = math.erf %b : f64
  return %0, %1, %2, %3 : f32, f32, f32, f64
}
)";
  const std::string out = codegen::run_pipeline(ir, {{"approximate", "func.func(ingot-approximate-math)"}});
  EXPECT_EQ(out.find("math.erf %arg0"), std::string::npos) << out;
  EXPECT_EQ(out.find("math.exp %arg0"), std::string::npos) << out;
  EXPECT_EQ(out.find("math.tanh"), std::string::npos) << out;
  EXPECT_NE(out.find("math.erf %arg1 : f64"), std::string::npos) << out;  // f64 keeps libm
  EXPECT_NE(out.find("math.fma"), std::string::npos) << out;              // the polynomials
}

/// Distance in units in the last place between two finite floats of the same sign or zero.
int64_t ulps(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};  // monotone over all finite floats
  };
  return std::llabs(key(a) - key(b));
}

struct Sweep {
  std::string op;                                 ///< ingot op name
  std::function<double(double)> exact;            ///< the function in double
  std::vector<std::pair<double, double>> ranges;  ///< uniform sweeps [lo, hi]
  bool log_spaced_positive;                       ///< also 1e-40 .. 3e38, both signs unless positive-only domain
  bool negative_too;
  int64_t max_ulps;  ///< bound on results that are normal floats
};

/// Inputs of a sweep: 2^16 points per uniform range and 2^15 log-spaced magnitudes.
std::vector<float> inputs(const Sweep& s) {
  std::vector<float> x;
  constexpr int kUniform = 1 << 16, kLog = 1 << 15;
  for (auto [lo, hi] : s.ranges) {
    for (int i = 0; i <= kUniform; ++i) x.push_back(static_cast<float>(lo + (hi - lo) * i / kUniform));
  }
  if (s.log_spaced_positive) {
    for (int i = 0; i <= kLog; ++i) {
      const float v = static_cast<float>(std::pow(10.0, -40.0 + 78.5 * i / kLog));
      x.push_back(v);
      if (s.negative_too) x.push_back(-v);
    }
  }
  return x;
}

void expect_accuracy(const Sweep& s) {
  SCOPED_TRACE(s.op);
  std::vector<float> x = inputs(s);
  const float specials[] = {0.0f,    -0.0f,    INFINITY,     -INFINITY,     NAN,  FLT_MIN, -FLT_MIN,
                            FLT_MAX, -FLT_MAX, FLT_TRUE_MIN, -FLT_TRUE_MIN, 1.0f, -1.0f};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  const auto n = static_cast<int64_t>(x.size());
  ir::Graph g(s.op);
  g.set_outputs(g.add_node(s.op, {g.add_parameter({{n}, DType::kF32})}));
  const std::vector<float> got = testing::run_compiled(g, {Array::from_vector<float>(x, {n})})[0].to_vector<float>();
  int64_t worst = 0, bad = 0;
  float worst_x = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(s.exact(x[i]));
    const float have = got[i];
    if (std::isnan(want) || std::isnan(have)) {
      if (std::isnan(want) != std::isnan(have) && bad++ < 5)
        ADD_FAILURE() << s.op << "(" << x[i] << ") = " << have << ", want " << want;
      continue;
    }
    if (std::isinf(want) || std::isinf(have) || want == 0) {
      // Overflow, poles and exact zeros as libm's (a zero's sign too).
      if ((have != want || std::signbit(have) != std::signbit(want)) && bad++ < 5) {
        ADD_FAILURE() << s.op << "(" << x[i] << ") = " << have << ", want " << want;
      }
      continue;
    }
    if (std::abs(want) < FLT_MIN) {  // subnormal results: within the smallest normal
      if (std::abs(have - want) > FLT_MIN && bad++ < 5)
        ADD_FAILURE() << s.op << "(" << x[i] << ") = " << have << ", want " << want;
      continue;
    }
    const int64_t u = std::signbit(have) == std::signbit(want) ? ulps(have, want) : INT64_MAX;
    if (u > worst) worst = u, worst_x = x[i];
  }
  std::cout << s.op << ": " << n << " inputs, worst " << worst << " ulp at x = " << worst_x << "\n";
  EXPECT_LE(worst, s.max_ulps) << "at x = " << worst_x;
}

TEST(ApproximateMath, CompiledF32FunctionsAreWithinAFewUlpOfCorrectlyRounded) {
  const std::vector<Sweep> sweeps = {
      {"exponential", [](double v) { return std::exp(v); }, {{-110, 100}, {-1, 1}}, true, true, 5},
      {"exponential_minus_one", [](double v) { return std::expm1(v); }, {{-100, 100}, {-1, 1}}, true, true, 4},
      {"erf", [](double v) { return std::erf(v); }, {{-10, 10}, {-1, 1}}, true, true, 4},
      {"tanh", [](double v) { return std::tanh(v); }, {{-20, 20}, {-1, 1}}, true, true, 4},
      {"log", [](double v) { return std::log(v); }, {{0, 10}, {-1, 1}}, true, false, 4},
      {"log_plus_one", [](double v) { return std::log1p(v); }, {{-1, 10}, {-1e-3, 1e-3}}, true, false, 4},
  };
  for (const Sweep& s : sweeps) expect_accuracy(s);
}

}  // namespace
}  // namespace ingot
