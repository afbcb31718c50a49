// compile_graph_cuda (include/ingot/jit/jit.h) and the CUDA device as a compile target
// (cuda_target, include/ingot/jit/target.h): a graph through the CUDA code generator into a
// CudaExecutable, wrapped as an Executable.
#include <fmt/format.h>

#include <set>

#include "ingot/jit/jit.h"
#include "ingot/jit/target.h"
#include "ingot/lower/lowering.h"
#include "ingot/runtime/cuda.h"
#include "jit/jit_internal.h"
#ifdef INGOT_HAVE_CUDA_TOOLKIT
#include "ingot/runtime/cuda_executable.h"
#endif

namespace ingot {

#ifdef INGOT_HAVE_CUDA_TOOLKIT

namespace {

/// `options` with `archs` cut to the architectures `devices` will load (select_cuda_ptx_arch, one
/// per distinct compute capability): PTX for the others would be generated only to be thrown
/// away, and code generation is per architecture. Left as it is when one device has none
/// (loading then names the archs and the device's).
codegen::CudaCompileOptions for_devices(const codegen::CudaCompileOptions& options,
                                        const std::vector<CudaDevice*>& devices) {
  CudaKernelImage archs{.name = "compile_graph_cuda"};
  for (const std::string& a : options.archs) archs.ptx[a];
  std::set<std::string> chosen;
  for (const CudaDevice* device : devices) {
    const auto [major, minor] = device->driver()->device_compute_capability(device->ordinal());
    try {
      chosen.insert(select_cuda_ptx_arch(archs, major, minor));
    } catch (const Error&) {
      return options;  // none of the archs runs on this device: CudaExecutable::create reports it
    }
  }
  codegen::CudaCompileOptions narrowed = options;
  narrowed.archs.assign(chosen.begin(), chosen.end());
  return narrowed;
}

}  // namespace

namespace detail {

std::shared_ptr<const Executable> compile_graph_cuda_devices(const ir::Graph& graph,
                                                             const std::vector<CudaDevice*>& devices,
                                                             const codegen::CudaCompileOptions& options,
                                                             const std::vector<int64_t>& donate_argnums,
                                                             const lower::LoweringOptions& lowering) {
  if (devices.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("compile_graph_cuda: no devices for '{}'", graph.name()),
                "pass the CUDA devices the program runs on");
  }
  lower::LoweringOptions cuda_lowering = lowering;
  cuda_lowering.gemm_function = "ingot_cuda_gemm";
  // f32/f64 convolutions become convolution thunks (implicit GEMM or cuDNN, chosen by timing at
  // the first run), whatever their K: library_conv_min_k measured the CPU's loops against im2col.
  // `library_conv = false` keeps them generated kernels.
  cuda_lowering.conv_function = "ingot_cuda_conv";
  cuda_lowering.library_conv_min_k = 0;
  // The CUDA host plan is one list of thunks: no functions to call.
  cuda_lowering.share_repeated_scopes = false;
  // Scatter-adds (embedding gradients) as one thread per update element with atomic adds.
  cuda_lowering.atomic_scatter = true;
  const std::vector<std::pair<size_t, size_t>> pairs = detail::donation_pairs(graph, donate_argnums);
  const lower::LoweredModule m = lower::lower_graph(graph, "main", pairs, cuda_lowering);
  std::vector<std::pair<Shape, DType>> in, res;
  for (const ir::TensorType& t : m.params) in.emplace_back(t.shape, t.dtype);
  for (const ir::TensorType& t : m.results) res.emplace_back(t.shape, t.dtype);
  CudaProgram program = codegen::compile_cuda(m.text, "main", in, res, for_devices(options, devices));
  // Donated parameters are written in place: the lowering computes each paired output into its
  // parameter's buffer, and the thunk passes the parameter's array as that output.
  for (const auto& [param, output] : pairs) {
    program.donated.emplace_back(static_cast<int64_t>(param), static_cast<int64_t>(m.result_of_output[output]));
  }
  // One executable per device (its modules are loaded there), the program compiled once.
  std::vector<std::pair<const Device*, std::shared_ptr<const CudaExecutable>>> exes;
  for (CudaDevice* device : devices) {
    exes.emplace_back(&device->device(),
                      CudaExecutable::create(
                          program, *device, nullptr, std::nullopt,
                          CudaExecutableOptions{.cuda_graphs = options.cuda_graphs, .libraries = options.libraries}));
  }
  const size_t n_in = in.size(), n_res = res.size();
  std::vector<std::pair<Shape, DType>> slots = in;
  slots.insert(slots.end(), res.begin(), res.end());
  Thunk thunk;
  thunk.name = "cuda:" + graph.name();
  // Kernels per run: the generated kernels' launches plus the library calls (cuBLAS, convolutions).
  const CudaProgram& plan = exes.front().second->program();
  thunk.kernels =
      static_cast<int64_t>(plan.launches().size()) + plan.gemm_count() + static_cast<int64_t>(plan.convs().size());
  for (size_t i = 0; i < n_in; ++i) thunk.input_slots.push_back(i);
  for (size_t i = 0; i < n_res; ++i) thunk.output_slots.push_back(n_in + i);
  for (const auto& [param, output] : pairs) thunk.output_slots[m.result_of_output[output]] = param;
  thunk.run = [exes, name = graph.name()](std::span<const Array> inputs, std::span<Array> outputs) {
    // The device the run's arrays were allocated on (Executable::run's device).
    const Device& where = !outputs.empty() ? outputs[0].device() : inputs[0].device();
    for (const auto& [device, exe] : exes) {
      if (device == &where) {
        exe->run(inputs, std::span<const Array>(outputs.data(), outputs.size()))->wait();
        return;
      }
    }
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("'{}' was compiled for {} CUDA device(s) and runs on {}, which is not one of them", name,
                            exes.size(), where.name()),
                "run it on a device it was compiled for (the target's devices)");
  };
  std::vector<size_t> outputs;
  for (size_t r : m.result_of_output) outputs.push_back(thunk.output_slots[r]);
  std::vector<size_t> donated;
  for (int64_t d : donate_argnums) donated.push_back(static_cast<size_t>(d));  // checked by donation_pairs
  return std::make_shared<Executable>(std::move(slots), n_in, std::vector<Thunk>{std::move(thunk)}, std::move(outputs),
                                      std::move(donated), "cuda:" + graph.name());
}

}  // namespace detail

std::shared_ptr<const Executable> compile_graph_cuda(const ir::Graph& graph, CudaDevice& device,
                                                     const codegen::CudaCompileOptions& options,
                                                     const std::vector<int64_t>& donate_argnums,
                                                     const lower::LoweringOptions& lowering) {
  return detail::compile_graph_cuda_devices(graph, {&device}, options, donate_argnums, lowering);
}

namespace {

Array copy_to_cuda(CudaDevice& device, const Array& host) {
  Array d = Array::empty(host.shape(), host.dtype(), &device.device());
  const Array src = to_host(host);
  device.copy_async(src, d)->wait();
  return d;
}

class CudaTarget final : public CompileTarget {
 public:
  explicit CudaTarget(CudaDevice& device) : device_(device) {}
  TargetKind kind() const override { return TargetKind::kCuda; }
  std::string name() const override { return device_.device().name(); }
  bool host_memory() const override { return false; }
  std::vector<ir::TensorType> signature(const std::vector<Array>& args, const std::string& what) const override {
    std::vector<ir::TensorType> types;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].valid()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: argument {} is an invalid Array", what, i));
      }
      if (&args[i].device() != &device_.device() && args[i].device().kind() != DeviceKind::kCpu) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: argument {} is on {}, not on the target's CUDA device {}", what, i,
                                args[i].device().name(), device_.device().name()),
                    "pass host arrays or arrays on the target's device (cuda_target)");
      }
      types.push_back({args[i].shape(), args[i].dtype()});  // host arguments are copied over by run()
    }
    return types;
  }
  std::shared_ptr<const Executable> compile(const ir::Graph& graph, const std::vector<int64_t>& donate_argnums,
                                            const TargetCompileOptions& options) const override {
    return compile_graph_cuda(graph, device_, options.cuda, donate_argnums, options.lowering);
  }
  std::vector<Array> run(const Executable& exe, const std::vector<Array>& args) const override {
    std::vector<Array> on_device;
    on_device.reserve(args.size());
    for (const Array& a : args) on_device.push_back(&a.device() == &device_.device() ? a : copy_to_cuda(device_, a));
    return exe.run(on_device, &device_.device());
  }
  Array to_target(const Array& host) const override { return copy_to_cuda(device_, host); }
  Array to_host(const Array& array) const override {
    if (&array.device() != &device_.device()) return ingot::to_host(array);
    Array h = Array::empty(array.shape(), array.dtype());
    device_.copy_async(array, h)->wait();
    return h;
  }

 private:
  CudaDevice& device_;
};

}  // namespace

std::shared_ptr<const CompileTarget> cuda_target(CudaDevice& device) { return std::make_shared<CudaTarget>(device); }

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
std::shared_ptr<const CompileTarget> cuda_target(CudaDevice&) { no_toolkit(); }
namespace detail {
std::shared_ptr<const Executable> compile_graph_cuda_devices(const ir::Graph&, const std::vector<CudaDevice*>&,
                                                             const codegen::CudaCompileOptions&,
                                                             const std::vector<int64_t>&,
                                                             const lower::LoweringOptions&) {
  no_toolkit();
}
}  // namespace detail

#endif

}  // namespace ingot
