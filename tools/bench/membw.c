/* Memory read bandwidth of this machine (GB/s) with THREADS threads, the bound token generation can
 * reach (weights are read once per token). A sum over a buffer much larger than the caches, read
 * with 64-byte vector loads and four independent accumulators per thread, in anonymous memory
 * backed by transparent huge pages where the kernel allows (MADV_HUGEPAGE: fewer TLB misses, as
 * the runtime's weight buffers); each thread reads one contiguous range (the prefetchers see one
 * stream per thread, like the runtime's gemv). Best of PASSES passes.
 * Usage: membw [THREADS] [MiB] [PASSES] [serve]. Prints one number: GB/s. With "serve", the buffer
 * is allocated once and a probe (PASSES passes, one number printed and flushed) runs for each line
 * read from stdin, until end of input: a probe then costs only its passes (~15 ms per pass of 512
 * MiB), not the allocation (faulting in huge pages took up to ~1 s on this VM after a run had used
 * the memory). Run it so with OMP_WAIT_POLICY=passive, or libgomp's idle threads spin on the CPUs
 * between probes. Built by scripts/bench-vs-llamacpp.sh with -O2 -fopenmp -march=native. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef uint64_t v8u64 __attribute__((vector_size(64)));

/* Best of `passes` timed sums over a[0, n) (n a multiple of 4) with `threads` threads, in GB/s. */
static double probe(const v8u64* a, size_t n, int threads, int passes) {
  double best = 0;
  uint64_t sink = 0;
  for (int pass = 0; pass < passes; pass++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      int nt = omp_get_num_threads(), it = omp_get_thread_num();
      size_t chunk = (n / 4 + nt - 1) / nt * 4;
      size_t lo = (size_t)it * chunk, hi = lo + chunk < n ? lo + chunk : n;
      v8u64 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
      for (size_t i = lo; i + 3 < hi; i += 4) {
        s0 += a[i];
        s1 += a[i + 1];
        s2 += a[i + 2];
        s3 += a[i + 3];
      }
      v8u64 s = s0 + s1 + s2 + s3;
      for (int k = 0; k < 8; k++) total += s[k];
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sink += total;
    double sec = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double gbs = (double)(n * sizeof(v8u64)) / sec / 1e9;
    if (gbs > best) best = gbs;
  }
  return best + (sink == 42 ? 1e-12 : 0); /* the sums are used: the loads cannot be dropped */
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
  int passes = argc > 3 ? atoi(argv[3]) : 10;
  int serve = argc > 4 && strcmp(argv[4], "serve") == 0;
  if (threads < 1 || mib < 64 || passes < 1 || (argc > 4 && !serve) || argc > 5) {
    fprintf(stderr, "membw: usage: membw [THREADS >= 1] [MiB >= 64] [PASSES >= 1] [serve]\n");
    return 2;
  }
  size_t bytes = mib << 20;
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("membw: mmap");
    return 1;
  }
  madvise(p, bytes, MADV_HUGEPAGE); /* a hint: fine if THP is off */
  memset(p, 1, bytes);
  const v8u64* a = (const v8u64*)p;
  size_t n = bytes / sizeof(v8u64); /* multiple of 4: bytes is a multiple of 1 MiB */
  if (!serve) {
    printf("%.2f\n", probe(a, n, threads, passes));
  } else {
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
      printf("%.2f\n", probe(a, n, threads, passes));
      fflush(stdout);
    }
  }
  munmap(p, bytes);
  return 0;
}
