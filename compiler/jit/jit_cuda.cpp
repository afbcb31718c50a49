// compile_graph_cuda and the jit's CUDA helpers (include/ingot/jit/jit.h): a graph through the
// CUDA code generator into a CudaExecutable, wrapped as an Executable.
#include <fmt/format.h>

#include "ingot/jit/jit.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/cuda.h"
#include "jit/jit_cuda.h"
#ifdef INGOT_HAVE_CUDA_TOOLKIT
#include "ingot/runtime/cuda_executable.h"
#endif

namespace ingot {

#ifdef INGOT_HAVE_CUDA_TOOLKIT

std::shared_ptr<const Executable> compile_graph_cuda(const ir::Graph& graph, CudaDevice& device,
                                                     const codegen::CudaCompileOptions& options,
                                                     const std::vector<int64_t>& donate_argnums,
                                                     const lower::LoweringOptions& lowering) {
  lower::LoweringOptions cuda_lowering = lowering;
  cuda_lowering.gemm_function = "ingot_cuda_gemm";
  // f32/f64 convolutions become convolution thunks (implicit GEMM or cuDNN, chosen by timing at
  // the first run), whatever their K: library_conv_min_k measured the CPU's loops against im2col.
  // `library_conv = false` keeps them generated kernels.
  cuda_lowering.conv_function = "ingot_cuda_conv";
  cuda_lowering.library_conv_min_k = 0;
  const lower::LoweredModule m = lower::lower_graph(graph, "main", {}, cuda_lowering);
  std::vector<std::pair<Shape, DType>> in, res;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) res.emplace_back(t.shape, t.dtype);
  std::shared_ptr<const CudaExecutable> exe =
      CudaExecutable::create(codegen::compile_cuda(m.text, "main", in, res, options), device);
  const size_t n_in = in.size(), n_res = res.size();
  std::vector<std::pair<Shape, DType>> slots = in;
  slots.insert(slots.end(), res.begin(), res.end());
  Thunk thunk;
  thunk.name = "cuda:" + graph.name();
  for (size_t i = 0; i < n_in; ++i) thunk.input_slots.push_back(i);
  for (size_t i = 0; i < n_res; ++i) thunk.output_slots.push_back(n_in + i);
  thunk.run = [exe](std::span<const Array> inputs, std::span<Array> outputs) {
    exe->run(inputs, std::span<const Array>(outputs.data(), outputs.size()))->wait();
  };
  std::vector<size_t> outputs;
  for (size_t r : m.result_of_output) outputs.push_back(n_in + r);
  std::vector<size_t> donated;
  for (int64_t d : donate_argnums) {
    if (d < 0 || d >= static_cast<int64_t>(n_in)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("compile_graph_cuda: donate_argnums holds {}, the graph has {} parameters", d, n_in));
    }
    donated.push_back(static_cast<size_t>(d));
  }
  return std::make_shared<Executable>(std::move(slots), n_in, std::vector<Thunk>{std::move(thunk)}, std::move(outputs),
                                      std::move(donated), "cuda:" + graph.name());
}

Device& cuda_device_of(CudaDevice& device) { return device.device(); }

Array copy_to_cuda(CudaDevice& device, const Array& host) {
  Array d = Array::empty(host.shape(), host.dtype(), &device.device());
  const Array src = to_host(host);
  device.copy_async(src, d)->wait();
  return d;
}

Array copy_to_cuda_device(CudaDevice& device, const Array& host) { return copy_to_cuda(device, host); }

Array copy_to_host_from(CudaDevice& device, const Array& array) {
  if (&array.device() != &device.device()) return to_host(array);
  Array h = Array::empty(array.shape(), array.dtype());
  device.copy_async(array, h)->wait();
  return h;
}

#else

namespace {
[[noreturn]] void no_toolkit() {
  throw Error(ErrorCode::kUnimplemented, "ingot was built without the CUDA toolkit",
              "install the CUDA toolkit (/usr/local/cuda) and rebuild to compile for CUDA devices");
}
}  // namespace

std::shared_ptr<const Executable> compile_graph_cuda(const ir::Graph&, CudaDevice&, const codegen::CudaCompileOptions&,
                                                     const std::vector<int64_t>&, const lower::LoweringOptions&) {
  no_toolkit();
}
Device& cuda_device_of(CudaDevice&) { no_toolkit(); }
Array copy_to_cuda(CudaDevice&, const Array&) { no_toolkit(); }
Array copy_to_cuda_device(CudaDevice&, const Array&) { no_toolkit(); }
Array copy_to_host_from(CudaDevice&, const Array& array) { return to_host(array); }

#endif

}  // namespace ingot
