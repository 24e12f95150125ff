// SIMD kernels (AVX2, AVX-512/VNNI) against the scalar reference, on the same inputs. Skips the
// levels this CPU does not have.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels.h"
#include "test_util.h"

#if defined(__x86_64__) || defined(_M_X64)  // the SIMD translation units exist on x86-64 only
namespace stowage::cpu {
namespace {

// A random row of `type` holding n elements (quantized from uniform floats).
std::vector<uint8_t> RandomRow(GgmlType type, int64_t n, uint32_t seed) {
  std::vector<float> x(static_cast<size_t>(n));
  kt::FillUniform(x, seed, -2.f, 2.f);
  std::vector<uint8_t> out(RowSize(type, n) + 64);
  EXPECT_TRUE(QuantizeRow(type, x.data(), out.data(), n).ok());
  return out;
}

struct Case {
  GgmlType w;
  VecDotFn a2;
  VecDotFn a5;
  bool needs_vnni;
};

TEST(CpuSimd, VecDotsMatchScalar) {
  if (DetectIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  const bool has512 = DetectIsa() >= IsaLevel::kAvx512;
  const Case cases[] = {
      {GgmlType::F32, avx2::VecDotF32, avx512::VecDotF32, false},
      {GgmlType::F16, avx2::VecDotF16, avx512::VecDotF16, false},
      {GgmlType::Q8_0, avx2::VecDotQ8_0Q8_0, avx512::VecDotQ8_0Q8_0, true},
      {GgmlType::Q4_0, avx2::VecDotQ4_0Q8_0, avx512::VecDotQ4_0Q8_0, true},
      {GgmlType::Q4_K, avx2::VecDotQ4_KQ8_K, avx512::VecDotQ4_KQ8_K, true},
      {GgmlType::Q6_K, avx2::VecDotQ6_KQ8_K, avx512::VecDotQ6_KQ8_K, true},
      {GgmlType::BF16, avx2::VecDotBF16, nullptr, false},
      {GgmlType::Q4_1, avx2::VecDotQ4_1Q8_1, nullptr, false},
      {GgmlType::Q5_0, avx2::VecDotQ5_0Q8_0, nullptr, false},
      {GgmlType::Q5_1, avx2::VecDotQ5_1Q8_1, nullptr, false},
      {GgmlType::Q2_K, avx2::VecDotQ2_KQ8_K, nullptr, false},
      {GgmlType::Q3_K, avx2::VecDotQ3_KQ8_K, nullptr, false},
      {GgmlType::Q5_K, avx2::VecDotQ5_KQ8_K, nullptr, false},
      {GgmlType::IQ4_NL, avx2::VecDotIQ4_NLQ8_0, nullptr, false},
      {GgmlType::IQ4_XS, avx2::VecDotIQ4_XSQ8_K, nullptr, false},
      {GgmlType::MXFP4, avx2::VecDotMXFP4Q8_0, nullptr, false},
  };
  for (const Case& c : cases) {
    const TypeKernels* ref = GetTypeKernels(c.w, IsaLevel::kScalar);
    ASSERT_NE(ref, nullptr);
    const int64_t bs =
        std::max<int64_t>(GetTypeTraits(c.w).block_size, GetTypeTraits(ref->vec_dot_type).block_size);
    const std::vector<int64_t> sizes =
        bs == 1 ? std::vector<int64_t>{1, 7, 8, 15, 16, 17, 31, 64, 172, 1000, 4099}
                : std::vector<int64_t>{bs, 2 * bs, 5 * bs, 33 * bs};
    for (int64_t n : sizes) {
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        const bool has_quantizer = QuantizeRow(c.w, nullptr, nullptr, 0).ok();
        std::vector<uint8_t> x = has_quantizer ? RandomRow(c.w, n, seed) : kt::RandomBlocks(c.w, n, seed);
        x.resize(x.size() + 64);
        std::vector<float> yf(static_cast<size_t>(n));
        kt::FillUniform(yf, seed + 100, -3.f, 3.f);
        std::vector<uint8_t> y(RowSize(ref->vec_dot_type, n) + 64);
        if (ref->from_float)
          ref->from_float(yf.data(), y.data(), n);
        else
          std::memcpy(y.data(), yf.data(), size_t(n) * 4);
        // Magnitude scale for the tolerance: sum |x_i y_i| from dequantized values.
        std::vector<float> xd(static_cast<size_t>(n)), yd(static_cast<size_t>(n));
        ASSERT_TRUE(DequantizeRow(c.w, x.data(), xd.data(), n).ok());
        double mag = 0;
        if (ref->vec_dot_type == GgmlType::Q8_K) {
          for (int64_t b = 0; b < n / 256; ++b) {
            const BlockQ8_K* blk = reinterpret_cast<const BlockQ8_K*>(y.data()) + b;
            for (int j = 0; j < 256; ++j) yd[size_t(b * 256 + j)] = blk->d * blk->qs[j];
          }
        } else {
          ASSERT_TRUE(DequantizeRow(ref->vec_dot_type, y.data(), yd.data(), n).ok());
        }
        for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(xd[size_t(i)]) * yd[size_t(i)]);
        float s_ref = 0, s2 = 0, s5 = 0;
        ref->vec_dot(n, &s_ref, x.data(), y.data());
        c.a2(n, &s2, x.data(), y.data());
        const double tol = 1e-5 * mag + 1e-6;
        EXPECT_NEAR(s2, s_ref, tol) << GgmlTypeName(c.w) << " avx2 n=" << n;
        if (c.a5 && has512 && (!c.needs_vnni || DetectIsa() >= IsaLevel::kAvx512Vnni)) {
          c.a5(n, &s5, x.data(), y.data());
          EXPECT_NEAR(s5, s_ref, tol) << GgmlTypeName(c.w) << " avx512 n=" << n;
        }
      }
    }
  }
}

TEST(CpuSimd, FromFloatF16MatchesScalar) {
  if (DetectIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  std::vector<float> x(1037);
  kt::FillUniform(x, 3, -70000.f, 70000.f);
  for (size_t i = 0; i < x.size(); i += 3) x[i] *= 1e-8f;
  std::vector<uint16_t> a(x.size()), b(x.size());
  FromFloatF16(x.data(), a.data(), int64_t(x.size()));
  avx2::FromFloatF16(x.data(), b.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(a[i], b[i]) << x[i];
}

// The AVX2 activation quantizers store QuantizeRowQ8_0Act's / _Q8_1Act's bytes: random magnitudes
// (ties of x * id at .5 included by scaling integers), all-zero blocks, one-element blocks, NaN and
// +-inf blocks, denormals.
TEST(CpuSimd, QuantizeRowQ8ActMatchesScalar) {
  if (DetectIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  const int64_t nb = 64, n = nb * 32;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::vector<float> x(static_cast<size_t>(n));
    kt::FillUniform(x, seed, -1.f, 1.f);
    for (int64_t b = 0; b < nb; ++b) {
      float* blk = x.data() + b * 32;
      const float scale = std::ldexp(1.0f, int(b % 41) - 20);
      for (int j = 0; j < 32; ++j) blk[j] *= scale;
      switch (b % 8) {
        case 1:
          std::fill(blk, blk + 32, 0.0f);
          break;
        case 2:
          std::fill(blk, blk + 32, 0.0f), blk[seed % 32] = -3.5f;
          break;
        case 3:
          blk[seed % 32] = std::numeric_limits<float>::quiet_NaN();
          break;
        case 4:
          blk[(seed * 7) % 32] = (seed & 1 ? 1 : -1) * std::numeric_limits<float>::infinity();
          break;
        case 5:  // x * id lands on .5 ties: integers and half-integers against amax = 127
          for (int j = 0; j < 32; ++j) blk[j] = float(int(j * 9 + seed) % 255 - 127) * (j % 2 ? 0.5f : 1.f);
          blk[0] = 127.f;
          break;
        case 6:
          for (int j = 0; j < 32; ++j) blk[j] *= 1e-38f;
          break;  // 127 / amax overflows
        case 7:   // the same with one sign (Q8_1's sum of 32 * INT32_MIN wraps to 0, as ggml's)
          std::fill(blk, blk + 32, (seed & 1 ? 1 : -1) * 1e-38f);
          blk[seed % 32] = -0.0f;
          break;
        default:
          break;
      }
    }
    std::vector<BlockQ8_0> a0(static_cast<size_t>(nb)), b0(static_cast<size_t>(nb));
    QuantizeRowQ8_0Act(x.data(), a0.data(), n);
    avx2::QuantizeRowQ8_0Act(x.data(), b0.data(), n);
    EXPECT_EQ(0, std::memcmp(a0.data(), b0.data(), sizeof(BlockQ8_0) * size_t(nb))) << "Q8_0, seed " << seed;
    std::vector<BlockQ8_1> a1(static_cast<size_t>(nb)), b1(static_cast<size_t>(nb));
    QuantizeRowQ8_1Act(x.data(), a1.data(), n);
    avx2::QuantizeRowQ8_1Act(x.data(), b1.data(), n);
    EXPECT_EQ(0, std::memcmp(a1.data(), b1.data(), sizeof(BlockQ8_1) * size_t(nb))) << "Q8_1, seed " << seed;
  }
}

// ---- SILU / SWIGLU rows ---------------------------------------------------------------------------

struct SiluLevel {
  const char* name;
  IsaLevel isa;
  SiluRowFn silu;
  SwiGluRowFn swiglu;
};

// The SIMD levels this CPU can run (AVX2 before AVX-512).
std::vector<SiluLevel> SimdSiluLevels() {
  std::vector<SiluLevel> v;
  if (DetectIsa() >= IsaLevel::kAvx2)
    v.push_back({"avx2", IsaLevel::kAvx2, avx2::SiluRowF32, avx2::SwiGluRowF32});
  if (DetectIsa() >= IsaLevel::kAvx512)
    v.push_back({"avx512", IsaLevel::kAvx512, avx512::SiluRowF32, avx512::SwiGluRowF32});
  return v;
}

// Special inputs: signed zeros, denormals, the exp overflow/underflow edges (expf(-x) overflows for
// x < -88.7228), large magnitudes, infinities and NaN.
std::vector<float> SiluSpecials() {
  const float inf = std::numeric_limits<float>::infinity(), big = std::numeric_limits<float>::max();
  return {0.0f,
          -0.0f,
          1e-40f,
          -1e-40f,
          1.17549435e-38f,
          -1.17549435e-38f,
          1e-7f,
          -1e-7f,
          16.6f,
          -16.6f,
          17.5f,
          -17.5f,
          87.0f,
          -87.0f,
          87.4f,
          -87.4f,
          88.0f,
          -88.0f,
          88.29f,
          -88.29f,
          88.31f,
          -88.31f,
          88.72f,
          -88.72f,
          88.73f,
          -88.73f,
          89.0f,
          -89.0f,
          100.0f,
          -100.0f,
          103.9f,
          -103.9f,
          104.5f,
          -104.5f,
          150.0f,
          -150.0f,
          199.0f,
          -199.0f,
          201.0f,
          -201.0f,
          1e10f,
          -1e10f,
          1e30f,
          -1e30f,
          big,
          -big,
          inf,
          -inf,
          std::numeric_limits<float>::quiet_NaN()};
}

// Tolerance of a SIMD level against the scalar reference. The reference x / (1 + expf(-x)) is
// within ~1.5 ulp of the exact value (glibc expf < 1 ulp, then a correctly rounded add and divide,
// and the quotient is well conditioned: d(silu)/silu w.r.t. exp's error is e / (1 + e) < 1). The
// SIMD levels use the same formula with an exp within ~2 ulp, so |simd - ref| <= ~4 ulp = 4 * 2^-23
// relative = 4.8e-7; 2e-6 (~17 ulp) leaves room while still catching any wrong coefficient, range
// reduction or clamp (those give errors >= 1e-5; measured on AVX2 and AVX-512: 2.2e-7 for SILU,
// 2.8e-7 for SWIGLU with its extra multiply). The absolute 1e-30 only matters for x < -87,
// where the exact result (< 1e-35) is below float's normal range or the levels flush to -0.
bool SiluClose(float ref, float got, double* rel_out) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got);
  if (ref == got) return ref != 0.0f || std::signbit(ref) == std::signbit(got);  // zeros: same sign
  if (std::isinf(ref) || std::isinf(got)) return false;
  const double d = std::fabs(double(got) - double(ref));
  if (d <= 1e-30) return true;
  const double rel = d / std::fabs(double(ref));
  *rel_out = std::max(*rel_out, rel);
  return rel <= 2e-6;
}

TEST(CpuSimd, SiluRowsMatchScalar) {
  const std::vector<SiluLevel> levels = SimdSiluLevels();
  if (levels.empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  const std::vector<float> specials = SiluSpecials();
  for (const SiluLevel& lv : levels) {
    double max_rel_silu = 0, max_rel_glu = 0;
    for (int64_t n : {int64_t(1), int64_t(15), int64_t(16), int64_t(17), int64_t(5632), int64_t(5633),
                      int64_t(specials.size())}) {
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        std::vector<float> x(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        kt::FillUniform(x, seed, -20.f, 20.f);
        kt::FillUniform(b, seed + 50, -3.f, 3.f);
        // Special values at spread positions (every lane index and the tail get some).
        if (n == int64_t(specials.size()))
          x = specials;
        else if (n > 64)
          for (size_t j = 0; j < specials.size(); ++j) x[(j * 131 + seed) % size_t(n)] = specials[j];
        std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n) + 1, 12345.f);
        scalar::SiluRowF32(n, x.data(), ref.data());
        lv.silu(n, x.data(), got.data());
        EXPECT_EQ(got[size_t(n)], 12345.f) << lv.name << " wrote past n=" << n;
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(SiluClose(ref[size_t(i)], got[size_t(i)], &max_rel_silu))
              << lv.name << " silu n=" << n << " i=" << i << " x=" << x[size_t(i)]
              << " ref=" << ref[size_t(i)] << " got=" << got[size_t(i)];
        scalar::SwiGluRowF32(n, x.data(), b.data(), ref.data());
        lv.swiglu(n, x.data(), b.data(), got.data());
        EXPECT_EQ(got[size_t(n)], 12345.f) << lv.name << " wrote past n=" << n;
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(SiluClose(ref[size_t(i)], got[size_t(i)], &max_rel_glu))
              << lv.name << " swiglu n=" << n << " i=" << i << " a=" << x[size_t(i)] << " b=" << b[size_t(i)]
              << " ref=" << ref[size_t(i)] << " got=" << got[size_t(i)];
      }
    }
    std::printf("[silu] %s: max relative error vs scalar: silu %.3g, swiglu %.3g\n", lv.name, max_rel_silu,
                max_rel_glu);
  }
}

// The SIMD levels against the exact value (double precision), on a dense sweep of [-88.25, 90] (the
// range where every level computes a normal result instead of flushing to -0): a bound in ulp of the
// result, independent of the scalar reference's own rounding.
TEST(CpuSimd, SiluRowsNearExact) {
  const std::vector<SiluLevel> levels = SimdSiluLevels();
  if (levels.empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  std::vector<float> x;
  for (float v = -88.25f; v <= 90.f; v += 0.00137f) x.push_back(v);
  const int64_t n = int64_t(x.size());
  std::vector<float> y(x.size());
  auto max_ulp = [&](SiluRowFn f) {
    f(n, x.data(), y.data());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = double(x[i]) / (1.0 + std::exp(-double(x[i])));
      const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
      worst = std::max(worst, std::fabs(double(y[i]) - exact) / ulp);
    }
    return worst;
  };
  const double ref_ulp = max_ulp(scalar::SiluRowF32);
  std::printf("[silu] scalar: max error vs exact %.2f ulp\n", ref_ulp);
  for (const SiluLevel& lv : levels) {
    const double u = max_ulp(lv.silu);
    std::printf("[silu] %s: max error vs exact %.2f ulp\n", lv.name, u);
    // exp within ~2 ulp, damped by e / (1 + e) < 1, plus the correctly rounded add and divide.
    EXPECT_LE(u, 4.0) << lv.name;
  }
}

TEST(CpuSimd, SiluSpecialValues) {
  std::vector<SiluLevel> levels = SimdSiluLevels();
  levels.insert(levels.begin(), {"scalar", IsaLevel::kScalar, scalar::SiluRowF32, scalar::SwiGluRowF32});
  const float inf = std::numeric_limits<float>::infinity(), big = std::numeric_limits<float>::max();
  const float x[] = {
      inf,   -inf,  std::numeric_limits<float>::quiet_NaN(), 100.f, -100.f, big, -big, -0.0f, 0.0f,
      1e30f, -1e30f};
  const int64_t n = int64_t(sizeof(x) / sizeof(x[0]));
  for (const SiluLevel& lv : levels) {
    std::vector<float> y(static_cast<size_t>(n));
    lv.silu(n, x, y.data());
    EXPECT_EQ(y[0], inf) << lv.name;
    EXPECT_TRUE(y[1] == 0.0f && std::signbit(y[1])) << lv.name << " silu(-inf) = " << y[1];
    EXPECT_TRUE(std::isnan(y[2])) << lv.name;
    EXPECT_EQ(y[3], 100.f) << lv.name;
    EXPECT_TRUE(y[4] <= 0.0f && std::fabs(y[4]) < 1e-30f) << lv.name << " silu(-100) = " << y[4];
    EXPECT_EQ(y[5], big) << lv.name;
    EXPECT_TRUE(y[6] == 0.0f && std::signbit(y[6])) << lv.name << " silu(-max) = " << y[6];
    EXPECT_TRUE(y[7] == 0.0f && std::signbit(y[7])) << lv.name << " silu(-0) = " << y[7];
    EXPECT_TRUE(y[8] == 0.0f && !std::signbit(y[8])) << lv.name << " silu(+0) = " << y[8];
    EXPECT_EQ(y[9], 1e30f) << lv.name;
    EXPECT_TRUE(y[10] == 0.0f && std::signbit(y[10])) << lv.name << " silu(-1e30) = " << y[10];
    // GLU: silu(a) * b with the same specials; b = 2 keeps every value exact but the sign of zero.
    const std::vector<float> two(size_t(n), 2.0f);
    std::vector<float> g(static_cast<size_t>(n));
    lv.swiglu(n, x, two.data(), g.data());
    for (size_t i = 0; i < size_t(n); ++i) {
      if (std::isnan(y[i]))
        EXPECT_TRUE(std::isnan(g[i])) << lv.name << " i=" << i;
      else
        EXPECT_EQ(g[i], y[i] * 2.0f) << lv.name << " i=" << i;
    }
  }
}

TEST(CpuSimd, SiluRowsInPlace) {
  std::vector<SiluLevel> levels = SimdSiluLevels();
  levels.insert(levels.begin(), {"scalar", IsaLevel::kScalar, scalar::SiluRowF32, scalar::SwiGluRowF32});
  for (const SiluLevel& lv : levels) {
    for (int64_t n : {int64_t(1), int64_t(17), int64_t(5633)}) {
      std::vector<float> x(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      kt::FillUniform(x, 7, -20.f, 20.f);
      kt::FillUniform(b, 8, -3.f, 3.f);
      std::vector<float> want(static_cast<size_t>(n)), inplace = x;
      lv.silu(n, x.data(), want.data());
      lv.silu(n, inplace.data(), inplace.data());
      EXPECT_EQ(inplace, want) << lv.name << " silu in place, n=" << n;
      lv.swiglu(n, x.data(), b.data(), want.data());
      std::vector<float> ya = x, yb = b;
      lv.swiglu(n, ya.data(), b.data(), ya.data());
      lv.swiglu(n, x.data(), yb.data(), yb.data());
      EXPECT_EQ(ya, want) << lv.name << " swiglu y == a, n=" << n;
      EXPECT_EQ(yb, want) << lv.name << " swiglu y == b, n=" << n;
    }
  }
}

// kernels.h GetRowKernels: each level's kernel of each row function (the levels the CPU lacks
// clamped to DetectIsa()), as the per-function dispatchers chose before the table.
TEST(CpuSimd, RowKernelsDispatch) {
  struct Want {
    SiluRowFn silu;
    SwiGluRowFn swiglu;
    RopeRotateFn rope;
    SumSquares8Fn sum_squares8;
    CvtF32F16StridedFn cvt;
    MadF16Fn mad;
    ScaleF16Fn scale;
    FlashF16RowsFn flash;
  };
  const Want scalar_row = {scalar::SiluRowF32,  scalar::SwiGluRowF32,     scalar::RopeRotate,
                           scalar::SumSquares8, scalar::CvtF32F16Strided, scalar::MadF16,
                           scalar::ScaleF16,    scalar::FlashF16Rows};
  const Want avx2_row = {avx2::SiluRowF32,       avx2::SwiGluRowF32, avx2::RopeRotate, avx2::SumSquares8,
                         avx2::CvtF32F16Strided, avx2::MadF16,       avx2::ScaleF16,   avx2::FlashF16Rows};
  const Want avx512_row = {avx512::SiluRowF32,  avx512::SwiGluRowF32,   avx2::RopeRotate,
                           avx512::SumSquares8, avx2::CvtF32F16Strided, avx512::MadF16,
                           avx512::ScaleF16,    avx512::FlashF16Rows};
  const Want by_level[] = {scalar_row, avx2_row, avx512_row, avx512_row};  // VNNI: no row kernel
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    const Want& w = by_level[std::min(int(isa), int(DetectIsa()))];
    const RowKernels& k = GetRowKernels(isa);
    EXPECT_EQ(k.silu_row, w.silu) << int(isa);
    EXPECT_EQ(k.swiglu_row, w.swiglu) << int(isa);
    EXPECT_EQ(k.rope_rotate, w.rope) << int(isa);
    EXPECT_EQ(k.sum_squares8, w.sum_squares8) << int(isa);
    EXPECT_EQ(k.cvt_f32_f16_strided, w.cvt) << int(isa);
    EXPECT_EQ(k.mad_f16, w.mad) << int(isa);
    EXPECT_EQ(k.scale_f16, w.scale) << int(isa);
    EXPECT_EQ(k.flash_f16_rows, w.flash) << int(isa);
  }
}

// RMS_NORM's sums of squares: every level gives the scalar reference's eight partial sums bit for
// bit (the same double lanes added in the same order), from any starting sums, for every length.
TEST(CpuSimd, SumSquares8MatchScalar) {
  std::vector<std::pair<const char*, SumSquares8Fn>> levels;
  if (DetectIsa() >= IsaLevel::kAvx2) levels.push_back({"avx2", avx2::SumSquares8});
  if (DetectIsa() >= IsaLevel::kAvx512) levels.push_back({"avx512", avx512::SumSquares8});
  if (levels.empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  std::vector<float> x(8 * 700);
  kt::FillUniform(x, 77, -30.f, 30.f);
  x[5] = 1e-30f;  // a square that underflows in float
  x[13] = 3e19f;  // one that overflows to inf
  for (int64_t n8 : {0, 8, 16, 24, 2048, 8 * 700}) {
    double ref[8] = {0.5, -1, 2, 0, 1e300, 3, -7, 1e-300};
    double got[8];
    std::copy(ref, ref + 8, got);
    scalar::SumSquares8(n8, x.data(), ref);
    for (const auto& [name, fn] : levels) {
      double lv[8] = {0.5, -1, 2, 0, 1e300, 3, -7, 1e-300};
      fn(n8, x.data(), lv);
      for (int k = 0; k < 8; ++k)
        EXPECT_EQ(std::memcmp(&lv[k], &ref[k], sizeof(double)), 0)
            << name << " n8=" << n8 << " lane " << k << ": " << lv[k] << " vs " << ref[k];
    }
    (void)got;
  }
}

// The strided F32 -> F16 store (the V cache's transposed rows): every level equals FloatToHalf on
// every element, specials included, and writes nothing between the strided elements.
TEST(CpuSimd, CvtF32F16StridedMatchesScalar) {
  std::vector<float> x(300);
  kt::FillUniform(x, 78, -70000.f, 70000.f);
  const float specials[] = {0.f,     -0.f,          INFINITY,      -INFINITY, NAN,    65504.f,
                            65520.f, 5.9604645e-8f, 2.9802322e-8f, 1e-10f,    -1e-5f, 0.33333334f};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  const size_t src_stride = 3 * sizeof(float), dst_stride = 10;  // every third float, 10 bytes apart
  const int64_t n = int64_t(x.size() / 3);
  std::vector<CvtF32F16StridedFn> levels = {scalar::CvtF32F16Strided};
  if (DetectIsa() >= IsaLevel::kAvx2) levels.push_back(avx2::CvtF32F16Strided);
  for (CvtF32F16StridedFn fn : levels) {
    std::vector<uint8_t> out(size_t(n) * dst_stride, 0xAB);
    fn(n, reinterpret_cast<const char*>(x.data()), src_stride, reinterpret_cast<char*>(out.data()),
       dst_stride);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, &out[size_t(i) * dst_stride], 2);
      EXPECT_EQ(h, FloatToHalf(x[size_t(i) * 3])) << i;
      for (size_t b = 2; b < dst_stride; ++b) EXPECT_EQ(out[size_t(i) * dst_stride + b], 0xAB) << i;
    }
  }
}

// Micro-benchmark (run with --gtest_also_run_disabled_tests --gtest_filter='*SiluBench*'): ns per
// element of one 5632-element row (the FFN gate of a 0.85B llama), in L1; per level, the best of 7
// rounds of 2000 calls, the levels interleaved round by round so machine noise hits all alike.
TEST(CpuSimd, DISABLED_SiluBench) {
  std::vector<SiluLevel> levels = SimdSiluLevels();
  levels.insert(levels.begin(), {"scalar", IsaLevel::kScalar, scalar::SiluRowF32, scalar::SwiGluRowF32});
  const int64_t n = 5632;
  const int calls = 2000;
  std::vector<float> x(static_cast<size_t>(n)), b(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  kt::FillUniform(x, 1, -6.f, 6.f);
  kt::FillUniform(b, 2, -3.f, 3.f);
  std::vector<double> best_silu(levels.size(), 1e30), best_glu(levels.size(), 1e30);
  volatile float sink = 0;
  for (int round = 0; round < 7; ++round) {
    for (size_t l = 0; l < levels.size(); ++l) {
      auto t0 = std::chrono::steady_clock::now();
      for (int c = 0; c < calls; ++c) levels[l].silu(n, x.data(), y.data());
      auto t1 = std::chrono::steady_clock::now();
      sink = sink + y[size_t(round)];
      for (int c = 0; c < calls; ++c) levels[l].swiglu(n, x.data(), b.data(), y.data());
      auto t2 = std::chrono::steady_clock::now();
      sink = sink + y[size_t(round)];
      best_silu[l] = std::min(
          best_silu[l], std::chrono::duration<double, std::nano>(t1 - t0).count() / (double(calls) * n));
      best_glu[l] = std::min(best_glu[l],
                             std::chrono::duration<double, std::nano>(t2 - t1).count() / (double(calls) * n));
    }
  }
  for (size_t l = 0; l < levels.size(); ++l)
    std::printf("[silu bench] n=%lld %-7s silu %.3f ns/elem (x%.1f)  swiglu %.3f ns/elem (x%.1f)\n",
                (long long)n, levels[l].name, best_silu[l], best_silu[0] / best_silu[l], best_glu[l],
                best_glu[0] / best_glu[l]);
}

}  // namespace
}  // namespace stowage::cpu
#endif
