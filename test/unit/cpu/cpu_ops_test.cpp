// CPU kernels, F32/F16 ops: each op against a straightforward double-precision reference on odd
// shapes, broadcast and strided views, plus error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "test_util.h"

namespace stowage::cpu {
namespace {
using kt::Ctx;
using kt::Fill;
using kt::Tensor;

TEST(CpuFp16, RoundTripAndNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(f))));
      continue;
    }
    EXPECT_EQ(Fp32ToFp16(f), uint16_t(h)) << h;
  }
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(65504.f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(65520.f), 0x7C00);  // ties to even -> infinity
  EXPECT_EQ(Fp32ToFp16(-1e9f), 0xFC00);
  EXPECT_EQ(Fp32ToFp16(1.0f + 1.0f / 2048), 0x3C00);     // tie -> even (down)
  EXPECT_EQ(Fp32ToFp16(1.0f + 3.0f / 2048), 0x3C02);     // tie -> even (up)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and min subnormal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.5f, -25)), 0x0001);
  // Random floats: the result is the nearest half.
  std::vector<float> x(20000);
  kt::FillUniform(x, 7, -70000.f, 70000.f);
  for (size_t i = 0; i < x.size(); ++i) {
    const float f = x[i] * (i % 3 == 0 ? 1e-6f : 1.0f);
    const uint16_t h = Fp32ToFp16(f);
    const double e = std::fabs(double(Fp16ToFp32(h)) - f);
    if (std::isinf(Fp16ToFp32(h))) continue;
    EXPECT_LE(e, std::fabs(double(Fp16ToFp32(uint16_t(h + 1))) - f)) << f;
    if ((h & 0x7FFF) != 0) EXPECT_LE(e, std::fabs(double(Fp16ToFp32(uint16_t(h - 1))) - f)) << f;
  }
}

TEST(CpuTensorView, Contiguity) {
  Tensor t(GgmlType::Q4_0, 64, 3, 2);
  EXPECT_EQ(t.v.nb[0], 18u);
  EXPECT_EQ(t.v.nb[1], 36u);
  EXPECT_TRUE(t.v.is_contiguous());
  std::swap(t.v.nb[1], t.v.nb[2]);
  std::swap(t.v.ne[1], t.v.ne[2]);
  EXPECT_FALSE(t.v.is_contiguous());
}

// dst[n, m] reference in double, with src1 optionally rounded to fp16 (F16 weights).
void RefMulMat(const Tensor& a, const Tensor& b, bool round_b, std::vector<double>& out) {
  const int64_t K = a.v.ne[0], N = a.v.ne[1], M = b.v.ne[1], ne12 = b.v.ne[2], ne13 = b.v.ne[3];
  out.assign(size_t(N * M * ne12 * ne13), 0.0);
  for (int64_t i3 = 0; i3 < ne13; ++i3)
    for (int64_t i2 = 0; i2 < ne12; ++i2)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) {
            double y = b.at(k, m, i2, i3);
            if (round_b) y = kt::RoundF16(float(y));
            s += a.at(k, n, i2 / (ne12 / a.v.ne[2]), i3 / (ne13 / a.v.ne[3])) * y;
          }
          out[size_t(((i3 * ne12 + i2) * M + m) * N + n)] = s;
        }
}

void CheckMulMat(GgmlType wtype, IsaLevel isa) {
  const int64_t K = 67, N = 13, M = 5;
  Tensor a(wtype, K, N, 2, 1), b(GgmlType::F32, K, M, 4, 1), d(GgmlType::F32, N, M, 4, 1);
  Fill(a, 1);
  Fill(b, 2);
  ComputeContext ctx = Ctx(3);
  ctx.max_isa = isa;
  ASSERT_TRUE(MulMat(ctx, a.v, b.v, d.v).ok());
  std::vector<double> ref;
  RefMulMat(a, b, wtype == GgmlType::F16, ref);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(d.f32()[i], ref[i], 1e-4) << i;
}

TEST(CpuMulMat, F32AndF16WeightsAllIsaLevels) {
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    CheckMulMat(GgmlType::F32, isa);
    CheckMulMat(GgmlType::F16, isa);
  }
}

TEST(CpuMulMat, PermutedAndStridedSrc1) {
  // src1 stored as [K, ne2=3, M=4] and viewed as [K, M, ne2] (ggml_permute(q, 0, 2, 1, 3)).
  const int64_t K = 40, N = 7, M = 4, H = 3;
  for (GgmlType wt : {GgmlType::F32, GgmlType::F16}) {
    Tensor a(wt, K, N, H), store(GgmlType::F32, K, H, M), d(GgmlType::F32, N, M, H);
    Fill(a, 3);
    Fill(store, 4);
    Tensor view = store;
    view.v.data = view.buf.data();
    view.v.ne[1] = M;
    view.v.ne[2] = H;
    view.v.nb[1] = store.v.nb[2];
    view.v.nb[2] = store.v.nb[1];
    ComputeContext ctx = Ctx(2);
    ASSERT_TRUE(MulMat(ctx, a.v, view.v, d.v).ok());
    std::vector<double> ref;
    RefMulMat(a, view, wt == GgmlType::F16, ref);
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(d.f32()[i], ref[i], 1e-4) << i;
  }
  // src1 with nb0 != 4: a transposed view (ggml_transpose) of a [M, K] matrix.
  Tensor a(GgmlType::F32, 9, 5), store(GgmlType::F32, 6, 9), d(GgmlType::F32, 5, 6);
  Fill(a, 5);
  Fill(store, 6);
  Tensor tv = store;
  tv.v.data = tv.buf.data();
  tv.v.ne[0] = 9;
  tv.v.ne[1] = 6;
  tv.v.nb[0] = store.v.nb[1];
  tv.v.nb[1] = store.v.nb[0];
  ComputeContext ctx = Ctx(2);
  ASSERT_TRUE(MulMat(ctx, a.v, tv.v, d.v).ok());
  std::vector<double> ref;
  RefMulMat(a, tv, false, ref);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(d.f32()[i], ref[i], 1e-5);
}

TEST(CpuMulMat, ResultDoesNotDependOnThreadCount) {
  // Every dst element is one vec_dot, so the thread count cannot change any bit.
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    Tensor a(t, 96, 37), b(GgmlType::F32, 96, 19), d1(GgmlType::F32, 37, 19), d4(GgmlType::F32, 37, 19);
    if (t == GgmlType::F32 || t == GgmlType::F16) {
      Fill(a, 50);
    } else {
      std::vector<float> x(96 * 37);
      kt::FillUniform(x, 51);
      for (int r = 0; r < 37; ++r)
        ASSERT_TRUE(QuantizeRow(t, &x[size_t(r) * 96], a.buf.data() + r * a.v.nb[1], 96).ok());
    }
    Fill(b, 52);
    ComputeContext c1 = Ctx(1), c4 = Ctx(4);
    ASSERT_TRUE(MulMat(c1, a.v, b.v, d1.v).ok());
    ASSERT_TRUE(MulMat(c4, a.v, b.v, d4.v).ok());
    EXPECT_EQ(std::memcmp(d1.buf.data(), d4.buf.data(), 37 * 19 * 4), 0) << GgmlTypeName(t);
  }
}

TEST(CpuThreads, RowOpsBitIdenticalAcrossThreadCounts) {
  // Large enough that the thread team is used (>= 8192 elements).
  const int64_t ne0 = 128, ne1 = 12, ne2 = 9;
  Tensor x(GgmlType::F32, ne0, ne1, ne2), g(GgmlType::F32, ne0, ne1, ne2), pos(GgmlType::I32, ne2),
      mask(GgmlType::F16, ne0, ne1);
  Fill(x, 70, -3, 3);
  Fill(g, 71);
  Fill(mask, 72, -2, 0);
  for (int i = 0; i < ne2; ++i) pos.i32()[i] = 3 * i + 1;
  auto run = [&](int threads, std::vector<std::vector<uint8_t>>& out) {
    ComputeContext ctx = Ctx(threads);
    Tensor a(GgmlType::F32, ne0, ne1, ne2), b(GgmlType::F32, ne0, ne1, ne2), c(GgmlType::F32, ne0, ne1, ne2),
        d(GgmlType::F32, ne0, ne1, ne2), e(GgmlType::F16, ne0, ne1, ne2), f(GgmlType::F32, ne0, ne1, ne2);
    RopeParams rp;
    rp.n_dims = 64;
    rp.n_ctx_orig = 4096;
    TensorView none;
    ASSERT_TRUE(RmsNorm(ctx, x.v, a.v, 1e-6f).ok());
    ASSERT_TRUE(SwiGlu(ctx, x.v, g.v, b.v).ok());
    ASSERT_TRUE(Rope(ctx, x.v, pos.v, none, c.v, rp).ok());
    ASSERT_TRUE(SoftMax(ctx, x.v, mask.v, d.v, 0.3f, 0.0f).ok());
    ASSERT_TRUE(Cpy(ctx, x.v, e.v).ok());
    ASSERT_TRUE(Add(ctx, x.v, g.v, f.v).ok());
    out = {a.buf, b.buf, c.buf, d.buf, e.buf, f.buf};
  };
  std::vector<std::vector<uint8_t>> one, three;
  run(1, one);
  run(3, three);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], three[i]) << "op " << i;
}

// The element-wise ops take plain loops when rows are dense (nb0 = 4) and per-element strided
// loads otherwise: both must give the same bits (token generation uses the dense form, views the other).
TEST(CpuElementwise, DenseAndStridedRowsBitIdentical) {
  const int64_t ne0 = 45, ne1 = 3;
  Tensor a(GgmlType::F32, ne0, ne1), b(GgmlType::F32, ne0, ne1);
  Fill(a, 80, -9, 9);
  Fill(b, 81, -2, 2);
  // Strided twins: every element at twice the distance (nb0 = 8), same values.
  auto strided = [&](const Tensor& t, std::vector<uint8_t>& mem) {
    mem.assign(size_t(ne0 * ne1) * 8 + 64, 0);
    TensorView v = t.v;
    v.nb[0] = 8;
    v.nb[1] = size_t(ne0) * 8;
    v.nb[2] = v.nb[1] * size_t(ne1);
    v.nb[3] = v.nb[2];
    v.data = mem.data();
    for (int64_t i = 0; i < ne0 * ne1; ++i)
      std::memcpy(mem.data() + 8 * i, &reinterpret_cast<const float*>(t.buf.data())[i], 4);
    return v;
  };
  std::vector<uint8_t> ma, mb, mo;
  const TensorView sa = strided(a, ma), sb = strided(b, mb);
  Tensor o(GgmlType::F32, ne0, ne1);
  const TensorView so = strided(o, mo);
  ComputeContext ctx = Ctx(1);
  using Op = std::function<Status(const TensorView&, const TensorView&, TensorView&)>;
  const std::vector<std::pair<const char*, Op>> ops = {
      {"add", [&](const TensorView& x, const TensorView& y, TensorView& d) { return Add(ctx, x, y, d); }},
      {"mul", [&](const TensorView& x, const TensorView& y, TensorView& d) { return Mul(ctx, x, y, d); }},
      {"silu", [&](const TensorView& x, const TensorView&, TensorView& d) { return Silu(ctx, x, d); }},
      {"tanh", [&](const TensorView& x, const TensorView&, TensorView& d) { return Tanh(ctx, x, d); }},
      {"scale",
       [&](const TensorView& x, const TensorView&, TensorView& d) { return Scale(ctx, x, d, 0.3f, -1.f); }},
      {"swiglu",
       [&](const TensorView& x, const TensorView& y, TensorView& d) { return SwiGlu(ctx, x, y, d); }},
      {"geglu", [&](const TensorView& x, const TensorView& y, TensorView& d) { return GeGlu(ctx, x, y, d); }},
  };
  for (const auto& [name, op] : ops) {
    TensorView dense_out = o.v, strided_out = so;
    ASSERT_TRUE(op(a.v, b.v, dense_out).ok()) << name;
    ASSERT_TRUE(op(sa, sb, strided_out).ok()) << name;
    for (int64_t i = 0; i < ne0 * ne1; ++i) {
      uint32_t u, w;
      std::memcpy(&u, o.buf.data() + 4 * i, 4);
      std::memcpy(&w, mo.data() + 8 * i, 4);
      ASSERT_EQ(u, w) << name << " element " << i;
    }
  }
}

// CPY of short rows with equal shapes (the transposed V store of token generation: rows of one
// element) converts element by element; F32 -> F16 / BF16 / F32 must match the row converters.
TEST(CpuCpy, ShortRowsMatchRowConversion) {
  const int64_t n = 37, planes = 3;  // [1, n, planes]: the F32 -> F16 store converts along ne1 per plane
  Tensor src(GgmlType::F32, 1, n, planes);
  Fill(src, 90, -70000, 70000);
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni})
    for (GgmlType dt : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
      Tensor dst(dt, 1, n, planes), ref(dt, n * planes);
      ComputeContext ctx = Ctx(2);
      ctx.max_isa = isa;
      ASSERT_TRUE(Cpy(ctx, src.v, dst.v).ok()) << GgmlTypeName(dt);
      ASSERT_TRUE(QuantizeRow(dt, src.f32(), ref.buf.data(), n * planes).ok());
      EXPECT_EQ(std::memcmp(dst.buf.data(), ref.buf.data(), size_t(n * planes) * GetTypeTraits(dt).type_size),
                0)
          << GgmlTypeName(dt) << " isa " << int(isa);
    }
}

TEST(CpuMulMat, Errors) {
  Tensor a(GgmlType::F32, 8, 4), b(GgmlType::F32, 9, 2), d(GgmlType::F32, 4, 2);
  ComputeContext ctx = Ctx();
  Status s = MulMat(ctx, a.v, b.v, d.v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("differ in ne0"), std::string::npos) << s.message();
  TensorView neg = b.v;
  neg.ne[1] = -2;
  s = MulMat(ctx, a.v, neg, d.v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("negative dimension"), std::string::npos) << s.message();
  Tensor q(GgmlType::IQ2_XXS, 256, 4), b2(GgmlType::F32, 256, 2);
  EXPECT_EQ(MulMat(ctx, q.v, b2.v, d.v).code(), StatusCode::kUnimplemented);
}

TEST(CpuNorm, RmsNormAndNorm) {
  Tensor x(GgmlType::F32, 37, 3, 2), y(GgmlType::F32, 37, 3, 2), z(GgmlType::F32, 37, 3, 2);
  Fill(x, 8, -3, 5);
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(RmsNorm(ctx, x.v, y.v, 1e-5f).ok());
  ASSERT_TRUE(Norm(ctx, x.v, z.v, 1e-5f).ok());
  for (int64_t r = 0; r < 6; ++r) {
    double ss = 0, s = 0;
    for (int i = 0; i < 37; ++i) {
      ss += x.at(i, r) * x.at(i, r);
      s += x.at(i, r);
    }
    const double mean = s / 37;
    double var = 0;
    for (int i = 0; i < 37; ++i) var += (x.at(i, r) - mean) * (x.at(i, r) - mean);
    var /= 37;
    for (int i = 0; i < 37; ++i) {
      EXPECT_NEAR(y.at(i, r), x.at(i, r) / std::sqrt(ss / 37 + 1e-5), 1e-5);
      EXPECT_NEAR(z.at(i, r), (x.at(i, r) - mean) / std::sqrt(var + 1e-5), 1e-5);
    }
  }
}

// The SIMD sums of squares change no bit: RMS_NORM at the best level equals the scalar level's,
// rows of any length (tails of 1-7 after the multiple of 8), strided and in place.
TEST(CpuNorm, RmsNormSimdBitsEqualScalar) {
  for (int64_t ne0 : {1, 7, 8, 37, 2048, 2051}) {
    Tensor x(GgmlType::F32, ne0, 3), y(GgmlType::F32, ne0, 3), z(GgmlType::F32, ne0, 3);
    Fill(x, 21, -9, 9);
    ComputeContext fast = Ctx(), ref = Ctx();
    ref.max_isa = IsaLevel::kScalar;
    ASSERT_TRUE(RmsNorm(fast, x.v, y.v, 1e-6f).ok());
    ASSERT_TRUE(RmsNorm(ref, x.v, z.v, 1e-6f).ok());
    EXPECT_EQ(std::memcmp(y.buf.data(), z.buf.data(), size_t(ne0) * 3 * 4), 0) << ne0;
    Tensor w = x;  // in place
    w.v.data = w.buf.data();
    ASSERT_TRUE(RmsNorm(fast, w.v, w.v, 1e-6f).ok());
    EXPECT_EQ(std::memcmp(w.buf.data(), z.buf.data(), size_t(ne0) * 3 * 4), 0) << ne0 << " in place";
  }
}

TEST(CpuBinary, AddMulBroadcastF16Src1) {
  Tensor a(GgmlType::F32, 10, 6, 4), b(GgmlType::F16, 10, 3, 1), c(GgmlType::F32, 10, 6, 4),
      m(GgmlType::F32, 10, 6, 4);
  Fill(a, 9);
  Fill(b, 10);
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(Add(ctx, a.v, b.v, c.v).ok());
  ASSERT_TRUE(Mul(ctx, a.v, b.v, m.v).ok());
  for (int i2 = 0; i2 < 4; ++i2)
    for (int i1 = 0; i1 < 6; ++i1)
      for (int i0 = 0; i0 < 10; ++i0) {
        EXPECT_FLOAT_EQ(c.at(i0, i1, i2), float(a.at(i0, i1, i2) + b.at(i0, i1 % 3)));
        EXPECT_FLOAT_EQ(m.at(i0, i1, i2), float(a.at(i0, i1, i2) * b.at(i0, i1 % 3)));
      }
  Tensor bad(GgmlType::F32, 10, 4);
  EXPECT_EQ(Add(ctx, a.v, bad.v, c.v).code(), StatusCode::kInvalidArgument);
}

TEST(CpuUnary, ScaleSiluGeluGlu) {
  Tensor x(GgmlType::F32, 33, 5), g(GgmlType::F32, 33, 5), y(GgmlType::F32, 33, 5);
  Fill(x, 11, -12, 12);
  Fill(g, 12);
  ComputeContext ctx = Ctx();
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  auto gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * v * (1 + 0.044715 * v * v)));
  };
  ASSERT_TRUE(Scale(ctx, x.v, y.v, 0.5f, 2.f).ok());
  for (int i = 0; i < 165; ++i) EXPECT_FLOAT_EQ(y.f32()[i], x.f32()[i] * 0.5f + 2.f);
  ASSERT_TRUE(Silu(ctx, x.v, y.v).ok());
  for (int i = 0; i < 165; ++i) EXPECT_NEAR(y.f32()[i], silu(x.f32()[i]), 1e-5);
  ASSERT_TRUE(Gelu(ctx, x.v, y.v).ok());  // fp16-table precision, like ggml
  for (int i = 0; i < 165; ++i) EXPECT_NEAR(y.f32()[i], gelu(x.f32()[i]), 2e-3 * (1 + std::fabs(x.f32()[i])));
  ASSERT_TRUE(SwiGlu(ctx, x.v, g.v, y.v).ok());
  for (int i = 0; i < 165; ++i) EXPECT_NEAR(y.f32()[i], silu(x.f32()[i]) * g.f32()[i], 1e-5);
  // Fused form: one tensor [2 * 33, 5], gate first.
  kt::Tensor both(GgmlType::F32, 66, 5), half(GgmlType::F32, 33, 5);
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 33; ++i) {
      both.f32()[r * 66 + i] = x.f32()[r * 33 + i];
      both.f32()[r * 66 + 33 + i] = g.f32()[r * 33 + i];
    }
  TensorView none;
  ASSERT_TRUE(SwiGlu(ctx, both.v, none, half.v).ok());
  for (int i = 0; i < 165; ++i) EXPECT_NEAR(half.f32()[i], silu(x.f32()[i]) * g.f32()[i], 1e-5);
  EXPECT_EQ(SwiGlu(ctx, x.v, none, half.v).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(GeGlu(ctx, x.v, g.v, y.v).ok());
  for (int i = 0; i < 165; ++i)
    EXPECT_NEAR(y.f32()[i], gelu(x.f32()[i]) * g.f32()[i], 2e-3 * (1 + std::fabs(x.f32()[i])));
}

// TANH against tanh in double: within 2 float ulps (glibc's tanhf), the exact limits and
// sign-preserving zeros, saturation to +-1 beyond |x| ~ 9, NaN through; a soft-capping pattern
// (SCALE -> TANH -> SCALE, cap 30) stays within the cap; in place gives the same bits.
// FILL (ggml_fill): every element c whatever src holds (NaN and infinities included), on an odd 3-D
// shape, in place (ggml_op_can_inplace) and into a strided destination; an F16 src is refused.
TEST(CpuUnary, Fill) {
  Tensor x(GgmlType::F32, 5, 3, 7), y(GgmlType::F32, 5, 3, 7);
  Fill(x, 21, -3, 3);
  x.f32()[4] = NAN;
  x.f32()[9] = INFINITY;
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(cpu::Fill(ctx, x.v, y.v, -INFINITY).ok());
  for (int64_t i = 0; i < y.v.nelements(); ++i) EXPECT_EQ(y.f32()[i], -INFINITY) << i;
  ASSERT_TRUE(cpu::Fill(ctx, x.v, x.v, 0.25f).ok());  // in place
  for (int64_t i = 0; i < x.v.nelements(); ++i) EXPECT_EQ(x.f32()[i], 0.25f) << i;
  // a destination whose rows are 8 floats apart: the gaps stay untouched
  Tensor wide(GgmlType::F32, 8, 3, 7);
  TensorView d = wide.v;
  d.ne[0] = 5;
  ASSERT_TRUE(cpu::Fill(ctx, y.v, d, 1.5f).ok());
  for (int64_t r = 0; r < 21; ++r)
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(wide.f32()[r * 8 + i], i < 5 ? 1.5f : 0.f) << r << "," << i;
  Tensor h(GgmlType::F16, 5, 3, 7);
  EXPECT_FALSE(cpu::Fill(ctx, h.v, h.v, 1.f).ok());
}

// ggml-cpu's MAX(MIN(x, max), min) element by element: NaN becomes max (both comparisons false),
// min > max gives min; build_moe_ffn's bounds [2^-14, INFINITY] lift a zero or tiny weight sum.
TEST(CpuUnary, Clamp) {
  const float lo = 0x1p-14f;
  const float in[] = {0.f, -0.f, 1e-30f, lo, 0x1.fffffep-15f, 0.75f, -2.f, INFINITY, -INFINITY, NAN, 3e38f};
  const float want_moe[] = {lo, lo, lo, lo, lo, 0.75f, lo, INFINITY, lo, INFINITY, 3e38f};
  const float want_pm1[] = {0.f, -0.f, 1e-30f, lo, 0x1.fffffep-15f, 0.75f, -1.f, 1.f, -1.f, 1.f, 1.f};
  constexpr int64_t n = sizeof(in) / sizeof(in[0]);
  Tensor x(GgmlType::F32, n, 1, 1), y(GgmlType::F32, n, 1, 1);
  std::memcpy(x.f32(), in, sizeof(in));
  ComputeContext ctx = Ctx();
  for (bool numerics : {false, true}) {
    ctx.llamacpp_numerics = numerics;
    ASSERT_TRUE(cpu::Clamp(ctx, x.v, y.v, lo, INFINITY).ok());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y.f32()[i], want_moe[i]) << "x = " << in[i];
    ASSERT_TRUE(cpu::Clamp(ctx, x.v, y.v, -1.f, 1.f).ok());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(y.f32()[i], want_pm1[i]) << "x = " << in[i];
      EXPECT_EQ(std::signbit(y.f32()[i]), std::signbit(want_pm1[i])) << "x = " << in[i];
    }
    ASSERT_TRUE(cpu::Clamp(ctx, x.v, y.v, 1.f, -1.f).ok());  // min > max
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y.f32()[i], 1.f) << "x = " << in[i];
  }
  // many rows, in parallel: each element as the scalar rule
  Tensor a(GgmlType::F32, 37, 9, 3), b(GgmlType::F32, 37, 9, 3);
  Fill(a, 5, -2, 2);
  ASSERT_TRUE(cpu::Clamp(ctx, a.v, b.v, -0.5f, 0.25f).ok());
  for (int64_t i = 0; i < a.v.nelements(); ++i)
    EXPECT_EQ(b.f32()[i], std::min(std::max(a.f32()[i], -0.5f), 0.25f)) << i;
  Tensor h(GgmlType::F16, 5, 3, 7);
  EXPECT_FALSE(cpu::Clamp(ctx, h.v, h.v, 0.f, 1.f).ok());
}

TEST(CpuUnary, Tanh) {
  Tensor x(GgmlType::F32, 37, 4, 2), y(GgmlType::F32, 37, 4, 2);
  Fill(x, 13, -12, 12);
  const float specials[] = {0.f,  -0.f,  1e-30f, -1e-7f,    0.5f,    -0.5493f,
                            9.1f, -20.f, 1e30f,  -INFINITY, INFINITY};
  std::memcpy(x.f32(), specials, sizeof(specials));
  x.f32()[20] = NAN;
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(Tanh(ctx, x.v, y.v).ok());
  const int64_t n = x.v.nelements();
  for (int64_t i = 0; i < n; ++i) {
    const float v = x.f32()[i], r = y.f32()[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(r)) << i;
      continue;
    }
    const double want = std::tanh(double(v));
    const float mag = float(std::fabs(want));
    const double ulp = double(std::nextafter(mag, INFINITY)) - mag;
    EXPECT_LE(std::fabs(r - want), 2 * ulp) << "x = " << v;
    EXPECT_EQ(std::signbit(r), std::signbit(v)) << "x = " << v;
    EXPECT_LE(std::fabs(r), 1.f) << "x = " << v;
  }
  EXPECT_EQ(y.f32()[9], -1.f);
  EXPECT_EQ(y.f32()[10], 1.f);
  EXPECT_EQ(y.f32()[8], 1.f);
  // Soft-capping: 30 * tanh(x / 30) is close to x for small x and never beyond 30.
  Tensor big(GgmlType::F32, 64), t(GgmlType::F32, 64);
  Fill(big, 14, -400, 400);
  big.f32()[0] = 0.25f;
  ASSERT_TRUE(Scale(ctx, big.v, t.v, 1.f / 30, 0.f).ok());
  ASSERT_TRUE(Tanh(ctx, t.v, t.v).ok());  // in place
  ASSERT_TRUE(Scale(ctx, t.v, t.v, 30.f, 0.f).ok());
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(std::fabs(t.f32()[i]), 30.f);
    EXPECT_NEAR(t.f32()[i], 30 * std::tanh(double(big.f32()[i]) / 30), 1e-4 * 30);
  }
  EXPECT_NEAR(t.f32()[0], 0.25, 1e-5);
  Tensor z(GgmlType::F32, 37, 4, 2);
  std::memcpy(z.f32(), x.f32(), size_t(n) * 4);
  ASSERT_TRUE(Tanh(ctx, z.v, z.v).ok());
  EXPECT_EQ(std::memcmp(z.f32(), y.f32(), size_t(n) * 4), 0);
  Tensor bad(GgmlType::F32, 36, 4, 2);
  EXPECT_EQ(Tanh(ctx, x.v, bad.v).code(), StatusCode::kInvalidArgument);
  Tensor half(GgmlType::F16, 37, 4, 2);
  EXPECT_EQ(Tanh(ctx, half.v, y.v).code(), StatusCode::kInvalidArgument);
}

// ggml_rope_ext reference in double (same angle recurrence, YaRN ramp and mscale); the rotated
// dims start at p.n_offs (ggml_rope_set_offset).
void RefRope(const Tensor& x, const std::vector<int32_t>& pos, const float* ff, const RopeParams& p,
             std::vector<double>& out) {
  const int64_t ne0 = x.v.ne[0], ne1 = x.v.ne[1], ne2 = x.v.ne[2];
  out.assign(size_t(ne0 * ne1 * ne2), 0);
  auto corr = [&](double beta) {
    return p.n_dims * std::log(p.n_ctx_orig / (beta * 2 * M_PI)) / (2 * std::log(double(p.freq_base)));
  };
  const double lo = std::max(0.0, std::floor(corr(p.beta_fast)));
  const double hi = std::min(double(p.n_dims - 1), std::ceil(corr(p.beta_slow)));
  for (int64_t i2 = 0; i2 < ne2; ++i2)
    for (int64_t i1 = 0; i1 < ne1; ++i1) {
      for (int64_t i0 = 0; i0 < ne0; ++i0) out[size_t((i2 * ne1 + i1) * ne0 + i0)] = x.at(i0, i1, i2);
      for (int64_t i0 = 0; i0 < p.n_dims; i0 += 2) {
        const double extrap =
            pos[size_t(i2)] * std::pow(double(p.freq_base), -double(i0) / p.n_dims) / (ff ? ff[i0 / 2] : 1.0);
        const double interp = p.freq_scale * extrap;
        double theta = interp, mscale = p.attn_factor;
        if (p.ext_factor != 0) {
          const double y = (i0 / 2 - lo) / std::max(0.001, hi - lo);
          const double mix = (1 - std::min(1.0, std::max(0.0, y))) * p.ext_factor;
          theta = interp * (1 - mix) + extrap * mix;
          mscale *= 1 + 0.1 * std::log(1 / double(p.freq_scale));
        }
        const int64_t a = p.n_offs + (p.mode == 2 ? i0 / 2 : i0);
        const int64_t b = p.n_offs + (p.mode == 2 ? i0 / 2 + p.n_dims / 2 : i0 + 1);
        const double x0 = x.at(a, i1, i2), x1 = x.at(b, i1, i2);
        out[size_t((i2 * ne1 + i1) * ne0 + a)] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * mscale;
        out[size_t((i2 * ne1 + i1) * ne0 + b)] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * mscale;
      }
    }
}

// REPEAT (ggml_repeat_4d) against the modulo rule, from a strided source (a transposed view) and
// into a strided destination; a dst that is not a repetition is refused.
TEST(CpuRepeat, TilesEveryDimension) {
  Tensor x(GgmlType::F32, 3, 2, 1, 2);
  Fill(x, 21);
  TensorView xt = x.v;  // [2, 3, 1, 2] transposed view
  std::swap(xt.ne[0], xt.ne[1]);
  std::swap(xt.nb[0], xt.nb[1]);
  Tensor y(GgmlType::F32, 4, 9, 5, 2);
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(Repeat(ctx, xt, y.v).ok());
  for (int64_t i3 = 0; i3 < 2; ++i3)
    for (int64_t i2 = 0; i2 < 5; ++i2)
      for (int64_t i1 = 0; i1 < 9; ++i1)
        for (int64_t i0 = 0; i0 < 4; ++i0) ASSERT_EQ(y.at(i0, i1, i2, i3), x.at(i1 % 3, i0 % 2, 0, i3));
  Tensor wide(GgmlType::F32, 8, 6, 5, 2);  // every other float of each row
  TensorView strided = wide.v;
  strided.ne[0] = 4;
  strided.nb[0] = 8;
  ASSERT_TRUE(Repeat(ctx, xt, strided).ok());
  EXPECT_EQ(wide.at(2, 4, 3, 1), x.at(1, 1, 0, 1));
  EXPECT_EQ(wide.at(1, 4, 3, 1), 0.0);
  Tensor bad(GgmlType::F32, 4, 8, 5, 2);
  EXPECT_EQ(Repeat(ctx, xt, bad.v).code(), StatusCode::kInvalidArgument);
}

TEST(CpuRope, NormalNeoxFreqFactorsYarn) {
  const int64_t hd = 12, nh = 3, nt = 5;
  Tensor x(GgmlType::F32, hd, nh, nt), y(GgmlType::F32, hd, nh, nt), pos(GgmlType::I32, nt),
      ff(GgmlType::F32, 4);
  Fill(x, 13);
  std::vector<int32_t> p = {0, 1, 7, 100, 4095};
  std::copy(p.begin(), p.end(), pos.i32());
  const float ffv[4] = {1.0f, 1.5f, 4.0f, 8.0f};
  std::copy(ffv, ffv + 4, ff.f32());
  for (int mode : {0, 2}) {
    for (bool yarn : {false, true}) {
      for (int cfg = 0; cfg < 4; ++cfg) {
        const bool use_ff = cfg % 2 == 1;
        RopeParams rp;
        rp.n_dims = 8;
        rp.n_offs = cfg / 2 == 1 ? 4 : 0;  // rotated dims 4..11 of 12, the first 4 copied
        rp.mode = mode;
        rp.n_ctx_orig = 4096;
        rp.freq_base = 10000.f;
        rp.freq_scale = yarn ? 0.25f : 1.f;
        rp.ext_factor = yarn ? 1.f : 0.f;
        TensorView none;
        none.data = nullptr;
        ComputeContext ctx = Ctx();
        ASSERT_TRUE(Rope(ctx, x.v, pos.v, use_ff ? ff.v : none, y.v, rp).ok());
        std::vector<double> ref;
        RefRope(x, p, use_ff ? ffv : nullptr, rp, ref);
        // float angle recurrence vs exact pow: error grows with the position (4095 rad).
        for (size_t i = 0; i < ref.size(); ++i)
          EXPECT_NEAR(y.f32()[i], ref[i], 3e-3) << mode << yarn << use_ff << rp.n_offs << i;
      }
    }
  }
}

// One-position ROPEs (token generation) share the angle cache of the previous call through the
// ComputeContext: a sequence of calls on one context, changing one input at a time (position,
// n_dims, mode, every frequency parameter, the freq_factors' values in the same buffer), gives
// the bits of a fresh context for each; in place equals out of place.
TEST(CpuRope, OnePositionCacheFollowsEveryInput) {
  const int64_t hd = 16, nh = 4;
  Tensor x(GgmlType::F32, hd, nh, 1), y(GgmlType::F32, hd, nh, 1), r(GgmlType::F32, hd, nh, 1),
      pos(GgmlType::I32, 1), ff(GgmlType::F32, 8);
  Fill(x, 31, -2, 2);
  for (int i = 0; i < 8; ++i) ff.f32()[i] = 1.0f + 0.5f * float(i);
  RopeParams base;
  base.n_dims = 16;
  base.mode = 0;
  base.n_ctx_orig = 4096;
  base.freq_base = 10000.f;
  base.freq_scale = 1.f;
  struct Step {
    int32_t pos;
    RopeParams p;
    bool use_ff;
    float ff0;
  };
  std::vector<Step> steps;
  auto add = [&](int32_t p, auto edit, bool use_ff = false, float ff0 = 1.0f) {
    RopeParams q = base;
    edit(q);
    steps.push_back({p, q, use_ff, ff0});
  };
  auto same = [](RopeParams&) {};
  add(5, same);
  add(5, same);  // a hit
  add(6, same);
  add(6, [](RopeParams& q) { q.n_dims = 8; });
  add(6, [](RopeParams& q) { q.mode = 2; });
  add(6, [](RopeParams& q) { q.freq_base = 500000.f; });
  add(6, [](RopeParams& q) {
    q.freq_scale = 0.25f;
    q.ext_factor = 1.f;
  });
  add(6, [](RopeParams& q) {
    q.freq_scale = 0.25f;
    q.ext_factor = 1.f;
    q.beta_fast = 16.f;
  });
  add(6, [](RopeParams& q) {
    q.freq_scale = 0.25f;
    q.ext_factor = 1.f;
    q.beta_slow = 2.f;
  });
  add(6, [](RopeParams& q) {
    q.freq_scale = 0.25f;
    q.ext_factor = 1.f;
    q.n_ctx_orig = 2048;
  });
  add(6, [](RopeParams& q) { q.attn_factor = 0.5f; });
  add(6, same, true, 1.0f);
  add(6, same, true, 4.0f);  // same freq_factors buffer, new values
  add(6, same);
  ComputeContext keep = Ctx(1);  // one context across the steps
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i);
    ComputeContext fresh = Ctx(1);
    pos.i32()[0] = steps[i].pos;
    ff.f32()[0] = steps[i].ff0;
    TensorView none;
    const TensorView& fv = steps[i].use_ff ? ff.v : none;
    ASSERT_TRUE(Rope(keep, x.v, pos.v, fv, y.v, steps[i].p).ok());
    ASSERT_TRUE(Rope(fresh, x.v, pos.v, fv, r.v, steps[i].p).ok());
    EXPECT_EQ(std::memcmp(y.buf.data(), r.buf.data(), size_t(hd * nh) * 4), 0);
    Tensor w = x;
    w.v.data = w.buf.data();
    ASSERT_TRUE(Rope(keep, w.v, pos.v, fv, w.v, steps[i].p).ok());
    EXPECT_EQ(std::memcmp(w.buf.data(), r.buf.data(), size_t(hd * nh) * 4), 0) << "in place";
  }
}

TEST(CpuSoftMax, MaskScaleAlibi) {
  const int64_t nkv = 11, nt = 3, nh = 5;
  Tensor x(GgmlType::F32, nkv, nt, nh), y(GgmlType::F32, nkv, nt, nh), mask(GgmlType::F16, nkv, 4);
  Fill(x, 14, -4, 4);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t k = 0; k < nkv; ++k)
      mask.u16()[t * nkv + k] = Fp32ToFp16(k > 5 + t ? -INFINITY : -0.25f * float(k % 3));
  for (float max_bias : {0.0f, 8.0f}) {
    ComputeContext ctx = Ctx();
    ASSERT_TRUE(SoftMax(ctx, x.v, mask.v, y.v, 0.7f, max_bias).ok());
    const int n_head_log2 = 4;
    const double m0 = std::pow(2.0, -max_bias / n_head_log2), m1 = std::pow(2.0, -max_bias / 2 / n_head_log2);
    for (int64_t h = 0; h < nh; ++h) {
      const double slope =
          max_bias > 0 ? (h < n_head_log2 ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n_head_log2) + 1))
                       : 1.0;
      for (int64_t t = 0; t < nt; ++t) {
        std::vector<double> w(static_cast<size_t>(nkv));
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < nkv; ++k) {
          w[size_t(k)] = x.at(k, t, h) * 0.7 + slope * mask.at(k, t);
          mx = std::max(mx, w[size_t(k)]);
        }
        for (auto& v : w) {
          v = std::exp(v - mx);
          sum += v;
        }
        for (int64_t k = 0; k < nkv; ++k) EXPECT_NEAR(y.at(k, t, h), w[size_t(k)] / sum, 1e-6);
      }
    }
  }
  Tensor small_mask(GgmlType::F32, nkv, 2);
  ComputeContext ctx = Ctx();
  EXPECT_EQ(SoftMax(ctx, x.v, small_mask.v, y.v, 1.f, 0.f).code(), StatusCode::kInvalidArgument);
}

// The AVX-512 row (vectorized exp) against the scalar level (expf): rows of 1..70 elements with
// F16 and F32 masks holding -inf (causal), ALiBi, in place; and exp's accuracy over its range.
TEST(CpuSoftMax, SimdRowsMatchScalar) {
  if (DetectIsa() < IsaLevel::kAvx512) GTEST_SKIP() << "skipped: no AVX-512";
  for (int64_t nkv : {1, 7, 15, 16, 17, 31, 64, 70}) {
    for (GgmlType mt : {GgmlType::F16, GgmlType::F32}) {
      for (float max_bias : {0.0f, 8.0f}) {
        const int64_t nt = 4, nh = 3;
        Tensor x(GgmlType::F32, nkv, nt, nh), mask(mt, nkv, nt);
        Fill(x, uint32_t(nkv), -30, 30);
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t k = 0; k < nkv; ++k) {
            const float v = k > nkv / 2 + t ? -INFINITY : -0.5f * float(k % 5);
            if (mt == GgmlType::F16)
              mask.u16()[t * nkv + k] = Fp32ToFp16(v);
            else
              reinterpret_cast<float*>(mask.buf.data())[t * nkv + k] = v;
          }
        Tensor a(GgmlType::F32, nkv, nt, nh), b(GgmlType::F32, nkv, nt, nh);
        ComputeContext simd = Ctx(), ref = Ctx();
        ref.max_isa = IsaLevel::kScalar;
        ASSERT_TRUE(SoftMax(ref, x.v, mask.v, a.v, 0.9f, max_bias).ok());
        ASSERT_TRUE(SoftMax(simd, x.v, mask.v, x.v, 0.9f, max_bias).ok());  // in place
        for (int64_t i = 0; i < a.v.nelements(); ++i) {
          const float want = reinterpret_cast<float*>(a.buf.data())[i];
          const float got = reinterpret_cast<float*>(x.buf.data())[i];
          EXPECT_NEAR(got, want, 4e-7f * std::max(1.0f, std::fabs(want)) + 1e-30f) << nkv << " " << i;
        }
      }
    }
  }
  // exp over [-104, 0] (SOFT_MAX feeds w - max <= 0): relative error vs double exp <= 2.5e-7.
  const int64_t n = 20001;
  Tensor x(GgmlType::F32, n), y(GgmlType::F32, n);
  for (int64_t i = 0; i < n; ++i)
    reinterpret_cast<float*>(x.buf.data())[i] = -104.0f * float(i) / float(n - 1);
  TensorView none;
  ComputeContext ctx = Ctx(1);
  ASSERT_TRUE(SoftMax(ctx, x.v, none, y.v, 1.0f, 0.0f).ok());
  // y = exp(x - 0) / sum; sum is dominated by x near 0, so compare ratios y[i] / y[0] = exp(x[i]).
  const float* xv = reinterpret_cast<float*>(x.buf.data());
  const float* yv = reinterpret_cast<float*>(y.buf.data());
  for (int64_t i = 0; i < n; i += 7) {
    const double want = std::exp(double(xv[i]));
    if (want < 1e-33)
      continue;  // y = exp / sum (sum ~ 190) would be denormal: precision of the division only
    EXPECT_NEAR(double(yv[i]) / double(yv[0]), want, want * 4e-7) << xv[i];
  }
}

// CONT of a permuted view into rows of another length (kqv_merged: [hd, n_head, n_tokens] permuted
// -> [hd * n_head, n_tokens]): dst element l is src element l in ggml order, for every type pair
// and for team-sized copies (>= 8192 elements, split across threads).
TEST(CpuCpy, PermutedIntoOtherRowLength) {
  for (const int64_t nt : {int64_t(3), int64_t(80)}) {
    const int64_t hd = 64, nh = 5;
    Tensor x(GgmlType::F32, hd, nt, nh);  // [hd, n_tokens, n_head] as kqv
    Fill(x, 31);
    TensorView pv = x.v;  // permute(0, 2, 1): [hd, n_head, n_tokens]
    pv.ne[1] = nh;
    pv.ne[2] = nt;
    pv.nb[1] = x.v.nb[2];
    pv.nb[2] = x.v.nb[1];
    for (GgmlType st : {GgmlType::F32, GgmlType::F16}) {
      Tensor xs(st, hd, nt, nh);
      TensorView sv = pv;
      if (st == GgmlType::F16) {
        ComputeContext c1 = Ctx(1);
        ASSERT_TRUE(Cpy(c1, x.v, xs.v).ok());
        sv.type = GgmlType::F16;
        sv.nb[0] = 2;
        sv.nb[1] = xs.v.nb[2];
        sv.nb[2] = xs.v.nb[1];
        sv.data = xs.v.data;
      }
      for (GgmlType dt : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
        Tensor out(dt, hd * nh, nt);
        ComputeContext ctx = Ctx(2);
        ASSERT_TRUE(Cpy(ctx, sv, out.v).ok());
        for (int64_t l = 0; l < hd * nh * nt; ++l) {
          const int64_t i0 = l % hd, i1 = (l / hd) % nh, i2 = l / (hd * nh);
          float v = float(x.at(i0, i2, i1));
          if (st == GgmlType::F16) v = kt::RoundF16(v);
          const double want = dt == GgmlType::F16    ? double(kt::RoundF16(v))
                              : dt == GgmlType::BF16 ? double(Bf16ToFloat(FloatToBf16(v)))
                                                     : double(v);
          const double got =
              dt == GgmlType::BF16 ? double(Bf16ToFloat(out.u16()[l])) : out.at(l % (hd * nh), l / (hd * nh));
          ASSERT_EQ(got, want) << GgmlTypeName(st) << " -> " << GgmlTypeName(dt) << " n_tokens " << nt
                               << " element " << l;
        }
      }
    }
  }
}

TEST(CpuCpy, KvStoreF16StridedAndBack) {
  // K cache [head_dim * n_head_kv, n_ctx] F16; store 3 tokens at cell 4 through a strided view.
  const int64_t hd = 8, nh = 2, nctx = 10, nt = 3;
  Tensor k(GgmlType::F32, hd, nh, nt), cache(GgmlType::F16, hd * nh, nctx);
  Fill(k, 15);
  TensorView view = cache.v;
  view.ne[0] = hd;
  view.ne[1] = nh;
  view.ne[2] = nt;
  view.nb[1] = hd * 2;
  view.nb[2] = cache.v.nb[1];
  view.data = cache.buf.data() + 4 * cache.v.nb[1];
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(Cpy(ctx, k.v, view).ok());
  for (int64_t t = 0; t < nctx; ++t)
    for (int64_t i = 0; i < hd * nh; ++i) {
      const double expect = (t >= 4 && t < 4 + nt) ? kt::RoundF16(float(k.at(i % hd, i / hd, t - 4))) : 0.0;
      EXPECT_EQ(cache.at(i, t), expect);
    }
  // V cache transposed store: dst view [1 .. ] element (i, t) at cell t, row i (nb0 = n_ctx * 2).
  Tensor v(GgmlType::F32, hd, nt), vcache(GgmlType::F16, nctx, hd);
  Fill(v, 16);
  TensorView vt = vcache.v;
  vt.ne[0] = hd;
  vt.ne[1] = nt;
  vt.nb[0] = vcache.v.nb[1];
  vt.nb[1] = 2;
  vt.data = vcache.buf.data() + 2 * 2;
  ASSERT_TRUE(Cpy(ctx, v.v, vt).ok());
  for (int64_t i = 0; i < hd; ++i)
    for (int64_t t = 0; t < nt; ++t) EXPECT_EQ(vcache.at(2 + t, i), kt::RoundF16(float(v.at(i, t))));
  // F16 -> F32 and F32 -> F32 transposed (CONT of a transposed view), reshaping copy.
  Tensor back(GgmlType::F32, hd * nh, nctx);
  ASSERT_TRUE(Cpy(ctx, cache.v, back.v).ok());
  for (int64_t i = 0; i < hd * nh * nctx; ++i) EXPECT_EQ(back.f32()[i], Fp16ToFp32(cache.u16()[i]));
  Tensor m(GgmlType::F32, 5, 7), mt(GgmlType::F32, 7, 5), flat(GgmlType::F32, 35);
  Fill(m, 17);
  TensorView tv = m.v;
  tv.ne[0] = 7;
  tv.ne[1] = 5;
  tv.nb[0] = m.v.nb[1];
  tv.nb[1] = 4;
  ASSERT_TRUE(Cpy(ctx, tv, mt.v).ok());
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(mt.at(i, j), m.at(j, i));
  ASSERT_TRUE(Cpy(ctx, tv, flat.v).ok());
  for (int l = 0; l < 35; ++l) EXPECT_EQ(flat.f32()[l], m.at(l / 7, l % 7));
  // F32 -> Q8_0 (quantized KV cache rows), and the type table.
  Tensor q8(GgmlType::Q8_0, 64, 2), src(GgmlType::F32, 64, 2);
  Fill(src, 20);
  ASSERT_TRUE(Cpy(ctx, src.v, q8.v).ok());
  std::vector<uint8_t> expect(q8.v.nb[1]);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(QuantizeRow(GgmlType::Q8_0, src.f32() + 64 * r, expect.data(), 64).ok());
    EXPECT_EQ(std::memcmp(expect.data(), q8.buf.data() + r * q8.v.nb[1], expect.size()), 0);
  }
  EXPECT_TRUE(SupportsCpyTypes(GgmlType::F32, GgmlType::Q5_1));
  EXPECT_TRUE(SupportsCpyTypes(GgmlType::BF16, GgmlType::F16));
  EXPECT_FALSE(SupportsCpyTypes(GgmlType::F16, GgmlType::Q8_0));
  EXPECT_FALSE(SupportsCpyTypes(GgmlType::Q8_0, GgmlType::F32));
  EXPECT_EQ(Cpy(ctx, q8.v, src.v).code(), StatusCode::kInvalidArgument);
  Tensor wrong(GgmlType::F32, 34);
  EXPECT_EQ(Cpy(ctx, m.v, wrong.v).code(), StatusCode::kInvalidArgument);
}

TEST(CpuSetRows, KvStoreF16Q8_0AndTransposedV) {
  // K cache [8, 10] F16: rows 7, 2, 5 <- src rows 0, 1, 2 (I64 indices).
  Tensor src(GgmlType::F32, 8, 3), k(GgmlType::F16, 8, 10), idx(GgmlType::I64, 3);
  Fill(src, 60);
  const int64_t rows[3] = {7, 2, 5};
  std::memcpy(idx.buf.data(), rows, sizeof rows);
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(SetRows(ctx, src.v, idx.v, k.v).ok());
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t i = 0; i < 8; ++i) {
      const int64_t from = r == 7 ? 0 : r == 2 ? 1 : r == 5 ? 2 : -1;
      EXPECT_EQ(k.at(i, r), from < 0 ? 0.0 : kt::RoundF16(float(src.at(i, from))));
    }
  // Q8_0 cache rows of 32, I32 indices.
  Tensor s32(GgmlType::F32, 32, 2), q(GgmlType::Q8_0, 32, 4), i32(GgmlType::I32, 2);
  Fill(s32, 61);
  i32.i32()[0] = 3;
  i32.i32()[1] = 0;
  ASSERT_TRUE(SetRows(ctx, s32.v, i32.v, q.v).ok());
  std::vector<uint8_t> expect(34);
  ASSERT_TRUE(QuantizeRow(GgmlType::Q8_0, s32.f32(), expect.data(), 32).ok());
  EXPECT_EQ(std::memcmp(expect.data(), q.buf.data() + 3 * 34, 34), 0);
  // Transposed V store as llama.cpp does it: V cache [n_ctx = 6, 4] viewed as 24 rows of one
  // element; element (c, t) goes to row c * 6 + cell(t).
  Tensor v(GgmlType::F32, 4, 2), vc(GgmlType::F16, 6, 4), vidx(GgmlType::I64, 8);
  Fill(v, 62);
  TensorView vsrc = v.v;  // [1, 8]: 8 single-element rows in (c, t) order
  vsrc.ne[0] = 1;
  vsrc.ne[1] = 8;
  vsrc.nb[1] = 4;
  TensorView vdst = vc.v;  // [1, 24]
  vdst.ne[0] = 1;
  vdst.ne[1] = 24;
  vdst.nb[1] = 2;
  vdst.nb[2] = vdst.nb[3] = 48;
  int64_t vi[8];
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 4; ++c) vi[t * 4 + c] = c * 6 + (3 + t);
  std::memcpy(vidx.buf.data(), vi, sizeof vi);
  ASSERT_TRUE(SetRows(ctx, vsrc, vidx.v, vdst).ok());
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(vc.at(3 + t, c), kt::RoundF16(float(v.at(c, t))));
  // Out-of-range index.
  const int64_t bad[3] = {1, 10, 2};
  std::memcpy(idx.buf.data(), bad, sizeof bad);
  const Status st = SetRows(ctx, src.v, idx.v, k.v);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("idx[1,0,0] = 10"), std::string::npos) << st.message();
}

TEST(CpuGetRows, F32F16Q8_0) {
  Tensor idx(GgmlType::I32, 4);
  const int32_t ids[4] = {3, 0, 3, 6};
  std::copy(ids, ids + 4, idx.i32());
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    Tensor w(t, 21, 7), out(GgmlType::F32, 21, 4);
    Fill(w, 18);
    ComputeContext ctx = Ctx();
    ASSERT_TRUE(GetRows(ctx, w.v, idx.v, out.v).ok());
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < 21; ++i) EXPECT_EQ(out.at(i, r), w.at(i, ids[r]));
  }
  Tensor wq(GgmlType::Q8_0, 64, 7), out(GgmlType::F32, 64, 4);
  std::vector<float> src(64 * 7);
  kt::FillUniform(src, 19);
  for (int r = 0; r < 7; ++r)
    ASSERT_TRUE(QuantizeRow(GgmlType::Q8_0, &src[size_t(r) * 64], wq.buf.data() + r * wq.v.nb[1], 64).ok());
  ComputeContext ctx = Ctx();
  ASSERT_TRUE(GetRows(ctx, wq.v, idx.v, out.v).ok());
  std::vector<float> deq(64);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(DequantizeRow(GgmlType::Q8_0, wq.buf.data() + ids[r] * wq.v.nb[1], deq.data(), 64).ok());
    for (int i = 0; i < 64; ++i) EXPECT_EQ(out.at(i, r), deq[size_t(i)]);
  }
  Tensor iq(GgmlType::IQ2_XXS, 256, 8), out256(GgmlType::F32, 256, 4);
  EXPECT_EQ(GetRows(ctx, iq.v, idx.v, out256.v).code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(SupportsGetRowsType(GgmlType::IQ2_XXS));
  EXPECT_TRUE(SupportsGetRowsType(GgmlType::IQ4_XS));
  idx.i32()[2] = 7;
  Status s = GetRows(ctx, wq.v, idx.v, out.v);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("idx[2,0,0] = 7"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace stowage::cpu
