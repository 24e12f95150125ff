// CPU_REPACK Q4_0x8: layout, MUL_MAT on the repacked layout equals the plain layout (scalar, AVX2
// and AVX-512 VNNI gemv), on random and on the shared tiny Q4_0 model's weights; token generation
// covers every row whatever the thread count; refusal of bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

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
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (isa > DetectIsa()) continue;
    ComputeContext ctx;
    ctx.n_threads = 2;
    ctx.max_isa = isa;
    ASSERT_TRUE(MulMat(ctx, plain, b.v, d0.v).ok());
    ASSERT_TRUE(MulMat(ctx, rp, b.v, d1.v).ok());
    if (isa == IsaLevel::kScalar) scalar_repacked.assign(d1.f32(), d1.f32() + N * M * ne2);
    for (int64_t i = 0; i < N * M * ne2; ++i) {
      // Same integer sums; only the float accumulation differs from the plain vec_dot.
      ASSERT_NEAR(d1.f32()[i], d0.f32()[i], 1e-5f * (1.0f + std::fabs(d0.f32()[i]))) << i << " isa " << int(isa);
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
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
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

}  // namespace
}  // namespace stowage::cpu
