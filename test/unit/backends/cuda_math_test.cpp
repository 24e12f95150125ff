// The CUDA kernels' arithmetic and indexing (runtime/src/backends/cuda/cuda_math.h), run on the host
// without CUDA and compared with the CPU backend: bit for bit where both compute the same IEEE
// operations in the same order (fp16/bf16 conversions, dequantization, the KV-cache quantizers,
// GET_ROWS, CPY, the element-wise ops, ROPE), within float rounding where the GPU sums in a different
// order (norms, softmax, the mat-vec). Kernels are emulated by looping over their grid (blockIdx,
// threadIdx, lanes) and calling the same per-thread functions the kernels call, so layout and stride
// mistakes show up here. What only a GPU can check (the intrinsics, warp shuffles, block reductions,
// streams, cuBLAS) is listed in runtime/src/backends/cuda/README.md.
#include "cuda_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_emulation.h"
#include "ops.h"
#include "quants.h"
#include "split_views.h"
#include "stowage/runtime/row_split.h"

namespace stowage {
namespace {

using cuda::Tv;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A host tensor: bytes plus its CPU view (contiguous unless a test changes the strides).
struct Host {
  std::vector<uint8_t> bytes;
  cpu::TensorView v;
};

Host Make(GgmlType type, std::array<int64_t, 4> ne) {
  Host h;
  h.v.type = type;
  for (int i = 0; i < 4; ++i) h.v.ne[i] = ne[i];
  cpu::SetContiguousStrides(h.v);
  h.bytes.assign(h.v.nb[3] * size_t(ne[3]) + 64, 0);
  h.v.data = h.bytes.data();
  return h;
}

// Random F32 values in [-1, 1).
Host RandomF32(std::array<int64_t, 4> ne, uint32_t seed, float scale = 1.f) {
  Host h = Make(GgmlType::F32, ne);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  float* p = reinterpret_cast<float*>(h.bytes.data());
  for (int64_t i = 0; i < h.v.nelements(); ++i) p[i] = u(rng);
  return h;
}

// Random blocks of `type`: random bytes everywhere, then every fp16 scale field set to a sane value
// (random bytes there would be inf/NaN half the time); offsets from ggml's block structs.
Host RandomBlocks(GgmlType type, std::array<int64_t, 4> ne, uint32_t seed) {
  Host h = Make(type, ne);
  std::mt19937 rng(seed);
  for (auto& b : h.bytes) b = uint8_t(rng());
  const auto& tr = GetTypeTraits(type);
  const size_t nblocks = h.v.nb[3] * size_t(ne[3]) / tr.type_size;
  std::uniform_real_distribution<float> u(0.001f, 0.05f);
  auto put = [&](uint8_t* blk, size_t off, bool signed_value) {
    const float v = u(rng) * (signed_value && (rng() & 1) ? -1.f : 1.f);
    const uint16_t x = cpu::Fp32ToFp16(v);
    std::memcpy(blk + off, &x, 2);
  };
  for (size_t i = 0; i < nblocks; ++i) {
    uint8_t* blk = h.bytes.data() + i * tr.type_size;
    switch (type) {
      case GgmlType::F32: {
        std::uniform_real_distribution<float> f(-2.f, 2.f);
        const float v = f(rng);
        std::memcpy(blk, &v, 4);
        break;
      }
      case GgmlType::F16:
        put(blk, 0, true);
        break;
      case GgmlType::BF16: {
        std::uniform_real_distribution<float> f(-2.f, 2.f);
        const uint16_t x = cpu::FloatToBf16(f(rng));
        std::memcpy(blk, &x, 2);
        break;
      }
      case GgmlType::Q4_0:
      case GgmlType::Q5_0:
      case GgmlType::Q8_0:
      case GgmlType::IQ4_NL:
      case GgmlType::IQ4_XS:
        put(blk, 0, true);
        break;
      case GgmlType::MXFP4:  // the E8M0 scale byte: half scales 2^-10 .. 2^5
        blk[0] = uint8_t(118 + rng() % 16);
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
        put(blk, 0, false);
        put(blk, 2, true);
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put(blk, 0, false);
        put(blk, 2, false);
        break;
      case GgmlType::Q2_K:
        put(blk, 80, false);
        put(blk, 82, false);
        break;
      case GgmlType::Q3_K:
        put(blk, 108, true);
        break;
      case GgmlType::Q6_K:
        put(blk, 208, true);
        break;
      default:
        break;
    }
  }
  return h;
}

using cuda::ToTv;

// Byte-for-byte comparison of two F32 tensors' elements (NaNs equal when their bits are).
void ExpectSameF32(const cpu::TensorView& a, const cpu::TensorView& b, const char* what) {
  int bad = 0;
  for (int64_t i3 = 0; i3 < a.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < a.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
          float x, y;
          std::memcpy(
              &x,
              static_cast<const uint8_t*>(a.data) + i0 * a.nb[0] + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3],
              4);
          std::memcpy(
              &y,
              static_cast<const uint8_t*>(b.data) + i0 * b.nb[0] + i1 * b.nb[1] + i2 * b.nb[2] + i3 * b.nb[3],
              4);
          if (Bits(x) != Bits(y) && ++bad <= 3)
            ADD_FAILURE() << what << ": element [" << i0 << "," << i1 << "," << i2 << "," << i3 << "] " << x
                          << " (GPU math) vs " << y << " (CPU)";
        }
  EXPECT_EQ(bad, 0) << what;
}

// Calls f(std::integral_constant<int, T>) for the kernels' type `type` (kernels.cu's dispatch).
template <typename F>
void Dispatch(int type, F&& f) {
  if (!test::DispatchCudaType(type, std::forward<F>(f))) FAIL() << "not a kernels' type: " << type;
}

// The CPU backend's MUL_MAT / GET_ROWS weight types: the GPU kernels' dequantizable set.
const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0,
                           GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

// ---- conversions, tables --------------------------------------------------------------------------

TEST(CudaMath, TypeIdsAndBlockSizesAreGgmls) {
  for (GgmlType t : kTypes) {
    EXPECT_EQ(cuda::BlockBytes(int(t)), int(GetTypeTraits(t).type_size)) << GgmlTypeName(t);
    EXPECT_EQ(cuda::BlockElements(int(t)), int(GetTypeTraits(t).block_size)) << GgmlTypeName(t);
    EXPECT_TRUE(cpu::SupportsGetRowsType(t)) << GgmlTypeName(t);
  }
  EXPECT_EQ(cuda::kBF16, int(GgmlType::BF16));
  EXPECT_EQ(cuda::kIQ4_XS, int(GgmlType::IQ4_XS));
  EXPECT_EQ(cuda::kMXFP4, int(GgmlType::MXFP4));
  for (int q = 0; q < 16; ++q) EXPECT_EQ(cuda::Mxfp4(q), cpu::kValuesMXFP4[q]) << q;
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(cuda::F32Bits(cuda::E8M0Half(uint8_t(e))), cuda::F32Bits(cpu::E8M0ToFloatHalf(uint8_t(e))))
        << e;
  EXPECT_EQ(cuda::BlockBytes(int(GgmlType::IQ2_XXS)), 0);
}

TEST(CudaMath, HalfToFloatAllValues) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = cuda::H2F(uint16_t(h)), b = cpu::Fp16ToFp32(uint16_t(h));
    ASSERT_EQ(Bits(a), Bits(b)) << "half 0x" << std::hex << h;
  }
}

TEST(CudaMath, FloatToHalfRoundsToNearestEven) {
  auto check = [](float f) {
    const uint16_t a = cuda::F2H(f), b = cpu::Fp32ToFp16(f);
    if (a != b)
      ADD_FAILURE() << "float 0x" << std::hex << Bits(f) << " (" << f << "): 0x" << a << " vs CPU 0x" << b;
    return a == b;
  };
  // Every exact half value, the midpoints between neighbours (ties: round to even) and the floats
  // next to each midpoint, both signs; then a sweep over all float bit patterns.
  int bad = 0;
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    for (float sign : {1.f, -1.f}) {
      const double lo = cpu::Fp16ToFp32(uint16_t(h)), hi = cpu::Fp16ToFp32(uint16_t(h + 1));
      const float mid = float((lo + hi) / 2);  // exact: 12 significant bits at most
      for (float f : {float(lo), mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e30f)})
        bad += !check(sign * f);
      if (bad > 5) return;
    }
  }
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 251) {
    bad += !check(FromBits(uint32_t(u)));
    if (bad > 5) return;
  }
}

TEST(CudaMath, Bf16Conversions) {
  int bad = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull && bad < 5; u += 241) {
    const float f = FromBits(uint32_t(u));
    if (cuda::F2Bf(f) != cpu::FloatToBf16(f)) ++bad, ADD_FAILURE() << "float bits 0x" << std::hex << u;
  }
  for (uint32_t b = 0; b < 65536; ++b)
    ASSERT_EQ(Bits(cuda::Bf2F(uint16_t(b))), Bits(cpu::Bf16ToFloat(uint16_t(b))));
}

TEST(CudaMath, Iq4nlGridAndPackedScales) {
  for (int q = 0; q < 16; ++q) EXPECT_EQ(cuda::Iq4nl(q), int(cpu::kValuesIQ4NL[q])) << q;
  std::mt19937 rng(5);
  for (int rep = 0; rep < 2000; ++rep) {
    uint8_t p[12];
    for (auto& b : p) b = uint8_t(rng());
    int8_t q3[16];
    cpu::UnpackQ3KScales(p, q3);
    for (int is = 0; is < 16; ++is) ASSERT_EQ(cuda::Q3KScale(p, is), int(q3[is])) << "Q3_K scale " << is;
    for (int j = 0; j < 8; ++j) {
      int d, m;
      uint8_t d2, m2;
      cuda::ScaleMinK4(j, p, &d, &m);
      cpu::GetScaleMinK4(j, p, &d2, &m2);
      ASSERT_EQ(d, int(d2));
      ASSERT_EQ(m, int(m2));
    }
  }
}

// ---- dequantization ------------------------------------------------------------------------------

TEST(CudaMath, DequantizeMatchesCpuBitForBit) {
  const int64_t K = 1024, rows = 6;
  for (GgmlType t : kTypes) {
    Host w = RandomBlocks(t, {K, rows, 1, 1}, 10 + uint32_t(t));
    std::vector<float> ref(K);
    Dispatch(int(t), [&](auto tag) {
      constexpr int T = decltype(tag)::value;
      int bad = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.bytes.data() + r * w.v.nb[1];
        ASSERT_TRUE(cpu::DequantizeRow(t, row, ref.data(), K).ok());
        for (int64_t i = 0; i < K; ++i) {
          const float g = cuda::Dq<T>(row, i);
          if (Bits(g) != Bits(ref[i]) && ++bad <= 3)
            ADD_FAILURE() << GgmlTypeName(t) << " row " << r << " element " << i << ": " << g << " vs CPU "
                          << ref[i];
        }
      }
      EXPECT_EQ(bad, 0) << GgmlTypeName(t);
    });
  }
}

// ToF16 (the cuBLAS path's weight conversion): rows at a padded stride, element l of the [ne0, nrows]
// result = fp16 of the CPU's dequantized value.
TEST(CudaMath, ToF16Emulation) {
  for (GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::BF16}) {
    const int64_t K = 512, rows = 5;
    Host w = RandomBlocks(t, {K, 2 * rows, 1, 1}, 30);  // rows at a stride of one row plus two blocks
    const int64_t nb1 = int64_t(w.v.nb[1]) + int64_t(GetTypeTraits(t).type_size) * 2;
    ASSERT_LE(nb1 * (rows - 1) + int64_t(w.v.nb[1]), int64_t(w.bytes.size()));
    std::vector<float> ref(K);
    Dispatch(int(t), [&](auto tag) {
      constexpr int T = decltype(tag)::value;
      for (int64_t l = 0; l < K * rows; ++l) {
        if (l % K == 0)
          ASSERT_TRUE(cpu::DequantizeRow(t, w.bytes.data() + (l / K) * nb1, ref.data(), K).ok());
        ASSERT_EQ(cuda::ToF16Element<T>(w.bytes.data(), K, nb1, l), cpu::Fp32ToFp16(ref[l % K]))
            << GgmlTypeName(t) << " element " << l;
      }
    });
  }
}

// ---- quantized KV-cache copies -------------------------------------------------------------------

TEST(CudaMath, QuantizeBlocksMatchCpuReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<std::array<float, 32>> blocks;
  for (int i = 0; i < 4000; ++i) {
    std::array<float, 32> b;
    for (auto& x : b) x = u(rng) * (i % 7 == 0 ? 1e-6f : 1.f);
    blocks.push_back(b);
  }
  // Edge cases: zeros, one non-zero, the largest value negative or positive, exact ties of the
  // Q4_0 rounding (x / d + 8.5 an integer) and of Q8_0's roundf (x / d = k + 0.5).
  std::array<float, 32> z{};
  blocks.push_back(z);
  z[5] = -2.f;
  blocks.push_back(z);
  for (int i = 0; i < 32; ++i) z[i] = float(i - 16) * 0.25f;  // max |x| = 4 at i = 0 (negative)
  blocks.push_back(z);
  for (int i = 0; i < 32; ++i) z[i] = float(16 - i) * 0.5f + 0.25f;
  blocks.push_back(z);
  for (int i = 0; i < 32; ++i) z[i] = (float(i) - 15.5f) * (127.f / 15.5f) / 127.f;
  blocks.push_back(z);
  for (const auto& b : blocks) {
    uint8_t g8[34], c8[34], g4[18], c4[18];
    cuda::QuantizeBlockQ8_0(b.data(), g8);
    ASSERT_TRUE(cpu::QuantizeRow(GgmlType::Q8_0, b.data(), c8, 32).ok());
    ASSERT_EQ(std::memcmp(g8, c8, 34), 0) << "Q8_0 block differs (first value " << b[0] << ")";
    cuda::QuantizeBlockQ4_0(b.data(), g4);
    ASSERT_TRUE(cpu::QuantizeRow(GgmlType::Q4_0, b.data(), c4, 32).ok());
    ASSERT_EQ(std::memcmp(g4, c4, 18), 0) << "Q4_0 block differs (first value " << b[0] << ")";
  }
}

// CPY F32 -> Q8_0 / Q4_0 into a view of a larger cache (rows at the cache's stride), from a permuted
// source (ggml_permute(x, 0, 2, 1, 3)): one emulated thread per dst block, as CpyQK.
TEST(CudaMath, CpyIntoQuantizedCacheViewEmulation) {
  Host x = RandomF32({64, 3, 5, 1}, 40);
  cpu::TensorView perm = x.v;
  std::swap(perm.ne[1], perm.ne[2]);
  std::swap(perm.nb[1], perm.nb[2]);  // [64, 5, 3]
  for (GgmlType qt : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    Host cache_g = Make(qt, {64, 16, 3, 1}), cache_c = Make(qt, {64, 16, 3, 1});
    for (size_t i = 0; i < cache_g.bytes.size(); ++i) cache_g.bytes[i] = cache_c.bytes[i] = uint8_t(i * 13);
    auto view = [&](Host& c) {  // rows 4 .. 8 of each of the 3 heads
      cpu::TensorView v = c.v;
      v.ne[1] = 5;
      v.data = c.bytes.data() + 4 * c.v.nb[1];
      return v;
    };
    cpu::TensorView dg = view(cache_g), dc = view(cache_c);
    cpu::ComputeContext ctx;
    ASSERT_TRUE(cpu::Cpy(ctx, perm, dc).ok());
    const Tv s = ToTv(perm), d = ToTv(dg);
    const int64_t nblocks = cuda::Nelements(s) / 32;
    for (int64_t bx = 0; bx * 128 < nblocks; ++bx)
      for (int tx = 0; tx < 128; ++tx)
        if (bx * 128 + tx < nblocks) cuda::CpyQuantBlock(s, d, bx * 128 + tx);
    EXPECT_TRUE(cache_g.bytes == cache_c.bytes) << "CPY F32 -> " << GgmlTypeName(qt) << ": the bytes differ";
  }
}

// CPY / CONT between F32, F16 and BF16 with any strides: CONT of a permuted view, the transposed V
// store of the KV cache (F32 [n_tokens, n_embd] into an F16 view with nb0 = n_ctx * 2), F16 -> F32.
TEST(CudaMath, CpyEmulation) {
  cpu::ComputeContext ctx;
  auto run = [&](const cpu::TensorView& src, cpu::TensorView dg, cpu::TensorView dc, std::vector<uint8_t>& g,
                 std::vector<uint8_t>& c, const char* what) {
    ASSERT_TRUE(cpu::Cpy(ctx, src, dc).ok()) << what;
    const Tv s = ToTv(src), d = ToTv(dg);
    const int64_t n = cuda::Nelements(s);
    for (int64_t l = 0; l < n; ++l) cuda::CpyElement(s, d, l);
    EXPECT_TRUE(g == c) << what << ": the bytes differ";
  };
  {  // CONT of permute(0, 2, 1, 3)
    Host x = RandomF32({6, 5, 4, 2}, 50);
    cpu::TensorView perm = x.v;
    std::swap(perm.ne[1], perm.ne[2]);
    std::swap(perm.nb[1], perm.nb[2]);
    Host g = Make(GgmlType::F32, {6, 4, 5, 2}), c = Make(GgmlType::F32, {6, 4, 5, 2});
    run(perm, g.v, c.v, g.bytes, c.bytes, "CONT of a permuted view");
  }
  for (GgmlType ct : {GgmlType::F16, GgmlType::BF16}) {  // transposed V store
    const int64_t n_embd = 24, n_tokens = 3, n_ctx = 32, kv_head = 7;
    Host v = RandomF32({n_embd * n_tokens, 1, 1, 1}, 51, 100.f);
    cpu::TensorView src = v.v;  // [n_embd, n_tokens] then transposed: ne = [n_tokens, n_embd]
    src.ne[0] = n_tokens;
    src.ne[1] = n_embd;
    src.nb[0] = size_t(n_embd) * 4;
    src.nb[1] = 4;
    src.nb[2] = src.nb[3] = size_t(n_embd * n_tokens) * 4;
    Host g = Make(ct, {n_ctx, n_embd, 1, 1}), c = Make(ct, {n_ctx, n_embd, 1, 1});
    auto view = [&](Host& h) {
      cpu::TensorView d = h.v;
      d.ne[0] = n_tokens;
      d.data = h.bytes.data() + kv_head * 2;
      return d;
    };
    run(src, view(g), view(c), g.bytes, c.bytes,
        ct == GgmlType::F16 ? "V store F32 -> F16" : "V store F32 -> BF16");
  }
  {  // CPY between different shapes of equal element count (element l to element l, ggml order)
    Host x = RandomF32({6, 20, 1, 1}, 53);
    Host g = Make(GgmlType::F16, {12, 5, 2, 1}), c = Make(GgmlType::F16, {12, 5, 2, 1});
    run(x.v, g.v, c.v, g.bytes, c.bytes, "CPY [6,20] -> F16 [12,5,2]");
  }
  {  // F16 -> F32, strided source rows
    Host h = RandomBlocks(GgmlType::F16, {16, 6, 1, 1}, 52);
    cpu::TensorView src = h.v;
    src.ne[1] = 3;
    src.nb[1] *= 2;
    Host g = Make(GgmlType::F32, {16, 3, 1, 1}), c = Make(GgmlType::F32, {16, 3, 1, 1});
    run(src, g.v, c.v, g.bytes, c.bytes, "F16 -> F32");
  }
}

// ---- GET_ROWS ------------------------------------------------------------------------------------

TEST(CudaMath, GetRowsEmulation) {
  const int32_t ids[2][3] = {{3, 0, 6}, {6, 1, 1}};
  for (GgmlType t : kTypes) {
    for (int64_t ne02 : {1, 2}) {  // src0 broadcast over the ids' dim 1, or one matrix per id row
      Host w = RandomBlocks(t, {256, 7, ne02, 1}, 60);
      Host idx = Make(GgmlType::I32, {3, 2, 1, 1});
      std::memcpy(idx.bytes.data(), ids, sizeof ids);
      Host g = Make(GgmlType::F32, {256, 3, 2, 1}), c = Make(GgmlType::F32, {256, 3, 2, 1});
      cpu::ComputeContext ctx;
      ASSERT_TRUE(cpu::GetRows(ctx, w.v, idx.v, c.v).ok());
      const Tv s = ToTv(w.v), i = ToTv(idx.v), d = ToTv(g.v);
      Dispatch(int(t), [&](auto tag) {
        constexpr int T = decltype(tag)::value;
        int32_t bad = -1;
        for (int64_t l = 0; l < cuda::Nelements(d); ++l)
          ASSERT_TRUE(cuda::GetRowsElement<T>(s, i, d, l, &bad));
      });
      ExpectSameF32(g.v, c.v, GgmlTypeName(t));
    }
  }
  // An index outside the rows gives NaN (no read outside src0; the CPU backend reports kOutOfRange).
  Host w = RandomBlocks(GgmlType::Q8_0, {64, 2, 1, 1}, 61);
  Host idx = Make(GgmlType::I32, {2, 1, 1, 1});
  const int32_t bad[2] = {1, 2};
  std::memcpy(idx.bytes.data(), bad, 8);
  Host g = Make(GgmlType::F32, {64, 2, 1, 1});
  const Tv s = ToTv(w.v), i = ToTv(idx.v), d = ToTv(g.v);
  int32_t bad_index = -1;
  for (int64_t l = 0; l < 128; ++l)
    EXPECT_EQ(cuda::GetRowsElement<cuda::kQ8_0>(s, i, d, l, &bad_index), l < 64);
  EXPECT_EQ(bad_index, 2);
  const float* out = reinterpret_cast<const float*>(g.bytes.data());
  EXPECT_FALSE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[64]));
  EXPECT_TRUE(std::isnan(out[127]));
}

// ---- element-wise ops ------------------------------------------------------------------------------

TEST(CudaMath, ElementwiseEmulation) {
  // The CPU's scalar level: its SILU/SWIGLU is x / (1 + expf(-x)) as the CUDA kernels'; the SIMD
  // levels use a vectorized exp within 2 ulp of expf (cpu_simd_test), not bit-identical.
  cpu::ComputeContext ctx;
  ctx.max_isa = cpu::IsaLevel::kScalar;
  Host a = RandomF32({67, 5, 3, 2}, 70, 12.f);
  Host b = RandomF32({67, 1, 3, 1}, 71);
  Host h = RandomBlocks(GgmlType::F16, {67, 5, 1, 1}, 72);
  auto emulate = [](const Tv& d, auto&& f) {
    for (int64_t l = 0; l < cuda::Nelements(d); ++l) f(l);
  };
  for (bool add : {true, false}) {
    for (const Host* src1 : {&b, &h}) {
      Host g = Make(GgmlType::F32, {67, 5, 3, 2}), c = Make(GgmlType::F32, {67, 5, 3, 2});
      ASSERT_TRUE((add ? cpu::Add(ctx, a.v, src1->v, c.v) : cpu::Mul(ctx, a.v, src1->v, c.v)).ok());
      const Tv ta = ToTv(a.v), tb = ToTv(src1->v), td = ToTv(g.v);
      emulate(td, [&](int64_t l) {
        cuda::BinaryElement(add ? cuda::Binary::kAdd : cuda::Binary::kMul, ta, tb, td, l);
      });
      ExpectSameF32(g.v, c.v, add ? "ADD" : "MUL");
    }
  }
  for (cuda::Unary op : {cuda::Unary::kScale, cuda::Unary::kSilu, cuda::Unary::kGelu, cuda::Unary::kTanh}) {
    Host g = Make(GgmlType::F32, {67, 5, 3, 2}), c = Make(GgmlType::F32, {67, 5, 3, 2});
    ASSERT_TRUE((op == cuda::Unary::kScale  ? cpu::Scale(ctx, a.v, c.v, 0.37f, 0.25f)
                 : op == cuda::Unary::kSilu ? cpu::Silu(ctx, a.v, c.v)
                 : op == cuda::Unary::kGelu ? cpu::Gelu(ctx, a.v, c.v)
                                            : cpu::Tanh(ctx, a.v, c.v))
                    .ok());
    const Tv ta = ToTv(a.v), td = ToTv(g.v);
    emulate(td, [&](int64_t l) { cuda::UnaryElement(op, ta, td, 0.37f, 0.25f, l); });
    ExpectSameF32(g.v, c.v,
                  op == cuda::Unary::kScale  ? "SCALE"
                  : op == cuda::Unary::kSilu ? "SILU"
                  : op == cuda::Unary::kGelu ? "GELU"
                                             : "TANH");
  }
  Host up = RandomF32({67, 5, 3, 2}, 73, 4.f);
  Host fused = RandomF32({134, 5, 3, 2}, 74, 4.f);
  for (cuda::Glu op : {cuda::Glu::kSwiglu, cuda::Glu::kGeglu}) {
    for (bool is_fused : {false, true}) {
      Host g = Make(GgmlType::F32, {67, 5, 3, 2}), c = Make(GgmlType::F32, {67, 5, 3, 2});
      const cpu::TensorView& ga = is_fused ? fused.v : a.v;
      cpu::TensorView gb = up.v;
      if (is_fused) gb.data = nullptr;
      ASSERT_TRUE(
          (op == cuda::Glu::kSwiglu ? cpu::SwiGlu(ctx, ga, gb, c.v) : cpu::GeGlu(ctx, ga, gb, c.v)).ok());
      const Tv ta = ToTv(ga), tb = is_fused ? Tv() : ToTv(gb), td = ToTv(g.v);
      emulate(td, [&](int64_t l) { cuda::GluElement(op, ta, tb, td, l); });
      ExpectSameF32(g.v, c.v,
                    op == cuda::Glu::kSwiglu ? (is_fused ? "SWIGLU fused" : "SWIGLU")
                                             : (is_fused ? "GEGLU fused" : "GEGLU"));
    }
  }
}

// gpt-oss's expert ops: SWIGLU_OAI (gates and values beyond the limit) and ADD_ID, element by element
// against the CPU backend's kernels, bit for bit; an id outside the experts gives NaN.
TEST(CudaMath, SwiGluOaiAndAddIdEmulation) {
  cpu::ComputeContext ctx;
  auto emulate = [](const Tv& d, auto&& f) {
    for (int64_t l = 0; l < cuda::Nelements(d); ++l) f(l);
  };
  Host gate = RandomF32({45, 4, 3, 1}, 75, 12.f), up = RandomF32({45, 4, 3, 1}, 76, 12.f);
  Host g = Make(GgmlType::F32, {45, 4, 3, 1}), c = Make(GgmlType::F32, {45, 4, 3, 1});
  ASSERT_TRUE(cpu::SwiGluOai(ctx, gate.v, up.v, c.v, 1.702f, 7.f).ok());
  const Tv ta = ToTv(gate.v), tb = ToTv(up.v), td = ToTv(g.v);
  emulate(td, [&](int64_t l) { cuda::SwiGluOaiElement(ta, tb, td, 1.702f, 7.f, l); });
  ExpectSameF32(g.v, c.v, "SWIGLU_OAI");

  Host bias = RandomF32({45, 6, 1, 1}, 77), ids = Make(GgmlType::I32, {4, 3, 1, 1});
  int32_t* id = reinterpret_cast<int32_t*>(ids.bytes.data());
  for (int i = 0; i < 12; ++i) id[i] = (i * 5 + 1) % 6;
  Host g2 = Make(GgmlType::F32, {45, 4, 3, 1}), c2 = Make(GgmlType::F32, {45, 4, 3, 1});
  ASSERT_TRUE(cpu::AddId(ctx, gate.v, bias.v, ids.v, c2.v).ok());
  const Tv tbias = ToTv(bias.v), tids = ToTv(ids.v), td2 = ToTv(g2.v);
  emulate(td2, [&](int64_t l) { cuda::AddIdElement(ta, tbias, tids, td2, l); });
  ExpectSameF32(g2.v, c2.v, "ADD_ID");
  id[5] = 6;  // [1, 1] outside the 6 experts
  emulate(td2, [&](int64_t l) { cuda::AddIdElement(ta, tbias, tids, td2, l); });
  EXPECT_TRUE(std::isnan(reinterpret_cast<const float*>(g2.bytes.data())[45 * 5]));
  EXPECT_FALSE(std::isnan(reinterpret_cast<const float*>(g2.bytes.data())[45 * 4]));
}

// ---- the routing ops of the MoE graphs ------------------------------------------------------------

// DIV (the expert weights over their sum; F32 and F16 divisors broadcast) and SIGMOID (deepseek2 and
// glm4moe's gating), element by element against the CPU backend, bit for bit.
TEST(CudaMath, DivAndSigmoidEmulation) {
  cpu::ComputeContext ctx;
  ctx.max_isa = cpu::IsaLevel::kScalar;
  auto emulate = [](const Tv& d, auto&& f) {
    for (int64_t l = 0; l < cuda::Nelements(d); ++l) f(l);
  };
  Host a = RandomF32({8, 5, 3, 2}, 80, 12.f);
  Host b = RandomF32({1, 5, 3, 1}, 81, 3.f);
  Host h = RandomBlocks(GgmlType::F16, {8, 1, 1, 1}, 82);
  for (const Host* src1 : {&b, &h}) {
    Host g = Make(GgmlType::F32, {8, 5, 3, 2}), c = Make(GgmlType::F32, {8, 5, 3, 2});
    ASSERT_TRUE(cpu::Div(ctx, a.v, src1->v, c.v).ok());
    const Tv ta = ToTv(a.v), tb = ToTv(src1->v), td = ToTv(g.v);
    emulate(td, [&](int64_t l) { cuda::BinaryElement(cuda::Binary::kDiv, ta, tb, td, l); });
    ExpectSameF32(g.v, c.v, src1 == &b ? "DIV" : "DIV by F16");
  }
  Host x = RandomF32({67, 5, 3, 2}, 83, 30.f);
  Host g = Make(GgmlType::F32, {67, 5, 3, 2}), c = Make(GgmlType::F32, {67, 5, 3, 2});
  ASSERT_TRUE(cpu::Sigmoid(ctx, x.v, c.v).ok());
  const Tv tx = ToTv(x.v), td = ToTv(g.v);
  emulate(td, [&](int64_t l) { cuda::UnaryElement(cuda::Unary::kSigmoid, tx, td, 0.f, 0.f, l); });
  ExpectSameF32(g.v, c.v, "SIGMOID");
}

// build_moe_ffn's CLAMP of the weight sum ([2^-14, inf]) and a finite range, element by element
// against cpu::Clamp bit for bit, specials included; fminf(fmaxf(x, lo), hi) (clamp in the other
// order) differs from it at NaN.
TEST(CudaMath, ClampEmulation) {
  cpu::ComputeContext ctx;
  Host x = RandomF32({37, 5, 3, 2}, 92, 4.f);
  const float specials[] = {0.f, -0.f, 1e-30f, 0x1p-14f, INFINITY, -INFINITY, NAN, -NAN};
  std::memcpy(x.bytes.data(), specials, sizeof(specials));
  const Tv tx = ToTv(x.v);
  const float ranges[2][2] = {{0x1p-14f, INFINITY}, {-1.f, 1.f}};
  for (const auto& range : ranges) {
    const float lo = range[0], hi = range[1];
    Host g = Make(GgmlType::F32, {37, 5, 3, 2}), c = Make(GgmlType::F32, {37, 5, 3, 2});
    ASSERT_TRUE(cpu::Clamp(ctx, x.v, c.v, lo, hi).ok());
    const Tv td = ToTv(g.v);
    test::EmulateElements(td, [&](int64_t l) { cuda::UnaryElement(cuda::Unary::kClamp, tx, td, lo, hi, l); });
    ExpectSameF32(g.v, c.v, "CLAMP");
    const float nan_out = reinterpret_cast<const float*>(g.bytes.data())[6];
    EXPECT_EQ(nan_out, hi);
    EXPECT_NE(std::fmin(std::fmax(specials[6], lo), hi), nan_out);  // the other order: lo
  }
}

// deepseek2's group-limited routing (llama.cpp 2026 build_moe_ffn): FILL of the expert scores with
// -inf, then SET_ROWS of the chosen groups' rows. SET_ROWS against cpu::SetRows bit for bit (F32 and
// F16 dst, I32 and I64 indices broadcast over dims 2 and 3); an index outside dst writes nothing.
TEST(CudaMath, FillAndSetRowsEmulation) {
  cpu::ComputeContext ctx;
  Host x = RandomF32({8, 4, 3, 1}, 89);
  Host f = Make(GgmlType::F32, {8, 4, 3, 1});
  const Tv tx = ToTv(x.v), tf = ToTv(f.v);
  test::EmulateElements(
      tf, [&](int64_t l) { cuda::UnaryElement(cuda::Unary::kFill, tx, tf, -INFINITY, 0.f, l); });
  for (int64_t i = 0; i < f.v.nelements(); ++i)
    EXPECT_EQ(reinterpret_cast<const float*>(f.bytes.data())[i], -INFINITY) << i;
  Host rows = RandomF32({6, 2, 4, 2}, 90);
  for (GgmlType dt : {GgmlType::F32, GgmlType::F16}) {
    for (GgmlType it : {GgmlType::I32, GgmlType::I64}) {
      Host idx = Make(it, {2, 2, 1, 1});
      const int64_t want[4] = {3, 0, 7, 3};  // [i, i2 % 2]; row 3 twice (once per i2 parity)
      for (int k = 0; k < 4; ++k) {
        if (it == GgmlType::I32) {
          const int32_t v = int32_t(want[k]);
          std::memcpy(idx.bytes.data() + 4 * k, &v, 4);
        } else {
          std::memcpy(idx.bytes.data() + 8 * k, &want[k], 8);
        }
      }
      Host base = RandomBlocks(dt, {6, 9, 4, 2}, 91);
      if (dt == GgmlType::F32) base = RandomF32({6, 9, 4, 2}, 91);
      Host g = base, c = base;
      g.v.data = g.bytes.data();
      c.v.data = c.bytes.data();
      ASSERT_TRUE(cpu::SetRows(ctx, rows.v, idx.v, c.v).ok());
      const Tv tr = ToTv(rows.v), ti = ToTv(idx.v), tg = ToTv(g.v);
      test::EmulateElements(
          tr, [&](int64_t l) { EXPECT_TRUE(cuda::SetRowsElement(tr, ti, it == GgmlType::I64, tg, l)); });
      EXPECT_EQ(g.bytes, c.bytes) << GgmlTypeName(dt) << " dst, " << GgmlTypeName(it) << " indices";
      if (it == GgmlType::I32) {
        const int32_t bad = 9;  // one past dst's rows
        std::memcpy(idx.bytes.data(), &bad, 4);
        Host h = base;
        h.v.data = h.bytes.data();
        const Tv th = ToTv(h.v);
        EXPECT_FALSE(cuda::SetRowsElement(tr, ti, false, th, 0));
        EXPECT_EQ(h.bytes, base.bytes);
      }
    }
  }
}

// CONCAT along dim 0 of two strided views (deepseek2's q / k heads: the no-rope part, a view with
// rows longer than it, and the rope part) and along dim 2, against cpu::Concat bit for bit.
TEST(CudaMath, ConcatEmulation) {
  cpu::ComputeContext ctx;
  auto emulate = [](const Tv& d, auto&& f) {
    for (int64_t l = 0; l < cuda::Nelements(d); ++l) f(l);
  };
  const int64_t nope = 6, rope = 4, hv = 5, nh = 3, nt = 7;
  Host kv = RandomF32({(nope + hv) * nh, nt, 1, 1}, 84);
  cpu::TensorView k_nope = kv.v;  // [nope, nh, nt] inside rows of nope + hv
  k_nope.ne[0] = nope;
  k_nope.ne[1] = nh;
  k_nope.ne[2] = nt;
  k_nope.nb[1] = (nope + hv) * 4;
  k_nope.nb[2] = (nope + hv) * nh * 4;
  k_nope.nb[3] = k_nope.nb[2] * nt;
  Host pe = RandomF32({rope, nh, nt, 1}, 85);
  Host g = Make(GgmlType::F32, {nope + rope, nh, nt, 1}), c = Make(GgmlType::F32, {nope + rope, nh, nt, 1});
  ASSERT_TRUE(cpu::Concat(ctx, k_nope, pe.v, c.v, 0).ok());
  const Tv ta = ToTv(k_nope), tb = ToTv(pe.v), td = ToTv(g.v);
  emulate(td, [&](int64_t l) { cuda::ConcatElement(ta, tb, td, 0, l); });
  ExpectSameF32(g.v, c.v, "CONCAT dim 0");
  Host more = RandomF32({rope, nh, 2, 1}, 86);
  Host g2 = Make(GgmlType::F32, {rope, nh, nt + 2, 1}), c2 = Make(GgmlType::F32, {rope, nh, nt + 2, 1});
  ASSERT_TRUE(cpu::Concat(ctx, pe.v, more.v, c2.v, 2).ok());
  const Tv tm = ToTv(more.v), td2 = ToTv(g2.v);
  emulate(td2, [&](int64_t l) { cuda::ConcatElement(tb, tm, td2, 2, l); });
  ExpectSameF32(g2.v, c2.v, "CONCAT dim 2");
}

// REPEAT (the older deepseek2 form repeats the roped k_pe head over the heads), from a permuted
// source view, against cpu::Repeat bit for bit.
TEST(CudaMath, RepeatEmulation) {
  cpu::ComputeContext ctx;
  Host src = RandomF32({4, 3, 1, 2}, 93);
  cpu::TensorView v = src.v;  // viewed as [4, 1, 3, 2] (dims 1 and 2 swapped)
  std::swap(v.ne[1], v.ne[2]);
  std::swap(v.nb[1], v.nb[2]);
  Host g = Make(GgmlType::F32, {8, 5, 6, 2}), c = Make(GgmlType::F32, {8, 5, 6, 2});
  ASSERT_TRUE(cpu::Repeat(ctx, v, c.v).ok());
  const Tv tv = ToTv(v), tg = ToTv(g.v);
  test::EmulateElements(tg, [&](int64_t l) { cuda::RepeatElement(tv, tg, l); });
  ExpectSameF32(g.v, c.v, "REPEAT");
}

// SUM_ROWS: one thread per row summing in double, against cpu::SumRows bit for bit (rows of 1, the
// 8 chosen experts' weights, and 4099 values of mixed magnitude, from a strided view).
TEST(CudaMath, SumRowsEmulation) {
  cpu::ComputeContext ctx;
  for (int64_t ne0 : {1, 8, 4099}) {
    Host x = RandomF32({ne0 + 3, 5, 3, 1}, 87 + uint32_t(ne0), 100.f);
    float* xs = reinterpret_cast<float*>(x.bytes.data());
    for (int64_t i = 0; i < x.v.nelements(); i += 7) xs[i] *= 1e-6f;
    cpu::TensorView v = x.v;  // the first ne0 of rows of ne0 + 3
    v.ne[0] = ne0;
    Host g = Make(GgmlType::F32, {1, 5, 3, 1}), c = Make(GgmlType::F32, {1, 5, 3, 1});
    ASSERT_TRUE(cpu::SumRows(ctx, v, c.v).ok());
    const Tv tv = ToTv(v), td = ToTv(g.v);
    test::EmulateSumRows(tv, td);
    ExpectSameF32(g.v, c.v, "SUM_ROWS");
  }
}

// ARGSORT: the bitonic network of ArgSortK run stage by stage (each stage's compare-exchanges in
// thread order; they touch distinct pairs), against cpu::ArgSort's stable sort: ascending and
// descending, rows of 1 to 1000 (padded to the network's width), ties (values of few levels) and a
// strided source. Without the index order of ties the network's result differs (it is not stable).
TEST(CudaMath, ArgsortEmulation) {
  cpu::ComputeContext ctx;
  std::mt19937 rng(88);
  // The same network with ties left in whatever order the exchanges leave them.
  auto untied = [](const Tv& src, const Tv& dst, bool desc) {
    const int64_t ncols = src.ne[0];
    const int width = cuda::ArgsortWidth(ncols);
    for (int64_t r = 0; r < src.ne[1] * src.ne[2] * src.ne[3]; ++r) {
      int64_t i1, i2, i3;
      cuda::RowIndex(r, src.ne, &i1, &i2, &i3);
      const uint8_t* row = cuda::At(src, 0, i1, i2, i3);
      std::vector<int> idx(static_cast<size_t>(width));
      for (int i = 0; i < width; ++i) idx[size_t(i)] = i;
      auto before = [&](int x, int y) {
        if (x >= ncols || y >= ncols) return x < y;
        const float vx = cuda::LoadF32(row + x * src.nb[0]), vy = cuda::LoadF32(row + y * src.nb[0]);
        return desc ? vx > vy : vx < vy;
      };
      for (int k = 2; k <= width; k *= 2)
        for (int j = k / 2; j > 0; j /= 2)
          for (int i = 0; i < width; ++i) {
            const int p = i ^ j;
            if (p > i && ((i & k) == 0) == before(idx[size_t(p)], idx[size_t(i)]))
              std::swap(idx[size_t(i)], idx[size_t(p)]);
          }
      for (int64_t i = 0; i < ncols; ++i) std::memcpy(cuda::At(dst, i, i1, i2, i3), &idx[size_t(i)], 4);
    }
  };
  bool untied_differs = false;
  for (int64_t ncols : {1, 2, 3, 8, 60, 128, 256, 1000}) {
    for (int levels : {0, 3}) {
      Host x = Make(GgmlType::F32, {ncols + 1, 4, 2, 1});
      float* xs = reinterpret_cast<float*>(x.bytes.data());
      std::uniform_real_distribution<float> u(-4.f, 4.f);
      for (int64_t i = 0; i < x.v.nelements(); ++i)
        xs[i] = levels ? float(int(rng() % uint32_t(levels))) : u(rng);
      cpu::TensorView v = x.v;
      v.ne[0] = ncols;
      for (bool desc : {false, true}) {
        Host g = Make(GgmlType::I32, {ncols, 4, 2, 1}), c = Make(GgmlType::I32, {ncols, 4, 2, 1});
        ASSERT_TRUE(cpu::ArgSort(ctx, v, c.v, desc ? 1 : 0).ok());
        test::EmulateArgsort(ToTv(v), ToTv(g.v), desc);
        EXPECT_EQ(g.bytes, c.bytes) << "ncols " << ncols << " levels " << levels << (desc ? " desc" : " asc");
        if (levels && ncols >= 8) {
          untied(ToTv(v), ToTv(g.v), desc);
          untied_differs = untied_differs || g.bytes != c.bytes;
        }
      }
    }
  }
  EXPECT_TRUE(untied_differs) << "ties left unordered should have given another order than the CPU's";
}

// ---- ROPE ------------------------------------------------------------------------------------------

// ROPE's inputs of the emulation tests: x [80, 3, 5] of values in [-scale, scale) (n_dims 64 < ne0:
// a copied tail), the 5 tokens' positions up to 131071, 32 freq factors in [1, 9).
struct RopeInputs {
  static constexpr int64_t ne0 = 80, nh = 3, nt = 5;
  Host x, pos, ff;
};
RopeInputs MakeRopeInputs(uint32_t seed, float scale) {
  RopeInputs r{RandomF32({RopeInputs::ne0, RopeInputs::nh, RopeInputs::nt, 1}, seed, scale),
               Make(GgmlType::I32, {RopeInputs::nt, 1, 1, 1}), RandomF32({32, 1, 1, 1}, seed + 1)};
  const int32_t p[RopeInputs::nt] = {0, 7, 511, 4096, 131071};
  std::memcpy(r.pos.bytes.data(), p, sizeof p);
  float* f = reinterpret_cast<float*>(r.ff.bytes.data());
  for (int i = 0; i < 32; ++i) f[i] = 1.f + 8.f * std::fabs(f[i]);
  return r;
}

// ROPE parameters of the emulation tests: n_dims 64, mode 0 (normal) or 2 (NEOX), without YaRN
// (freq_base 10000) or with it (mistral3's rope.scaling.yarn_beta_fast / _slow, freq_scale 1/4).
cpu::RopeParams TestRopeParams(int mode, bool yarn) {
  cpu::RopeParams rp;
  rp.n_dims = 64;
  rp.mode = mode;
  rp.n_ctx_orig = 4096;
  rp.freq_base = yarn ? 500000.f : 10000.f;
  rp.freq_scale = yarn ? 0.25f : 1.f;
  rp.ext_factor = yarn ? 1.f : 0.f;
  rp.attn_factor = yarn ? 1.1f : 1.f;
  rp.beta_fast = yarn ? 8.f : 32.f;
  rp.beta_slow = yarn ? 0.25f : 1.f;
  return rp;
}

TEST(CudaMath, RopeEmulation) {
  const int64_t ne0 = RopeInputs::ne0, nh = RopeInputs::nh, nt = RopeInputs::nt;
  const RopeInputs in = MakeRopeInputs(80, 1.f);
  const Host &x = in.x, &pos = in.pos, &ff = in.ff;
  for (int mode : {0, 2}) {
    for (bool yarn : {false, true}) {
      for (bool freq_factors : {false, true}) {
        for (int cfg = 0; cfg < 4; ++cfg) {
          const bool in_place = cfg % 2 == 1;
          cpu::RopeParams rp = TestRopeParams(mode, yarn);
          rp.n_offs = cfg / 2 == 1 ? 8 : 0;  // ggml_rope_set_offset (deepseek2's MHA form): dims 8..71
          Host c = Make(GgmlType::F32, {ne0, nh, nt, 1});
          Host g = x;  // in place: the emulation writes over its own copy of src
          g.v.data = g.bytes.data();
          Host gd = Make(GgmlType::F32, {ne0, nh, nt, 1});
          cpu::TensorView ffv = ff.v;
          if (!freq_factors) ffv.data = nullptr;
          cpu::ComputeContext ctx;
          ASSERT_TRUE(cpu::Rope(ctx, x.v, pos.v, ffv, c.v, rp).ok());
          const cuda::RopeArgs a = cuda::ToRopeArgs(rp);  // as cuda_backend.cpp makes them
          const Tv s = ToTv(g.v), d = in_place ? ToTv(g.v) : ToTv(gd.v);
          const int64_t n = cuda::RopeItems(s);
          EXPECT_EQ(n, ne0 / 2 * nh * nt);
          for (int64_t bx = 0; bx * 256 < n; ++bx)
            for (int tx = 0; tx < 256; ++tx)
              if (bx * 256 + tx < n)
                cuda::RopeThread(s, reinterpret_cast<const int32_t*>(pos.bytes.data()),
                                 freq_factors ? reinterpret_cast<const float*>(ff.bytes.data()) : nullptr, d,
                                 a, bx * 256 + tx);
          ExpectSameF32(in_place ? g.v : gd.v, c.v, "ROPE");
          if (HasFailure()) {
            ADD_FAILURE() << "mode " << mode << " yarn " << yarn << " freq_factors " << freq_factors
                          << " in place " << in_place << " n_offs " << rp.n_offs;
            return;
          }
        }
      }
    }
  }
}

// ---- rows: norms, softmax, the 1-D row grid --------------------------------------------------------

// The row kernels' grid: one block per row on grid.x, whatever ne1/ne2/ne3 are (a (ne1, ne2, ne3)
// grid would fail to launch beyond 65535 rows in y or z).
TEST(CudaMath, RowGridCoversRowsBeyondGridYZLimits) {
  const int64_t ne[4] = {8, 3, 70000, 2};
  const int64_t rows = ne[1] * ne[2] * ne[3];
  ASSERT_LE(rows, cuda::kMaxGridX);
  std::vector<uint8_t> seen(size_t(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i1, i2, i3;
    cuda::RowIndex(r, ne, &i1, &i2, &i3);
    ASSERT_TRUE(i1 < ne[1] && i2 < ne[2] && i3 < ne[3]);
    const int64_t flat = i1 + ne[1] * (i2 + ne[2] * i3);
    ASSERT_EQ(seen[size_t(flat)], 0);
    seen[size_t(flat)] = 1;
  }
}

// BlockSum of kernels.cu on the host: per-warp xor-shuffle butterflies (lane l adds lane l ^ o for
// o = 16, 8, 4, 2, 1), then the same over the warps' sums.
float BlockSumEmulated(const std::vector<float>& v) {
  auto warp = [](std::array<float, 32> x) {
    for (int o = 16; o > 0; o >>= 1) {
      std::array<float, 32> y;
      for (int l = 0; l < 32; ++l) y[size_t(l)] = x[size_t(l)] + x[size_t(l ^ o)];
      x = y;
    }
    return x[0];
  };
  const size_t nwarps = v.size() / 32;
  std::array<float, 32> sums{};
  for (size_t w = 0; w < nwarps; ++w) {
    std::array<float, 32> x;
    for (size_t l = 0; l < 32; ++l) x[l] = v[32 * w + l];
    sums[w] = warp(x);
  }
  return warp(sums);
}

// NormK's arithmetic emulated with its thread-strided float partial sums and BlockSum, against the
// CPU's double sums. Rows with a large mean: the single-pass E[x^2] - mean^2 the kernel used before
// loses the variance there (kept below as the counter-example the test must distinguish).
TEST(CudaMath, NormRowsEmulation) {
  const int64_t ne0 = 4096;
  for (float mean : {0.f, 300.f}) {
    Host x = RandomF32({ne0, 3, 1, 1}, 90);
    float* xs = reinterpret_cast<float*>(x.bytes.data());
    for (int64_t i = 0; i < x.v.nelements(); ++i) xs[i] += mean;
    for (bool rms : {true, false}) {
      Host c = Make(GgmlType::F32, {ne0, 3, 1, 1});
      cpu::ComputeContext ctx;
      ASSERT_TRUE((rms ? cpu::RmsNorm(ctx, x.v, c.v, 1e-5f) : cpu::Norm(ctx, x.v, c.v, 1e-5f)).ok());
      const float* cs = reinterpret_cast<const float*>(c.bytes.data());
      const int threads = 1024;  // NormK uses 1024 threads for ne0 >= 1024
      double worst = 0, worst_single_pass = 0;
      for (int64_t r = 0; r < 3; ++r) {
        const float* row = xs + r * ne0;
        auto block_sum = [&](auto&& term) {
          std::vector<float> part(threads, 0.f);
          for (int t = 0; t < threads; ++t)
            for (int64_t k = t; k < ne0; k += threads) part[size_t(t)] += term(row[k]);
          return BlockSumEmulated(part);
        };
        float mu = 0, scale;
        if (rms) {
          scale = cuda::RmsNormScale(block_sum([](float v) { return v * v; }), ne0, 1e-5f);
        } else {
          mu = block_sum([](float v) { return v; }) / float(ne0);
          scale = cuda::NormScale(block_sum([&](float v) { return (v - mu) * (v - mu); }), ne0, 1e-5f);
          const float var1 = block_sum([](float v) { return v * v; }) / float(ne0) - mu * mu;
          const float scale1 = 1.f / std::sqrt(std::max(var1, 0.f) + 1e-5f);
          for (int64_t k = 0; k < ne0; ++k)
            worst_single_pass =
                std::max(worst_single_pass, double(std::fabs((row[k] - mu) * scale1 - cs[r * ne0 + k])));
        }
        for (int64_t k = 0; k < ne0; ++k)
          worst = std::max(worst, double(std::fabs((row[k] - mu) * scale - cs[r * ne0 + k])));
      }
      EXPECT_LT(worst, 1e-4) << (rms ? "RMS_NORM" : "NORM") << " mean " << mean;  // outputs ~1
      if (!rms && mean > 0)
        EXPECT_GT(worst_single_pass, 1e-3) << "the single-pass variance should have failed here";
    }
  }
}

// RMS_NORM_MUL (NormK with a weight): the fused kernel's elements equal NormK's RMS_NORM followed by
// BinaryK's MUL bit for bit (the same two float products), and the CPU's RmsNormMul within the
// norms' summation-order tolerance; F32 and F16 weights, a weight broadcast over rows, both block
// sizes (256 threads below 1024 elements).
TEST(CudaMath, RmsNormMulEmulation) {
  for (int64_t ne0 : {200, 4096}) {
    Host x = RandomF32({ne0, 3, 2, 1}, 95, 3.f);
    const float* xs = reinterpret_cast<const float*>(x.bytes.data());
    Host w32 = RandomF32({ne0, 1, 1, 1}, 96, 2.f);
    Host w16 = RandomBlocks(GgmlType::F16, {ne0, 1, 2, 1}, 97);
    for (const Host* w : {&w32, &w16}) {
      const int threads = ne0 >= 1024 ? 1024 : 256;
      Host fused = Make(GgmlType::F32, {ne0, 3, 2, 1}), normed = Make(GgmlType::F32, {ne0, 3, 2, 1}),
           two_ops = Make(GgmlType::F32, {ne0, 3, 2, 1}), c = Make(GgmlType::F32, {ne0, 3, 2, 1});
      float* fs = reinterpret_cast<float*>(fused.bytes.data());
      float* ns = reinterpret_cast<float*>(normed.bytes.data());
      const Tv tw = ToTv(w->v);
      for (int64_t r = 0; r < 6; ++r) {
        const float* row = xs + r * ne0;
        std::vector<float> part(size_t(threads), 0.f);
        for (int t = 0; t < threads; ++t)
          for (int64_t k = t; k < ne0; k += threads) part[size_t(t)] += row[k] * row[k];
        const float scale = cuda::RmsNormScale(BlockSumEmulated(part), ne0, 1e-6f);
        const int64_t i1 = r % 3, i2 = r / 3;
        const uint8_t* wr = cuda::At(tw, 0, i1 % tw.ne[1], i2 % tw.ne[2], 0);
        for (int64_t k = 0; k < ne0; ++k) {
          fs[r * ne0 + k] = cuda::RmsNormMulElement(row[k], scale, cuda::LoadF(tw.type, wr + k * tw.nb[0]));
          ns[r * ne0 + k] = row[k] * scale;
        }
      }
      const Tv tn = ToTv(normed.v), td = ToTv(two_ops.v);
      for (int64_t l = 0; l < cuda::Nelements(td); ++l)
        cuda::BinaryElement(cuda::Binary::kMul, tn, tw, td, l);
      ExpectSameF32(fused.v, two_ops.v, "RMS_NORM_MUL vs RMS_NORM, MUL");
      cpu::ComputeContext ctx;
      ASSERT_TRUE(cpu::RmsNormMul(ctx, x.v, w->v, c.v, 1e-6f).ok());
      const float* cs = reinterpret_cast<const float*>(c.bytes.data());
      double worst = 0;
      for (int64_t i = 0; i < 6 * ne0; ++i) worst = std::max(worst, double(std::fabs(fs[i] - cs[i])));
      EXPECT_LT(worst, 2e-4) << "RMS_NORM_MUL ne0 " << ne0;  // outputs ~2
    }
  }
}

TEST(CudaMath, SoftMaxAlibiAndRows) {
  for (uint32_t n_head : {1u, 2u, 3u, 8u, 12u, 32u, 40u, 64u, 100u}) {
    const cuda::SoftMaxAlibi a = cuda::MakeSoftMaxAlibi(n_head, 8.f);
    EXPECT_EQ(a.n_head_log2, 1u << uint32_t(std::floor(std::log2(double(n_head))))) << n_head;
    EXPECT_TRUE(a.on);
    EXPECT_EQ(cuda::AlibiSlope(cuda::MakeSoftMaxAlibi(n_head, 0.f), 3), 1.f);
  }
  // Rows with an F16 mask and ALiBi, emulated with the kernel's per-element terms and float sums.
  const int64_t nkv = 37, nt = 5, nh = 12;
  Host s = RandomF32({nkv, nt, nh, 1}, 91, 4.f);
  Host mask = RandomBlocks(GgmlType::F16, {nkv, 8, 1, 1}, 92);
  for (float max_bias : {0.f, 8.f}) {
    Host c = Make(GgmlType::F32, {nkv, nt, nh, 1});
    cpu::ComputeContext ctx;
    ctx.max_isa = cpu::IsaLevel::kScalar;
    ASSERT_TRUE(cpu::SoftMax(ctx, s.v, mask.v, c.v, 0.125f, max_bias).ok());
    const cuda::SoftMaxAlibi alibi = cuda::MakeSoftMaxAlibi(uint32_t(nh), max_bias);
    const Tv ts = ToTv(s.v), tm = ToTv(mask.v);
    double worst = 0;
    for (int64_t r = 0; r < nt * nh; ++r) {
      int64_t i1, i2, i3;
      cuda::RowIndex(r, ts.ne, &i1, &i2, &i3);
      const float slope = cuda::AlibiSlope(alibi, uint32_t(i2));
      std::vector<float> w(nkv);
      float mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < nkv; ++k) {
        w[k] = cuda::SoftMaxLogit(cuda::LoadF32(cuda::At(ts, k, i1, i2, i3)), 0.125f, slope,
                                  cuda::At(tm, k, i1, 0, 0), tm.type);
        mx = std::max(mx, w[k]);
      }
      for (auto& v : w) sum += (v = std::exp(v - mx));
      for (int64_t k = 0; k < nkv; ++k) {
        const float ref = reinterpret_cast<const float*>(c.bytes.data())[r * nkv + k];
        worst = std::max(worst, double(std::fabs(w[k] / sum - ref)) / (1e-7 + std::fabs(ref)));
      }
    }
    EXPECT_LT(worst, 1e-5) << "max_bias " << max_bias;
  }
}

// SOFT_MAX with gpt-oss's attention sinks: the kernel's terms (the max over the row and the head's
// sink, the sum plus expf(sink - max)) against the CPU backend's scalar level; without the sinks
// the rows move far beyond that tolerance.
TEST(CudaMath, SoftMaxSinks) {
  const int64_t nkv = 29, nt = 4, nh = 6;
  Host s = RandomF32({nkv, nt, nh, 1}, 93, 4.f);
  Host mask = RandomBlocks(GgmlType::F16, {nkv, nt, 1, 1}, 94);
  Host sinks = RandomF32({nh, 1, 1, 1}, 95, 6.f);
  const float* sk = reinterpret_cast<const float*>(sinks.bytes.data());
  Host c = Make(GgmlType::F32, {nkv, nt, nh, 1});
  cpu::ComputeContext ctx;
  ctx.max_isa = cpu::IsaLevel::kScalar;
  ASSERT_TRUE(cpu::SoftMax(ctx, s.v, mask.v, c.v, 0.125f, 0.f, sinks.v).ok());
  const Tv ts = ToTv(s.v), tm = ToTv(mask.v);
  double worst = 0, moved = 0;
  for (int64_t r = 0; r < nt * nh; ++r) {
    int64_t i1, i2, i3;
    cuda::RowIndex(r, ts.ne, &i1, &i2, &i3);
    std::vector<float> w(nkv);
    float mx = -INFINITY, sum = 0, plain_sum = 0;
    for (int64_t k = 0; k < nkv; ++k) {
      w[k] = cuda::SoftMaxLogit(cuda::LoadF32(cuda::At(ts, k, i1, i2, i3)), 0.125f, 1.f,
                                cuda::At(tm, k, i1, 0, 0), tm.type);
      mx = std::max(mx, w[k]);
    }
    const float plain_mx = mx;
    mx = std::max(mx, sk[i2]);
    for (int64_t k = 0; k < nkv; ++k) {
      sum += std::exp(w[k] - mx);
      plain_sum += std::exp(w[k] - plain_mx);
    }
    sum += std::exp(sk[i2] - mx);
    for (int64_t k = 0; k < nkv; ++k) {
      const float ref = reinterpret_cast<const float*>(c.bytes.data())[r * nkv + k];
      worst = std::max(worst, double(std::fabs(std::exp(w[k] - mx) / sum - ref)) / (1e-7 + std::fabs(ref)));
      moved = std::max(moved, double(std::fabs(std::exp(w[k] - plain_mx) / plain_sum - ref)));
    }
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(moved, 1e-2);
}

// ---- quantized mat-vec --------------------------------------------------------------------------

// The mat-vec kernel emulated launch by launch, block by block, warp by warp, lane by lane (the warp
// sum as a plain sum), against a double-precision dot of the CPU's dequantized rows with x.
void CheckMulMatVec(GgmlType t, int64_t K, int64_t N, int64_t M, int64_t ne02, int64_t ne12, int64_t ne13,
                    bool permuted_x) {
  Host w = RandomBlocks(t, {K, N, ne02, 1}, 100 + uint32_t(t));
  // x [K, M, ne12, ne13]; permuted: stored as [K, ne12, M, ne13] and viewed with dims 1, 2 swapped.
  Host xs = RandomF32({K, permuted_x ? ne12 : M, permuted_x ? M : ne12, ne13}, 101);
  cpu::TensorView xv = xs.v;
  if (permuted_x) {
    std::swap(xv.ne[1], xv.ne[2]);
    std::swap(xv.nb[1], xv.nb[2]);
  }
  Host d = Make(GgmlType::F32, {N, M, ne12, ne13});
  float* dp = reinterpret_cast<float*>(d.bytes.data());
  for (int64_t i = 0; i < d.v.nelements(); ++i) dp[i] = NAN;  // every element must be written
  const Tv tw = ToTv(w.v), tx = ToTv(xv), td = ToTv(d.v);
  int launches = 0;
  Dispatch(int(t), [&](auto tag) {
    constexpr int T = decltype(tag)::value;
    cuda::ForEachMulMatVecLaunch(
        N, M, ne12 * ne13, [&](int64_t gx, int64_t gy, int64_t gz, int64_t y0, int64_t z0) {
          ++launches;
          ASSERT_LE(gx, cuda::kMaxGridX);
          ASSERT_LE(gy, cuda::kMaxGridYZ);
          ASSERT_LE(gz, cuda::kMaxGridYZ);
          for (int64_t bz = 0; bz < gz; ++bz)
            for (int64_t by = 0; by < gy; ++by)
              for (int64_t bx = 0; bx < gx; ++bx)
                for (int warp = 0; warp < cuda::kMmvWarps; ++warp) {
                  const int64_t n = bx * cuda::kMmvWarps + warp;
                  if (n >= N) continue;
                  const int64_t m0 = (y0 + by) * cuda::kMmvCols, z = z0 + bz;
                  float sum[cuda::kMmvCols] = {};
                  for (int lane = 0; lane < 32; ++lane) {
                    float acc[cuda::kMmvCols];
                    cuda::MulMatVecLane<T>(tw, tx, td, n, m0, z, lane, acc);
                    for (int c = 0; c < cuda::kMmvCols; ++c) sum[c] += acc[c];
                  }
                  const int ncols = int(std::min<int64_t>(cuda::kMmvCols, M - m0));
                  for (int c = 0; c < ncols; ++c)
                    cuda::StoreF32(cuda::At(td, n, m0 + c, z % ne12, z / ne12), sum[c]);
                }
        });
  });
  EXPECT_EQ(launches, int((ne12 * ne13 + cuda::kMaxGridYZ - 1) / cuda::kMaxGridYZ));
  std::vector<float> row(K);
  double worst = 0;
  const int64_t r2 = ne12 / ne02;
  for (int64_t i13 = 0; i13 < ne13; ++i13)
    for (int64_t i12 = 0; i12 < ne12; ++i12)
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_TRUE(
            cpu::DequantizeRow(t, w.bytes.data() + (i12 / r2) * w.v.nb[2] + n * w.v.nb[1], row.data(), K)
                .ok());
        for (int64_t m = 0; m < M; ++m) {
          const uint8_t* xr =
              static_cast<const uint8_t*>(xv.data) + m * xv.nb[1] + i12 * xv.nb[2] + i13 * xv.nb[3];
          double ref = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            float xk;
            std::memcpy(&xk, xr + 4 * k, 4);
            ref += double(row[k]) * xk;
            mag += std::fabs(double(row[k]) * xk);
          }
          const float got = dp[((i13 * ne12 + i12) * M + m) * N + n];
          ASSERT_FALSE(std::isnan(got))
              << GgmlTypeName(t) << " dst[" << n << "," << m << "," << i12 << "," << i13 << "] not written";
          worst = std::max(worst, std::fabs(got - ref) / (1e-6 + 1e-5 * mag));
        }
      }
  EXPECT_LT(worst, 1.0) << GgmlTypeName(t) << " K=" << K << " N=" << N << " M=" << M << " ne02=" << ne02
                        << " ne12=" << ne12 << " ne13=" << ne13 << (permuted_x ? " permuted x" : "");
}

TEST(CudaMath, MulMatVecEmulation) {
  for (GgmlType t : kTypes) {
    if (GetTypeTraits(t).block_size == 1) continue;  // F32/F16/BF16 weights go to cuBLAS
    CheckMulMatVec(t, 1280, 9, 1, 1, 1, 1, false);   // 40 chunks: lanes 0..7 take two
    CheckMulMatVec(t, 512, 6, 8, 2, 6, 1, true);     // GQA broadcast (r2 = 3), permuted src1
    CheckMulMatVec(t, 256, 5, 3, 1, 2, 2, false);    // ne13 > 1
  }
}

// More batch entries than gridDim.z allows: several launches, every dst element written once.
TEST(CudaMath, MulMatVecBatchBeyondGridZ) { CheckMulMatVec(GgmlType::Q8_0, 32, 1, 1, 1, 70001, 1, false); }

// ---- MUL_MAT_ID ------------------------------------------------------------------------------------

// Experts as [K, N, n_expert] of type t, src1 [K, ne11, n_tokens], ids [n_used, n_tokens] (each
// token's experts distinct, expert 0 unused so that the batched path meets an empty run).
struct MoeCase {
  Host as, b, ids;
  int64_t n_used, n_tokens;
};
MoeCase MakeMoe(GgmlType t, int64_t K, int64_t N, int64_t n_as, int64_t n_used, int64_t ne11,
                int64_t n_tokens, uint32_t seed) {
  MoeCase m{RandomBlocks(t, {K, N, n_as, 1}, seed), RandomF32({K, ne11, n_tokens, 1}, seed + 1),
            Make(GgmlType::I32, {n_used, n_tokens, 1, 1}), n_used, n_tokens};
  std::mt19937 rng(seed + 2);
  int32_t* id = reinterpret_cast<int32_t*>(m.ids.bytes.data());
  for (int64_t tok = 0; tok < n_tokens; ++tok) {
    std::vector<int32_t> e(size_t(n_as - 1));
    for (size_t i = 0; i < e.size(); ++i) e[i] = int32_t(i + 1);
    std::shuffle(e.begin(), e.end(), rng);
    for (int64_t s = 0; s < n_used; ++s) id[tok * n_used + s] = e[size_t(s)];
  }
  return m;
}

// MulMatVecIdK emulated block by block, warp by warp, lane by lane (the warp sum as a plain sum):
// against a double dot of the CPU's dequantized expert rows (1e-5 of the sum of |products|) and
// cpu::MulMatId; an id outside the experts gives that column NaN, the others unchanged.
void CheckMulMatVecId(GgmlType t, int64_t K, int64_t N, int64_t ne11) {
  const int64_t n_as = 6, n_used = 4, n_tokens = 3;
  MoeCase m = MakeMoe(t, K, N, n_as, n_used, ne11, n_tokens, 120 + uint32_t(t));
  Host d = Make(GgmlType::F32, {N, n_used, n_tokens, 1}), c = Make(GgmlType::F32, {N, n_used, n_tokens, 1});
  const Tv tas = ToTv(m.as.v), tb = ToTv(m.b.v), tids = ToTv(m.ids.v), td = ToTv(d.v);
  auto run = [&] { ASSERT_TRUE(test::EmulateMulMatVecId(tas, tb, tids, td)); };
  run();
  cpu::ComputeContext ctx;
  ASSERT_TRUE(cpu::MulMatId(ctx, m.as.v, m.b.v, m.ids.v, c.v).ok());
  const float* dp = reinterpret_cast<const float*>(d.bytes.data());
  const float* cp = reinterpret_cast<const float*>(c.bytes.data());
  const int32_t* id = reinterpret_cast<const int32_t*>(m.ids.bytes.data());
  std::vector<float> row(static_cast<size_t>(K));
  double worst = 0, worst_cpu = 0;
  for (int64_t tok = 0; tok < n_tokens; ++tok)
    for (int64_t s = 0; s < n_used; ++s) {
      const int32_t e = id[tok * n_used + s];
      const float* x = reinterpret_cast<const float*>(m.b.bytes.data()) + (tok * ne11 + s % ne11) * K;
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_TRUE(
            cpu::DequantizeRow(t, m.as.bytes.data() + e * m.as.v.nb[2] + n * m.as.v.nb[1], row.data(), K)
                .ok());
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          ref += double(row[size_t(k)]) * x[k];
          mag += std::fabs(double(row[size_t(k)]) * x[k]);
        }
        const size_t at = size_t((tok * n_used + s) * N + n);
        worst = std::max(worst, std::fabs(dp[at] - ref) / (1e-6 + 1e-5 * mag));
        // The CPU quantizes src1 to the weight's vec_dot type (Q8_0 / Q8_K): within that rounding.
        worst_cpu = std::max(worst_cpu, std::fabs(dp[at] - cp[at]) / (1e-6 + 1e-2 * mag));
      }
    }
  EXPECT_LT(worst, 1.0) << GgmlTypeName(t) << " K=" << K << " ne11=" << ne11;
  EXPECT_LT(worst_cpu, 1.0) << GgmlTypeName(t) << " against cpu::MulMatId";
  reinterpret_cast<int32_t*>(m.ids.bytes.data())[5] = int32_t(n_as);  // slot 1 of token 1
  run();
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_TRUE(std::isnan(dp[(1 * n_used + 1) * N + n]));
    EXPECT_FALSE(std::isnan(dp[(1 * n_used + 2) * N + n]));
  }
}

TEST(CudaMath, MulMatVecIdEmulation) {
  for (GgmlType t : kTypes) {
    CheckMulMatVecId(t, 1280, 5, 1);  // gate / up: every slot reads the token's one column
    CheckMulMatVecId(t, 256, 7, 4);   // down: slot s reads column s
  }
}

// The batched path of CudaBackend::MulMatId with the CPU backend standing in for each expert's
// MUL_MAT: the pairs grouped by cpu::GroupRowsByExpert, src1 gathered by MoeGatherElement, each
// expert's run multiplied, the products scattered by MoeScatterElement; against cpu::MulMatId bit
// for bit (the CPU multiplies each expert's gathered columns the same way).
TEST(CudaMath, MulMatIdBatchedEmulation) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::MXFP4}) {
    for (int64_t ne11 : {1, 4}) {
      const int64_t K = 256, N = 48, n_as = 8, n_used = 4, n_tokens = 37;
      MoeCase m = MakeMoe(t, K, N, n_as, n_used, ne11, n_tokens, 130 + uint32_t(t));
      cpu::ComputeContext ctx;
      Host ref = Make(GgmlType::F32, {N, n_used, n_tokens, 1});
      ASSERT_TRUE(cpu::MulMatId(ctx, m.as.v, m.b.v, m.ids.v, ref.v).ok());
      std::vector<std::vector<int64_t>> rows;
      ASSERT_TRUE(cpu::GroupRowsByExpert(m.ids.v, n_as, &rows).ok());
      ASSERT_TRUE(rows[0].empty());  // an expert without a run
      Host d = Make(GgmlType::F32, {N, n_used, n_tokens, 1});
      float* dp = reinterpret_cast<float*>(d.bytes.data());
      for (int64_t i = 0; i < d.v.nelements(); ++i) dp[i] = NAN;  // every element must be written
      ASSERT_TRUE(test::EmulateMulMatIdBatched(ctx, m.as.v, m.b.v, m.ids.v, d.v).ok());
      ExpectSameF32(d.v, ref.v, GgmlTypeName(t));
    }
  }
}

// ---- row-split weights (CUDA<i>_Split) -------------------------------------------------------------

// CudaBackend::MulMatSplit on the CPU backend: the rows of each device (row_split.h), each device's
// MUL_MAT on its slice (the main device straight into dst, a peer into its packed scratch, then the
// 2-D gather into dst's columns [lo, hi)) against the unsplit MUL_MAT, bit for bit.
TEST(CudaMath, RowSplitMulMatEmulation) {
  struct Case {
    GgmlType type;
    std::vector<float> split;
    std::vector<int> cc;
    int main;
  };
  const Case cases[] = {
      {GgmlType::Q4_0, {3, 1, 2}, {900, 800, 900}, 0},  // rounding 128: device 1 gets no rows
      {GgmlType::F16, {1, 1}, {600, 600}, 1},           // rounding 64, main device 1
      {GgmlType::Q6_K, {}, {900, 900, 900, 900}, 2}};   // default split (memory), 4 devices
  for (const Case& cs : cases) {
    const int64_t K = 256, N = 300, ne11 = 3, ne12 = 2, M = ne11 * ne12;
    Host a = RandomBlocks(cs.type, {K, N, 1, 1}, 110);
    Host x = RandomF32({K, ne11, ne12, 1}, 111);
    Host ref = Make(GgmlType::F32, {N, ne11, ne12, 1}), d = Make(GgmlType::F32, {N, ne11, ne12, 1});
    cpu::ComputeContext ctx;
    ASSERT_TRUE(cpu::MulMat(ctx, a.v, x.v, ref.v).ok());
    const int n_dev = int(cs.cc.size());
    const std::vector<uint64_t> memory(size_t(n_dev), uint64_t(80) << 30);
    const std::vector<float> cum = exec::CumulativeSplit(exec::SplitProportions(cs.split, memory), n_dev);
    const int64_t rounding = exec::RowRounding(cum, cs.cc);
    cpu::TensorView x2 = x.v;  // src1 gathered as one [K, M] matrix
    x2.ne[1] = M;
    x2.ne[2] = 1;
    cpu::SetContiguousStrides(x2);
    int64_t covered = 0;
    for (int id = 0; id < n_dev; ++id) {
      int64_t lo, hi;
      exec::RowSplit(N, cum, rounding, id, &lo, &hi);
      if (hi <= lo) continue;
      EXPECT_EQ(lo, covered) << "device " << id;
      covered = hi;
      std::vector<uint8_t> slice(a.bytes.begin() + lo * int64_t(a.v.nb[1]),
                                 a.bytes.begin() + hi * int64_t(a.v.nb[1]));
      std::vector<uint8_t> packed(size_t(hi - lo) * size_t(M) * 4, 0xFF);
      const exec::SplitPartViews v =
          exec::MakeSplitPartViews(a.v, d.v, M, lo, hi, slice.data(), packed.data());
      if (id == cs.main) {
        cpu::TensorView out = v.dst;
        ASSERT_TRUE(cpu::MulMat(ctx, v.w, x2, out).ok()) << "device " << id;
        continue;
      }
      cpu::TensorView out = v.packed;
      ASSERT_TRUE(cpu::MulMat(ctx, v.w, x2, out).ok()) << "device " << id;
      for (size_t r = 0; r < v.gather_rows; ++r)
        std::memcpy(static_cast<uint8_t*>(v.dst.data) + r * v.dst_pitch, packed.data() + r * v.packed_pitch,
                    v.gather_width);
    }
    EXPECT_EQ(covered, N);
    ExpectSameF32(d.v, ref.v, GgmlTypeName(cs.type));
  }
}

// FLASH_ATTN_EXT: the warp-per-row kernel emulated (32 lanes in lockstep, the warp sum as the xor
// butterfly) against a double-precision reference over the same dequantized K and V and against
// cpu::FlashAttnExt (which keeps an F16 V accumulator and converts Q to K's vec_dot type: ~1e-3
// apart). Logit soft-capping, ALiBi, GQA, masked keys, a fully masked row and quantized caches.

// The kernel's warp sum: for o = 16, 8, 4, 2, 1 every lane adds lane (l xor o)'s value. All lanes
// end with the same bits (each step adds the same pair in either order).
float WarpSumXor(std::array<float, 32> v) {
  for (int o = 16; o > 0; o >>= 1) {
    std::array<float, 32> w{};
    for (int l = 0; l < 32; ++l) w[size_t(l)] = v[size_t(l)] + v[size_t(l ^ o)];
    v = w;
  }
  for (int l = 1; l < 32; ++l) EXPECT_EQ(Bits(v[size_t(l)]), Bits(v[0]));
  return v[0];
}

// FlashAttnK over its grid: every query row r, the 32 lanes in lockstep.
void EmulateFlashAttn(const Tv& q, const Tv& k, const Tv& v, const Tv& mask, const Tv& dst,
                      const cuda::FlashAttnArgs& a) {
  const int64_t rows = q.ne[1] * q.ne[2] * q.ne[3];
  for (int64_t r = 0; r < rows; ++r) {
    const cuda::FaRow f = cuda::FlashAttnRow(q, k, v, r);
    const float slope = cuda::AlibiSlope(a.alibi, uint32_t(f.i2));
    std::vector<cuda::FaLane> st(32);
    for (int64_t ic = 0; ic < k.ne[1]; ++ic) {
      float m;
      if (!cuda::FlashAttnMask(mask, f, ic, &m)) continue;
      std::array<float, 32> part{};
      for (int l = 0; l < 32; ++l) part[size_t(l)] = cuda::FlashAttnLaneDot(q, k, f, ic, l);
      const float score = cuda::FlashAttnScore(WarpSumXor(part), a, slope, m);
      for (int l = 0; l < 32; ++l) cuda::FlashAttnLaneAdd(st[size_t(l)], score, v, f, ic, l);
    }
    if (a.sinks)
      for (int l = 0; l < 32; ++l) cuda::FlashAttnLaneSink(st[size_t(l)], a.sinks[f.i2]);
    for (int l = 0; l < 32; ++l) cuda::FlashAttnLaneStore(st[size_t(l)], dst, f, l);
  }
}

struct FaCase {
  int64_t D, n_kv, n_tokens, n_head, n_head_kv;
  GgmlType kt, vt;
  float softcap = 0.f, max_bias = 0.f;
  bool mask = true;
  bool sinks = false;  // ggml_flash_attn_ext_add_sinks: one logit per q head in [-3, 6)
  int64_t Dv = 0;      // V rows (and the output) of Dv values (deepseek2's MLA); 0: D
};

// K / V of `type` [D, n_kv, n_head_kv] from values in [-1, 1) (row quantizers of the CPU backend).
Host RandomCache(GgmlType type, int64_t D, int64_t n_kv, int64_t n_head_kv, uint32_t seed) {
  Host f = RandomF32({D, n_kv, n_head_kv, 1}, seed);
  if (type == GgmlType::F32) return f;
  Host h = Make(type, {D, n_kv, n_head_kv, 1});
  const float* x = reinterpret_cast<const float*>(f.bytes.data());
  for (int64_t r = 0; r < n_kv * n_head_kv; ++r) {
    uint8_t* row = h.bytes.data() + size_t(r) * h.v.nb[1];
    const float* xr = x + r * D;
    if (type == GgmlType::F16 || type == GgmlType::BF16) {
      for (int64_t i = 0; i < D; ++i) {
        const uint16_t u = type == GgmlType::F16 ? cpu::Fp32ToFp16(xr[i]) : cpu::FloatToBf16(xr[i]);
        std::memcpy(row + 2 * i, &u, 2);
      }
    } else if (type == GgmlType::Q8_0) {
      cpu::QuantizeRowQ8_0(xr, reinterpret_cast<cpu::BlockQ8_0*>(row), D);
    } else {
      cpu::QuantizeRowQ4_0(xr, reinterpret_cast<cpu::BlockQ4_0*>(row), D);
    }
  }
  return h;
}

// Runs one case: emulation vs double reference (max abs error returned in *ref_err) and vs the CPU
// backend (*cpu_err); the emulated output in *out.
void RunFlashAttnCase(const FaCase& c, uint32_t seed, double* ref_err, double* cpu_err,
                      std::vector<float>* out) {
  const int64_t D = c.D, N = c.n_tokens, H = c.n_head, Dv = c.Dv != 0 ? c.Dv : c.D;
  Host q = RandomF32({D, N, H, 1}, seed, 2.f);
  Host k = RandomCache(c.kt, D, c.n_kv, c.n_head_kv, seed + 1);
  Host v = RandomCache(c.vt, Dv, c.n_kv, c.n_head_kv, seed + 2);
  Host mask = Make(GgmlType::F16, {c.n_kv, N, 1, 1});
  std::mt19937 rng(seed + 3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t ic = 0; ic < c.n_kv; ++ic) {
      // causal-like: key ic visible to token t when ic <= t + n_kv - N; token 0 sees none when
      // n_kv < N (a fully masked row: NaN, as ggml)
      const bool visible = ic <= t + c.n_kv - N;
      const uint16_t h = visible ? cpu::Fp32ToFp16(c.max_bias > 0.f ? -float(c.n_kv - 1 - ic) : u(rng) * 0.5f)
                                 : uint16_t(0xFC00);
      std::memcpy(mask.bytes.data() + size_t(t) * mask.v.nb[1] + size_t(ic) * 2, &h, 2);
    }
  cpu::TensorView no_mask;
  const Tv tmask = c.mask ? ToTv(mask.v) : Tv{};
  Host g = Make(GgmlType::F32, {Dv, H, N, 1}), cpu_out = Make(GgmlType::F32, {Dv, H, N, 1});
  const float scale = 1.f / std::sqrt(float(D));
  Host sinks = RandomF32({H, 1, 1, 1}, seed + 4, 1.f);
  float* sk = reinterpret_cast<float*>(sinks.bytes.data());
  for (int64_t h = 0; h < H; ++h) sk[h] = 1.5f + 4.5f * sk[h];  // [-3, 6): above and below the maxima
  cuda::FlashAttnArgs args = cuda::MakeFlashAttnArgs(uint32_t(H), scale, c.max_bias, c.softcap);
  if (c.sinks) args.sinks = sk;
  EmulateFlashAttn(ToTv(q.v), ToTv(k.v), ToTv(v.v), tmask, ToTv(g.v), args);
  cpu::ComputeContext ctx;
  ASSERT_TRUE(cpu::FlashAttnExt(ctx, q.v, k.v, v.v, c.mask ? mask.v : no_mask, cpu_out.v, scale, c.max_bias,
                                c.softcap, c.sinks ? sinks.v : no_mask)
                  .ok());
  // Reference in double over the dequantized caches.
  std::vector<float> kd(size_t(D * c.n_kv * c.n_head_kv)), vd(size_t(Dv * c.n_kv * c.n_head_kv));
  ASSERT_TRUE(cpu::DequantizeRow(c.kt, k.bytes.data(), kd.data(), int64_t(kd.size())).ok());
  ASSERT_TRUE(cpu::DequantizeRow(c.vt, v.bytes.data(), vd.data(), int64_t(vd.size())).ok());
  const float* qf = reinterpret_cast<const float*>(q.bytes.data());
  const float* gf = reinterpret_cast<const float*>(g.bytes.data());
  const float* cf = reinterpret_cast<const float*>(cpu_out.bytes.data());
  const cuda::SoftMaxAlibi alibi = cuda::MakeSoftMaxAlibi(uint32_t(H), c.max_bias);
  *ref_err = 0;
  *cpu_err = 0;
  for (int64_t t = 0; t < N; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / (H / c.n_head_kv);
      std::vector<double> w(size_t(c.n_kv), 0.0);
      double mx = -INFINITY;
      bool any = false;
      for (int64_t ic = 0; ic < c.n_kv; ++ic) {
        uint16_t mh = 0;
        if (c.mask) std::memcpy(&mh, mask.bytes.data() + size_t(t) * mask.v.nb[1] + size_t(ic) * 2, 2);
        if (c.mask && mh == 0xFC00) {
          w[size_t(ic)] = -INFINITY;
          continue;
        }
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += double(qf[(h * N + t) * D + d]) * kd[size_t((hk * c.n_kv + ic) * D + d)];
        double x = dot * scale;
        if (c.softcap != 0.f) x = c.softcap * std::tanh(x / c.softcap);
        x += double(cuda::AlibiSlope(alibi, uint32_t(h))) * (c.mask ? double(cpu::Fp16ToFp32(mh)) : 0.0);
        w[size_t(ic)] = x;
        mx = std::max(mx, x);
        any = true;
      }
      for (int64_t d = 0; d < Dv; ++d) {
        const size_t o = size_t((t * H + h) * Dv + d);
        if (!any) {  // every key masked: NaN on both sides, as ggml
          EXPECT_TRUE(std::isnan(gf[o]) && std::isnan(cf[o])) << "row " << t << "," << h;
          continue;
        }
        double num = 0, den = 0;
        for (int64_t ic = 0; ic < c.n_kv; ++ic) {
          if (w[size_t(ic)] == -INFINITY) continue;
          const double e = std::exp(w[size_t(ic)] - mx);
          num += e * vd[size_t((hk * c.n_kv + ic) * Dv + d)];
          den += e;
        }
        if (c.sinks) den += std::exp(double(sk[h]) - mx);
        *ref_err = std::max(*ref_err, std::fabs(gf[o] - num / den));
        *cpu_err = std::max(*cpu_err, double(std::fabs(gf[o] - cf[o])));
      }
    }
  out->assign(gf, gf + Dv * H * N);
}

TEST(CudaMath, FlashAttnEmulation) {
  const std::vector<FaCase> cases = {
      {64, 37, 5, 4, 2, GgmlType::F16, GgmlType::F16},
      {128, 20, 3, 2, 2, GgmlType::F32, GgmlType::F32, 0.f, 0.f, false},
      {256, 33, 4, 4, 1, GgmlType::F16, GgmlType::F16, 50.f},      // gemma2: head 256, attention soft-cap 50
      {96, 40, 2, 6, 3, GgmlType::BF16, GgmlType::F16, 0.f, 8.f},  // ALiBi, both slope branches
      {64, 31, 3, 2, 1, GgmlType::Q8_0, GgmlType::Q8_0, 30.f},
      {32, 19, 4, 2, 2, GgmlType::Q4_0, GgmlType::F16},
      {512, 9, 2, 1, 1, GgmlType::F16, GgmlType::Q4_0},
      {64, 3, 5, 2, 2, GgmlType::F16, GgmlType::F16},  // n_kv < n_tokens: token 0 sees no key (NaN)
      // gpt-oss: attention sinks (head 64, 8 q heads per kv head), F32 and Q8_0 caches
      {64, 37, 5, 8, 1, GgmlType::F16, GgmlType::F16, 0.f, 0.f, true, true},
      {64, 21, 3, 4, 2, GgmlType::F32, GgmlType::F32, 0.f, 0.f, false, true},
      {64, 29, 2, 4, 2, GgmlType::Q8_0, GgmlType::Q8_0, 0.f, 0.f, true, true},
      // deepseek2's MLA: one K head of kv_lora_rank 512 + n_rot 64 (above the 512 output dims a lane
      // set holds: only V's width is bounded), V rows of 512
      {576, 23, 2, 8, 1, GgmlType::F16, GgmlType::F16, 0.f, 0.f, true, false, 512},
      {96, 17, 3, 4, 1, GgmlType::Q8_0, GgmlType::Q8_0, 0.f, 0.f, true, false, 64},
  };
  uint32_t seed = 900;
  for (const FaCase& c : cases) {
    double ref_err = 0, cpu_err = 0;
    std::vector<float> out;
    RunFlashAttnCase(c, seed += 11, &ref_err, &cpu_err, &out);
    EXPECT_LT(ref_err, 1e-6) << "D " << c.D << " " << GgmlTypeName(c.kt) << "/" << GgmlTypeName(c.vt);
    // the CPU: F16 V accumulator (F16 V), Q rounded to F16 (F16 K) or quantized to Q8_0 (Q8_0, Q4_0 K)
    EXPECT_LT(cpu_err, 5e-3) << "D " << c.D << " " << GgmlTypeName(c.kt) << "/" << GgmlTypeName(c.vt);
  }
}

TEST(CudaMath, FlashAttnSoftcapMatters) {
  // Scores up to ~|q||k| / sqrt(D) ~ 3 here: a cap of 2 changes them a lot, so the same problem
  // without it lands far outside the tolerance the capped one meets.
  FaCase capped{64, 24, 3, 2, 2, GgmlType::F16, GgmlType::F16, 2.f};
  FaCase plain = capped;
  plain.softcap = 0.f;
  double e1 = 0, e2 = 0, c1 = 0, c2 = 0;
  std::vector<float> a, b;
  RunFlashAttnCase(capped, 77, &e1, &c1, &a);
  RunFlashAttnCase(plain, 77, &e2, &c2, &b);
  EXPECT_LT(e1, 1e-6);
  EXPECT_LT(e2, 1e-6);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::fabs(a[i] - b[i])));
  EXPECT_GT(diff, 1e-2) << "soft-capping must move the result beyond the tolerances";
}

// ---- Stowage's fused ops on CUDA: MUL_MAT_GLU, ROPE_SET_ROWS, ROPE_CPY ----------------------------

// MulMatVecK's (and MulMatVecGluK's) sums for weight row n, columns m0 .. m0 + 7 of batch entry z:
// the 32 lanes' MulMatVecLane partials, each column summed by the xor butterfly (WarpSumXor).
template <int T>
std::array<float, cuda::kMmvCols> WarpDots(const Tv& w, const Tv& x, const Tv& d, int64_t n, int64_t m0,
                                           int64_t z) {
  std::array<std::array<float, 32>, cuda::kMmvCols> lanes{};
  for (int lane = 0; lane < 32; ++lane) {
    float acc[cuda::kMmvCols];
    cuda::MulMatVecLane<T>(w, x, d, n, m0, z, lane, acc);
    for (int c = 0; c < cuda::kMmvCols; ++c) lanes[size_t(c)][size_t(lane)] = acc[c];
  }
  std::array<float, cuda::kMmvCols> out{};
  for (int c = 0; c < cuda::kMmvCols; ++c) out[size_t(c)] = WarpSumXor(lanes[size_t(c)]);
  return out;
}

// Every warp of a mat-vec over weights [K, N] and x [K, M, ne12, ne13] into d [N, M, ne12, ne13]:
// f(weight row n, first column m0 of its block, batch entry z).
template <typename F>
void ForEachMatVecWarp(const Tv& gate, const Tv& x, const Tv& d, F&& f) {
  for (int64_t z = 0; z < d.ne[2] * d.ne[3]; ++z)
    for (int64_t m0 = 0; m0 < x.ne[1]; m0 += cuda::kMmvCols)
      for (int64_t n = 0; n < gate.ne[1]; ++n) f(n, m0, z);
}

// MUL_MAT_GLU's mat-vec (MulMatVecGluK: both dots per warp, lane 0 stores their GluValue) against
// the unfused CUDA sequence it replaces (MulMatVecK into the gate and up products, then GluK), both
// emulated: bit for bit, every quantized weight type, SWIGLU and GEGLU, one to eight columns, a
// batch of two broadcast over 2-D weights. The sequence path of larger batches (gate's product in
// dst, up's in scratch, the GLU in place over dst) against the CPU's SWIGLU / GEGLU of the same
// products: bit for bit at the CPU's scalar level. Against the CPU backend's unfused MUL_MAT,
// MUL_MAT, GLU (Q8 activations on the CPU) within the activation quantization's bound; swapping gate
// and up moves the result far beyond it.
TEST(CudaMath, MulMatGluEmulation) {
  const int64_t K = 512, N = 9;
  struct Shape {
    int64_t M, ne12;
  };
  double worst = 0;
  for (GgmlType t : kTypes) {
    if (GetTypeTraits(t).block_size == 1) continue;  // F32/F16/BF16 weights go to cuBLAS
    for (cuda::Glu op : {cuda::Glu::kSwiglu, cuda::Glu::kGeglu}) {
      double swapped_worst = 0;  // over the shapes of this type and GLU
      for (Shape sh : {Shape{1, 1}, Shape{8, 1}, Shape{5, 2}}) {
        SCOPED_TRACE(std::string(GgmlTypeName(t)) + (op == cuda::Glu::kSwiglu ? " SWIGLU" : " GEGLU") +
                     " M=" + std::to_string(sh.M) + " ne12=" + std::to_string(sh.ne12));
        Host gate = RandomBlocks(t, {K, N, 1, 1}, 300 + uint32_t(t)), up = RandomBlocks(t, {K, N, 1, 1}, 400);
        Host x = RandomF32({K, sh.M, sh.ne12, 1}, 500);
        const std::array<int64_t, 4> out = {N, sh.M, sh.ne12, 1};
        Host fused = Make(GgmlType::F32, out), swapped = Make(GgmlType::F32, out),
             g = Make(GgmlType::F32, out), u = Make(GgmlType::F32, out), seq = Make(GgmlType::F32, out);
        const Tv tg = ToTv(gate.v), tu = ToTv(up.v), tx = ToTv(x.v), tf = ToTv(fused.v), ts = ToTv(swapped.v),
                 tgp = ToTv(g.v), tup = ToTv(u.v), tseq = ToTv(seq.v);
        Dispatch(int(t), [&](auto tag) {
          constexpr int T = decltype(tag)::value;
          ForEachMatVecWarp(tg, tx, tf, [&](int64_t n, int64_t m0, int64_t z) {
            const auto gs = WarpDots<T>(tg, tx, tf, n, m0, z), us = WarpDots<T>(tu, tx, tf, n, m0, z);
            for (int64_t c = 0; c < std::min<int64_t>(cuda::kMmvCols, sh.M - m0); ++c) {
              uint8_t* at = cuda::At(tf, n, m0 + c, z % sh.ne12, z / sh.ne12);
              cuda::StoreF32(at, cuda::GluValue(op, gs[size_t(c)], us[size_t(c)]));
              cuda::StoreF32(cuda::At(ts, n, m0 + c, z % sh.ne12, z / sh.ne12),
                             cuda::GluValue(op, us[size_t(c)], gs[size_t(c)]));
              cuda::StoreF32(cuda::At(tgp, n, m0 + c, z % sh.ne12, z / sh.ne12), gs[size_t(c)]);
              cuda::StoreF32(cuda::At(tup, n, m0 + c, z % sh.ne12, z / sh.ne12), us[size_t(c)]);
            }
          });
        });
        test::EmulateElements(tseq, [&](int64_t l) { cuda::GluElement(op, tgp, tup, tseq, l); });
        ExpectSameF32(fused.v, seq.v, "MUL_MAT_GLU mat-vec vs MUL_MAT, MUL_MAT, GLU");
        // The sequence path's GLU in place over dst (gate's product) against the CPU's GLU.
        Host in_place = g, cpu_glu = Make(GgmlType::F32, out);
        in_place.v.data = in_place.bytes.data();
        const Tv tip = ToTv(in_place.v);
        test::EmulateElements(tip, [&](int64_t l) { cuda::GluElement(op, tip, tup, tip, l); });
        cpu::ComputeContext scalar;
        scalar.max_isa = cpu::IsaLevel::kScalar;
        ASSERT_TRUE((op == cuda::Glu::kSwiglu ? cpu::SwiGlu(scalar, g.v, u.v, cpu_glu.v)
                                              : cpu::GeGlu(scalar, g.v, u.v, cpu_glu.v))
                        .ok());
        ExpectSameF32(in_place.v, cpu_glu.v, "the GLU in place over dst vs the CPU's GLU");
        // The CPU backend's unfused sequence.
        cpu::ComputeContext ctx;
        Host cg = Make(GgmlType::F32, out), cu = Make(GgmlType::F32, out), cd = Make(GgmlType::F32, out);
        ASSERT_TRUE(cpu::MulMat(ctx, gate.v, x.v, cg.v).ok());
        ASSERT_TRUE(cpu::MulMat(ctx, up.v, x.v, cu.v).ok());
        ASSERT_TRUE((op == cuda::Glu::kSwiglu ? cpu::SwiGlu(ctx, cg.v, cu.v, cd.v)
                                              : cpu::GeGlu(ctx, cg.v, cu.v, cd.v))
                        .ok());
        // Bound: the CPU's Q8 activations (x in [-1, 1): each element off by at most 1/254 of its
        // block's largest, <= 1/254) move a dot by at most sum|w| / 254, float sums by ~1e-5 sum|w|;
        // the GLU's slope in g is at most 1.1 |u| (SILU and GELU), in u |act(g)|; GELU rounds its
        // input and output through fp16 (2^-11 relative each).
        std::vector<float> gr(static_cast<size_t>(K)), ur(static_cast<size_t>(K));
        const float* fs = reinterpret_cast<const float*>(fused.bytes.data());
        const float* ss = reinterpret_cast<const float*>(swapped.bytes.data());
        const float* cs = reinterpret_cast<const float*>(cd.bytes.data());
        const float* gp = reinterpret_cast<const float*>(g.bytes.data());
        const float* up_p = reinterpret_cast<const float*>(u.bytes.data());
        double case_worst = 0;
        for (int64_t n = 0; n < N; ++n) {
          ASSERT_TRUE(cpu::DequantizeRow(t, gate.bytes.data() + n * gate.v.nb[1], gr.data(), K).ok());
          ASSERT_TRUE(cpu::DequantizeRow(t, up.bytes.data() + n * up.v.nb[1], ur.data(), K).ok());
          double sg = 0, su = 0;
          for (int64_t k = 0; k < K; ++k) {
            sg += std::fabs(gr[size_t(k)]);
            su += std::fabs(ur[size_t(k)]);
          }
          const double eg = sg / 254 + 1e-5 * sg, eu = su / 254 + 1e-5 * su;
          for (int64_t m = 0; m < sh.M * sh.ne12; ++m) {
            const size_t i = size_t(m * N + n);
            const double gv = std::fabs(gp[i]), uv = std::fabs(up_p[i]);
            const double act = op == cuda::Glu::kSwiglu ? std::fabs(cuda::Silu(gp[i])) : gv;
            double bound = 1.1 * (uv + eu) * eg + (act + 1.1 * eg) * eu + 1e-5 * std::fabs(cs[i]) + 1e-6;
            if (op == cuda::Glu::kGeglu) bound += (uv + eu) * (gv + eg) * 2.2 / 1024;
            case_worst = std::max(case_worst, std::fabs(double(fs[i]) - cs[i]) / bound);
            swapped_worst = std::max(swapped_worst, std::fabs(double(ss[i]) - cs[i]) / bound);
          }
        }
        EXPECT_LT(case_worst, 1.0) << "MUL_MAT_GLU mat-vec vs the CPU's MUL_MAT, MUL_MAT, GLU";
        worst = std::max(worst, case_worst);
      }
      EXPECT_GT(swapped_worst, 1.0) << GgmlTypeName(t) << (op == cuda::Glu::kSwiglu ? " SWIGLU" : " GEGLU")
                                    << ": gate and up swapped must move the result beyond the bound";
    }
  }
  std::printf("MUL_MAT_GLU mat-vec vs the CPU: worst error %.3f of the bound\n", worst);
}

// ROPE_SET_ROWS and ROPE_CPY (RopeThreadTo with RopePutRows / RopePutCopy, one thread per pair as
// RopeK) against the CPU backend's unfused sequences, cpu::Rope into an F32 tensor then
// cpu::SetRows of its [head_dim * n_head, n_tokens] reshape / cpu::Cpy into the cache view: bit for
// bit over the whole cache (the rows it must not touch included), F32, F16 and BF16 caches, I32 and
// I64 indices, normal and NEOX, with and without freq factors and YaRN, n_dims < head_dim. An index
// outside the cache writes nothing (the CPU refuses it).
TEST(CudaMath, RopeKvStoreEmulation) {
  const int64_t ne0 = RopeInputs::ne0, nh = RopeInputs::nh, nt = RopeInputs::nt, n_rows = 9;
  const RopeInputs in = MakeRopeInputs(600, 3.f);
  const Host &x = in.x, &pos = in.pos, &ff = in.ff;
  const int64_t rows_at[nt] = {3, 0, 7, 8, 1};
  for (int mode : {0, 2}) {
    for (bool yarn : {false, true}) {
      for (bool freq_factors : {false, true}) {
        const cpu::RopeParams rp = TestRopeParams(mode, yarn);
        cpu::TensorView ffv = ff.v;
        if (!freq_factors) ffv.data = nullptr;
        const float* ffp = freq_factors ? reinterpret_cast<const float*>(ff.bytes.data()) : nullptr;
        const int32_t* posp = reinterpret_cast<const int32_t*>(pos.bytes.data());
        const cuda::RopeArgs args = cuda::ToRopeArgs(rp);
        const Tv tx = ToTv(x.v);
        cpu::ComputeContext ctx;
        Host rotated = Make(GgmlType::F32, {ne0, nh, nt, 1});
        ASSERT_TRUE(cpu::Rope(ctx, x.v, pos.v, ffv, rotated.v, rp).ok());
        const std::string what =
            "mode " + std::to_string(mode) + (yarn ? " yarn" : "") + (freq_factors ? " ff" : "");
        for (GgmlType ct : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
          // ROPE_SET_ROWS: the cache [ne0 * nh, n_rows], row rows_at[token].
          for (GgmlType it : {GgmlType::I32, GgmlType::I64}) {
            Host idx = Make(it, {nt, 1, 1, 1});
            for (int64_t k = 0; k < nt; ++k) {
              if (it == GgmlType::I32) {
                const int32_t v = int32_t(rows_at[k]);
                std::memcpy(idx.bytes.data() + 4 * k, &v, 4);
              } else {
                std::memcpy(idx.bytes.data() + 8 * k, &rows_at[k], 8);
              }
            }
            Host base = RandomBlocks(ct, {ne0 * nh, n_rows, 1, 1}, 602);
            Host gpu = base, cpu_cache = base;
            gpu.v.data = gpu.bytes.data();
            cpu_cache.v.data = cpu_cache.bytes.data();
            cpu::TensorView rows = rotated.v;
            rows.ne[0] = ne0 * nh;
            rows.ne[1] = nt;
            rows.ne[2] = 1;
            cpu::SetContiguousStrides(rows);
            ASSERT_TRUE(cpu::SetRows(ctx, rows, idx.v, cpu_cache.v).ok());
            cuda::RopePutRows put;
            put.idx = ToTv(idx.v);
            put.dst = ToTv(gpu.v);
            put.idx_i64 = it == GgmlType::I64;
            put.head_dim = ne0;
            for (int64_t l = 0; l < cuda::RopeItems(tx); ++l) cuda::RopeThreadTo(tx, posp, ffp, args, l, put);
            EXPECT_EQ(gpu.bytes, cpu_cache.bytes)
                << "ROPE_SET_ROWS " << what << " into " << GgmlTypeName(ct) << " at " << GgmlTypeName(it);
            if (it == GgmlType::I32 && ct == GgmlType::F16) {  // token 2's row outside the cache
              const int32_t bad = int32_t(n_rows);
              std::memcpy(idx.bytes.data() + 8, &bad, 4);
              Host skip = base;
              skip.v.data = skip.bytes.data();
              put.dst = ToTv(skip.v);
              for (int64_t l = 0; l < cuda::RopeItems(tx); ++l)
                cuda::RopeThreadTo(tx, posp, ffp, args, l, put);
              const size_t row_bytes = size_t(skip.v.nb[1]);
              for (int64_t r = 0; r < n_rows; ++r) {
                const bool kept = r == 7 || (r != 3 && r != 0 && r != 8 && r != 1);
                const bool same = std::memcmp(skip.bytes.data() + r * row_bytes,
                                              base.bytes.data() + r * row_bytes, row_bytes) == 0;
                EXPECT_EQ(same, kept) << "row " << r;
              }
            }
          }
          // ROPE_CPY: Feb 2025's K store, a 1-D view of the cache at token offset 2, and a strided
          // view of the same element count ([nt, ne0 * nh] with rows n_ctx apart, the transposed
          // layout) to check the destination's unravelling.
          for (bool strided : {false, true}) {
            const int64_t n_ctx = 12;
            Host cache = RandomBlocks(ct, {ne0 * nh * n_ctx, 1, 1, 1}, 603);
            const size_t ts = GetTypeTraits(ct).type_size;
            cpu::TensorView view = cache.v;
            if (strided) {
              view.ne[0] = nt;
              view.ne[1] = ne0 * nh;
              view.nb[0] = ts * size_t(n_ctx);
              view.nb[1] = ts;
              view.nb[2] = view.nb[3] = ts * size_t(n_ctx * ne0 * nh);
            } else {
              view.ne[0] = ne0 * nh * nt;
              view.data = cache.bytes.data() + 2 * ne0 * nh * ts;
            }
            Host gpu = cache, cpu_cache = cache;
            cpu::TensorView gv = view, cv = view;
            gv.data = gpu.bytes.data() + (static_cast<uint8_t*>(view.data) - cache.bytes.data());
            cv.data = cpu_cache.bytes.data() + (static_cast<uint8_t*>(view.data) - cache.bytes.data());
            ASSERT_TRUE(cpu::Cpy(ctx, rotated.v, cv).ok());
            cuda::RopePutCopy put;
            put.dst = ToTv(gv);
            for (int i = 0; i < 4; ++i) put.ne[i] = x.v.ne[i];
            for (int64_t l = 0; l < cuda::RopeItems(tx); ++l) cuda::RopeThreadTo(tx, posp, ffp, args, l, put);
            EXPECT_EQ(gpu.bytes, cpu_cache.bytes)
                << "ROPE_CPY " << what << " into " << GgmlTypeName(ct) << (strided ? " (strided view)" : "");
          }
        }
        if (HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace stowage
