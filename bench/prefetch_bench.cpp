// prefetch_bench: how much of the data preparation the two-slot PrefetchQueue hides behind the
// steps. A producer takes time T per batch (building an ArrayBatch, then sleeping or spinning for
// the rest of T), distribute deep-copies the batch (the CPU stand-in for a host-to-device copy),
// and the step reads the batch and takes time T. One epoch of N batches is timed strictly serial
// (produce, distribute, step, repeat) and through the queue (the producer thread prepares the next
// batches while the consumer steps). Ideal: serial = 2NT, queued = (N+1)T (the first batch cannot
// overlap anything), ratio (N+1)/(2N) ~ 0.5. A last table measures the queue's hand-off cost with
// T = 0. Prints a Markdown report (bench/README.md: ratios measured in the same run).
//
//   prefetch_bench [--quick]    (--quick: fewer batches and repetitions, for a smoke run)
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#include "ingot/runtime/array.h"
#include "ingot/runtime/prefetch.h"

namespace ingot::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// CPU time used by all threads of this process so far, in seconds (CLOCK_PROCESS_CPUTIME_ID).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// How a producer or step spends its time T: sleeping (leaves the core free, like waiting for
/// I/O or a device) or spinning for T of this thread's CPU time (CPU work such as decoding or
/// augmenting data; it takes longer than T in wall time when the thread does not get a core).
enum class Wait { kSleep, kSpin };

const char* wait_name(Wait w) { return w == Wait::kSleep ? "sleep" : "spin"; }

/// CPU time used by the calling thread so far, in seconds (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Spends the rest of T: sleeps until start + seconds (wall clock), or spins until this thread
/// has used `seconds` of CPU time since `cpu_start`.
void spend(Clock::time_point start, double cpu_start, double seconds, Wait how) {
  if (how == Wait::kSleep) {
    std::this_thread::sleep_until(start +
                                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
    return;
  }
  uint64_t x = 1;
  while (thread_cpu_seconds() - cpu_start < seconds) {
    for (int i = 0; i < 256; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    benchmark::DoNotOptimize(x);
  }
}

/// Marks the start of a piece of work that takes T (see spend()).
struct WorkStart {
  Clock::time_point wall = Clock::now();
  double cpu = thread_cpu_seconds();
  void finish(double seconds, Wait how) const { spend(wall, cpu, seconds, how); }
};

/// One batch: an image block (64 x 784 f32) and its labels (64 i32), filled from `index`.
ArrayBatch make_batch(int64_t index) {
  Array x = Array::empty({64, 784}, DType::kF32);
  Array y = Array::empty({64}, DType::kI32);
  float* px = x.data<float>();
  for (int64_t i = 0; i < x.size(); ++i) px[i] = static_cast<float>((index + i) % 251) * 0.004f;
  int32_t* py = y.data<int32_t>();
  for (int64_t i = 0; i < y.size(); ++i) py[i] = static_cast<int32_t>((index + i) % 10);
  return {x, y};
}

/// The distribute stand-in: a deep copy of every array (what a host-to-device copy costs here).
ArrayBatch copy_batch(ArrayBatch host) {
  ArrayBatch placed;
  placed.reserve(host.size());
  for (const Array& a : host) placed.push_back(a.clone());
  return placed;
}

/// The step: reads the whole batch (a checksum, so the copy is used) and takes time T in all.
double step(const ArrayBatch& batch, double t, Wait how) {
  const WorkStart start;
  double sum = 0;
  const float* px = batch[0].data<float>();
  for (int64_t i = 0; i < batch[0].size(); ++i) sum += px[i];
  start.finish(t, how);
  return sum;
}

struct Epoch {
  double seconds = 0;
  double checksum = 0;
  double cpu_seconds = 0;  // process CPU time during the epoch (all threads)
};

/// One epoch of `n` batches, strictly serial.
Epoch serial_epoch(int64_t n, double t, Wait how) {
  Epoch e;
  const auto start = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    const WorkStart produce_start;
    ArrayBatch b = make_batch(i);
    produce_start.finish(t, how);
    e.checksum += step(copy_batch(std::move(b)), t, how);
  }
  e.seconds = seconds_since(start);
  return e;
}

/// One epoch of `n` batches through the two-slot queue (queue construction included).
Epoch queued_epoch(int64_t n, double t, Wait how) {
  Epoch e;
  const double cpu_start = process_cpu_seconds();
  const auto start = Clock::now();
  int64_t i = 0;
  ArrayPrefetchQueue q(
      [&]() -> std::optional<ArrayBatch> {
        if (i == n) return std::nullopt;
        const WorkStart produce_start;
        ArrayBatch b = make_batch(i++);
        produce_start.finish(t, how);
        return b;
      },
      copy_batch);
  while (std::optional<ArrayBatch> b = q.next()) e.checksum += step(*b, t, how);
  e.seconds = seconds_since(start);
  e.cpu_seconds = process_cpu_seconds() - cpu_start;
  return e;
}

/// Median of `runs` epochs of `fn`.
Epoch median_epoch(int runs, const std::function<Epoch()>& fn) {
  std::vector<Epoch> all;
  for (int r = 0; r < runs; ++r) all.push_back(fn());
  std::sort(all.begin(), all.end(), [](const Epoch& a, const Epoch& b) { return a.seconds < b.seconds; });
  return all[static_cast<size_t>(runs / 2)];
}

/// Epochs of one kind sorted by wall time: the median and the best (least disturbed by other
/// processes; noise only ever adds time).
struct Summary {
  Epoch median;
  Epoch best;
};

Summary summarize(std::vector<Epoch> all) {
  std::sort(all.begin(), all.end(), [](const Epoch& a, const Epoch& b) { return a.seconds < b.seconds; });
  return {all[all.size() / 2], all.front()};
}

void report_overlap(bool quick) {
  const int64_t n = quick ? 10 : 40;
  const int runs = quick ? 1 : 5;
  const double ideal = static_cast<double>(n + 1) / static_cast<double>(2 * n);
  fmt::print("## Overlap: producer T per batch, step T per batch, {} batches per epoch\n\n", n);
  fmt::print(
      "{} serial and {} queued epochs, alternating; median and best (shortest) of each. Ideal\n"
      "queued / serial = (N+1)/(2N) = {:.3f}. Cores used = process CPU time / wall time of the\n"
      "median queued epoch: spinning needs 2 free cores to overlap fully, so on a loaded machine\n"
      "the spin rows show how many it got.\n\n",
      runs, runs, ideal);
  fmt::print(
      "| T | producer and step | serial epoch (median) | queued epoch (median) | queued / serial "
      "(medians) | queued / serial (best) | ideal | cores used (queued) |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (const Wait how : {Wait::kSleep, Wait::kSpin}) {
    for (const double t_ms : {0.5, 2.0, 10.0}) {
      const double t = t_ms * 1e-3;
      std::vector<Epoch> serial_runs, queued_runs;
      for (int r = 0; r < runs; ++r) {
        serial_runs.push_back(serial_epoch(n, t, how));
        queued_runs.push_back(queued_epoch(n, t, how));
        if (serial_runs.back().checksum != queued_runs.back().checksum) {
          fmt::print("ERROR: checksums differ (serial {}, queued {}): batches lost or reordered\n",
                     serial_runs.back().checksum, queued_runs.back().checksum);
        }
      }
      const Summary serial = summarize(serial_runs), queued = summarize(queued_runs);
      fmt::print("| {} ms | {} | {:.1f} ms | {:.1f} ms | {:.3f} | {:.3f} | {:.3f} | {:.2f} |\n", t_ms, wait_name(how),
                 serial.median.seconds * 1e3, queued.median.seconds * 1e3,
                 queued.median.seconds / serial.median.seconds, queued.best.seconds / serial.best.seconds, ideal,
                 queued.median.cpu_seconds / queued.median.seconds);
    }
  }
  fmt::print("\n");
}

/// The queue's own cost per batch: trivial batches (an int), no work in producer or step.
void report_handoff(bool quick) {
  const int64_t n = quick ? 20000 : 200000;
  const int runs = quick ? 1 : 5;
  auto serial = [&] {
    const auto start = Clock::now();
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += i;
    benchmark::DoNotOptimize(sum);
    return Epoch{seconds_since(start), static_cast<double>(sum)};
  };
  auto queued = [&](int64_t slots) {
    return [&, slots] {
      const auto start = Clock::now();
      int64_t i = 0, sum = 0;
      PrefetchQueue<int64_t> q([&]() -> std::optional<int64_t> { return i == n ? std::nullopt : std::optional(i++); },
                               {}, slots);
      while (std::optional<int64_t> b = q.next()) sum += *b;
      return Epoch{seconds_since(start), static_cast<double>(sum)};
    };
  };
  const Epoch base = median_epoch(runs, serial);
  fmt::print("## Hand-off cost: {} trivial batches (int64), nothing else to do\n\n", n);
  fmt::print(
      "Median of {} epochs. This is the queue's synchronisation cost per batch (a mutex, two\n"
      "condition variables, a thread wake-up when either side waits); a real step is far longer.\n\n",
      runs);
  fmt::print("| path | per batch |\n|---|---|\n");
  fmt::print("| plain loop (no queue) | {:.3f} us |\n", base.seconds / static_cast<double>(n) * 1e6);
  for (const int64_t slots : {int64_t{2}, int64_t{1}, int64_t{8}}) {
    const Epoch e = median_epoch(runs, queued(slots));
    if (e.checksum != base.checksum) fmt::print("ERROR: checksum differs with {} slots\n", slots);
    fmt::print("| PrefetchQueue, {} slot{}{} | {:.3f} us |\n", slots, slots == 1 ? "" : "s",
               slots == 2 ? " (default)" : "", e.seconds / static_cast<double>(n) * 1e6);
  }
  fmt::print("\n");
}

}  // namespace
}  // namespace ingot::bench

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  fmt::print("# ingot PrefetchQueue benchmark\n\n");
  fmt::print("{} hardware threads.\n\n", std::thread::hardware_concurrency());
  ingot::bench::report_overlap(quick);
  ingot::bench::report_handoff(quick);
  return 0;
}
