// Library-backed convolution kernels (im2col + GEMM) for JIT-compiled code, and their CPU reference
// (see include/ingot/kernels/cpu_conv.h). The im2col formulation is the classic one (Chellapilla,
// Puri and Simard, "High Performance Convolutional Neural Networks for Document Processing",
// 2006), generalised here to StableHLO's dimension numbers, dilations and groups.
#include "ingot/kernels/cpu_conv.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <span>
#include <string>
#include <tuple>

#include "ingot/kernels/cpu_gemm.h"
#include "ingot/runtime/error.h"

namespace ingot::kernels {

namespace {

constexpr const char* kWho = "cpu convolution kernel";

size_t at(int64_t i) { return static_cast<size_t>(i); }

/// a * b + c, or ingot::Error when it overflows int64 (sizes from a hand-written config).
int64_t mul_add(int64_t a, int64_t b, int64_t c) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} * {} + {} overflows int64", kWho, a, b, c));
  }
  return r;
}

/// Number of elements of `shape` (sizes >= 0, product without overflow; else ingot::Error).
int64_t elements(const std::vector<int64_t>& shape, const char* which) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} shape ({}) has a negative size", kWho, which, fmt::join(shape, ", ")));
    }
    n = mul_add(n, d, 0);
  }
  return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

/// Checks that the dims named by `singles` and `spatial` are in [0, rank) and distinct.
void check_dims(const char* which, int64_t rank, std::initializer_list<int64_t> singles,
                const std::vector<int64_t>& spatial) {
  std::vector<bool> seen(at(rank), false);
  std::vector<int64_t> all = singles;
  all.insert(all.end(), spatial.begin(), spatial.end());
  for (int64_t d : all) {
    if (d < 0 || d >= rank) {
      throw Error(ErrorCode::kOutOfRange,
                  fmt::format("{}: {} dimension number {} is out of range for rank {}", kWho, which, d, rank));
    }
    if (seen[at(d)]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} dimension {} is named twice by the dimension numbers", kWho, which, d));
    }
    seen[at(d)] = true;
  }
}

void check_length(const char* name, const std::vector<int64_t>& v, size_t want) {
  if (v.size() != want) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} has {} entries, expected {}", kWho, name, v.size(), want));
  }
}

void check_positive(const char* name, const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x < 1) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} holds {}, must be >= 1", kWho, name, x));
  }
}

int64_t dilated(int64_t size, int64_t dilation) { return size == 0 ? 0 : mul_add(size - 1, dilation, 1); }

/// Result size of spatial dim i (StableHLO's rule, as the interpreter's conv_window_count).
int64_t window_count(const ConvSpec& s, size_t i) {
  const int64_t padded =
      mul_add(1, s.padding[2 * i],
              mul_add(1, dilated(s.lhs_shape[at(s.in_spatial[i])], s.lhs_dilation[i]), s.padding[2 * i + 1]));
  if (padded < 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: spatial dim {} has negative padded size {}", kWho, i, padded));
  }
  const int64_t window = dilated(s.rhs_shape[at(s.k_spatial[i])], s.rhs_dilation[i]);
  if (padded == 0 || window > padded) return 0;
  return (padded - window) / s.strides[i] + 1;
}

/// The result shape `s` implies (checks the group divisibility it needs).
std::vector<int64_t> result_shape(const ConvSpec& s) {
  const int64_t batch = s.lhs_shape[at(s.in_batch)], features = s.lhs_shape[at(s.in_feature)];
  const int64_t k_in = s.rhs_shape[at(s.k_in_feature)], k_out = s.rhs_shape[at(s.k_out_feature)];
  if (batch % s.batch_groups != 0 || k_in * s.feature_groups != features || k_out % s.feature_groups != 0 ||
      k_out % s.batch_groups != 0) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: groups do not fit: lhs batch {}, lhs features {}, kernel input features {}, "
                            "kernel output features {}, feature_group_count {}, batch_group_count {}",
                            kWho, batch, features, k_in, k_out, s.feature_groups, s.batch_groups),
                "lhs features = kernel input features * feature groups; groups divide the batch and outputs");
  }
  std::vector<int64_t> out(s.lhs_shape.size(), 0);
  out[at(s.out_batch)] = batch / s.batch_groups;
  out[at(s.out_feature)] = k_out;
  for (size_t i = 0; i < s.out_spatial.size(); ++i) out[at(s.out_spatial[i])] = window_count(s, i);
  return out;
}

/// A row-major multi-index over `sizes` (all > 0), starting at flat index `start`.
struct Odometer {
  Odometer(const std::vector<int64_t>& s, int64_t start) : sizes(s), idx(s.size()) { reset(start); }
  void reset(int64_t start) {
    for (size_t d = sizes.size(); d-- > 0;) {
      idx[d] = start % sizes[d];
      start /= sizes[d];
    }
  }
  void next() {
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++idx[d] < sizes[d]) return;
      idx[d] = 0;
    }
  }
  const std::vector<int64_t>& sizes;
  std::vector<int64_t> idx;
};

int64_t spatial_index(const std::vector<int64_t>& dims, int64_t d) {
  const auto it = std::find(dims.begin(), dims.end(), d);
  return it == dims.end() ? -1 : static_cast<int64_t>(it - dims.begin());
}

/// One dim of the im2col matrix's rows (result positions) or columns (kernel taps). A linear dim
/// (role -1: the rows' batch, the columns' input feature) moves the lhs offset by `stride` per
/// index; a spatial dim (role i) moves input position i (in the padded, dilated input) by `step`
/// per index, starting at `pos0`.
struct Axis {
  int64_t size = 0, role = -1, stride = 0, step = 0, pos0 = 0;
};

/// How one convolution maps onto GEMMs: C (rows x features of a group) = A (rows x cols, the
/// im2col block) * B (cols x features of a group, the kernel).
struct Plan {
  std::vector<int64_t> ls, rs, os;  // row-major strides of lhs, rhs, result
  // Rows: the result dims but the feature dim, in layout order; columns: the kernel dims but the
  // output-feature dim, in layout order. `*_outer` are the sizes of all but the last.
  std::vector<Axis> row_axes, col_axes;
  std::vector<int64_t> row_sizes, row_outer, col_sizes, col_outer, row_out_strides;
  std::vector<int64_t> in_sizes, in_strides, lhs_dilation;  // per lhs spatial dim
  int64_t rows = 0, cols = 0, features = 0, groups = 1, per_group = 0;
  int64_t in_per_group = 0, batch_per_group = 0;
  enum class Out { kFeatureLast, kFeatureFirst, kBlock } out = Out::kBlock;     // result as C, C^T or a block
  enum class Kernel { kOutLast, kOutFirst, kPacked } kernel = Kernel::kPacked;  // rhs as B, B^T or packed B
  // The block is stored transposed (columns x rows) when the rows' last dim is longer than the
  // columns' last dim: the gather's innermost runs are then the longer ones.
  bool transposed = false;
  int64_t row_chunk = 1, col_chunk = 1;
};

std::vector<int64_t> sizes_of(const std::vector<Axis>& axes, size_t count) {
  std::vector<int64_t> s;
  for (size_t t = 0; t < count; ++t) s.push_back(axes[t].size);
  return s;
}

/// Rows (result dims but the feature dim) and columns (kernel dims but the output features).
void make_axes(const ConvSpec& s, Plan& p) {
  const auto n = static_cast<int64_t>(s.lhs_shape.size());
  for (int64_t d = 0; d < n; ++d) {
    if (d == s.out_feature) continue;
    Axis a{.size = s.out_shape[at(d)]};
    if (d == s.out_batch) {
      a.stride = p.ls[at(s.in_batch)];
    } else {
      a.role = spatial_index(s.out_spatial, d);
      a.step = s.strides[at(a.role)];
      a.pos0 = -s.padding[2 * at(a.role)];
    }
    p.row_axes.push_back(a);
    p.row_out_strides.push_back(p.os[at(d)]);
  }
  for (int64_t d = 0; d < n; ++d) {
    if (d == s.k_out_feature) continue;
    Axis a{.size = s.rhs_shape[at(d)]};
    if (d == s.k_in_feature) {
      a.stride = p.ls[at(s.in_feature)];
    } else {
      a.role = spatial_index(s.k_spatial, d);
      a.step = s.rhs_dilation[at(a.role)];
    }
    p.col_axes.push_back(a);
  }
  p.row_sizes = sizes_of(p.row_axes, p.row_axes.size());
  p.row_outer = sizes_of(p.row_axes, p.row_axes.size() - 1);
  p.col_sizes = sizes_of(p.col_axes, p.col_axes.size());
  p.col_outer = sizes_of(p.col_axes, p.col_axes.size() - 1);
}

Plan make_plan(const ConvSpec& s, int64_t element_bytes) {
  Plan p;
  const auto n = static_cast<int64_t>(s.lhs_shape.size());
  p.ls = row_major_strides(s.lhs_shape);
  p.rs = row_major_strides(s.rhs_shape);
  p.os = row_major_strides(s.out_shape);
  make_axes(s, p);
  for (int64_t d : s.in_spatial) {
    p.in_sizes.push_back(s.lhs_shape[at(d)]);
    p.in_strides.push_back(p.ls[at(d)]);
  }
  p.lhs_dilation = s.lhs_dilation;
  p.rows = elements(p.row_sizes, "result");
  p.cols = elements(p.col_sizes, "kernel");
  p.features = s.out_shape[at(s.out_feature)];
  p.groups = std::max(s.feature_groups, s.batch_groups);
  p.per_group = p.features / p.groups;
  p.in_per_group = s.lhs_shape[at(s.in_feature)] / s.feature_groups;
  p.batch_per_group = s.lhs_shape[at(s.in_batch)] / s.batch_groups;
  p.out = s.out_feature == n - 1 ? Plan::Out::kFeatureLast
          : s.out_feature == 0   ? Plan::Out::kFeatureFirst
                                 : Plan::Out::kBlock;
  p.kernel = s.k_out_feature == n - 1 ? Plan::Kernel::kOutLast
             : s.k_out_feature == 0   ? Plan::Kernel::kOutFirst
                                      : Plan::Kernel::kPacked;
  p.transposed = p.row_sizes.back() > p.col_sizes.back();
  // Chunks: the im2col block (row_chunk x col_chunk elements) stays <= kConvBlockBytes. Whole
  // windows per row when at least 64 rows fit, else 64 rows (or fewer) with the columns split.
  const int64_t budget = kConvBlockBytes / element_bytes;
  const int64_t min_rows = std::min<int64_t>(p.rows, 64);
  if (p.cols <= budget / std::max<int64_t>(min_rows, 1)) {
    p.col_chunk = p.cols;
    p.row_chunk = std::min(p.rows, budget / std::max<int64_t>(p.cols, 1));
  } else {
    p.row_chunk = min_rows;
    p.col_chunk = budget / min_rows;
  }
  // The temporary result block (feature dim in the middle of the layout) obeys the same bound
  // unless one row of a group's features alone exceeds it.
  if (p.out == Plan::Out::kBlock) p.row_chunk = std::max<int64_t>(1, std::min(p.row_chunk, budget / p.per_group));
  return p;
}

/// Whether every BLAS size and leading dimension of the plan fits BLAS's 32-bit int.
bool fits_blas(const Plan& p) {
  const int64_t limit = std::numeric_limits<int>::max();
  return std::max({p.rows, p.cols, p.features, p.row_chunk, p.col_chunk}) <= limit;
}

/// Whether the im2col matrix holds cells that are padding or lhs-dilation holes.
bool has_holes(const ConvSpec& s) {
  return std::any_of(s.padding.begin(), s.padding.end(), [](int64_t v) { return v > 0; }) ||
         std::any_of(s.lhs_dilation.begin(), s.lhs_dilation.end(), [](int64_t v) { return v > 1; });
}

/// Adds the lhs offset of input position `pos` (in the padded, dilated input) of spatial dim `i`
/// to `off`; false when `pos` is padding or a dilation hole.
bool tap(const Plan& p, size_t i, int64_t pos, int64_t& off) {
  const int64_t d = p.lhs_dilation[i];
  if (pos < 0 || (d != 1 && pos % d != 0)) return false;
  const int64_t x = d == 1 ? pos : pos / d;
  if (x >= p.in_sizes[i]) return false;
  off += x * p.in_strides[i];
  return true;
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 && (a < 0) == (b < 0) ? 1 : 0); }

/// Writes elements [j0, j1) of a run along spatial dim `i` whose element j reads input position
/// start + j * step (0 for padding and holes); `off` holds the other dims' lhs offset. Without
/// lhs dilation the real positions are one interval of j: zeros around a strided copy.
template <class T>
void spatial_run(const Plan& p, const T* lhs, int64_t off, size_t i, int64_t start, int64_t step, int64_t j0,
                 int64_t j1, T* dst) {
  if (p.lhs_dilation[i] != 1) {
    for (int64_t j = j0; j < j1; ++j) {
      int64_t o = off;
      dst[j - j0] = tap(p, i, start + j * step, o) ? lhs[o] : T(0);
    }
    return;
  }
  // 0 <= start + j * step < in_sizes[i]  <=>  lo <= j < hi (step >= 1).
  const int64_t lo = std::clamp<int64_t>(ceil_div(-start, step), j0, j1);
  const int64_t hi = std::clamp<int64_t>(ceil_div(p.in_sizes[i] - start, step), lo, j1);
  std::fill(dst, dst + (lo - j0), T(0));
  const T* src = lhs + off + start * p.in_strides[i];
  const int64_t stride = step * p.in_strides[i];
  if (stride == 1) {
    std::copy(src + lo, src + hi, dst + (lo - j0));
  } else {
    for (int64_t j = lo; j < hi; ++j) dst[j - j0] = src[j * stride];
  }
  std::fill(dst + (hi - j0), dst + (j1 - j0), T(0));
}

/// Adds what the first `count` dims of `axes` at multi-index `idx` contribute to the lhs offset
/// and the input positions.
void accumulate(const std::vector<Axis>& axes, const std::vector<int64_t>& idx, size_t count, int64_t& off,
                std::vector<int64_t>& pos) {
  for (size_t t = 0; t < count; ++t) {
    const Axis& a = axes[t];
    if (a.role < 0) {
      off += idx[t] * a.stride;
    } else {
      pos[at(a.role)] += a.pos0 + idx[t] * a.step;
    }
  }
}

/// One side of an im2col block: its axes, their sizes (all and all but the last) and the flat
/// index range [first, first + count).
struct Side {
  const std::vector<Axis>& axes;
  const std::vector<int64_t>& sizes;
  const std::vector<int64_t>& outer;
  int64_t first, count;
};

/// Writes the im2col block major x minor (the rows and columns in either order; each major
/// index's minor range contiguous in `dst`): the lhs element every (row, column) pair reads, or
/// 0 for padding and dilation holes. `base` is the group's lhs offset. The innermost loop copies
/// a run along the minor side's last dim.
/// Whether the minor side's last two axes can be copied as one run: the last is a contiguous
/// linear dim (e.g. the input features of NHWC) and the one before a spatial dim without lhs
/// dilation whose step in the input is exactly that run (e.g. the kernel's width taps): a whole
/// window row is then one contiguous stretch of the input when it lies inside it.
bool mergeable_runs(const Plan& p, const Side& minor) {
  const size_t last = minor.axes.size() - 1;
  if (last < 1) return false;
  const Axis &run = minor.axes[last], &span = minor.axes[last - 1];
  return run.role < 0 && run.stride == 1 && span.role >= 0 && p.lhs_dilation[at(span.role)] == 1 &&
         span.step * p.in_strides[at(span.role)] == run.size;
}

template <class T>
void gather(const Plan& p, const T* lhs, int64_t base, const Side& major, const Side& minor, T* dst) {
  const size_t ns = p.in_sizes.size(), last = minor.axes.size() - 1;
  const Axis& run = minor.axes[last];
  const bool merge = mergeable_runs(p, minor);
  const Axis& span = minor.axes[merge ? last - 1 : last];
  const int64_t span_len = span.size * run.size;
  std::vector<int64_t> major_pos(ns), pos(ns);
  Odometer maj(major.sizes, major.first), outer(minor.outer, 0);
  for (int64_t a = 0; a < major.count; ++a, maj.next()) {
    int64_t major_off = base;
    std::fill(major_pos.begin(), major_pos.end(), 0);
    accumulate(major.axes, maj.idx, major.axes.size(), major_off, major_pos);
    outer.reset(minor.first / run.size);
    for (int64_t k = minor.first, end = minor.first + minor.count; k < end; outer.next()) {
      const int64_t j0 = k % run.size, j1 = std::min(run.size, j0 + (end - k));
      int64_t off = major_off;
      pos = major_pos;
      accumulate(minor.axes, outer.idx, last, off, pos);
      bool valid = true;
      for (size_t i = 0; i < ns && valid; ++i) {
        if (static_cast<int64_t>(i) != run.role) valid = tap(p, i, pos[i], off);
      }
      // A whole window row (span x run) inside the input: one copy instead of span.size runs.
      if (merge && valid && j0 == 0 && outer.idx[last - 1] == 0 && end - k >= span_len &&
          pos[at(span.role)] + (span.size - 1) * span.step < p.in_sizes[at(span.role)]) {
        std::copy(lhs + off, lhs + off + span_len, dst);
        dst += span_len;
        k += span_len;
        for (int64_t t = 1; t < span.size; ++t) outer.next();  // the loop's next() moves past the last
        continue;
      }
      if (!valid) {
        std::fill(dst, dst + (j1 - j0), T(0));
      } else if (run.role < 0 && run.stride == 1) {
        std::copy(lhs + off + j0, lhs + off + j1, dst);
      } else if (run.role < 0) {
        for (int64_t j = j0; j < j1; ++j) dst[j - j0] = lhs[off + j * run.stride];
      } else {
        spatial_run(p, lhs, off, at(run.role), pos[at(run.role)] + run.pos0, run.step, j0, j1, dst);
      }
      dst += j1 - j0;
      k += j1 - j0;
    }
  }
}

/// gather() split over the OpenMP threads (the pool of libomp the JIT code and oneDNN share): each
/// thread writes a contiguous range of major indices. Below `kMinParallelGather` elements the
/// fork/join costs more than it saves and the gather runs on the calling thread.
constexpr int64_t kMinParallelGather = int64_t{1} << 15;

template <class T>
void parallel_gather(const Plan& p, const T* lhs, int64_t base, const Side& major, const Side& minor, T* dst) {
  const int64_t parts = std::min<int64_t>(omp_get_max_threads(), major.count);
  if (parts <= 1 || major.count * minor.count < kMinParallelGather) return gather(p, lhs, base, major, minor, dst);
#pragma omp parallel for schedule(static) num_threads(parts)
  for (int64_t t = 0; t < parts; ++t) {
    const int64_t a0 = major.count * t / parts, a1 = major.count * (t + 1) / parts;
    const Side part{major.axes, major.sizes, major.outer, major.first + a0, a1 - a0};
    gather(p, lhs, base, part, minor, dst + a0 * minor.count);
  }
}

/// C = op(A) op(B) + beta C through the GEMM libraries (kernels/cpu/gemm.cpp: oneDNN for f32,
/// OpenBLAS for f64).
void library_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float beta, float* c, int64_t ldc) {
  sgemm_row_major(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, beta);
}

void library_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                  int64_t ldb, double beta, double* c, int64_t ldc) {
  dgemm_row_major(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, beta);
}

/// The kernel as B (cols x features, row-major) where its output-feature dim is neither first nor
/// last: one copy of the rhs (the dims before the output features, then those after, as columns).
template <class T>
std::vector<T> pack_kernel(const ConvSpec& s, const Plan& p, const T* rhs) {
  const int64_t features = s.rhs_shape[at(s.k_out_feature)];
  const int64_t inner = p.rs[at(s.k_out_feature)];
  const int64_t outer = p.cols / std::max<int64_t>(inner, 1);
  std::vector<T> b(at(p.cols * features));
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t f = 0; f < features; ++f) {
      const T* src = rhs + (a * features + f) * inner;
      for (int64_t i = 0; i < inner; ++i) b[at((a * inner + i) * features + f)] = src[i];
    }
  }
  return b;
}

/// im2col + GEMM for a checked spec (see convolution() in the header).
template <class T>
void im2col_convolution(const ConvSpec& s, const Plan& p, const T* lhs, const T* rhs, T* out) {
  std::vector<T> packed;
  if (p.kernel == Plan::Kernel::kPacked) packed = pack_kernel(s, p, rhs);
  const T* kernel = packed.empty() ? rhs : packed.data();
  const bool b_transposed = p.kernel == Plan::Kernel::kOutFirst;  // stored (features x cols)
  const int64_t ldb = b_transposed ? p.cols : p.features;
  std::vector<T> col(at(p.row_chunk * p.col_chunk));
  std::vector<T> block(p.out == Plan::Out::kBlock ? at(p.row_chunk * p.per_group) : 0);
  for (int64_t g = 0; g < p.groups; ++g) {
    const int64_t base = (s.batch_groups > 1 ? g * p.batch_per_group * p.ls[at(s.in_batch)] : 0) +
                         (s.feature_groups > 1 ? g * p.in_per_group * p.ls[at(s.in_feature)] : 0);
    for (int64_t m0 = 0; m0 < p.rows; m0 += p.row_chunk) {
      const int64_t mc = std::min(p.row_chunk, p.rows - m0);
      for (int64_t k0 = 0; k0 < p.cols; k0 += p.col_chunk) {
        const int64_t kc = std::min(p.col_chunk, p.cols - k0);
        const Side rows{p.row_axes, p.row_sizes, p.row_outer, m0, mc},
            cols{p.col_axes, p.col_sizes, p.col_outer, k0, kc};
        if (p.transposed) {
          parallel_gather(p, lhs, base, cols, rows, col.data());  // (kc x mc)
        } else {
          parallel_gather(p, lhs, base, rows, cols, col.data());  // (mc x kc)
        }
        const int64_t lda = p.transposed ? mc : kc;
        const T beta = k0 == 0 ? T(0) : T(1);
        const T* b = b_transposed ? kernel + g * p.per_group * p.cols + k0 : kernel + k0 * p.features + g * p.per_group;
        const bool ta = p.transposed, tb = b_transposed;
        if (p.out == Plan::Out::kFeatureFirst) {
          // The result is (features x rows): C^T = B^T A^T.
          library_gemm(!b_transposed, !p.transposed, p.per_group, mc, kc, b, ldb, col.data(), lda, beta,
                       out + g * p.per_group * p.rows + m0, p.rows);
        } else if (p.out == Plan::Out::kFeatureLast) {
          library_gemm(ta, tb, mc, p.per_group, kc, col.data(), lda, b, ldb, beta,
                       out + m0 * p.features + g * p.per_group, p.features);
        } else {
          library_gemm(ta, tb, mc, p.per_group, kc, col.data(), lda, b, ldb, beta, block.data(), p.per_group);
        }
      }
      if (p.out != Plan::Out::kBlock) continue;
      Odometer row(p.row_sizes, m0);
      const int64_t feature_stride = p.os[at(s.out_feature)];
      for (int64_t r = 0; r < mc; ++r, row.next()) {
        int64_t off = g * p.per_group * feature_stride;
        for (size_t t = 0; t < p.row_sizes.size(); ++t) off += row.idx[t] * p.row_out_strides[t];
        for (int64_t j = 0; j < p.per_group; ++j) out[off + j * feature_stride] = block[at(r * p.per_group + j)];
      }
    }
  }
}

/// The reference: the interpreter's conv_point for every result element, in its order.
template <class T>
void reference(const ConvSpec& s, const T* lhs, const T* rhs, T* out) {
  const std::vector<int64_t> ls = row_major_strides(s.lhs_shape), rs = row_major_strides(s.rhs_shape);
  std::vector<int64_t> window;
  for (int64_t d : s.k_spatial) window.push_back(s.rhs_shape[at(d)]);
  window.push_back(s.rhs_shape[at(s.k_in_feature)]);
  const int64_t total = elements(s.out_shape, "result"), taps = elements(window, "window");
  const int64_t out_per_group =
      std::max<int64_t>(1, s.rhs_shape[at(s.k_out_feature)] / (s.feature_groups * s.batch_groups));
  const int64_t in_per_group = s.lhs_shape[at(s.in_feature)] / s.feature_groups;
  const int64_t batch_per_group = s.lhs_shape[at(s.in_batch)] / s.batch_groups;
  const size_t ns = s.in_spatial.size();
  if (total == 0) return;
  Odometer o(s.out_shape, 0);
  for (int64_t flat = 0; flat < total; ++flat, o.next()) {
    const int64_t f = o.idx[at(s.out_feature)], group = f / out_per_group;
    const int64_t batch = o.idx[at(s.out_batch)] + (s.batch_groups > 1 ? group * batch_per_group : 0);
    const int64_t feature_base = s.feature_groups > 1 ? group * in_per_group : 0;
    T acc = T(0);
    if (taps > 0) {
      Odometer w(window, 0);
      for (int64_t t = 0; t < taps; ++t, w.next()) {
        int64_t l = batch * ls[at(s.in_batch)] + (feature_base + w.idx[ns]) * ls[at(s.in_feature)];
        int64_t r = f * rs[at(s.k_out_feature)] + w.idx[ns] * rs[at(s.k_in_feature)];
        bool real = true;
        for (size_t i = 0; i < ns && real; ++i) {
          const int64_t p =
              o.idx[at(s.out_spatial[i])] * s.strides[i] + w.idx[i] * s.rhs_dilation[i] - s.padding[2 * i];
          if (p < 0 || p % s.lhs_dilation[i] != 0 || p / s.lhs_dilation[i] >= s.lhs_shape[at(s.in_spatial[i])]) {
            real = false;
          } else {
            l += p / s.lhs_dilation[i] * ls[at(s.in_spatial[i])];
            r += w.idx[i] * rs[at(s.k_spatial[i])];
          }
        }
        if (real) acc += lhs[l] * rhs[r];
      }
    }
    out[flat] = acc;
  }
}

/// Checks `s` and that the buffers have its element counts.
template <class T>
void check_call(const ConvSpec& s, std::span<const T> lhs, std::span<const T> rhs, std::span<T> out) {
  check_conv_spec(s);
  for (const auto& [name, shape, size] :
       {std::tuple{"lhs", &s.lhs_shape, lhs.size()}, std::tuple{"rhs", &s.rhs_shape, rhs.size()},
        std::tuple{"result", &s.out_shape, out.size()}}) {
    const int64_t want = elements(*shape, name);
    if (static_cast<int64_t>(size) != want) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}: the {} buffer holds {} elements, but its shape ({}) has {}", kWho, name, size,
                              fmt::join(*shape, ", "), want));
    }
  }
}

template <class T>
void run_convolution(const ConvSpec& s, std::span<const T> lhs, std::span<const T> rhs, std::span<T> out) {
  check_call(s, lhs, rhs, out);
  if (out.empty()) return;
  const Plan p = make_plan(s, static_cast<int64_t>(sizeof(T)));
  if (p.cols == 0) {  // no taps or no input features: sums of nothing
    std::fill(out.begin(), out.end(), T(0));
    return;
  }
  const bool nonfinite_kernel = std::any_of(rhs.begin(), rhs.end(), [](T v) { return !std::isfinite(v); });
  if (!fits_blas(p) || (nonfinite_kernel && has_holes(s))) return reference(s, lhs.data(), rhs.data(), out.data());
  im2col_convolution(s, p, lhs.data(), rhs.data(), out.data());
}

template <class T>
std::span<T> as_span(const MemRef1D<T>& m, const char* which) {
  if (m.sizes[0] < 0 || (m.sizes[0] > 1 && m.strides[0] != 1)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the {} memref has size {} and stride {}; expected a contiguous buffer", kWho, which,
                            m.sizes[0], m.strides[0]));
  }
  return {m.aligned + m.offset, static_cast<size_t>(m.sizes[0])};
}

/// The JIT entry: never throws (see the header).
template <class T>
void run_from_memrefs(const MemRef1D<T>& lhs, const MemRef1D<T>& rhs, MemRef1D<T>& out,
                      const MemRef1D<int64_t>& config) {
  try {
    const std::span<int64_t> c = as_span(config, "config");
    run_convolution<T>(decode_conv_spec(c), as_span(lhs, "lhs"), as_span(rhs, "rhs"), as_span(out, "result"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ingot: %s (the result is filled with NaN)\n", e.what());
    for (int64_t i = 0; i < out.sizes[0]; ++i)
      out.aligned[out.offset + i * out.strides[0]] = std::numeric_limits<T>::quiet_NaN();
  }
}

}  // namespace

ConvSpec decode_conv_spec(std::span<const int64_t> config) {
  constexpr size_t kHeader = 9;
  if (config.size() < kHeader || config[0] < 2 || config[0] > 1024) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: config of {} entries{} is not an encoded convolution", kWho, config.size(),
                            config.empty() ? "" : fmt::format(" with rank {}", config[0])),
                "build it with encode_conv_spec (rank 2..1024)");
  }
  const auto n = static_cast<size_t>(config[0]), ns = n - 2;
  const size_t want = kHeader + 3 * n + 8 * ns;
  if (config.size() != want) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: config has {} entries, but rank {} needs {}", kWho, config.size(), n, want));
  }
  ConvSpec s;
  s.feature_groups = config[1];
  s.batch_groups = config[2];
  s.in_batch = config[3];
  s.in_feature = config[4];
  s.k_in_feature = config[5];
  s.k_out_feature = config[6];
  s.out_batch = config[7];
  s.out_feature = config[8];
  const auto shape = [&](size_t k) {
    return std::vector<int64_t>(config.begin() + static_cast<ptrdiff_t>(kHeader + k * n),
                                config.begin() + static_cast<ptrdiff_t>(kHeader + (k + 1) * n));
  };
  s.lhs_shape = shape(0);
  s.rhs_shape = shape(1);
  s.out_shape = shape(2);
  for (size_t i = 0; i < ns; ++i) {
    const int64_t* v = config.data() + kHeader + 3 * n + 8 * i;
    s.in_spatial.push_back(v[0]);
    s.k_spatial.push_back(v[1]);
    s.out_spatial.push_back(v[2]);
    s.strides.push_back(v[3]);
    s.padding.insert(s.padding.end(), {v[4], v[5]});
    s.lhs_dilation.push_back(v[6]);
    s.rhs_dilation.push_back(v[7]);
  }
  check_conv_spec(s);
  return s;
}

void check_conv_spec(const ConvSpec& s) {
  const size_t n = s.lhs_shape.size();
  if (n < 2 || s.rhs_shape.size() != n || s.out_shape.size() != n) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: lhs, rhs and result have ranks {}, {} and {}; they must be equal and >= 2", kWho, n,
                            s.rhs_shape.size(), s.out_shape.size()));
  }
  const size_t ns = n - 2;
  check_length("in_spatial", s.in_spatial, ns);
  check_length("k_spatial", s.k_spatial, ns);
  check_length("out_spatial", s.out_spatial, ns);
  check_length("strides", s.strides, ns);
  check_length("padding", s.padding, 2 * ns);
  check_length("lhs_dilation", s.lhs_dilation, ns);
  check_length("rhs_dilation", s.rhs_dilation, ns);
  const auto rank = static_cast<int64_t>(n);
  check_dims("lhs", rank, {s.in_batch, s.in_feature}, s.in_spatial);
  check_dims("rhs", rank, {s.k_in_feature, s.k_out_feature}, s.k_spatial);
  check_dims("result", rank, {s.out_batch, s.out_feature}, s.out_spatial);
  elements(s.lhs_shape, "lhs");
  elements(s.rhs_shape, "rhs");
  elements(s.out_shape, "result");
  check_positive("strides", s.strides);
  check_positive("lhs_dilation", s.lhs_dilation);
  check_positive("rhs_dilation", s.rhs_dilation);
  check_positive("feature_group_count", {s.feature_groups});
  check_positive("batch_group_count", {s.batch_groups});
  if (s.feature_groups > 1 && s.batch_groups > 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: feature_group_count {} and batch_group_count {} are both > 1", kWho, s.feature_groups,
                            s.batch_groups));
  }
  const std::vector<int64_t> want = result_shape(s);
  if (want != s.out_shape) {
    throw Error(ErrorCode::kShapeMismatch, fmt::format("{}: result shape ({}) differs from the convolution's ({})",
                                                       kWho, fmt::join(s.out_shape, ", "), fmt::join(want, ", ")));
  }
}

void convolution(const ConvSpec& s, std::span<const float> lhs, std::span<const float> rhs, std::span<float> out) {
  run_convolution<float>(s, lhs, rhs, out);
}
void convolution(const ConvSpec& s, std::span<const double> lhs, std::span<const double> rhs, std::span<double> out) {
  run_convolution<double>(s, lhs, rhs, out);
}

void convolution_reference(const ConvSpec& s, std::span<const float> lhs, std::span<const float> rhs,
                           std::span<float> out) {
  check_call<float>(s, lhs, rhs, out);
  reference(s, lhs.data(), rhs.data(), out.data());
}
void convolution_reference(const ConvSpec& s, std::span<const double> lhs, std::span<const double> rhs,
                           std::span<double> out) {
  check_call<double>(s, lhs, rhs, out);
  reference(s, lhs.data(), rhs.data(), out.data());
}

void conv_f32(const MemRef1D<float>& lhs, const MemRef1D<float>& rhs, MemRef1D<float>& out,
              const MemRef1D<int64_t>& config) {
  run_from_memrefs(lhs, rhs, out, config);
}
void conv_f64(const MemRef1D<double>& lhs, const MemRef1D<double>& rhs, MemRef1D<double>& out,
              const MemRef1D<int64_t>& config) {
  run_from_memrefs(lhs, rhs, out, config);
}

}  // namespace ingot::kernels

extern "C" {
void ingot_cpu_conv_f32_ciface(ingot::kernels::MemRef1D<float>* lhs, ingot::kernels::MemRef1D<float>* rhs,
                               ingot::kernels::MemRef1D<float>* out, ingot::kernels::MemRef1D<int64_t>* config) {
  ingot::kernels::conv_f32(*lhs, *rhs, *out, *config);
}
void ingot_cpu_conv_f64_ciface(ingot::kernels::MemRef1D<double>* lhs, ingot::kernels::MemRef1D<double>* rhs,
                               ingot::kernels::MemRef1D<double>* out, ingot::kernels::MemRef1D<int64_t>* config) {
  ingot::kernels::conv_f64(*lhs, *rhs, *out, *config);
}
}
