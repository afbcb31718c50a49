// CudaExecutable's CUDA-graph path (CudaExecutableOptions::cuda_graphs): the temporaries' arena,
// capture of a run into a graph, replay of cached graphs keyed by the run's buffer addresses, and
// the fallback to thunk-by-thunk runs when a capture fails. docs/runtime-cuda.md, "CUDA graphs".
//
// CUDA's stream capture (CUDA Programming Guide, "CUDA Graphs", "Creating a Graph Using Stream
// Capture"): work enqueued on a capturing stream is recorded into a graph instead of run; the
// instantiated graph replays it with the same kernel parameters, hence the same addresses.
#include <fmt/format.h>

#include <algorithm>

#include "cuda/driver_api.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/error.h"

namespace ingot {
namespace {

/// Arena slots are aligned like device allocations (cuMemAlloc: 256 bytes), so a temporary
/// keeps the alignment cuBLASLt and vectorised kernels see with per-run buffers.
constexpr int64_t kArenaAlignment = 256;

int64_t round_up(int64_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

}  // namespace

void CudaExecutable::prepare_graphs() {
  capture_stream_ = device_.create_stream("graph capture");
  arena_offsets_.assign(program_.buffers.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const CudaBuffer& b = program_.buffers[i];
    if (b.kind != CudaBuffer::Kind::kTemporary) continue;
    arena_offsets_[i] = total;
    total += round_up(std::max<int64_t>(b.bytes, 1));  // distinct addresses even for empty ones
  }
  if (total == 0) return;  // no temporaries: nothing to hold
  arena_ = Buffer::allocate(device_.device(), total);
  graph_stats_.arena_bytes = total;
}

CudaGraphStats CudaExecutable::graph_stats() const {
  std::lock_guard<std::mutex> lock(run_mu_);
  CudaGraphStats s = graph_stats_;
  s.cached = static_cast<int64_t>(graphs_.size());
  return s;
}

void CudaExecutable::run_with_graphs(std::span<const uint64_t> addresses) const {
  const bool undecided = std::any_of(conv_choices_.begin(), conv_choices_.end(), [](const CudaConvChoice& c) {
    return c.engine == CudaConvChoice::Engine::kUndecided;
  });
  if (!graph_stats_.disabled_reason.empty() || undecided) return run_uncaptured(addresses);
  if (replay(addresses)) return;
  if (captures_in_a_row_ > 2 * options_.graph_cache_size) {
    graph_stats_.disabled_reason = fmt::format(
        "the buffer addresses changed on {} runs in a row (graph_cache_size {}): every run would be captured anew",
        captures_in_a_row_ + 1, options_.graph_cache_size);
    destroy_graphs();
    return run_uncaptured(addresses);
  }
  CUgraphExec exec = capture(addresses);
  if (exec == nullptr) return run_uncaptured(addresses);  // graphs are off now, the reason recorded
  const cuda_detail::DriverApi& api = device_.driver()->api();
  const CUresult launched = api.cuGraphLaunch(exec, device_.compute_stream().handle());
  if (launched != CUDA_SUCCESS) {
    (void)api.cuGraphExecDestroy(exec);
    return fall_back(launched, fmt::format("launching a newly captured CUDA graph on {}", device_.name()), addresses);
  }
  keep_graph(exec, addresses);
  ++graph_stats_.captures;
  ++captures_in_a_row_;
}

void CudaExecutable::fall_back(int result, const std::string& what, std::span<const uint64_t> addresses) const {
  // As a failed capture: graphs go off for this executable with the reason, and the run (and
  // every later one) goes uncaptured. An error that broke the context (sticky, e.g. an illegal
  // address) then surfaces from the uncaptured run's own launches.
  try {
    cuda_detail::check(device_.driver()->api(), static_cast<CUresult>(result), "cuGraphLaunch", what);
  } catch (const Error& e) {
    graph_stats_.disabled_reason = e.message();
  }
  destroy_graphs();
  run_uncaptured(addresses);
}

void CudaExecutable::run_uncaptured(std::span<const uint64_t> addresses) const {
  ++graph_stats_.uncaptured_runs;
  enqueue_thunks(addresses, device_.compute_stream());
}

bool CudaExecutable::replay(std::span<const uint64_t> addresses) const {
  const auto cached = std::find_if(graphs_.begin(), graphs_.end(), [&](const CachedGraph& g) {
    return std::equal(g.addresses.begin(), g.addresses.end(), addresses.begin(), addresses.end());
  });
  if (cached == graphs_.end()) return false;
  const cuda_detail::DriverApi& api = device_.driver()->api();
  const CUresult launched = api.cuGraphLaunch(cached->exec, device_.compute_stream().handle());
  if (launched != CUDA_SUCCESS) {
    fall_back(launched, fmt::format("replaying the CUDA graph of a run on {}", device_.name()), addresses);
    return true;  // the run went uncaptured
  }
  cached->last_use = ++graph_clock_;
  ++graph_stats_.replays;
  captures_in_a_row_ = 0;
  return true;
}

void CudaExecutable::keep_graph(CUgraphExec_st* exec, std::span<const uint64_t> addresses) const {
  if (static_cast<int64_t>(graphs_.size()) >= options_.graph_cache_size) {
    // The least recently used goes; a launch still in flight completes (cuGraphExecDestroy frees
    // an executing graph asynchronously, on completion).
    const auto oldest =
        std::min_element(graphs_.begin(), graphs_.end(),
                         [](const CachedGraph& a, const CachedGraph& b) { return a.last_use < b.last_use; });
    (void)device_.driver()->api().cuGraphExecDestroy(oldest->exec);
    graphs_.erase(oldest);
    ++graph_stats_.evictions;
  }
  graphs_.push_back({std::vector<uint64_t>(addresses.begin(), addresses.end()), exec, ++graph_clock_});
}

CUgraphExec_st* CudaExecutable::capture(std::span<const uint64_t> addresses) const {
  const cuda_detail::DriverApi& api = device_.driver()->api();
  // A private stream: work other threads enqueue on the compute stream meanwhile is not
  // captured; the graph is launched on the compute stream, ordered after the work before it.
  CUstream stream = capture_stream_->handle();
  auto off = [&](std::string reason) {
    graph_stats_.disabled_reason = std::move(reason);
    return nullptr;
  };
  // Thread-local mode: this thread may not make calls that are unsafe during a capture (e.g.
  // cuMemAlloc: the temporaries are in the arena), other threads (a prefetching data loader)
  // may.
  CUresult r = api.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS) return off("cuStreamBeginCapture failed: " + cuda_detail::describe(api, r));
  std::string error;
  try {
    enqueue_thunks(addresses, *capture_stream_);
  } catch (const Error& e) {  // e.g. a library call that cannot be captured
    error = "a thunk failed during the capture: " + e.message();
  }
  CUgraph graph = nullptr;
  r = api.cuStreamEndCapture(stream, &graph);  // always: the stream leaves capture mode
  if (error.empty() && r != CUDA_SUCCESS) error = "cuStreamEndCapture failed: " + cuda_detail::describe(api, r);
  if (!error.empty()) {
    if (graph != nullptr) (void)api.cuGraphDestroy(graph);
    return off(std::move(error));
  }
  CUgraphExec exec = nullptr;
  r = api.cuGraphInstantiateWithFlags(&exec, graph, 0);
  (void)api.cuGraphDestroy(graph);  // the executable graph is independent of its template
  if (r != CUDA_SUCCESS) return off("cuGraphInstantiate failed: " + cuda_detail::describe(api, r));
  return exec;
}

void CudaExecutable::destroy_graphs() const {
  const cuda_detail::DriverApi& api = device_.driver()->api();
  for (const CachedGraph& g : graphs_) (void)api.cuGraphExecDestroy(g.exec);
  graphs_.clear();
}

}  // namespace ingot
