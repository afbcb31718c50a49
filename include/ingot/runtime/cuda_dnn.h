// Convolutions through cuDNN (libcudnn.so.9, loaded with dlopen like cuBLAS, never linked) and
// the choice between cuDNN and the implicit-GEMM kernel that CudaExecutable makes per convolution
// thunk at its first run (docs/runtime-cuda.md, "Convolutions").
//
// cuDNN's legacy convolution API (cudnnConvolutionForward) computes StableHLO's convolution when
// the spec fits its descriptors: cudnnSetTensorNdDescriptor with explicit strides describes any
// input and output layout; the filter must be packed KCRS or KRSC, so a kernel in any other
// layout (Keras's HWIO) is first copied into packed KCRS in the workspace (cudnnTransformTensor);
// padding must be symmetric and non-negative, and there is no lhs (input) dilation and no batch
// grouping. Its CUDNN_CROSS_CORRELATION mode is StableHLO's convolution (no window reversal).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/runtime/cuda.h"
#include "ingot/runtime/cuda_program.h"
#include "ingot/runtime/library_search.h"

namespace ingot {

/// A convolution as cuDNN's legacy API describes it (cudnnSetTensorNdDescriptor,
/// cudnnSetFilterNdDescriptor, cudnnSetConvolutionNdDescriptor, cudnnSetConvolutionGroupCount),
/// or why it cannot. Tensors have nb_dims = 4 or 5 entries in cuDNN's order (N, C, spatial...;
/// a 1-D convolution gets a leading unit spatial dim: cuDNN takes 2-D and 3-D convolutions);
/// strides are elements of the row-major operand buffers.
struct CudnnConvMapping {
  bool expressible = false;
  std::string reason;                  ///< why not (empty when expressible)
  std::vector<int> x_dims, x_strides;  ///< input (lhs): N, C, spatial...
  std::vector<int> y_dims, y_strides;  ///< output: N, K, spatial...
  std::vector<int> w_dims;             ///< filter: K, C / groups, spatial... (always in this order)
  std::vector<int> w_strides;          ///< the kernel buffer's strides in w_dims' order
  bool w_nhwc = false;                 ///< filter stored KRSC (CUDNN_TENSOR_NHWC), else KCRS (NCHW)
  /// The kernel is packed KCRS or KRSC as stored; else it is copied into packed KCRS (w_nhwc
  /// false) before each convolution (cudnnTransformTensor from w_strides).
  bool w_packed = true;
  std::vector<int> pads, strides, dilations;  ///< per spatial dim (nb_dims - 2 entries)
  int groups = 1;                             ///< feature groups (cudnnSetConvolutionGroupCount)
};

/// Maps `spec` (a valid ConvSpec) onto cuDNN's descriptors. Not expressible (with the reason):
/// lhs dilation other than 1, batch groups > 1, asymmetric or negative padding, more than 3
/// spatial dims, a size or stride beyond 2^31 - 1. Pure; never throws for a valid spec.
CudnnConvMapping cudnn_conv_mapping(const kernels::ConvSpec& spec);

/// A convolution prepared by a CudaDnn: its handle (`id`), the algorithm chosen and the
/// workspace it needs (bytes).
struct CudaDnnConvPlan {
  int64_t id = -1;
  int algorithm = -1;
  int64_t workspace_bytes = 0;
};

/// What runs convolutions through a library: cuDNN on a GPU (CudnnLibrary::create), host stand-ins
/// in tests. Implementations enqueue on `stream` after the work already there.
class CudaDnn {
 public:
  virtual ~CudaDnn() = default;
  /// Prepares an expressible `mapping` of `dtype` (f32/f64): descriptors and the fastest
  /// algorithm by the library's heuristics whose workspace fits (the workspace also holds the
  /// packed kernel when the mapping's is not packed). Throws the ingot::Error of a
  /// failed call (kFailedPrecondition when no algorithm supports the convolution).
  virtual CudaDnnConvPlan plan_conv(const CudnnConvMapping& mapping, DType dtype) = 0;
  /// Enqueues y = conv(x, w) of `plan` (device addresses; `workspace` of plan.workspace_bytes,
  /// 0 when none). Throws the ingot::Error of a failed call.
  virtual void conv_forward(const CudaDnnConvPlan& plan, uint64_t x, uint64_t w, uint64_t y, uint64_t workspace,
                            const CudaStream& stream) = 0;
};

/// cuDNN 9 (libcudnn.so.9) loaded with dlopen, never linked. Loading never throws: available()
/// is false and unavailable_reason() says why. Thread-safe after construction (read-only).
class CudnnLibrary {
 public:
  /// dlopen(`library`) and dlsym of the legacy convolution entry points (handle, tensor, filter
  /// and convolution descriptors, cudnnGetConvolutionForwardAlgorithm_v7,
  /// cudnnGetConvolutionForwardWorkspaceSize, cudnnConvolutionForward, cudnnTransformTensor,
  /// cudnnGetErrorString).
  static std::shared_ptr<CudnnLibrary> load(const std::string& library = "libcudnn.so.9");
  /// The same, finding libcudnn.so.9 with open_library(`search`); unavailable with every place
  /// tried in unavailable_reason() when it is found nowhere.
  static std::shared_ptr<CudnnLibrary> load(const LibrarySearch& search);
  /// The file loaded (empty when not found) and how it was found ("given" for load(library)).
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  ~CudnnLibrary();
  CudnnLibrary(const CudnnLibrary&) = delete;
  CudnnLibrary& operator=(const CudnnLibrary&) = delete;
  bool available() const { return available_; }
  /// Why available() is false (empty when available).
  const std::string& unavailable_reason() const { return reason_; }
  /// A cuDNN handle on `device` (created with its context current). f32 convolutions use
  /// CUDNN_FMA_MATH (no TF32 tensor cores: results within f32 rounding of the interpreter's).
  /// The returned object must not outlive `device`. Errors: kFailedPrecondition with the reason
  /// when unavailable, or naming the cuDNN status of a failed cudnnCreate.
  std::unique_ptr<CudaDnn> create(CudaDevice& device) const;

  struct Api;  ///< the resolved entry points (runtime/cuda/cudnn.cpp)

 private:
  CudnnLibrary();
  void resolve(const std::string& library);
  std::unique_ptr<Api> api_;
  void* library_ = nullptr;
  bool available_ = false;
  std::string reason_;
  std::string path_, source_;
};

/// How CudaExecutable runs one convolution thunk, decided at its first run.
struct CudaConvChoice {
  enum class Engine { kUndecided, kImplicitGemm, kCudnn };
  Engine engine = Engine::kUndecided;
  /// Why: "timed" when both ran, else why cuDNN was not considered ("cuDNN is not available:
  /// ...", "cuDNN cannot express it: ...", "cuDNN failed: ...").
  std::string reason;
  double implicit_gemm_ms = -1.0;  ///< mean time per run when timed (milliseconds), else -1
  double cudnn_ms = -1.0;          ///< likewise for cuDNN's chosen algorithm
  int cudnn_algorithm = -1;        ///< cudnnConvolutionFwdAlgo_t when timed
  int64_t workspace_bytes = 0;     ///< cuDNN's workspace (allocated from the device allocator)
};

/// "implicit GEMM", "cuDNN" or "undecided".
const char* conv_engine_name(CudaConvChoice::Engine engine);

}  // namespace ingot
