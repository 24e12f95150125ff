/* Memory read bandwidth of this machine (bytes/s) with THREADS threads: a sum over a buffer much
 * larger than the caches, best of several passes, the bound tg can reach (weights are read once per
 * token). Usage: membw [THREADS] [MiB]. Prints one number: GB/s. Built by
 * scripts/bench-vs-llamacpp.sh with -O2 -fopenmp -march=native. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
  size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
  uint64_t* a = aligned_alloc(4096, n * sizeof(uint64_t));
  if (!a) return 1;
  memset(a, 1, n * sizeof(uint64_t));
  double best = 0;
  uint64_t sink = 0;
  for (int pass = 0; pass < 5; pass++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t s = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += a[i];
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sink += s;
    double sec = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double gbs = n * sizeof(uint64_t) / sec / 1e9;
    if (gbs > best) best = gbs;
  }
  printf("%.2f\n", best + (sink == 42 ? 1e-12 : 0));
  free(a);
  return 0;
}
