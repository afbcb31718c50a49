// Compiled-vs-interpreter parity for the window, indexing and random ops and integer power, and
// for a conv net's forward pass and value_and_grad. Each test builds one graph holding every
// dtype it covers (one compile per test keeps the suite fast). Shapes include size-0 and size-1
// dims and sizes that are not multiples of the vector width 8.
//
// Tolerances: every op here is compared bitwise (rtol 0): the lowerings combine elements in the
// interpreter's order (windows and kernel taps row-major, input features innermost) and round
// f16/bf16 once at the end as it does, and no pass reassociates floating-point reductions. Only
// the whole-graph tests use rtol 1e-5, because they include dot_general and the transcendental
// functions of the loss (libm vs MLIR's math lowering differ in the last ulp), and the
// convolution tests run twice (ParityConv): on the generated loops (bitwise) and on the im2col +
// BLAS library path, whose f32/f64 results sum in BLAS's order (rtol 1e-5 / 1e-12).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ingot/autodiff/autodiff.h"
#include "ingot/trace/ops.h"
#include "parity.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_parity;
using testing::random_array;
using testing::run_compiled;
using Ints = std::vector<int64_t>;

/// A graph under construction together with its arguments.
struct Builder {
  ir::Graph g{"ops"};
  std::vector<Array> args;
  std::vector<ir::ValueId> outs;

  ir::ValueId param(const Array& a) {
    args.push_back(a);
    return g.add_parameter({a.shape(), a.dtype()});
  }
  std::vector<ir::ValueId> node(const std::string& op, const std::vector<ir::ValueId>& in,
                                const ir::Attributes& attrs = {}) {
    std::vector<ir::ValueId> r = g.add_node(op, in, attrs);
    outs.insert(outs.end(), r.begin(), r.end());
    return r;
  }
  void check(double rtol = 0) {
    g.set_outputs(outs);
    expect_parity(g, args, rtol);
  }
  void check(const testing::RtolFn& rtol, const lower::LoweringOptions& lowering) {
    g.set_outputs(outs);
    expect_parity(g, args, rtol, lowering);
  }
};

/// Random small integers in [lo, hi] stored as `dtype` (many ties, exact in every dtype).
Array small_ints(const Shape& shape, DType dtype, uint64_t seed, double lo = -4, double hi = 4) {
  if (is_bool(dtype)) return random_array(shape, dtype, seed);
  return Array::from_doubles(random_array(shape, DType::kI32, seed, lo, hi).to_doubles(), shape, dtype);
}

/// `a` with element i (flat) set to values[i] for each given pair.
Array with(const Array& a, const std::vector<std::pair<int64_t, double>>& values) {
  std::vector<double> v = a.to_doubles();
  for (const auto& [i, x] : values) v[static_cast<size_t>(i)] = x;
  return Array::from_doubles(v, a.shape(), a.dtype());
}

/// A float array with NaN, +-inf, -0 and +0 mixed in (floats only).
Array with_specials(const Array& a) {
  if (!is_floating(a.dtype()) || a.size() < 12) return a;
  return with(
      a, {{1, NAN}, {5, -0.0}, {6, 0.0}, {7, 0.0}, {8, -0.0}, {a.size() - 2, INFINITY}, {a.size() / 2, -INFINITY}});
}

const std::vector<DType> kArithDtypes = {DType::kF32, DType::kF64, DType::kI32, DType::kF16, DType::kBF16, DType::kU8};

// ---------------------------------------------------------------------------------------------
// pad

TEST(ParityWindow, PadNegativeInteriorAndEmpty) {
  Builder b;
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kF16, DType::kBF16, DType::kBool, DType::kI64}) {
    const ir::ValueId x = b.param(small_ints({3, 5}, d, 1));
    const ir::ValueId v = b.param(Array::scalar(is_bool(d) ? 1 : -7, d));
    auto pad = [&](ir::ValueId in, Ints lo, Ints hi, Ints interior) {
      b.node("pad", {in, v}, {{"edge_padding_low", lo}, {"edge_padding_high", hi}, {"interior_padding", interior}});
    };
    pad(x, {1, -1}, {-2, 2}, {2, 1});                                  // (6, 10): crop and interior at once
    pad(x, {-4, 0}, {0, -3}, {1, 0});                                  // (1, 2): only the last row survives the crop
    pad(x, {-3, 0}, {0, 0}, {0, 0});                                   // (0, 5)
    pad(x, {0, 3}, {1, 0}, {0, 0});                                    // plain edge padding
    pad(b.param(small_ints({2, 3}, d, 2)), {-1, 0}, {-2, 0}, {3, 0});  // (2, 3): no element lands
    pad(b.param(small_ints({0, 3}, d, 3)), {2, 1}, {1, 0}, {1, 2});    // empty operand -> (3, 8)
    pad(b.param(small_ints({1, 9}, d, 4)), {0, 2}, {1, 0}, {3, 0});    // (2, 11)
    pad(b.param(small_ints({}, d, 5)), {}, {}, {});                    // scalar
  }
  b.check();
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin

TEST(ParityWindow, ArgmaxArgminTiesNaNAndSignedZeros) {
  Builder b;
  for (DType d :
       {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kU8, DType::kI8, DType::kBool}) {
    Array a = small_ints({4, 7, 3}, d, 10, -2, 2);
    if (is_floating(d)) {
      // NaN after a maximum (NaN wins), a column of +-0 ties, and NaN first in another column.
      a = with(a, {{0, 5}, {3, NAN}, {1, 0.0}, {4, -0.0}, {7, 0.0}, {10, -0.0}, {2, NAN}, {5, NAN}, {30, -INFINITY}});
    }
    const ir::ValueId x = b.param(a);
    for (const char* op : {"argmax", "argmin"}) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        b.node(op, {x}, {{"dimension", dim}, {"index_dtype", std::string(dim == 1 ? "i64" : "i32")}});
      }
      b.node(op, {b.param(small_ints({0, 5}, d, 11))},
             {{"dimension", int64_t{1}}, {"index_dtype", std::string("i32")}});
      b.node(op, {b.param(small_ints({1}, d, 12))}, {{"dimension", int64_t{0}}, {"index_dtype", std::string("i64")}});
      b.node(op, {b.param(small_ints({9, 1}, d, 13))},
             {{"dimension", int64_t{0}}, {"index_dtype", std::string("i32")}});
    }
  }
  b.check();
}

// ---------------------------------------------------------------------------------------------
// reduce_window

ir::Attributes window(Ints dims, Ints strides, Ints padding, const std::string& computation, Ints base_dilations = {},
                      Ints window_dilations = {}) {
  ir::Attributes a{
      {"window_dimensions", dims}, {"window_strides", strides}, {"padding", padding}, {"computation", computation}};
  if (!base_dilations.empty()) a.set("base_dilations", base_dilations);
  if (!window_dilations.empty()) a.set("window_dilations", window_dilations);
  return a;
}

double lowest(DType d) {
  if (is_floating(d)) return -INFINITY;
  if (is_signed_integer(d)) return d == DType::kI32 ? std::numeric_limits<int32_t>::min() : -128;
  return 0;
}

TEST(ParityWindow, ReduceWindowPoolsOnNhwc) {
  Builder b;
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kU8, DType::kBool}) {
    SCOPED_TRACE(dtype_name(d));
    const ir::ValueId x = b.param(with_specials(small_ints({2, 7, 9, 3}, d, 20, 0, 9)));
    const ir::ValueId smooth =
        b.param(is_floating(d) ? random_array({2, 7, 9, 3}, d, 21) : small_ints({2, 7, 9, 3}, d, 21, 0, 3));
    const ir::ValueId lo = b.param(Array::scalar(is_bool(d) ? 0 : lowest(d), d));
    const ir::ValueId zero = b.param(Array::scalar(is_bool(d) ? 0 : 0.5 * is_floating(d), d));
    const ir::ValueId one = b.param(Array::scalar(1, d));
    const ir::ValueId hi = b.param(Array::scalar(is_floating(d) ? INFINITY : (is_bool(d) ? 1 : 100), d));
    // max pool 2x2 / 2 (valid) and 3x3 / 1 SAME (padding holds -inf).
    b.node("reduce_window", {x, lo}, window({1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0, 0, 0, 0, 0}, "max"));
    b.node("reduce_window", {x, lo}, window({1, 3, 3, 1}, {1, 1, 1, 1}, {0, 0, 1, 1, 1, 1, 0, 0}, "max"));
    // avg-style sums with asymmetric padding, min with dilations and a negative pad, products.
    b.node("reduce_window", {smooth, zero}, window({1, 3, 3, 1}, {1, 2, 2, 1}, {0, 0, 1, 1, 0, 1, 0, 0}, "add"));
    b.node("reduce_window", {x, hi},
           window({1, 2, 2, 1}, {1, 1, 2, 1}, {0, 0, -1, 1, 0, 0, 0, 0}, "min", {1, 2, 1, 1}, {1, 1, 2, 1}));
    b.node("reduce_window", {smooth, one}, window({2, 1, 3, 1}, {1, 3, 1, 2}, {0, 0, 0, 0, 0, 0, 0, 0}, "mul"));
    // Windows over an empty dim hold only init; a scalar reduces with init once.
    b.node("reduce_window", {b.param(small_ints({2, 0, 4, 1}, d, 22)), lo},
           window({1, 2, 1, 1}, {1, 1, 1, 1}, {0, 0, 1, 1, 0, 0, 0, 0}, "max"));
    b.node("reduce_window", {b.param(small_ints({}, d, 23)), one}, window({}, {}, {}, "add"));
  }
  b.check();
}

// ---------------------------------------------------------------------------------------------
// select_and_scatter

TEST(ParityWindow, SelectAndScatterGeLe) {
  Builder b;
  for (DType d : kArithDtypes) {
    SCOPED_TRACE(dtype_name(d));
    const ir::ValueId x = b.param(with_specials(small_ints({2, 7, 9, 3}, d, 30, 0, 3)));
    const ir::ValueId init = b.param(Array::scalar(is_floating(d) ? -0.0 : 2, d));
    auto sas = [&](const std::string& select, Ints dims, Ints strides, Ints padding, const Shape& source_shape,
                   uint64_t seed) {
      const Array src =
          is_floating(d) ? random_array(source_shape, d, seed) : small_ints(source_shape, d, seed, 0, 200);
      b.node("select_and_scatter", {x, b.param(src), init},
             {{"window_dimensions", dims}, {"window_strides", strides}, {"padding", padding}, {"select", select}});
    };
    sas("GE", {1, 3, 3, 1}, {1, 1, 1, 1}, {0, 0, 1, 1, 1, 1, 0, 0}, {2, 7, 9, 3}, 31);  // overlapping SAME
    sas("LE", {1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0, 0, 0, 0, 0}, {2, 3, 4, 3}, 32);  // 2x2/2 valid
    sas("GE", {1, 3, 2, 1}, {1, 2, 3, 1}, {0, 0, 2, 0, 0, 1, 0, 0}, {2, 4, 3, 3}, 33);  // all-padding windows
    sas("LE", {2, 2, 1, 3}, {1, 3, 3, 1}, {0, 0, 0, 0, 0, 0, 0, 0}, {1, 2, 3, 1}, 34);
  }
  // Empty operand dim: the windows there hold only padding and select nothing.
  const ir::ValueId e = b.param(random_array({3, 0}, DType::kF32, 35));
  b.node("select_and_scatter",
         {e, b.param(random_array({3, 1}, DType::kF32, 36)), b.param(Array::scalar(1, DType::kF32))},
         {{"window_dimensions", Ints{1, 1}}, {"padding", Ints{0, 0, 1, 0}}, {"select", std::string("GE")}});
  b.check();
}

// ---------------------------------------------------------------------------------------------
// convolution

ir::Attributes conv_attrs(Ints in, Ints kernel, Ints out, Ints strides, Ints padding, Ints lhs_dilation,
                          Ints rhs_dilation, int64_t feature_groups = 1, int64_t batch_groups = 1) {
  // Layouts as [batch/out-feature, feature/in-feature, spatial...] dimension numbers.
  auto tail = [](const Ints& v) { return Ints(v.begin() + 2, v.end()); };
  return {{"input_batch_dimension", in[0]},
          {"input_feature_dimension", in[1]},
          {"input_spatial_dimensions", tail(in)},
          {"kernel_output_feature_dimension", kernel[0]},
          {"kernel_input_feature_dimension", kernel[1]},
          {"kernel_spatial_dimensions", tail(kernel)},
          {"output_batch_dimension", out[0]},
          {"output_feature_dimension", out[1]},
          {"output_spatial_dimensions", tail(out)},
          {"window_strides", strides},
          {"padding", padding},
          {"lhs_dilation", lhs_dilation},
          {"rhs_dilation", rhs_dilation},
          {"feature_group_count", feature_groups},
          {"batch_group_count", batch_groups}};
}

/// The two lowerings of convolution, each test run on both: the generated loop nest (compared
/// bitwise: it sums in the interpreter's order) and the im2col + BLAS kernel (f32/f64 only; other
/// dtypes keep the loops). BLAS sums in another order, so f32/f64 outputs get rtol 1e-5 / 1e-12
/// there; everything else stays bitwise.
class ParityConv : public ::testing::TestWithParam<bool> {
 protected:
  bool library() const { return GetParam(); }
  lower::LoweringOptions lowering() const { return {.library_conv = library(), .library_conv_min_k = 0}; }
  testing::RtolFn rtol() const {
    const bool lib = library();
    return [lib](DType d) { return !lib ? 0.0 : d == DType::kF32 ? 1e-5 : d == DType::kF64 ? 1e-12 : 0.0; };
  }
  /// Like rtol(), but at least `floor` (whole graphs: dot_general and libm differ too).
  testing::RtolFn rtol_at_least(double floor) const {
    const testing::RtolFn r = rtol();
    return [r, floor](DType d) { return std::max(r(d), floor); };
  }
};

INSTANTIATE_TEST_SUITE_P(Paths, ParityConv, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Library" : "Loops"; });

TEST_P(ParityConv, LayoutsGroupsDilations) {
  Builder b;
  const Ints nhwc = {0, 3, 1, 2}, hwio = {3, 2, 0, 1}, nchw = {0, 1, 2, 3}, oihw = {0, 1, 2, 3};
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(d));
    auto arr = [&](const Shape& s, uint64_t seed) {
      return is_floating(d) ? random_array(s, d, seed) : small_ints(s, d, seed, -9, 9);
    };
    // NHWC / HWIO, stride (2, 1), SAME-style padding, kernel dilation (1, 2), 2 feature groups.
    b.node("convolution", {b.param(arr({2, 9, 7, 4}, 40)), b.param(arr({3, 3, 2, 6}, 41))},
           conv_attrs(nhwc, hwio, nhwc, {2, 1}, {1, 1, 2, 2}, {1, 1}, {1, 2}, 2));
    // NCHW / OIHW with lhs dilation (a transposed conv) and asymmetric padding.
    b.node("convolution", {b.param(arr({2, 3, 6, 5}, 42)), b.param(arr({5, 3, 2, 3}, 43))},
           conv_attrs(nchw, oihw, nchw, {1, 2}, {1, 2, 0, 1}, {2, 1}, {1, 1}));
    // batch_group_count 2 (the shape of a kernel gradient).
    b.node("convolution", {b.param(arr({4, 5, 5, 3}, 44)), b.param(arr({2, 2, 3, 4}, 45))},
           conv_attrs(nhwc, hwio, nhwc, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 2));
    // 1-D, size-1 dims, negative padding (crop), depthwise (3 groups of 1).
    b.node("convolution", {b.param(arr({1, 10, 3}, 46)), b.param(arr({3, 1, 3}, 47))},
           conv_attrs({0, 2, 1}, {2, 1, 0}, {0, 2, 1}, {1}, {-2, 1}, {1}, {1}, 3));
    // No spatial dims at all (a matmul): lhs (batch, in), kernel (in, out).
    b.node("convolution", {b.param(arr({3, 4}, 52)), b.param(arr({4, 5}, 53))},
           conv_attrs({0, 1}, {1, 0}, {0, 1}, {}, {}, {}, {}));
    // Empty batch; and no input features (sums of nothing are 0).
    b.node("convolution", {b.param(arr({0, 4, 4, 2}, 48)), b.param(arr({2, 2, 2, 3}, 49))},
           conv_attrs(nhwc, hwio, nhwc, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}));
    b.node("convolution", {b.param(arr({1, 4, 4, 0}, 50)), b.param(arr({2, 2, 0, 3}, 51))},
           conv_attrs(nhwc, hwio, nhwc, {1, 1}, {1, 0, 0, 0}, {1, 1}, {1, 1}));
  }
  b.check(rtol(), lowering());
}

TEST_P(ParityConv, StridedLastDimsAfterElementwiseProducers) {
  // Strides, groups and reversed windows on the last (fastest) dim, fed by elementwise ops that the
  // fuse stage merges into the window ops: the generated loops must not treat them as contiguous.
  Builder b;
  const ir::ValueId x = b.g.add_node("negate", {b.param(random_array({2, 41}, DType::kF32, 95))})[0];
  const ir::ValueId zero = b.param(Array::scalar(0, DType::kF32));
  b.node("reduce_window", {x, zero}, window({1, 2}, {1, 2}, {0, 0, 0, 0}, "add"));
  b.node("reduce_window", {x, zero}, window({1, 3}, {1, 3}, {0, 0, 1, 1}, "max"));
  b.node("reduce_window", {x, zero}, window({2, 1}, {1, 5}, {0, 0, 0, 0}, "min", {1, 2}, {1, 1}));
  // NCW with stride 3 on W; NWC with 2 feature groups (a floordiv on the last dim).
  const ir::ValueId k = b.param(random_array({4, 2, 3}, DType::kF32, 96));
  b.node("convolution", {b.g.add_node("negate", {b.param(random_array({3, 2, 29}, DType::kF32, 97))})[0], k},
         conv_attrs({0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {3}, {1, 0}, {1}, {1}));
  b.node("convolution", {b.g.add_node("negate", {b.param(random_array({3, 17, 4}, DType::kF32, 98))})[0], k},
         conv_attrs({0, 2, 1}, {0, 1, 2}, {0, 2, 1}, {1}, {0, 0}, {1}, {2}, 2));
  b.check(rtol(), lowering());
}

TEST_P(ParityConv, PaddingSkipsInfiniteWeights) {
  // The interpreter skips padding cells, so an infinite weight over padding adds no NaN. The
  // library kernel's im2col would multiply it by a zero (NaN, as XLA); it sees the non-finite
  // kernel and computes this convolution with its reference loops instead.
  Builder b;
  const ir::ValueId x = b.param(Array::from_vector<float>({1, 2, 3}, {1, 3, 1}));
  const ir::ValueId k = b.param(Array::from_vector<float>({INFINITY, 1, -INFINITY}, {3, 1, 1}));
  b.node("convolution", {x, k}, conv_attrs({0, 2, 1}, {2, 1, 0}, {0, 2, 1}, {1}, {1, 1}, {2}, {1}));
  b.g.set_outputs(b.outs);
  const std::vector<Array> got = run_compiled(b.g, b.args, {}, lowering());
  // Dilated padded input [0 | 1 _ 2 _ 3 | 0]: window 0 = [pad, 1, hole] -> 1; window 1 = [1, hole, 2]
  // -> inf - inf = NaN; window 2 = [hole, 2, hole] -> 2; window 3 = [2, hole, 3] -> NaN;
  // window 4 = [hole, 3, pad] -> 3.
  const std::vector<float> v = got[0].to_vector<float>();
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], 2.0f);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_EQ(v[4], 3.0f);
  b.check(rtol(), lowering());
}

TEST_P(ParityConv, MoreLayoutsAndSpatialRanks) {
  Builder b;
  for (DType d : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(d));
    // 3 spatial dims (NDHWC / DHWIO), mixed strides, padding and both dilations.
    b.node("convolution",
           {b.param(random_array({2, 5, 4, 6, 3}, d, 60)), b.param(random_array({2, 3, 2, 3, 4}, d, 61))},
           conv_attrs({0, 4, 1, 2, 3}, {4, 3, 0, 1, 2}, {0, 4, 1, 2, 3}, {1, 2, 1}, {1, 0, 0, 1, 1, 1}, {1, 1, 2},
                      {2, 1, 1}));
    // Result features first (layout C, N, W), kernel O, I, W; 2 feature groups.
    b.node("convolution", {b.param(random_array({3, 9, 4}, d, 62)), b.param(random_array({6, 2, 3}, d, 63))},
           conv_attrs({0, 2, 1}, {0, 1, 2}, {1, 0, 2}, {2}, {1, 1}, {1}, {1}, 2));
    // Kernel output features in the middle (W, O, I), result N, C, W; 2 batch groups.
    b.node("convolution", {b.param(random_array({4, 3, 8}, d, 64)), b.param(random_array({3, 4, 3}, d, 65))},
           conv_attrs({0, 1, 2}, {1, 2, 0}, {0, 1, 2}, {1}, {0, 2}, {1}, {2}, 1, 2));
    // A strided slice as lhs (a view, not an identity layout) with negative padding.
    const ir::ValueId x = b.param(random_array({3, 12, 11, 2}, d, 66));
    const ir::ValueId sliced = b.g.add_node("slice", {x},
                                            {{"start_indices", Ints{0, 1, 0, 0}},
                                             {"limit_indices", Ints{3, 12, 11, 2}},
                                             {"strides", Ints{2, 2, 3, 1}}})[0];  // (2, 6, 4, 2)
    b.node("convolution", {sliced, b.param(random_array({2, 2, 2, 5}, d, 67))},
           conv_attrs({0, 3, 1, 2}, {3, 2, 0, 1}, {0, 3, 1, 2}, {1, 1}, {-1, 0, 1, -1}, {1, 1}, {1, 1}));
  }
  b.check(rtol(), lowering());
}

TEST_P(ParityConv, CnnShapesForwardAndBackward) {
  // The Fashion-MNIST CNN's convolutions at batch 4: 28x28x1 -> 3x3x32 and 14x14x32 -> 3x3x64,
  // both SAME, and value_and_grad, whose backward convolutions (the input's and the kernels'
  // cotangents: lhs dilation, batch/feature roles swapped, big windows) take both paths too.
  TraceFn loss = [](const std::vector<Tensor>& a) {
    Conv2DOptions same;
    same.padding = "same";
    Tensor h = max_pool2d(relu(conv2d(a[0], a[1], same) + a[2]), {2, 2}, {2, 2});  // (4, 14, 14, 32)
    h = relu(conv2d(h, a[3], same) + a[4]);                                        // (4, 14, 14, 64)
    return std::vector<Tensor>{mean(h * h)};
  };
  const std::vector<ir::TensorType> types = {{{4, 28, 28, 1}, DType::kF32},
                                             {{3, 3, 1, 32}, DType::kF32},
                                             {{32}, DType::kF32},
                                             {{3, 3, 32, 64}, DType::kF32},
                                             {{64}, DType::kF32}};
  const std::vector<Array> args = {
      random_array({4, 28, 28, 1}, DType::kF32, 70, 0, 1), random_array({3, 3, 1, 32}, DType::kF32, 71, -0.5, 0.5),
      random_array({32}, DType::kF32, 72, -0.1, 0.1), random_array({3, 3, 32, 64}, DType::kF32, 73, -0.1, 0.1),
      random_array({64}, DType::kF32, 74, -0.1, 0.1)};
  const ir::Graph forward = trace(loss, types, "cnn_shapes");
  expect_parity(forward, args, rtol_at_least(1e-5), lowering());
  expect_parity(value_and_grad_graph(forward, {0, 1, 2, 3, 4}), args, rtol_at_least(1e-5), lowering());
}

TEST(ConvLowering, LibraryCallOnlyForF32AndF64WhenSelected) {
  const Ints nhwc = {0, 3, 1, 2}, hwio = {3, 2, 0, 1};
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32}) {
    SCOPED_TRACE(dtype_name(d));
    ir::Graph g("conv");
    const ir::ValueId x = g.add_parameter({{2, 6, 6, 3}, d}), k = g.add_parameter({{3, 3, 3, 4}, d});
    g.set_outputs(
        g.add_node("convolution", {x, k}, conv_attrs(nhwc, hwio, nhwc, {1, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1})));
    const std::string library = lower::lower_graph(g, "main", {}, {.library_conv = true, .library_conv_min_k = 0}).text;
    const std::string loops = lower::lower_graph(g, "main", {}, {.library_conv = false}).text;
    const bool blas_type = d == DType::kF32 || d == DType::kF64;
    const std::string call = fmt::format("func.call @ingot_cpu_conv_{}(", d == DType::kF32 ? "f32" : "f64");
    EXPECT_EQ(library.find(call) != std::string::npos, blas_type) << library;
    EXPECT_EQ(library.find("linalg.generic") != std::string::npos, !blas_type) << library;
    EXPECT_EQ(loops.find("ingot_cpu_conv"), std::string::npos) << loops;
    EXPECT_NE(loops.find("linalg.generic"), std::string::npos) << loops;
    // By default a short reduction (K = 3x3x3 = 27 < library_conv_min_k) keeps the loops
    // (bench/compiler_bench's crossover) ...
    EXPECT_EQ(lower::lower_to_mlir(g), loops);
    // ... and a long one (K = 3x3x6 = 54) calls the library.
    ir::Graph wide("conv_wide");
    const ir::ValueId wx = wide.add_parameter({{2, 6, 6, 6}, d}), wk = wide.add_parameter({{3, 3, 6, 4}, d});
    wide.set_outputs(
        wide.add_node("convolution", {wx, wk}, conv_attrs(nhwc, hwio, nhwc, {1, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1})));
    EXPECT_EQ(lower::lower_to_mlir(wide).find(call) != std::string::npos, blas_type);
  }
  // A convolution whose result reaches no output is not called (the loops would be dropped by
  // MLIR's dead-code elimination; a call is opaque to it); the live one is.
  {
    ir::Graph g("dead_conv");
    const ir::ValueId x = g.add_parameter({{2, 6, 6, 3}, DType::kF32}),
                      k = g.add_parameter({{3, 3, 3, 4}, DType::kF32});
    const Ints pad = {1, 1, 1, 1};
    const ir::ValueId dead =
        g.add_node("convolution", {x, k}, conv_attrs(nhwc, hwio, nhwc, {1, 1}, pad, {1, 1}, {1, 1}))[0];
    g.add_node("negate", {dead});
    const ir::ValueId w = g.add_parameter({{3, 5}, DType::kF32});
    g.add_node("dot_general", {g.add_node("reshape", {x}, {{"shape", Ints{72, 3}}})[0], w},
               {{"lhs_contracting_dimensions", Ints{1}}, {"rhs_contracting_dimensions", Ints{0}}});  // dead GEMM
    const ir::ValueId live =
        g.add_node("convolution", {x, k}, conv_attrs(nhwc, hwio, nhwc, {2, 2}, pad, {1, 1}, {1, 1}))[0];
    g.set_outputs({g.add_node("negate", {live})[0]});
    const lower::LoweringOptions always_library{.library_conv_min_k = 0};
    const std::string text = lower::lower_graph(g, "main", {}, always_library).text;
    size_t calls = 0;
    for (size_t at = text.find("func.call @ingot_cpu_conv_f32"); at != std::string::npos;
         at = text.find("func.call @ingot_cpu_conv_f32", at + 1)) {
      ++calls;
    }
    EXPECT_EQ(calls, 1u) << text;
    EXPECT_EQ(text.find("ingot_cpu_gemm"), std::string::npos) << text;
    expect_parity(g,
                  {random_array({2, 6, 6, 3}, DType::kF32, 1), random_array({3, 3, 3, 4}, DType::kF32, 2),
                   random_array({3, 5}, DType::kF32, 3)},
                  1e-5, always_library);
  }
  // Size-0 results keep the early return (no call).
  ir::Graph g("conv0");
  const ir::ValueId x = g.add_parameter({{0, 6, 6, 3}, DType::kF32}), k = g.add_parameter({{3, 3, 3, 4}, DType::kF32});
  g.set_outputs(g.add_node("convolution", {x, k}, conv_attrs(nhwc, hwio, nhwc, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1})));
  EXPECT_EQ(lower::lower_to_mlir(g).find("ingot_cpu_conv"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// gather / scatter

ir::Attributes gather_attrs(Ints offset_dims, Ints collapsed, Ints start_index_map, int64_t index_vector_dim,
                            Ints slice_sizes) {
  return {{"offset_dims", offset_dims},
          {"collapsed_slice_dims", collapsed},
          {"start_index_map", start_index_map},
          {"index_vector_dim", index_vector_dim},
          {"slice_sizes", slice_sizes}};
}

TEST(ParityIndexing, GatherClampsOutOfRangeIndices) {
  Builder b;
  const std::vector<DType> operands = {DType::kF32,  DType::kBool, DType::kI64, DType::kF16,
                                       DType::kBF16, DType::kF64,  DType::kI32};
  const std::vector<DType> index_types = {DType::kI32, DType::kU32, DType::kI64, DType::kI8,
                                          DType::kU8,  DType::kU64, DType::kI32};
  for (size_t i = 0; i < operands.size(); ++i) {
    const DType d = operands[i], it = index_types[i];
    SCOPED_TRACE(dtype_name(d));
    const ir::ValueId table = b.param(random_array({10, 5}, d, 60));
    // Embedding lookup (take): rows -3, 12 and 200 are clamped; (3, 5) ids -> (3, 5, 5).
    const std::vector<double> ids = {0, 9, 3, -3, 12, 5, 5, 1, 200, 2, 7, 8, 0, -1, 4};
    Array id_array = Array::from_doubles(ids, {3, 5}, DType::kI64);
    if (!is_signed_integer(it))
      id_array = Array::from_doubles({0, 9, 3, 250, 12, 5, 5, 1, 200, 2, 7, 8, 0, 11, 4}, {3, 5}, it);
    else
      id_array = Array::from_doubles(ids, {3, 5}, it);
    if (it == DType::kU64) {
      id_array = Array::from_vector<uint64_t>(
          {0, 9, 3, ~uint64_t{0}, 12, 5, uint64_t{1} << 63, 1, 200, 2, 7, 8, 0, 11, 4}, {3, 5});
    }
    b.node("gather", {table, b.param(id_array)}, gather_attrs({2}, {0}, {0}, 2, {1, 5}));
    // Two-component start vectors at index_vector_dim 1 mapped to operand dims (2, 0); a (2, 6, 1)
    // slice with dim 2 collapsed -> result (3, 2, 6, 4).
    const ir::ValueId cube = b.param(random_array({5, 6, 7}, d, 61));
    const Array starts = Array::from_doubles({0, 1, 6, 3, 2, -5, 9, 4, 7, 0, 3, 3, 1, 2, 8, 4, 5, 6, 0, 0, 2, 4, 1, 9},
                                             {3, 2, 4}, is_signed_integer(it) ? it : DType::kI32);
    b.node("gather", {cube, b.param(starts)}, gather_attrs({1, 2}, {2}, {2, 0}, 1, {2, 6, 1}));
    // Implicit trailing index vector, a size-1 operand dim and a zero-size slice.
    b.node("gather",
           {b.param(random_array({1, 9}, d, 62)), b.param(Array::from_doubles({4, 0, 8, 7}, {2, 2}, DType::kI32))},
           gather_attrs({2}, {1}, {1}, 2, {1, 1}));
    b.node("gather", {table, b.param(Array::from_doubles({1, 2}, {2, 1}, DType::kI32))},
           gather_attrs({1, 2}, {}, {0}, 1, {3, 0}));
  }
  b.check();
}

ir::Attributes scatter_attrs(Ints update_window_dims, Ints inserted, Ints to_operand, int64_t index_vector_dim,
                             const std::string& computation) {
  return {{"update_window_dims", update_window_dims},
          {"inserted_window_dims", inserted},
          {"scatter_dims_to_operand_dims", to_operand},
          {"index_vector_dim", index_vector_dim},
          {"computation", computation}};
}

TEST(ParityIndexing, ScatterAddAssignDuplicatesAndOutOfBounds) {
  Builder b;
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kF16, DType::kBF16, DType::kU8, DType::kBool}) {
    SCOPED_TRACE(dtype_name(d));
    const bool numeric = !is_bool(d);
    const ir::ValueId operand = b.param(random_array({6, 5}, d, 70));
    // Rows with duplicates (1 three times) and out-of-bounds rows -1, 6, 9.
    const ir::ValueId rows = b.param(Array::from_doubles({1, 4, -1, 1, 6, 0, 1, 9, 5}, {9, 1}, DType::kI32));
    const ir::ValueId row_updates = b.param(random_array({9, 5}, d, 71));
    if (numeric) b.node("scatter", {operand, rows, row_updates}, scatter_attrs({1}, {0}, {0}, 1, "add"));
    b.node("scatter", {operand, rows, row_updates}, scatter_attrs({1}, {0}, {0}, 1, "assign"));
    // (2, 3) windows at (start, 0): a start of 5 does not fit in 6 rows and is skipped whole.
    const ir::ValueId starts = b.param(Array::from_doubles({4, 5, 0, 4}, {4}, DType::kI64));
    const ir::ValueId windows = b.param(random_array({4, 2, 3}, d, 72));
    if (numeric) b.node("scatter", {operand, starts, windows}, scatter_attrs({1, 2}, {}, {0}, 1, "add"));
    // Two-component indices along dim 0 (index_vector_dim 0), mapped to operand dims (1, 0); a u64
    // index above INT64_MAX is out of bounds.
    const ir::ValueId pairs =
        b.param(Array::from_vector<uint64_t>({0, 4, 4, uint64_t{1} << 63, 2, 1, 2, 3, 5, 5, 2, 3}, {2, 6}));
    const ir::ValueId points = b.param(random_array({6}, d, 73));
    b.node("scatter", {operand, pairs, points}, scatter_attrs({}, {0, 1}, {1, 0}, 0, numeric ? "add" : "assign"));
    // No updates at all.
    b.node("scatter", {operand, b.param(Array::zeros({0, 1}, DType::kI32)), b.param(random_array({0, 5}, d, 74))},
           scatter_attrs({1}, {0}, {0}, 1, "assign"));
  }
  b.check();
}

TEST(ParityIndexing, AtomicScatterAddsMatchTheSerialLoop) {
  // LoweringOptions::atomic_scatter (the CUDA lowering): one parallel iteration per update element
  // adding with memref.atomic_rmw; the same duplicates, out-of-bounds rows and windows as above.
  Builder b;
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    SCOPED_TRACE(dtype_name(d));
    const ir::ValueId operand = b.param(random_array({6, 5}, d, 80));
    const ir::ValueId rows = b.param(Array::from_doubles({1, 4, -1, 1, 6, 0, 1, 9, 5}, {9, 1}, DType::kI32));
    b.node("scatter", {operand, rows, b.param(random_array({9, 5}, d, 81))}, scatter_attrs({1}, {0}, {0}, 1, "add"));
    const ir::ValueId starts = b.param(Array::from_doubles({4, 5, 0, 4}, {4}, DType::kI64));
    b.node("scatter", {operand, starts, b.param(random_array({4, 2, 3}, d, 82))},
           scatter_attrs({1, 2}, {}, {0}, 1, "add"));
    const ir::ValueId pairs =
        b.param(Array::from_vector<uint64_t>({0, 4, 4, uint64_t{1} << 63, 2, 1, 2, 3, 5, 5, 2, 3}, {2, 6}));
    b.node("scatter", {operand, pairs, b.param(random_array({6}, d, 83))}, scatter_attrs({}, {0, 1}, {1, 0}, 0, "add"));
  }
  // An embedding gradient: 40 token ids into a (7, 4) table, many repeats.
  std::vector<double> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 5) % 7);
  b.node("scatter",
         {b.param(Array::zeros({7, 4}, DType::kF32)), b.param(Array::from_doubles(ids, {40, 1}, DType::kI32)),
          b.param(random_array({40, 4}, DType::kF32, 84))},
         scatter_attrs({1}, {0}, {0}, 1, "add"));
  // Float sums in another order round differently where updates collide.
  b.check([](DType d) { return is_floating(d) ? 1e-5 : 0.0; }, {.atomic_scatter = true});
}

// ---------------------------------------------------------------------------------------------
// rng_bit_generator

ir::Attributes rng_attrs(Ints shape, const std::string& dtype) {
  return {{"algorithm", std::string("THREE_FRY")}, {"shape", shape}, {"dtype", dtype}};
}

TEST(ParityRandom, ThreefryKnownAnswer) {
  // Random123's known-answer vector for Threefry-2x32-20: key (0, 0), counter (0, 0).
  Builder b;
  b.node("rng_bit_generator", {b.param(Array::from_vector<uint64_t>({0, 0}, {2}))}, rng_attrs({2}, "u32"));
  b.g.set_outputs(b.outs);
  const std::vector<Array> got = run_compiled(b.g, b.args);
  EXPECT_EQ(got[0].to_vector<uint64_t>(), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(got[1].to_vector<uint32_t>(), (std::vector<uint32_t>{0x6b200159u, 0x99ba4efeu}));
}

TEST(ParityRandom, RngBitGeneratorU32U64) {
  Builder b;
  // A counter two blocks below 2^64 wraps inside the larger requests.
  for (const std::vector<uint64_t>& state :
       {std::vector<uint64_t>{0x0123456789abcdefULL, 42}, std::vector<uint64_t>{~uint64_t{0} - 5, ~uint64_t{0} - 1}}) {
    const ir::ValueId s = b.param(Array::from_vector<uint64_t>(state, {2}));
    b.node("rng_bit_generator", {s}, rng_attrs({7}, "u32"));
    b.node("rng_bit_generator", {s}, rng_attrs({3, 5}, "u32"));
    b.node("rng_bit_generator", {s}, rng_attrs({}, "u32"));
    b.node("rng_bit_generator", {s}, rng_attrs({0, 2}, "u32"));
    b.node("rng_bit_generator", {s}, rng_attrs({2, 3}, "u64"));
    b.node("rng_bit_generator", {s}, rng_attrs({1}, "u64"));
  }
  b.check();
}

// ---------------------------------------------------------------------------------------------
// integer power

TEST(ParityElementwise, IntegerPowerAndLogicalNot) {
  Builder b;
  b.node("not", {b.param(random_array({11}, DType::kBool, 90))});
  b.node("not", {b.param(random_array({11}, DType::kU8, 91, 0, 255))});
  for (DType d : {DType::kI32, DType::kI64, DType::kI8, DType::kU8, DType::kU32, DType::kU64}) {
    SCOPED_TRACE(dtype_name(d));
    const bool s = is_signed_integer(d);
    // Bases include 0, +-1, +-2 and 3, 7, 10 (wrapping), exponents 0..40 and negative ones.
    std::vector<double> base = {0, 1, 2, 3, 7, 10, 1, 0, 2, 3, 5, 1, 7, 2, 10, 3, 6, 4};
    std::vector<double> exponent = {0, 5, 10, 40, 3, 19, 0, 3, 31, 21, 2, 63, 33, 64, 11, 1, 4, 35};
    if (s) {
      base.insert(base.end(), {-1, -1, -1, 1, 2, -2, 0, -3, -2});
      exponent.insert(exponent.end(), {-3, -4, 7, -1, -2, -7, -5, 5, 63});
    }
    const Shape shape = {static_cast<int64_t>(base.size())};
    b.node("power", {b.param(Array::from_doubles(base, shape, d)), b.param(Array::from_doubles(exponent, shape, d))});
  }
  b.check();
}

// ---------------------------------------------------------------------------------------------
// whole graphs

TEST_P(ParityConv, ConvNetForwardAndValueAndGrad) {
  TraceFn loss = [](const std::vector<Tensor>& a) {
    Conv2DOptions same;
    same.padding = "same";
    Tensor h = relu(conv2d(a[0], a[1], same) + a[2]);  // (4, 7, 7, 5)
    Tensor p = max_pool2d(h, {2, 2}, {2, 2});          // (4, 3, 3, 5)
    Tensor logits = matmul(reshape(p, {4, 45}), a[3]) + a[4];
    Tensor onehot = one_hot(a[5], 3, DType::kF32);
    return std::vector<Tensor>{mean(negate(sum(onehot * log_softmax(logits), {1})))};
  };
  const std::vector<ir::TensorType> types = {{{4, 7, 7, 2}, DType::kF32}, {{3, 3, 2, 5}, DType::kF32},
                                             {{5}, DType::kF32},          {{45, 3}, DType::kF32},
                                             {{3}, DType::kF32},          {{4}, DType::kI32}};
  const std::vector<Array> args = {random_array({4, 7, 7, 2}, DType::kF32, 80),
                                   random_array({3, 3, 2, 5}, DType::kF32, 81, -0.5, 0.5),
                                   random_array({5}, DType::kF32, 82, -0.1, 0.1),
                                   random_array({45, 3}, DType::kF32, 83, -0.3, 0.3),
                                   random_array({3}, DType::kF32, 84),
                                   random_array({4}, DType::kI32, 85, 0, 2)};
  const ir::Graph forward = trace(loss, types, "convnet_loss");
  expect_parity(forward, args, rtol_at_least(1e-5), lowering());
  expect_parity(value_and_grad_graph(forward, {0, 1, 2, 3, 4}), args, rtol_at_least(1e-5), lowering());
}

}  // namespace
}  // namespace ingot
