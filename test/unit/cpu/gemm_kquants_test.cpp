// GEMM family "kquants" (gemm.h, gemm_kquants*.cpp): Q2_K..Q6_K and IQ4_XS panels x Q8_K activations.
//  - from_float stores exactly QuantizeRowQ8_K's integers and scale (the vec_dot path's activations);
//  - the scalar GEMM equals the vec_dot of the same row and column up to float accumulation order;
//  - every SIMD level equals the scalar GEMM up to float accumulation order;
// on random blocks (all scale/min bit patterns), nr 1..16, nc 1..40 and several K.
// Tolerance: both sides compute the same exact integer sums per super-block (isum, summ); each
// super-block term d_x d_y isum - dmin_x d_y summ is formed with <= 4 roundings and nb terms are
// summed, so each side is within (nb + 4) u S of the exact value, S = sum over super-blocks of
// |d_x d_y isum| + |dmin_x d_y summ| (u = 2^-24), computed here independently in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <string>

#include "cpu/test_util.h"
#include "gemm.h"
#include "kernels.h"

namespace stowage::cpu {
namespace {

constexpr double kEps = 1.0 / (1 << 23);  // 2u

struct AlignedBuf {
  std::unique_ptr<uint8_t, void (*)(void*)> p{nullptr, std::free};
  explicit AlignedBuf(size_t n)
      : p(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64)), std::free) {
    std::memset(p.get(), 0xCD, (n + 63) / 64 * 64 + 64);
  }
  uint8_t* get() const { return p.get(); }
};

// One super-block of a K-quant weight row in integer form: value_k = d * s[k] * (q[k] + off) -
// dmin * m[k] (ggml's dequantize_row_q4_K / q5_K / q6_K).
struct IntBlock {
  int q[kQK_K], s[kQK_K], m[kQK_K];
  int off = 0;
  double d = 0, dmin = 0;
};

IntBlock Unpack(GgmlType type, const uint8_t* blk) {
  IntBlock r;
  if (type == GgmlType::Q4_K || type == GgmlType::Q5_K) {
    const uint8_t* scales = type == GgmlType::Q4_K ? reinterpret_cast<const BlockQ4_K*>(blk)->scales
                                                   : reinterpret_cast<const BlockQ5_K*>(blk)->scales;
    fp16_t d, dmin;
    std::memcpy(&d, blk, 2);
    std::memcpy(&dmin, blk + 2, 2);
    r.d = HalfToFloat(d);
    r.dmin = HalfToFloat(dmin);
    const uint8_t* qs = type == GgmlType::Q4_K ? reinterpret_cast<const BlockQ4_K*>(blk)->qs
                                               : reinterpret_cast<const BlockQ5_K*>(blk)->qs;
    for (int k = 0; k < kQK_K; ++k) {
      const int j = k / 32;  // sub-block; element l of sub-block j is nibble (j & 1) of qs[32 (j/2) + l]
      const int byte = qs[32 * (j / 2) + k % 32];
      r.q[k] = (j & 1) ? byte >> 4 : byte & 0xF;
      if (type == GgmlType::Q5_K) {
        const uint8_t* qh = reinterpret_cast<const BlockQ5_K*>(blk)->qh;
        r.q[k] += ((qh[k % 32] >> j) & 1) * 16;
      }
      uint8_t sc, mn;
      GetScaleMinK4(j, scales, &sc, &mn);
      r.s[k] = sc;
      r.m[k] = mn;
    }
  } else if (type == GgmlType::Q2_K) {  // value = d * (sc & 15) * q - dmin * (sc >> 4) per 16
    const BlockQ2_K* b = reinterpret_cast<const BlockQ2_K*>(blk);
    r.d = HalfToFloat(b->d);
    r.dmin = HalfToFloat(b->dmin);
    for (int k = 0; k < kQK_K; ++k) {
      const int h = k / 128, j = (k % 128) / 32, l = k % 32;
      r.q[k] = (b->qs[32 * h + l] >> (2 * j)) & 3;
      r.s[k] = b->scales[k / 16] & 0xF;
      r.m[k] = b->scales[k / 16] >> 4;
    }
  } else if (type == GgmlType::IQ4_XS) {  // value = d * (ls - 32) * kvalues_iq4nl[nibble]
    const BlockIQ4_XS* b = reinterpret_cast<const BlockIQ4_XS*>(blk);
    r.d = HalfToFloat(b->d);
    r.off = -128;
    for (int k = 0; k < kQK_K; ++k) {
      const int ib = k / 32, j = k % 32;
      const int byte = b->qs[16 * ib + j % 16];
      r.q[k] = kValuesIQ4NL[j < 16 ? byte & 0xF : byte >> 4] + 128;
      r.s[k] = IQ4XSScale(*b, ib);
      r.m[k] = 0;
    }
  } else if (type == GgmlType::Q3_K) {  // value = d * sc_g * (2 low bits - 4 * !hmask bit)
    const BlockQ3_K* b = reinterpret_cast<const BlockQ3_K*>(blk);
    int8_t sc[16];
    UnpackQ3KScales(b->scales, sc);
    r.d = HalfToFloat(b->d);
    r.off = -4;
    for (int k = 0; k < kQK_K; ++k) {
      const int h = k / 128, j = (k % 128) / 32, l = k % 32;
      r.q[k] = ((b->qs[32 * h + l] >> (2 * j)) & 3) + 4 * ((b->hmask[l] >> (4 * h + j)) & 1);
      r.s[k] = sc[k / 16];
      r.m[k] = 0;
    }
  } else {  // Q6_K: element 128 h + 32 i + l: low nibble of ql[64 h + 32 (i & 1) + l] (>> 4 when i >= 2),
            // high bits (qh[32 h + l] >> 2 i) & 3
    const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(blk);
    r.d = HalfToFloat(b->d);
    r.off = -32;
    for (int k = 0; k < kQK_K; ++k) {
      const int h = k / 128, i = (k % 128) / 32, l = k % 32;
      const int ql = b->ql[64 * h + 32 * (i & 1) + l];
      const int lo = i >= 2 ? ql >> 4 : ql & 0xF;
      r.q[k] = lo | (((b->qh[32 * h + l] >> (2 * i)) & 3) << 4);
      r.s[k] = b->scales[k / 16];
      r.m[k] = 0;
    }
  }
  return r;
}

size_t BlockBytes(GgmlType t) { return GetTypeTraits(t).type_size; }

// Exact dot (as double) and its error scale S of weight row x and activation row y. `group_scale`
// (optional): the error scale of a dot that sums every group's term in float (ggml's IQ4_XS dot,
// 8 terms per super-block): sum over groups of |d_x d_y sc_g dot_g|.
void ExactDot(GgmlType type, const uint8_t* x, const BlockQ8_K* y, int64_t K, double* exact, double* scale,
              double* group_scale = nullptr) {
  double e = 0, s = 0, gs = 0;
  for (int64_t b = 0; b < K / kQK_K; ++b) {
    const IntBlock w = Unpack(type, x + size_t(b) * BlockBytes(type));
    int64_t isum = 0, summ = 0, gsum = 0;
    for (int k = 0; k < kQK_K; ++k) {
      isum += int64_t(w.s[k]) * (w.q[k] + w.off) * y[b].qs[k];
      summ += int64_t(w.m[k]) * y[b].qs[k];
      gsum += int64_t(w.s[k]) * (w.q[k] + w.off) * y[b].qs[k];
      if (k % 32 == 31) {
        gs += std::fabs(w.d * y[b].d * double(gsum));
        gsum = 0;
      }
    }
    const double t1 = w.d * y[b].d * double(isum), t2 = w.dmin * y[b].d * double(summ);
    e += t1 - t2;
    s += std::fabs(t1) + std::fabs(t2);
  }
  *exact = e;
  *scale = s;
  if (group_scale) *group_scale = gs;
}

VecDotFn ScalarVecDot(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K:
      return scalar::VecDotQ4_KQ8_K;
    case GgmlType::Q5_K:
      return scalar::VecDotQ5_KQ8_K;
    case GgmlType::Q3_K:
      return scalar::VecDotQ3_KQ8_K;
    case GgmlType::Q2_K:
      return scalar::VecDotQ2_KQ8_K;
    case GgmlType::IQ4_XS:
      return scalar::VecDotIQ4_XSQ8_K;
    default:
      return scalar::VecDotQ6_KQ8_K;
  }
}

// Random weights (nrows rows of K) and activations (ncols rows of K floats).
struct Problem {
  GgmlType type;
  int64_t K;
  int nrows, ncols;
  std::vector<uint8_t> w;    // nrows * RowSize
  std::vector<float> x;      // ncols * K
  std::vector<BlockQ8_K> y;  // ncols * K/256: QuantizeRowQ8_K of x
  size_t row_size;
  Problem(GgmlType t, int64_t k, int nr, int nc, uint32_t seed) : type(t), K(k), nrows(nr), ncols(nc) {
    row_size = RowSize(t, K);
    w = kt::RandomBlocks(t, K * nr, seed);
    x.resize(size_t(K) * nc);
    kt::FillUniform(x, seed + 1, -2.f, 2.f);
    y.resize(size_t(K / kQK_K) * nc);
    for (int c = 0; c < nc; ++c) QuantizeRowQ8_K(&x[size_t(c) * K], &y[size_t(c) * (K / kQK_K)], K);
  }
};

// Runs one GemmKernels over the whole problem: rows in panels of 16 (last may be short), all
// columns in one kernel call per panel; returns dst [ncols][dst_stride].
std::vector<float> RunGemm(const GemmKernels& g, const Problem& p, size_t dst_stride) {
  const size_t act_bytes = g.act_row_bytes(p.K);
  EXPECT_EQ(act_bytes % 64, 0u);
  AlignedBuf act(act_bytes * size_t(p.ncols));
  for (int c = 0; c < p.ncols; ++c)
    g.from_float(&p.x[size_t(c) * p.K], act.get() + size_t(c) * act_bytes, p.K);
  AlignedBuf panel(g.panel_bytes(p.K));
  std::vector<float> dst(size_t(p.ncols) * dst_stride, -12345.f);
  for (int r0 = 0; r0 < p.nrows; r0 += kGemmPanelRows) {
    const int nr = std::min(kGemmPanelRows, p.nrows - r0);
    g.pack(p.K, p.w.data() + size_t(r0) * p.row_size, p.row_size, nr, kLayoutPlain, panel.get());
    g.kernel(p.K, panel.get(), act.get(), act_bytes, p.ncols, dst.data() + r0, dst_stride, nr);
  }
  return dst;
}

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};

TEST(GemmKQuants, LookupLevels) {
  for (GgmlType t : kTypes) {
    EXPECT_NE(GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kScalar), nullptr) << GgmlTypeName(t);
    EXPECT_EQ(GetGemmKernelsKQuants(t, kLayoutQ4_0x8, IsaLevel::kScalar), nullptr);
    // The Q4_Kx8 layout (RepackQ4_K) is read by the Q4_K kernels only, at every level.
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni})
      EXPECT_EQ(GetGemmKernelsKQuants(t, kLayoutQ4_Kx8, isa),
                t == GgmlType::Q4_K ? GetGemmKernelsKQuants(t, kLayoutPlain, isa) : nullptr)
          << GgmlTypeName(t);
    // AVX2: every type but IQ4_XS (its vpmaddubsw products could saturate).
    const GemmKernels* k2 = GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kAvx2);
    EXPECT_EQ(k2 != nullptr, t != GgmlType::IQ4_XS) << GgmlTypeName(t);
    // AVX-512 without VNNI: the AVX2 kernels; with VNNI (where the CPU has it) every type.
    EXPECT_EQ(GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kAvx512), k2) << GgmlTypeName(t);
    const bool vnni = DetectIsa() >= IsaLevel::kAvx512Vnni;
    const GemmKernels* k5 = GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kAvx512Vnni);
    EXPECT_EQ(k5 != nullptr, vnni || t != GgmlType::IQ4_XS);
    if (!vnni) EXPECT_EQ(k5, k2);
  }
  EXPECT_EQ(GetGemmKernelsKQuants(GgmlType::Q4_0, kLayoutPlain, IsaLevel::kScalar), nullptr);
  EXPECT_EQ(GetGemmKernelsKQuants(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kScalar), nullptr);
}

// from_float of every level stores QuantizeRowQ8_K's bytes (random blocks, an all-zero block,
// exact .5 ties, +amax before -amax, a block whose largest magnitude is negative, a block whose
// 127 / max overflows, non-finite blocks).
TEST(GemmKQuants, FromFloatEqualsQuantizeRowQ8_K) {
  const int64_t K = 2048;
  std::vector<float> x(K);
  kt::FillUniform(x, 7, -3.f, 3.f);
  for (int i = 0; i < 256; ++i) x[256 + i] = 0;                            // block 1: all zero (d = 0)
  for (int i = 0; i < 256; ++i) x[512 + i] = float(i % 200) - 99.5f;       // block 2: ties; max -99.5
  x[512 + 40] = -127.f;                                                    // iscale = 1: q = round(x)
  for (int i = 0; i < 256; ++i) x[768 + i] = 0.25f * float(i % 9) - 1.0f;  // block 3: +1 at 8, -1 first
  x[768 + 3] = 2.f;
  x[768 + 9] = -2.f;      // same magnitude after: the first (+2) sets the sign
  x[1024 + 255] = -50.f;  // block 4: largest magnitude last and negative
  // block 5: |max| < 127 / FLT_MAX, so iscale = -inf: qs = bsums = 0, d = -0 (as ggml's nearest_int)
  for (int i = 0; i < 256; ++i) x[1280 + i] *= 1e-38f;
  x[1280 + 17] = 0.f;  // x * iscale = NaN there
  // Non-finite blocks (d = NaN, qs = bsums = 0): block 6 a NaN in the middle, block 7 a -inf last.
  x[1536 + 130] = std::numeric_limits<float>::quiet_NaN();
  x[1792 + 255] = -std::numeric_limits<float>::infinity();
  std::vector<BlockQ8_K> ref(K / kQK_K);
  QuantizeRowQ8_K(x.data(), ref.data(), K);
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    const GemmKernels* g = GetGemmKernelsKQuants(GgmlType::Q4_K, kLayoutPlain, isa);
    if (!g || isa > DetectIsa()) continue;
    for (GgmlType t : kTypes)  // one activation format for the family
      if (const GemmKernels* k = GetGemmKernelsKQuants(t, kLayoutPlain, isa))
        EXPECT_EQ(k->from_float, g->from_float);
    AlignedBuf act(g->act_row_bytes(K));
    g->from_float(x.data(), act.get(), K);
    for (int64_t b = 0; b < K / kQK_K; ++b) {
      const uint8_t* a = act.get() + size_t(b) * 320;
      EXPECT_EQ(std::memcmp(a, ref[b].qs, 256), 0) << "isa " << int(isa) << " block " << b;
      EXPECT_EQ(std::memcmp(a + 256, ref[b].bsums, 32), 0) << "isa " << int(isa) << " block " << b;
      float d;
      std::memcpy(&d, a + 304, 4);
      if (b >= 6)
        EXPECT_TRUE(std::isnan(d) && std::isnan(ref[b].d)) << "isa " << int(isa) << " block " << b;
      else
        EXPECT_EQ(std::memcmp(&d, &ref[b].d, 4), 0) << "isa " << int(isa) << " block " << b << ": " << d;
      for (int j = 0; j < 8; ++j) {
        int16_t s32;
        std::memcpy(&s32, a + 288 + 2 * j, 2);
        EXPECT_EQ(s32, ref[b].bsums[2 * j] + ref[b].bsums[2 * j + 1]);
      }
    }
  }
}

// Scalar GEMM vs the scalar vec_dot (and both vs the exact value).
TEST(GemmKQuants, ScalarGemmMatchesVecDot) {
  uint32_t seed = 100;
  for (GgmlType t : kTypes) {
    const GemmKernels* g = GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kScalar);
    ASSERT_NE(g, nullptr);
    for (int64_t K : {256, 768, 2048}) {
      for (int nrows : {1, 7, 16, 19, 33}) {
        const int ncols = 1 + int(seed % 40);
        Problem p(t, K, nrows, ncols, seed++);
        const size_t ds = size_t(nrows) + 3;
        const std::vector<float> dst = RunGemm(*g, p, ds);
        const int64_t nb = K / kQK_K;
        for (int c = 0; c < ncols; ++c) {
          for (int r = 0; r < nrows; ++r) {
            float vd;
            ScalarVecDot(t)(K, &vd, p.w.data() + size_t(r) * p.row_size, &p.y[size_t(c) * nb]);
            double exact, S, Sg;
            ExactDot(t, p.w.data() + size_t(r) * p.row_size, &p.y[size_t(c) * nb], K, &exact, &S, &Sg);
            const double tol = double(nb + 4) * kEps * S;
            // ggml's IQ4_XS dot adds each group's float term: 8 nb terms, scale Sg.
            const double tol_vd = t == GgmlType::IQ4_XS ? double(8 * nb + 4) * kEps * Sg : tol;
            const float got = dst[size_t(c) * ds + r];
            ASSERT_NEAR(got, exact, tol / 2) << GgmlTypeName(t) << " K " << K << " r " << r << " c " << c;
            ASSERT_NEAR(vd, exact, tol_vd / 2) << "vec_dot " << GgmlTypeName(t) << " K " << K;
            ASSERT_NEAR(got, vd, (tol + tol_vd) / 2)
                << GgmlTypeName(t) << " K " << K << " r " << r << " c " << c;
          }
          for (size_t r = size_t(nrows); r < ds; ++r)
            ASSERT_EQ(dst[size_t(c) * ds + r], -12345.f) << "wrote past nr";
        }
      }
    }
  }
}

// Every SIMD level vs the scalar GEMM: nr 1..16, nc 1..40.
TEST(GemmKQuants, SimdMatchesScalar) {
  uint32_t seed = 500;
  for (IsaLevel isa : {IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni})
    for (GgmlType t : kTypes) {
      if (DetectIsa() < isa) continue;
      const GemmKernels* gs = GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kScalar);
      const GemmKernels* g5 = GetGemmKernelsKQuants(t, kLayoutPlain, isa);
      if (!g5) continue;  // (checked by LookupLevels)
      SCOPED_TRACE("isa " + std::to_string(int(isa)));
      for (int64_t K : {256, 1280}) {
        for (int nr = 1; nr <= 16; ++nr) {
          for (int nc : {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 40}) {
            if ((nr + nc) % 3 != 0 && nr != 16 && nr != 1) continue;  // a spread of the grid, every nr and nc
            Problem p(t, K, nr, nc, seed++);
            const size_t ds = 21;
            const std::vector<float> ref = RunGemm(*gs, p, ds);
            const std::vector<float> got = RunGemm(*g5, p, ds);
            const int64_t nb = K / kQK_K;
            for (int c = 0; c < nc; ++c) {
              for (int r = 0; r < nr; ++r) {
                double exact, S;
                ExactDot(t, p.w.data() + size_t(r) * p.row_size, &p.y[size_t(c) * nb], K, &exact, &S);
                const double tol = double(nb + 4) * kEps * S;
                ASSERT_NEAR(got[size_t(c) * ds + r], ref[size_t(c) * ds + r], tol)
                    << GgmlTypeName(t) << " K " << K << " nr " << nr << " nc " << nc << " r " << r << " c "
                    << c;
              }
              for (size_t r = size_t(nr); r < ds; ++r)
                ASSERT_EQ(got[size_t(c) * ds + r], -12345.f) << "wrote past nr";
            }
          }
        }
      }
    }
}

// Worst case for the int16 sums of the AVX2 kernels and the int32 sums: every weight at its largest
// unsigned value (all quant bits set), every activation at +-127; SIMD levels equal the scalar GEMM.
TEST(GemmKQuants, ExtremeValuesMatchScalar) {
  const int64_t K = 512;
  for (GgmlType t : kTypes) {
    Problem p(t, K, 16, 2, 4242);
    const size_t bs = BlockBytes(t);
    for (size_t o = 0; o < p.w.size(); o += bs) {  // quant bytes all ones; scales/d keep random values
      uint8_t* b = p.w.data() + o;
      switch (t) {
        case GgmlType::Q2_K:
          std::memset(b + 16, 0xFF, 64);
          break;
        case GgmlType::Q3_K:
          std::memset(b, 0xFF, 96);
          break;
        case GgmlType::Q4_K:
          std::memset(b + 16, 0xFF, 128);
          break;
        case GgmlType::Q5_K:
          std::memset(b + 16, 0xFF, 160);
          break;
        case GgmlType::Q6_K:
          std::memset(b, 0xFF, 192);
          break;
        default:
          std::memset(b + 8, 0xFF, 128);
          break;  // IQ4_XS: nibble 15 = 113 (+128: 241)
      }
    }
    for (int64_t k = 0; k < K; ++k) {
      p.x[size_t(k)] = 1.f;                       // column 0: all -127 after quantization
      p.x[size_t(K + k)] = (k % 2) ? 1.f : -1.f;  // column 1: -127 / +127 alternating
    }
    for (int c = 0; c < 2; ++c) QuantizeRowQ8_K(&p.x[size_t(c) * K], &p.y[size_t(c) * (K / kQK_K)], K);
    const std::vector<float> ref = RunGemm(*GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kScalar), p, 16);
    for (IsaLevel isa : {IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
      const GemmKernels* g = GetGemmKernelsKQuants(t, kLayoutPlain, isa);
      if (!g || isa > DetectIsa()) continue;
      const std::vector<float> got = RunGemm(*g, p, 16);
      for (int c = 0; c < 2; ++c)
        for (int r = 0; r < 16; ++r) {
          double exact, S;
          ExactDot(t, p.w.data() + size_t(r) * p.row_size, &p.y[size_t(c) * (K / kQK_K)], K, &exact, &S);
          ASSERT_NEAR(got[size_t(c) * 16 + r], ref[size_t(c) * 16 + r], double(K / kQK_K + 4) * kEps * S)
              << GgmlTypeName(t) << " isa " << int(isa) << " r " << r << " c " << c;
          ASSERT_NEAR(got[size_t(c) * 16 + r], exact, double(K / kQK_K + 4) * kEps * S / 2);
        }
    }
  }
}

// Every level's pack writes the scalar pack's bytes (the kernels of all levels read one layout).
TEST(GemmKQuants, SimdPackEqualsScalarPack) {
  uint32_t seed = 900;
  for (IsaLevel isa : {IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni})
    for (GgmlType t : kTypes) {
      const GemmKernels* gs = GetGemmKernelsKQuants(t, kLayoutPlain, IsaLevel::kScalar);
      const GemmKernels* g5 = GetGemmKernelsKQuants(t, kLayoutPlain, isa);
      if (!g5 || DetectIsa() < isa) continue;
      ASSERT_EQ(gs->panel_bytes(768), g5->panel_bytes(768));
      for (int nr = 1; nr <= 16; ++nr) {
        const int64_t K = 768;
        Problem p(t, K, nr, 1, seed++);
        AlignedBuf a(gs->panel_bytes(K)), b(g5->panel_bytes(K));
        std::memset(b.get(), 0x5A, g5->panel_bytes(K));  // padding rows must be written too
        gs->pack(K, p.w.data(), p.row_size, nr, kLayoutPlain, a.get());
        g5->pack(K, p.w.data(), p.row_size, nr, kLayoutPlain, b.get());
        ASSERT_EQ(std::memcmp(a.get(), b.get(), gs->panel_bytes(K)), 0) << GgmlTypeName(t) << " nr " << nr;
      }
    }
}

// Q4_K in the Q4_Kx8 layout (RepackQ4_K): every level's pack of repacked rows (w at an 8-row group,
// nr = 8 or 16: a repacked N is a multiple of 8) writes the scalar pack's bytes of the plain rows, so
// the kernels, and MUL_MAT's GEMM path, give the same results on both layouts.
TEST(GemmKQuants, PackQ4_Kx8EqualsPlainPack) {
  uint32_t seed = 950;
  const GemmKernels* gs = GetGemmKernelsKQuants(GgmlType::Q4_K, kLayoutPlain, IsaLevel::kScalar);
  for (int64_t K : {256, 768}) {
    for (int nr : {8, 16}) {
      Problem p(GgmlType::Q4_K, K, 32, 1, seed++);
      TensorView v;
      v.type = GgmlType::Q4_K;
      v.ne[0] = K;
      v.ne[1] = 32;
      SetContiguousStrides(v);
      v.data = p.w.data();
      std::vector<uint8_t> x8(p.w.size());
      ASSERT_TRUE(RepackQ4_K(v, x8.data()).ok());
      for (int64_t r0 : {0, 16}) {  // panels start at multiples of 16 rows (two 8-row groups)
        AlignedBuf ref(gs->panel_bytes(K));
        gs->pack(K, p.w.data() + size_t(r0) * p.row_size, p.row_size, nr, kLayoutPlain, ref.get());
        for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
          const GemmKernels* g = GetGemmKernelsKQuants(GgmlType::Q4_K, kLayoutQ4_Kx8, isa);
          if (!g || isa > DetectIsa()) continue;
          AlignedBuf got(g->panel_bytes(K));
          std::memset(got.get(), 0x5A, g->panel_bytes(K));
          g->pack(K, x8.data() + size_t(r0) * p.row_size, p.row_size, nr, kLayoutQ4_Kx8, got.get());
          ASSERT_EQ(std::memcmp(ref.get(), got.get(), gs->panel_bytes(K)), 0)
              << "K " << K << " nr " << nr << " r0 " << r0 << " isa " << int(isa);
        }
      }
    }
  }
}

// MUL_MAT through the driver (matmul.cpp) with this family's kernels: src0 [K, N, 2], src1 [K, M, 4]
// (GQA broadcast), contiguous or permuted src1 (gathered), dst with padded rows; every level and
// 1..3 threads against the vec_dot of the same row and column; at one level the result does not
// depend on the thread count.
void CheckMulMat(GgmlType t, int64_t K, int64_t N, int64_t M, bool permuted, uint32_t seed) {
  SCOPED_TRACE(std::string(GgmlTypeName(t)) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
               " M=" + std::to_string(M) + (permuted ? " permuted" : ""));
  const int64_t ne02 = 2, ne12 = 4, pad = 3, nb = K / kQK_K;
  Problem p(t, K, int(N * ne02), int(M * ne12), seed);  // weight rows (n, i02); columns (m, i12)
  TensorView a;
  a.type = t;
  a.ne[0] = K;
  a.ne[1] = N;
  a.ne[2] = ne02;
  a.ne[3] = 1;
  SetContiguousStrides(a);
  a.data = p.w.data();
  std::vector<float> src1(p.x.size());
  TensorView b;
  b.type = GgmlType::F32;
  b.ne[0] = K;
  b.ne[1] = M;
  b.ne[2] = ne12;
  b.ne[3] = 1;
  if (!permuted) {
    SetContiguousStrides(b);
    src1 = p.x;
  } else {  // element (k, m, i2) at ((i2 * K + k) * M + m)
    b.nb[0] = size_t(M) * 4;
    b.nb[1] = 4;
    b.nb[2] = size_t(K * M) * 4;
    b.nb[3] = b.nb[2] * size_t(ne12);
    for (int64_t i2 = 0; i2 < ne12; ++i2)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k)
          src1[size_t((i2 * K + k) * M + m)] = p.x[size_t((i2 * M + m) * K + k)];
  }
  b.data = src1.data();
  std::vector<float> out(size_t((N + pad) * M * ne12));
  TensorView d;
  d.type = GgmlType::F32;
  d.ne[0] = N;
  d.ne[1] = M;
  d.ne[2] = ne12;
  d.ne[3] = 1;
  d.nb[0] = 4;
  d.nb[1] = size_t(N + pad) * 4;
  d.nb[2] = d.nb[1] * size_t(M);
  d.nb[3] = d.nb[2] * size_t(ne12);
  d.data = out.data();
  ASSERT_GE(M, kGemmMinCols);
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (isa > DetectIsa() || !GetGemmKernels(t, kLayoutPlain, isa)) continue;  // GEMM path only
    std::vector<float> first;
    for (int nt : {1, 2, 3}) {
      std::fill(out.begin(), out.end(), -9.f);
      ComputeContext ctx;
      ctx.n_threads = nt;
      ctx.max_isa = isa;
      ASSERT_TRUE(MulMat(ctx, a, b, d).ok());
      for (int64_t i2 = 0; i2 < ne12; ++i2)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N + pad; ++n) {
            const float got = out[size_t((i2 * M + m) * (N + pad) + n)];
            if (n >= N) {
              ASSERT_EQ(got, -9.f) << "padding written";
              continue;
            }
            const uint8_t* wrow = p.w.data() + size_t((i2 / 2) * N + n) * p.row_size;
            const BlockQ8_K* y = &p.y[size_t(i2 * M + m) * nb];
            float vd;
            ScalarVecDot(t)(K, &vd, wrow, y);
            double exact, S, Sg;
            ExactDot(t, wrow, y, K, &exact, &S, &Sg);
            const double tol = double(nb + 4) * kEps * S;
            const double tol_vd = t == GgmlType::IQ4_XS ? double(8 * nb + 4) * kEps * Sg : tol;
            ASSERT_NEAR(got, vd, (tol + tol_vd) / 2)
                << "n " << n << " m " << m << " i2 " << i2 << " isa " << int(isa) << " nt " << nt;
          }
      if (first.empty())
        first = out;
      else
        ASSERT_EQ(std::memcmp(first.data(), out.data(), out.size() * 4), 0)
            << "depends on threads, isa " << int(isa);
    }
  }
}

TEST(GemmKQuants, MulMatDriver) {
  uint32_t seed = 3000;
  for (GgmlType t : kTypes) {
    CheckMulMat(t, 256, 40, 8, false, seed++);   // short last panel, exactly kGemmMinCols
    CheckMulMat(t, 512, 24, 70, true, seed++);   // column chunks, gathered src1
    CheckMulMat(t, 256, 72, 19, false, seed++);  // several panel groups
    if (HasFatalFailure()) return;
  }
}

// Rows nr..15 of a short panel compute finite values (the contract lets a kernel compute them).
TEST(GemmKQuants, ShortPanelPaddingIsFinite) {
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (isa > DetectIsa()) continue;
    for (GgmlType t : kTypes) {
      const GemmKernels* g = GetGemmKernelsKQuants(t, kLayoutPlain, isa);
      if (!g) continue;
      Problem p(t, 512, 5, 3, 77);
      const size_t act_bytes = g->act_row_bytes(p.K);
      AlignedBuf act(act_bytes * 3), panel(g->panel_bytes(p.K));
      for (int c = 0; c < 3; ++c)
        g->from_float(&p.x[size_t(c) * p.K], act.get() + size_t(c) * act_bytes, p.K);
      g->pack(p.K, p.w.data(), p.row_size, 5, kLayoutPlain, panel.get());
      std::vector<float> dst(3 * 16, NAN);
      g->kernel(p.K, panel.get(), act.get(), act_bytes, 3, dst.data(), 16, 16);
      for (float v : dst) ASSERT_TRUE(std::isfinite(v)) << GgmlTypeName(t);
    }
  }
}

// This thread's CPU time in seconds (robust to other processes sharing the cores).
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Throughput of the kernels alone, in thread CPU time, best of 5 (prints; asserts nothing about
// time). Run with --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'.
TEST(GemmKQuants, DISABLED_KernelThroughput) {
  const int64_t K = 2048;
  const int ncols = 512, nrows = 256;
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (const GemmKernels* g = GetGemmKernelsKQuants(GgmlType::Q4_K, kLayoutPlain, isa)) {
      std::vector<float> x(size_t(K) * 64);
      kt::FillUniform(x, 5);
      AlignedBuf act(g->act_row_bytes(K) * 64);
      double s = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        const double t0 = ThreadSeconds();
        for (int c = 0; c < 64; ++c)
          g->from_float(&x[size_t(c) * K], act.get() + size_t(c) * g->act_row_bytes(K), K);
        s = std::min(s, ThreadSeconds() - t0);
      }
      std::printf("isa %d from_float: %.2f ns/element\n", int(isa), s / double(x.size()) * 1e9);
    }
    if (isa == IsaLevel::kScalar || isa > DetectIsa()) continue;
    for (GgmlType t : kTypes) {
      const GemmKernels* g = GetGemmKernelsKQuants(t, kLayoutPlain, isa);
      if (!g || isa == IsaLevel::kAvx512) continue;  // (AVX-512 without VNNI runs the AVX2 kernels)
      Problem p(t, K, nrows, ncols, 3);
      const size_t act_bytes = g->act_row_bytes(K);
      AlignedBuf act(act_bytes * ncols), panel(g->panel_bytes(K));
      for (int c = 0; c < ncols; ++c)
        g->from_float(&p.x[size_t(c) * K], act.get() + size_t(c) * act_bytes, K);
      std::vector<float> dst(size_t(ncols) * nrows);
      double best = 1e30, best_pack = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        double tk = 0, tp = 0;
        for (int r0 = 0; r0 < nrows; r0 += 16) {
          const double t0 = ThreadSeconds();
          g->pack(K, p.w.data() + size_t(r0) * p.row_size, p.row_size, 16, kLayoutPlain, panel.get());
          const double t1 = ThreadSeconds();
          g->kernel(K, panel.get(), act.get(), act_bytes, ncols, dst.data() + r0, nrows, 16);
          const double t2 = ThreadSeconds();
          tp += t1 - t0;
          tk += t2 - t1;
        }
        best = std::min(best, tk);
        best_pack = std::min(best_pack, tp);
      }
      // the vec_dot path of the same level on the same rows and columns (Q8_K activations)
      const TypeKernels* tk = GetTypeKernels(t, isa);
      double best_vd = 1e30;
      for (int rep = 0; rep < 2; ++rep) {
        const double t0 = ThreadSeconds();
        for (int r = 0; r < nrows; ++r)
          for (int c = 0; c < ncols; ++c)
            tk->vec_dot(K, &dst[size_t(c) * nrows + r], p.w.data() + size_t(r) * p.row_size,
                        &p.y[size_t(c) * (K / kQK_K)]);
        best_vd = std::min(best_vd, ThreadSeconds() - t0);
      }
      const double ops = 2.0 * double(K) * ncols * nrows;
      std::printf(
          "isa %d %s K=%lld rows=%d cols=%d: kernel %.1f GOPS (%.2f ms), pack %.2f ms; vec_dot %.1f GOPS\n",
          int(isa), GgmlTypeName(t), (long long)K, nrows, ncols, ops / best * 1e-9, best * 1e3,
          best_pack * 1e3, ops / best_vd * 1e-9);
    }
  }
}

}  // namespace
}  // namespace stowage::cpu
