// GEMM family "q8" (Q8_0, Q4_0 plain and Q4_0x8, Q5_0, IQ4_NL, Q4_1, Q5_1) and the MUL_MAT GEMM
// driver.
//
// - The scalar GEMM kernel equals the vec_dot of the same row and column up to float accumulation
//   order: both sum the same exact integer block sums times the same scales; the vec_dot adds
//   (dw * da) * isum per block, the GEMM fma(isum, dw * da, acc). Each block term and each
//   addition rounds at most once (relative 2^-24), so |difference| <= (nb + 2) * 2^-23 *
//   sum_b |dw * da * isum_b| <= (nb + 2) * 2^-23 * sum_k |w_k| |a_k| (dequantized values).
// - The AVX-512 VNNI kernel performs the scalar kernel's operations in the same order: equal bits.
// - MUL_MAT through the driver (GQA broadcast, gathered src1, strided dst, short last panel, column
//   chunks, 1..3 threads) equals the per-element vec_dot reference within that bound, and the
//   VNNI level equals the scalar level bit for bit; below kGemmMinCols columns the vec_dot path runs
//   unchanged (bit-identical to the reference).
// - DISABLED_Bench / DISABLED_BenchMulMat (run with --gtest_also_run_disabled_tests; print, assert
//   nothing about time): kernel GOPS per level vs the vec_dot of the same level, pack time, and
//   MUL_MAT GOPS on the benchmark model's shapes.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <random>

#include "gemm.h"
#include "kernels.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {

struct TypeCase {
  GgmlType type;
  int layout;
  VecDotFn vec_dot;
};

const TypeCase kCases[] = {
    {GgmlType::Q8_0, kLayoutPlain, scalar::VecDotQ8_0Q8_0},
    {GgmlType::Q4_0, kLayoutPlain, scalar::VecDotQ4_0Q8_0},
    {GgmlType::Q4_0, kLayoutQ4_0x8, scalar::VecDotQ4_0Q8_0},
    {GgmlType::Q5_0, kLayoutPlain, scalar::VecDotQ5_0Q8_0},
    {GgmlType::IQ4_NL, kLayoutPlain, scalar::VecDotIQ4_NLQ8_0},
    {GgmlType::MXFP4, kLayoutPlain, scalar::VecDotMXFP4Q8_0},
    {GgmlType::MXFP4, kLayoutMXFP4x8, scalar::VecDotMXFP4Q8_0},
    {GgmlType::Q4_1, kLayoutPlain, scalar::VecDotQ4_1Q8_1},
    {GgmlType::Q5_1, kLayoutPlain, scalar::VecDotQ5_1Q8_1},
};

bool IsMinType(GgmlType t) { return t == GgmlType::Q4_1 || t == GgmlType::Q5_1; }

std::string Name(const TypeCase& tc) {
  return std::string(GgmlTypeName(tc.type)) + (tc.layout != kLayoutPlain ? "x8" : "");
}

// Random blocks: every quant bit pattern (Q8_0 includes -128), fp16 scales in [0.001, 0.05).
std::vector<uint8_t> RandomRows(GgmlType type, int64_t K, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t bs = GetTypeTraits(type).type_size;
  std::vector<uint8_t> out(RowSize(type, K) * size_t(rows));
  for (auto& b : out) b = uint8_t(rng());
  std::uniform_real_distribution<float> d(0.001f, 0.05f);
  std::uniform_real_distribution<float> m(-0.05f, 0.05f);
  for (size_t o = 0; o < out.size(); o += bs) {  // d is the first field of every block type here
    if (type == GgmlType::MXFP4) {               // its E8M0 scale byte: 2^-7 .. 2^0 (with the doubled levels)
      out[o] = uint8_t(121 + rng() % 8);
      continue;
    }
    const uint16_t h = Fp32ToFp16(d(rng));
    std::memcpy(&out[o], &h, 2);
    if (IsMinType(type)) {  // then the min m
      const uint16_t hm = Fp32ToFp16(m(rng));
      std::memcpy(&out[o + 2], &hm, 2);
    }
  }
  return out;
}

// Weight matrix [K, N] (one matrix), plain bytes plus the view the driver sees (repacked when asked).
struct Weights {
  std::vector<uint8_t> plain, packed;
  TensorView v;
  Weights(const TypeCase& tc, int64_t K, int64_t N, int64_t ne2, uint32_t seed, bool all_ones = false) {
    plain = RandomRows(tc.type, K, N * ne2, seed);
    if (all_ones) {  // every quant bit set (Q8_0: 0x7F = +127, the largest unsigned u = 255)
      const size_t bs = GetTypeTraits(tc.type).type_size;
      const size_t head = IsMinType(tc.type) ? 4 : tc.type == GgmlType::MXFP4 ? 1 : 2;
      for (size_t o = 0; o < plain.size(); o += bs)
        std::memset(&plain[o + head], tc.type == GgmlType::Q8_0 ? 0x7F : 0xFF, bs - head);
    }
    v.type = tc.type;
    v.ne[0] = K;
    v.ne[1] = N;
    v.ne[2] = ne2;
    v.ne[3] = 1;
    SetContiguousStrides(v);
    v.data = plain.data();
    if (tc.layout != kLayoutPlain) {
      packed.resize(plain.size());
      EXPECT_TRUE(RepackWeight(v, tc.layout, packed.data()).ok());
      v.data = packed.data();
      v.layout = tc.layout;
    }
  }
  const uint8_t* PlainRow(int64_t r) const { return plain.data() + size_t(r) * RowSize(v.type, v.ne[0]); }
};

struct Ref {
  float value;
  float bound;
};

// vec_dot of a plain weight row with QuantizeRowQ8_0Act(x) (Q8_1Act for Q4_1/Q5_1), and the
// accumulation-order bound. For the min types each block adds two terms (d dw isum and m s), so the
// bound is (2 nb + 2) 2^-23 sum_b (|d dw isum_b| + |m s_b|), from the stored integers.
Ref RefDot(const TypeCase& tc, const uint8_t* wrow, const float* x, int64_t K) {
  Ref r{};
  const int64_t nb = K / 32;
  if (IsMinType(tc.type)) {
    std::vector<BlockQ8_1> q(static_cast<size_t>(nb));
    QuantizeRowQ8_1Act(x, q.data(), K);
    tc.vec_dot(K, &r.value, wrow, q.data());
    const size_t bs = GetTypeTraits(tc.type).type_size;
    double terms = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = wrow + size_t(b) * bs;
      uint16_t dh, mh;
      std::memcpy(&dh, blk, 2);
      std::memcpy(&mh, blk + 2, 2);
      uint32_t qh = 0;
      if (tc.type == GgmlType::Q5_1) std::memcpy(&qh, blk + 4, 4);
      const uint8_t* qs = blk + (tc.type == GgmlType::Q5_1 ? 8 : 4);
      long isum_abs = 0;
      for (int j = 0; j < 16; ++j) {
        const int q0 = (qs[j] & 0x0F) | int(((qh >> j) & 1u) << 4),
                  q1 = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
        isum_abs +=
            long(q0) * std::abs(int(q[size_t(b)].qs[j])) + long(q1) * std::abs(int(q[size_t(b)].qs[j + 16]));
      }
      terms += std::fabs(double(Fp16ToFp32(dh)) * Fp16ToFp32(q[size_t(b)].d)) * double(isum_abs) +
               std::fabs(double(Fp16ToFp32(mh)) * Fp16ToFp32(q[size_t(b)].s));
    }
    r.bound = float(double(2 * nb + 2) * std::ldexp(1.0, -23) * terms) + 1e-30f;
    return r;
  }
  std::vector<BlockQ8_0> q(static_cast<size_t>(nb));
  QuantizeRowQ8_0Act(x, q.data(), K);
  tc.vec_dot(K, &r.value, wrow, q.data());
  std::vector<float> wd(static_cast<size_t>(K)), ad(static_cast<size_t>(K));
  EXPECT_TRUE(DequantizeRow(tc.type, wrow, wd.data(), K).ok());
  DequantizeRowQ8_0(q.data(), ad.data(), K);
  double abs_sum = 0;
  for (int64_t k = 0; k < K; ++k) abs_sum += std::fabs(double(wd[size_t(k)]) * ad[size_t(k)]);
  r.bound = float(double(nb + 2) * std::ldexp(1.0, -23) * abs_sum) + 1e-30f;
  return r;
}

struct Aligned {
  std::vector<uint8_t> buf;
  uint8_t* p;
  explicit Aligned(size_t n) : buf(n + 64) {
    p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63));
  }
};

// Scalar kernel vs vec_dot, and (when the CPU has VNNI) VNNI kernel vs scalar kernel, on one panel of
// nr rows (starting at a row multiple of 16 so the Q4_0x8 groups line up) and nc columns.
// extreme: every weight at its largest stored value and every activation +127 (x = +1) or -127
// (x = -1): the largest integer sums, where a saturating int16 chain would show.
void CheckKernels(const TypeCase& tc, int64_t K, int nr, int nc, uint32_t seed, float extreme = 0.f) {
  SCOPED_TRACE(Name(tc) + " K=" + std::to_string(K) + " nr=" + std::to_string(nr) +
               " nc=" + std::to_string(nc) + " extreme=" + std::to_string(extreme));
  const GemmKernels* sk = GetGemmKernelsQ8(tc.type, tc.layout, IsaLevel::kScalar);
  ASSERT_NE(sk, nullptr);
  const int64_t N = 32;  // the panel is rows 16..16+nr of a 32-row matrix
  Weights w(tc, K, N, 1, seed, extreme != 0.f);
  std::vector<float> x(size_t(K) * size_t(nc));
  kt::FillUniform(x, seed + 1, -2.f, 2.f);
  if (extreme != 0.f) std::fill(x.begin(), x.end(), extreme);
  const size_t arow = sk->act_row_bytes(K);
  ASSERT_EQ(arow % 64, 0u);
  Aligned act(arow * size_t(nc)), panel(sk -> panel_bytes(K));
  for (int c = 0; c < nc; ++c) sk->from_float(x.data() + size_t(c) * size_t(K), act.p + size_t(c) * arow, K);
  const char* wbase = static_cast<const char*>(w.v.data) + 16 * w.v.nb[1];
  sk->pack(K, wbase, w.v.nb[1], nr, tc.layout, panel.p);
  const size_t ds = size_t(nr) + 3;  // dst stride larger than nr: the gap must stay untouched
  std::vector<float> d0(ds * size_t(nc), -7.f), d1(ds * size_t(nc), -7.f);
  sk->kernel(K, panel.p, act.p, arow, nc, d0.data(), ds, nr);
  for (int c = 0; c < nc; ++c)
    for (int r = 0; size_t(r) < ds; ++r) {  // rows < nr, then the gap nr..ds-1 (inside d0)
      const float got = d0[size_t(c) * ds + size_t(r)];
      if (r >= nr) {
        ASSERT_EQ(got, -7.f) << "row " << r << " col " << c << " written";
        continue;
      }
      const Ref ref = RefDot(tc, w.PlainRow(16 + r), x.data() + size_t(c) * size_t(K), K);
      ASSERT_LE(std::fabs(got - ref.value), ref.bound) << "row " << r << " col " << c << " ref " << ref.value;
    }
  for (IsaLevel isa : {IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (DetectIsa() < isa) continue;
    SCOPED_TRACE("isa " + std::to_string(int(isa)));
    const GemmKernels* vk = GetGemmKernelsQ8(tc.type, tc.layout, isa);
    ASSERT_NE(vk, nullptr);
    std::fill(d1.begin(), d1.end(), -7.f);
    Aligned act2(vk->act_row_bytes(K) * size_t(nc)), panel2(vk -> panel_bytes(K));
    for (int c = 0; c < nc; ++c)
      vk->from_float(x.data() + size_t(c) * size_t(K), act2.p + size_t(c) * arow, K);
    ASSERT_EQ(std::memcmp(act2.p, act.p, arow * size_t(nc)), 0) << "activation rows differ";
    vk->pack(K, wbase, w.v.nb[1], nr, tc.layout, panel2.p);
    ASSERT_EQ(std::memcmp(panel2.p, panel.p, vk->panel_bytes(K)), 0) << "panels differ";
    vk->kernel(K, panel2.p, act2.p, arow, nc, d1.data(), ds, nr);
    for (size_t i = 0; i < d0.size(); ++i) ASSERT_EQ(d1[i], d0[i]) << "SIMD != scalar at " << i;
    // The batch-invariant kernels of this level (AVX-512 VNNI, plain layouts: ggml's 8-lane order)
    // equal this level's vec_dot of the same weight row and activation row, bit for bit.
    const GemmKernels* bk = GetGemmKernelsQ8(tc.type, tc.layout, isa, /*batch_invariant=*/true);
    if (bk == nullptr || bk == vk || tc.type == GgmlType::IQ4_NL) continue;  // IQ4_NL: two orders, as ggml
    const size_t brow = bk->act_row_bytes(K);
    Aligned act3(brow * size_t(nc)), panel3(bk -> panel_bytes(K));
    for (int c = 0; c < nc; ++c)
      bk->from_float(x.data() + size_t(c) * size_t(K), act3.p + size_t(c) * brow, K);
    bk->pack(K, wbase, w.v.nb[1], nr, tc.layout, panel3.p);
    std::fill(d1.begin(), d1.end(), -7.f);
    bk->kernel(K, panel3.p, act3.p, brow, nc, d1.data(), ds, nr);
    const TypeKernels* tk = GetTypeKernels(tc.type, isa);
    const size_t vrow = RowSize(tk->vec_dot_type, K);
    std::vector<uint8_t> xq(vrow * size_t(nc));
    for (int c = 0; c < nc; ++c)
      tk->from_float(x.data() + size_t(c) * size_t(K), xq.data() + size_t(c) * vrow, K);
    for (int c = 0; c < nc; ++c)
      for (int r = 0; size_t(r) < ds; ++r) {
        const float got = d1[size_t(c) * ds + size_t(r)];
        if (r >= nr) {
          ASSERT_EQ(got, -7.f) << "row " << r << " col " << c << " written (batch-invariant kernel)";
          continue;
        }
        float want;
        tk->vec_dot(K, &want, w.PlainRow(16 + r), xq.data() + size_t(c) * vrow);
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "batch-invariant kernel != vec_dot at row " << r
                                                  << " col " << c << ": " << got << " vs " << want;
      }
  }
}

TEST(GemmQ8, KernelsMatchVecDotAndScalar) {
  uint32_t seed = 100;
  for (const TypeCase& tc : kCases)
    for (int64_t K : {32, 96, 256, 1056})
      for (int nr : {1, 7, 8, 15, 16})
        for (int nc : {1, 2, 5, 8, 9, 13, 16, 23, 40}) {
          if (tc.layout != kLayoutPlain && nr % 8 != 0) continue;  // repacked N is a multiple of 8
          CheckKernels(tc, K, nr, nc, seed++);
          if (HasFatalFailure()) return;
        }
}

TEST(GemmQ8, KernelsExtremeValues) {
  for (const TypeCase& tc : kCases)
    for (float x : {1.f, -1.f}) {
      CheckKernels(tc, 256, 16, 3, 7, x);
      if (HasFatalFailure()) return;
    }
}

TEST(GemmQ8, ActivationsEqualQuantizeRowQ8_0Act) {
  const int64_t K = 224;
  std::vector<float> x(static_cast<size_t>(K));
  kt::FillUniform(x, 3, -3.f, 3.f);
  // Exact ties x * (127 / amax) = n + 0.5 are rounded half to even by both: block 1 has amax 127.
  x[32] = 127.f;
  x[33] = 0.5f;
  x[34] = 1.5f;
  x[35] = -2.5f;
  x[36] = -0.5f;
  for (int j = 64; j < 96; ++j) x[size_t(j)] = 0.f;  // an all-zero block
  // Non-finite blocks (d = NaN, qs = 0, correction 0): block 5 a NaN in its second half, block 6
  // an inf first (the AVX-512 quantizer used to overflow the correction on vcvtps2dq's INT_MIN).
  x[5 * 32 + 20] = std::numeric_limits<float>::quiet_NaN();
  x[6 * 32] = std::numeric_limits<float>::infinity();
  std::vector<BlockQ8_0> q(size_t(K / 32));
  QuantizeRowQ8_0Act(x.data(), q.data(), K);
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    const GemmKernels* k = GetGemmKernelsQ8(GgmlType::Q4_0, kLayoutPlain, isa);
    if (k == nullptr) continue;  // no VNNI: the vec_dot path
    SCOPED_TRACE("isa " + std::to_string(int(isa)));
    std::vector<uint8_t> act(k->act_row_bytes(K));
    k->from_float(x.data(), act.data(), K);
    for (int64_t b = 0; b < K / 32; ++b) {
      // 72-byte records: qs[32], d, corr[8] (biased by the bits of 1.5 * 2^23), corr_total.
      const uint8_t* rec = act.data() + size_t(b) * 72;
      EXPECT_EQ(std::memcmp(rec, q[size_t(b)].qs, 32), 0) << b;
      float d;
      int32_t corr[8], total;
      std::memcpy(&d, rec + 32, 4);
      std::memcpy(corr, rec + 36, 32);
      std::memcpy(&total, rec + 68, 4);
      if (b >= 5)
        EXPECT_TRUE(std::isnan(d) && std::isnan(HalfToFloat(q[size_t(b)].d))) << b;
      else
        EXPECT_EQ(d, HalfToFloat(q[size_t(b)].d)) << b;
      int sum = 0;
      for (int s = 0; s < 8; ++s) {
        int part = 0;
        for (int j = 4 * s; j < 4 * s + 4; ++j) part += q[size_t(b)].qs[j];
        EXPECT_EQ(corr[s], -8 * part + 0x4B400000) << b << " k-step " << s;  // Q4_0's zero point
        sum += part;
      }
      EXPECT_EQ(total, -8 * sum) << b;
    }
  }
}

TEST(GemmQ8, ActivationsEqualQuantizeRowQ8_1Act) {  // Q4_1/Q5_1: qs, d and s of Q8_1
  const int64_t K = 128;
  std::vector<float> x(static_cast<size_t>(K));
  kt::FillUniform(x, 4, -3.f, 3.f);
  x[3 * 32 + 31] = std::numeric_limits<float>::quiet_NaN();  // block 3: d = s = NaN, qs = 0
  std::vector<BlockQ8_1> q(size_t(K / 32));
  QuantizeRowQ8_1Act(x.data(), q.data(), K);
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    const GemmKernels* k = GetGemmKernelsQ8(GgmlType::Q5_1, kLayoutPlain, isa);
    if (k == nullptr || isa > DetectIsa()) continue;
    std::vector<uint8_t> act(k->act_row_bytes(K));
    k->from_float(x.data(), act.data(), K);
    for (int64_t b = 0; b < K / 32; ++b) {
      const uint8_t* rec = act.data() + size_t(b) * 40;
      float d, sa;
      std::memcpy(&d, rec + 32, 4);
      std::memcpy(&sa, rec + 36, 4);
      EXPECT_EQ(std::memcmp(rec, q[size_t(b)].qs, 32), 0) << b;
      if (b == 3) {
        EXPECT_TRUE(std::isnan(d) && std::isnan(sa) && std::isnan(HalfToFloat(q[size_t(b)].d))) << b;
        continue;
      }
      EXPECT_EQ(d, HalfToFloat(q[size_t(b)].d)) << b;
      EXPECT_EQ(sa, HalfToFloat(q[size_t(b)].s)) << b;
    }
  }
}

TEST(GemmQ8, LookupLevels) {
  EXPECT_EQ(GetGemmKernelsQ8(GgmlType::Q4_K, kLayoutPlain, IsaLevel::kScalar), nullptr);
  EXPECT_EQ(GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutQ4_0x8, IsaLevel::kScalar), nullptr);
  EXPECT_NE(GetGemmKernelsQ8(GgmlType::Q4_0, kLayoutQ4_0x8, IsaLevel::kScalar), nullptr);
  EXPECT_EQ(GetGemmKernelsQ8(GgmlType::Q4_0, kLayoutMXFP4x8, IsaLevel::kScalar), nullptr);
  EXPECT_NE(GetGemmKernelsQ8(GgmlType::MXFP4, kLayoutMXFP4x8, IsaLevel::kScalar), nullptr);
  // Plain MXFP4 has no batch-invariant GEMM (llama.cpp: the two-accumulator vec_dot for every column).
  EXPECT_EQ(GetGemmKernelsQ8(GgmlType::MXFP4, kLayoutPlain, IsaLevel::kAvx512Vnni, true), nullptr);
  if (DetectIsa() >= IsaLevel::kAvx2) {
    EXPECT_NE(GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx2), nullptr);
    // Asked for AVX-512 (with VNNI or not): the VNNI kernels where the level and the CPU have VNNI,
    // else the AVX2 ones.
    const GemmKernels* k2 = GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx2);
    EXPECT_EQ(GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx512), k2);
    const GemmKernels* kv = GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx512Vnni);
    EXPECT_NE(kv, nullptr);
    EXPECT_EQ(kv != k2, DetectIsa() >= IsaLevel::kAvx512Vnni);
    // The batch-invariant kernels (ggml's 8-lane order) exist with VNNI only.
    EXPECT_EQ(GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx512Vnni, true) != nullptr,
              DetectIsa() >= IsaLevel::kAvx512Vnni);
    EXPECT_EQ(GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx512, true), nullptr);
    EXPECT_EQ(GetGemmKernelsQ8(GgmlType::Q8_0, kLayoutPlain, IsaLevel::kAvx2, true), nullptr);
  }
}

// MUL_MAT through the driver: src0 [K, N, ne02], src1 [K, M, ne12] (ne12 = 2 * ne02: GQA
// broadcast), optionally a permuted src1 (nb0 != 4: gathered) and a dst with padded rows.
void CheckMulMat(const TypeCase& tc, int64_t K, int64_t N, int64_t M, bool permuted_src1, bool padded_dst,
                 uint32_t seed) {
  SCOPED_TRACE(Name(tc) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + " M=" + std::to_string(M) +
               (permuted_src1 ? " permuted" : "") + (padded_dst ? " padded" : ""));
  const int64_t ne02 = 2, ne12 = 4;
  Weights w(tc, K, N, ne02, seed);
  // src1 values x[i12][m][k]; stored either contiguous or as a transposed buffer [M][K] -> [K][M].
  std::vector<float> x(size_t(K * M * ne12));
  kt::FillUniform(x, seed + 7, -1.f, 1.f);
  std::vector<float> src1_buf(x.size());
  TensorView b;
  b.type = GgmlType::F32;
  b.ne[0] = K;
  b.ne[1] = M;
  b.ne[2] = ne12;
  b.ne[3] = 1;
  if (!permuted_src1) {
    SetContiguousStrides(b);
    src1_buf = x;
  } else {  // element (k, m, i2) at ((i2 * K + k) * M + m) floats
    b.nb[0] = size_t(M) * 4;
    b.nb[1] = 4;
    b.nb[2] = size_t(K * M) * 4;
    b.nb[3] = b.nb[2] * size_t(ne12);
    for (int64_t i2 = 0; i2 < ne12; ++i2)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k)
          src1_buf[size_t((i2 * K + k) * M + m)] = x[size_t((i2 * M + m) * K + k)];
  }
  b.data = src1_buf.data();
  const int64_t pad = padded_dst ? 5 : 0;
  std::vector<float> out(size_t((N + pad) * M * ne12), -9.f);
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

  std::vector<float> scalar_out;
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni})
    for (int nt : {1, 2, 3}) {
      if (isa > DetectIsa()) continue;
      std::fill(out.begin(), out.end(), -9.f);
      ComputeContext ctx;
      ctx.n_threads = nt;
      ctx.max_isa = isa;
      ASSERT_TRUE(MulMat(ctx, w.v, b, d).ok());
      const bool gemm = M >= kGemmMinCols && GetGemmKernels(tc.type, tc.layout, isa) != nullptr;
      for (int64_t i2 = 0; i2 < ne12; ++i2)
        for (int64_t m = 0; m < M; ++m) {
          const float* xr = x.data() + size_t((i2 * M + m) * K);
          for (int64_t n = 0; n < N + pad; ++n) {
            const float got = out[size_t((i2 * M + m) * (N + pad) + n)];
            if (n >= N) {
              ASSERT_EQ(got, -9.f) << "padding written";
              continue;
            }
            const Ref ref = RefDot(tc, w.PlainRow((i2 / 2) * N + n), xr, K);
            if (gemm) {
              ASSERT_LE(std::fabs(got - ref.value), ref.bound)
                  << "n " << n << " m " << m << " i2 " << i2 << " isa " << int(isa) << " nt " << nt;
            } else if (tc.layout == kLayoutPlain) {
              // vec_dot path; the SIMD dots have their own accumulation order.
              if (isa == IsaLevel::kScalar)
                ASSERT_EQ(got, ref.value) << "n " << n << " m " << m << " i2 " << i2;
              else
                ASSERT_LE(std::fabs(got - ref.value), 2 * ref.bound) << "n " << n << " m " << m;
            } else {
              ASSERT_LE(std::fabs(got - ref.value), ref.bound)
                  << "n " << n << " m " << m;  // Q4_0x8 gemv: fma
            }
          }
        }
      if (gemm) {
        if (scalar_out.empty())
          scalar_out = out;
        else
          ASSERT_EQ(std::memcmp(out.data(), scalar_out.data(), out.size() * 4), 0)
              << "GEMM result depends on level/threads (isa " << int(isa) << " nt " << nt << ")";
      }
    }
}

TEST(GemmQ8, MulMatDriver) {
  uint32_t seed = 1000;
  for (const TypeCase& tc : kCases) {
    CheckMulMat(tc, 64, 40, 8, false, false, seed++);    // short last panel (8 rows), exactly kGemmMinCols
    CheckMulMat(tc, 96, 24, 70, true, true, seed++);     // two column chunks, gathered src1, padded dst
    CheckMulMat(tc, 256, 72, 19, false, true, seed++);   // several panel groups
    CheckMulMat(tc, 64, 16, 200, false, false, seed++);  // few panel groups: columns split over items
    CheckMulMat(tc, 32, 16, 3, false, false, seed++);    // below kGemmMinCols: vec_dot path
    if (HasFatalFailure()) return;
  }
}

TEST(GemmQ8, DISABLED_Bench) {
  if (!(DetectIsa() >= IsaLevel::kAvx512Vnni)) GTEST_SKIP() << "no AVX512-VNNI";
  for (int64_t K : {2048, 5632}) {
    for (IsaLevel isa : {IsaLevel::kAvx2, IsaLevel::kAvx512Vnni})
      for (GgmlType kt_type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
        const GemmKernels* k = GetGemmKernelsQ8(kt_type, kLayoutPlain, isa);
        const int nc = 64;
        std::vector<uint8_t> wrows = RandomRows(kt_type, K, 16, 5);
        std::vector<float> x(size_t(K) * nc);
        kt::FillUniform(x, 6);
        const size_t arow = k->act_row_bytes(K);
        Aligned act(arow * nc), panel(k->panel_bytes(K));
        for (int c = 0; c < nc; ++c)
          k->from_float(x.data() + size_t(c) * size_t(K), act.p + size_t(c) * arow, K);
        k->pack(K, wrows.data(), RowSize(kt_type, K), 16, kLayoutPlain, panel.p);
        std::vector<float> d(16 * nc);
        // Thread CPU time (the machine is shared: time spent descheduled does not count), best of 15.
        const int reps = 40;
        double best = 1e30;
        auto cpu_now = [] {
          timespec ts;
          clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
          return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
        };
        for (int t = 0; t < 15; ++t) {
          const double t0 = cpu_now();
          for (int i = 0; i < reps; ++i) k->kernel(K, panel.p, act.p, arow, nc, d.data(), 16, 16);
          best = std::min(best, cpu_now() - t0);
        }
        std::printf("GemmQ8 %s kernel %s 16 x %d x K=%lld: %.1f GOPS (1 thread)\n",
                    isa == IsaLevel::kAvx2 ? "AVX2" : "VNNI", GgmlTypeName(kt_type), nc, (long long)K,
                    2.0 * 16 * nc * double(K) * reps / best * 1e-9);
        {  // baseline: the vec_dot path's per-element dots of the same level on the same data
          const TypeKernels* tk = GetTypeKernels(kt_type, isa);
          std::vector<BlockQ8_0> q(size_t(K / 32) * nc);
          for (int c = 0; c < nc; ++c)
            QuantizeRowQ8_0Act(x.data() + size_t(c) * size_t(K), q.data() + size_t(c) * size_t(K / 32), K);
          const size_t rs = RowSize(kt_type, K);
          double vbest = 1e30;
          for (int t = 0; t < 15; ++t) {
            const double t0 = cpu_now();
            for (int i = 0; i < reps / 4; ++i)
              for (int c = 0; c < nc; ++c)
                for (int r = 0; r < 16; ++r)
                  tk->vec_dot(K, &d[size_t(c) * 16 + size_t(r)], wrows.data() + size_t(r) * rs,
                              q.data() + size_t(c) * size_t(K / 32));
            vbest = std::min(vbest, cpu_now() - t0);
          }
          std::printf("  vec_dot path, same level: %.1f GOPS\n",
                      2.0 * 16 * nc * double(K) * (reps / 4) / vbest * 1e-9);
        }
        if (isa != IsaLevel::kAvx512Vnni || kt_type != GgmlType::Q8_0) continue;
        for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
          std::vector<uint8_t> rows = RandomRows(t, K, 16, 7);
          for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx512Vnni}) {
            const GemmKernels* pk = GetGemmKernelsQ8(t, kLayoutPlain, isa);
            double pbest = 1e30;
            for (int tr = 0; tr < 15; ++tr) {
              const double t0 = cpu_now();
              for (int i = 0; i < reps; ++i)
                pk->pack(K, rows.data(), RowSize(t, K), 16, kLayoutPlain, panel.p);
              pbest = std::min(pbest, cpu_now() - t0);
            }
            std::printf("  pack %s 16 x K=%lld (%s): %.2f us per panel\n", GgmlTypeName(t), (long long)K,
                        isa == IsaLevel::kScalar ? "scalar" : "avx512", pbest / reps * 1e6);
          }
        }
      }
  }
}

// MUL_MAT through the driver on the benchmark model's shapes (0.85B llama, 512-token ubatch), one
// thread, thread CPU time (best of 3): conversion + packing + kernel together.
TEST(GemmQ8, DISABLED_BenchMulMat) {
  if (!(DetectIsa() >= IsaLevel::kAvx512Vnni)) GTEST_SKIP() << "no AVX512-VNNI";
  struct Shape {
    int64_t K, N;
  };
  for (const TypeCase& tc : {kCases[0], kCases[2]})
    for (Shape sh : {Shape{2048, 2048}, Shape{2048, 5632}, Shape{5632, 2048}}) {
      const int64_t M = 512;
      Weights w(tc, sh.K, sh.N, 1, 77);
      kt::Tensor b(GgmlType::F32, sh.K, M), d(GgmlType::F32, sh.N, M);
      kt::Fill(b, 78);
      ComputeContext ctx;
      ctx.n_threads = 1;
      double best = 1e30;
      for (int t = 0; t < 3; ++t) {
        timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        ASSERT_TRUE(MulMat(ctx, w.v, b.v, d.v).ok());
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        best = std::min(best, double(t1.tv_sec - t0.tv_sec) + 1e-9 * double(t1.tv_nsec - t0.tv_nsec));
      }
      std::printf("MulMat %s K=%lld N=%lld M=%lld: %.1f GOPS (1 thread, %.2f ms)\n", Name(tc).c_str(),
                  (long long)sh.K, (long long)sh.N, (long long)M, 2.0 * double(sh.K * sh.N * M) / best * 1e-9,
                  best * 1e3);
      ctx.n_threads = 2;  // wall time, best of 5 (on a shared machine only a rough figure)
      double best2 = 1e30;
      for (int t = 0; t < 5; ++t) {
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_TRUE(MulMat(ctx, w.v, b.v, d.v).ok());
        best2 = std::min(best2, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf("    2 threads: %.1f GOPS (wall, %.2f ms)\n", 2.0 * double(sh.K * sh.N * M) / best2 * 1e-9,
                  best2 * 1e3);
    }
}

}  // namespace
}  // namespace stowage::cpu
