// The process's CPU threads for parallel code: LLVM's OpenMP runtime (libomp) runs the
// JIT-compiled parallel loops, oneDNN's GEMMs and the im2col gathers on one pool of threads.
// libomp aborts the process ("OMP: Error #34: System unable to allocate necessary resources for
// OMP thread") when it cannot start a thread it was asked for, e.g. under an address-space limit
// (`ulimit -v`); start_openmp_threads() finds out beforehand how many can be started.
#pragma once

#include <cstddef>

namespace ingot::kernels {

/// How many threads (the caller's included) could be running at once right now, up to `wanted`
/// (>= 1): starts wanted - 1 threads with stacks of `stack_bytes` (0: the system's default, the
/// stack limit `ulimit -s`), keeps them alive together, then ends them. At least 1. Errors: none
/// (a thread that cannot be started is the answer, not an error).
int startable_threads(int wanted, size_t stack_bytes = 0);

/// Makes libomp's pool hold `wanted` threads before compiled code asks for them: checks with
/// startable_threads() that they can be started (with libomp's stack size, kmp_get_stacksize_s), then runs an empty
/// parallel region of that many threads (libomp keeps its threads for later regions). Returns the threads the pool got:
/// fewer than `wanted` when the process could not start more, and then omp_set_num_threads() is set to that count so
/// that oneDNN and the im2col gathers (which ask for omp_get_max_threads()) do not ask for threads that cannot be had.
/// A race (memory taken by another thread between the check and the region) can still make libomp abort; the check
/// makes it unlikely, not impossible.
int start_openmp_threads(int wanted);

}  // namespace ingot::kernels
