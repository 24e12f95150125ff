// SIMD kernels (AVX2, AVX-512/VNNI) against the scalar reference, on the same inputs. Skips the
// levels this CPU does not have.
#include <gtest/gtest.h>

#include <cmath>

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

struct Case { GgmlType w; VecDotFn a2; VecDotFn a5; bool needs_vnni; };

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
  };
  for (const Case& c : cases) {
    const TypeKernels* ref = GetTypeKernels(c.w, IsaLevel::kScalar);
    ASSERT_NE(ref, nullptr);
    const int64_t bs = std::max<int64_t>(GetTypeTraits(c.w).block_size, GetTypeTraits(ref->vec_dot_type).block_size);
    const std::vector<int64_t> sizes = bs == 1 ? std::vector<int64_t>{1, 7, 8, 15, 16, 17, 31, 64, 172, 1000, 4099}
                                               : std::vector<int64_t>{bs, 2 * bs, 5 * bs, 33 * bs};
    for (int64_t n : sizes) {
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        const bool has_quantizer = QuantizeRow(c.w, nullptr, nullptr, 0).ok();
        std::vector<uint8_t> x = has_quantizer ? RandomRow(c.w, n, seed) : kt::RandomBlocks(c.w, n, seed);
        x.resize(x.size() + 64);
        std::vector<float> yf(static_cast<size_t>(n));
        kt::FillUniform(yf, seed + 100, -3.f, 3.f);
        std::vector<uint8_t> y(RowSize(ref->vec_dot_type, n) + 64);
        if (ref->from_float) ref->from_float(yf.data(), y.data(), n);
        else std::memcpy(y.data(), yf.data(), size_t(n) * 4);
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
        if (c.a5 && has512 && (!c.needs_vnni || CpuHasAvx512Vnni())) {
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

}  // namespace
}  // namespace stowage::cpu
#endif
