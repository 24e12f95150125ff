// Stowage's fused CPU ops against the sequence of ops each replaces, bit for bit: the compiler's
// fusion passes rewrite a plan's graph with them, so --llamacpp-numerics and every golden must not
// see the difference. Shapes (row tails after the SIMD multiple of 8, broadcast, strided views, in
// place), weight types, thread counts, ISA levels (capped as ComputeContext::max_isa caps them) and
// both numerics modes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace stowage::cpu {
namespace {
using kt::Ctx;
using kt::Fill;
using kt::Tensor;

const IsaLevel kIsaLevels[] = {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni};

// The bytes of a tensor's elements in index order (through its strides), for comparisons.
std::vector<uint8_t> Elements(const TensorView& t) {
  std::vector<uint8_t> out;
  const size_t es = t.type == GgmlType::F16 ? 2 : 4;
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) {
          const uint8_t* p =
              static_cast<const uint8_t*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
          out.insert(out.end(), p, p + es);
        }
  return out;
}

struct RmsCase {
  std::array<int64_t, 4> ne;
  std::array<int64_t, 4> w_ne;
  GgmlType w_type;
};

// RMS_NORM_MUL(x, w) == MUL(RMS_NORM(x), w): the norm weight of every model ([ne0]), rows whose
// tails miss the SIMD lanes, a weight broadcast over rows and of F16, large and tiny rows.
TEST(CpuFusedOps, RmsNormMulEqualsRmsNormThenMul) {
  const RmsCase cases[] = {
      {{64, 7, 1, 1}, {64, 1, 1, 1}, GgmlType::F32},     {{37, 3, 2, 1}, {37, 1, 1, 1}, GgmlType::F32},
      {{2051, 5, 1, 1}, {2051, 1, 1, 1}, GgmlType::F32}, {{4096, 9, 1, 1}, {4096, 1, 1, 1}, GgmlType::F32},
      {{1, 4, 1, 1}, {1, 1, 1, 1}, GgmlType::F32},       {{40, 6, 4, 1}, {40, 3, 1, 1}, GgmlType::F32},
      {{48, 6, 2, 2}, {8, 1, 2, 1}, GgmlType::F32},      {{128, 5, 1, 1}, {128, 1, 1, 1}, GgmlType::F16},
      {{128, 3, 8, 1}, {128, 1, 1, 1}, GgmlType::F32},  // per-head norms (qwen3's q_norm / k_norm)
  };
  uint32_t seed = 100;
  for (const RmsCase& c : cases) {
    Tensor x(GgmlType::F32, c.ne[0], c.ne[1], c.ne[2], c.ne[3]);
    Tensor w(c.w_type, c.w_ne[0], c.w_ne[1], c.w_ne[2], c.w_ne[3]);
    Fill(x, seed++, -4, 4);
    Fill(w, seed++, -2, 2);
    for (IsaLevel isa : kIsaLevels) {
      for (int threads : {1, 2, 5}) {
        for (bool numerics : {false, true}) {
          const std::string where = "ne0 " + std::to_string(c.ne[0]) + " isa " + std::to_string(int(isa)) +
                                    " threads " + std::to_string(threads) + (numerics ? " llamacpp" : "");
          ComputeContext ctx = Ctx(threads);
          ctx.max_isa = isa;
          ctx.llamacpp_numerics = numerics;
          Tensor normed(GgmlType::F32, c.ne[0], c.ne[1], c.ne[2], c.ne[3]);
          Tensor want(GgmlType::F32, c.ne[0], c.ne[1], c.ne[2], c.ne[3]);
          Tensor got(GgmlType::F32, c.ne[0], c.ne[1], c.ne[2], c.ne[3]);
          ASSERT_TRUE(RmsNorm(ctx, x.v, normed.v, 1e-6f).ok()) << where;
          ASSERT_TRUE(Mul(ctx, normed.v, w.v, want.v).ok()) << where;
          ASSERT_TRUE(RmsNormMul(ctx, x.v, w.v, got.v, 1e-6f).ok()) << where;
          EXPECT_EQ(Elements(got.v), Elements(want.v)) << where;
          // In place (the memory plan may give the result the input's bytes).
          Tensor inplace = x;
          inplace.v.data = inplace.buf.data();
          ASSERT_TRUE(RmsNormMul(ctx, inplace.v, w.v, inplace.v, 1e-6f).ok()) << where;
          EXPECT_EQ(Elements(inplace.v), Elements(want.v)) << where << " in place";
        }
      }
    }
  }
}

// Strided rows (a permuted view, as a norm of heads read through a view): the same bits as the ops.
TEST(CpuFusedOps, RmsNormMulStridedRows) {
  Tensor x(GgmlType::F32, 24, 5, 3), w(GgmlType::F32, 12);
  Fill(x, 7, -3, 3);
  Fill(w, 8, -1, 1);
  TensorView v = x.v;  // every other element of each row: ne0 12 at a stride of 8 bytes
  v.ne[0] = 12;
  v.nb[0] = 8;
  for (IsaLevel isa : kIsaLevels) {
    ComputeContext ctx = Ctx(2);
    ctx.max_isa = isa;
    Tensor normed(GgmlType::F32, 12, 5, 3), want(GgmlType::F32, 12, 5, 3), got(GgmlType::F32, 12, 5, 3);
    ASSERT_TRUE(RmsNorm(ctx, v, normed.v, 1e-5f).ok());
    ASSERT_TRUE(Mul(ctx, normed.v, w.v, want.v).ok());
    ASSERT_TRUE(RmsNormMul(ctx, v, w.v, got.v, 1e-5f).ok());
    EXPECT_EQ(Elements(got.v), Elements(want.v)) << int(isa);
  }
}

// The fusion is not a no-op: leaving out the weight's product (RMS_NORM alone) or rounding the norm
// differently (one product x * (scale * w)) changes the bits the comparison above checks.
TEST(CpuFusedOps, RmsNormMulComparisonCanFail) {
  Tensor x(GgmlType::F32, 256, 4), w(GgmlType::F32, 256), normed(GgmlType::F32, 256, 4),
      want(GgmlType::F32, 256, 4);
  Fill(x, 3, -4, 4);
  Fill(w, 4, -2, 2);
  ComputeContext ctx = Ctx(2);
  ASSERT_TRUE(RmsNorm(ctx, x.v, normed.v, 1e-6f).ok());
  ASSERT_TRUE(Mul(ctx, normed.v, w.v, want.v).ok());
  EXPECT_NE(Elements(normed.v), Elements(want.v));
  // One rounding fewer: x * (scale * w) with the row's scale recovered from the normed values.
  Tensor other = want;
  other.v.data = other.buf.data();
  int differ = 0;
  for (int64_t r = 0; r < 4; ++r) {
    const float scale = float(normed.at(0, r) / x.at(0, r));
    for (int64_t i = 0; i < 256; ++i) {
      const float y = float(x.at(i, r)) * (scale * float(w.at(i)));
      differ += y != float(want.at(i, r));
    }
  }
  EXPECT_GT(differ, 0);
}

TEST(CpuFusedOps, RmsNormMulRefusesBadArguments) {
  ComputeContext ctx = Ctx();
  Tensor x(GgmlType::F32, 16, 3), y(GgmlType::F32, 16, 3), w(GgmlType::F32, 5), wq(GgmlType::Q8_0, 32);
  Status s = RmsNormMul(ctx, x.v, w.v, y.v, 1e-6f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("RMS_NORM_MUL: w f32[5,1,1,1]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot be repeated to src"), std::string::npos) << s.message();
  s = RmsNormMul(ctx, x.v, wq.v, y.v, 1e-6f);
  EXPECT_NE(s.message().find("w: expected F32 or F16"), std::string::npos) << s.message();
  Tensor y2(GgmlType::F32, 16, 2);
  Tensor w16(GgmlType::F32, 16);
  s = RmsNormMul(ctx, x.v, w16.v, y2.v, 1e-6f);
  EXPECT_NE(s.message().find("differ in shape"), std::string::npos) << s.message();
}

// A weight [K, N] of `type` with values in [-1, 1) (QuantizeRow where it quantizes the type, else
// random blocks), in the CPU_REPACK layout when `repack` (RepackLayoutFor; plain when it has none).
struct Weight {
  Tensor plain;
  std::vector<uint8_t> packed;
  TensorView v;
  Weight(GgmlType type, int64_t K, int64_t N, uint32_t seed, bool repack) : plain(type, K, N) {
    if (type == GgmlType::F32 || type == GgmlType::F16) {
      Fill(plain, seed);
    } else {
      std::vector<float> row(static_cast<size_t>(K));
      for (int64_t n = 0; n < N; ++n) {
        kt::FillUniform(row, seed + uint32_t(n));
        uint8_t* dst = plain.buf.data() + size_t(n) * plain.v.nb[1];
        if (!QuantizeRow(type, row.data(), dst, K).ok()) {
          const std::vector<uint8_t> b = kt::RandomBlocks(type, K, seed + uint32_t(n));
          std::memcpy(dst, b.data(), b.size());
        }
      }
    }
    v = plain.v;
    const int layout = repack ? RepackLayoutFor(plain.v) : kLayoutPlain;
    if (layout != kLayoutPlain) {
      packed.assign(plain.buf.size(), 0);
      EXPECT_TRUE(RepackWeight(plain.v, layout, packed.data()).ok());
      v.data = packed.data();
      v.layout = layout;
    }
  }
};

// The sequence MUL_MAT_GLU replaces: both MUL_MATs, then the GLU op(s) `glu` names.
void UnfusedFfnIn(ComputeContext& ctx, const TensorView& gate, const TensorView& x, const TensorView& up,
                  MulMatGluKind glu, Tensor& want) {
  const int64_t N = gate.ne[1], M = x.ne[1];
  Tensor g(GgmlType::F32, N, M), u(GgmlType::F32, N, M), act(GgmlType::F32, N, M);
  ASSERT_TRUE(MulMat(ctx, up, x, u.v).ok());
  ASSERT_TRUE(MulMat(ctx, gate, x, g.v).ok());
  switch (glu) {
    case MulMatGluKind::kSwiGlu:
      ASSERT_TRUE(SwiGlu(ctx, g.v, u.v, want.v).ok());
      break;
    case MulMatGluKind::kGeGlu:
      ASSERT_TRUE(GeGlu(ctx, g.v, u.v, want.v).ok());
      break;
    case MulMatGluKind::kSiluMul:
      ASSERT_TRUE(Silu(ctx, g.v, act.v).ok());
      ASSERT_TRUE(Mul(ctx, act.v, u.v, want.v).ok());
      break;
    case MulMatGluKind::kGeluMul:
      ASSERT_TRUE(Gelu(ctx, g.v, act.v).ok());
      ASSERT_TRUE(Mul(ctx, act.v, u.v, want.v).ok());
      break;
  }
}

// MUL_MAT_GLU(gate, x, up) == GLU(MUL_MAT(gate, x), MUL_MAT(up, x)) bit for bit: the models' weight
// types, plain and CPU_REPACK layouts, token generation (M = 1), a few columns (the general path),
// GEMM-sized prompts, row counts with a tail tile of 8, every GLU form, ISA caps, threads, numerics.
TEST(CpuFusedOps, MulMatGluEqualsMulMatsThenGlu) {
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::Q8_0,
                            GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::MXFP4};
  const MulMatGluKind glus[] = {MulMatGluKind::kSwiGlu, MulMatGluKind::kGeGlu, MulMatGluKind::kSiluMul,
                                MulMatGluKind::kGeluMul};
  const int64_t K = 256;
  uint32_t seed = 500;
  for (GgmlType type : types) {
    for (bool repack : {false, true}) {
      for (int64_t N : {40}) {  // two full tiles of 16 and a tail of 8
        const Weight gate(type, K, N, seed++, repack), up(type, K, N, seed++, repack);
        for (int64_t M : {1, 3, 9, 20}) {
          Tensor x(GgmlType::F32, K, M);
          Fill(x, seed++, -3, 3);
          for (IsaLevel isa : kIsaLevels)
            for (int threads : {1, 2, 5})
              for (bool numerics : {false, true})
                for (MulMatGluKind glu : glus) {
                  const std::string where = std::string(GgmlTypeName(type)) + (repack ? " repacked" : "") +
                                            " N " + std::to_string(N) + " M " + std::to_string(M) + " isa " +
                                            std::to_string(int(isa)) + " threads " + std::to_string(threads) +
                                            (numerics ? " llamacpp" : "") + " glu " +
                                            std::to_string(int(glu));
                  ComputeContext ctx = Ctx(threads);
                  ctx.max_isa = isa;
                  ctx.llamacpp_numerics = numerics;
                  Tensor want(GgmlType::F32, N, M), got(GgmlType::F32, N, M);
                  UnfusedFfnIn(ctx, gate.v, x.v, up.v, glu, want);
                  ASSERT_TRUE(MulMatGlu(ctx, gate.v, x.v, up.v, got.v, glu).ok()) << where;
                  ASSERT_EQ(Elements(got.v), Elements(want.v)) << where;
                }
        }
      }
    }
  }
}

// The comparison can fail: another GLU form (GEGLU for SWIGLU), or the two weights swapped, moves
// the bits.
TEST(CpuFusedOps, MulMatGluComparisonCanFail) {
  const Weight gate(GgmlType::Q8_0, 256, 32, 1, false), up(GgmlType::Q8_0, 256, 32, 2, false);
  Tensor x(GgmlType::F32, 256, 2), want(GgmlType::F32, 32, 2), got(GgmlType::F32, 32, 2);
  Fill(x, 3, -3, 3);
  ComputeContext ctx = Ctx(2);
  UnfusedFfnIn(ctx, gate.v, x.v, up.v, MulMatGluKind::kSwiGlu, want);
  ASSERT_TRUE(MulMatGlu(ctx, gate.v, x.v, up.v, got.v, MulMatGluKind::kGeGlu).ok());
  EXPECT_NE(Elements(got.v), Elements(want.v));
  ASSERT_TRUE(MulMatGlu(ctx, up.v, x.v, gate.v, got.v, MulMatGluKind::kSwiGlu).ok());
  EXPECT_NE(Elements(got.v), Elements(want.v));
}

TEST(CpuFusedOps, MulMatGluRefusesBadArguments) {
  ComputeContext ctx = Ctx();
  const Weight gate(GgmlType::Q8_0, 64, 16, 1, false), up(GgmlType::Q4_0, 64, 16, 2, false);
  Tensor x(GgmlType::F32, 64, 2), y(GgmlType::F32, 16, 2);
  Status s = MulMatGlu(ctx, gate.v, x.v, up.v, y.v, MulMatGluKind::kSwiGlu);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("MUL_MAT_GLU: up"), std::string::npos) << s.message();
  Tensor y2(GgmlType::F32, 8, 2);
  s = MulMatGlu(ctx, gate.v, x.v, gate.v, y2.v, MulMatGluKind::kSwiGlu);
  EXPECT_NE(s.message().find("MUL_MAT"), std::string::npos) << s.message();
}

// A weight group (the QKV fusion's GlobalTensor.parts): the parts' stored bytes back to back as
// the session lays them out (a repacked part is whole groups of 8 interleaved rows, so the
// concatenation is the group's repack), viewed as one weight of the parts' rows.
struct WeightGroup {
  std::vector<uint8_t> bytes;
  TensorView v;
  explicit WeightGroup(const std::vector<const Weight*>& parts) {
    v = parts.front()->v;
    v.ne[1] = 0;
    for (const Weight* w : parts) {
      const uint8_t* data = static_cast<const uint8_t*>(w->v.data);
      bytes.insert(bytes.end(), data, data + w->v.nb[1] * w->v.ne[1]);
      v.ne[1] += w->v.ne[1];
    }
    v.nb[2] = v.nb[1] * v.ne[1];
    v.nb[3] = v.nb[2];
    v.data = bytes.data();
  }
};

// Rows [first, first + rows) of a MUL_MAT result [total, M]: the view the fused graph reads a
// part's product through.
TensorView RowsOf(const Tensor& t, int64_t first, int64_t rows) {
  TensorView r = t.v;
  r.data = static_cast<uint8_t*>(t.v.data) + first * t.v.nb[0];
  r.ne[0] = rows;
  return r;
}

// MUL_MAT(group of Q, K, V, x) holds MUL_MAT(Q, x), MUL_MAT(K, x) and MUL_MAT(V, x) bit for bit:
// each output element is the same dot product, the activations converted once. The models' weight
// types, plain and CPU_REPACK layouts, token generation (M = 1), the general path and GEMM-sized
// prompts, ISA caps, threads, numerics.
TEST(CpuFusedOps, MulMatOverWeightGroupEqualsThreeMulMats) {
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::Q8_0,
                            GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::MXFP4};
  const int64_t K = 256, rows[3] = {64, 32, 24};
  uint32_t seed = 900;
  for (GgmlType type : types) {
    for (bool repack : {false, true}) {
      const Weight q(type, K, rows[0], seed++, repack), k(type, K, rows[1], seed++, repack),
          v(type, K, rows[2], seed++, repack);
      const WeightGroup group({&q, &k, &v});
      for (int64_t M : {1, 3, 9, 20, 64}) {
        Tensor x(GgmlType::F32, K, M);
        Fill(x, seed++, -3, 3);
        for (IsaLevel isa : kIsaLevels)
          for (int threads : {1, 2, 5})
            for (bool numerics : {false, true}) {
              const std::string where = std::string(GgmlTypeName(type)) + (repack ? " repacked" : "") +
                                        " M " + std::to_string(M) + " isa " + std::to_string(int(isa)) +
                                        " threads " + std::to_string(threads) + (numerics ? " llamacpp" : "");
              ComputeContext ctx = Ctx(threads);
              ctx.max_isa = isa;
              ctx.llamacpp_numerics = numerics;
              Tensor got(GgmlType::F32, rows[0] + rows[1] + rows[2], M);
              ASSERT_TRUE(MulMat(ctx, group.v, x.v, got.v).ok()) << where;
              int64_t first = 0;
              for (int p = 0; p < 3; ++p) {
                const Weight& w = p == 0 ? q : p == 1 ? k : v;
                Tensor want(GgmlType::F32, rows[p], M);
                ASSERT_TRUE(MulMat(ctx, w.v, x.v, want.v).ok()) << where;
                ASSERT_EQ(Elements(RowsOf(got, first, rows[p])), Elements(want.v)) << where << " part " << p;
                first += rows[p];
              }
            }
      }
    }
  }
}

// The comparison can fail: the parts laid out in another order (K before Q) give other rows.
TEST(CpuFusedOps, MulMatOverWeightGroupComparisonCanFail) {
  const Weight q(GgmlType::Q4_0, 256, 32, 1, true), k(GgmlType::Q4_0, 256, 32, 2, true);
  const WeightGroup swapped({&k, &q});
  Tensor x(GgmlType::F32, 256, 5), want(GgmlType::F32, 32, 5), got(GgmlType::F32, 64, 5);
  Fill(x, 3, -3, 3);
  ComputeContext ctx = Ctx(2);
  ASSERT_TRUE(MulMat(ctx, q.v, x.v, want.v).ok());
  ASSERT_TRUE(MulMat(ctx, swapped.v, x.v, got.v).ok());
  EXPECT_NE(Elements(RowsOf(got, 0, 32)), Elements(want.v));
  EXPECT_EQ(Elements(RowsOf(got, 32, 32)), Elements(want.v));
}

}  // namespace
}  // namespace stowage::cpu
