// Thread teams of the CPU kernels (OpenMP). Internal to the CPU backend; include only from .cpp
// files built with OpenMP.
#pragma once

#include <omp.h>

#include <cstdint>

namespace stowage::cpu {

/// How ParallelFor hands out iterations: kStatic (one contiguous range per thread), kDynamic
/// (chunks of `chunk` iterations to whichever thread is free), kGuided (contiguous chunks that
/// shrink from n / nt towards `chunk`).
enum class Schedule { kStatic, kDynamic, kGuided };

/// Runs f(i, tid) for every i in [0, n): on a team of nt OpenMP threads (tid = its thread number)
/// when `parallel` and nt > 1, else on the calling thread (tid 0) without entering any OpenMP
/// construct -- libgomp's `parallel if (0)` still ends every region with a futex wake system call,
/// which token generation paid ~140 times per token at one thread.
template <typename F>
void ParallelFor(int nt, bool parallel, int64_t n, Schedule sched, int64_t chunk, F&& f) {
  if (!parallel || nt <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i, 0);
    return;
  }
  if (chunk < 1) chunk = 1;
  switch (sched) {
    case Schedule::kStatic:
#pragma omp parallel for num_threads(nt) schedule(static)
      for (int64_t i = 0; i < n; ++i) f(i, omp_get_thread_num());
      break;
    case Schedule::kDynamic:
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk)
      for (int64_t i = 0; i < n; ++i) f(i, omp_get_thread_num());
      break;
    case Schedule::kGuided:
#pragma omp parallel for num_threads(nt) schedule(guided, chunk)
      for (int64_t i = 0; i < n; ++i) f(i, omp_get_thread_num());
      break;
  }
}

}  // namespace stowage::cpu
