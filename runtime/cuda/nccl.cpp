// NcclLibrary (libnccl.so.2 through dlopen) and NcclCommunicator (ingot::Communicator on the
// device's compute stream).
#include "ingot/runtime/nccl.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nccl.h>

#include <cstring>
#include <exception>
#include <set>
#include <utility>

#include "../collective_common.h"
#include "ingot/runtime/error.h"

namespace ingot {
namespace nccl_detail {

#define INGOT_NCCL_ENTRY_POINTS(X) \
  X(ncclGetVersion)                \
  X(ncclGetErrorString)            \
  X(ncclGetLastError)              \
  X(ncclGetUniqueId)               \
  X(ncclCommInitRank)              \
  X(ncclCommInitAll)               \
  X(ncclCommDestroy)               \
  X(ncclAllReduce)                 \
  X(ncclAllGather)                 \
  X(ncclReduceScatter)             \
  X(ncclBroadcast)                 \
  X(ncclGroupStart)                \
  X(ncclGroupEnd)

/// Function pointers to NCCL's entry points (all non-null once resolved).
struct NcclApi {
#define INGOT_NCCL_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  INGOT_NCCL_ENTRY_POINTS(INGOT_NCCL_DECLARE_ENTRY)
#undef INGOT_NCCL_DECLARE_ENTRY
};

namespace {

/// Throws the ingot::Error of a failed NCCL call (`comm` may be null). Invalid arguments or
/// usage -> kInvalidArgument, anything else (CUDA, system, remote, internal) ->
/// kFailedPrecondition.
void check(const NcclApi& api, ncclResult_t r, std::string_view call, ncclComm_t comm, std::string_view context) {
  if (r == ncclSuccess) return;
  std::string detail = api.ncclGetErrorString(r);
  const char* last = api.ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') detail += fmt::format("; NCCL says: {}", last);
  const bool usage = r == ncclInvalidArgument || r == ncclInvalidUsage;
  throw Error(usage ? ErrorCode::kInvalidArgument : ErrorCode::kFailedPrecondition,
              fmt::format("{} failed while {}: {} (ncclResult_t {})", call, context, detail, static_cast<int>(r)),
              usage ? "every rank must call the same collectives with matching arrays"
                    : "rerun with NCCL_DEBUG=WARN (or INFO) to see why");
}

}  // namespace
}  // namespace nccl_detail

using nccl_detail::check;

// ---------------------------------------------------------------------------------------------
// NcclLibrary

NcclLibrary::NcclLibrary() : api_(std::make_unique<nccl_detail::NcclApi>()) {}

NcclLibrary::~NcclLibrary() {
  // A usable NCCL stays loaded: its communicators' proxy threads and CUDA state outlive the
  // objects here (as in PyTorch). dlopen is reference counted.
  if (library_ != nullptr && !available_) dlclose(library_);
}

std::shared_ptr<NcclLibrary> NcclLibrary::load(const std::string& library) {
  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  dlerror();
  lib->library_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->library_ == nullptr) {
    const char* err = dlerror();
    lib->reason_ = fmt::format("the NCCL library {} could not be loaded: {}", library,
                               err != nullptr ? err : "unknown dlopen error");
    return lib;
  }
  lib->path_ = library_path(lib->library_);
  lib->source_ = "given";
  lib->resolve(library);
  return lib;
}

std::shared_ptr<NcclLibrary> NcclLibrary::load(const LibrarySearch& search) {
  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  const OpenedLibrary opened = open_library("libnccl.so.2", search);
  if (opened.handle == nullptr) {
    lib->reason_ =
        fmt::format("the NCCL library libnccl.so.2 was not found; tried {}", fmt::join(opened.failures, "; "));
    return lib;
  }
  lib->library_ = opened.handle;
  lib->path_ = opened.path;
  lib->source_ = opened.source;
  lib->resolve(opened.path);
  return lib;
}

void NcclLibrary::resolve(const std::string& library) {
  NcclLibrary* lib = this;
  nccl_detail::NcclApi& api = *lib->api_;
  std::vector<std::string> missing;
#define INGOT_NCCL_RESOLVE_ENTRY(name)                                          \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib->library_, #name)); \
  if (api.name == nullptr) missing.push_back(#name);
  INGOT_NCCL_ENTRY_POINTS(INGOT_NCCL_RESOLVE_ENTRY)
#undef INGOT_NCCL_RESOLVE_ENTRY
  if (!missing.empty()) {
    lib->reason_ = fmt::format("{} is not a usable NCCL: it lacks {} (needs NCCL 2.13 or newer)", library,
                               fmt::join(missing, ", "));
    return;
  }
  int version = 0;
  const ncclResult_t r = api.ncclGetVersion(&version);
  if (r != ncclSuccess) {
    lib->reason_ = fmt::format("ncclGetVersion failed: {}", api.ncclGetErrorString(r));
    return;
  }
  lib->version_ = version;
  lib->available_ = true;
}

std::string NcclLibrary::version_string() const {
  if (!available_) return "";
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9 (X * 1000 + Y * 100 + Z before).
  if (version_ >= 20900) {
    return fmt::format("{}.{}.{}", version_ / 10000, version_ % 10000 / 100, version_ % 100);
  }
  return fmt::format("{}.{}.{}", version_ / 1000, version_ % 1000 / 100, version_ % 100);
}

void NcclLibrary::check_available(const std::string& what) const {
  if (available_) return;
  throw Error(ErrorCode::kNotFound, fmt::format("{}: NCCL is not available: {}", what, reason_),
              "install NCCL (libnccl.so.2, shipped with the CUDA toolkit here) or use Gloo");
}

NcclUniqueId NcclLibrary::unique_id() const {
  check_available("NcclLibrary::unique_id");
  static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId), "ncclUniqueId is 128 bytes");
  ncclUniqueId id;
  check(*api_, api_->ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr, "creating a unique id");
  NcclUniqueId out;
  std::memcpy(out.data(), &id, out.size());
  return out;
}

// ---------------------------------------------------------------------------------------------
// NcclCommunicator

namespace {

ncclDataType_t nccl_type(DType dtype, const char* call) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("NcclCommunicator::{}: dtype {} is not supported (f32, f64, i32, "
                              "i64, f16, bf16 are)",
                              call, dtype_name(dtype)),
                  "convert the array first");
  }
}

/// The NCCL op for `op` on `dtype`; an integer mean is a sum here, divided afterwards.
ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMean:
      return is_floating(dtype) ? ncclAvg : ncclSum;
  }
  return ncclSum;
}

/// `shape` with dimension 0 multiplied by `factor` (shape has rank >= 1).
Shape scaled_dim0(const Shape& shape, int factor) {
  Shape s = shape;
  s[0] *= factor;
  return s;
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclLibrary> nccl, CudaDevice& device, ncclComm* comm, int rank,
                                   int size)
    : nccl_(std::move(nccl)),
      device_(&device),
      stream_(device.create_stream(fmt::format("nccl rank {}", rank))),
      comm_(comm),
      rank_(rank),
      size_(size) {
  scratch_ = Array::empty({1}, DType::kI32, &device.device());
  const int32_t zero = 0;
  device.copy_to_device_async(&zero, scratch_.raw_data(), sizeof(zero))->wait();
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  try {
    device_->make_current();
  } catch (const Error&) {
    // The communicator is destroyed regardless; NCCL reports nothing we could act on here.
  }
  (void)nccl_->api().ncclCommDestroy(comm_);
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create_all(std::shared_ptr<NcclLibrary> nccl,
                                                                            const std::vector<CudaDevice*>& devices) {
  if (nccl == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "NcclCommunicator::create_all: nccl is null",
                "load it with NcclLibrary::load()");
  }
  nccl->check_available("NcclCommunicator::create_all");
  std::vector<int> ordinals;
  std::set<int> seen;
  for (CudaDevice* d : devices) {
    if (d == nullptr || !seen.insert(d->ordinal()).second) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("NcclCommunicator::create_all: device {} is {} (devices: [{}])", ordinals.size(),
                              d == nullptr ? "null" : "repeated", fmt::join(ordinals, ", ")),
                  "pass each CUDA device of the group once");
    }
    ordinals.push_back(d->ordinal());
  }
  if (devices.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "NcclCommunicator::create_all: no devices",
                "pass the CUDA devices of the group");
  }
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  devices[0]->make_current();
  check(nccl->api(), nccl->api().ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data()),
        "ncclCommInitAll", nullptr,
        fmt::format("creating a group of the devices cuda:[{}]", fmt::join(ordinals, ", ")));
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  const int n = static_cast<int>(devices.size());
  for (int r = 0; r < n; ++r) {
    out.emplace_back(new NcclCommunicator(nccl, *devices[static_cast<size_t>(r)], comms[static_cast<size_t>(r)], r, n));
  }
  return out;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(std::shared_ptr<NcclLibrary> nccl, CudaDevice& device,
                                                           const NcclUniqueId& id, int rank, int size) {
  if (nccl == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "NcclCommunicator::create: nccl is null",
                "load it with NcclLibrary::load()");
  }
  nccl->check_available("NcclCommunicator::create");
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("NcclCommunicator::create: rank = {} is not in [0, size = {})", rank, size),
                "ranks are numbered 0 to size - 1");
  }
  ncclUniqueId raw;
  std::memcpy(&raw, id.data(), id.size());
  ncclComm_t comm = nullptr;
  device.make_current();
  check(nccl->api(), nccl->api().ncclCommInitRank(&comm, size, raw, rank), "ncclCommInitRank", nullptr,
        fmt::format("joining rank {} of {} on {}", rank, size, device.name()));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(nccl, device, comm, rank, size));
}

void NcclCommunicator::check_array(const Array& a, const char* call, const char* arg) const {
  if (!a.valid()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("NcclCommunicator::{}: {} is an invalid (empty) array", call, arg),
                "pass an array allocated on this rank's device");
  }
  if (&a.device() != &device_->device()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("NcclCommunicator::{}: {} lives on {}, not on {} (rank {}'s device)", call, arg,
                            a.device().name(), device_->name(), rank_),
                "copy the array to this rank's CUDA device first");
  }
}

void NcclCommunicator::begin() {
  device_->make_current();
  // The inputs were produced on the compute stream (or waited for there).
  stream_->wait(*device_->compute_stream().record());
}

void NcclCommunicator::finish() { stream_->synchronize(); }

void NcclCommunicator::divide_on_host(Array& a) {
  Array host = Array::empty(a.shape(), a.dtype());
  device_->copy_async(a, host)->wait();
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      T* p = static_cast<T*>(host.raw_data());
      for (int64_t i = 0; i < host.size(); ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(size_));
    }
  });
  device_->copy_async(host, a)->wait();
}

void NcclCommunicator::enqueue_all_reduce(const void* in, void* out, const Array& a, ReduceOp op, const char* call) {
  const ncclDataType_t type = nccl_type(a.dtype(), call);
  check(nccl_->api(),
        nccl_->api().ncclAllReduce(in, out, static_cast<size_t>(a.size()), type, nccl_op(op, a.dtype()), comm_,
                                   stream_->handle()),
        "ncclAllReduce", comm_,
        fmt::format("reducing ({}) {} {} elements on rank {}", reduce_op_name(op), a.size(), dtype_name(a.dtype()),
                    rank_));
}

void NcclCommunicator::all_reduce(Array& inout, ReduceOp op) {
  check_array(inout, "all_reduce", "inout");
  nccl_type(inout.dtype(), "all_reduce");
  begin();
  enqueue_all_reduce(inout.raw_data(), inout.raw_data(), inout, op, "all_reduce");
  finish();
  if (op == ReduceOp::kMean && is_integer(inout.dtype())) divide_on_host(inout);
}

void NcclCommunicator::check_pair(const Array& in, const Array& out, const char* call) const {
  check_array(in, call, "in");
  check_array(out, call, "out");
  if (in.dtype() != out.dtype()) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("NcclCommunicator::{}: in is {} but out is {}", call, dtype_name(in.dtype()),
                            dtype_name(out.dtype())),
                "allocate out with the dtype of in");
  }
  if (in.shape() != out.shape()) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("NcclCommunicator::{}: in has shape {} but out {}", call, shape_to_string(in.shape()),
                            shape_to_string(out.shape())),
                "allocate out with the shape of in");
  }
  nccl_type(in.dtype(), call);
}

void NcclCommunicator::all_reduce_into(const Array& in, Array& out, ReduceOp op) {
  check_pair(in, out, "all_reduce_into");
  begin();
  enqueue_all_reduce(in.raw_data(), out.raw_data(), in, op, "all_reduce_into");
  finish();
  if (op == ReduceOp::kMean && is_integer(out.dtype())) divide_on_host(out);
}

void NcclCommunicator::all_reduce_group(std::span<Array* const> inouts, ReduceOp op) {
  std::vector<std::pair<const Array*, Array*>> pairs;
  for (size_t i = 0; i < inouts.size(); ++i) {
    if (inouts[i] == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("NcclCommunicator::all_reduce_group: inouts[{}] is null", i),
                  "pass the arrays to reduce");
    }
    check_array(*inouts[i], "all_reduce_group", "inouts[i]");
    nccl_type(inouts[i]->dtype(), "all_reduce_group");
    pairs.emplace_back(inouts[i], inouts[i]);
  }
  run_group(pairs, op, "all_reduce_group");
}

void NcclCommunicator::all_reduce_group_into(std::span<const Array> ins, std::span<Array> outs, ReduceOp op) {
  check_group_lengths(ins.size(), outs.size(), "NcclCommunicator::all_reduce_group_into");
  std::vector<std::pair<const Array*, Array*>> pairs;
  for (size_t i = 0; i < ins.size(); ++i) {
    check_pair(ins[i], outs[i], "all_reduce_group_into");
    nccl_type(ins[i].dtype(), "all_reduce_group_into");
    pairs.emplace_back(&ins[i], &outs[i]);
  }
  run_group(pairs, op, "all_reduce_group_into");
}

void NcclCommunicator::run_group(std::span<const std::pair<const Array*, Array*>> pairs, ReduceOp op,
                                 const char* call) {
  if (pairs.empty()) return;
  begin();
  check(nccl_->api(), nccl_->api().ncclGroupStart(), "ncclGroupStart", comm_, "starting a group of all_reduces");
  std::exception_ptr failed;
  try {
    for (const auto& [in, out] : pairs) enqueue_all_reduce(in->raw_data(), out->raw_data(), *in, op, call);
  } catch (...) {
    failed = std::current_exception();
  }
  // The group is always closed, also after a failed call (NCCL requires it).
  const ncclResult_t end = nccl_->api().ncclGroupEnd();
  if (failed) std::rethrow_exception(failed);
  check(nccl_->api(), end, "ncclGroupEnd", comm_,
        fmt::format("running a group of {} all_reduces on rank {}", pairs.size(), rank_));
  finish();
  if (op == ReduceOp::kMean) {
    for (const auto& [in, out] : pairs) {
      if (is_integer(out->dtype())) divide_on_host(*out);
    }
  }
}

void NcclCommunicator::broadcast_into(const Array& in, Array& out, int root) {
  check_pair(in, out, "broadcast_into");
  if (root < 0 || root >= size_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("NcclCommunicator::broadcast_into: root = {} is not in [0, {})", root, size_),
                "pass the rank whose array every rank receives");
  }
  begin();
  check(nccl_->api(),
        nccl_->api().ncclBroadcast(in.raw_data(), out.raw_data(), static_cast<size_t>(in.size()),
                                   nccl_type(in.dtype(), "broadcast_into"), root, comm_, stream_->handle()),
        "ncclBroadcast", comm_,
        fmt::format("broadcasting {} {} elements from rank {} on rank {}", in.size(), dtype_name(in.dtype()), root,
                    rank_));
  finish();
}

void NcclCommunicator::all_gather(const Array& in, Array& out) {
  check_array(in, "all_gather", "in");
  check_array(out, "all_gather", "out");
  if (in.dtype() != out.dtype()) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("NcclCommunicator::all_gather: in is {} but out is {}", dtype_name(in.dtype()),
                            dtype_name(out.dtype())),
                "allocate out with the dtype of in");
  }
  if (in.rank() < 1 || out.shape() != scaled_dim0(in.shape(), size_)) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("NcclCommunicator::all_gather: in has shape {} and out has shape {}; "
                            "out must be in's shape with dimension 0 times {} ranks",
                            shape_to_string(in.shape()), shape_to_string(out.shape()), size_),
                "in needs rank >= 1; allocate out as (size() * in.shape[0], in.shape[1:]...)");
  }
  const ncclDataType_t type = nccl_type(in.dtype(), "all_gather");
  begin();
  check(nccl_->api(),
        nccl_->api().ncclAllGather(in.raw_data(), out.raw_data(), static_cast<size_t>(in.size()), type, comm_,
                                   stream_->handle()),
        "ncclAllGather", comm_,
        fmt::format("gathering {} {} elements per rank on rank {}", in.size(), dtype_name(in.dtype()), rank_));
  finish();
}

void NcclCommunicator::reduce_scatter(const Array& in, Array& out, ReduceOp op) {
  check_array(in, "reduce_scatter", "in");
  check_array(out, "reduce_scatter", "out");
  if (in.dtype() != out.dtype()) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("NcclCommunicator::reduce_scatter: in is {} but out is {}", dtype_name(in.dtype()),
                            dtype_name(out.dtype())),
                "allocate out with the dtype of in");
  }
  if (out.rank() < 1 || in.shape() != scaled_dim0(out.shape(), size_)) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("NcclCommunicator::reduce_scatter: in has shape {} and out has shape "
                            "{}; in must be out's shape with dimension 0 times {} ranks",
                            shape_to_string(in.shape()), shape_to_string(out.shape()), size_),
                "out needs rank >= 1; allocate it as (in.shape[0] / size(), in.shape[1:]...)");
  }
  const ncclDataType_t type = nccl_type(in.dtype(), "reduce_scatter");
  begin();
  check(nccl_->api(),
        nccl_->api().ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.size()), type,
                                       nccl_op(op, in.dtype()), comm_, stream_->handle()),
        "ncclReduceScatter", comm_,
        fmt::format("reduce-scattering ({}) {} {} elements on rank {}", reduce_op_name(op), in.size(),
                    dtype_name(in.dtype()), rank_));
  finish();
  if (op == ReduceOp::kMean && is_integer(out.dtype())) divide_on_host(out);
}

void NcclCommunicator::broadcast(Array& inout, int root) {
  check_array(inout, "broadcast", "inout");
  if (root < 0 || root >= size_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("NcclCommunicator::broadcast: root = {} is not in [0, {})", root, size_),
                "pass the rank whose array every rank receives");
  }
  const ncclDataType_t type = nccl_type(inout.dtype(), "broadcast");
  begin();
  void* p = inout.raw_data();
  check(nccl_->api(),
        nccl_->api().ncclBroadcast(p, p, static_cast<size_t>(inout.size()), type, root, comm_, stream_->handle()),
        "ncclBroadcast", comm_,
        fmt::format("broadcasting {} {} elements from rank {} on rank {}", inout.size(), dtype_name(inout.dtype()),
                    root, rank_));
  finish();
}

void NcclCommunicator::barrier() {
  begin();
  void* p = scratch_.raw_data();
  check(nccl_->api(), nccl_->api().ncclAllReduce(p, p, 1, ncclInt32, ncclSum, comm_, stream_->handle()),
        "ncclAllReduce", comm_, fmt::format("waiting at a barrier on rank {}", rank_));
  finish();
}

}  // namespace ingot
