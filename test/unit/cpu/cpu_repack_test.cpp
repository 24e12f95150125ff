// CPU_REPACK Q4_0x8, Q4_Kx8, Q8_0x8 and MXFP4x8: layout, MUL_MAT on the repacked layout equals the plain
// layout (scalar, AVX2 and AVX-512 VNNI gemv; the GEMM path's pack), on random and on the shared models'
// weights; token generation covers every row whatever the thread count; refusal of bad shapes.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "gemm.h"
#include "kernels.h"
#include "stowage/runtime/gguf.h"
#include "test_paths.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {

kt::Tensor RandomQ4_0(int64_t K, int64_t N, int64_t ne2, uint32_t seed) {
  kt::Tensor w(GgmlType::Q4_0, K, N, ne2);
  std::vector<float> x(static_cast<size_t>(K));
  for (int64_t r = 0; r < N * ne2; ++r) {
    kt::FillUniform(x, seed + uint32_t(r), -1.f, 1.f);
    EXPECT_TRUE(QuantizeRow(GgmlType::Q4_0, x.data(), w.buf.data() + size_t(r) * w.v.nb[1], K).ok());
  }
  return w;
}

TEST(CpuRepack, LayoutOfOneGroup) {
  kt::Tensor w = RandomQ4_0(64, 8, 1, 1);
  std::vector<uint8_t> out(w.buf.size());
  ASSERT_TRUE(RepackQ4_0(w.v, out.data()).ok());
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < 8; ++r) {
      const BlockQ4_0* src = reinterpret_cast<const BlockQ4_0*>(w.buf.data() + r * w.v.nb[1]) + b;
      const uint8_t* blk = out.data() + b * 144;
      EXPECT_EQ(std::memcmp(blk + 2 * r, &src->d, 2), 0);
      EXPECT_EQ(std::memcmp(blk + 16 + 16 * r, src->qs, 16), 0);
    }
}

void CheckRepackedMulMat(const TensorView& plain, int64_t M) {
  std::vector<uint8_t> packed(plain.nb[3] * size_t(plain.ne[3]));
  ASSERT_TRUE(RepackQ4_0(plain, packed.data()).ok());
  TensorView rp = plain;
  rp.data = packed.data();
  rp.layout = kLayoutQ4_0x8;
  const int64_t K = plain.ne[0], N = plain.ne[1], ne2 = plain.ne[2];
  kt::Tensor b(GgmlType::F32, K, M, ne2), d0(GgmlType::F32, N, M, ne2), d1(GgmlType::F32, N, M, ne2);
  kt::Fill(b, 9);
  std::vector<float> scalar_repacked;
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (isa > DetectIsa()) continue;
    ComputeContext ctx;
    ctx.n_threads = 2;
    ctx.max_isa = isa;
    ASSERT_TRUE(MulMat(ctx, plain, b.v, d0.v).ok());
    ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
    if (isa == IsaLevel::kScalar) scalar_repacked.assign(d1.f32(), d1.f32() + N * M * ne2);
    for (int64_t i = 0; i < N * M * ne2; ++i) {
      // Same integer sums; only the float accumulation differs from the plain vec_dot.
      ASSERT_NEAR(d1.f32()[i], d0.f32()[i], 1e-5f * (1.0f + std::fabs(d0.f32()[i])))
          << i << " isa " << int(isa);
      // The SIMD gemv performs exactly the scalar reference's operations (fma per block).
      ASSERT_EQ(d1.f32()[i], scalar_repacked[size_t(i)]) << i << " isa " << int(isa);
    }
  }
}

TEST(CpuRepack, MulMatEqualsPlainLayout) {
  kt::Tensor w = RandomQ4_0(96, 24, 2, 5);
  CheckRepackedMulMat(w.v, 1);
  CheckRepackedMulMat(w.v, 7);
}

// Token generation (M = 1) splits the row tiles into one contiguous range per thread: with 37 groups
// of 8 rows (19 tiles of 16, the last one 8 rows) over 1, 2 and 3 threads, every dst row is written
// and equals the single-row reference (gemv or vec_dot on that row alone), at every ISA level.
TEST(CpuRepack, TokenGenerationCoversEveryRow) {
  const int64_t K = 256, N = 8 * 37;
  kt::Tensor w = RandomQ4_0(K, N, 1, 21);
  std::vector<uint8_t> packed(w.v.nb[3] * size_t(w.v.ne[3]));
  ASSERT_TRUE(RepackQ4_0(w.v, packed.data()).ok());
  TensorView rp = w.v;
  rp.data = packed.data();
  rp.layout = kLayoutQ4_0x8;
  kt::Tensor b(GgmlType::F32, K, 1, 1);
  kt::Fill(b, 4);
  std::vector<BlockQ8_0> yq(size_t(K / 32));
  QuantizeRowQ8_0Act(b.f32(), yq.data(), K);
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (isa > DetectIsa()) continue;
    const TypeKernels* k = GetTypeKernels(GgmlType::Q4_0, isa);
    ASSERT_NE(k, nullptr);
    for (int nt : {1, 2, 3}) {
      ComputeContext ctx;
      ctx.n_threads = nt;
      ctx.max_isa = isa;
      kt::Tensor d0(GgmlType::F32, N, 1, 1), d1(GgmlType::F32, N, 1, 1);
      for (int64_t i = 0; i < N; ++i) d0.f32()[i] = d1.f32()[i] = std::nanf("");
      ASSERT_TRUE(MulMat(ctx, w.v, b.v, d0.v).ok());
      ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
      for (int64_t r = 0; r < N; ++r) {
        float ref = 0;
        k->vec_dot(K, &ref, w.buf.data() + size_t(r) * w.v.nb[1], yq.data());
        ASSERT_EQ(d0.f32()[r], ref) << "row " << r << " isa " << int(isa) << " threads " << nt;
        ASSERT_TRUE(std::isfinite(d1.f32()[r])) << "row " << r << " isa " << int(isa) << " threads " << nt;
        ASSERT_NEAR(d1.f32()[r], ref, 1e-5f * (1.0f + std::fabs(ref))) << "row " << r << " isa " << int(isa);
      }
    }
  }
}

TEST(CpuRepack, SharedModelWeights) {
  const std::string path = test::ModelPath("tiny-tied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  int n = 0;
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    if (t.type != GgmlType::Q4_0 || n >= 3) continue;
    TensorView v;
    v.type = t.type;
    for (int i = 0; i < 4; ++i) v.ne[i] = t.ne[i];
    SetContiguousStrides(v);
    v.data = const_cast<uint8_t*>((*f)->TensorData(t));
    ASSERT_TRUE(CanRepackQ4_0(v)) << t.name;
    CheckRepackedMulMat(v, 5);
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(CpuRepack, Refusals) {
  kt::Tensor w = RandomQ4_0(64, 12, 1, 3);  // 12 rows: not a multiple of 8
  std::vector<uint8_t> out(w.buf.size());
  EXPECT_FALSE(CanRepackQ4_0(w.v));
  const Status s = RepackQ4_0(w.v, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ne1 % 8"), std::string::npos) << s.message();
  kt::Tensor f(GgmlType::F32, 64, 8);
  EXPECT_EQ(RepackQ4_0(f.v, out.data()).code(), StatusCode::kInvalidArgument);
  // A repacked view that is not Q4_0 is refused by MUL_MAT.
  TensorView bad = f.v;
  bad.layout = kLayoutQ4_0x8;
  kt::Tensor b(GgmlType::F32, 64, 2), d(GgmlType::F32, 8, 2);
  ComputeContext ctx;
  EXPECT_EQ(MulMat(ctx, bad, b.v, d.v).code(), StatusCode::kInvalidArgument);
  TensorView bad2 = f.v;
  bad2.layout = 7;
  EXPECT_EQ(MulMat(ctx, bad2, b.v, d.v).code(), StatusCode::kInvalidArgument);
  // GET_ROWS cannot read the repacked layout.
  kt::Tensor w8 = RandomQ4_0(64, 8, 1, 4), idx(GgmlType::I32, 1), rows(GgmlType::F32, 64, 1);
  TensorView r8 = w8.v;
  r8.layout = kLayoutQ4_0x8;
  EXPECT_EQ(GetRows(ctx, r8, idx.v, rows.v).code(), StatusCode::kInvalidArgument);
}

// ---- Q4_Kx8 -------------------------------------------------------------------------------------

constexpr double kEps2u = 1.0 / (1 << 23);  // 2u, u = 2^-24

// Random Q4_K weights [K, N, ne2]: every byte random (all scale/min bit patterns), sane fp16 d/dmin.
kt::Tensor RandomQ4_K(int64_t K, int64_t N, int64_t ne2, uint32_t seed) {
  kt::Tensor w(GgmlType::Q4_K, K, N, ne2);
  const std::vector<uint8_t> b = kt::RandomBlocks(GgmlType::Q4_K, K * N * ne2, seed);
  std::memcpy(w.buf.data(), b.data(), b.size());
  return w;
}

TensorView Repacked(const TensorView& plain, std::vector<uint8_t>* store) {
  store->assign(plain.nb[3] * size_t(plain.ne[3]), 0);
  EXPECT_TRUE(RepackWeight(plain, kLayoutQ4_Kx8, store->data()).ok());
  TensorView rp = plain;
  rp.data = store->data();
  rp.layout = kLayoutQ4_Kx8;
  return rp;
}

// The exact dot (double) of one plain Q4_K row with a Q8_K row, and two error scales: S = sum over
// super-blocks of |d d_y sumi| + |dmin d_y summ| (the gemv and the scalar vec_dot round only sums of
// such terms: within (nb + c) u S of the exact value), and `abs_scale` = the same over every single
// product (the SIMD vec_dots accumulate per lane over partial sums, whose magnitudes S does not bound).
void ExactQ4_K(const uint8_t* row, const BlockQ8_K* y, int64_t K, double* exact, double* scale,
               double* abs_scale = nullptr) {
  double e = 0, s = 0, sa = 0;
  for (int64_t b = 0; b < K / kQK_K; ++b) {
    const BlockQ4_K& x = reinterpret_cast<const BlockQ4_K*>(row)[b];
    int64_t sumi = 0, summ = 0;
    for (int k = 0; k < kQK_K; ++k) {
      const int j = k / 32, byte = x.qs[32 * (j / 2) + k % 32];
      uint8_t sc, mn;
      GetScaleMinK4(j, x.scales, &sc, &mn);
      const int64_t p = int64_t(sc) * ((j & 1) ? byte >> 4 : byte & 15) * y[b].qs[k],
                    pm = int64_t(mn) * y[b].qs[k];
      sumi += p;
      summ += pm;
      sa += std::fabs(double(HalfToFloat(x.d)) * y[b].d * double(p)) +
            std::fabs(double(HalfToFloat(x.dmin)) * y[b].d * double(pm));
    }
    const double t1 = double(HalfToFloat(x.d)) * y[b].d * double(sumi);
    const double t2 = double(HalfToFloat(x.dmin)) * y[b].d * double(summ);
    e += t1 - t2;
    s += std::fabs(t1) + std::fabs(t2);
  }
  *exact = e;
  *scale = s;
  if (abs_scale) *abs_scale = sa;
}

std::vector<BlockQ8_K> QuantizeQ8_K(const float* x, int64_t K) {
  std::vector<BlockQ8_K> y(size_t(K / kQK_K));
  QuantizeRowQ8_K(x, y.data(), K);
  return y;
}

struct GemvLevel {
  IsaLevel isa;
  VecDotFn gemv;
};
std::vector<GemvLevel> Q4_KGemvLevels() {
  std::vector<GemvLevel> out = {{IsaLevel::kScalar, scalar::GemvQ4_Kx8Q8_K}};
  if (DetectIsa() >= IsaLevel::kAvx2) out.push_back({IsaLevel::kAvx2, avx2::GemvQ4_Kx8Q8_K});
  if (DetectIsa() >= IsaLevel::kAvx512Vnni) out.push_back({IsaLevel::kAvx512Vnni, avx512::GemvQ4_Kx8Q8_K});
  return out;
}

// The layout as documented in ops.h (RepackQ4_K), and Q4_Kx8ToBlock is its exact inverse (random
// bytes: every 6-bit scale/min pattern).
TEST(CpuRepackQ4_K, LayoutAndInverse) {
  const int64_t K = 768, N = 16;
  kt::Tensor w = RandomQ4_K(K, N, 1, 11);
  std::vector<uint8_t> store;
  const TensorView rp = Repacked(w.v, &store);
  ASSERT_EQ(store.size(), RowSize(GgmlType::Q4_K, K) * N);  // exactly the plain size
  for (int64_t g = 0; g < N / 8; ++g)
    for (int64_t b = 0; b < K / kQK_K; ++b) {
      const uint8_t* col = store.data() + size_t(g) * 8 * w.v.nb[1] + size_t(b) * 1152;
      uint8_t sc[8][8], mn[8][8];
      Q4_Kx8Scales(col, sc, mn);
      for (int r = 0; r < 8; ++r) {
        const BlockQ4_K& x =
            reinterpret_cast<const BlockQ4_K*>(w.buf.data() + size_t(8 * g + r) * w.v.nb[1])[b];
        EXPECT_EQ(std::memcmp(col + 2 * r, &x.d, 2), 0);
        EXPECT_EQ(std::memcmp(col + 16 + 2 * r, &x.dmin, 2), 0);
        for (int t = 0; t < 16; ++t) EXPECT_EQ(std::memcmp(col + 128 + 64 * t + 8 * r, x.qs + 8 * t, 8), 0);
        for (int j = 0; j < 8; ++j) {
          uint8_t s6, m6;
          GetScaleMinK4(j, x.scales, &s6, &m6);
          ASSERT_EQ(sc[r][j], s6) << "r " << r << " j " << j;
          ASSERT_EQ(mn[r][j], m6) << "r " << r << " j " << j;
          // ops.h: lo[8j + r] low nibble = scale & 15, lo[8r + j] high nibble = min & 15
          EXPECT_EQ(col[32 + 8 * j + r] & 15, s6 & 15);
          EXPECT_EQ(col[32 + 8 * r + j] >> 4, m6 & 15);
        }
        BlockQ4_K back;
        Q4_Kx8ToBlock(col, r, &back);
        ASSERT_EQ(std::memcmp(&back, &x, sizeof x), 0) << "g " << g << " b " << b << " r " << r;
      }
    }
  EXPECT_EQ(rp.layout, kLayoutQ4_Kx8);
  EXPECT_EQ(RepackLayoutFor(w.v), kLayoutQ4_Kx8);
}

// One 8-row Q4_K group (random blocks from `seed`), repacked, and one Q8_K activation row (seed + 1).
struct Q4_KGroup {
  kt::Tensor w;
  std::vector<uint8_t> store;
  TensorView rp;
  std::vector<BlockQ8_K> y;
  Q4_KGroup(int64_t K, uint32_t seed) : w(RandomQ4_K(K, 8, 1, seed)) {
    rp = Repacked(w.v, &store);
    std::vector<float> x(static_cast<size_t>(K));
    kt::FillUniform(x, seed + 1, -3.f, 3.f);
    y = QuantizeQ8_K(x.data(), K);
  }
};

// GemvQ4_Kx8Q8_KSb (llama.cpp's q4_K_8x8 GEMM order: the float part per 64-element sub-block pair):
// every level bit-identical to the scalar one, equal to an independent per-pair computation from
// the plain blocks, and different from the per-super-block gemv somewhere (the orders differ).
TEST(CpuRepackQ4_K, SubBlockPairGemvLevelsAgree) {
  uint32_t seed = 90;
  int differs_from_gemv = 0;
  for (int64_t K : {256, 768, 2816}) {
    const Q4_KGroup gc(K, seed);
    seed += 2;
    const kt::Tensor& w = gc.w;
    const TensorView& rp = gc.rp;
    const std::vector<BlockQ8_K>& y = gc.y;
    float ref[8], sb_scalar[8];
    scalar::GemvQ4_Kx8Q8_K(K, ref, rp.data, y.data());
    scalar::GemvQ4_Kx8Q8_KSb(K, sb_scalar, rp.data, y.data());
    for (int r = 0; r < 8; ++r) {  // the per-pair order, from the plain block of row r
      const BlockQ4_K* blk = reinterpret_cast<const BlockQ4_K*>(w.buf.data() + size_t(r) * w.v.nb[1]);
      float acc = 0, accm = 0;
      for (int64_t b = 0; b < K / kQK_K; ++b) {
        const float d = HalfToFloat(blk[b].d) * y[size_t(b)].d,
                    dm = HalfToFloat(blk[b].dmin) * y[size_t(b)].d;
        for (int i = 0; i < 4; ++i) {
          int sumi = 0, summ = 0;
          for (int j = 2 * i; j < 2 * i + 2; ++j) {
            uint8_t s6, m6;
            GetScaleMinK4(j, blk[b].scales, &s6, &m6);
            int dot = 0;
            for (int e = 0; e < 32; ++e) {
              const uint8_t q = blk[b].qs[32 * i + e];
              dot += ((j % 2 == 0) ? (q & 15) : (q >> 4)) * y[size_t(b)].qs[32 * j + e];
            }
            sumi += s6 * dot;
            summ += m6 * (y[size_t(b)].bsums[2 * j] + y[size_t(b)].bsums[2 * j + 1]);
          }
          acc = std::fma(float(sumi), d, acc);
          accm = std::fma(float(summ), dm, accm);
        }
      }
      const float want = acc - accm;
      ASSERT_EQ(std::memcmp(&sb_scalar[r], &want, 4), 0)
          << "K " << K << " r " << r << ": " << sb_scalar[r] << " vs " << want;
      if (std::memcmp(&sb_scalar[r], &ref[r], 4) != 0) ++differs_from_gemv;
    }
    std::vector<std::pair<IsaLevel, VecDotFn>> levels;
    if (DetectIsa() >= IsaLevel::kAvx2) levels.push_back({IsaLevel::kAvx2, avx2::GemvQ4_Kx8Q8_KSb});
    if (DetectIsa() >= IsaLevel::kAvx512Vnni)
      levels.push_back({IsaLevel::kAvx512Vnni, avx512::GemvQ4_Kx8Q8_KSb});
    for (const auto& lv : levels) {
      float got[8];
      lv.second(K, got, rp.data, y.data());
      for (int r = 0; r < 8; ++r)
        ASSERT_EQ(std::memcmp(&got[r], &sb_scalar[r], 4), 0)
            << "K " << K << " isa " << int(lv.first) << " r " << r;
    }
  }
  EXPECT_GT(differs_from_gemv, 0);
}

// Every gemv level: bit-identical to the scalar gemv, and equal to the plain Q4_K vec_dot of each
// level within float rounding (both near the exact value), for 1, 3 and 11 super-blocks.
TEST(CpuRepackQ4_K, GemvEqualsScalarAndVecDot) {
  uint32_t seed = 40;
  for (int64_t K : {256, 768, 2816}) {
    const Q4_KGroup gc(K, seed);
    seed += 2;
    const kt::Tensor& w = gc.w;
    const TensorView& rp = gc.rp;
    const std::vector<BlockQ8_K>& y = gc.y;
    float ref[8];
    scalar::GemvQ4_Kx8Q8_K(K, ref, rp.data, y.data());
    const double nb = double(K / kQK_K);
    for (const GemvLevel& lv : Q4_KGemvLevels()) {
      float got[8];
      lv.gemv(K, got, rp.data, y.data());
      const TypeKernels* tk = GetTypeKernels(GgmlType::Q4_K, lv.isa);
      for (int r = 0; r < 8; ++r) {
        ASSERT_EQ(std::memcmp(&got[r], &ref[r], 4), 0) << "K " << K << " isa " << int(lv.isa) << " r " << r;
        const uint8_t* row = w.buf.data() + size_t(r) * w.v.nb[1];
        double exact, S, Sabs;
        ExactQ4_K(row, y.data(), K, &exact, &S, &Sabs);
        float plain_scalar, plain_level;
        scalar::VecDotQ4_KQ8_K(K, &plain_scalar, row, y.data());
        tk->vec_dot(K, &plain_level, row, y.data());
        const double tol = (nb + 8) * kEps2u * S;
        ASSERT_NEAR(got[r], exact, tol / 2) << "K " << K << " r " << r;
        ASSERT_NEAR(got[r], plain_scalar, tol) << "K " << K << " r " << r;
        ASSERT_NEAR(got[r], plain_level, tol / 2 + (nb + 8) * kEps2u * Sabs)
            << "K " << K << " isa " << int(lv.isa) << " r " << r;
      }
    }
  }
}

// Largest sums: every nibble 15, every scale and min 63, activations all -127 or alternating
// +-127 (the int16 sums of the AVX2 gemv and the vpdpwssd lanes of the AVX-512 gemv at their
// maximum); and a non-finite activation block gives NaN at every level.
TEST(CpuRepackQ4_K, ExtremeValuesAndNan) {
  const int64_t K = 512;
  kt::Tensor w = RandomQ4_K(K, 8, 1, 77);
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t b = 0; b < K / kQK_K; ++b) {
      BlockQ4_K& x = reinterpret_cast<BlockQ4_K*>(w.buf.data() + size_t(r) * w.v.nb[1])[b];
      std::memset(x.scales, 0xFF, sizeof x.scales);
      std::memset(x.qs, 0xFF, sizeof x.qs);
    }
  std::vector<uint8_t> store;
  const TensorView rp = Repacked(w.v, &store);
  std::vector<float> x(static_cast<size_t>(K));
  for (int pattern = 0; pattern < 3; ++pattern) {
    for (int64_t k = 0; k < K; ++k) x[size_t(k)] = pattern == 1 ? ((k % 2) ? 1.f : -1.f) : 1.f;
    if (pattern == 2) x[300] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<BlockQ8_K> y = QuantizeQ8_K(x.data(), K);
    float ref[8];
    scalar::GemvQ4_Kx8Q8_K(K, ref, rp.data, y.data());
    for (const GemvLevel& lv : Q4_KGemvLevels()) {
      float got[8];
      lv.gemv(K, got, rp.data, y.data());
      for (int r = 0; r < 8; ++r) {
        if (pattern == 2) {
          ASSERT_TRUE(std::isnan(got[r])) << "isa " << int(lv.isa) << " r " << r;
          continue;
        }
        ASSERT_EQ(std::memcmp(&got[r], &ref[r], 4), 0) << "pattern " << pattern << " isa " << int(lv.isa);
        double exact, S;
        ExactQ4_K(w.buf.data() + size_t(r) * w.v.nb[1], y.data(), K, &exact, &S);
        ASSERT_NEAR(got[r], exact, 6 * kEps2u * S) << "pattern " << pattern << " r " << r;
      }
    }
  }
}

// MUL_MAT through the driver on the repacked layout, src0 [K, N, 2] with GQA broadcast to src1
// [K, M, 4]:
// - M < kGemmMinCols (gemv path): each dst element equals the scalar gemv of its group bit for bit
//   and the plain layout's MUL_MAT within float rounding, at every level and 1, 2, 3 threads (37
//   groups of 8 rows: an odd number of groups, a last 16-row tile of 8 rows);
// - M >= kGemmMinCols (GEMM path): the same bits as the plain layout's MUL_MAT (the pack reads the
//   repacked rows back exactly).
void CheckQ4_KMulMat(int64_t K, int64_t N, int64_t M, uint32_t seed) {
  SCOPED_TRACE("K=" + std::to_string(K) + " N=" + std::to_string(N) + " M=" + std::to_string(M));
  const int64_t ne02 = 2, ne12 = 4, nb = K / kQK_K;
  kt::Tensor w = RandomQ4_K(K, N, ne02, seed);
  std::vector<uint8_t> store;
  const TensorView rp = Repacked(w.v, &store);
  kt::Tensor b(GgmlType::F32, K, M, ne12);
  kt::Fill(b, seed + 1, -2.f, 2.f);
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (isa > DetectIsa()) continue;
    for (int nt : {1, 2, 3}) {
      ComputeContext ctx;
      ctx.n_threads = nt;
      ctx.max_isa = isa;
      kt::Tensor d0(GgmlType::F32, N, M, ne12), d1(GgmlType::F32, N, M, ne12);
      for (int64_t i = 0; i < N * M * ne12; ++i) d0.f32()[i] = d1.f32()[i] = std::nanf("");
      ASSERT_TRUE(MulMat(ctx, w.v, b.v, d0.v).ok());
      ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
      for (int64_t i2 = 0; i2 < ne12; ++i2)
        for (int64_t m = 0; m < M; ++m) {
          const std::vector<BlockQ8_K> y = QuantizeQ8_K(b.f32() + (i2 * M + m) * K, K);
          for (int64_t n = 0; n < N; ++n) {
            const size_t i = size_t((i2 * M + m) * N + n);
            const float got = d1.f32()[i];
            if (M >= kGemmMinCols) {
              ASSERT_EQ(std::memcmp(&got, &d0.f32()[i], 4), 0)
                  << "n " << n << " isa " << int(isa) << " nt " << nt;
              continue;
            }
            float ref[8];
            const uint8_t* group =
                static_cast<const uint8_t*>(rp.data) + (i2 / 2) * rp.nb[2] + (n / 8) * 8 * rp.nb[1];
            scalar::GemvQ4_Kx8Q8_K(K, ref, group, y.data());
            ASSERT_EQ(std::memcmp(&got, &ref[n % 8], 4), 0)
                << "n " << n << " m " << m << " isa " << int(isa) << " nt " << nt;
            double exact, S, Sabs;
            ExactQ4_K(w.buf.data() + (i2 / 2) * w.v.nb[2] + size_t(n) * w.v.nb[1], y.data(), K, &exact, &S,
                      &Sabs);
            ASSERT_NEAR(got, exact, (double(nb) + 8) * kEps2u * S / 2) << "n " << n << " isa " << int(isa);
            ASSERT_NEAR(got, d0.f32()[i], (double(nb) + 8) * kEps2u * (S / 2 + Sabs))
                << "n " << n << " isa " << int(isa);
          }
        }
    }
  }
}

TEST(CpuRepackQ4_K, MulMatEqualsPlainLayout) {
  CheckQ4_KMulMat(512, 8 * 37, 1, 300);  // token generation
  CheckQ4_KMulMat(256, 24, 3, 301);      // a few columns: still the gemv
  CheckQ4_KMulMat(768, 40, 9, 302);      // GEMM path, short last panel (N % 16 == 8)
  CheckQ4_KMulMat(256, 32, 20, 303);     // GEMM path
}

// Real Q4_K weights of the shared synth-Q4_K_M model (the only shared model with Q4_K tensors): repacked
// MUL_MAT at M = 1 (gemv) and M = 9 (GEMM) agrees with the plain layout.
TEST(CpuRepackQ4_K, SharedModelWeights) {
  int n = 0;
  for (const char* model : {"synth-Q4_K_M.gguf"}) {
    const std::string path = test::ModelPath(model);
    STOWAGE_REQUIRE_FILE(path);
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    int per_model = 0;
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      if (t.type != GgmlType::Q4_K || per_model >= 3) continue;
      TensorView v;
      v.type = t.type;
      for (int i = 0; i < 4; ++i) v.ne[i] = t.ne[i];
      SetContiguousStrides(v);
      v.data = const_cast<uint8_t*>((*f)->TensorData(t));
      if (!CanRepackQ4_K(v)) continue;
      std::vector<uint8_t> store;
      const TensorView rp = Repacked(v, &store);
      for (int64_t M : {1, 9}) {
        kt::Tensor b(GgmlType::F32, v.ne[0], M), d0(GgmlType::F32, v.ne[1], M), d1(GgmlType::F32, v.ne[1], M);
        kt::Fill(b, 5);
        ComputeContext ctx;
        ctx.n_threads = 2;
        ASSERT_TRUE(MulMat(ctx, v, b.v, d0.v).ok());
        ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
        for (int64_t i = 0; i < v.ne[1] * M; ++i)
          ASSERT_NEAR(d1.f32()[i], d0.f32()[i], 1e-4f * (1.0f + std::fabs(d0.f32()[i])))
              << t.name << " M " << M;
      }
      ++per_model;
      ++n;
    }
    EXPECT_GT(per_model, 0) << model;
  }
  EXPECT_EQ(n, 3);
}

TEST(CpuRepackQ4_K, Refusals) {
  std::vector<uint8_t> out(RowSize(GgmlType::Q4_K, 256) * 16);
  kt::Tensor w12 = RandomQ4_K(256, 12, 1, 3);  // 12 rows: not a multiple of 8
  EXPECT_FALSE(CanRepackQ4_K(w12.v));
  EXPECT_EQ(RepackLayoutFor(w12.v), kLayoutPlain);
  const Status s = RepackQ4_K(w12.v, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ne1 % 8"), std::string::npos) << s.message();
  EXPECT_EQ(RepackWeight(w12.v, kLayoutQ4_Kx8, out.data()).code(), StatusCode::kInvalidArgument);
  kt::Tensor q4_0 = RandomQ4_0(256, 8, 1, 4);
  EXPECT_FALSE(CanRepackQ4_K(q4_0.v));
  EXPECT_EQ(RepackWeight(q4_0.v, kLayoutQ4_Kx8, out.data()).code(), StatusCode::kInvalidArgument);
  // A non-contiguous view (every other row) is refused.
  kt::Tensor w16 = RandomQ4_K(256, 16, 1, 5);
  TensorView strided = w16.v;
  strided.ne[1] = 8;
  strided.nb[1] *= 2;
  strided.nb[2] = strided.nb[1] * 8;
  strided.nb[3] = strided.nb[2];
  EXPECT_FALSE(CanRepackQ4_K(strided));
  // MUL_MAT refuses the Q4_Kx8 layout on another type, on ne1 % 8 != 0 and on padded rows.
  ComputeContext ctx;
  kt::Tensor b(GgmlType::F32, 256, 1), d8(GgmlType::F32, 8, 1), d12(GgmlType::F32, 12, 1);
  TensorView bad = q4_0.v;
  bad.layout = kLayoutQ4_Kx8;
  EXPECT_EQ(MulMat(ctx, bad, b.v, d8.v).code(), StatusCode::kInvalidArgument);
  TensorView bad12 = w12.v;
  bad12.layout = kLayoutQ4_Kx8;
  EXPECT_EQ(MulMat(ctx, bad12, b.v, d12.v).code(), StatusCode::kInvalidArgument);
  TensorView bad_stride = strided;
  bad_stride.layout = kLayoutQ4_Kx8;
  EXPECT_EQ(MulMat(ctx, bad_stride, b.v, d8.v).code(), StatusCode::kInvalidArgument);
  // GET_ROWS cannot read the repacked layout.
  kt::Tensor idx(GgmlType::I32, 1), rows(GgmlType::F32, 256, 1);
  TensorView r8 = w16.v;
  r8.layout = kLayoutQ4_Kx8;
  EXPECT_EQ(GetRows(ctx, r8, idx.v, rows.v).code(), StatusCode::kInvalidArgument);
}

// Resident KiB of this process's mapping that starts at `addr` (/proc/self/smaps "Rss:"), -1 if absent.
long MappingRssKiB(const void* addr) {
  FILE* f = std::fopen("/proc/self/smaps", "re");
  if (!f) return -1;
  char line[512];
  bool in = false;
  long rss = -1;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
      in = lo == reinterpret_cast<uintptr_t>(addr);
      continue;
    }
    long kib = 0;
    if (in && std::sscanf(line, "Rss: %ld kB", &kib) == 1) {
      rss = kib;
      break;
    }
  }
  std::fclose(f);
  return rss;
}

// RepackWeight from a read-only file mapping (as the session uploads CPU_REPACK weights) drops the
// source's pages from this process afterwards; the mapping still reads the same bytes, and the
// repacked result equals the one made from a heap copy (whose bytes stay untouched).
TEST(CpuRepackQ4_K, RepackReleasesMappedSourcePages) {
  const int64_t K = 4096, N = 512;
  kt::Tensor w = RandomQ4_K(K, N, 1, 61);
  const size_t bytes = w.v.nb[1] * size_t(N);
  char path[] = "/tmp/stowage-repack-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, w.buf.data(), bytes), ssize_t(bytes));
  void* m = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  unlink(path);
  ASSERT_NE(m, MAP_FAILED);
  volatile uint8_t sink = 0;
  for (size_t o = 0; o < bytes; o += 4096) sink = uint8_t(sink + static_cast<const uint8_t*>(m)[o]);
  const long before = MappingRssKiB(m);
  TensorView mapped = w.v;
  mapped.data = m;
  std::vector<uint8_t> from_map(bytes), from_heap(bytes);
  ASSERT_TRUE(RepackWeight(mapped, kLayoutQ4_Kx8, from_map.data()).ok());
  const long after = MappingRssKiB(m);
  ASSERT_TRUE(RepackWeight(w.v, kLayoutQ4_Kx8, from_heap.data()).ok());
  EXPECT_EQ(from_map, from_heap);
  EXPECT_EQ(std::memcmp(m, w.buf.data(), bytes), 0);  // still readable, same bytes
  if (before >= 0) {                                  // /proc/self/smaps readable
    EXPECT_GE(before, long(bytes / 1024) - 8) << "the test touched every page";
    EXPECT_LE(after, 8) << "pages of the source left resident after the repack";
  }
  munmap(m, bytes);
  // The heap source is left as it was (MADV_DONTNEED there would have zeroed it).
  kt::Tensor again = RandomQ4_K(K, N, 1, 61);
  EXPECT_EQ(std::memcmp(again.buf.data(), w.buf.data(), bytes), 0);
}

// Token-generation speed of one thread (thread CPU time, best of 5; prints, asserts nothing about
// time): the plain Q4_K vec_dot and the Q4_Kx8 gemv of each level over a [K, N] matrix in cache
// (~1.1 MiB) and streamed from memory (STREAM_MIB, default 256). Run with
// --gtest_also_run_disabled_tests --gtest_filter='*Q4_KThroughput*'.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

TEST(CpuRepackQ4_K, DISABLED_Q4_KThroughput) {
  const int64_t K = 2048;
  const char* env = std::getenv("STREAM_MIB");
  const int64_t stream_mib = env ? std::atoll(env) : 256;
  for (int64_t N : {int64_t(1024), (stream_mib << 20) / int64_t(RowSize(GgmlType::Q4_K, K)) / 8 * 8}) {
    kt::Tensor w = RandomQ4_K(K, N, 1, 9);
    std::vector<uint8_t> store;
    const TensorView rp = Repacked(w.v, &store);
    std::vector<float> x(static_cast<size_t>(K));
    kt::FillUniform(x, 3);
    const std::vector<BlockQ8_K> y = QuantizeQ8_K(x.data(), K);
    std::vector<float> out(static_cast<size_t>(N));
    const double bytes = double(RowSize(GgmlType::Q4_K, K)) * double(N);
    const int reps = N <= 1024 ? 50 : 1;
    for (const GemvLevel& lv : Q4_KGemvLevels()) {
      const TypeKernels* tk = GetTypeKernels(GgmlType::Q4_K, lv.isa);
      double best_vd = 1e30, best_gemv = 1e30;
      for (int it = 0; it < 5; ++it) {
        double t0 = ThreadSeconds();
        for (int rep = 0; rep < reps; ++rep)
          for (int64_t n = 0; n < N; ++n)
            tk->vec_dot(K, &out[size_t(n)], w.buf.data() + size_t(n) * w.v.nb[1], y.data());
        best_vd = std::min(best_vd, (ThreadSeconds() - t0) / reps);
        t0 = ThreadSeconds();
        for (int rep = 0; rep < reps; ++rep)
          for (int64_t n = 0; n < N; n += 8)
            lv.gemv(K, &out[size_t(n)], static_cast<const uint8_t*>(rp.data) + size_t(n) * rp.nb[1],
                    y.data());
        best_gemv = std::min(best_gemv, (ThreadSeconds() - t0) / reps);
      }
      std::printf("isa %d, %s (%.1f MiB): Q4_K vec_dot %.1f GB/s, Q4_Kx8 gemv %.1f GB/s\n", int(lv.isa),
                  N <= 1024 ? "in cache" : "streamed", bytes / 1048576.0, bytes / best_vd * 1e-9,
                  bytes / best_gemv * 1e-9);
    }
  }
}

// ---- Q8_0x8 -------------------------------------------------------------------------------------

// Q8_0 weights [K, N, ne2] of random bytes: every quant value -128 .. 127 (-128 too, which ggml's
// quantizer never writes but a GGUF may hold), fp16 scales of either sign in [0.001, 0.05).
kt::Tensor RandomQ8_0Bytes(int64_t K, int64_t N, int64_t ne2, uint32_t seed) {
  kt::Tensor w(GgmlType::Q8_0, K, N, ne2);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(0.001f, 0.05f);
  BlockQ8_0* blk = reinterpret_cast<BlockQ8_0*>(w.buf.data());
  for (int64_t i = 0; i < K / kQK8_0 * N * ne2; ++i) {
    blk[i].d = FloatToHalf((rng() & 1) ? d(rng) : -d(rng));
    for (int8_t& q : blk[i].qs) q = int8_t(uint8_t(rng()));
  }
  return w;
}

// `plain` repacked into `layout` (which RepackLayoutFor must choose) in `store`.
TensorView Repacked(const TensorView& plain, int layout, std::vector<uint8_t>* store) {
  store->assign(plain.nb[3] * size_t(plain.ne[3]), 0);
  EXPECT_EQ(RepackLayoutFor(plain), layout);
  EXPECT_TRUE(RepackWeight(plain, layout, store->data()).ok());
  TensorView rp = plain;
  rp.data = store->data();
  rp.layout = layout;
  return rp;
}
TensorView RepackedQ8_0(const TensorView& plain, std::vector<uint8_t>* store) {
  return Repacked(plain, kLayoutQ8_0x8, store);
}

// The layout as documented in ops.h (RepackQ8_0).
TEST(CpuRepackQ8_0, LayoutOfOneGroup) {
  kt::Tensor w = RandomQ8_0Bytes(96, 16, 1, 1);
  std::vector<uint8_t> store;
  const TensorView rp = RepackedQ8_0(w.v, &store);
  for (int g = 0; g < 2; ++g)
    for (int b = 0; b < 3; ++b)
      for (int r = 0; r < 8; ++r) {
        const BlockQ8_0* src = reinterpret_cast<const BlockQ8_0*>(w.buf.data() + (8 * g + r) * w.v.nb[1]) + b;
        const uint8_t* blk = static_cast<const uint8_t*>(rp.data) + 8 * g * w.v.nb[1] + b * 272;
        EXPECT_EQ(std::memcmp(blk + 2 * r, &src->d, 2), 0);
        for (int j = 0; j < 32; ++j)
          ASSERT_EQ(blk[16 + 64 * (r / 2) + 32 * (r % 2) + j], uint8_t(int(src->qs[j]) + 128))
              << r << " " << j;
      }
}

struct Q8_0Level {
  IsaLevel isa;
  VecDotFn gemv, vec_dot;
};
std::vector<Q8_0Level> Q8_0Levels() {
  std::vector<Q8_0Level> out = {{IsaLevel::kScalar, scalar::GemvQ8_0x8Q8_0, scalar::VecDotQ8_0Q8_0}};
  if (DetectIsa() >= IsaLevel::kAvx2)
    out.push_back({IsaLevel::kAvx2, avx2::GemvQ8_0x8Q8_0, avx2::VecDotQ8_0Q8_0});
  if (DetectIsa() >= IsaLevel::kAvx512Vnni)
    out.push_back({IsaLevel::kAvx512Vnni, avx512::GemvQ8_0x8Q8_0, avx512::VecDotQ8_0Q8_0});
  return out;
}

// Every level's gemv gives, for each of the 8 rows, the bits of that level's plain vec_dot (ggml's
// order: the AVX2/AVX-512 ones are llama.cpp's), for 1, 3, 11 and 64 blocks, on random bytes and on
// the extremes (every quant -128 or 127 against activations of +-127: the largest dword sums); a
// non-finite activation scale gives NaN rows.
TEST(CpuRepackQ8_0, GemvIsEachLevelsVecDot) {
  for (int64_t nb : {1, 3, 11, 64}) {
    const int64_t K = nb * kQK8_0;
    for (int pattern = 0; pattern < 4; ++pattern) {
      SCOPED_TRACE("blocks " + std::to_string(nb) + " pattern " + std::to_string(pattern));
      kt::Tensor w = RandomQ8_0Bytes(K, 8, 1, uint32_t(40 + nb));
      std::vector<float> x(static_cast<size_t>(K));
      kt::FillUniform(x, uint32_t(50 + nb), -3.f, 3.f);
      BlockQ8_0* blk = reinterpret_cast<BlockQ8_0*>(w.buf.data());
      if (pattern >= 1) {  // extremes: weights -128 (1) or 127 (2, 3), activations -127 or +-127
        for (int64_t i = 0; i < nb * 8; ++i)
          for (int8_t& q : blk[i].qs) q = pattern == 1 ? -128 : 127;
        for (int64_t k = 0; k < K; ++k) x[size_t(k)] = pattern == 3 && k % 2 ? 1.f : -1.f;
      }
      std::vector<BlockQ8_0> y(static_cast<size_t>(nb));
      QuantizeRowQ8_0Act(x.data(), y.data(), K);
      std::vector<uint8_t> store;
      const TensorView rp = RepackedQ8_0(w.v, &store);
      for (const Q8_0Level& lv : Q8_0Levels()) {
        float got[8];
        lv.gemv(K, got, rp.data, y.data());
        for (int r = 0; r < 8; ++r) {
          float want;
          lv.vec_dot(K, &want, w.buf.data() + r * w.v.nb[1], y.data());
          ASSERT_EQ(std::memcmp(&got[r], &want, 4), 0)
              << "isa " << int(lv.isa) << " row " << r << ": " << got[r] << " vs " << want;
        }
      }
      if (pattern == 0) {
        y[size_t(nb / 2)].d = FloatToHalf(std::numeric_limits<float>::infinity());
        for (const Q8_0Level& lv : Q8_0Levels()) {
          float got[8];
          lv.gemv(K, got, rp.data, y.data());
          for (int r = 0; r < 8; ++r) EXPECT_TRUE(std::isnan(got[r]) || std::isinf(got[r])) << int(lv.isa);
        }
      }
    }
  }
}

// MUL_MAT through the driver on the repacked layout, src0 [K, N, 2] broadcast to src1 [K, M, 4], gives
// the plain layout's bits at every level, thread count and M (the gemv is the vec_dot's order; the
// GEMM path reads the same panels back from the repacked rows), with and without llamacpp_numerics.
// 37 groups of 8 rows: an odd number of groups and a last 16-row tile of 8 rows.
TEST(CpuRepackQ8_0, MulMatBitIdenticalToPlain) {
  const int64_t N = 8 * 37, ne12 = 4;
  for (int64_t K : {int64_t(96), int64_t(1024)}) {
    kt::Tensor w = RandomQ8_0Bytes(K, N, 2, uint32_t(K));
    std::vector<uint8_t> store;
    const TensorView rp = RepackedQ8_0(w.v, &store);
    for (int64_t M : {1, 3, 9, 20}) {
      kt::Tensor b(GgmlType::F32, K, M, ne12);
      kt::Fill(b, uint32_t(K + M), -2.f, 2.f);
      for (const Q8_0Level& lv : Q8_0Levels())
        for (int nt : {1, 2, 3})
          for (bool numerics : {false, true}) {
            SCOPED_TRACE("K=" + std::to_string(K) + " M=" + std::to_string(M) +
                         " isa=" + std::to_string(int(lv.isa)) + " threads=" + std::to_string(nt) +
                         (numerics ? " llamacpp_numerics" : ""));
            ComputeContext ctx;
            ctx.n_threads = nt;
            ctx.max_isa = lv.isa;
            ctx.llamacpp_numerics = numerics;
            kt::Tensor d0(GgmlType::F32, N, M, ne12), d1(GgmlType::F32, N, M, ne12);
            for (int64_t i = 0; i < N * M * ne12; ++i) d0.f32()[i] = d1.f32()[i] = std::nanf("");
            ASSERT_TRUE(MulMat(ctx, w.v, b.v, d0.v).ok());
            ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
            for (int64_t i = 0; i < N * M * ne12; ++i) {
              ASSERT_TRUE(std::isfinite(d1.f32()[i])) << i;
              ASSERT_EQ(std::memcmp(&d1.f32()[i], &d0.f32()[i], 4), 0) << "element " << i;
            }
          }
    }
  }
}

// Real Q8_0 weights (stories260K-Q8_0): every repackable matrix, MUL_MAT at M = 1 and M = 9 gives
// the plain layout's bits.
TEST(CpuRepackQ8_0, SharedModelWeights) {
  const std::string path = test::ModelPath("stories260K-Q8_0.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  int n = 0;
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    if (t.type != GgmlType::Q8_0) continue;
    TensorView v;
    v.type = t.type;
    for (int i = 0; i < 4; ++i) v.ne[i] = t.ne[i];
    SetContiguousStrides(v);
    v.data = const_cast<uint8_t*>((*f)->TensorData(t));
    if (!CanRepackQ8_0(v)) continue;
    std::vector<uint8_t> store;
    const TensorView rp = RepackedQ8_0(v, &store);
    for (int64_t M : {1, 9}) {
      kt::Tensor b(GgmlType::F32, v.ne[0], M, 1), d0(GgmlType::F32, v.ne[1], M, 1),
          d1(GgmlType::F32, v.ne[1], M, 1);
      kt::Fill(b, uint32_t(M));
      ComputeContext ctx;
      ASSERT_TRUE(MulMat(ctx, v, b.v, d0.v).ok());
      ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
      ASSERT_EQ(std::memcmp(d0.buf.data(), d1.buf.data(), d0.buf.size()), 0) << t.name << " M=" << M;
    }
    ++n;
  }
  EXPECT_GE(n, 3);
}

TEST(CpuRepackQ8_0, Refusals) {
  std::vector<uint8_t> out(RowSize(GgmlType::Q8_0, 64) * 16);
  kt::Tensor w12 = RandomQ8_0Bytes(64, 12, 1, 3);  // 12 rows: not a multiple of 8
  EXPECT_FALSE(CanRepackQ8_0(w12.v));
  EXPECT_EQ(RepackLayoutFor(w12.v), kLayoutPlain);
  const Status s = RepackQ8_0(w12.v, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ne1 % 8"), std::string::npos) << s.message();
  EXPECT_EQ(RepackWeight(w12.v, kLayoutQ8_0x8, out.data()).code(), StatusCode::kInvalidArgument);
  kt::Tensor q4_0 = RandomQ4_0(64, 8, 1, 4);
  EXPECT_FALSE(CanRepackQ8_0(q4_0.v));
  EXPECT_EQ(RepackWeight(q4_0.v, kLayoutQ8_0x8, out.data()).code(), StatusCode::kInvalidArgument);
  kt::Tensor w16 = RandomQ8_0Bytes(64, 16, 1, 5);
  TensorView strided = w16.v;  // every other row
  strided.ne[1] = 8;
  strided.nb[1] *= 2;
  strided.nb[2] = strided.nb[1] * 8;
  strided.nb[3] = strided.nb[2];
  EXPECT_FALSE(CanRepackQ8_0(strided));
  // MUL_MAT refuses the Q8_0x8 layout on another type, on ne1 % 8 != 0 and on padded rows, naming it.
  ComputeContext ctx;
  kt::Tensor b(GgmlType::F32, 64, 1), d8(GgmlType::F32, 8, 1), d12(GgmlType::F32, 12, 1);
  TensorView bad = q4_0.v;
  bad.layout = kLayoutQ8_0x8;
  const Status st = MulMat(ctx, bad, b.v, d8.v);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Q8_0x8 layout needs a Q8_0 src0"), std::string::npos) << st.message();
  TensorView bad12 = w12.v;
  bad12.layout = kLayoutQ8_0x8;
  EXPECT_EQ(MulMat(ctx, bad12, b.v, d12.v).code(), StatusCode::kInvalidArgument);
  TensorView bad_stride = strided;
  bad_stride.layout = kLayoutQ8_0x8;
  EXPECT_EQ(MulMat(ctx, bad_stride, b.v, d8.v).code(), StatusCode::kInvalidArgument);
  // GET_ROWS cannot read the repacked layout.
  kt::Tensor idx(GgmlType::I32, 1), rows(GgmlType::F32, 64, 1);
  TensorView r8 = w16.v;
  r8.layout = kLayoutQ8_0x8;
  EXPECT_EQ(GetRows(ctx, r8, idx.v, rows.v).code(), StatusCode::kInvalidArgument);
}

// ---- MXFP4x8 ------------------------------------------------------------------------------------

// MXFP4 weights [K, N, ne2] of random codes (every level, +-0 too) and scale bytes 118 .. 133
// (half scales 2^-10 .. 2^5).
kt::Tensor RandomMXFP4Bytes(int64_t K, int64_t N, int64_t ne2, uint32_t seed) {
  kt::Tensor w(GgmlType::MXFP4, K, N, ne2);
  std::mt19937 rng(seed);
  BlockMXFP4* blk = reinterpret_cast<BlockMXFP4*>(w.buf.data());
  for (int64_t i = 0; i < K / kQK_MXFP4 * N * ne2; ++i) {
    blk[i].e = uint8_t(118 + rng() % 16);
    for (uint8_t& q : blk[i].qs) q = uint8_t(rng());
  }
  return w;
}

TensorView RepackedMXFP4(const TensorView& plain, std::vector<uint8_t>* store) {
  return Repacked(plain, kLayoutMXFP4x8, store);
}

// The layout as documented in ops.h (RepackMXFP4).
TEST(CpuRepackMXFP4, LayoutOfOneGroup) {
  kt::Tensor w = RandomMXFP4Bytes(96, 16, 1, 1);
  std::vector<uint8_t> store;
  const TensorView rp = RepackedMXFP4(w.v, &store);
  for (int g = 0; g < 2; ++g)
    for (int b = 0; b < 3; ++b)
      for (int r = 0; r < 8; ++r) {
        const BlockMXFP4* src =
            reinterpret_cast<const BlockMXFP4*>(w.buf.data() + (8 * g + r) * w.v.nb[1]) + b;
        const uint8_t* blk = static_cast<const uint8_t*>(rp.data) + 8 * g * w.v.nb[1] + b * 136;
        EXPECT_EQ(blk[r], src->e);
        EXPECT_EQ(std::memcmp(blk + 8 + 16 * r, src->qs, 16), 0) << r;
      }
}

// Every level's gemv gives, for each of the 8 rows, the bits of scalar::VecDotMXFP4Q8_0 (llama.cpp's
// repacked mxfp4_8x8 order), for 1, 3, 11 and 64 blocks, on random codes, on the extremes (every
// code +-12 against activations of +-127) and on the subnormal / largest scale bytes 0, 1, 254.
TEST(CpuRepackMXFP4, GemvIsTheScalarVecDot) {
  std::vector<std::pair<IsaLevel, VecDotFn>> levels = {{IsaLevel::kScalar, scalar::GemvMXFP4x8Q8_0}};
  if (DetectIsa() >= IsaLevel::kAvx2) levels.push_back({IsaLevel::kAvx2, avx2::GemvMXFP4x8Q8_0});
  if (DetectIsa() >= IsaLevel::kAvx512Vnni)
    levels.push_back({IsaLevel::kAvx512Vnni, avx512::GemvMXFP4x8Q8_0});
  for (int64_t nb : {1, 3, 11, 64}) {
    const int64_t K = nb * kQK_MXFP4;
    for (int pattern = 0; pattern < 4; ++pattern) {
      SCOPED_TRACE("blocks " + std::to_string(nb) + " pattern " + std::to_string(pattern));
      kt::Tensor w = RandomMXFP4Bytes(K, 8, 1, uint32_t(40 + nb));
      std::vector<float> x(static_cast<size_t>(K));
      kt::FillUniform(x, uint32_t(50 + nb), -3.f, 3.f);
      BlockMXFP4* blk = reinterpret_cast<BlockMXFP4*>(w.buf.data());
      if (pattern == 1 || pattern == 2) {  // codes 7 (+12) or 0xF (-12) everywhere, activations +-1
        for (int64_t i = 0; i < nb * 8; ++i)
          for (uint8_t& q : blk[i].qs) q = pattern == 1 ? 0x77 : 0xFF;
        for (int64_t k = 0; k < K; ++k) x[size_t(k)] = k % 3 ? 1.f : -1.f;
      }
      if (pattern == 3)  // the subnormal half scales and a huge one
        for (int64_t i = 0; i < nb * 8; ++i) blk[i].e = uint8_t(i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 160);
      std::vector<BlockQ8_0> y(static_cast<size_t>(nb));
      QuantizeRowQ8_0Act(x.data(), y.data(), K);
      std::vector<uint8_t> store;
      const TensorView rp = RepackedMXFP4(w.v, &store);
      for (const auto& lv : levels) {
        float got[8];
        lv.second(K, got, rp.data, y.data());
        for (int r = 0; r < 8; ++r) {
          float want;
          scalar::VecDotMXFP4Q8_0(K, &want, w.buf.data() + r * w.v.nb[1], y.data());
          ASSERT_EQ(std::memcmp(&got[r], &want, 4), 0)
              << "isa " << int(lv.first) << " row " << r << ": " << got[r] << " vs " << want;
        }
      }
    }
  }
}

// MUL_MAT through the driver on the repacked layout, src0 [K, N, 2] broadcast to src1 [K, M, 4], gives
// the bits of the plain layout at the scalar level at every level, thread count and M (gemv and GEMM:
// one float per output, llama.cpp's repacked order, so the repacked product is batch-invariant), with
// and without llamacpp_numerics; the plain layout at AVX2 (ggml's two-accumulator vec_dot) differs.
TEST(CpuRepackMXFP4, MulMatEqualsScalarPlain) {
  const int64_t N = 8 * 37, ne12 = 4;
  for (int64_t K : {int64_t(96), int64_t(2880)}) {
    kt::Tensor w = RandomMXFP4Bytes(K, N, 2, uint32_t(K));
    std::vector<uint8_t> store;
    const TensorView rp = RepackedMXFP4(w.v, &store);
    for (int64_t M : {1, 3, 9, 20}) {
      kt::Tensor b(GgmlType::F32, K, M, ne12);
      kt::Fill(b, uint32_t(K + M), -2.f, 2.f);
      ComputeContext sctx;
      sctx.max_isa = IsaLevel::kScalar;
      kt::Tensor d0(GgmlType::F32, N, M, ne12);
      ASSERT_TRUE(MulMat(sctx, w.v, b.v, d0.v).ok());
      for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
        if (isa > DetectIsa()) continue;
        for (int nt : {1, 3})
          for (bool numerics : {false, true}) {
            SCOPED_TRACE("K=" + std::to_string(K) + " M=" + std::to_string(M) +
                         " isa=" + std::to_string(int(isa)) + " threads=" + std::to_string(nt) +
                         (numerics ? " llamacpp_numerics" : ""));
            ComputeContext ctx;
            ctx.n_threads = nt;
            ctx.max_isa = isa;
            ctx.llamacpp_numerics = numerics;
            kt::Tensor d1(GgmlType::F32, N, M, ne12);
            for (int64_t i = 0; i < N * M * ne12; ++i) d1.f32()[i] = std::nanf("");
            ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
            for (int64_t i = 0; i < N * M * ne12; ++i)
              ASSERT_EQ(std::memcmp(&d1.f32()[i], &d0.f32()[i], 4), 0) << "element " << i;
          }
      }
      if (DetectIsa() >= IsaLevel::kAvx2 && K > 96) {  // the plain AVX2 vec_dot: another order
        ComputeContext ctx;
        ctx.max_isa = IsaLevel::kAvx2;
        ctx.llamacpp_numerics = true;
        kt::Tensor d2(GgmlType::F32, N, M, ne12);
        ASSERT_TRUE(MulMat(ctx, w.v, b.v, d2.v).ok());
        int64_t differ = 0;
        for (int64_t i = 0; i < N * M * ne12; ++i) differ += std::memcmp(&d2.f32()[i], &d0.f32()[i], 4) != 0;
        EXPECT_GT(differ, N * M * ne12 / 4);
      }
    }
  }
}

TEST(CpuRepackMXFP4, Refusals) {
  std::vector<uint8_t> out(RowSize(GgmlType::MXFP4, 64) * 16);
  kt::Tensor w12 = RandomMXFP4Bytes(64, 12, 1, 3);  // 12 rows: not a multiple of 8
  EXPECT_FALSE(CanRepackMXFP4(w12.v));
  EXPECT_EQ(RepackLayoutFor(w12.v), kLayoutPlain);
  const Status s = RepackMXFP4(w12.v, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("MXFP4 tensor with ne1 % 8"), std::string::npos) << s.message();
  kt::Tensor q4_0 = RandomQ4_0(64, 8, 1, 4);
  EXPECT_FALSE(CanRepackMXFP4(q4_0.v));
  EXPECT_EQ(RepackWeight(q4_0.v, kLayoutMXFP4x8, out.data()).code(), StatusCode::kInvalidArgument);
  ComputeContext ctx;
  kt::Tensor b(GgmlType::F32, 64, 1), d8(GgmlType::F32, 8, 1), d12(GgmlType::F32, 12, 1);
  TensorView bad = q4_0.v;
  bad.layout = kLayoutMXFP4x8;
  const Status st = MulMat(ctx, bad, b.v, d8.v);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("MXFP4x8 layout needs a MXFP4 src0"), std::string::npos) << st.message();
  TensorView bad12 = w12.v;
  bad12.layout = kLayoutMXFP4x8;
  EXPECT_EQ(MulMat(ctx, bad12, b.v, d12.v).code(), StatusCode::kInvalidArgument);
  kt::Tensor idx(GgmlType::I32, 1), rows(GgmlType::F32, 64, 1);
  kt::Tensor w8 = RandomMXFP4Bytes(64, 8, 1, 5);
  TensorView r8 = w8.v;
  r8.layout = kLayoutMXFP4x8;
  EXPECT_EQ(GetRows(ctx, r8, idx.v, rows.v).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stowage::cpu
