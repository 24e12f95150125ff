// CPU kernels of the mixture-of-experts graphs (ops_moe.cpp, DIV / SIGMOID in ops.cpp): each against
// a double-precision scalar reference on random odd shapes, broadcast and strided sources, both the
// vec_dot (few columns per expert) and the GEMM (>= 8 columns per expert) paths of MUL_MAT_ID, plus
// error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {
using kt::Ctx;
using kt::Fill;
using kt::Tensor;

// Random expert ids [n_used, n_tokens]: distinct per token (as top-k gives), from [0, n_expert).
void FillIds(Tensor& ids, int64_t n_expert, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n_used = ids.v.ne[0];
  for (int64_t t = 0; t < ids.v.ne[1]; ++t) {
    std::vector<int32_t> p(static_cast<size_t>(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) p[e] = int32_t(e);
    std::shuffle(p.begin(), p.end(), rng);
    for (int64_t s = 0; s < n_used; ++s) ids.i32()[t * n_used + s] = p[s];
  }
}

struct MoeCase {
  GgmlType type;
  int64_t K, N, n_expert, n_used, n_tokens;
  bool b_broadcast;  // b.ne1 == 1 (the FFN input shared by all slots) instead of n_used
  bool b_strided;    // b as a non-contiguous view (rows padded)
};

void RunMoeCase(const MoeCase& c, uint32_t seed) {
  SCOPED_TRACE(std::string(GgmlTypeName(c.type)) + " K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) +
               " E=" + std::to_string(c.n_expert) + " used=" + std::to_string(c.n_used) +
               " T=" + std::to_string(c.n_tokens) + (c.b_broadcast ? " bcast" : "") +
               (c.b_strided ? " strided" : ""));
  // Expert weights: random F32, stored as c.type; the reference uses the dequantized values.
  Tensor as(c.type, c.K, c.N, c.n_expert);
  std::vector<float> w(size_t(c.K * c.N * c.n_expert));
  kt::FillUniform(w, seed, -1.f, 1.f);
  const size_t row = RowSize(c.type, c.K);
  std::vector<float> wd(w.size());
  const bool has_quantizer =
      GetTypeTraits(c.type).block_size == 1 || c.type == GgmlType::Q8_0 || c.type == GgmlType::Q4_0;
  for (int64_t r = 0; r < c.N * c.n_expert; ++r) {
    if (has_quantizer) {
      ASSERT_TRUE(QuantizeRow(c.type, w.data() + r * c.K, as.buf.data() + r * row, c.K).ok());
    } else {  // K-quants: random blocks with sane scales (no reference quantizer here)
      const auto blocks = kt::RandomBlocks(c.type, c.K, seed * 1000 + uint32_t(r));
      std::memcpy(as.buf.data() + r * row, blocks.data(), row);
    }
    ASSERT_TRUE(DequantizeRow(c.type, as.buf.data() + r * row, wd.data() + r * c.K, c.K).ok());
  }
  const int64_t ne11 = c.b_broadcast ? 1 : c.n_used;
  const int64_t pad = c.b_strided ? 3 : 0;
  Tensor bstore(GgmlType::F32, c.K + pad, ne11, c.n_tokens);
  Fill(bstore, seed + 1);
  TensorView b = bstore.v;
  b.ne[0] = c.K;  // rows of K values inside rows of K + pad
  Tensor ids(GgmlType::I32, c.n_used, c.n_tokens);
  FillIds(ids, c.n_expert, seed + 2);
  Tensor dst(GgmlType::F32, c.N, c.n_used, c.n_tokens);
  auto ctx = Ctx();
  Status st = MulMatId(ctx, as.v, b, ids.v, dst.v);
  ASSERT_TRUE(st.ok()) << st.ToString();

  // The activation is quantized to the vec_dot type (Q8_0 for Q8_0/Q4_0 weights): scale the
  // tolerance with the magnitude of the products.
  const double tol = c.type == GgmlType::F32 ? 1e-4 : c.type == GgmlType::F16 ? 2e-2 : 6e-2;
  double max_err = 0;
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t s = 0; s < c.n_used; ++s) {
      const int32_t e = ids.i32()[t * c.n_used + s];
      for (int64_t n = 0; n < c.N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double x = bstore.at(k, s % ne11, t);
          const double a = wd[size_t((e * c.N + n) * c.K + k)];
          ref += a * x;
          mag += std::fabs(a * x);
        }
        const double got = dst.at(n, s, t);
        max_err = std::max(max_err, std::fabs(got - ref) / std::max(1.0, mag));
        ASSERT_LE(std::fabs(got - ref), tol * std::max(1.0, mag))
            << "n=" << n << " slot=" << s << " token=" << t;
      }
    }
}

TEST(CpuMulMatId, F32RandomShapes) {
  std::mt19937 rng(11);
  for (int i = 0; i < 24; ++i) {
    MoeCase c;
    c.type = GgmlType::F32;
    c.K = 1 + int64_t(rng() % 70);
    c.N = 1 + int64_t(rng() % 37);
    c.n_expert = 1 + int64_t(rng() % 9);
    c.n_used = 1 + int64_t(rng() % c.n_expert);
    c.n_tokens = 1 + int64_t(rng() % 29);  // up to 28 tokens: experts reach the GEMM path (>= 8 columns)
    c.b_broadcast = rng() % 2;
    c.b_strided = rng() % 2;
    RunMoeCase(c, 100 + i);
  }
}

TEST(CpuMulMatId, QuantizedAndF16Experts) {
  for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    RunMoeCase({t, 64, 7, 4, 2, 1, true, false}, 7);     // one token (token generation: vec_dot)
    RunMoeCase({t, 96, 19, 5, 3, 23, true, true}, 8);    // prompt: GEMM for the busy experts
    RunMoeCase({t, 32, 33, 3, 3, 17, false, false}, 9);  // b per slot (the down projection)
  }
}

TEST(CpuMulMatId, KQuantExperts) {
  // Experts of K-quant types multiply through MUL_MAT's Q8_K kernels (vec_dot and GEMM).
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    RunMoeCase({t, 256, 9, 4, 2, 1, true, false}, 21);
    RunMoeCase({t, 512, 17, 3, 2, 19, true, true}, 22);
  }
}

// CPU_REPACK experts: a [K, N, n_expert] Q4_0 / Q4_K / Q8_0 / MXFP4 tensor repacked as a whole (RepackWeight)
// gives the plain tensor's results (the repacked kernels sum the same integer products; only the
// float accumulation order may differ — for Q8_0 not even that: its gemv is the vec_dot's order).
TEST(CpuMulMatId, RepackedExpertsEqualPlain) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::MXFP4}) {
    for (int64_t n_tokens : {1, 21}) {
      const int64_t K = type == GgmlType::Q4_K ? 512 : 96, N = 24, E = 5, used = 2;
      Tensor as(type, K, N, E);
      const size_t row = RowSize(type, K);
      if (type != GgmlType::Q4_K) {
        std::vector<float> w(size_t(K * N * E));
        kt::FillUniform(w, 31);
        for (int64_t r = 0; r < N * E; ++r)
          ASSERT_TRUE(QuantizeRow(type, w.data() + r * K, as.buf.data() + r * row, K).ok());
      } else {
        const auto blocks = kt::RandomBlocks(type, K * N * E, 32);
        std::memcpy(as.buf.data(), blocks.data(), blocks.size());
      }
      ASSERT_EQ(RepackLayoutFor(as.v), type == GgmlType::Q4_0    ? kLayoutQ4_0x8
                                       : type == GgmlType::Q4_K  ? kLayoutQ4_Kx8
                                       : type == GgmlType::MXFP4 ? kLayoutMXFP4x8
                                                                 : kLayoutQ8_0x8);
      std::vector<uint8_t> packed(row * size_t(N * E) + 64);
      ASSERT_TRUE(RepackWeight(as.v, RepackLayoutFor(as.v), packed.data()).ok());
      TensorView rv = as.v;
      rv.data = packed.data();
      rv.layout = RepackLayoutFor(as.v);
      Tensor b(GgmlType::F32, K, 1, n_tokens);
      Fill(b, 33);
      Tensor ids(GgmlType::I32, used, n_tokens);
      FillIds(ids, E, 34);
      Tensor plain(GgmlType::F32, N, used, n_tokens), repacked(GgmlType::F32, N, used, n_tokens);
      for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
        auto ctx = Ctx();
        ctx.max_isa = isa;
        ASSERT_TRUE(MulMatId(ctx, as.v, b.v, ids.v, plain.v).ok());
        Status st = MulMatId(ctx, rv, b.v, ids.v, repacked.v);
        ASSERT_TRUE(st.ok()) << st.ToString();
        for (int64_t i = 0; i < N * used * n_tokens; ++i)
          if (type == GgmlType::Q8_0)  // gemv = the vec_dot's order, GEMM = the plain panels
            ASSERT_EQ(repacked.f32()[i], plain.f32()[i]) << "tokens " << n_tokens << " element " << i;
          else
            ASSERT_NEAR(repacked.f32()[i], plain.f32()[i], 1e-3 * (1 + std::fabs(plain.f32()[i])))
                << GgmlTypeName(type) << " tokens " << n_tokens << " element " << i;
      }
    }
  }
}

struct ExpertCase {
  GgmlType type;
  bool repack;
};

// Expert weights [K, N, E] of `type` for the bit-exactness tests: random values through QuantizeRow
// where this backend has a quantizer for the type (F32, F16, Q8_0, Q4_0, IQ4_NL, MXFP4), else random
// blocks (the K-quants); with `repack` the whole tensor repacked (RepackWeight), which `view` reads.
struct Experts {
  Tensor plain;
  std::vector<uint8_t> packed;
  TensorView view;
  Experts(GgmlType type, int64_t K, int64_t N, int64_t E) : plain(type, K, N, E) {}
  void Fill(bool repack, uint32_t seed) {
    const GgmlType type = plain.v.type;
    const int64_t K = plain.v.ne[0], rows = plain.v.ne[1] * plain.v.ne[2];
    const size_t row = RowSize(type, K);
    if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::Q8_0 || type == GgmlType::Q4_0 ||
        type == GgmlType::IQ4_NL || type == GgmlType::MXFP4) {
      std::vector<float> w(size_t(K * rows));
      kt::FillUniform(w, seed);
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_TRUE(QuantizeRow(type, w.data() + r * K, plain.buf.data() + r * row, K).ok());
    } else {
      const auto blocks = kt::RandomBlocks(type, K * rows, seed);
      std::memcpy(plain.buf.data(), blocks.data(), blocks.size());
    }
    view = plain.v;
    if (repack) {
      packed.resize(row * size_t(rows));
      ASSERT_NE(RepackLayoutFor(plain.v), kLayoutPlain);
      ASSERT_TRUE(RepackWeight(plain.v, RepackLayoutFor(plain.v), packed.data()).ok());
      view.data = packed.data();
      view.layout = RepackLayoutFor(plain.v);
    }
  }
};

// With llamacpp_numerics every (slot, token) column of MUL_MAT_ID gets the bits of its expert's
// product with that column alone (M = 1: the vec_dot, or the gemv of a repacked layout), as
// llama.cpp's MUL_MAT_ID computes every column, at every level and thread count, with ~20 columns
// per expert (the GEMM path's size: MUL_MAT would take tinyBLAS's order for F32/F16, the repacked
// Q4_K GEMM order, IQ4_NL's one-accumulator order).
TEST(CpuMulMatId, LlamacppNumericsGiveEachColumnItsOwnBits) {
  const ExpertCase cases[] = {{GgmlType::F32, false},  {GgmlType::F16, false},    {GgmlType::Q8_0, false},
                              {GgmlType::Q4_0, false}, {GgmlType::IQ4_NL, false}, {GgmlType::Q4_K, false},
                              {GgmlType::Q6_K, false}, {GgmlType::Q8_0, true},    {GgmlType::Q4_0, true},
                              {GgmlType::Q4_K, true},  {GgmlType::MXFP4, false},  {GgmlType::MXFP4, true}};
  const int64_t N = 24, E = 3, used = 2, T = 30;
  uint32_t seed = 700;
  for (const ExpertCase& c : cases) {
    const int64_t K = GetTypeTraits(c.type).block_size == 256 ? 512 : 128;
    Experts experts(c.type, K, N, E);
    ASSERT_NO_FATAL_FAILURE(experts.Fill(c.repack, seed++));
    const TensorView av = experts.view;
    Tensor b(GgmlType::F32, K, used, T);
    Fill(b, seed++);
    Tensor ids(GgmlType::I32, used, T);
    FillIds(ids, E, seed++);
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
      if (isa > DetectIsa()) continue;
      for (int nt : {1, 2}) {
        SCOPED_TRACE(std::string(GgmlTypeName(c.type)) + (c.repack ? "x8" : "") + " isa " +
                     std::to_string(int(isa)) + " threads " + std::to_string(nt));
        auto ctx = Ctx(nt);
        ctx.max_isa = isa;
        ctx.llamacpp_numerics = true;
        Tensor dst(GgmlType::F32, N, used, T);
        ASSERT_TRUE(MulMatId(ctx, av, b.v, ids.v, dst.v).ok());
        for (int64_t t = 0; t < T; ++t)
          for (int64_t s = 0; s < used; ++s) {
            const int32_t e = ids.i32()[t * used + s];
            TensorView a_e = av;
            a_e.data = static_cast<char*>(av.data) + e * av.nb[2];
            a_e.ne[2] = 1;
            Tensor col(GgmlType::F32, K, 1), out(GgmlType::F32, N, 1);
            std::memcpy(col.buf.data(), &b.f32()[(t * used + s) * K], size_t(K) * sizeof(float));
            ASSERT_TRUE(MulMat(ctx, a_e, col.v, out.v).ok());
            for (int64_t n = 0; n < N; ++n) {
              const float got = dst.at(n, s, t), want = out.f32()[n];
              ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "token " << t << " slot " << s << " row " << n
                                                        << ": " << got << " vs " << want << " alone";
            }
          }
      }
    }
  }
}

// The experts with fewer than kGemmMinCols columns (every chosen expert in token generation) run in
// one pass (kernels.h MulMatIdFewCols: each b row converted once, one thread team for all their
// tiles); each column still gets the bits of the per-expert product MUL_MAT_ID ran before
// (MulMatImpl(..., expert = true) of the expert's gathered columns), by default and with
// llamacpp_numerics, at every level and thread count, plain and repacked, with b shared by the slots
// (gate / up) or one row per slot (down), strided, and next to experts with >= 8 columns (the GEMM).
TEST(CpuMulMatId, FewColumnExpertsEqualPerExpertProducts) {
  const ExpertCase cases[] = {{GgmlType::Q8_0, false}, {GgmlType::Q4_0, false},  {GgmlType::IQ4_NL, false},
                              {GgmlType::Q4_K, false}, {GgmlType::MXFP4, false}, {GgmlType::Q8_0, true},
                              {GgmlType::Q4_0, true},  {GgmlType::Q4_K, true},   {GgmlType::MXFP4, true}};
  const int64_t N = 24, E = 6, used = 3;
  uint32_t seed = 900;
  for (const ExpertCase& c : cases) {
    const int64_t K = GetTypeTraits(c.type).block_size == 256 ? 512 : 160;
    Experts experts(c.type, K, N, E);
    ASSERT_NO_FATAL_FAILURE(experts.Fill(c.repack, seed++));
    const TensorView av = experts.view;
    for (int64_t T : {1, 4, 19})  // one token; every expert < 8 columns; some experts >= 8
      for (bool bcast : {true, false}) {
        const int64_t ne11 = bcast ? 1 : used;
        Tensor bstore(GgmlType::F32, K + 2, ne11, T);  // rows of K values inside rows of K + 2
        Fill(bstore, seed++);
        TensorView b = bstore.v;
        b.ne[0] = K;
        Tensor ids(GgmlType::I32, used, T);
        FillIds(ids, E, seed++);
        for (bool numerics : {false, true})
          for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512Vnni}) {
            if (isa > DetectIsa()) continue;
            for (int nt : {1, 2}) {
              SCOPED_TRACE(std::string(GgmlTypeName(c.type)) + (c.repack ? "x8" : "") + " T " +
                           std::to_string(T) + (bcast ? " shared b" : " b per slot") +
                           (numerics ? " numerics" : "") + " isa " + std::to_string(int(isa)) + " threads " +
                           std::to_string(nt));
              auto ctx = Ctx(nt);
              ctx.max_isa = isa;
              ctx.llamacpp_numerics = numerics;
              Tensor dst(GgmlType::F32, N, used, T);
              ASSERT_TRUE(MulMatId(ctx, av, b, ids.v, dst.v).ok());
              for (int64_t e = 0; e < E; ++e) {
                std::vector<std::pair<int64_t, int64_t>> cols;  // (token, slot)
                for (int64_t t = 0; t < T; ++t)
                  for (int64_t s = 0; s < used; ++s)
                    if (ids.i32()[t * used + s] == e) cols.emplace_back(t, s);
                if (cols.empty()) continue;
                const int64_t m = int64_t(cols.size());
                Tensor in(GgmlType::F32, K, m), out(GgmlType::F32, N, m);
                for (int64_t j = 0; j < m; ++j)
                  for (int64_t k = 0; k < K; ++k)
                    in.f32()[j * K + k] = bstore.at(k, cols[j].second % ne11, cols[j].first);
                TensorView a_e = av;
                a_e.data = static_cast<char*>(av.data) + e * av.nb[2];
                a_e.ne[2] = 1;
                ASSERT_TRUE(MulMatImpl(ctx, a_e, in.v, out.v, /*expert=*/true).ok());
                for (int64_t j = 0; j < m; ++j)
                  for (int64_t n = 0; n < N; ++n) {
                    const float got = dst.at(n, cols[j].second, cols[j].first), want = out.f32()[j * N + n];
                    ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
                        << "expert " << e << " (" << m << " columns) token " << cols[j].first << " slot "
                        << cols[j].second << " row " << n << ": " << got << " vs " << want;
                  }
              }
            }
          }
      }
  }
}

TEST(CpuMulMatId, Errors) {
  Tensor as(GgmlType::F32, 8, 4, 3);
  Tensor b(GgmlType::F32, 8, 1, 2);
  Tensor ids(GgmlType::I32, 2, 2);
  Tensor dst(GgmlType::F32, 4, 2, 2);
  ids.i32()[0] = 0;
  ids.i32()[1] = 1;
  ids.i32()[2] = 2;
  ids.i32()[3] = 3;  // 3 is out of range
  auto ctx = Ctx();
  Status st = MulMatId(ctx, as.v, b.v, ids.v, dst.v);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("ids[1, 1] = 3"), std::string::npos) << st.message();
  ids.i32()[3] = -1;
  EXPECT_EQ(MulMatId(ctx, as.v, b.v, ids.v, dst.v).code(), StatusCode::kOutOfRange);
  ids.i32()[3] = 0;
  EXPECT_TRUE(MulMatId(ctx, as.v, b.v, ids.v, dst.v).ok());
  Tensor wrong_dst(GgmlType::F32, 4, 1, 2);
  EXPECT_EQ(MulMatId(ctx, as.v, b.v, ids.v, wrong_dst.v).code(), StatusCode::kInvalidArgument);
  Tensor b3(GgmlType::F32, 8, 3, 2);  // n_used 2 is not a multiple of b.ne1 3
  EXPECT_EQ(MulMatId(ctx, as.v, b3.v, ids.v, dst.v).code(), StatusCode::kInvalidArgument);
  Tensor bk(GgmlType::F32, 9, 1, 2);
  EXPECT_EQ(MulMatId(ctx, as.v, bk.v, ids.v, dst.v).code(), StatusCode::kInvalidArgument);
  Tensor fids(GgmlType::F32, 2, 2);
  EXPECT_EQ(MulMatId(ctx, as.v, b.v, fids.v, dst.v).code(), StatusCode::kInvalidArgument);
}

TEST(CpuArgSort, RandomShapesBothOrders) {
  std::mt19937 rng(5);
  for (int i = 0; i < 20; ++i) {
    const int64_t ne0 = 1 + int64_t(rng() % 41), ne1 = 1 + int64_t(rng() % 5), ne2 = 1 + int64_t(rng() % 3);
    const bool strided = rng() % 2;
    Tensor store(GgmlType::F32, ne0 + (strided ? 2 : 0), ne1, ne2);
    Fill(store, 300 + i, -3.f, 3.f);
    if (i % 4 == 0) store.f32()[0] = store.f32()[1 % (ne0 + (strided ? 2 : 0))];  // a tie
    TensorView src = store.v;
    src.ne[0] = ne0;
    for (int order : {0, 1}) {
      Tensor dst(GgmlType::I32, ne0, ne1, ne2);
      auto ctx = Ctx();
      ASSERT_TRUE(ArgSort(ctx, src, dst.v, order).ok());
      for (int64_t i2 = 0; i2 < ne2; ++i2)
        for (int64_t i1 = 0; i1 < ne1; ++i1) {
          const int32_t* d = dst.i32() + (i2 * ne1 + i1) * ne0;
          std::vector<int32_t> sorted(d, d + ne0);
          std::sort(sorted.begin(), sorted.end());
          for (int64_t k = 0; k < ne0; ++k) ASSERT_EQ(sorted[k], k) << "not a permutation";
          for (int64_t k = 1; k < ne0; ++k) {
            const double a = store.at(d[k - 1], i1, i2), b = store.at(d[k], i1, i2);
            if (order == 0)
              ASSERT_LE(a, b);
            else
              ASSERT_GE(a, b);
            if (a == b) ASSERT_LT(d[k - 1], d[k]) << "ties keep index order";
          }
        }
    }
  }
  Tensor s(GgmlType::F32, 4), d(GgmlType::I32, 4), df(GgmlType::F32, 4);
  auto ctx = Ctx();
  EXPECT_EQ(ArgSort(ctx, s.v, d.v, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ArgSort(ctx, s.v, df.v, 0).code(), StatusCode::kInvalidArgument);
}

TEST(CpuSumRows, RandomShapes) {
  std::mt19937 rng(6);
  for (int i = 0; i < 16; ++i) {
    const int64_t ne0 = 1 + int64_t(rng() % 300), ne1 = 1 + int64_t(rng() % 6), ne2 = 1 + int64_t(rng() % 3);
    Tensor store(GgmlType::F32, ne0 + 1, ne1, ne2);
    Fill(store, 400 + i);
    TensorView src = store.v;
    src.ne[0] = ne0;
    Tensor dst(GgmlType::F32, 1, ne1, ne2);
    auto ctx = Ctx();
    ASSERT_TRUE(SumRows(ctx, src, dst.v).ok());
    for (int64_t i2 = 0; i2 < ne2; ++i2)
      for (int64_t i1 = 0; i1 < ne1; ++i1) {
        double ref = 0;
        for (int64_t k = 0; k < ne0; ++k) ref += store.at(k, i1, i2);
        EXPECT_EQ(dst.at(0, i1, i2), double(float(ref)));  // double accumulation, rounded once
      }
  }
  Tensor s(GgmlType::F32, 4, 3), d(GgmlType::F32, 1, 2);
  auto ctx = Ctx();
  EXPECT_EQ(SumRows(ctx, s.v, d.v).code(), StatusCode::kInvalidArgument);
}

TEST(CpuDivSigmoid, BroadcastAndValues) {
  Tensor a(GgmlType::F32, 7, 5, 3), b(GgmlType::F32, 1, 5, 3), d(GgmlType::F32, 7, 5, 3);
  Fill(a, 1);
  Fill(b, 2, 0.5f, 2.f);
  auto ctx = Ctx();
  ASSERT_TRUE(Div(ctx, a.v, b.v, d.v).ok());
  for (int64_t i2 = 0; i2 < 3; ++i2)
    for (int64_t i1 = 0; i1 < 5; ++i1)
      for (int64_t i0 = 0; i0 < 7; ++i0)
        EXPECT_EQ(d.at(i0, i1, i2), double(float(a.at(i0, i1, i2)) / float(b.at(0, i1, i2))));
  Tensor bad(GgmlType::F32, 2, 5, 3);
  EXPECT_EQ(Div(ctx, a.v, bad.v, d.v).code(), StatusCode::kInvalidArgument);
  Fill(a, 3, -20.f, 20.f);
  ASSERT_TRUE(Sigmoid(ctx, a.v, d.v).ok());
  for (int64_t i = 0; i < 7 * 5 * 3; ++i) {
    const double x = a.f32()[i];
    EXPECT_NEAR(d.f32()[i], 1.0 / (1.0 + std::exp(-x)), 1e-6);
  }
}

}  // namespace
}  // namespace stowage::cpu
