// FLASH_ATTN_EXT (ops_attn.cpp) against a double-precision softmax attention, on random shapes:
// head sizes 8..128 (odd multiples of the block size included), GQA ratios 1..4, n_tokens 1..9,
// causal masks with -inf cells, ALiBi, logit soft-capping, K/V of F32, F16, BF16 and Q8_0/Q4_0
// (the KV cache types), every ISA level and 1 or 2 threads; the F16 accumulator kernels against
// their scalar reference bit for bit; the errors for bad shapes and types.
//
// Reference: q converted to K's vec_dot type and back (F16 for F16 K, Q8_0 for quantized K: the
// kernel multiplies exactly those values), K and V rows dequantized; s = dot * scale (softcap:
// c * tanh(s / c)) + slope * mask, softmax and the weighted V sum in double. Error bound: the dot
// products are exact up to F32 summation (K * 2^-22 * sum|k q|, cpu_attn_test's argument) and the
// F32 accumulator adds a few ulps per key; an F16 accumulator rounds at every key to 11 bits
// (relative 2^-11 of a value at most max|v| times the running weight sum), so the result is within
// n_kv * 2^-10 * max|v| of exact -- the bound used for F16 V, 1e-5 * n_kv for the others.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {

struct Shape {
  int64_t D, n_kv, Hkv, r, N;
  GgmlType tk, tv;
  float max_bias = 0.f, softcap = 0.f;
  bool mask = true;
  bool sinks = false;  // ggml_flash_attn_ext_add_sinks: one logit per query head in [-3, 6)
  /// V as the first Dv values of the K rows (a view of K, deepseek2's MLA cache); 0: V rows of D.
  int64_t Dv = 0;
  int64_t dv() const { return Dv != 0 ? Dv : D; }
};

struct Problem {
  Shape s;
  kt::Tensor q, mask, dst, sink;
  std::vector<uint8_t> k, v;  // [D, n_kv, Hkv] rows of the cache types
  TensorView kv_, vv_;
  Problem(const Shape& sh, uint32_t seed)
      : s(sh),
        q(GgmlType::F32, sh.D, sh.N, sh.Hkv * sh.r),
        mask(GgmlType::F16, sh.n_kv, sh.N),
        dst(GgmlType::F32, sh.dv(), sh.Hkv * sh.r, sh.N),
        sink(GgmlType::F32, sh.Hkv * sh.r) {
    kt::Fill(q, seed, -2.f, 2.f);
    kt::Fill(sink, seed + 3, -3.f, 6.f);  // above and below the rows' maxima: both branches
    k = Rows(sh.tk, seed + 1, 1.f);
    v = Rows(sh.tv, seed + 2, 1.f);
    // Causal: token t sees the first n_kv - N + t + 1 cells; a few cells stay fully masked.
    for (int64_t t = 0; t < sh.N; ++t)
      for (int64_t c = 0; c < sh.n_kv; ++c) {
        const bool visible = c <= sh.n_kv - sh.N + t && c != 1;
        mask.u16()[t * sh.n_kv + c] = Fp32ToFp16(visible ? (sh.max_bias > 0 ? -float(sh.n_kv - c) : 0.f)
                                                         : -std::numeric_limits<float>::infinity());
      }
    kv_ = View(sh.tk, k);
    vv_ = View(sh.tv, v);
    if (sh.Dv != 0) {  // MLA: V is a view of K's rows
      vv_ = kv_;
      vv_.ne[0] = sh.Dv;
    }
  }
  std::vector<uint8_t> Rows(GgmlType t, uint32_t seed, float amp) const {
    std::vector<float> f(size_t(s.D * s.n_kv * s.Hkv));
    kt::FillUniform(f, seed, -amp, amp);
    std::vector<uint8_t> out(RowSize(t, s.D) * size_t(s.n_kv * s.Hkv));
    EXPECT_TRUE(QuantizeRow(t, f.data(), out.data(), int64_t(f.size())).ok());
    return out;
  }
  TensorView View(GgmlType t, std::vector<uint8_t>& bytes) const {
    TensorView x;
    x.type = t;
    x.ne[0] = s.D;
    x.ne[1] = s.n_kv;
    x.ne[2] = s.Hkv;
    x.ne[3] = 1;
    x.nb[0] = GetTypeTraits(t).type_size;
    x.nb[1] = RowSize(t, s.D);
    x.nb[2] = x.nb[1] * size_t(s.n_kv);
    x.nb[3] = x.nb[2] * size_t(s.Hkv);
    x.data = bytes.data();
    return x;
  }
  float scale() const { return 1.0f / std::sqrt(float(s.D)); }
  Status Run(ComputeContext& ctx) {
    TensorView none;
    return FlashAttnExt(ctx, q.v, kv_, vv_, s.mask ? mask.v : none, dst.v, scale(), s.max_bias, s.softcap,
                        s.sinks ? sink.v : none);
  }
  // The double reference and the error bound of output element (d, h, t).
  void Reference(std::vector<double>* out, double* bound) const {
    const int64_t H = s.Hkv * s.r;
    const GgmlType vdt = GetTypeKernels(s.tk, IsaLevel::kScalar)->vec_dot_type;
    const int64_t Dv = s.dv();
    out->assign(size_t(Dv * H * s.N), 0.0);
    std::vector<float> qrow(size_t(s.D)), qq(size_t(s.D)), krow(size_t(s.D)), vrow(size_t(s.D));
    std::vector<uint8_t> qbytes(RowSize(vdt, s.D));
    const uint32_t n_head_log2 = 1u << uint32_t(std::floor(std::log2(double(H))));
    const double m0 = std::pow(2.0, -double(s.max_bias) / n_head_log2);
    const double m1 = std::pow(2.0, -(double(s.max_bias) / 2.0) / n_head_log2);
    double max_sum = 0;
    for (int64_t t = 0; t < s.N; ++t)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < s.D; ++d) qrow[size_t(d)] = float(q.at(d, t, h));
        ASSERT_TRUE(QuantizeRow(vdt, qrow.data(), qbytes.data(), s.D).ok());
        ASSERT_TRUE(DequantizeRow(vdt, qbytes.data(), qq.data(), s.D).ok());
        const double slope =
            s.max_bias > 0 ? (uint32_t(h) < n_head_log2 ? std::pow(m0, double(h + 1))
                                                        : std::pow(m1, double(2 * (h - n_head_log2) + 1)))
                           : 1.0;
        std::vector<double> w(size_t(s.n_kv), -INFINITY);
        double mx = -INFINITY;
        for (int64_t c = 0; c < s.n_kv; ++c) {
          const double mv = s.mask ? slope * mask.at(c, t) : 0.0;
          if (mv == -INFINITY) continue;
          ASSERT_TRUE(DequantizeRow(s.tk, Row(kv_, c, h / s.r), krow.data(), s.D).ok());
          double dot = 0, abs = 0;
          for (int64_t d = 0; d < s.D; ++d) {
            dot += double(krow[size_t(d)]) * qq[size_t(d)];
            abs += std::fabs(double(krow[size_t(d)]) * qq[size_t(d)]);
          }
          max_sum = std::max(max_sum, abs * scale());
          double x = dot * scale();
          if (s.softcap != 0) x = s.softcap * std::tanh(x / s.softcap);
          w[size_t(c)] = x + mv;
          mx = std::max(mx, w[size_t(c)]);
        }
        double S = 0;
        for (double& x : w) S += (x = std::exp(x - mx));
        if (s.sinks) S += std::exp(sink.at(h) - mx);  // a logit without a value
        for (int64_t c = 0; c < s.n_kv; ++c) {
          if (w[size_t(c)] == 0) continue;
          ASSERT_TRUE(DequantizeRow(vv_.type, Row(vv_, c, h / s.r), vrow.data(), Dv).ok());
          for (int64_t d = 0; d < Dv; ++d)
            (*out)[size_t((t * H + h) * Dv + d)] += w[size_t(c)] / S * vrow[size_t(d)];
        }
      }
    // Dots: K * 2^-22 * sum|k q| moves s (and so every weight by a factor e^err); the weights sum to 1
    // and |v| <= 1, plus the accumulator's rounding.
    const double dot_err = double(s.D) * std::ldexp(1.0, -22) * max_sum * 2;
    const double acc_err =
        s.tv == GgmlType::F16 ? double(s.n_kv) * std::ldexp(1.0, -10) : 1e-5 * double(s.n_kv);
    *bound = dot_err + acc_err + 1e-6;
  }
  static const void* Row(const TensorView& x, int64_t c, int64_t h) {
    return static_cast<const char*>(x.data) + c * x.nb[1] + h * x.nb[2];
  }
};

void CheckAgainstReference(const Shape& s, uint32_t seed) {
  Problem p(s, seed);
  std::vector<double> want;
  double bound = 0;
  p.Reference(&want, &bound);
  const int64_t H = s.Hkv * s.r;
  std::vector<float> first;
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni})
    for (int threads : {1, 2}) {
      ComputeContext ctx = kt::Ctx(threads);
      ctx.max_isa = isa;
      const int64_t Dv = s.dv();
      std::fill(p.dst.f32(), p.dst.f32() + Dv * H * s.N, -7.f);
      ASSERT_TRUE(p.Run(ctx).ok());
      double worst = 0;
      for (int64_t t = 0; t < s.N; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < Dv; ++d)
            worst =
                std::max(worst, std::fabs(double(p.dst.at(d, h, t)) - want[size_t((t * H + h) * Dv + d)]));
      EXPECT_LE(worst, bound) << "D " << s.D << " n_kv " << s.n_kv << " Hkv " << s.Hkv << " r " << s.r
                              << " N " << s.N << " k " << GgmlTypeName(s.tk) << " v " << GgmlTypeName(s.tv)
                              << " isa " << int(isa) << " threads " << threads;
      // Rows are independent: the thread count never changes a bit.
      std::vector<float> got(p.dst.f32(), p.dst.f32() + Dv * H * s.N);
      if (threads == 1)
        first = got;
      else
        EXPECT_EQ(got, first) << "1 and 2 threads differ at isa " << int(isa);
    }
}

TEST(CpuFlashAttn, MatchesReferenceOnRandomShapes) {
  const std::vector<Shape> shapes = {
      {64, 32, 2, 2, 1, GgmlType::F16, GgmlType::F16},   // token generation, GQA 2
      {64, 40, 2, 2, 5, GgmlType::F16, GgmlType::F16},   // a small prompt
      {8, 17, 4, 2, 3, GgmlType::F16, GgmlType::F16},    // stories260K's head size, odd n_kv
      {128, 24, 1, 4, 2, GgmlType::F16, GgmlType::F32},  // F32 accumulator
      {96, 33, 2, 1, 9, GgmlType::F32, GgmlType::F32},   {64, 20, 2, 3, 2, GgmlType::BF16, GgmlType::BF16},
      {64, 31, 2, 2, 3, GgmlType::Q8_0, GgmlType::Q8_0},  // quantized cache: q quantized to Q8_0
      {96, 19, 1, 2, 2, GgmlType::Q4_0, GgmlType::F16},  {32, 16, 4, 2, 4, GgmlType::F16, GgmlType::Q8_0},
  };
  uint32_t seed = 100;
  for (const Shape& s : shapes) CheckAgainstReference(s, seed += 7);
}

// deepseek2's MLA: one K head of kv_lora_rank + n_rot shared by every query head, V its first
// kv_lora_rank values (a view of the same cells): V rows narrower than K's.
TEST(CpuFlashAttn, MlaValueIsAViewOfTheKeys) {
  for (const GgmlType t : {GgmlType::F16, GgmlType::F32, GgmlType::Q8_0}) {
    Shape mla{96, 37, 1, 4, 3, t, t};
    mla.Dv = 64;
    CheckAgainstReference(mla, 11);
    mla.N = 1;  // token generation
    CheckAgainstReference(mla, 12);
  }
}

TEST(CpuFlashAttn, AlibiSoftcapAndNoMask) {
  Shape alibi{32, 21, 3, 2, 3, GgmlType::F16, GgmlType::F16};
  alibi.max_bias = 8.0f;  // 6 heads: n_head_log2 = 4, both slope branches
  CheckAgainstReference(alibi, 7);
  Shape cap{64, 18, 2, 2, 2, GgmlType::F16, GgmlType::F32};
  cap.softcap = 30.0f;
  CheckAgainstReference(cap, 8);
  Shape nomask{16, 12, 2, 1, 3, GgmlType::F32, GgmlType::F16};
  nomask.mask = false;
  CheckAgainstReference(nomask, 9);
}

// gpt-oss's attention sinks: F16 V in registers (D 64) and in memory (D 256 on AVX-512), F32 V,
// GQA groups of 4 query heads with their own sinks, and without a mask.
TEST(CpuFlashAttn, Sinks) {
  std::vector<Shape> shapes = {{64, 40, 2, 4, 5, GgmlType::F16, GgmlType::F16},
                               {256, 17, 1, 2, 2, GgmlType::F16, GgmlType::F16},
                               {64, 23, 2, 2, 3, GgmlType::F16, GgmlType::F32},
                               {32, 12, 2, 1, 2, GgmlType::Q8_0, GgmlType::Q8_0}};
  shapes.back().mask = false;
  uint32_t seed = 300;
  for (Shape s : shapes) {
    s.sinks = true;
    CheckAgainstReference(s, seed += 11);
  }
  // A sink far below every score changes nothing; a sink of the wrong size is refused.
  Problem p(Shape{64, 20, 2, 2, 3, GgmlType::F16, GgmlType::F16}, 5);
  ComputeContext ctx = kt::Ctx(1);
  ASSERT_TRUE(p.Run(ctx).ok());
  const std::vector<float> plain(p.dst.f32(), p.dst.f32() + 64 * 4 * 3);
  for (int h = 0; h < 4; ++h) p.sink.f32()[h] = -1e30f;
  p.s.sinks = true;
  ASSERT_TRUE(p.Run(ctx).ok());
  EXPECT_EQ(std::vector<float>(p.dst.f32(), p.dst.f32() + 64 * 4 * 3), plain);
  for (int h = 0; h < 4; ++h) p.sink.f32()[h] = 1.f;
  ASSERT_TRUE(p.Run(ctx).ok());
  EXPECT_NE(std::vector<float>(p.dst.f32(), p.dst.f32() + 64 * 4 * 3), plain);
  p.sink.v.ne[0] = 2;  // the kv heads' count
  const Status st = p.Run(ctx);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("FLASH_ATTN_EXT: sinks "), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("must be contiguous F32 [n_head = 4]"), std::string::npos) << st.message();
}

TEST(CpuFlashAttn, FullyMaskedRowIsNaNAsGgml) {
  Problem p(Shape{16, 8, 1, 1, 2, GgmlType::F16, GgmlType::F16}, 3);
  for (int64_t c = 0; c < 8; ++c) p.mask.u16()[c] = Fp32ToFp16(-std::numeric_limits<float>::infinity());
  ComputeContext ctx = kt::Ctx(1);
  ASSERT_TRUE(p.Run(ctx).ok());
  EXPECT_TRUE(std::isnan(p.dst.at(0, 0, 0)));   // token 0: every cell masked
  EXPECT_FALSE(std::isnan(p.dst.at(0, 0, 1)));  // token 1 sees cells
}

TEST(CpuFlashAttn, F16AccumulatorKernelsMatchScalarBits) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  for (int64_t n : {1, 7, 8, 9, 64, 131}) {
    std::vector<fp16_t> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (auto& h : x) h = FloatToHalf(d(rng));
    for (auto& h : y) h = FloatToHalf(d(rng));
    for (float v : {0.37f, -1.5f, 1e-3f}) {
      std::vector<fp16_t> a = y, b = y;
      scalar::MadF16(n, a.data(), x.data(), v);
      GetRowKernels(IsaLevel::kAvx512).mad_f16(n, b.data(), x.data(), v);
      EXPECT_EQ(a, b) << "MadF16 n " << n;
      for (int64_t i = 0; i < n; ++i)  // one fused multiply-add, rounded once
        EXPECT_EQ(a[size_t(i)],
                  FloatToHalf(std::fma(HalfToFloat(x[size_t(i)]), v, HalfToFloat(y[size_t(i)]))));
      a = y, b = y;
      scalar::ScaleF16(n, a.data(), v);
      GetRowKernels(IsaLevel::kAvx512).scale_f16(n, b.data(), v);
      EXPECT_EQ(a, b) << "ScaleF16 n " << n;
    }
  }
}

TEST(CpuFlashAttn, FlashRowKernelsMatchScalarBits) {
  // The online softmax + F16 V sum of nh query rows sharing V rows: every level gives the scalar
  // kernel's bits (AVX-512 keeps the accumulators in registers, 4 rows at a time up to D = 64, 2 up
  // to 128, in memory above), also with cells out of order and scores that raise the maximum late.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  for (int64_t D : {8, 40, 64, 96, 128, 144}) {
    for (int64_t n : {0, 1, 5, 70, 200}) {
      for (int64_t nh : {1, 3, 4, 7}) {
        const int64_t n_rows = n + 3;
        std::vector<fp16_t> v(static_cast<size_t>(n_rows * D));
        for (auto& h : v) h = FloatToHalf(d(rng) * 0.3f);
        const size_t lds = size_t(n) + 5, ldo = size_t(D) + 3;
        std::vector<float> scores(lds * size_t(nh));
        for (auto& x : scores) x = d(rng);
        std::vector<int32_t> cells(static_cast<size_t>(n));
        for (int64_t c = 0; c < n; ++c) cells[size_t(c)] = int32_t((c * 7) % n_rows);
        std::vector<fp16_t> acc(static_cast<size_t>(D) * size_t(nh));
        std::vector<float> want(ldo * size_t(nh), -2.f), got(ldo * size_t(nh));
        const char* vb = reinterpret_cast<const char*>(v.data());
        std::vector<float> sinks(static_cast<size_t>(nh));
        for (auto& x : sinks) x = d(rng) * 2.f;  // some above the row's maximum
        for (const float* sk :
             {static_cast<const float*>(nullptr), static_cast<const float*>(sinks.data())}) {
          scalar::FlashF16Rows(D, n, nh, scores.data(), lds, vb, cells.data(), size_t(D) * 2, acc.data(),
                               size_t(D), want.data(), ldo, sk);
          for (IsaLevel isa : {IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
            std::fill(got.begin(), got.end(), -2.f);
            GetRowKernels(isa).flash_f16_rows(D, n, nh, scores.data(), lds, vb, cells.data(), size_t(D) * 2,
                                              acc.data(), size_t(D), got.data(), ldo, sk);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                << "D " << D << " n " << n << " nh " << nh << " isa " << int(isa) << " sinks "
                << (sk != nullptr);
          }
        }
      }
    }
  }
}

TEST(CpuFlashAttn, RefusesBadShapesAndTypes) {
  ComputeContext ctx = kt::Ctx(1);
  TensorView none;
  {
    Problem p(Shape{16, 8, 2, 2, 2, GgmlType::F16, GgmlType::F16}, 1);
    p.kv_.ne[0] = 8;  // K head size differs from q's
    Status st = p.Run(ctx);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(
        st.message().find("FLASH_ATTN_EXT: q f32[16,2,4,1], k f16[8,8,2,1] and v f16[16,8,2,1] do not fit"),
        std::string::npos)
        << st.message();
  }
  {
    Problem p(Shape{16, 8, 3, 1, 2, GgmlType::F16, GgmlType::F16}, 1);
    p.kv_.ne[2] = p.vv_.ne[2] = 2;  // 3 q heads over 2 KV heads
    EXPECT_NE(p.Run(ctx).message().find("do not divide"), std::string::npos);
  }
  {
    Problem p(Shape{16, 8, 2, 1, 2, GgmlType::F16, GgmlType::F16}, 1);
    kt::Tensor m32(GgmlType::F32, 8, 2);
    EXPECT_NE(FlashAttnExt(ctx, p.q.v, p.kv_, p.vv_, m32.v, p.dst.v, 1.f, 0.f, 0.f)
                  .message()
                  .find("mask: expected contiguous F16 rows"),
              std::string::npos);
    kt::Tensor m_short(GgmlType::F16, 8, 1);  // fewer rows than tokens
    EXPECT_NE(FlashAttnExt(ctx, p.q.v, p.kv_, p.vv_, m_short.v, p.dst.v, 1.f, 0.f, 0.f)
                  .message()
                  .find("does not cover [n_kv, n_tokens] = [8, 2]"),
              std::string::npos);
    EXPECT_NE(FlashAttnExt(ctx, p.q.v, p.kv_, p.vv_, none, p.dst.v, 1.f, 4.f, 0.f)
                  .message()
                  .find("ALiBi (max_bias > 0) needs a mask"),
              std::string::npos);
    kt::Tensor bad_dst(GgmlType::F32, 16, 2, 2);  // [D, n_tokens, n_head] instead of [D, n_head, n_tokens]
    kt::Tensor q3(GgmlType::F32, 16, 3, 2);
    EXPECT_NE(FlashAttnExt(ctx, q3.v, p.kv_, p.vv_, none, bad_dst.v, 1.f, 0.f, 0.f)
                  .message()
                  .find("is not [ne0 of v, n_head, n_tokens, ne3 of q]"),
              std::string::npos);
    TensorView kq = p.kv_;
    kq.type = GgmlType::I32;
    EXPECT_NE(FlashAttnExt(ctx, p.q.v, kq, p.vv_, none, p.dst.v, 1.f, 0.f, 0.f)
                  .message()
                  .find("unsupported K type"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace stowage::cpu
