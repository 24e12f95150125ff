// Adversarial tests of the MUL_MAT GEMM path (gemm.h, matmul.cpp MulMatGemm) through the public
// MulMat entry point, for every weight type that has GEMM kernels.
//
// Reference: the same MulMat called once per src1 column (a view with ne1 = 1 < kGemmMinCols, so
// the vec_dot path runs) at the same ISA level and on the same views. Both paths use the same
// activation quantization (gemm.h), so they differ only by float accumulation order; the tests
// allow |gemm - ref| <= kRelTol * S, S = sum_k |w_k| |a_k| (dequantized weights, F32
// activations), plus the same for the min term of the types with mins (Q4_1, Q5_1, Q2_K, Q4_K,
// Q5_K: bounded through |w| + |dmin * m| <= ..., here by doubling S) — an order-of-accumulation
// difference is ~1e-7 S, a wrong row, column, block or scale is O(S).
//
// Covered: M = kGemmMinCols - 1 / kGemmMinCols / 63 / 64 / 65 / 129 columns, N < 16, N % 16 != 0,
// K = one block and K not a multiple of the kernels' chunks, GQA broadcast (ne02 < ne12, ne03 > 1),
// permuted and gathered (nb10 != 4) src1, src1 data not 64-byte aligned, dst with padded nb1/nb2,
// 1/2/3/7 threads (and more threads than work items), ctx.work reused across shapes, non-finite
// and huge activations, extreme quantized values, kLayoutQ4_0x8, scalar vs SIMD levels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gemm.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {

constexpr double kRelTol = 2e-5;

struct TypeCase {
  GgmlType type;
  int layout;
};

std::string Name(const TypeCase& tc) {
  return std::string(GgmlTypeName(tc.type)) + (tc.layout == kLayoutQ4_0x8 ? "x8" : "");
}

// Every type with GEMM kernels at the scalar level (checked in GemmEdgeCases.CasesHaveKernels).
std::vector<TypeCase> Cases() {
  const GgmlType all[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q4_0,
                          GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::Q2_K,
                          GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,   GgmlType::IQ4_XS};
  std::vector<TypeCase> out;
  for (GgmlType t : all)
    if (GetGemmKernels(t, kLayoutPlain, IsaLevel::kScalar)) out.push_back({t, kLayoutPlain});
  if (GetGemmKernels(GgmlType::Q4_0, kLayoutQ4_0x8, IsaLevel::kScalar))
    out.push_back({GgmlType::Q4_0, kLayoutQ4_0x8});
  return out;
}

std::vector<IsaLevel> Levels() {
  std::vector<IsaLevel> l = {IsaLevel::kScalar};
  if (DetectIsa() >= IsaLevel::kAvx2) l.push_back(IsaLevel::kAvx2);
  if (DetectIsa() >= IsaLevel::kAvx512) l.push_back(IsaLevel::kAvx512);
  if (DetectIsa() >= IsaLevel::kAvx512Vnni) l.push_back(IsaLevel::kAvx512Vnni);
  return l;
}

int64_t BlockSize(GgmlType t) {
  // The activation type's block (Q8_K: 256) may be larger than the weight's.
  const int64_t b = GetTypeTraits(t).block_size;
  return std::max<int64_t>(b, t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ? 1 : 32);
}

// Random valid weight rows (rows x K): floats for F32/F16/BF16; random quant bits with sane fp16
// scales for the block types. `extreme`: every quant bit set (largest magnitudes).
std::vector<uint8_t> MakeWeights(GgmlType t, int64_t K, int64_t rows, uint32_t seed, bool extreme = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const size_t n = size_t(K * rows);
  if (t == GgmlType::F32) {
    std::vector<uint8_t> out(n * 4);
    for (size_t i = 0; i < n; ++i) {
      const float v = extreme ? 1.0f : u(rng);
      std::memcpy(&out[4 * i], &v, 4);
    }
    return out;
  }
  if (t == GgmlType::F16 || t == GgmlType::BF16) {
    std::vector<uint8_t> out(n * 2);
    for (size_t i = 0; i < n; ++i) {
      const float v = extreme ? 60000.f : u(rng);
      const uint16_t h = t == GgmlType::F16 ? Fp32ToFp16(v) : FloatToBf16(v);
      std::memcpy(&out[2 * i], &h, 2);
    }
    return out;
  }
  std::vector<uint8_t> out = kt::RandomBlocks(t, K * rows, seed);
  const size_t bs = GetTypeTraits(t).type_size;
  std::uniform_real_distribution<float> d(0.001f, 0.05f);
  auto put = [&](size_t off, float v) {
    const uint16_t h = Fp32ToFp16(v);
    std::memcpy(&out[off], &h, 2);
  };
  for (size_t o = 0; o < out.size(); o += bs) {
    if (extreme) {
      // Even rows: every byte of the block 0xFF (Q8_0: 0x7F = +127), the largest unsigned value u
      // of the SIMD kernels' offset form; odd rows 0x00 (Q8_0: 0x80 = -128), the most negative
      // signed value. Then the scales are put back.
      const bool even = (o / RowSize(t, K)) % 2 == 0;
      std::memset(&out[o], t == GgmlType::Q8_0 ? (even ? 0x7F : 0x80) : (even ? 0xFF : 0x00), bs);
    }
    switch (t) {
      case GgmlType::Q4_0:
      case GgmlType::Q5_0:
      case GgmlType::Q8_0:
      case GgmlType::IQ4_NL:
        put(o, d(rng));
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
        put(o, d(rng));
        put(o + 2, extreme ? 0.05f : d(rng) - 0.025f);
        break;
      case GgmlType::Q2_K:
        put(o + 80, d(rng));
        put(o + 82, d(rng));
        break;
      case GgmlType::Q3_K:
        put(o + 108, d(rng));
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put(o, d(rng));
        put(o + 2, d(rng));
        break;
      case GgmlType::Q6_K:
        put(o + 208, d(rng));
        break;
      case GgmlType::IQ4_XS:
        put(o, d(rng));
        break;
      default:
        break;
    }
  }
  return out;
}

// Weights [K, N, ne02, ne03], contiguous; repacked to Q4_0x8 when asked.
struct Weights {
  std::vector<uint8_t> plain, packed, strided;
  std::vector<float> deq;  // dequantized, row-major (row = n + N * (i2 + ne02 * i3))
  TensorView v;
  Weights(const TypeCase& tc, int64_t K, int64_t N, int64_t ne02, int64_t ne03, uint32_t seed,
          bool extreme = false, size_t row_pad = 0) {
    plain = MakeWeights(tc.type, K, N * ne02 * ne03, seed, extreme);
    v.type = tc.type;
    v.ne[0] = K;
    v.ne[1] = N;
    v.ne[2] = ne02;
    v.ne[3] = ne03;
    SetContiguousStrides(v);
    v.data = plain.data();
    deq.resize(size_t(K * N * ne02 * ne03));
    const size_t rs = RowSize(tc.type, K);
    for (int64_t r = 0; r < N * ne02 * ne03; ++r)
      EXPECT_TRUE(DequantizeRow(tc.type, plain.data() + size_t(r) * rs, &deq[size_t(r * K)], K).ok());
    if (row_pad > 0) {  // the same rows, row_pad bytes (and one more row per matrix) apart
      strided.assign((v.nb[1] + row_pad) * size_t(N + 1) * size_t(ne02 * ne03), 0xFF);
      for (int64_t r = 0; r < N * ne02 * ne03; ++r)
        std::memcpy(&strided[(v.nb[1] + row_pad) * size_t(r % N + (N + 1) * (r / N))],
                    &plain[v.nb[1] * size_t(r)], v.nb[1]);
      v.nb[1] += row_pad;
      v.nb[2] = v.nb[1] * size_t(N + 1);
      v.nb[3] = v.nb[2] * size_t(ne02);
      v.data = strided.data();
    }
    if (tc.layout == kLayoutQ4_0x8) {
      packed.resize(plain.size());
      EXPECT_TRUE(RepackQ4_0(v, packed.data()).ok());
      v.data = packed.data();
      v.layout = kLayoutQ4_0x8;
    }
  }
};

// An F32 tensor [K, M, ne12, ne13] inside a larger buffer, with a chosen view layout:
//   kContig: contiguous; kPermuted: stored as [K, ne12, M] and viewed with nb1/nb2 swapped;
//   kGathered: stored transposed ([M, K]: nb0 = M*4, nb1 = 4), so nb10 != 4;
//   kPadded: rows of K + 5 floats, matrices padded by 3 rows.
// `offset_bytes` moves the data pointer off the 64-byte alignment of the buffer.
//   kOverlap: rows 8 floats apart (nb1 = 32 < K * 4: a sliding-window view, rows share memory).
enum class Layout { kContig, kPermuted, kGathered, kPadded, kOverlap };

struct Act {
  std::vector<uint8_t> buf;
  TensorView v;
  int64_t K, M, ne12, ne13;
  Act(int64_t K_, int64_t M_, int64_t ne12_, int64_t ne13_, Layout layout, size_t offset_bytes, uint32_t seed)
      : K(K_), M(M_), ne12(ne12_), ne13(ne13_) {
    v.type = GgmlType::F32;
    v.ne[0] = K;
    v.ne[1] = M;
    v.ne[2] = ne12;
    v.ne[3] = ne13;
    switch (layout) {
      case Layout::kContig:
        v.nb[0] = 4;
        v.nb[1] = 4 * K;
        v.nb[2] = v.nb[1] * M;
        v.nb[3] = v.nb[2] * ne12;
        break;
      case Layout::kPermuted:
        v.nb[0] = 4;
        v.nb[2] = 4 * K;
        v.nb[1] = v.nb[2] * ne12;
        v.nb[3] = v.nb[1] * M;
        break;
      case Layout::kGathered:
        v.nb[1] = 4;
        v.nb[0] = 4 * M;
        v.nb[2] = v.nb[0] * K;
        v.nb[3] = v.nb[2] * ne12;
        break;
      case Layout::kPadded:
        v.nb[0] = 4;
        v.nb[1] = 4 * (K + 5);
        v.nb[2] = v.nb[1] * (M + 3);
        v.nb[3] = v.nb[2] * ne12;
        break;
      case Layout::kOverlap:
        v.nb[0] = 4;
        v.nb[1] = 32;
        v.nb[2] = 32 * size_t(M - 1) + 4 * size_t(K);
        v.nb[3] = v.nb[2] * ne12;
        break;
    }
    // No slack after the last element (ASan sees any read past it); padding bytes 0xAB (finite).
    buf.assign(v.nb[3] * size_t(ne13) + offset_bytes, 0xAB);
    v.data = buf.data() + offset_bytes;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    for (int64_t i3 = 0; i3 < ne13; ++i3)
      for (int64_t i2 = 0; i2 < ne12; ++i2)
        for (int64_t i1 = 0; i1 < M; ++i1)
          for (int64_t i0 = 0; i0 < K; ++i0) Set(i0, i1, i2, i3, u(rng));
  }
  uint8_t* Ptr(int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<uint8_t*>(v.data) + i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
  }
  void Set(int64_t i0, int64_t i1, int64_t i2, int64_t i3, float x) {
    std::memcpy(Ptr(i0, i1, i2, i3), &x, 4);
  }
  float Get(int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float x;
    std::memcpy(&x, Ptr(i0, i1, i2, i3), 4);
    return x;
  }
};

// dst [N, M, ne12, ne13] with nb1 = 4 * (N + pad1) and matrices pad2 rows apart; the padding holds
// a sentinel that must survive.
constexpr float kSentinel = -7777.f;
struct Dst {
  std::vector<float> buf;
  TensorView v;
  Dst(int64_t N, int64_t M, int64_t ne12, int64_t ne13, int64_t pad1, int64_t pad2) {
    v.type = GgmlType::F32;
    v.ne[0] = N;
    v.ne[1] = M;
    v.ne[2] = ne12;
    v.ne[3] = ne13;
    v.nb[0] = 4;
    v.nb[1] = 4 * size_t(N + pad1);
    v.nb[2] = v.nb[1] * size_t(M + pad2);
    v.nb[3] = v.nb[2] * size_t(ne12);
    buf.assign(v.nb[3] / 4 * size_t(ne13) + 16, kSentinel);
    v.data = buf.data();
  }
  float& At(int64_t n, int64_t m, int64_t i2, int64_t i3) {
    return buf[(m * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3]) / 4 + size_t(n)];
  }
  // Elements outside the view must still hold the sentinel.
  int64_t Clobbered() const {
    std::vector<bool> in(buf.size(), false);
    for (int64_t i3 = 0; i3 < v.ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < v.ne[2]; ++i2)
        for (int64_t m = 0; m < v.ne[1]; ++m)
          for (int64_t n = 0; n < v.ne[0]; ++n)
            in[(m * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3]) / 4 + size_t(n)] = true;
    int64_t bad = 0;
    for (size_t i = 0; i < buf.size(); ++i)
      if (!in[i] && !(buf[i] == kSentinel)) ++bad;
    return bad;
  }
};

// Per-column vec_dot reference: MulMat with ne1 = 1 views of src1 and dst.
void RefMulMat(IsaLevel isa, const TensorView& src0, const TensorView& src1, Dst& dst) {
  ComputeContext ctx;
  ctx.max_isa = isa;
  for (int64_t m = 0; m < src1.ne[1]; ++m) {
    TensorView a = src1, d = dst.v;
    a.ne[1] = 1;
    a.data = static_cast<uint8_t*>(src1.data) + m * src1.nb[1];
    d.ne[1] = 1;
    d.data = static_cast<uint8_t*>(dst.v.data) + m * dst.v.nb[1];
    ASSERT_LT(a.ne[1], kGemmMinCols);
    const Status s = MulMat(ctx, src0, a, d);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

bool HasMins(GgmlType t) {
  return t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q2_K || t == GgmlType::Q4_K ||
         t == GgmlType::Q5_K;
}

struct Problem {
  TypeCase tc;
  int64_t K, N, M, ne02 = 1, ne03 = 1, ne12 = 1, ne13 = 1;
  Layout layout = Layout::kContig;
  size_t offset = 0;
  int64_t pad1 = 0, pad2 = 0;
  size_t src0_row_pad = 0;  ///< plain layout only: src0 rows this many bytes apart beyond RowSize
};

std::string Describe(const Problem& p, IsaLevel isa, int nt) {
  char b[256];
  std::snprintf(
      b, sizeof b,
      "%s K=%lld N=%lld M=%lld src0 x%lldx%lld src1 x%lldx%lld layout=%d off=%zu pad=%lld/%lld isa=%d nt=%d",
      Name(p.tc).c_str(), (long long)p.K, (long long)p.N, (long long)p.M, (long long)p.ne02,
      (long long)p.ne03, (long long)p.ne12, (long long)p.ne13, int(p.layout), p.offset, (long long)p.pad1,
      (long long)p.pad2, int(isa), nt);
  return b;
}

// Runs the problem through MulMat (GEMM path when M >= kGemmMinCols) and checks it against the
// per-column reference, the dst padding, and (optionally) `poison` columns for non-finite rules.
void Check(const Problem& p, const std::vector<int>& threads, const std::vector<IsaLevel>& levels,
           uint32_t seed, bool extreme = false, void (*mutate)(Act&) = nullptr) {
  Weights w(p.tc, p.K, p.N, p.ne02, p.ne03, seed, extreme, p.src0_row_pad);
  Act a(p.K, p.M, p.ne12, p.ne13, p.layout, p.offset, seed + 7);
  if (extreme) {
    // Every activation -2 except one +2 per block: Q8_0/Q8_1 give qs = -127, Q8_K gives -128
    // (iscale = -127/max with max = +2 ... qs of -2 is +127; with max = -2, qs = -128 for +2).
    for (int64_t i3 = 0; i3 < p.ne13; ++i3)
      for (int64_t i2 = 0; i2 < p.ne12; ++i2)
        for (int64_t m = 0; m < p.M; ++m)
          for (int64_t k = 0; k < p.K; ++k) a.Set(k, m, i2, i3, (k % 32 == 5) ? 2.f : -2.f);
  }
  if (mutate) mutate(a);
  for (IsaLevel isa : levels) {
    Dst ref(p.N, p.M, p.ne12, p.ne13, p.pad1, p.pad2);
    RefMulMat(isa, w.v, a.v, ref);
    for (int nt : threads) {
      const std::string what = Describe(p, isa, nt);
      ComputeContext ctx;
      ctx.max_isa = isa;
      ctx.n_threads = nt;
      Dst got(p.N, p.M, p.ne12, p.ne13, p.pad1, p.pad2);
      const Status s = MulMat(ctx, w.v, a.v, got.v);
      ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
      EXPECT_EQ(got.Clobbered(), 0) << what << ": dst padding overwritten";
      int64_t bad = 0;
      for (int64_t i3 = 0; i3 < p.ne13; ++i3)
        for (int64_t i2 = 0; i2 < p.ne12; ++i2) {
          const int64_t i02 = i2 / (p.ne12 / p.ne02), i03 = i3 / (p.ne13 / p.ne03);
          for (int64_t m = 0; m < p.M; ++m)
            for (int64_t n = 0; n < p.N; ++n) {
              const float* wr = &w.deq[size_t((n + p.N * (i02 + p.ne02 * i03)) * p.K)];
              double S = 0;
              for (int64_t k = 0; k < p.K; ++k) {
                const double t = std::fabs(double(wr[k]) * a.Get(k, m, i2, i3));
                if (std::isfinite(t)) S += t;  // non-finite activations: classification only
              }
              if (HasMins(p.tc.type)) S *= 4;  // |d q| + |dmin m| terms cancel in |w|
              const float g = got.At(n, m, i2, i3), r = ref.At(n, m, i2, i3);
              bool ok;
              if (!std::isfinite(r) || !std::isfinite(g)) {
                // Non-finite in, non-finite out. At the scalar level both paths sum one float
                // term per block and must agree on NaN vs +-inf too; the SIMD vec_dots (as ggml's)
                // multiply an inf scale by per-lane partial sums, some of them 0, and give NaN
                // where the GEMM gives +-inf, so only finiteness is compared there.
                ok = !std::isfinite(r) && !std::isfinite(g);
                if (isa == IsaLevel::kScalar) ok = ok && (std::isnan(r) ? std::isnan(g) : g == r);
              } else
                ok = std::fabs(double(g) - r) <= kRelTol * S + 1e-30 || (std::isinf(S) && std::isfinite(g));
              if (!ok && ++bad <= 5)
                ADD_FAILURE() << what << ": dst[n=" << n << ", m=" << m << ", " << i2 << ", " << i3
                              << "] gemm " << g << " vs vec_dot " << r << " (S " << S << ")";
            }
        }
      EXPECT_EQ(bad, 0) << what;
    }
  }
}

TEST(GemmEdgeCases, CasesHaveKernels) {
  // The sweep below must actually reach the GEMM path for the families gemm.h lists.
  const auto cases = Cases();
  std::string names;
  for (const auto& c : cases) names += Name(c) + " ";
  EXPECT_GE(cases.size(), 10u) << names;
  for (GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K})
    EXPECT_NE(GetGemmKernels(t, kLayoutPlain, IsaLevel::kScalar), nullptr) << GgmlTypeName(t);
  std::printf("GEMM types: %s\n", names.c_str());
}

// Column counts around kGemmMinCols and the 64-column chunk, short and odd N, one-block K.
TEST(GemmEdgeCases, ColumnAndRowBoundaries) {
  const int64_t Ms[] = {kGemmMinCols - 1, kGemmMinCols, 63, 64, 65};
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    const int64_t K1 = std::max<int64_t>(bs, 1) * (bs == 1 ? 7 : 1);  // F32/F16/BF16: K = 7 (odd)
    for (int64_t N : {8, 24, 40}) {  // x8 needs N % 8 == 0; N < 16, N % 16 = 8
      for (int64_t M : Ms) {
        Problem p{tc, K1, N, M};
        Check(p, {1}, {IsaLevel::kScalar, DetectIsa()}, uint32_t(N * 1000 + M));
      }
    }
    if (tc.layout == kLayoutPlain) {
      for (int64_t N : {1, 5, 15, 17, 33}) {
        Problem p{tc, K1 * 3, N, 9};
        Check(p, {1, 2}, Levels(), uint32_t(N));
      }
    }
  }
}

// K not a multiple of the kernels' k-steps (the AVX2 Q4_0 chain is 8 blocks, Q5_0 4; the float
// kernels' lines of 16 floats), odd K for the float types, and 129 columns (3 chunks, last of 1).
TEST(GemmEdgeCases, OddK) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    const std::vector<int64_t> Ks = bs == 1 ? std::vector<int64_t>{1, 3, 17, 63, 65, 257}
                                            : std::vector<int64_t>{bs * 3, bs * 5, bs * 9, bs * 11};
    for (int64_t K : Ks) {
      Problem p{tc, K, 24, 17};
      Check(p, {1}, Levels(), uint32_t(K));
    }
    Problem p{tc, bs == 1 ? 33 : bs * 2, 16, 129};
    Check(p, {2}, Levels(), 99);
  }
}

// GQA broadcast (ne02 < ne12, ne03 > 1), permuted / gathered / padded src1, misaligned src1 data,
// padded dst, thread counts.
TEST(GemmEdgeCases, ViewsBroadcastThreads) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    const int64_t K = bs == 1 ? 45 : bs * 2;
    int seed = 1;
    for (Layout l :
         {Layout::kContig, Layout::kPermuted, Layout::kGathered, Layout::kPadded, Layout::kOverlap}) {
      Problem p{tc, K, 24, 11};
      p.ne02 = 2;
      p.ne03 = 2;
      p.ne12 = 6;
      p.ne13 = 2;
      p.layout = l;
      p.offset = l == Layout::kContig ? 4 : (l == Layout::kPadded ? 12 : 0);
      p.pad1 = 3;
      p.pad2 = 2;
      Check(p, {1, 3, 7}, {IsaLevel::kScalar, DetectIsa()}, uint32_t(seed++));
    }
    Problem q{tc, K, 40, 8};  // broadcast over dim 3 (ne13 / ne03 = 3), gathered src1
    q.ne02 = 1;
    q.ne03 = 1;
    q.ne12 = 2;
    q.ne13 = 3;
    q.layout = Layout::kGathered;
    Check(q, {2}, {DetectIsa()}, 123);
  }
}

// The result does not depend on the thread count (each dst element is computed by one kernel call
// whatever the schedule): bit-identical for 1, 2, 3, 7 threads.
TEST(GemmEdgeCases, ThreadCountBitIdentical) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    const int64_t K = bs == 1 ? 200 : bs * 4;
    Weights w(tc, K, 72, 2, 1, 9);
    Act a(K, 70, 2, 1, Layout::kContig, 0, 10);
    Dst d1(72, 70, 2, 1, 0, 0);
    ComputeContext c1;
    ASSERT_TRUE(MulMat(c1, w.v, a.v, d1.v).ok());
    for (int nt : {2, 3, 7}) {
      Dst d(72, 70, 2, 1, 0, 0);
      ComputeContext c;
      c.n_threads = nt;
      ASSERT_TRUE(MulMat(c, w.v, a.v, d.v).ok());
      EXPECT_EQ(0, std::memcmp(d.buf.data(), d1.buf.data(), d.buf.size() * 4)) << Name(tc) << " nt=" << nt;
    }
  }
}

// The q8 and float families claim SIMD results bit-identical to their scalar reference
// (gemm_q8_avx2.cpp, gemm_q8_avx512.cpp, gemm_float*.cpp headers): through the driver, with a
// short last panel, a K across the AVX-512 q8 kernel's 32-block chunks, GQA broadcast, gathered
// src1 and a padded dst, also at the extremes of the quantized ranges.
TEST(GemmEdgeCases, LevelsBitIdenticalThroughDriver) {
  const std::vector<IsaLevel> levels = Levels();
  if (levels.size() < 2) GTEST_SKIP() << "no SIMD level on this CPU";
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    if (bs == 256) continue;  // k-quants: SIMD vs scalar only within the order bound (Check)
    for (bool extreme : {false, true}) {
      const int64_t K = bs == 1 ? 1029 : 32 * 35, N = 40, M = 19;
      Weights w(tc, K, N, 2, 1, 31, extreme);
      Act a(K, M, 4, 1, Layout::kGathered, 0, 32);
      if (extreme)
        for (int64_t i2 = 0; i2 < 4; ++i2)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < K; ++k) a.Set(k, m, i2, 0, (k % 32 == 5) ? 2.f : -2.f);
      Dst ref(N, M, 4, 1, 3, 1);
      ComputeContext c0;
      c0.max_isa = IsaLevel::kScalar;
      c0.n_threads = 2;
      ASSERT_TRUE(MulMat(c0, w.v, a.v, ref.v).ok());
      for (size_t l = 1; l < levels.size(); ++l) {
        Dst got(N, M, 4, 1, 3, 1);
        ComputeContext c;
        c.max_isa = levels[l];
        c.n_threads = 3;
        ASSERT_TRUE(MulMat(c, w.v, a.v, got.v).ok());
        int64_t diff = 0;
        for (size_t i = 0; i < got.buf.size(); ++i) diff += std::memcmp(&got.buf[i], &ref.buf[i], 4) != 0;
        EXPECT_EQ(diff, 0) << Name(tc) << " level " << int(levels[l]) << (extreme ? " extreme" : "");
      }
    }
  }
}

// src0 a view with padded strides (nb01 > RowSize, nb02 with a spare row): pack must follow nb01.
TEST(GemmEdgeCases, StridedSrc0) {
  for (const TypeCase& tc : Cases()) {
    if (tc.layout != kLayoutPlain) continue;  // Q4_0x8 requires plain row strides (checked by MulMat)
    const int64_t bs = BlockSize(tc.type);
    Problem p{tc, bs == 1 ? 40 : bs * 2, 20, 10};
    p.ne02 = 2;
    p.ne12 = 4;
    p.src0_row_pad = 2 * GetTypeTraits(tc.type).type_size;
    Check(p, {1, 2}, {IsaLevel::kScalar, DetectIsa()}, 77);
  }
}

// K across the q8 family's chunks (avx512 kernel: 32 blocks per K chunk, the partial sums go
// through dst between chunks; from_float: 64 blocks per chunk) and long float / k-quant rows.
TEST(GemmEdgeCases, KChunkBoundaries) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    std::vector<int64_t> Ks;
    if (bs == 1)
      Ks = {1023, 1025, 2049};
    else if (bs == 32)
      Ks = {32 * 31, 32 * 32, 32 * 33, 32 * 64, 32 * 65, 32 * 97};
    else
      Ks = {256 * 7, 256 * 13};
    for (int64_t K : Ks) {
      Problem p{tc, K, 16, 9};
      Check(p, {1}, Levels(), uint32_t(K));
    }
  }
}

// Column splits that end up empty (M = 300: 5 column blocks in 4 splits of 2 blocks, the last one
// starting past M) and uneven ones.
TEST(GemmEdgeCases, EmptyColumnSplits) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    for (int64_t M : {300, 257, 190}) {
      Problem p{tc, bs == 1 ? 24 : bs, 16, M};
      Check(p, {1, 2, 3}, {DetectIsa()}, uint32_t(M));
    }
  }
}

// K = 0: an empty dot is 0 (ggml), on both paths, with no read of the (empty) rows. (Was broken at
// the AVX-512 VNNI level for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL with M >= kGemmMinCols: avx512
// Kernel<kMin> in gemm_q8_avx512.cpp stored only inside its K-chunk loop, so with nb = 0 dst kept
// its old values.)
TEST(GemmEdgeCases, ZeroK) {
  for (const TypeCase& tc : Cases()) {
    if (tc.layout != kLayoutPlain) continue;  // RepackQ4_0 needs ne0 > 0
    for (IsaLevel isa : Levels()) {
      for (int64_t M : {int64_t(1), kGemmMinCols, int64_t(70)}) {
        TensorView w;
        w.type = tc.type;
        w.ne[0] = 0;
        w.ne[1] = 20;
        SetContiguousStrides(w);
        uint8_t dummy[64] = {};
        w.data = dummy;
        TensorView a;
        a.type = GgmlType::F32;
        a.ne[0] = 0;
        a.ne[1] = M;
        SetContiguousStrides(a);
        a.data = dummy;
        Dst d(20, M, 1, 1, 0, 0);
        ComputeContext ctx;
        ctx.max_isa = isa;
        ctx.n_threads = 2;
        const Status s = MulMat(ctx, w, a, d.v);
        ASSERT_TRUE(s.ok()) << Name(tc) << ": " << s.ToString();
        int64_t bad = 0;
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < 20; ++n) bad += !(d.At(n, m, 0, 0) == 0.0f);
        EXPECT_EQ(bad, 0) << Name(tc) << " isa=" << int(isa) << " M=" << M
                          << ": dst[0,0] = " << d.At(0, 0, 0, 0);
      }
    }
  }
}

// More threads than work items, right at the team threshold (N*M*K = 65536) and above it.
TEST(GemmEdgeCases, MoreThreadsThanWork) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    const int64_t K = bs == 1 ? 512 : (512 / bs) * bs;
    for (int64_t M : {8, 9}) {
      Problem p{tc, K, 16, M};
      Check(p, {2, 7, 16}, {DetectIsa()}, uint32_t(M));
    }
  }
}

// One ComputeContext across calls whose work sizes shrink and grow (activation rows, panels,
// gather rows, thread scratch): each result equals a fresh context's bit for bit.
TEST(GemmEdgeCases, WorkBufferReuseAcrossShapes) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    ComputeContext shared;
    shared.max_isa = DetectIsa();
    struct S {
      int64_t K, N, M;
      Layout l;
      int nt;
    };
    const S shapes[] = {{bs * 8, 16, 8, Layout::kContig, 1},   {bs * 1, 64, 200, Layout::kContig, 2},
                        {bs * 4, 16, 9, Layout::kGathered, 7}, {bs * 16, 40, 70, Layout::kPermuted, 3},
                        {bs * 2, 8, 8, Layout::kGathered, 2},  {bs * 8, 16, 130, Layout::kContig, 1}};
    uint32_t seed = 5;
    for (const S& s : shapes) {
      Weights w(tc, s.K, s.N, 1, 1, seed);
      Act a(s.K, s.M, 1, 1, s.l, 0, seed + 1);
      ++seed;
      Dst d1(s.N, s.M, 1, 1, 0, 0), d2(s.N, s.M, 1, 1, 0, 0);
      shared.n_threads = s.nt;
      ASSERT_TRUE(MulMat(shared, w.v, a.v, d1.v).ok());
      ComputeContext fresh;
      fresh.max_isa = DetectIsa();
      fresh.n_threads = s.nt;
      ASSERT_TRUE(MulMat(fresh, w.v, a.v, d2.v).ok());
      EXPECT_EQ(0, std::memcmp(d1.buf.data(), d2.buf.data(), d1.buf.size() * 4))
          << Name(tc) << " K=" << s.K << " M=" << s.M << " nt=" << s.nt;
    }
  }
}

// Extreme quantized values: every quant bit set, activations at the ends of the int8 range.
TEST(GemmEdgeCases, ExtremeQuantValues) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    Problem p{tc, bs == 1 ? 4096 : bs * 32, 24, 17};
    Check(p, {1}, Levels(), 3, /*extreme=*/true);
  }
}

// Infinite and huge activations: column 2 has a +inf, column 3 a -inf, column 4 huge values
// (1e30: the Q8 block scale amax/127 overflows fp16 to inf). The GEMM path must give non-finite
// values where the vec_dot path does (at the scalar level the same NaN / +-inf), and the other
// columns must stay unaffected. Passes.
void PoisonInf(Act& a) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i3 = 0; i3 < a.ne13; ++i3)
    for (int64_t i2 = 0; i2 < a.ne12; ++i2) {
      a.Set(std::min<int64_t>(4, a.K - 1), 2, i2, i3, inf);
      a.Set(0, 3, i2, i3, -inf);
      for (int64_t k = 0; k < a.K; k += 2) a.Set(k, 4, i2, i3, 1e30f);
    }
}

// The AVX-512 VNNI activation quantizer of Q8_0, Q4_0, Q4_0x8, Q5_0, IQ4_NL (avx512::GemmQ8FromFloat).
// It used to convert inf * 0 = NaN with vcvtps2dq (INT_MIN) and overflow int in the zero-point
// correction `-z * sum(q)` (UBSan: "signed integer overflow: -128 * -2147483648"); now a block with a
// non-finite element gets d = NaN, qs = 0 and a zero correction (QuantizeRowQ8_0Act's rule) and the
// int32 lanes are clamped to [-128, 127] before narrowing.
bool IsQ8Vnni(const TypeCase& tc, IsaLevel isa) {
  const bool q8 = tc.type == GgmlType::Q8_0 || tc.type == GgmlType::Q4_0 || tc.type == GgmlType::Q5_0 ||
                  tc.type == GgmlType::IQ4_NL;
  return q8 && isa == IsaLevel::kAvx512Vnni && DetectIsa() >= IsaLevel::kAvx512Vnni;
}

TEST(GemmEdgeCases, InfiniteAndHugeActivationsAsVecDot) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    Problem p{tc, bs == 1 ? 64 : bs * 2, 24, 9};
    Check(p, {1, 2}, Levels(), 11, false, PoisonInf);
  }
}

// The VNNI q8 levels alone (the former UB site, gemm_q8_avx512.cpp GemmQ8FromFloat); run under
// scripts/test-sanitizers.sh.
TEST(GemmEdgeCases, InfiniteActivationsQ8Vnni) {
  for (const TypeCase& tc : Cases()) {
    if (!IsQ8Vnni(tc, IsaLevel::kAvx512Vnni)) continue;
    const int64_t bs = BlockSize(tc.type);
    Problem p{tc, bs * 2, 24, 9};
    Check(p, {1}, {IsaLevel::kAvx512Vnni}, 11, false, PoisonInf);
  }
}

// NaN activations: column 1 has a NaN at k = 3 (first half of a 32-block), column 5 at k = 20
// (second half). The rule (cpu/README.md, QuantizeRowQ8_0Act): every activation quantizer — the
// vec_dot path's QuantizeRowQ8_0Act / Q8_1Act / Q8_K and every GEMM family's from_float at every
// level — gives a block with a NaN (or inf) d = NaN and qs = 0, so NaN in -> NaN out for every dst
// element of that column, on both paths, with no float->int conversion of NaN. (ggml drops the NaN:
// it loses the amax comparison and int8(nearbyint(NaN)) is undefined; our SIMD quantizers used to
// drop it differently from the scalar ones, and the AVX-512 ones overflowed int on vcvtps2dq's
// INT_MIN.)
void PoisonNaN(Act& a) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i3 = 0; i3 < a.ne13; ++i3)
    for (int64_t i2 = 0; i2 < a.ne12; ++i2) {
      a.Set(3, 1, i2, i3, nan);
      a.Set(std::min<int64_t>(20, a.K - 1), 5, i2, i3, nan);
    }
}

// GEMM vs vec_dot on NaN activations: the same NaN columns, the other columns unaffected.
TEST(GemmEdgeCases, NanActivationsAsVecDot) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    Problem p{tc, bs == 1 ? 64 : bs * 2, 24, 9};
    Check(p, {1}, Levels(), 11, false, PoisonNaN);
  }
}

// NaN in -> NaN out on both paths, at every level, for every weight type.
TEST(GemmEdgeCases, NanActivationsGiveNaN) {
  for (const TypeCase& tc : Cases()) {
    const int64_t bs = BlockSize(tc.type);
    const int64_t K = bs == 1 ? 64 : bs * 2, N = 24, M = 9;
    Weights w(tc, K, N, 1, 1, 21);
    Act a(K, M, 1, 1, Layout::kContig, 0, 22);
    PoisonNaN(a);
    for (IsaLevel isa : Levels()) {
      Dst ref(N, M, 1, 1, 0, 0), got(N, M, 1, 1, 0, 0);
      RefMulMat(isa, w.v, a.v, ref);
      ComputeContext ctx;
      ctx.max_isa = isa;
      ASSERT_TRUE(MulMat(ctx, w.v, a.v, got.v).ok());
      for (int64_t m : {1, 5}) {
        int64_t finite_ref = 0, finite_got = 0;
        for (int64_t n = 0; n < N; ++n) {
          finite_ref += !std::isnan(ref.At(n, m, 0, 0));
          finite_got += !std::isnan(got.At(n, m, 0, 0));
        }
        EXPECT_EQ(finite_ref, 0) << Name(tc) << " isa=" << int(isa) << " column " << m << ": vec_dot path";
        EXPECT_EQ(finite_got, 0) << Name(tc) << " isa=" << int(isa) << " column " << m << ": GEMM path";
      }
      // The NaN stays in its column: every other column is finite on both paths.
      int64_t nonfinite_other = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          if (m != 1 && m != 5)
            nonfinite_other += !std::isfinite(ref.At(n, m, 0, 0)) + !std::isfinite(got.At(n, m, 0, 0));
      EXPECT_EQ(nonfinite_other, 0) << Name(tc) << " isa=" << int(isa);
    }
  }
}

}  // namespace
}  // namespace stowage::cpu
