// CUDA graphs (CudaExecutableOptions::cuda_graphs) on the fake driver (fake_cuda_driver.h): a
// run captured once and replayed, one graph per set of buffer addresses with an LRU bound, the
// fallback when a capture fails, and the fake's own capture rules. Kernels are host bodies that
// read MLIR's memref descriptors from the launch words; the GEMM goes through a host BLAS
// enqueued on the fake stream, so a capture records it like a launch.
#if INGOT_HAVE_CUDA_TOOLKIT

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/conv_program.h"

#include <cstring>
#include <functional>

#include "fake_cuda_driver.h"
#include "ingot/runtime/cuda_conv_params.h"
#include "ingot/runtime/cuda_executable.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::FakeCudaScope;

template <typename T>
T* at(uint64_t address) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
}

uint64_t address(const Array& a) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(a.buffer()->data())); }

/// Fake PTX with one entry `entry` of `params` 64-bit parameters.
CudaKernelImage image(const std::string& entry, int params) {
  std::string p = fmt::format(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry {}(\n", entry);
  for (int i = 0; i < params; ++i) p += fmt::format("\t.param .u64 p{}{}\n", i, i + 1 < params ? "," : "");
  CudaKernelImage k;
  k.name = entry + "." + entry;
  k.ptx["sm_90"] = p + ")\n{\n\tret;\n}\n";
  return k;
}

CudaKernelArg memref1(int64_t buffer, int64_t n) {
  CudaKernelArg a;
  a.kind = CudaKernelArg::Kind::kMemref;
  a.buffer = buffer;
  a.sizes = {n};
  a.strides = {1};
  return a;
}

CudaKernelArg matrix(int64_t buffer, int64_t rows, int64_t cols) {
  CudaKernelArg a = memref1(buffer, rows);
  a.sizes = {rows, cols};
  a.strides = {cols, 1};
  return a;
}

CudaBuffer buffer(CudaBuffer::Kind kind, int64_t index, Shape shape) {
  CudaBuffer b;
  b.kind = kind;
  b.index = index;
  b.shape = shape;
  b.dtype = DType::kF32;
  b.bytes = num_elements(shape) * 4;
  return b;
}

// The program: tmp (2, 3) = x + 1 (kernel "inc", two rank-1 memrefs of 6: 10 words), then
// out (2, 2) = tmp (2, 3) @ w (3, 2) (a GEMM thunk).
// Buffers: 0 input x (2, 3), 1 input w (3, 2), 2 temporary tmp (2, 3), 3 output out (2, 2).
CudaProgram inc_matmul_program() {
  CudaProgram p;
  p.kernels = {image("inc", 10)};
  p.buffers = {buffer(CudaBuffer::Kind::kInput, 0, {2, 3}), buffer(CudaBuffer::Kind::kInput, 1, {3, 2}),
               buffer(CudaBuffer::Kind::kTemporary, 0, {2, 3}), buffer(CudaBuffer::Kind::kOutput, 0, {2, 2})};
  CudaThunk inc;
  inc.kind = CudaThunk::Kind::kLaunch;
  inc.launch.kernel = "inc.inc";
  inc.launch.grid = {1, 1, 1};
  inc.launch.block = {32, 1, 1};
  inc.launch.args = {memref1(0, 6), memref1(2, 6)};
  CudaThunk mm;
  mm.kind = CudaThunk::Kind::kGemm;
  mm.gemm.dtype = DType::kF32;
  mm.gemm.m = 2;
  mm.gemm.n = 2;
  mm.gemm.k = 3;
  mm.gemm.a = matrix(2, 2, 3);
  mm.gemm.b = matrix(1, 3, 2);
  mm.gemm.c = matrix(3, 2, 2);
  p.thunks = {inc, mm};
  p.input_types = {{{2, 3}, DType::kF32}, {{3, 2}, DType::kF32}};
  p.output_types = {{{2, 2}, DType::kF32}};
  return p;
}

/// inc's body: out[i] = in[i] + 1 over the rank-1 views (words: 5 per descriptor).
void register_inc(testing::FakeCuda& fake) {
  fake.kernel_bodies["inc"] = [](const std::vector<uint64_t>& w) {
    const float* in = at<float>(w[1]) + w[2];
    float* out = at<float>(w[6]) + w[7];
    for (uint64_t i = 0; i < w[3]; ++i) out[i] = in[i] + 1;
  };
}

/// Column-major sgemm (reference BLAS, alpha = 1, beta = 0, no transposes: what
/// column_major_gemm gives for this program) enqueued on the fake stream, so a capture records it.
class HostBlas final : public CudaBlas {
 public:
  void gemm(const CudaBlasGemm& c, const CudaStream& stream) override {
    ++calls;
    streams.push_back(stream.name());
    if (on_call) on_call();
    if (synchronise_first) stream.synchronize();  // a library that waits for its stream
    testing::fake_cuda::enqueue(stream.handle(), [c] {
      for (int64_t j = 0; j < c.n; ++j) {
        for (int64_t i = 0; i < c.m; ++i) {
          float s = 0;
          for (int64_t l = 0; l < c.k; ++l) s += at<float>(c.a)[i + l * c.lda] * at<float>(c.b)[l + j * c.ldb];
          at<float>(c.c)[i + j * c.ldc] = s;
        }
      }
    });
  }
  int calls = 0;
  bool synchronise_first = false;
  std::vector<std::string> streams;  // the stream of each call, by name
  std::function<void()> on_call;     // runs at each call, before the GEMM is enqueued
};

/// Row-major (x + 1) @ w, the oracle.
std::vector<float> expected(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> out(4, 0.0f);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      for (int l = 0; l < 3; ++l)
        out[static_cast<size_t>(2 * i + j)] +=
            (x[static_cast<size_t>(3 * i + l)] + 1) * w[static_cast<size_t>(2 * l + j)];
    }
  }
  return out;
}

/// A fake device, the program loaded with graphs as `options` says, and helpers to run it.
struct Fixture {
  explicit Fixture(CudaExecutableOptions options = {.cuda_graphs = true}) {
    register_inc(fake.state());
    dev = CudaDevice::open(fake.driver(), 0);
    blas = std::make_shared<HostBlas>();
    exe = CudaExecutable::create(inc_matmul_program(), *dev, blas, nullptr, options);
  }
  Array upload(const std::vector<float>& v, Shape shape) {
    Array d = Array::empty(shape, DType::kF32, &dev->device());
    dev->copy_async(Array::from_vector<float>(v, shape), d)->wait();
    return d;
  }
  Array output() { return Array::empty({2, 2}, DType::kF32, &dev->device()); }
  std::vector<float> download(const Array& d) {
    Array h = Array::empty(d.shape(), d.dtype());
    dev->copy_async(d, h)->wait();
    return h.to_vector<float>();
  }
  /// Writes `xv` into `x`, runs (x, w) -> out and returns out on the host.
  std::vector<float> run(const Array& x, const std::vector<float>& xv, const Array& w, const Array& out) {
    Array target = x;  // the same buffer, written in place
    dev->copy_async(Array::from_vector<float>(xv, {2, 3}), target)->wait();
    const std::vector<Array> in = {x, w}, o = {out};
    exe->run(in, o)->wait();
    return download(out);
  }

  FakeCudaScope fake;
  std::unique_ptr<CudaDevice> dev;
  std::shared_ptr<HostBlas> blas;
  std::unique_ptr<CudaExecutable> exe;
};

const std::vector<float> kW = {1, 2, 3, 4, 5, 6};

TEST(CudaGraphs, ARunIsCapturedOnceAndReplayedWithTheSameAddresses) {
  Fixture f;
  EXPECT_EQ(f.exe->graph_stats().arena_bytes, 256);  // tmp's 24 bytes in one 256-byte slot
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<std::vector<float>> xs = {{1, 2, 3, 4, 5, 6}, {-1, 0, 1, 2, 0.5f, -3}, {7, 7, 7, 0, 0, 0}};
  for (const auto& xv : xs) EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));
  const testing::FakeCuda& fake = f.fake.state();
  EXPECT_EQ(fake.captures, 1);
  EXPECT_EQ(fake.graph_launches, 3);
  ASSERT_EQ(fake.launches.size(), 1u);  // enqueued once, into the capture
  EXPECT_EQ(f.blas->calls, 1);
  EXPECT_EQ(fake.launches[0].params[0], address(x));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.replays, 2);
  EXPECT_EQ(s.uncaptured_runs, 0);
  EXPECT_EQ(s.cached, 1);
  EXPECT_TRUE(s.disabled_reason.empty());
  EXPECT_EQ(fake.live_graph_execs, 1);
  EXPECT_EQ(fake.live_graphs, 0);  // the template is destroyed once instantiated
}

TEST(CudaGraphs, CapturesOnAPrivateStreamSoOtherWorkOnTheComputeStreamIsNotCaptured) {
  Fixture f;
  int other = 0;
  // Stands for another thread enqueuing on the compute stream while the run is being captured.
  f.blas->on_call = [&] { testing::fake_cuda::enqueue(f.dev->compute_stream().handle(), [&] { ++other; }); };
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<float> x1 = {1, 2, 3, 4, 5, 6}, x2 = {0, 1, 0, 1, 0, 1};
  EXPECT_EQ(f.run(x, x1, w, out), expected(x1, kW));
  EXPECT_EQ(f.run(x, x2, w, out), expected(x2, kW));
  EXPECT_EQ(f.blas->streams, (std::vector<std::string>{"cuda:0 graph capture"}));
  EXPECT_EQ(other, 1);  // ran once, on the compute stream; the replay did not repeat it
  EXPECT_EQ(f.exe->graph_stats().replays, 1);
}

TEST(CudaGraphs, TemporariesLiveInTheArenaForTheExecutablesLifetime) {
  Fixture f;
  const int64_t held = f.dev->allocator().stats().bytes_in_use;
  const Array x = f.upload({1, 2, 3, 4, 5, 6}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  f.run(x, {1, 2, 3, 4, 5, 6}, w, out);
  // Nothing allocated per run: only the three arrays came on top of the arena.
  EXPECT_EQ(f.dev->allocator().stats().bytes_in_use - held, 24 + 24 + 16);
  f.exe.reset();
  EXPECT_EQ(f.fake.state().live_graph_execs, 0);
  EXPECT_EQ(f.dev->allocator().stats().bytes_in_use - held, 24 + 24 + 16 - 256);  // the arena went back
}

TEST(CudaGraphs, NewAddressesCaptureANewGraphAndTheCacheIsLru) {
  Fixture f({.cuda_graphs = true, .graph_cache_size = 2});
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2});
  const Array a = f.output(), b = f.output(), c = f.output();
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  // a: capture; b: capture; a: replay (a is now the most recent); c: capture, evicts b;
  // b: capture again, evicts a; c: replay.
  for (const Array* out : {&a, &b, &a, &c, &b, &c}) EXPECT_EQ(f.run(x, xv, w, *out), expected(xv, kW));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.captures, 4);
  EXPECT_EQ(s.replays, 2);
  EXPECT_EQ(s.evictions, 2);
  EXPECT_EQ(s.cached, 2);
  EXPECT_EQ(f.fake.state().captures, 4);
  EXPECT_EQ(f.fake.state().graph_launches, 6);
  EXPECT_EQ(f.fake.state().live_graph_execs, 2);
  // Each capture enqueued inc once (the GEMM, the only thunk writing the output, went to the
  // BLAS); inc reads x and writes tmp's arena slot, the same words in every graph.
  ASSERT_EQ(f.fake.state().launches.size(), 4u);
  EXPECT_EQ(f.fake.state().launches[0].params, f.fake.state().launches[3].params);
}

TEST(CudaGraphs, AddressesThatChangeEveryRunTurnGraphsOff) {
  Fixture f({.cuda_graphs = true, .graph_cache_size = 1});
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2});
  const std::vector<Array> outs = {f.output(), f.output(), f.output(), f.output(), f.output()};
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  // Captures 1, 2, 3 (= 2 * 1 + 1 in a row, none replayed), then the fourth run turns graphs off.
  for (const Array& out : outs) EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.captures, 3);
  EXPECT_EQ(s.replays, 0);
  EXPECT_EQ(s.uncaptured_runs, 2);
  EXPECT_EQ(s.cached, 0);
  EXPECT_EQ(s.disabled_reason,
            "the buffer addresses changed on 4 runs in a row (graph_cache_size 1): every run would be captured anew");
  EXPECT_EQ(f.fake.state().live_graph_execs, 0);
}

TEST(CudaGraphs, AReplayResetsTheCountOfCapturesInARow) {
  Fixture f({.cuda_graphs = true, .graph_cache_size = 1});
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2});
  const Array a = f.output(), b = f.output(), c = f.output();
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  // a b c (3 captures), c (replay), a b c again: 3 more captures, never more than 3 in a row.
  for (const Array* out : {&a, &b, &c, &c, &a, &b, &c}) EXPECT_EQ(f.run(x, xv, w, *out), expected(xv, kW));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.captures, 6);
  EXPECT_EQ(s.replays, 1);
  EXPECT_EQ(s.disabled_reason, "");
}

TEST(CudaGraphs, AFailedReplayFallsBackToAnUncapturedRunWithTheReason) {
  Fixture f;
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));  // captured
  f.fake.state().graph_launch_result = testing::kCudaErrorInvalidValue;
  const std::vector<float> yv = {6, 5, 4, 3, 2, 1};
  EXPECT_EQ(f.run(x, yv, w, out), expected(yv, kW));  // the replay failed: run uncaptured, right results
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.replays, 0);  // nothing counted for the failed launch
  EXPECT_EQ(s.uncaptured_runs, 1);
  EXPECT_EQ(s.cached, 0);  // graphs are off: the cached one was destroyed
  EXPECT_NE(s.disabled_reason.find("cuGraphLaunch failed while replaying the CUDA graph of a run on cuda:0"),
            std::string::npos)
      << s.disabled_reason;
  EXPECT_EQ(f.fake.state().live_graph_execs, 0);
  f.fake.state().graph_launch_result = testing::kCudaSuccess;
  EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));  // later runs stay uncaptured
  EXPECT_EQ(f.exe->graph_stats().uncaptured_runs, 2);
}

TEST(CudaGraphs, AFailedFirstLaunchOfANewCaptureFallsBackToo) {
  Fixture f;
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  f.fake.state().graph_launch_result = testing::kCudaErrorInvalidValue;
  EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.cached, 0);
  EXPECT_EQ(s.uncaptured_runs, 1);
  EXPECT_NE(s.disabled_reason.find("launching a newly captured CUDA graph on cuda:0"), std::string::npos)
      << s.disabled_reason;
  EXPECT_EQ(f.fake.state().live_graph_execs, 0);
}

TEST(CudaGraphs, AFailedBeginCaptureFallsBackToLaunchesWithTheReason) {
  Fixture f;
  f.fake.state().begin_capture_result = testing::kCudaErrorOutOfMemory;
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<float> x1 = {1, 2, 3, 4, 5, 6}, x2 = {6, 5, 4, 3, 2, 1};
  EXPECT_EQ(f.run(x, x1, w, out), expected(x1, kW));
  f.fake.state().begin_capture_result = testing::kCudaSuccess;  // graphs stay off regardless
  EXPECT_EQ(f.run(x, x2, w, out), expected(x2, kW));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.disabled_reason, "cuStreamBeginCapture failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  EXPECT_EQ(s.uncaptured_runs, 2);
  EXPECT_EQ(s.captures, 0);
  EXPECT_EQ(f.fake.state().graph_launches, 0);
  EXPECT_EQ(f.fake.state().launches.size(), 2u);  // launched directly, once per run
}

TEST(CudaGraphs, AFailedInstantiationFallsBackAndLeaksNoGraph) {
  Fixture f;
  f.fake.state().instantiate_result = testing::kCudaErrorInvalidValue;
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));  // computed once, by the uncaptured run
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.disabled_reason, "cuGraphInstantiate failed: CUDA_ERROR_INVALID_VALUE (fake error)");
  EXPECT_EQ(s.uncaptured_runs, 1);
  EXPECT_EQ(f.fake.state().captures, 1);
  EXPECT_EQ(f.fake.state().live_graphs, 0);
  EXPECT_EQ(f.fake.state().live_graph_execs, 0);
  EXPECT_EQ(f.fake.state().launches.size(), 2u);  // the captured launch (discarded), then the real one
}

TEST(CudaGraphs, ALibraryThatSynchronisesCannotBeCapturedAndRunsUncaptured) {
  Fixture f;
  f.blas->synchronise_first = true;
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<float> xv = {2, 0, 1, 0, 3, 1};
  EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_NE(s.disabled_reason.find("a thunk failed during the capture: cuStreamSynchronize failed"), std::string::npos)
      << s.disabled_reason;
  EXPECT_NE(s.disabled_reason.find("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"), std::string::npos) << s.disabled_reason;
  EXPECT_EQ(s.uncaptured_runs, 1);
  EXPECT_EQ(f.fake.state().captures, 0);  // the invalidated capture made no graph
  EXPECT_EQ(f.fake.state().live_graphs, 0);
  EXPECT_EQ(f.fake.state().graph_launches, 0);
}

TEST(CudaGraphs, OffByDefaultWithoutArenaOrCaptures) {
  Fixture f(CudaExecutableOptions{});
  EXPECT_FALSE(f.exe->options().cuda_graphs);
  const Array x = f.upload({0, 0, 0, 0, 0, 0}, {2, 3}), w = f.upload(kW, {3, 2}), out = f.output();
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));
  EXPECT_EQ(f.run(x, xv, w, out), expected(xv, kW));
  const CudaGraphStats s = f.exe->graph_stats();
  EXPECT_EQ(s.arena_bytes, 0);
  EXPECT_EQ(s.captures + s.replays + s.uncaptured_runs, 0);
  EXPECT_EQ(f.fake.state().captures, 0);
  EXPECT_EQ(f.fake.state().launches.size(), 2u);
}

TEST(CudaGraphs, ACacheSizeOutsideItsRangeIsAClearErrorAtCreate) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  const int64_t before = dev->allocator().stats().bytes_in_use;
  for (int64_t size : {int64_t{0}, int64_t{-3}, int64_t{1025}}) {
    expect_error(
        [&] {
          CudaExecutable::create(inc_matmul_program(), *dev, std::make_shared<HostBlas>(), nullptr,
                                 {.cuda_graphs = true, .graph_cache_size = size});
        },
        ErrorCode::kInvalidArgument, {fmt::format("graph_cache_size is {}, not in [1, 1024]", size)});
  }
  EXPECT_EQ(fake.state().live_modules, 0);
  EXPECT_EQ(dev->allocator().stats().bytes_in_use, before);
}

// x (1, 1, 5) conv w (2, 1, 3) -> out (1, 2, 3), NCW / OIW, valid: one convolution thunk
// (buffers 0 input x, 1 input w, 2 output) whose kernel's host body reads the three operand
// addresses (the fake entry declares 3 parameters; the CudaConvParams block is not read).
CudaProgram conv_program() { return testing::conv1d_program(image("ingot_conv_implicit_gemm_f32", 3)); }

TEST(CudaGraphs, AConvolutionsFirstRunChoosesItsEngineUncapturedThenRunsAreGraphs) {
  FakeCudaScope fake;
  fake.state().kernel_bodies["ingot_conv_implicit_gemm_f32"] = [](const std::vector<uint64_t>& w) {
    const float* x = at<float>(w[0]);
    const float* k = at<float>(w[1]);
    float* out = at<float>(w[2]);
    for (int o = 0; o < 2; ++o) {
      for (int i = 0; i < 3; ++i) out[3 * o + i] = x[i] * k[3 * o] + x[i + 1] * k[3 * o + 1] + x[i + 2] * k[3 * o + 2];
    }
  };
  auto dev = CudaDevice::open(fake.driver(), 0);
  auto exe = CudaExecutable::create(conv_program(), *dev, nullptr, nullptr, {.cuda_graphs = true});
  EXPECT_EQ(exe->graph_stats().arena_bytes, 0);  // no temporaries, no arena
  auto upload = [&](const std::vector<float>& v, Shape shape) {
    Array d = Array::empty(shape, DType::kF32, &dev->device());
    dev->copy_async(Array::from_vector<float>(v, shape), d)->wait();
    return d;
  };
  const Array w = upload({1, 0, -1, 0.5f, 0.5f, 0.5f}, {2, 1, 3}), x = upload({0, 0, 0, 0, 0}, {1, 1, 5});
  const Array out = Array::empty({1, 2, 3}, DType::kF32, &dev->device());
  const std::vector<std::vector<float>> xs = {{1, 2, 3, 4, 5}, {0, 2, 0, 2, 0}, {-1, 1, -1, 1, -1}};
  for (size_t r = 0; r < xs.size(); ++r) {
    Array target = x;  // new data in the same buffer
    dev->copy_async(Array::from_vector<float>(xs[r], {1, 1, 5}), target)->wait();
    const std::vector<Array> in = {x, w}, o = {out};
    exe->run(in, o)->wait();
    Array h = Array::empty({1, 2, 3}, DType::kF32);
    dev->copy_async(out, h)->wait();
    const std::vector<float>& v = xs[r];
    std::vector<float> want;
    for (size_t i = 0; i < 3; ++i) want.push_back(v[i] - v[i + 2]);
    for (size_t i = 0; i < 3; ++i) want.push_back(0.5f * v[i] + 0.5f * v[i + 1] + 0.5f * v[i + 2]);
    EXPECT_EQ(h.to_vector<float>(), want) << "run " << r;
    if (r == 0) {
      EXPECT_EQ(exe->graph_stats().uncaptured_runs, 1);  // the engine was chosen, uncaptured
      EXPECT_EQ(fake.state().captures, 0);
    }
  }
  EXPECT_EQ(exe->conv_choices()[0].engine, CudaConvChoice::Engine::kImplicitGemm);
  const CudaGraphStats s = exe->graph_stats();
  EXPECT_EQ(s.uncaptured_runs, 1);
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.replays, 1);
  EXPECT_EQ(fake.state().graph_launches, 2);
}

// The fake's own capture rules, which the tests above rely on.
TEST(FakeCudaCapture, CaptureRecordsReplayRunsAndIllegalCallsInvalidate) {
  FakeCudaScope fake;
  auto dev = CudaDevice::open(fake.driver(), 0);
  CUstream_st* s = dev->compute_stream().handle();
  int runs = 0;
  ASSERT_EQ(testing::fake_cuda::cuStreamBeginCapture_v2(s, 1), testing::kCudaSuccess);
  testing::fake_cuda::enqueue(s, [&] { ++runs; });
  EXPECT_EQ(testing::fake_cuda::cuStreamBeginCapture_v2(s, 1), testing::kCudaErrorInvalidValue);  // already
  unsigned long long p = 0;
  EXPECT_EQ(testing::fake_cuda::cuMemAlloc_v2(&p, 16), testing::kCudaErrorStreamCaptureUnsupported);
  CUgraph_st* graph = nullptr;
  EXPECT_EQ(testing::fake_cuda::cuStreamEndCapture(s, &graph), testing::kCudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  dev->compute_stream().synchronize();
  EXPECT_EQ(runs, 0);  // captured work never runs outside its graph

  ASSERT_EQ(testing::fake_cuda::cuStreamBeginCapture_v2(s, 2), testing::kCudaSuccess);  // relaxed
  testing::fake_cuda::enqueue(s, [&] { ++runs; });
  EXPECT_EQ(testing::fake_cuda::cuMemAlloc_v2(&p, 16), testing::kCudaSuccess);  // allowed when relaxed
  EXPECT_EQ(testing::fake_cuda::cuMemFree_v2(p), testing::kCudaSuccess);
  ASSERT_EQ(testing::fake_cuda::cuStreamEndCapture(s, &graph), testing::kCudaSuccess);
  CUgraphExec_st* exec = nullptr;
  ASSERT_EQ(testing::fake_cuda::cuGraphInstantiateWithFlags(&exec, graph, 0), testing::kCudaSuccess);
  EXPECT_EQ(testing::fake_cuda::cuGraphDestroy(graph), testing::kCudaSuccess);
  EXPECT_EQ(runs, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(testing::fake_cuda::cuGraphLaunch(exec, s), testing::kCudaSuccess);
  dev->compute_stream().synchronize();
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(testing::fake_cuda::cuGraphExecDestroy(exec), testing::kCudaSuccess);
  EXPECT_EQ(fake.state().live_graphs + fake.state().live_graph_execs, 0);
}

}  // namespace
}  // namespace ingot

#endif  // INGOT_HAVE_CUDA_TOOLKIT
