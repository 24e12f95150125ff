// GEMM family "float" (gemm_float*.cpp): F32, F16, BF16 weights.
//
// 1. The scalar reference GEMM against the existing vec_dot of the same weight row and activation
//    row (GetTypeKernels(type, level), every level; the SIMD ones with twice the bound below).
//    Both multiply the same F16/BF16-rounded (or F32) values;
//    they differ only in summation: vec_dot sums the products in double (F32: products rounded to
//    F32 first), the GEMM updates one F32 accumulator with one fma per k. A sequential F32 sum of K
//    terms errs by at most K * 2^-24 * sum|p| (each step rounds a partial sum <= sum|p|); the double
//    sum by K * 2^-53 * sum|p| plus 2^-24 |s| for the final rounding and, for F32, 2^-24 |p| per
//    product: the bound used is (K + 2) * 2^-24 * sum|w * a|.
// 2. Every SIMD level against the scalar reference: the activation rows and the packed panels must
//    be byte-identical (the formats are shared), and the kernel outputs bit-identical (each dst
//    element is one F32 accumulator updated by fma in increasing k at every level), for nr 1..16,
//    nc 1..40 and several K (multiples of 16 and odd ones); dst elements outside r < nr, c < nc
//    must stay untouched.
//    Also on values of every magnitude (subnormal and overflowing products, inf, NaN), where the
//    scalar reference's multiply-add shortcut for exact products must still equal fma.
// 3. MUL_MAT with enough src1 columns for the GEMM path (M >= kGemmMinCols), GQA broadcast, N not
//    a multiple of 16, more columns than one driver chunk, permuted and element-strided src1: every
//    level within the summation bound of a double reference on the rounded values, and every
//    level bit-identical to the scalar level.
// 4. DISABLED_Bench: prints the single-thread GFLOPS of pack + kernel (run with
//    --gtest_also_run_disabled_tests; it asserts no time).
#include <gtest/gtest.h>
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gemm.h"
#include "kernels.h"
#include "quants.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {

constexpr int kP = kGemmPanelRows;
const GgmlType kTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};

// 64-byte aligned byte buffer.
struct Buf {
  std::vector<uint8_t> v;
  uint8_t* p;
  explicit Buf(size_t n, uint8_t fill = 0) : v(n + 64, fill) {
    p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t(63));
  }
};

std::vector<float> Uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> x(n);
  for (float& f : x) f = d(rng);
  return x;
}

// `rows` weight rows of K elements of `type` (row stride = RowSize), from uniform floats.
std::vector<uint8_t> WeightRows(GgmlType type, int64_t K, int rows, uint32_t seed) {
  const std::vector<float> f = Uniform(size_t(K) * rows, seed, -1.f, 1.f);
  const size_t rs = RowSize(type, K);
  std::vector<uint8_t> out(rs * size_t(rows) + 64);
  for (size_t i = 0; i < f.size(); ++i) {
    if (type == GgmlType::F32) {
      std::memcpy(&out[4 * i], &f[i], 4);
    } else {
      const uint16_t h = type == GgmlType::F16 ? FloatToHalf(f[i]) : FloatToBf16(f[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  }
  return out;
}

float WeightAt(GgmlType type, const uint8_t* row, int64_t k) {
  if (type == GgmlType::F32) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, row + 2 * k, 2);
  return type == GgmlType::F16 ? HalfToFloat(h) : Bf16ToFloat(h);
}

std::vector<IsaLevel> SimdLevels() {
  std::vector<IsaLevel> l;
#if defined(__x86_64__) || defined(_M_X64)
  if (DetectIsa() >= IsaLevel::kAvx2) l.push_back(IsaLevel::kAvx2);
  if (DetectIsa() >= IsaLevel::kAvx512) l.push_back(IsaLevel::kAvx512);
  if (DetectIsa() >= IsaLevel::kAvx512Vnni) l.push_back(IsaLevel::kAvx512Vnni);
#endif
  return l;
}

TEST(GemmFloat, LookupCoversFloatTypesOnly) {
  for (GgmlType t : kTypes) {
    EXPECT_NE(GetGemmKernelsFloat(t, kLayoutPlain, IsaLevel::kScalar), nullptr) << GgmlTypeName(t);
    EXPECT_EQ(GetGemmKernelsFloat(t, kLayoutQ4_0x8, IsaLevel::kAvx512), nullptr) << GgmlTypeName(t);
  }
  EXPECT_EQ(GetGemmKernelsFloat(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx512), nullptr);
  EXPECT_EQ(GetGemmKernelsFloat(GgmlType::Q4_K, kLayoutPlain, IsaLevel::kScalar), nullptr);
  // Levels above the CPU's are never returned: the lookup at kAvx512 on an AVX2-only CPU gives the
  // AVX2 kernels (checked by the level tests below, which compare each level's output).
  for (int64_t K : {1, 16, 17, 2048}) {
    const GemmKernels* k = GetGemmKernelsFloat(GgmlType::F16, kLayoutPlain, IsaLevel::kScalar);
    EXPECT_EQ(k->act_row_bytes(K) % 64, 0u);
    EXPECT_GE(k->act_row_bytes(K), size_t(K) * 4);
    EXPECT_GE(k->panel_bytes(K), size_t(K) * kP * 4);
  }
}

TEST(GemmFloat, ScalarMatchesVecDot) {
  for (GgmlType type : kTypes) {
    const GemmKernels* g = GetGemmKernelsFloat(type, kLayoutPlain, IsaLevel::kScalar);
    const TypeKernels* vd = GetTypeKernels(type, IsaLevel::kScalar);
    ASSERT_NE(g, nullptr);
    ASSERT_NE(vd, nullptr);
    for (int64_t K : {1, 5, 16, 33, 256, 2048, 5632}) {
      const int nc = 9, nr = 13;
      const std::vector<uint8_t> w = WeightRows(type, K, nr, uint32_t(K) + 1);
      const size_t rs = RowSize(type, K);
      const std::vector<float> x = Uniform(size_t(K) * nc, uint32_t(K) + 7, -3.f, 3.f);
      const size_t ars = g->act_row_bytes(K);
      Buf act(ars * nc), panel(g->panel_bytes(K));
      for (int c = 0; c < nc; ++c) g->from_float(&x[size_t(c) * K], act.p + c * ars, K);
      g->pack(K, w.data(), rs, nr, kLayoutPlain, panel.p);
      std::vector<float> dst(size_t(nc) * kP, 0.f);
      g->kernel(K, panel.p, act.p, ars, nc, dst.data(), kP, nr);

      const size_t vrs = RowSize(vd->vec_dot_type, K);
      std::vector<uint8_t> y(vrs + 64);
      std::vector<IsaLevel> vd_levels = SimdLevels();
      vd_levels.insert(vd_levels.begin(), IsaLevel::kScalar);
      for (int c = 0; c < nc; ++c) {
        const float* xc = &x[size_t(c) * K];
        if (vd->from_float)
          vd->from_float(xc, y.data(), K);
        else
          std::memcpy(y.data(), xc, size_t(K) * 4);
        const float* a = reinterpret_cast<const float*>(act.p + c * ars);
        for (int r = 0; r < nr; ++r) {
          double abs_sum = 0;
          for (int64_t k = 0; k < K; ++k)
            abs_sum += std::fabs(double(WeightAt(type, w.data() + r * rs, k)) * a[k]);
          for (IsaLevel l : vd_levels) {
            // The SIMD vec_dots sum in F32 lanes too (ggml's 4 x 8/16 partial sums, then a
            // reduction): their own error is bounded like the GEMM's, so the bound doubles.
            float ref = 0.f;
            GetTypeKernels(type, l)->vec_dot(K, &ref, w.data() + r * rs, y.data());
            const double tol =
                (l == IsaLevel::kScalar ? 1 : 2) * double(K + 2) * std::ldexp(1.0, -24) * abs_sum;
            ASSERT_LE(std::fabs(double(dst[size_t(c) * kP + r]) - ref), tol)
                << GgmlTypeName(type) << " vec_dot level " << int(l) << " K=" << K << " r=" << r << " c=" << c
                << " gemm " << dst[size_t(c) * kP + r] << " vec_dot " << ref;
          }
        }
      }
    }
  }
}

TEST(GemmFloat, FromFloatRoundsLikeVecDotType) {
  // The activation values must be exactly the vec_dot type's rounding of x (ties, subnormals,
  // overflow to inf, NaN), at every level.
  std::vector<float> x = Uniform(100, 3, -70000.f, 70000.f);
  const float specials[] = {0.f,
                            -0.f,
                            1e-8f,
                            -3e-6f,
                            6.1e-5f,
                            65504.f,
                            65519.f,
                            65520.f,
                            -1e6f,
                            1e30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1.0f + std::ldexp(1.f, -11),
                            1.0f + 3 * std::ldexp(1.f, -11),
                            1.0f + std::ldexp(1.f, -8),
                            1.0f + 3 * std::ldexp(1.f, -8),
                            std::ldexp(1.f, -130),
                            3.3895314e38f};
  for (float s : specials) x.push_back(s);
  uint32_t snan = 0x7F800001u;
  float fs;
  std::memcpy(&fs, &snan, 4);
  x.push_back(fs);
  const int64_t K = int64_t(x.size());
  for (GgmlType type : kTypes) {
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      want[i] = type == GgmlType::F32   ? x[i]
                : type == GgmlType::F16 ? HalfToFloat(FloatToHalf(x[i]))
                                        : Bf16ToFloat(FloatToBf16(x[i]));
    }
    std::vector<IsaLevel> levels = SimdLevels();
    levels.insert(levels.begin(), IsaLevel::kScalar);
    for (IsaLevel l : levels) {
      const GemmKernels* g = GetGemmKernelsFloat(type, kLayoutPlain, l);
      Buf act(g->act_row_bytes(K));
      g->from_float(x.data(), act.p, K);
      for (size_t i = 0; i < x.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, act.p + 4 * i, 4);
        std::memcpy(&b, &want[i], 4);
        ASSERT_EQ(a, b) << GgmlTypeName(type) << " level " << int(l) << " x=" << x[i];
      }
    }
  }
}

TEST(GemmFloat, SimdLevelsBitIdenticalToScalar) {
  const std::vector<IsaLevel> levels = SimdLevels();
  if (levels.empty()) GTEST_SKIP() << "skipped: no SIMD level on this CPU";
  constexpr int kMaxCols = 40;
  for (GgmlType type : kTypes) {
    const GemmKernels* ref = GetGemmKernelsFloat(type, kLayoutPlain, IsaLevel::kScalar);
    for (int64_t K : {1, 3, 15, 16, 17, 31, 48, 100, 513}) {
      const size_t rs = RowSize(type, K) + 8;  // a row stride larger than the row
      const std::vector<uint8_t> w0 = WeightRows(type, K * 2, kP, uint32_t(K) * 3 + 1);
      std::vector<uint8_t> w(rs * kP);
      for (int r = 0; r < kP; ++r) std::memcpy(&w[r * rs], &w0[r * RowSize(type, K)], RowSize(type, K));
      const std::vector<float> x = Uniform(size_t(K) * kMaxCols, uint32_t(K) + 11, -2.f, 2.f);
      const size_t ars = ref->act_row_bytes(K) + 64;  // act_stride larger than a row
      Buf act(ars * kMaxCols, 0xCD), panel_ref(ref->panel_bytes(K));
      for (int c = 0; c < kMaxCols; ++c) ref->from_float(&x[size_t(c) * K], act.p + c * ars, K);
      ref->pack(K, w.data(), rs, kP, kLayoutPlain, panel_ref.p);
      const size_t ds = kP + 3;
      std::vector<float> want(ds * kMaxCols, 0.f);
      ref->kernel(K, panel_ref.p, act.p, ars, kMaxCols, want.data(), ds, kP);

      for (IsaLevel l : levels) {
        const GemmKernels* g = GetGemmKernelsFloat(type, kLayoutPlain, l);
        ASSERT_NE(g, ref);
        ASSERT_EQ(g->panel_bytes(K), ref->panel_bytes(K));
        ASSERT_EQ(g->act_row_bytes(K), ref->act_row_bytes(K));
        Buf act2(ars, 0xCD);
        g->from_float(&x[0], act2.p, K);
        ASSERT_EQ(std::memcmp(act2.p, act.p, size_t(K) * 4), 0) << GgmlTypeName(type) << " K=" << K;
        for (int nr = 1; nr <= kP; ++nr) {
          Buf panel(g->panel_bytes(K), 0xAB), panel_nr(ref->panel_bytes(K));
          g->pack(K, w.data(), rs, nr, kLayoutPlain, panel.p);
          ref->pack(K, w.data(), rs, nr, kLayoutPlain, panel_nr.p);
          ASSERT_EQ(std::memcmp(panel.p, panel_nr.p, g->panel_bytes(K)), 0)
              << GgmlTypeName(type) << " level " << int(l) << " K=" << K << " nr=" << nr;
          for (int nc = 1; nc <= kMaxCols; ++nc) {
            if (nr != kP && nr != 1 && nr != 7 && nc > 17 && nc != kMaxCols) continue;  // keep it quick
            const float sentinel = -12345.f;
            std::vector<float> got(ds * kMaxCols, sentinel);
            g->kernel(K, panel.p, act.p, ars, nc, got.data(), ds, nr);
            for (int c = 0; c < kMaxCols; ++c) {
              for (size_t r = 0; r < ds; ++r) {
                const float v = got[c * ds + r];
                if (c < nc && int(r) < nr) {
                  ASSERT_EQ(std::memcmp(&v, &want[c * ds + r], 4), 0)
                      << GgmlTypeName(type) << " level " << int(l) << " K=" << K << " nr=" << nr
                      << " nc=" << nc << " r=" << r << " c=" << c << ": " << v << " vs " << want[c * ds + r];
                } else {
                  ASSERT_EQ(v, sentinel)
                      << "wrote outside the tile: nr=" << nr << " nc=" << nc << " r=" << r << " c=" << c;
                }
              }
            }
          }
        }
      }
    }
  }
}

// Seconds of CPU time of the calling thread (robust to other processes sharing the cores).
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Values of every magnitude (products from below F32's subnormals to beyond FLT_MAX, sums
// overflowing to inf and inf - inf = NaN): the scalar reference's multiply-then-add shortcut
// (exact products, gemm_float.cpp) must still equal the SIMD levels' fma bit for bit.
TEST(GemmFloat, ExtremeMagnitudesBitIdenticalToScalar) {
  const std::vector<IsaLevel> levels = SimdLevels();
  if (levels.empty()) GTEST_SKIP() << "skipped: no SIMD level on this CPU";
  const int64_t K = 45;
  const int nc = 11;
  for (GgmlType type : kTypes) {
    const int emax = type == GgmlType::F16 ? 10 : 70;  // F16: subnormals (2^-24) to 2^11
    std::mt19937 rng(uint32_t(type) + 99);
    auto value = [&]() {
      const float m = std::uniform_real_distribution<float>(1.f, 2.f)(rng);
      const int e = std::uniform_int_distribution<int>(type == GgmlType::F16 ? -26 : -emax - 10, emax)(rng);
      return (rng() & 1 ? -1.f : 1.f) * std::ldexp(m, e);
    };
    std::vector<float> wf(size_t(K) * kP), x(size_t(K) * nc);
    for (float& f : wf) f = value();
    for (float& f : x) f = value();
    const size_t rs = RowSize(type, K);
    std::vector<uint8_t> w(rs * kP);
    for (size_t i = 0; i < wf.size(); ++i) {
      if (type == GgmlType::F32) {
        std::memcpy(&w[4 * i], &wf[i], 4);
      } else {
        const uint16_t h = type == GgmlType::F16 ? FloatToHalf(wf[i]) : FloatToBf16(wf[i]);
        std::memcpy(&w[2 * i], &h, 2);
      }
    }
    const GemmKernels* ref = GetGemmKernelsFloat(type, kLayoutPlain, IsaLevel::kScalar);
    const size_t ars = ref->act_row_bytes(K);
    Buf act(ars * nc), panel(ref->panel_bytes(K));
    for (int c = 0; c < nc; ++c) ref->from_float(&x[size_t(c) * K], act.p + c * ars, K);
    ref->pack(K, w.data(), rs, kP, kLayoutPlain, panel.p);
    std::vector<float> want(size_t(nc) * kP);
    ref->kernel(K, panel.p, act.p, ars, nc, want.data(), kP, kP);
    int special = 0;
    for (float v : want) special += !std::isnormal(v);
    for (IsaLevel l : levels) {
      const GemmKernels* g = GetGemmKernelsFloat(type, kLayoutPlain, l);
      std::vector<float> got(want.size());
      g->kernel(K, panel.p, act.p, ars, nc, got.data(), kP, kP);
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << GgmlTypeName(type) << " level " << int(l) << " i=" << i;
        } else {
          ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
              << GgmlTypeName(type) << " level " << int(l) << " i=" << i << ": " << got[i] << " vs "
              << want[i];
        }
      }
    }
    std::printf("%s: %d of %zu results inf/NaN/subnormal/zero\n", GgmlTypeName(type), special, want.size());
  }
}

// dst of MUL_MAT in double from the weights and the activations rounded like the family's
// from_float; also sum |w * a| per element for the bound.
void RefMulMat(const kt::Tensor& a, const kt::Tensor& b, std::vector<double>& out,
               std::vector<double>& abs_out) {
  const int64_t K = a.v.ne[0], N = a.v.ne[1], M = b.v.ne[1], ne12 = b.v.ne[2];
  out.assign(size_t(N * M * ne12), 0.0);
  abs_out.assign(out.size(), 0.0);
  for (int64_t i2 = 0; i2 < ne12; ++i2)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, sa = 0;
        for (int64_t k = 0; k < K; ++k) {
          float y;
          std::memcpy(
              &y, static_cast<const uint8_t*>(b.v.data) + k * b.v.nb[0] + m * b.v.nb[1] + i2 * b.v.nb[2], 4);
          const uint8_t* wrow =
              static_cast<const uint8_t*>(a.v.data) + n * a.v.nb[1] + (i2 / (ne12 / a.v.ne[2])) * a.v.nb[2];
          const double w = WeightAt(a.v.type, wrow, k);
          const double ya = a.v.type == GgmlType::F16    ? HalfToFloat(FloatToHalf(y))
                            : a.v.type == GgmlType::BF16 ? Bf16ToFloat(FloatToBf16(y))
                                                         : y;
          s += w * ya;
          sa += std::fabs(w * ya);
        }
        out[size_t((i2 * M + m) * N + n)] = s;
        abs_out[size_t((i2 * M + m) * N + n)] = sa;
      }
}

// (K is never a multiple of 8 here: F32/F16 products with K % 8 == 0 and >= 2 columns take
// llamafile's tinyBLAS order at the SIMD levels instead, as llama.cpp — batch_invariance_test.)
TEST(GemmFloat, MulMatUsesTheFamilyAtEveryLevel) {
  std::vector<IsaLevel> levels = SimdLevels();
  levels.insert(levels.begin(), IsaLevel::kScalar);
  struct Shape {
    int64_t K, N, M;
    int src1;  // 0 contiguous, 1 permuted rows (ggml_permute 0 2 1 3), 2 element stride 8 bytes
  };
  for (GgmlType type : kTypes) {
    for (const Shape& sh :
         {Shape{67, 37, 21, 0}, Shape{300, 16, 130, 0}, Shape{33, 20, 9, 1}, Shape{52, 18, 11, 2}}) {
      const int64_t H = 4;
      kt::Tensor a(type, sh.K, sh.N, 2, 1), d(GgmlType::F32, sh.N, sh.M, H, 1);
      const std::vector<uint8_t> w = WeightRows(type, sh.K, int(sh.N * 2), uint32_t(sh.K + sh.N));
      std::memcpy(a.buf.data(), w.data(), RowSize(type, sh.K) * size_t(sh.N) * 2);
      // src1: [K, M, H]; permuted: stored [K, H, M]; strided: every element 8 bytes apart.
      const int64_t stride_el = sh.src1 == 2 ? 2 : 1;
      kt::Tensor b(GgmlType::F32, sh.K * stride_el, sh.M, H, 1);
      const std::vector<float> x = Uniform(size_t(sh.K * stride_el * sh.M * H), uint32_t(sh.M), -2.f, 2.f);
      std::memcpy(b.buf.data(), x.data(), x.size() * 4);
      b.v.ne[0] = sh.K;
      b.v.nb[0] = 4 * size_t(stride_el);
      if (sh.src1 == 1) {  // the same bytes viewed with M and H swapped
        b.v.nb[1] = size_t(sh.K) * 4 * size_t(H);
        b.v.nb[2] = size_t(sh.K) * 4;
      }
      std::vector<double> ref, abs_ref;
      RefMulMat(a, b, ref, abs_ref);
      std::vector<float> first;
      for (IsaLevel l : levels) {
        ComputeContext ctx;
        ctx.n_threads = 2;
        ctx.max_isa = l;
        ASSERT_TRUE(MulMat(ctx, a.v, b.v, d.v).ok());
        const float* got = d.f32();
        for (size_t i = 0; i < ref.size(); ++i) {
          const double tol = double(sh.K + 1) * std::ldexp(1.0, -24) * abs_ref[i];
          ASSERT_LE(std::fabs(got[i] - ref[i]), tol)
              << GgmlTypeName(type) << " level " << int(l) << " K=" << sh.K << " N=" << sh.N << " M=" << sh.M
              << " i=" << i;
        }
        if (first.empty()) {
          first.assign(got, got + ref.size());
        } else {
          ASSERT_EQ(std::memcmp(first.data(), got, ref.size() * 4), 0)
              << GgmlTypeName(type) << " level " << int(l) << " differs from the scalar level";
        }
      }
    }
  }
}

#if defined(__x86_64__)
// Calibration for the benchmark: 2 * 16 * 14 flops per iteration of 14 independent register-only
// 512-bit FMAs, i.e. the FMA-bound peak on this core under the machine's current load.
__attribute__((target("avx512f"), noinline)) double PeakGflops() {
  const int64_t iters = 20000000;
  const double t0 = ThreadSeconds();
  __asm__ volatile("vxorps %%xmm15, %%xmm15, %%xmm15\n" ::: "xmm15");
  for (int64_t i = 0; i < iters; ++i) {
    __asm__ volatile(
        "vfmadd231ps %%zmm15, %%zmm15, %%zmm0\n vfmadd231ps %%zmm15, %%zmm15, %%zmm1\n"
        "vfmadd231ps %%zmm15, %%zmm15, %%zmm2\n vfmadd231ps %%zmm15, %%zmm15, %%zmm3\n"
        "vfmadd231ps %%zmm15, %%zmm15, %%zmm4\n vfmadd231ps %%zmm15, %%zmm15, %%zmm5\n"
        "vfmadd231ps %%zmm15, %%zmm15, %%zmm6\n vfmadd231ps %%zmm15, %%zmm15, %%zmm7\n"
        "vfmadd231ps %%zmm15, %%zmm15, %%zmm8\n vfmadd231ps %%zmm15, %%zmm15, %%zmm9\n"
        "vfmadd231ps %%zmm15, %%zmm15, %%zmm10\n vfmadd231ps %%zmm15, %%zmm15, %%zmm11\n"
        "vfmadd231ps %%zmm15, %%zmm15, %%zmm12\n vfmadd231ps %%zmm15, %%zmm15, %%zmm13\n" ::
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
              "xmm11", "xmm12", "xmm13");
  }
  const double t = ThreadSeconds() - t0;
  return 2.0 * 16 * 14 * double(iters) / t * 1e-9;
}
#endif

// Single-thread throughput of pack + kernel for an N x K weight matrix times M columns (the
// 0.85B bench model's shapes; env GEMM_K, GEMM_M, GEMM_GROUP panels per group, GEMM_CHUNK columns per
// chunk, GEMM_SCALAR=1 adds the scalar level), as 2*N*M*K / thread CPU time. Prints; asserts nothing about
// time.
TEST(GemmFloat, DISABLED_Bench) {
  const int64_t K = std::getenv("GEMM_K") ? std::atoll(std::getenv("GEMM_K")) : 2048;
  const int64_t N = 512, M = std::getenv("GEMM_M") ? std::atoll(std::getenv("GEMM_M")) : 512;
  const int kGroup = std::getenv("GEMM_GROUP") ? std::atoi(std::getenv("GEMM_GROUP")) : 4;
  const int64_t kChunk = std::getenv("GEMM_CHUNK") ? std::atoll(std::getenv("GEMM_CHUNK")) : 64;
  std::vector<IsaLevel> levels = SimdLevels();
  if (std::getenv("GEMM_SCALAR")) levels.insert(levels.begin(), IsaLevel::kScalar);
#if defined(__x86_64__)
  if (DetectIsa() >= IsaLevel::kAvx512) std::printf("512-bit FMA peak now: %.1f GFLOPS\n", PeakGflops());
#endif
  for (GgmlType type : kTypes) {
    for (IsaLevel l : levels) {
      const GemmKernels* g = GetGemmKernelsFloat(type, kLayoutPlain, l);
      const std::vector<uint8_t> w = WeightRows(type, K, int(N), 5);
      const size_t rs = RowSize(type, K), ars = g->act_row_bytes(K);
      const std::vector<float> x = Uniform(size_t(K) * M, 9, -1.f, 1.f);
      Buf act(ars * M), panel(g->panel_bytes(K) * kGroup);
      std::vector<float> dst(size_t(N) * M);
      for (int64_t c = 0; c < M; ++c) g->from_float(&x[size_t(c) * K], act.p + c * ars, K);
      double best = 1e30, best_pack = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        double tpack = 0;
        const double t0 = ThreadSeconds();
        // As the MUL_MAT driver: groups of kGroup panels packed once, then 64-column chunks.
        for (int64_t n0 = 0; n0 < N; n0 += kP * kGroup) {
          const double p0 = ThreadSeconds();
          for (int j = 0; j < kGroup; ++j)
            g->pack(K, w.data() + (n0 + j * kP) * rs, rs, kP, kLayoutPlain, panel.p + j * g->panel_bytes(K));
          tpack += ThreadSeconds() - p0;
          for (int64_t m0 = 0; m0 < M; m0 += kChunk)
            for (int j = 0; j < kGroup; ++j)
              g->kernel(K, panel.p + j * g->panel_bytes(K), act.p + m0 * ars, ars,
                        int(std::min(kChunk, M - m0)), dst.data() + m0 * N + n0 + j * kP, size_t(N), kP);
        }
        const double t = ThreadSeconds() - t0;
        best = std::min(best, t);
        best_pack = std::min(best_pack, tpack);
      }
      // Baseline in the same run: the vec_dot path's work (one vec_dot per dst element, 16 x 16
      // tiles) on the same matrices, at the same level.
      const TypeKernels* vd = GetTypeKernels(type, l);
      const size_t vrs = RowSize(vd->vec_dot_type, K);
      Buf y(vrs * M);
      for (int64_t c = 0; c < M; ++c) {
        if (vd->from_float)
          vd->from_float(&x[size_t(c) * K], y.p + c * vrs, K);
        else
          std::memcpy(y.p + c * vrs, &x[size_t(c) * K], size_t(K) * 4);
      }
      double best_vd = 1e30;
      for (int rep = 0; rep < 2; ++rep) {
        const double t0 = ThreadSeconds();
        for (int64_t n0 = 0; n0 < N; n0 += 16)
          for (int64_t m0 = 0; m0 < M; m0 += 16)
            for (int64_t m = m0; m < std::min(m0 + 16, M); ++m)
              for (int64_t n = n0; n < n0 + 16; ++n)
                vd->vec_dot(K, &dst[size_t(m * N + n)], w.data() + n * rs, y.p + m * vrs);
        best_vd = std::min(best_vd, ThreadSeconds() - t0);
      }
      std::printf(
          "%-5s level %d K=%lld N=%lld M=%lld: GEMM %.1f GFLOPS (pack %.1f%% of the time), vec_dot %.1f "
          "GFLOPS\n",
          GgmlTypeName(type), int(l), (long long)K, (long long)N, (long long)M, 2.0 * N * M * K / best * 1e-9,
          100.0 * best_pack / best, 2.0 * N * M * K / best_vd * 1e-9);
    }
  }
}

}  // namespace
}  // namespace stowage::cpu
