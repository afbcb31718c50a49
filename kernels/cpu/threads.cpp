// The process's CPU threads for parallel code (include/ingot/kernels/cpu_threads.h).
#include "ingot/kernels/cpu_threads.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <vector>

// libomp's own extension (exported by libomp.so, which ingot_kernels links): the stack size of
// its worker threads (KMP_STACKSIZE / OMP_STACKSIZE, else libomp's default).
extern "C" size_t kmp_get_stacksize_s(void);

namespace ingot::kernels {
namespace {

/// Threads of the probe wait here until every one was started (so all are alive at once).
struct Gate {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t open = PTHREAD_COND_INITIALIZER;
  bool opened = false;
};

void* wait_at_gate(void* arg) {
  auto* gate = static_cast<Gate*>(arg);
  pthread_mutex_lock(&gate->mutex);
  while (!gate->opened) pthread_cond_wait(&gate->open, &gate->mutex);
  pthread_mutex_unlock(&gate->mutex);
  return nullptr;
}

}  // namespace

int startable_threads(int wanted, size_t stack_bytes) {
  wanted = std::max(wanted, 1);
  Gate gate;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (stack_bytes > 0) pthread_attr_setstacksize(&attr, stack_bytes);
  std::vector<pthread_t> started;
  started.reserve(static_cast<size_t>(wanted));
  for (int i = 1; i < wanted; ++i) {
    pthread_t t;
    if (pthread_create(&t, &attr, wait_at_gate, &gate) != 0) break;  // EAGAIN: no stack or thread left
    started.push_back(t);
  }
  pthread_attr_destroy(&attr);
  pthread_mutex_lock(&gate.mutex);
  gate.opened = true;
  pthread_cond_broadcast(&gate.open);
  pthread_mutex_unlock(&gate.mutex);
  for (pthread_t t : started) pthread_join(t, nullptr);
  return 1 + static_cast<int>(started.size());
}

int start_openmp_threads(int wanted) {
  wanted = std::max(wanted, 1);
  const int threads = startable_threads(wanted, kmp_get_stacksize_s());
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
    }
  }
  if (threads < wanted) omp_set_num_threads(threads);
  return threads;
}

}  // namespace ingot::kernels
