// Token-generation attention products on an F16 KV cache (matmul.cpp MulMatF16Heads, kernels.h
// GemvF16Heads): KQ (K view [D, n_kv, Hkv] x permuted q [D, 1, H]) and KQV (transposed V view
// [n_kv, D, Hkv] x softmax [n_kv, 1, H]) through MulMat at every ISA level, 1 and 2 threads, against
// a double-precision reference; the levels against each other; the kernels directly on odd shapes.
//
// Error bound used throughout: |got - exact| <= K * 2^-22 * sum_k |w_k * a_k|, where a is src1
// rounded to F16 (what every level multiplies with: ggml's vec_dot_type for F16 is F16) and exact
// is the double sum of the products. Why it holds: a product of two F16 values (11-bit
// significands) has at most 22 significant bits, so it is exact in F32 (and in an FMA); only the
// K - 1 additions round. Summed in F32 in any order (lanes, accumulators, transpose tree, or the
// scalar / VecDotF16 orders, whose double parts only help), the error is at most
// gamma_{K-1} * sum|w a| with gamma_n = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability
// of Numerical Algorithms, eq. 4.4 for any summation order), plus the final rounding to float, u *
// |sum|: together below K * 2^-23 * sum|w a| for K < 2^20. The bound K * 2^-22 * sum|w a| is twice
// that, so two levels, each within K * 2^-23 of exact, also agree with each other within it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {

double Bound(int64_t K, double sum_abs) { return double(K) * std::ldexp(1.0, -22) * sum_abs; }

// F16 value of element i of a raw fp16 buffer.
double F16At(const std::vector<uint16_t>& v, size_t i) { return Fp16ToFp32(v[i]); }

// One attention layer's caches and query at one token, with the views the llama graph makes.
struct Attn {
  int64_t D, n_kv, Hkv, H, n_ctx;
  std::vector<uint16_t> kc, vc;  // K cache [D*Hkv, n_ctx] (row per cell), V cache [n_ctx, D*Hkv] (transposed)
  kt::Tensor q;                  // [D, H, 1] as the Q projection leaves it (permuted for KQ)
  kt::Tensor p;                  // [n_kv, 1, H] softmax-like weights (src1 of KQV)

  Attn(int64_t d, int64_t nkv, int64_t hkv, int64_t r2, uint32_t seed, int64_t ctx = 0)
      : D(d),
        n_kv(nkv),
        Hkv(hkv),
        H(hkv * r2),
        n_ctx(ctx > 0 ? ctx : nkv + 7),
        q(GgmlType::F32, d, hkv * r2, 1),
        p(GgmlType::F32, nkv, 1, hkv * r2) {
    std::vector<float> f(size_t(D * Hkv * n_ctx));
    kt::FillUniform(f, seed, -2.f, 2.f);
    kc.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) kc[i] = Fp32ToFp16(f[i]);
    kt::FillUniform(f, seed + 1, -1.f, 1.f);
    vc.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) vc[i] = Fp32ToFp16(f[i]);
    kt::Fill(q, seed + 2, -3.f, 3.f);
    kt::Fill(p, seed + 3, 0.f, 1.f);
  }
  // KQ src0: [D, n_kv, Hkv], rows D*Hkv apart, heads D apart.
  TensorView KView() {
    TensorView v;
    v.type = GgmlType::F16;
    v.ne[0] = D;
    v.ne[1] = n_kv;
    v.ne[2] = Hkv;
    v.ne[3] = 1;
    v.nb[0] = 2;
    v.nb[1] = size_t(D * Hkv) * 2;
    v.nb[2] = size_t(D) * 2;
    v.nb[3] = v.nb[1] * size_t(n_ctx);
    v.data = kc.data();
    return v;
  }
  // KQ src1: q [D, H, 1] permuted to [D, 1, H].
  TensorView QView() {
    TensorView v = q.v;
    v.ne[1] = 1;
    v.ne[2] = H;
    v.nb[1] = q.v.nb[2];
    v.nb[2] = q.v.nb[1];
    return v;
  }
  // KQV src0: [n_kv, D, Hkv] of the transposed V cache, rows n_ctx apart.
  TensorView VView() {
    TensorView v;
    v.type = GgmlType::F16;
    v.ne[0] = n_kv;
    v.ne[1] = D;
    v.ne[2] = Hkv;
    v.ne[3] = 1;
    v.nb[0] = 2;
    v.nb[1] = size_t(n_ctx) * 2;
    v.nb[2] = size_t(n_ctx * D) * 2;
    v.nb[3] = v.nb[2] * size_t(Hkv);
    v.data = vc.data();
    return v;
  }
  // Exact (double) KQ element (cell c, q head h) and its sum of |products|; q rounded to F16.
  void KqRef(int64_t c, int64_t h, double* exact, double* sum_abs) const {
    const int64_t g = h / (H / Hkv);
    double s = 0, a = 0;
    for (int64_t k = 0; k < D; ++k) {
      const double w = F16At(kc, size_t(c * D * Hkv + g * D + k));
      const double x = kt::RoundF16(float(q.at(k, h, 0)));
      s += w * x;
      a += std::fabs(w * x);
    }
    *exact = s;
    *sum_abs = a;
  }
  // Exact KQV element (dim d, q head h).
  void KqvRef(int64_t d, int64_t h, double* exact, double* sum_abs) const {
    const int64_t g = h / (H / Hkv);
    double s = 0, a = 0;
    for (int64_t c = 0; c < n_kv; ++c) {
      const double w = F16At(vc, size_t((g * D + d) * n_ctx + c));
      const double x = kt::RoundF16(float(p.at(c, 0, h)));
      s += w * x;
      a += std::fabs(w * x);
    }
    *exact = s;
    *sum_abs = a;
  }
};

std::vector<IsaLevel> Levels() {
  std::vector<IsaLevel> l{IsaLevel::kScalar};
  if (DetectIsa() >= IsaLevel::kAvx2) l.push_back(IsaLevel::kAvx2);
  if (DetectIsa() >= IsaLevel::kAvx512) l.push_back(IsaLevel::kAvx512);
  if (DetectIsa() >= IsaLevel::kAvx512Vnni) l.push_back(IsaLevel::kAvx512Vnni);
  return l;
}

// Runs KQ and KQV at every level and thread count; checks each against the reference and against
// every earlier (level, threads) result (scalar = the vec_dot path, AVX2, AVX-512), element by element.
void CheckShape(int64_t D, int64_t n_kv, int64_t Hkv, int64_t r2, uint32_t seed) {
  SCOPED_TRACE("D=" + std::to_string(D) + " n_kv=" + std::to_string(n_kv) + " Hkv=" + std::to_string(Hkv) +
               " r2=" + std::to_string(r2));
  Attn a(D, n_kv, Hkv, r2, seed);
  const int64_t H = a.H;
  std::vector<double> kq_ex(size_t(n_kv * H)), kq_b(kq_ex.size()), kqv_ex(size_t(D * H)),
      kqv_b(kqv_ex.size());
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t c = 0; c < n_kv; ++c) {
      double e, s;
      a.KqRef(c, h, &e, &s);
      kq_ex[size_t(h * n_kv + c)] = e;
      kq_b[size_t(h * n_kv + c)] = Bound(D, s);
    }
    for (int64_t d = 0; d < D; ++d) {
      double e, s;
      a.KqvRef(d, h, &e, &s);
      kqv_ex[size_t(h * D + d)] = e;
      kqv_b[size_t(h * D + d)] = Bound(n_kv, s);
    }
  }
  std::vector<std::vector<float>> kq_prev, kqv_prev;  // earlier (level, threads) results
  for (IsaLevel isa : Levels()) {
    for (int nt : {1, 2}) {
      SCOPED_TRACE("isa=" + std::to_string(int(isa)) + " threads=" + std::to_string(nt));
      ComputeContext ctx;
      ctx.n_threads = nt;
      ctx.max_isa = isa;
      kt::Tensor kq(GgmlType::F32, n_kv, 1, H), kqv(GgmlType::F32, D, 1, H);
      // Canaries: MulMat must write every element (NaN stays otherwise) and nothing past the end.
      std::fill(kq.f32(), kq.f32() + n_kv * H + 16, std::nanf(""));
      std::fill(kqv.f32(), kqv.f32() + D * H + 16, std::nanf(""));
      TensorView kv = a.KView(), qv = a.QView(), vv = a.VView();
      ASSERT_TRUE(MulMat(ctx, kv, qv, kq.v).ok());
      ASSERT_TRUE(MulMat(ctx, vv, a.p.v, kqv.v).ok());
      for (int i = 0; i < 16; ++i) {
        ASSERT_TRUE(std::isnan(kq.f32()[n_kv * H + i]));
        ASSERT_TRUE(std::isnan(kqv.f32()[D * H + i]));
      }
      int bad = 0;
      // Every element within its bound of the exact value and of every earlier level's result.
      auto check = [&](const char* what, const float* got, const std::vector<double>& exact,
                       const std::vector<double>& bound, const std::vector<std::vector<float>>& earlier) {
        for (size_t i = 0; i < exact.size(); ++i) {
          if (!(std::fabs(double(got[i]) - exact[i]) <= bound[i]) && bad++ < 5)
            ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", exact " << exact[i] << ", bound "
                          << bound[i];
          for (const auto& prev : earlier)
            if (!(std::fabs(double(got[i]) - prev[i]) <= bound[i]) && bad++ < 5)
              ADD_FAILURE() << what << "[" << i << "] = " << got[i] << " vs an earlier level's " << prev[i];
        }
      };
      check("KQ", kq.f32(), kq_ex, kq_b, kq_prev);
      check("KQV", kqv.f32(), kqv_ex, kqv_b, kqv_prev);
      ASSERT_EQ(bad, 0);
      kq_prev.emplace_back(kq.f32(), kq.f32() + n_kv * H);
      kqv_prev.emplace_back(kqv.f32(), kqv.f32() + D * H);
    }
  }
}

TEST(CpuAttn, KqKqvMatchReferenceAtEveryLevel) {
  uint32_t seed = 11;
  for (int64_t D : {64, 128})
    for (int64_t n_kv : {1, 17, 33, 300})
      for (int64_t Hkv : {1, 8})
        for (int64_t r2 : {1, 4, 8}) CheckShape(D, n_kv, Hkv, r2, seed += 4);
}

// head_dim 80 and 96 (K % 16 == 0, not a power of two) and an odd GQA ratio (heads 4 + 2 + 1 in the
// kernels' head groups).
TEST(CpuAttn, OtherHeadDimsAndRatios) {
  CheckShape(80, 45, 2, 7, 901);
  CheckShape(96, 130, 3, 3, 905);
  CheckShape(48, 16, 4, 2, 909);
}

// The kernels alone: every (K, nrows, nh) mix, including K % 16 != 0 (the KQV tail), rows past a
// multiple of the pass height, head strides with a gap, and no write outside s[h * lds + i < nrows].
TEST(CpuAttn, GemvF16HeadsKernels) {
  std::vector<std::pair<const char*, GemvF16HeadsFn>> fns;
#if defined(__x86_64__) || defined(_M_X64)
  if (DetectIsa() >= IsaLevel::kAvx2) fns.push_back({"avx2", avx2::GemvF16Heads});
  if (DetectIsa() >= IsaLevel::kAvx512) fns.push_back({"avx512", avx512::GemvF16Heads});
#endif
  if (fns.empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  uint32_t seed = 3;
  for (int64_t K : {0, 1, 5, 8, 16, 17, 64, 100, 300})
    for (int64_t nrows : {0, 1, 3, 8, 15, 16, 17, 40})
      for (int64_t nh : {1, 2, 3, 4, 5, 8}) {
        const size_t ldx = size_t(K + 3) * 2, ldy = size_t(K + 5), lds = size_t(nrows + 2);
        std::vector<float> f(size_t(nrows) * (ldx / 2) + 1);
        kt::FillUniform(f, ++seed, -2.f, 2.f);
        std::vector<uint16_t> x(f.size());
        for (size_t i = 0; i < f.size(); ++i) x[i] = Fp32ToFp16(f[i]);
        std::vector<float> y(size_t(nh) * ldy + 1);
        kt::FillUniform(y, ++seed, -2.f, 2.f);
        for (float& v : y) v = kt::RoundF16(v);
        for (const auto& fn : fns) {
          SCOPED_TRACE(std::string(fn.first) + " K=" + std::to_string(K) + " nrows=" + std::to_string(nrows) +
                       " nh=" + std::to_string(nh));
          std::vector<float> s(size_t(nh) * lds + 8, -7.f);
          fn.second(K, nrows, x.data(), ldx, nh, y.data(), ldy, s.data(), lds);
          for (int64_t h = 0; h < nh; ++h)
            for (size_t i = 0; i < lds; ++i) {
              const float got = s[size_t(h) * lds + i];
              if (int64_t(i) >= nrows) {
                ASSERT_EQ(got, -7.f) << "write outside the rows at h=" << h << " i=" << i;
                continue;
              }
              double e = 0, a = 0;
              for (int64_t k = 0; k < K; ++k) {
                const double p = F16At(x, i * (ldx / 2) + size_t(k)) * double(y[size_t(h) * ldy + size_t(k)]);
                e += p;
                a += std::fabs(p);
              }
              ASSERT_LE(std::fabs(double(got) - e), Bound(K, a)) << "h=" << h << " i=" << i;
            }
          for (size_t i = size_t(nh) * lds; i < s.size(); ++i) ASSERT_EQ(s[i], -7.f);
        }
      }
}

// Broadcast over dim 3 too (ne13 = 2 x ne03 = 1), and a gathered src1 (nb0 != 4).
TEST(CpuAttn, BroadcastDim3AndGatheredSrc1) {
  const int64_t D = 64, n_kv = 37, Hkv = 2, r2 = 4, H = Hkv * r2;
  Attn a(D, n_kv, Hkv, r2, 77);
  TensorView kv = a.KView();
  // src1 [D, 1, H, 2] with elements 2 floats apart.
  std::vector<float> qbuf(size_t(D * H * 2 * 2));
  kt::FillUniform(qbuf, 78, -3.f, 3.f);
  TensorView qv;
  qv.type = GgmlType::F32;
  qv.ne[0] = D;
  qv.ne[1] = 1;
  qv.ne[2] = H;
  qv.ne[3] = 2;
  qv.nb[0] = 8;
  qv.nb[1] = size_t(D) * 8 * size_t(H);
  qv.nb[2] = size_t(D) * 8;
  qv.nb[3] = size_t(D * H) * 8;
  qv.data = qbuf.data();
  for (IsaLevel isa : Levels()) {
    for (int nt : {1, 2}) {
      ComputeContext ctx;
      ctx.n_threads = nt;
      ctx.max_isa = isa;
      kt::Tensor out(GgmlType::F32, n_kv, 1, H, 2);
      ASSERT_TRUE(MulMat(ctx, kv, qv, out.v).ok());
      for (int64_t i3 = 0; i3 < 2; ++i3)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t c = 0; c < n_kv; ++c) {
            double e = 0, s = 0;
            for (int64_t k = 0; k < D; ++k) {
              const double w = F16At(a.kc, size_t(c * D * Hkv + (h / r2) * D + k));
              const double x = kt::RoundF16(qbuf[size_t(((i3 * H + h) * D + k) * 2)]);
              e += w * x;
              s += std::fabs(w * x);
            }
            ASSERT_LE(std::fabs(out.at(c, 0, h, i3) - e), Bound(D, s))
                << "isa " << int(isa) << " nt " << nt << " i3 " << i3 << " h " << h << " c " << c;
          }
    }
  }
}

// Timing (not a check): KQ and KQV of one layer (D 64, 8 kv heads, r2 4, n_ctx 4096) per level, 1
// thread, wall time per call, best of 7 repetitions of 20 calls. "cold": before every call 64 MiB are
// streamed through the caches (outside the timing), as the weights do between two layers' attention.
TEST(CpuAttn, DISABLED_Bench) {
  std::vector<uint8_t> flush(size_t(64) << 20, 1);
  for (bool cold : {false, true})
    for (int64_t n_kv : {256, 2000}) {
      Attn a(64, n_kv, 8, 4, 5, 4096);
      TensorView kv = a.KView(), qv = a.QView(), vv = a.VView();
      for (IsaLevel isa : Levels()) {
        if (isa == IsaLevel::kScalar) continue;
        ComputeContext ctx;
        ctx.max_isa = isa;
        kt::Tensor kq(GgmlType::F32, n_kv, 1, a.H), kqv(GgmlType::F32, 64, 1, a.H);
        double best_kq = 1e30, best_kqv = 1e30;
        unsigned sink = 0;
        for (int rep = 0; rep < 7; ++rep) {
          double t_kq = 0, t_kqv = 0;
          for (int i = 0; i < 20; ++i) {
            if (cold)
              for (size_t j = 0; j < flush.size(); j += 64) sink += flush[j]++;
            auto t0 = std::chrono::steady_clock::now();
            ASSERT_TRUE(MulMat(ctx, kv, qv, kq.v).ok());
            auto t1 = std::chrono::steady_clock::now();
            if (cold)
              for (size_t j = 0; j < flush.size(); j += 64) sink += flush[j]++;
            auto t2 = std::chrono::steady_clock::now();
            ASSERT_TRUE(MulMat(ctx, vv, a.p.v, kqv.v).ok());
            auto t3 = std::chrono::steady_clock::now();
            t_kq += std::chrono::duration<double, std::micro>(t1 - t0).count();
            t_kqv += std::chrono::duration<double, std::micro>(t3 - t2).count();
          }
          best_kq = std::min(best_kq, t_kq / 20);
          best_kqv = std::min(best_kqv, t_kqv / 20);
        }
        std::printf("%s n_kv %5lld isa %d: KQ %8.1f us  KQV %8.1f us (%u)\n", cold ? "cold" : "warm",
                    (long long)n_kv, int(isa), best_kq, best_kqv, sink & 1);
      }
    }
}

}  // namespace
}  // namespace stowage::cpu
