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
  // The CUDA host plan is one list of thunks: no functions to call.
  cuda_lowering.share_repeated_scopes = false;
  const std::vector<std::pair<size_t, size_t>> pairs = detail::donation_pairs(graph, donate_argnums);
  const lower::LoweredModule m = lower::lower_graph(graph, "main", pairs, cuda_lowering);
  std::vector<std::pair<Shape, DType>> in, res;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) res.emplace_back(t.shape, t.dtype);
  CudaProgram program = codegen::compile_cuda(m.text, "main", in, res, options);
  // Donated parameters are written in place: the lowering computes each paired output into its
  // parameter's buffer, and the thunk passes the parameter's array as that output.
  for (const auto& [param, output] : pairs) {
    program.donated.emplace_back(static_cast<int64_t>(param), static_cast<int64_t>(m.result_of_output[output]));
  }
  std::shared_ptr<const CudaExecutable> exe = CudaExecutable::create(
      std::move(program), device, nullptr, std::nullopt, CudaExecutableOptions{.cuda_graphs = options.cuda_graphs});
  const size_t n_in = in.size(), n_res = res.size();
  std::vector<std::pair<Shape, DType>> slots = in;
  slots.insert(slots.end(), res.begin(), res.end());
  Thunk thunk;
  thunk.name = "cuda:" + graph.name();
  // Kernels per run: the generated kernels' launches plus the library calls (cuBLAS, convolutions).
  thunk.kernels = static_cast<int64_t>(exe->program().launches().size()) + exe->program().gemm_count() +
                  static_cast<int64_t>(exe->program().convs().size());
  for (size_t i = 0; i < n_in; ++i) thunk.input_slots.push_back(i);
  for (size_t i = 0; i < n_res; ++i) thunk.output_slots.push_back(n_in + i);
  for (const auto& [param, output] : pairs) thunk.output_slots[m.result_of_output[output]] = param;
  thunk.run = [exe](std::span<const Array> inputs, std::span<Array> outputs) {
    exe->run(inputs, std::span<const Array>(outputs.data(), outputs.size()))->wait();
  };
  std::vector<size_t> outputs;
  for (size_t r : m.result_of_output) outputs.push_back(thunk.output_slots[r]);
  std::vector<size_t> donated;
  for (int64_t d : donate_argnums) donated.push_back(static_cast<size_t>(d));  // checked by donation_pairs
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
