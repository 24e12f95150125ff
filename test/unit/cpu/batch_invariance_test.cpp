// Batch invariance of MUL_MAT under ComputeContext::llamacpp_numerics (llama.cpp's CPU summation
// orders): with the flag, a product gives every src1 column the bits it gets when multiplied alone
// (M = 1: the token-generation path), for every weight type and layout the CPU backend supports, at
// every instruction-set level and thread count, and whatever columns share the call — except where
// llama.cpp's own products are not batch-invariant: repacked Q4_K (its GEMM on groups of 4 columns,
// checked below), IQ4_XS (its "iqp" kernels from 8 columns, checked below), IQ4_NL, and F32/F16 with
// K % 8 == 0 (tinyBLAS, checked below). Without the flag the same holds for the q8 family
// (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) at the scalar level and for Q4_0x8 everywhere (their GEMM and
// vec_dot/gemv share one order), and the GEMM path of the other cases may differ in the last bits
// (that is what the flag is for: the test records that it does differ somewhere, so a test of the
// flag cannot pass vacuously).
//
// IQ4_NL is the exception by design: ggml's IQ4_NL vec_dot sums even and odd blocks in two 8-lane
// accumulators (and a last odd block as one integer sum) while llama.cpp's batched path (tinyBLAS)
// uses one; this backend follows both, so an IQ4_NL product is not batch-invariant, as in llama.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gemm.h"
#include "kernels.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {

struct Case {
  GgmlType type;
  int layout;
};

std::string Name(const Case& c) {
  return std::string(GgmlTypeName(c.type)) + (IsRepackedLayout(c.layout) ? "x8" : "");
}

// Random weight rows: quantized random floats for the 32-element types, random bits with sane
// scales (kt::RandomBlocks) for the 256-element ones.
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t K, int64_t N, uint32_t seed) {
  if (GetTypeTraits(type).block_size == 256) return kt::RandomBlocks(type, K * N, seed);
  if (type == GgmlType::F32) {
    std::vector<float> f(size_t(K * N));
    kt::FillUniform(f, seed, -1.f, 1.f);
    std::vector<uint8_t> out(f.size() * 4);
    std::memcpy(out.data(), f.data(), out.size());
    return out;
  }
  std::vector<float> f(size_t(K * N));
  kt::FillUniform(f, seed, -1.f, 1.f);
  std::vector<uint8_t> out(RowSize(type, K) * size_t(N));
  for (int64_t n = 0; n < N; ++n)
    EXPECT_TRUE(QuantizeRow(type, f.data() + n * K, out.data() + size_t(n) * RowSize(type, K), K).ok());
  return out;
}

// dst [N, M] of the product of the weights with M columns of x, in one call.
std::vector<float> Product(const Case& c, const std::vector<uint8_t>& w, int64_t K, int64_t N, const float* x,
                           int64_t M, IsaLevel isa, int threads, bool invariant) {
  TensorView a;
  a.type = c.type;
  a.ne[0] = K;
  a.ne[1] = N;
  a.ne[2] = 1;
  a.ne[3] = 1;
  SetContiguousStrides(a);
  a.data = const_cast<uint8_t*>(w.data());
  a.layout = c.layout;
  TensorView b;
  b.type = GgmlType::F32;
  b.ne[0] = K;
  b.ne[1] = M;
  b.ne[2] = 1;
  b.ne[3] = 1;
  SetContiguousStrides(b);
  b.data = const_cast<float*>(x);
  std::vector<float> out(size_t(N * M), -1.f);
  TensorView d;
  d.type = GgmlType::F32;
  d.ne[0] = N;
  d.ne[1] = M;
  d.ne[2] = 1;
  d.ne[3] = 1;
  SetContiguousStrides(d);
  d.data = out.data();
  ComputeContext ctx;
  ctx.n_threads = threads;
  ctx.max_isa = isa;
  ctx.llamacpp_numerics = invariant;
  const Status st = MulMat(ctx, a, b, d);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

const Case kCases[] = {
    {GgmlType::Q8_0, kLayoutPlain},  {GgmlType::Q8_0, kLayoutQ8_0x8}, {GgmlType::Q4_0, kLayoutPlain},
    {GgmlType::Q4_0, kLayoutQ4_0x8}, {GgmlType::Q5_0, kLayoutPlain},  {GgmlType::Q4_1, kLayoutPlain},
    {GgmlType::Q5_1, kLayoutPlain},  {GgmlType::Q2_K, kLayoutPlain},  {GgmlType::Q3_K, kLayoutPlain},
    {GgmlType::Q4_K, kLayoutPlain},  {GgmlType::Q5_K, kLayoutPlain},  {GgmlType::Q6_K, kLayoutPlain},
    {GgmlType::F16, kLayoutPlain},   {GgmlType::BF16, kLayoutPlain},  {GgmlType::F32, kLayoutPlain},
};

// Compares column by column: the columns of a call of M columns against calls of one column.
// Returns the number of differing floats (asserting nothing when `expect_equal` is false).
int64_t CompareColumns(const Case& c, int64_t K, int64_t N, int64_t M, IsaLevel isa, int threads,
                       bool invariant, bool expect_equal, uint32_t seed) {
  SCOPED_TRACE(Name(c) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + " M=" + std::to_string(M) +
               " isa=" + std::to_string(int(isa)) + " threads=" + std::to_string(threads) +
               (invariant ? " batch_invariant" : ""));
  std::vector<uint8_t> w = RandomWeights(c.type, K, N, seed);
  std::vector<uint8_t> packed;
  if (c.layout != kLayoutPlain) {
    TensorView v;
    v.type = c.type;
    v.ne[0] = K;
    v.ne[1] = N;
    v.ne[2] = 1;
    v.ne[3] = 1;
    SetContiguousStrides(v);
    v.data = w.data();
    packed.resize(w.size());
    const Status st = RepackWeight(v, c.layout, packed.data());
    EXPECT_TRUE(st.ok()) << st.message();
    w.swap(packed);
  }
  std::vector<float> x(size_t(K * M));
  kt::FillUniform(x, seed + 1, -2.f, 2.f);
  const std::vector<float> all = Product(c, w, K, N, x.data(), M, isa, threads, invariant);
  int64_t diff = 0;
  for (int64_t m = 0; m < M; ++m) {
    const std::vector<float> one = Product(c, w, K, N, x.data() + m * K, 1, isa, threads, invariant);
    for (int64_t n = 0; n < N; ++n) {
      const float got = all[size_t(m * N + n)], want = one[size_t(n)];
      if (std::memcmp(&got, &want, 4) != 0) {
        ++diff;
        if (expect_equal) {
          ADD_FAILURE() << "column " << m << " row " << n << ": " << got << " in a batch of " << M << ", "
                        << want << " alone";
          return diff;
        }
      }
    }
  }
  return diff;
}

std::vector<IsaLevel> Levels() {
  std::vector<IsaLevel> l;
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni})
    if (isa <= DetectIsa()) l.push_back(isa);
  return l;
}

TEST(BatchInvariance, EveryWeightTypeWithTheFlag) {
  uint32_t seed = 100;
  for (const Case& c : kCases) {
    const bool kquant = GetTypeTraits(c.type).block_size == 256;
    const bool is_float = !GetTypeTraits(c.type).is_quantized;
    // Several blocks (an odd count for the 32-blocks); F32/F16/BF16 with K % 8 != 0, where
    // llama.cpp's batched path is its vec_dot too (with K % 16 == 0 both follow tinyBLAS instead:
    // MulMatFloatFollowsLlamafileOrder below).
    const int64_t K = kquant ? 512 : is_float ? 100 : 96;
    for (IsaLevel isa : Levels())
      for (int threads : {1, 2}) {
        // 20 columns: the GEMM path (>= kGemmMinCols) with a partial column group; 40 rows: a short panel.
        CompareColumns(c, K, 40, 20, isa, threads, true, true, seed++);
        // stories260K-like shapes: 2 blocks, 172 rows (a 12-row last panel), 49 columns.
        if (!kquant && !is_float && c.layout == kLayoutPlain)
          CompareColumns(c, 64, 172, 49, isa, threads, true, true, seed++);
        if (HasFatalFailure()) return;
      }
  }
}

TEST(BatchInvariance, WithoutTheFlag) {
  uint32_t seed = 500;
  int64_t differing = 0;
  for (const Case& c : kCases) {
    const bool kquant = GetTypeTraits(c.type).block_size == 256;
    const int64_t K = kquant ? 512 : !GetTypeTraits(c.type).is_quantized ? 100 : 96;
    for (IsaLevel isa : Levels()) {
      // Invariant without the flag: the scalar level, and Q4_0x8 at every level (Q8_0x8's gemv is
      // the plain Q8_0 vec_dot's 8-lane order, its default GEMM the plain one's).
      const bool invariant = isa == IsaLevel::kScalar || c.layout == kLayoutQ4_0x8;
      const bool is_float = !GetTypeTraits(c.type).is_quantized;
      const int64_t d =
          CompareColumns(c, K, 40, 20, isa, 1, false, invariant && !kquant && !is_float, seed++);
      if (isa != IsaLevel::kScalar) differing += d;
    }
  }
  // The default GEMM kernels sum in another order than the SIMD vec_dots somewhere (else the flag
  // would have nothing to do and the test above could not fail for a wrong reason).
  if (DetectIsa() >= IsaLevel::kAvx2) EXPECT_GT(differing, 0);
}

// F32/F16 weights with K % KN == 0 and >= 2 columns, with the flag (llama.cpp: llamafile's tinyBLAS): every
// output equals a scalar emulation of tinyBLAS's order — KN float lanes (lane l: k = l, l + KN, ... as a
// fused multiply-add chain), then tinyBLAS's horizontal sum (AVX-512: GCC's _mm512_reduce_add_ps
// tree; AVX2: hsum_float_8's) — with F16 weights' activations rounded to F16 first.
float LlamafileOrderDot(const float* w, const float* a, int64_t K, int kn) {
  float lane[16] = {};
  for (int64_t k = 0; k < K; ++k) lane[k % kn] = std::fma(w[k], a[k], lane[k % kn]);
  if (kn == 16) {
    float t3[8], t6[4];
    for (int i = 0; i < 8; ++i) t3[i] = lane[8 + i] + lane[i];
    for (int i = 0; i < 4; ++i) t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
  }
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

TEST(BatchInvariance, MulMatFloatFollowsLlamafileOrder) {
  for (GgmlType type : {GgmlType::F16, GgmlType::F32})
    for (IsaLevel isa : Levels()) {
      if (isa == IsaLevel::kScalar) continue;
      const int kn = isa >= IsaLevel::kAvx512 ? 16 : 8;
      for (int64_t M : {2, 7, 20})
        for (int threads : {1, 2})
          for (int64_t N : {52, 53}) {
            // 52 rows: a partial row tile at the AVX2 level (tile height 3); 53: not a multiple of 4,
            // which tinyBLAS declines (llama.cpp then takes the vec_dot: each column as alone).
            const int64_t K = 4 * kn;
            SCOPED_TRACE(std::string(GgmlTypeName(type)) + " isa=" + std::to_string(int(isa)) +
                         " M=" + std::to_string(M) + " threads=" + std::to_string(threads) +
                         " N=" + std::to_string(N));
            std::vector<float> wf(size_t(K * N)), x(size_t(K * M));
            kt::FillUniform(wf, 11, -1.f, 1.f);
            kt::FillUniform(x, 12, -2.f, 2.f);
            std::vector<uint8_t> w(RowSize(type, K) * size_t(N));
            std::vector<float> wv(wf.size());  // the weights as floats
            for (size_t i = 0; i < wf.size(); ++i) {
              if (type == GgmlType::F16) {
                const uint16_t h = FloatToHalf(wf[i]);
                std::memcpy(&w[i * 2], &h, 2);
                wv[i] = HalfToFloat(h);
              } else {
                std::memcpy(&w[i * 4], &wf[i], 4);
                wv[i] = wf[i];
              }
            }
            const std::vector<float> got_bi =
                Product({type, kLayoutPlain}, w, K, N, x.data(), M, isa, threads, true);
            for (int64_t m = 0; m < M; ++m) {
              std::vector<float> a(x.begin() + m * K, x.begin() + (m + 1) * K);
              if (type == GgmlType::F16)
                for (float& v : a) v = HalfToFloat(FloatToHalf(v));
              const std::vector<float> alone =
                  Product({type, kLayoutPlain}, w, K, N, x.data() + m * K, 1, isa, threads, true);
              for (int64_t n = 0; n < N; ++n) {
                const float want =
                    N % 4 == 0 ? LlamafileOrderDot(wv.data() + n * K, a.data(), K, kn) : alone[size_t(n)];
                ASSERT_EQ(std::memcmp(&got_bi[size_t(m * N + n)], &want, 4), 0)
                    << "row " << n << " column " << m << ": " << got_bi[size_t(m * N + n)] << " vs " << want;
              }
            }
          }
    }
}

// IQ4_XS with the flag: below 8 columns every column as alone (ggml's vec_dot order); from 8, llama.cpp
// 2026's iqp order (VecDotIQ4_XSQ8_KIqp: one float per output, one fma per super-block).
TEST(BatchInvariance, IQ4_XSFollowsLlamaCppsIqpFrom8Columns) {
  const Case c{GgmlType::IQ4_XS, kLayoutPlain};
  const int64_t K = 512, N = 24;
  const std::vector<uint8_t> w = RandomWeights(GgmlType::IQ4_XS, K, N, 31);
  for (IsaLevel isa : Levels())
    for (int64_t M : {7, 8, 13}) {
      SCOPED_TRACE("isa " + std::to_string(int(isa)) + " M=" + std::to_string(M));
      std::vector<float> x(size_t(K * M));
      kt::FillUniform(x, 32, -2.f, 2.f);
      const std::vector<float> got = Product(c, w, K, N, x.data(), M, isa, 2, true);
      const TypeKernels* tk = GetTypeKernels(GgmlType::IQ4_XS, isa);
      VecDotFn iqp = isa >= IsaLevel::kAvx2 ? avx2::VecDotIQ4_XSQ8_KIqp : scalar::VecDotIQ4_XSQ8_KIqp;
      std::vector<uint8_t> y(RowSize(GgmlType::Q8_K, K));
      for (int64_t m = 0; m < M; ++m) {
        tk->from_float(x.data() + m * K, y.data(), K);
        for (int64_t n = 0; n < N; ++n) {
          float want;
          (M >= 8 ? iqp : tk->vec_dot)(K, &want, w.data() + size_t(n) * RowSize(GgmlType::IQ4_XS, K),
                                       y.data());
          ASSERT_EQ(std::memcmp(&got[size_t(m * N + n)], &want, 4), 0) << "column " << m << " row " << n;
        }
      }
    }
}

// Repacked Q4_K with the flag: the first M - M % 4 columns of each call in llama.cpp's GEMM order
// (GemvQ4_Kx8Q8_KSb), the rest — and a column alone — in its gemv order (GemvQ4_Kx8Q8_K).
TEST(BatchInvariance, RepackedQ4_KFollowsLlamaCppsGemmAndGemv) {
  const Case c{GgmlType::Q4_K, kLayoutQ4_Kx8};
  const int64_t K = 512, N = 16;
  std::vector<uint8_t> plain = RandomWeights(GgmlType::Q4_K, K, N, 77), packed(plain.size());
  TensorView v;
  v.type = GgmlType::Q4_K;
  v.ne[0] = K;
  v.ne[1] = N;
  v.ne[2] = 1;
  v.ne[3] = 1;
  SetContiguousStrides(v);
  v.data = plain.data();
  ASSERT_TRUE(RepackQ4_K(v, packed.data()).ok());
  for (IsaLevel isa : Levels())
    for (int64_t M : {3, 4, 11}) {
      SCOPED_TRACE("isa " + std::to_string(int(isa)) + " M=" + std::to_string(M));
      std::vector<float> x(size_t(K * M));
      kt::FillUniform(x, 78, -2.f, 2.f);
      const std::vector<float> got = Product(c, packed, K, N, x.data(), M, isa, 2, true);
      VecDotFn gemv = scalar::GemvQ4_Kx8Q8_K, gemv_sb = scalar::GemvQ4_Kx8Q8_KSb;
      if (isa >= IsaLevel::kAvx512Vnni) {
        gemv = avx512::GemvQ4_Kx8Q8_K;
        gemv_sb = avx512::GemvQ4_Kx8Q8_KSb;
      } else if (isa >= IsaLevel::kAvx2) {
        gemv = avx2::GemvQ4_Kx8Q8_K;
        gemv_sb = avx2::GemvQ4_Kx8Q8_KSb;
      }
      const TypeKernels* tk = GetTypeKernels(GgmlType::Q4_K, isa);
      std::vector<uint8_t> y(RowSize(GgmlType::Q8_K, K));
      for (int64_t m = 0; m < M; ++m) {
        tk->from_float(x.data() + m * K, y.data(), K);
        const bool sb = M > 3 && m < M - M % 4;
        for (int64_t g = 0; g < N / 8; ++g) {
          float want[8];
          (sb ? gemv_sb : gemv)(K, want, packed.data() + size_t(g) * 8 * v.nb[1], y.data());
          for (int r = 0; r < 8; ++r)
            ASSERT_EQ(std::memcmp(&got[size_t(m * N + 8 * g + r)], &want[r], 4), 0)
                << "column " << m << " row " << 8 * g + r << (sb ? " (GEMM order)" : " (gemv order)");
        }
      }
    }
}

}  // namespace
}  // namespace stowage::cpu
