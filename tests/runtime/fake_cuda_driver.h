// A fake CUDA driver in host memory for the CUDA runtime tests on machines without a GPU.
//
// It implements the driver entry points CudaDriver resolves, with the ABI of cuda.h (plain C
// types stand in for the typedefs: CUresult is an int, CUdevice an int, CUdeviceptr an unsigned
// long long), and models what the runtime code depends on:
//   - "device memory" is host memory with a capacity; cuMemAlloc fails with
//     CUDA_ERROR_OUT_OF_MEMORY past it and cuMemGetInfo reports what is left;
//   - streams are deferred queues: copies, host functions and event records run only when
//     something synchronises (cuStreamSynchronize, cuEventSynchronize, or a stream waiting for
//     an event that needs them), so code that refills a staging buffer before its copy ran, or
//     that skips a stream dependency, reads or writes the wrong data;
//   - cuStreamWaitEvent is a real dependency between the queues;
//   - calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT unless cuCtxSetCurrent set
//     one on the calling thread;
//   - a copy can be made to fail, which makes the context's error sticky as on a real GPU;
//   - live streams, events, pinned buffers, allocations and context references are counted so
//     tests can check nothing leaks;
//   - modules are PTX text: cuModuleLoadDataEx keeps the image (tests see which arch was loaded),
//     cuModuleGetFunction finds ".entry <name>(" in it and counts the entry's ".param"s;
//     cuLaunchKernel records the launch (kernel, grid, block, parameter words read as 8 bytes
//     each) when it is enqueued and, in stream order, runs the host body a test registered for
//     the kernel (kernel_bodies), so launches see what earlier queued work wrote;
//   - the compute capability (cuDeviceGetAttribute) is settable;
//   - stream capture (cuStreamBeginCapture .. cuStreamEndCapture) moves what is enqueued on the
//     stream into a graph instead of its queue (launches are still recorded in `launches` when
//     enqueued, i.e. once per capture); cuGraphLaunch enqueues a copy of the graph's work, so a
//     replay runs the kernel bodies and host functions with the words captured. As on a GPU, a
//     synchronisation of the capturing stream, an event record on it (stricter than a GPU, which
//     makes it a capture-internal event; the runtime never records one there), a wait for an event
//     recorded outside the capture and, in global or thread-local mode, a cuMemAlloc on the
//     capturing thread are refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED / _ISOLATION) and
//     invalidate the capture (cuStreamEndCapture then fails with _INVALIDATED). Begin-capture and
//     instantiate results can be forced to test fallbacks; captures, graph launches and live
//     graphs are counted.
// The entry points are C functions, so the fake's state is one object reached through a
// file-scope pointer, installed and removed by FakeCudaScope (tests only; one at a time).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ingot/runtime/cuda.h"

// The handle types, defined here for the fake (cuda.h only declares them).
struct CUstream_st {
  std::deque<std::function<void()>> pending;
  bool capturing = false;                       // between cuStreamBeginCapture and cuStreamEndCapture
  bool capture_invalidated = false;             // an illegal call during the capture
  int capture_mode = 0;                         // CUstreamCaptureMode
  std::vector<std::function<void()>> captured;  // what the capture recorded, in order
};
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
struct CUevent_st {
  CUstream_st* stream = nullptr;  // the stream of the last record
  std::shared_ptr<bool> done;     // set when that record ran
};
struct CUctx_st {
  int device = 0;
  int references = 0;
};
struct CUmod_st;
struct CUfunc_st {
  CUmod_st* module = nullptr;
  std::string name;
  int num_params = 0;  // ".param"s of the entry
};
struct CUmod_st {
  std::string ptx;
  std::deque<CUfunc_st> functions;  // looked up so far (they live as long as the module)
};

namespace ingot::testing {

// CUresult values from cuda.h.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorInvalidValue = 1;
constexpr int kCudaErrorOutOfMemory = 2;
constexpr int kCudaErrorNoDevice = 100;
constexpr int kCudaErrorInvalidDevice = 101;
constexpr int kCudaErrorInvalidContext = 201;
constexpr int kCudaErrorNotReady = 600;
constexpr int kCudaErrorIllegalAddress = 700;
constexpr int kCudaErrorInvalidPtx = 218;
constexpr int kCudaErrorNotFound = 500;
constexpr int kCudaErrorInvalidHandle = 400;
constexpr int kCudaErrorStreamCaptureUnsupported = 900;
constexpr int kCudaErrorStreamCaptureInvalidated = 901;
constexpr int kCudaErrorStreamCaptureIsolation = 905;

/// One cuLaunchKernel call as the fake saw it.
struct FakeLaunch {
  std::string kernel;  // the function's entry name
  std::array<unsigned, 3> grid{}, block{};
  unsigned shared_bytes = 0;
  std::vector<uint64_t> params;  // one 8-byte word per ".param" of the entry
};

struct FakeCuda {
  int init_result = kCudaSuccess;
  int driver_version = 13000;  // cuDriverGetVersion (read when a CudaDriver is made)
  int device_count = 2;
  int64_t capacity = int64_t{64} << 20;  // per fake device (all share one pool here)
  bool fail_next_copy = false;           // the next copy that runs sets the sticky error
  int sticky_error = kCudaSuccess;

  std::recursive_mutex mu;
  std::vector<std::unique_ptr<CUctx_st>> contexts;
  std::map<uintptr_t, int64_t> allocations;
  int64_t used = 0;
  int64_t pinned = 0;
  int live_streams = 0;
  int live_events = 0;
  int64_t host_functions_run = 0;
  std::vector<std::string> calls_without_context;
  int compute_major = 9, compute_minor = 0;  // cuDeviceGetAttribute (every fake device)
  int live_modules = 0;
  std::vector<std::string> loaded_ptx;  // every image given to cuModuleLoadDataEx, in order
  std::vector<FakeLaunch> launches;     // in enqueue order
  /// Host bodies of kernels by entry name, run in stream order with the launch's words.
  std::map<std::string, std::function<void(const std::vector<uint64_t>&)>> kernel_bodies;

  // Stream capture and graphs.
  int begin_capture_result = kCudaSuccess;  // returned by cuStreamBeginCapture when not success
  int instantiate_result = kCudaSuccess;    // returned by cuGraphInstantiateWithFlags likewise
  int graph_launch_result = kCudaSuccess;   // returned by cuGraphLaunch likewise (nothing enqueued)
  int64_t captures = 0;                     // successful cuStreamEndCapture calls
  int64_t graph_launches = 0;               // cuGraphLaunch calls
  int live_graphs = 0, live_graph_execs = 0;
  CUstream_st* capturing_stream = nullptr;  // the stream capturing on some thread (one at a time)
  bool capture_thread_local = false;        // whether its mode restricts only its own thread
  std::thread::id capture_thread;
};

inline FakeCuda* g_fake_cuda = nullptr;
inline thread_local CUctx_st* t_fake_current = nullptr;

namespace fake_cuda {

inline std::unique_lock<std::recursive_mutex> lock() { return std::unique_lock<std::recursive_mutex>(g_fake_cuda->mu); }

/// Records a call made without a current context and returns the error.
inline int no_context(const char* call) {
  g_fake_cuda->calls_without_context.push_back(call);
  return kCudaErrorInvalidContext;
}

/// Enqueues `op` on `s`, or records it into the capture when `s` is capturing.
inline void push(CUstream_st* s, std::function<void()> op) {
  if (s->capturing)
    s->captured.push_back(std::move(op));
  else
    s->pending.push_back(std::move(op));
}

/// A call that a capture of `s` forbids: invalidates the capture and returns the error.
inline int refuse_in_capture(CUstream_st* s, int error) {
  s->capture_invalidated = true;
  return error;
}

/// Whether the calling thread may not allocate now (a global-mode capture anywhere, or a
/// thread-local one on this thread: CUDA's "potentially unsafe API calls").
inline bool allocation_forbidden() {
  const FakeCuda& f = *g_fake_cuda;
  if (f.capturing_stream == nullptr || f.capturing_stream->capture_mode == 2) return false;  // relaxed
  return !f.capture_thread_local || f.capture_thread == std::this_thread::get_id();
}

/// Runs queued work of `s` until `until` returns true or the queue is empty.
inline void drain(CUstream_st* s, const std::function<bool()>& until) {
  while (!until() && !s->pending.empty()) {
    std::function<void()> op = std::move(s->pending.front());
    s->pending.pop_front();
    op();
  }
}

inline void run_copy(void* dst, const void* src, size_t n) {
  if (g_fake_cuda->sticky_error != kCudaSuccess) return;
  if (g_fake_cuda->fail_next_copy) {
    g_fake_cuda->fail_next_copy = false;
    g_fake_cuda->sticky_error = kCudaErrorIllegalAddress;
    return;
  }
  std::memcpy(dst, src, n);
}

inline int cuInit(unsigned) { return g_fake_cuda->init_result; }
inline int cuDriverGetVersion(int* v) {
  *v = g_fake_cuda->driver_version;
  return kCudaSuccess;
}
inline int cuGetErrorName(int r, const char** s) {
  switch (r) {
    case kCudaSuccess:
      *s = "CUDA_SUCCESS";
      return kCudaSuccess;
    case kCudaErrorInvalidValue:
      *s = "CUDA_ERROR_INVALID_VALUE";
      return kCudaSuccess;
    case kCudaErrorOutOfMemory:
      *s = "CUDA_ERROR_OUT_OF_MEMORY";
      return kCudaSuccess;
    case kCudaErrorNoDevice:
      *s = "CUDA_ERROR_NO_DEVICE";
      return kCudaSuccess;
    case kCudaErrorInvalidDevice:
      *s = "CUDA_ERROR_INVALID_DEVICE";
      return kCudaSuccess;
    case kCudaErrorInvalidContext:
      *s = "CUDA_ERROR_INVALID_CONTEXT";
      return kCudaSuccess;
    case kCudaErrorNotReady:
      *s = "CUDA_ERROR_NOT_READY";
      return kCudaSuccess;
    case kCudaErrorIllegalAddress:
      *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
      return kCudaSuccess;
    case kCudaErrorInvalidPtx:
      *s = "CUDA_ERROR_INVALID_PTX";
      return kCudaSuccess;
    case kCudaErrorNotFound:
      *s = "CUDA_ERROR_NOT_FOUND";
      return kCudaSuccess;
    case kCudaErrorInvalidHandle:
      *s = "CUDA_ERROR_INVALID_HANDLE";
      return kCudaSuccess;
    case kCudaErrorStreamCaptureUnsupported:
      *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
      return kCudaSuccess;
    case kCudaErrorStreamCaptureInvalidated:
      *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
      return kCudaSuccess;
    case kCudaErrorStreamCaptureIsolation:
      *s = "CUDA_ERROR_STREAM_CAPTURE_ISOLATION";
      return kCudaSuccess;
    default:
      *s = nullptr;
      return kCudaErrorInvalidValue;
  }
}
inline int cuGetErrorString(int r, const char** s) {
  switch (r) {
    case kCudaErrorNoDevice:
      *s = "no CUDA-capable device is detected";
      return kCudaSuccess;
    case kCudaErrorIllegalAddress:
      *s = "an illegal memory access was encountered";
      return kCudaSuccess;
    case kCudaErrorOutOfMemory:
      *s = "out of memory";
      return kCudaSuccess;
    case kCudaErrorInvalidContext:
      *s = "invalid device context";
      return kCudaSuccess;
    default:
      *s = "fake error";
      return kCudaSuccess;
  }
}
inline int cuDeviceGetCount(int* n) {
  *n = g_fake_cuda->device_count;
  return kCudaSuccess;
}
inline int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal < 0 || ordinal >= g_fake_cuda->device_count) return kCudaErrorInvalidDevice;
  *dev = ordinal;
  return kCudaSuccess;
}
inline int cuDeviceGetName(char* name, int len, int dev) {
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU %d", dev);
  return kCudaSuccess;
}
inline int cuDeviceTotalMem_v2(size_t* bytes, int) {
  *bytes = static_cast<size_t>(g_fake_cuda->capacity);
  return kCudaSuccess;
}
inline int cuDevicePrimaryCtxRetain(CUctx_st** ctx, int dev) {
  auto l = lock();
  for (auto& c : g_fake_cuda->contexts) {
    if (c->device == dev) {
      ++c->references;
      *ctx = c.get();
      return kCudaSuccess;
    }
  }
  g_fake_cuda->contexts.push_back(std::make_unique<CUctx_st>(CUctx_st{dev, 1}));
  *ctx = g_fake_cuda->contexts.back().get();
  return kCudaSuccess;
}
inline int cuDevicePrimaryCtxRelease_v2(int dev) {
  auto l = lock();
  for (auto& c : g_fake_cuda->contexts) {
    if (c->device == dev && c->references > 0) {
      --c->references;
      return kCudaSuccess;
    }
  }
  return kCudaErrorInvalidContext;
}
inline int cuCtxSetCurrent(CUctx_st* ctx) {
  t_fake_current = ctx;
  return kCudaSuccess;
}
inline int cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  if (t_fake_current == nullptr) return no_context("cuMemGetInfo");
  *free_bytes = static_cast<size_t>(g_fake_cuda->capacity - g_fake_cuda->used);
  *total = static_cast<size_t>(g_fake_cuda->capacity);
  return kCudaSuccess;
}
inline int cuMemAlloc_v2(unsigned long long* p, size_t bytes) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuMemAlloc");
  if (allocation_forbidden()) {
    return refuse_in_capture(g_fake_cuda->capturing_stream, kCudaErrorStreamCaptureUnsupported);
  }
  const auto n = static_cast<int64_t>(bytes);
  if (n > g_fake_cuda->capacity - g_fake_cuda->used) return kCudaErrorOutOfMemory;
  void* mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  g_fake_cuda->allocations[reinterpret_cast<uintptr_t>(mem)] = n;
  g_fake_cuda->used += n;
  *p = reinterpret_cast<uintptr_t>(mem);
  return kCudaSuccess;
}
inline int cuMemFree_v2(unsigned long long p) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuMemFree");
  auto it = g_fake_cuda->allocations.find(static_cast<uintptr_t>(p));
  if (it == g_fake_cuda->allocations.end()) return kCudaErrorInvalidValue;
  g_fake_cuda->used -= it->second;
  std::free(reinterpret_cast<void*>(static_cast<uintptr_t>(p)));
  g_fake_cuda->allocations.erase(it);
  return kCudaSuccess;
}
inline int cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  if (t_fake_current == nullptr) return no_context("cuMemHostAlloc");
  *p = std::malloc(bytes);
  ++g_fake_cuda->pinned;
  return kCudaSuccess;
}
inline int cuMemFreeHost(void* p) {
  std::free(p);
  --g_fake_cuda->pinned;
  return kCudaSuccess;
}
inline int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t n, CUstream_st* s) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuMemcpyHtoDAsync");
  void* d = reinterpret_cast<void*>(static_cast<uintptr_t>(dst));
  push(s, [d, src, n] { run_copy(d, src, n); });
  return kCudaSuccess;
}
inline int cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src, size_t n, CUstream_st* s) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuMemcpyDtoHAsync");
  const void* from = reinterpret_cast<const void*>(static_cast<uintptr_t>(src));
  push(s, [dst, from, n] { run_copy(dst, from, n); });
  return kCudaSuccess;
}
inline int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t n, CUstream_st* s) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuMemcpyDtoDAsync");
  void* to = reinterpret_cast<void*>(static_cast<uintptr_t>(dst));
  const void* from = reinterpret_cast<const void*>(static_cast<uintptr_t>(src));
  push(s, [to, from, n] { run_copy(to, from, n); });
  return kCudaSuccess;
}
inline int cuStreamCreate(CUstream_st** s, unsigned) {
  if (t_fake_current == nullptr) return no_context("cuStreamCreate");
  *s = new CUstream_st();
  ++g_fake_cuda->live_streams;
  return kCudaSuccess;
}
inline int cuStreamDestroy_v2(CUstream_st* s) {
  auto l = lock();
  drain(s, [] { return false; });  // the driver finishes queued work of a destroyed stream
  delete s;
  --g_fake_cuda->live_streams;
  return kCudaSuccess;
}
inline int cuStreamSynchronize(CUstream_st* s) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuStreamSynchronize");
  if (s->capturing) return refuse_in_capture(s, kCudaErrorStreamCaptureUnsupported);
  drain(s, [] { return false; });
  return g_fake_cuda->sticky_error;
}
inline int cuStreamWaitEvent(CUstream_st* s, CUevent_st* e, unsigned) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuStreamWaitEvent");
  if (e->stream == nullptr) return kCudaSuccess;  // never recorded: nothing to wait for
  if (s->capturing) return refuse_in_capture(s, kCudaErrorStreamCaptureIsolation);  // recorded outside
  CUstream_st* other = e->stream;
  std::shared_ptr<bool> done = e->done;
  s->pending.push_back([other, done] { drain(other, [done] { return *done; }); });
  return kCudaSuccess;
}
inline int cuLaunchHostFunc(CUstream_st* s, void (*fn)(void*), void* user) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuLaunchHostFunc");
  push(s, [fn, user] {
    if (g_fake_cuda->sticky_error != kCudaSuccess) return;  // a failed context skips them
    ++g_fake_cuda->host_functions_run;
    fn(user);
  });
  return kCudaSuccess;
}
inline int cuEventCreate(CUevent_st** e, unsigned) {
  if (t_fake_current == nullptr) return no_context("cuEventCreate");
  *e = new CUevent_st();
  ++g_fake_cuda->live_events;
  return kCudaSuccess;
}
inline int cuEventRecord(CUevent_st* e, CUstream_st* s) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuEventRecord");
  if (s->capturing) return refuse_in_capture(s, kCudaErrorStreamCaptureUnsupported);
  e->stream = s;
  e->done = std::make_shared<bool>(false);
  std::shared_ptr<bool> done = e->done;
  s->pending.push_back([done] { *done = true; });
  return kCudaSuccess;
}
inline int cuEventQuery(CUevent_st* e) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuEventQuery");
  if (e->done != nullptr && !*e->done) return kCudaErrorNotReady;
  return g_fake_cuda->sticky_error;
}
inline int cuEventSynchronize(CUevent_st* e) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuEventSynchronize");
  if (e->stream != nullptr) {
    std::shared_ptr<bool> done = e->done;
    drain(e->stream, [done] { return *done; });
  }
  return g_fake_cuda->sticky_error;
}
inline int cuEventDestroy_v2(CUevent_st* e) {
  delete e;
  --g_fake_cuda->live_events;
  return kCudaSuccess;
}

inline int cuDeviceGetAttribute(int* value, int attribute, int dev) {
  if (dev < 0 || dev >= g_fake_cuda->device_count) return kCudaErrorInvalidDevice;
  if (attribute == 75)
    *value = g_fake_cuda->compute_major;  // ..._COMPUTE_CAPABILITY_MAJOR
  else if (attribute == 76)
    *value = g_fake_cuda->compute_minor;  // ..._COMPUTE_CAPABILITY_MINOR
  else
    return kCudaErrorInvalidValue;
  return kCudaSuccess;
}
/// With CU_JIT_ERROR_LOG_BUFFER (5) / _SIZE_BYTES (6) among the options, an image without an entry
/// writes "fake ptxas: no .entry in the module" to the log, as the driver's JIT writes its errors.
inline int cuModuleLoadDataEx(CUmod_st** module, const void* image, unsigned num_options, int* options, void** values) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuModuleLoadDataEx");
  const std::string ptx = static_cast<const char*>(image);
  if (ptx.find(".entry ") == std::string::npos) {
    char* log = nullptr;
    size_t size = 0;
    for (unsigned i = 0; i < num_options; ++i) {
      if (options[i] == 5) log = static_cast<char*>(values[i]);
      if (options[i] == 6) size = reinterpret_cast<size_t>(values[i]);
    }
    if (log != nullptr && size > 0) std::snprintf(log, size, "fake ptxas: no .entry in the module");
    return kCudaErrorInvalidPtx;
  }
  *module = new CUmod_st{ptx, {}};
  g_fake_cuda->loaded_ptx.push_back(ptx);
  ++g_fake_cuda->live_modules;
  return kCudaSuccess;
}
inline int cuModuleUnload(CUmod_st* module) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuModuleUnload");
  delete module;
  --g_fake_cuda->live_modules;
  return kCudaSuccess;
}
inline int cuModuleGetFunction(CUfunc_st** function, CUmod_st* module, const char* name) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuModuleGetFunction");
  const std::string& ptx = module->ptx;
  const size_t at = ptx.find(".entry " + std::string(name) + "(");
  if (at == std::string::npos) return kCudaErrorNotFound;
  const size_t open = ptx.find('(', at), close = ptx.find(')', open);
  int params = 0;
  for (size_t p = ptx.find(".param", open); p < close; p = ptx.find(".param", p + 1)) ++params;
  module->functions.push_back(CUfunc_st{module, name, params});
  *function = &module->functions.back();
  return kCudaSuccess;
}
inline int cuLaunchKernel(CUfunc_st* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared_bytes, CUstream_st* s, void** params, void** extra) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuLaunchKernel");
  if (f == nullptr) return kCudaErrorInvalidHandle;
  if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024 || extra != nullptr) return kCudaErrorInvalidValue;
  if (f->num_params > 0 && params == nullptr) return kCudaErrorInvalidValue;
  FakeLaunch launch{f->name, {gx, gy, gz}, {bx, by, bz}, shared_bytes, {}};
  for (int i = 0; i < f->num_params; ++i) {
    uint64_t word = 0;
    std::memcpy(&word, params[i], sizeof(word));
    launch.params.push_back(word);
  }
  g_fake_cuda->launches.push_back(launch);
  auto body = g_fake_cuda->kernel_bodies.find(f->name);
  if (body != g_fake_cuda->kernel_bodies.end()) {
    auto fn = body->second;
    std::vector<uint64_t> words = launch.params;
    push(s, [fn, words] {
      if (g_fake_cuda->sticky_error == kCudaSuccess) fn(words);
    });
  }
  return kCudaSuccess;
}

/// Enqueues host work `fn` on `s` (for test stand-ins of library calls such as a host GEMM);
/// it runs in stream order, and not at all once the context failed.
inline void enqueue(CUstream_st* s, std::function<void()> fn) {
  auto l = lock();
  push(s, [fn = std::move(fn)] {
    if (g_fake_cuda->sticky_error == kCudaSuccess) fn();
  });
}

inline int cuStreamBeginCapture_v2(CUstream_st* s, int mode) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuStreamBeginCapture");
  if (g_fake_cuda->begin_capture_result != kCudaSuccess) return g_fake_cuda->begin_capture_result;
  if (s->capturing || g_fake_cuda->capturing_stream != nullptr || mode < 0 || mode > 2) return kCudaErrorInvalidValue;
  s->capturing = true;
  s->capture_invalidated = false;
  s->capture_mode = mode;
  s->captured.clear();
  g_fake_cuda->capturing_stream = s;
  g_fake_cuda->capture_thread_local = mode == 1;
  g_fake_cuda->capture_thread = std::this_thread::get_id();
  return kCudaSuccess;
}
inline int cuStreamEndCapture(CUstream_st* s, CUgraph_st** graph) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuStreamEndCapture");
  if (!s->capturing) return kCudaErrorInvalidValue;
  s->capturing = false;
  g_fake_cuda->capturing_stream = nullptr;
  std::vector<std::function<void()>> work = std::move(s->captured);
  s->captured.clear();
  if (s->capture_invalidated) {
    *graph = nullptr;
    return kCudaErrorStreamCaptureInvalidated;
  }
  *graph = new CUgraph_st{std::move(work)};
  ++g_fake_cuda->captures;
  ++g_fake_cuda->live_graphs;
  return kCudaSuccess;
}
inline int cuGraphInstantiateWithFlags(CUgraphExec_st** exec, CUgraph_st* graph, unsigned long long) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuGraphInstantiate");
  if (graph == nullptr) return kCudaErrorInvalidValue;
  if (g_fake_cuda->instantiate_result != kCudaSuccess) return g_fake_cuda->instantiate_result;
  *exec = new CUgraphExec_st{graph->work};
  ++g_fake_cuda->live_graph_execs;
  return kCudaSuccess;
}
inline int cuGraphLaunch(CUgraphExec_st* exec, CUstream_st* s) {
  auto l = lock();
  if (t_fake_current == nullptr) return no_context("cuGraphLaunch");
  if (exec == nullptr) return kCudaErrorInvalidHandle;
  if (g_fake_cuda->graph_launch_result != kCudaSuccess) return g_fake_cuda->graph_launch_result;
  for (const auto& op : exec->work) push(s, op);
  ++g_fake_cuda->graph_launches;
  return kCudaSuccess;
}
inline int cuGraphExecDestroy(CUgraphExec_st* exec) {
  auto l = lock();
  if (exec == nullptr) return kCudaErrorInvalidHandle;
  delete exec;  // the work already enqueued by cuGraphLaunch holds its own copies
  --g_fake_cuda->live_graph_execs;
  return kCudaSuccess;
}
inline int cuGraphDestroy(CUgraph_st* graph) {
  auto l = lock();
  if (graph == nullptr) return kCudaErrorInvalidHandle;
  delete graph;
  --g_fake_cuda->live_graphs;
  return kCudaSuccess;
}

/// Resolver for CudaDriver::from_resolver; `omit` names one symbol to leave out.
inline CudaSymbolResolver resolver(std::string omit = "") {
  return [omit](const char* name) -> void* {
    static const std::map<std::string, void*> table = {
#define INGOT_FAKE_ENTRY(fn) {#fn, reinterpret_cast<void*>(&fn)},
        INGOT_FAKE_ENTRY(cuInit) INGOT_FAKE_ENTRY(cuDriverGetVersion) INGOT_FAKE_ENTRY(cuGetErrorString)
            INGOT_FAKE_ENTRY(cuGetErrorName) INGOT_FAKE_ENTRY(cuDeviceGetCount) INGOT_FAKE_ENTRY(cuDeviceGet)
                INGOT_FAKE_ENTRY(cuDeviceGetName) INGOT_FAKE_ENTRY(cuDeviceTotalMem_v2) INGOT_FAKE_ENTRY(
                    cuDevicePrimaryCtxRetain) INGOT_FAKE_ENTRY(cuDevicePrimaryCtxRelease_v2)
                    INGOT_FAKE_ENTRY(cuCtxSetCurrent) INGOT_FAKE_ENTRY(cuMemGetInfo_v2) INGOT_FAKE_ENTRY(cuMemAlloc_v2)
                        INGOT_FAKE_ENTRY(cuMemFree_v2) INGOT_FAKE_ENTRY(cuMemHostAlloc) INGOT_FAKE_ENTRY(cuMemFreeHost)
                            INGOT_FAKE_ENTRY(cuMemcpyHtoDAsync_v2) INGOT_FAKE_ENTRY(cuMemcpyDtoDAsync_v2)
                                INGOT_FAKE_ENTRY(cuMemcpyDtoHAsync_v2) INGOT_FAKE_ENTRY(cuStreamCreate)
                                    INGOT_FAKE_ENTRY(cuStreamDestroy_v2) INGOT_FAKE_ENTRY(cuStreamSynchronize)
                                        INGOT_FAKE_ENTRY(cuStreamWaitEvent) INGOT_FAKE_ENTRY(cuLaunchHostFunc)
                                            INGOT_FAKE_ENTRY(cuEventCreate) INGOT_FAKE_ENTRY(cuEventRecord)
                                                INGOT_FAKE_ENTRY(cuEventQuery) INGOT_FAKE_ENTRY(cuEventSynchronize)
                                                    INGOT_FAKE_ENTRY(cuEventDestroy_v2) INGOT_FAKE_ENTRY(
                                                        cuDeviceGetAttribute) INGOT_FAKE_ENTRY(cuModuleLoadDataEx)
                                                        INGOT_FAKE_ENTRY(cuModuleGetFunction) INGOT_FAKE_ENTRY(
                                                            cuModuleUnload) INGOT_FAKE_ENTRY(cuLaunchKernel)
                                                            INGOT_FAKE_ENTRY(cuStreamBeginCapture_v2)
                                                                INGOT_FAKE_ENTRY(cuStreamEndCapture)
                                                                    INGOT_FAKE_ENTRY(cuGraphInstantiateWithFlags)
                                                                        INGOT_FAKE_ENTRY(cuGraphLaunch)
                                                                            INGOT_FAKE_ENTRY(cuGraphExecDestroy)
                                                                                INGOT_FAKE_ENTRY(cuGraphDestroy)
#undef INGOT_FAKE_ENTRY
    };
    if (omit == name) return nullptr;
    auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
  };
}

}  // namespace fake_cuda

/// Installs a fresh FakeCuda for the lifetime of the scope (one at a time).
class FakeCudaScope {
 public:
  FakeCudaScope() { g_fake_cuda = &state_; }
  ~FakeCudaScope() {
    g_fake_cuda = nullptr;
    t_fake_current = nullptr;
  }
  FakeCudaScope(const FakeCudaScope&) = delete;
  FakeCudaScope& operator=(const FakeCudaScope&) = delete;
  FakeCuda& state() { return state_; }
  /// A CudaDriver over the fake.
  std::shared_ptr<CudaDriver> driver(std::string omit = "") {
    return CudaDriver::from_resolver("fake libcuda", fake_cuda::resolver(std::move(omit)));
  }
  /// Context references still held, summed over the fake devices.
  int context_references() const {
    int n = 0;
    for (const auto& c : state_.contexts) n += c->references;
    return n;
  }

 private:
  FakeCuda state_;
};

}  // namespace ingot::testing
