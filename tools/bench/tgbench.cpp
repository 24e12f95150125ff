// stowage-tgbench: MUL_MAT with one activation row (token generation) per weight type, timed by
// the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID, so other processes on a shared machine
// do not count) with one thread, and by wall time with -t threads. Prints weight GB/s:
//   in-cache: a [K, N] matrix of ~1 MiB (in L2) multiplied again and again (the kernels' compute speed,
//             which must exceed the per-core share of the memory bandwidth);
//   stream:   a matrix of -s MiB (default 256) read once per multiplication (memory bound); with
//             -c KIB, the 2-thread stream is a sequence of MulMat calls on slices of ~KIB KiB each
//             (a model's matrix sizes: each call forks/joins the threads and starts new streams).
// Usage: stowage-tgbench [-t THREADS] [-s MIB] [-k K] [-c KIB] [TYPE...]   (types: f16 q8_0 q4_0 q4_0x8 q4_k
// q4_kx8 q8_0x8 q6_k; the x8 types are the CPU_REPACK layouts)
#include <omp.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops.h"
#include "quants.h"
#include "stowage/runtime/version.h"

using namespace stowage;
using namespace stowage::cpu;

namespace {

double Now(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Weights {
  uint8_t* data = nullptr;
  size_t bytes = 0;
  TensorView v;
  ~Weights() {
    if (data) munmap(data, bytes);
  }
};

// Random weights of `type` [K, N]: random bytes, with every fp16 scale field set to a small finite
// value (speed does not depend on the values, but NaN/inf would be unrepresentative).
bool MakeWeights(GgmlType type, bool repack, int64_t K, int64_t N, std::mt19937& rng, Weights* w) {
  w->v.type = type;
  w->v.ne[0] = K;
  w->v.ne[1] = N;
  SetContiguousStrides(w->v);
  w->bytes = w->v.nb[1] * size_t(N);
  void* p = mmap(nullptr, w->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  if (w->bytes >= (2u << 20)) madvise(p, w->bytes, MADV_HUGEPAGE);
  w->data = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < w->bytes; ++i) w->data[i] = uint8_t(rng());
  const fp16_t h = FloatToHalf(0.01f);
  const int64_t nblocks = int64_t(w->bytes / GetTypeTraits(type).type_size);
  for (int64_t b = 0; b < nblocks; ++b) {
    uint8_t* blk = w->data + size_t(b) * GetTypeTraits(type).type_size;
    switch (type) {
      case GgmlType::F16:
        break;  // filled below
        break;
      case GgmlType::Q8_0:
        std::memcpy(&reinterpret_cast<BlockQ8_0*>(blk)->d, &h, 2);
        break;
      case GgmlType::Q4_0:
        std::memcpy(&reinterpret_cast<BlockQ4_0*>(blk)->d, &h, 2);
        break;
      case GgmlType::Q4_K:
        std::memcpy(&reinterpret_cast<BlockQ4_K*>(blk)->d, &h, 2);
        std::memcpy(&reinterpret_cast<BlockQ4_K*>(blk)->dmin, &h, 2);
        break;
      case GgmlType::Q6_K:
        std::memcpy(&reinterpret_cast<BlockQ6_K*>(blk)->d, &h, 2);
        break;
      default:
        break;
    }
  }
  if (type == GgmlType::F16) {  // every element is an fp16: keep them finite
    fp16_t* f = reinterpret_cast<fp16_t*>(w->data);
    std::uniform_real_distribution<float> u(-1, 1);
    for (size_t i = 0; i < w->bytes / 2; ++i) f[i] = FloatToHalf(u(rng));
  }
  w->v.data = w->data;
  if (repack) {  // the layout a CPU_REPACK upload gives this tensor
    const int layout = RepackLayoutFor(w->v);
    if (layout == kLayoutPlain) return false;
    std::vector<uint8_t> tmp(w->bytes);
    if (!RepackWeight(w->v, layout, tmp.data()).ok()) return false;
    std::memcpy(w->data, tmp.data(), w->bytes);
    w->v.layout = layout;
  }
  return true;
}

// GB/s of weight bytes: best of `reps` timings of `iters` multiplications.
// With chunk_rows > 0, one multiplication is a sequence of MulMat calls on consecutive slices of
// chunk_rows rows (a model's sequence of matrices: each call forks and joins the threads and starts
// new read streams).
double Measure(ComputeContext& ctx, const TensorView& w, size_t bytes, const std::vector<float>& x, int iters,
               int reps, bool thread_time, int64_t chunk_rows = 0) {
  TensorView src1, dst;
  src1.type = GgmlType::F32;
  src1.ne[0] = w.ne[0];
  SetContiguousStrides(src1);
  src1.data = const_cast<float*>(x.data());
  std::vector<float> out(size_t(w.ne[1]));
  dst.type = GgmlType::F32;
  dst.ne[0] = w.ne[1];
  SetContiguousStrides(dst);
  dst.data = out.data();
  double best = 1e30;
  const clockid_t clk = thread_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now(clk);
    for (int i = 0; i < iters; ++i) {
      const int64_t step = chunk_rows > 0 ? chunk_rows : w.ne[1];
      for (int64_t r0 = 0; r0 < w.ne[1]; r0 += step) {
        TensorView wc = w;
        wc.ne[1] = std::min(step, w.ne[1] - r0);
        SetContiguousStrides(wc);
        wc.data = static_cast<uint8_t*>(w.data) + size_t(r0) * w.nb[1];
        TensorView dc = dst;
        dc.ne[0] = wc.ne[1];
        SetContiguousStrides(dc);
        dc.data = out.data() + r0;
        Status st = MulMat(ctx, wc, src1, dc);
        if (!st.ok()) {
          std::fprintf(stderr, "stowage-tgbench: %s\n", st.message().c_str());
          std::exit(1);
        }
      }
    }
    best = std::min(best, (Now(clk) - t0) / iters);
  }
  return double(bytes) / best * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int64_t stream_mib = 256, K = 2048, chunk_kib = 0;
  std::vector<std::string> types;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-t" || a == "-s" || a == "-k" || a == "-c") && i + 1 < argc) {
      const long long v = std::atoll(argv[++i]);
      if (v <= 0 || v > (1 << 20)) {
        std::fprintf(stderr, "stowage-tgbench: %s: expected a positive number up to 1048576\n", a.c_str());
        return 1;
      }
      if (a == "-t")
        threads = int(v);
      else if (a == "-s")
        stream_mib = v;
      else if (a == "-c")
        chunk_kib = v;
      else
        K = v;
    } else if (a == "--version") {
      std::printf("stowage-tgbench %s\n", stowage_version_string());
      return 0;
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: stowage-tgbench [--version] [-t THREADS] [-s STREAM_MIB] [-k K] [-c CHUNK_KIB] "
          "[f16|q8_0|q4_0|q4_0x8|q4_k|q4_kx8|q8_0x8|q6_k ...]\n");
      return 0;
    } else {
      types.push_back(a);
    }
  }
  if (K % 256 != 0) {
    std::fprintf(stderr, "stowage-tgbench: -k must be a multiple of 256\n");
    return 1;
  }
  if (types.empty()) types = {"f16", "q8_0", "q8_0x8", "q4_0", "q4_0x8", "q4_k", "q4_kx8", "q6_k"};
  std::mt19937 rng(7);
  std::vector<float> x(static_cast<size_t>(K));
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : x) v = u(rng);
  std::printf(
      "| type | in-cache GB/s (1 thread, CPU time) | stream GB/s (1 thread, CPU time) | stream GB/s (%d "
      "threads, wall) |\n",
      threads);
  std::printf("| --- | ---: | ---: | ---: |\n");
  for (const std::string& t : types) {
    GgmlType type;
    bool repack = false;
    if (t == "f16")
      type = GgmlType::F16;
    else if (t == "q8_0")
      type = GgmlType::Q8_0;
    else if (t == "q4_0")
      type = GgmlType::Q4_0;
    else if (t == "q4_0x8")
      type = GgmlType::Q4_0, repack = true;
    else if (t == "q4_k")
      type = GgmlType::Q4_K;
    else if (t == "q4_kx8")
      type = GgmlType::Q4_K, repack = true;
    else if (t == "q8_0x8")
      type = GgmlType::Q8_0, repack = true;
    else if (t == "q6_k")
      type = GgmlType::Q6_K;
    else {
      std::fprintf(stderr, "stowage-tgbench: unknown type '%s'\n", t.c_str());
      return 1;
    }
    const size_t row = RowSize(type, K);
    const int64_t n_small = std::max<int64_t>(16, (int64_t(1) << 20) / int64_t(row) / 16 * 16);
    const int64_t n_big = std::max<int64_t>(16, (stream_mib << 20) / int64_t(row) / 16 * 16);
    Weights small, big;
    if (!MakeWeights(type, repack, K, n_small, rng, &small) ||
        !MakeWeights(type, repack, K, n_big, rng, &big)) {
      std::fprintf(stderr, "stowage-tgbench: cannot allocate weights\n");
      return 1;
    }
    ComputeContext one;
    one.n_threads = 1;
    ComputeContext many;
    many.n_threads = threads;
    const double gin = Measure(one, small.v, small.bytes, x, 300, 5, true);
    const double gs1 = Measure(one, big.v, big.bytes, x, 3, 3, true);
    // Rows per call with -c: a multiple of 16 (the row tile), at least one tile.
    const int64_t chunk_rows =
        chunk_kib > 0 ? std::max<int64_t>(16, (chunk_kib << 10) / int64_t(row) / 16 * 16) : 0;
    const double gsn = Measure(many, big.v, big.bytes, x, 5, 5, false, chunk_rows);
    std::printf("| %s | %.1f | %.1f | %.1f |\n", t.c_str(), gin, gs1, gsn);
  }
  return 0;
}
