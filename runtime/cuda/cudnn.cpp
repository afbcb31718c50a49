// cuDNN through dlopen: the pure mapping of a ConvSpec onto cuDNN's legacy convolution
// descriptors, and a CudaDnn over one cuDNN handle (include/ingot/runtime/cuda_dnn.h).
#include <cudnn.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <map>
#include <optional>

#include "cuda/driver_api.h"
#include "ingot/runtime/cuda_dnn.h"
#include "ingot/runtime/error.h"

namespace ingot {

// ---------------------------------------------------------------------------------------------
// The mapping (pure)

namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }

CudnnConvMapping not_expressible(std::string reason) {
  CudnnConvMapping m;
  m.reason = std::move(reason);
  return m;
}

/// The kernel's layout as cuDNN's filter format: KCRS (false), KRSC (true), or none.
std::optional<bool> filter_format(const kernels::ConvSpec& s) {
  const auto n = static_cast<int64_t>(s.rhs_shape.size()), ns = n - 2;
  bool kcrs = s.k_out_feature == 0 && s.k_in_feature == 1, krsc = s.k_out_feature == 0 && s.k_in_feature == n - 1;
  for (int64_t i = 0; i < ns; ++i) {
    kcrs = kcrs && s.k_spatial[at(i)] == i + 2;
    krsc = krsc && s.k_spatial[at(i)] == i + 1;
  }
  if (kcrs) return false;
  if (krsc) return true;
  return std::nullopt;
}

}  // namespace

CudnnConvMapping cudnn_conv_mapping(const kernels::ConvSpec& s) {
  const size_t ns = s.in_spatial.size();
  if (ns < 1 || ns > 3) return not_expressible(fmt::format("{} spatial dims (cuDNN takes 1 to 3 here)", ns));
  if (s.batch_groups != 1) return not_expressible(fmt::format("batch_group_count is {}", s.batch_groups));
  for (size_t i = 0; i < ns; ++i) {
    if (s.lhs_dilation[i] != 1)
      return not_expressible(fmt::format("lhs_dilation is [{}]", fmt::join(s.lhs_dilation, ", ")));
    if (s.padding[2 * i] != s.padding[2 * i + 1] || s.padding[2 * i] < 0) {
      return not_expressible(fmt::format("padding [{}] is not symmetric and non-negative", fmt::join(s.padding, ", ")));
    }
  }
  const std::optional<bool> nhwc = filter_format(s);
  const std::vector<int64_t> ls = row_major_strides(s.lhs_shape), os = row_major_strides(s.out_shape),
                             rs = row_major_strides(s.rhs_shape);
  std::vector<int64_t> x_dims = {s.lhs_shape[at(s.in_batch)], s.lhs_shape[at(s.in_feature)]},
                       x_strides = {ls[at(s.in_batch)], ls[at(s.in_feature)]},
                       y_dims = {s.out_shape[at(s.out_batch)], s.out_shape[at(s.out_feature)]},
                       y_strides = {os[at(s.out_batch)], os[at(s.out_feature)]},
                       w_dims = {s.rhs_shape[at(s.k_out_feature)], s.rhs_shape[at(s.k_in_feature)]},
                       w_strides = {rs[at(s.k_out_feature)], rs[at(s.k_in_feature)]}, pads, strides, dilations;
  if (ns == 1) {  // a leading unit spatial dim: its stride is that of a row of the real one
    x_dims.push_back(1);
    x_strides.push_back(s.lhs_shape[at(s.in_spatial[0])] * ls[at(s.in_spatial[0])]);
    y_dims.push_back(1);
    y_strides.push_back(s.out_shape[at(s.out_spatial[0])] * os[at(s.out_spatial[0])]);
    w_dims.push_back(1);
    w_strides.push_back(s.rhs_shape[at(s.k_spatial[0])] * rs[at(s.k_spatial[0])]);
    pads.push_back(0);
    strides.push_back(1);
    dilations.push_back(1);
  }
  for (size_t i = 0; i < ns; ++i) {
    x_dims.push_back(s.lhs_shape[at(s.in_spatial[i])]);
    x_strides.push_back(ls[at(s.in_spatial[i])]);
    y_dims.push_back(s.out_shape[at(s.out_spatial[i])]);
    y_strides.push_back(os[at(s.out_spatial[i])]);
    w_dims.push_back(s.rhs_shape[at(s.k_spatial[i])]);
    w_strides.push_back(rs[at(s.k_spatial[i])]);
    pads.push_back(s.padding[2 * i]);
    strides.push_back(s.strides[i]);
    dilations.push_back(s.rhs_dilation[i]);
  }
  CudnnConvMapping m;
  for (const auto& [from, to] : {std::pair{&x_dims, &m.x_dims},
                                 {&x_strides, &m.x_strides},
                                 {&y_dims, &m.y_dims},
                                 {&y_strides, &m.y_strides},
                                 {&w_dims, &m.w_dims},
                                 {&w_strides, &m.w_strides},
                                 {&pads, &m.pads},
                                 {&strides, &m.strides},
                                 {&dilations, &m.dilations}}) {
    for (int64_t v : *from) {
      if (v > std::numeric_limits<int>::max()) {
        return not_expressible(fmt::format("a size or stride of {} exceeds cuDNN's int range", v));
      }
      to->push_back(static_cast<int>(v));
    }
  }
  m.w_nhwc = nhwc.value_or(false);
  m.w_packed = nhwc.has_value();
  m.groups = static_cast<int>(s.feature_groups);
  m.expressible = true;
  return m;
}

const char* conv_engine_name(CudaConvChoice::Engine engine) {
  switch (engine) {
    case CudaConvChoice::Engine::kUndecided:
      return "undecided";
    case CudaConvChoice::Engine::kImplicitGemm:
      return "implicit GEMM";
    case CudaConvChoice::Engine::kCudnn:
      return "cuDNN";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// The library

#define INGOT_CUDNN_ENTRY_POINTS(X)          \
  X(cudnnCreate)                             \
  X(cudnnDestroy)                            \
  X(cudnnSetStream)                          \
  X(cudnnGetErrorString)                     \
  X(cudnnCreateTensorDescriptor)             \
  X(cudnnSetTensorNdDescriptor)              \
  X(cudnnDestroyTensorDescriptor)            \
  X(cudnnCreateFilterDescriptor)             \
  X(cudnnSetFilterNdDescriptor)              \
  X(cudnnDestroyFilterDescriptor)            \
  X(cudnnCreateConvolutionDescriptor)        \
  X(cudnnSetConvolutionNdDescriptor)         \
  X(cudnnSetConvolutionGroupCount)           \
  X(cudnnSetConvolutionMathType)             \
  X(cudnnDestroyConvolutionDescriptor)       \
  X(cudnnGetConvolutionForwardAlgorithm_v7)  \
  X(cudnnGetConvolutionForwardWorkspaceSize) \
  X(cudnnConvolutionForward)                 \
  X(cudnnTransformTensor)

/// Function pointers to cuDNN's entry points (all non-null once resolved).
struct CudnnLibrary::Api {
#define INGOT_CUDNN_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  INGOT_CUDNN_ENTRY_POINTS(INGOT_CUDNN_DECLARE_ENTRY)
#undef INGOT_CUDNN_DECLARE_ENTRY
};

namespace {

/// The most workspace an algorithm may ask for (bytes): 256 MiB.
constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;

/// Throws the ingot::Error of a failed cuDNN call: bad parameters -> kInvalidArgument, not
/// supported / anything else -> kFailedPrecondition.
void check(const CudnnLibrary::Api& api, cudnnStatus_t status, std::string_view call, std::string_view context) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const char* text = api.cudnnGetErrorString(status);
  const bool usage = status == CUDNN_STATUS_BAD_PARAM;
  throw Error(usage ? ErrorCode::kInvalidArgument : ErrorCode::kFailedPrecondition,
              fmt::format("{} failed while {}: {} (cudnnStatus_t {})", call, context,
                          text != nullptr ? text : "unknown status", static_cast<int>(status)),
              usage ? "the convolution's descriptors are invalid (a malformed CudaProgram)"
                    : "the implicit-GEMM kernel runs the convolution instead");
}

/// One prepared convolution's descriptors (destroyed with it).
struct Descriptors {
  const CudnnLibrary::Api* api = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t w_from = nullptr, w_to = nullptr;  // the kernel's copy into packed KCRS
  cudnnConvolutionFwdAlgo_t algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;      // the algorithm's
  size_t packed_offset = 0;  // where the packed kernel starts in the workspace (bytes)
  size_t packed_bytes = 0;   // 0: the kernel is used in place
  DType dtype = DType::kF32;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (api == nullptr) return;
    if (x != nullptr) (void)api->cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) (void)api->cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) (void)api->cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) (void)api->cudnnDestroyConvolutionDescriptor(conv);
    if (w_from != nullptr) (void)api->cudnnDestroyTensorDescriptor(w_from);
    if (w_to != nullptr) (void)api->cudnnDestroyTensorDescriptor(w_to);
  }
};

/// A cuDNN handle of one device (see CudnnLibrary::create).
class CudnnDnn final : public CudaDnn {
 public:
  CudnnDnn(const CudnnLibrary::Api& api, CudaDevice& device) : api_(api), device_(device) {
    device_.make_current();
    check(api_, api_.cudnnCreate(&handle_), "cudnnCreate",
          fmt::format("creating a cuDNN handle on {}", device_.name()));
  }
  ~CudnnDnn() override {
    plans_.clear();
    if (handle_ == nullptr) return;
    try {
      device_.make_current();
    } catch (const Error&) {  // destroy regardless
    }
    (void)api_.cudnnDestroy(handle_);
  }
  CudnnDnn(const CudnnDnn&) = delete;
  CudnnDnn& operator=(const CudnnDnn&) = delete;

  CudaDnnConvPlan plan_conv(const CudnnConvMapping& m, DType dtype) override {
    if (!m.expressible || (dtype != DType::kF32 && dtype != DType::kF64)) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("cuDNN convolution: {} of dtype {}", m.expressible ? "a mapping" : m.reason, dtype_name(dtype)),
          "plan only expressible f32/f64 convolutions (cudnn_conv_mapping)");
    }
    const std::string what = fmt::format("preparing a {} convolution on {}", dtype_name(dtype), device_.name());
    device_.make_current();
    auto d = std::make_unique<Descriptors>();
    d->api = &api_;
    d->dtype = dtype;
    const cudnnDataType_t type = dtype == DType::kF32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
    const int nb = static_cast<int>(m.x_dims.size());
    check(api_, api_.cudnnCreateTensorDescriptor(&d->x), "cudnnCreateTensorDescriptor", what);
    check(api_, api_.cudnnCreateTensorDescriptor(&d->y), "cudnnCreateTensorDescriptor", what);
    check(api_, api_.cudnnCreateFilterDescriptor(&d->w), "cudnnCreateFilterDescriptor", what);
    check(api_, api_.cudnnCreateConvolutionDescriptor(&d->conv), "cudnnCreateConvolutionDescriptor", what);
    check(api_, api_.cudnnSetTensorNdDescriptor(d->x, type, nb, m.x_dims.data(), m.x_strides.data()),
          "cudnnSetTensorNdDescriptor (input)", what);
    check(api_, api_.cudnnSetTensorNdDescriptor(d->y, type, nb, m.y_dims.data(), m.y_strides.data()),
          "cudnnSetTensorNdDescriptor (output)", what);
    check(api_,
          api_.cudnnSetFilterNdDescriptor(d->w, type, m.w_nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nb,
                                          m.w_dims.data()),
          "cudnnSetFilterNdDescriptor", what);
    check(api_,
          api_.cudnnSetConvolutionNdDescriptor(d->conv, nb - 2, m.pads.data(), m.strides.data(), m.dilations.data(),
                                               CUDNN_CROSS_CORRELATION, type),
          "cudnnSetConvolutionNdDescriptor", what);
    check(api_, api_.cudnnSetConvolutionGroupCount(d->conv, m.groups), "cudnnSetConvolutionGroupCount", what);
    check(api_, api_.cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType", what);
    if (!m.w_packed) pack_kernel(*d, m, type, what);
    choose_algorithm(*d, what);
    d->packed_offset = (d->workspace + 255) / 256 * 256;
    const int64_t id = next_id_++;
    CudaDnnConvPlan plan{.id = id,
                         .algorithm = static_cast<int>(d->algorithm),
                         .workspace_bytes = static_cast<int64_t>(
                             d->packed_bytes == 0 ? d->workspace : d->packed_offset + d->packed_bytes)};
    plans_[id] = std::move(d);
    return plan;
  }

  void conv_forward(const CudaDnnConvPlan& plan, uint64_t x, uint64_t w, uint64_t y, uint64_t workspace,
                    const CudaStream& stream) override {
    const auto it = plans_.find(plan.id);
    if (it == plans_.end()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("cuDNN convolution: no plan {}", plan.id),
                  "pass a plan this CudaDnn made (plan_conv)");
    }
    const Descriptors& d = *it->second;
    const std::string what =
        fmt::format("running a cuDNN convolution (algorithm {}) on {}", plan.algorithm, stream.name());
    device_.make_current();
    check(api_, api_.cudnnSetStream(handle_, stream.handle()), "cudnnSetStream", what);
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    const bool f32 = d.dtype == DType::kF32;
    const void* one = f32 ? static_cast<const void*>(&one_f) : &one_d;
    const void* zero = f32 ? static_cast<const void*>(&zero_f) : &zero_d;
    if (d.packed_bytes > 0) {  // the kernel into packed KCRS, after the algorithm's workspace
      const uint64_t packed = workspace + d.packed_offset;
      check(api_, api_.cudnnTransformTensor(handle_, one, d.w_from, pointer(w), zero, d.w_to, pointer(packed)),
            "cudnnTransformTensor (the kernel into KCRS)", what);
      w = packed;
    }
    check(api_,
          api_.cudnnConvolutionForward(handle_, one, d.x, pointer(x), d.w, pointer(w), d.conv, d.algorithm,
                                       pointer(workspace), d.workspace, zero, d.y, pointer(y)),
          "cudnnConvolutionForward", what);
  }

 private:
  static void* pointer(uint64_t address) { return reinterpret_cast<void*>(static_cast<uintptr_t>(address)); }

  /// Descriptors copying the kernel (any layout: w_strides) into packed KCRS, and its size.
  void pack_kernel(Descriptors& d, const CudnnConvMapping& m, cudnnDataType_t type, const std::string& what) const {
    const int nb = static_cast<int>(m.w_dims.size());
    std::vector<int> packed(m.w_dims.size(), 1);
    for (size_t i = packed.size() - 1; i > 0; --i) packed[i - 1] = packed[i] * m.w_dims[i];
    check(api_, api_.cudnnCreateTensorDescriptor(&d.w_from), "cudnnCreateTensorDescriptor", what);
    check(api_, api_.cudnnCreateTensorDescriptor(&d.w_to), "cudnnCreateTensorDescriptor", what);
    check(api_, api_.cudnnSetTensorNdDescriptor(d.w_from, type, nb, m.w_dims.data(), m.w_strides.data()),
          "cudnnSetTensorNdDescriptor (the kernel as stored)", what);
    check(api_, api_.cudnnSetTensorNdDescriptor(d.w_to, type, nb, m.w_dims.data(), packed.data()),
          "cudnnSetTensorNdDescriptor (the packed kernel)", what);
    d.packed_bytes =
        static_cast<size_t>(packed[0]) * static_cast<size_t>(m.w_dims[0]) * static_cast<size_t>(dtype_size(d.dtype));
  }

  /// The first of cuDNN's heuristic ranking that succeeds with a workspace <= kMaxWorkspaceBytes.
  void choose_algorithm(Descriptors& d, const std::string& what) const {
    constexpr int kRequested = 8;
    cudnnConvolutionFwdAlgoPerf_t perf[kRequested] = {};
    int returned = 0;
    check(api_,
          api_.cudnnGetConvolutionForwardAlgorithm_v7(handle_, d.x, d.w, d.conv, d.y, kRequested, &returned, perf),
          "cudnnGetConvolutionForwardAlgorithm_v7", what);
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspaceBytes) continue;
      size_t bytes = 0;
      if (api_.cudnnGetConvolutionForwardWorkspaceSize(handle_, d.x, d.w, d.conv, d.y, perf[i].algo, &bytes) !=
          CUDNN_STATUS_SUCCESS) {
        continue;
      }
      d.algorithm = perf[i].algo;
      d.workspace = bytes;
      return;
    }
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("cuDNN has no algorithm for this convolution within {} MiB of workspace ({} ranked)",
                            kMaxWorkspaceBytes >> 20, returned),
                "the implicit-GEMM kernel runs it instead");
  }

  CudnnLibrary::Api api_;
  CudaDevice& device_;
  cudnnHandle_t handle_ = nullptr;
  int64_t next_id_ = 0;
  std::map<int64_t, std::unique_ptr<Descriptors>> plans_;
};

}  // namespace

CudnnLibrary::CudnnLibrary() : api_(std::make_unique<Api>()) {}

CudnnLibrary::~CudnnLibrary() {
  if (library_ != nullptr && !available_) dlclose(library_);  // a usable cuDNN stays loaded (as cuBLAS)
}

std::shared_ptr<CudnnLibrary> CudnnLibrary::load(const std::string& library) {
  std::shared_ptr<CudnnLibrary> lib(new CudnnLibrary());
  dlerror();
  lib->library_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->library_ == nullptr) {
    const char* err = dlerror();
    lib->reason_ = fmt::format("the cuDNN library {} could not be loaded: {}", library,
                               err != nullptr ? err : "unknown dlopen error");
    return lib;
  }
  lib->path_ = library_path(lib->library_);
  lib->source_ = "given";
  lib->resolve(library);
  return lib;
}

std::shared_ptr<CudnnLibrary> CudnnLibrary::load(const LibrarySearch& search) {
  std::shared_ptr<CudnnLibrary> lib(new CudnnLibrary());
  const OpenedLibrary opened = open_library("libcudnn.so.9", search);
  if (opened.handle == nullptr) {
    lib->reason_ =
        fmt::format("the cuDNN library libcudnn.so.9 was not found; tried {}", fmt::join(opened.failures, "; "));
    return lib;
  }
  lib->library_ = opened.handle;
  lib->path_ = opened.path;
  lib->source_ = opened.source;
  lib->resolve(opened.path);
  return lib;
}

void CudnnLibrary::resolve(const std::string& library) {
  CudnnLibrary* lib = this;
  Api& api = *lib->api_;
  std::vector<std::string> missing;
#define INGOT_CUDNN_RESOLVE_ENTRY(name)                                         \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib->library_, #name)); \
  if (api.name == nullptr) missing.push_back(#name);
  INGOT_CUDNN_ENTRY_POINTS(INGOT_CUDNN_RESOLVE_ENTRY)
#undef INGOT_CUDNN_RESOLVE_ENTRY
  if (!missing.empty()) {
    lib->reason_ = fmt::format("{} is not a usable cuDNN: it lacks {}", library, fmt::join(missing, ", "));
    return;
  }
  lib->available_ = true;
}

std::unique_ptr<CudaDnn> CudnnLibrary::create(CudaDevice& device) const {
  if (!available_) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("cannot run cuDNN convolutions on {}: {}", device.name(), reason_),
                "install cuDNN 9 (libcudnn.so.9) where the dynamic loader finds it; the implicit-GEMM kernel runs "
                "convolutions without it");
  }
  return std::make_unique<CudnnDnn>(*api_, device);
}

}  // namespace ingot
